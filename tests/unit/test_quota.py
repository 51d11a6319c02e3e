"""GPU usage names are UNCONFIRMED: the known patterns match, the wrong GPU or plan never does."""

from __future__ import annotations

import pytest

from aca_gpu.gpu.profiles import resolve_profile
from aca_gpu.models import UsageInfo
from aca_gpu.workflow.preflight import quota

T4 = resolve_profile("t4")
A100 = resolve_profile("a100")
NC96 = resolve_profile("nc96-a100")


@pytest.mark.parametrize(
    ("name", "display", "profile", "expected"),
    [
        ("ManagedEnvironmentConsumptionNCA100Gpus", None, A100, True),
        ("ManagedEnvironmentConsumptionT4Gpus", "Managed Environment Consumption T4 Gpus", T4, True),
        ("SubscriptionConsumptionNCA100GPUs", "Subscription consumption NCA 100 GPUs", A100, True),
        ("x", "Subscription consumption T 4 GPUs", T4, True),
        ("SubscriptionNCA100GPUs", "Subscription NCA 100 GPUs", NC96, True),
        ("SubscriptionNCA100GPUs", "Subscription NCA 100 GPUs", A100, False),  # dedicated, not serverless
        ("ManagedEnvironmentConsumptionNCA100Gpus", None, T4, False),
        ("ManagedEnvironmentConsumptionCores", None, T4, False),
        ("ManagedEnvironmentCount", None, A100, False),
    ],
)
def test_usage_names(name: str, display: str | None, profile: object, expected: bool) -> None:
    usage = UsageInfo(name, 0, 4, "Count", display)
    assert quota.matches(usage, profile) is expected  # type: ignore[arg-type]


def test_needs_one_replica_per_pair_and_one_node_for_dedicated() -> None:
    needed = quota.needs([A100, A100, T4, NC96, NC96])
    assert needed[A100.type][1] == 2
    assert needed[T4.type][1] == 1
    assert needed[NC96.type][1] == 4


def test_tightest_usage_wins_and_unknown_names_go_on() -> None:
    usages = [
        UsageInfo("ManagedEnvironmentConsumptionNCA100Gpus", 1, 4),
        UsageInfo("SubscriptionConsumptionNCA100GPUs", 2, 2),
        UsageInfo("ManagedEnvironmentCount", 1, 40),
    ]
    found = quota.check("eastus", usages, A100, 1)
    assert (found.usage, found.used, found.limit, found.ok) == (
        "SubscriptionConsumptionNCA100GPUs",
        2,
        2,
        False,
    )
    assert "2 of 2 used" in found.error().message and found.error().exit_code == 3
    unknown = quota.check("eastus", usages[2:], A100, 1)
    assert unknown.ok is None and "no GPU usage matched" in unknown.summary()
    failed = quota.check("eastus", [], T4, 1, read_error="HTTP 403")
    assert failed.ok is None and "HTTP 403" in failed.summary()
