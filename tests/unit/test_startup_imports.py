"""Commands that only read or delete load nothing of the run engine: each acagpu command is a fresh
Python process, so what it imports is paid on every call (`status`, `env list` and `cost` are run
often, and the suite starts hundreds of them). benchmarks/command_startup.py measures the cost."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

# what only planning and running a GPU run needs: the engine's plan, records, runtime and task
# runner, NVIDIA's CUDA tables and the nvidia-smi / tester parsers, and the rooms of other features
RUN_ONLY = (
    "aca_gpu.workflow.engine.plan",
    "aca_gpu.workflow.engine.outcome",
    "aca_gpu.workflow.engine.aca_runtime",
    "aca_gpu.workflow.engine.task_runner",
    "aca_gpu.gpu.cuda_compat",
    "aca_gpu.gpu.nvidia_smi",
    "aca_gpu.gpu.tester_result",
    "aca_gpu.workflow.workload",
    "aca_gpu.workflow.fanout",
    "aca_gpu.workflow.queue",
    "aca_gpu.workflow.report",
    "aca_gpu.workflow.local",
    "aca_gpu.workflow.serve.plan",
    "aca_gpu.emulator",
)
# the command modules of the reading (and deleting) commands; `run` loads its engine when it runs
READING = ("status", "env", "cost", "down", "check", "profiles", "reap", "logs", "run_cmd")


def test_reading_commands_load_no_run_engine() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {READING!r}:\n"
        "    importlib.import_module('aca_gpu.cli.' + name)\n"
        f"    heavy = sorted(m for m in sys.modules if m.startswith({RUN_ONLY!r}))\n"
        "    print(name + ':' + ','.join(heavy))\n"
        # the SDK clients of every Azure command: `--record`'s sanitizer loads with `--record` only
        "import aca_gpu.azure.clients\n"
        "print('clients:' + ','.join(m for m in sys.modules if m == 'aca_gpu.recording'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = dict(line.split(":", 1) for line in out.splitlines())
    assert set(loaded) == {*READING, "clients"}, out
    # each line lists what was loaded once that command's module (and the ones before it) were
    assert {name: mods for name, mods in loaded.items() if mods} == {}


def test_console_streams_and_exec_sessions_load_no_recorder_unless_recording() -> None:
    """`up` and `run` read console lines and open exec sessions: without `--record` neither loads the
    recorder and its sanitizer (its patterns cost every such command a few milliseconds)."""
    code = (
        "import sys, requests, websocket\n"
        "class Answer:\n    url = 'https://replica/logstream'\n"
        "requests.get = lambda *a, **k: Answer()\n"
        "websocket.create_connection = lambda *a, **k: 'socket'\n"
        "from aca_gpu.azure import dataplane, logstream\n"
        "assert isinstance(logstream._get('https://replica/logstream', 't', {}, True, 1.0), Answer)\n"
        "assert dataplane._default_connect('wss://replica/exec') == 'socket'\n"
        "print(sorted(m for m in sys.modules if m in ('aca_gpu.recording', 'aca_gpu.azure.recorder')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_clients_see_a_recording_once_it_started(tmp_path: Path) -> None:
    from aca_gpu import recording
    from aca_gpu.azure.clients import recording_on

    assert not recording_on()
    recording.start(tmp_path)
    try:
        assert recording_on()
    finally:
        recording.stop()
    assert not recording_on()


def test_run_only_names_are_real_modules() -> None:
    """A renamed module would let the check above pass without checking anything."""
    assert [name for name in RUN_ONLY if importlib.util.find_spec(name) is None] == []
