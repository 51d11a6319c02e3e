"""The emulated nvidia-smi prints what a real driver of that branch prints, and the tool's parser reads it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aca_gpu.emulator.workloads.cuda_versions import max_cuda_for_driver, start_failure
from aca_gpu.emulator.workloads.fleet import DEFAULT_DRIVER, gpus_for
from aca_gpu.emulator.workloads.smi_render import (
    SmiGpu,
    SmiHost,
    SmiProcess,
    render_csv,
    render_list,
    render_query,
    render_table,
    run,
)

nvidia_smi = pytest.importorskip("aca_gpu.gpu.nvidia_smi", reason="the nvidia-smi parser is not in this tree")

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia_smi"
DRIVERS = ("535.54.03", "550.144.03", "570.133.20", "580.126.09")
PROFILES = {
    "Consumption-GPU-NC8as-T4": ("Tesla T4", 15360, 1),
    "Consumption-GPU-NC24-A100": ("NVIDIA A100 80GB PCIe", 81920, 1),
    "NC96-A100": ("NVIDIA A100 80GB PCIe", 81920, 4),
}
# one real output per layout: R535, R545-R565, R570-R575 (wider PID column), R580+ (`+---` under banner)
GOLDEN = (
    "18-535.171.04-8x-tesla-v100s-pcie-32gb.txt",
    "50-seed-535.54.03-aca-a100-80gb-pcie.txt",
    "19-550.120-rtx2000-ada-laptop-implausible-power.txt",
    "20-550.144.03-a100-sxm4-40gb.txt",
    "21-560.28.03-rtx-a2000-8gb-laptop.txt",
    "23-570.133.20-8x-h200.txt",
    "24-570.133.20-2x-h100-80gb-hbm3.txt",
    "25-580.95.05-rtx2000-ada-plus-border-under-banner.txt",
    "26-580.126.09-l40s-python-process.txt",
    "27-580.126.09-2x-geforce-rtx4090-processes.txt",
)
BRANCH_SAMPLE = {
    "535": "18-535.171.04-8x-tesla-v100s-pcie-32gb.txt",
    "550": "20-550.144.03-a100-sxm4-40gb.txt",
    "570": "24-570.133.20-2x-h100-80gb-hbm3.txt",
    "580": "26-580.126.09-l40s-python-process.txt",
}
_ROW1 = re.compile(r"^\|\s+(\d+)\s+.*?\s(On|Off)\s+\|\s+\S+ \w+ \|\s+(\S+) \|$")
_ROW2 = re.compile(r"^\|\s*(\S+)\s+\d+C\s+(P\d+)\s")


def _load(name: str) -> tuple[dict[str, object], list[str]]:
    lines = (CORPUS / name).read_text(encoding="utf-8").split("\n")
    assert lines[2] == "---"
    return json.loads(lines[1].removeprefix("expect: ")), lines[3:]


def _host_like(expect: dict[str, object], body: list[str]) -> SmiHost:
    """The same GPUs and processes the real output shows, fed to the renderer."""
    rows1 = [m for m in map(_ROW1.match, body) if m]
    rows2 = [m for m in map(_ROW2.match, body) if m]
    gpus = []
    for g, r1, r2 in zip(expect["gpus"], rows1, rows2, strict=True):  # type: ignore[call-overload]
        gpus.append(
            SmiGpu(
                index=g["index"],
                name=g["name"],
                uuid="GPU-00000000-0000-0000-0000-000000000000",
                bus_id=g["bus_id"],
                memory_total_mib=g["memory_total_mib"],
                memory_used_mib=g["memory_used_mib"],
                compute_cap="8.0",
                architecture="Ampere",
                power_limit_w=g["power_limit_w"],
                power_draw_w=g["power_draw_w"],
                device_id="0x20B510DE",
                temperature_c=g["temperature_c"],
                fan=r2.group(1),
                pstate=r2.group(2),
                persistence=r1.group(2) == "On",
                ecc_errors=r1.group(3),
                mig_mode=g["mig_mode"],
                util_pct=g["gpu_util_pct"],
            )
        )
    procs = tuple(
        SmiProcess(p["gpu"], p["pid"], p["type"], p["name"], p["used_memory_mib"])
        for p in expect.get("processes", [])  # type: ignore[attr-defined]
    )
    return SmiHost(str(expect["driver_version"]), tuple(gpus), procs)


@pytest.mark.parametrize("name", GOLDEN)
def test_table_matches_real_output_line_for_line(name: str) -> None:
    expect, body = _load(name)
    mine = render_table(_host_like(expect, body)).split("\n")
    # the timestamp differs; everything else must be the same bytes (the seed lost trailing blanks)
    strip = name.startswith("50-")
    assert [x.rstrip() if strip else x for x in mine[1:]] == [x.rstrip() if strip else x for x in body[1:]]
    assert len(mine[0]) == len(body[0]) or strip


@pytest.mark.parametrize("branch", sorted(BRANCH_SAMPLE))
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_emulated_table_has_the_branch_structure(branch: str, profile: str) -> None:
    """Fleet GPUs under each branch: same widths, borders and header rows as that branch's real output."""
    driver = next(d for d in DRIVERS if d.startswith(branch))
    mine = render_table(SmiHost(driver, gpus_for(profile, "r"))).split("\n")
    _, real = _load(BRANCH_SAMPLE[branch])
    for i in (1, 3, 4, 5, 6, 7):  # borders and column headers are fixed text per branch
        assert mine[i] == real[i]
    assert {len(x) for x in mine[1:] if x.strip()} == {len(x) for x in real[1:] if x.strip()}
    gap = next(i for i, x in enumerate(mine) if not x.strip())
    real_gap = next(i for i, x in enumerate(real) if not x.strip())
    assert mine[gap] == real[real_gap]
    assert mine[gap + 1 : gap + 6] == real[real_gap + 1 : real_gap + 6]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_form_round_trips_through_the_parser(driver: str, profile: str) -> None:
    name, memory, count = PROFILES[profile]
    host = SmiHost(driver, gpus_for(profile, "replica-1"))
    cuda = max_cuda_for_driver(driver)

    table = nvidia_smi.parse(render_table(host))
    assert (table.format, table.error) == ("table", None)
    assert (table.driver_version, table.cuda_version, table.gpu_count) == (driver, cuda, count)
    assert [g.name for g in table.gpus] == [name] * count
    assert [g.memory_total_mib for g in table.gpus] == [memory] * count
    assert [g.bus_id for g in table.gpus] == [f"{i + 1:08X}:00:00.0" for i in range(count)]
    assert table.processes == ()

    fields = "index,name,uuid,driver_version,memory.total,memory.used,memory.free,pci.bus_id,compute_cap"
    for fmt in ("csv", "csv,noheader", "csv,noheader,nounits"):
        out, code = run(host, [f"--query-gpu={fields}", f"--format={fmt}"])
        parsed = nvidia_smi.parse(out, fields=fields)
        assert code == 0 and parsed.error is None, (fmt, out)
        assert [g.name for g in parsed.gpus] == [name] * count
        assert [g.memory_total_mib for g in parsed.gpus] == [memory] * count
        assert [g.uuid for g in parsed.gpus] == [g.uuid for g in host.gpus]

    listed = nvidia_smi.parse(render_list(host))
    assert [(g.index, g.name, g.uuid) for g in listed.gpus] == [(g.index, g.name, g.uuid) for g in host.gpus]

    query = nvidia_smi.parse(render_query(host))
    assert (query.driver_version, query.cuda_version, query.attached_gpus) == (driver, cuda, count)
    assert [g.name for g in query.gpus] == [name] * count
    assert [g.memory_total_mib for g in query.gpus] == [memory] * count


def test_query_csv_units_and_na_values() -> None:
    t4 = SmiHost(DEFAULT_DRIVER, gpus_for("Consumption-GPU-NC8as-T4", "r"))
    out = render_csv(t4, ["name", "memory.total", "power.draw", "mig.mode.current", "compute_cap"])
    header, row = out.splitlines()
    assert header == "name, memory.total [MiB], power.draw [W], mig.mode.current, compute_cap"
    assert re.fullmatch(r"Tesla T4, 15360 MiB, \d+\.\d\d W, \[N/A\], 7\.5", row)
    bare = render_csv(t4, ["memory.total", "power.draw"], header=False, units=False)
    assert re.fullmatch(r"15360, \d+\.\d\d\n", bare)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "ERROR: Option --bogus is not recognized. Please run 'nvidia-smi -h' for help."),
        (["--query-gpu=cuda_version", "--format=csv"], 'Field "cuda_version" is not a valid field to query.'),
        (["--query-gpu=name"], "\"--format=\" switch is missing. Please run 'nvidia-smi -h' for help."),
        (["-i"], "ERROR: Option -i is missing its value. Please run 'nvidia-smi -h' for help."),
    ],
)
def test_bad_arguments_fail_like_nvidia_smi(argv: list[str], message: str) -> None:
    out, code = run(SmiHost(DEFAULT_DRIVER, gpus_for("NC24-A100", "r")), argv)
    assert code == 2
    assert out.splitlines()[0] == message


def test_select_one_gpu_and_no_devices() -> None:
    host = SmiHost(DEFAULT_DRIVER, gpus_for("NC48-A100", "r"))
    out, code = run(host, ["-i", "1", "--query-gpu=index", "--format=csv,noheader"])
    assert (out, code) == ("1\n", 0)
    out, code = run(SmiHost(DEFAULT_DRIVER, ()), [])
    assert (out.strip(), code) == ("No devices were found", 6)


def test_cuda_image_newer_than_the_driver_is_refused_with_the_runtime_text() -> None:
    message = start_failure("nvidia/cuda:13.0.0-runtime-ubuntu24.04", {}, driver="550.144.03", brand="NVIDIA")
    assert message is not None
    assert message.endswith(
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your "
        "driver to a newer version, or use an earlier cuda container: unknown"
    )
    assert "error running hook #0" in message
    assert (
        start_failure("nvidia/cuda:13.0.0-runtime-ubuntu24.04", {}, driver="580.126.09", brand="NVIDIA")
        is None
    )
    assert (
        start_failure("nvidia/cuda:12.4.1-runtime-ubuntu22.04", {}, driver="550.144.03", brand="NVIDIA")
        is None
    )


def test_require_env_and_disable_switch_are_honoured() -> None:
    forward = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.8 brand=tesla,driver>=550,driver<551"}
    assert start_failure("example.azurecr.io/app:1", forward, driver="550.144.03", brand="Tesla") is None
    refused = start_failure("example.azurecr.io/app:1", forward, driver="535.54.03", brand="Tesla")
    assert refused is not None and "unsatisfied condition: cuda>=12.8," in refused
    disabled = {"NVIDIA_DISABLE_REQUIRE": "true"}
    assert (
        start_failure("nvidia/cuda:13.0.0-base-ubuntu24.04", disabled, driver="535.54.03", brand=None) is None
    )


# Recorded with `nvidia-smi` on an H100 host running driver 580.159.04 (timestamp line dropped); a
# newer R580 release than the corpus holds, checked byte for byte.
REAL_580_159_H100 = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:00:06.0 Off |                    0 |
| N/A   37C    P0            124W /  700W |       0MiB /  81559MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|  No running processes found                                                             |
+-----------------------------------------------------------------------------------------+
"""


def test_table_matches_a_recorded_580_159_h100() -> None:
    gpu = SmiGpu(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-00000000-0000-0000-0000-000000000000",
        bus_id="00000000:00:06.0",
        memory_total_mib=81559,
        compute_cap="9.0",
        architecture="Hopper",
        power_limit_w=700,
        power_draw_w=124.4,
        device_id="0x233010DE",
        temperature_c=37,
        mig_mode="Disabled",
    )
    mine = render_table(SmiHost("580.159.04", (gpu,)))
    assert mine.split("\n", 1)[1] == REAL_580_159_H100
