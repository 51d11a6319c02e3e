"""Settings: flags > ACAGPU_* environment > config file > defaults (DESIGN.md §3)."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput

DEFAULT_LOCATION = "eastus"
DEFAULT_GPU = "t4"
DEFAULT_IMAGE = "nvidia/cuda:12.1.1-runtime-ubuntu22.04"
DEFAULT_TTL = "2h"


def config_file() -> Path:
    explicit = os.environ.get("ACAGPU_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "acagpu" / "config.toml"


def load_config_file(path: Path | None = None) -> dict[str, Any]:
    path = path or config_file()
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"cannot read config file {path}: {exc}") from exc


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
    extra: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, **values: Any) -> Settings:
        return replace(self, **{k: v for k, v in values.items() if v is not None})


def load_settings(env: dict[str, str] | None = None, file: dict[str, Any] | None = None) -> Settings:
    env = dict(os.environ) if env is None else env
    cfg = load_config_file() if file is None else file
    defaults = Settings()

    def pick(key: str, env_key: str, default: Any) -> Any:
        return env.get(env_key) or cfg.get(key) or default

    subscription = (
        env.get("ACAGPU_SUBSCRIPTION") or cfg.get("subscription") or env.get("AZURE_SUBSCRIPTION_ID") or None
    )
    poll = pick("polling_interval", "ACAGPU_POLLING_INTERVAL", defaults.polling_interval)
    try:
        poll = float(poll)
    except ValueError as exc:
        raise BadInput(f"invalid polling interval {poll!r}") from exc
    return Settings(
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
        extra={k: v for k, v in cfg.items() if not isinstance(v, dict)},
    )
