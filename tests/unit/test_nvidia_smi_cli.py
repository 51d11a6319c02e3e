"""`acagpu smi --from-file`: the JSON contract, the human summary, stdin, --fields and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from aca_gpu.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def body(prefix: str) -> str:
    """The verbatim output of the fixture whose name starts with `prefix` (header lines dropped)."""
    (path,) = FIXTURES.glob(f"{prefix}-*.txt")
    return path.read_text(encoding="utf-8").split("\n", 3)[3]


def saved(tmp_path: Path, prefix: str) -> str:
    path = tmp_path / f"{prefix}.out"
    path.write_text(body(prefix), encoding="utf-8")
    return str(path)


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["smi", *args], input=stdin, catch_exceptions=False)


def test_json_output_is_one_document_with_the_contract(tmp_path: Path) -> None:
    result = run("--from-file", saved(tmp_path, "50"), "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["driver_version"] == "535.54.03"
    assert doc["cuda_version"] == "12.2"
    assert doc["error"] is None
    gpu = doc["gpus"][0]
    assert (gpu["index"], gpu["name"], gpu["memory_total_mib"], gpu["memory_used_mib"]) == (
        0,
        "NVIDIA A100 80GB PCIe",
        81920,
        4,
    )
    assert doc["format"] == "table" and doc["processes"] == []


def test_human_summary_names_driver_cuda_and_each_gpu(tmp_path: Path) -> None:
    result = run("--from-file", saved(tmp_path, "24"))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("driver 570.133.20  CUDA 12.8")
    gpu_lines = [line for line in lines if line.startswith("GPU ")]
    assert len(gpu_lines) == 2
    assert "NVIDIA H100 80GB HBM3" in gpu_lines[1] and "0 / 81559 MiB" in gpu_lines[1]
    assert "00000000:BA:00.0" in gpu_lines[1]


def test_stdin_dash_reads_standard_input() -> None:
    result = run("--from-file", "-", "-o", "json", stdin=body("29"))
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert (doc["driver_version"], doc["cuda_version"], doc["gpus"][0]["name"]) == (
        "610.57.04",
        "13.3",
        "NVIDIA GeForce GTX 1650",
    )


def test_fields_make_a_headerless_csv_readable(tmp_path: Path) -> None:
    path = saved(tmp_path, "37")
    without = run("--from-file", path, "-o", "json")
    assert without.exit_code == 2
    assert json.loads(without.stdout)["error"]["code"] == "unrecognized"
    with_fields = run("--from-file", path, "--fields", "name,memory.total", "-o", "json")
    assert with_fields.exit_code == 0
    gpu = json.loads(with_fields.stdout)["gpus"][0]
    assert (gpu["index"], gpu["name"], gpu["memory_total_mib"], gpu["memory_used_mib"]) == (
        0,
        "NVIDIA A100-SXM4-80GB",
        81920,
        None,
    )


def test_human_hint_for_a_headerless_csv(tmp_path: Path) -> None:
    result = run("--from-file", saved(tmp_path, "37"))
    assert result.exit_code == 2
    assert "--fields" in result.stdout


@pytest.mark.parametrize(
    ("prefix", "error"), [("70", "nvml_mismatch"), ("72", "no_devices"), ("73", "driver_not_loaded")]
)
def test_failure_states_exit_5(tmp_path: Path, prefix: str, error: str) -> None:
    result = run("--from-file", saved(tmp_path, prefix), "-o", "json")
    assert result.exit_code == 5
    doc = json.loads(result.stdout)
    assert (doc["error"]["code"], doc["gpus"], doc["driver_version"]) == (error, [], None)


def test_failure_state_human_output_says_what_happened(tmp_path: Path) -> None:
    result = run("--from-file", saved(tmp_path, "70"))
    assert result.exit_code == 5
    assert "580.178" in result.stdout  # the NVML library version, for the diagnosis
    error, hint = result.stderr.splitlines()  # the failure: one error line and what to do
    assert error.startswith("error: nvidia-smi nvml_mismatch") and hint.startswith("hint: the NVML library")


@pytest.mark.parametrize("prefix", ["80"])
def test_unrecognized_input_exits_2(tmp_path: Path, prefix: str) -> None:
    result = run("--from-file", saved(tmp_path, prefix), "-o", "json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "unrecognized"


def test_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    result = run("--from-file", str(tmp_path / "nope.txt"), "-o", "json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["exit_code"] == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: cannot read")


def _fixture_body(name: str) -> str:
    path = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi" / name
    return path.read_text(encoding="utf-8").split("\n", 3)[3]


def test_partial_inputs_people_paste() -> None:
    """A table cut after its header is read for driver and CUDA and says the rows are missing; a
    `-l` loop is one GPU; a process table alone is read and says what it lacks; a GPU that fell off the bus
    ("Unable to determine the device handle") is a failed GPU (5), not unreadable input (2)."""
    cut = CliRunner().invoke(
        cli, ["smi", "--from-file", "-"], input=_fixture_body("85-470.86-tesla-t4-table-cut-after-header.txt")
    )
    assert cut.exit_code == 0
    assert "driver 470.86  CUDA 11.4" in cut.stdout and "missing GPU rows" in cut.stderr, cut.output
    loop = CliRunner().invoke(
        cli,
        ["smi", "--from-file", "-", "-o", "json"],
        input=_fixture_body("86-csv-loop-l5-one-gpu-17-samples.txt"),
    )
    doc = json.loads(loop.stdout)
    assert loop.exit_code == 0 and doc["gpu_count"] == 1 and "17 rows for 1 GPU" in doc["warnings"][0]
    alone = CliRunner().invoke(
        cli, ["smi", "--from-file", "-"], input=_fixture_body("87-460.39-process-table-alone.txt")
    )
    assert alone.exit_code == 0 and "processes: 5" in alone.stdout, alone.output
    assert "missing banner (driver and CUDA version), GPU rows" in alone.stderr
    lost = CliRunner().invoke(
        cli, ["smi", "--from-file", "-", "-o", "json"],
        input=_fixture_body("88-gpu-fell-off-the-bus-device-handle-unknown-error.txt"),
    )  # fmt: skip
    assert lost.exit_code == 5, lost.output
    assert json.loads(lost.stdout)["error"]["code"] == "gpu_lost" and "hint:" in lost.stderr


def test_health_of_a_saved_query_output(tmp_path: Path) -> None:
    """Degraded passes with a warning and fails under --strict; failed is exit 5 with the finding."""
    degraded = saved(tmp_path, "90")
    result = run("--from-file", degraded)
    assert result.exit_code == 0
    assert "GPU 0 health: degraded" in result.stdout and "warning: 177 correctable ECC" in result.stdout
    assert "warning: GPU health degraded: gpu0: 177 correctable" in result.stderr
    strict = run("--from-file", degraded, "--strict", "-o", "json")
    assert strict.exit_code == 5
    doc = json.loads(strict.stdout)
    assert doc["health"]["verdict"] == "degraded" and doc["error"]["code"] == "GpuUnhealthy"
    failed = body("92").replace(
        "Remapping Failure Occurred        : No", "Remapping Failure Occurred        : Yes"
    )
    result = run("--from-file", "-", "-o", "json", stdin=failed)
    assert result.exit_code == 5
    doc = json.loads(result.stdout)
    assert doc["status"] == "error" and doc["health"]["gpus"][0]["verdict"] == "failed"
    assert "Remapping Failure Occurred: Yes" in doc["error"]["message"]
    healthy = run("--from-file", saved(tmp_path, "95"), "--strict", "-o", "json")
    assert healthy.exit_code == 0 and json.loads(healthy.stdout)["health"]["verdict"] == "healthy"
    table = run("--from-file", saved(tmp_path, "50"), "-o", "json")
    assert json.loads(table.stdout)["health"] is None  # a table carries none of the health fields
