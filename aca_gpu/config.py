"""Settings: flags > ACAGPU_* environment > config file > defaults (docs/cli.md)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aca_gpu.errors import BadInput

GUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
STRING_KEYS = (
    "subscription",
    "arm_endpoint",
    "ca_bundle",
    "location",
    "gpu",
    "image",
    "ttl",
    "owner",
    "env",
    "notify",
)

DEFAULT_LOCATION = "eastus"
DEFAULT_GPU = "t4"
# A plain `up` probe runs nvidia-smi only, which the NVIDIA runtime mounts into any image carrying
# NVIDIA_DRIVER_CAPABILITIES=utility: the `base` flavour (cudart and cuda-compat only) gives the same
# CUDA version, the same NVIDIA_REQUIRE_CUDA and so the same verdict as `runtime` (which adds the
# math libraries and NCCL), at a fraction of the pull (docs/staging.md, "Smaller by default").
DEFAULT_IMAGE = "nvidia/cuda:12.1.1-base-ubuntu22.04"
DEFAULT_TTL = "2h"


def config_file() -> Path:
    """ACAGPU_CONFIG names the file (and then it must exist); else the XDG default, if present."""
    explicit = os.environ.get("ACAGPU_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise BadInput(
                f"ACAGPU_CONFIG names {explicit!r}, which is not a file",
                hint="create that TOML file, or unset ACAGPU_CONFIG",
            )
        return path
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "acagpu" / "config.toml"


def load_config_file(path: Path | None = None) -> dict[str, Any]:
    path = path or config_file()
    if not path.exists():
        return {}
    import tomllib  # a command without a config file need not load the parser

    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise BadInput(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"config file {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # a binary file: TOML is UTF-8 text
        raise BadInput(
            f"config file {path} is not a UTF-8 text file (byte {exc.start} is not UTF-8); "
            "a config file is TOML text"
        ) from None
    for key in STRING_KEYS:
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            raise BadInput(f"config file {path}: {key} must be a non-empty string, not {data[key]!r}")
    _warn_unknown_keys(path, data)
    return data


KNOWN_KEYS = (*STRING_KEYS, "polling_interval", "regions")
_warned: set[tuple[str, str]] = set()


def _warn_unknown_keys(path: Path, data: dict[str, Any]) -> None:
    """A misspelt key would silently mean the default: say so once (tables are other tools' own)."""
    import difflib
    import sys

    for key, value in data.items():
        if key in KNOWN_KEYS or isinstance(value, dict) or (str(path), key) in _warned:
            continue
        _warned.add((str(path), key))
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
        also = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(KNOWN_KEYS)})"
        print(f"warning: config file {path}: unknown key {key!r}{also}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Settings:
    """Where to talk to and how; resolved once per command."""

    subscription: str | None = None
    arm_endpoint: str | None = None  # ACAGPU_ARM_ENDPOINT: replaces https://management.azure.com
    ca_bundle: str | None = None  # ACAGPU_CA_BUNDLE: PEM file to trust (emulator)
    token: str | None = field(default=None, repr=False)  # ACAGPU_TOKEN: static bearer, never printed
    location: str = DEFAULT_LOCATION
    gpu: str = DEFAULT_GPU
    image: str = DEFAULT_IMAGE
    ttl: str = DEFAULT_TTL
    owner: str | None = None
    polling_interval: float = 5.0
    regions: tuple[str, ...] = ()  # failover order for up/validate (config `regions`, ACAGPU_REGIONS)
    env: str | None = None  # warm environment for up/validate/test (config `env`, ACAGPU_ENV)
    notify: str | None = field(default=None, repr=False)  # webhook URL (config `notify`, ACAGPU_NOTIFY)
    # the subscription `--subscription` chose when it is not the shell's own: every `down` a command
    # prints must then name it (a bare `down` in the same shell would look in the other one)
    named_subscription: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, **values: Any) -> Settings:
        return replace(self, **{k: v for k, v in values.items() if v is not None})


def _regions(value: Any) -> tuple[str, ...]:
    """`regions` as a TOML list or a comma-separated string; checked as regions by the plan."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise BadInput(f"regions must be a list of region names or 'r1,r2', not {value!r}")
    return tuple(items)


def load_settings(
    env: dict[str, str] | None = None, file: dict[str, Any] | None = None, *, check: bool | None = None
) -> Settings:
    """Resolve settings; `check` (default: when reading the real environment) refuses unusable values
    up front: a subscription that is not a GUID, an endpoint that is not https, a CA bundle that is
    not a PEM file. Tests that pass `env` directly may use placeholder values."""
    check = env is None if check is None else check
    env = dict(os.environ) if env is None else env
    cfg = load_config_file() if file is None else file
    defaults = Settings()

    sources: dict[str, str] = {}  # where a checked setting came from, to name it in an error

    def pick(key: str, env_key: str, default: Any) -> Any:
        raw = env.get(env_key)
        if raw is not None and env_key in NON_EMPTY_ENV and check and not raw.strip():
            raise BadInput(f"{env_key} is set but empty: give a value or unset it")
        if raw:
            sources[key] = env_key
            return raw
        if cfg.get(key):
            sources[key] = f"{key} in the config file" + (f" {config_file()}" if file is None else "")
            return cfg.get(key)
        return default

    subscription = (
        env.get("ACAGPU_SUBSCRIPTION") or cfg.get("subscription") or env.get("AZURE_SUBSCRIPTION_ID") or None
    )
    poll = pick("polling_interval", "ACAGPU_POLLING_INTERVAL", defaults.polling_interval)
    try:
        poll = float(poll)
    except (TypeError, ValueError):
        poll = math.nan
    if not math.isfinite(poll) or poll <= 0:
        raise BadInput(
            "ACAGPU_POLLING_INTERVAL (or polling_interval in the config file) must be a positive "
            "number of seconds"
        )
    settings = Settings(
        subscription=subscription,
        arm_endpoint=pick("arm_endpoint", "ACAGPU_ARM_ENDPOINT", None),
        ca_bundle=pick("ca_bundle", "ACAGPU_CA_BUNDLE", None),
        token=env.get("ACAGPU_TOKEN") or None,
        location=pick("location", "ACAGPU_LOCATION", defaults.location),
        gpu=pick("gpu", "ACAGPU_GPU", defaults.gpu),
        image=pick("image", "ACAGPU_IMAGE", defaults.image),
        ttl=pick("ttl", "ACAGPU_TTL", defaults.ttl),
        owner=pick("owner", "ACAGPU_OWNER", None),
        polling_interval=poll,
        regions=_regions(env.get("ACAGPU_REGIONS") or cfg.get("regions")),
        env=pick("env", "ACAGPU_ENV", None),
        notify=pick("notify", "ACAGPU_NOTIFY", None),
        extra={k: v for k, v in cfg.items() if not isinstance(v, dict)},
    )
    if check:
        _check_sources(settings, sources)
    return check_settings(settings) if check else settings


# variables whose empty value would otherwise silently mean the default
NON_EMPTY_ENV = ("ACAGPU_LOCATION", "ACAGPU_GPU", "ACAGPU_IMAGE", "ACAGPU_TTL", "ACAGPU_OWNER")


def _check_sources(settings: Settings, sources: dict[str, str]) -> None:
    """A location or TTL from the environment or the config file is checked like its flag, and
    the error names where it came from (not `--ttl` when the flag was never given)."""
    from aca_gpu import naming

    checks: dict[str, Callable[[str], object]] = {"location": naming.validate_region, "ttl": naming.parse_ttl}
    for key, check in checks.items():
        if key not in sources:
            continue
        try:
            check(getattr(settings, key))
        except BadInput as exc:
            raise BadInput(f"{sources[key]}: {exc.message}", hint=exc.hint) from None


def check_settings(settings: Settings) -> Settings:
    """Values that would fail later, deep in the SDK, fail here with what is allowed (exit 2)."""
    if settings.subscription is not None and not GUID_RE.fullmatch(settings.subscription.strip()):
        raise BadInput(
            f"subscription {settings.subscription!r} (ACAGPU_SUBSCRIPTION, config file or "
            "AZURE_SUBSCRIPTION_ID) is not a GUID"
        )
    if settings.arm_endpoint is not None:
        url = urlsplit(settings.arm_endpoint.strip())
        if url.scheme != "https" or not url.hostname:
            raise BadInput(
                f"ACAGPU_ARM_ENDPOINT {settings.arm_endpoint!r} is not an https:// URL",
                hint="bearer tokens are only sent over TLS; the emulator serves https",
            )
    if settings.ca_bundle is not None:
        try:
            check_ca_bundle(settings.ca_bundle)
        except BadInput as exc:  # the emulator removes its CA when it stops
            if exc.hint is None and urlsplit(settings.arm_endpoint or "").hostname in LOCAL_HOSTS:
                exc.hint = EMULATOR_GONE_HINT
            raise
    return settings


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
EMULATOR_GONE_HINT = (
    "start it again (`acagpu emulator serve --env-file FILE`) and source FILE: each start has its own "
    "port, CA and token; or unset the ACAGPU_ARM_ENDPOINT, ACAGPU_CA_BUNDLE and ACAGPU_TOKEN it set "
    "to use Azure"
)


def check_ca_bundle(path: str, what: str = "ACAGPU_CA_BUNDLE") -> str:
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError as exc:
        raise BadInput(f"{what} {path!r} cannot be read: {exc.strerror or exc}") from None
    if b"-----BEGIN CERTIFICATE-----" not in head:
        raise BadInput(f"{what} {path!r} is not a PEM certificate bundle (no BEGIN CERTIFICATE)")
    import ssl  # (here: `acagpu --help` loads no TLS)

    try:  # a BEGIN line is not a certificate: let the TLS library load it now, not on every retry
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise BadInput(
            f"{what} {path!r} holds no usable certificate: the PEM does not load ({reason})"
        ) from None
    return path
