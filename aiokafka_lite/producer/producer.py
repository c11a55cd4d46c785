"""AIOKafkaProducer: aiokafka's producer API on the aiokafka_lite client.

``fut = await producer.send(...)`` returns at once (unless memory is short) with a light
:class:`~aiokafka_lite.producer.accumulator.RecordHandle`; ``await fut`` gives the record's
:class:`~aiokafka_lite.structs.RecordMetadata`. Batching, retries and ordering live in the
accumulator and the sender task.

Here: construction, lifecycle, ``send()`` and its append path, metrics. Elsewhere: bulk
sends (:mod:`~aiokafka_lite.producer.bulk`), transaction calls
(:mod:`~aiokafka_lite.producer.transactional`), partitions per topic
(:mod:`~aiokafka_lite.producer.topics`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._metrics import ClientMetrics
from aiokafka_lite._settings import ClientSettings
from aiokafka_lite.hooks import ClientInfo, HookSet, apply_send
from aiokafka_lite.ops.telemetry import CLOSE_TIMEOUT_S, TelemetryPusher, producer_metric_names
from aiokafka_lite.producer.accumulator import Accumulator
from aiokafka_lite.producer.arrow import send_table
from aiokafka_lite.producer.batch import RecordHandle, estimate_record_size
from aiokafka_lite.producer.bulk import BulkSendMixin
from aiokafka_lite.producer.partitioner import DefaultPartitioner, StickyPartitions
from aiokafka_lite.producer.sender import Sender
from aiokafka_lite.producer.topics import Parts, TopicPartitions
from aiokafka_lite.producer.transaction import TransactionManager, TxnState
from aiokafka_lite.producer.transactional import TransactionContext, TransactionsMixin
from aiokafka_lite.records.batch_builder import encoded_headers
from aiokafka_lite.records.compression import codec_id
from aiokafka_lite.structs import RecordMetadata
from aiokafka_lite.structs import TopicPartition as TopicPartition  # aiokafka's module has it

__all__ = ["AIOKafkaProducer", "Producer", "TransactionContext"]

log = logging.getLogger(__name__)

_missing: Any = object()
_DEFAULT_PARTITIONER = DefaultPartitioner()
_INT32_MAX = 2**31 - 1
_time_ns = time.time_ns
#: estimate_record_size's per-record overhead (22) plus the record batch header (61)
_RECORD_BOUND = 22 + 61


class AIOKafkaProducer(BulkSendMixin, TransactionsMixin):
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
        acks: Any = _missing,
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
        if loop is not None:
            warnings.warn("the loop argument is ignored", DeprecationWarning, stacklevel=2)
        if api_version is not None:  # as aiokafka
            warnings.warn(
                "api_version is ignored: versions are negotiated with each broker",
                DeprecationWarning,
                stacklevel=2,
            )
        try:
            codec = codec_id(compression_type)
        except Errors.KafkaError as exc:
            raise ValueError(f"unsupported compression_type {compression_type!r}") from exc
        if transactional_id is not None:
            enable_idempotence = True
        else:
            transaction_timeout_ms = _INT32_MAX
        if acks == "all":
            acks = -1
        if enable_idempotence:
            if acks is _missing:
                acks = -1
            elif acks != -1:
                raise ValueError(f"acks={acks} not supported if enable_idempotence=True")
        elif acks is _missing:
            acks = 1
        if acks not in (0, 1, -1):
            raise ValueError(f"invalid acks value {acks!r}: use 0, 1, -1 or 'all'")
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
        self._telemetry = (
            TelemetryPusher(self.client, lambda: producer_metric_names(self.metrics()), client_id)
            if enable_metrics_push
            else None
        )
        self._acks = acks
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._codec = codec
        self._batch_size = max_batch_size
        self._max_request_size = max_request_size
        self._max_block_ms = max_block_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._partitioner = partitioner
        self._sticky = StickyPartitions() if isinstance(partitioner, DefaultPartitioner) else None
        # the sticky choice per topic, read directly by send()'s fast path
        self._sticky_state = self._sticky.state if self._sticky is not None else {}
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
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            max_in_flight=max_in_flight_requests_per_connection,
            max_request_size=max_request_size,
            txn=self._txn,
            hooks=self._hooks,
        )
        self._acc_open = self._acc.open
        self._size_guard = max(0, (max_request_size - 4096) // 2)
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
            started = time.monotonic()
            try:
                await self._sender.close(
                    self._delivery_timeout_ms / 1000 if timeout is None else timeout
                )
                await self._wait_ending(
                    self.client.request_timeout_ms / 1000
                    if timeout is None
                    else max(0.0, timeout - (time.monotonic() - started))
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
            # release its sockets and tasks now, as aiokafka's do when collected with it (first:
            # the warning raises where warnings are errors)
            self._closed = True
            client = getattr(self, "client", None)
            for part in (getattr(self, "_sender", None), client):
                if part is not None:
                    part.abandon()
            loop = getattr(client, "_loop", None)
            if loop is not None and not loop.is_closed():  # as aiokafka: the loop's handler too
                loop.call_exception_handler(
                    {"producer": self, "message": "Unclosed AIOKafkaProducer"}
                )
            _warn(f"Unclosed AIOKafkaProducer {self!r}", ResourceWarning, source=self)

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
            sticky = self._sticky_state.get(topic)
            if sticky is not None:
                batch = sticky[1]
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

    async def _send(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        serialized: bool,
    ) -> RecordHandle:
        """send() beyond its fast paths; ``serialized``: the serializers already ran."""
        if self._gated:
            self._check_gate()
        if not serialized:
            if self._key_serializer is not None:
                key = self._key_serializer(key)
            if self._value_serializer is not None:
                value = self._value_serializer(value)
        parts = self._topic_cache.get(topic)
        if parts is None:
            parts = await self._topics.get(topic)
        if partition is not None and partition not in parts[2]:
            parts = await self._topics.with_partition(topic, partition)
        if self._h_send:
            return await self._send_hooked(
                topic, value, key, partition, timestamp_ms, headers, parts
            )
        done = self._append_now(topic, value, key, partition, timestamp_ms, headers, parts)
        if type(done) is RecordHandle:
            return done
        return await self._append_wait(*done)

    async def _send_hooked(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        parts: Parts,
    ) -> RecordHandle:
        """_send() with on_send hooks: the partition is chosen first (the hooks see it), then
        the record goes in with the headers the hooks returned."""
        sticky = None
        if partition is None:
            if key is None and self._sticky is not None:
                sticky = self._sticky.for_topic(topic, parts[0], parts[1])
                partition = sticky[0]
            else:
                partition = self._partitioner(key, parts[0], parts[1])
        assert partition is not None
        headers = apply_send(self._h_send, topic, partition, key, value, headers or ())
        done = self._append_now(topic, value, key, partition, timestamp_ms, headers, parts)
        handle = done if type(done) is RecordHandle else await self._append_wait(*done)
        if sticky is not None and sticky[1] is None:
            sticky[1] = handle[0]  # later sends stay on this partition until the batch seals
        return handle

    def _append_now(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        parts: Parts,
    ) -> RecordHandle | tuple[Any, ...]:
        """Size check, partition choice and the append into the partition's open batch when
        it has room: the record's handle; else the arguments of :meth:`_append_wait`.
        ``partition`` is None or one of ``parts``; key and value are serialized."""
        guard = self._size_guard
        if headers is None:
            headers = ()
            if (value is not None and len(value) > guard) or (key is not None and len(key) > guard):
                self._check_size(key, value, headers)
        elif headers:
            # estimate_record_size inlined (two calls less per record with headers): the
            # record's upper bound from the cached encoded headers
            size = (
                _RECORD_BOUND
                + len(encoded_headers(headers))
                + (len(key) if key is not None else 0)
                + (len(value) if value is not None else 0)
            )
            if size > self._max_request_size:
                self._check_size(key, value, headers)
        elif (value is not None and len(value) > guard) or (key is not None and len(key) > guard):
            self._check_size(key, value, headers)
        sticky = None
        if partition is None:
            if key is None and self._sticky is not None:
                sticky = self._sticky.for_topic(topic, parts[0], parts[1])
                partition = sticky[0]
            else:
                partition = self._partitioner(key, parts[0], parts[1])
        ts = _time_ns() // 1000000 if timestamp_ms is None else timestamp_ms
        # fast path: the partition's open batch has room (see Accumulator.try_append)
        opened = self._acc_open.get(topic)
        if opened is not None:
            batch = opened.get(partition)
            if batch is not None:
                idx = batch.append(ts, key, value, headers)
                if idx is not None:
                    if sticky is not None and sticky[1] is None:
                        sticky[1] = batch  # later unkeyed sends take send()'s fast path
                    return RecordHandle((batch, idx, ts))
        return (topic, partition, ts, key, value, headers, sticky)

    async def _append_wait(
        self,
        topic: str,
        partition: int,
        ts: int,
        key: Any,
        value: Any,
        headers: Any,
        sticky: list[Any] | None,
    ) -> RecordHandle:
        """The accumulator's append: opens a batch, waiting for buffer memory if needed."""
        handle = await self._acc.append(topic, partition, ts, key, value, headers)
        if sticky is not None and sticky[1] is None:
            sticky[1] = handle[0]
        return handle

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

    def _check_size(self, key: Any, value: Any, headers: Any) -> None:
        size = estimate_record_size(key, value, headers) + 61
        if size > self._max_request_size:
            raise Errors.MessageSizeTooLargeError(
                f"the record is {size} bytes when serialized, larger than "
                f"max_request_size={self._max_request_size}"
            )

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
        return self.client.request_timeout_ms

    async def send_arrow(self, topic: str, table: Any) -> list[RecordHandle]:
        """Send the rows of a ``pyarrow`` Table (columns value, optionally key, partition,
        timestamp, headers) as :meth:`send` would, one by one; returns one awaitable per batch
        used (see :func:`aiokafka_lite.producer.arrow.send_table`). Extra ``arrow``."""
        return await send_table(self, topic, table)

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
        cluster = self.client.cluster
        all_parts = sorted(cluster.partitions_for_topic(topic) or ())
        available = sorted(cluster.available_partitions_for_topic(topic) or ())
        if not all_parts:
            raise Errors.KafkaTimeoutError(f"no metadata for topic {topic!r} yet")
        return int(self._partitioner(serialized_key, all_parts, available))


Producer = AIOKafkaProducer
