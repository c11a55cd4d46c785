"""``AIOKafkaAdminClient``: aiokafka 0.14's admin surface, plus what ops tooling needs.

Every method is a thin call into :mod:`aiokafka_lite.ops` (which builds, routes, retries and
parses); this module only converts between aiokafka's argument and result shapes and the
operations layer's plain results.

aiokafka's behaviour is kept where code may rely on it: ``create_topics`` / ``delete_topics``
return per-topic error codes instead of raising; ``create_partitions``, ``delete_records`` and
``list_consumer_group_offsets`` raise the first per-item error; the response objects have
aiokafka's attribute names (see :mod:`._responses`).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import ssl
import warnings
from collections.abc import Mapping
from typing import Any

from .. import errors as Errors
from .._metrics import ClientMetrics
from .._settings import ClientSettings
from ..ops import Deadline, ItemError, raise_item_errors
from ..ops import configs as config_ops
from ..ops import groups as group_ops
from ..ops import offsets as offset_ops
from ..ops import topics as topic_ops
from ..ops.telemetry import CLOSE_TIMEOUT_S, admin_metric_names, new_pusher
from ..structs import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from . import _responses as R
from ._cluster import ClusterAdmin
from ._reset import EARLIEST, LATEST, reset_offsets
from ._share import ShareGroupAdmin
from ._txn import TransactionAdmin
from .config_resource import ConfigResource, by_target
from .new_partitions import NewPartitions
from .new_topic import NewTopic
from .records_to_delete import RecordsToDelete

__all__ = ["AIOKafkaAdminClient"]

log = logging.getLogger(__name__)


#: ``reset_consumer_group_offsets`` targets


class AIOKafkaAdminClient(ShareGroupAdmin, ClusterAdmin, TransactionAdmin):
    """Administer topics, configs, consumer groups, offsets and ACLs of a Kafka cluster.

    Keyword arguments are aiokafka's (``api_version`` and ``loop`` are accepted and ignored;
    Kerberos settings are accepted for compatibility only). An unknown keyword argument
    raises TypeError. ``enable_metrics_push=True`` (KIP-714; off by default, as Java's
    ``Admin``) pushes :meth:`metrics` when the cluster subscribes to them.
    """

    def __init__(
        self,
        *,
        loop: Any = None,
        bootstrap_servers: str | list[str] = "localhost",
        client_id: str = "aiokafka_lite-admin",
        request_timeout_ms: int = 40000,
        connections_max_idle_ms: int = 540000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        metadata_recovery_strategy: str = "rebootstrap",
        metadata_recovery_rebootstrap_trigger_ms: int = 300000,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        api_version: Any = None,
        sasl_mechanism: str = "PLAIN",
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
        enable_metrics_push: bool = False,
    ) -> None:
        if api_version is not None:
            warnings.warn(
                "api_version is ignored: versions are negotiated with each broker",
                DeprecationWarning,
                stacklevel=2,
            )
        # looking at a topic must never create it
        self._settings = ClientSettings.of(locals(), allow_auto_topic_creation=False)
        self._metrics = ClientMetrics()
        self._client = self._settings.new_client([self._metrics])
        self._telemetry = new_pusher(
            enable_metrics_push, self._client, self.metrics, admin_metric_names, client_id
        )
        self._started = False
        self._closed = False

    async def start(self) -> None:
        """Connect to the cluster (bootstrap + first metadata)."""
        if self._started:
            return
        await self._client.start()
        self._started = True
        if self._telemetry is not None:
            self._telemetry.start()

    async def close(self) -> None:
        """Close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._telemetry is not None:  # KIP-714: the last push, terminating
                await self._telemetry.close(CLOSE_TIMEOUT_S)
        finally:
            if self._telemetry is not None:
                self._telemetry.abandon()
            await self._client.close()

    def metrics(self) -> dict[str, Any]:
        """The connection and request counters of :meth:`AIOKafkaProducer.metrics` (beyond
        aiokafka; Java's ``admin-client-metrics`` names)."""
        return self._metrics.common_snapshot()

    async def __aenter__(self) -> AIOKafkaAdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- topics

    async def create_topics(
        self,
        new_topics: list[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> R.CreateTopicsResponse:
        """Create topics at the controller.

        Per-topic errors are NOT raised (as aiokafka): check ``response.topic_errors``, a list
        of ``(topic, error_code, error_message)``.
        """
        specs = [
            topic_ops.TopicSpec(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=t.replica_assignments or None,
                configs=t.topic_configs,
            )
            for t in new_topics
        ]
        results = await topic_ops.create_topics(
            self._client,
            specs,
            timeout_ms=timeout_ms or None,
            validate_only=validate_only,
        )
        return R.CreateTopicsResponse(
            throttle_time_ms=0,
            topic_errors=[R.TopicError(r.name, r.error_code, r.error_message) for r in results],
        )

    async def delete_topics(
        self, topics: list[str], timeout_ms: int | None = None
    ) -> R.DeleteTopicsResponse:
        """Delete topics at the controller.

        Per-topic errors are NOT raised (as aiokafka): check ``response.topic_error_codes``, a
        list of ``(topic, error_code)``. Deletion is asynchronous on Apache Kafka: the topic may
        still be listed for a moment.
        """
        results = await topic_ops.delete_topics(
            self._client, list(topics), timeout_ms=timeout_ms or None
        )
        return R.DeleteTopicsResponse(
            throttle_time_ms=0,
            topic_error_codes=[R.TopicErrorCode(r.name, r.error_code) for r in results],
        )

    async def _get_cluster_metadata(self, topics: list[str] | None = None) -> Any:
        """aiokafka's name: the Metadata response for ``topics`` (None: every topic)."""
        return await topic_ops.metadata(self._client, topics)

    async def list_topics(self) -> list[str]:
        """Names of all topics (internal ones included, like aiokafka)."""
        resp = await topic_ops.metadata(self._client, None)
        return [t.name for t in resp.topics if t.name is not None]

    async def describe_topics(self, topics: list[str] | None = None) -> list[Any]:
        """Per-topic metadata as dicts (``topic``, ``error_code``, ``is_internal``, ``partitions``)."""
        resp = await topic_ops.metadata(self._client, topics)
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
        """``{"throttle_time_ms", "brokers": [{"node_id", "host", "port", "rack"}], "cluster_id",
        "controller_id"}``."""
        resp = await topic_ops.metadata(self._client, [])
        return {
            "throttle_time_ms": resp.throttle_time_ms,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in resp.brokers
            ],
            "cluster_id": resp.cluster_id,
            "controller_id": resp.controller_id,
        }

    async def create_partitions(
        self,
        topic_partitions: dict[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> R.CreatePartitionsResponse:
        """Grow topics to ``NewPartitions.total_count`` partitions; raises the first topic's
        error (e.g. InvalidPartitionsError), as aiokafka does."""
        counts = {
            topic: (np.total_count, np.new_assignments) for topic, np in topic_partitions.items()
        }
        results = await topic_ops.create_partitions(
            self._client,
            counts,
            timeout_ms=timeout_ms or None,
            validate_only=validate_only,
        )
        for r in results:
            if r.error is not None:
                raise r.error.exception(f"Could not create partitions for {r.name}")
        return R.CreatePartitionsResponse(
            throttle_time_ms=0,
            topic_errors=[R.TopicError(r.name, r.error_code, r.error_message) for r in results],
        )

    # --------------------------------------------------------------- configs

    @staticmethod
    def _resource(res: ConfigResource, configs: Any) -> config_ops.Resource:
        return config_ops.Resource(int(res.resource_type), str(res.name), configs)

    async def describe_configs(
        self,
        config_resources: list[ConfigResource],
        include_synonyms: bool = False,
    ) -> list[R.DescribeConfigsResponse]:
        """Describe configs: one response per broker asked (broker resources go to that broker),
        then one for the topic resources. A resource's ``configs`` keys filter the names (None:
        all). Per-resource errors are in ``resources[i].error_code``."""
        brokers, others = by_target(config_resources)
        batches = [*brokers.values(), *([others] if others else [])]

        async def one(batch: list[ConfigResource]) -> R.DescribeConfigsResponse:
            wanted = [
                self._resource(r, None if r.configs is None else list(r.configs)) for r in batch
            ]
            results = await config_ops.describe_configs(
                self._client, wanted, include_synonyms=include_synonyms
            )
            return R.DescribeConfigsResponse(
                throttle_time_ms=0,
                resources=[
                    R.DescribedResource(
                        res.error_code,
                        res.error_message,
                        res.type,
                        res.name,
                        [
                            R.ConfigEntry(
                                e.name,
                                e.value,
                                e.read_only,
                                e.source,
                                e.is_sensitive,
                                [R.ConfigSynonym(*s) for s in e.synonyms],
                            )
                            for e in res.entries
                        ],
                    )
                    for res in results
                ],
            )

        return list(await asyncio.gather(*(one(b) for b in batches)))

    async def alter_configs(
        self, config_resources: list[ConfigResource]
    ) -> list[R.AlterConfigsResponse]:
        """Replace the dynamic configs of resources (AlterConfigs: configs not named revert to
        their defaults; prefer :meth:`incremental_alter_configs`). Returns the topic response
        first, then one per broker, as aiokafka."""
        brokers, others = by_target(config_resources)
        batches = [others, *brokers.values()]

        async def one(batch: list[ConfigResource]) -> R.AlterConfigsResponse:
            if not batch:
                return R.altered([], R.AlterConfigsResponse)
            results = await config_ops.alter_configs(
                self._client, [self._resource(r, dict(r.configs or {})) for r in batch]
            )
            return R.altered(results, R.AlterConfigsResponse)

        return list(await asyncio.gather(*(one(b) for b in batches)))

    async def incremental_alter_configs(
        self, config_resources: list[ConfigResource], validate_only: bool = False
    ) -> list[R.IncrementalAlterConfigsResponse]:
        """Change only the named configs (IncrementalAlterConfigs). Each value is a string
        (set), None (delete: back to the default) or ``(op, value)`` with op one of
        ``"set"``, ``"delete"``, ``"append"``, ``"subtract"``. One response per target (the
        topic resources, then each broker); per-resource errors in ``resources``."""
        ops = {
            "set": config_ops.AlterOp.SET,
            "delete": config_ops.AlterOp.DELETE,
            "append": config_ops.AlterOp.APPEND,
            "subtract": config_ops.AlterOp.SUBTRACT,
        }

        def changes(res: ConfigResource) -> dict[str, tuple[int, str | None]]:
            out: dict[str, tuple[int, str | None]] = {}
            for name, value in (res.configs or {}).items():
                if value is None:
                    out[name] = (config_ops.AlterOp.DELETE, None)
                elif isinstance(value, tuple):
                    op, val = value
                    if op not in ops:
                        raise Errors.IllegalArgumentError(
                            f"config {name!r}: unknown operation {op!r}; expected one of {sorted(ops)}"
                        )
                    out[name] = (ops[op], None if val is None else str(val))
                else:
                    out[name] = (config_ops.AlterOp.SET, str(value))
            return out

        brokers, others = by_target(config_resources)
        batches = [b for b in (others, *brokers.values()) if b]
        wanted = [[self._resource(r, changes(r)) for r in b] for b in batches]
        answers = await asyncio.gather(
            *(
                config_ops.alter_configs(
                    self._client, w, validate_only=validate_only, incremental=True
                )
                for w in wanted
            )
        )
        return [R.altered(a, R.IncrementalAlterConfigsResponse) for a in answers]

    # ---------------------------------------------------------------- groups

    async def find_coordinator(self, group_id: str, coordinator_type: int = 0) -> int:
        """Node id of the coordinator of ``group_id`` (0) or a transactional id (1): a fresh
        FindCoordinator (its answer refreshes the client's coordinator cache)."""
        return await group_ops.find_coordinator(
            self._client, group_id, coordinator_type, fresh=True
        )

    async def describe_consumer_groups(
        self,
        group_ids: list[str],
        group_coordinator_id: int | None = None,
        include_authorized_operations: bool = False,
    ) -> list[R.DescribeGroupsResponse]:
        """Describe groups (at their coordinators, or all at ``group_coordinator_id``).

        As aiokafka: one DescribeGroupsResponse per coordinator node, whose ``groups`` is
        ``[(error_code, group, state, protocol_type, protocol, members)]`` (plus
        ``authorized_operations`` when asked for), members being
        ``(member_id, client_id, client_host, member_metadata, member_assignment)``.
        Group errors such as GROUP_ID_NOT_FOUND are in ``error_code``, not raised. The
        look-ups (the client's coordinator cache first) and the requests, retried at a
        coordinator looked up again when it moved, share one request_timeout_ms budget.
        """
        deadline = Deadline.of(self._client, None)
        by_node: dict[int, list[str]] = {}
        for gid in dict.fromkeys(group_ids):
            node = group_coordinator_id
            if node is None:
                node = await group_ops.find_coordinator(self._client, gid, deadline=deadline)
            by_node.setdefault(node, []).append(gid)

        async def one(node: int, gids: list[str]) -> R.DescribeGroupsResponse:
            found = await group_ops.describe_groups(
                self._client,
                gids,
                include_authorized_operations=include_authorized_operations,
                coordinator=node,
                timeout_ms=max(1.0, deadline.remaining_ms),
            )
            return R.DescribeGroupsResponse(
                throttle_time_ms=0,
                groups=[
                    R.described_group(d, gid, include_authorized_operations)
                    for gid in gids
                    if (d := found.get(gid)) is not None
                ],
            )

        return list(await asyncio.gather(*(one(n, g) for n, g in by_node.items())))

    async def list_consumer_groups(
        self, broker_ids: list[int] | None = None
    ) -> list[tuple[Any, ...]]:
        """``[(group_id, protocol_type)]`` of every group the brokers (default: all) coordinate.

        A broker's error is raised (e.g. GroupLoadInProgressError).
        """
        groups = await group_ops.list_groups(self._client, broker_ids)
        return [(g.group_id, g.protocol_type) for g in groups]

    async def describe_groups(
        self, group_ids: list[str], include_authorized_operations: bool = False
    ) -> dict[str, group_ops.GroupDescription]:
        """Beyond aiokafka (as Java's describeConsumerGroups): ``{group_id: GroupDescription}``
        with state, protocol and members whose consumer assignments are decoded. A group's
        coordinator error is raised; other group errors are in ``GroupDescription.error``."""
        found = await group_ops.describe_groups(
            self._client, group_ids, include_authorized_operations=include_authorized_operations
        )
        out: dict[str, group_ops.GroupDescription] = {}
        for gid, d in found.items():
            if isinstance(d, ItemError):
                raise d.exception(f"DescribeGroups of {gid!r}")
            out[gid] = d
        return out

    async def list_groups(
        self,
        broker_ids: list[int] | None = None,
        *,
        states: list[str] | None = None,
        group_types: list[str] | None = None,
    ) -> list[group_ops.ListedGroup]:
        """Beyond aiokafka: every group with its state, type and coordinator, sorted by id;
        only those in ``states`` (``"Stable"``, ``"Empty"``, ...) or of ``group_types``
        (``"classic"``, ``"consumer"``: KIP-848) when given (Java's ListGroupsOptions)."""
        return await group_ops.list_groups(
            self._client, broker_ids, states=states or (), types=group_types or ()
        )

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: int | None = None,
        partitions: list[TopicPartition] | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of ``group_id``: every committed partition, or ``partitions``
        (then offset -1 means "nothing committed"). The first partition error is raised."""
        committed = await offset_ops.fetch_committed(
            self._client,
            group_id,
            None if not partitions else [TopicPartition(*tp) for tp in partitions],
            coordinator=group_coordinator_id,
        )
        raise_item_errors(committed, f"OffsetFetch of group {group_id!r} for")
        return {tp: om for tp, om in committed.items() if isinstance(om, OffsetAndMetadata)}

    async def delete_consumer_groups(
        self, group_ids: list[str]
    ) -> dict[str, Errors.KafkaError | None]:
        """Delete groups (they must have no members): ``{group_id: None | its error}``
        (e.g. NonEmptyGroup, GroupIdNotFound)."""
        res = await group_ops.delete_groups(self._client, group_ids)
        return {
            gid: (None if err is None else err.exception(f"DeleteGroups of {gid!r}"))
            for gid, err in res.items()
        }

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> None:
        """Forget the committed offsets of ``partitions`` in ``group_id`` (OffsetDelete); the
        first error (e.g. GroupSubscribedToTopic) is raised."""
        codes = await group_ops.delete_offsets(self._client, group_id, partitions)
        for tp, code in codes.items():
            if code:
                raise ItemError(code).exception(f"OffsetDelete of {tp} in {group_id!r}")

    async def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
    ) -> None:
        """Commit ``offsets`` for ``group_id`` from outside the group. The group must have no
        active members (the broker answers UNKNOWN_MEMBER_ID otherwise); the first partition
        error is raised."""
        codes = await offset_ops.commit_offsets(self._client, group_id, offsets)
        for tp, code in codes.items():
            if code:
                raise ItemError(code).exception(f"OffsetCommit of {tp} in {group_id!r}")

    async def reset_consumer_group_offsets(
        self,
        group_id: str,
        to: str | int | _dt.datetime | Mapping[TopicPartition, int],
        partitions: list[TopicPartition] | None = None,
        *,
        dry_run: bool = False,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Move ``group_id``'s committed offsets, as ``kafka-consumer-groups --reset-offsets``.

        ``to``: ``"earliest"``, ``"latest"``, a :class:`datetime.datetime` (the first offset at or
        after it; the end when none), an int (that offset, clamped to the log's bounds) or
        ``{tp: offset}``. ``partitions`` defaults to the ones the group has committed (or the
        mapping's keys). The group must be empty (NonEmptyGroup otherwise). Returns the new
        offsets; with ``dry_run`` nothing is committed.
        """
        return await reset_offsets(
            self._client,
            group_id,
            to,
            partitions,
            dry_run=dry_run,
            commit=self.alter_consumer_group_offsets,
        )

    # --------------------------------------------------------------- offsets

    async def list_offsets(
        self,
        offsets: Mapping[TopicPartition, str | int],
        isolation_level: str = "read_uncommitted",
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """ListOffsets for many partitions: ``{tp: "earliest" | "latest" | timestamp_ms}`` ->
        ``{tp: OffsetAndTimestamp}`` (offset -1 when no record is at or after a timestamp).

        ``isolation_level="read_committed"`` gives the last stable offset for "latest".
        """
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise Errors.IllegalArgumentError(f"invalid isolation_level {isolation_level!r}")
        spec: dict[TopicPartition, int] = {}
        for tp, want in offsets.items():
            if want == EARLIEST:
                spec[TopicPartition(*tp)] = offset_ops.EARLIEST
            elif want == LATEST:
                spec[TopicPartition(*tp)] = offset_ops.LATEST
            elif isinstance(want, int) and not isinstance(want, bool) and want >= -2:
                spec[TopicPartition(*tp)] = want
            else:
                raise Errors.IllegalArgumentError(
                    f"{tp}: expected 'earliest', 'latest' or a timestamp in ms, got {want!r}"
                )
        found = await offset_ops.list_offsets(
            self._client,
            spec,
            isolation_level=1 if isolation_level == "read_committed" else 0,
            unknown_topic_is_error=True,
        )
        return {
            tp: OffsetAndTimestamp(v.offset, v.timestamp if v.timestamp >= 0 else None)
            for tp, v in found.items()
        }

    async def delete_records(
        self,
        records_to_delete: dict[TopicPartition, RecordsToDelete],
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        """Delete records before each ``RecordsToDelete.before_offset``: ``{tp: new log start}``.

        The first partition error (e.g. OffsetOutOfRangeError) is raised, as aiokafka does.
        """
        found = await offset_ops.delete_records(
            self._client,
            {TopicPartition(*tp): r.before_offset for tp, r in records_to_delete.items()},
            timeout_ms=timeout_ms or None,
        )
        raise_item_errors(found, "DeleteRecords")
        return {tp: v for tp, v in found.items() if isinstance(v, int)}
