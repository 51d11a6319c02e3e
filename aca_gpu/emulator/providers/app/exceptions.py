"""Microsoft.App errors: real codes and texts where known (recordings, Microsoft's quota docs),
marked where not."""

from __future__ import annotations

from aca_gpu.emulator.arm import ArmError, ConflictError, NotFoundError

MSG_NOT_FOUND = (
    "The Resource 'Microsoft.App/{type}/{name}' under resource group '{rg}' was not found. "
    "For more details please go to https://aka.ms/ARMResourceNotFoundFix"
)
MSG_PROFILE_PROPERTY = "Workload Profile property '{prop}' is not supported for {ptype}"
MSG_QUOTA = (
    "Maximum Allowed Cores exceeded for the Managed Environment. Please check "
    "https://learn.microsoft.com/en-us/azure/container-apps/quotas for resource limits"
)
MSG_LOCATION = (
    "The provided location '{location}' is not available for resource type "
    "'Microsoft.App/managedEnvironments'. "
    "List of available regions for the resource type is '{regions}'."
)
# Not confirmed against live Azure: ARM's exact text for a profile type a region does not offer.
MSG_PROFILE_TYPE = "Workload profile type '{ptype}' is not supported in location '{location}'."
MSG_PROFILE_NAME = "Workload profile '{name}' does not exist in managed environment '{env}'."
MSG_ENV_NOT_READY = "Managed environment '{env}' is not in a Succeeded state (current state: {state})."
MSG_ENV_DELETING = "Managed environment '{env}' is being deleted."
MSG_ENV_ID = "Invalid value for environmentId: '{value}'."
MSG_CONTAINERS = "Container app template must contain at least one container."
MSG_JOB_CONFIG = "Job configuration requires '{field}'."
MSG_THROTTLED = "The request is being throttled. Retry after {seconds} seconds."
MSG_SERVER = "The server encountered an internal error. Please retry the request."


class ResourceNotFound(NotFoundError):
    def __init__(self, type_: str, name: str, rg: str) -> None:
        super().__init__(MSG_NOT_FOUND.format(type=type_, name=name, rg=rg))


class WorkloadProfilePropertyNotSupported(ArmError):
    code = "WorkloadProfilePropertyNotSupported"

    def __init__(self, prop: str, profile_type: str) -> None:
        super().__init__(MSG_PROFILE_PROPERTY.format(prop=prop, ptype=profile_type.replace("-", "_")))


class QuotaExceeded(ArmError):
    # The code ARM pairs with this text is not public; the text is the one users report.
    code = "MaxNumberOfGpuCoresExceeded"

    def __init__(self) -> None:
        super().__init__(MSG_QUOTA)


class LocationNotAvailable(ArmError):
    code = "LocationNotAvailableForResourceType"

    def __init__(self, location: str, regions: str) -> None:
        super().__init__(MSG_LOCATION.format(location=location, regions=regions))


class WorkloadProfileTypeNotSupported(ArmError):
    code = "WorkloadProfileTypeNotSupported"

    def __init__(self, profile_type: str, location: str) -> None:
        super().__init__(MSG_PROFILE_TYPE.format(ptype=profile_type, location=location))


class WorkloadProfileNotFound(ArmError):
    code = "WorkloadProfileNameNotFound"

    def __init__(self, name: str, env: str) -> None:
        super().__init__(MSG_PROFILE_NAME.format(name=name, env=env))


class EnvironmentNotReady(ConflictError):
    code = "ManagedEnvironmentNotReadyForAppCreation"

    def __init__(self, env: str, state: str) -> None:
        super().__init__(MSG_ENV_NOT_READY.format(env=env, state=state))


class EnvironmentBusy(ConflictError):
    """Another operation (create, or an update adding nodes) is still running on the environment."""

    code = "ManagedEnvironmentOperationInProgress"

    def __init__(self, env: str) -> None:
        super().__init__(f"Cannot modify managed environment '{env}': another operation is in progress.")


class EnvironmentBeingDeleted(ConflictError):
    def __init__(self, env: str) -> None:
        super().__init__(MSG_ENV_DELETING.format(env=env))


class InvalidProperty(ArmError):
    code = "InvalidRequestContent"


class Throttled(ArmError):
    status = 429
    code = "TooManyRequests"

    def __init__(self, seconds: str) -> None:
        super().__init__(MSG_THROTTLED.format(seconds=seconds), headers={"Retry-After": seconds})


class ServerError(ArmError):
    status = 500
    code = "InternalServerError"

    def __init__(self, status: int) -> None:
        codes = {500: "InternalServerError", 502: "BadGateway", 503: "ServiceUnavailable"}
        super().__init__(MSG_SERVER, status=status, code=codes.get(status, "InternalServerError"))


class GatewayTimeout(ArmError):
    """ARM's answer when the provider did not answer in time (seen with "WorkLoad Profile Full")."""

    status = 504
    code = "GatewayTimeout"

    def __init__(self) -> None:
        super().__init__(
            "The gateway did not receive a response from 'Microsoft.App' within the specified time period."
        )
