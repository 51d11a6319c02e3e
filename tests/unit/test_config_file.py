"""A config file that is not text is bad input naming the file (exit 2), not an unexpected error."""

from __future__ import annotations

from pathlib import Path

import pytest

from aca_gpu.config import load_config_file
from aca_gpu.errors import BadInput


def test_a_binary_config_file_is_bad_input_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"\x80\x81\xfe" + bytes(range(256)))
    with pytest.raises(BadInput) as caught:
        load_config_file(path)
    assert str(path) in caught.value.message and "not a UTF-8 text file" in caught.value.message
    assert caught.value.exit_code == 2
