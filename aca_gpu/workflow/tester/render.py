"""Human renderings of the workflow documents (the JSON documents are the source; these only read them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aca_gpu.output import Output, count_names
from aca_gpu.units import duration_text, gpu_seconds_text, usd_text
from aca_gpu.workflow.base.notify import post, run_message
from aca_gpu.workflow.engine.lifetime import quality_text
from aca_gpu.workflow.engine.phases import WALL_MARK, container_phases, phase_text

if TYPE_CHECKING:  # `reap` sends its message through here without loading the run's records
    from aca_gpu.workflow.engine.outcome import RunOutcome


def send(output: Output, doc: dict[str, Any], url: str, message: dict[str, Any] | None) -> None:
    """Post `message` (if any), record the delivery in `doc`, warn on stderr when it failed."""
    if message is None:
        return
    delivery = post(url, message)
    doc["notification"] = delivery.as_dict()
    if not delivery.ok:
        output.warn(f"could not notify {delivery.host}: {delivery.error or delivery.status}")


def finish(
    output: Output,
    outcome: RunOutcome,
    human: Callable[[dict[str, Any]], str],
    markdown: Callable[[dict[str, Any]], str] | None = None,
    *,
    notify: str | None = None,
) -> None:
    """Render a run once (JSON or text), its job summary, its one error line; exit with its code.

    With `notify`, the outcome is posted first (validate always, up when it failed) and the
    delivery lands in the document as `notification`."""
    doc = outcome.document()
    if notify and (doc.get("command") != "up" or outcome.exit_code):
        send(output, doc, notify, run_message({**doc, "exit_code": outcome.exit_code}))
    output.emit(doc, human(doc))
    for warning in doc.get("warnings") or []:  # a degraded GPU passes, but is said so on stderr
        output.warn(warning)
    if markdown is not None:
        output.summary(markdown(doc))
    if outcome.exit_code:  # emit printed the document's one error line
        raise SystemExit(outcome.exit_code)


def _fmt_seconds(value: float | None) -> str:
    """The one duration text (units.duration_text)."""
    return duration_text(value)


def _compat_line(compat: dict[str, Any] | None) -> str:
    if not compat:
        return "not checked (no driver version)"
    return f"{compat.get('verdict')} — {compat.get('reason', '')}"


def _cost_line(cost: dict[str, Any]) -> str:
    usd = cost.get("usd_estimate")
    money = f"≈ {usd_text(usd)}" if isinstance(usd, int | float) else "price unknown"
    gpu = gpu_seconds_text(float(cost.get("gpu_seconds") or 0))
    said = quality_text(cost)  # a figure faults spoiled says so, on the same line
    return f"{gpu}, {money} (estimate: {cost.get('basis', '')})" + (f"; {said}" if said else "")


def render_plan(doc: dict[str, Any], *, dry_run: bool = True) -> str:
    """The plan; titled a dry run only for `--dry-run` (above a confirmation it is about to happen)."""
    res, prof = doc["resources"], doc["profile"]
    title = "(dry run: nothing is created)" if dry_run else "(created once you confirm)"
    lines = [
        f"plan for run {doc['run_id']} {title}",
        f"  location       {doc['location']}",
        f"  profile        {prof['type']} ({prof['gpu']}, {prof['cpu']} vCPU, {prof['memory']})",
        f"  resource group {res['resource_group']}",
        f"  environment    {res['environment']}",
        (
            f"  probe job      {res['probe_job']}  image {doc['explorer']['image']}"
            + ("  (warm environment)" if "environment_group" in res else "")
            if "probe_job" in res
            else f"  explorer app   {res['explorer_app']}  image {doc['explorer']['image']}"
        ),
        f"  tester job     {res['tester_job']}  image {doc['tester']['image']}",
        f"  ttl            {_fmt_seconds(doc['ttl_seconds'])}   max minutes {doc['max_minutes']}",
        "  tags           " + ", ".join(f"{k}={v}" for k, v in doc["tags"].items()),
        f"  cost           {_cost_line(doc['cost'])}"
        + (f"; cap ${doc['max_cost_usd']:g} (--max-cost)" if doc.get("max_cost_usd") is not None else ""),
    ]
    lines += [f"  pair           {p['image']} on {p['gpu']} ({p['profile']})" for p in doc.get("pairs") or []]
    lines += [f"  warning        {w}" for w in doc.get("warnings") or []]
    return "\n".join(lines)


def render_up(doc: dict[str, Any]) -> str:
    """`up`, `test` and `local`: the single pair's explorer and tester, phases, cost, teardown."""
    exp, tester, res = doc["explorer"], doc["tester"], doc["resources"]
    gpus = count_names(
        [str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in exp.get("gpus") or []]
    )
    result = tester.get("result") or {}
    lines = [
        "",
        f"run {doc['run_id']}: {doc['status']}  ({doc['location']}, {doc['profile']['type']})",
    ]
    if doc["command"] != "test":
        lines += [
            f"  GPU            {gpus or '?'}",
            f"  driver / CUDA  {exp.get('driver_version') or '?'} / {exp.get('cuda_version') or '?'}",
        ]
        if exp.get("refused"):
            lines.append(f"  explorer       refused to start: {exp['refused']}")
        if exp.get("error"):
            lines.append(f"  nvidia-smi     error: {exp['error']}")
        lines += health_lines(exp.get("health"), "  GPU health     ")
        lines.append(f"  explorer image {exp['image']}: {_compat_line(exp.get('compat'))}")
        lines.append(f"  tester image   {tester['image']}: {_compat_line(tester.get('compat'))}")
    status = tester.get("status") or result.get("status") or "none"
    lines += [
        f"  tester result  {status}"
        + _tester_detail({**result, "reason": tester.get("reason") or result.get("reason")}),
        *(f"                 {line}" for line in tester.get("gpu_lines") or []),
        *_phases_row(doc),
        *(f"  {name:<15}{text}" for name, text in pair_phase_lines((doc.get("results") or [{}])[0])),
        f"  cost           {_cost_line(doc['cost'])}",
        f"  teardown       {doc['teardown'].get('status')}"
        + (" (verified gone)" if doc["teardown"].get("verified") else "")
        + _billing_words(doc["teardown"]),
    ]
    if doc["teardown"].get("status") in ("kept", "left", "incomplete", "failed"):
        lines.append(
            f"  remove with    {doc.get('delete') or 'acagpu down --run-id ' + doc['run_id']}"
            f"   (group {res['resource_group']})"
        )
    lines += attempt_lines(doc, "  regions        ")
    if doc.get("error"):
        lines.append(f"  error          {doc['error']['message']}")
    return "\n".join(lines)


def _billing_words(teardown: dict[str, Any]) -> str:
    """Whether anything of the run still bills, as the teardown found it: `billing stopped` only
    when it did; else what still runs, in the teardown's own words."""
    if teardown.get("verified"):
        return ""
    if teardown.get("billing_stopped"):
        return " (billing stopped)"
    return f" (may still bill: {teardown['message']})" if teardown.get("message") else ""


def _phases_row(doc: dict[str, Any]) -> list[str]:
    """The run's own phases on one line, on this client's clock; none when the run had none."""
    phases = run_phases(doc)
    if not phases:
        return []
    return [
        "  phases         " + ", ".join(f"{k} {_fmt_seconds(v)}" for k, v in phases.items()) + " " + WALL_MARK
    ]


def run_phases(doc: dict[str, Any]) -> dict[str, float]:
    """The run's own phases: a single pair's (which the document folds in) get lines of their own."""
    results = doc.get("results") or []
    own = set(results[0].get("phases") or {}) if len(results) == 1 else set()
    return {k: v for k, v in (doc.get("phases") or {}).items() if k not in own}


def pair_phase_lines(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(container, its phases) for one pair, the probe (nvidia-smi in the image under test) and the
    tester: scheduling, pull (size, MB/s), start and run, as far as the platform or client said."""
    found = ((name, phase_text(phases)) for name, phases in container_phases(row).items())
    return [(name, text) for name, text in found if text]


def health_lines(health: dict[str, Any] | None, label: str) -> list[str]:
    """The health verdict and every finding that is not merely informational, one per line."""
    if not health:
        return []
    pad = " " * len(label)
    lines = [f"{label}{health.get('summary')}"]
    for gpu in health.get("gpus") or []:
        for finding in gpu.get("findings") or []:
            if finding.get("severity") in ("failed", "degraded"):
                lines.append(f"{pad}gpu{gpu.get('index')} {finding['severity']}: {finding['message']}")
    return lines


def attempt_lines(doc: dict[str, Any], label: str) -> list[str]:
    """Every region tried, when the run failed over (one region says nothing new)."""
    attempts = doc.get("attempts") or []
    if len(attempts) < 2:
        return []
    pad = " " * len(label)
    lines = []
    several_gpus = len({a.get("gpu") for a in attempts}) > 1  # `--gpu a100,t4` fell back
    for index, a in enumerate(attempts):
        usd = (a.get("cost") or {}).get("usd_estimate")
        spent = f", ~{usd_text(usd)}" if isinstance(usd, (int, float)) else ""
        why = f": {a['reason'][:160]}" if a.get("reason") else ""
        lines.append(
            f"{label if index == 0 else pad}{a['region']}"
            + (f" {a.get('gpu')}" if several_gpus else "")
            + f" {a['status']}{why} ({a['seconds']:.0f}s{spent})"
        )
    return lines


def render_validate(doc: dict[str, Any]) -> str:
    from aca_gpu.workflow.tester import report

    lines = [report.render_text(report.Matrix(tuple(doc["results"])))] if doc["results"] else []
    for row in doc["results"]:
        gpu_lines = row.get("gpu_lines") or []
        timing = pair_phase_lines(row)
        if gpu_lines or timing:
            lines.append(f"{row['image']} on {row['gpu']}:")
            lines += [f"  {line}" for line in gpu_lines]
            lines += [f"  {name:<8} {text}" for name, text in timing]
    teardown = doc["teardown"]
    state = teardown.get("status")
    if teardown.get("verified"):
        state += ", verified gone"
    elif teardown.get("billing_stopped"):
        state += ", billing stopped"
    lines.append(f"teardown: {state}")
    lines += attempt_lines(doc, "regions: ")
    shown = ", ".join(f"{k} {_fmt_seconds(v)}" for k, v in run_phases(doc).items())
    lines.append(f"phases: {shown} {WALL_MARK}")
    return "\n".join(lines)


def render_up_markdown(doc: dict[str, Any]) -> str:
    """The job-summary form of `up`: one table a reviewer can read in the Actions UI."""
    exp, tester = doc["explorer"], doc["tester"]
    result = tester.get("result") or {}
    rows = [
        ("status", doc["status"]),
        ("profile", f"{doc['profile']['type']} ({doc['location']})"),
        ("driver / CUDA", f"{exp.get('driver_version') or '?'} / {exp.get('cuda_version') or '?'}"),
        ("explorer image", f"`{exp['image']}`: {_compat_line(exp.get('compat'))}"),
        ("tester image", f"`{tester['image']}`: {_compat_line(tester.get('compat'))}"),
        ("tester result", f"{result.get('status', 'none')}{_tester_detail(result)}"),
        *((f"{name} phases", text) for name, text in pair_phase_lines((doc.get("results") or [{}])[0])),
        ("cost", _cost_line(doc["cost"])),
        ("teardown", f"{doc['teardown'].get('status')} (verified: {doc['teardown'].get('verified')})"),
    ]
    if doc.get("error"):
        rows.append(("error", doc["error"]["message"]))
    lines = [f"## acagpu up — run {doc['run_id']}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {str(v).replace('|', '/')} |" for k, v in rows]
    return "\n".join(lines) + "\n"


def _tester_detail(result: dict[str, Any]) -> str:
    parts = [str(result["gpu_name"])] if result.get("gpu_name") else []
    rates = result.get("rates") or {}
    parts += [f"{name} {rate['tflops']:g} TFLOP/s" for name, rate in rates.items() if rate.get("tflops")]
    if result.get("speedup"):
        parts.append(f"{result['speedup']:g}x CPU")
    if result.get("simulated"):
        parts.append("simulated")
    if result.get("reason"):
        parts.append(str(result["reason"]))
    return f" — {', '.join(parts)}" if parts else ""


def render_status(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    if not runs:
        return "no acagpu runs found"
    header = (
        f"{'RUN':<8} {'GROUP':<22} {'LOCATION':<12} {'GPU':<10} {'AGE':>6} {'EXPIRES':>8} {'PHASE':<12} SPEND"
    )
    lines = [header]
    for run in runs:
        usd = run["cost"].get("usd_estimate")
        spend = f"≈{usd_text(usd)}" if isinstance(usd, int | float) else "?"
        expires = run.get("expires_in_seconds")
        exp_txt = "expired" if expires is not None and expires <= 0 else _fmt_seconds(expires)
        lines.append(
            f"{run['run_id']:<8} {run['resource_group']:<22} {run['location']:<12} "
            f"{run.get('gpu') or '?':<10} "
            f"{_fmt_seconds(run.get('age_seconds')):>6} {exp_txt:>8} {run['phase']:<12} {spend}"
        )
    dedicated = any(run["cost"].get("node_seconds") is not None for run in runs)
    lines.append(
        "spend: list-price estimate from replica lifetimes so far"
        + (
            "; dedicated profiles: node time since creation (the node bills replicas or not)"
            if dedicated
            else ""
        )
    )
    return "\n".join(lines)


def render_smi(doc: dict[str, Any]) -> str:
    lines = [doc.get("raw", "").rstrip()]
    lines.append(
        f"run {doc['run_id']}: driver {doc.get('driver_version') or '?'}, "
        f"CUDA {doc.get('cuda_version') or '?'}"
    )
    if doc.get("error"):
        lines.append(f"nvidia-smi error: {doc['error']}")
    if doc.get("compat"):
        lines.append(f"compat: {_compat_line(doc['compat'])}")
    return "\n".join(lines)
