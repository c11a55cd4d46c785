"""``AIOKafkaShareConsumer``: a share group member (KIP-932, "queues for Kafka").

Wires three objects together: :class:`~.membership.ShareMembership` (the ShareGroupHeartbeat
loop, the assignment), :class:`~.fetcher.ShareFetcher` (share sessions per leader, decoded
acquired records) and :class:`~.acks.AckBook` (records handed out, acknowledgements to send).
A poll fetches only when no decoded record is left, so records are not held (locked) in the
client longer than the application needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite._settings import ClientSettings
from aiokafka_lite.hooks import ClientInfo, HookSet, emit
from aiokafka_lite.ops import share as share_ops
from aiokafka_lite.structs import TopicPartition

from .acks import AckBook, AcknowledgeType, ShareAcknowledgementError, ShareConsumerRecord
from .fetcher import AckResults, ShareFetcher
from .membership import ShareMembership

__all__ = ["AIOKafkaShareConsumer"]

log = logging.getLogger(__name__)

_MODES = ("implicit", "explicit")
AckCallback = Callable[
    [dict[TopicPartition, BaseException | None], dict[TopicPartition, list[int]]], Any
]


class AIOKafkaShareConsumer:
    """Consume records from a share group: members share partitions, each record is
    acknowledged on its own (accept, release for redelivery, reject).

    ``acknowledgement_mode``: ``"implicit"`` (default: every record a poll handed out is
    accepted by the next poll, ``commit()`` or ``stop()``) or ``"explicit"`` (call
    :meth:`acknowledge` for each record before the next poll; ``stop()`` releases the
    unacknowledged ones). ``max_poll_records`` bounds each poll and each fetch (with
    ``strict_max_poll_records=True`` the broker acquires no more than that, KIP-1206).
    ``acknowledgement_callback(results, offsets)``: receives the outcome of acknowledgements
    sent with fetches (``{partition: error or None}``, ``{partition: offsets}``); without it a
    failed one is raised by the next poll as :class:`ShareAcknowledgementError`.
    The connection, security and ``hooks`` arguments are :class:`AIOKafkaConsumer`'s.
    """

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | list[str] | None = "localhost",
        client_id: str = "aiokafka_lite",
        group_id: str | None = None,
        key_deserializer: Callable[[bytes | None], Any] | None = None,
        value_deserializer: Callable[[bytes | None], Any] | None = None,
        acknowledgement_mode: str = "implicit",
        acknowledgement_callback: AckCallback | None = None,
        max_poll_records: int = 500,
        strict_max_poll_records: bool = False,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        fetch_min_bytes: int = 1,
        request_timeout_ms: int = 40 * 1000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 5 * 60 * 1000,
        connections_max_idle_ms: int = 540000,
        check_crcs: bool = True,
        ssl_context: Any = None,
        security_protocol: str = "PLAINTEXT",
        sasl_mechanism: str = "PLAIN",
        sasl_plain_password: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
        client_rack: str | None = None,
        hooks: Iterable[object] | None = None,
    ) -> None:
        if not group_id:
            raise Errors.KafkaConfigurationError("a share consumer needs a group_id")
        if acknowledgement_mode not in _MODES:
            raise Errors.KafkaConfigurationError(
                f"acknowledgement_mode must be 'implicit' or 'explicit', not {acknowledgement_mode!r}"
            )
        if not isinstance(max_poll_records, int) or max_poll_records < 1:
            raise Errors.KafkaConfigurationError("max_poll_records should be a positive integer")
        self._hooks = HookSet(
            list(hooks or ()), ClientInfo.of("consumer", client_id, group_id, bootstrap_servers)
        )
        self._h_consume = self._hooks.on_consume
        self._client = ClientSettings.of(locals(), allow_auto_topic_creation=False).new_client(
            self._hooks
        )
        self._group_id = group_id
        self._explicit = acknowledgement_mode == "explicit"
        self._callback = acknowledgement_callback
        self._max_poll_records = max_poll_records
        self._max_wait_ms = fetch_max_wait_ms
        self._backoff_s = retry_backoff_ms / 1000
        self._topics = frozenset(topics)
        self._book = AckBook()
        self._assigned = asyncio.Event()
        self._membership = ShareMembership(
            self._client, group_id, rack_id=client_rack, on_assignment=self._assigned.set
        )
        self._fetcher = ShareFetcher(
            self._client,
            group_id,
            self._membership.member_id,
            self._book,
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            fetch_max_wait_ms=fetch_max_wait_ms,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_bytes=fetch_max_bytes,
            max_records=max_poll_records,
            strict_max_records=strict_max_poll_records,
            check_crcs=check_crcs,
            on_acknowledge=self._hooks.on_acknowledge,
        )
        self._round: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and join the share group (the assignment arrives with the heartbeats).

        Raises :class:`~aiokafka_lite.errors.UnsupportedVersionError` when the brokers have
        no share groups (Kafka before 4.0, or share groups not enabled)."""
        if self._closed:
            raise Errors.IllegalStateError("share consumer was stopped; create a new one")
        if self._started:
            return
        if self._topics:
            self._client.add_topics(sorted(self._topics))
        await self._client.start()
        if not share_ops.supports_share_groups(self._client):
            await self._client.close()
            self._closed = True
            raise Errors.UnsupportedVersionError(
                "the brokers do not support share groups (ShareGroupHeartbeat)"
            )
        self._started = True
        self._membership.subscribe(self._topics)
        self._membership.start()

    async def stop(self) -> None:
        """Acknowledge (implicit mode: accept; explicit: release) what was handed out and not
        acknowledged, release the records fetched but never handed out, close the share
        sessions and leave the group. Failed acknowledgements are logged (commit() first to
        see them)."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._started:
                return
            # one close bound for the whole stop (as Java's close timer): request_timeout_ms
            loop = asyncio.get_running_loop()
            timeout = self._client.request_timeout_ms / 1000
            deadline = loop.time() + timeout
            if self._round is not None:
                with contextlib.suppress(asyncio.TimeoutError, Errors.KafkaError):
                    await asyncio.wait_for(asyncio.shield(self._round), timeout)
                if not self._round.done():
                    self._round.cancel()
                    await asyncio.gather(self._round, return_exceptions=True)
            self._book.acknowledge_all(
                AcknowledgeType.RELEASE if self._explicit else AcknowledgeType.ACCEPT
            )
            for r in self._fetcher.buffer:
                self._book.pending.setdefault(TopicPartition(r.topic, r.partition), {})[
                    r.offset
                ] = int(AcknowledgeType.RELEASE)
            self._fetcher.buffer.clear()
            self._membership.cancel()
            try:
                results, offsets = await asyncio.wait_for(
                    self._fetcher.acknowledge(final=True), max(0.0, deadline - loop.time())
                )
            except (Errors.KafkaError, asyncio.TimeoutError) as exc:
                log.warning(
                    "share consumer %s: closing the sessions failed: %r", self._group_id, exc
                )
            else:
                failed = {tp: e for tp, e in results.items() if e is not None and offsets.get(tp)}
                if failed:
                    log.warning(
                        "share consumer %s: acknowledgements at stop failed: %s",
                        self._group_id,
                        ShareAcknowledgementError(failed, offsets),
                    )
            await self._membership.leave(max(0.0, deadline - loop.time()))
        except BaseException:  # cancelled on the way (it propagates): nothing stays running
            self._membership.cancel()
            if self._round is not None:
                self._round.cancel()
            raise
        finally:
            await self._client.close()

    def __del__(self, _warn: Any = warnings.warn) -> None:
        # as AIOKafkaConsumer: one collected without stop() leaks sockets and tasks; the
        # broker gives its records back when the connections close
        if getattr(self, "_started", False) and not getattr(self, "_closed", True):
            self._closed = True
            self._membership.cancel()
            if self._round is not None:
                self._round.cancel()
            self._client.abandon()
            _warn(f"Unclosed AIOKafkaShareConsumer {self!r}", ResourceWarning, source=self)

    async def __aenter__(self) -> AIOKafkaShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- subscription ---------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe to ``topics`` (replacing the subscription)."""
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a list of topics, not a string")
        self._topics = frozenset(topics)
        if self._topics:
            self._client.add_topics(sorted(self._topics))
        if self._started:
            self._membership.subscribe(self._topics)

    def unsubscribe(self) -> None:
        """Leave every topic (the member stays in the group with nothing assigned)."""
        self.subscribe(())

    def subscription(self) -> set[str]:
        """The subscribed topics."""
        return set(self._topics)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group coordinator assigned to this member (shared with others)."""
        return self._membership.assignment()

    @property
    def acquisition_lock_timeout_ms(self) -> int:
        """How long the broker keeps a record acquired for this member before giving it to
        another (as the brokers last reported; 0 before the first fetch): acknowledge, or
        RENEW, within it."""
        return self._fetcher.lock_timeout_ms

    @property
    def member_id(self) -> str:
        """This member's id in the share group."""
        return self._membership.member_id

    # -- records --------------------------------------------------------------------------

    def acknowledge(
        self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Explicit mode: record how ``record`` (of the latest poll) was processed. Sent with
        the next fetch or by :meth:`commit`."""
        if not self._explicit:
            raise Errors.IllegalStateError(
                "acknowledge() needs acknowledgement_mode='explicit' (implicit mode accepts "
                "every record on the next poll)"
            )
        kind = AcknowledgeType(type)
        self._book.acknowledge(TopicPartition(record.topic, record.partition), record.offset, kind)

    async def commit(self) -> dict[TopicPartition, BaseException | None]:
        """Send the acknowledgements waiting (implicit mode: accept everything handed out)
        now, by ShareAcknowledge, and return each partition's outcome (None: done)."""
        self._check_usable()
        if not self._explicit:
            self._book.acknowledge_all(AcknowledgeType.ACCEPT)
        results, _ = await self._fetcher.acknowledge()
        return results

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ShareConsumerRecord]]:
        """Records acquired for this member, by partition, waiting up to ``timeout_ms`` for
        some (``partitions`` is accepted for aiokafka's signature; a share consumer reads
        whatever it is given)."""
        records = await self._poll(timeout_ms / 1000, max_records or self._max_poll_records)
        out: dict[TopicPartition, list[ShareConsumerRecord]] = {}
        for r in records:
            out.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
        return out

    async def getone(self) -> ShareConsumerRecord:
        """The next record (waits until one is acquired)."""
        while True:
            records = await self._poll(None, 1)
            if records:
                return records[0]

    def __aiter__(self) -> AIOKafkaShareConsumer:
        return self

    async def __anext__(self) -> ShareConsumerRecord:
        try:
            return await self.getone()
        except Errors.ConsumerStoppedError:
            raise StopAsyncIteration from None

    # -- the poll -------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise Errors.ConsumerStoppedError()
        if not self._started:
            raise Errors.IllegalStateError("share consumer not started")
        if self._membership.error is not None:
            raise self._membership.error

    def _raise_pending(self) -> None:
        fetcher = self._fetcher
        if fetcher.ack_results:
            outcomes, fetcher.ack_results = fetcher.ack_results, []
            self._deliver_ack_results(outcomes)
        if fetcher.errors:
            raise fetcher.errors.pop(0)

    def _deliver_ack_results(self, outcomes: list[AckResults]) -> None:
        failed: dict[TopicPartition, BaseException | None] = {}
        offsets: dict[TopicPartition, list[int]] = {}
        for results, offs in outcomes:
            if self._callback is not None:
                self._callback(results, offs)
                continue
            for tp, exc in results.items():
                if exc is not None:
                    failed[tp] = exc
                    offsets.setdefault(tp, []).extend(offs.get(tp, ()))
        if failed:
            raise ShareAcknowledgementError(failed, offsets)

    async def _poll(self, timeout_s: float | None, max_records: int) -> list[ShareConsumerRecord]:
        self._check_usable()
        book = self._book
        if self._explicit:
            n = book.unacknowledged()
            if n:
                raise Errors.IllegalStateError(
                    f"{n} record(s) of the previous poll are not acknowledged: in explicit "
                    "mode acknowledge() every record before polling again"
                )
        else:
            book.acknowledge_all(AcknowledgeType.ACCEPT)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self._raise_pending()
            fetcher = self._fetcher
            if fetcher.buffer:
                return self._hand_out(max_records)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining < 0:
                return []
            assigned = self._membership.assignment()
            if not assigned and not book.pending:
                self._assigned.clear()
                wait = self._backoff_s * 5 if remaining is None else min(remaining, 0.5)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._assigned.wait(), max(wait, 0.001))
                if remaining is not None and deadline is not None and time.monotonic() >= deadline:
                    self._raise_pending()
                    return self._hand_out(max_records) if fetcher.buffer else []
                continue
            rnd = self._round
            if rnd is None or rnd.done():
                max_wait = self._max_wait_ms
                if remaining is not None:
                    max_wait = max(0, min(max_wait, int(remaining * 1000)))
                rnd = self._round = asyncio.ensure_future(fetcher.fetch_round(assigned, max_wait))
            started = time.monotonic()
            # asyncio.wait neither cancels the round when this poll is cancelled or times out:
            # its records wait for the next poll (they are acquired: dropping them would hold
            # them until their lock expires)
            await asyncio.wait([rnd], timeout=remaining)
            if rnd.done() and not rnd.cancelled():
                rnd.result()  # a failure of the round itself surfaces here
            if not fetcher.buffer and time.monotonic() - started < self._backoff_s:
                pause = self._backoff_s
                if deadline is not None:
                    pause = min(pause, max(0.0, deadline - time.monotonic()))
                await asyncio.sleep(pause)

    def _hand_out(self, n: int) -> list[ShareConsumerRecord]:
        buf = self._fetcher.buffer
        out = buf[:n]
        del buf[:n]
        self._book.handed_out(out)
        if not buf and not self._explicit and (self._round is None or self._round.done()):
            # implicit mode, the buffer ran dry: fetch the next records while the application
            # works on these (their acceptance goes with the round after). Not in explicit
            # mode: a record the application releases could be re-acquired by this very fetch
            # (one more delivery counted against share.delivery.count.limit)
            assigned = self._membership.assignment()
            if assigned:
                self._round = asyncio.ensure_future(
                    self._fetcher.fetch_round(assigned, self._max_wait_ms)
                )
        if self._h_consume:
            for r in out:
                emit(self._h_consume, r)
        return out
