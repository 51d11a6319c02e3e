"""`acagpu local`'s judgement of container runs, on real outputs: GPUs seen, refusals, tester results."""

from __future__ import annotations

from pathlib import Path

from aca_gpu.local.runner import ContainerRun, refusal
from aca_gpu.workflow.engine.outcome import PairOutcome, ProbeResult
from aca_gpu.workflow.local import runtime as local_flow
from aca_gpu.workflow.local.runtime import LocalRequest, LocalRunOutcome, make_local_plan, probe_facts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def body(path: Path, header_lines: int = 3) -> str:
    return path.read_text(encoding="utf-8").split("\n", header_lines)[header_lines]


def run(runtime: str, code: int | None, stdout: str = "", stderr: str = "", **kw: bool) -> ContainerRun:
    return ContainerRun(
        runtime, f"{runtime} run ...", code, stdout, stderr, 1.0, refusal(runtime, code, stderr), **kw
    )


def test_nvidia_smi_in_the_container_gives_driver_and_gpus() -> None:
    table = body(next((FIXTURES / "nvidia_smi").glob("24-*.txt")))
    facts = probe_facts(run("docker", 0, table))
    assert (facts.driver_version, facts.cuda_version, len(facts.gpus)) == ("570.133.20", "12.8", 2)
    assert not facts.failed and facts.gpus[0]["name"] == "NVIDIA H100 80GB HBM3"


def test_refusals_become_no_gpu_reasons_with_a_fix() -> None:
    cdi = body(next((FIXTURES / "runtime_errors").glob("12-*.txt")))
    facts = probe_facts(run("podman", 126, stderr=cdi))
    assert facts.refused is not None and facts.refused.startswith("no GPU visible in the container: Podman")
    assert facts.fix is not None and "--write-cdi" in facts.fix
    requirement = body(next((FIXTURES / "runtime_errors").glob("03-*.txt")))
    facts = probe_facts(run("docker", 125, stderr=requirement))
    assert facts.refused is not None and facts.refused.startswith("the image requires CUDA 12.8")
    assert "570.26" in (facts.fix or "")
    apptainer = "WARNING: Could not find any nv files on this host!\n" + (
        'FATAL:   "nvidia-smi": executable file not found in $PATH\n'
    )
    facts = probe_facts(run("apptainer", 255, stderr=apptainer))
    assert facts.refused is not None and "`--nv` found no NVIDIA driver files" in facts.refused


def test_nvidia_smi_failing_inside_the_container_is_a_gpu_error() -> None:
    text = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124\n"
    facts = probe_facts(run("docker", 18, stdout=text))
    assert facts.refused is None and facts.error is not None
    assert facts.error.startswith("the NVML library in use differs")  # the GPU is there: no "no GPU" prefix


def test_tester_results_and_stops() -> None:
    out = body(FIXTURES / "tester" / "h100-default.txt", 2)
    passed = local_flow.tester_facts(run("podman", 0, stdout=out))
    assert (
        passed.status == "pass"
        and passed.result is not None
        and passed.result.gpu_name == "NVIDIA H100 80GB HBM3"
    )
    assert (
        local_flow.tester_facts(run("podman", 3, stdout=out)).status == "fail"
    )  # a result line, but a non-zero exit
    missing = local_flow.tester_facts(
        run("podman", 127, stderr='Error: runc: exec: "python3": executable file not found')
    )
    assert (
        missing.status == "fail"
        and missing.reason
        and missing.reason.startswith("the tester container did not start")
    )
    assert local_flow.tester_facts(run("podman", None, cancelled=True)).status == "not-run"
    assert local_flow.tester_facts(run("podman", 0, stdout="nothing useful")).status == "unavailable"


def test_the_engine_outcome_for_a_local_run() -> None:
    """The engine's one rule decides; the local document keeps up's keys with this machine's facts."""
    plan = make_local_plan(LocalRequest(image="localhost/cuda:12.4.1-base", tester_image="t:1"), "abc123")
    outcome = LocalRunOutcome(
        plan=plan, runtime="podman", why="podman as asked", fixes={1: "write a CDI spec"}
    )
    refused = probe_facts(
        run("podman", 126, stderr="Error: setting up CDI devices: unresolvable CDI devices x")
    )
    outcome.pairs = [PairOutcome(plan.pairs[0], probe=ProbeResult(refused=refused.refused, exit_code=126))]
    outcome.teardown = local_flow.NOTHING_CREATED
    doc = outcome.document()
    assert (outcome.exit_code, doc["status"], doc["runtime"], doc["command"]) == (
        5,
        "gpu_check_failed",
        "podman",
        "local",
    )
    assert doc["error"]["hint"] == "write a CDI spec" and doc["cost"]["usd_estimate"] == 0.0
    assert doc["resources"] == {
        "explorer_container": "acagpu-abc123-explorer",
        "tester_container": "acagpu-abc123-tester",
    }
    assert {"explorer", "tester", "results", "phases", "timings", "teardown", "profile"} <= set(doc)
    assert doc["profile"]["type"] == "local" and doc["teardown"]["status"] == "nothing-created"
