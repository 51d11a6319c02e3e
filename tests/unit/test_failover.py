"""The blast-radius table and the region order a plan gets."""

from __future__ import annotations

import pytest

from aca_gpu.config import Settings
from aca_gpu.errors import (
    AcaGpuError,
    AuthError,
    BadInput,
    CloudError,
    GpuCheckFailed,
    InfraError,
    PreflightRefused,
    QuotaError,
    WaitTimedOut,
)
from aca_gpu.workflow.engine import failover
from aca_gpu.workflow.engine.plan import UpRequest, make_up_plan


@pytest.mark.parametrize(
    ("error", "blast"),
    [
        (AuthError("token expired", code="ExpiredAuthenticationToken"), failover.ABORT),
        (CloudError("subscription disabled", code="SubscriptionDisabled"), failover.ABORT),
        (BadInput("invalid --gpu"), failover.ABORT),
        (PreflightRefused("not registered", code="MissingSubscriptionRegistration"), failover.ABORT),
        (GpuCheckFailed("incompatible"), failover.ABORT),
        (PreflightRefused("x does not offer", code="ProfileNotOffered"), failover.NEXT_REGION),
        (BadInput("type not supported", code="WorkloadProfileTypeNotSupported"), failover.NEXT_REGION),
        (QuotaError("not enough GPU quota", code="InsufficientGpuQuota"), failover.NEXT_REGION),
        (
            InfraError("create app: The gateway did not receive a response (WorkLoad Profile Full)"),
            "next-region",
        ),
        (
            WaitTimedOut(
                "timed out after 900s waiting for a running replica of app: no replica was scheduled"
            ),
            failover.NEXT_REGION,
        ),
        (WaitTimedOut("stopped waiting for a running replica of app: cancelled"), failover.ABORT),
        (InfraError("create app: HTTP 503", code="503"), failover.RETRY_HERE),
        (CloudError("throttled", code="429"), failover.RETRY_HERE),
        (AcaGpuError("unexpected failure: KeyError"), failover.ABORT),
    ],
)
def test_blast_radius(error: AcaGpuError, blast: str) -> None:
    assert failover.classify(error)[0] == blast


def _plan(**kw: str) -> tuple[str, ...]:
    settings = Settings(location=kw.pop("settings_location", "eastus"))
    return make_up_plan(settings, UpRequest(run_id="r1", **kw), owner="me").region_order  # type: ignore[arg-type]


def test_region_orders() -> None:
    assert _plan(gpu="t4") == ("eastus",)
    assert _plan(gpu="a100", location="eastus") == ("eastus",)  # -l pins one region
    # canadacentral and uksouth belong in the A100 order; swedencentral placed 1 A100 job in 16 in
    # Aug 2026 (microsoft/azure-container-apps#1809), so it comes last
    assert _plan(gpu="a100") == ("eastus", "westus3", "canadacentral")
    assert _plan(gpu="a100", settings_location="westus3") == ("westus3", "canadacentral", "uksouth")
    assert failover.A100_ORDER[-1] == "swedencentral"
    assert _plan(gpu="t4", regions="West US 3, eastus") == ("westus3", "eastus")


def test_a_gpu_list_falls_back_to_the_next_gpu_across_its_own_regions() -> None:
    """`--gpu a100,t4`: A100 in its region order, else T4 (in the requested region)."""
    plan = make_up_plan(Settings(location="eastus"), UpRequest(run_id="r1", gpu="a100,t4"), owner="me")
    assert [(region, gpu) for region, gpu in plan.places] == [
        ("eastus", "a100"),
        ("westus3", "a100"),
        ("canadacentral", "a100"),
        ("eastus", "t4"),
    ]
    fallback = plan.for_attempt("eastus", 4, gpu="t4")
    assert fallback.pairs[0].profile.type == "Consumption-GPU-NC8as-T4" and fallback.gpu_label == "t4"
    assert plan.gpu_label == "a100" and plan.tags["acagpu:gpu"] == "a100"  # each group: its own GPU
    assert fallback.tags["acagpu:gpu"] == "t4"


@pytest.mark.parametrize(
    ("kw", "text"),
    [
        ({"gpu": "a100,a100"}, "twice"),
        ({"gpu": "a100,h999"}, "h999"),
        ({"regions": "eastus,,westus3"}, "an empty region"),
        ({"regions": "eastus,eastus"}, "twice"),
        ({"regions": "east_us"}, "invalid location"),
        ({"regions": "eastus", "location": "westus3"}, "not both"),
        ({"regions": ",".join(f"region{i}" for i in range(9))}, "at most 8"),
    ],
)
def test_bad_regions_are_bad_input(kw: dict[str, str], text: str) -> None:
    with pytest.raises(BadInput, match=text):
        _plan(**{"gpu": "t4", **kw})


def test_workload_profile_names_stay_short() -> None:
    from aca_gpu import naming
    from aca_gpu.workflow.engine.plan import _profile_name

    for alias in ("t4", "a100", "consumption-gpu-a100", "dedicated-nc96-a100", "Consumption-GPU-NC8as-T4"):
        name = _profile_name(alias.lower())
        assert len(name) <= naming.WORKLOAD_PROFILE_NAME_MAX and name.startswith("gpu-")
    with pytest.raises(BadInput, match="WorkloadProfileInvalidNameTooLong"):
        naming.validate_workload_profile_name("Consumption-GPU-NC8as-T4")
    with pytest.raises(BadInput, match="starting with a letter"):
        naming.validate_workload_profile_name("4gpu")
