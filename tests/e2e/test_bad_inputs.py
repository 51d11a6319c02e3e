"""Every command refuses bad input the same way (docs/cli.md, "Errors and confirmations"): exit 2, one
`error:` line (plus at most a `hint:` line), no traceback, nothing created in the emulator, and with
`-o json` one JSON document whose `error` says the same. Flags, environment variables and config
files alike."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli

GUID = "11111111-2222-3333-4444-555555555555"
IMAGE = "nvidia/cuda:12.1.1-runtime-ubuntu22.04"
BINARY = bytes(range(256)) * 4
BAD_PEM = b"-----BEGIN CERTIFICATE-----\nthis is not base64 at all!\n-----END CERTIFICATE-----\n"
CI_IDS = ("--subscription", GUID, "--tenant", GUID, "--client-id", GUID)


@dataclass(frozen=True)
class Case:
    """`command` is the command path (-o json goes right after it), `args` the rest."""

    command: tuple[str, ...]
    args: tuple[str, ...]
    says: str  # a piece of the error line: which flag or what was wrong
    env: dict[str, str] = field(default_factory=dict)
    config: str | None = None  # a config file's text, pointed at by ACAGPU_CONFIG
    files: dict[str, bytes] = field(default_factory=dict)  # {NAME: content}; "{NAME}" in args
    json: bool = True  # the case is about -o itself: no -o json to add

    @property
    def id(self) -> str:
        words = [*self.command, *self.args, *(f"{k}={v}" for k, v in self.env.items())]
        if self.config is not None:
            words.append("config")
        return " ".join(words)[:70] or "bare"


def c(command: str, *args: str, says: str, **kw: Any) -> Case:
    return Case(tuple(command.split()), args, says, **kw)


CASES = [
    # -- up ------------------------------------------------------------------------------------
    c("up", "--yes", "--gpu", "", says="--gpu"),
    c("up", "--yes", "--gpu", "   ", says="--gpu"),
    c("up", "--yes", "--run-id", "", says="--run-id"),
    c("up", "--yes", "--image", "", says="--image"),
    c("up", "--yes", "--tester-image", " ", says="--tester-image"),
    c("up", "--yes", "--gpu", "h100x", says="h100x"),
    c("up", "--yes", "--ttl", "99999999d", says="--ttl"),
    c("up", "--yes", "--ttl", "0m", says="--ttl"),
    c("up", "--yes", "--ttl", "soon", says="--ttl"),
    c("up", "--yes", "--start-timeout", "5x", says="--start-timeout"),
    c("up", "--yes", "--start-timeout", "", says="--start-timeout"),
    c("up", "--yes", "-l", "east us!", says="--location"),
    c("up", "--yes", "-l", "", says="--location"),
    c("up", "--yes", "--run-id", "ABC", says="--run-id"),
    c("up", "--yes", "--run-id", "abcdefghijklm", says="--run-id"),
    c("up", "--yes", "--max-minutes", "0", says="--max-minutes"),
    c("up", "--yes", "--max-minutes", "99999", says="--max-minutes"),
    c("up", "--yes", "--subscription", "not a guid", says="--subscription"),
    c("up", "--yes", "--subscription", "", says="--subscription"),
    c("up", "--yes", "--time-scale", "0.5", says="--time-scale"),
    c("up", "--dry-run", "--emulator", says="--dry-run"),
    c("up", "--emulator", "--yes", says="ACAGPU_EMULATOR_FAULTS", env={"ACAGPU_EMULATOR_FAULTS": "bogus"}),
    c("up", "--yes", "--image", "has space", says="has space"),
    c("up", "--run-id", "x1", says="--yes"),  # stdin is not a terminal: refuse without --yes
    c("up", "--yes", "--bogus", says="--bogus"),
    c("up", "-o", "yaml", says="yaml", json=False),
    # -- down ----------------------------------------------------------------------------------
    c("down", "--run-id", "x1", says="--yes"),
    c("down", "--run-id", "x1", "-g", "rg-x", "--yes", says="--run-id and --resource-group"),
    c("down", "--run-id", "", "--yes", says="--run-id"),
    c("down", "-g", "", "--yes", says="--resource-group"),
    # `down --run-id` of a run that does not exist is `absent`, exit 0 (idempotent cleanup; e2e tests)
    c("down", "-g", "bad group!", "--yes", says="bad group!"),
    c("down", "--subscription", "nope", "--yes", says="--subscription"),
    # -- status, and settings from the environment and the config file -------------------------
    # -- cost ----------------------------------------------------------------------------------
    c("cost", "--since", "0d", says="--since"),
    c("cost", "--since", "soon", says="--since"),
    c("cost", "--run-id", "Bad_Id", says="run id"),
    c("cost", "--subscription", "nope", says="--subscription"),
    c("status", "--subscription", "nope", says="--subscription"),
    c("status", "--subscription", " ", says="--subscription"),
    c("status", says="GUID", env={"ACAGPU_SUBSCRIPTION": "nope"}),
    c("status", says="https", env={"ACAGPU_ARM_ENDPOINT": "http://127.0.0.1:1"}),
    c("status", says="ACAGPU_CA_BUNDLE", env={"ACAGPU_CA_BUNDLE": "/nonexistent/ca.pem"}),
    c("status", says="PEM", env={"ACAGPU_CA_BUNDLE": "{GARBAGE}"}, files={"GARBAGE": BINARY}),
    # a BEGIN CERTIFICATE line and garbage after it: exit 2 at once, not 29 s of TLS retries and 7
    c("status", says="no usable certificate", env={"ACAGPU_CA_BUNDLE": "{PEM}"}, files={"PEM": BAD_PEM}),
    c("status", says="POLLING_INTERVAL", env={"ACAGPU_POLLING_INTERVAL": "abc"}),
    c("status", says="POLLING_INTERVAL", env={"ACAGPU_POLLING_INTERVAL": "-1"}),
    c("status", says="POLLING_INTERVAL", env={"ACAGPU_POLLING_INTERVAL": "nan"}),
    c("status", says="ACAGPU_CONFIG", env={"ACAGPU_CONFIG": "/nonexistent/acagpu.toml"}),
    c("status", says="not valid TOML", config="location = [\n"),
    # every source of a setting is checked alike, and the error names the source
    c("up", "--dry-run", says="ACAGPU_LOCATION is set but empty", env={"ACAGPU_LOCATION": ""}),
    c("up", "--dry-run", says="ACAGPU_LOCATION: unknown Azure region", env={"ACAGPU_LOCATION": "mars"}),
    c("up", "--dry-run", says="location in the config file", config='location = "mars"\n'),
    c("up", "--dry-run", says="ACAGPU_TTL:", env={"ACAGPU_TTL": "forever"}),
    c("status", says="location", config="location = 5\n"),
    c("status", says="GUID", config='subscription = "nope"\n', env={"ACAGPU_SUBSCRIPTION": ""}),
    c("status", says="https", config='arm_endpoint = "ftp://x"\n', env={"ACAGPU_ARM_ENDPOINT": ""}),
    c("up", "--yes", says="not valid TOML", config="gpu = \n"),
    c("up", "--dry-run", says="is not a UTF-8 text file", env={"ACAGPU_CONFIG": "{B}"}, files={"B": BINARY}),
    c("profiles", "-l", "eastus", says="ACAGPU_CONFIG", env={"ACAGPU_CONFIG": "/nonexistent/x.toml"}),
    # -- smi -----------------------------------------------------------------------------------
    c("smi", "--from-file", "{F}", "--run-id", "x1", says="--from-file and --run-id", files={"F": b"x"}),
    c("smi", "--from-file", "{F}", "-g", "rg-x", says="--from-file and --resource-group", files={"F": b"x"}),
    c("smi", "--fields", "index,name", says="--fields"),
    c("smi", "--from-file", "", says="--from-file"),
    c("smi", "--from-file", "/nonexistent/smi.txt", says="cannot read"),
    c("smi", "--from-file", "{BIN}", says="not nvidia-smi output", files={"BIN": BINARY}),
    c("smi", "--run-id", "nope1", says="nope1"),
    # -- exec ----------------------------------------------------------------------------------
    c("exec", says="ARGV"),
    c("exec", "--timeout", "0", "--", "true", says="--timeout"),
    c("exec", "--timeout", "abc", "--", "true", says="--timeout"),
    c("exec", "--run-id", "x1", "-g", "rg-x", "--", "true", says="--run-id and --resource-group"),
    c("exec", "--run-id", "nope1", "--", "true", says="nope1"),
    c("exec", "--run-id", "", "--", "true", says="--run-id"),
    # -- logs ----------------------------------------------------------------------------------
    c("logs", "--tester", "--explorer", says="--tester and --explorer"),
    c("logs", "--system", "--follow", says="--follow and --system"),
    c("logs", "--tail", "301", says="--tail"),
    c("logs", "--tail", "-1", says="--tail"),
    c("logs", "--run-id", "nope1", says="nope1"),
    c("logs", "--run-id", " ", says="--run-id"),
    # -- test ----------------------------------------------------------------------------------
    c("test", "--timeout", "5x", says="--timeout"),
    c("test", "--start-timeout", "0s", says="--start-timeout"),
    c("test", "--timeout", "", says="--timeout"),
    c("test", "--run-id", "nope1", says="nope1"),
    # -- profiles ------------------------------------------------------------------------------
    c("profiles", "-l", "mars", says="unknown Azure region"),
    c("profiles", "--offline", "-l", "mars", says="unknown Azure region"),
    c("profiles", "-l", "", says="--location"),
    c("profiles", "--offline", "--subscription", GUID, says="--offline and --subscription"),
    c("profiles", "--subscription", "nope", says="--subscription"),
    c("profiles", "-l", "West US 3!", says="--location"),
    # -- compat --------------------------------------------------------------------------------
    c("compat", "--image", IMAGE, "--driver", "999", says="--driver"),
    c("compat", "--image", IMAGE, "--driver", "", says="--driver"),
    c("compat", "--image", "", "--driver", "535.104.05", says="--image"),
    c("compat", "--image", "Not A Ref", "--driver", "535.104.05", says="Not A Ref"),
    c("compat", "--image", IMAGE, "--driver", "latest", says="--driver"),
    c("compat", "--image", IMAGE, "--driver", "535.104.05", "--require", "gpu>=1", says="gpu"),
    c("compat", "--driver", "535.104.05", says="--image"),
    # -- tester-report -------------------------------------------------------------------------
    c("tester-report", "--from-file", "/nonexistent/t.log", says="cannot read"),
    c("tester-report", "--from-file", "", says="--from-file"),
    c("tester-report", "--from-file", "{BIN}", says="ACAGPU_RESULT", files={"BIN": BINARY}),
    c("tester-report", says="--from-file"),
    # -- validate ------------------------------------------------------------------------------
    c("check", "-l", "", says="--location"),
    c("check", "-l", "east_us", "--gpu", "t4", says="invalid location"),
    c("check", "--gpu", "h100", says="unknown GPU profile"),
    c("check", "--gpu", " ", says="--gpu"),
    c("check", "--subscription", "nope", says="--subscription"),
    c("up", "--yes", "--regions", "eastus,,westus3", says="an empty region"),
    c("up", "--yes", "--regions", "eastus", "-l", "westus3", says="cannot be used together"),
    c("up", "--yes", says="regions must be", config="regions = 5\n"),
    c("validate", "--image", IMAGE, "--gpu", "t4", "--regions", "eastus,eastus", says="twice"),
    c("validate", "--image", "", "--gpu", "t4", says="--image"),
    c("validate", "--image", IMAGE, "--gpu", "", says="--gpu"),
    c("validate", "--gpu", "t4", says="--image"),
    c("validate", "--image", IMAGE, "--gpu", "t4", says="--yes"),  # billable: refused without --yes
    c("validate", "--image", IMAGE, "--gpu", "h100x", says="h100x"),
    c("validate", "--image", IMAGE, "--gpu", "t4", "--time-scale", "1", says="--time-scale"),
    c("validate", "--image", IMAGE, "--gpu", "t4", "--no-tester", "--tester-image", "x", says="--no-tester"),
    c("validate", "--image", IMAGE, "--gpu", "t4", "--ttl", "99999999d", says="--ttl"),
    c("validate", "--image", IMAGE, "--gpu", "t4", "--driver", "999", says="--driver"),
    c("validate", "--image", IMAGE, "--gpu", "t4", "--subscription", "nope", says="--subscription"),
    c("validate", "--image", IMAGE, "--gpu", "t4", "-l", "east us!", says="--location"),
    # -- guard ---------------------------------------------------------------------------------
    c("guard install", says="--location"),
    c("guard install", "-l", "not a region!", says="--location"),
    c("guard install", "-l", "westus3", "--every", "7m", says="--every"),
    c("guard install", "-l", "westus3", "--every", "5x", says="--every"),
    c("guard install", "-l", "westus3", "--image", "", says="--image"),
    c("guard status", "--limit", "0", says="--limit"),
    c("guard uninstall", says="without --yes"),
    # -- reap ----------------------------------------------------------------------------------
    c("reap", "--subscription", "nope", says="--subscription"),
    c("reap", "--subscription", GUID, "--subscription", "", says="--subscription"),
    c("reap", "--older-than", "5x", says="--older-than"),
    c("reap", "--older-than", "0d", says="--older-than"),
    c("reap", "--concurrency", "0", says="--concurrency"),
    c("reap", "--exclude", "", says="--exclude"),
    # -- tags ----------------------------------------------------------------------------------
    c("tags", "", says="REPOSITORY"),
    c("tags", "nvidia/cuda", "--since", "twelve", says="twelve"),
    c("tags", "nvidia/cuda", "--limit", "0", says="--limit"),
    c("tags", "nvidia/cuda", "--not-in", "/nonexistent/v.txt", says="--not-in"),
    c("tags", "nvidia/cuda", "--ca-bundle", "/nonexistent/ca.pem", says="--ca-bundle"),
    c("tags", "nvidia/cuda", "--ca-bundle", "{BIN}", says="PEM", files={"BIN": BINARY}),
    c("tags", "nvidia/cuda", "--ca-bundle", "{PEM}", says="no usable certificate", files={"PEM": BAD_PEM}),
    c("tags", "nvidia/cuda", "--password", "x", says="--password"),
    c("tags", "nvidia/cuda:12.1.1-runtime-ubuntu22.04", says="without a tag"),
    # -- report merge --------------------------------------------------------------------------
    c("report merge", "{BIN}", says="not a text file", files={"BIN": BINARY}),
    c("report merge", "/nonexistent/r.json", says="no such file"),
    c("report merge", "", says="FILES"),
    c("report merge", "{J}", says="lacks one of image", files={"J": b"{}"}),
    c("report merge", "{J}", "--markdown", "", says="--markdown", files={"J": b"{}"}),
    # -- ci init -------------------------------------------------------------------------------
    *(
        c("ci init", "--repo-dir", "{DIR}", *ids, *args, says=says, files={"DIR": b""})
        for ids, args, says in [
            (
                ("--subscription", "nope", "--tenant", GUID, "--client-id", GUID),
                ("-l", "westus3"),
                "--subscription",
            ),
            (
                ("--subscription", GUID, "--tenant", "nope", "--client-id", GUID),
                ("-l", "westus3"),
                "--tenant",
            ),
            (
                ("--subscription", GUID, "--tenant", GUID, "--client-id", "nope"),
                ("-l", "westus3"),
                "--client-id",
            ),
            (CI_IDS, ("-l", "mars"), "--location"),
            (CI_IDS, ("-l", "westus3", "--gpus", ""), "--gpus"),
            (CI_IDS, ("-l", "westus3", "--gpus", "h100x"), "h100x"),
            (CI_IDS, ("-l", "westus3", "--limit", "0"), "--limit"),
            (CI_IDS, ("-l", "westus3", "--branch", ""), "--branch"),
            (CI_IDS, (), "--location"),
        ]
    ),
    # -- emulator serve: refused before any server or temporary folder exists --------------------
    c("emulator serve", "--port", "99999", says="--port"),
    c("emulator serve", "--workload", "host", says="nvidia-smi", env={"PATH": "/nonexistent"}),
    c("emulator serve", "--port", "-1", says="--port"),
    c("emulator serve", "--faults", "bogus", says="--faults"),
    c("emulator replay", "{DIR}", says="holds no recording.jsonl", files={"DIR": b""}),
    c("up", "--yes", "--record", "", says="--record"),
    c("emulator serve", says="--faults", env={"ACAGPU_EMULATOR_FAULTS": "bogus:count=x"}),
    c("emulator serve", "--time-scale", "0", says="--time-scale"),
    c("emulator serve", "--workload", "gpu", says="--workload"),
    c("emulator serve", "--driver-version", "999", says="--driver-version"),
    c("emulator serve", "--env-file", "/nonexistent/dir/e.env", says="--env-file"),
    # -- local and doctor (their flags get the same checks by name) ---------------------------------
    # -- run -----------------------------------------------------------------------------------
    c("run", "--yes", "-e", "NOEQUALS", IMAGE, says="expected KEY=VALUE"),
    c("run", "--yes", "--secret-env", "ACAGPU_TEST_UNSET_X", IMAGE, says="ACAGPU_TEST_UNSET_X"),
    c("run", "--yes", "--runtime", "bogus", IMAGE, says="--runtime"),
    c("run", "--yes", "--cpu", "0", IMAGE, says="--cpu"),
    c("run", "--yes", "--memory", "lots", IMAGE, says="--memory"),
    c("run", "--yes", "--mount", "data:/x", IMAGE, says="--mount"),
    c("run", "--yes", "--registry-username", "me", IMAGE, says="--registry-password-env"),
    c("run", "--yes", " ", says="IMAGE"),
    c("local", "--runtime", "bogus", says="--runtime"),
    c("local", "--image", "", says="--image"),
    c("local", "--gpus", " ", says="--gpus"),
    c("local", "--gpus", "banana", says="--gpus"),
    c("doctor", "--from-file", "/nonexistent/run.log", says="cannot read"),
    c("doctor", "--from-file", "", says="--from-file"),
    c("doctor", "--from-file", "{BIN}", says="is not a text log", files={"BIN": BINARY}),
    c("doctor", "--cdi-path", "", says="--cdi-path"),
    # -- cost ----------------------------------------------------------------------------------
    c("cost", "--since", "soon", says="--since"),
    c("cost", "--since", "0d", says="--since"),
    c("cost", "--run-id", "", says="--run-id"),
    c("cost", "--subscription", "not-a-guid", says="--subscription"),
    # -- warm environments --------------------------------------------------------------------
    c("env create", "Bad_Name!", "--yes", says="Bad_Name!"),
    c("env create", "lab", "--yes", "--gpu", "h100x", says="h100x"),
    c("env create", "lab", "--yes", "--idle-ttl", "soon", says="--idle-ttl"),
    c("env create", "lab", "--yes", "-l", "mars", says="mars"),
    c("env show", "Bad_Name!", says="Bad_Name!"),
    c("env delete", "", "--yes", says="NAME"),
    c("env create", "lab", says="--yes"),  # stdin is not a terminal: refuse without --yes
    c("env delete", "lab", says="--yes"),
    # -- image stage: refused before anything is made ---------------------------------------------
    c("image stage", "--env", "lab", says="IMAGES"),
    c("image stage", "nvidia/cuda:12.4.1-base-ubuntu22.04", "--env", "Bad_Name!", says="Bad_Name!"),
    c("image stage", "not an image!", "--env", "lab", says="not an image!"),
    c("image stage", "nvidia/cuda:12.4.1-base-ubuntu22.04", "--env", "nolab", says="nolab"),
    # -- run: the user's own container --------------------------------------------------------
    c("run", "--yes", "", says="IMAGE"),
    c("run", "--yes", "--gpu", "h100x", "busybox", says="h100x"),
    c("run", "--yes", "-e", "NOEQUALS", "busybox", says="-e"),
    c("run", "--yes", "--secret-env", "ACAGPU_TEST_UNSET_SECRET", "busybox", says="ACAGPU_TEST_UNSET_SECRET"),
    c("run", "--yes", "--max-minutes", "0", "busybox", says="--max-minutes"),
    c("run", "--yes", "--cpu", "-1", "busybox", says="--cpu"),
    c("run", "--yes", "--runtime", "bogus", "busybox", says="--runtime"),
    # -- serve --------------------------------------------------------------------------------
    c("serve", "--yes", says="IMAGE is required"),
    c("serve", "--yes", "--load-timeout", "50m", IMAGE, says="--load-timeout"),
    c("serve", "--yes", "--min-replicas", "3", "--max-replicas", "2", IMAGE, says="--min-replicas"),
    c("serve", "--yes", "--health", "health", IMAGE, says="--health"),
    c("serve", "--yes", "--secret-env", "ACAGPU_TEST_UNSET_X", IMAGE, says="ACAGPU_TEST_UNSET_X"),
    c("serve", "--measure", "2", says="IMAGE is required"),
    # -- attach / results (a queue run read back) -----------------------------------------------
    c("attach", says="RUN_ID"),
    c("attach", "NOPE_", says="invalid run id"),
    c("results", "NOPE_", says="invalid run id"),
    # -- the group itself ----------------------------------------------------------------------
    c("nope", says="No such command"),
    c("ci nope", says="No such command"),
]


def _emulator_temp_dirs() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("acagpu-emulator-")}


@pytest.fixture(autouse=True)
def _own_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A temporary folder of this test's own, so other processes' emulators cannot blur the check."""
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own))


def test_there_are_enough_cases_and_every_command_has_some() -> None:
    assert len(CASES) >= 90
    from aca_gpu.cli import COMMANDS

    covered = {case.command[0] for case in CASES}
    assert set(COMMANDS) <= covered, set(COMMANDS) - covered


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input(case: Case, emu: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names: dict[str, str] = {}
    for name, content in case.files.items():
        if name == "DIR":
            names[name] = str(tmp_path / "repo")
            os.mkdir(names[name])
            continue
        path = tmp_path / name
        path.write_bytes(content)
        names[name] = str(path)

    def fill(text: str) -> str:
        for name, value in names.items():
            text = text.replace("{" + name + "}", value)
        return text

    if case.config is not None:
        config = tmp_path / "config.toml"
        config.write_text(case.config, encoding="utf-8")
        monkeypatch.setenv("ACAGPU_CONFIG", str(config))
    for key, value in case.env.items():
        monkeypatch.setenv(key, fill(value))
    args = [*case.command, *(("-o", "json") if case.json else ()), *map(fill, case.args)]
    before = _emulator_temp_dirs()

    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("error: "), result.stderr
    assert all(line.startswith("hint: ") for line in lines[1:]), result.stderr
    assert len(lines) <= 2, result.stderr
    assert case.says.lower() in lines[0].lower(), lines[0]
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if case.json:
        doc = json.loads(result.stdout)  # exactly one document
        assert doc["schema"] == 1 and doc["status"] == "error"
        assert doc["error"]["exit_code"] == 2 and doc["error"]["message"] == lines[0].removeprefix("error: ")
    assert emu.inventory()["empty"], "a bad input created something"
    assert _emulator_temp_dirs() <= before, "a temporary emulator folder was left behind"
    if "DIR" in names:
        assert not os.listdir(names["DIR"]), "ci init wrote files"


def test_an_unknown_config_key_is_named_with_the_key_it_resembles(
    emu: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('locaton = "westus3"\n', encoding="utf-8")
    monkeypatch.setenv("ACAGPU_CONFIG", str(config))
    result = CliRunner().invoke(cli, ["up", "--dry-run", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert f"warning: config file {config}: unknown key 'locaton' (did you mean 'location'?)" in result.stderr


def test_emulator_serve_on_a_port_in_use_is_bad_input() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        before = _emulator_temp_dirs()
        result = CliRunner().invoke(cli, ["emulator", "serve", "--port", str(port), "-o", "json"])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"error: --port {port}: cannot listen")
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout)["error"]["exit_code"] == 2
    assert _emulator_temp_dirs() <= before, "the temporary CA folder was left behind"
