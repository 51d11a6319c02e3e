"""Every spend figure prints through `units.usd_text` (docs/costs.md: cents from a cent up, four
decimals below): `env show` printed `$0.0412 so far` beside `status`'s `$0.04`."""

from __future__ import annotations

from aca_gpu.workflow.env import detail


def test_env_show_prints_spend_in_cents_from_a_cent_up_as_status_does() -> None:
    doc = {
        "name": "lab", "environment": "cae-acagpu-env-lab", "resource_group": "rg-acagpu-env-lab",
        "state": "idle", "location": "eastus", "profiles": [], "storages": [], "runs": [],
        "replicas_running": 0, "idle_ttl_seconds": 3600, "owner": "me",
        "spend": {"runs": [{"run_id": "r1", "phase": "ended", "usd_estimate": 0.041234},
                           {"run_id": "r2", "phase": "running", "usd_estimate": 0.0021}],
                  "runs_usd_estimate": 0.043334},
        "idle_cost": {"usd_per_hour": 0.0},
    }  # fmt: skip
    text = detail.render(doc)
    assert "r1 (ended, $0.04 so far)" in text and "r2 (running, $0.0021 so far)" in text, text
    assert "runs inside so far: $0.04 (estimate)" in text, text
    assert "$0.0412" not in text and "$0.0433" not in text
