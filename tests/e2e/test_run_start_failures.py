"""`acagpu run` on the emulator: an image ACA cannot pull, and a container killed at once, in one line.

The emulator's `pull` fault fails the pull as ACA's system log shows it (ContainerTerminated ...
reason 'ImagePullFailure'); the job's execution then fails with no container exit code.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from aca_gpu.cli import cli

IMAGE = "myacr.azurecr.io/team/train:9"


def acagpu(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def _run(*args: str, faults: str = "") -> Result:
    return acagpu(
        "run", "--emulator", "--time-scale", "0.002", "--yes", *args,
        env={"ACAGPU_EMULATOR_FAULTS": faults},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("error", "code", "status"), [("notfound", 2, "bad_input"), ("unreachable", 7, "infra_error")]
)
def test_an_image_aca_cannot_pull_is_image_pull_failed_not_a_refused_gpu(
    error: str, code: int, status: str
) -> None:
    result = _run("-o", "json", IMAGE, "--", "true", faults=f"pull:match=team/train,error={error}")
    assert result.exit_code == code, result.output
    doc = json.loads(result.stdout)
    assert (doc["status"], doc["exit_code_from"], doc["container"]["status"]) == (status, "acagpu", "refused")
    assert doc["error"]["code"] == "ImagePullFailed" and doc["error"]["hint"]
    assert doc["error"]["message"].startswith(f"cannot pull image {IMAGE}: ImagePullFailure: ")
    assert doc["cost"]["usd_estimate"] == 0.0 and doc["teardown"]["billing_stopped"] is True
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    # ACA's own way to a private registry, not this host's `podman login`; and a container that never
    # started printed nothing: no wait for Log Analytics, no word of it
    hint = doc["error"]["hint"]
    if error == "notfound":
        assert "--registry-identity" in hint and "login" not in hint, hint
    assert "Log Analytics" not in result.stderr and not doc["output"].get("notes"), result.stderr


def test_a_container_killed_by_sigkill_keeps_137_with_the_reason() -> None:
    result = _run(IMAGE, "--", "sh", "-c", 'echo started; sh -c "kill -9 \\$\\$"')
    assert result.exit_code == 137, result.output
    assert result.stdout == "started\n"
    (line,) = [x for x in result.stderr.splitlines() if "container exited" in x]
    assert line.startswith("  container exited with code 137: killed by SIGKILL") and "--memory" in line
    # how its image arrived, on the platform's (scaled) clock, said as such
    (image,) = [x for x in result.stderr.splitlines() if x.startswith("  image ")]
    assert (
        image.split(None, 1)[1].startswith("pulled from myacr.azurecr.io in ") and "(platform clock)" in image
    )
    assert not [x for x in result.stderr.splitlines() if x.startswith("error:")]


def test_a_mistyped_image_fails_its_pull_as_docker_hub_answers_it() -> None:
    """The emulator ran any image name (`nvida/cuda:…`, `nosuch/image:1` exit 0) while its own
    registry import refused the same names: a job's pull now judges the image as the import does,
    and a name Docker Hub has no repository for fails as containerd relays Docker Hub's answer."""
    from aca_gpu.emulator.providers.registry import sources

    image = "nvida/cuda:12.4.1-base-ubuntu22.04"
    assert sources.unknown_source(image) is not None  # the import refuses the same name
    assert sources.unknown_source("nosuch/image:1") is not None
    result = _run("-o", "json", image, "--", "true")
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    assert (doc["status"], doc["container"]["status"]) == ("bad_input", "refused"), doc
    assert doc["error"]["code"] == "ImagePullFailed", doc["error"]
    assert f'failed to resolve reference "{image}": pull access denied' in doc["error"]["message"], doc
    assert doc["cost"]["usd_estimate"] == 0.0 and doc["teardown"]["billing_stopped"] is True
