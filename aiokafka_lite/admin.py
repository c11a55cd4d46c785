"""A minimal aiokafka-compatible admin client: create/delete/list topics, describe the cluster.

Topic-level errors are raised as their :mod:`aiokafka_lite.errors` class (e.g.
``TopicAlreadyExistsError``) after the whole answer is read; on success the decoded response
is returned, as aiokafka does.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import errors as Errors
from .client import KafkaClient
from .protocol import messages as m

__all__ = ["AIOKafkaAdminClient", "NewTopic"]

log = logging.getLogger(__name__)

_NOT_CONTROLLER = 41


class _Response:
    """A decoded response that also answers aiokafka's ``to_object()`` (frameworks written for
    aiokafka, e.g. FastStream, read topic results through it); other attributes are the
    response's own."""

    def __init__(self, response: Any, obj: dict[str, Any]) -> None:
        self._response = response
        self._obj = obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    def __repr__(self) -> str:
        return repr(self._response)

    def to_object(self) -> dict[str, Any]:
        """The response as aiokafka's nested dict (aiokafka's field names)."""
        return self._obj


class NewTopic:
    """A topic to create: ``num_partitions``/``replication_factor`` or an explicit assignment.

    ``replica_assignments`` maps partition id -> list of broker ids (then pass -1 for
    ``num_partitions`` and ``replication_factor``); ``topic_configs`` maps config name -> value.
    """

    def __init__(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        replica_assignments: Mapping[int, Sequence[int]] | None = None,
        topic_configs: Mapping[str, str | None] | None = None,
        *,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        assignment = replica_assignments if replica_assignments is not None else replica_assignment
        if not ((num_partitions == -1 or replication_factor == -1) ^ (assignment is None)):
            raise Errors.IllegalArgumentError(
                "either num_partitions/replication_factor or replica_assignment must be specified"
            )
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments: dict[int, list[int]] = {
            int(p): list(b) for p, b in (assignment or {}).items()
        }
        self.topic_configs: dict[str, str | None] = dict(topic_configs or {})

    @property
    def replica_assignment(self) -> dict[int, list[int]]:
        """Alias of ``replica_assignments``."""
        return self.replica_assignments

    def __repr__(self) -> str:
        return (
            f"NewTopic(name={self.name!r}, num_partitions={self.num_partitions}, "
            f"replication_factor={self.replication_factor})"
        )


class AIOKafkaAdminClient:
    """Administer topics and inspect the cluster (a subset of aiokafka's admin client)."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | Iterable[str] = "localhost",
        client_id: str = "aiokafka_lite-admin",
        request_timeout_ms: int = 40000,
        connections_max_idle_ms: int = 540000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        **_unused: Any,
    ) -> None:
        self._request_timeout_ms = request_timeout_ms
        self._client = KafkaClient(
            bootstrap_servers=bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            connections_max_idle_ms=connections_max_idle_ms,
            retry_backoff_ms=retry_backoff_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            security_protocol=security_protocol,
            ssl_context=ssl_context,
            sasl_mechanism=sasl_mechanism,
            sasl_plain_username=sasl_plain_username,
            sasl_plain_password=sasl_plain_password,
        )
        self._started = False
        self._closed = False

    async def start(self) -> None:
        """Connect to the cluster (bootstrap + first metadata)."""
        if self._started:
            return
        await self._client.start()
        self._started = True

    async def close(self) -> None:
        """Close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._client.close()

    async def __aenter__(self) -> AIOKafkaAdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --------------------------------------------------------------- helpers

    async def _controller(self) -> int:
        controller = self._client.cluster.controller_id
        if controller < 0 or self._client.cluster.broker_metadata(controller) is None:
            await self._refresh()
            controller = self._client.cluster.controller_id
        if controller < 0:  # very old brokers: any broker forwards admin requests
            controller = self._client.least_loaded_node()
        return controller

    async def _refresh(self) -> None:
        try:
            await asyncio.wait_for(
                asyncio.shield(self._client.request_update()), self._request_timeout_ms / 1000
            )
        except asyncio.TimeoutError:
            raise Errors.KafkaTimeoutError("metadata refresh timed out") from None

    async def _send_to_controller(self, request: Any, codes: Any) -> Any:
        """Send to the controller; retry once on NOT_CONTROLLER after a metadata refresh."""
        resp = await self._client.send(await self._controller(), request)
        if any(code == _NOT_CONTROLLER for code, _name, _msg in codes(resp)):
            await self._refresh()
            resp = await self._client.send(await self._controller(), request)
        return resp

    @staticmethod
    def _raise_first(results: Iterable[tuple[int, str, str | None]], what: str) -> None:
        for code, name, msg in results:
            if code:
                raise Errors.for_code(code)(
                    f"{what} {name!r}: {msg}" if msg else f"{what} {name!r}"
                )

    # ---------------------------------------------------------------- topics

    async def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> Any:
        """Create topics; raises the first topic's error (e.g. TopicAlreadyExistsError)."""
        request = m.CreateTopicsRequest(
            topics=[
                m.CreateTopicsRequest.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=[
                        m.CreateTopicsRequest.CreatableReplicaAssignment(
                            partition_index=p, broker_ids=b
                        )
                        for p, b in sorted(t.replica_assignments.items())
                    ],
                    configs=[
                        m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                        for k, v in t.topic_configs.items()
                    ],
                )
                for t in new_topics
            ],
            timeout_ms=timeout_ms if timeout_ms is not None else self._request_timeout_ms,
            validate_only=validate_only,
        )

        def codes(resp: Any) -> list[tuple[int, str, str | None]]:
            return [(t.error_code, t.name, t.error_message) for t in resp.topics]

        resp = await self._send_to_controller(request, codes)
        self._raise_first(codes(resp), "create topic")
        topic_errors = [
            {"topic": name, "error_code": code, "error_message": msg}
            for code, name, msg in codes(resp)
        ]
        return _Response(
            resp, {"throttle_time_ms": resp.throttle_time_ms, "topic_errors": topic_errors}
        )

    async def delete_topics(self, topics: Sequence[str], timeout_ms: int | None = None) -> Any:
        """Delete topics by name; raises the first topic's error (e.g. UnknownTopicOrPartitionError)."""
        request = m.DeleteTopicsRequest(
            # both shapes: names (v0-5) and topic states (v6+); the codec writes the right one
            topic_names=list(topics),
            topics=[m.DeleteTopicsRequest.DeleteTopicState(name=t) for t in topics],
            timeout_ms=timeout_ms if timeout_ms is not None else self._request_timeout_ms,
        )

        def codes(resp: Any) -> list[tuple[int, str, str | None]]:
            return [(r.error_code, r.name, r.error_message) for r in resp.responses]

        resp = await self._send_to_controller(request, codes)
        self._raise_first(codes(resp), "delete topic")
        return resp

    async def _metadata(self, topics: Sequence[str] | None) -> Any:
        request = m.MetadataRequest(
            topics=None
            if topics is None
            else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        return await self._client.send_least_loaded(request)

    async def list_topics(self) -> list[str]:
        """Names of all topics (internal ones included, like aiokafka)."""
        resp = await self._metadata(None)
        return [t.name for t in resp.topics if t.name is not None]

    async def describe_topics(self, topics: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Per-topic metadata as dicts (``topic``, ``error_code``, ``is_internal``, ``partitions``)."""
        resp = await self._metadata(topics)
        return [
            {
                "error_code": t.error_code,
                "topic": t.name,
                "is_internal": t.is_internal,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition": p.partition_index,
                        "leader": p.leader_id,
                        "replicas": list(p.replica_nodes),
                        "isr": list(p.isr_nodes),
                        "offline_replicas": list(p.offline_replicas),
                    }
                    for p in t.partitions
                ],
            }
            for t in resp.topics
        ]

    async def describe_cluster(self) -> dict[str, Any]:
        """``{"cluster_id", "controller_id", "brokers": [{"node_id", "host", "port", "rack"}]}``."""
        resp = await self._metadata([])
        return {
            "throttle_time_ms": resp.throttle_time_ms,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in resp.brokers
            ],
            "cluster_id": resp.cluster_id,
            "controller_id": resp.controller_id,
        }

    async def find_coordinator(self, group_id: str, coordinator_type: int = 0) -> int:
        """Node id of the coordinator of ``group_id`` (0) or a transactional id (1)."""
        return await self._client.find_coordinator(group_id, coordinator_type)
