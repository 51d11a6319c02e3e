"""Driver <-> toolkit verdicts against every row of NVIDIA's table, and NVIDIA_REQUIRE_CUDA semantics."""

from __future__ import annotations

import pytest

from aca_gpu.errors import BadInput
from aca_gpu.gpu.cuda_compat import (
    max_cuda_for_driver,
    min_driver_for_cuda,
    minor_compat_floor,
    parse_driver_version,
    release_for_cuda,
    verdict,
)
from aca_gpu.gpu.cuda_releases import MINOR_COMPAT_FLOOR, RELEASES, CudaRelease
from aca_gpu.gpu.cuda_require import HostFacts, parse_require, version_tuple
from aca_gpu.gpu.image_ref import parse_image_ref


def one_below(driver: str) -> str:
    """The driver version just under `driver`: 535.104.05 -> 535.104.4, 570.26 -> 570.25, 610 -> 609.999."""
    parts = [int(p) for p in driver.split(".")]
    i = len(parts) - 1
    while i >= 0 and parts[i] == 0:
        i -= 1
    parts[i] -= 1
    parts[i + 1 :] = [999] * (len(parts) - i - 1)
    if len(parts) == 1:
        parts.append(999)
    return ".".join(str(p) for p in parts)


def test_one_below_helper() -> None:
    assert one_below("535.104.05") == "535.104.4"
    assert one_below("610") == "609.999"
    assert version_tuple(one_below("570.26")) < version_tuple("570.26")


def test_table_is_ordered_newest_first_with_non_decreasing_drivers() -> None:
    linux = [version_tuple(r.linux) for r in RELEASES]
    assert linux == sorted(linux, reverse=True)
    versions = [version_tuple(r.version) for r in RELEASES]
    assert versions == sorted(versions, reverse=True)
    assert len({r.version for r in RELEASES}) == len(RELEASES)


@pytest.mark.parametrize("row", RELEASES, ids=lambda r: r.version)
def test_driver_at_release_minimum_is_ok(row: CudaRelease) -> None:
    result = verdict(row.version, row.linux)
    assert result.verdict == "ok", result.reason
    assert result.min_driver == row.linux
    assert min_driver_for_cuda(row.version) == row.linux


def _expected_below(row: CudaRelease, driver: str) -> str:
    major = int(row.version.split(".")[0])
    floor = MINOR_COMPAT_FLOOR.get(major, (None, None))[0]
    return "minor-compat" if floor and version_tuple(driver) >= version_tuple(floor) else "incompatible"


@pytest.mark.parametrize("row", RELEASES, ids=lambda r: r.version)
def test_driver_one_patch_below_minimum_follows_the_floor(row: CudaRelease) -> None:
    below = one_below(row.linux)
    result = verdict(row.version, below)
    assert result.verdict == _expected_below(row, below), result.reason
    assert result.verdict != "ok"


@pytest.mark.parametrize(
    ("cuda", "driver", "expected"),
    [
        ("12.4.1", "535.104.05", "minor-compat"),  # R535 runs 12.x through minor-version compatibility
        ("12.9.1", "525.60.13", "minor-compat"),  # exactly the 12.x floor
        ("12.9.1", "525.60.12", "incompatible"),  # one below the 12.x floor
        ("12.0.0", "520.61.05", "incompatible"),  # an 11.8 driver never runs 12.x
        ("11.8.0", "450.80.02", "minor-compat"),  # exactly the 11.x floor
        ("11.8.0", "450.80.01", "incompatible"),
        ("11.0.3", "450.51.06", "ok"),  # 11.0 shipped below the 11.x floor but natively supports itself
        ("13.0.0", "575.57.08", "incompatible"),  # 12.9's driver cannot run 13.x
        ("13.2.2", "580.65.06", "minor-compat"),
        ("12.1.1", "580.65.06", "ok"),  # newer major drivers run older majors natively
        ("11.4.3", "595.71.05", "ok"),
        ("10.2", "440.33", "ok"),
        ("10.2", "440.32", "incompatible"),  # 10.x had no minor-version compatibility
        ("12.3.2", "545.23.08", "ok"),  # 12.3.2 maps to NVIDIA's newest listed 12.3 row (Update 1)
        ("12.4", "550.54.14", "ok"),  # no patch level: the GA minimum applies
        ("13.3", "610.43.03", "ok"),  # branch-only rows compare on the branch
        ("13.3", "595.71.05", "minor-compat"),
        ("12.7", "560.35.05", "minor-compat"),  # 12.7 does not exist: only the floor can be judged
        ("12.7", "570.26", "ok"),
    ],
)
def test_boundaries(cuda: str, driver: str, expected: str) -> None:
    assert verdict(cuda, driver).verdict == expected


def test_windows_minimums_differ_from_linux() -> None:
    assert min_driver_for_cuda("12.4.1") == "550.54.15"
    assert min_driver_for_cuda("12.4.1", "windows") == "551.78"
    assert min_driver_for_cuda("13.0.0", "windows") is None  # not bundled on Windows
    assert minor_compat_floor(12, "windows") == "527.41"
    assert verdict("12.4.1", "550.54.15", platform="windows").verdict == "minor-compat"
    assert verdict("12.4.1", "551.78", platform="windows").verdict == "ok"


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("535.104.05", "12.2"),
        ("550.54.15", "12.4"),
        ("550.144.03", "12.4"),
        ("570.133.20", "12.8"),
        ("580.95.05", "13.0"),
        ("590.48.01", "13.1"),
        ("610.57.04", "13.3"),
        ("470.82.01", "11.4"),
        ("418.67", "10.1"),
        ("525.60.12", "11.8"),
        ("400.10", None),
    ],
)
def test_max_cuda_for_driver_matches_what_nvidia_smi_prints(driver: str, cuda: str | None) -> None:
    assert max_cuda_for_driver(driver) == cuda


def test_release_lookup() -> None:
    assert release_for_cuda("12.6.3") is not None and release_for_cuda("12.6.3").label == "12.6 Update 3"  # type: ignore[union-attr]
    assert release_for_cuda("14.0") is None
    assert min_driver_for_cuda("12.7.0") is None


@pytest.mark.parametrize("text", ["535.104.05", "550.120", "610", " 570.26\n"])
def test_parse_driver_version_accepts_real_versions(text: str) -> None:
    assert str(parse_driver_version(text)) == text.strip()


@pytest.mark.parametrize("text", ["", "abc", "535.", "5", "535.104.05.1", "v535", "N/A", "535,104"])
def test_parse_driver_version_rejects_garbage(text: str) -> None:
    with pytest.raises(BadInput):
        parse_driver_version(text)


def test_driver_versions_order_numerically() -> None:
    assert parse_driver_version("535.104.05") > parse_driver_version("535.54.03")
    assert parse_driver_version("550.120") > parse_driver_version("550.54.15")


# --- NVIDIA_REQUIRE_CUDA ------------------------------------------------------------------------

REQ_118 = (
    "cuda>=11.8 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 "
    "brand=nvidia,driver>=470,driver<471"
)


def test_parse_require_structure() -> None:
    req = parse_require(REQ_118)
    assert len(req.terms) == 4
    assert req.cuda_minimum == "11.8"
    assert req.brand_driver_ranges == (
        ("tesla", "470", "471"),
        ("unknown", "470", "471"),
        ("nvidia", "470", "471"),
    )
    assert str(req.terms[1]) == "brand=tesla,driver>=470,driver<471"


def test_property_names_are_case_insensitive() -> None:
    req = parse_require("CUDA>=12.3")
    assert req.cuda_minimum == "12.3"
    assert req.passing_term(HostFacts(cuda="12.2")) is None


@pytest.mark.parametrize(
    "text", ["", "cuda>=", "cuda=>12", "gpu>=1", "brand>=tesla", "driver>=abc", "cuda~12"]
)
def test_parse_require_rejects_bad_strings(text: str) -> None:
    with pytest.raises(BadInput):
        parse_require(text)


@pytest.mark.parametrize(
    ("facts", "passes"),
    [
        (HostFacts(cuda="11.8", driver="520.61.05", brand="geforce"), True),  # cuda term
        (HostFacts(cuda="11.4", driver="470.82.01", brand="tesla"), True),  # brand/branch term
        (HostFacts(cuda="11.4", driver="470.82.01", brand="Tesla"), True),  # brand case-insensitive
        (HostFacts(cuda="11.4", driver="470.82.01", brand="geforce"), False),  # brand not listed
        (HostFacts(cuda="11.4", driver="471.11", brand="tesla"), False),  # outside the branch window
        (HostFacts(cuda=None, driver="400", brand="geforce"), True),  # unknown CUDA counts as true
        (HostFacts(cuda="11.4", driver="470.82.01", brand=None), True),  # no GPU visible: brand met
    ],
)
def test_require_evaluation(facts: HostFacts, passes: bool) -> None:
    assert (parse_require(REQ_118).passing_term(facts) is not None) is passes


def test_bare_driver_term_encodes_minor_compat() -> None:
    req = parse_require("cuda>=11.3 brand=tesla,driver>=418,driver<419 driver>=450")
    assert req.passing_term(HostFacts(cuda="11.0", driver="450.51.06", brand="geforce")) is not None


def test_failure_message_names_first_token_and_hint_only_for_cuda() -> None:
    assert parse_require(REQ_118).failure_message() == (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=11.8, please update your "
        "driver to a newer version, or use an earlier cuda container"
    )
    assert parse_require("driver>=600").failure_message().endswith("unsatisfied condition: driver>=600")


# --- verdicts with images ---------------------------------------------------------------------


def test_nvidia_cuda_tag_models_the_cuda_requirement() -> None:
    image = parse_image_ref("nvidia/cuda:12.4.1-runtime-ubuntu22.04")
    below = verdict(image, "535.104.05")
    assert (below.verdict, below.require_check, below.require) == ("minor-compat", "fail", "cuda>=12.4")
    assert "unsatisfied condition: cuda>=12.4" in below.reason
    at = verdict(image, "550.54.15")
    assert (at.verdict, at.require_check, at.min_driver, at.max_cuda) == ("ok", "pass", "550.54.15", "12.4")


def test_other_images_have_no_modelled_requirement() -> None:
    result = verdict(parse_image_ref("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"), "550.54.14")
    assert (result.verdict, result.require_check, result.cuda_version) == ("ok", "n/a", "12.4")


def test_explicit_require_with_forward_compat_branch() -> None:
    image = parse_image_ref("nvidia/cuda:13.0.0-base-ubuntu24.04")
    req = "cuda>=13.0 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536"
    on_r535 = verdict(image, "535.104.05", req)
    assert (on_r535.verdict, on_r535.require_check) == ("incompatible", "pass")
    assert "forward compatibility" in on_r535.reason
    on_geforce = verdict(image, "535.104.05", req, brand="geforce")
    assert on_geforce.require_check == "fail"
    on_r550 = verdict(image, "550.54.15", req)
    assert on_r550.require_check == "fail"


def test_unknown_cuda_version() -> None:
    result = verdict(parse_image_ref("ubuntu:22.04"), "550.54.15")
    assert (result.verdict, result.cuda_version, result.min_driver, result.require_check) == (
        "unknown",
        None,
        None,
        "n/a",
    )
    assert result.ok
    explicit = verdict(parse_image_ref("ubuntu:22.04"), "550.54.15", "cuda>=12.8")
    assert explicit.require_check == "fail" and not explicit.ok


def test_contract_keys() -> None:
    doc = verdict("12.1.1", "530.30.02").as_dict()
    assert set(doc) == {
        "image",
        "cuda_version",
        "driver_version",
        "verdict",
        "min_driver",
        "require_check",
        "reason",
    }


def test_bad_cuda_version_is_bad_input() -> None:
    with pytest.raises(BadInput):
        verdict("twelve", "550.54.15")


# --- `acagpu compat` contract ------------------------------------------------------------------

CONTRACT_KEYS = {
    "schema",
    "command",
    "image",
    "cuda_version",
    "driver_version",
    "driver_source",  # --driver, or where ACA's current driver was read without it
    "verdict",
    "min_driver",
    "require_check",
    "reason",
}


def _run(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from aca_gpu.cli import cli

    result = CliRunner().invoke(cli, ["compat", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("image", "driver", "code", "expected"),
    [
        ("nvidia/cuda:12.1.1-runtime-ubuntu22.04", "530.30.02", 0, ("ok", "pass", "530.30.02")),
        ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "535.104.05", 5, ("minor-compat", "fail", "550.54.15")),
        ("nvidia/cuda:13.0.0-base-ubuntu24.04", "550.54.15", 5, ("incompatible", "fail", "580.65.06")),
        ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "550.54.14", 0, ("ok", "n/a", "550.54.14")),
        ("ubuntu:22.04", "550.54.15", 0, ("unknown", "n/a", None)),
    ],
)
def test_cli_json_contract(image: str, driver: str, code: int, expected: tuple[str, str, str | None]) -> None:
    import json

    rc, out, err = _run("--image", image, "--driver", driver, "-o", "json")
    assert rc == code
    doc = json.loads(out)
    assert set(doc) == CONTRACT_KEYS
    assert (doc["verdict"], doc["require_check"], doc["min_driver"]) == expected
    assert doc["image"] == image and doc["driver_version"] == driver
    if doc["verdict"] == "unknown":
        assert err.startswith("warning:") and len(err.strip().splitlines()) == 1
    elif code:  # a failing verdict says why on stderr, as every failing command does
        assert err.startswith("error:") and len(err.strip().splitlines()) == 1, err
    else:
        assert err == ""


@pytest.mark.parametrize(
    ("driver", "headline"),
    [("550.144.03", "✗ refused by the container runtime"), ("470.57.02", "✗ incompatible")],
)
def test_cli_headline_says_what_decides_the_exit_code(driver: str, headline: str) -> None:
    """A minor-compat pair the runtime would refuse exits 5, so its headline says refused; every
    failing verdict prints an `error:` line and, under --github, an ::error:: annotation."""
    rc, out, err = _run("--image", "nvidia/cuda:12.8.0-base-ubuntu24.04", "--driver", driver, "--github")
    assert rc == 5
    assert out.splitlines()[0].startswith(headline), out
    assert "error: " in err and "::error title=acagpu compat::" in err, err


def test_cli_explicit_require_can_refuse_an_ok_image() -> None:
    import json

    rc, out, _ = _run(
        "--image",
        "nvidia/cuda:12.1.1-runtime-ubuntu22.04",
        "--driver",
        "530.30.02",
        "--require",
        "cuda>=12.8",
        "-o",
        "json",
    )
    doc = json.loads(out)
    assert rc == 5 and (doc["verdict"], doc["require_check"]) == ("ok", "fail")
    assert "unsatisfied condition: cuda>=12.8" in doc["reason"]


@pytest.mark.parametrize(
    "args",
    [
        ("--image", "Not A Ref", "--driver", "535.104.05"),
        ("--image", "nvidia/cuda:12.1.1-runtime-ubuntu22.04", "--driver", "latest"),
        (
            "--image",
            "nvidia/cuda:12.1.1-runtime-ubuntu22.04",
            "--driver",
            "535.104.05",
            "--require",
            "gpu>=1",
        ),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    rc, out, err = _run(*args, "-o", "json")
    assert rc == 2 and __import__("json").loads(out)["error"]["exit_code"] == 2
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_cli_human_summary() -> None:
    rc, out, _ = _run("--image", "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "--driver", "535.104.05")
    assert rc == 5
    assert out.startswith(
        "✗ refused by the container runtime (minor-compat by NVIDIA's tables): "
        "nvidia/cuda:12.4.1-runtime-ubuntu22.04 on driver 535.104.05"
    )
    assert "minimum driver:     550.54.15" in out and "CUDA 12.2" in out


def test_a_private_mirror_of_nvidia_cuda_is_judged_like_the_original() -> None:
    import json

    mirror = "contoso.azurecr.io/mirror/nvidia/cuda:12.4.1-devel-ubuntu22.04"
    _, original, _ = _run(
        "--image", "nvidia/cuda:12.4.1-devel-ubuntu22.04", "--driver", "550.54.15", "-o", "json"
    )
    rc, out, err = _run("--image", mirror, "--driver", "550.54.15", "-o", "json")
    doc, want = json.loads(out), json.loads(original)
    assert rc == 0 and doc["verdict"] == want["verdict"] == "ok", (doc, err)
    assert (doc["cuda_version"], doc["require_check"]) == (want["cuda_version"], want["require_check"])
    assert doc["image"] == mirror
