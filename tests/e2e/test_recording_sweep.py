"""Every recorded journey, swept for secrets: `--record` on the commands a user shares recordings of,
against one `acagpu emulator serve` in a second shell, then every file of every recording scanned
for what a secret looks like, by shape (high-entropy strings, JWTs, connection strings, SAS
signatures, passwords, bearer tokens) and by value (the emulator's storage keys, its ARM token, the
user's `--secret-env` value, the guard's webhook URL), none of which the recording may hold.

Journeys: `up`; `up --keep`, `smi`, `exec` and `down`; `env create`, then `run --env` with
`--create-share` and `--secret-env`; `serve --env` with `--secret-env` and `--measure`; `validate`;
`guard install --notify`; `reap --notify`.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from aca_gpu.emulator.server import SUBSCRIPTION
from tests.e2e.serving import ACAGPU, emulator_serve, free_port

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
USER_SECRET = "Hq7vLr2XwT9zPk4mNb6Yc"  # a user's API token: no key=value around it in the log
WEBHOOK = "https://hooks.slack.com/services/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"

# what a secret looks like, whatever carries it
SHAPES = {
    "jwt": re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    "connection string key": re.compile(r"(?i)(AccountKey|SharedAccessKey)=(?!<)[^;\"\s]+"),
    "SAS": re.compile(r"(?i)(SharedAccessSignature=|[?&]sig=)(?!<|%3C)[^&\"\s]+"),
    "password field": re.compile(r'(?i)"[a-z_]*password[a-z_]*"\s*:\s*"(?!<secret-)[^"]+"'),
    "secret value": re.compile(r'"secrets"\s*:\s*\[[^\]]*"value"\s*:\s*"(?!<secret-)[^"]+"'),
    "key value": re.compile(r'"keyName"\s*:\s*"[^"]+"\s*,\s*"value"\s*:\s*"(?!<secret-)[^"]+"'),
    "bearer": re.compile(r"(?i)bearer\s+(?!<)[A-Za-z0-9._~+/=-]{8,}"),
    "token field": re.compile(r'(?i)"[a-z_]*token"\s*:\s*"(?!<secret-|<jwt-)[^"]+"'),
}
# a run of base64 (or URL-safe base64) characters long enough to be a key
RUN = re.compile(r"[A-Za-z0-9+/_-]{20,}={0,2}")
# placeholders the sanitizer writes and ids that are not secrets by construction: sha256 digests
# and container ids are hex (at most 4 bits a character), GUIDs are replaced by counters
SAFE = re.compile(r"(?i)^(sha256:)?[0-9a-f-]+$|^<[a-z]+-\d+>$")


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def high_entropy(text: str) -> list[str]:
    """Base64-looking runs of 20+ characters with upper and lower case and digits whose entropy is
    above 3/4 of the most their length allows: keys and tokens, not names or paths. A CamelCase
    name (`ManagedEnvironmentConsumptionNCA100Gpus`, a usage's name) has an upper-case letter a
    word, under 3 in 10 of its letters; random base64 has about half."""
    found = []
    for run in RUN.findall(text):
        body = run.rstrip("=")
        if SAFE.match(body):
            continue
        for part in re.split(r"[-_/]{1,}", body) if not re.search(r"[+=]", run) else [body]:
            letters = [c for c in part if c.isalpha()]
            upper = sum(c.isupper() for c in letters) / max(len(letters), 1)
            digits = sum(c.isdigit() for c in part)
            words = len(part) < 20 or not 0.3 <= upper < 1 or digits < 2
            if not words and _entropy(part) > 0.75 * math.log2(min(len(part), 64)):
                found.append(part)
    return found


def scan(folder: Path, values: list[str]) -> list[str]:
    """What in any file of the recording folder looks like a secret, or is one we know."""
    leaks: list[str] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        leaks += [
            f"{path.name}: {kind}: {m.group()[:40]}" for kind, rx in SHAPES.items() for m in rx.finditer(text)
        ]
        leaks += [f"{path.name}: high entropy: {s[:40]}" for s in high_entropy(text)]
        for value in values:
            for form in {value, quote(value, safe=""), value[:16]}:
                if form in text:
                    leaks.append(f"{path.name}: known value {value[:6]}...")
    return leaks


def test_the_scanner_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The sweep can fail: every shape, a bare storage key, and a known value are found."""
    key = "l22lYpb2mOUlEn6XbOdC7S98CknUSAsQH1O352Qvxht72ckldS4c9Zz6f8QNfT3Q/ZjLY36yXkvxoQJUNcT0IQ=="
    (tmp_path / "recording.jsonl").write_text(
        json.dumps({"keys": [{"keyName": "key1", "value": "x"}], "log": f"k {key} v {USER_SECRET}"})
        + '\n{"secrets": [{"name": "a", "value": "b"}], "password": "p", "token": "t"}'
        + "\nAuthorization: Bearer abcdefgh1234 AccountKey=abc; ?sv=1&sig=abc eyJhbGciOi.eyJzdWIiOi.x\n",
        encoding="utf-8",
    )
    found = scan(tmp_path, [USER_SECRET])
    kinds = {line.split(": ")[1] for line in found}
    assert kinds == {*SHAPES, "high entropy", "known value Hq7vLr..."}, found
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "meta.json").write_text(
        '{"uri": "/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/rg-acagpu-env-lab'
        '/providers/Microsoft.App/jobs/run-b010b9/executions/run-b010b9-0djeorf", "value": "<secret-1>",'
        ' "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "digest": "sha256:' + "ab12" * 16 + '",'
        ' "token": "<secret-2>", "accountKey": "<secret-3>", "api": "2024-02-02-preview, 2024-03-01"}',
        encoding="utf-8",
    )
    assert scan(clean, [USER_SECRET]) == []


def _storage_keys(emu: dict[str, str], account: str) -> list[str]:
    base = f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}"
    answer = requests.post(
        f"{base}/resourceGroups/rg-acagpu-env-lab/providers/Microsoft.Storage/storageAccounts/{account}/listKeys",
        params={"api-version": "2023-05-01"},
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=30,
    )
    answer.raise_for_status()
    return [str(k["value"]) for k in answer.json()["keys"]]


@pytest.mark.slow(39)
def test_every_recorded_journey_holds_no_secret(tmp_path: Path) -> None:
    recordings = tmp_path / "recordings"
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
        shell |= emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "NO_COLOR": "1", "MY_API_TOKEN": USER_SECRET}

        def record(name: str, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
            words = 2 if args[0] in ("env", "guard") else 1  # the command's own words, then options
            done = subprocess.run(
                [*ACAGPU, *args[:words], "--record", str(recordings / name), *args[words:]],
                env=shell,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == code, f"{name}: {done.stderr}"
            return done

        record("up", "up", "--yes")
        kept = json.loads(record("up-keep", "up", "--yes", "--keep", "-o", "json").stdout)["run_id"]
        record("smi", "smi", "--run-id", kept)
        assert record("exec", "exec", "--run-id", kept, "--", "echo", "hi").stdout == "hi\n"
        record("down", "down", "--yes", "--run-id", kept)
        record("env-create", "env", "create", "lab", "--gpu", "t4", "--yes")
        ran = record("run-env", "run", "--yes", "--env", "lab", "--mount", "models:/m", "--create-share",
                     "--secret-env", "MY_API_TOKEN", "-o", "json", IMAGE, "--", "sh", "-c",
                     "echo $MY_API_TOKEN")  # fmt: skip
        account = json.loads(ran.stdout)["shares"]["account"]
        port = str(free_port())
        served = record("serve", "serve", "--yes", "--env", "lab", "--run-id", "rec1", "--port", port,
                        "--secret-env", "MY_API_TOKEN", "--measure", "1", "--cooldown", "1", "-o", "json",
                        "python:3.12-slim", "--", "python3", "-m", "http.server", port)  # fmt: skip
        assert json.loads(served.stdout)["status"] == "measured", served.stderr[-2000:]
        record("validate", "validate", "--yes", "--image", IMAGE, "--gpu", "t4")
        record("guard", "guard", "install", "-l", "eastus", "--every", "1h", "--yes", "--notify", WEBHOOK)
        record("reap", "reap", "--notify", WEBHOOK)  # a dry run: the URL is only in its arguments
        keys = _storage_keys(emu, account)
        known = [*keys, emu["ACAGPU_TOKEN"], SUBSCRIPTION, USER_SECRET, WEBHOOK, WEBHOOK.rsplit("/", 1)[1]]

    folders = sorted(p for p in recordings.iterdir() if p.is_dir())
    assert [p.name for p in folders] == sorted(
        [
            "up",
            "up-keep",
            "smi",
            "exec",
            "down",
            "env-create",
            "run-env",
            "serve",
            "validate",
            "guard",
            "reap",
        ]
    )
    assert all((p / "recording.jsonl").stat().st_size > 0 for p in folders)
    assert "listKeys" in (recordings / "run-env" / "recording.jsonl").read_text(encoding="utf-8")
    # the served app's secret went to ARM in its PUT: the recording holds its placeholder only
    assert '"value": "<secret-' in (recordings / "serve" / "recording.jsonl").read_text(encoding="utf-8")
    leaks = [f"{p.name}/{leak}" for p in folders for leak in scan(p, known)]
    assert leaks == [], "\n".join(leaks)
