"""`acagpu ci init`: GitHub Actions workflows that validate new CUDA tags and reap leftovers."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import click

from aca_gpu.cli.options import output_options
from aca_gpu.output import Output, dumps
from aca_gpu.workflow.ci import ci_init as ci_flow


@click.group()
def ci() -> None:
    """Set up acagpu in a repository's CI."""


@ci.command()
@click.option(
    "--repo-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The repository to write the workflows into.",
)
@click.option("--subscription", required=True, help="Azure subscription id the workflows use.")
@click.option("--tenant", required=True, help="Microsoft Entra tenant id.")
@click.option(
    "--client-id", required=True, help="Client id of the app registration the workflows sign in as."
)
@click.option("-l", "--location", required=True, help="Azure region for the GPU environments, e.g. westus3.")
@click.option("--gpus", default="t4", show_default=True, help="Comma-separated GPU aliases to validate on.")
@click.option("--github-repo", help="owner/name on GitHub (default: from the origin remote).")
@click.option("--branch", default="main", show_default=True, help="Branch the federated credential trusts.")
@click.option("--repository", default="nvidia/cuda", show_default=True, help="Image repository to watch.")
@click.option("--flavor", default="runtime", show_default=True, help="Tag flavor to validate.")
@click.option("--os", "os_name", default="ubuntu22.04", show_default=True, help="Tag OS to validate.")
@click.option("--since", default="12.1", show_default=True, help="Oldest CUDA version to validate.")
@click.option(
    "--limit",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="At most this many new tags per run.",
)
@click.option(
    "--max-parallel",
    type=click.IntRange(1, 256),
    default=2,
    show_default=True,
    help="Validation jobs running at once.",
)
@click.option(
    "--install-spec",
    help="What the workflows install instead of this acagpu's wheel: a VCS URL pinned to a commit "
    "(git+https://github.com/OWNER/REPO@SHA) or 'acagpu==VERSION --hash=sha256:HEX'.",
)
@click.option(
    "--wheel",
    type=click.Path(dir_okay=False, path_type=Path),
    help="This acagpu version's wheel, if one is at hand (default: built or re-packed from the install).",
)
@click.option(
    "--env",
    "env_name",
    help="A warm environment the validate jobs share (the one-time steps create it; $0 while idle).",
)
@click.option("--force", is_flag=True, help="Overwrite workflows that already exist.")
@click.option(
    "--upgrade",
    is_flag=True,
    help="Refresh the wheel and the dependency lock to this acagpu, and move existing workflows' "
    "actions to its pins (commit sha, Node 24); keep the rest of them.",
)
@click.option(
    "--no-lock-hashes",
    "no_lock_hashes",
    is_flag=True,
    help="Pin dependency versions without hashes (no pip download, e.g. offline).",
)
@output_options
def init(
    repo_dir: Path,
    subscription: str,
    tenant: str,
    client_id: str,
    location: str,
    gpus: str,
    github_repo: str | None,
    branch: str,
    repository: str,
    flavor: str,
    os_name: str,
    since: str,
    limit: int,
    max_parallel: int,
    install_spec: str | None,
    wheel: Path | None,
    env_name: str | None,
    force: bool,
    upgrade: bool,
    no_lock_hashes: bool,
    output: Output,
) -> None:
    """Write .github/workflows/acagpu-validate.yml and acagpu-reap.yml, then print the one-time
    `az` steps: federated credential, provider registration, a least-privilege role and its
    assignment. Existing files are kept unless --force (exit 2).

    The workflows install exactly this acagpu: its wheel goes to .github/acagpu/ with a
    requirements file pinning its sha256 (pip --require-hashes --no-index), and its dependencies
    from a lock of the versions installed here, with hashes where pip can download them
    (requirements-lock.txt, installed with --no-deps). --upgrade refreshes both and rewrites the
    existing workflows' `uses:` lines to this acagpu's action pins, saying what changed."""
    request = ci_flow.CiInitRequest(
        repo_dir=repo_dir,
        subscription=subscription,
        tenant=tenant,
        client_id=client_id,
        location=location,
        gpus=tuple(g.strip().lower() for g in gpus.split(",") if g.strip()),
        github_repo=github_repo,
        branch=branch,
        repository=repository,
        flavor=flavor,
        os=os_name,
        since=since,
        limit=limit,
        max_parallel=max_parallel,
        install_spec=install_spec,
        wheel=wheel,
        force=force,
        upgrade=upgrade,
        lock_hashes=not no_lock_hashes,
        env=env_name,
    )
    result = ci_flow.init(request)
    if result.github_repo is None:  # the az steps below carry a placeholder the user must replace
        output.warn(
            "no GitHub remote `origin` found: the federated credential below names repo:<owner>/<repo>; "
            "pass --github-repo OWNER/NAME (or replace it before running the commands)"
        )

    def human(stream: TextIO) -> None:
        for path in result.written:
            print(f"wrote {path}", file=stream)
        if upgrade:
            for pin in result.pins:
                print(
                    f"pin {pin['file']}:{pin['line']}: {pin['action']} {pin['old']} -> {pin['new']}",
                    file=stream,
                )
            if not result.pins:
                print("pins: all current (Node 24 actions, by commit sha)", file=stream)
        print("\nOne-time Azure setup. The custom role (least privilege):\n", file=stream)
        print(dumps(result.role), file=stream)
        print("", file=stream)
        for line in result.commands:
            print(line, file=stream)
        for note in result.notes:
            print(f"\nnote: {note}", file=stream)

    output.emit(result.as_dict(), human)
