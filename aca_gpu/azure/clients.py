"""SDK clients built once per command: credential, subscription, endpoint override, retries, timeouts.

Endpoint override contract (the emulator and out-of-suite checks rely on it; keep it exactly):
`ACAGPU_ARM_ENDPOINT` replaces https://management.azure.com, `ACAGPU_CA_BUNDLE` is the PEM file to trust,
`ACAGPU_TOKEN` is a static bearer token (no Azure identity is used when set), `ACAGPU_SUBSCRIPTION`.
These arrive through `aca_gpu.config.Settings`; this module only applies them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from aca_gpu.config import EMULATOR_GONE_HINT, LOCAL_HOSTS, Settings
from aca_gpu.errors import AuthError, InfraError

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken, AccessTokenInfo, TokenCredential
    from azure.mgmt.appcontainers import ContainerAppsAPIClient
    from azure.mgmt.resource.resources import ResourceManagementClient
    from azure.mgmt.resourcegraph import ResourceGraphClient
    from azure.mgmt.storage import StorageManagementClient

ARM_SCOPE = "https://management.azure.com/.default"
STATIC_TOKEN_LIFETIME_S = 3600

# HTTP-level retries live here and nowhere else (docs/architecture.md): azure-core's RetryPolicy honours
# Retry-After on 429/503 and backs off exponentially on the rest.
RETRY_OPTIONS: dict[str, Any] = {
    "retry_total": 6,
    "retry_connect": 3,
    "retry_read": 3,
    "retry_status": 6,
    "retry_backoff_factor": 0.8,
    "retry_backoff_max": 60,
    "retry_on_status_codes": [408, 429, 500, 502, 503, 504],
}
TIMEOUT_OPTIONS: dict[str, Any] = {"connection_timeout": 20, "read_timeout": 120}
AZ_TIMEOUT_S = 30


def recording_on() -> bool:
    """Whether `--record` is on. It loads aca_gpu.recording when it starts; a command that has not
    loaded it records nothing, and need not load it (its sanitizer's patterns cost every start)."""
    module = sys.modules.get("aca_gpu.recording")
    return module is not None and module.active() is not None


class StaticTokenCredential:
    """A TokenCredential over a fixed bearer token (ACAGPU_TOKEN): emulator mode and CI smoke checks.

    The token never appears in repr/str, so it cannot leak through logs or tracebacks.
    """

    def __init__(self, token: str, lifetime_s: int = STATIC_TOKEN_LIFETIME_S) -> None:
        self._token = token
        self._lifetime_s = lifetime_s

    def __repr__(self) -> str:
        return "StaticTokenCredential(token=<hidden>)"

    __str__ = __repr__

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        from azure.core.credentials import AccessToken

        return AccessToken(self._token, int(time.time()) + self._lifetime_s)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        from azure.core.credentials import AccessTokenInfo

        return AccessTokenInfo(self._token, int(time.time()) + self._lifetime_s)

    def close(self) -> None:
        return None


def az_cli_subscription(az: str | None = None) -> str | None:
    """The az CLI's default subscription id, or None when az is missing or not logged in."""
    exe = az or shutil.which("az")
    if not exe:
        return None
    try:
        proc = subprocess.run(
            [exe, "account", "show", "--query", "id", "-o", "tsv"],
            capture_output=True,
            text=True,
            timeout=AZ_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = proc.stdout.strip()
    return value if proc.returncode == 0 and value else None


def resolve_subscription(
    settings: Settings, flag: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    """flag > settings (which already holds --subscription > ACAGPU_SUBSCRIPTION > config file >
    AZURE_SUBSCRIPTION_ID, resolved once in aca_gpu.config) > `az account show`."""
    env = os.environ if env is None else env
    for candidate in (
        flag,
        settings.subscription,
        env.get("ACAGPU_SUBSCRIPTION"),
        env.get("AZURE_SUBSCRIPTION_ID"),
    ):
        if candidate and candidate.strip():
            return candidate.strip()
    found = az_cli_subscription()
    if found:
        return found
    raise AuthError(
        "no Azure subscription: pass --subscription, set ACAGPU_SUBSCRIPTION or AZURE_SUBSCRIPTION_ID, "
        "or run `az login`",
        code="NoSubscription",
        hint="az login && az account set --subscription <id>; for `acagpu emulator serve`, "
        "source the env file it wrote first (`. FILE`)",
    )


def make_credential(settings: Settings) -> TokenCredential:
    """A static token when ACAGPU_TOKEN is set, else DefaultAzureCredential (az login, OIDC, MSI)."""
    if settings.token:
        return StaticTokenCredential(settings.token)
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential(exclude_interactive_browser_credential=True)


class Clients:
    """Lazily built SDK clients sharing one credential and one set of pipeline options.

    Tests hand in autospec'd `apps` / `resources`; real runs build them on first use so
    commands that never reach Azure never import the SDK.
    """

    def __init__(
        self,
        settings: Settings,
        subscription_id: str,
        *,
        credential: TokenCredential | None = None,
        apps: ContainerAppsAPIClient | None = None,
        resources: ResourceManagementClient | None = None,
    ) -> None:
        self.settings = settings
        self.subscription_id = subscription_id
        self._credential = credential
        self.rate_gate: Any = None  # the subscription's RateLimitGate, built with the first client
        if apps is not None:
            self.__dict__["apps"] = apps
        if resources is not None:
            self.__dict__["resources"] = resources

    def __repr__(self) -> str:
        return (
            f"Clients(subscription_id={self.subscription_id!r}, arm_endpoint={self.settings.arm_endpoint!r})"
        )

    @property
    def credential(self) -> TokenCredential:
        if self._credential is None:
            self._credential = make_credential(self.settings)
        return self._credential

    @property
    def verify(self) -> str | bool:
        """What data-plane HTTPS/WSS calls trust: the CA bundle when one is set."""
        return self.settings.ca_bundle or True

    def pipeline_options(self) -> dict[str, Any]:
        from aca_gpu.azure.api_versions import ApiVersionFallback
        from aca_gpu.azure.ratelimit import RateLimitGate
        from aca_gpu.azure.reads import read_retry_policy

        if self.rate_gate is None:
            self.rate_gate = RateLimitGate()
        options: dict[str, Any] = {
            **RETRY_OPTIONS,
            **TIMEOUT_OPTIONS,
            "polling_interval": self.settings.polling_interval,
            "credential_scopes": [ARM_SCOPE],
            # a region that refuses an api-version gets the next one (api_versions.py)
            "custom_hook_policy": ApiVersionFallback(),
            # an unreadable GET (an LRO status poll too) is read again, backing off (reads.py)
            "per_call_policies": [read_retry_policy(self.settings.polling_interval)],
            # every try of a write waits while the subscription's bucket is known empty (ratelimit.py)
            "per_retry_policies": [self.rate_gate],
        }
        if recording_on():
            from aca_gpu.azure.recorder import policy_options

            options.update(policy_options())
        if self.settings.arm_endpoint:
            options["base_url"] = self.settings.arm_endpoint.rstrip("/")
        if self.settings.ca_bundle:
            options["connection_verify"] = self.settings.ca_bundle
        return options

    @cached_property
    def apps(self) -> ContainerAppsAPIClient:
        from azure.mgmt.appcontainers import ContainerAppsAPIClient

        return ContainerAppsAPIClient(self.credential, self.subscription_id, **self.pipeline_options())

    @cached_property
    def costmanagement(self) -> Any:
        """Scope-based (no subscription argument): queries name their scope."""
        from azure.mgmt.costmanagement import CostManagementClient

        return CostManagementClient(self.credential, **self.pipeline_options())

    @cached_property
    def resources(self) -> ResourceManagementClient:
        from azure.mgmt.resource.resources import ResourceManagementClient

        return ResourceManagementClient(self.credential, self.subscription_id, **self.pipeline_options())

    @cached_property
    def storage(self) -> StorageManagementClient:
        """Storage accounts and Azure Files shares (what `run --create-share` makes)."""
        from azure.mgmt.storage import StorageManagementClient

        return StorageManagementClient(self.credential, self.subscription_id, **self.pipeline_options())

    @cached_property
    def registry(self) -> Any:
        """Container registries (what `acagpu image stage` makes and imports into)."""
        from azure.mgmt.containerregistry import ContainerRegistryManagementClient

        return ContainerRegistryManagementClient(
            self.credential, self.subscription_id, **self.pipeline_options()
        )

    @cached_property
    def loganalytics(self) -> Any:
        """Log Analytics workspaces (where an environment acagpu makes keeps its console lines)."""
        from azure.mgmt.loganalytics import LogAnalyticsManagementClient

        return LogAnalyticsManagementClient(self.credential, self.subscription_id, **self.pipeline_options())

    @cached_property
    def logs_query(self) -> Any:
        """The Log Analytics query API (its own host; the emulator's own with ACAGPU_ARM_ENDPOINT)."""
        from urllib.parse import urlparse

        from azure.monitor.query import LogsQueryClient

        options: dict[str, Any] = {**RETRY_OPTIONS, **TIMEOUT_OPTIONS}
        if recording_on():
            from aca_gpu.azure.recorder import policy_options

            options.update(policy_options())
        if self.settings.arm_endpoint:
            parsed = urlparse(self.settings.arm_endpoint)
            options["endpoint"] = f"{parsed.scheme}://{parsed.netloc}"
        if self.settings.ca_bundle:
            options["connection_verify"] = self.settings.ca_bundle
        return LogsQueryClient(self.credential, **options)

    @cached_property
    def graph(self) -> ResourceGraphClient:
        """Resource Graph is tenant-level: no subscription in its client, the scope is in each query."""
        from azure.mgmt.resourcegraph import ResourceGraphClient

        return ResourceGraphClient(self.credential, **self.pipeline_options())


def make_clients(settings: Settings, subscription: str | None = None) -> Clients:
    emulator_listening(settings.arm_endpoint)
    return Clients(settings, resolve_subscription(settings, subscription))


def emulator_listening(endpoint: str | None) -> None:
    """An ARM endpoint on this machine is an emulator's: when nothing listens there any more (it was
    stopped, or this shell sourced an older start's env file), say so at once, rather than after
    the 30 s of retries a real, briefly unreachable ARM deserves. Anything else is left to them."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(endpoint or "")
    if url.hostname not in LOCAL_HOSTS:
        return
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=2.0).close()
    except ConnectionRefusedError:
        raise InfraError(
            f"nothing listens at ACAGPU_ARM_ENDPOINT {endpoint} (connection refused): the emulator "
            "it names is not running",
            code="EmulatorNotRunning",
            hint=EMULATOR_GONE_HINT,
        ) from None
    except OSError:
        return
