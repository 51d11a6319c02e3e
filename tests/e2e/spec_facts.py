# Facts from Azure/azure-rest-api-specs specification/app/resource-manager/Microsoft.App/ContainerApps/stable/2026-07-01/openapi.json (commit 020ca526bf3930998a836e62d75d8b17b81cd6de) and specification/resources/resource-manager/Microsoft.Resources/resources/stable/2025-04-01/resources.json (commit cc8565c7ac0ed5ae4a6937d69f621bc6fec61a95).  # noqa: E501
"""The operations and request-body schemas acagpu's main journeys use, as the official specs state them.

Only facts are kept: each operation's method, path and api-version, and for each body the properties
acagpu may send (a subset of the writable ones: read-only properties such as provisioningState,
latestRevisionName, eventStreamEndpoint or ephemeralStorage are never allowed in a request) and the
required ones. A property acagpu starts sending fails the spec test until it is checked against the
spec and added here.

Read in openapi.json itself: the Configuration, Container/BaseContainer, ContainerResources,
ContainerApp/ContainerAppProperties, Template, JobConfiguration (required triggerType and
replicaTimeout), JobConfigurationManualTriggerConfig, JobProperties, ManagedEnvironment and
WorkloadProfile (required name and workloadProfileType) definitions, and the usages,
availableManagedEnvironmentsWorkloadProfileTypes and revision replicas paths. The other Microsoft.App
paths, Scale, EnvironmentVar, JobTemplate and ManagedEnvironmentProperties.workloadProfiles were
taken from azure-mgmt-appcontainers 5.1.0, which is generated from this same file. TrackedResource
(location required) and ResourceGroup come from the common types and resources.json.
"""

from __future__ import annotations

from typing import Any

APP_VERSION = "2026-07-01"
RESOURCES_VERSION = "2025-04-01"

S = "scalar"  # a string, number or boolean
STRINGS: dict[str, Any] = {"items": S}
TAGS: dict[str, Any] = {"map": S}

ENV_VAR = {"props": {"name": S, "value": S, "secretRef": S}}
CONTAINER = {
    "props": {
        "name": S,
        "image": S,
        "command": STRINGS,
        "args": STRINGS,
        "env": {"items": ENV_VAR},
        "resources": {"props": {"cpu": S, "memory": S}},  # ephemeralStorage is readOnly
    }
}
CONTAINERS = {"items": CONTAINER}
SCALE = {"props": {"minReplicas": S, "maxReplicas": S, "cooldownPeriod": S, "pollingInterval": S}}
# a served app (`acagpu serve`), from azure-mgmt-appcontainers 5.1.0's models of the same file:
# ContainerAppProbe (+ ContainerAppProbeHttpGet, `port` required), ScaleRule/HttpScaleRule (metadata
# is a string map), Ingress (`fqdn` readOnly) and Secret
PROBE = {
    "props": {
        "type": S,
        "httpGet": {"required": ["port"], "props": {"path": S, "port": S, "scheme": S}},
        "tcpSocket": {"required": ["port"], "props": {"port": S}},
        "initialDelaySeconds": S,
        "periodSeconds": S,
        "failureThreshold": S,
        "successThreshold": S,
        "timeoutSeconds": S,
    }
}
SERVED_CONTAINERS = {"items": {"props": {**CONTAINER["props"], "probes": {"items": PROBE}}}}
HTTP_RULE = {"props": {"name": S, "http": {"props": {"metadata": {"map": S}}}}}
SERVED_SCALE = {"props": {**SCALE["props"], "rules": {"items": HTTP_RULE}}}
INGRESS = {"props": {"external": S, "targetPort": S, "transport": S, "allowInsecure": S}}
APP_SECRET = {"props": {"name": S, "value": S}}
APP_REGISTRY = {"props": {"server": S, "username": S, "passwordSecretRef": S, "identity": S}}

CONTAINER_APP_PROPERTIES = {
    "props": {
        "environmentId": S,
        "workloadProfileName": S,
        "configuration": {
            "props": {
                "activeRevisionsMode": S,
                "maxInactiveRevisions": S,
                "ingress": INGRESS,
                "secrets": {"items": APP_SECRET},
                "registries": {"items": APP_REGISTRY},
            }
        },
        "template": {"props": {"containers": SERVED_CONTAINERS, "scale": SERVED_SCALE, "revisionSuffix": S}},
    }
}
CONTAINER_APP = {
    "required": ["location"],
    "props": {"location": S, "tags": TAGS, "properties": CONTAINER_APP_PROPERTIES},
}
CONTAINER_APP_PATCH = {"props": {"tags": TAGS, "properties": CONTAINER_APP_PROPERTIES}}

# JobConfigurationEventTriggerConfig, JobScale, JobScaleRule (`identity`: a user-assigned identity's
# resource id, or 'system') and Job.identity (ManagedServiceIdentity), read in azure-mgmt-appcontainers
# 5.1.0's models: queue mode's Event job
JOB_SCALE_RULE = {"props": {"name": S, "type": S, "metadata": TAGS, "identity": S}}
EVENT_TRIGGER = {
    "props": {
        "replicaCompletionCount": S,
        "parallelism": S,
        "scale": {
            "props": {
                "pollingInterval": S,
                "minExecutions": S,
                "maxExecutions": S,
                "rules": {"items": JOB_SCALE_RULE},
            }
        },
    }
}
JOB = {
    "required": ["location"],
    "props": {
        "location": S,
        "tags": TAGS,
        "identity": {"required": ["type"], "props": {"type": S}},
        "properties": {
            "props": {
                "environmentId": S,
                "workloadProfileName": S,
                "configuration": {
                    "required": ["triggerType", "replicaTimeout"],
                    "props": {
                        "triggerType": S,
                        "replicaTimeout": S,
                        "replicaRetryLimit": S,
                        "manualTriggerConfig": {"props": {"replicaCompletionCount": S, "parallelism": S}},
                        "eventTriggerConfig": EVENT_TRIGGER,
                        # RegistryCredentials (openapi.json): a staged image is pulled with an identity
                        "registries": {
                            "items": {
                                "props": {"server": S, "username": S, "passwordSecretRef": S, "identity": S}
                            }
                        },
                    },
                },
                "template": {"props": {"containers": CONTAINERS}},
            }
        },
    },
}

# JobPatchProperties / JobPatchPropertiesProperties (5.1.0's models): Jobs_Update's body. Its
# configuration is a JobConfiguration, whose triggerType and replicaTimeout stay required
JOB_PATCH = {
    "props": {
        "tags": TAGS,
        "properties": {"props": {"configuration": JOB["props"]["properties"]["props"]["configuration"]}},
    }
}

WORKLOAD_PROFILE = {
    "required": ["name", "workloadProfileType"],
    "props": {"name": S, "workloadProfileType": S, "minimumCount": S, "maximumCount": S},
}
# AppLogsConfiguration (destination; logAnalyticsConfiguration: customerId, sharedKey create/update
# only), read in azure-mgmt-appcontainers 5.1.0's models.
APP_LOGS = {
    "props": {
        "destination": S,
        "logAnalyticsConfiguration": {"props": {"customerId": S, "sharedKey": S}},
    }
}
MANAGED_ENVIRONMENT = {
    "required": ["location"],
    "props": {
        "location": S,
        "tags": TAGS,
        "properties": {
            "props": {"workloadProfiles": {"items": WORKLOAD_PROFILE}, "appLogsConfiguration": APP_LOGS}
        },
    },
}
# Jobs_Start's optional body: JobExecutionTemplate (containers, initContainers of JobExecutionContainer:
# image, name, command, args, env, resources), read in azure-mgmt-appcontainers 5.1.0's models.
EXECUTION_CONTAINER = {
    "props": {
        "name": S,
        "image": S,
        "command": STRINGS,
        "args": STRINGS,
        "env": {"items": ENV_VAR},
        "resources": {"props": {"cpu": S, "memory": S}},
    }
}
JOB_EXECUTION_TEMPLATE = {
    "optional_body": True,
    "props": {"containers": {"items": EXECUTION_CONTAINER}, "initContainers": {"items": EXECUTION_CONTAINER}},
}
# Microsoft.OperationalInsights 2025-07-01 (azure-mgmt-loganalytics 14.0.0's models: Workspace is a
# TrackedResource; WorkspaceProperties.sku and retentionInDays are writable, customerId read-only).
LOGS_VERSION = "2025-07-01"
WORKSPACE = {
    "required": ["location"],
    "props": {
        "location": S,
        "tags": TAGS,
        "properties": {"props": {"sku": {"props": {"name": S}}, "retentionInDays": S}},
    },
}
# The Log Analytics query API (api.loganalytics.io, its own host and version path, no api-version):
# QueryBody's query and timespan, read in azure-monitor-query 2.0.0.
LOGS_QUERY = {
    "required": ["query"],
    "props": {"query": S, "timespan": S, "workspaces": STRINGS},
    "nullable": ["workspaces"],  # the SDK sends `"workspaces": null` when no other workspace is named
}
RESOURCE_GROUP = {"required": ["location"], "props": {"location": S, "tags": TAGS, "managedBy": S}}

# Microsoft.ContainerRegistry 2025-11-01 (azure-mgmt-containerregistry 15.0.0's models, generated from
# specification/containerregistry/.../stable/2025-11-01): Registry is a TrackedResource with a required
# sku; RegistryProperties.adminUserEnabled and anonymousPullEnabled are writable; ImportImageParameters
# needs source (with sourceImage), targetTags and mode are optional; RegistryNameCheckRequest needs
# name and type. Microsoft.Authorization 2022-04-01: RoleAssignmentCreateParameters.properties with
# the required roleDefinitionId and principalId, and principalType (authorization.json).
REGISTRY_VERSION = "2025-11-01"
AUTHORIZATION_VERSION = "2022-04-01"
REGISTRY = {
    "required": ["location", "sku"],
    "props": {
        "location": S,
        "tags": TAGS,
        "sku": {"required": ["name"], "props": {"name": S}},
        "properties": {"props": {"adminUserEnabled": S, "anonymousPullEnabled": S}},
    },
}
IMPORT_IMAGE = {
    "required": ["source"],
    "props": {
        "source": {"required": ["sourceImage"], "props": {"registryUri": S, "sourceImage": S}},
        "targetTags": STRINGS,
        "mode": S,
    },
}
NAME_CHECK = {"required": ["name", "type"], "props": {"name": S, "type": S}}
ROLE_ASSIGNMENT = {
    "required": ["properties"],
    "props": {
        "properties": {
            "required": ["roleDefinitionId", "principalId"],
            # RoleAssignmentProperties.description (2022-04-01): queue mode's mark of its run
            "props": {"roleDefinitionId": S, "principalId": S, "principalType": S, "description": S},
        }
    },
}
# Microsoft.Storage 2026-09-01 (azure-mgmt-storage 25.3.0's models): StorageAccountCreateParameters
# needs sku, kind and location; of StorageAccountPropertiesCreateParameters acagpu writes three.
STORAGE_VERSION = "2026-09-01"
STORAGE_ACCOUNT = {
    "required": ["sku", "kind", "location"],
    "props": {
        "sku": {"required": ["name"], "props": {"name": S}},
        "kind": S,
        "location": S,
        "tags": TAGS,
        "properties": {
            "props": {"supportsHttpsTrafficOnly": S, "minimumTlsVersion": S, "allowBlobPublicAccess": S}
        },
    },
}
# ManagedEnvironments_Update (PATCH): a ManagedEnvironment; acagpu sends only its identity
# (ManagedServiceIdentity: type, userAssignedIdentities) to turn the system-assigned one on.
ENVIRONMENT_PATCH = {"props": {"identity": {"required": ["type"], "props": {"type": S}}}}

SUB = "/subscriptions/{subscriptionId}"
RG = SUB + "/resourceGroups/{resourceGroupName}"
APP = RG + "/providers/Microsoft.App"
LOGS = RG + "/providers/Microsoft.OperationalInsights"
ACR = RG + "/providers/Microsoft.ContainerRegistry"
STORAGE = RG + "/providers/Microsoft.Storage/storageAccounts/{accountName}"
QUEUE = STORAGE + "/queueServices/default/queues/{queueName}"  # a role assignment's scope
ASSIGNMENTS = "/providers/Microsoft.Authorization/roleAssignments"

# (method, path template, api-version, body schema or None for no body, operationId)
OPERATIONS: tuple[tuple[str, str, str | None, dict[str, Any] | None, str], ...] = (
    ("PUT", LOGS + "/workspaces/{workspaceName}", LOGS_VERSION, WORKSPACE, "Workspaces_CreateOrUpdate"),
    ("GET", LOGS + "/workspaces/{workspaceName}", LOGS_VERSION, None, "Workspaces_Get"),
    ("POST", LOGS + "/workspaces/{workspaceName}/sharedKeys", LOGS_VERSION, None, "SharedKeys_GetSharedKeys"),
    ("POST", "/v1/workspaces/{workspaceId}/query", None, LOGS_QUERY, "Query_Execute"),
    ("GET", SUB + "/providers/{resourceProviderNamespace}", RESOURCES_VERSION, None, "Providers_Get"),
    (
        "POST",
        SUB + "/providers/{resourceProviderNamespace}/register",
        RESOURCES_VERSION,
        None,
        "Providers_Register",
    ),
    ("GET", SUB + "/resourcegroups", RESOURCES_VERSION, None, "ResourceGroups_List"),
    ("GET", SUB + "/resourcegroups/{resourceGroupName}", RESOURCES_VERSION, None, "ResourceGroups_Get"),
    (
        "PUT",
        SUB + "/resourcegroups/{resourceGroupName}",
        RESOURCES_VERSION,
        RESOURCE_GROUP,
        "ResourceGroups_CreateOrUpdate",
    ),
    ("DELETE", SUB + "/resourcegroups/{resourceGroupName}", RESOURCES_VERSION, None, "ResourceGroups_Delete"),
    (
        "GET",
        SUB
        + "/providers/Microsoft.App/locations/{location}/availableManagedEnvironmentsWorkloadProfileTypes",
        APP_VERSION,
        None,
        "AvailableWorkloadProfiles_Get",
    ),
    ("GET", SUB + "/providers/Microsoft.App/locations/{location}/usages", APP_VERSION, None, "Usages_List"),
    ("GET", APP + "/managedEnvironments/{environmentName}", APP_VERSION, None, "ManagedEnvironments_Get"),
    (
        "PUT",
        APP + "/managedEnvironments/{environmentName}",
        APP_VERSION,
        MANAGED_ENVIRONMENT,
        "ManagedEnvironments_CreateOrUpdate",
    ),
    (
        "POST",
        APP + "/managedEnvironments/{environmentName}/getAuthtoken",
        APP_VERSION,
        None,
        "ManagedEnvironments_GetAuthToken",
    ),
    ("GET", APP + "/containerApps", APP_VERSION, None, "ContainerApps_ListByResourceGroup"),
    ("GET", APP + "/containerApps/{containerAppName}", APP_VERSION, None, "ContainerApps_Get"),
    (
        "PUT",
        APP + "/containerApps/{containerAppName}",
        APP_VERSION,
        CONTAINER_APP,
        "ContainerApps_CreateOrUpdate",
    ),
    (
        "PATCH",
        APP + "/containerApps/{containerAppName}",
        APP_VERSION,
        CONTAINER_APP_PATCH,
        "ContainerApps_Update",
    ),
    ("DELETE", APP + "/containerApps/{containerAppName}", APP_VERSION, None, "ContainerApps_Delete"),
    ("POST", APP + "/containerApps/{containerAppName}/start", APP_VERSION, None, "ContainerApps_Start"),
    ("POST", APP + "/containerApps/{containerAppName}/stop", APP_VERSION, None, "ContainerApps_Stop"),
    (
        "POST",
        APP + "/containerApps/{containerAppName}/getAuthtoken",
        APP_VERSION,
        None,
        "ContainerApps_GetAuthToken",
    ),
    (
        "GET",
        APP + "/containerApps/{containerAppName}/revisions/{revisionName}/replicas",
        APP_VERSION,
        None,
        "ContainerAppsRevisionReplicas_ListReplicas",
    ),
    ("GET", APP + "/jobs", APP_VERSION, None, "Jobs_ListByResourceGroup"),
    ("GET", APP + "/jobs/{jobName}", APP_VERSION, None, "Jobs_Get"),
    ("PUT", APP + "/jobs/{jobName}", APP_VERSION, JOB, "Jobs_CreateOrUpdate"),
    ("PATCH", APP + "/jobs/{jobName}", APP_VERSION, JOB_PATCH, "Jobs_Update"),
    ("DELETE", APP + "/jobs/{jobName}", APP_VERSION, None, "Jobs_Delete"),
    ("POST", APP + "/jobs/{jobName}/start", APP_VERSION, JOB_EXECUTION_TEMPLATE, "Jobs_Start"),
    ("GET", APP + "/jobs/{jobName}/executions", APP_VERSION, None, "JobsExecutions_List"),
    ("GET", APP + "/jobs/{jobName}/executions/{jobExecutionName}", APP_VERSION, None, "JobExecution"),
    (
        "POST",
        APP + "/jobs/{jobName}/executions/{jobExecutionName}/stop",
        APP_VERSION,
        None,
        "Jobs_StopExecution",
    ),
    (
        "GET",
        APP + "/managedEnvironments/{environmentName}/usages",
        APP_VERSION,
        None,
        "ManagedEnvironmentUsages_List",
    ),
    (
        "PATCH",
        APP + "/managedEnvironments/{environmentName}",
        APP_VERSION,
        ENVIRONMENT_PATCH,
        "ManagedEnvironments_Update",
    ),
    (
        "POST",
        SUB + "/providers/Microsoft.ContainerRegistry/checkNameAvailability",
        REGISTRY_VERSION,
        NAME_CHECK,
        "Registries_CheckNameAvailability",
    ),
    ("GET", ACR + "/registries/{registryName}", REGISTRY_VERSION, None, "Registries_Get"),
    ("PUT", ACR + "/registries/{registryName}", REGISTRY_VERSION, REGISTRY, "Registries_Create"),
    (
        "POST",
        ACR + "/registries/{registryName}/importImage",
        REGISTRY_VERSION,
        IMPORT_IMAGE,
        "Registries_ImportImage",
    ),
    (
        "PUT",
        ACR
        + "/registries/{registryName}/providers/Microsoft.Authorization/roleAssignments/{roleAssignmentName}",
        AUTHORIZATION_VERSION,
        ROLE_ASSIGNMENT,
        "RoleAssignments_Create",
    ),
    (
        "GET",
        RG + "/providers/Microsoft.Authorization/permissions",
        AUTHORIZATION_VERSION,
        None,
        "Permissions_ListForResourceGroup",
    ),
    # queue mode: the environment's storage account, and its workers' roles at each queue's scope
    # (RoleAssignments_Create / _ListForScope / _Delete take any `{scope}`; a queue's is this one)
    ("GET", STORAGE, STORAGE_VERSION, None, "StorageAccounts_GetProperties"),
    ("PUT", STORAGE, STORAGE_VERSION, STORAGE_ACCOUNT, "StorageAccounts_Create"),
    ("POST", STORAGE + "/listKeys", STORAGE_VERSION, None, "StorageAccounts_ListKeys"),
    (
        "PUT",
        QUEUE + ASSIGNMENTS + "/{roleAssignmentName}",
        AUTHORIZATION_VERSION,
        ROLE_ASSIGNMENT,
        "RoleAssignments_Create",
    ),
    ("GET", QUEUE + ASSIGNMENTS, AUTHORIZATION_VERSION, None, "RoleAssignments_ListForScope"),
    # a warm floor's role at its Event job's own scope (its idle worker drops the floor)
    (
        "PUT",
        APP + "/jobs/{jobName}" + ASSIGNMENTS + "/{roleAssignmentName}",
        AUTHORIZATION_VERSION,
        ROLE_ASSIGNMENT,
        "RoleAssignments_Create",
    ),
    (
        "GET",
        APP + "/jobs/{jobName}" + ASSIGNMENTS,
        AUTHORIZATION_VERSION,
        None,
        "RoleAssignments_ListForScope",
    ),
    (
        "DELETE",
        APP + "/jobs/{jobName}" + ASSIGNMENTS + "/{roleAssignmentName}",
        AUTHORIZATION_VERSION,
        None,
        "RoleAssignments_Delete",
    ),
    (
        "DELETE",
        QUEUE + ASSIGNMENTS + "/{roleAssignmentName}",
        AUTHORIZATION_VERSION,
        None,
        "RoleAssignments_Delete",
    ),
    # the environment's storages (which --mount names exist), read before a queue run's account is made
    (
        "GET",
        APP + "/managedEnvironments/{environmentName}/storages",
        APP_VERSION,
        None,
        "ManagedEnvironmentsStorages_List",
    ),
)

# The preview-only calls (in no public spec; aca_gpu/azure/preview.py): excluded, but only these.
PREVIEW_ONLY = (
    ("POST", APP + "/jobs/{jobName}/getAuthToken"),
    ("GET", APP + "/jobs/{jobName}/executions/{jobExecutionName}/replicas"),
)
