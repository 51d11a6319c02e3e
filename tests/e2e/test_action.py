"""The root `action.yml` run as a runner runs a composite action: its shell steps in order, each with
its own `$GITHUB_OUTPUT`, one `$GITHUB_STEP_SUMMARY`, `$GITHUB_ACTION_PATH` at this checkout and
`${{ ... }}` filled in from the inputs and the earlier steps' outputs, against `acagpu emulator serve`.

`uses:` steps are the runner's: setup-python is a fresh virtualenv (it sees the test environment's
installed dependencies, not its acagpu), azure/login is the emulator's sign-in (the environment
`emulator serve` writes), and the artifact upload and the pull-request comment need GitHub itself.
The install step is real: pip builds and installs acagpu from `$GITHUB_ACTION_PATH`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from aca_gpu import __version__
from tests.e2e.serving import emulator_serve

ROOT = Path(__file__).resolve().parents[2]
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
NEEDS_GITHUB = ("inputs.comment", "steps.upload")  # steps that talk to GitHub's API or artifact store


def expand(text: str, context: Mapping[str, str]) -> str:
    """`${{ a.b }}` and `${{ a.b || c.d }}` (unknown names are empty, as on GitHub)."""

    def one(match: re.Match[str]) -> str:
        for term in match.group(1).split("||"):
            value = context.get(term.strip(), "")
            if value:
                return value
        return ""

    return _EXPR.sub(one, text)


def outputs_of(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        name, sep, value = line.partition("=")
        if sep:
            found[name] = value
    return found


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    with emulator_serve(tmp_path / "emu.env") as found:
        yield found


def python_env(where: Path) -> Path:
    """What setup-python leaves on PATH: a Python with pip, here with this environment's
    dependencies visible (linked, acagpu itself left out) so pip resolves nothing from an index."""
    venv.EnvBuilder(with_pip=True).create(where)
    deps = where / "deps"
    deps.mkdir()
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()))
    for entry in site.iterdir():
        if not entry.name.lower().startswith(("aca_gpu", "acagpu", "_editable_impl_acagpu", "__editable__")):
            (deps / entry.name).symlink_to(entry)
    own_site = next((where / "lib").glob("python*/site-packages"))
    (own_site / "test-deps.pth").write_text(f"{deps}\n", encoding="utf-8")
    return where / "bin"


def run_steps(
    action: dict[str, Any], inputs: dict[str, str], base: dict[str, str], where: Path, *, installed: bool
) -> tuple[list[str], dict[str, str]]:
    """The action's shell steps in order, as the runner runs them: the step names that ran and the
    context after them (inputs and step outputs). `installed`: the install step already ran in this
    Python (a second use of the action in one job)."""
    context = {f"inputs.{k}": v for k, v in inputs.items()}
    ran = []
    for n, step in enumerate(action["runs"]["steps"]):
        condition = str(step.get("if", ""))
        if "uses" in step or any(word in condition for word in NEEDS_GITHUB):
            continue
        if installed and step.get("id") == "install":
            continue
        if "steps." in condition and not all(
            context.get(ref) for ref in re.findall(r"steps\.[\w-]+\.outputs\.[\w-]+", condition)
        ):
            continue  # `steps.X.outputs.Y != ''` with Y empty: skipped, as on GitHub
        gh_output = where / f"output-{n}"
        env = base | {k: expand(str(v), context) for k, v in (step.get("env") or {}).items()}
        proc = subprocess.run(
            [step.get("shell", "bash"), "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=where, env=env | {"GITHUB_OUTPUT": str(gh_output)},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        ran.append(step["name"])
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"step {step['name']!r} exited {proc.returncode}: {log[-3000:]}"
        if "id" in step:
            for key, value in outputs_of(gh_output).items():
                context[f"steps.{step['id']}.outputs.{key}"] = value
    return ran, context


def test_the_action_validates_and_measures_a_served_app_against_the_emulator(
    tmp_path: Path, served: dict[str, str]
) -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    defaults = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    inputs = defaults | {
        "image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "gpu": "t4",
        "args": "--no-inspect",
    }
    bin_dir = python_env(tmp_path / "py")
    work, temp = tmp_path / "work", tmp_path / "runner-temp"
    work.mkdir()
    temp.mkdir()
    summary = tmp_path / "summary.md"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "ACAGPU_"))}
    base = clean | served | {
        "PATH": f"{bin_dir}:{clean['PATH']}",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "ACAGPU_POLLING_INTERVAL": "0.1",
        "GITHUB_ACTIONS": "true",
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RUNNER_TEMP": str(temp),
    }  # fmt: skip
    ran, context = run_steps(action, inputs, base, work, installed=False)
    assert ran[0].startswith("Install acagpu") and ran[-1] == "Fail the step as acagpu did", ran

    # the installed acagpu is this checkout's, from the action's path, not the test environment's
    assert context["steps.install.outputs.version"] == __version__
    probe = subprocess.run(
        [str(bin_dir / "python"), "-c", "import aca_gpu, importlib.metadata as m; print(aca_gpu.__file__);"
         "print(m.distribution('acagpu').read_text('direct_url.json'))"],
        env=base, capture_output=True, text=True, check=True, cwd=work,
    )  # fmt: skip
    where, direct = probe.stdout.splitlines()[:2]
    assert where.startswith(str(tmp_path / "py")), where
    assert json.loads(direct)["url"] == ROOT.as_uri(), direct

    # the outputs
    assert context["steps.run.outputs.exit-code"] == "0"
    result = Path(context["steps.run.outputs.result-json"])
    doc: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    assert doc["command"] == "validate" and doc["status"] == "ok", doc
    assert float(context["steps.run.outputs.cost-usd"]) == doc["cost"]["usd_estimate"] > 0
    page = Path(context["steps.report.outputs.report-html"])
    assert "<svg" in page.read_text(encoding="utf-8")

    # the summary table: verdict, GPU, driver, CUDA, phases, cost
    text = summary.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| ✅ pass |"))
    pair = doc["results"][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == [pair["gpu_name"], pair["driver_version"], pair["cuda_version"]], row
    assert "environment" in cells[4] and cells[5] == f"${doc['cost']['usd_estimate']:.4f} (estimate)"
    assert "### acagpu validate: ✅ ok" in text  # after validate's own matrix summary

    # `serve measure` in the same job: a model server (what follows `--` in args is its command)
    # served, its cold starts timed, the app removed however it ended; the summary gains its table
    port = "18493"
    inputs = defaults | {
        "command": "serve measure",
        "image": "python:3.12-slim",
        "gpu": "t4",
        "args": f"--port {port} --cooldown 60 -- python3 -m http.server {port}",
    }
    ran, context = run_steps(action, inputs, base, work, installed=True)
    assert ran[0] == "Run acagpu" and ran[-1] == "Fail the step as acagpu did", ran
    assert context["steps.run.outputs.exit-code"] == "0" and context["steps.run.outputs.cost-usd"] == ""
    doc = json.loads(Path(context["steps.run.outputs.result-json"]).read_text(encoding="utf-8"))
    assert doc["command"] == "serve" and doc["status"] == "measured", doc.get("error")
    assert doc["run_id"] == context["steps.run.outputs.run-id"] and len(doc["measurement"]["cycles"]) == 3
    assert doc["plan"]["workload"]["command"] == ["python3", "-m", "http.server", port]
    # nothing is left of the served app: the step removed its run
    left = subprocess.run(
        ["acagpu", "status", "-o", "json"], env=base, capture_output=True, text=True, cwd=work, check=True
    )
    assert doc["run_id"] not in left.stdout, left.stdout
    text = summary.read_text(encoding="utf-8")
    assert "### acagpu serve: ✅ measured" in text, text
    row = next(line for line in text.splitlines() if line.startswith("| ✅ measured |"))
    assert "3 cold starts p50" in row and "/h while a replica runs" in row, row
    assert "<svg" in Path(context["steps.report.outputs.report-html"]).read_text(encoding="utf-8")


def test_the_action_refuses_an_unknown_command(tmp_path: Path) -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "run")
    env = dict(os.environ) | {
        "COMMAND": "down",
        "GITHUB_OUTPUT": str(tmp_path / "out"),
        "RUNNER_TEMP": str(tmp_path),
    }
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True
    )
    assert (
        proc.returncode == 2
        and "command must be validate, run, up or serve measure, not 'down'" in proc.stdout
    )
    assert not (tmp_path / "out").exists()  # nothing ran, no outputs
