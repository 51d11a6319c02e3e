"""`nvidia-smi -q -x` read for its health sections, so the XML form gets the same verdict as `-q`.

The XML holds the same ECC, retired-page, row-remap, reset, PCIe-link and clock-event data as the
text; rather than a second set of rules, each `<gpu>` element is turned into the `section/key ->
value` mapping `query_blocks` makes of a `-q` block, and `nvidia_smi_health.judge_gpu` judges it.

Element names (the `nvsmi_device` DTD, v11 for R470-R525, v12 from R535, v13 from R590; seen in
real `-q -x` outputs):

- `ecc_mode/current_ecc`; `ecc_errors/{volatile,aggregate}/…`: R510+ `sram_correctable`,
  `sram_uncorrectable` (R550+: `sram_uncorrectable_parity`, `sram_uncorrectable_secded`),
  `dram_correctable`, `dram_uncorrectable`, `aggregate/sram_threshold_exceeded`; before R510
  `single_bit/…/total` and `double_bit/…/total`.
- `retired_pages/multiple_single_bit_retirement/retired_count`, `double_bit_retirement/retired_count`,
  `pending_blacklist` / `pending_retirement`.
- `remapped_rows/remapped_row_corr`, `remapped_row_unc`, `remapped_row_pending`,
  `remapped_row_failure` (`<remapped_rows>N/A</remapped_rows>` where the GPU does not report them).
- `gpu_reset_status/reset_required`, `drain_and_reset_recommended`; R580+ `gpu_recovery_action`.
- `pci/pci_gpu_link_info/pcie_gen/{max,current}_link_gen`, `link_widths/{max,current}_link_width`.
- `clocks_event_reasons/clocks_event_reason_*` (R535+), `clocks_throttle_reasons/
  clocks_throttle_reason_*` before; `clocks/sm_clock`, `max_clocks/sm_clock`.
- `product_name`, `product_brand`, `persistence_mode`, `compute_mode`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Final

# leaf element paths under <gpu> -> the `-q` path the health rules read
_PLAIN: Final = {
    "product_name": "Product Name",
    "product_brand": "Product Brand",
    "persistence_mode": "Persistence Mode",
    "compute_mode": "Compute Mode",
    "ecc_mode/current_ecc": "ECC Mode/Current",
    "retired_pages/multiple_single_bit_retirement/retired_count": "Retired Pages/Single Bit ECC",
    "retired_pages/double_bit_retirement/retired_count": "Retired Pages/Double Bit ECC",
    "retired_pages/pending_blacklist": "Retired Pages/Pending Page Blacklist",
    "retired_pages/pending_retirement": "Retired Pages/Pending Page Retirement",
    "remapped_rows/remapped_row_corr": "Remapped Rows/Correctable Error",
    "remapped_rows/remapped_row_unc": "Remapped Rows/Uncorrectable Error",
    "remapped_rows/remapped_row_pending": "Remapped Rows/Pending",
    "remapped_rows/remapped_row_failure": "Remapped Rows/Remapping Failure Occurred",
    "gpu_reset_status/reset_required": "GPU Reset Status/Reset Required",
    "gpu_reset_status/drain_and_reset_recommended": "GPU Reset Status/Drain and Reset Recommended",
    "gpu_recovery_action": "GPU Recovery Action",
    "pci/pci_gpu_link_info/pcie_gen/max_link_gen": "PCI/GPU Link Info/PCIe Generation/Max",
    "pci/pci_gpu_link_info/pcie_gen/current_link_gen": "PCI/GPU Link Info/PCIe Generation/Current",
    "pci/pci_gpu_link_info/link_widths/max_link_width": "PCI/GPU Link Info/Link Width/Max",
    "pci/pci_gpu_link_info/link_widths/current_link_width": "PCI/GPU Link Info/Link Width/Current",
    "clocks/sm_clock": "Clocks/SM",
    "max_clocks/sm_clock": "Max Clocks/SM",
}
# a section that is one text (`<remapped_rows>N/A</remapped_rows>`): `-q` prints `Remapped Rows : N/A`
_SECTIONS: Final = {"remapped_rows": "Remapped Rows", "retired_pages": "Retired Pages"}
_REASON_TREES: Final = {
    "clocks_event_reasons": ("clocks_event_reason_", "Clocks Event Reasons"),
    "clocks_throttle_reasons": ("clocks_throttle_reason_", "Clocks Throttle Reasons"),
}
# the reason's element suffix -> its name in `-q` (nvidia_smi_health.REASONS' keys)
_REASONS: Final = {
    "gpu_idle": "Idle",
    "applications_clocks_setting": "Applications Clocks Setting",
    "sw_power_cap": "SW Power Cap",
    "hw_slowdown": "HW Slowdown",
    "hw_thermal_slowdown": "HW Thermal Slowdown",
    "hw_power_brake_slowdown": "HW Power Brake Slowdown",
    "sync_boost": "Sync Boost",
    "sw_thermal_slowdown": "SW Thermal Slowdown",
    "display_clocks_setting": "Display Clock Setting",
}
_WORDS: Final = {"sram": "SRAM", "dram": "DRAM", "secded": "SEC-DED", "ecc": "ECC"}


def _label(tag: str) -> str:
    """`sram_uncorrectable_parity` -> `SRAM Uncorrectable Parity` (ECC counter names)."""
    return " ".join(_WORDS.get(w, w.capitalize()) for w in tag.split("_"))


def _text(node: ET.Element) -> str | None:
    return node.text.strip() if node.text is not None and node.text.strip() else None


def _leaves(node: ET.Element, path: str = "") -> list[tuple[str, str]]:
    """Every element with text under `node`, as (`a/b/c`, text)."""
    out: list[tuple[str, str]] = []
    for child in node:
        where = f"{path}/{child.tag}" if path else child.tag
        text = _text(child)
        if len(child):
            out.extend(_leaves(child, where))
        elif text is not None:
            out.append((where, text))
    return out


def gpu_values(node: ET.Element) -> dict[str, str]:
    """One `<gpu>` element -> the `-q` block mapping `judge_gpu` reads. Elements the rules do not
    read are kept under their XML path, so a "GPU is lost" anywhere is still seen."""
    values: dict[str, str] = {}
    for path, text in _leaves(node):
        top, _, rest = path.partition("/")
        if path in _PLAIN:
            values[_PLAIN[path]] = text
        elif top == "ecc_errors" and rest.startswith(("volatile/", "aggregate/")):
            scope, _, leaf = rest.partition("/")
            name = "/".join(_label(part) for part in leaf.split("/"))
            values[f"ECC Errors/{scope.title()}/{name}"] = text
        elif top in _REASON_TREES and "/" not in rest and rest.startswith(_REASON_TREES[top][0]):
            reason = _REASONS.get(rest[len(_REASON_TREES[top][0]) :])
            if reason is not None:
                values[f"{_REASON_TREES[top][1]}/{reason}"] = text
        elif path in _SECTIONS:
            values[_SECTIONS[path]] = text
        else:
            values[f"xml:{path}"] = text
    return values


def xml_blocks(text: str) -> list[tuple[str | None, dict[str, str]]] | None:
    """(bus id, values) per `<gpu>` of an `nvidia-smi -q -x` output; None when it is not one.
    Entity declarations are refused, as the XML parser does: real output never has them."""
    if "<!ENTITY" in text:
        return None
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError:
        return None
    if root.tag != "nvidia_smi_log":
        return None
    return [(gpu.get("id"), gpu_values(gpu)) for gpu in root.findall("gpu")]
