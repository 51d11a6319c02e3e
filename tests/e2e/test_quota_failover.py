"""Quota preflight and region failover end to end, over HTTPS against the emulator (issue: real Azure).

A region whose A100 quota is zero refuses `up` in seconds with nothing created; with `--regions` the
run moves on, cleans up the refused or hung attempt, and reports every attempt.
"""

from __future__ import annotations

import json
import time
from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli
from tests.e2e.webhook import webhook

# --max-minutes is on the emulated clock: 5 minutes at the e2e scale (0.005) was 1.5 wall s for a
# tester job's whole life, which placement on a loaded machine outran (DeadlineExceeded); 30 is 9 s
UP = ["up", "--yes", "--max-minutes", "30", "-o", "json"]


def _run(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def test_zero_a100_quota_refuses_up_in_seconds_with_nothing_created(emu: Any) -> None:
    emu.set_faults("quota:region=eastus,profile=A100,limit=0")
    started = time.monotonic()
    with webhook() as hook:  # a failed run is told to the team's channel
        code, doc, err = _run(
            *UP, "--gpu", "a100", "-l", "eastus", "--run-id", "quota0", "--notify", hook.url
        )
        elapsed = time.monotonic() - started
        sent = hook.received()
    assert code == 3, err
    assert len(sent) == 1 and sent[0]["text"].startswith("*acagpu up quota0: failed (exit 3)*")
    assert sent[0]["acagpu"]["error"]["message"] == doc["error"]["message"]
    assert doc["notification"] == {"host": "127.0.0.1", "ok": True, "status": 200, "error": None}
    assert emu.token not in json.dumps(sent)
    assert elapsed < 30, f"the refusal took {elapsed:.1f}s"  # seconds, not an environment's minutes
    assert "not enough GPU quota" in doc["error"]["message"]
    assert "ManagedEnvironmentConsumptionNCA100Gpus" in doc["error"]["message"]
    assert "0 of 0 used" in doc["error"]["message"]
    assert "Quota Management System" in doc["error"]["hint"]
    assert doc["teardown"]["status"] == "nothing-created"
    assert emu.inventory()["empty"], "a quota refusal created something"


def test_regions_move_past_a_refused_region_and_report_it(emu: Any) -> None:
    emu.set_faults("quota:region=eastus,profile=A100,limit=0")
    code, doc, err = _run(*UP, "--gpu", "a100", "--regions", "eastus,westus3", "--run-id", "fail1")
    assert code == 0, err
    assert doc["location"] == "westus3" and doc["status"] == "ok"
    first, second = doc["attempts"]
    assert (first["region"], first["status"], first["blast"]) == ("eastus", "refused", "next-region")
    assert "not enough GPU quota" in first["reason"] and first["gpu_seconds"] == 0
    assert (second["region"], second["status"]) == ("westus3", "used")
    assert second["resource_group"] == "rg-acagpu-fail1-2" == doc["resources"]["resource_group"]
    assert "eastus: quota or capacity exhausted; trying westus3" in err
    human = CliRunner().invoke(
        cli, ["up", "--yes", "--max-minutes", "30", "--gpu", "a100", "--regions", "eastus,westus3"]
    )
    assert human.exit_code == 0, human.stderr
    assert "regions        eastus refused: quota or capacity exhausted" in human.stdout


def test_a_hung_region_is_abandoned_at_its_deadline_cleaned_up_and_the_next_used(emu: Any) -> None:
    emu.set_faults("stuck:region=eastus")
    started = time.monotonic()
    code, doc, err = _run(
        *UP, "--gpu", "t4", "--regions", "eastus,westus3", "--start-timeout", "8s", "--run-id", "hung1"
    )
    assert code == 0, err
    assert time.monotonic() - started < 90  # far from a default 15-minute start timeout
    first, second = doc["attempts"]
    assert (first["region"], first["status"], first["blast"]) == ("eastus", "abandoned", "next-region")
    assert "replica not placed by its deadline" in first["reason"]
    assert first["teardown"] in ("deleting", "deleted") and first["resource_group"] == "rg-acagpu-hung1"
    assert first["gpu_seconds"] == 0, first  # no replica was ever placed there: nothing billed
    assert (second["region"], second["status"]) == ("westus3", "used")
    assert doc["explorer"]["driver_version"]
    inventory = emu.inventory()
    assert not inventory["apps"] and not inventory["jobs"], "the abandoned region still has apps or jobs"
    assert all(g["deleting"] for g in inventory["resource_groups"])


def test_a_region_without_a_fallback_still_exits_3(emu: Any) -> None:
    """One region, refused: no failover, the refusal is the run's error."""
    emu.set_faults("quota:region=westus3,profile=A100,limit=0")
    code, doc, _ = _run(*UP, "--gpu", "a100", "--regions", "westus3", "--run-id", "fail2")
    assert code == 3 and [a["status"] for a in doc["attempts"]] == ["failed"]


def test_a_gpu_list_falls_back_to_the_next_gpu_and_reports_every_attempt(emu: Any) -> None:
    """`--gpu a100,t4`: no A100 quota in eastus, so the run uses a T4 there; the document lists
    both attempts with their GPU, region and reason. The kept group is tagged, shown and priced as
    the T4 it used (not as `a100,t4`, which status priced as an A100 and reap not at all)."""
    emu.set_faults("quota:region=eastus,profile=A100,limit=0")
    code, doc, err = _run(*UP, "--gpu", "a100,t4", "-l", "eastus", "--run-id", "gpufb", "--keep")
    assert code == 0, err
    first, second = doc["attempts"]
    assert (first["gpu"], first["region"], first["status"]) == ("a100", "eastus", "refused")
    assert "not enough GPU quota" in first["reason"]
    assert (second["gpu"], second["region"], second["status"]) == ("t4", "eastus", "used")
    assert doc["explorer"]["gpus"][0]["name"] == "Tesla T4", doc["explorer"]
    assert "trying eastus with t4" in err
    tags = {g["name"]: g["tags"] for g in emu.inventory()["resource_groups"]}
    assert tags["rg-acagpu-gpufb-2"]["acagpu:gpu"] == "t4"
    code, status, err = _run("status", "-o", "json")
    (run,) = [r for r in status["runs"] if r["run_id"] == "gpufb"]
    assert run["gpu"] == "t4" and "NC8as-T4" in run["cost"]["basis"], run
    code, reaped, err = _run("reap", "--older-than", "1s", "-o", "json")  # a dry run
    (item,) = [i for i in reaped["items"] if i["run_id"] == "gpufb"]
    assert item["spend_usd_estimate"] is not None, item
    human = CliRunner().invoke(cli, [*UP[:4], "--gpu", "a100,t4", "-l", "eastus"])
    assert human.exit_code == 0, human.stderr
    assert "regions        eastus a100 refused: quota or capacity exhausted" in human.stdout, human.stdout
    assert "eastus t4 used" in human.stdout, human.stdout
