"""Hooks: observe what a producer, consumer or client does, at the points a user can see.

A hook is any object implementing any subset of the ``on_*`` methods of :class:`Hook`
(subclassing :class:`Hook` is optional: it only documents them and gives no-op defaults).
Pass hooks to a client with ``hooks=[...]``::

    class SlowRequests(Hook):
        def on_response(self, node_id, api_key, api_name, latency, error):
            if latency > 0.5:
                print(f"{api_name} to node {node_id} took {latency:.3f} s")

    producer = AIOKafkaProducer(bootstrap_servers="...", hooks=[SlowRequests()])

The client looks at each hook ONCE, when it is constructed, and keeps for every event a tuple of
the methods that implement it (a method inherited unchanged from :class:`Hook` does not count).
Where no hook implements an event, its call site is a single truth test of an empty tuple, so
hooks cost nothing unless registered (franz-go's ``kgo.WithHooks`` works the same way). Every
producer and consumer always registers one hook of its own, the counters behind ``metrics()``;
it implements neither of the per-record events (:meth:`Hook.on_send`, :meth:`Hook.on_consume`).

Rules for hook methods:

* they are plain functions called on the event loop: keep them short, never block; to do I/O,
  hand the data to a task or a queue;
* an exception raised by a hook is logged (with its traceback the first time, for each hook
  method) and otherwise ignored: the client goes on as if the hook had returned. Only
  ``Exception`` is caught, so a ``CancelledError`` (or ``KeyboardInterrupt``) raised inside a
  hook propagates like any other cancellation;
* the arguments are the client's own objects (``headers`` sequences, offset maps, partition
  sets): do not modify them, except through :meth:`Hook.on_send`'s return value;
* a hook with a ``bind(info)`` method is bound first: the client calls it once with a
  :class:`ClientInfo` and registers what it returns (so one hook object can serve several
  clients and still know which client an event comes from; see :mod:`aiokafka_lite.otel`).

Times are seconds (floats, from the event loop's monotonic clock); sizes are bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["ClientInfo", "EVENTS", "Hook", "HookSet", "Headers", "emit", "apply_send"]

log = logging.getLogger(__name__)

#: record headers as the producer takes them and the consumer returns them
Headers = Sequence[tuple[str, bytes | None]]

#: every hook event, in the order :class:`Hook` documents them
EVENTS = (
    "on_connect",
    "on_disconnect",
    "on_request_sent",
    "on_response",
    "on_send",
    "on_batch_sent",
    "on_batch_acked",
    "on_batch_failed",
    "on_fetch",
    "on_consume",
    "on_commit",
    "on_acknowledge",
    "on_partitions_revoked",
    "on_partitions_assigned",
)


@dataclass(frozen=True)
class ClientInfo:
    """Which client a hook is bound to (what :meth:`Hook.bind` receives)."""

    #: ``"producer"``, ``"consumer"`` or ``"client"`` (a :class:`~aiokafka_lite.KafkaClient`
    #: made directly)
    kind: str
    client_id: str
    #: the consumer's ``group_id`` (None for producers and consumers without a group)
    group_id: str | None
    #: the bootstrap addresses as ``"host:port,host:port"``
    bootstrap_servers: str

    @classmethod
    def of(
        cls,
        kind: str,
        client_id: str,
        group_id: str | None,
        servers: str | Iterable[str] | None,
    ) -> ClientInfo:
        """``servers`` as a client takes them (a string or a list of addresses; None: not
        given yet, the client's start() refuses it)."""
        text = "" if servers is None else servers if isinstance(servers, str) else ",".join(servers)
        return cls(kind, client_id, group_id, text)


class Hook:
    """Documents every hook event; subclass it and override the ones you need.

    Connection layer (every client): :meth:`on_connect`, :meth:`on_disconnect`,
    :meth:`on_request_sent`, :meth:`on_response`. Producer: :meth:`on_send` (per record),
    :meth:`on_batch_sent`, :meth:`on_batch_acked`, :meth:`on_batch_failed`. Consumer:
    :meth:`on_fetch`, :meth:`on_consume` (per record), :meth:`on_commit`,
    :meth:`on_partitions_revoked`, :meth:`on_partitions_assigned`.
    """

    def bind(self, info: ClientInfo) -> object:
        """Called once per client the hook is given to; returns the hook to register (by
        default ``self``)."""
        return self

    # -- connections and requests (conn.py) -----------------------------------------------

    def on_connect(self, node_id: int | None, host: str, port: int, purpose: str) -> None:
        """A TCP (or TLS) stream to a broker opened, before the ApiVersions/SASL handshake.

        ``node_id`` is negative for a bootstrap address (that connection may later serve the
        broker at that address under its real id); ``purpose`` is the connection's pool group:
        ``"default"``, or ``"coordinator"`` for group traffic.
        """

    def on_disconnect(
        self, node_id: int | None, host: str, port: int, purpose: str, reason: BaseException | None
    ) -> None:
        """A connection that :meth:`on_connect` reported closed (exactly once per connect);
        ``reason`` is None for an orderly close (stop, idle, metadata moved)."""

    def on_request_sent(self, node_id: int | None, api_key: int, api_name: str, size: int) -> None:
        """A request frame of ``size`` bytes was written (``api_name``: e.g. ``"Produce"``)."""

    def on_response(
        self,
        node_id: int | None,
        api_key: int,
        api_name: str,
        latency: float,
        error: BaseException | None,
    ) -> None:
        """Once for every request written that expects an answer: the answer arrived
        ``latency`` s after the request was written, or it failed (``error``: a timeout, the
        connection closed, an undecodable answer; an ``asyncio.CancelledError`` instance, never
        raised, when the caller stopped waiting, e.g. the client stopped). Broker error codes
        inside an answer are not errors here. acks=0 produce requests get no answer."""

    # -- producer (producer.py, producer/sender.py) ---------------------------------------

    def on_send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> Headers | None:
        """A record is about to be appended (serialized, its partition chosen); return new
        headers to send instead (e.g. with trace context added), or None to keep them.

        Called from ``send()``, ``send_and_wait()`` and ``send_many()``, not for records in a
        ``create_batch()``/``send_batch()`` batch. Registering this event routes every
        ``send()`` through the general path (the fast paths skip hooks).
        """
        return None

    def on_batch_sent(
        self, topic: str, partition: int, records: int, size: int, queue_time: float, attempt: int
    ) -> None:
        """A record batch went into a Produce request (``attempt`` 1, then once per retry);
        ``queue_time``: s since the batch was opened."""

    def on_batch_acked(
        self, topic: str, partition: int, records: int, size: int, base_offset: int, latency: float
    ) -> None:
        """The broker acknowledged the batch (exactly once per batch, or :meth:`on_batch_failed`
        instead); ``latency``: s from opening the batch to the acknowledgement; ``base_offset``
        is -1 with acks=0."""

    def on_batch_failed(
        self, topic: str, partition: int, records: int, size: int, error: BaseException
    ) -> None:
        """The batch's records failed with ``error`` (exactly once per batch: not for retries)."""

    # -- consumer (consumer/) -------------------------------------------------------------

    def on_fetch(
        self,
        topic: str,
        partition: int,
        records: int,
        size: int,
        high_watermark: int,
        lag: int,
    ) -> None:
        """A fetch answer for one partition arrived without error: ``records`` and ``size``
        bytes of record data from the fetch position on (control records not counted),
        ``lag`` = ``high_watermark`` minus the fetch position."""

    def on_consume(self, record: ConsumerRecord[Any, Any]) -> None:
        """The application receives ``record`` (``getone``, ``getmany``, ``async for``)."""

    def on_commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        latency: float,
        error: BaseException | None,
    ) -> None:
        """An offset commit finished (``commit()``, auto commit, the commit before a
        rebalance), successfully or with ``error``, after ``latency`` s (retries included)."""

    def on_acknowledge(
        self,
        group_id: str,
        results: Mapping[TopicPartition, BaseException | None],
        offsets: Mapping[TopicPartition, Sequence[int]],
    ) -> None:
        """A share consumer's acknowledgements (:class:`AIOKafkaShareConsumer`) were answered:
        per partition the error (None: done) and the offsets of the records acknowledged;
        once per request that carried them (a ShareFetch, ShareAcknowledge, or a failure
        before an answer)."""

    def on_partitions_revoked(self, group_id: str, revoked: set[TopicPartition]) -> None:
        """A rebalance starts: these partitions are taken away (empty before the first join);
        called before the rebalance listener's ``on_partitions_revoked``."""

    def on_partitions_assigned(self, group_id: str, assigned: set[TopicPartition]) -> None:
        """A rebalance finished with this assignment; called before the rebalance listener's
        ``on_partitions_assigned``."""


_BASE = {name: getattr(Hook, name) for name in EVENTS}


def _implemented(hook: object, name: str) -> Callable[..., Any] | None:
    """``hook``'s method for event ``name``, or None when it has none of its own."""
    fn = getattr(hook, name, None)
    if fn is None or not callable(fn):
        return None
    if getattr(fn, "__func__", None) is _BASE[name]:
        return None  # inherited unchanged from Hook: a no-op
    return fn  # type: ignore[no-any-return]


class HookSet:
    """The hooks of one client, one tuple of methods per event (see the module docstring).

    Components keep the tuples they need (``self._h_x = hooks.on_x``) and call
    ``if self._h_x: emit(self._h_x, ...)``.
    """

    __slots__ = ("hooks", "info", *EVENTS)

    on_connect: tuple[Callable[..., Any], ...]
    on_disconnect: tuple[Callable[..., Any], ...]
    on_request_sent: tuple[Callable[..., Any], ...]
    on_response: tuple[Callable[..., Any], ...]
    on_send: tuple[Callable[..., Any], ...]
    on_batch_sent: tuple[Callable[..., Any], ...]
    on_batch_acked: tuple[Callable[..., Any], ...]
    on_batch_failed: tuple[Callable[..., Any], ...]
    on_fetch: tuple[Callable[..., Any], ...]
    on_consume: tuple[Callable[..., Any], ...]
    on_commit: tuple[Callable[..., Any], ...]
    on_acknowledge: tuple[Callable[..., Any], ...]
    on_partitions_revoked: tuple[Callable[..., Any], ...]
    on_partitions_assigned: tuple[Callable[..., Any], ...]

    def __init__(self, hooks: Iterable[object] = (), info: ClientInfo | None = None) -> None:
        bound: list[object] = []
        for hook in hooks:
            if isinstance(hook, (str, bytes)) or hook is None:
                raise TypeError(f"a hook must be an object with on_* methods, got {hook!r}")
            bind = getattr(hook, "bind", None)
            if info is not None and callable(bind):
                hook = bind(info)
            bound.append(hook)
        self.hooks: tuple[object, ...] = tuple(bound)
        self.info = info
        for name in EVENTS:
            fns = []
            for hook in bound:
                fn = _implemented(hook, name)
                if fn is not None:
                    fns.append(fn)
            setattr(self, name, tuple(fns))

    def __repr__(self) -> str:
        return f"<HookSet {[type(h).__name__ for h in self.hooks]}>"


#: (id of the hook object, method name) of hook methods whose failure was logged in full
_reported: set[tuple[int, str]] = set()


def _failed(fn: Callable[..., Any]) -> None:
    owner = getattr(fn, "__self__", fn)
    name = getattr(fn, "__name__", repr(fn))
    key = (id(owner), name)
    if key in _reported:
        log.debug("hook %s.%s failed again", type(owner).__name__, name, exc_info=True)
        return
    _reported.add(key)
    log.exception(
        "hook %s.%s raised (ignored; later failures of this hook method are logged at debug "
        "level only)",
        type(owner).__name__,
        name,
    )


def emit(fns: tuple[Callable[..., Any], ...], *args: Any) -> None:
    """Call each of ``fns`` with ``args``; an ``Exception`` is logged and ignored (see the
    module docstring), anything else (``CancelledError``) propagates."""
    for fn in fns:
        try:
            fn(*args)
        except Exception:
            _failed(fn)


def apply_send(
    fns: tuple[Callable[..., Any], ...],
    topic: str,
    partition: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
) -> Headers:
    """Run the :meth:`Hook.on_send` methods in turn, each seeing the headers the previous one
    returned; the headers to send."""
    for fn in fns:
        try:
            new = fn(topic, partition, key, value, headers)
        except Exception:
            _failed(fn)
            continue
        if new is not None:
            headers = new
    return headers
