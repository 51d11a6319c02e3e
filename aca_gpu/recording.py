"""`--record DIR`: every ARM and data-plane exchange of a command, sanitized, as JSON lines.

The lines have the shape of tests/fixtures/arm-recordings (method, uri, request_body, status,
response_headers, response_body, response_body_ndjson) plus `"websocket"` lines for exec sessions
(`frames`: what each side sent). Nothing reaches the disk unsanitized: the Sanitizer replaces
secrets by what a field *is*, not by which requests acagpu happens to send (every string of a
credentials action's answer, credential fields and lists anywhere, key=value and authorization
shapes and high-entropy base64 in free text), and tokens, GUIDs (subscription, tenant, object and
client ids, operation ids), e-mail addresses and IPv4 addresses, with placeholders, the same input
always getting the same placeholder within a recording, so a replay still sees one subscription,
one run and one tenant. A secret value once seen is also replaced wherever it turns up later (a
log line, an exec transcript). docs/recordings.md lists the rules and what a recording still shows.

Pure: the Azure layer feeds it (aca_gpu/azure/recorder.py), the emulator's replay server reads it.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aca_gpu.errors import BadInput

RECORDING_FILE = "recording.jsonl"
META_FILE = "meta.json"
KEPT_HEADERS = (
    "location",
    "azure-asyncoperation",
    "retry-after",
    "x-ms-ratelimit-remaining-subscription-writes",
    "content-type",
    "api-supported-versions",
    # Azure Files answers: a ranged download's extent, the item's type, the service's error code
    "content-range",
    "x-ms-type",
    "x-ms-error-code",
)
MAX_TEXT = 1_000_000  # a whole log stream fits; larger answers are cut

GUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
ZERO_GUID = "00000000-0000-0000-0000-000000000000"
JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")
IPV4 = re.compile(r"\b(?!127\.)(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b")
BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}")
# the other credentials an HTTP Authorization header carries: Basic user:password, Storage SharedKey
AUTH_SCHEME = re.compile(r"(?i)\b(basic|sharedkey(?:lite)?)(\s+)([A-Za-z0-9._~+/=:-]{8,})")
# key=value / key: value in free text (log lines, URLs, connection strings) whose key says it is
# secret: `AccountKey=` and `SharedAccessKey=` of a connection string, a SAS's `sig=`, `token=`...
SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b([A-Za-z0-9_]*(?:password|passwd|secret|token|apikey|api_key|accountkey|sharedkey|"
    r"sharedaccesskey|access_key|accesskey|privatekey|private_key|connectionstring|credential|"
    r"signature|identity_header)[A-Za-z0-9_]*|sig)(\s*[=:]\s*)(?!<)(\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"
)
# a name beside a value (`{"name": "API_KEY", "value": ...}`, an environment variable or an app
# secret) that says the value is secret; narrow, because users choose these names
SECRET_KEY = re.compile(
    r"(?i)(password|passwd|secret|shared_?key|primary_?key|secondary_?key|account_?key|api_?key|"
    r"access_?key|connection_?string|identity_header|token$|^token|^key$|_key$|sas$)"
)
# a JSON field of an Azure answer or request whose string value is a credential by what the field
# is, whatever the value looks like: storage and Log Analytics keys (`accountKey`, `primaryKey`,
# `primarySharedKey`, any `...Key`), tokens (`token`, `accessToken`, `refresh_token`,
# `accountSasToken`), passwords, client secrets, connection strings, signatures, certificates
SECRET_FIELD = re.compile(
    r"(?i)(password|passwd|secret|credential|key$|token|signature|^sig$|sas$|connection_?string|"
    r"authorization|cookie|identity_header|certificate_?(value|password)|pfx|private_?key)"
)
# keys that say what a secret is called, where it lives, when it ends or what kind it is, not what
# it is
NOT_SECRET_KEY = re.compile(
    r"(?i)(ref|name|names|type|url|uri|endpoint|id|expires|expireson|expiry|version|count|kind|"
    r"(public|partition|row|sort|tag|dimension|group|grouping)_?key)$"
)
# lists whose every entry is a credential (`{"keyName": "key1", "value": ...}` of storage listKeys,
# ACR listCredentials' `passwords`, an app's or job's `secrets`): each entry's `value` is secret
SECRET_LISTS = {"secrets", "keys", "passwords", "credentials", "sharedkeys", "tokens"}
# actions whose whole answer is credentials (storage and Log Analytics keys, ACR credentials, app
# and job secrets, ACA tokens, SAS): every string of the answer is secret but what names or dates
# one (`keyName`, `permissions`, `creationTime`, `expires`, `username`)
SECRET_ACTION = re.compile(
    r"(?i)/(list\w*keys|listsecrets|listcredentials|getauthtoken|sharedkeys|list\w*sas|"
    r"regenerate\w*|generatecredentials|list\w*connectionstrings?)(\?|$)"
)
NOT_SECRET_IN_ANSWER = re.compile(r"(?i)(time|date|on|permissions|location|username|keyname|expires\w*)$")
# a high-entropy run of base64 (or URL-safe base64) that no rule above named: a key or token in a
# place nobody predicted (a log line, an error message). Mixed case and digits, 32+ characters with
# padding or 40+ without, and an entropy near what random characters of that length have (see
# looks_random): storage keys (88 characters, about 5.5 bits each) are caught; paths, resource
# names and versions (4.1 to 4.2 bits at 40 to 50 characters) and hex digests (at most 4) are not
BASE64_RUN = re.compile(
    r"(?<![A-Za-z0-9+/=_-])(?:[A-Za-z0-9+/]{32,}={1,2}|[A-Za-z0-9+/]{40,}|[A-Za-z0-9_-]{40,}={0,2})"
    r"(?![A-Za-z0-9+/=_-])"
)
# of the most a run of its length can have (log2 of its length, 64 symbols at most): random base64
# of 40 characters has 4.3 to 5.2 bits (lowest of 2,000 draws: 4.28 > 0.8 x 5.32 = 4.26)
RANDOM_SHARE = 0.8
# keys whose value names a person or a tenant, not a resource
PERSON_KEYS = {"createdby", "lastmodifiedby", "upn", "unique_name", "given_name", "family_name", "owner"}
# keys whose value identifies a subscription by other means than its id (a hash Azure derives from
# it for custom-domain TXT records): replaced like the subscription id itself
IDENTIFIER_KEYS = {"customdomainverificationid"}
# a physical GPU's serial number (`nvidia-smi -q`): not a credential, but it names one board in one
# datacenter; the GPU's UUID is a GUID and goes with the GUIDs
GPU_SERIAL = re.compile(r"(Serial Number\s*:\s*)(?!N/A\b)([A-Za-z0-9-]{4,})")
MIN_SECRET = 6  # a remembered secret this long is replaced wherever it appears in free text
# shorter ones (3 to 5 characters) only where they stand alone; under 3 a value is not looked for
# in free text at all, or every log would lose its digits (its own field is still replaced)
MIN_SHORT_SECRET = 3
PLACEHOLDER = re.compile(r"00000000-0000-4000-8000-\d{12}|user\d+@example\.com|192\.0\.2\.\d+|<[a-z]+-\d+>")
SUBSCRIPTION_IN_URL = re.compile(r"/subscriptions/([0-9a-fA-F-]{36})")


@dataclass
class Sanitizer:
    """Consistent placeholders: the n-th distinct GUID becomes `00000000-0000-4000-8000-<n>`, etc."""

    seen: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def _placeholder(self, kind: str, original: str) -> str:
        if PLACEHOLDER.fullmatch(original):  # sanitizing twice changes nothing more
            return original
        key = f"{kind}:{original.lower() if kind == 'guid' else original}"
        if key not in self.seen:
            n = self.counts[kind] = self.counts.get(kind, 0) + 1
            self.seen[key] = {
                "guid": f"00000000-0000-4000-8000-{n:012d}",
                "jwt": f"<jwt-{n}>",
                "email": f"user{n}@example.com",
                "ip": f"192.0.2.{n % 250 + 1}",
                "bearer": f"Bearer <token-{n}>",
            }.get(kind, f"<{kind}-{n}>")
        return self.seen[key]

    def secret(self, value: str) -> str:
        """A secret value: its placeholder, remembered so later free text loses it too (as is and
        URL-quoted: a storage key's `/`, `+` and `=` travel as `%2F`, `%2B`, `%3D` in a URL)."""
        if value in self.secrets:
            return self.secrets[value]
        placeholder = self._placeholder("secret", value)
        if len(value) >= MIN_SHORT_SECRET:
            self.secrets[value] = placeholder
            quoted = quote(value, safe="")
            if quoted != value:
                self.secrets[quoted] = placeholder
        return placeholder

    def text(self, value: str) -> str:
        """Free text (a URL, a log line, an exec frame): every secret it can be seen to hold."""
        for known in sorted(self.secrets, key=len, reverse=True):
            if known not in value:
                continue
            if len(known) >= MIN_SECRET:
                value = value.replace(known, self.secrets[known])
            else:  # a short value only where it stands alone: inside a word it is not the secret
                value = re.sub(
                    rf"(?<![A-Za-z0-9]){re.escape(known)}(?![A-Za-z0-9])", self.secrets[known], value
                )
        value = BEARER.sub(lambda m: self._placeholder("bearer", m.group()), value)
        value = AUTH_SCHEME.sub(lambda m: m.group(1) + m.group(2) + self.secret(m.group(3)), value)
        value = JWT.sub(lambda m: self._placeholder("jwt", m.group()), value)
        value = SECRET_ASSIGNMENT.sub(lambda m: m.group(1) + m.group(2) + self.secret(m.group(3)), value)
        value = BASE64_RUN.sub(self._high_entropy, value)
        value = GPU_SERIAL.sub(lambda m: m.group(1) + self._placeholder("serial", m.group(2)), value)
        value = GUID.sub(lambda m: m.group() if m.group() == ZERO_GUID else self._guid(m.group()), value)
        value = EMAIL.sub(lambda m: self._placeholder("email", m.group()), value)
        return IPV4.sub(lambda m: self._placeholder("ip", m.group()), value)

    def _high_entropy(self, match: re.Match[str]) -> str:
        found = match.group()
        return self.secret(found) if looks_random(found) else found

    def _guid(self, value: str) -> str:
        return self._placeholder("guid", value)

    def value(self, obj: Any, key: str = "") -> Any:
        """A JSON value; `key` is the key it sits under (its secrecy is judged by that key)."""
        if isinstance(obj, Mapping):
            return self._mapping(obj)
        if isinstance(obj, list):
            return [self.value(item, key) for item in obj]
        if isinstance(obj, str):
            if obj and is_secret_field(key):
                return self.secret(obj)
            if obj and key.lower() in PERSON_KEYS:
                return self._placeholder("person", obj)
            if obj and key.lower() in IDENTIFIER_KEYS:
                return self._placeholder("id", obj)
            return self.text(obj)
        return obj

    def credentials(self, obj: Any, key: str = "") -> Any:
        """The answer of an action whose answer is credentials (SECRET_ACTION): every string in it
        is secret but names, kinds and dates."""
        if isinstance(obj, Mapping):
            return {k: self.credentials(v, k) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.credentials(item, key) for item in obj]
        if isinstance(obj, str) and obj:
            if NOT_SECRET_KEY.search(key) or NOT_SECRET_IN_ANSWER.search(key):
                return self.text(obj)
            return self.secret(obj)
        return obj

    def _mapping(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        # {"name": "API_KEY", "value": "..."} (env vars), {"keyName": "key1", "value": "..."}
        # (storage listKeys): the value is secret whatever its own key says
        name = obj.get("name")
        paired_secret = "keyName" in obj or (isinstance(name, str) and bool(SECRET_KEY.search(name)))
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if k.lower() in SECRET_LISTS and isinstance(v, list):
                out[k] = [self._secret_entry(item) for item in v]
            elif k.lower() in SECRET_LISTS and isinstance(v, Mapping):
                out[k] = self._secret_entry(v)
            elif k == "value" and paired_secret and isinstance(v, str) and v:
                out[k] = self.secret(v)
            elif k == "tags" and isinstance(v, Mapping):
                out[k] = {tk: self.value(tv, tk.split(":")[-1]) for tk, tv in v.items()}
            else:
                out[k] = self.value(v, k)
        return out

    def _secret_entry(self, item: Any) -> Any:
        """One entry of a list of credentials: its `value` (or the entry itself, a bare string)."""
        if isinstance(item, str):
            return self.secret(item) if item else item
        if not isinstance(item, Mapping):
            return self.value(item, "secret")
        return {
            k: self.secret(v) if k == "value" and isinstance(v, str) and v else self.value(v, k)
            for k, v in item.items()
        }


def is_secret_field(key: str) -> bool:
    """Whether a JSON field's string value is a credential by what the field is."""
    return bool(key) and bool(SECRET_FIELD.search(key)) and not NOT_SECRET_KEY.search(key)


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_random(text: str) -> bool:
    """A base64 run that reads as a key or a token: upper and lower case, digits, high entropy."""
    body = text.rstrip("=")
    mixed = any(c.isupper() for c in body) and any(c.islower() for c in body)
    if not (mixed and any(c.isdigit() for c in body)):
        return False
    return entropy(body) > RANDOM_SHARE * math.log2(min(len(body), 64))


def parse_body(text: str) -> tuple[Any, list[Any] | None]:
    """(JSON body or text, its lines parsed when it is line-delimited JSON)."""
    if not text:
        return "", None
    try:
        return json.loads(text), None
    except ValueError:
        pass
    try:
        lines = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
    except ValueError:
        lines = None
    return text[:MAX_TEXT], lines


class Recorder:
    """Writes sanitized exchanges to DIR/recording.jsonl as they complete (threads share it)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sanitizer = Sanitizer()
        self._lock = threading.Lock()
        self.count = 0
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / RECORDING_FILE
        if self.path.exists() and self.path.stat().st_size:
            raise BadInput(
                f"--record: {folder} already holds a recording",
                hint="choose an empty folder (a recording is never overwritten)",
            )
        self.path.write_text("", encoding="utf-8")

    def exchange(
        self,
        method: str,
        url: str,
        request_body: str | bytes | None,
        status: int,
        headers: Mapping[str, str],
        body: str,
        **extra: Any,
    ) -> None:
        with self._lock:
            s = self.sanitizer
            request: Any = None
            if request_body:
                text = (
                    request_body.decode("utf-8", "replace")
                    if isinstance(request_body, bytes)
                    else request_body
                )
                parsed, _ = parse_body(text)
                request = s.value(parsed, "body")
            response, lines = parse_body(body)
            if SECRET_ACTION.search(url.split("?", 1)[0]):
                response = s.credentials(response)
            line: dict[str, Any] = {
                "method": method,
                "uri": s.text(url),
                "request_body": request,
                "status": status,
                "response_headers": {
                    k: s.text(v) for k in KEPT_HEADERS for hk, v in headers.items() if hk.lower() == k
                },
                "response_body": s.value(response, "body"),
            }
            if lines is not None:
                line["response_body_ndjson"] = [s.value(item, "line") for item in lines]
            line.update({k: s.value(v, k) for k, v in extra.items()})
            self._write(line)

    def websocket(self, url: str, status: int, frames: list[dict[str, Any]]) -> None:
        with self._lock:
            s = self.sanitizer
            clean = [{**f, "text": s.text(f["text"])} if "text" in f else f for f in frames]
            self._write({"method": "WEBSOCKET", "uri": s.text(url), "status": status, "frames": clean})

    def _write(self, line: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        self.count += 1

    def finish(self, command: str, exit_code: int, argv: list[str] | None = None) -> None:
        """meta.json: what produced the recording (the arguments a replay runs again, without the
        ones that chose where to run), and the subscription placeholder a replay uses."""
        with self._lock:
            from aca_gpu import __version__

            found = SUBSCRIPTION_IN_URL.search(self.path.read_text(encoding="utf-8"))
            meta = {
                "schema": 1,
                "acagpu": __version__,
                "command": command,
                "argv": scrub_argv(replay_argv(argv or []), self.sanitizer),
                "exit_code": exit_code,
                "exchanges": self.count,
                "subscription": found.group(1) if found else ZERO_GUID,
            }
            (self.folder / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


# options that say where a run went (or its notification), not what it did: a replay chooses its own
WHERE_FLAGS = {"--emulator": 0, "--time-scale": 1, "--record": 1, "--subscription": 1, "--notify": 1}


def replay_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        flag = arg.split("=", 1)[0]
        if flag in WHERE_FLAGS:
            skip = 0 if "=" in arg else WHERE_FLAGS[flag]
            continue
        out.append(arg)
    return out


# options whose value is a credential: a password, a webhook URL (Slack's and Teams' URLs are their
# own secret), a token; `--secret-env NAME` and `--registry-password-env NAME` name a variable instead
SECRET_FLAG = re.compile(r"^--[a-z-]*(password|passwd|token|secret|notify|webhook|key)(?!-env$)[a-z-]*$")


def scrub_argv(argv: list[str], sanitizer: Sanitizer) -> list[str]:
    """The command line as meta.json keeps it: each secret option's value replaced (`--password X`
    and `--password=X` alike), the rest sanitized as free text."""
    out: list[str] = []
    secret_next = False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if secret_next:
            out.append(sanitizer.secret(arg))
        elif eq and flag.startswith("--") and SECRET_FLAG.match(flag):
            out.append(f"{flag}={sanitizer.secret(value)}")
        else:
            out.append(sanitizer.text(arg))
        secret_next = not eq and arg.startswith("--") and bool(SECRET_FLAG.match(arg))
    return out


_ACTIVE: Recorder | None = None


def start(folder: Path) -> Recorder:
    global _ACTIVE
    _ACTIVE = Recorder(folder)
    return _ACTIVE


def active() -> Recorder | None:
    return _ACTIVE


def stop() -> None:
    global _ACTIVE
    _ACTIVE = None
