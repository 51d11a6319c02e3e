"""DESIGN.md §2: imports point down only, and only aca_gpu/azure imports azure.*."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "aca_gpu"

# layer -> aca_gpu subpackages/modules it must never import
FORBIDDEN: dict[str, set[str]] = {
    "gpu": {"cli", "workflow", "azure", "registry", "emulator", "local"},
    "registry": {"cli", "workflow", "azure", "emulator"},
    "azure": {"cli", "workflow", "emulator", "local"},
    # local container runtimes sit at the azure layer's level; workflow imports them lazily
    "local": {"cli", "workflow", "emulator", "azure"},
    "workflow": {"cli", "emulator"},
    "emulator": {"cli", "workflow", "azure", "registry", "local"},
    # the pure base modules
    "errors": {"cli", "workflow", "azure", "registry", "emulator", "gpu", "local"},
    "naming": {"cli", "workflow", "azure", "registry", "emulator", "gpu", "local"},
    "output": {"cli", "workflow", "azure", "registry", "emulator", "gpu", "local"},
    "config": {"cli", "workflow", "azure", "registry", "emulator", "gpu", "local"},
    "models": {"cli", "workflow", "azure", "registry", "emulator", "local"},
    "cost": {"cli", "workflow", "azure", "registry", "emulator", "local"},
    "price_refresh": {"cli", "workflow", "azure", "registry", "emulator", "local"},
    "units": {"cli", "workflow", "azure", "registry", "emulator", "gpu", "local"},
    "recording": {"cli", "workflow", "azure", "registry", "emulator", "gpu", "local"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


SOURCES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_down(path: Path) -> None:
    layer = _layer(path)
    bad = []
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] == "azure" and layer != "azure":
            bad.append(name)
        if parts[0] == "aca_gpu" and len(parts) > 1 and parts[1] in FORBIDDEN.get(layer, set()):
            bad.append(name)
    assert not bad, f"{path.relative_to(PKG)} ({layer}) must not import {sorted(bad)}"


def test_checker_catches_a_violation(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import azure.identity\nfrom aca_gpu.cli import main\n", encoding="utf-8")
    assert _imports(sample) == {"azure.identity", "aca_gpu.cli"}


def test_help_does_not_import_azure_sdk() -> None:
    code = (
        "import sys\n"
        "from aca_gpu.cli import cli\n"
        "try:\n    cli.main(args=['--help'], prog_name='acagpu')\nexcept SystemExit:\n    pass\n"
        "loaded = sorted(m for m in sys.modules if m == 'azure' or m.startswith('azure.'))\n"
        "print('AZURE:' + ','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("AZURE:"))
    assert line == "AZURE:", f"`acagpu --help` imported {line[6:]}"


def test_static_short_help_matches_each_command() -> None:
    """`acagpu --help` lists commands from a table; each entry must say what the command itself says."""
    import click

    from aca_gpu.cli import COMMANDS, cli

    ctx = click.Context(cli)
    for name, (_, short) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=200) == short, name


def test_help_imports_no_command_module() -> None:
    code = (
        "import sys\n"
        "from aca_gpu.cli import cli\n"
        "try:\n    cli.main(args=['--help'], prog_name='acagpu')\nexcept SystemExit:\n    pass\n"
        "print('LOADED:' + ','.join(sorted(m for m in sys.modules if m.startswith('aca_gpu.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("LOADED:"))
    loaded = set(line[7:].split(","))
    assert not {m for m in loaded if m.startswith(("aca_gpu.workflow", "aca_gpu.azure", "aca_gpu.registry"))}


# container runtimes and host GPU tools are run from aca_gpu/local only (the emulator's host workload
# runs the tester and nvidia-smi on purpose: it stands in for a GPU replica)
RUNTIME_TOOLS = ("docker", "podman", "apptainer", "singularity", "nvidia-smi", "ldconfig", "sbatch", "srun")


def _runs_tools(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in ("run", "Popen", "check_output", "call", "check_call", "execv", "execvp"):
            continue
        first = node.args[0] if node.args else None
        literal = first.elts[0] if isinstance(first, ast.List | ast.Tuple) and first.elts else first
        if isinstance(literal, ast.Constant) and literal.value in RUNTIME_TOOLS:
            found.append(str(literal.value))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_only_local_runs_container_runtimes(path: Path) -> None:
    if _layer(path) in ("local", "emulator"):
        return
    assert not _runs_tools(path), (
        f"{path.relative_to(PKG)} runs {_runs_tools(path)}: move it to aca_gpu/local"
    )


def test_runtime_scan_catches_a_call(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import subprocess\nsubprocess.run(['podman', 'run'])\n", encoding="utf-8")
    assert _runs_tools(sample) == ["podman"]
