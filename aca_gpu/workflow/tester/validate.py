"""`acagpu validate`: does this CUDA image work on this ACA GPU profile? For CI, one or many pairs.

Before deploying, each pair gets a predicted verdict from the image's CUDA version (tag, else the
registry's image config) against the last host driver seen for the profile; then the engine runs
every pair in one shared environment (probe ∥ tester) and tears it all down, as for `up`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aca_gpu.errors import AcaGpuError
from aca_gpu.gpu import cuda_compat
from aca_gpu.gpu.image_ref import ImageRef
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.core import Prediction, run_plan
from aca_gpu.workflow.engine.outcome import RunOutcome
from aca_gpu.workflow.engine.plan import Pair, Plan, ValidateRequest, make_validate_plan
from aca_gpu.workflow.env.warm_runtime import runtime_for
from aca_gpu.workflow.preflight import drivers
from aca_gpu.workflow.spend import ledger

ImageInspector = Callable[[ImageRef], dict[str, Any]]
make_plan = make_validate_plan
__all__ = ["ValidateRequest", "make_plan", "predict", "registry_inspector", "validate"]


def predict(pair: Pair, location: str, driver: str | None, info: dict[str, Any] | None) -> dict[str, Any]:
    """The verdict before deploying: the image's CUDA (tag, else registry config) vs the last driver."""
    source = "--driver"
    if driver is None:
        driver, source = drivers.known_driver(pair.profile.type, location)
    require = (info or {}).get("require_cuda")
    subject: ImageRef | str | None = pair.ref
    if pair.ref.cuda_version is None and (info or {}).get("cuda_version"):
        subject = str((info or {})["cuda_version"])
    doc: dict[str, Any] = cuda_compat.verdict(subject, driver, require=require).as_dict()
    doc["driver_source"] = source
    return doc


def predictions(plan: Plan, progress: Progress, inspector: ImageInspector | None) -> dict[int, Prediction]:
    """Every pair's predicted verdict and image digest (registry reads are best effort)."""
    infos: dict[str, dict[str, Any]] = {}
    unread: list[str] = []
    if inspector is not None:
        # a registry that answers slowly holds each read up to its timeout (30 s): a step says so
        with progress.step("image registry") as step:
            for pair in plan.pairs:
                if pair.image in infos:
                    continue
                infos[pair.image] = {}
                step.update(pair.image)
                try:
                    infos[pair.image] = inspector(pair.ref)
                except AcaGpuError as exc:
                    unread.append(f"could not read {pair.image} from its registry: {exc.message}")
            step.update(f"{len(infos) - len(unread)} of {len(infos)} image(s) read")
    for message in unread:
        progress.warn(message)
    result: dict[int, Prediction] = {}
    for pair in plan.pairs:
        info = infos.get(pair.image, {})
        result[pair.index] = (predict(pair, plan.location, plan.driver, info), info.get("digest"))
    # the one pass/fail rule (CompatVerdict.ok): a pair the runtime would refuse fails as well
    risky = sum(
        1
        for doc, _ in result.values()
        if doc and (doc.get("verdict") == "incompatible" or doc.get("require_check") == "fail")
    )
    progress.note(
        f"{len(plan.pairs)} pair(s), {risky} predicted to fail (incompatible, or refused by the runtime)"
    )
    return result


def validate(
    cloud: Cloud,
    plan: Plan,
    progress: Progress,
    waiter: Waiter,
    inspector: ImageInspector | None = None,
) -> RunOutcome:
    plan, runtime = runtime_for(cloud, plan, waiter)  # cold, or borrowed with --env
    guesses = staged_digests(cloud, plan, predictions(plan, progress, inspector))
    outcome = run_plan(plan, runtime, progress, waiter, guesses)
    ledger.record(cloud, outcome)
    for pair in outcome.pairs:
        progress.note(f"{pair.status}: {pair.pair.label()}: {pair.reason}")
    return outcome


def staged_digests(cloud: Cloud, plan: Plan, guesses: dict[int, Prediction]) -> dict[int, Prediction]:
    """In a warm environment, a pair whose image is staged runs that copy: its digest, as recorded
    when it was staged, stands where the registry was not read (`--no-inspect`, or unreachable)."""
    if plan.env is None:
        return guesses
    from aca_gpu.workflow.env.staging.catalogue import key_of
    from aca_gpu.workflow.env.staging.stage import staged_in

    found = staged_in(cloud, envs_group(plan.env), plan.env)
    if found is None:
        return guesses
    staged = found[1]
    out = dict(guesses)
    for pair in plan.pairs:
        doc, digest = out.get(pair.index, (None, None))
        copy = staged.get(key_of(pair.image))
        if digest is None and copy is not None and copy.digest:
            out[pair.index] = (doc, copy.digest)
    return out


def envs_group(env: str) -> str:
    from aca_gpu.naming import EnvNames

    return EnvNames(env).resource_group


def registry_inspector(ref: ImageRef) -> dict[str, Any]:
    """Digest and CUDA env of an image from its registry (Docker Hub, nvcr.io, ACR, any OCI registry)."""
    from aca_gpu.registry.images import inspect_image
    from aca_gpu.workflow.preflight.tags import TagsQuery, default_source

    query = TagsQuery(repository=ref.repository)
    info = inspect_image(default_source(ref, query), ref.repository, ref.digest or ref.tag or "latest")
    return {"digest": info.digest, "cuda_version": info.cuda_version, "require_cuda": info.require_cuda}
