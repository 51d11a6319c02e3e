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


# The emulator stands in for Azure and the GPU hosts, so it judges what the client does with its own
# models, never the client's: if it reused the client's CUDA-compatibility verdict, a bug there would be
# mirrored and no test could catch it. From aca_gpu it may import only itself and these neutral modules:
EMULATOR_MAY_IMPORT = {
    "aca_gpu",  # the package itself, for its location on disk
    "aca_gpu.resources",  # where packaged data and templates live
    "aca_gpu.units",  # unit arithmetic
    "aca_gpu.recording",  # the record/replay file format it replays
    "aca_gpu.gpu.profiles",  # ACA's GPU workload-profile catalog: data the emulated Azure serves
}
# the client's own CUDA-compatibility verdict, its driver table and its image-reference parsing
CLIENT_CUDA_JUDGEMENT = (
    "aca_gpu.gpu.cuda_compat",
    "aca_gpu.gpu.cuda_require",
    "aca_gpu.gpu.cuda_releases",
    "aca_gpu.gpu.image_ref",
)


def _is_module(name: str) -> bool:
    path = PKG.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported_modules(path: Path, package: str | None = None) -> set[str]:
    """Every aca_gpu module a file imports, `from pkg import module` and relative imports resolved
    (`package`: the file's package, by default where it lies under aca_gpu)."""
    if package is None:
        package = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if _is_module(sub) else base)
    return {name for name in found if name == "aca_gpu" or name.startswith("aca_gpu.")}


EMULATOR_SOURCES = sorted((PKG / "emulator").rglob("*.py"))


@pytest.mark.parametrize("path", EMULATOR_SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_emulator_imports_only_itself_and_neutral_modules(path: Path) -> None:
    imported = _imported_modules(path)
    bad = {n for n in imported if not n.startswith("aca_gpu.emulator") and n not in EMULATOR_MAY_IMPORT}
    assert not bad, f"{path.relative_to(PKG)}: the emulator must not import {sorted(bad)}"
    assert not [n for n in imported if n.startswith(CLIENT_CUDA_JUDGEMENT)]


def test_emulator_import_checker_resolves_submodules_and_relative_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from aca_gpu.gpu import cuda_compat\nfrom aca_gpu import errors\n"
        "from ...gpu.cuda_require import parse_require\nimport aca_gpu.gpu.image_ref\n"
        "from . import simulated\nfrom aca_gpu.gpu.profiles import lookup_gpu\nimport json\n",
        encoding="utf-8",
    )
    assert _imported_modules(sample, "aca_gpu.emulator.workloads") == {
        "aca_gpu.gpu.cuda_compat",
        "aca_gpu.errors",
        "aca_gpu.gpu.cuda_require",
        "aca_gpu.gpu.image_ref",
        "aca_gpu.emulator.workloads.simulated",
        "aca_gpu.gpu.profiles",
    }


def test_loading_the_emulator_loads_no_client_cuda_judgement() -> None:
    """Transitively too: no neutral module may pull the client's verdict in behind the emulator's back."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import aca_gpu.emulator as e\n"
        "for m in pkgutil.walk_packages(e.__path__, 'aca_gpu.emulator.'):\n"
        "    importlib.import_module(m.name)\n"
        "print('LOADED:' + ','.join(sorted(m for m in sys.modules if m.startswith('aca_gpu.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = next(x for x in out.splitlines() if x.startswith("LOADED:"))[7:].split(",")
    assert not [m for m in loaded if m.startswith(CLIENT_CUDA_JUDGEMENT)], loaded


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


# workflow/ is a house of rooms: what every workflow shares (base/) and what is asked before anything is
# created (preflight/) sit below the run engine (engine/); each feature (env/, fanout/, tester/, ...) sits
# above it and imports it, never the other way round, so a new feature is a new room beside the others.
WORKFLOW = PKG / "workflow"
BELOW_ENGINE = ("base", "preflight")
# flat modules allowed directly in workflow/ beside its rooms (none: each file belongs to one)
FLAT_WORKFLOW_MODULES = {"__init__.py"}


def _room(module: str) -> str | None:
    """The room of aca_gpu.workflow.<room>...; None outside workflow/."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["aca_gpu", "workflow"] and len(parts) > 2 else None


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next((w for w in edges if w in graph), None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_outside_the_emulator() -> None:
    """Every import counts, a deferred one inside a function too: a circle hidden in a function is
    still two modules that cannot be understood (or moved) one without the other."""
    graph = {
        _module_name(path): {m for m in _imported_modules(path) if not m.startswith("aca_gpu.emulator")}
        for path in SOURCES
        if _layer(path) != "emulator"
    }
    for name, targets in graph.items():
        targets.discard(name)
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert _cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("path", sorted(WORKFLOW.rglob("*.py")), ids=lambda p: str(p.relative_to(WORKFLOW)))
def test_workflow_rooms_import_downwards(path: Path) -> None:
    """The engine imports only what lies below it; below the engine nothing imports a feature."""
    room = _room(_module_name(path))
    allowed = {
        "base": {"base"},
        "preflight": {"base", "preflight"},
        "engine": {"base", "preflight", "engine"},
    }.get(room or "")
    if allowed is None:  # a feature: it may import the engine, what is below it, and other features
        return
    bad = sorted(m for m in _imported_modules(path) if _room(m) and _room(m) not in allowed)
    assert not bad, f"workflow/{room} must not import {bad} (a feature sits above it)"


def test_workflow_rooms_form_no_circle() -> None:
    """Between rooms too, imports run one way: two features that import each other are one feature."""
    rooms: dict[str, set[str]] = {}
    for path in WORKFLOW.rglob("*.py"):
        room = _room(_module_name(path))
        if room is not None:
            rooms.setdefault(room, set()).update(
                r for r in map(_room, _imported_modules(path)) if r is not None and r != room
            )
    assert _cycles(rooms) == []


def test_no_flat_module_in_workflow() -> None:
    flat = sorted(p.name for p in WORKFLOW.glob("*.py") if p.name not in FLAT_WORKFLOW_MODULES)
    assert flat == [], f"put {flat} into the room of its feature (or below the engine)"


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
