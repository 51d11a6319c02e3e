"""`acagpu report merge`: fold per-job validation JSON into one compatibility matrix; `acagpu report
RUN.json --html FILE` (`report render`): one self-contained page from any document acagpu writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

import click

from aca_gpu.cli.options import output_options
from aca_gpu.errors import EXIT_GPU_CHECK
from aca_gpu.output import Output
from aca_gpu.workflow.report import html as report_html
from aca_gpu.workflow.report import summary as report_summary
from aca_gpu.workflow.tester import report as report_flow


class _ReportGroup(click.Group):
    """`acagpu report RUN.json ...` is `acagpu report render RUN.json ...`: a file is no subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["render", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_ReportGroup)
def report() -> None:
    """Draw a document as a page, or fold validations into a matrix.

    `acagpu report RUN.json --html FILE` draws any document acagpu writes; `report merge` folds
    validation reports into one compatibility matrix."""


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


@report.command()
@click.argument("document", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write one self-contained HTML page here (inline CSS and SVG; it fetches nothing).",
)
@click.option(
    "--markdown",
    "markdown_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the short Markdown verdict table here (the job summary has it under --github).",
)
@click.option(
    "--link", help="A URL of the HTML page for the job summary to link (e.g. the uploaded artifact)."
)
@output_options
def render(
    document: Path, html_out: Path | None, markdown_out: Path | None, link: str | None, output: Output
) -> None:
    """Draw DOCUMENT, any `-o json` document acagpu wrote: a run's phases as a timeline, a fan-out's
    shards as a Gantt chart with its cumulative cost, a `report merge` matrix as a coloured table.
    Also `acagpu report DOCUMENT --html FILE`."""
    doc = report_summary.read_document(document)
    summary = report_summary.markdown(doc, link)
    page = None
    if html_out is not None:
        page = report_html.render(doc, document.name)
        html_out.write_text(page, encoding="utf-8")
    if markdown_out is not None:
        markdown_out.write_text(summary, encoding="utf-8")
    output.summary(summary)
    result: dict[str, Any] = {
        "schema": 1,
        "kind": "report",
        "source": str(document),
        "drawn_as": report_html.kind_of(doc),
        "html": None
        if html_out is None
        else {"file": str(html_out), "bytes": len(page.encode()) if page else 0},
        "markdown": None if markdown_out is None else str(markdown_out),
    }

    def human(stream: TextIO) -> None:
        if html_out is not None:
            print(f"wrote {html_out} ({result['drawn_as']}, {result['html']['bytes']:,} bytes)", file=stream)
        if markdown_out is not None:
            print(f"wrote {markdown_out}", file=stream)
        if html_out is None and markdown_out is None:
            print(summary, file=stream, end="")

    output.emit(result, human)
