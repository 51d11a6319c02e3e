"""A warm validation of a staged image keeps the copy's digest (recorded when it was staged) where
the image's registry was not read, so the compatibility matrix names what ran."""

from __future__ import annotations

from typing import Any

import pytest

from aca_gpu.config import Settings
from aca_gpu.workflow.env.staging import stage
from aca_gpu.workflow.env.staging.catalogue import Staged, key_of
from aca_gpu.workflow.tester import validate as v

DIGEST = "sha256:" + "ab" * 32


def test_a_staged_copy_s_digest_fills_an_unread_one(monkeypatch: pytest.MonkeyPatch) -> None:
    images = ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "nvidia/cuda:12.4.1-base-ubuntu22.04")
    request = v.ValidateRequest(images=images, gpus=("t4",), run_id="val123", env="lab")
    plan = v.make_plan(Settings(), request, owner="me")
    asked: list[tuple[str, str]] = []

    def staged_in(cloud: Any, group: str, env: str) -> tuple[str, dict[str, Staged]]:
        asked.append((group, env))
        copy = Staged(
            key_of(images[0]), "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", DIGEST, 3_300_000_000
        )
        return "acagpulabx.azurecr.io", {copy.image: copy}

    monkeypatch.setattr(stage, "staged_in", staged_in)
    guesses = {p.index: ({"verdict": "ok"}, None) for p in plan.pairs}
    filled = v.staged_digests(object(), plan, guesses)  # type: ignore[arg-type]
    assert asked == [("rg-acagpu-env-lab", "lab")]
    by_image = {p.image: filled[p.index][1] for p in plan.pairs}
    assert by_image == {images[0]: DIGEST, images[1]: None}  # only the staged one has a digest
    read = {p.index: ({"verdict": "ok"}, "sha256:" + "cd" * 32) for p in plan.pairs}
    assert v.staged_digests(object(), plan, read) == read  # a digest read from the registry stays  # type: ignore[arg-type]
