"""Microsoft.Resources errors with the codes and texts ARM uses."""

from __future__ import annotations

from aca_gpu.emulator.arm import ArmError, ConflictError, NotFoundError

MSG_RG_NOT_FOUND = "Resource group '{name}' could not be found."
MSG_RG_DEPROVISIONING = (
    "The resource group '{name}' is in deprovisioning state and cannot perform this operation."
)
MSG_NOT_REGISTERED = (
    "The subscription is not registered to use namespace '{namespace}'. "
    "See https://aka.ms/rps-not-found for how to register subscriptions."
)
MSG_BAD_FILTER = "Invalid $filter '{filter}'. Supported: {supported}."
MSG_GROUP_FILTER = "tagName eq '<name>' [and tagValue eq '<value>']"
MSG_RESOURCE_FILTER = (
    "resourceGroup, resourceType, name, location, tagName [and tagValue] eq '<value>', joined by 'and'"
)


class ResourceGroupNotFound(NotFoundError):
    code = "ResourceGroupNotFound"

    def __init__(self, name: str) -> None:
        super().__init__(MSG_RG_NOT_FOUND.format(name=name))


class ResourceGroupBeingDeleted(ConflictError):
    code = "ResourceGroupBeingDeleted"

    def __init__(self, name: str) -> None:
        super().__init__(MSG_RG_DEPROVISIONING.format(name=name))


class MissingSubscriptionRegistration(ConflictError):
    code = "MissingSubscriptionRegistration"

    def __init__(self, namespace: str) -> None:
        super().__init__(MSG_NOT_REGISTERED.format(namespace=namespace))


class InvalidFilter(ArmError):
    code = "InvalidFilter"

    def __init__(self, text: str, *, supported: str = MSG_GROUP_FILTER) -> None:
        super().__init__(MSG_BAD_FILTER.format(filter=text, supported=supported))


class LocationRequired(ArmError):
    code = "LocationRequired"

    def __init__(self) -> None:
        super().__init__("The location property is required for this definition.")
