"""`acagpu serve --env lab` of a real stdlib HTTP model stand-in against the emulator. The issue's
done-when: a stand-in that loads for 20 real seconds answers a real `curl` at the printed URL;
`--measure 3 --requests 50` waits for zero replicas each cycle, its three cold cycles' phases add
up to their end-to-end time and the warm requests give p50/p95; a load longer than the (scaled)
ingress cut-off is flagged with the three remedies and their monthly cost; `down` leaves nothing
and nothing bills. The 20 s loads are sleeps (wall time, little CPU): about 90 s of wall time."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

import acagpu as api
from aca_gpu.cli import cli
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.workflow.report.html import render
from tests.e2e.serving import free_port

IMAGE = "python:3.12-slim"
SECRET = "tok-3f9a1c"
STANDIN = """
import http.server, os, sys, time
time.sleep(float(sys.argv[2]))  # the model loads
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        secret = len(os.environ.get("MODEL_TOKEN", ""))  # its length only: the value is never printed
        body = b'{"model": "ready", "token_length": %d}' % secret
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@pytest.fixture
def emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    """Scale 0.01: the ingress cut-off is 2.4 wall s, a cooldown of 400 s is 4 wall s (room for the
    GPU check after the first answer on a busy machine: 1.5 s was not, once, in CI's script), one of
    20 s 0.2 wall s."""
    with EmulatorServer(time_scale=0.01, registered=True, workdir=tmp_path / "emu") as server:
        for key, value in server.client_env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("ACAGPU_POLLING_INTERVAL", "0.1")
        monkeypatch.delenv("ACAGPU_CONFIG", raising=False)
        yield server


def acagpu(*args: str) -> dict[str, Any]:
    """The command's JSON document (`-o json` before IMAGE: what follows IMAGE is its command)."""
    where = args.index(IMAGE) if IMAGE in args else len(args)
    result = CliRunner().invoke(cli, [*args[:where], "-o", "json", *args[where:]])
    assert result.exit_code == 0, (result.exit_code, result.output, result.stderr)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


LOAD_S = 20.0  # the stand-in: a model that loads for 20 real seconds


@pytest.mark.slow(98)
def test_serve_answers_measures_and_leaves_nothing(
    emulator: EmulatorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "standin.py"
    script.write_text(STANDIN, encoding="utf-8")
    port = str(free_port())
    monkeypatch.setenv("MODEL_TOKEN", SECRET)
    # the client looks at the app every 2 s while a model loads (its default pace), not 20 times a
    # second: 80 s of loads would otherwise cost seconds of CPU in ARM reads alone
    monkeypatch.setenv("ACAGPU_POLLING_INTERVAL", "0.2")
    acagpu("env", "create", "lab", "--yes")
    served = acagpu(
        "serve", "--env", "lab", "--run-id", "sv1", "--port", port, "--cooldown", "400", "--yes",
        "--secret-env", "MODEL_TOKEN",
        IMAGE, "--", "python3", str(script), port, str(LOAD_S),
    )  # fmt: skip
    assert served["status"] == "serving" and served["first_answer"]["status"] == 200
    assert served["first_answer"]["end_to_end_s"] >= LOAD_S
    assert served["gpu_use"]["checked"] and served["gpu_use"]["idle"] is False, served["gpu_use"]
    if shutil.which("curl"):  # a real curl at the printed URL
        done = subprocess.run(
            ["curl", "-sS", "--max-time", "30", served["url"] + "/"], capture_output=True, text=True
        )
        assert done.returncode == 0 and json.loads(done.stdout) == {
            "model": "ready",
            "token_length": len(SECRET),
        }
    answer = requests.get(served["url"] + "/", timeout=30)
    assert answer.status_code == 200 and answer.json() == {"model": "ready", "token_length": len(SECRET)}
    assert SECRET not in json.dumps(served)

    measured = acagpu("serve", "--run-id", "sv1", "--measure", "3", "--requests", "50")
    doc = measured["measurement"]
    cycles = doc["cycles"]
    assert [c["status"] for c in cycles] == [200, 200, 200]
    for cycle in cycles:
        assert cycle["woke_from_zero"], cycle
        assert abs(cycle["sum_s"] - cycle["end_to_end_s"]) <= 2.0
        assert cycle["end_to_end_s"] >= LOAD_S  # each cycle waited for the whole load
    warm = doc["warm"]
    assert warm["ok"] == 50 and 0 < warm["total_s"]["p50"] <= warm["total_s"]["p95"], warm
    # 20 s of load outlast the ingress cut-off (240 s x 0.01 = 2.4 wall s here): every cycle flagged,
    # with what each way out costs a month
    assert doc["flagged_cycles"] == [1, 2, 3], doc["flagged_cycles"]
    assert [r["remedy"] for r in doc["remedies"]] == [
        "--min-replicas 1", "premium ingress", "client retries with backoff",
    ]  # fmt: skip
    assert doc["remedies"][0]["usd_per_month"] > doc["remedies"][2]["usd_per_month"] == 0.0
    # the real document drawn by `report --html`: a bar segment per phase, each naming its clock
    page = render(measured, "serve.json")
    assert page.count(" clock)</title>") == sum(len(c["phases"]) for c in cycles) and "TODO" not in page

    runs = {r["run_id"]: r for r in acagpu("status")["runs"]}
    assert runs["sv1"]["served"]["url"] == served["url"]
    assert runs["sv1"]["served"]["app"] == "serve-sv1"
    # a served app is no `up --keep` run, and its phase is its replicas' (never `starting` at zero)
    assert runs["sv1"]["keep"] is False, runs["sv1"]
    serving = "serving" if runs["sv1"]["served"]["replicas"] else "scaled-to-zero"
    assert runs["sv1"]["phase"] in (serving, "starting"), runs["sv1"]  # from the same look
    # the replicas' time so far, from the app's events: three starts (first answer, two cycles)
    assert runs["sv1"]["served"]["replicas_seen"] >= 3 and runs["sv1"]["served"]["usd_estimate"] > 0
    # one figure: the run's spend is its served replicas' (not the group's age, not zero at zero)
    assert runs["sv1"]["cost"]["usd_estimate"] == runs["sv1"]["served"]["usd_estimate"]

    down = acagpu("down", "--run-id", "sv1", "--yes")
    # `cost` knows the served run: the estimate `down` recorded beside the emulator's bill
    row = next(r for r in acagpu("cost", "--run-id", "sv1", "--min-difference", "0")["runs"])
    assert row["estimate_usd"] == pytest.approx(down["served_usd_estimate"], rel=1e-3)
    # event stamps have whole seconds: each replica life read from them is exact to about a second
    second = served["price"]["usd_per_hour"] / 3600
    slack = (runs["sv1"]["served"]["replicas_seen"] + 1) * second
    assert abs(row["billed_usd"] - row["estimate_usd"]) <= slack, (row, slack)
    assert row["estimate_usd"] >= runs["sv1"]["cost"]["usd_estimate"]  # status's, a moment earlier
    inventory = emulator.inventory()
    assert not [r for r in inventory["replicas"] if r["owner"] == "serve-sv1"]
    assert all(b.ended_wall is not None for b in emulator.ctx.state.billing)  # type: ignore[union-attr]


def test_the_python_api_serves_in_a_block_and_deletes_on_exit(
    emulator: EmulatorServer, tmp_path: Path
) -> None:
    script = tmp_path / "standin.py"
    script.write_text(STANDIN, encoding="utf-8")
    port = free_port()
    acagpu("env", "create", "lab", "--yes")
    with api.serve(
        IMAGE, ["python3", str(script), str(port), "0.2"], env="lab", port=port, cooldown=20, run_id="api1"
    ) as app:
        assert app.get("/").status == 200
        assert requests.get(app.url, timeout=30).json()["model"] == "ready"
    assert not [a for a in emulator.inventory()["apps"] if a.get("name") == "serve-api1"]
    assert all(b.ended_wall is not None for b in emulator.ctx.state.billing)  # type: ignore[union-attr]


def test_a_served_app_past_its_ttl_is_reaped(emulator: EmulatorServer, tmp_path: Path) -> None:
    """A served app is a run: once its TTL has passed, `reap` (as the guard) deletes it, billing first."""
    import time

    script = tmp_path / "standin.py"
    script.write_text(STANDIN, encoding="utf-8")
    port = str(free_port())
    acagpu("env", "create", "lab", "--yes")
    served = acagpu(
        "serve", "--env", "lab", "--run-id", "ttl1", "--ttl", "1s", "--port", port, "--yes",
        IMAGE, "--", "python3", str(script), port, "0.1",
    )  # fmt: skip
    assert served["status"] == "serving"
    time.sleep(1.2)
    reaped = acagpu("reap", "--yes")
    assert "rg-acagpu-ttl1" in json.dumps(reaped)
    row = next(r for r in acagpu("cost", "--run-id", "ttl1", "--min-difference", "0")["runs"])
    assert row["estimate_usd"] and row["billed_usd"], row  # reap left the served run's estimate
    assert not [a for a in emulator.inventory()["apps"] if a["name"] == "serve-ttl1"]
    assert all(b.ended_wall is not None for b in emulator.ctx.state.billing)  # type: ignore[union-attr]
