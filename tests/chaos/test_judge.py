"""The chaos runner's verdicts: a traceback, a clear line, exit 5 on a healthy GPU, a leftover."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("acagpu_chaos_judge", ROOT / "benchmarks" / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


chaos = _load()


def _step(**kw: Any) -> Any:
    return chaos.Step(name="up", argv=["up"], timeout=60, **kw)


TRACE = 'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\nKeyboardInterrupt\n'


@pytest.mark.parametrize(
    ("rc", "out", "err", "clear"),
    [
        (0, "", "", True),
        (2, "", "error: no run 'r1' found\nhint: `acagpu status` lists runs\n", True),
        (1, "", "error: unexpected failure: JSONDecodeError: Expecting value\n", False),
        (1, "", "error: unexpected ChunkedEncodingError: Response ended prematurely\n", False),
        (5, "run r1: gpu_check_failed  (eastus, T4)\n", "✗ test run   5.0s  fail\n", True),
        (130, "", "warning: interrupted: tearing down run r1 (Ctrl-C again to leave it)\n", False),
        (130, "", TRACE, False),
    ],
)
def test_clear_line(rc: int, out: str, err: str, clear: bool) -> None:
    assert chaos.judge(_step(), rc, out, err)["clear"] is clear


def test_traceback_and_library_noise_are_seen() -> None:
    assert chaos.judge(_step(), 130, "", TRACE)["traceback"]
    verdict = chaos.judge(_step(), 1, "", "WARNING:azure.core.pipeline:retrying\nerror: boom\n")
    assert verdict["noise"] and not verdict["traceback"]


def test_json_envelope_and_error_object() -> None:
    step = _step(json=True)
    ok = chaos.judge(step, 4, '{"schema": 1, "command": "up", "error": {"message": "timed out"}}', "")
    assert ok["json_ok"] and ok["clear"]
    no_error = chaos.judge(step, 5, '{"schema": 1, "command": "up", "error": null}', "")
    assert no_error["json_ok"] and not no_error["clear"]
    assert chaos.judge(step, 0, '{"schema": 1, "kind": "validate"}', "")["json_problem"] == "no command"
    two = chaos.judge(step, 0, '{"schema": 1, "command": "up"}\n{"schema": 1, "command": "up"}', "")
    assert two["json_problem"] == "not exactly one JSON document"


def test_exit_5_is_right_only_for_the_too_new_image() -> None:
    assert chaos.judge(_step(), 5, "", "error: gpu check failed\n")["exit5_on_healthy"]
    assert not chaos.judge(_step(too_new=True), 5, "", "error: image needs a newer driver\n")[
        "exit5_on_healthy"
    ]
    healthy = "nvidia/cuda:12.4.1-base-ubuntu22.04"
    rows = f"{chaos.TOO_NEW_IMAGE}  fail\n{healthy}  fail\n"
    step = _step(too_new=True, healthy_images=[healthy])
    assert chaos.judge(step, 5, rows, "")["exit5_on_healthy"]
    assert not chaos.judge(step, 5, rows.replace(f"{healthy}  fail", f"{healthy}  pass"), "")[
        "exit5_on_healthy"
    ]
    doc = '{"schema": 1, "command": "validate", "results": [%s]}'
    row = '{"image": "%s", "status": "%s"}'
    json_step = _step(too_new=True, healthy_images=[healthy], json=True)
    for status, wrong in (("fail", True), ("error", False), ("pass", False)):
        out = doc % ", ".join([row % (chaos.TOO_NEW_IMAGE, "fail"), row % (healthy, status)])
        assert chaos.judge(json_step, 5, out, "")["exit5_on_healthy"] is wrong


def test_leftovers_skip_deleting_groups_and_kept_runs() -> None:
    inv = {
        "resource_groups": [
            {"name": "rg-acagpu-a", "deleting": True},
            {"name": "rg-acagpu-b", "deleting": False},
            {"name": "rg-acagpu-live0", "deleting": False},
        ],
        "apps": [
            {"name": "cuda-explorer-a", "resource_group": "rg-acagpu-a", "deleting": False},
            {"name": "cuda-explorer-b", "resource_group": "rg-acagpu-b", "deleting": False},
        ],
        "jobs": [],
        "replicas": [{"name": "rep-b", "phase": "Running", "owner": "cuda-explorer-b"}],
    }
    left = chaos.leftovers(inv, {"rg-acagpu-live0"})
    assert left == ["group rg-acagpu-b", "app cuda-explorer-b", "replica rep-b (Running)"]


def test_same_seed_same_scenario() -> None:
    assert chaos.draw(17) == chaos.draw(17)
    kinds = {chaos.draw(s).kind for s in range(60)}
    assert kinds == set(chaos.KINDS)


PRESTART = (
    "Traceback (most recent call last):\n"
    '  File "<frozen runpy>", line 189, in _run_module_as_main\n'
    '  File "<frozen importlib._bootstrap_external>", line 1004, in source_to_code\n'
    "KeyboardInterrupt\n"
)


def test_a_ctrl_c_before_any_acagpu_code_ran_is_python_s_not_a_traceback_of_ours() -> None:
    step = _step(json=True)
    early = chaos.judge(step, -2, "", PRESTART, interrupted=True)
    assert early["before_start"] and early["clear"] and not early["traceback"]
    # the same text without a Ctrl-C sent, or with one of acagpu's frames in it, stays a traceback
    assert chaos.judge(step, -2, "", PRESTART)["traceback"]
    ours = PRESTART.replace(
        "KeyboardInterrupt\n", '  File "/x/aca_gpu/cli/up.py", line 3\nKeyboardInterrupt\n'
    )
    assert chaos.judge(step, -2, "", ours, interrupted=True)["traceback"]


INIT_FAILURE = (
    "Fatal Python error: init_import_site: Failed to import the site module\n"
    "Python runtime state: initialized\n"
    "Traceback (most recent call last):\n"
    '  File "<frozen site>", line 186, in addpackage\n'
    '  File "<frozen importlib._bootstrap_external>", line 126, in _path_join\n'
    "KeyboardInterrupt\n"
)


def test_a_ctrl_c_while_the_interpreter_initialises_is_python_s_own_failure() -> None:
    """CPython reports a SIGINT during its own start-up ("Fatal Python error: init_...") and exits 1."""
    step = _step(json=False)
    early = chaos.judge(step, 1, "", INIT_FAILURE, interrupted=True)
    assert early["before_start"] and early["clear"] and not early["traceback"]
    runpy = "Could not import runpy module\n" + PRESTART
    assert chaos.judge(step, 1, "", runpy, interrupted=True)["before_start"]
    # exit 1 with a traceback that is not CPython's start-up report stays a traceback
    assert chaos.judge(step, 1, "", PRESTART, interrupted=True)["traceback"]
    assert chaos.judge(step, 1, "", INIT_FAILURE)["traceback"]


def test_a_ctrl_c_that_killed_the_process_before_python_had_a_handler_is_no_failure_of_ours() -> None:
    """Seen beside a second suite: a SIGINT 1.2 s after the start found the interpreter still
    starting, before it installed its own handler: the signal's default action killed it (exit
    -2) and nothing was printed. Only a Ctrl-C sent explains that; without one it stays unclear."""
    step = _step(json=False)
    early = chaos.judge(step, -2, "", "", interrupted=True)
    assert early["before_start"] and early["clear"]
    assert not chaos.judge(step, -2, "", "")["clear"]  # no Ctrl-C sent: an unexplained death
    assert not chaos.judge(step, -2, "printed", "", interrupted=True).get("before_start")


def test_a_run_whose_ctrl_c_landed_while_python_started_lost_no_line_of_acagpu_s(tmp_path: Path) -> None:
    """Seed 1013 beside a second suite: its Ctrl-C 1.2 s in found the interpreter still importing
    `site`; CPython says "Fatal Python error: init_import_site" and exits 1, the container's own code
    in that scenario, so the runner took it for a run whose 3 lines were lost. A real process here: a
    `sitecustomize` that sleeps holds the interpreter in that import while the runner sends SIGINT."""
    # CPython's own SIGINT handler, as it has at start-up unless SIGINT came in ignored (a background
    # job of a script): the test must not depend on how it was started
    held = "import signal, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\ntime.sleep(60)\n"
    (tmp_path / "sitecustomize.py").write_text(held, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")} | {"PYTHONPATH": str(tmp_path)}
    world = SimpleNamespace(acagpu=[sys.executable, "-m", "aca_gpu"], env=lambda: env, dir=tmp_path)
    step = chaos.draw(1013).steps[0]
    assert step.container_exit == 1 and step.numbered_lines == 3
    step.sigint_at, step.second_sigint_after, step.check_leftovers = 3.0, None, False
    res = chaos.run_step(world, step, set(), False)
    err = (tmp_path / "step-run.err").read_text(encoding="utf-8")
    assert res.exit_code == 1 and err.startswith("Fatal Python error: init_import_site"), err
    assert res.before_start and res.clear and not res.traceback
    assert res.lines_problem == "" and not res.lines_lost_said


def test_lines_are_still_counted_when_a_ctrl_c_came_after_acagpu_started() -> None:
    """Only a Ctrl-C that landed before acagpu ran excuses the lines: once the container's code came
    back, a lost line is a lost line, Ctrl-C or not."""
    step = chaos.draw(1013).steps[0]
    said = "error: interrupted: run r1013e stopped\n"
    lost = chaos.numbered_problem(step, 1, "line1\nline3\n", said, interrupted=True)
    assert lost.startswith("lines: 2 of 3; missing [2]"), lost
    assert chaos.numbered_problem(step, 1, "line1\nline2\nline3\n", said, interrupted=True) == ""
    assert chaos.numbered_problem(step, 1, "", INIT_FAILURE).startswith("lines: 0 of 3")  # no Ctrl-C sent
