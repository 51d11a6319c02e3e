"""docs/json.md says what the commands print: each documented field list is checked against a real
document (the docs follow the code)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.registry.images import ImageInfo
from aca_gpu.registry.tags import parse_cuda_tag
from aca_gpu.workflow.preflight.tags import TagsResult

JSON_SECTION = (Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text(encoding="utf-8")


def _bullet(command: str) -> str:
    match = re.search(rf"^- `{re.escape(command)}` → (.*?)(?=^- `|\Z)", JSON_SECTION, re.M | re.S)
    assert match, f"no JSON bullet for {command}"
    return " ".join(match.group(1).split())


def _fields(text: str) -> set[str]:
    return set(re.findall(r"[a-z_]+", text))


def test_compat_exit_codes_are_documented_as_they_are() -> None:
    said = _bullet("compat")
    assert "5 for minor-compat" not in said and "minor-compat and unknown" in said, said
    args = ["compat", "--image", "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "--driver", "535.104.05"]
    loose = CliRunner().invoke(cli, [*args, "--require", "cuda>=12.0", "-o", "json"])
    assert loose.exit_code == 0 and json.loads(loose.stdout)["verdict"] == "minor-compat"  # documented 0
    strict = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert strict.exit_code == 5 and json.loads(strict.stdout)["require_check"] == "fail"  # documented 5


def test_tags_inspect_fields_are_the_documented_ones() -> None:
    said = _bullet("tags")
    inspected = re.search(r"--inspect` `\{([^}]*)\}`", said)
    assert inspected, said
    tag = parse_cuda_tag("12.4.1-runtime-ubuntu22.04")
    assert tag is not None
    info = ImageInfo(
        "nvidia/cuda", "12.4.1-runtime-ubuntu22.04", "sha256:" + "a" * 64, "12.4.1", "cuda>=12.4"
    )
    result = TagsResult("docker.io", "nvidia/cuda", 1, 0, [tag], {tag.tag: info})
    row = result.as_dict()["tags"][0]
    assert _fields(inspected.group(1)) == set(row), (inspected.group(1), sorted(row))


def test_validate_document_has_no_kind_but_its_command() -> None:
    said = _bullet("validate")
    assert 'kind: "validate"' not in said and 'command: "validate"' in said, said


def _key_drift(documented: Any, real: Any, path: str = "") -> list[str]:
    """Keys one side has and the other lacks, object by object (a documented `"..."` key stands for
    fields left out; a list is compared by its first element)."""
    if isinstance(documented, dict) and isinstance(real, dict):
        said, got = set(documented) - {"..."}, set(real)
        drift = [f"{path or '.'}: documented, not printed: {sorted(said - got)}"] if said - got else []
        if got - said and "..." not in documented:
            drift.append(f"{path or '.'}: printed, not documented: {sorted(got - said)}")
        for key in sorted(said & got):
            drift += _key_drift(documented[key], real[key], f"{path}.{key}")
        return drift
    if isinstance(documented, list) and isinstance(real, list) and documented and real:
        return _key_drift(documented[0], real[0], f"{path}[0]")
    return []


def test_up_document_example_has_the_fields_up_prints() -> None:
    example = JSON_SECTION[JSON_SECTION.index("```json") + len("```json") :]
    documented = json.loads(example[: example.index("```")])
    done = CliRunner().invoke(cli, ["up", "--emulator", "--time-scale", "0.002", "-o", "json"])
    assert done.exit_code == 0, done.stderr
    assert not _key_drift(documented, json.loads(done.stdout))
