"""The emulator's own model of the NVIDIA runtime's requirement check; one cross-check with the client."""

from __future__ import annotations

import itertools

import pytest

from aca_gpu.emulator.workloads.cuda_versions import (
    NATIVE_CUDA,
    NativeCuda,
    cuda_tag_version,
    driver_major,
    image_requirements,
    max_cuda_for_driver,
    start_failure,
)

HINT = ", please update your driver to a newer version, or use an earlier cuda container"
CLI = "nvidia-container-cli: requirement error: "


def one_below(driver: str) -> str:
    """The driver version just under `driver`: 535.104.05 -> 535.104.4, 570.26 -> 570.25, 610 -> 609.999."""
    parts = [int(p) for p in driver.split(".")]
    i = len(parts) - 1
    while parts[i] == 0:
        i -= 1
    parts[i] -= 1
    parts[i + 1 :] = [999] * (len(parts) - i - 1)
    if len(parts) == 1:
        parts.append(999)
    return ".".join(str(p) for p in parts)


def key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def cli_error(message: str | None) -> str | None:
    """The nvidia-container-cli line of a start failure, without the OCI wrapper around it."""
    if message is None:
        return None
    line = message.splitlines()[-1]
    assert line.startswith(CLI) and line.endswith(": unknown"), message
    return line.removesuffix(": unknown")


def refused(image: str, env: dict[str, str] | None = None, **host: str | None) -> str | None:
    driver = host.get("driver") or "550.144.03"
    brand = host.get("brand", "NVIDIA")
    error = cli_error(start_failure(image, env or {}, driver=driver, brand=brand, arch=host.get("arch")))
    return error.removeprefix(CLI) if error else None


# --- the driver table ------------------------------------------------------------------------------------


def test_table_is_newest_first_and_covers_every_cuda_minor() -> None:
    drivers = [key(row.driver) for row in NATIVE_CUDA]
    assert drivers == sorted(drivers, reverse=True) and len(set(drivers)) == len(drivers)
    cudas = [row.cuda for row in NATIVE_CUDA]
    assert [key(c) for c in cudas] == sorted((key(c) for c in cudas), reverse=True)
    expected = [f"11.{m}" for m in range(9)] + [f"12.{m}" for m in range(10) if m != 7]
    expected += [f"13.{m}" for m in range(5)]
    assert set(expected) <= set(cudas)
    assert "12.7" not in cudas  # NVIDIA released no 12.7 toolkit


@pytest.mark.parametrize("row", NATIVE_CUDA, ids=lambda r: r.cuda)
def test_row_at_its_minimum_driver_and_one_below(row: NativeCuda) -> None:
    assert max_cuda_for_driver(row.driver) == row.cuda
    older = NATIVE_CUDA[NATIVE_CUDA.index(row) + 1 :]
    assert max_cuda_for_driver(one_below(row.driver)) == (older[0].cuda if older else None)


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("550.144.03", "12.4"),
        ("535.104.05", "12.2"),
        ("535.54.03", "12.2"),
        ("535.54.02", "12.1"),
        ("570.124.06", "12.8"),
        ("580.126.09", "13.0"),
        ("590.48.01", "13.1"),
        ("610.57.04", "13.3"),
        ("615.1", "13.4"),
        ("470.256.02", "11.4"),
        ("450.80.02", "11.0"),
        ("418.67", "10.1"),
        ("410.47", None),
        ("n/a", None),
        ("", None),
    ],
)
def test_driver_versions_between_rows(driver: str, cuda: str | None) -> None:
    assert max_cuda_for_driver(driver) == cuda


def test_driver_major() -> None:
    assert driver_major("550.144.03") == 550
    assert driver_major("610") == 610
    assert driver_major("n/a") == 0


# --- nvidia/cuda tags ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", "12.4.1"),
        ("nvidia/cuda:13.0.0-devel-ubuntu24.04", "13.0.0"),
        ("nvidia/cuda:12.9.1-cudnn-runtime-ubuntu24.04", "12.9.1"),
        ("nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04", "11.8.0"),
        ("nvidia/cuda:13.0.0-tensorrt-runtime-ubuntu24.04", "13.0.0"),
        ("nvidia/cuda:11.0-base", "11.0"),
        ("docker.io/nvidia/cuda:12.6.3-base-ubi9", "12.6.3"),
        ("nvcr.io/nvidia/cuda:12.8.1-runtime-rockylinux9", "12.8.1"),
        ("localhost:5000/nvidia/cuda:12.2.2-base-ubuntu22.04", "12.2.2"),
        ("contoso.azurecr.io/mirror/nvidia/cuda:12.1.1-devel-ubuntu22.04", "12.1.1"),
        ("nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:" + "a" * 64, "12.4.1"),
        ("nvidia/cuda@sha256:" + "a" * 64, None),
        ("nvidia/cuda", None),
        ("nvidia/cuda:latest", None),
        ("nvidia/cuda:base-12.4", None),
        ("nvidia/cudagl:11.4.2-base-ubuntu20.04", None),
        ("acme/nvidia-cuda:12.4.1-base-ubuntu22.04", None),
        ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", None),
        ("example.azurecr.io/app:12.4.1", None),
    ],
)
def test_cuda_tag_version(image: str, version: str | None) -> None:
    assert cuda_tag_version(image) == version


def test_a_cuda_tag_requires_its_major_minor() -> None:
    assert image_requirements("nvidia/cuda:12.4.1-base-ubuntu22.04", {}) == ["cuda>=12.4"]
    assert image_requirements("nvidia/cuda:11.0-base", {}) == ["cuda>=11.0"]
    assert image_requirements("example.azurecr.io/app:1", {}) == []


def test_container_env_overlays_the_image_env() -> None:
    image = "nvidia/cuda:13.0.0-base-ubuntu24.04"
    # an explicit requirement replaces the one the tag stands for
    assert image_requirements(image, {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0"}) == ["cuda>=12.0"]
    # an empty one leaves the image "legacy": CUDA_VERSION's major.minor is required again
    assert image_requirements(image, {"NVIDIA_REQUIRE_CUDA": ""}) == ["", "cuda>=13.0"]
    # the container's own CUDA_VERSION counts, on any image; a non-semver one adds nothing
    assert image_requirements("example.azurecr.io/app:1", {"CUDA_VERSION": "12.8.1"}) == ["cuda>=12.8"]
    assert image_requirements("example.azurecr.io/app:1", {"CUDA_VERSION": "12"}) == ["cuda>=12.0"]
    assert image_requirements(image, {"CUDA_VERSION": "12.04"}) == []
    # every NVIDIA_REQUIRE_* but JETPACK, in name order, the synthesised requirement last
    env = {"NVIDIA_REQUIRE_Z": "driver>=1", "NVIDIA_REQUIRE_A": "arch>=7.0", "NVIDIA_REQUIRE_JETPACK": "x"}
    assert image_requirements(image, env) == ["arch>=7.0", "driver>=1", "cuda>=13.0"]


# --- the requirement grammar -----------------------------------------------------------------------------

APP = "example.azurecr.io/app:1"


def require(text: str, **host: str | None) -> str | None:
    return refused(APP, {"NVIDIA_REQUIRE_CUDA": text}, **host)


def test_space_separated_terms_are_alternatives() -> None:
    forward = "cuda>=12.8 brand=tesla,driver>=550,driver<551"
    assert require(forward, brand="Tesla") is None  # R550 Tesla passes through the second term
    assert require(forward, brand="NVIDIA") == f"unsatisfied condition: cuda>=12.8{HINT}"
    assert require(forward, driver="570.26", brand="NVIDIA") is None  # the first term holds
    assert require(forward, driver="535.54.03", brand="tesla") == f"unsatisfied condition: cuda>=12.8{HINT}"


def test_comma_separated_conditions_must_all_hold() -> None:
    assert require("driver>=550,driver<551") is None
    assert require("driver>=550,driver<550.100") == "unsatisfied condition: driver>=550,driver<550.100"
    assert require("cuda>=12.0,brand=nvidia") is None
    assert require("cuda>=12.0,brand=tesla") == f"unsatisfied condition: cuda>=12.0,brand=tesla{HINT}"


def test_every_requirement_variable_must_hold() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0", "NVIDIA_REQUIRE_DRIVER": "driver>=560"}
    assert refused(APP, env) == "unsatisfied condition: driver>=560"
    assert refused(APP, env, driver="560.28.03") is None
    both = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.6", "NVIDIA_REQUIRE_DRIVER": "driver>=560"}
    assert refused(APP, both) == f"unsatisfied condition: cuda>=12.6{HINT}"  # checked in name order


def test_versions_compare_per_component() -> None:
    assert require("cuda>=12.4") is None
    assert require("cuda>=12.4.0") is None
    assert require("cuda>=12.4.1") == f"unsatisfied condition: cuda>=12.4.1{HINT}"  # 12.4 < 12.4.1
    assert require("cuda=12.4") is None
    assert require("cuda!=12.4") == "unsatisfied condition: cuda!=12.4"
    assert require("cuda<12.5") is None
    assert require("cuda>12.3") is None
    assert require("cuda<=12.3") == "unsatisfied condition: cuda<=12.3"
    assert require("driver>550.144") is None
    assert require("driver<550.144.3") == "unsatisfied condition: driver<550.144.3"
    assert require("driver=550.144.3") is None  # 03 == 3


def test_brand_is_case_insensitive_and_equality_only() -> None:
    assert require("brand=nvidia", brand="NVIDIA") is None
    assert require("BRAND=Tesla", brand="tesla") is None
    assert require("brand!=geforce", brand="GeForce") == "unsatisfied condition: brand!=geforce"
    assert require("brand!geforce", brand="Tesla") is None  # dsl.c reads a lone "!" as "!="
    assert require("brand>=tesla", brand="Tesla") == "invalid expression"
    assert require("brand>=tesla", brand=None) is None  # no GPU brand known: the condition holds


def test_properties_match_in_any_case_but_the_hint_wants_exact_bytes() -> None:
    assert require("CUDA>=12.0") is None
    assert require("Cuda>=13.0") == "unsatisfied condition: Cuda>=13.0"
    assert (
        require("cuda>=13.0 brand=tesla,driver>=535,driver<536") == f"unsatisfied condition: cuda>=13.0{HINT}"
    )
    assert require("driver>=999 cuda>=13.0") == "unsatisfied condition: driver>=999"


def test_unknown_facts_make_their_conditions_true() -> None:
    assert require("arch>=9.0") is None  # no compute capability known
    assert require("arch>=9.0", arch="8.0") == "unsatisfied condition: arch>=9.0"
    assert require("arch>=8.0", arch="8.0") is None
    assert require("cuda>=13.0", driver="390.48") is None  # older than the table: no CUDA version


@pytest.mark.parametrize(
    "text",
    [
        "foo>=1",
        "cuda",
        ">=12",
        "cuda>=",
        "cuda==12.0",
        "cuda=>12.0",
        "cuda>=12.x",
        "cuda>=.12",
        "driver<=abc",
    ],
)
def test_malformed_conditions_are_invalid_expressions(text: str) -> None:
    assert require(text) == "invalid expression"


def test_conditions_are_evaluated_lazily() -> None:
    assert require("cuda>=12.0 foo=bar") is None  # the first term holds: the second is never read
    assert require("driver>=999,foo=bar") == "unsatisfied condition: driver>=999,foo=bar"
    assert require("cuda>=13.0 foo=bar") == "invalid expression"


def test_empty_requirements_and_terms() -> None:
    assert require("") is None
    assert require("   ") is None
    assert require("cuda>=12.0,,driver>=550") is None
    assert require("  cuda>=13.0") == "unsatisfied condition: "  # the first token is the empty one
    # a term with no conditions keeps the previous term's outcome, as dsl.c's loop does
    assert require("cuda>=13.0 ,") == f"unsatisfied condition: cuda>=13.0{HINT}"
    assert require(", cuda>=13.0") is None


def test_the_failure_text_is_the_runtime_s_byte_for_byte() -> None:
    message = start_failure("nvidia/cuda:13.0.0-runtime-ubuntu24.04", {}, driver="550.144.03", brand="NVIDIA")
    assert message == (
        "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
        "runc create failed: unable to start container process: error during container init: "
        "error running hook #0: error running hook: exit status 1, stdout: , stderr: "
        "Auto-detected mode as 'legacy'\n"
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update your "
        "driver to a newer version, or use an earlier cuda container: unknown"
    )


# --- NVIDIA_DISABLE_REQUIRE ------------------------------------------------------------------------------

CUDA13 = "nvidia/cuda:13.0.0-base-ubuntu24.04"


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_disable_require_skips_every_check(value: str) -> None:
    env = {"NVIDIA_DISABLE_REQUIRE": value, "NVIDIA_REQUIRE_X": "driver>=999"}
    assert image_requirements(CUDA13, env) == []
    assert refused(CUDA13, env) is None


@pytest.mark.parametrize("value", ["", "0", "false", "yes", "on", "y", "tRuE", " true", "true "])
def test_disable_require_needs_a_go_true(value: str) -> None:
    assert refused(CUDA13, {"NVIDIA_DISABLE_REQUIRE": value}) == f"unsatisfied condition: cuda>=13.0{HINT}"


# --- the client's verdict, as a second opinion -----------------------------------------------------------


def test_client_and_emulator_agree_over_a_grid_of_images_and_drivers() -> None:
    """The client's compatibility verdict and the emulator's runtime model were written apart; where both
    judge the same (image, driver, requirement, brand), a difference is a bug on one side."""
    from aca_gpu.gpu import cuda_compat
    from aca_gpu.gpu.cuda_releases import RELEASES
    from aca_gpu.gpu.image_ref import parse_image_ref

    floors = {row.driver for row in NATIVE_CUDA} | {r.linux for r in RELEASES}
    drivers = sorted(
        {d for f in floors for d in (f, one_below(f))}
        | {"470.256.02", "535.104.05", "535.247.01", "550.144.03", "565.57.01", "570.133.20", "575.64.05"}
        | {"580.126.09", "580.159.04", "590.48.01", "595.71.05", "610.57.04", "615.1"},
        key=key,
    )
    # below the oldest row neither side knows the driver's CUDA level; they treat the unknown differently
    drivers = [d for d in drivers if key(d) >= key(NATIVE_CUDA[-1].driver)]
    versions = sorted(
        {r.version for r in RELEASES if key(r.version) >= (11,)} | {"12.4", "11.0", "13.0"}, key=key
    )
    images = [f"nvidia/cuda:{v}-base-ubuntu22.04" for v in versions]
    images += [
        f"{repo}:{tag}"
        for repo, tag in itertools.product(
            ["nvcr.io/nvidia/cuda", "contoso.azurecr.io/mirror/nvidia/cuda"],
            [
                "12.8.1-cudnn-devel-ubuntu24.04",
                "13.0.0-tensorrt-runtime-ubuntu24.04",
                "11.8.0-cudnn8-runtime-ubi8",
            ],
        )
    ]
    images += ["nvidia/cuda:latest", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", APP]
    requirements: list[list[str]] = [
        ["cuda>=12.8 brand=tesla,driver>=550,driver<551"],
        ["cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=535,driver<536"],
        ["cuda>=11.8,driver>=520 brand=NVIDIA,driver>=470,driver<471"],
        ["brand!=geforce,cuda>=12.0"],
        ["driver>=535"],
        ["cuda>=12.0", "driver<560"],
    ]
    disagreements: list[str] = []
    checked = 0

    def compare(image: str, driver: str, require: list[str] | None, brand: str | None) -> None:
        nonlocal checked
        client = cuda_compat.verdict(parse_image_ref(image), driver, require, brand=brand)
        env = {f"NVIDIA_REQUIRE_{i}": text for i, text in enumerate(require or [])}
        emulator = cli_error(start_failure(image, env, driver=driver, brand=brand))
        client_refuses = client.require_check == "fail"
        same_text = emulator is None or f"({emulator})" in client.reason
        if client_refuses != (emulator is not None) or not same_text:
            disagreements.append(
                f"{image} on {driver} {require} brand={brand}: "
                f"client {client.reason!r}, emulator {emulator!r}"
            )
        checked += 1

    for driver in drivers:
        client_cuda, emulator_cuda = cuda_compat.max_cuda_for_driver(driver), max_cuda_for_driver(driver)
        if client_cuda != emulator_cuda:
            disagreements.append(f"driver {driver}: client CUDA {client_cuda}, emulator {emulator_cuda}")
        for image in images:
            compare(image, driver, None, None)
        for require, brand in itertools.product(requirements, [None, "Tesla", "NVIDIA", "GeForce"]):
            compare(APP, driver, require, brand)
    assert checked > 5000
    assert not disagreements, "\n".join(disagreements[:20])
