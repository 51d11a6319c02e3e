"""Locate files shipped with acagpu (tester script, workflow templates, data) in a wheel or a checkout."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def template_path(*parts: str) -> Path:
    """A file under templates/: packaged as aca_gpu/_templates, or the repo's templates/ in a checkout."""
    for root in (_PKG / "_templates", _PKG.parent / "templates"):
        candidate = root.joinpath(*parts)
        if candidate.exists():
            return candidate
    raise FileNotFoundError("/".join(("templates", *parts)))


def data_path(*parts: str) -> Path:
    return _PKG.joinpath("gpu", "data", *parts)
