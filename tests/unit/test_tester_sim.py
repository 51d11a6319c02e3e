"""The emulator's tester: simulated telemetry in the real schema, and the result grace on its clock.

The simulated workload plays the tester's lines; the host workload runs the real zero-build launch
line as a real process. Both keep the container alive for ACAGPU_RESULT_GRACE_S after the result
line, scaled like every other emulated duration.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from aca_gpu import tester
from aca_gpu.emulator.workloads import ContainerSpec
from aca_gpu.emulator.workloads.base import Container
from aca_gpu.emulator.workloads.fleet import gpus_for
from aca_gpu.emulator.workloads.host import HostWorkload
from aca_gpu.emulator.workloads.simulated import SimulatedWorkload
from aca_gpu.emulator.workloads.tester_sim import result_grace_s, simulate, simulate_cpu_only
from aca_gpu.gpu.tester_result import VERDICTS, parse_tester_output, summary_lines

T4 = "Consumption-GPU-NC8as-T4"


def _job(env: dict[str, str], profile: str = T4, command: tuple[str, ...] = ()) -> ContainerSpec:
    return ContainerSpec("gpu-tester", "pytorch/pytorch:2.5.1", command, (), env, profile, "job", "tester-r0")


def _result_and_exit(container: Container, timeout: float = 60.0) -> tuple[float, float, list[str]]:
    """When the result line appeared and when the container exited (monotonic seconds), and the log."""
    deadline = time.monotonic() + timeout
    seen = None
    while container.exit_code is None:
        assert time.monotonic() < deadline, "container did not exit"
        if seen is None and any(line.startswith("ACAGPU_RESULT ") for line in container.logs()):
            seen = time.monotonic()
        time.sleep(0.005)
    ended = time.monotonic()
    return (seen or ended), ended, container.logs()


@pytest.mark.parametrize("profile", ["Consumption-GPU-NC24-A100", T4, "NC48-A100"])
def test_simulated_telemetry_has_the_real_shape(profile: str) -> None:
    gpus = gpus_for(profile, "r0")
    assert gpus
    script, _ = simulate(gpus, driver="550.144.03", driver_cuda="12.4", vcpu=24, host=f"host-{profile}")
    result = parse_tester_output("\n".join(line for _, line in script))
    assert result.simulated and result.schema == 3 and result.telemetry_source == "simulated"
    assert all(r.burst_tflops and r.burst_tflops > r.tflops and r.window_s for r in result.rates.values())
    assert result.telemetry_available is True and result.result_grace_s == 15.0
    assert len(result.gpu_telemetry) == len(gpus)
    for gpu in result.gpu_telemetry:
        assert gpu.available and gpu.verdict in ("nominal", "power-capped") and gpu.verdict in VERDICTS
        assert gpu.sm_clock_mhz and gpu.sm_clock_max_mhz and gpu.sm_clock_mhz <= gpu.sm_clock_max_mhz
        assert gpu.power_w and gpu.power_limit_w and gpu.power_w <= 1.05 * gpu.power_limit_w
        assert gpu.pct_of_clock is not None and 60 <= gpu.pct_of_clock <= 100
        assert bool(gpu.evidence) == (gpu.verdict == "power-capped")
    assert all(line.endswith("[simulated]") for line in summary_lines(result))


def test_both_verdicts_occur_across_hosts() -> None:
    gpus = gpus_for(T4, "r0")
    verdicts = {
        simulate(gpus, driver="550.144.03", driver_cuda="12.4", vcpu=8, host=f"h{i}")[1]["devices"][0][
            "telemetry"
        ]["verdict"]
        for i in range(12)
    }
    assert verdicts == {"nominal", "power-capped"}


def test_cpu_only_simulation_says_telemetry_was_unavailable() -> None:
    script, _ = simulate_cpu_only(vcpu=4, host="h", result_grace_s=0)
    lines = [line for _, line in script]
    assert "telemetry: unavailable (no CUDA device)" in lines
    result = parse_tester_output("\n".join(lines))
    assert result.telemetry_available is False and result.result_grace_s == 0


@pytest.mark.parametrize(
    ("text", "value"), [(None, 15.0), ("", 15.0), ("0", 0.0), ("4", 4.0), ("x", 15.0), ("-1", 0.0)]
)
def test_grace_reading_matches_the_tester(text: str | None, value: float) -> None:
    assert result_grace_s({} if text is None else {"ACAGPU_RESULT_GRACE_S": text}) == value


# 200 s of grace at 0.01 is 2 wall s: long enough that a busy machine's delays (which only add to
# "0"'s figure) cannot blur the two; "0" read as 0 is unit-tested above
@pytest.mark.parametrize(("grace", "at_least", "at_most"), [("200", 1.95, 30.0), ("0", 0.0, 1.0)])
def test_simulated_tester_stays_for_its_grace_on_the_scaled_clock(
    tmp_path: Path, grace: str, at_least: float, at_most: float
) -> None:
    workload = SimulatedWorkload(workdir=tmp_path)
    env = tester.zero_build_container(peaks=tmp_path / "none.json").env | {"ACAGPU_RESULT_GRACE_S": grace}
    container = workload.start(_job(env), time_scale=0.01)
    try:
        printed, ended, lines = _result_and_exit(container)
    finally:
        container.stop()
    assert container.exit_code == 0
    assert at_least <= ended - printed <= at_most
    assert lines[-1].startswith("ACAGPU_RESULT ")  # nothing printed during the grace


def test_host_workload_runs_the_zero_build_launch_with_a_scaled_grace(tmp_path: Path) -> None:
    spec = tester.zero_build_container(args=["--quick", "--cpu-budget", "0.05"], peaks=tmp_path / "none.json")
    env = dict(spec.env) | {"CUDA_VISIBLE_DEVICES": "", "ACAGPU_RESULT_GRACE_S": "30"}
    container = HostWorkload(workdir=tmp_path).start(_job(env, command=tuple(spec.command)), time_scale=0.01)
    try:
        printed, ended, lines = _result_and_exit(container)
    finally:
        container.stop()
    result = parse_tester_output("\n".join(lines))
    # the interpreter with torch ran it (not a bare python3 elsewhere on PATH): a real CPU measurement
    assert (result.status, result.reason) == ("fail", "no-cuda") and result.cpu_gflops
    assert container.exit_code == 1 and result.result_grace_s == pytest.approx(0.3)
    assert 0.25 <= ended - printed <= 10


def test_tester_health_readings_are_judged_like_nvidia_smi_q(tmp_path: Path) -> None:
    """Tester 1.2 reads ECC, remap, retired pages and PCIe through NVML; acagpu judges them with the
    `-q` rules: a spoiled GPU fails tester-report (exit 5) although every measurement passed."""
    from click.testing import CliRunner

    from aca_gpu.cli import cli
    from aca_gpu.emulator.workloads.smi_health import sicken

    a100 = gpus_for("Consumption-GPU-NC24-A100", "r1")
    for health, verdict, code in (("", "healthy", 0), ("pcie", "degraded", 0), ("remap", "failed", 5)):
        gpus = sicken(a100, health) if health else a100
        script, _ = simulate(gpus, driver="550.144.03", driver_cuda="12.4", vcpu=24, host="h1")
        text = "\n".join(line for _, line in script)
        result = parse_tester_output(text)
        assert result.passed and result.health is not None and result.health.verdict == verdict
        path = tmp_path / f"{verdict}.log"
        path.write_text(text, encoding="utf-8")
        report = CliRunner().invoke(cli, ["tester-report", "--from-file", str(path)])
        assert report.exit_code == code, report.output
        assert f"GPU health (NVML): {verdict}" in report.stdout
    assert "Remapping Failure Occurred: Yes" in report.stdout


def _template_version() -> str:
    source = (Path(__file__).resolve().parents[2] / "templates" / "gpu-tester" / "gpu_tester.py").read_text()
    return re.search(r'^TESTER_VERSION = "([^"]+)"', source, re.M).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize(("profile", "headline"), [("Consumption-GPU-NC24-A100", "bf16"), (T4, "fp16")])
def test_the_simulated_tester_speaks_as_the_current_tester(profile: str, headline: str) -> None:
    """Tester 1.3: the headline rate first (bf16, else fp16) with the longer warm-up, each rate's window
    and warm-up on its line, `phases`, `warnings` and `skipped` in the result."""
    gpus = gpus_for(profile, "r0")
    script, doc = simulate(gpus, driver="550.144.03", driver_cuda="12.4", vcpu=24, host="h1")
    lines = [line for _, line in script]
    assert lines[0].startswith(f"acagpu gpu-tester {_template_version()}: ")
    assert doc["tester_version"] == _template_version() and doc["schema"] == 3
    assert doc["warnings"] == [] and isinstance(doc["skipped"], list)
    rates = [line.split()[1] for line in lines if re.match(r"gpu0 \w+ +n=\d+: ", line)]
    assert rates[0] == headline and rates == [d for d in ("bf16", "fp16", "tf32", "fp32") if d in rates]
    assert all(
        " sustained over " in line and "s warm-up, burst " in line for line in lines if "TFLOP/s" in line
    )
    matmul = doc["devices"][0]["matmul"]
    assert matmul[headline]["warmup_s"] > max(matmul[d]["warmup_s"] for d in rates[1:])
    phases = doc["phases"]
    assert {"cuda_init", "import_torch", "cpu", "gpu0"} <= set(phases)
    assert set(phases["gpu0"]) == {"total", "context", "copy", *rates}
    assert phases["gpu0"] == {"total": phases["gpu0"]["total"], **doc["devices"][0]["phases"]}
    if headline == "fp16":  # the T4 has no native bf16: said on a line, and in skipped
        assert "gpu0 bf16: skipped, this GPU has no native bf16" in lines
        assert doc["skipped"] == ["gpu0:bf16:unsupported"]
    parsed = parse_tester_output("\n".join(lines))
    assert parsed.warnings == () and parsed.status == "pass"
    _, cpu_only = simulate_cpu_only(vcpu=4, host="h")
    assert cpu_only["tester_version"] == _template_version() and cpu_only["warnings"] == []
    assert {"cuda_init", "import_torch", "cpu"} == set(cpu_only["phases"])
