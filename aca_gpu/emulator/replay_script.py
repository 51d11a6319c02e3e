"""A recording (aca_gpu/recording.py's JSON lines) as the script a strict fake ARM follows.

Matching: a request is paired with the earliest unused recorded exchange of the same method, path
and query (api-version included) whose request body has the same keys, so the calls made on one
resource must come in the recorded order, while calls on different resources may interleave (the
explorer and the tester run in parallel). Writes to one resource that differ only in their body
(a fan-out's concurrent starts of one job, each with its shard's env and attempt token) are paired
by body: the earliest unused one whose body says the same, modulo generated names, else the
earliest, as for any write. Generated names differ between the recorded run and the
replayed one (run id, exec nonce): a token the client made up in the recording (first seen in a
request) that differs from the live one but has its length is learned as the same name, once and
consistently (tokens the service made up, like operation ids, must come back exact), and
recorded answers are rewritten with the learned names and the replay server's own address. A GET
asked more often than recorded gets the last recorded answer again (a poll that raced), and a
request at an api-version the recording shows refused gets that refusal again (which of two parallel
callers meets it first is a race); any other request the recording does not have is a mismatch.
At the end, recorded writes never asked for are reported too.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from aca_gpu.recording import META_FILE, RECORDING_FILE

TOKEN = re.compile(r"[A-Za-z0-9]+")
MIN_TOKEN = 4
URL_PREFIX = re.compile(r"(https|wss)://([^/\"'\s?]+)")
READS = ("GET", "HEAD")


@dataclass
class Exchange:
    index: int
    line: dict[str, Any]
    used: bool = False

    @property
    def method(self) -> str:
        return str(self.line["method"])

    @property
    def path(self) -> str:
        # decoded, as the server reads a live request's path (the file share's `a%2Fb` is `a/b`)
        return unquote(str(urlsplit(self.line["uri"]).path))

    @property
    def query(self) -> list[tuple[str, str]]:
        return sorted(parse_qsl(urlsplit(self.line["uri"]).query, keep_blank_values=True))


def load(folder: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = folder / RECORDING_FILE
    lines = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    meta_path = folder / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    return lines, meta


def _refused_version(line: dict[str, Any]) -> str | None:
    body = line.get("response_body")
    error = body.get("error") if isinstance(body, dict) else None
    if (
        line.get("status") == 400
        and isinstance(error, dict)
        and error.get("code") == "InvalidApiVersionParameter"
    ):
        return dict(parse_qsl(urlsplit(line["uri"]).query)).get("api-version")
    return None


def _client_tokens(lines: list[dict[str, Any]]) -> set[str]:
    """Tokens the client made up (run id, nonce): first seen in a request, not in an answer. Names
    the service made up (operation ids, execution names) must come back exactly as recorded."""
    seen: set[str] = set()
    learnable: set[str] = set()
    for line in lines:
        asked = line["uri"] + json.dumps(line.get("request_body"))
        asked += "".join(f.get("text", "") for f in line.get("frames", []) if f.get("dir") == "out")
        for token in TOKEN.findall(asked):
            if token not in seen and len(token) >= MIN_TOKEN:
                learnable.add(token)
            seen.add(token)
        answered = json.dumps(line.get("response_headers")) + json.dumps(line.get("response_body"))
        answered += "".join(f.get("text", "") for f in line.get("frames", []) if f.get("dir") == "in")
        seen.update(TOKEN.findall(answered))
    return learnable


def keys_of(value: Any) -> Any:
    """The key structure of a JSON value: what a request body must share with the recorded one."""
    if isinstance(value, dict):
        return {k: keys_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return [keys_of(v) for v in value[:1]]
    return None


@dataclass
class Script:
    lines: list[dict[str, Any]]
    exchanges: list[Exchange] = field(init=False)
    live_of: dict[str, str] = field(default_factory=dict)  # recorded token -> live token
    recorded_of: dict[str, str] = field(default_factory=dict)  # live token -> recorded token
    last: dict[tuple[str, str, str], Exchange] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)
    repeated_reads: int = 0
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.exchanges = [Exchange(i, line) for i, line in enumerate(self.lines)]
        self.hosts = sorted({urlsplit(line["uri"]).netloc for line in self.lines})
        # api-versions the recorded service refused: a refusal depends on the version, not on the
        # resource, and which of two parallel callers meets it first is a race
        self.learnable = _client_tokens(self.lines)
        self.refusals = {
            version: ex for ex in self.exchanges if (version := _refused_version(ex.line)) is not None
        }

    # ---- names --------------------------------------------------------------------------------
    def _tokens_match(self, recorded: str, live: str, learn: dict[str, str]) -> bool:
        rec_tokens, live_tokens = TOKEN.findall(recorded), TOKEN.findall(live)
        if len(rec_tokens) != len(live_tokens) or TOKEN.sub("", recorded) != TOKEN.sub("", live):
            return False
        for r, v in zip(rec_tokens, live_tokens, strict=True):
            if r == v and r not in self.live_of and v not in self.recorded_of:
                continue
            known = self.live_of.get(r) or learn.get(r)
            if known is not None:
                if known != v:
                    return False
                continue
            if r not in self.learnable or len(r) != len(v) or v in self.recorded_of or v in learn.values():
                return False
            learn[r] = v
        return True

    def _learn(self, learn: dict[str, str]) -> None:
        for r, v in learn.items():
            self.live_of[r] = v
            self.recorded_of[v] = r

    def live_text(self, text: str, endpoint: str) -> str:
        """A recorded answer as the replayed client must see it: its names, this server's address."""
        host = urlsplit(endpoint).netloc

        def url(m: re.Match[str]) -> str:
            return f"{m.group(1)}://{host}" if m.group(2) in self.hosts else m.group(0)

        text = URL_PREFIX.sub(url, text)
        return TOKEN.sub(lambda m: self.live_of.get(m.group(), m.group()), text)

    # ---- matching -----------------------------------------------------------------------------
    def match(self, method: str, path: str, query: str, body: Any) -> Exchange | None:
        """The recorded exchange this request stands for (marked used), or None (a mismatch)."""
        live_query = sorted(parse_qsl(query, keep_blank_values=True))
        with self.lock:
            candidates: list[tuple[Exchange, dict[str, str]]] = []
            for ex in self.exchanges:
                if ex.used or ex.method != method:
                    continue
                learn: dict[str, str] = {}
                if not self._tokens_match(ex.path, path, learn):
                    continue
                if [k for k, _ in ex.query] != [k for k, _ in live_query]:
                    continue
                pairs = zip(ex.query, live_query, strict=True)
                if not all(self._tokens_match(r, v, learn) for (_, r), (_, v) in pairs):
                    continue
                if method not in READS and keys_of(ex.line.get("request_body")) != keys_of(body):
                    continue
                candidates.append((ex, learn))
                if method in READS or body is None:
                    break  # a read, or a bare write: the earliest is the one
            if candidates:
                ex, learn = self._by_body(candidates, body)
                self._learn(learn)
                ex.used = True
                self.served += 1
                self.last[(method, path, query)] = ex
                return ex
            again = self.last.get((method, path, query)) if method in READS else None
            if again is None:
                again = self.refusals.get(dict(live_query).get("api-version", ""))
            if again is not None:
                self.repeated_reads += 1
                self.served += 1
                return again
            self.mismatches.append(f"{method} {path}?{query}: not in the recording (or out of order)")
            return None

    def _by_body(
        self, candidates: list[tuple[Exchange, dict[str, str]]], body: Any
    ) -> tuple[Exchange, dict[str, str]]:
        """Of the recorded writes a request could stand for, the earliest whose body says the same
        (modulo generated names): concurrent starts of one job differ only in their template's env
        (a shard's index, its attempt token), and the replayed run may send them in another order.
        When no body says the same, the earliest, as for any other request. The names a matching
        body carries (an attempt's token) are learned with it: the execution read back must show them."""
        live = json.dumps(body, sort_keys=True)
        for ex, learn in candidates:
            same = dict(learn)
            if self._tokens_match(json.dumps(ex.line.get("request_body"), sort_keys=True), live, same):
                return ex, same
        return candidates[0]

    def frame_matches(self, recorded: str, live: str) -> bool:
        with self.lock:
            learn: dict[str, str] = {}
            if not self._tokens_match(recorded, live, learn):
                return False
            self._learn(learn)
            return True

    def mismatch(self, what: str) -> None:
        with self.lock:
            self.mismatches.append(what)

    def report(self) -> dict[str, Any]:
        with self.lock:
            unused_writes = [
                f"{ex.method} {ex.path}"
                for ex in self.exchanges
                if not ex.used and ex.method not in READS and _refused_version(ex.line) is None
            ]
            unused_reads = sum(1 for ex in self.exchanges if not ex.used and ex.method in READS)
            return {
                "recorded": len(self.exchanges),
                "served": self.served,
                "repeated_reads": self.repeated_reads,
                "unused_reads": unused_reads,
                "unused_writes": unused_writes,
                "mismatches": list(self.mismatches),
                "names_learned": len(self.live_of),
                "ok": not self.mismatches and not unused_writes,
            }
