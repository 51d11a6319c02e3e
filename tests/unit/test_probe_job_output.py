"""The probe job's log: nvidia-smi's table, the CSV query, `topo -m` and `-q`, each ended by its status.

The table and `-q` are real outputs from the corpus; the matrix is the published two-GPU one of
tests/unit/test_gpu_health.py.
"""

from __future__ import annotations

from pathlib import Path

from aca_gpu.workflow.engine import probe_job
from aca_gpu.workflow.engine.probe import read_smi

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
MATRIX = (
    "        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
    "GPU0     X      PHB     0-11            N/A\n"
    "GPU1    PHB      X      0-11            N/A\n"
)


def _body(prefix: str) -> str:
    path = next(CORPUS.glob(f"{prefix}*.txt"))
    text = path.read_text(encoding="utf-8")
    return text.split("\n---\n", 1)[1] if "\n---\n" in text else text


def _log(table: str, query: str, health: str, topo: str | None) -> list[str]:
    lines = [*table.splitlines(), f"{probe_job.TABLE_END}0", *query.splitlines(), f"{probe_job.QUERY_END}0"]
    if topo is not None:
        lines += [*topo.splitlines(), f"{probe_job.TOPO_END}0"]
    return [*lines, *health.splitlines(), f"{probe_job.HEALTH_END}0"]


def test_the_script_prints_each_part_with_its_status_and_topology_before_the_health() -> None:
    script = probe_job.probe_script()
    order = [script.index(m) for m in probe_job.MARKERS]
    assert order == sorted(order) and "nvidia-smi topo -m" in script


def test_each_part_is_what_came_before_its_own_status_line() -> None:
    table = _body("24-")  # 2x H100 80GB HBM3
    parts = probe_job.split_output(_log(table, "0, NVIDIA H100", "not -q", MATRIX))
    assert parts is not None
    got_table, got_query, got_health, got_topo = parts
    assert got_table.output.strip() == table.strip() and got_table.exit_code == 0
    assert got_query.output == "0, NVIDIA H100" and got_health.output == "not -q"
    assert got_topo is not None and "GPU1    PHB" in got_topo.output
    assert probe_job.split_output(_log(table, "q", "h", MATRIX)[:-1]) is None  # -q not ended yet


def test_a_probe_without_topology_reads_as_before() -> None:
    parts = probe_job.split_output(_log(_body("20-"), "q", "h", None))
    assert parts is not None and parts[3] is None and "A100" in parts[0].output


def test_several_gpus_carry_their_links_into_the_health_report() -> None:
    table = _body("24-")
    health = _body("39-")  # a real -q (one GPU's: the links come from the matrix, not from -q)
    parts = probe_job.split_output(_log(table, "", health, MATRIX))
    assert parts is not None
    result = read_smi(*parts)
    assert len(result.gpus) == 2 and result.health is not None
    assert result.health.topology == {"gpus": ["GPU0", "GPU1"], "links": {"GPU0-GPU1": "PHB"}}
    one = probe_job.split_output(_log(_body("20-"), "", health, MATRIX))
    assert one is not None and read_smi(*one).health.topology is None  # type: ignore[union-attr]
