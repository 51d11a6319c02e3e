"""Microsoft's Azure CLI against `acagpu emulator serve`: the GPU tutorial's commands, pass/fail each.

Usage: python benchmarks/azcli_check.py --az /path/to/az [--time-scale 0.01] [--json FILE]

The `az` given must come from its own virtualenv (`pip install azure-cli==2.91.0`); nothing of it is
imported here. The script starts the emulator as a subprocess, registers a cloud whose resource
manager is the emulator, trusts the emulator's CA (REQUESTS_CA_BUNDLE), signs in with
`az login --identity` through the emulator's App Service style managed-identity endpoint, and runs
the seed tutorial's commands in a throw-away AZURE_CONFIG_DIR. `containerapp exec` runs under a
pseudo-terminal (the CLI's exec needs one). One line per command: PASS/FAIL, seconds, and on a
failure the last line az printed. Exit status 0 when every command passed.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RG, ENV, APP, JOB = "cuda-playground", "cuda-test", "cuda-explorer", "gpu-tester"
LOCATION = "westus3"
IMAGE = "nvidia/cuda:12.1.1-runtime-ubuntu22.04"
GPU_TYPE = "Consumption-GPU-NC8as-T4"
CLOUD = "AcaGpuEmulator"


@dataclass
class Step:
    name: str
    args: list[str]
    check: Callable[[str], bool] = lambda out: True
    tty: bool = False
    timeout: float = 180.0
    follows: bool = False  # a follower may still be streaming at the timeout: that is not a failure


@dataclass
class Outcome:
    name: str
    command: str
    ok: bool
    seconds: float
    detail: str = ""
    output: str = field(default="", repr=False)


def _start_emulator(workdir: Path, time_scale: float) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    env_file = workdir / "emulator.env"
    acagpu = Path(sys.executable).with_name("acagpu")
    cmd = [str(acagpu), "emulator", "serve", "--registered", "--time-scale", str(time_scale)]
    proc = subprocess.Popen(
        [*cmd, "--env-file", str(env_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if env_file.exists() and "ACAGPU_TOKEN" in env_file.read_text():
            break
        if proc.poll() is not None:
            raise SystemExit(f"acagpu emulator serve exited with {proc.returncode}")
        time.sleep(0.1)
    else:
        proc.terminate()
        raise SystemExit("acagpu emulator serve did not write its env file within 60 s")
    values: dict[str, str] = {}
    for line in env_file.read_text().splitlines():
        line = line.removeprefix("export ").strip()
        if "=" in line:
            key, _, value = line.partition("=")
            values[key] = shlex.split(value)[0] if value else ""
    return proc, values


def _az_env(workdir: Path, emu: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGPU_", "AZURE_", "IDENTITY_"))}
    env.update(
        {
            "AZURE_CONFIG_DIR": str(workdir / "azure"),
            "AZURE_CORE_COLLECT_TELEMETRY": "no",
            "AZURE_CORE_NO_COLOR": "true",
            "AZURE_CORE_SURVEY_MESSAGE": "false",
            "AZURE_EXTENSION_USE_DYNAMIC_INSTALL": "no",
            "REQUESTS_CA_BUNDLE": emu["ACAGPU_CA_BUNDLE"],
            "WEBSOCKET_CLIENT_CA_BUNDLE": emu["ACAGPU_CA_BUNDLE"],  # exec's websocket-client reads this one
            "IDENTITY_ENDPOINT": emu["ACAGPU_ARM_ENDPOINT"] + "/msi/token",
            "IDENTITY_HEADER": emu["ACAGPU_TOKEN"],
        }
    )
    return env


def _run_pipe(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out + "\n(timed out)"
    return done.returncode, done.stdout + done.stderr


def _run_tty(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run under a pseudo-terminal (the CLI's exec puts its terminal in cbreak mode)."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execvpe(cmd[0], cmd, env)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if data:
                chunks.append(data)
                continue
        waited, raw = os.waitpid(pid, os.WNOHANG)
        if waited:
            status = raw
            break
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
        return 124, b"".join(chunks).decode("utf-8", "replace") + "\n(timed out)"
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")


def _steps(emu: dict[str, str], state: dict[str, str]) -> list[Step]:
    arm = emu["ACAGPU_ARM_ENDPOINT"]
    g = ["-g", RG]

    def has(*words: str) -> Callable[[str], bool]:
        return lambda out: all(w in out for w in words)

    def remember_execution(out: str) -> bool:
        try:
            doc = json.loads(out[out.index("{") :])
        except ValueError:
            return False
        state["execution"] = str(doc.get("name", ""))
        return bool(state["execution"])

    return [
        Step("cloud register", ["cloud", "register", "-n", CLOUD, "--endpoint-resource-manager", arm]),
        Step("cloud set", ["cloud", "set", "-n", CLOUD]),
        Step("login --identity", ["login", "--identity", "-o", "json"], has(emu["ACAGPU_SUBSCRIPTION"])),
        Step("group create", ["group", "create", "-l", LOCATION, "-n", RG, "-o", "json"], has('"Succeeded"')),
        Step(
            "containerapp env create --enable-workload-profiles",
            [
                "containerapp",
                "env",
                "create",
                "-n",
                ENV,
                *g,
                "-l",
                LOCATION,
                "--enable-workload-profiles",
                "--logs-destination",
                "none",
                "-o",
                "json",
            ],
            has('"Succeeded"'),
        ),
        Step(
            "containerapp env workload-profile add (GPU)",
            [
                "containerapp",
                "env",
                "workload-profile",
                "add",
                "-n",
                ENV,
                *g,
                "--workload-profile-name",
                "gpu",
                "--workload-profile-type",
                GPU_TYPE,
                "-o",
                "json",
            ],
            has(GPU_TYPE),
        ),
        Step(
            "containerapp create --workload-profile-name",
            [
                "containerapp",
                "create",
                "-n",
                APP,
                *g,
                "--environment",
                ENV,
                "--workload-profile-name",
                "gpu",
                "--cpu",
                "8",
                "--memory",
                "56Gi",
                "--image",
                IMAGE,
                "--command",
                "sleep",
                "--args",
                "12h",
                "--min-replicas",
                "1",
                "--max-replicas",
                "1",
                "-o",
                "json",
            ],
            has('"Succeeded"', '"gpu"'),
        ),
        Step(
            "containerapp exec --command nvidia-smi (pty)",
            ["containerapp", "exec", "-n", APP, *g, "--command", "nvidia-smi"],
            has("NVIDIA-SMI", "Tesla T4"),
            tty=True,
            timeout=120,
        ),
        Step(
            "containerapp logs show (console)",
            ["containerapp", "logs", "show", "-n", APP, *g, "--tail", "20"],
            has("CUDA Version 12.1.1"),
        ),
        Step(
            "containerapp logs show --type system",
            ["containerapp", "logs", "show", "-n", APP, *g, "--type", "system", "--tail", "20"],
            has("ContainerAppUpdate"),
        ),
        Step(
            "containerapp logs show --follow (console)",
            ["containerapp", "logs", "show", "-n", APP, *g, "--follow", "--tail", "5"],
            # quiet after the banner: heartbeats, then the server ends the stream and az exits (as on ACA)
            has("NGC-DL-CONTAINER-LICENSE", "No logs since last 60 seconds"),
            timeout=60,
        ),
        Step(
            "containerapp logs show --follow --type system",
            ["containerapp", "logs", "show", "-n", APP, *g, "--follow", "--type", "system", "--tail", "5"],
            has("ContainerStarted"),
            timeout=10,
            follows=True,
        ),
        Step(
            "containerapp update",
            ["containerapp", "update", "-n", APP, *g, "--set-env-vars", "PROBE=1", "-o", "json"],
            has('"PROBE"', '"Succeeded"'),
        ),
        Step(
            "containerapp job create",
            [
                "containerapp",
                "job",
                "create",
                "-n",
                JOB,
                *g,
                "--environment",
                ENV,
                "--workload-profile-name",
                "gpu",
                "--trigger-type",
                "Manual",
                "--replica-timeout",
                "600",
                "--replica-retry-limit",
                "0",
                "--image",
                IMAGE,
                "--cpu",
                "8",
                "--memory",
                "56Gi",
                "--command",
                "nvidia-smi",
                "-o",
                "json",
            ],
            has('"Succeeded"', '"Manual"'),
        ),
        Step(
            "containerapp job start",
            ["containerapp", "job", "start", "-n", JOB, *g, "-o", "json"],
            remember_execution,
        ),
        Step(
            "containerapp job update",
            ["containerapp", "job", "update", "-n", JOB, *g, "--replica-timeout", "900", "-o", "json"],
            has('"replicaTimeout": 900'),
        ),
        Step(
            "containerapp job execution list",
            ["containerapp", "job", "execution", "list", "-n", JOB, *g, "-o", "json"],
            lambda out: state.get("execution", "?") in out,
        ),
        Step(
            "containerapp job execution show",
            [
                "containerapp",
                "job",
                "execution",
                "show",
                "-n",
                JOB,
                *g,
                "--job-execution-name",
                "{execution}",
                "-o",
                "json",
            ],
            lambda out: state.get("execution", "?") in out,
        ),
        Step("resource list -g", ["resource", "list", *g, "-o", "json"], has(ENV, APP, JOB)),
        Step("group delete", ["group", "delete", "-n", RG, "--yes"], timeout=300),
        Step("group exists (after delete)", ["group", "exists", "-n", RG], has("false")),
    ]


def run(az: str, time_scale: float) -> list[Outcome]:
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="acagpu-azcli-") as tmp:
        workdir = Path(tmp)
        proc, emu = _start_emulator(workdir, time_scale)
        try:
            env = _az_env(workdir, emu)
            state: dict[str, str] = {}
            for step in _steps(emu, state):
                args = [a.format(**state) if "{" in a else a for a in step.args]
                cmd = [az, *args]
                started = time.monotonic()
                code, out = (_run_tty if step.tty else _run_pipe)(cmd, env, step.timeout)
                seconds = time.monotonic() - started
                ok = (code == 0 or (step.follows and code == 124)) and step.check(out)
                lines = [ln for ln in out.strip().splitlines() if ln.strip()]
                detail = "" if ok else f"exit {code}: {lines[-1][:200] if lines else '(no output)'}"
                outcomes.append(Outcome(step.name, "az " + shlex.join(args), ok, seconds, detail, out))
                print(
                    f"{'PASS' if ok else 'FAIL'}  {seconds:6.1f}s  {step.name}"
                    + (f"  -- {detail}" if detail else ""),
                    flush=True,
                )
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--az", required=True, help="the az executable of a separate virtualenv")
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--json", type=Path, help="also write every outcome (with az's output) here")
    opts = parser.parse_args(argv)
    version = subprocess.run([opts.az, "version", "-o", "json"], capture_output=True, text=True, check=False)
    try:
        print("azure-cli", json.loads(version.stdout)["azure-cli"], flush=True)
    except (ValueError, KeyError):
        print(f"error: {opts.az} is not a working az ({version.stderr.strip()[:200]})", file=sys.stderr)
        return 2
    outcomes = run(opts.az, opts.time_scale)
    passed = sum(o.ok for o in outcomes)
    print(f"{passed} passed, {len(outcomes) - passed} failed")
    if opts.json:
        opts.json.write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    return 0 if passed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
