"""acagpu's queue worker: drains a run's Azure Storage queue inside the user's own image.

Injected the way the zero-build tester is (its source in an environment variable, a one-line
bootstrap runs it with the image's `python3`), so it needs the standard library only. One message
at a time:

1. receive it with a visibility timeout (`ACAGPU_VISIBILITY_S`), renewed every third of it while
   the item runs, so a long item is not handed to a second worker;
2. a message already delivered more than `ACAGPU_MAX_DELIVERIES` times goes to the poison queue
   unrun (its earlier workers died with it);
3. run the command (this script's arguments) with the item in `ACAGPU_ITEM` and its index in
   `ACAGPU_ITEM_INDEX`; its lines go to this container's log, the last few KiB to the result;
4. put the result (exit code, output tail, seconds, delivery) on the results queue; on success
   delete the message; on failure make it visible again at once, or, at its last delivery, move it
   to the poison queue;
5. exit 0 when the queue has nothing visible (twice, a second apart); a worker of a warm floor
   (`ACAGPU_IDLE_S` > 0) first waits that long for an item, so a requeued one starts in seconds,
   and when that wait ends with no item it drops the floor (its job's minExecutions back to 0,
   through ARM with the role its job holds on itself: ACAGPU_FLOOR_JOB), so the floor goes with no
   client; the items put on the queue later start cold.

It signs in with the job's managed identity (`IDENTITY_ENDPOINT`/`IDENTITY_HEADER`, the token's
audience Azure Storage). Settings: ACAGPU_QUEUE_ENDPOINT (the account's queue endpoint),
ACAGPU_QUEUE, ACAGPU_RESULTS_QUEUE, ACAGPU_POISON_QUEUE.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from typing import Any

VERSION = "2021-02-12"
STORAGE = "https://storage.azure.com/"
ARM = "https://management.azure.com/"
APP_API = "2025-07-01"  # a stable Microsoft.App version every region serves
TAIL_BYTES = 2048
MAX_MESSAGE = 64 * 1024  # one queue message, base64 as sent
PREFIX = "acagpu-worker:"
# Azure Storage's 403 codes for a caller whose role does not (yet) allow the operation
ROLE_PENDING = ("AuthorizationPermissionMismatch", "AuthorizationFailure")


def say(text: str) -> None:
    print(f"{PREFIX} {text}", file=sys.stderr, flush=True)


class Identity:
    """The managed identity's token for Azure Storage (or `resource`), fetched again before it expires."""

    def __init__(self, resource: str = STORAGE) -> None:
        self.resource = resource
        self.endpoint = os.environ["IDENTITY_ENDPOINT"]
        self.header = os.environ["IDENTITY_HEADER"]
        self._token, self._until = "", 0.0
        self._lock = threading.Lock()

    def token(self) -> str:
        with self._lock:
            if time.time() < self._until - 300:
                return self._token
            query = urllib.parse.urlencode({"resource": self.resource, "api-version": "2019-08-01"})
            req = urllib.request.Request(
                f"{self.endpoint}?{query}", headers={"X-IDENTITY-HEADER": self.header}
            )
            with urllib.request.urlopen(req, timeout=30) as answer:
                doc = json.loads(answer.read())
            self._token = str(doc["access_token"])
            self._until = float(doc.get("expires_on") or time.time() + 600)
            return self._token


class Queues:
    """The few Storage queue REST calls the worker makes (with retries on 5xx, 429 and resets).

    A 403 saying the identity lacks the permission is its role not yet in effect: acagpu grants it
    on the run's queues right after the job is made, and a new role assignment takes minutes to
    take effect. The call is then sent again, every few seconds, for up to `role_wait_s` in all
    (ACAGPU_ROLE_WAIT_S), saying what it waits for; past that the worker ends with the refusal.
    """

    def __init__(
        self, endpoint: str, identity: Identity, role_wait_s: float = 600.0, role_pause_s: float = 2.0
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.identity = identity
        self.role_wait_s, self.role_pause_s = role_wait_s, role_pause_s
        self.role_waited_s = 0.0

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        while True:
            answer = self._call(method, path, body)
            status, headers, _ = answer
            code = {k.lower(): v for k, v in headers.items()}.get("x-ms-error-code", "")
            if status != 403 or code not in ROLE_PENDING or self.role_waited_s >= self.role_wait_s:
                return answer
            pause = self.role_pause_s
            if self.role_waited_s % 20 < pause:  # one line every 20 s of waiting
                waited = f"{self.role_waited_s:.0f} of at most {self.role_wait_s:.0f} s"
                say(f"{method} {path.split('/')[0]}: {code}: waiting for this job's role on the queue to "
                    f"take effect ({waited})")  # fmt: skip
            time.sleep(pause)
            self.role_waited_s += pause

    def _call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        for attempt in range(6):
            req = urllib.request.Request(
                f"{self.endpoint}/{path}",
                method=method,
                data=body,
                headers={
                    "Authorization": f"Bearer {self.identity.token()}",
                    "x-ms-version": VERSION,
                    "Content-Type": "application/xml",
                },
            )
            try:
                with urllib.request.urlopen(req, timeout=30) as answer:
                    return answer.status, dict(answer.headers), answer.read()
            except urllib.error.HTTPError as exc:
                if exc.code < 500 and exc.code != 429:
                    return exc.code, dict(exc.headers), exc.read()
                why = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                why = str(exc)
            pause = min(8.0, 0.5 * 2**attempt)
            say(f"{method} {path.split('?')[0]}: {why}; again in {pause:g} s")
            time.sleep(pause)
        raise RuntimeError(f"{method} {path.split('?')[0]}: the queue service did not answer")

    def put(self, queue: str, text: str) -> None:
        body = f"<QueueMessage><MessageText>{text}</MessageText></QueueMessage>".encode()
        status, _, data = self.call("POST", f"{queue}/messages", body)
        if status != 201:
            raise RuntimeError(f"put on {queue}: HTTP {status} {data[:200]!r}")

    def receive(self, queue: str, visibility_s: int) -> dict[str, Any] | None:
        status, _, data = self.call(
            "GET", f"{queue}/messages?numofmessages=1&visibilitytimeout={visibility_s}"
        )
        if status != 200:
            raise RuntimeError(f"receive on {queue}: HTTP {status} {data[:200]!r}")
        found = ET.fromstring(data).find("QueueMessage")
        if found is None:
            return None
        return {child.tag: child.text or "" for child in found}

    def renew(self, queue: str, message: dict[str, Any], visibility_s: int) -> bool:
        query = urllib.parse.urlencode(
            {"popreceipt": message["PopReceipt"], "visibilitytimeout": visibility_s}
        )
        status, headers, _ = self.call("PUT", f"{queue}/messages/{message['MessageId']}?{query}", b"")
        receipt = {k.lower(): v for k, v in headers.items()}.get("x-ms-popreceipt")
        if status == 204 and receipt:
            message["PopReceipt"] = receipt
            return True
        return False

    def delete(self, queue: str, message: dict[str, Any]) -> None:
        query = urllib.parse.urlencode({"popreceipt": message["PopReceipt"]})
        self.call("DELETE", f"{queue}/messages/{message['MessageId']}?{query}")


class Renewer(threading.Thread):
    """Keeps the message invisible while its item runs (every third of the visibility timeout)."""

    def __init__(self, queues: Queues, queue: str, message: dict[str, Any], visibility_s: int) -> None:
        super().__init__(daemon=True)
        self.queues, self.queue, self.message, self.visibility_s = queues, queue, message, visibility_s
        self.lock = threading.Lock()  # the pop receipt changes with each renewal
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(max(1.0, self.visibility_s / 3)):
            with self.lock:
                if not self.queues.renew(self.queue, self.message, self.visibility_s):
                    say(f"message {self.message['MessageId']}: its visibility could not be renewed")


def drop_floor(idle_s: float, role_wait_s: float = 600.0, pause_s: float = 2.0) -> None:
    """The warm floor's idle window ended with no item: set the job's minExecutions to 0 (a PATCH of
    its configuration's required fields and that, as acagpu's own drop), so KEDA keeps no floor.
    A 403 while the job's role on itself propagates is waited out (up to `role_wait_s`); another
    refusal is said and the worker exits anyway (acagpu attach/results drop it too)."""
    job = os.environ.get("ACAGPU_FLOOR_JOB", "")
    if not job:
        return
    arm = (os.environ.get("ACAGPU_ARM_ENDPOINT") or ARM).rstrip("/")
    timeout = int(os.environ.get("ACAGPU_REPLICA_TIMEOUT_S") or 1800)
    configuration = {"triggerType": "Event", "replicaTimeout": timeout,
                     "eventTriggerConfig": {"scale": {"minExecutions": 0}}}  # fmt: skip
    body = json.dumps({"properties": {"configuration": configuration}}).encode()
    waited = 0.0
    while True:
        try:
            token = Identity(ARM).token()
            req = urllib.request.Request(
                f"{arm}{job}?api-version={APP_API}",
                data=body,
                method="PATCH",
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=30) as answer:
                answer.read()
            name = job.rsplit("/", 1)[-1]
            say(f"no item for {idle_s:g} s: the warm floor is dropped (minExecutions 0 on {name})")
            return
        except urllib.error.HTTPError as exc:
            if exc.code != 403 or waited >= role_wait_s:
                say(f"no item for {idle_s:g} s, but the warm floor could not be dropped: HTTP {exc.code}")
                return
            if waited % 20 < pause_s:
                say("dropping the warm floor: 403, waiting for this job's role on itself to take effect")
        except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
            say(f"no item for {idle_s:g} s, but the warm floor could not be dropped: {exc}")
            return
        time.sleep(pause_s)
        waited += pause_s


def run_item(argv: list[str], item: str, index: int) -> tuple[int, str, float]:
    env = dict(os.environ, ACAGPU_ITEM=item, ACAGPU_ITEM_INDEX=str(index))
    started = time.monotonic()
    tail = b""
    try:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as exc:
        return 127, f"{argv[0]}: {exc.strerror or exc}", 0.0
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.buffer.write(f"[{index}] ".encode() + line)
        sys.stdout.flush()
        tail = (tail + line)[-TAIL_BYTES:]
    code = proc.wait()
    return code, tail.decode("utf-8", errors="replace"), round(time.monotonic() - started, 3)


def main(argv: list[str]) -> int:
    if not argv:
        say("no command to run (the job's args are the command)")
        return 2
    names = ("ACAGPU_QUEUE_ENDPOINT", "ACAGPU_QUEUE", "ACAGPU_RESULTS_QUEUE", "ACAGPU_POISON_QUEUE")
    settings = {k: os.environ.get(k, "") for k in names}
    missing = [k for k, v in settings.items() if not v]
    if missing or "IDENTITY_ENDPOINT" not in os.environ:
        say(f"missing settings: {', '.join(missing) or 'IDENTITY_ENDPOINT (no managed identity)'}")
        return 2
    visibility = int(os.environ.get("ACAGPU_VISIBILITY_S") or 60)
    most = int(os.environ.get("ACAGPU_MAX_DELIVERIES") or 3)
    worker = os.environ.get("CONTAINER_APP_JOB_EXECUTION_NAME") or os.environ.get("HOSTNAME", "")
    role_wait = float(os.environ.get("ACAGPU_ROLE_WAIT_S") or 600)
    queues = Queues(settings["ACAGPU_QUEUE_ENDPOINT"], Identity(), role_wait)
    work, results = settings["ACAGPU_QUEUE"], settings["ACAGPU_RESULTS_QUEUE"]
    poison = settings["ACAGPU_POISON_QUEUE"]
    empty, done = 0, 0
    idle_s = float(os.environ.get("ACAGPU_IDLE_S") or 0)  # a warm floor's wait for items
    rerun = 0  # the message's requeue generation, echoed in its result (set per message below)
    idle_since = time.monotonic()

    def result(index: int, status: str, delivery: int, item: str, **extra: Any) -> None:
        doc = {"i": index, "status": status, "delivery": delivery, "worker": worker, "r": rerun,
               "t": round(time.time(), 3), **extra}  # fmt: skip
        # the item travels with its result when the message can hold it (a detached run's readers
        # have no other copy); a larger one is left out
        text = base64.b64encode(json.dumps({**doc, "item": item}).encode()).decode()
        if len(text) > MAX_MESSAGE:
            text = base64.b64encode(json.dumps(doc).encode()).decode()
        queues.put(results, text)

    while True:
        message = queues.receive(work, visibility)
        if message is None:
            empty += 1
            idle_for = time.monotonic() - idle_since
            if empty >= 2 and idle_for >= idle_s:
                say(f"the queue is empty: {done} item(s) taken here, exiting")
                if idle_s > 0:
                    drop_floor(idle_s, role_wait)
                return 0
            if empty == 2:
                say(f"the queue is empty: a warm worker waits up to {idle_s:g} s for an item")
            time.sleep(1.0)
            continue
        empty = 0
        delivery = int(message.get("DequeueCount") or 1)
        try:
            body = json.loads(base64.b64decode(message["MessageText"]))
            index, item, rerun = int(body["i"]), str(body["item"]), int(body.get("r") or 0)
        except (ValueError, KeyError, TypeError):
            say(f"message {message['MessageId']} is not an acagpu item: to the poison queue")
            queues.put(poison, message["MessageText"])
            queues.delete(work, message)
            continue
        if delivery > most:
            say(f"item {index}: delivered {delivery} times (over {most}): to the poison queue, not run")
            queues.put(poison, message["MessageText"])
            why = f"delivered {delivery} times; its workers ended mid-item"
            result(index, "poisoned", delivery, item, reason=why)
            queues.delete(work, message)
            continue
        renewer = Renewer(queues, work, message, visibility)
        renewer.start()
        code, tail, seconds = run_item(argv, item, index)
        renewer.stop.set()
        idle_since = time.monotonic()
        with renewer.lock:
            done += 1
            if code == 0:
                result(index, "succeeded", delivery, item, exit_code=0, output=tail, seconds=seconds)
                queues.delete(work, message)
            elif delivery >= most:
                queues.put(poison, message["MessageText"])
                why = f"failed {delivery} times (exit {code})"
                result(
                    index,
                    "poisoned",
                    delivery,
                    item,
                    exit_code=code,
                    output=tail,
                    seconds=seconds,
                    reason=why,
                )
                queues.delete(work, message)
            else:
                result(index, "failed", delivery, item, exit_code=code, output=tail, seconds=seconds)
                queues.renew(work, message, 0)  # visible again now: the next worker takes it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
