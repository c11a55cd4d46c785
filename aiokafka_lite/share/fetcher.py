"""Share sessions, one per partition leader: ShareFetch rounds and ShareAcknowledge.

Each leader node has one :class:`_Session` (its epoch, the partitions in it, a lock so only
one ShareFetch/ShareAcknowledge is in flight per node). Epoch 0 opens a session with every
partition to fetch; later requests name only the partitions added, with the removed ones as
forgotten topics, and carry the acknowledgements of the partitions that node leads; each answer
moves the epoch on (as the Java client, also after a request-level error). SHARE_SESSION_NOT_FOUND
/ INVALID_SHARE_SESSION_EPOCH reset the session to epoch 0.
An epoch-0 request cannot carry acknowledgements, so acknowledgements for a node without an
open session fail (their records go back to the group with the old session).

:class:`ShareFetcher` decodes each partition's record batches into
:class:`~aiokafka_lite.share.acks.ShareConsumerRecord` s, keeping only the offsets this member
acquired (with their delivery count); acquired offsets without a record are acknowledged as
gaps. Partition errors NOT_LEADER_OR_FOLLOWER & co. ask for a metadata refresh; other
partition and request errors are kept and raised by the consumer's next poll.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.hooks import emit
from aiokafka_lite.ops import share as share_ops
from aiokafka_lite.ops.share import TopicIdPartition
from aiokafka_lite.records.reader import RecordBatch, iter_batches
from aiokafka_lite.structs import TopicPartition

from .acks import AckBook, AcknowledgeType, ShareConsumerRecord, to_batches

__all__ = ["AckResults", "ShareFetcher"]

log = logging.getLogger(__name__)

#: per partition: the error of its acknowledgements (None: done) and the offsets concerned
AckResults = tuple[dict[TopicPartition, BaseException | None], dict[TopicPartition, list[int]]]

_SESSION_LOST = (Errors.ShareSessionNotFoundError.errno, Errors.InvalidShareSessionEpochError.errno)
_REFRESH = frozenset(
    (
        Errors.NotLeaderForPartitionError.errno,
        Errors.UnknownTopicOrPartitionError.errno,
        Errors.LeaderNotAvailableError.errno,
        Errors.FencedLeaderEpochError.errno,
        Errors.UnknownTopicIdError.errno,
        Errors.KafkaStorageError.errno,
    )
)


_RENEW = int(AcknowledgeType.RENEW)


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class _Session:
    """A share session with one leader node."""

    __slots__ = ("epoch", "parts", "lock")

    def __init__(self) -> None:
        self.epoch = 0
        self.parts: dict[TopicPartition, TopicIdPartition] = {}
        self.lock = asyncio.Lock()

    def reset(self) -> None:
        self.epoch = 0
        self.parts = {}


class ShareFetcher:
    """ShareFetch / ShareAcknowledge for one share consumer, decoding acquired records."""

    def __init__(
        self,
        client: KafkaClient,
        group_id: str,
        member_id: str,
        book: AckBook,
        *,
        key_deserializer: Callable[[Any], Any] | None,
        value_deserializer: Callable[[Any], Any] | None,
        fetch_max_wait_ms: int,
        fetch_min_bytes: int,
        fetch_max_bytes: int,
        max_records: int,
        strict_max_records: bool,
        check_crcs: bool,
        on_acknowledge: tuple[Callable[..., Any], ...] = (),
    ) -> None:
        self._h_ack = on_acknowledge
        self._client = client
        self._group = group_id
        self._member = member_id
        self._book = book
        self._kd = key_deserializer
        self._vd = value_deserializer
        self._max_wait = fetch_max_wait_ms
        self._min_bytes = fetch_min_bytes
        self._max_bytes = fetch_max_bytes
        self._max_records = max_records
        self._strict = strict_max_records
        self._check_crcs = check_crcs
        self._sessions: dict[int, _Session] = {}
        #: decoded records not handed out yet (still acquired by this member)
        self.buffer: list[ShareConsumerRecord] = []
        #: errors to raise from the next poll (fetch errors, deserializer errors)
        self.errors: list[BaseException] = []
        #: results of acknowledgements sent with ShareFetch, for the consumer to report
        self.ack_results: list[AckResults] = []
        #: the acquisition lock timeout the brokers last reported
        self.lock_timeout_ms = 0
        #: records acquired and decoded so far, and their record data's bytes (metrics())
        self.records_fetched = 0
        self.bytes_fetched = 0

    # -- routing --------------------------------------------------------------------------

    def _route(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[int, dict[TopicPartition, TopicIdPartition]]:
        cluster = self._client.cluster
        out: dict[int, dict[TopicPartition, TopicIdPartition]] = {}
        missing = False
        for tp in partitions:
            leader = cluster.leader_for_partition(tp)
            tid = cluster.topic_id(tp.topic)
            if leader is None or leader < 0 or tid is None or tid == uuid.UUID(int=0):
                missing = True
                continue
            out.setdefault(leader, {})[tp] = (tid, tp.partition)
        if missing:
            self._client.request_update()
        return out

    def _session(self, node: int) -> _Session:
        s = self._sessions.get(node)
        if s is None:
            s = self._sessions[node] = _Session()
        return s

    # -- fetching -------------------------------------------------------------------------

    async def fetch_round(self, assigned: set[TopicPartition], max_wait_ms: int) -> None:
        """One ShareFetch to each leader of ``assigned`` (with the acknowledgements waiting
        for the partitions it leads) and to each leader that only has acknowledgements."""
        book = self._book
        wanted = self._route(assigned)
        acked = self._route(tp for tp, a in book.pending.items() if a)
        nodes = set(wanted) | set(acked)
        if not nodes:
            return
        await asyncio.gather(
            *(
                self._fetch_node(node, wanted.get(node, {}), acked.get(node, {}), max_wait_ms)
                for node in nodes
            )
        )

    async def _fetch_node(
        self,
        node: int,
        want: dict[TopicPartition, TopicIdPartition],
        ack_parts: dict[TopicPartition, TopicIdPartition],
        max_wait_ms: int,
    ) -> None:
        s = self._session(node)
        async with s.lock:
            acks = self._book.take(ack_parts)
            if acks and s.epoch == 0:
                failed = self._fail_all(acks, _released())
                self._renewals_answered(acks, failed[0])
                self._report(failed)
                acks = {}
            # acknowledgements of partitions leaving the session, and renewals (a ShareFetch
            # carrying RENEW may not fetch), go first in a ShareAcknowledge of their own
            alone = {tp: a for tp, a in acks.items() if tp not in want or _RENEW in a.values()}
            if alone:
                self._report(await self._acknowledge_locked(node, s, alone, ack_parts, final=False))
                acks = {tp: a for tp, a in acks.items() if tp not in alone}
            if not want:
                return
            if s.epoch == 0:
                fetch = list(want.values())
                forget: list[TopicIdPartition] = []
            else:
                fetch = [tip for tp, tip in want.items() if s.parts.get(tp) != tip]
                forget = [tip for tp, tip in s.parts.items() if want.get(tp) != tip]
            wire_acks = {want[tp]: to_batches(a) for tp, a in acks.items()}
            request = share_ops.share_fetch_request(
                self._group,
                self._member,
                s.epoch,
                fetch=fetch,
                forget=forget,
                acks=wire_acks,
                max_wait_ms=max_wait_ms,
                min_bytes=self._min_bytes,
                max_bytes=self._max_bytes,
                max_records=self._max_records,
                batch_size=self._max_records,
                strict_max_records=self._strict,
            )
            try:
                # a long poll: the broker holds it up to max_wait_ms
                wait_ms = self._client.timeouts.client_wait_ms(max_wait_ms)
                resp = await self._client.send(node, request, timeout_ms=wait_ms)
            except Errors.KafkaError as exc:
                # the answer is lost: whatever the broker did, the session cannot be trusted
                s.reset()
                self._report(self._fail_all(acks, exc))
                self._client.request_update()
                log.debug("ShareFetch to node %s failed: %r", node, exc)
                return
            except BaseException:  # cancelled mid-request (re-raised): the session is unknown
                s.reset()
                self._report(self._fail_all(acks, _released()))
                raise
            result = share_ops.parse_share_fetch(resp)
            if result.error_code:
                self._request_failed(node, s, result, acks)
                return
            s.epoch = _next_epoch(s.epoch)
            s.parts = dict(want)
            if result.lock_timeout_ms:
                self.lock_timeout_ms = result.lock_timeout_ms
            by_tip = {tip: tp for tp, tip in want.items()}
            self._report(self._ack_outcome(acks, want, result))
            for tip, pd in result.partitions.items():
                tp = by_tip.get(tip)
                if tp is None:
                    continue
                if pd.error_code:
                    self._partition_error(tp, pd.error_code, pd.error_message)
                elif pd.acquired:
                    self._decode(tp, pd.records, pd.acquired)

    def _request_failed(
        self, node: int, s: _Session, result: Any, acks: Mapping[TopicPartition, dict[int, int]]
    ) -> None:
        exc = Errors.for_code(result.error_code)(result.error_message or "share request")
        if result.error_code in _SESSION_LOST:
            log.info("share session with node %s lost (%r): opening a new one", node, exc)
            s.reset()
        else:
            s.epoch = _next_epoch(s.epoch)
            if not Errors.retry_action(exc).retriable:
                self.errors.append(exc)
        self._report(self._fail_all(acks, exc))

    def _partition_error(self, tp: TopicPartition, code: int, message: str | None) -> None:
        if code in _REFRESH:
            self._client.request_update()
            return
        exc = Errors.for_code(code)(f"{tp.topic}-{tp.partition}: {message or ''}")
        if Errors.retry_action(exc).retriable:
            return
        self.errors.append(exc)

    def _decode(self, tp: TopicPartition, data: Any, acquired: list[tuple[int, int, int]]) -> None:
        counts: dict[int, int] = {}
        for first, last, dc in acquired:
            for off in range(first, last + 1):
                counts[off] = dc
        lo = min(counts)
        topic, partition = tp
        kd, vd = self._kd, self._vd
        out: list[ShareConsumerRecord] = []
        try:
            for batch in iter_batches(data, check_crcs=self._check_crcs):
                if batch.last_offset < lo or batch.is_control:
                    continue
                if type(batch) is RecordBatch:
                    recs = batch.new_records(ShareConsumerRecord, topic, partition, lo)
                else:
                    recs = _legacy(batch, topic, partition, lo)
                for r in recs:
                    dc = counts.pop(r.offset, -1)
                    if dc < 0:
                        continue  # another member's record
                    r.delivery_count = dc
                    if kd is not None or vd is not None:
                        try:
                            if kd is not None:
                                r.key = kd(r.key)
                            if vd is not None:
                                r.value = vd(r.value)
                        except Exception as exc:
                            # as Java: released unless the application acknowledges it by
                            # offset (explicit mode) before its next poll
                            self._book.fail(tp, r.offset)
                            err = Errors.RecordDeserializationError(
                                f"deserializing {tp.topic}-{tp.partition} offset {r.offset} "
                                f"failed: {exc!r}; the record is released unless acknowledged "
                                "otherwise before the next poll",
                                tp,
                                r.offset,
                            )
                            err.__cause__ = exc
                            self.errors.append(err)
                            continue
                    out.append(r)
        except Errors.KafkaError as exc:  # corrupt data: release what was not decoded
            self._book.pending.setdefault(tp, {}).update(
                dict.fromkeys(counts, int(AcknowledgeType.RELEASE))
            )
            counts = {}
            self.errors.append(exc)
        if counts:  # acquired offsets with no record: compacted away or control records
            self._book.gap(tp, counts)
        self.records_fetched += len(out)
        self.bytes_fetched += len(data)
        self.buffer.extend(out)

    # -- acknowledging --------------------------------------------------------------------

    async def acknowledge(self, *, final: bool = False) -> AckResults:
        """Send every waiting acknowledgement by ShareAcknowledge and return the results;
        ``final``: also close every session (epoch -1)."""
        book = self._book
        pending = [tp for tp, a in book.pending.items() if a]
        routed = self._route(pending)
        known = {tp for parts in routed.values() for tp in parts}
        unrouted = book.take([tp for tp in pending if tp not in known])
        results, offsets = self._fail_all(unrouted, Errors.LeaderNotAvailableError("no leader"))
        self._renewals_answered(unrouted, results)
        nodes = set(routed) | (set(self._sessions) if final else set())

        async def one(node: int) -> AckResults:
            s = self._session(node)
            async with s.lock:
                return await self._acknowledge_locked(
                    node, s, None, routed.get(node, {}), final=final
                )

        for r, o in await asyncio.gather(*(one(n) for n in nodes)):
            results.update(r)
            offsets.update(o)
        if self._h_ack:
            self._emit_ack((results, offsets))
        return results, offsets

    async def acknowledge_pending(self) -> None:
        """Send the waiting acknowledgements by ShareAcknowledge (a poll with records still
        to hand out: no fetch is due); the results go to ``ack_results``."""
        self.ack_results.append(await self.acknowledge())

    async def _acknowledge_locked(
        self,
        node: int,
        s: _Session,
        acks: dict[TopicPartition, dict[int, int]] | None,
        parts: Mapping[TopicPartition, TopicIdPartition],
        *,
        final: bool,
    ) -> AckResults:
        if acks is None:
            acks = self._book.take(parts)
        refused: dict[TopicPartition, dict[int, int]] = {}
        if not share_ops.supports_renew(self._client):
            # as Java 4.4: a RENEW the brokers cannot carry (ShareAcknowledge below v2) is not
            # sent; its outcome is UnsupportedVersionError, for the acknowledgement callback
            for tp, a in acks.items():
                renew = {off: t for off, t in a.items() if t == _RENEW}
                if renew:
                    refused[tp] = renew
            acks = {
                tp: rest
                for tp, a in acks.items()
                if (rest := {off: t for off, t in a.items() if t != _RENEW})
            }
        results, offsets = await self._send_acknowledge(node, s, acks, parts, final=final)
        self._renewals_answered(acks, results)
        if refused:
            exc = Errors.UnsupportedVersionError(
                "RENEW needs ShareAcknowledge v2 (KIP-1222, Apache Kafka 4.2+); the brokers "
                "have an older version: not renewed"
            )
            no, _ = self._fail_all(refused, exc)
            self._renewals_answered(refused, no)
            for tp, renew in refused.items():
                results[tp] = exc
                offsets[tp] = sorted(set(offsets.get(tp, ())) | set(renew))
        return results, offsets

    def _renewals_answered(
        self, acks: Mapping[TopicPartition, dict[int, int]], results: Mapping[TopicPartition, Any]
    ) -> None:
        """Renewed records go back to the buffer (a later poll hands them out again, as Java
        4.4 does) once their RENEW is answered without error."""
        for tp, a in acks.items():
            renewed = [off for off, t in a.items() if t == _RENEW]
            if renewed:
                ok = results.get(tp, Errors.KafkaError("no answer")) is None
                self.buffer[:0] = self._book.renewal_answered(tp, renewed, ok)

    async def _send_acknowledge(
        self,
        node: int,
        s: _Session,
        acks: dict[TopicPartition, dict[int, int]],
        parts: Mapping[TopicPartition, TopicIdPartition],
        *,
        final: bool,
    ) -> AckResults:
        if s.epoch == 0:  # nothing to close; acknowledgements have no session
            return self._fail_all(acks, _released())
        if not acks and not final:
            return {}, {}
        wire = {parts[tp]: to_batches(a) for tp, a in acks.items()}
        epoch = -1 if final else s.epoch
        request = share_ops.share_acknowledge_request(self._group, self._member, epoch, wire)
        try:
            resp = await self._client.send(node, request)
        except Errors.KafkaError as exc:
            s.reset()
            return self._fail_all(acks, exc)
        except BaseException:  # re-raised, cancellation included: the session is unknown
            s.reset()
            raise
        result = share_ops.parse_share_acknowledge(resp)
        if final:
            s.reset()
        if result.error_code:
            err = Errors.for_code(result.error_code)(result.error_message or "ShareAcknowledge")
            if result.error_code in _SESSION_LOST:
                s.reset()
            elif not final:
                s.epoch = _next_epoch(s.epoch)
            return self._fail_all(acks, err)
        if not final:
            s.epoch = _next_epoch(s.epoch)
        return self._ack_outcome(acks, parts, result)

    # -- results --------------------------------------------------------------------------

    @staticmethod
    def _fail_all(acks: Mapping[TopicPartition, dict[int, int]], exc: BaseException) -> AckResults:
        return (
            dict.fromkeys(acks, exc),
            {tp: sorted(o for o, t in a.items() if t) for tp, a in acks.items()},
        )

    @staticmethod
    def _ack_outcome(
        acks: Mapping[TopicPartition, dict[int, int]],
        parts: Mapping[TopicPartition, TopicIdPartition],
        result: Any,
    ) -> AckResults:
        results: dict[TopicPartition, BaseException | None] = {}
        offsets: dict[TopicPartition, list[int]] = {}
        for tp, a in acks.items():
            pd = result.partitions.get(parts[tp])
            offsets[tp] = sorted(o for o, t in a.items() if t)
            if pd is None:
                results[tp] = Errors.KafkaProtocolError(f"no acknowledgement answer for {tp}")
            elif pd.ack_error_code:
                results[tp] = Errors.for_code(pd.ack_error_code)(
                    f"{tp.topic}-{tp.partition}: {pd.ack_error_message or ''}"
                )
            else:
                results[tp] = None
        return results, offsets

    def _report(self, outcome: AckResults) -> None:
        # gap-only acknowledgements are bookkeeping: nothing to report for them
        results, offsets = outcome
        keep = {tp: exc for tp, exc in results.items() if offsets.get(tp)}
        if keep:
            self.ack_results.append((keep, {tp: offsets[tp] for tp in keep}))
            if self._h_ack:
                self._emit_ack((keep, offsets))

    def _emit_ack(self, outcome: AckResults) -> None:
        """The on_acknowledge hooks, for the partitions with records acknowledged."""
        results, offsets = outcome
        keep = {tp: exc for tp, exc in results.items() if offsets.get(tp)}
        if keep:
            emit(self._h_ack, self._group, keep, {tp: offsets[tp] for tp in keep})


def _released() -> BaseException:
    return Errors.ShareSessionNotFoundError(
        "the share session holding these records ended: they go back to the group"
    )


def _legacy(batch: Any, topic: str, partition: int, lo: int) -> list[ShareConsumerRecord]:
    ts_type = batch.timestamp_type
    return [
        ShareConsumerRecord(
            topic,
            partition,
            off,
            ts,
            ts_type,
            k,
            v,
            None,
            -1 if k is None else len(k),
            -1 if v is None else len(v),
            tuple(h) if h else (),
        )
        for off, ts, k, v, h in batch.record_tuples()
        if off >= lo
    ]
