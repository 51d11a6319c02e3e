"""NVIDIA's driver tables as data: minimum driver per CUDA toolkit release, and the per-major floor.

Source: NVIDIA CUDA Toolkit Release Notes, "CUDA Toolkit and Corresponding Driver Versions"
(https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html, 13.2-era and 13.4 Update 1
copies), and the CUDA Compatibility guide, "Minor Version Compatibility"
(https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html). Kept as code
so a typo fails the tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CudaRelease:
    """One toolkit release row: `version` is the full x.y.z the installers and images carry."""

    version: str
    label: str  # as NVIDIA's table names it: "12.4 Update 1", "12.4 GA"
    linux: str  # minimum Linux x86_64 driver
    windows: str | None  # minimum Windows driver; None where NVIDIA lists none ("N/A")
    branch_only: bool = False  # NVIDIA published only the driver branch (13.3+), not an exact version


# fmt: off
RELEASES: tuple[CudaRelease, ...] = (
    # From 13.3 the notes give only the branch: "13.3 -> R610, 13.4 -> R615"; updates share the branch.
    CudaRelease("13.4.0", "13.4 (R615)", "615", None, branch_only=True),
    CudaRelease("13.3.0", "13.3 (R610)", "610", None, branch_only=True),
    CudaRelease("13.2.2", "13.2 Update 2", "595.71.05", None),
    CudaRelease("13.2.1", "13.2 Update 1", "595.58.03", None),
    CudaRelease("13.2.0", "13.2 GA", "595.45.04", None),
    CudaRelease("13.1.1", "13.1 Update 1", "590.48.01", None),
    CudaRelease("13.1.0", "13.1 GA", "590.44.01", None),
    CudaRelease("13.0.2", "13.0 Update 2", "580.95.05", None),
    CudaRelease("13.0.1", "13.0 Update 1", "580.82.07", None),
    CudaRelease("13.0.0", "13.0 GA", "580.65.06", None),
    CudaRelease("12.9.1", "12.9 Update 1", "575.57.08", "576.57"),
    CudaRelease("12.9.0", "12.9 GA", "575.51.03", "576.02"),
    CudaRelease("12.8.1", "12.8 Update 1", "570.124.06", "572.61"),
    CudaRelease("12.8.0", "12.8 GA", "570.26", "570.65"),
    # there is no 12.7 release
    CudaRelease("12.6.3", "12.6 Update 3", "560.35.05", "561.17"),
    CudaRelease("12.6.2", "12.6 Update 2", "560.35.03", "560.94"),
    CudaRelease("12.6.1", "12.6 Update 1", "560.35.03", "560.94"),
    CudaRelease("12.6.0", "12.6 GA", "560.28.03", "560.76"),
    CudaRelease("12.5.1", "12.5 Update 1", "555.42.06", "555.85"),
    CudaRelease("12.5.0", "12.5 GA", "555.42.02", "555.85"),
    CudaRelease("12.4.1", "12.4 Update 1", "550.54.15", "551.78"),
    CudaRelease("12.4.0", "12.4 GA", "550.54.14", "551.61"),
    CudaRelease("12.3.1", "12.3 Update 1", "545.23.08", "546.12"),
    CudaRelease("12.3.0", "12.3 GA", "545.23.06", "545.84"),
    CudaRelease("12.2.2", "12.2 Update 2", "535.104.05", "537.13"),
    CudaRelease("12.2.1", "12.2 Update 1", "535.86.09", "536.67"),
    CudaRelease("12.2.0", "12.2 GA", "535.54.03", "536.25"),
    CudaRelease("12.1.1", "12.1 Update 1", "530.30.02", "531.14"),
    CudaRelease("12.1.0", "12.1 GA", "530.30.02", "531.14"),
    CudaRelease("12.0.1", "12.0 Update 1", "525.85.12", "528.33"),
    CudaRelease("12.0.0", "12.0 GA", "525.60.13", "527.41"),
    CudaRelease("11.8.0", "11.8 GA", "520.61.05", "520.06"),
    CudaRelease("11.7.1", "11.7 Update 1", "515.48.07", "516.31"),
    CudaRelease("11.7.0", "11.7 GA", "515.43.04", "516.01"),
    CudaRelease("11.6.2", "11.6 Update 2", "510.47.03", "511.65"),
    CudaRelease("11.6.1", "11.6 Update 1", "510.47.03", "511.65"),
    CudaRelease("11.6.0", "11.6 GA", "510.39.01", "511.23"),
    CudaRelease("11.5.2", "11.5 Update 2", "495.29.05", "496.13"),
    CudaRelease("11.5.1", "11.5 Update 1", "495.29.05", "496.13"),
    CudaRelease("11.5.0", "11.5 GA", "495.29.05", "496.04"),
    CudaRelease("11.4.4", "11.4 Update 4", "470.82.01", "472.50"),
    CudaRelease("11.4.3", "11.4 Update 3", "470.82.01", "472.50"),
    CudaRelease("11.4.2", "11.4 Update 2", "470.57.02", "471.41"),
    CudaRelease("11.4.1", "11.4 Update 1", "470.57.02", "471.41"),
    CudaRelease("11.4.0", "11.4.0 GA", "470.42.01", "471.11"),
    CudaRelease("11.3.1", "11.3.1 Update 1", "465.19.01", "465.89"),
    CudaRelease("11.3.0", "11.3.0 GA", "465.19.01", "465.89"),
    CudaRelease("11.2.2", "11.2.2 Update 2", "460.32.03", "461.33"),
    CudaRelease("11.2.1", "11.2.1 Update 1", "460.32.03", "461.09"),
    CudaRelease("11.2.0", "11.2.0 GA", "460.27.03", "460.82"),
    CudaRelease("11.1.1", "11.1.1 Update 1", "455.32", "456.81"),
    CudaRelease("11.1.0", "11.1 GA", "455.23", "456.38"),
    CudaRelease("11.0.3", "11.0.3 Update 1", "450.51.06", "451.82"),
    CudaRelease("11.0.2", "11.0.2 GA", "450.51.05", "451.48"),
    CudaRelease("11.0.1", "11.0.1 RC", "450.36.06", "451.22"),
    # CUDA 10.x: no minor-version compatibility; Linux minimums from the compatibility guide, Table 2.
    CudaRelease("10.2.0", "10.2", "440.33", None),
    CudaRelease("10.1.0", "10.1", "418.39", None),
    CudaRelease("10.0.0", "10.0", "410.48", None),
)
# fmt: on

# Minor-version-compatibility floor per CUDA major: (Linux, Windows). A binary from any x.y of that
# major runs, with a reduced feature set, on a driver at or above the floor. For 13.x NVIDIA names only
# "R580"; 580.65.06 (13.0 GA's driver) is the lowest actual R580 driver, so it is the safe floor.
MINOR_COMPAT_FLOOR: dict[int, tuple[str, str | None]] = {
    13: ("580.65.06", None),
    12: ("525.60.13", "527.41"),
    11: ("450.80.02", "452.39"),
}
