"""Datasheet peaks for every GPU a user may meet (issue list: H100 PCIe/SXM, H200, L4, L40S, A10,
A100 40/80 GB, T4, V100), by the names nvidia-smi and torch print: "% of peak" is never blank on a
known card; an unknown card has no entry (the tester then says `peak_known: false`)."""

from __future__ import annotations

import pytest

from aca_gpu.gpu.profiles import lookup_gpu

# name as printed -> bf16 tensor peak (None: no bf16 tensor cores on that part)
CARDS = {
    "NVIDIA H100 PCIe": 756.0,
    "NVIDIA H100 80GB HBM3": 989.0,
    "NVIDIA H200": 989.0,
    "NVIDIA L4": 121.0,
    "NVIDIA L40S": 362.0,
    "NVIDIA A10": 125.0,
    "NVIDIA A100-PCIE-40GB": 312.0,
    "NVIDIA A100-SXM4-40GB": 312.0,
    "NVIDIA A100 80GB PCIe": 312.0,
    "NVIDIA A100-SXM4-80GB": 312.0,
    "Tesla T4": None,
    "Tesla V100-SXM2-16GB": None,
    "Tesla V100-SXM2-32GB": None,
    "Tesla V100-PCIE-32GB": None,
}


@pytest.mark.parametrize(("name", "bf16"), CARDS.items())
def test_every_card_has_its_peaks(name: str, bf16: float | None) -> None:
    spec = lookup_gpu(name)
    assert spec is not None, name
    assert spec.bf16_tflops == bf16
    assert spec.fp16_tflops > spec.fp32_tflops > 0 and spec.tf32_tflops >= spec.fp32_tflops
    assert spec.mem_bw_gbps > 0 and spec.memory_gib > 0 and spec.source


def test_an_unknown_card_has_none() -> None:
    assert lookup_gpu("NVIDIA GeForce RTX 4090") is None
