"""AIOKafkaProducer: aiokafka's producer API on the aiokafka_lite client.

``fut = await producer.send(...)`` returns at once (unless memory is short) with a light
:class:`~aiokafka_lite.producer.accumulator.RecordHandle`; ``await fut`` gives the record's
:class:`~aiokafka_lite.structs.RecordMetadata`. Batching, retries and ordering live in the
accumulator and the sender task.

Here: construction, lifecycle, ``send()`` and its append path, metrics, and the calls
delegated to the producer's parts, each holding its own state: the append
path and bulk sends (:class:`~aiokafka_lite.producer.append.RecordAppender`), transaction calls
(:class:`~aiokafka_lite.producer.transactional.Transactions`), partitions per topic
(:class:`~aiokafka_lite.producer.topics.TopicPartitions`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._metrics import ClientMetrics
from aiokafka_lite._settings import ClientSettings, report_unclosed, warn_ignored_arguments
from aiokafka_lite.hooks import ClientInfo, HookSet
from aiokafka_lite.ops.telemetry import CLOSE_TIMEOUT_S, new_pusher, producer_metric_names
from aiokafka_lite.producer.accumulator import Accumulator
from aiokafka_lite.producer.append import RecordAppender
from aiokafka_lite.producer.arrow import send_table
from aiokafka_lite.producer.batch import RecordHandle
from aiokafka_lite.producer.options import MISSING, delivery_options, partition_from_metadata
from aiokafka_lite.producer.partitioner import DefaultPartitioner, StickyChoice, StickyPartitions
from aiokafka_lite.producer.sender import Sender
from aiokafka_lite.producer.topics import TopicPartitions
from aiokafka_lite.producer.transaction import TransactionManager, TxnState
from aiokafka_lite.producer.transactional import TransactionContext, Transactions
from aiokafka_lite.producer.user_batch import BatchBuilder
from aiokafka_lite.structs import OffsetAndMetadata, RecordMetadata
from aiokafka_lite.structs import TopicPartition as TopicPartition  # a compatibility name

__all__ = ["AIOKafkaProducer", "Producer", "TransactionContext"]

log = logging.getLogger(__name__)

# aiokafka compatibility names of this module (the producer's own are at the class's end):
# TopicPartition (imported above: aiokafka's producer module has it) and _missing, the "not
# given" default of acks, which FastStream imports
_missing = MISSING

_DEFAULT_PARTITIONER = DefaultPartitioner()
_time_ns = time.time_ns
#: estimate_record_size's per-record overhead (22) plus the record batch header (61)
_RECORD_BOUND = 22 + 61


class AIOKafkaProducer:
    """Asynchronous Kafka producer, argument-compatible with ``aiokafka.AIOKafkaProducer``.

    Beyond aiokafka: ``buffer_memory`` bounds the bytes held by unsent batches (``send()`` waits
    for room, then raises ``KafkaTimeoutError`` after ``max_block_ms``), ``delivery_timeout_ms``
    bounds the time a record may spend in retries, ``max_in_flight_requests_per_connection``
    bounds the pipelined produce requests per broker, ``hooks`` takes objects implementing
    :class:`aiokafka_lite.hooks.Hook` methods (connections, requests, batches, and
    ``on_send`` per record) and :meth:`metrics` returns counters.
    ``metadata_recovery_strategy`` / ``metadata_recovery_rebootstrap_trigger_ms``: Java's
    rebootstrap (KIP-899, KIP-1102), see :class:`~aiokafka_lite.client.KafkaClient`.
    """

    _client_seq = 0
    #: the built-in metrics hook is registered (benchmarks turn it off to measure its cost)
    _with_metrics = True

    def __init__(
        self,
        *,
        loop: Any = None,
        bootstrap_servers: str | list[str] | None = "localhost",
        client_id: str | None = None,
        metadata_max_age_ms: int = 300000,
        metadata_recovery_strategy: str = "rebootstrap",
        metadata_recovery_rebootstrap_trigger_ms: int = 300000,
        request_timeout_ms: int = 40000,
        api_version: str | None = None,
        acks: Any = MISSING,
        key_serializer: Callable[[Any], bytes] | None = None,
        value_serializer: Callable[[Any], bytes] | None = None,
        compression_type: str | None = None,
        max_batch_size: int = 16384,
        partitioner: Callable[..., int] = _DEFAULT_PARTITIONER,
        max_request_size: int = 1048576,
        linger_ms: int = 0,
        retry_backoff_ms: int = 100,
        security_protocol: str = "PLAINTEXT",
        ssl_context: Any = None,
        connections_max_idle_ms: int = 540000,
        enable_idempotence: bool = False,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        sasl_mechanism: str = "PLAIN",
        sasl_plain_password: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60000,
        delivery_timeout_ms: int = 120000,
        max_in_flight_requests_per_connection: int = 5,
        hooks: Iterable[object] | None = None,
        enable_metrics_push: bool = True,
    ) -> None:
        warn_ignored_arguments(loop, api_version)
        codec, acks, enable_idempotence, transaction_timeout_ms = delivery_options(
            compression_type, acks, enable_idempotence, transactional_id, transaction_timeout_ms
        )
        if client_id is None:
            AIOKafkaProducer._client_seq += 1
            client_id = f"aiokafka-lite-producer-{AIOKafkaProducer._client_seq}"
        self._metrics = ClientMetrics()
        info = ClientInfo.of("producer", client_id, None, bootstrap_servers)
        self._hooks = HookSet(
            [self._metrics, *(hooks or ())] if self._with_metrics else list(hooks or ()), info
        )
        #: on_send hooks: while there are any, every send() takes _send (see _update_gate)
        self._h_send = self._hooks.on_send
        self._settings = ClientSettings.of(locals())
        self.client = self._settings.new_client(self._hooks)
        self._telemetry = new_pusher(
            enable_metrics_push, self.client, self.metrics, producer_metric_names, client_id
        )
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._batch_size = max_batch_size
        self._max_request_size = max_request_size
        self._delivery_timeout_ms = delivery_timeout_ms
        self._partitioner = partitioner
        self._sticky = StickyPartitions() if isinstance(partitioner, DefaultPartitioner) else None
        # a topic's current sticky choice, read by send()'s fast path
        no_choices: dict[str, StickyChoice] = {}
        self._sticky_current: Callable[[str], StickyChoice | None] = (
            self._sticky.current if self._sticky is not None else no_choices.get
        )
        self._topics = TopicPartitions(self.client, max_block_ms)
        self._topic_cache = self._topics.cache  # read directly by the send paths
        self._txn: TransactionManager | None = None
        if enable_idempotence:
            self._txn = TransactionManager(
                self.client,
                transactional_id=transactional_id,
                transaction_timeout_ms=transaction_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                max_block_ms=max_block_ms,
            )
        self._acc = Accumulator(
            batch_size=max_batch_size,
            buffer_memory=buffer_memory,
            linger_ms=linger_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            compression_type=codec,
            max_block_ms=max_block_ms,
            transactional=transactional_id is not None,
        )
        self._sender = Sender(
            self.client,
            self._acc,
            acks=acks,
            broker_timeout_ms=int(self.client.timeouts.broker_ms),
            retry_backoff_ms=retry_backoff_ms,
            max_in_flight=max_in_flight_requests_per_connection,
            max_request_size=max_request_size,
            txn=self._txn,
            hooks=self._hooks,
        )
        self._appender = RecordAppender(
            self._acc,
            self._topics,
            check_gate=self._check_gate,
            on_send=self._h_send,
            codec=codec,
            transactional=transactional_id is not None,
            batch_size=max_batch_size,
            max_request_size=max_request_size,
            key_serializer=key_serializer,
            value_serializer=value_serializer,
            partitioner=partitioner,
            sticky=self._sticky,
        )
        self._transactions = Transactions(
            self._txn, self._acc, self._sender, delivery_timeout_ms=delivery_timeout_ms
        )
        # the append path, bound once (send() calls them)
        self._send = self._appender.send
        self._append_now = self._appender.append_now
        self._append_wait = self._appender.append_wait
        self._started = False
        self._closed = False
        self._gated = True  # True while send() must run _check_gate (see _update_gate)
        self._fast = False  # send()'s fast path is allowed (see _update_gate)

    def _update_gate(self) -> None:
        txn = self._txn
        self._gated = (
            self._closed
            or not self._started
            or (txn is not None and txn.transactional)
            or bool(self._h_send)  # on_send hooks run in _send
        )
        # send()'s fast path skips the gate, the key serializer (keys must stay None) and the
        # max_request_size check (a record appended to a batch of at most batch_size bytes is
        # smaller than max_request_size when batch_size is)
        self._fast = (
            not self._gated
            and self._key_serializer is None
            and self._sticky is not None
            and self._batch_size <= self._max_request_size
        )

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, fetch metadata, get a producer id if idempotent, start the sender task."""
        if self._started:
            return
        if self._closed:
            raise Errors.ProducerClosed("producer was stopped")
        self._started = True
        try:
            await self.client.start()
        except BaseException:  # cancelled or failed: a later start() tries again
            self._started = False
            raise
        self._topics.follow_metadata()
        if self._txn is not None:
            try:
                await self._txn.init_producer_id()
            except BaseException:
                await self.client.close()
                self._closed = True
                raise
        self._sender.start()
        self._update_gate()
        if self._telemetry is not None:
            self._telemetry.start()

    async def stop(self, timeout: float | None = None) -> None:
        """Deliver what is buffered, then close (Java's ``close(Duration)``).

        ``timeout=None`` waits while records can still be delivered: each record fails once
        its ``delivery_timeout_ms`` has passed, as during any outage (aiokafka fails records
        after ``request_timeout_ms`` instead; see the README's differences table).
        ``timeout`` (seconds, >= 0) bounds the wait: what is not acknowledged by then fails
        with :class:`~aiokafka_lite.errors.ProducerClosed` (a record whose request was
        already written may still be in the log: it was not confirmed). Either way no record
        is dropped silently: each future resolves, with its metadata or an error, and the
        buffer memory is free again.
        """
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0
        ):
            raise Errors.IllegalArgumentError(
                f"stop(timeout=...) takes seconds >= 0 or None, got {timeout!r}"
            )
        if self._closed:
            return
        self._closed = True
        self._update_gate()
        closed = Errors.ProducerClosed("producer is stopping")
        self._acc.close(closed)
        if self._started:
            loop = asyncio.get_running_loop()
            deadline = None if timeout is None else loop.time() + timeout
            try:
                await self._sender.close(
                    self._delivery_timeout_ms / 1000 if timeout is None else timeout
                )
                await self._transactions.wait_ending(
                    self.client.timeouts.retry_ms / 1000
                    if deadline is None
                    else max(0.0, deadline - loop.time())
                )
                if self._telemetry is not None:  # KIP-714: the last push, terminating
                    await self._telemetry.close(CLOSE_TIMEOUT_S)
            finally:
                if self._telemetry is not None:
                    self._telemetry.abandon()
                await self.client.close()
        else:
            self._acc.abort_undrained(closed)

    async def flush(self, timeout: float | None = None) -> None:
        """Send every buffered record now and wait for all of them (KafkaTimeoutError after
        ``timeout`` seconds)."""
        await self._acc.flush(timeout)

    async def __aenter__(self) -> AIOKafkaProducer:
        await self.start()
        return self

    def __del__(self, _warn: Any = warnings.warn) -> None:
        # as aiokafka: a producer garbage-collected without stop() (started or not) is a
        # resource leak
        if not getattr(self, "_closed", True):
            self._closed = True
            client = getattr(self, "client", None)
            parts = (getattr(self, "_sender", None), getattr(self, "_telemetry", None), client)
            report_unclosed(self, "producer", parts, client, _warn)

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---- metadata --------------------------------------------------------------------------

    async def partitions_for(self, topic: str) -> set[int]:
        """All partition ids of ``topic`` (waits for metadata up to ``max_block_ms``)."""
        return set((await self._topics.get(topic))[0])

    # ---- sending ---------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> RecordHandle:
        """Queue one record; returns a future-like resolving to its :class:`RecordMetadata`.

        Returns immediately unless the topic's metadata is unknown or buffer memory is short
        (then it waits up to ``max_block_ms``). A record with both key and value None is valid.
        """
        if key is None and partition is None and headers is None and self._fast:
            # Fast path: an unkeyed record into the topic's open sticky batch. No size check
            # needed: a record that fits in the batch fits in max_request_size (see _fast).
            if self._value_serializer is not None:
                value = self._value_serializer(value)
            sticky = self._sticky_current(topic)
            if sticky is not None:
                batch = sticky.batch
                if batch is not None:  # a sealed batch's append takes nothing
                    ts = _time_ns() // 1000000 if timestamp_ms is None else timestamp_ms
                    idx = batch.append(ts, None, value)
                    if idx is not None:
                        return RecordHandle((batch, idx, ts))
            return await self._send(topic, value, None, None, timestamp_ms, None, True)
        if not self._gated:
            # keyed, with headers or to a given partition, metadata known: append from here,
            # without the second coroutine of _send (keyed fire-and-forget, 50k records on
            # tansu, CPU per record, min of 3: 1.62-1.63 -> 1.55-1.66 us; with headers: 1.73-1.80
            # -> 1.69-1.72 us)
            parts = self._topic_cache.get(topic)
            if parts is not None and (partition is None or partition in parts[2]):
                if self._key_serializer is not None:
                    key = self._key_serializer(key)
                if self._value_serializer is not None:
                    value = self._value_serializer(value)
                done = self._append_now(topic, value, key, partition, timestamp_ms, headers, parts)
                if type(done) is RecordHandle:
                    return done
                return await self._append_wait(*done)
        return await self._send(topic, value, key, partition, timestamp_ms, headers, False)

    def _check_gate(self) -> None:
        if self._closed or not self._started:
            raise (
                Errors.ProducerClosed("producer is stopped")
                if self._closed
                else Errors.IllegalStateError("producer is not started: call start()")
            )
        txn = self._txn
        if txn is not None and txn.transactional and txn.state is not TxnState.IN_TRANSACTION:
            txn.raise_if_fatal()
            raise Errors.IllegalOperation("Can't send messages while not in transaction")

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        handle = await self.send(topic, value, key, partition, timestamp_ms, headers)
        md: RecordMetadata = await handle
        return md

    # ---- bulk sends (RecordAppender) -------------------------------------------------------

    async def send_many(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        keys: Sequence[Any] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> Sequence[RecordHandle]:
        """Bulk path: queue many records of one topic in one call; one handle per record.

        Equivalent to ``[await send(topic, v, key=k, partition=partition, ...) ...]`` but
        without a coroutine per record: unkeyed records go straight into the partition's open
        batch (``partition`` if given, else the sticky partition), all stamped with one
        timestamp (``timestamp_ms`` or now). With ``keys`` each record is partitioned by key.
        Returns a sequence of handles, in order (unkeyed and without headers: a lazy
        :class:`~aiokafka_lite.producer.batch.RecordHandles`, else a list).
        """
        return await self._appender.send_many(
            topic,
            values,
            keys=keys,
            partition=partition,
            timestamp_ms=timestamp_ms,
            headers=headers,
        )

    def create_batch(self) -> BatchBuilder:
        """An empty :class:`BatchBuilder` to fill and pass to :meth:`send_batch`."""
        return self._appender.create_batch()

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int | None = None
    ) -> RecordHandle:
        """Queue a filled :class:`BatchBuilder` for ``partition`` (None: the partitioner
        chooses, as for an unkeyed record); resolves to the metadata of its first record
        (offset = the batch's base offset)."""
        return await self._appender.send_batch(batch, topic, partition=partition)

    # ---- transactions (Transactions) --------------------------------------------------------

    async def begin_transaction(self) -> None:
        """Start a transaction (requires ``transactional_id``). Waiting for the producer id
        is shielded: cancelling this call before the transaction began starts none."""
        await self._transactions.begin_transaction()

    async def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it (EndTxn).

        The commit runs in its own task: a cancelled caller stops waiting, the commit goes on
        (the state is ``COMMITTING`` until the broker answered, then ``READY``, or the
        error's), as aiokafka's does."""
        await self._transactions.commit_transaction()

    async def abort_transaction(self) -> None:
        """Abort the current transaction: unsent records fail, sent ones are discarded.
        Like a commit, the abort goes on when its caller is cancelled."""
        await self._transactions.abort_transaction()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], group_id: str
    ) -> None:
        """Commit consumer offsets as part of the current transaction."""
        await self._transactions.send_offsets_to_transaction(offsets, group_id)

    def transaction(self) -> TransactionContext:
        """``async with producer.transaction():`` commits on success, aborts on error."""
        return TransactionContext(self)

    # ---- observability ---------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """A snapshot of this producer's counters (an aiokafka_lite extension, named after the
        Java client's metrics; rates are per second over the producer's lifetime, latencies
        and queue times in ms, sizes in bytes).

        ``record-send-total``/``-rate`` (records acknowledged), ``record-error-total``,
        ``record-retry-total`` (batch retries), ``batch-total``, ``batch-error-total``,
        ``batch-size-avg``/``-max``, ``records-per-batch-avg``, ``byte-total``/``-rate``,
        ``record-queue-time-avg``/``-max`` (batch opened -> first request),
        ``delivery-latency-avg``/``-max`` (batch opened -> acknowledged),
        ``produce-latency-avg``/``-max`` (Produce request round trip), ``request-total``/
        ``-rate``, ``request-latency-avg``/``-max``, ``request-error-total``,
        ``outgoing-byte-total``/``-rate``, ``connection-count``, ``connection-creation-total``,
        ``connection-close-total`` and ``requests-by-api`` (per API name: ``total``,
        ``latency-avg``, ``latency-max``, ``error-total``).
        """
        return self._metrics.producer_snapshot()

    # -- aiokafka compatibility names ------------------------------------------------------
    # Semi-private names of aiokafka's producer that libraries built on aiokafka read; views
    # of this producer's own state (each commented with who needs it). Also used as is:
    # ``client`` and ``_key_serializer``/``_value_serializer``/``_partitioner`` (same meaning),
    # ``_sender.sender_task`` (kafkaesk's health check before each publish; Sender.sender_task).

    @property
    def _metadata(self) -> Any:
        """The cluster metadata (kstreams: ``partitions_for_topic``)."""
        return self.client.cluster

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the producer runs on (aiokafka's attribute, as the consumer's)."""
        return self.client._loop or asyncio.get_running_loop()

    @property
    def _request_timeout_ms(self) -> int:
        """``request_timeout_ms`` (kstreams' test helpers)."""
        return self._settings.request_timeout_ms

    async def send_arrow(self, topic: str, table: Any) -> list[RecordHandle]:
        """Send the rows of a ``pyarrow`` Table (columns value, optionally key, partition,
        timestamp, headers) as :meth:`send` would, one by one; returns one awaitable per batch
        used (see :func:`aiokafka_lite.producer.arrow.send_table`). Extra ``arrow``."""
        return await send_table(self.send, topic, table, self._appender)

    @property
    def _txn_manager(self) -> TransactionManager | None:
        """The idempotence/transaction state, None without enable_idempotence (kstreams'
        transaction tests read its ``transactional_id``)."""
        return self._txn

    def _partition(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        serialized_key: bytes | None,
        serialized_value: bytes | None,
    ) -> int:
        """The partition a record would go to, from known metadata (the explicit one if
        given); opentelemetry-instrumentation-aiokafka calls it for its span attribute."""
        if partition is not None:
            return partition
        return partition_from_metadata(
            self.client.cluster, self._partitioner, topic, serialized_key
        )


Producer = AIOKafkaProducer
