"""`acagpu up` and `validate` against the emulator: time to verdict, to prompt and to gone, GPU-seconds.

With realistic ACA durations scaled down (`--time-scale`), this measures:
  0. For `up` (one T4 pair) and a 2 x 2 `validate` (two images x T4, A100): the engine's time to
     verdict (every pair judged), time to prompt (the command returns: nothing bills any more) and
     time to gone (the group's 404, measured by a second run with --wait), and GPU-seconds billed.
  1. `up`'s wall time against the critical path of provider latencies (the emulator's time model:
     env create, then max(probe start + nvidia-smi, tester start + tester run), then the
     resource-group delete). Target ratio <= 1.05: orchestration adds almost nothing.
  2. A strictly sequential flow like the seed tutorial (explorer, then tester, each awaited, then
     delete), run against the same emulator through the same Cloud calls.
  3. Billed GPU-seconds (emulated): `up` vs the seed flow left running for its tester's 4-hour
     sleep with the explorer still up, as the seed leaves it.

  4. With `--warm`, at the newer Azure durations (late-2026 measurements by others: a GPU profile ~490 s
     with the environment, pulls by image size and registry distance) and the emulator's default pull
     model (no image cache across job executions): cold `up` vs `up --env` (images from their public
     registries) vs `up --env` again (still pulled in full), and a 4-tag x 1 GPU `validate`, cold vs
     warm. The warm environment is made before the clock starts.
  5. With `--staged`, the same model: cold `up`; `up --env` pulling from Docker Hub; `up --env`
     after `acagpu image stage` of its probe and tester images (a same-region registry); and, in an
     emulator with `--pulls streaming=on` (UNCONFIRMED on ACA), `up --env` of images staged in a
     Premium registry whose streaming artifacts are converted (`--stream`). Staging is done before the clock.

Usage: python benchmarks/orchestration.py [--time-scale 0.02] [--poll 0.02] [--runs 3] [--warm | --staged]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from aca_gpu.config import load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.emulator.timing import DURATIONS, LINGER_FLOOR_S, image_pull_seconds
from aca_gpu.models import AppSpec, Cloud, EnvSpec, JobSpec
from aca_gpu.output import NullProgress
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.base.context import Waiter, open_cloud
from aca_gpu.workflow.engine.plan import (
    GPU_PROFILE_NAME,
    Plan,
    UpRequest,
    ValidateRequest,
    make_plan,
    make_validate_plan,
)
from aca_gpu.workflow.engine.probe import probe_smi, wait_started
from aca_gpu.workflow.engine.teardown import teardown_group
from aca_gpu.workflow.engine.tester_run import ensure_job, follow_result, start_execution
from aca_gpu.workflow.tester.up import up
from aca_gpu.workflow.tester.validate import validate

SEED_TESTER_SLEEP_S = 4 * 3600  # the seed's tester sleeps 4 hours after printing its result


def critical_path(plan: Plan, tester_elapsed: float) -> float:
    """Emulated seconds along the longest chain of provider work `up --wait` must wait for."""
    start = DURATIONS["assign_replica"] + DURATIONS["container_create"]
    explorer = max(DURATIONS["app_provision"], start + image_pull_seconds(plan.pairs[0].image))
    tester = DURATIONS["job_provision"] + start + image_pull_seconds(plan.tester_image) + tester_elapsed
    teardown = DURATIONS["env_delete"] + DURATIONS["rg_delete_extra"]
    return DURATIONS["env_create"] + max(explorer, tester) + teardown


def sequential(cloud: Cloud, plan: Plan, waiter: Waiter) -> dict[str, Any]:
    """The seed's order: everything awaited one after another; returns timings and billing moments."""
    rg, names, pair = plan.names.resource_group, plan.names, plan.pairs[0]
    t0 = time.monotonic()
    cloud.create_resource_group(rg, plan.location, plan.tags)
    env = cloud.create_environment(
        EnvSpec(rg, names.environment, plan.location, plan.tags, GPU_PROFILE_NAME, pair.profile.type)
    )
    container = checks.explorer_container(pair.image, pair.profile, plan.max_minutes)
    cloud.create_app(
        AppSpec(rg, names.explorer, plan.location, env.id, GPU_PROFILE_NAME, container, plan.tags)
    )
    wait_started(cloud, rg, names.explorer, waiter, timeout=600)
    probe_smi(cloud, rg, names.explorer, waiter)
    tester = checks.tester_container(plan.tester_image, pair.profile)
    ensure_job(cloud, JobSpec(rg, names.tester, plan.location, env.id, GPU_PROFILE_NAME, tester, plan.tags))
    run = start_execution(cloud, rg, names.tester, resume=False)
    result = follow_result(cloud, rg, names.tester, run, waiter, timeout=600)
    t_result = time.monotonic() - t0
    teardown_group(cloud, rg, wait_gone=True, poll=waiter.interval)
    return {"wall": time.monotonic() - t0, "to_result": t_result, "status": result.status}


def engine_timings(args: argparse.Namespace) -> None:
    """Time to verdict / prompt / gone and GPU-seconds for `up` and a 2 x 2 `validate`."""
    images = ("nvidia/cuda:12.1.1-runtime-ubuntu22.04", "nvidia/cuda:12.2.2-base-ubuntu22.04")
    with EmulatorServer(time_scale=args.time_scale, registered=True) as emu:
        env = emu.client_env() | {"ACAGPU_POLLING_INTERVAL": str(args.poll)}
        settings = load_settings(env=env, file={})
        cloud = open_cloud(settings)
        for label in ("up", "validate 2x2"):
            rows = []
            for i in range(args.runs):
                figures: dict[str, float] = {}
                for wait in (False, True):
                    emu.reset()
                    rid = f"t{i}{int(wait)}{label[0]}"
                    if label == "up":
                        plan = make_plan(settings, UpRequest(run_id=rid, gpu="t4", wait=wait), owner="bench")
                        outcome = up(cloud, plan, NullProgress(), Waiter(interval=args.poll))
                    else:
                        request = ValidateRequest(images=images, gpus=("t4", "a100"), run_id=rid, wait=wait)
                        plan = make_validate_plan(settings, request, owner="bench")
                        outcome = validate(cloud, plan, NullProgress(), Waiter(interval=args.poll))
                    assert outcome.exit_code == 0, outcome.document()["error"]
                    if wait:
                        figures["gone"] = outcome.timings["time_to_gone_s"] or 0.0
                    else:
                        figures["verdict"] = outcome.timings["time_to_verdict_s"] or 0.0
                        figures["prompt"] = outcome.timings["time_to_prompt_s"] or 0.0
                        figures["gpu_s"] = emu.billing()["total_gpu_seconds"]
                rows.append(figures)
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            scale = args.time_scale
            print(
                f"{label:<13} verdict {med['verdict']:6.2f}s ({med['verdict'] / scale:5.0f} emu s)  "
                f"prompt {med['prompt']:6.2f}s ({med['prompt'] / scale:5.0f})  "
                f"gone {med['gone']:6.2f}s ({med['gone'] / scale:5.0f})  "
                f"GPU-s billed {med['gpu_s']:7.1f}  prompt/gone {med['prompt'] / med['gone']:.2f}"
            )


WARM_TAGS = (
    "nvidia/cuda:11.8.0-runtime-ubuntu22.04",
    "nvidia/cuda:12.1.1-runtime-ubuntu22.04",
    "nvidia/cuda:12.2.2-base-ubuntu22.04",
    "nvidia/cuda:12.4.1-base-ubuntu22.04",
)


def _flow(
    emu: EmulatorServer, cloud: Cloud, settings: Any, poll: float, label: str, rid: str
) -> dict[str, Any]:
    """One timed flow; the emulator's billing is read as a difference, so earlier flows do not count."""
    known = {r["replica"] for r in emu.billing()["replicas"]}
    env = "bench" if "--env" in label else None
    if label.startswith("validate"):
        request = ValidateRequest(images=WARM_TAGS, gpus=("t4",), run_id=rid, env=env)
        vplan = make_validate_plan(settings, request, owner="bench")
        outcome = validate(cloud, vplan, NullProgress(), Waiter(interval=poll))
    else:
        uplan = make_plan(settings, UpRequest(run_id=rid, gpu="t4", env=env), owner="bench")
        outcome = up(cloud, uplan, NullProgress(), Waiter(interval=poll))
    assert outcome.exit_code == 0, outcome.document()["error"]
    billing = emu.billing()
    scale = billing["time_scale"]
    fresh = [r for r in billing["replicas"] if r["replica"] not in known]
    billed = sum(r["gpu_seconds"] for r in fresh)
    probes = sum(r["gpu_seconds"] for r in fresh if r["resource"].startswith("cuda-probe-"))
    tester = [p.tester.result.elapsed_s or 0.0 for p in outcome.pairs if p.tester and p.tester.result]
    return {
        "verdict": (outcome.timings["time_to_verdict_s"] or 0.0) / scale,
        "prompt": (outcome.timings["time_to_prompt_s"] or 0.0) / scale,
        "gpu_s": billed,
        "pairs": len(outcome.pairs),
        "probe_s": probes / len(outcome.pairs),
        "tester_s": statistics.mean(tester) if tester else 0.0,
    }


def warm_timings(args: argparse.Namespace) -> None:
    """Cold vs warm at the aca-2026 durations (emulated seconds; see the module doc, item 4)."""
    from aca_gpu.workflow.env import find, lifecycle

    rows: dict[str, list[dict[str, Any]]] = {}
    for i in range(args.runs):
        with EmulatorServer(time_scale=args.time_scale, registered=True, durations="aca-2026") as emu:
            settings = load_settings(
                env=emu.client_env() | {"ACAGPU_POLLING_INTERVAL": str(args.poll)}, file={}
            )
            cloud = open_cloud(settings)
            rows.setdefault("up (cold)", []).append(_flow(emu, cloud, settings, args.poll, "up", f"c{i}"))
            rows.setdefault("validate 4x1 (cold)", []).append(
                _flow(emu, cloud, settings, args.poll, "validate", f"v{i}")
            )
            plan = lifecycle.make_env_plan(
                settings, "bench", location=None, gpus="t4", idle_ttl="1d", owner="bench"
            )
            lifecycle.create_env(cloud, plan, NullProgress())
            for label, rid in (
                ("up --env (first pull)", f"w{i}"),
                ("up --env (same images)", f"x{i}"),
                ("validate 4x1 --env", f"y{i}"),
            ):
                rows.setdefault(label, []).append(_flow(emu, cloud, settings, args.poll, label, rid))
            assert find.running_replicas(cloud, "rg-acagpu-env-bench", "bench") == 0
            assert not find.runs_inside(cloud, "rg-acagpu-env-bench", "bench")
    med = {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for label, rs in rows.items()}
    print(f"\naca-2026 durations, time scale {args.time_scale}, poll {args.poll}s, median of {args.runs}")
    head = ("to verdict", "to prompt", "GPU-s", "GPU-s/pair", "tester run")
    print(f"{'flow':<24} {head[0]:>11} {head[1]:>10} {head[2]:>8} {head[3]:>11} {head[4]:>11}")
    for label, m in med.items():
        print(
            f"{label:<24} {m['verdict']:9.0f} s {m['prompt']:8.0f} s {m['gpu_s']:8.1f} "
            f"{m['gpu_s'] / m['pairs']:11.1f} {m['tester_s']:9.1f} s"
        )
    cold = med["up (cold)"]["verdict"]
    for label in ("up --env (first pull)", "up --env (same images)"):
        print(f"{label} / cold up, time to verdict: {med[label]['verdict'] / cold:.2f}  (goal <= 0.35)")
    v_cold, v_warm = med["validate 4x1 (cold)"], med["validate 4x1 --env"]
    print(f"validate 4x1 warm / cold, time to verdict: {v_warm['verdict'] / v_cold['verdict']:.2f}")
    per_pair = v_warm["gpu_s"] / v_warm["pairs"]
    budget = v_warm["tester_s"] + v_warm["probe_s"] + 30
    print(
        f"warm validation GPU-s per pair {per_pair:.1f} vs tester run + probe + 30 s = "
        f"{v_warm['tester_s']:.1f} + {v_warm['probe_s']:.1f} + 30 = {budget:.1f} (goal: at most that)"
    )


def staged_timings(args: argparse.Namespace) -> None:
    """Time to verdict of a cold `up` and of `up --env` with public, staged and streamed images."""
    from aca_gpu.config import DEFAULT_IMAGE
    from aca_gpu.tester import DEFAULT_TESTER_IMAGE
    from aca_gpu.workflow.env import lifecycle
    from aca_gpu.workflow.env.staging.stage import stage_images

    rows: dict[str, list[dict[str, Any]]] = {}
    for i in range(args.runs):
        for model in ("", "streaming=on"):
            with EmulatorServer(
                time_scale=args.time_scale, registered=True, durations="aca-2026", pulls=model
            ) as emu:
                settings = load_settings(
                    env=emu.client_env() | {"ACAGPU_POLLING_INTERVAL": str(args.poll)}, file={}
                )
                cloud = open_cloud(settings)
                if not model:
                    rows.setdefault("up (cold)", []).append(
                        _flow(emu, cloud, settings, args.poll, "up", f"c{i}")
                    )
                plan = lifecycle.make_env_plan(
                    settings, "bench", location=None, gpus="t4", idle_ttl="1d", owner="bench"
                )
                lifecycle.create_env(cloud, plan, NullProgress())
                if not model:
                    label = "up --env (public registries)"
                    rows.setdefault(label, []).append(_flow(emu, cloud, settings, args.poll, label, f"p{i}"))
                images = (DEFAULT_IMAGE, DEFAULT_TESTER_IMAGE)
                sku = "Premium" if model else "Standard"
                # with streaming, the stage asks ACR's conversion and waits for it (docs/staging.md)
                stage_images(
                    cloud,
                    "bench",
                    images,
                    NullProgress(),
                    inspect=False,
                    sku=sku,
                    stream=bool(model),
                    approve=lambda question: None,  # a benchmark of its own emulator: nothing to ask
                )
                label = "up --env (staged, streamed)" if model else "up --env (staged)"
                rows.setdefault(label, []).append(_flow(emu, cloud, settings, args.poll, label, f"s{i}"))
    med = {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for label, rs in rows.items()}
    print(
        f"\naca-2026 durations, no image cache, time scale {args.time_scale}, poll {args.poll}s, "
        f"median of {args.runs}"
    )
    print(f"{'flow':<30} {'to verdict':>11} {'to prompt':>10} {'GPU-s':>8} {'tester run':>11}")
    for label, m in med.items():
        print(
            f"{label:<30} {m['verdict']:9.0f} s {m['prompt']:8.0f} s {m['gpu_s']:8.1f} {m['tester_s']:9.1f} s"
        )
    cold = med["up (cold)"]["verdict"]
    for label in list(med)[1:]:
        print(f"{label} / cold up, time to verdict: {med[label]['verdict'] / cold:.2f}")
    staged = med["up --env (staged)"]["verdict"]
    print(f"staged warm up, time to verdict: {staged:.0f} emulated s (goal <= 60)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.02)
    parser.add_argument("--poll", type=float, default=0.02, help="client polling interval (wall seconds)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engine-only", action="store_true", help="only the verdict/prompt/gone figures")
    parser.add_argument("--warm", action="store_true", help="only cold vs warm at the aca-2026 durations")
    parser.add_argument(
        "--staged",
        action="store_true",
        help="only cold vs public vs staged vs streamed at the aca-2026 durations",
    )
    args = parser.parse_args()
    if args.warm:
        warm_timings(args)
        return
    if args.staged:
        staged_timings(args)
        return
    engine_timings(args)
    if args.engine_only:
        return
    scale = args.time_scale
    rows = []
    with EmulatorServer(time_scale=scale, registered=True) as emu:
        env = emu.client_env() | {"ACAGPU_POLLING_INTERVAL": str(args.poll)}
        settings = load_settings(env=env, file={})
        cloud = open_cloud(settings)
        for i in range(args.runs):
            emu.reset()
            plan = make_plan(settings, UpRequest(run_id=f"bench{i}", gpu="t4", wait=True), owner="bench")
            started = time.monotonic()
            result = up(cloud, plan, NullProgress(), Waiter(interval=args.poll))
            wall = time.monotonic() - started
            assert result.exit_code == 0, result.document()["error"]
            tester_elapsed = float(result.document()["tester"]["result"]["elapsed_s"])
            cp = critical_path(plan, tester_elapsed) * scale
            up_gpu_s = emu.billing()["total_gpu_seconds"]

            emu.reset()
            seq_plan = make_plan(settings, UpRequest(run_id=f"seq{i}", gpu="t4"), owner="bench")
            seq = sequential(cloud, seq_plan, Waiter(interval=args.poll))
            billing = emu.billing()
            # Left running as the seed leaves it: the explorer never stops and the tester replica sleeps
            # 4 h after its result; both bill the whole time (serverless GPU has no idle rate).
            to_result = seq["to_result"] / scale
            seed_gpu_s = billing["total_gpu_seconds"]  # measured up to the delete
            seed_left = 2 * SEED_TESTER_SLEEP_S + to_result
            rows.append(
                {
                    "up_wall": wall,
                    "critical_path": cp,
                    "seq_wall": seq["wall"],
                    "up_gpu_s": up_gpu_s,
                    "seq_gpu_s": seed_gpu_s,
                    "seed_left_gpu_s": seed_left,
                }
            )
            print(
                f"run {i}: up {wall:6.2f}s  critical path {cp:6.2f}s  ratio {wall / cp:.3f}  "
                f"sequential {seq['wall']:6.2f}s  up GPU-s {up_gpu_s:8.1f}  seed left {seed_left:8.0f}"
            )

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    up_wall, cp = med("up_wall"), med("critical_path")
    print(
        f"\ntime scale {scale} (1 wall s = {1 / scale:.0f} emulated s), poll {args.poll}s, runs {args.runs}"
    )
    print(f"linger floor {LINGER_FLOOR_S}s wall per finished job replica (emulator artefact, both flows)")
    print(f"up wall (median)                 {up_wall:7.2f} s  = {up_wall / scale:7.0f} emulated s")
    print(f"critical path                    {cp:7.2f} s  = {cp / scale:7.0f} emulated s")
    print(f"up / critical path               {med('up_wall') / med('critical_path'):7.3f}  (target <= 1.05)")
    print(f"sequential seed-style flow       {med('seq_wall'):7.2f} s")
    print(f"sequential / up                  {med('seq_wall') / med('up_wall'):7.3f}")
    print(f"GPU-seconds billed, up           {med('up_gpu_s'):9.1f}")
    print(f"GPU-seconds billed, sequential   {med('seq_gpu_s'):9.1f}  (deleted right after the result)")
    print(f"GPU-seconds, seed left running   {med('seed_left_gpu_s'):9.0f}  (explorer + 4 h tester sleep)")
    print(f"seed left running / up          {med('seed_left_gpu_s') / med('up_gpu_s'):8.1f}x")


if __name__ == "__main__":
    main()
