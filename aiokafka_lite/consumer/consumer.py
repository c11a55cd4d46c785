"""``AIOKafkaConsumer``: the aiokafka-compatible consumer facade.

The work happens in three objects this class wires together: :class:`SubscriptionState`
(what is assigned, where each partition stands), :class:`Fetcher` (background fetching into
per-partition buffers) and :class:`Coordinator` (group membership, commits, initial positions).

This module holds the consumer's construction, lifecycle (start/stop), subscription, commit,
pause and metadata calls, and the calls it delegates to its parts, each holding its own state:
the record path (getmany/getone/``async for``) to :class:`~aiokafka_lite.consumer.poll.Poller`,
positions and offset look-ups to :class:`~aiokafka_lite.consumer.positions.Positions`;
commit()'s checks live in :mod:`aiokafka_lite.consumer.commits`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._metrics import ClientMetrics
from aiokafka_lite._settings import ClientSettings, report_unclosed, warn_ignored_arguments
from aiokafka_lite.hooks import ClientInfo, HookSet
from aiokafka_lite.ops import topics as topic_ops
from aiokafka_lite.ops.telemetry import CLOSE_TIMEOUT_S, consumer_metric_names, new_pusher
from aiokafka_lite.structs import (
    ConsumerRecord,
    OffsetAndTimestamp,
    SubscriptionPattern,
    TopicPartition,
)

from .assignors import RoundRobinPartitionAssignor, resolve_assignors
from .commits import commit_after_stop, offsets_to_commit
from .fetcher import Fetcher
from .group import Coordinator
from .group848 import ConsumerGroupMember, group_protocol_args
from .options import BULK_LIMIT, check_arguments, check_membership_operation
from .poll import Poller
from .positions import Positions
from .subscription import (
    OFFSET_RESET_STRATEGIES,
    ConsumerRebalanceListener,
    SubscriptionState,
    check_subscribe,
)

__all__ = ["AIOKafkaConsumer", "Consumer", "ConsumerRebalanceListener"]

log = logging.getLogger(__name__)


class AIOKafkaConsumer:
    """Consume records from Kafka, in a consumer group or from manually assigned partitions.

    Argument names and defaults are aiokafka's; ``partition_assignment_strategy`` also
    accepts the names ``"range"``, ``"roundrobin"`` and ``"sticky"``.
    ``allow_auto_create_topics`` (default True: aiokafka's metadata requests always allow it)
    lets metadata requests for subscribed/assigned topics create them on brokers with
    ``auto.create.topics.enable``. ``hooks`` (an aiokafka_lite extension) takes objects
    implementing :class:`aiokafka_lite.hooks.Hook` methods (connections, requests, fetches,
    commits, rebalances, and ``on_consume`` per record); :meth:`metrics` returns counters.
    ``group_protocol="consumer"`` (Kafka 4's KIP-848 groups, the broker's
    ``group_remote_assignor``) replaces the classic ``"classic"`` group protocol.
    ``metadata_recovery_strategy`` / ``metadata_recovery_rebootstrap_trigger_ms``: Java's
    rebootstrap (KIP-899, KIP-1102), see :class:`~aiokafka_lite.client.KafkaClient`.
    """

    #: the built-in metrics hook is registered (benchmarks turn it off to measure its cost)
    _with_metrics = True

    def __init__(
        self,
        *topics: str,
        loop: Any = None,
        bootstrap_servers: str | list[str] | None = "localhost",
        client_id: str = "aiokafka_lite",
        group_id: str | None = None,
        group_instance_id: str | None = None,
        key_deserializer: Callable[[bytes | None], Any] | None = None,
        value_deserializer: Callable[[bytes | None], Any] | None = None,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        fetch_min_bytes: int = 1,
        max_partition_fetch_bytes: int = 1 * 1024 * 1024,
        request_timeout_ms: int = 40 * 1000,
        retry_backoff_ms: int = 100,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        check_crcs: bool = True,
        metadata_max_age_ms: int = 5 * 60 * 1000,
        metadata_recovery_strategy: str = "rebootstrap",
        metadata_recovery_rebootstrap_trigger_ms: int = 300000,
        partition_assignment_strategy: Any = (RoundRobinPartitionAssignor,),
        max_poll_interval_ms: int = 300000,
        rebalance_timeout_ms: int | None = None,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        consumer_timeout_ms: int = 200,
        max_poll_records: int | None = None,
        ssl_context: Any = None,
        security_protocol: str = "PLAINTEXT",
        api_version: Any = None,
        exclude_internal_topics: bool = True,
        connections_max_idle_ms: int = 540000,
        isolation_level: str = "read_uncommitted",
        sasl_mechanism: str = "PLAIN",
        sasl_plain_password: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
        client_rack: str | None = None,
        allow_auto_create_topics: bool = True,
        hooks: Iterable[object] | None = None,
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        enable_metrics_push: bool = True,
    ) -> None:
        warn_ignored_arguments(loop, api_version)
        check_arguments(
            max_poll_records, auto_offset_reset, isolation_level, group_id, group_instance_id
        )
        coordinator_class, group_args = group_protocol_args(
            group_protocol,
            group_remote_assignor,
            client_rack,
            group_id=group_id,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            partition_assignment_strategy=partition_assignment_strategy,
        )
        self._metrics = ClientMetrics()
        info = ClientInfo.of("consumer", client_id, group_id, bootstrap_servers)
        self._hooks = HookSet(
            [self._metrics, *(hooks or ())] if self._with_metrics else list(hooks or ()), info
        )
        #: on_consume hooks: called for every record handed out
        self._h_consume = self._hooks.on_consume
        # kept for commit() after stop(), which commits through a new client of these settings
        self._settings = ClientSettings.of(
            locals(), allow_auto_topic_creation=allow_auto_create_topics
        )
        self._client = self._settings.new_client(self._hooks)
        self._telemetry = new_pusher(
            enable_metrics_push, self._client, self.metrics, consumer_metric_names, client_id
        )
        self._group_id = group_id
        self._group_instance_id = group_instance_id
        self._allow_auto_create = allow_auto_create_topics
        self._assignors = resolve_assignors(partition_assignment_strategy)
        self._subscription = SubscriptionState(auto_offset_reset)
        self._poller = Poller(
            self._subscription,
            on_consume=self._h_consume,
            max_poll_records=max_poll_records or BULK_LIMIT,
            consumer_timeout=consumer_timeout_ms / 1000,
        )
        self._timeouts = self._client.timeouts  # the named waits (Timeouts)
        self._exclude_internal = exclude_internal_topics
        self._positions = Positions(self._subscription, self._parts, self._timeouts)
        self._fetcher_args: dict[str, Any] = dict(
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_bytes=fetch_max_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            check_crcs=check_crcs,
            isolation_level=isolation_level,
            retry_backoff_ms=retry_backoff_ms,
            hooks=self._hooks,
        )
        self._coordinator_args: dict[str, Any] = dict(
            group_id=group_id,
            group_instance_id=group_instance_id,
            assignors=self._assignors,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms
            if rebalance_timeout_ms is not None
            else session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            retry_backoff_ms=retry_backoff_ms,
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            exclude_internal_topics=exclude_internal_topics,
            isolation_level=isolation_level,
            hooks=self._hooks,
            **group_args,
        )
        self._coordinator_class = coordinator_class
        # start() waits at most this long for the first assignment (joins wait for other members)
        self._start_timeout = (
            max(self._timeouts.retry_ms, session_timeout_ms + (rebalance_timeout_ms or 0)) / 1000
        )
        self._fetcher: Fetcher | None = None
        self._coordinator: Coordinator | None = None
        self._started = False
        self._closed = False
        if topics:
            self._subscription.subscribe(topics)
            self._client.track_topics(topics)

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, then start fetching and (with a group_id) group coordination.

        As aiokafka's: with a topic or pattern subscription, returns once the first
        assignment is known (group joined, or every partition of the topics without a
        group_id) and the positions of the assigned partitions are initialised, so
        ``assignment()``, ``position()``, ``seek()`` and ``commit()`` work right after it.
        A non-retriable join error (e.g. InvalidSessionTimeoutError) is raised from here.
        """
        if self._closed:
            raise Errors.IllegalStateError("consumer was stopped; create a new one")
        if self._started:
            return
        subs = self._subscription
        wanted = set(subs.topics) | {tp.topic for tp in subs.assignment}
        # tracked before the bootstrap, so its metadata answer already has them, as aiokafka's
        # (which loads every topic): a fetcher starting on an assign()ed topic knows its leader
        # and looks up its position at once (FastStream publishes right after start())
        refresh = self._client.add_topics(sorted(wanted)) if wanted else None
        await self._client.start()
        self._fetcher = Fetcher(self._client, subs, **self._fetcher_args)
        self._coordinator = self._coordinator_class(
            self._client, subs, supervisor=self._fetcher.supervisor, **self._coordinator_args
        )
        self._poller.attach(self._fetcher, self._coordinator)
        self._started = True
        if self._telemetry is not None:
            self._telemetry.start()
        if refresh is not None:  # learn (or auto-create) the subscribed / assigned topics first
            if self._allow_auto_create:
                await self._wait_topics(sorted(wanted))
            else:  # they may not exist yet: learnt when they appear
                with contextlib.suppress(Errors.KafkaError, asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(refresh), self._timeouts.retry_ms / 1000)
        if subs.pattern is not None or subs.broker_pattern is not None:
            # match the pattern before the first join; a broker-side pattern's topics are
            # known by id only: the metadata of every topic names them
            self._client.need_all_topics = True
            with contextlib.suppress(Errors.KafkaError, asyncio.TimeoutError):
                await asyncio.wait_for(
                    asyncio.shield(self._client.request_update()), self._timeouts.retry_ms / 1000
                )
        self._fetcher.start()
        self._coordinator.start()
        if subs.subscribed and not subs.user_assigned:
            await self._wait_first_assignment(self._coordinator)
        elif subs.user_assigned:
            # positions of the assign()ed partitions first: a record published right after
            # start() is then past the position, never before it ("latest" looked up late)
            until = asyncio.get_running_loop().time() + self._start_timeout
            await self._positions.wait_positions(until, self._client.cluster, lambda: self._closed)

    async def _wait_topics(self, topics: list[str]) -> None:
        """As aiokafka's start(): wait until every subscribed topic has partitions (created by
        the metadata request where the broker auto-creates topics); UnknownTopicOrPartitionError
        after request_timeout_ms."""
        try:
            for topic in topics:
                await self._client.wait_for_topic(topic)  # timeouts.retry_ms
        except Errors.KafkaTimeoutError as exc:
            await self.stop()
            raise Errors.UnknownTopicOrPartitionError(str(exc)) from None
        except Errors.KafkaError:
            await self.stop()
            raise

    async def _wait_first_assignment(self, coordinator: Coordinator) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._start_timeout
        try:
            await asyncio.wait_for(coordinator.assigned_once.wait(), self._start_timeout)
        except asyncio.TimeoutError:
            log.warning("consumer start(): no assignment after %.0f s", self._start_timeout)
            return
        if coordinator.fatal is not None:
            exc, coordinator.fatal = coordinator.fatal, None
            await self.stop()
            raise exc
        await self._positions.wait_positions(deadline, self._client.cluster, lambda: self._closed)

    async def stop(self, *, group_membership_operation: str = "default") -> None:
        """Commit (auto commit), leave the group, stop background tasks and close connections.

        ``group_membership_operation`` (KIP-1092, Java's ``CloseOptions``): ``"default"`` (a
        dynamic member leaves, a static one stays), ``"leave_group"`` (a static one leaves too)
        or ``"remain_in_group"`` (classic: no LeaveGroup; KIP-848: as ``"default"``, as Java's)."""
        check_membership_operation(group_membership_operation)
        if self._closed:
            return
        self._closed = True
        self._poller.close()
        try:
            if self._coordinator is not None:
                await self._coordinator.close(group_membership_operation)
            if self._fetcher is not None:
                await self._fetcher.close()
            if self._telemetry is not None:  # KIP-714: the last push, terminating
                await self._telemetry.close(CLOSE_TIMEOUT_S)
        except BaseException:  # cancelled on the way (re-raised): nothing stays running
            for part in (self._coordinator, self._fetcher):
                if part is not None:
                    part.abandon()
            raise
        finally:
            self._subscription.abort_waiters(Errors.ConsumerStoppedError("consumer is stopped"))
            if self._telemetry is not None:
                self._telemetry.abandon()
            await self._client.close()

    async def __aenter__(self) -> AIOKafkaConsumer:
        await self.start()
        return self

    def __del__(self, _warn: Any = warnings.warn) -> None:
        # as aiokafka: a consumer garbage-collected without stop() is a resource leak
        if not getattr(self, "_closed", True):
            self._closed = True
            names = ("_coordinator", "_fetcher", "_telemetry", "_client")
            parts = [getattr(self, n, None) for n in names]
            report_unclosed(self, "consumer", parts, getattr(self, "_client", None), _warn)

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _parts(self) -> tuple[Fetcher, Coordinator]:
        if self._closed:
            raise Errors.ConsumerStoppedError("consumer is stopped")
        if self._fetcher is None or self._coordinator is None:
            raise Errors.IllegalStateError("consumer is not started: call start() first")
        return self._fetcher, self._coordinator

    # -- records (Poller) ------------------------------------------------------------------
    def __aiter__(self) -> AIOKafkaConsumer:
        if self._closed:  # as aiokafka: iterating a stopped consumer is an error
            raise Errors.ConsumerStoppedError("consumer is stopped")
        return self

    def __anext__(self) -> Awaitable[ConsumerRecord[Any, Any]]:
        # the poller's coroutine itself, not one awaiting it: one coroutine per record
        return self._poller.anext()

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Records per partition: whatever is buffered now, else waits up to ``timeout_ms``
        for some; at most ``max_records`` (default ``max_poll_records``) in total."""
        return await self._poller.getmany(partitions, timeout_ms, max_records)

    async def getmany_arrow(
        self,
        *partitions: TopicPartition,
        timeout_ms: int = 0,
        max_records: int | None = None,
        include_headers: bool = False,
    ) -> Any:
        """:meth:`getmany` as one ``pyarrow.Table`` with Spark's Kafka schema (key, value,
        topic, partition, offset, timestamp, timestampType, and headers when
        ``include_headers``): the same records, positions, commits and rebalances as
        :meth:`getmany`, without a Python object per record. Needs pyarrow (extra ``arrow``)
        and no deserializers."""
        poller = self._poller
        return await poller.getmany_arrow(partitions, timeout_ms, max_records, include_headers)

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord[Any, Any]:
        """The next record (from ``partitions`` if given); waits as long as it takes."""
        return await self._poller.getone(partitions)

    # -- positions and offset look-ups (Positions) -----------------------------------------
    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch from ``offset`` next (the buffered data of that partition is dropped)."""
        self._positions.seek(partition, offset)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Seek to the log start offset of the partitions (all assigned if none given)."""
        await self._positions.seek_to_beginning(*partitions)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Seek to the end (next offset to be written) of the partitions (all if none given)."""
        await self._positions.seek_to_end(*partitions)

    async def seek_to_committed(
        self, *partitions: TopicPartition
    ) -> dict[TopicPartition, int | None]:
        """Seek to the committed offsets; returns them (None: nothing committed, not moved)."""
        return await self._positions.seek_to_committed(*partitions)

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record to be handed out (waits until it is known)."""
        return await self._positions.position(partition)

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark from the latest fetch (None before one)."""
        return self._positions.highwater(partition)

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """The partition's last stable offset from the latest fetch (None before one)."""
        return self._positions.last_stable_offset(partition)

    def last_poll_timestamp(self, partition: TopicPartition) -> int | None:
        """When (ms since the epoch) the latest fetch answer for ``partition`` arrived (None
        before one), as aiokafka's."""
        return self._positions.last_poll_timestamp(partition)

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one, per partition."""
        return await self._positions.offsets_for_times(timestamps)

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Log start offset per partition."""
        return await self._positions.beginning_offsets(partitions)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Log end offset (next offset to be written) per partition."""
        return await self._positions.end_offsets(partitions)

    # -- subscription ----------------------------------------------------------------------
    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | re.Pattern[str] | SubscriptionPattern | None = None,
        listener: Any = None,
    ) -> None:
        """Subscribe to topics or to a regex pattern; partitions come from the group (or,
        without a group_id, every partition of the topics).

        A str ``pattern`` is matched by the client (``re.match`` against the topics in the
        metadata, under both group protocols, as aiokafka and Java's ``subscribe(Pattern)``);
        a :class:`~aiokafka_lite.structs.SubscriptionPattern` is sent for the broker to match
        (RE2/J, full match), with ``group_protocol="consumer"`` only."""
        topics = check_subscribe(topics, pattern, listener)
        if isinstance(pattern, SubscriptionPattern) and (
            self._group_id is None or not issubclass(self._coordinator_class, ConsumerGroupMember)
        ):
            raise Errors.IllegalStateError(
                "a SubscriptionPattern is matched by the broker: it needs a group_id and "
                "group_protocol='consumer' (pass a str pattern to match on the client)"
            )
        self._subscription.subscribe(topics, pattern, listener)
        if not self._started:  # as aiokafka, the client tracks the subscription at once
            self._client.track_topics(topics)
        elif topics:
            self._client.add_topics(topics)

    def subscription(self) -> frozenset[str]:
        """The subscribed topics (after pattern matching); after ``assign()``, the topics of
        the assigned partitions (as aiokafka)."""
        subs = self._subscription
        if subs.user_assigned:
            return frozenset(tp.topic for tp in subs.assignment)
        return frozenset(subs.topics)

    def unsubscribe(self) -> None:
        """Drop the subscription (and the assignment)."""
        self._subscription.unsubscribe()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manually assign partitions (no group membership; commits still work with a group_id)."""
        tps = list(partitions)
        for tp in tps:
            if not isinstance(tp, tuple) or len(tp) != 2:
                raise TypeError(f"expected TopicPartition, got {tp!r}")
        self._subscription.assign_from_user(TopicPartition(*tp) for tp in tps)
        if not self._started:  # as aiokafka, the client tracks the assigned topics at once
            self._client.track_topics({tp[0] for tp in tps})
        else:
            self._client.add_topics(sorted({tp[0] for tp in tps}))

    def assignment(self) -> set[TopicPartition]:
        """The currently assigned partitions."""
        return set(self._subscription.assignment)

    # -- commits ---------------------------------------------------------------------------
    async def commit(self, offsets: Mapping[TopicPartition, Any] | None = None) -> None:
        """Commit ``offsets`` (tp -> offset, (offset, metadata) or OffsetAndMetadata), or the
        current position of every assigned partition.

        After :meth:`stop` it still commits, as aiokafka's does: the assignment the consumer
        had when it stopped, outside the group it left (the broker takes it while no other
        member is in the group; CommitFailedError otherwise)."""
        subs = self._subscription
        if self._closed:
            coordinator = self._coordinator
            if self._group_id is None:
                raise Errors.IllegalOperation("commit() requires a group_id")
            if coordinator is None:  # stopped before start(): nothing was ever assigned
                raise Errors.IllegalStateError("No partitions assigned")
            to_commit = offsets_to_commit(self._group_id, subs, coordinator, offsets)
            if to_commit:
                await commit_after_stop(coordinator, self._settings, self._hooks, to_commit)
            return
        _, coordinator = self._parts()
        # through aiokafka's method name, so tracers that patch
        # GroupCoordinator.commit_offsets (ddtrace) see every explicit commit
        await coordinator.commit_offsets(
            subs.assignment, offsets_to_commit(self._group_id, subs, coordinator, offsets)
        )

    async def committed(self, partition: TopicPartition) -> int | None:
        """The last committed offset of ``partition`` (None if nothing was committed)."""
        _, coordinator = self._parts()
        if self._group_id is None:
            raise Errors.IllegalOperation("committed() requires a group_id")
        om = (await coordinator.committed([partition])).get(partition)
        return om.offset if om is not None else None

    # -- pause -----------------------------------------------------------------------------
    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching and returning records from these partitions."""
        for tp in partitions:
            self._subscription.pause(tp)

    def resume(self, *partitions: TopicPartition) -> None:
        """Resume paused partitions."""
        for tp in partitions:
            self._subscription.resume(tp)

    def paused(self) -> set[TopicPartition]:
        """The paused partitions."""
        return self._subscription.paused()

    # -- metadata --------------------------------------------------------------------------
    async def topics(self) -> set[str]:
        """Every topic in the cluster (internal ones excluded per exclude_internal_topics)."""
        self._parts()
        resp = await topic_ops.metadata(self._client, None)  # timeouts.retry_ms
        return {
            t.name
            for t in resp.topics
            if not t.error_code and t.name and not (self._exclude_internal and t.is_internal)
        }

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of ``topic`` from the cached metadata (None if unknown)."""
        return self._client.cluster.partitions_for_topic(topic)

    # -- observability ---------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """A snapshot of this consumer's counters (an aiokafka_lite extension, named after the
        Java client's metrics; rates are per second over the consumer's lifetime, latencies in
        ms, sizes in bytes).

        ``records-lag`` (partition -> high watermark minus position, for assigned partitions
        fetched at least once) and ``records-lag-max`` are computed at the call;
        ``records-consumed-total``/``-rate`` and ``bytes-consumed-total``/``-rate`` count what
        fetches brought in; ``fetch-total``/``-rate``, ``fetch-latency-avg``/``-max``,
        ``records-per-request-avg``, ``fetch-size-avg``, ``commit-total``,
        ``commit-error-total``, ``commit-rate``, ``commit-latency-avg``/``-max``,
        ``rebalance-total``, ``partitions-revoked-total``, ``assigned-partitions``, and the
        connection and request counters of :meth:`AIOKafkaProducer.metrics`.
        """
        lags = self._positions.lags()
        return self._metrics.consumer_snapshot(lags, len(self._subscription.assignment))

    @property
    def group_generation(self) -> int:
        """The current group generation id (-1 outside a group)."""
        return self._coordinator.generation if self._coordinator is not None else -1

    # -- aiokafka compatibility names ------------------------------------------------------
    # Semi-private names of aiokafka's consumer that libraries built on aiokafka read; views of
    # this consumer's own state (each commented with who needs it). Also used as is, with
    # aiokafka's meaning: ``_client`` and ``_group_id`` (opentelemetry-instrumentation-aiokafka,
    # kstreams' metrics), ``_subscription`` (its ``listener``).

    @property
    def _enable_auto_commit(self) -> bool:
        """``enable_auto_commit`` (kstreams' rebalance listener)."""
        return bool(self._coordinator_args["enable_auto_commit"])

    @property
    def _auto_offset_reset(self) -> str:
        """``auto_offset_reset`` as given (kstreams' test helpers)."""
        reset = self._subscription.default_reset
        return next(k for k, v in OFFSET_RESET_STRATEGIES.items() if v == reset)

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the consumer runs on (rebalance listeners in aiokafka's own tests
        schedule tasks with ``consumer._loop.create_task``)."""
        return self._client._loop or asyncio.get_running_loop()


Consumer = AIOKafkaConsumer
