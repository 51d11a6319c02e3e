"""`acagpu ci init`: write the GitHub Actions workflows into a repository and say how to trust them.

The templates ship as package data (`templates/github/`); placeholders such as `__LOCATION__` are
replaced with validated values, so a rendered workflow can neither break its YAML nor inject
shell. The workflows install exactly the acagpu that wrote them: its wheel goes into the repository
(`.github/acagpu/`) beside a requirements file with the wheel's sha256, and pip installs it with
`--require-hashes --no-index`, so no package index is ever asked for acagpu by name. With
`--install-spec` the user names another pinned source instead (a VCS URL at a commit, or
`acagpu==VERSION --hash=sha256:...`); an unpinned name is refused.

What Azure needs once (federated credential, provider registration, a least-privilege custom
role and its assignment) is printed as `az` commands, and the role definition is written beside
the workflows so the commands can refer to it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.gpu.image_ref import parse_image_ref
from aca_gpu.gpu.profiles import resolve_profile, valid_aliases
from aca_gpu.naming import validate_env_name, validate_location
from aca_gpu.registry.tags import parse_version
from aca_gpu.resources import template_path
from aca_gpu.workflow.ci import lock as locks
from aca_gpu.workflow.ci import pins as ci_pins
from aca_gpu.workflow.ci import wheel as wheels

WORKFLOWS = {  # template -> where it goes in the user's repository
    "validate-cuda-tags.yml": ".github/workflows/acagpu-validate.yml",
    "reap.yml": ".github/workflows/acagpu-reap.yml",
}
ROLE_FILE = ".github/acagpu-role.json"
INSTALL_DIR = ".github/acagpu"
REQUIREMENTS_FILE = f"{INSTALL_DIR}/requirements.txt"
LOCK_FILE = f"{INSTALL_DIR}/requirements-lock.txt"
# without the wheel (--install-spec), the dependencies are the installed acagpu's, resolved on the runner
SPEC_DEPS_COMMAND = (
    'python -c \'import importlib.metadata as m; print("\\n".join(r for r in m.requires("acagpu") or [] '
    'if "extra ==" not in r))\' > "$RUNNER_TEMP/acagpu-deps.txt" && '
    'python -m pip install -r "$RUNNER_TEMP/acagpu-deps.txt"'
)
MATRIX_FILE = "compat/matrix.json"
ROLE_NAME = "acagpu runner"
OIDC_ISSUER = "https://token.actions.githubusercontent.com"
OIDC_AUDIENCE = "api://AzureADTokenExchange"

_PLACEHOLDER = re.compile(r"__([A-Z][A-Z0-9_]*)__")
_GUID = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
_SLUG = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_WORD = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
# a VCS URL pinned to a full commit sha, or `acagpu==VERSION --hash=sha256:...` (one or more hashes)
_VCS_SPEC = re.compile(r"^(?:acagpu\s*@\s*)?(?P<url>git\+https://[A-Za-z0-9_.\-/:~]+@(?P<sha>[0-9a-f]{40}))$")
_INDEX_SPEC = re.compile(
    r"^acagpu==(?P<version>[0-9][A-Za-z0-9_.+!-]*)(?P<hashes>(?:\s+--hash=sha256:[0-9a-f]{64})+)$"
)
# pip flags of the install step, by source: the wheel in the repository never reaches an index
WHEEL_FLAGS = "--no-deps --require-hashes --no-index"
INDEX_FLAGS = "--no-deps --require-hashes"
VCS_FLAGS = "--no-deps"


@dataclass(frozen=True)
class CiInitRequest:
    repo_dir: Path
    subscription: str
    tenant: str
    client_id: str
    location: str
    gpus: tuple[str, ...]
    github_repo: str | None = None  # owner/name; read from `git remote get-url origin` when absent
    branch: str = "main"
    repository: str = "nvidia/cuda"
    flavor: str = "runtime"
    os: str = "ubuntu22.04"
    since: str = "12.1"
    limit: int = 4
    max_parallel: int = 2
    install_spec: str | None = None  # a pinned VCS URL or `acagpu==V --hash=sha256:...`; None: the wheel
    wheel: Path | None = None  # a wheel of this version at hand (else it is built or re-packed)
    force: bool = False
    upgrade: bool = False  # refresh the wheel and the lock; keep existing workflows (unless force)
    lock_hashes: bool = True  # hashes in the lock (pip download for the runner's platform)
    env: str | None = None  # a warm environment the validate jobs share (`acagpu env create`, once)


@dataclass(frozen=True)
class CiInitResult:
    written: tuple[Path, ...]
    github_repo: str | None
    role: dict[str, Any]
    commands: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    install: dict[str, Any] = field(default_factory=dict)
    pins: tuple[dict[str, Any], ...] = ()  # what --upgrade moved to the current action pins

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "kind": "ci-init",
            "written": [str(p) for p in self.written],
            "github_repo": self.github_repo,
            "role": self.role,
            "commands": list(self.commands),
            "notes": list(self.notes),
            "install": self.install,
            "pins": list(self.pins),
        }


def render(template: str, values: dict[str, str]) -> str:
    """Replace every `__NAME__`; a placeholder without a value is a bug in the template: refuse."""
    missing = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template)} - values.keys())
    if missing:
        raise BadInput(f"template placeholders without a value: {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def placeholder_values(req: CiInitRequest) -> dict[str, str]:
    """Validated values; each is safe inside YAML and inside a GitHub expression string."""
    for what, value in (
        ("subscription", req.subscription),
        ("tenant", req.tenant),
        ("client id", req.client_id),
    ):
        if not _GUID.match(value):
            raise BadInput(f"invalid {what} {value!r}: expected a GUID")
    location = validate_location(req.location)
    known = set(valid_aliases())
    if not req.gpus:
        raise BadInput("give at least one GPU with --gpus, e.g. t4,a100")
    for gpu in req.gpus:
        if gpu not in known:
            raise BadInput(f"unknown GPU {gpu!r}: use one of {', '.join(sorted(known))}")
    ref = parse_image_ref(req.repository)
    if ref.tag != "latest" or ref.digest or ":" in req.repository.rsplit("/", 1)[-1]:
        raise BadInput(f"give a repository without a tag or digest, not {req.repository!r}")
    for what, value in (("flavor", req.flavor), ("os", req.os)):
        if not _WORD.match(value):
            raise BadInput(f"invalid {what} {value!r}")
    parse_version(req.since)
    if req.limit < 1 or req.max_parallel < 1:
        raise BadInput("--limit and --max-parallel must be at least 1")
    install_flags(req.install_spec)
    dedicated = [g for g in req.gpus if not resolve_profile(g).serverless]
    if req.env and dedicated:
        raise BadInput(f"--env takes serverless GPUs only; {', '.join(dedicated)} is dedicated")
    return {
        "SUBSCRIPTION_ID": req.subscription.lower(),
        "TENANT_ID": req.tenant.lower(),
        "CLIENT_ID": req.client_id.lower(),
        "LOCATION": location,
        "GPUS": json.dumps(list(dict.fromkeys(req.gpus))),
        "REPOSITORY": ref.familiar.removesuffix(":latest"),
        "FLAVOR": req.flavor,
        "OS": req.os,
        "SINCE": req.since,
        "LIMIT": str(req.limit),
        "MAX_PARALLEL": str(req.max_parallel),
        "INSTALL_FLAGS": install_flags(req.install_spec),
        "REQUIREMENTS": REQUIREMENTS_FILE,
        "MATRIX": MATRIX_FILE,
        "ENV": validate_env_name(req.env) if req.env else "",
    }


def install_flags(spec: str | None) -> str:
    """pip flags for the install step; a spec that is not pinned is refused (exit 2)."""
    if spec is None:
        return WHEEL_FLAGS
    text = " ".join(spec.split())
    if _VCS_SPEC.match(text):
        return VCS_FLAGS
    if _INDEX_SPEC.match(text):
        return INDEX_FLAGS
    raise BadInput(
        f"invalid --install-spec {spec!r}: give a VCS URL pinned to a commit "
        "(git+https://github.com/OWNER/REPO@<40-hex sha>) or acagpu==VERSION --hash=sha256:<64 hex>"
    )


def requirement_line(spec: str | None, wheel: wheels.Wheel | None) -> str:
    """The one line of requirements.txt: the wheel by path and hash, or the user's pinned spec."""
    if wheel is not None:
        return f"./{INSTALL_DIR}/{wheel.filename} --hash=sha256:{wheel.sha256}"
    assert spec is not None
    text = " ".join(spec.split())
    vcs = _VCS_SPEC.match(text)
    return f"acagpu @ {vcs.group('url')}" if vcs else text


def role_definition(subscription: str) -> dict[str, Any]:
    """Only what acagpu does: its own resource groups and the Microsoft.App resources inside them, and
    the removal of a queue run's leftovers (its queues, the role assignments at their scope)."""
    return {
        "Name": ROLE_NAME,
        "IsCustom": True,
        "Description": "acagpu: create, inspect and delete tagged resource groups with Container Apps GPU "
        "environments, apps and jobs.",
        "Actions": [
            "Microsoft.Resources/subscriptions/read",
            "Microsoft.Resources/subscriptions/providers/read",
            "Microsoft.Resources/subscriptions/resourceGroups/read",
            "Microsoft.Resources/subscriptions/resourceGroups/write",
            "Microsoft.Resources/subscriptions/resourceGroups/delete",
            "Microsoft.Resources/subscriptions/resourceGroups/resources/read",
            "Microsoft.App/managedEnvironments/*",
            "Microsoft.App/containerApps/*",
            "Microsoft.App/jobs/*",
            "Microsoft.App/locations/*/read",
            # a queue run's leftovers in its environment's storage account: its queues and the role
            # assignments made at their scope (read and delete only; never a write, never a grant)
            "Microsoft.Storage/storageAccounts/queueServices/queues/read",
            "Microsoft.Storage/storageAccounts/queueServices/queues/delete",
            "Microsoft.Authorization/roleAssignments/read",
            "Microsoft.Authorization/roleAssignments/delete",
        ],
        "NotActions": [],
        "DataActions": [],
        "NotDataActions": [],
        "AssignableScopes": [f"/subscriptions/{subscription}"],
    }


def az_commands(req: CiInitRequest, github_repo: str | None) -> tuple[str, ...]:
    repo = github_repo or "<owner>/<repo>"
    sub = req.subscription.lower()
    credential = {
        "name": f"acagpu-{repo.replace('/', '-')}-{req.branch}"[:120],
        "issuer": OIDC_ISSUER,
        "subject": f"repo:{repo}:ref:refs/heads/{req.branch}",
        "audiences": [OIDC_AUDIENCE],
    }
    return (
        "# 1. Let this repository's workflows on its default branch sign in as the app (no secret stored)",
        f"az ad app federated-credential create --id {req.client_id} --parameters '{json.dumps(credential)}'",
        "# 2. Register the Container Apps provider once (the role below deliberately cannot)",
        f"az provider register --namespace Microsoft.App --subscription {sub} --wait",
        f"# 3. A custom role with only what acagpu does ({ROLE_FILE}, shown above)",
        f"az role definition create --role-definition @{ROLE_FILE}",
        "# 4. Give the app's service principal that role on the subscription",
        f"az ad sp show --id {req.client_id} >/dev/null 2>&1 || az ad sp create --id {req.client_id}",
        f'az role assignment create --role "{ROLE_NAME}" --scope /subscriptions/{sub} '
        "--assignee-principal-type ServicePrincipal "
        f'--assignee-object-id "$(az ad sp show --id {req.client_id} --query id -o tsv)"',
        "# 5. Optional: deletion by the scheduled reaper (dry run until then)",
        f"gh variable set ACAGPU_REAP_DELETE --body true --repo {repo}",
        "# 6. Recommended: a reaper inside Azure that needs neither CI nor a laptop (exit 2 and the",
        "#    commands for an administrator if you may not assign roles)",
        f"acagpu guard install -l {validate_location(req.location)} --subscription {sub}",
        *_warm_commands(req, sub),
    )


def _warm_commands(req: CiInitRequest, sub: str) -> tuple[str, ...]:
    if not req.env:
        return ()
    gpus = ",".join(dict.fromkeys(req.gpus))
    return (
        "# 7. The warm environment the validate jobs share (once; serverless-only, $0/h while idle;",
        "#    every validation renews its 30-day idle TTL, then reap or the guard removes it)",
        f"acagpu env create {validate_env_name(req.env)} -l {validate_location(req.location)} "
        f"--gpu {gpus} --idle-ttl 30d --yes --subscription {sub}",
    )


def github_repo_of(repo_dir: Path) -> str | None:
    """`owner/name` from the origin remote (https or ssh form), if it points at GitHub."""
    try:
        url = subprocess.run(
            ["git", "-C", str(repo_dir), "remote", "get-url", "origin"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"github\.com[:/]([^/]+/[^/]+?)(?:\.git)?/?$", url)
    return match.group(1) if match else None


def deps_command(lock: locks.Lock | None) -> str:
    """The dependency step's one command: the lock with --no-deps (nothing resolved on the runner)
    and `pip check`; with --install-spec, the installed acagpu's own requirements."""
    if lock is None:
        return SPEC_DEPS_COMMAND
    return f"python -m pip install {lock.pip_flags} -r {LOCK_FILE} && python -m pip check"


def init(req: CiInitRequest) -> CiInitResult:
    values = placeholder_values(req)
    github_repo = req.github_repo or github_repo_of(req.repo_dir)
    if github_repo is not None and not _SLUG.match(github_repo):
        raise BadInput(f"invalid GitHub repository {github_repo!r}: expected owner/name")
    if not req.repo_dir.is_dir():
        raise BadInput(f"--repo-dir {req.repo_dir} is not a directory")
    role = role_definition(values["SUBSCRIPTION_ID"])
    workflows = {req.repo_dir / dest: src for src, dest in WORKFLOWS.items()}
    existing = [p for p in [*workflows, req.repo_dir / ROLE_FILE] if p.exists()]
    if existing and not (req.force or req.upgrade):
        raise BadInput(
            f"{', '.join(str(p) for p in existing)} already exist",
            hint="pass --upgrade to refresh the wheel and the lock only, or --force to overwrite them",
        )
    kept = [] if req.force else [p for p in existing if p in workflows]
    outputs: dict[Path, str] = {}
    with tempfile.TemporaryDirectory(prefix="acagpu-ci-") as work:
        wheel = None if req.install_spec else wheels.current_wheel(Path(work), req.wheel)
        lock = None if wheel is None else locks.make_lock(wheels.requires(wheel.path), hashes=req.lock_hashes)
        values["DEPS_INSTALL"] = deps_command(lock)
        for path, src in workflows.items():
            if path not in kept:
                outputs[path] = render(template_path("github", src).read_text("utf-8"), values)
        repinned = _repin(kept, outputs)
        outputs[req.repo_dir / ROLE_FILE] = json.dumps(role, indent=2) + "\n"
        install_dir = req.repo_dir / INSTALL_DIR
        install_dir.mkdir(parents=True, exist_ok=True)
        for old in install_dir.glob("acagpu-*.whl"):  # one wheel: the one the requirements pin
            old.unlink()
        if wheel is not None:
            shutil.copyfile(wheel.path, install_dir / wheel.filename)
        outputs[req.repo_dir / REQUIREMENTS_FILE] = (
            "# written by `acagpu ci init`: what the workflows install, pinned (pip --require-hashes)\n"
            + requirement_line(req.install_spec, wheel)
            + "\n"
        )
        if lock is not None:
            outputs[req.repo_dir / LOCK_FILE] = lock.render()
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    written = tuple(outputs) + ((install_dir / wheel.filename,) if wheel is not None else ())
    install = {
        "source": "wheel" if wheel is not None else "spec",
        "requirement": requirement_line(req.install_spec, wheel),
        "flags": values["INSTALL_FLAGS"],
        "wheel": None
        if wheel is None
        else {"file": str(install_dir / wheel.filename), "sha256": wheel.sha256, "origin": wheel.origin},
        "lock": None
        if lock is None
        else {
            "file": str(req.repo_dir / LOCK_FILE),
            "packages": len(lock.pins),
            "hashed": lock.hashed,
            "note": lock.note,
            "missing": list(lock.missing),
        },
    }
    notes = [
        "The role is scoped to the subscription because acagpu creates its own resource groups; it cannot "
        "tell acagpu's groups from others, so the reaper and `down` only ever delete groups tagged "
        "acagpu:managed=true. For a harder boundary, use a subscription dedicated to GPU validation.",
    ]
    if github_repo is None:
        notes.append(
            "No GitHub remote found: replace <owner>/<repo> in the commands (or pass --github-repo)."
        )
    if wheel is not None:
        notes.append(
            f"Commit {INSTALL_DIR}/ with the workflows: they install acagpu {wheel.version} from that wheel "
            f"(sha256 {wheel.sha256[:12]}…), never from a package index."
        )
    notes += lock_notes(lock, kept)
    return CiInitResult(
        written,
        github_repo,
        role,
        az_commands(req, github_repo),
        tuple(notes),
        install=install,
        pins=repinned,
    )


def _repin(kept: list[Path], outputs: dict[Path, str]) -> tuple[dict[str, Any], ...]:
    """The kept workflows' `uses:` lines at the current pins (their other lines as the owner left
    them); a file whose pins were current is not written again."""
    changed: list[dict[str, Any]] = []
    for path in kept:
        text, changes = ci_pins.upgrade(path.read_text(encoding="utf-8"))
        if changes:
            outputs[path] = text
        changed += [{"file": str(path), "line": c.line, "action": c.action, "old": c.old, "new": c.new}
                    for c in changes]  # fmt: skip
    return tuple(changed)


def lock_notes(lock: locks.Lock | None, kept: list[Path]) -> list[str]:
    """What the user should know about the lock and the workflows --upgrade left as they were."""
    notes = []
    if lock is not None and not lock.hashed:
        notes.append(f"The lock pins versions without hashes: {lock.note}.")
    if lock is not None and lock.missing:
        notes.append(
            f"Needed on the runner but not installed here, so not locked: {', '.join(lock.missing)}."
        )
    stale = [p for p in kept if LOCK_FILE not in p.read_text(encoding="utf-8")]
    if stale:
        notes.append(
            f"{', '.join(str(p) for p in stale)} predate the lock and still resolve dependencies "
            "on every run: pass --force to rewrite them."
        )
    return notes
