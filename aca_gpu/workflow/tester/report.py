"""Compatibility matrix: per-(image, GPU) validation results merged into one table.

`acagpu validate` writes one JSON document per job; in GitHub Actions each matrix job uploads its
own, and `acagpu report merge` folds them into one Markdown matrix for the job summary. With
`--into FILE` the new results are merged into the matrix kept in the repository (compat/matrix.json):
a (image, GPU) pair validated again replaces its old verdict, so the matrix grows run after run and
`acagpu tags --not-in FILE` leaves out what it already holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.workflow.engine.phases import pull_text

PAIR_KEYS = ("image", "gpu", "status")


@dataclass(frozen=True)
class Matrix:
    pairs: tuple[Mapping[str, Any], ...]

    @property
    def images(self) -> list[str]:
        return sorted({str(p["image"]) for p in self.pairs}, key=_newest_first)

    @property
    def gpus(self) -> list[str]:
        return sorted({str(p["gpu"]) for p in self.pairs})

    @property
    def failed(self) -> list[Mapping[str, Any]]:
        return [p for p in self.pairs if p.get("status") != "pass"]

    def cell(self, image: str, gpu: str) -> Mapping[str, Any] | None:
        found = [p for p in self.pairs if p["image"] == image and p["gpu"] == gpu]
        return found[-1] if found else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "kind": "matrix",
            "images": self.images,
            "gpus": self.gpus,
            "passed": len(self.pairs) - len(self.failed),
            "failed": len(self.failed),
            "results": list(self.pairs),
        }


def _newest_first(image: str) -> tuple[int, ...]:
    tag = image.rsplit(":", 1)[-1]
    numbers = []
    for part in tag.split("-")[0].split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(-n for n in numbers) or (0,)


def pairs_from_document(doc: Any, source: str = "<input>") -> list[Mapping[str, Any]]:
    """Accept a validate document, a matrix document, a list of pairs, or one pair."""
    if isinstance(doc, Mapping) and isinstance(doc.get("results"), list):
        items: Sequence[Any] = doc["results"]
    elif isinstance(doc, list):
        items = doc
    elif isinstance(doc, Mapping):
        items = [doc]
    else:
        raise BadInput(f"{source}: not a validation result")
    # a validate document's rows ran in its one region: each keeps it, so a merged matrix says where
    where = doc.get("location") if isinstance(doc, Mapping) and isinstance(doc.get("results"), list) else None
    pairs = []
    for item in items:
        if not isinstance(item, Mapping) or any(k not in item for k in PAIR_KEYS):
            raise BadInput(f"{source}: a result lacks one of {', '.join(PAIR_KEYS)}")
        pairs.append(
            {**item, "location": where} if isinstance(where, str) and not item.get("location") else item
        )
    return pairs


def latest_per_pair(pairs: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    """One result per (image, GPU): the last one given wins (new results come after old ones)."""
    latest: dict[tuple[str, str], Mapping[str, Any]] = {}
    for pair in pairs:
        key = (str(pair["image"]), str(pair["gpu"]))
        latest.pop(key, None)
        latest[key] = pair
    return tuple(latest.values())


def merge_into(existing: Path, paths: Iterable[Path]) -> tuple[Matrix, Matrix]:
    """(the matrix with the new results merged in, the new results alone); `existing` may be absent."""
    new = merge_files(paths)
    old: list[Mapping[str, Any]] = []
    if existing.is_file():
        old = list(merge_files([existing]).pairs) if existing.stat().st_size else []
    return Matrix(latest_per_pair([*old, *new.pairs])), new


def write_matrix(matrix: Matrix, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(matrix.as_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def merge_files(paths: Iterable[Path]) -> Matrix:
    pairs: list[Mapping[str, Any]] = []
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise BadInput(f"no such file: {path}") from exc
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
        except UnicodeDecodeError:
            raise BadInput(f"{path}: not a text file (expected `acagpu validate -o json` output)") from None
        except OSError as exc:
            raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
        pairs.extend(pairs_from_document(doc, str(path)))
    if not pairs:
        raise BadInput("no validation results to merge")
    return Matrix(tuple(pairs))


def health_of(pair: Mapping[str, Any]) -> str | None:
    """The pair's GPU health verdict (healthy / degraded / failed), None when it was not read."""
    verdict = pair.get("health_verdict") or (pair.get("health") or {}).get("verdict")
    return str(verdict) if verdict else None


def _health_cell(pair: Mapping[str, Any]) -> str:
    verdict = health_of(pair)
    if verdict is None:
        return "health not read"
    mark = {"healthy": "", "degraded": "⚠️ ", "failed": "❌ "}.get(verdict, "")
    return f"{mark}health {verdict}"


def _fmt_tflops(value: Any) -> str:
    return f"{float(value):.0f}" if isinstance(value, int | float) else "–"


def render_markdown(matrix: Matrix) -> str:
    """Tag × GPU table: verdict, driver/CUDA, bf16 TFLOP/s, health and the image's pull (seconds,
    size, MB/s and region, when known), then one line per failure with its reason."""
    gpus = matrix.gpus
    lines = [
        "## acagpu CUDA image validation",
        "",
        f"{len(matrix.pairs) - len(matrix.failed)} passed, {len(matrix.failed)} failed",
        "",
        "| image | " + " | ".join(gpus) + " |",
        "|---|" + "---|" * len(gpus),
    ]
    for image in matrix.images:
        cells = []
        for gpu in gpus:
            pair = matrix.cell(image, gpu)
            if pair is None:
                cells.append("·")
                continue
            if pair.get("refused"):  # never ran: no nvidia-smi, and no figure of this image
                pre = pair.get("preflight") or {}
                driver, cuda = pre.get("driver_version") or "?", pre.get("cuda_version") or "?"
                cells.append(f"❌ refused<br>driver {driver} (predicted) / image CUDA {cuda}")
                continue
            glyph = "✅ pass" if pair.get("status") == "pass" else "❌ fail"
            driver = pair.get("driver_version") or "?"
            cuda = pair.get("cuda_version") or "?"
            pull = pull_text(pair)  # the image under test's pull, where the platform said it
            cells.append(
                f"{glyph}<br>driver {driver} / CUDA {cuda}<br>bf16 {_fmt_tflops(pair.get('bf16_tflops'))}"
                f"<br>{_health_cell(pair)}" + (f"<br>{pull}" if pull else "")
            )
        lines.append(f"| `{image}` | " + " | ".join(cells) + " |")
    digests = [(p["image"], p["gpu"], p.get("image_digest")) for p in matrix.pairs if p.get("image_digest")]
    if matrix.failed:
        lines += ["", "### Failures", ""]
        lines += [f"- `{p['image']}` on {p['gpu']}: {p.get('reason') or 'failed'}" for p in matrix.failed]
    degraded = [(p, w) for p in matrix.pairs if p.get("status") == "pass" for w in p.get("warnings") or []]
    if degraded:
        lines += ["", "### Degraded GPUs (passed with a warning)", ""]
        lines += [f"- {w}" for _, w in degraded]
    if digests:
        lines += ["", "<details><summary>image digests tested</summary>", ""]
        lines += [f"- `{image}` ({gpu}): `{digest}`" for image, gpu, digest in digests]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def render_text(matrix: Matrix) -> str:
    width = max((len(i) for i in matrix.images), default=5)
    rows = [f"{'image':<{width}}  " + "  ".join(f"{g:<12}" for g in matrix.gpus)]
    for image in matrix.images:
        cells = []
        for gpu in matrix.gpus:
            pair = matrix.cell(image, gpu)
            state = (pair or {}).get("status", "·")
            health = health_of(pair or {})
            if health and health != "healthy":
                state = f"{state}/{health}"
            cells.append(f"{state:<12}")
        rows.append(f"{image:<{width}}  " + "  ".join(cells))
    rows += [f"  {p['image']} on {p['gpu']}: {p.get('reason') or 'failed'}" for p in matrix.failed]
    return "\n".join(rows)
