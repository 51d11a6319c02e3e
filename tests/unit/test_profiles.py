"""The GPU profile catalog and datasheet lookups: aliases, shapes the tester depends on, no guessing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.errors import BadInput
from aca_gpu.gpu.profiles import gpu_specs, lookup_gpu, profile_catalog, resolve_profile, valid_aliases
from aca_gpu.resources import data_path

SPEC_KEYS = {
    "aliases",
    "fp32_tflops",
    "tf32_tflops",
    "fp16_tflops",
    "bf16_tflops",
    "mem_bw_gbps",
    "memory_gib",
    "source",
}


@pytest.mark.parametrize(
    ("alias", "type_"),
    [
        ("t4", "Consumption-GPU-NC8as-T4"),
        ("T4", "Consumption-GPU-NC8as-T4"),
        ("a100", "Consumption-GPU-NC24-A100"),
        ("nc24-a100", "NC24-A100"),
        ("NC48-A100", "NC48-A100"),
        ("nc96-a100", "NC96-A100"),
        ("consumption-gpu-nc8as-t4", "Consumption-GPU-NC8as-T4"),
        ("Consumption-GPU-NC24-A100", "Consumption-GPU-NC24-A100"),
    ],
)
def test_resolve_profile(alias: str, type_: str) -> None:
    assert resolve_profile(alias).type == type_


def test_unknown_alias_lists_valid_ones() -> None:
    with pytest.raises(BadInput) as err:
        resolve_profile("h100")
    for alias in ("t4", "a100", "nc24-a100", "nc48-a100", "nc96-a100"):
        assert alias in err.value.message


def test_no_alias_or_type_names_two_profiles() -> None:
    owners: dict[str, set[str]] = {}
    for profile in profile_catalog():
        for name in (profile.type, *profile.aliases):
            owners.setdefault(name.lower(), set()).add(profile.type)
    assert {name: types for name, types in owners.items() if len(types) > 1} == {}
    assert len(valid_aliases()) >= 5


def test_catalog_facts() -> None:
    t4, a100 = resolve_profile("t4"), resolve_profile("a100")
    assert (t4.gpu, t4.vcpu, t4.memory_gib, t4.serverless, t4.container_memory) == (
        "Tesla T4",
        8,
        56,
        True,
        "56Gi",
    )
    assert (a100.gpu, a100.vcpu, a100.memory_gib, a100.serverless) == ("NVIDIA A100 80GB PCIe", 24, 220, True)
    assert not t4.sends_counts and not a100.sends_counts
    dedicated = [resolve_profile(a) for a in ("nc24-a100", "nc48-a100", "nc96-a100")]
    assert [(p.gpu_count, p.vcpu, p.memory_gib) for p in dedicated] == [
        (1, 24, 220),
        (2, 48, 440),
        (4, 96, 880),
    ]
    assert all(p.sends_counts and not p.serverless for p in dedicated)
    assert len(t4.regions) == 16 and len(a100.regions) == 9  # A100: 9 regions (2026-06)
    assert set(a100.regions) - {"canadacentral", "uksouth"} <= set(t4.regions)
    assert t4.offered_in("West Europe") and not a100.offered_in("westeurope")


@pytest.mark.parametrize("profile", profile_catalog(), ids=lambda p: p.type)
def test_every_profile_fits_its_node_and_names_a_known_gpu(profile: object) -> None:
    from aca_gpu.gpu.profiles import GpuProfile

    assert isinstance(profile, GpuProfile)
    assert lookup_gpu(profile.gpu) is not None
    assert 0 < profile.container_cpu <= profile.vcpu
    assert 0 < profile.container_memory_gib <= profile.memory_gib


def test_gpus_json_shape_is_the_shared_contract() -> None:
    doc = json.loads(data_path("gpus.json").read_text(encoding="utf-8"))
    assert isinstance(doc["source"], str) and doc["source"]
    for name, entry in doc["gpus"].items():
        # peak_clock_mhz (optional): the SM clock the tensor peaks assume, read by the gpu-tester
        assert set(entry) - {"peak_clock_mhz"} == SPEC_KEYS, name
        clock = entry.get("peak_clock_mhz")
        assert clock is None or (isinstance(clock, int) and 1000 <= clock <= 3000), name
        for key in ("fp32_tflops", "tf32_tflops", "fp16_tflops", "mem_bw_gbps", "memory_gib"):
            assert isinstance(entry[key], float) and entry[key] > 0, (name, key)
        assert entry["bf16_tflops"] is None or entry["bf16_tflops"] > 0
        assert entry["source"]


REQUIRED = [
    "Tesla T4",
    "NVIDIA A100 80GB PCIe",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-PCIE-40GB",
    "Tesla V100-SXM2-16GB",
    "NVIDIA A10",
    "NVIDIA L4",
    "NVIDIA L40S",
    "NVIDIA H100 PCIe",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 NVL",
    "NVIDIA H200",
    "NVIDIA H200 NVL",
]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_gpus_present_by_exact_name(name: str) -> None:
    spec = lookup_gpu(name)
    assert spec is not None and spec.name == name


def test_datasheet_figures() -> None:
    t4 = gpu_specs()["Tesla T4"]
    assert (t4.fp32_tflops, t4.fp16_tflops, t4.bf16_tflops, t4.mem_bw_gbps) == (8.1, 65.0, None, 320.0)
    a100 = gpu_specs()["NVIDIA A100 80GB PCIe"]
    assert (a100.tf32_tflops, a100.bf16_tflops, a100.mem_bw_gbps, a100.memory_gib) == (
        156.0,
        312.0,
        1935.0,
        80.0,
    )
    h100 = gpu_specs()["NVIDIA H100 80GB HBM3"]
    assert (h100.bf16_tflops, h100.mem_bw_gbps) == (989.0, 3350.0)  # dense: half the sparse 1,979
    # dense figures never exceed the densest part's peak by construction errors like copying sparse values
    for spec in gpu_specs().values():
        assert spec.tf32_tflops <= spec.fp16_tflops


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"),  # R450 dropped the NVIDIA prefix
        ("A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB"),
        ("nvidia a100 80gb pcie", "NVIDIA A100 80GB PCIe"),
        ("NVIDIA  A100-80GB-PCIe", "NVIDIA A100 80GB PCIe"),
        ("T4", "Tesla T4"),
        ("NVIDIA T4", "Tesla T4"),
        ("tesla t4", "Tesla T4"),
        ("H100 SXM", "NVIDIA H100 80GB HBM3"),
        (" NVIDIA L4 ", "NVIDIA L4"),
    ],
)
def test_lookup_normalises_carefully(name: str, expected: str) -> None:
    spec = lookup_gpu(name)
    assert spec is not None and spec.name == expected


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA A100-PCI...",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA GH200 120GB",
        "A100",
        "H100",
        "NVIDIA",
        "",
        "Quadro RTX 6000",
    ],
)
def test_lookup_never_guesses(name: str) -> None:
    assert lookup_gpu(name) is None


# --- `acagpu profiles --offline` ---------------------------------------------------------------

PROFILE_KEYS = {
    "type",
    "aliases",
    "gpu",
    "gpu_count",
    "vcpu",
    "memory_gib",
    "serverless",
    "regions",
    "price_per_hour_usd",
}


def _cli(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from aca_gpu.cli import cli

    result = CliRunner().invoke(cli, ["profiles", *args])
    return result.exit_code, result.stdout, result.stderr


def test_offline_json_lists_the_catalog() -> None:
    rc, out, _ = _cli("--offline", "-o", "json")
    assert rc == 0
    doc = json.loads(out)
    assert set(doc) == {"schema", "command", "profiles", "prices"}
    assert doc["prices"]["estimate"] is True
    assert [p["type"] for p in doc["profiles"]] == [p.type for p in profile_catalog()]
    for entry in doc["profiles"]:
        assert set(entry) == PROFILE_KEYS
        assert entry["price_per_hour_usd"] > 0
        assert lookup_gpu(entry["gpu"]) is not None


def test_offline_location_filters_by_the_docs_region_list() -> None:
    rc, out, _ = _cli("--offline", "-l", "westeurope", "-o", "json")
    assert rc == 0
    assert [p["type"] for p in json.loads(out)["profiles"]] == ["Consumption-GPU-NC8as-T4"]


def test_offline_table_for_people() -> None:
    rc, out, _ = _cli("--offline")
    assert rc == 0
    assert out.splitlines()[0].startswith("TYPE")
    assert "Consumption-GPU-NC24-A100" in out and "estimate" in out


def test_live_listing_without_azure_is_a_one_line_bad_input() -> None:
    rc, out, err = _cli("-o", "json")
    assert rc == 2 and json.loads(out)["error"]["exit_code"] == 2
    # live listing asks Azure: without a subscription that is one error line (plus a hint line)
    assert err.startswith("error: ") and sum(line.startswith("error: ") for line in err.splitlines()) == 1


def test_profiles_without_a_subscription_points_to_offline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key in ("ACAGPU_SUBSCRIPTION", "AZURE_SUBSCRIPTION_ID", "ACAGPU_CONFIG", "ACAGPU_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no `az` to ask either
    result = CliRunner().invoke(cli, ["profiles"])
    assert result.exit_code == 2, result.output
    assert "no Azure subscription" in result.stderr and "profiles --offline" in result.stderr, result.stderr
