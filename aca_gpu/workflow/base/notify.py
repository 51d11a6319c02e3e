"""`--notify URL`: one JSON message per outcome, to a Slack or Microsoft Teams incoming webhook.

Both accept a JSON object whose `text` is the message (Slack renders mrkdwn, Teams markdown), and
ignore keys they do not know; `acagpu` carries the same facts as data for other receivers (a
chat bot, a log pipeline). Standard library only, like the guard's copy of this contract.

Secrets: a message is built from an allow-list of fields (names, counts, ages, dollars, verdicts),
never from settings, headers or raw errors; error texts pass `scrub`, which blanks anything shaped
like a bearer token, a JWT, a SAS signature or a `key=`/`secret=`/`password=` value. The webhook
URL is itself a secret (whoever has it may post), so it is never printed: `where` names its host.
A failed post is a warning on stderr, never a different exit code: the outcome already happened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aca_gpu.errors import BadInput
from aca_gpu.units import usd_text

TIMEOUT_S = 10.0
SCHEMA = 1
MAX_LINES = 40  # Slack folds long messages; the counts line always says how many there were
_SECRETS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)\bbearer\s+[a-z0-9._~+/=-]+"), "Bearer ***"),
    (re.compile(r"eyJ[a-zA-Z0-9_-]{8,}\.[a-zA-Z0-9_-]{8,}\.[a-zA-Z0-9_-]*"), "***"),  # a JWT
    (re.compile(r"(?i)\b(sig|signature|key|secret|password|token|client_secret)=[^&\s\"']+"), r"\1=***"),
    (re.compile(r"(?i)(\"?(?:password|secret|token|accountkey)\"?\s*:\s*)\"?[^\s\",}]+\"?"), r"\1***"),
]


def scrub(text: str) -> str:
    """`text` with anything that looks like a credential replaced by `***`."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def check_url(url: str, where: str = "--notify") -> str:
    """An https URL (http only to this machine, for a local receiver); refused (exit 2) otherwise."""
    parts = urlsplit(url.strip())
    local = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and local):
        raise BadInput(f"{where}: expected an https:// webhook URL (http:// only to localhost)")
    if not parts.hostname:
        raise BadInput(f"{where}: the URL names no host")
    return url.strip()


def where(url: str) -> str:
    """The webhook's host, what output may show (the path is the secret)."""
    return urlsplit(url).hostname or "?"


@dataclass(frozen=True)
class Delivery:
    host: str
    ok: bool
    status: int | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "ok": self.ok, "status": self.status, "error": self.error}


def post(url: str, message: Mapping[str, Any], *, timeout: float = TIMEOUT_S) -> Delivery:
    """POST `message` as JSON; never raises (a failure comes back as a Delivery)."""
    import urllib.error  # lazily: most commands never notify, and startup time is what Ctrl-C meets
    import urllib.request

    data = json.dumps(message).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", "User-Agent": "acagpu"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return Delivery(where(url), 200 <= answer.status < 300, answer.status)
    except urllib.error.HTTPError as exc:
        return Delivery(where(url), False, exc.code, f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Delivery(where(url), False, None, scrub(str(reason))[:200])


def message(
    kind: str, headline: str, lines: Sequence[str], facts: Mapping[str, Any], footer: Sequence[str] = ()
) -> dict[str, Any]:
    """The shape Slack and Teams incoming webhooks accept: `text`, plus the facts under `acagpu`.
    `footer` lines follow the (possibly folded) lines, always shown."""
    shown = list(lines[:MAX_LINES])
    if len(lines) > MAX_LINES:
        shown.append(f"… and {len(lines) - MAX_LINES} more")
    text = "\n".join([f"*{headline}*", *shown, *footer])
    return {"text": scrub(text), "acagpu": {"schema": SCHEMA, "kind": kind, **facts}}


def _age(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "age unknown"
    hours = seconds / 3600
    return f"{hours:.1f}h old" if hours < 48 else f"{hours / 24:.1f}d old"


def reap_message(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a reap did (or would do); None when there is nothing to tell (no spam every 15 minutes)."""
    counts = doc.get("counts", {})
    acted = [i for i in doc.get("items", []) if i.get("status") in ("deleted", "failed", "would-delete")]
    if not acted:
        return None
    items = [
        {
            "subscription": i.get("subscription"),
            "resource_group": i.get("resource_group"),
            "run_id": i.get("run_id"),
            "status": i.get("status"),
            "age_seconds": i.get("age_seconds"),
            "spend_usd_estimate": i.get("spend_usd_estimate"),
            "uncounted": i.get("uncounted"),
            "error": scrub(str(i["error"]))[:300] if i.get("error") else None,
        }
        for i in acted
    ]
    lines = []
    for i in items:
        spend = i["spend_usd_estimate"]
        money = f", ≈{usd_text(spend)}" if isinstance(spend, int | float) else ""
        money += "+" if money and i["uncounted"] else ""  # a floor, as reap and status mark it
        error = f" — {i['error']}" if i["error"] else ""
        lines.append(f"• {i['status']} `{i['resource_group']}` ({_age(i['age_seconds'])}{money}){error}")
    prices = doc.get("prices")
    priced = prices and any(isinstance(i["spend_usd_estimate"], int | float) for i in items)
    floor = (
        "; +: at least this much, a stopped app's past use is not counted"
        if any(i["uncounted"] for i in items)
        else ""
    )
    footer = (
        [f"≈: list-price estimate so far{floor} ({prices})"] if priced else []
    )  # figures name their table
    verb = "would delete" if doc.get("dry_run") else "deleted"
    done = counts.get("would-delete" if doc.get("dry_run") else "deleted", 0)
    headline = f"acagpu reap: {verb} {done}, failed {counts.get('failed', 0)}"
    facts = {
        "outcome": "failed" if counts.get("failed") else "ok",
        "dry_run": bool(doc.get("dry_run")),
        "counts": dict(counts),
        "spend_usd_estimate": doc.get("spend_usd_estimate"),
        "prices": prices,
        "items": items,
    }
    return message("reap", headline, lines, facts, footer)


def run_message(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`up` or `validate`: the verdict per (image, GPU) pair and the one error, if any."""
    command = str(doc.get("command") or "run")
    results = [
        {
            "image": r.get("image"),
            "gpu": r.get("gpu"),
            "status": r.get("status"),
            "reason": scrub(str(r.get("reason") or ""))[:300] or None,
        }
        for r in doc.get("results") or []
    ]
    error = doc.get("error") or {}
    message_text = scrub(str(error.get("message") or ""))[:300] if isinstance(error, Mapping) else ""
    lines = [
        f"• {r['status']} `{r['image']}` on {r['gpu']}" + (f" — {r['reason']}" if r["reason"] else "")
        for r in results
    ]
    if message_text:
        lines.append(f"error: {message_text}")
    verdict = f"{doc.get('status', '?')} (exit {doc.get('exit_code', '?')})"
    headline = f"acagpu {command} {doc.get('run_id', '')}: {verdict}"
    facts = {
        "command": command,
        "run_id": doc.get("run_id"),
        "outcome": doc.get("status"),
        "exit_code": doc.get("exit_code"),
        "location": doc.get("location"),
        "results": results,
        "error": {"code": error.get("code"), "message": message_text or None} if message_text else None,
    }
    return message(command, headline, lines, facts)
