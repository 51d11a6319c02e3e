"""A storage account's queues through the Azure SDK for Storage Queues (queue mode's data plane).

The client signs with the account key (listKeys, held in memory for the client's life, never
printed or stored), as the results share does: the user who may run jobs in the environment's
group may read its account's keys, while a data-plane role would have to be granted first. The
workers sign in with their job's managed identity instead (no key in any template). `endpoint` is
the account's `primaryEndpoints.queue`: Azure's `https://{account}.queue.core.windows.net/`, or
the emulator's path-style URL in front of Azurite.

Messages are text as the service keeps it: the caller sends base64 (XML-safe) and reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.storage.queue import QueueServiceClient

from aca_gpu.azure import recorder
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.resources import as_json
from aca_gpu.azure.shards import account_key
from aca_gpu.azure.translate import retrying
from aca_gpu.errors import InfraError
from aca_gpu.models import QueueMessage

SEND_THREADS = 8  # one message per request: a few at once fill a queue of thousands in seconds


def default_endpoint(account: str) -> str:
    return f"https://{account}.queue.core.windows.net/"


class StorageQueues:
    """Implements `models.Queues` for one account."""

    def __init__(self, account: str, key: str, endpoint: str, verify: str | bool) -> None:
        self.account, self.endpoint = account, endpoint
        self._service = QueueServiceClient(
            account_url=endpoint.rstrip("/"),
            credential={"account_name": account, "account_key": key},
            connection_verify=verify,
            **recorder.storage_options(verify),
        )

    def __repr__(self) -> str:
        return f"StorageQueues({self.account!r})"  # never the key

    def _failed(self, what: str, queue: str, exc: AzureError) -> InfraError:
        # the Storage SDK's message goes on with `\nRequestId:...\nErrorCode:...`: one line is said
        said = str(exc.message or exc).strip().splitlines()[0] if str(exc.message or exc).strip() else ""
        return InfraError(f"queue {queue} in {self.account}: {what} failed: {said or type(exc).__name__}")

    def create(self, queue: str, metadata: Mapping[str, str] | None = None) -> None:
        """`metadata`: the queue's marks (queue mode's `acagpu_run_id`, what a delete checks first)."""
        try:
            self._service.create_queue(queue, metadata=dict(metadata or {}))
        except ResourceExistsError:
            return
        except AzureError as exc:
            raise self._failed("create", queue, exc) from None

    def metadata(self, queue: str) -> dict[str, str] | None:
        props = self._properties(queue)
        return None if props is None else {str(k).lower(): str(v) for k, v in (props.metadata or {}).items()}

    def delete(self, queue: str) -> None:
        try:
            self._service.delete_queue(queue)
        except ResourceNotFoundError:
            return
        except AzureError as exc:
            raise self._failed("delete", queue, exc) from None

    def send(self, queue: str, texts: Sequence[str]) -> None:
        client = self._service.get_queue_client(queue)

        def one(text: str) -> None:
            client.send_message(text, time_to_live=-1)  # an item waits as long as the run does

        try:
            with ThreadPoolExecutor(SEND_THREADS) as pool:
                list(pool.map(one, texts))
        except AzureError as exc:
            raise self._failed("send", queue, exc) from None

    def receive(self, queue: str, count: int, visibility_s: int) -> list[QueueMessage]:
        client = self._service.get_queue_client(queue)
        try:
            found = client.receive_messages(
                messages_per_page=min(32, count), visibility_timeout=visibility_s, max_messages=count
            )
            return [
                QueueMessage(
                    id=str(m.id),
                    pop_receipt=str(m.pop_receipt),
                    text=str(m.content),
                    dequeue_count=int(m.dequeue_count or 1),
                )
                for m in found
            ]
        except AzureError as exc:
            raise self._failed("receive", queue, exc) from None

    def delete_message(self, queue: str, message: QueueMessage) -> None:
        try:
            self._service.get_queue_client(queue).delete_message(message.id, message.pop_receipt)
        except ResourceNotFoundError:
            return  # already gone (a receive's answer lost, then taken again)
        except AzureError as exc:
            raise self._failed("delete message", queue, exc) from None

    def length(self, queue: str) -> int | None:
        props = self._properties(queue)
        return None if props is None else int(props.approximate_message_count or 0)

    def _properties(self, queue: str) -> Any:
        """The queue's properties (its metadata, its approximate length), or None when it is gone."""
        try:
            return self._service.get_queue_client(queue).get_queue_properties()
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise self._failed("read", queue, exc) from None


def storage_queues(clients: Clients, rg: str, account: str) -> StorageQueues:
    key = account_key(clients, rg, account)
    props = as_json(
        retrying(
            "read storage account",
            account,
            lambda: clients.storage.storage_accounts.get_properties(rg, account),
        )
    )
    endpoints: Any = (props.get("properties") or props).get("primaryEndpoints") or {}
    endpoint = endpoints.get("queue") if isinstance(endpoints, Mapping) else None
    return StorageQueues(account, key, str(endpoint or default_endpoint(account)), clients.verify)
