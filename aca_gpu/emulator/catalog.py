"""Regions, workload profile types and quotas the emulated Microsoft.App offers (Microsoft's
serverless GPU docs, 2025-06)."""

from __future__ import annotations

from typing import Any

# normalized name -> display name (ARM echoes the display name in resource bodies: "East US")
REGIONS: dict[str, str] = {
    "australiaeast": "Australia East",
    "brazilsouth": "Brazil South",
    "eastus": "East US",
    "italynorth": "Italy North",
    "swedencentral": "Sweden Central",
    "westus": "West US",
    "westus3": "West US 3",
    "centralindia": "Central India",
    "francecentral": "France Central",
    "japaneast": "Japan East",
    "northcentralus": "North Central US",
    "southcentralus": "South Central US",
    "southeastasia": "Southeast Asia",
    "southindia": "South India",
    "westeurope": "West Europe",
    "westus2": "West US 2",
    "northeurope": "North Europe",
    "eastus2": "East US 2",
    "uksouth": "UK South",
    "canadacentral": "Canada Central",
    "germanywestcentral": "Germany West Central",
    "koreacentral": "Korea Central",
}
A100_REGIONS = {"australiaeast", "brazilsouth", "eastus", "italynorth", "swedencentral", "westus", "westus3"}
T4_REGIONS = A100_REGIONS | {
    "centralindia",
    "francecentral",
    "japaneast",
    "northcentralus",
    "southcentralus",
    "southeastasia",
    "southindia",
    "westeurope",
    "westus2",
}
DEDICATED_GPU_REGIONS = {"westus3", "northeurope"}

T4 = "Consumption-GPU-NC8as-T4"
A100 = "Consumption-GPU-NC24-A100"

# type -> (category, cores, memoryGiB, gpus, displayName)
_GENERAL: dict[str, tuple[str, int, int, int, str]] = {
    "Consumption": ("Consumption", 4, 8, 0, "Consumption"),
    "D4": ("GeneralPurpose", 4, 16, 0, "Dedicated-D4"),
    "D8": ("GeneralPurpose", 8, 32, 0, "Dedicated-D8"),
    "D16": ("GeneralPurpose", 16, 64, 0, "Dedicated-D16"),
    "D32": ("GeneralPurpose", 32, 128, 0, "Dedicated-D32"),
    "E4": ("MemoryOptimized", 4, 32, 0, "Dedicated-E4"),
    "E8": ("MemoryOptimized", 8, 64, 0, "Dedicated-E8"),
    "E16": ("MemoryOptimized", 16, 128, 0, "Dedicated-E16"),
    "E32": ("MemoryOptimized", 32, 256, 0, "Dedicated-E32"),
}
_T4 = {T4: ("Consumption-GPU-NC8as-T4", 8, 56, 1, "Consumption-GPU-NC8as-T4")}
_A100 = {A100: ("Consumption-GPU-NC24-A100", 24, 220, 1, "Consumption-GPU-NC24-A100")}
_DEDICATED = {
    "NC24-A100": ("GPU-NC-A100", 24, 220, 1, "Dedicated-NC24-A100"),
    "NC48-A100": ("GPU-NC-A100", 48, 440, 2, "Dedicated-NC48-A100"),
    "NC96-A100": ("GPU-NC-A100", 96, 880, 4, "Dedicated-NC96-A100"),
}
ALL_TYPES = {**_GENERAL, **_T4, **_A100, **_DEDICATED}


def normalize_location(location: str) -> str:
    return location.replace(" ", "").lower()


def display_location(location: str) -> str:
    return REGIONS.get(normalize_location(location), location)


def profile_types(location: str) -> dict[str, tuple[str, int, int, int, str]]:
    loc = normalize_location(location)
    offered = dict(_GENERAL)
    if loc in T4_REGIONS:
        offered.update(_T4)
    if loc in A100_REGIONS:
        offered.update(_A100)
    if loc in DEDICATED_GPU_REGIONS:
        offered.update(_DEDICATED)
    return offered


def find_type(location: str, profile_type: str) -> str | None:
    """The canonical type name if `location` offers it (ARM compares type names case-insensitively)."""
    for name in profile_types(location):
        if name.lower() == profile_type.lower():
            return name
    return None


def gpus(profile_type: str) -> int:
    for name, spec in ALL_TYPES.items():
        if name.lower() == profile_type.lower():
            return spec[3]
    return 0


def is_consumption_gpu(profile_type: str) -> bool:
    return profile_type.lower().startswith("consumption-gpu-")


def available_profiles_body(subscription: str, location: str) -> dict[str, Any]:
    loc = normalize_location(location)
    value = []
    for name, (category, cores, mem, gpu_count, display) in profile_types(loc).items():
        props: dict[str, Any] = {
            "displayName": display,
            "category": category,
            "applicability": "LocationDefault" if name == "Consumption" else "Custom",
            "cores": cores,
            "memoryGiB": mem,
        }
        if gpu_count:
            props["gpus"] = gpu_count
        value.append(
            {
                "location": loc,
                "properties": props,
                "id": f"/subscriptions/{subscription}/providers/Microsoft.App/"
                f"availableManagedEnvironmentsWorkloadProfileTypes/{name}",
                "name": name,
                "type": "Microsoft.App/availableManagedEnvironmentsWorkloadProfileTypes",
            }
        )
    return {"value": value}


# Subscription-scope usages per region. `ManagedEnvironmentCount` is the recorded name; the GPU quota
# names are NOT confirmed anywhere public: these follow the recorded naming pattern and
# the portal's "Managed Environment Consumption T4/NCA100 Gpus" quota types.
GPU_QUOTA_NAMES = {
    T4: ("ManagedEnvironmentConsumptionT4Gpus", "Managed Environment Consumption T4 Gpus"),
    A100: ("ManagedEnvironmentConsumptionNCA100Gpus", "Managed Environment Consumption NCA100 Gpus"),
}
ENV_LIMIT = 40
GPU_LIMIT = 4


def usages_body(
    location: str, env_count: int, gpus_in_use: dict[str, int], limits: dict[str, int | None] | None = None
) -> dict[str, Any]:
    """`limits` overrides GPU_LIMIT per profile type (a region's quota set by a `quota:limit=` fault)."""
    value: list[dict[str, Any]] = [
        {
            "name": {"value": "ManagedEnvironmentCount", "localizedValue": "Managed Environment Count"},
            "usage": env_count,
            "currentValue": env_count,
            "limit": ENV_LIMIT,
        }
    ]
    loc = normalize_location(location)
    for ptype, (value_name, localized) in GPU_QUOTA_NAMES.items():
        if find_type(loc, ptype) is None:
            continue
        used = gpus_in_use.get(ptype, 0)
        value.append(
            {
                "name": {"value": value_name, "localizedValue": localized},
                "usage": used,
                "currentValue": used,
                "limit": GPU_LIMIT if (limits or {}).get(ptype) is None else (limits or {})[ptype],
                "unit": "Count",
            }
        )
    return {"value": value}


def env_usages_body() -> dict[str, Any]:
    """The three recorded environment-scope entries."""
    names = [
        ("ManagedEnvironmentGeneralPurposeCores", "Managed Environment General Purpose Cores", 100),
        ("ManagedEnvironmentMemoryOptimizedCores", "Managed Environment Memory Optimized Cores", 50),
        ("ManagedEnvironmentConsumptionCores", "Managed Environment Consumption Cores", 100),
    ]
    return {
        "value": [
            {"name": {"value": v, "localizedValue": loc}, "usage": 0, "currentValue": 0, "limit": limit}
            for v, loc, limit in names
        ]
    }
