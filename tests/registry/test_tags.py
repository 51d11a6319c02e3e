"""Tag selection rules (pure) and `acagpu tags` end to end against the live test registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.errors import BadInput
from aca_gpu.registry.tags import TagFilter, parse_cuda_tag, parse_version, select, tags_in_text

REAL_TAGS = [  # names as they appear on nvidia/cuda
    "12.4.1-cudnn-runtime-ubuntu22.04",
    "12.1.1-runtime-ubuntu22.04",
    "13.0.0-base-ubuntu24.04",
    "12.2.2-devel-ubi8",
    "11.8.0-cudnn8-runtime-ubuntu22.04",
    "12.9.1-runtime-ubuntu22.04",
    "12.10.0-runtime-ubuntu22.04",
    "12.1.0-runtime-ubuntu22.04",
    "12.0.1-runtime-ubuntu22.04",
    "latest",
    "12.4.1-runtime-ubuntu22.04-sha",
]


@pytest.mark.parametrize(
    ("tag", "version", "flavor", "os"),
    [
        ("12.4.1-cudnn-runtime-ubuntu22.04", (12, 4, 1), "cudnn-runtime", "ubuntu22.04"),
        ("12.1.1-runtime-ubuntu22.04", (12, 1, 1), "runtime", "ubuntu22.04"),
        ("13.0.0-base-ubuntu24.04", (13, 0, 0), "base", "ubuntu24.04"),
        ("12.2.2-devel-ubi8", (12, 2, 2), "devel", "ubi8"),
        ("11.8.0-cudnn8-runtime-ubuntu22.04", (11, 8, 0), "cudnn8-runtime", "ubuntu22.04"),
    ],
)
def test_parses_nvidia_cuda_tags(tag: str, version: tuple[int, ...], flavor: str, os: str) -> None:
    parsed = parse_cuda_tag(tag)
    assert parsed is not None
    assert (parsed.version, parsed.flavor, parsed.os) == (version, flavor, os)


@pytest.mark.parametrize("tag", ["latest", "12.4.1-runtime-ubuntu22.04-sha", "runtime-12.1", ""])
def test_other_tags_are_not_cuda_tags(tag: str) -> None:
    assert parse_cuda_tag(tag) is None


def test_newest_first_is_numeric_not_lexical() -> None:
    chosen = select(REAL_TAGS, TagFilter(flavor="runtime", os="ubuntu22.04"))
    assert [t.tag for t in chosen] == [
        "12.10.0-runtime-ubuntu22.04",
        "12.9.1-runtime-ubuntu22.04",
        "12.1.1-runtime-ubuntu22.04",
        "12.1.0-runtime-ubuntu22.04",
        "12.0.1-runtime-ubuntu22.04",
    ]


def test_since_includes_the_named_minor_and_limit_keeps_the_newest() -> None:
    since = select(REAL_TAGS, TagFilter(flavor="runtime", since=parse_version("12.1")))
    assert [t.version_text for t in since] == ["12.10.0", "12.9.1", "12.1.1", "12.1.0"]
    limited = select(REAL_TAGS, TagFilter(since=(12, 1), limit=2))
    assert [t.tag for t in limited] == ["13.0.0-base-ubuntu24.04", "12.10.0-runtime-ubuntu22.04"]


@pytest.mark.parametrize("text", ["12.x", "", "twelve", "12.1.1.1"])
def test_bad_versions_are_bad_input(text: str) -> None:
    with pytest.raises(BadInput):
        parse_version(text)


@pytest.mark.parametrize(
    "text",
    [
        "12.1.1-runtime-ubuntu22.04\n# validated last week\nnvidia/cuda:12.9.1-runtime-ubuntu22.04\n",
        json.dumps(["12.1.1-runtime-ubuntu22.04", "12.9.1-runtime-ubuntu22.04"]),
        json.dumps(
            {
                "schema": 1,
                "kind": "matrix",
                "results": [
                    {"image": "nvidia/cuda:12.1.1-runtime-ubuntu22.04", "gpu": "t4", "status": "pass"},
                    {"image": "docker.io/nvidia/cuda:12.9.1-runtime-ubuntu22.04@sha256:" + "0" * 64},
                ],
            }
        ),
        json.dumps(
            {"include": [{"tag": "12.1.1-runtime-ubuntu22.04"}, {"tag": "12.9.1-runtime-ubuntu22.04"}]}
        ),
    ],
    ids=["lines", "json-list", "report", "matrix"],
)
def test_not_in_reads_lines_lists_reports_and_matrices(text: str) -> None:
    assert tags_in_text(text) == {"12.1.1-runtime-ubuntu22.04", "12.9.1-runtime-ubuntu22.04"}


def test_not_in_rejects_broken_json() -> None:
    with pytest.raises(BadInput, match="does not parse"):
        tags_in_text('["12.1.1-runtime-ubuntu22.04",')


# -- end to end: `acagpu tags` against the live registry -------------------------------------------
def run(registry, *args: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(
        cli, ["tags", "nvidia/cuda", "--registry", registry.host, "--ca-bundle", registry.ca_bundle, *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_cli_json_is_a_matrix_ready_list_newest_first(registry) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(
        registry,
        "--flavor",
        "runtime",
        "--os",
        "ubuntu22.04",
        "--since",
        "12.1",
        "-o",
        "json",
        "--query",
        "tags",
    )
    assert code == 0
    assert json.loads(out) == [
        "13.0.1-runtime-ubuntu22.04",
        "12.9.1-runtime-ubuntu22.04",
        "12.8.1-runtime-ubuntu22.04",
        "12.6.3-runtime-ubuntu22.04",
        "12.4.1-runtime-ubuntu22.04",
        "12.3.2-runtime-ubuntu22.04",
        "12.2.2-runtime-ubuntu22.04",
        "12.1.1-runtime-ubuntu22.04",
        "12.1.0-runtime-ubuntu22.04",
    ]


def test_cli_not_in_and_limit(registry, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seen = tmp_path / "validated.txt"
    seen.write_text("13.0.1-runtime-ubuntu22.04\nnvidia/cuda:12.9.1-runtime-ubuntu22.04\n", encoding="utf-8")
    args = ("--flavor", "runtime", "--os", "ubuntu22.04", "--since", "12.1", "--not-in", str(seen))
    code, out, _ = run(registry, *args, "--limit", "2", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["schema"], doc["command"]) == (1, "tags")
    assert doc["tags"] == ["12.8.1-runtime-ubuntu22.04", "12.6.3-runtime-ubuntu22.04"]
    code, out, _ = run(registry, *args, "--limit", "2", "-o", "tsv", "--query", "tags")
    assert (code, out) == (0, "12.8.1-runtime-ubuntu22.04\n12.6.3-runtime-ubuntu22.04\n")
    code, out, _ = run(registry, *args)
    assert code == 0
    assert "7 of 21 tags match (2 already listed in --not-in)" in out


def test_cli_inspect_records_digests(registry) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(
        registry, "--os", "ubuntu22.04", "--since", "12.4", "--flavor", "runtime", "--inspect", "-o", "json"
    )
    assert code == 0
    rows = {row["tag"]: row for row in json.loads(out)["tags"]}
    index = registry.pushed[registry.index_tag]
    assert rows[registry.index_tag]["digest"] == index.digest
    assert rows[registry.index_tag]["env_cuda"] == "12.4.1"
    assert rows[registry.index_tag]["image"] == f"{registry.host}/nvidia/cuda:{registry.index_tag}"
    assert all(row["require_cuda"].startswith("cuda>=") for row in rows.values())


@pytest.mark.parametrize(
    "args",
    [("--since", "twelve"), ("--limit", "0"), ("--not-in", "/nonexistent/validated.txt")],
    ids=["since", "limit", "not-in"],
)
def test_cli_bad_input_exits_2(registry, args: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run(registry, *args)
    assert code == 2
    assert err.startswith("error: ")


def test_cli_repository_with_tag_is_bad_input() -> None:
    result = CliRunner().invoke(cli, ["tags", "nvidia/cuda:12.1.1-runtime-ubuntu22.04"])
    assert result.exit_code == 2 and "without a tag" in result.stderr


def test_cli_unknown_repository_exits_2(registry) -> None:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(
        cli, ["tags", "nvidia/nope", "--registry", registry.host, "--ca-bundle", registry.ca_bundle]
    )
    assert result.exit_code == 2 and "not found" in result.stderr


@pytest.mark.parametrize("repository", ["nosuch.invalid/nvidia/cuda", "127.0.0.1:9/nvidia/cuda"])
def test_an_unreachable_registry_is_exit_7_with_a_sentence(repository: str) -> None:
    """No network (a name that does not resolve, a port nobody listens on) is infrastructure: exit 7
    and one sentence, never exit 1 with the transport library's exception text."""
    res = CliRunner().invoke(cli, ["tags", repository, "-o", "json"])
    assert res.exit_code == 7, res.output
    error = json.loads(res.stdout)["error"]
    assert error["exit_code"] == 7 and error["message"].startswith("cannot reach registry"), error
    assert "Error(" not in res.stderr and "HTTPSConnectionPool" not in res.stderr, res.stderr


def test_compat_reads_a_mirrors_cuda_from_the_registry(registry, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A mirror image named by digest (no tag to read): its own CUDA_VERSION and NVIDIA_REQUIRE_CUDA
    come from the registry before acagpu answers `unknown`."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", registry.ca_bundle)
    pushed = registry.pushed[registry.docker_tag]  # CUDA 12.8.1
    image = f"{registry.host}/{registry.repo}@{pushed.digest}"
    res = CliRunner().invoke(cli, ["compat", "--image", image, "--driver", "550.54.15", "-o", "json"])
    doc = json.loads(res.stdout)
    assert doc["verdict"] != "unknown" and doc["cuda_version"] == "12.8.1", (doc, res.stderr)
    assert "read from the registry" in doc["reason"]
    offline = CliRunner().invoke(
        cli, ["compat", "--image", image, "--driver", "550.54.15", "--offline", "-o", "json"]
    )
    assert json.loads(offline.stdout)["verdict"] == "unknown"
