"""`acagpu report merge`: fold per-job validation JSON into one compatibility matrix."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import click

from aca_gpu.cli.options import output_options
from aca_gpu.errors import EXIT_GPU_CHECK
from aca_gpu.output import Output
from aca_gpu.workflow.tester import report as report_flow


@click.group()
def report() -> None:
    """Combine and render validation reports."""


@report.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--markdown", "markdown_out", type=click.Path(path_type=Path), help="Also write the Markdown matrix here."
)
@click.option(
    "--into",
    "into",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Merge into this matrix file (e.g. compat/matrix.json; created if absent) and write it back.",
)
@output_options
def merge(files: tuple[Path, ...], markdown_out: Path | None, into: Path | None, output: Output) -> None:
    """Merge `acagpu validate -o json` documents into one tag × GPU matrix.

    With --into, the results are merged into that matrix file (a pair validated again replaces
    its old verdict) and the file is written back. Exits 5 when any (image, GPU) pair given in
    FILES failed, so a CI step shows red.
    """
    if into is not None:
        matrix, new = report_flow.merge_into(into, files)
        report_flow.write_matrix(matrix, into)
    else:
        matrix = new = report_flow.merge_files(files)
    markdown = report_flow.render_markdown(matrix)
    if markdown_out:
        markdown_out.write_text(markdown, encoding="utf-8")
    output.summary(markdown)
    for pair in new.failed:
        if output.github:
            output.error(f"{pair['image']} on {pair['gpu']}: {pair.get('reason') or 'failed'}")

    def human(stream: TextIO) -> None:
        print(report_flow.render_text(matrix), file=stream)

    output.emit(matrix.as_dict(), human)
    if new.failed:
        raise SystemExit(EXIT_GPU_CHECK)
