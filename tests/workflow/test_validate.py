from __future__ import annotations

from pathlib import Path

import pytest

from aca_gpu.config import Settings
from aca_gpu.errors import BadInput
from aca_gpu.workflow.engine.probe import fatal_text
from aca_gpu.workflow.preflight import drivers
from aca_gpu.workflow.tester import validate as v


def _plan(**kw: object) -> v.ValidatePlan:
    request = v.ValidateRequest(
        images=kw.pop("images", ("nvidia/cuda:12.4.1-runtime-ubuntu22.04",)),  # type: ignore[arg-type]
        gpus=kw.pop("gpus", ("t4",)),  # type: ignore[arg-type]
        run_id=kw.pop("run_id", "val123"),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    return v.make_plan(Settings(), request, owner="me")


def test_plan_pairs_share_one_environment_with_a_profile_per_gpu() -> None:
    plan = _plan(
        images=("nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia/cuda:13.0.0-base-ubuntu24.04"),
        gpus=("t4", "A100"),
    )
    assert [(p.image.split(":")[1][:6], p.gpu) for p in plan.pairs] == [
        ("12.4.1", "t4"),
        ("12.4.1", "a100"),
        ("13.0.0", "t4"),
        ("13.0.0", "a100"),
    ]
    assert plan.gpu_profiles == [
        ("gpu-t4", "Consumption-GPU-NC8as-T4"),
        ("gpu-a100", "Consumption-GPU-NC24-A100"),
    ]
    assert len({p.explorer for p in plan.pairs}) == 4
    assert all(len(p.explorer) <= 32 and len(p.tester) <= 32 for p in plan.pairs)


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"images": ()}, "at least one"),
        ({"images": ("bad image",)}, "image"),
        ({"gpus": ("v100",)}, "v100"),
        ({"run_id": "Bad_ID"}, "run id"),
        ({"ttl": "0h"}, "TTL"),
        ({"driver": "banana"}, "driver"),
        (
            {
                "images": tuple(f"nvidia/cuda:12.{i}.0-base-ubuntu22.04" for i in range(9)),
                "gpus": ("t4", "a100"),
            },
            "at most",
        ),
    ],
)
def test_bad_input(kw: dict[str, object], fragment: str) -> None:
    with pytest.raises(BadInput, match=fragment):
        _plan(**kw)


def test_predict_uses_last_seen_driver_then_bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACAGPU_CACHE_DIR", str(tmp_path))
    plan = _plan(images=("nvidia/cuda:13.1.0-runtime-ubuntu24.04",))
    pair = plan.pairs[0]
    doc = v.predict(pair, "eastus", None, None)
    assert doc["driver_version"] == drivers.BUNDLED_DRIVER == "580.159.04"  # R580 runs CUDA <= 13.0
    assert doc["verdict"] in ("minor-compat", "incompatible")
    assert (
        doc["driver_source"].startswith("bundled: GpuDriverInfo event")
        and "2026-09-18" in doc["driver_source"]
    )
    twelve = _plan(images=("nvidia/cuda:12.8.0-runtime-ubuntu24.04",)).pairs[0]
    assert v.predict(twelve, "eastus", None, None)["verdict"] == "ok"  # 535.54.03 (the old default) said no
    drivers.remember_driver(pair.profile.type, "westus", "590.48.01", how="GpuDriverInfo event")
    doc = v.predict(pair, "eastus", None, None)
    assert doc["verdict"] == "ok" and "another region" in doc["driver_source"]
    drivers.remember_driver(pair.profile.type, "eastus", "535.54.03")
    assert v.predict(pair, "eastus", None, None)["driver_version"] == "535.54.03"
    assert v.predict(pair, "eastus", "580.65.06", None)["driver_source"] == "--driver"


def test_predict_falls_back_to_registry_cuda_env() -> None:
    plan = _plan(images=("myacr.azurecr.io/team/trainer:v3",))
    unknown = v.predict(plan.pairs[0], "eastus", "550.144.03", None)
    assert unknown["verdict"] == "unknown"
    known = v.predict(plan.pairs[0], "eastus", "550.144.03", {"cuda_version": "12.4.1"})
    assert known["verdict"] == "ok"


def test_fatal_prefers_the_runtime_message() -> None:
    texts = ["CrashLoopBackOff", "stderr: legacy\nnvidia-container-cli: requirement error: cuda>=13.0"]
    assert fatal_text(texts) == "nvidia-container-cli: requirement error: cuda>=13.0"
    assert fatal_text(["CrashLoopBackOff"]) == "CrashLoopBackOff"
    assert fatal_text(["AssigningReplica"]) is None


def test_driver_cache_survives_garbage(tmp_path: Path) -> None:
    path = tmp_path / "drivers.json"
    path.write_text("not json", encoding="utf-8")
    assert drivers.known_driver("NC24-A100", "eastus", path)[0] == drivers.BUNDLED_DRIVER
    drivers.remember_driver("NC24-A100", "eastus", "580.65.06", path)
    assert drivers.known_driver("NC24-A100", "EastUS", path)[0] == "580.65.06"


def test_validate_tags_every_gpu_of_the_run() -> None:
    plan = v.make_plan(
        Settings(),
        v.ValidateRequest(images=("nvidia/cuda:12.2.2-base-ubuntu22.04",), gpus=("t4", "a100")),
        owner="me",
    )
    assert plan.tags["acagpu:gpu"] == "t4,a100"
