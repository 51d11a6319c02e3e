"""gpu-tester output parsing: golden outputs from real runs, log wrappers, and output with no result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aca_gpu.errors import EXIT_BAD_INPUT
from aca_gpu.gpu.tester_result import NoTesterResult, from_document, parse_tester_output, summary_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tester"
CASES = sorted(FIXTURES.glob("*.txt"))


def load_case(path: Path) -> tuple[str, dict[str, Any], str]:
    """Line 1 names where the output came from, line 2 holds the expected fields, the rest is verbatim."""
    source, expect, body = path.read_text(encoding="utf-8").split("\n", 2)
    assert source.startswith("# source: ") and expect.startswith("# expect: ")
    return source, json.loads(expect.removeprefix("# expect: ")), body


def _subset(actual: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    return {key: actual[key] for key in expected}


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_parses_real_output(path: Path) -> None:
    _, expect, body = load_case(path)
    assert _subset(parse_tester_output(body).as_dict(), expect) == expect


def test_gpu_run_carries_rates_bandwidth_and_correctness() -> None:
    _, _, body = load_case(FIXTURES / "h100-default.txt")
    result = parse_tester_output(body)
    doc = json.loads(body.split("ACAGPU_RESULT ", 1)[1])
    assert result.passed
    assert set(result.rates) == {"fp32", "tf32", "fp16", "bf16"}
    for name, rate in result.rates.items():
        assert rate.tflops == doc["tflops"][name]
        assert rate.pct_of_peak == doc["pct_of_peak"][name]
        assert rate.ok is True and rate.rel_err is not None and rate.rel_err < 0.015
    assert result.bandwidth_gbps == doc["bandwidth_gbps"]
    assert result.cpu_gflops == doc["cpu"]["gflops"]
    # the seed-compatible human line and the machine line agree on the main product's time
    elapsed_line = next(line for line in body.splitlines() if line.startswith("Elapsed Time: "))
    assert float(elapsed_line.split()[2]) == pytest.approx(result.gpu_elapsed_s, rel=1e-4)


def test_every_gpu_is_reported_individually() -> None:
    _, _, body = load_case(FIXTURES / "h200x2-default.txt")
    result = parse_tester_output(body)
    doc = json.loads(body.split("ACAGPU_RESULT ", 1)[1])
    assert len(result.per_gpu) == result.gpu_count == 2
    for index, rates in enumerate(result.per_gpu):
        assert rates == {k: v["tflops"] for k, v in doc["devices"][index]["matmul"].items() if k != "size"}
    assert result.per_gpu[0] != result.per_gpu[1]  # two measurements, not one copied
    assert result.allreduce_busbw_gbps is not None and result.allreduce_busbw_gbps > 0


def test_log_stream_records_and_timestamps_are_unwrapped() -> None:
    _, _, body = load_case(FIXTURES / "h100-default.txt")
    records = "\n".join(
        json.dumps({"TimeStamp": "2026-11-22T03:00:00Z", "Log": line}) for line in body.splitlines()
    )
    stamped = "\n".join(f"2026-11-22T03:00:00.123456789Z {line}" for line in body.splitlines())
    plain = parse_tester_output(body)
    assert parse_tester_output(records) == plain
    assert parse_tester_output(stamped) == plain


def test_last_result_wins_when_a_job_retried() -> None:
    _, _, failed = load_case(FIXTURES / "cpu-no-cuda.txt")
    _, _, passed = load_case(FIXTURES / "cpu-allowed.txt")
    assert parse_tester_output(failed + passed).passed
    assert not parse_tester_output(passed + failed).passed


def test_simulated_flag_is_kept() -> None:
    doc = {
        "status": "pass",
        "simulated": True,
        "gpu": {"name": "Tesla T4", "count": 1},
        "tflops": {"fp16": 40.0},
    }
    result = parse_tester_output("ACAGPU_RESULT " + json.dumps(doc))
    assert result.simulated and result.gpu_name == "Tesla T4" and result.rates["fp16"].tflops == 40.0


def test_unknown_gpu_has_no_percentage() -> None:
    result = from_document({"status": "pass", "tflops": {"bf16": 100.0}, "pct_of_peak": {"bf16": None}})
    assert result.rates["bf16"].pct_of_peak is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Traceback (most recent call last):\n  ...\nRuntimeError: CUDA error: out of memory\n",
        "ACAGPU_RESULT {not json}\n",
        "ACAGPU_RESULT [1, 2]\n",
        'ACAGPU_RESULT {"status": "maybe"}\n',
    ],
    ids=["empty", "traceback", "bad-json", "not-object", "bad-status"],
)
def test_missing_or_broken_result_is_a_clear_error(text: str) -> None:
    with pytest.raises(NoTesterResult) as info:
        parse_tester_output(text)
    assert info.value.exit_code == EXIT_BAD_INPUT and info.value.message


def test_legacy_cpu_only_output_fails_as_no_cuda() -> None:
    result = parse_tester_output("CUDA is not available. Running on CPU.\nElapsed Time: 95.1 seconds\n")
    assert result.legacy and result.status == "fail" and result.reason == "no-cuda"
    assert result.gpu_elapsed_s is None


def test_telemetry_of_a_real_h100_run_is_typed() -> None:
    _, _, body = load_case(FIXTURES / "h100-telemetry.txt")
    result = parse_tester_output(body)
    doc = json.loads(body.split("ACAGPU_RESULT ", 1)[1])
    device = doc["devices"][0]
    (gpu,) = result.gpu_telemetry
    bf16 = device["matmul"]["bf16"]
    assert (gpu.index, gpu.name, gpu.available, gpu.dtype) == (0, "NVIDIA H100 80GB HBM3", True, "bf16")
    assert gpu.verdict == device["telemetry"]["verdict"] == "power-capped"
    assert gpu.evidence == tuple(device["telemetry"]["evidence"]) and gpu.evidence
    assert (gpu.tflops, gpu.pct_of_peak, gpu.pct_of_clock) == (
        bf16["tflops"],
        bf16["pct_of_peak"],
        bf16["pct_of_clock"],
    )
    assert gpu.sm_clock_mhz == bf16["telemetry"]["sm_clock_mhz"] < gpu.sm_clock_max_mhz == 1980
    assert gpu.power_w == bf16["telemetry"]["power_w"] and gpu.power_limit_w == 700.0
    assert gpu.reasons == bf16["telemetry"]["reasons"] and gpu.samples >= 5
    # the rate the observed clock allows: datasheet peak x observed / the clock the peak is quoted at
    assert gpu.at_clock_tflops == pytest.approx(989.0 * gpu.sm_clock_mhz / 1830, abs=0.1)
    (line,) = summary_lines(result)
    assert line.startswith(
        "gpu0 NVIDIA H100 80GB HBM3: bf16 691.8 TFLOP/s (70% of peak, 84% of 819 at 1515 MHz);"
    )
    assert "power-capped: SM 1515/1980 MHz, 748/700 W, 55 °C, sw-power-cap 100%" in line
    assert len(line) < 160


def test_older_results_parse_and_say_telemetry_was_not_reported() -> None:
    _, _, body = load_case(FIXTURES / "h200x2-default.txt")
    result = parse_tester_output(body)
    assert result.schema == 1 and result.telemetry_available is None and result.cuda_init_attempts is None
    assert [g.index for g in result.gpu_telemetry] == [0, 1]
    assert summary_lines(result) == [
        "gpu0 NVIDIA H200: bf16 664.7 TFLOP/s (67.2% of peak); telemetry not reported (tester 1.0)",
        "gpu1 NVIDIA H200: bf16 677.0 TFLOP/s (68.4% of peak); telemetry not reported (tester 1.0)",
    ]
    assert summary_lines(parse_tester_output(load_case(FIXTURES / "seed-legacy.txt")[2])) == []


def test_malformed_telemetry_never_breaks_parsing() -> None:
    doc = {
        "schema": 2,
        "status": "pass",
        "telemetry": "yes",
        "devices": [
            {
                "index": "zero",
                "name": 7,
                "telemetry": {"available": True, "verdict": "melting", "evidence": "x"},
                "matmul": {"bf16": {"tflops": "fast", "telemetry": {"reasons": {"sw-power-cap": "often"}}}},
            },
            "not a device",
        ],
    }
    result = from_document(doc)
    (gpu,) = result.gpu_telemetry
    assert (gpu.index, gpu.name, gpu.verdict, gpu.evidence, gpu.tflops, gpu.reasons) == (
        0,
        None,
        None,
        (),
        None,
        {},
    )
    assert result.telemetry_available is False
    assert summary_lines(result) == ["gpu0: no verdict"]


def test_a_newer_schema_still_parses() -> None:
    result = from_document(
        {"schema": 3, "status": "pass", "telemetry": {"available": True}, "new_field": [1]}
    )
    assert result.schema == 3 and result.passed and result.telemetry_available is True


def _skipping_doc() -> dict[str, Any]:
    """A tester 1.3 result whose budget measured bf16 unsettled and left fp32 and tf32 out."""
    row = {"tflops": 661.2, "settled": False, "ok": True, "rel_err": 1.7e-3, "window_s": 1.0}
    return {
        "schema": 3,
        "tester_version": "1.3",
        "status": "pass",
        "gpu": {"name": "NVIDIA H200", "count": 1},
        "tflops": {"bf16": 661.2, "fp16": 665.0},
        "devices": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "matmul": {"size": 8192, "bf16": row, "fp16": {**row, "tflops": 665.0, "settled": True}},
                "telemetry": {"available": False, "reason": "off: --telemetry-ms 0"},
                "skipped": ["gpu0:tf32:budget", "gpu0:fp32:budget"],
            }
        ],
        "skipped": ["gpu0:tf32:budget", "gpu0:fp32:budget"],
        "warnings": [
            "the budget leaves 7.6s for measuring, under the 20s that every rate asked for may take"
        ],
    }


def test_a_summary_says_what_the_budget_left_out_and_an_unsettled_headline() -> None:
    """Issue 36 item 5: a rate the budget skipped is said wherever a result is summarised."""
    result = from_document(_skipping_doc())
    assert result.skipped == ("gpu0:tf32:budget", "gpu0:fp32:budget")
    assert result.warnings and "budget" in result.warnings[0]
    lines = summary_lines(result)
    assert lines[0].startswith("gpu0 NVIDIA H200: bf16 661.2 TFLOP/s (not settled);")
    assert lines[1] == "gpu0 not measured: tf32, fp32 (the tester's budget ran out)"
    unsupported = from_document({**_skipping_doc(), "skipped": ["gpu0:bf16:unsupported"]})
    assert len(summary_lines(unsupported)) == 1  # a dtype the GPU lacks is no omission
