"""`acagpu ci init`: rendered workflows, refusal to overwrite, validated values, the one-time az steps."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu import __version__
from aca_gpu.cli import cli
from aca_gpu.errors import BadInput
from aca_gpu.workflow.ci import ci_init

SUB = "11111111-2222-3333-4444-555555555555"
TENANT = "66666666-7777-8888-9999-000000000000"
CLIENT = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
BASE = ["ci", "init", "--subscription", SUB, "--tenant", TENANT, "--client-id", CLIENT, "-l", "westus3"]


WHEEL: Path | None = None


@pytest.fixture(autouse=True)
def _wheel(acagpu_wheel: Path) -> None:
    global WHEEL
    WHEEL = acagpu_wheel


def invoke(repo: Path, *args: str) -> tuple[int, str, str]:
    """`ci init` with the session's wheel, unless the test names its own install source."""
    given = ("--install-spec" in args) or ("--wheel" in args)
    wheel = [] if given or WHEEL is None else ["--wheel", str(WHEEL)]
    fast = ["--no-lock-hashes"]  # (hashes need pip download: test_lock_hashes_are_the_runner_wheels)
    result = CliRunner().invoke(cli, [*BASE, "--repo-dir", str(repo), *wheel, *fast, *args])
    return result.exit_code, result.stdout, result.stderr


def test_writes_both_workflows_with_values_filled(tmp_path: Path) -> None:
    code, out, _ = invoke(tmp_path, "--gpus", "t4,a100", "--github-repo", "example/gpu-ci", "--since", "12.4")
    assert code == 0, out
    validate = (tmp_path / ".github/workflows/acagpu-validate.yml").read_text(encoding="utf-8")
    reap = (tmp_path / ".github/workflows/acagpu-reap.yml").read_text(encoding="utf-8")
    for text in (validate, reap):
        assert not re.search(r"__[A-Z_]+__", text), "a placeholder was left unfilled"
        assert f"vars.AZURE_CLIENT_ID || '{CLIENT}'" in text
        assert f"vars.AZURE_SUBSCRIPTION_ID || '{SUB}'" in text
        assert "id-token: write" in text
    assert """inputs.gpus || '["t4", "a100"]'""" in validate
    assert "ACAGPU_LOCATION: ${{ inputs.location || 'westus3' }}" in validate
    assert 'default: "12.4"' in validate
    assert "fromJSON(needs.discover.outputs.tags)" in validate
    assert "vars.ACAGPU_REAP_DELETE" in reap
    role = json.loads((tmp_path / ".github/acagpu-role.json").read_text(encoding="utf-8"))
    assert role["AssignableScopes"] == [f"/subscriptions/{SUB}"]


def test_prints_federated_credential_and_least_privilege_role(tmp_path: Path) -> None:
    code, out, _ = invoke(tmp_path, "--github-repo", "example/gpu-ci", "--branch", "release")
    assert code == 0
    assert "az ad app federated-credential create --id " + CLIENT in out
    assert '"subject": "repo:example/gpu-ci:ref:refs/heads/release"' in out
    assert '"audiences": ["api://AzureADTokenExchange"]' in out
    assert 'az role assignment create --role "acagpu runner"' in out
    assert "Contributor" not in out
    role = ci_init.role_definition(SUB)
    # acagpu's own groups and Microsoft.App inside them; beyond that only reads and deletes of a
    # queue run's leftovers (its queues, the role assignments at their scope): never a grant
    beyond = [a for a in role["Actions"] if not a.startswith(("Microsoft.App/", "Microsoft.Resources/"))]
    assert all(a.endswith(("/read", "/delete")) for a in beyond), beyond
    assert all(a.startswith(("Microsoft.Storage/storageAccounts/queueServices/queues/",
                             "Microsoft.Authorization/roleAssignments/")) for a in beyond)  # fmt: skip
    assert (
        "*" not in role["Actions"] and "Microsoft.Authorization/roleAssignments/write" not in role["Actions"]
    )


def test_json_output_is_one_document(tmp_path: Path) -> None:
    code, out, _ = invoke(tmp_path, "--github-repo", "example/gpu-ci", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["kind"] == "ci-init" and len(doc["written"]) == 6  # workflows, role, reqs, lock, wheel
    assert doc["install"]["source"] == "wheel" and len(doc["install"]["wheel"]["sha256"]) == 64
    assert any(c.startswith("az role definition create") for c in doc["commands"])


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    assert invoke(tmp_path, "--gpus", "t4")[0] == 0
    target = tmp_path / ".github/workflows/acagpu-validate.yml"
    target.write_text("# edited by hand\n", encoding="utf-8")
    code, _, err = invoke(tmp_path, "--gpus", "a100")
    assert code == 2 and "already exist" in err and "--force" in err
    assert target.read_text(encoding="utf-8") == "# edited by hand\n"
    code, _, _ = invoke(tmp_path, "--gpus", "a100", "--force")
    assert code == 0 and """'["a100"]'""" in target.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gpus", "h100"), "unknown GPU"),
        (("--gpus", ","), "at least one GPU"),
        (("--since", "12.x"), "invalid CUDA version"),
        (("--repository", "nvidia/cuda:12.1.1-runtime-ubuntu22.04"), "without a tag"),
        (("--install-spec", "acagpu; curl evil | sh"), "invalid --install-spec"),
        (("--install-spec", "acagpu"), "invalid --install-spec"),  # an unpinned name
        (("--install-spec", "acagpu==0.1.0"), "invalid --install-spec"),  # a version without a hash
        (("--install-spec", "git+https://github.com/o/r@main"), "invalid --install-spec"),  # a branch
        (("--install-spec", "git+https://github.com/o/r"), "invalid --install-spec"),
        (("--wheel", "/nonexistent/acagpu-0.1.0-py3-none-any.whl"), "no such file"),
        (("--flavor", "runtime'}}"), "invalid flavor"),
        (("--github-repo", "not a slug"), "invalid GitHub repository"),
        (("--limit", "0"), "--limit"),
    ],
)
def test_bad_values_exit_2_and_write_nothing(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    code, _, err = invoke(tmp_path, *args)
    assert code == 2 and message in err
    assert not (tmp_path / ".github").exists()


def test_ids_must_be_guids(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["ci", "init", "--repo-dir", str(tmp_path), "--subscription", "my-sub", "--tenant", TENANT,
              "--client-id", CLIENT, "-l", "westus3"]
    )  # fmt: skip
    assert result.exit_code == 2 and "expected a GUID" in result.stderr


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:example/gpu-ci.git",
        "https://github.com/example/gpu-ci",
        "https://github.com/example/gpu-ci.git",
    ],
)
def test_github_repo_comes_from_the_origin_remote(tmp_path: Path, url: str) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", url], check=True)
    assert ci_init.github_repo_of(tmp_path) == "example/gpu-ci"


def test_without_a_remote_the_commands_say_what_to_fill(tmp_path: Path) -> None:
    code, out, _ = invoke(tmp_path)
    assert code == 0
    assert "repo:<owner>/<repo>:ref:refs/heads/main" in out and "--github-repo" in out


def test_render_refuses_unknown_placeholders() -> None:
    with pytest.raises(BadInput, match="NEW_THING"):
        ci_init.render("a: __LOCATION__\nb: __NEW_THING__\n", {"LOCATION": "westus3"})
    assert ci_init.render("a: __LOCATION__", {"LOCATION": "westus3"}) == "a: westus3"


def test_the_wheel_is_written_and_pinned_by_its_hash(tmp_path: Path) -> None:
    code, out, _ = invoke(tmp_path, "-o", "json")
    assert code == 0, out
    wheels = sorted((tmp_path / ".github/acagpu").glob("acagpu-*.whl"))
    assert [w.name for w in wheels] == [f"acagpu-{__version__}-py3-none-any.whl"]
    digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    lines = [
        line
        for line in (tmp_path / ".github/acagpu/requirements.txt").read_text(encoding="utf-8").splitlines()
        if not line.startswith("#")
    ]
    assert lines == [f"./.github/acagpu/{wheels[0].name} --hash=sha256:{digest}"]
    for name in ("acagpu-validate.yml", "acagpu-reap.yml"):
        text = (tmp_path / ".github/workflows" / name).read_text(encoding="utf-8")
        assert "pip install --no-deps --require-hashes --no-index -r .github/acagpu/requirements.txt" in text
        assert "acagpu==" not in text  # never a name for an index to resolve


@pytest.mark.parametrize(
    ("spec", "line", "flags"),
    [
        (
            "git+https://github.com/example/acagpu@" + "a" * 40,
            "acagpu @ git+https://github.com/example/acagpu@" + "a" * 40,
            "--no-deps -r",
        ),
        (
            "acagpu==0.1.0 --hash=sha256:" + "b" * 64,
            "acagpu==0.1.0 --hash=sha256:" + "b" * 64,
            "--no-deps --require-hashes -r",
        ),
    ],
)
def test_install_spec_pins_another_source(tmp_path: Path, spec: str, line: str, flags: str) -> None:
    code, out, _ = invoke(tmp_path, "--install-spec", spec)
    assert code == 0, out
    assert not list((tmp_path / ".github/acagpu").glob("*.whl"))
    assert line in (tmp_path / ".github/acagpu/requirements.txt").read_text(encoding="utf-8")
    assert f"pip install {flags}" in (tmp_path / ".github/workflows/acagpu-validate.yml").read_text("utf-8")


def test_a_wheel_of_another_version_is_refused(tmp_path: Path, acagpu_wheel: Path) -> None:
    other = tmp_path / "acagpu-9.9.9-py3-none-any.whl"
    shutil.copyfile(acagpu_wheel, other)
    repo = tmp_path / "repo"
    repo.mkdir()
    code, _, err = invoke(repo, "--wheel", str(other))
    assert code == 2 and "not a readable acagpu wheel" in err
    assert not (repo / ".github").exists()


def test_dependencies_install_from_a_lock_of_the_tested_versions(tmp_path: Path) -> None:
    """The workflows resolved acagpu's ~20 dependencies fresh on every run; now they install a lock
    of the versions installed here with --no-deps, and `--upgrade` refreshes wheel and lock."""
    from importlib import metadata

    code, out, err = invoke(tmp_path, "--github-repo", "example/gpu-ci", "-o", "json")
    assert code == 0, err
    lock_path = tmp_path / ".github/acagpu/requirements-lock.txt"
    pins = dict(
        line.split("==", 1) for line in lock_path.read_text(encoding="utf-8").splitlines() if "==" in line
    )
    for name in ("azure-core", "azure-mgmt-appcontainers", "click", "aiohttp", "requests", "urllib3"):
        assert pins[name] == metadata.version(name), (name, pins.get(name))  # transitive ones too
    assert "pytest" not in pins and "acagpu" not in pins
    assert json.loads(out)["install"]["lock"]["packages"] == len(pins)
    for workflow in ("acagpu-validate.yml", "acagpu-reap.yml"):
        text = (tmp_path / ".github/workflows" / workflow).read_text(encoding="utf-8")
        assert "pip install --no-deps -r .github/acagpu/requirements-lock.txt && python -m pip check" in text
        assert "acagpu-deps.txt" not in text  # nothing resolved on the runner

    # an edited workflow survives --upgrade; the wheel and the lock are written again
    validate = tmp_path / ".github/workflows/acagpu-validate.yml"
    validate.write_text(validate.read_text(encoding="utf-8") + "# my edit\n", encoding="utf-8")
    lock_path.write_text("click==0.0.1\n", encoding="utf-8")
    assert invoke(tmp_path, "--github-repo", "example/gpu-ci")[0] == 2  # exists: refused
    code, out, err = invoke(tmp_path, "--github-repo", "example/gpu-ci", "--upgrade")
    assert code == 0, err
    assert validate.read_text(encoding="utf-8").endswith("# my edit\n")
    assert f"click=={metadata.version('click')}" in lock_path.read_text(encoding="utf-8")


def test_lock_hashes_are_the_runner_wheels() -> None:
    """Hashes come from the wheels pip downloads for the runner's platform (all or none)."""
    from aca_gpu.workflow.ci import lock

    made = lock.make_lock(["click"])
    if not made.hashed:
        pytest.skip(f"no package index reachable here: {made.note}")
    (pin,) = made.pins
    assert len(pin.sha256[0]) == 64
    assert f"click=={pin.version} \\\n    --hash=sha256:{pin.sha256[0]}" in made.render()
    assert made.pip_flags == "--no-deps --require-hashes"


def test_without_an_origin_remote_the_placeholder_is_a_warning(tmp_path: Path) -> None:
    code, out, err = invoke(tmp_path)
    assert code == 0 and "repo:<owner>/<repo>" in out
    assert err.startswith("warning: no GitHub remote `origin` found"), err


def test_env_makes_the_validations_share_a_warm_environment(tmp_path: Path) -> None:
    code, out, err = invoke(
        tmp_path, "--gpus", "t4,a100", "--env", "ci-lab", "--github-repo", "example/gpu-ci"
    )
    assert code == 0, err
    validate = (tmp_path / ".github/workflows/acagpu-validate.yml").read_text(encoding="utf-8")
    assert "ACAGPU_ENV: ${{ vars.ACAGPU_ENV || 'ci-lab' }}" in validate
    assert "acagpu env create ci-lab -l westus3 --gpu t4,a100 --idle-ttl 30d --yes" in out

    (tmp_path / "cold").mkdir()
    code, _, _ = invoke(tmp_path / "cold", "--gpus", "t4")
    cold = (tmp_path / "cold/.github/workflows/acagpu-validate.yml").read_text(encoding="utf-8")
    assert code == 0 and "ACAGPU_ENV: ${{ vars.ACAGPU_ENV || '' }}" in cold

    (tmp_path / "bad").mkdir()
    code, _, err = invoke(tmp_path / "bad", "--gpus", "nc24-a100", "--env", "ci-lab")
    assert code == 2 and "serverless GPUs only" in err
    assert not (tmp_path / "bad/.github").exists()


def test_the_runner_role_allows_every_call_the_guard_makes_for_a_queue_runs_leftovers() -> None:
    """The guard's identity holds this role alone: each ARM call of its queue-run cleanup (the
    queue read and delete, the role assignments listed and deleted at the queue's scope) needs an
    action the role grants, as the emulator's ARM derives it from the request."""
    from aca_gpu.emulator.providers.authorization import models as authz

    role = ci_init.role_definition(SUB)
    grants = [{"actions": role["Actions"], "notActions": role["NotActions"]}]
    queue = (f"/subscriptions/{SUB}/resourceGroups/rg-acagpu-env-lab/providers/Microsoft.Storage/"
             "storageAccounts/acct/queueServices/default/queues/acagpu-r1")  # fmt: skip
    assignments = f"{queue}/providers/Microsoft.Authorization/roleAssignments"
    calls = [("GET", queue), ("DELETE", queue), ("GET", assignments), ("DELETE", f"{assignments}/a1")]
    for method, path in calls:
        action = authz.action_of(method, path)
        assert action is not None and authz.allowed(grants, action), (method, path, action)
    assert not authz.allowed(grants, authz.action_of("PUT", f"{assignments}/a1") or "")  # never a grant
