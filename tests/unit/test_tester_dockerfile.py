"""The tester Dockerfile's logic, without a Docker engine: its instructions, and its RUN step played
against stand-ins for each supported base (apt-get, python3 and venv's python as logging scripts).

What this cannot show is a real image build; what it does show is that the step installs into a
virtualenv (so Ubuntu 24.04's PEP 668 refusal never applies), never calls the system pip, pins torch
only when asked, refuses a base without apt-get with one clear line, and leaves `python3` and
`python` both meaning the virtualenv's interpreter.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).resolve().parents[2] / "templates" / "gpu-tester" / "Dockerfile"
UBUNTU_PYTHONS = {"ubuntu20.04": "3.8.10", "ubuntu22.04": "3.10.12", "ubuntu24.04": "3.12.3"}


def instructions() -> list[tuple[str, str]]:
    """(KEYWORD, argument) per instruction: comments dropped, backslash continuations joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def arg_defaults() -> dict[str, str]:
    found: dict[str, str] = {}
    for keyword, rest in instructions():
        if keyword == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            found.setdefault(name, value)
    return found


def tool(name: str) -> str:
    """The host's own coreutils, by absolute path: the stand-in PATH holds only the fakes."""
    found = shutil.which(name)
    assert found is not None
    return found


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def fake_base(tmp_path: Path, python_version: str | None, apt: bool = True, pep668: bool = False) -> Path:
    """A base image's PATH: apt-get and rm that only log, python3 whose venv makes a logging python."""
    bin_dir = tmp_path / "base-bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    if apt:
        _script(bin_dir / "apt-get", f'echo "apt-get $*" >> "{log}"\n')
    _script(bin_dir / "rm", f'echo "rm $*" >> "{log}"\n')
    if python_version is not None:
        refuse = (
            'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "error: externally-managed-environment" >&2; '
            "exit 1; fi\n"
            if pep668
            else ""
        )
        venv_python = f'#!/bin/sh\\necho "venv-python $*" >> "{log}"\\n'
        _script(
            bin_dir / "python3",
            f'echo "python3 $*" >> "{log}"\n'
            + refuse
            + 'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then\n'
            + f'  {tool("mkdir")} -p "$3/bin"\n'
            + f"  printf '{venv_python}' > \"$3/bin/python\"\n"
            + f'  {tool("chmod")} 755 "$3/bin/python"; cd "$3/bin"; {tool("ln")} -s python python3\n'
            + "fi\n",
        )
    return bin_dir


def play_run(
    tmp_path: Path, bin_dir: Path, **args: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The RUN step as Docker runs it: `/bin/sh -c`, build args and ENV in its environment."""
    (run,) = [rest for keyword, rest in instructions() if keyword == "RUN"]
    env = {**arg_defaults(), "BASE_IMAGE": "nvidia/cuda:12.1.1-runtime-ubuntu22.04", **args}
    env |= {"VENV": str(tmp_path / "venv"), "PATH": str(bin_dir), "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["/bin/sh", "-c", run], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    log = tmp_path / "calls"
    return proc, (log.read_text().splitlines() if log.exists() else [])


def test_instructions_build_a_venv_tester_image() -> None:
    steps = instructions()
    keywords = [k for k, _ in steps]
    assert keywords[0] == "ARG" and steps[keywords.index("FROM")][1] == "${BASE_IMAGE}"
    env_path = [rest for k, rest in steps if k == "ENV" and rest.startswith("PATH=")]
    assert env_path == ['PATH="${VENV}/bin:${PATH}"']
    entry = json.loads(next(rest for k, rest in steps if k == "ENTRYPOINT"))
    assert entry == ["python3", "/app/gpu_tester.py"]
    assert ("COPY", "gpu_tester.py /app/gpu_tester.py") in steps
    assert arg_defaults()["TORCH_VERSION"] == "" and arg_defaults()["BASE_IMAGE"].startswith("nvidia/cuda:")


def test_run_step_is_valid_posix_shell() -> None:
    (run,) = [rest for keyword, rest in instructions() if keyword == "RUN"]
    assert subprocess.run(["/bin/sh", "-n", "-c", run], check=False).returncode == 0


@pytest.mark.parametrize("base", sorted(UBUNTU_PYTHONS))
def test_run_step_installs_into_a_venv_on_every_ubuntu_base(tmp_path: Path, base: str) -> None:
    bin_dir = fake_base(tmp_path, UBUNTU_PYTHONS[base], pep668=base == "ubuntu24.04")
    proc, calls = play_run(tmp_path, bin_dir, BASE_IMAGE=f"nvidia/cuda:12.6.3-runtime-{base}")
    assert proc.returncode == 0, proc.stderr
    index = arg_defaults()["TORCH_INDEX"]
    assert calls[2].startswith("rm -rf /var/lib/apt/lists/")  # the glob, as this host expands it
    assert calls[:2] + calls[3:] == [
        "apt-get update",
        "apt-get install -y --no-install-recommends python3 python3-venv",
        f"python3 -m venv {tmp_path / 'venv'}",
        "venv-python -m pip install --upgrade pip",
        f"venv-python -m pip install --index-url {index} torch",
    ]
    # what ENV PATH then finds under both names the zero-build launch line tries
    venv_bin = tmp_path / "venv" / "bin"
    assert os.path.realpath(venv_bin / "python3") == os.path.realpath(venv_bin / "python")


def test_torch_is_pinned_only_when_asked(tmp_path: Path) -> None:
    proc, calls = play_run(tmp_path, fake_base(tmp_path, "3.10.12"), TORCH_VERSION="2.5.1")
    assert proc.returncode == 0, proc.stderr
    assert calls[-1].endswith(" torch==2.5.1")


def test_a_base_without_apt_is_refused_with_one_line(tmp_path: Path) -> None:
    ubi = "nvidia/cuda:12.4.1-runtime-ubi9"
    proc, calls = play_run(tmp_path, fake_base(tmp_path, "3.9.18", apt=False), BASE_IMAGE=ubi)
    assert proc.returncode == 1 and calls == []
    assert proc.stderr.strip() == f"gpu-tester: {ubi} has no apt-get; use an nvidia/cuda ubuntu tag"
