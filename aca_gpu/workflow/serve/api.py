"""The Python API: `acagpu.serve(...)`, a served app that is deleted when the block ends.

    import acagpu
    with acagpu.serve("ghcr.io/me/model:1", env="lab", port=8000, health="/health") as app:
        print(app.url)                  # the app answered its first request
        report = app.measure(3, requests=50)
        print(report["phase_percentiles"]["end to end"])

It builds the same `ServeRequest` and `ServeSpec` as `acagpu serve` (bad input raises `BadInput`
before anything exists) and calls the same `serve`; a deploy that fails raises the error after
its own teardown. On leaving the block, even by an exception, the app is scaled to zero and its
run deleted (billing first), as `acagpu down --run-id` does.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from aca_gpu.models import Cloud
from aca_gpu.output import Output
from aca_gpu.workflow.base.api import container_fields
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.serve.deploy import ServeOutcome, answer_once, measure_served
from aca_gpu.workflow.serve.http import Answer
from aca_gpu.workflow.serve.plan import ServeSpec


@dataclass
class ServedApp:
    """A served app while the `with` block runs."""

    outcome: ServeOutcome
    cloud: Cloud
    waiter: Waiter
    verify: str | bool

    @property
    def url(self) -> str:
        assert self.outcome.url is not None
        return self.outcome.url

    @property
    def run_id(self) -> str:
        return self.outcome.spec.run_id

    @property
    def first_answer(self) -> dict[str, Any] | None:
        return self.outcome.first_answer

    def get(self, path: str = "/") -> Answer:
        """One GET at `path`, timed on this machine's clock."""
        return answer_once(self.url + path, self.verify)

    def measure(self, cycles: int, *, requests: int = 0, concurrency: int = 1) -> dict[str, Any]:
        """`serve --measure`: the measurement document (cycles, phase percentiles, warm, remedies)."""
        spec = replace(self.outcome.spec, measure=cycles, requests=requests, request_concurrency=concurrency)
        sink = io.StringIO()
        done = measure_served(
            self.cloud, spec, Output("json", stdout=sink, stderr=sink), self.waiter, verify=self.verify
        )
        if done.error is not None:
            raise done.error
        assert done.measurement is not None
        return done.measurement


@contextmanager
def serve(
    image: str,
    command: Sequence[str] = (),
    *,
    env: str | None = None,
    port: int = 8000,
    health: str = "/",
    min_replicas: int = 0,
    max_replicas: int = 1,
    concurrency: int = 10,
    cooldown: int = 300,
    load_timeout: str | None = None,
    gpu: str | None = None,
    location: str | None = None,
    env_vars: dict[str, str] | None = None,
    secret_env: Sequence[str] = (),
    mounts: Sequence[str] = (),
    run_id: str | None = None,
    ttl: str | None = None,
    wait_for_capacity: str | None = None,
    max_cost: float | None = None,
) -> Iterator[ServedApp]:
    """Serve IMAGE (and COMMAND) until the block ends (module doc)."""
    from aca_gpu.config import load_settings
    from aca_gpu.workflow.base.context import open_cloud, resolve_owner
    from aca_gpu.workflow.engine.teardown import teardown_group
    from aca_gpu.workflow.serve.deploy import serve as serve_app
    from aca_gpu.workflow.serve.plan import ServeRequest, make_serve_spec
    from aca_gpu.workflow.spend import ledger

    settings = load_settings()
    request = ServeRequest(
        **container_fields(image, command, env=env, env_vars=env_vars, secret_env=secret_env, mounts=mounts),
        gpu=gpu,
        location=location,
        run_id=run_id,
        ttl=ttl,
        port=port,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        concurrency=concurrency,
        cooldown=cooldown,
        health=health,
        load_timeout=load_timeout,
        wait_for_capacity=wait_for_capacity,
        max_cost=max_cost,
    )
    spec: ServeSpec = make_serve_spec(settings, request, owner=resolve_owner(settings))
    cloud = open_cloud(settings)
    waiter = Waiter(interval=settings.polling_interval)
    sink = io.StringIO()
    output = Output("json", stdout=sink, stderr=sink, command="serve")
    verify: str | bool = settings.ca_bundle or True
    outcome = serve_app(cloud, spec, output, waiter, verify=verify)
    if outcome.error is not None:
        raise outcome.error
    try:
        yield ServedApp(outcome, cloud, waiter, verify)
    finally:
        rg = outcome.resource_group or outcome.spec.run.plan.names.resource_group
        ledger.record_served_group(cloud, rg)  # its spend for `acagpu cost`
        teardown_group(cloud, rg, wait_gone=False)  # the app scaled to zero first, then deleted
