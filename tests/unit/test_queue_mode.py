"""Queue mode's pure parts: KEDA's start rule, the checks before anything exists, the Event job's
body, the worker's container and the worker's own refusal without its settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aca_gpu.azure.app_bodies import job_body
from aca_gpu.config import Settings
from aca_gpu.emulator.providers.app.keda import wanted
from aca_gpu.errors import BadInput
from aca_gpu.models import ContainerDef, JobSpec
from aca_gpu.workflow.queue import worker
from aca_gpu.workflow.queue.spec import MAX_MESSAGE_BYTES, decode, encode, make_queue_spec
from aca_gpu.workflow.workload.plan import RunRequest, RunSpec, make_run_spec


def _run(**kw: object) -> RunSpec:
    request = RunRequest(image="busybox", command=("sh", "-c", "true"), env_name="lab", run_id="q1", **kw)  # type: ignore[arg-type]
    return make_run_spec(Settings(), request, owner="me")


def _items(tmp_path: Path, *items: str) -> str:
    path = tmp_path / "items.json"
    path.write_text(json.dumps(list(items)))
    return str(path)


@pytest.mark.parametrize(
    ("messages", "length", "running", "least", "most", "starts"),
    [
        (20, 1, 0, 0, 3, 3),  # capped by maxExecutions
        (20, 1, 3, 0, 3, 0),  # all P running: none more
        (2, 1, 1, 0, 3, 1),  # invisible (in-flight) messages count: 2 wanted, 1 runs
        (0, 1, 0, 0, 3, 0),  # an empty queue starts nothing
        (0, 1, 0, 2, 3, 2),  # the warm floor (minExecutions) with nothing waiting
        (7, 5, 0, 0, 10, 2),  # queueLength 5: ceil(7 / 5)
    ],
)
def test_keda_starts_what_the_queue_wants_within_min_and_max(
    messages: int, length: int, running: int, least: int, most: int, starts: int
) -> None:
    assert wanted(messages, length, running, least=least, most=most) == starts


def test_queue_mode_refusals_before_anything_exists(tmp_path: Path) -> None:
    items = _items(tmp_path, "a", "b")
    with pytest.raises(BadInput, match="give --map FILE too"):
        make_queue_spec(_run(), map_file=None, workers=2)
    with pytest.raises(BadInput, match="needs a warm environment"):
        spec = make_run_spec(
            Settings(), RunRequest(image="busybox", command=("true",), run_id="q1"), owner="me"
        )
        make_queue_spec(spec, map_file=items, workers=2)
    with pytest.raises(BadInput, match="needs the command after"):
        no_command = make_run_spec(
            Settings(), RunRequest(image="busybox", env_name="lab", run_id="q1"), owner="me"
        )
        make_queue_spec(no_command, map_file=items, workers=2)
    with pytest.raises(BadInput, match="--workers 0"):
        make_queue_spec(_run(), map_file=items, workers=0)
    # the largest item that fits: its message (envelope and base64) is exactly 64 KiB
    fits = "x" * (MAX_MESSAGE_BYTES * 3 // 4 - len('{"i":1,"item":""}'))
    assert len(encode(1, fits)) == MAX_MESSAGE_BYTES
    assert make_queue_spec(_run(), map_file=_items(tmp_path, "a", fits), workers=2).items[1] == fits
    with pytest.raises(BadInput, match=r"item 1 would be a 65540-byte queue message .*, over the 65536"):
        make_queue_spec(_run(), map_file=_items(tmp_path, "a", fits + "x"), workers=2)
    # the limit is the message's: an item of characters that take 3 bytes each is refused sooner
    with pytest.raises(BadInput, match=r"item 1 would be a .*-byte queue message"):
        make_queue_spec(_run(), map_file=_items(tmp_path, "a", "€" * 20000), workers=2)


def test_a_queue_spec_names_its_queues_and_messages_by_item(tmp_path: Path) -> None:
    queue = make_queue_spec(_run(), map_file=_items(tmp_path, "a", "b"), workers=4, max_deliveries=5)
    assert queue.queues == ("acagpu-q1", "acagpu-q1-results", "acagpu-q1-poison")
    assert [decode(m) for m in queue.messages()] == [{"i": 0, "item": "a"}, {"i": 1, "item": "b"}]
    assert queue.as_dict()["queue"]["max_deliveries"] == 5


def test_the_event_job_has_the_queue_rule_a_system_identity_and_the_worker(tmp_path: Path) -> None:
    queue = make_queue_spec(_run(), map_file=_items(tmp_path, "a"), workers=4)
    base = JobSpec(
        resource_group="rg-acagpu-q1", name="run-q1", location="eastus", environment_id="/env",
        workload_profile_name="gpu", tags={}, container=ContainerDef(
            name="main", image="busybox", cpu=8, memory="56Gi", args=("sh", "-c", "true"), env={"A": "1"}
        ),
    )  # fmt: skip
    body = job_body(worker.event_job(base, queue, "acct1", "https://acct1.queue.core.windows.net/"))
    config = body["properties"]["configuration"]
    assert config["triggerType"] == "Event" and "manualTriggerConfig" not in config
    scale = config["eventTriggerConfig"]["scale"]
    assert (scale["minExecutions"], scale["maxExecutions"], scale["pollingInterval"]) == (0, 4, 30)
    (rule,) = scale["rules"]
    assert rule["type"] == "azure-queue" and rule["identity"] == "system"
    assert rule["metadata"] == {"accountName": "acct1", "queueName": "acagpu-q1", "queueLength": "1"}
    assert "auth" not in rule and "secrets" not in config  # no key anywhere in the template
    assert body["identity"] == {"type": "SystemAssigned"}
    (container,) = body["properties"]["template"]["containers"]
    assert container["command"][:2] == ["/bin/sh", "-c"] and container["args"] == ["sh", "-c", "true"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["A"] == "1" and env["ACAGPU_QUEUE"] == "acagpu-q1" and worker.SRC_ENV in env


def test_the_worker_refuses_to_start_without_its_settings() -> None:
    script = worker.script_path()
    ran = subprocess.run(
        [sys.executable, str(script), "true"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode == 2
    assert "missing settings: ACAGPU_QUEUE_ENDPOINT" in ran.stderr


def test_the_worker_waits_for_its_role_to_take_effect_then_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Azure Storage's 403 AuthorizationPermissionMismatch while the job's new role propagates is
    waited out (said on stderr), up to the worker's bound; another 403 is answered at once."""
    import http.server
    import importlib.util
    import threading

    spec = importlib.util.spec_from_file_location("acagpu_queue_worker", worker.script_path())
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    refusals = {"left": 2}
    codes: list[str] = []

    class Storage(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = "AuthenticationFailed" if "other" in self.path else "AuthorizationPermissionMismatch"
            if refusals["left"] > 0 or "other" in self.path:
                refusals["left"] -= 1
                self.send_response(403)
                self.send_header("x-ms-error-code", code)
                self.end_headers()
                codes.append(code)
                return
            body = b"<?xml version='1.0'?><QueueMessagesList></QueueMessagesList>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Storage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = type("Token", (), {"token": lambda self: "t"})()
    try:
        queues = script.Queues(f"http://127.0.0.1:{server.server_port}", token, 5.0, 0.01)
        assert queues.receive("items", 30) is None  # two refusals waited out, then the empty queue
        assert codes == ["AuthorizationPermissionMismatch"] * 2 and queues.role_waited_s > 0
        assert "waiting for this job's role on the queue to take effect" in capsys.readouterr().err
        status, _, _ = queues.call("GET", "other/messages")  # not a role that propagates: at once
        assert status == 403 and codes[-1] == "AuthenticationFailed" and len(codes) == 3
        bounded = script.Queues(f"http://127.0.0.1:{server.server_port}", token, 0.02, 0.01)
        refusals["left"] = 100
        with pytest.raises(RuntimeError, match="HTTP 403"):  # past its bound the refusal ends it
            bounded.receive("items", 30)
    finally:
        server.shutdown()


def test_the_job_tag_tells_a_reader_on_another_machine_the_run_and_fits_a_tag(tmp_path: Path) -> None:
    from aca_gpu.naming import TAG_QUEUE, parse_queue_tag
    from aca_gpu.workflow.queue.spec import queue_tag

    queue = make_queue_spec(_run(), map_file=_items(tmp_path, *"abc"), workers=1000, max_deliveries=100)
    text = queue_tag(queue, "acagpu" + "x" * 18)  # the longest account name Azure allows (24)
    assert len(text) <= 256  # Azure's limit on a tag's value
    found = parse_queue_tag(text)
    assert (found["account"], found["items"], found["workers"], found["deliveries"]) == (
        "acagpu" + "x" * 18, "3", "1000", "100"
    )  # fmt: skip
    assert float(found["usd_s"]) > 0 and found["gpus"] == "1"
    base = JobSpec(
        resource_group="rg-acagpu-q1", name="run-q1", location="eastus", environment_id="/env",
        workload_profile_name="gpu", tags={"acagpu:run-id": "q1"},
        container=ContainerDef(name="main", image="busybox", cpu=8, memory="56Gi", args=("true",)),
    )  # fmt: skip
    assert worker.event_job(base, queue, "acct1", "https://e/").tags[TAG_QUEUE].startswith("account=acct1;")
    with pytest.raises(ValueError, match="not a queue run's tag"):
        parse_queue_tag("account=;items=3")


def test_a_result_read_again_is_recorded_once_and_brings_its_item() -> None:
    from aca_gpu.workflow.queue.ledger import Ledger

    ledger = Ledger.of(3)
    first = {"i": 1, "status": "failed", "delivery": 1, "worker": "w1", "exit_code": 1, "item": "b"}
    ok = {"i": 1, "status": "succeeded", "delivery": 2, "worker": "w2", "exit_code": 0, "item": "b"}
    for doc in (first, ok, first, ok, ok):  # a reader that never deletes sees each again
        ledger.record(doc)
    ledger.record({"i": 0, "status": "poisoned", "delivery": 3, "worker": "w1"})  # item left out
    assert ledger.duplicates == 0 and len(ledger.deliveries[1]) == 2
    docs = ledger.item_docs(ledger.items.get)
    assert [(d["item"], d["status"], d["deliveries"]) for d in docs] == [
        (None, "poisoned", 3), ("b", "succeeded", 2), (None, "not_done", 0)
    ]  # fmt: skip
    assert not ledger.done and ledger.failed_indexes() == [0, 2]
    ledger.record({**ok, "worker": "w3", "delivery": 3})  # a second worker's success: counted once
    assert ledger.duplicates == 1


def test_detach_without_workers_is_refused_before_anything() -> None:
    from click.testing import CliRunner

    from aca_gpu.cli import cli

    ran = CliRunner().invoke(cli, ["run", "--env", "lab", "--detach", "busybox", "--", "true"])
    assert ran.exit_code == 2
    assert "--detach belongs to queue mode: add --workers P" in ran.output


def test_a_requeue_marker_makes_earlier_results_of_its_items_not_count() -> None:
    from aca_gpu.workflow.queue.ledger import Ledger

    ledger = Ledger.of(2)
    poisoned = {"i": 1, "status": "poisoned", "delivery": 3, "worker": "w1", "r": 0}
    later = {"i": 1, "status": "succeeded", "delivery": 1, "worker": "w9", "r": 1}
    ledger.record({"i": 0, "status": "succeeded", "delivery": 1, "worker": "w1", "r": 0})
    ledger.record(later)  # read before the marker: its generation is ahead, it counts anyway
    ledger.record(poisoned)
    assert ledger.results[1]["status"] == "succeeded"
    fresh = Ledger((1,))  # a run of item 1 only
    fresh.record(poisoned)
    assert fresh.done and fresh.failed_indexes() == [1]
    fresh.record({"i": -1, "requeued": [1], "r": 1})  # `--rerun-failed` put it back
    assert (
        not fresh.done and 1 not in fresh.results and fresh.item_docs(fresh.items.get)[0]["deliveries"] == 0
    )
    fresh.record(later)
    assert fresh.results[1]["status"] == "succeeded" and fresh.failed_indexes() == [] and fresh.done


def test_a_warm_floor_is_checked_priced_and_reaches_the_worker(tmp_path: Path) -> None:
    items = _items(tmp_path, *"abcd")
    with pytest.raises(BadInput, match=r"--warm 5: 0 to --workers \(4\)"):
        make_queue_spec(_run(), map_file=items, workers=4, warm=5)
    with pytest.raises(BadInput, match="--warm-idle 0: 1 to 3600"):
        make_queue_spec(_run(), map_file=items, workers=4, warm=1, warm_idle_s=0)
    queue = make_queue_spec(_run(), map_file=items, workers=4, warm=2, warm_idle_s=45)
    price = queue.price()
    assert price["warm_floor_usd_per_hour"] == pytest.approx(
        2 * 3600 * price["usd_per_second_per_worker"], rel=1e-3
    )
    assert worker.worker_env(queue, "https://e/")["ACAGPU_IDLE_S"] == "45"
    cold = make_queue_spec(_run(), map_file=items, workers=4)
    assert worker.worker_env(cold, "https://e/")["ACAGPU_IDLE_S"] == "0"  # no floor: exit when empty
    from aca_gpu.cli.queue_cmd import render_plan

    doc = {"schema": 1, "command": "run", "mode": "queue", **queue.run.as_dict(), **queue.as_dict()}
    assert "warm floor     2 worker(s) kept waiting" in render_plan(doc)
    assert "warm floor" not in render_plan({**doc, **cold.as_dict()})


def test_after_ctrl_c_the_items_no_worker_finished_are_unfinished_not_failed(tmp_path: Path) -> None:
    """A Ctrl-C'd queue run listed every item still on the queue in `failed_indexes`, so a script
    retried or blamed items that never ran; a fan-out keeps them apart (`unfinished_indexes`)."""
    from aca_gpu.workflow.engine.outcome import TeardownResult
    from aca_gpu.workflow.queue.outcome import QueueOutcome
    from aca_gpu.workflow.workload.outcome import Console

    queue = make_queue_spec(_run(), map_file=_items(tmp_path, "a", "b", "c", "d"), workers=2)
    outcome = QueueOutcome(plan=queue.run.plan, spec=queue.run, queue=queue, ran=True,
                           console=Console(False, lambda: sys.stdout, lambda: sys.stderr))  # fmt: skip
    from aca_gpu.workflow.queue.ledger import Ledger

    outcome.ledger = Ledger.of(4)
    outcome.ledger.results.update({0: {"status": "succeeded"}, 1: {"status": "poisoned", "exit_code": 1}})
    outcome.interrupted = True
    summary = outcome.document()["summary"]
    assert (summary["failed_indexes"], summary["unfinished_indexes"]) == ([1], [2, 3])
    ran, outcome.ran, outcome.ledger = outcome.ledger, False, Ledger.of(4)  # Ctrl-C while queueing: none ran
    summary = outcome.document()["summary"]
    assert (summary["failed_indexes"], summary["unfinished_indexes"]) == ([], [0, 1, 2, 3])
    outcome.ran, outcome.ledger = True, ran
    outcome.interrupted = False  # the same items at a run's own end: no result is a failure (exit 1)
    outcome.teardown = TeardownResult("deleted", verified=True)
    summary = outcome.document()["summary"]
    assert (summary["failed_indexes"], summary["unfinished_indexes"]) == ([1, 2, 3], [])
    assert outcome.exit_code == 1


def test_the_last_lines_of_a_stopped_queue_run_stay_short() -> None:
    """A queue run of 10,000 items stopped early printed 10,000 `[k] not_done: no exit code` lines:
    items not done are one line of ranges, failed ones at most 20 lines, the document has them all."""
    from aca_gpu.workflow.queue.outcome import render_queue

    items: list[dict[str, object]] = [
        {"index": k, "status": "not_done", "exit_code": None, "reason": None} for k in range(10_000)
    ]
    for k in range(30):
        items[k] = {"index": k, "status": "poisoned", "exit_code": 1, "reason": "failed 3 times (exit 1)"}
    items[50] = {"index": 50, "status": "succeeded", "exit_code": 0, "reason": None}
    doc = {"run_id": "q1", "status": "interrupted",
           "summary": {"succeeded": 1, "items": 10_000, "workers_started": 2},
           "items": items, "cost": {"usd_estimate": 0.5, "gpu_seconds": 1000.0},
           "teardown": {"status": "deleting"}}  # fmt: skip
    lines = render_queue(doc).splitlines()
    assert len(lines) == 1 + 20 + 1 + 1 + 2, lines
    assert lines[1] == "  [0] poisoned: exit 1; failed 3 times (exit 1)"
    assert lines[21] == "  ... and 10 more (-o json lists every item)"
    assert lines[22] == "  9969 item(s) not done: 30-49, 51-9999"


def test_the_ledger_hides_secret_env_values_in_what_it_keeps() -> None:
    """A queue run printed its --secret-env values in each item's output and reason, where a single
    run and a fan-out mask them."""
    from aca_gpu.workflow.queue.ledger import Ledger

    ledger = Ledger.of(1)
    ledger.mask = lambda text: text.replace("q-secret-4f1c9e", "***")
    ledger.record({"i": 0, "status": "failed", "delivery": 1, "worker": "w1", "exit_code": 1,
                   "output": "token q-secret-4f1c9e\n", "reason": "saw q-secret-4f1c9e"})  # fmt: skip
    kept = ledger.results[0]
    assert (kept["output"], kept["reason"]) == ("token ***\n", "saw ***")
