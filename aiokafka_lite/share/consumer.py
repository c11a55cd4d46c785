"""``AIOKafkaShareConsumer``: a share group member (KIP-932, "queues for Kafka").

Wires three objects together: a :class:`~aiokafka_lite.membership.MemberShell` driving a
:class:`~aiokafka_lite.membership.ShareMachine` (the ShareGroupHeartbeat loop, the assignment), :class:`~.fetcher.ShareFetcher` (share sessions per leader, decoded
acquired records) and :class:`~.acks.AckBook` (records handed out, acknowledgements to send).
A poll fetches only when no decoded record is left, so records are not held (locked) in the
client longer than the application needs; its acknowledgements go with that fetch, or by
ShareAcknowledge when records are left to hand out. The lifecycle and acknowledgement timing
follow Java's ``KafkaShareConsumer`` (``tests/test_share_lifecycle_java.py`` runs both).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Callable, Iterable
from typing import Any, overload

from aiokafka_lite import errors as Errors
from aiokafka_lite._metrics import ClientMetrics
from aiokafka_lite._settings import ClientSettings
from aiokafka_lite._supervise import Supervisor
from aiokafka_lite.hooks import ClientInfo, HookSet, emit
from aiokafka_lite.membership import MemberShell, ShareMachine, new_member_id
from aiokafka_lite.ops import share as share_ops
from aiokafka_lite.ops.telemetry import CLOSE_TIMEOUT_S, new_pusher, share_metric_names
from aiokafka_lite.structs import TopicPartition

from .acks import AckBook, AcknowledgeType, ShareAcknowledgementError, ShareConsumerRecord
from .fetcher import ShareFetcher

__all__ = ["AIOKafkaShareConsumer"]

log = logging.getLogger(__name__)

_MODES = ("implicit", "explicit")
_ACQUIRE_MODES = ("batch_optimized", "record_limit")
AckCallback = Callable[
    [dict[TopicPartition, BaseException | None], dict[TopicPartition, list[int]]], Any
]


class AIOKafkaShareConsumer:
    """Consume records from a share group: members share partitions, each record is
    acknowledged on its own (accept, release for redelivery, reject).

    ``acknowledgement_mode``: ``"implicit"`` (default: every record a poll handed out is
    accepted by the next poll or ``commit()``; ``stop()`` right after a poll gives its records
    back, as Java's ``close()``) or ``"explicit"`` (call :meth:`acknowledge` for each record
    before the next poll; ``stop()`` gives back the unacknowledged ones). Acknowledgements go
    at every poll (with the fetch when one is due, else by ShareAcknowledge), so the records of
    a long buffer (``getone()``, a small ``max_poll_records``) keep their locks.
    ``max_poll_records`` bounds each poll and each fetch.
    ``share_acquire_mode`` (Java's ``share.acquire.mode``, KIP-1206): ``"batch_optimized"``
    (default: the broker may acquire whole batches, and in implicit mode the next records are
    fetched while the application works on a poll's) or ``"record_limit"`` (the member holds
    at most ``max_poll_records`` acquired records: the broker acquires no more, and nothing is
    fetched ahead); ``strict_max_poll_records=True`` is the older spelling of the latter.
    ``acknowledgement_callback(results, offsets)``: Java's AcknowledgementCommitCallback, called
    from the polls, ``commit()``, :meth:`commit_async` and ``stop()`` with the outcome of the
    acknowledgements sent (``{partition: error or None}``, ``{partition: offsets}``); failures
    are never raised by a poll (their records come back to the group) and, without a callback,
    are logged as warnings.
    ``max_poll_interval_ms`` (Java's ``max.poll.interval.ms``, default 5 min): a member not
    polled for that long leaves the group (its partitions go to the others) and joins again
    at its next poll, as Java's share consumer does. A member heartbeats only while
    subscribed: ``start()`` before ``subscribe()`` is fine, ``unsubscribe()`` leaves the group;
    polling while unsubscribed raises IllegalStateError. The connection, security, ``hooks``
    and ``enable_metrics_push`` (KIP-714) arguments are :class:`AIOKafkaConsumer`'s.
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
        share_acquire_mode: str = "batch_optimized",
        max_poll_interval_ms: int = 300000,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        fetch_min_bytes: int = 1,
        request_timeout_ms: int = 40 * 1000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 5 * 60 * 1000,
        metadata_recovery_strategy: str = "rebootstrap",
        metadata_recovery_rebootstrap_trigger_ms: int = 300000,
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
        enable_metrics_push: bool = True,
    ) -> None:
        if not group_id:
            raise Errors.KafkaConfigurationError("a share consumer needs a group_id")
        if acknowledgement_mode not in _MODES:
            raise Errors.KafkaConfigurationError(
                f"acknowledgement_mode must be 'implicit' or 'explicit', not {acknowledgement_mode!r}"
            )
        if share_acquire_mode not in _ACQUIRE_MODES:
            raise Errors.KafkaConfigurationError(
                f"share_acquire_mode must be one of {_ACQUIRE_MODES}, not {share_acquire_mode!r}"
            )
        #: share.acquire.mode=record_limit (KIP-1206): at most max_poll_records acquired at once
        self._record_limit = strict_max_poll_records or share_acquire_mode == "record_limit"
        if not isinstance(max_poll_records, int) or max_poll_records < 1:
            raise Errors.KafkaConfigurationError("max_poll_records should be a positive integer")
        self._metrics = ClientMetrics()
        self._hooks = HookSet(
            [self._metrics, *(hooks or ())],
            ClientInfo.of("consumer", client_id, group_id, bootstrap_servers),
        )
        self._h_consume = self._hooks.on_consume
        self._client = ClientSettings.of(locals(), allow_auto_topic_creation=False).new_client(
            self._hooks
        )
        self._telemetry = new_pusher(
            enable_metrics_push, self._client, self.metrics, share_metric_names, client_id
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
        #: the share consumer's unexpected background errors (_supervise): the heartbeat's and
        #: the fetch rounds', raised once by the next poll
        supervisor = Supervisor("share consumer", self._client.retry_backoff_ms, log)
        self._membership = MemberShell(
            self._client,
            ShareMachine(group_id, new_member_id(), rack_id=client_rack),
            supervisor,
            on_assignment=self._assigned.set,
            max_poll_interval_ms=max_poll_interval_ms,
            logger=log,
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
            strict_max_records=self._record_limit,
            check_crcs=check_crcs,
            on_acknowledge=self._hooks.on_acknowledge,
        )
        self._round: asyncio.Task[None] | None = None
        #: acknowledgements sent by a poll that had records to hand out (no fetch due)
        self._acking: asyncio.Task[None] | None = None
        self._async_commits: set[asyncio.Task[None]] = set()
        #: after an unexpected error of a fetch round: no new round before (the loop clock)
        self._round_after = 0.0
        self._g_round = self._membership.supervisor.guard("fetch round", log)
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
        if self._telemetry is not None:
            self._telemetry.start()

    async def stop(self) -> None:
        """Leave the share group, as Java's ``KafkaShareConsumer.close()``: the
        acknowledgements made (explicit mode: :meth:`acknowledge`; implicit mode: the records
        of the polls before the last one) are sent, then the share sessions close, which gives
        every record still acquired back to the group: the records of the last poll that were
        not acknowledged (in implicit mode all of them: a poll's records count as processed
        only once the next poll or :meth:`commit` ran) and those fetched but never handed
        out. They are delivered again (to any member) with
        ``delivery_count`` + 1. ``async with`` exited by an exception does the same.
        The outcome of the acknowledgements goes to ``acknowledgement_callback`` (failures
        are logged without one)."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._started:
                return
            # one close bound for the whole stop (as Java's close timer): an operation's budget
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._client.timeouts.retry_ms / 1000

            def left() -> float:
                return max(0.0, deadline - loop.time())

            for task in (self._round, self._acking):
                if task is None:
                    continue
                with contextlib.suppress(asyncio.TimeoutError, Errors.KafkaError):
                    await asyncio.wait_for(asyncio.shield(task), left())
                if not task.done():
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            if self._async_commits:  # commit_async() answers still out: reported below
                await asyncio.wait(set(self._async_commits), timeout=left())
            # not acknowledged, and not sent: the sessions' close releases them (as Java)
            self._book.drop_delivered()
            self._fetcher.buffer.clear()
            self._membership.cancel()
            try:
                outcome = await asyncio.wait_for(self._fetcher.acknowledge(final=True), left())
            except (Errors.KafkaError, asyncio.TimeoutError) as exc:
                log.warning(
                    "share consumer %s: closing the sessions failed: %r", self._group_id, exc
                )
            else:
                self._fetcher.ack_results.append(outcome)
            try:
                self._report_ack_results()
            except Exception as exc:  # the application's callback: stop() goes on
                log.warning(
                    "share consumer %s: acknowledgement_callback raised at stop: %r",
                    self._group_id,
                    exc,
                )
            await self._membership.leave(left())
            if self._telemetry is not None:  # KIP-714: the last push, terminating
                await self._telemetry.close(CLOSE_TIMEOUT_S)
        except BaseException:  # cancelled on the way (re-raised): nothing stays running
            self._membership.cancel()
            for task in (self._round, self._acking, *self._async_commits):
                if task is not None:
                    task.cancel()
            raise
        finally:
            if self._telemetry is not None:
                self._telemetry.abandon()
            await self._client.close()

    def __del__(self, _warn: Any = warnings.warn) -> None:
        # as AIOKafkaConsumer: one collected without stop() leaks sockets and tasks; the
        # broker gives its records back when the connections close
        if getattr(self, "_started", False) and not getattr(self, "_closed", True):
            self._closed = True
            self._membership.cancel()
            for task in (self._round, self._acking):
                if task is not None:
                    task.cancel()
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
        """Leave every topic, and the group (as Java: a member without topics does not
        heartbeat); :meth:`subscribe` joins again. A poll meanwhile raises IllegalStateError."""
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

    def metrics(self) -> dict[str, Any]:
        """Counters under Java's share consumer metric names: the connection and request ones
        of :meth:`AIOKafkaConsumer.metrics`, ``fetch-*``, ``records-``/``bytes-consumed-*``
        (acquired records), ``acknowledgements-send-*``/``-error-*`` (records), ``heartbeat-*``
        (rates per second over its lifetime, latencies in ms)."""
        f = self._fetcher
        return self._metrics.share_snapshot(f.records_fetched, f.bytes_fetched)

    @property
    def member_id(self) -> str:
        """This member's id in the share group."""
        return self._membership.member_id

    # -- records --------------------------------------------------------------------------

    @overload
    def acknowledge(
        self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT, /
    ) -> None: ...

    @overload
    def acknowledge(
        self, topic: str, partition: int, offset: int, type: AcknowledgeType, /
    ) -> None: ...

    def acknowledge(self, record: Any, *args: Any) -> None:
        """Explicit mode: record how a record of the latest poll was processed. Sent with the
        next fetch or by :meth:`commit` / :meth:`commit_async`.

        ``acknowledge(record, type=ACCEPT)``: a record the latest poll handed out.
        ``acknowledge(topic, partition, offset, type)`` (Java's form of the same name): a
        record the deserializer failed on, named by the
        :class:`~aiokafka_lite.errors.RecordDeserializationError` the poll raised (it is
        released unless acknowledged otherwise before the next poll); any other offset raises
        IllegalStateError, as in Java.

        ``RENEW`` (KIP-1222), as Java 4.4's: the record counts as acknowledged for the next
        poll, the renewal (an extended acquisition lock) is sent with it, and once the broker
        answered a later poll hands the record out again (same ``delivery_count``), to be
        acknowledged once more. Brokers without it (ShareAcknowledge below v2): the renewal
        is not sent and its outcome is UnsupportedVersionError (to the acknowledgement callback,
        or :meth:`commit`'s result), the record is not handed out again, as in Java."""
        if not self._explicit:
            raise Errors.IllegalStateError(
                "acknowledge() needs acknowledgement_mode='explicit' (implicit mode accepts "
                "every record on the next poll)"
            )
        if isinstance(record, str):
            if len(args) != 3:
                raise TypeError("acknowledge(topic, partition, offset, type) takes four arguments")
            partition, offset, kind = args
            self._book.acknowledge_failed(
                TopicPartition(record, partition), offset, AcknowledgeType(kind)
            )
            return
        if len(args) > 1:
            raise TypeError("acknowledge(record, type) takes at most two arguments")
        kind = AcknowledgeType(args[0] if args else AcknowledgeType.ACCEPT)
        tp = TopicPartition(record.topic, record.partition)
        self._book.acknowledge(tp, record.offset, kind, record)

    async def commit(self) -> dict[TopicPartition, BaseException | None]:
        """Send the acknowledgements waiting (implicit mode: accept everything handed out)
        now, by ShareAcknowledge, and return each partition's outcome (None: done), as Java's
        ``commitSync()``; ``acknowledgement_callback`` gets it too (with the outcomes of
        acknowledgements sent by earlier polls not reported yet)."""
        self._check_usable()
        if not self._explicit:
            self._book.acknowledge_all(AcknowledgeType.ACCEPT)
        if self._acking is not None and not self._acking.done():
            await asyncio.shield(self._acking)
        outcome = await self._fetcher.acknowledge()
        self._fetcher.ack_results.append(outcome)
        self._report_ack_results()
        return outcome[0]

    def commit_async(self) -> None:
        """Send the acknowledgements waiting (implicit mode: accept everything handed out)
        without waiting for the answer, as Java's ``commitAsync``: the outcome goes to the
        ``acknowledgement_callback``, called by a later poll or :meth:`stop` (without a
        callback a failure is logged)."""
        self._check_usable()
        if not self._explicit:
            self._book.acknowledge_all(AcknowledgeType.ACCEPT)
        if not any(self._book.pending.values()):
            return
        fetcher = self._fetcher

        async def send() -> None:
            try:
                fetcher.ack_results.append(await fetcher.acknowledge())
            except Errors.KafkaError as exc:  # (failures of a node's request are in the results)
                log.warning("share consumer %s: commit_async failed: %r", self._group_id, exc)

        task = asyncio.ensure_future(send())
        self._async_commits.add(task)
        task.add_done_callback(self._async_commits.discard)

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
        self._report_ack_results()
        self._membership.supervisor.raise_pending()
        fetcher = self._fetcher
        if fetcher.errors:
            raise fetcher.errors.pop(0)

    def _report_ack_results(self) -> None:
        """Hand the acknowledgement outcomes gathered since the last call to
        ``acknowledgement_callback`` (as Java's AcknowledgementCommitCallback: from the poll,
        commit() and stop()); without one, failures are logged. Never raised: the records of a
        failed acknowledgement go back to the group (their locks expired, or their session
        ended) and are delivered again."""
        pending = self._fetcher.ack_results
        while pending:
            results, offsets = pending.pop(0)
            keep = {tp: exc for tp, exc in results.items() if offsets.get(tp)}
            if not keep:
                continue  # gap-only acknowledgements: bookkeeping
            offs = {tp: offsets[tp] for tp in keep}
            if self._callback is not None:
                self._callback(keep, offs)
            elif any(exc is not None for exc in keep.values()):
                log.warning(
                    "share consumer %s: %s (the records are delivered again; pass "
                    "acknowledgement_callback to handle this)",
                    self._group_id,
                    ShareAcknowledgementError(keep, offs),
                )

    async def _poll(self, timeout_s: float | None, max_records: int) -> list[ShareConsumerRecord]:
        self._check_usable()
        if not self._topics:
            raise Errors.IllegalStateError("share consumer is not subscribed to any topics")
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
        book.failed.clear()  # undeserializable records not acknowledged by now stay released
        self._send_acknowledgements()
        now = asyncio.get_running_loop().time  # the clock of every retry budget (ops.Deadline)
        deadline = None if timeout_s is None else now() + timeout_s
        while True:
            self._membership.polled()  # (each turn waits at most fetch_max_wait_ms)
            self._raise_pending()
            fetcher = self._fetcher
            if fetcher.buffer:
                return self._hand_out(max_records)
            remaining = None if deadline is None else deadline - now()
            if remaining is not None and remaining < 0:
                return []
            assigned = self._membership.assignment()
            if not assigned and not book.pending:
                self._assigned.clear()
                wait = self._backoff_s * 5 if remaining is None else min(remaining, 0.5)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._assigned.wait(), max(wait, 0.001))
                if remaining is not None and deadline is not None and now() >= deadline:
                    self._raise_pending()
                    return self._hand_out(max_records) if fetcher.buffer else []
                continue
            rnd = self._round
            if rnd is None or rnd.done():
                backoff = self._round_after - now()
                if backoff > 0:  # a round failed unexpectedly: no new one before its back-off
                    await asyncio.sleep(backoff if remaining is None else min(backoff, remaining))
                    continue
                max_wait = self._max_wait_ms
                if remaining is not None:
                    max_wait = max(0, min(max_wait, int(remaining * 1000)))
                rnd = self._round = asyncio.ensure_future(self._fetch_round(assigned, max_wait))
            started = now()
            # asyncio.wait neither cancels the round when this poll is cancelled or times out:
            # its records wait for the next poll (they are acquired: dropping them would hold
            # them until their lock expires)
            await asyncio.wait([rnd], timeout=remaining)
            if rnd.done() and not rnd.cancelled():
                rnd.result()  # a failure of the round itself surfaces here
            if not fetcher.buffer and now() - started < self._backoff_s:
                pause = self._backoff_s
                if deadline is not None:
                    pause = min(pause, max(0.0, deadline - now()))
                await asyncio.sleep(pause)

    def _send_acknowledgements(self) -> None:
        """As Java, acknowledgements go at every poll: with the next fetch when one is due
        (the buffer is empty), else now by ShareAcknowledge (with ``getone()`` or a small
        ``max_poll_records`` the buffer may last longer than the records' locks)."""
        if not self._book.pending or not self._fetcher.buffer:
            return
        if self._acking is not None and not self._acking.done():
            return  # the next poll sends these
        if self._round is not None and not self._round.done():
            return  # a prefetch is out: the next poll sends these
        self._acking = asyncio.ensure_future(self._fetcher.acknowledge_pending())

    async def _fetch_round(self, assigned: set[TopicPartition], max_wait_ms: int) -> None:
        """One fetch round under the supervision rule: an unexpected exception is logged once,
        raised once by the next poll, and holds the next round back (exponential back-off)."""
        try:
            await self._fetcher.fetch_round(assigned, max_wait_ms)
        except Errors.KafkaError:
            raise  # the poll raises it, as before
        except Exception as exc:
            self._round_after = asyncio.get_running_loop().time() + self._g_round.failed(exc)
            return
        self._g_round.ok()

    def _hand_out(self, n: int) -> list[ShareConsumerRecord]:
        buf = self._fetcher.buffer
        out = buf[:n]
        del buf[:n]
        self._book.handed_out(out)
        if (
            not buf
            and not self._explicit
            and not self._record_limit
            and (self._round is None or self._round.done())
            and asyncio.get_running_loop().time() >= self._round_after
        ):
            # implicit mode, the buffer ran dry: fetch the next records while the application
            # works on these (their acceptance goes with the round after). Not in explicit
            # mode: a record the application releases could be re-acquired by this very fetch
            # (one more delivery counted against share.delivery.count.limit). Nor with
            # share_acquire_mode="record_limit": the member holds at most max_poll_records, as
            # Java's
            assigned = self._membership.assignment()
            if assigned:
                self._round = asyncio.ensure_future(self._fetch_round(assigned, self._max_wait_ms))
        if self._h_consume:
            for r in out:
                emit(self._h_consume, r)
        return out
