"""Every test runs with its own cache and config dirs, so a developer's ~/.cache or config never leaks in."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow(seconds)` start first, each at the head of one worker's share, the rest
    in their usual order. `make test` runs its workers with worksteal, which hands each worker a
    contiguous share of the collection, in order (`_shares`), and lets an idle one take the tail of
    a busy one's queue. A 100 s scenario reached late would still run long after every other test
    ended; all of them first, in one share, would run one after another on one worker. So the
    marked tests are dealt out longest first, each to the share whose marked tests add up to the
    least so far, and every worker starts on its own."""
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    rest = [item for item in items if item.get_closest_marker("slow") is None]
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    shares = _shares(len(items), workers)
    heads: list[list[pytest.Item]] = [[] for _ in shares]
    load = [0.0 for _ in shares]
    for item in sorted(slow, key=_seconds, reverse=True):  # a stable sort: ties keep their order
        k = min(range(len(shares)), key=lambda i: (load[i], i))
        heads[k].append(item)
        load[k] += _seconds(item)
    if any(len(head) > size for head, size in zip(heads, shares, strict=True)):
        items[:] = slow + rest  # a run too small to share: the marked tests first
        return
    ordered: list[pytest.Item] = []
    left = iter(rest)
    for head, size in zip(heads, shares, strict=True):
        ordered += head + [next(left) for _ in range(size - len(head))]
    items[:] = ordered + list(left)


def _shares(count: int, workers: int) -> list[int]:
    """How many tests worksteal hands each worker at the start: what is left, over the workers left
    (xdist's `WorkStealingScheduling.check_schedule`)."""
    sizes = []
    for k in range(workers):
        sizes.append(count // (workers - k))
        count -= sizes[-1]
    return sizes


def _seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    return float(marker.args[0]) if marker is not None and marker.args else 60.0


@pytest.fixture(autouse=True)
def _signals_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test leaves the worker's SIGINT and SIGTERM handlers as it found them. A child process
    inherits an ignored SIGINT (Python then never raises KeyboardInterrupt in it), so one test that
    left SIGINT ignored would make every later Ctrl-C test in that worker wait for nothing. A test
    that changed them is named in $ACAGPU_TEST_SIGNAL_LOG (when set) and fails."""
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = {s.name: signal.getsignal(s) for s, h in before.items() if signal.getsignal(s) is not h}
    for sig, handler in before.items():
        signal.signal(sig, handler)
    if changed:
        log = os.environ.get("ACAGPU_TEST_SIGNAL_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{request.node.nodeid} {changed}\n")
        pytest.fail(f"the test left signal handlers changed: {changed}")


@pytest.fixture(autouse=True)
def _cwd_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test leaves the worker's working directory as it found it: a later test in that worker
    that reads a path relative to the checkout would otherwise look in the first test's tmp_path
    (it did: a guard script "not found" after a bad-input test's chdir). A test that moved it fails."""
    before = os.getcwd()
    yield
    after = os.getcwd()
    if after != before:
        os.chdir(before)
        pytest.fail(f"the test left the working directory changed: {after} (was {before})")


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("acagpu-user")
    monkeypatch.setenv("ACAGPU_CACHE_DIR", str(home / "cache"))
    monkeypatch.delenv("ACAGPU_CONFIG", raising=False)  # a named config file must exist
    monkeypatch.setenv("XDG_CONFIG_HOME", str(Path(home) / "config"))
    for name in (
        "ACAGPU_SUBSCRIPTION",
        "ACAGPU_ARM_ENDPOINT",
        "ACAGPU_TOKEN",
        "ACAGPU_CA_BUNDLE",
        "ACAGPU_LOCATION",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def acagpu_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's acagpu wheel, built once per session (`ci init --wheel` copies it)."""
    from aca_gpu.workflow.ci import wheel

    return wheel.current_wheel(tmp_path_factory.mktemp("wheel")).path
