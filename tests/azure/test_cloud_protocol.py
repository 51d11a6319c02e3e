"""AzureCloud implements every member of the Cloud protocol with a compatible signature."""

from __future__ import annotations

import inspect

import pytest

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.models import Cloud

MEMBERS = sorted(
    name for name, value in vars(Cloud).items() if not name.startswith("_") and inspect.isfunction(value)
)


def test_protocol_has_members() -> None:
    assert {"exec", "start_job", "delete_resource_group", "job_logs"} <= set(MEMBERS)
    assert "subscription_id" in Cloud.__annotations__


@pytest.mark.parametrize("name", MEMBERS)
def test_member_signature_is_compatible(name: str) -> None:
    assert hasattr(AzureCloud, name), f"AzureCloud lacks {name}"
    want = inspect.signature(getattr(Cloud, name))
    have = inspect.signature(getattr(AzureCloud, name))
    for param in want.parameters.values():
        assert param.name in have.parameters, f"{name}: missing parameter {param.name}"
        got = have.parameters[param.name]
        assert got.kind == param.kind, f"{name}({param.name}): {got.kind} != {param.kind}"
        assert got.default == param.default, f"{name}({param.name}): default {got.default!r}"
        assert str(got.annotation) == str(param.annotation), f"{name}({param.name}) annotation"
    extra = [p for p in have.parameters.values() if p.name not in want.parameters]
    assert all(p.default is not inspect.Parameter.empty for p in extra), f"{name}: extra required {extra}"
    assert str(have.return_annotation) == str(want.return_annotation), f"{name}: return type"
