"""`emulator serve --env-file` writes a file that a second shell sources, and that a script may be
waiting for: it must appear whole. Written in place, it existed (empty) before its text was in, so
a reader that saw the file read no variables (found by a test under load: "no Azure subscription")."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from aca_gpu.cli.emulator import write_env_file


def _watch_writes(monkeypatch: pytest.MonkeyPatch, target: Path) -> list[str | None]:
    """What a reader of `target` would have found at each write of the file's text."""
    seen: list[str | None] = []
    real = os.write

    def write(fd: int, data: bytes) -> int:
        seen.append(target.read_text(encoding="utf-8") if target.exists() else None)
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return seen


def test_the_env_file_appears_only_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "acagpu.env"
    seen = _watch_writes(monkeypatch, target)
    write_env_file(target, "export ACAGPU_SUBSCRIPTION=s\n")
    assert seen and all(found is None for found in seen), seen
    assert target.read_text(encoding="utf-8") == "export ACAGPU_SUBSCRIPTION=s\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["acagpu.env"]  # no temporary file left


def test_a_file_written_again_holds_the_old_text_until_the_new_one_is_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "acagpu.env"
    target.write_text("export OLD=1\n", encoding="utf-8")
    target.chmod(0o644)
    seen = _watch_writes(monkeypatch, target)
    write_env_file(target, "export NEW=1\n")
    assert seen and all(found == "export OLD=1\n" for found in seen), seen
    assert target.read_text(encoding="utf-8") == "export NEW=1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
