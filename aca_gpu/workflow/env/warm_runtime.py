"""A run in a warm environment (`--env NAME`): the place exists already; the run brings only jobs.

The engine asks for a place as always; here it is borrowed. The run's pieces live in a group of its
own (`rg-acagpu-<run>`, the run's usual tags plus `acagpu:env`): two jobs per pair, the nvidia-smi
probe and the tester, whose environmentId names the warm environment in its group (ARM allows a
job in another group than its environment). Each execution starts with a per-execution template.
Teardown is the usual one on the run's group (billing first, then the group), so `down`, `status`,
`reap` and the guard treat a warm run like any other, and the environment, its group and every
other run stay untouched. Every run renews the environment's expiry (one idle TTL from now).
"""

from __future__ import annotations

from dataclasses import replace

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, PreflightRefused
from aca_gpu.models import Cloud, EnvInfo, RegistryCred, ResourceGroupInfo
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.aca_runtime import AcaRuntime, Where
from aca_gpu.workflow.engine.outcome import TeardownResult
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.env.find import find_env, runs_inside
from aca_gpu.workflow.env.lifecycle import renew
from aca_gpu.workflow.env.staging.catalogue import Staged, key_of
from aca_gpu.workflow.env.staging.stage import staged_in

# ACA's name for the environment's system-assigned identity in a registries entry (UNCONFIRMED: the
# 2025-07-01 spec documents only 'system' and a user-assigned identity's resource id)
ENVIRONMENT_IDENTITY = "system-environment"


def run_tags(plan: Plan) -> dict[str, str]:
    """The run's tags plus the environment it borrowed (how `env list` and reap find runs inside)."""
    return {**plan.tags, naming.TAG_ENV: plan.env or ""}


def moved_to(plan: Plan, group: ResourceGroupInfo) -> Plan:
    """A warm run goes where its environment is: the environment's region replaces the configured
    location (and any region order), in the plan shown before the run as in the run itself."""
    return replace(plan, location=group.location, regions=(group.location,))


def placed_plan(cloud: Cloud, plan: Plan) -> Plan:
    """The plan as it will run, for `--dry-run` and the question before a run: with `--env` (or
    the `env` setting) the environment is read (exit 2 when it does not exist), nothing is made."""
    if plan.env is None:
        return plan
    group, _ = find_env(cloud, plan.env)
    return moved_to(plan, group)


def runtime_for(cloud: Cloud, plan: Plan, waiter: Waiter) -> tuple[Plan, AcaRuntime]:
    """The place a plan runs in: cold (a run-scoped group + environment) or borrowed (`--env`),
    with the plan moved to the environment's region."""
    if plan.env is None:
        return plan, AcaRuntime(cloud, waiter)
    group, env = find_env(cloud, plan.env)
    return moved_to(plan, group), WarmRuntime(cloud, waiter, group, env)


class WarmRuntime(AcaRuntime):
    """The engine's Runtime inside an existing `acagpu env` (see the module doc)."""

    name = "aca"
    borrowed = True

    def __init__(self, cloud: Cloud, waiter: Waiter, group: ResourceGroupInfo, env: EnvInfo) -> None:
        super().__init__(cloud, waiter)
        self.group, self.place = group, env
        self.env = env
        self.rg = ""  # the run's own group, known once the plan of the attempt is
        self._touched = False
        self._staged: tuple[str, dict[str, Staged]] | None = None  # (login server, image -> copy)

    def preflight(self, plan: Plan, progress: Progress) -> None:
        """The environment must offer every pair's GPU; quota counts what other runs hold now."""
        with progress.step(f"environment {plan.env}") as step:
            missing = sorted(
                {p.profile.type for p in plan.pairs if self.place.profile_named_for(p.profile.type) is None}
            )
            if missing:
                step.status = "fail"
                have = ", ".join(t for _, t in self.place.workload_profiles) or "none"
                raise PreflightRefused(
                    f"environment {plan.env} has no {', '.join(missing)} profile (it has: {have})",
                    code="ProfileNotInEnvironment",
                    hint=f"acagpu env create {plan.env} --gpu ... adds a GPU profile (minutes on Azure)",
                )
            self.rg = plan.names.resource_group
            inside = runs_inside(self.cloud, self.group.name, plan.env or "")
            others = sorted(r for r in inside if r != plan.run_id)
            step.update(f"{self.place.name} in {self.group.location}; other runs inside: {len(others)}")
        self._staged = staged_in(self.cloud, self.group.name, plan.env or "")
        if self._staged is not None:
            server, staged = self._staged
            wanted = {p.image for p in plan.pairs} | {plan.tester_image}
            here = sorted(i for i in wanted if key_of(i) in staged)
            with progress.step("staged images") as step:
                step.update(
                    f"{len(here)} of {len(wanted)} from {server}" + (f": {', '.join(here)}" if here else "")
                )
        with progress.step("GPU quota") as step:
            found = self.quota_checks(plan.location, [pair.profile for pair in plan.pairs])
            step.update("; ".join(c.summary() for c in found))
            for check in found:
                if check.usage is not None and not check.ok:
                    step.status = "fail"
                    raise check.error()

    def create_place(self, plan: Plan, progress: Progress, resumed: list[str]) -> None:
        """The environment is renewed (its idle TTL restarts now); the run's group is made (or found
        again: the same run id resumes). Nothing waits for an environment."""
        self._resumed = resumed
        self.rg = plan.names.resource_group
        with progress.step("warm environment") as step:
            renew(self.cloud, self.group)
            self._touched = True
            step.update(f"{self.place.name} in {self.group.name} (ready)")
        with progress.step("resource group") as step:
            group = self.cloud.get_resource_group(self.rg)
            if group is not None:
                tags = dict(group.tags)
                if not naming.is_managed(tags) or tags.get(naming.TAG_RUN_ID) != plan.run_id:
                    raise PreflightRefused(f"resource group {self.rg} exists and is not run {plan.run_id}'s")
                resumed.append("resource_group")
                step.update(f"{self.rg} (resumed)")
            else:
                self._sent_group = True  # from here on, a group with this run's tags is ours
                self.cloud.create_resource_group(self.rg, self.group.location, run_tags(plan))
                step.update(self.rg)
            self._sent_group = True

    def _where(self, plan: Plan, pair: Pair) -> Where:
        """The run's own group; the environment (and its events) are the borrowed one's."""
        profile = self.place.profile_named_for(pair.profile.type)
        assert profile is not None  # preflight refused an environment without the GPU
        return Where(
            self.rg or plan.names.resource_group,
            self.group.location,
            self.place.id,
            self.place.name,
            profile,
            run_tags(plan),
            self.group.name,
        )

    def _deployed(self, image: str) -> str:
        """The environment's staged copy, by tag, when the image was staged (docs/staging.md)."""
        copy = self._staged[1].get(key_of(image)) if self._staged is not None else None
        return copy.ref(self._staged[0]) if copy is not None and self._staged is not None else image

    def _registries(self, image: str) -> tuple[RegistryCred, ...]:
        """A staged copy is pulled with the environment's managed identity (AcrPull on its registry)."""
        if self._staged is not None and image.startswith(self._staged[0] + "/"):
            return (RegistryCred(self._staged[0], identity=ENVIRONMENT_IDENTITY),)
        return ()

    def keep_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        return self.remove_place(plan, progress)  # a run's jobs hold nothing worth keeping

    def remove_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        result = super().remove_place(plan, progress)  # the run's own group, billing first
        if result.clean and self._touched:
            try:  # the expiry counts from the end of the last use, not its start
                group = self.cloud.get_resource_group(self.group.name)
                if group is not None:
                    renew(self.cloud, group)
            except AcaGpuError:  # a renewal is best effort; the run is done
                pass
        return result
