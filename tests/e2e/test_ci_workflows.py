"""The workflows `ci init` writes, run step by step here: the install step in a fresh virtualenv, and
the validate job's `run:` steps in order against `acagpu emulator serve` (real processes throughout).

GitHub expressions are replaced the way the runner would for one matrix job; `$GITHUB_ENV` lines
carry over to the later steps as on a runner; `uses:` steps (checkout, setup-python, azure/login,
artifacts) are the runner's business and are skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from aca_gpu import __version__
from aca_gpu.workflow.ci import ci_init
from tests.e2e.serving import emulator_serve

SUB = "11111111-2222-3333-4444-555555555555"
IDS = ("66666666-7777-8888-9999-000000000000", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
ACAGPU = [sys.executable, "-m", "aca_gpu"]
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def expand(text: str, context: Mapping[str, str]) -> str:
    """`${{ a.b }}` and `${{ a.b || 'literal' }}` from `context` (unknown names are empty, as on GitHub)."""

    def one(match: re.Match[str]) -> str:
        for alternative in match.group(1).split("||"):
            term = alternative.strip()
            value = term[1:-1] if term.startswith("'") else context.get(term, "")
            if value:
                return value
        return ""

    return _EXPR.sub(one, text)


def job_steps(workflow: Path, job: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    steps: list[dict[str, Any]] = doc["jobs"][job]["steps"]
    return steps


def workflow_env(workflow: Path, context: Mapping[str, str]) -> dict[str, str]:
    doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    return {k: expand(str(v), context) for k, v in (doc.get("env") or {}).items()}


def github_env(path: Path) -> dict[str, str]:
    """`NAME=value` lines a step appended to $GITHUB_ENV."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, sep, value = line.partition("=")
        if sep:
            found[name] = value
    return found


def init_repo(repo: Path, wheel: Path, **extra: Any) -> None:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    ci_init.init(
        ci_init.CiInitRequest(
            repo_dir=repo,
            subscription=SUB,
            tenant=IDS[0],
            client_id=IDS[1],
            location="westus3",
            gpus=("t4",),
            github_repo="example/gpu-ci",
            wheel=wheel,
            **({"lock_hashes": False} | extra),  # (the hashes' own test: tests/unit/test_ci_init.py)
        )
    )


def _install_step(workflow: Path, job: str) -> dict[str, Any]:
    return next(s for s in job_steps(workflow, job) if str(s.get("name", "")).startswith("Install acagpu ("))


def test_install_step_installs_the_written_wheel_by_hash_and_never_from_an_index(
    tmp_path: Path, acagpu_wheel: Path
) -> None:
    repo = tmp_path / "repo"
    init_repo(repo, acagpu_wheel)
    workflow = repo / ".github/workflows/acagpu-validate.yml"
    step = _install_step(workflow, "validate")
    assert step["working-directory"] == ".acagpu"  # the checkout of the repository holding the wheel
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    # no index, no find-links, no config: the only place acagpu can come from is what ci init wrote
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    shell = clean | {
        "PATH": f"{env_dir / 'bin'}:{clean['PATH']}",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }

    def run_step() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-e", "-c", step["run"]],
            cwd=repo, env=shell, capture_output=True, text=True, timeout=180,
        )  # fmt: skip

    requirements = repo / ".github/acagpu/requirements.txt"
    good = requirements.read_text(encoding="utf-8")
    requirements.write_text(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, good), encoding="utf-8")
    wrong = run_step()
    assert wrong.returncode != 0 and "DO NOT MATCH THE HASHES" in wrong.stderr, wrong.stderr

    requirements.write_text(good, encoding="utf-8")
    done = run_step()
    assert done.returncode == 0, done.stderr
    python = str(env_dir / "bin" / "python")
    probe = subprocess.run(
        [python, "-c", "import aca_gpu, importlib.metadata as m; print(aca_gpu.__file__); "
         "print(m.version('acagpu')); print(m.distribution('acagpu').read_text('direct_url.json') or '')"],
        capture_output=True, text=True, env=shell, cwd=tmp_path, check=True,
    )  # fmt: skip
    where, version, direct = probe.stdout.splitlines()[:3]
    assert where.startswith(str(env_dir)) and version == __version__
    assert ".github/acagpu/acagpu-" in json.loads(direct)["url"]  # installed from the repository's wheel

    # the installed copy re-packs into a wheel with the same files (the path `ci init` takes when
    # acagpu was installed from a wheel rather than from a checkout)
    repack = subprocess.run(
        [python, "-c", "import sys, pathlib; from aca_gpu.workflow.ci import wheel; "
         "print(wheel.repack_installed(pathlib.Path(sys.argv[1])))", str(tmp_path)],
        capture_output=True, text=True, env=shell, cwd=tmp_path,
    )  # fmt: skip
    assert repack.returncode == 0, repack.stderr
    import zipfile

    def names(path: Path) -> set[str]:
        with zipfile.ZipFile(path) as zf:
            return {n for n in zf.namelist() if not n.endswith("RECORD")}

    assert names(Path(repack.stdout.strip())) == names(acagpu_wheel)


def test_deps_step_lists_the_wheels_own_requirements(acagpu_wheel: Path) -> None:
    from aca_gpu.workflow.ci import wheel

    deps = wheel.requires(acagpu_wheel)
    assert any(d.startswith("azure-mgmt-appcontainers") for d in deps)
    assert not any("pytest" in d or d.startswith("acagpu") for d in deps)  # no extras, not itself


# ---- the validate job against `acagpu emulator serve` -------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    with emulator_serve(tmp_path / "emu.env") as found:
        yield found


def run_steps(
    workflow: Path, job: str, context: Mapping[str, str], base: Mapping[str, str], cwd: Path, gh_env: Path
) -> dict[str, str]:
    """A job's `run:` steps in order, as a runner would run them; {step name: its output}."""
    outputs: dict[str, str] = {}
    for step in job_steps(workflow, job):
        if "run" not in step or str(step.get("name", "")).startswith("Install acagpu"):
            continue  # `uses:` steps belong to the runner; the install step has its own test above
        own = {k: expand(str(v), context) for k, v in (step.get("env") or {}).items()}
        env = dict(base) | github_env(gh_env) | own
        proc = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", step["run"]],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        outputs[step["name"]] = proc.stdout + proc.stderr
        assert proc.returncode == 0, (
            f"{job}: step {step['name']!r} exited {proc.returncode}: {proc.stderr[-2000:]}"
        )
    return outputs


def test_the_jobs_steps_agree_against_the_emulator(
    tmp_path: Path, acagpu_wheel: Path, served: dict[str, str]
) -> None:
    """discover (tags given by a caller) → validate (one matrix job) → report (merge into
    compat/matrix.json, sweep), every `run:` step exiting 0, the teardown included."""
    repo = tmp_path / "repo"
    init_repo(repo, acagpu_wheel)
    workflow = repo / ".github/workflows/acagpu-validate.yml"
    tag = "12.4.1-runtime-ubuntu22.04"
    context = {"matrix.tag": tag, "matrix.gpu": "t4", "strategy.job-index": "0", "inputs.tags": f'["{tag}"]'}
    bin_dir = Path(sys.executable).parent
    gh_env, gh_output, summary = tmp_path / "github_env", tmp_path / "github_output", tmp_path / "summary.md"
    gh_env.touch()
    base = (
        os.environ
        | served
        | {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",  # where the install step put acagpu
            "ACAGPU_POLLING_INTERVAL": "0.1",
            "GITHUB_ACTIONS": "true",
            "GITHUB_RUN_ID": "4242",
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_ENV": str(gh_env),
            "GITHUB_OUTPUT": str(gh_output),
            "GITHUB_STEP_SUMMARY": str(summary),
        }
    )
    base |= workflow_env(workflow, context)
    base["ACAGPU_SUBSCRIPTION"] = served["ACAGPU_SUBSCRIPTION"]  # the emulator's, not the placeholder id

    if shutil.which("jq"):  # on GitHub's runners it always is
        run_steps(workflow, "discover", context, base, repo, gh_env)
        assert github_env(gh_output) == {"tags": f'["{tag}"]', "gpus": '["t4"]'}

    outputs = run_steps(workflow, "validate", context, base, repo, gh_env)
    ran = list(outputs)
    assert ran[0] == "Name this run" and ran[1] == "Validate" and ran[-1].startswith("Tear down")
    doc = json.loads((repo / f"results/t4-{tag}.json").read_text(encoding="utf-8"))
    assert doc["status"] == "ok", doc
    assert re.fullmatch(r"g[0-9a-f]{9}", github_env(gh_env)["ACAGPU_RUN_ID"])
    listing = subprocess.run(
        [*ACAGPU, "status", "-o", "json"], env=base, capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(listing.stdout)["runs"] == []
    # validate already tore down (its group may still be finishing its delete): the cleanup step
    # finds nothing, or waits for that delete, and exits 0 either way
    assert "absent" in outputs[ran[-1]] or "gone (verified)" in outputs[ran[-1]]

    run_steps(workflow, "report", context, base, repo, gh_env)
    matrix = json.loads((repo / "compat/matrix.json").read_text(encoding="utf-8"))
    assert matrix["images"] == [f"nvidia/cuda:{tag}"] and matrix["passed"] == 1
    assert "✅ pass" in (repo / "compat/matrix.md").read_text(encoding="utf-8")
    assert "acagpu CUDA image validation" in summary.read_text(encoding="utf-8")
