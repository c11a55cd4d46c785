"""One asyncio stream to one Kafka broker: the I/O shell around a sans-I/O session.

:class:`BrokerConnection` owns a TCP (optionally TLS) stream; the framing, the correlation ids
and the table of requests awaiting an answer are its :class:`~aiokafka_lite.protocol.session.
Session` (no I/O). Requests are written as soon as they are sent (pipelined, up to
``max_in_flight`` awaiting a response). The stream's protocol object hands the bytes to the
session as they arrive, in ``buffer_updated`` itself (no reader task: one event-loop turn less
per response), and each complete answer resolves the future registered under its correlation id.

Invariants (the ones a reader of this file needs to trust it):

* Kafka answers the requests of one connection in order. A request whose deadline passes
  therefore makes the whole stream untrustworthy: it fails with ``KafkaTimeoutError`` and the
  connection is closed.
* Closing, for whatever reason, fails *every* pending request at once (``KafkaConnectionError``,
  except the request whose response was malformed, which gets the ``KafkaProtocolError``).
* A frame's size is checked against ``max_response_size`` before anything is read, so a hostile
  or corrupt size never allocates.
* Wire versions are chosen here, per request class, from the broker's ApiVersions answer:
  ``min(client max, broker max)``; code above never sees a version number.
* Re-authentication (KIP-368) happens here, invisibly to code above: when the broker grants a
  session lifetime (SaslAuthenticate v1+), a timer re-runs the SASL exchange on the same stream
  before the session ends (:mod:`aiokafka_lite._reauth`). Requests issued
  while SaslHandshake/SaslAuthenticate are on the wire are held, in order, and written right
  after them; requests already in flight are answered normally (the broker answers in order).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any

from . import errors as Errors
from ._reauth import Held, Reauthenticator
from ._sasl import SaslSettings, authenticate
from ._transport import Callback, FlowControl, Stream
from .hooks import HookSet, emit
from .protocol import messages as m
from .protocol import session as handshake
from .protocol.session import Session, api_name, capped_version, decode_answer, pick_version

__all__ = ["BrokerConnection", "pick_version", "CLIENT_SOFTWARE_NAME", "CLIENT_SOFTWARE_VERSION"]

log = logging.getLogger(__name__)

#: Sent in ApiVersions v3+ (the broker only accepts ``[a-zA-Z0-9.-]`` here).
CLIENT_SOFTWARE_NAME = "aiokafka-lite"
CLIENT_SOFTWARE_VERSION = "0.1.0"


CloseCallback = Callable[["BrokerConnection", "BaseException | None"], None]


class BrokerConnection(FlowControl):
    """A pipelined request/response connection to one broker.

    Create it, ``await connect()`` (TCP/TLS, ApiVersions, SASL), then ``await send(request)``
    from any number of tasks. ``close()`` is synchronous and idempotent.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int | None = None,
        group: str = "default",
        client_id: str = "aiokafka_lite",
        request_timeout_ms: int = 40000,
        max_in_flight: int = 100,
        max_response_size: int = 100 * 1024 * 1024,
        connections_max_idle_ms: int | None = 540000,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: Any = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        on_close: CloseCallback | None = None,
        hooks: HookSet | None = None,
        cluster_id: str | None = None,
    ) -> None:
        if security_protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"unknown security_protocol {security_protocol!r}")
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.host = host
        self.port = port
        self.node_id = node_id
        #: the cluster this connection means to reach (KIP-1242): with ``node_id``, sent in
        #: ApiVersions v5+, and a broker of another cluster (or another node id) answers
        #: REBOOTSTRAP_REQUIRED (``RebootstrapRequiredError`` from ``connect()``)
        self.expected_cluster_id = cluster_id
        self.group = group
        self.client_id = client_id
        #: the wait for one answer (the client passes its ``timeouts.request_ms``)
        self.answer_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight
        self.max_response_size = max_response_size
        self.connections_max_idle_ms = connections_max_idle_ms
        self.security_protocol = security_protocol
        self.ssl_context = ssl_context
        #: the SASL login's settings (_sasl.py, and _reauth.py when the session expires)
        self.sasl = SaslSettings(
            host=host,
            mechanism=sasl_mechanism,
            plain_username=sasl_plain_username,
            plain_password=sasl_plain_password,
            oauth_token_provider=sasl_oauth_token_provider,
            kerberos_service_name=sasl_kerberos_service_name,
            kerberos_domain_name=sasl_kerberos_domain_name,
        )
        #: requests issued while a re-authentication exchange is on the wire, in order (a
        #: list only then; :mod:`aiokafka_lite._reauth` sets, fills from _issue and releases it)
        self._held: list[Held] | None = None
        self._reauth = Reauthenticator(self)
        self._on_close = on_close
        # hook tuples (see hooks.py): each call site is one truth test when none is registered
        self._h_connect = hooks.on_connect if hooks is not None else ()
        self._h_disconnect = hooks.on_disconnect if hooks is not None else ()
        self._h_sent = hooks.on_request_sent if hooks is not None else ()
        self._h_response = hooks.on_response if hooks is not None else ()
        self._observe = bool(self._h_sent or self._h_response)
        #: correlation id -> write time of requests awaiting an answer (on_response hooks only)
        self._sent_at: dict[int, float] = {}
        self._opened = False  # the stream opened (on_connect reported it)

        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: Any = None
        # the sans-I/O half: framing, correlation ids, and the pending table, which maps a
        # correlation id -> (future, request class, version, deadline timer)
        self._session = Session(client_id, max_response_size, f"{host}:{port}")
        self._pending: dict[int, tuple[Any, Any, int, asyncio.TimerHandle]] = self._session.pending
        self._write_paused = False  # the transport's buffer is over its high-water mark
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._lost: asyncio.Future[None] | None = None  # resolved when the transport is gone
        self._high_water = 64 * 1024
        self._wqueue: list[bytes | bytearray] = []  # small frames waiting for _flush
        self._flush_scheduled = False
        self._idle_handle: asyncio.TimerHandle | None = None
        self._slots = 0  # requests holding an in-flight slot (sent or being sent)
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._versions: dict[type, int] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        #: the cluster's finalized feature levels (ApiVersions v3+, e.g. ``transaction.version``)
        #: and the epoch of that view (-1: none reported)
        self.finalized_features: dict[str, int] = {}
        self.finalized_features_epoch = -1
        self._connected = False
        self._closed = False
        self.close_reason: BaseException | None = None
        self.last_activity = 0.0

    # ------------------------------------------------------------------ state

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("connected" if self._connected else "connecting")
        return (
            f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {self.group} {state}>"
        )

    @property
    def connected(self) -> bool:
        """True once the handshake finished and until the connection closes."""
        return self._connected and not self._closed

    @property
    def closed(self) -> bool:
        """True after :meth:`close` (or a failure that closed the stream)."""
        return self._closed

    @property
    def reauthentications(self) -> int:
        """Completed re-authentications (KIP-368) of this connection."""
        return self._reauth.count

    @property
    def in_flight(self) -> int:
        """Requests awaiting a response plus sends waiting for an in-flight slot."""
        return self._slots + len(self._slot_waiters)

    # ---------------------------------------------------------------- connect

    async def connect(self, timeout_ms: int | None = None) -> None:
        """Open the stream, negotiate API versions and authenticate; bounded by ``timeout_ms``.

        Raises ``KafkaConnectionError`` (unreachable, reset), ``KafkaTimeoutError`` or the
        broker's own error (e.g. ``UnsupportedVersionError``, SASL failures).
        """
        if self._closed or self._loop is not None:
            raise Errors.IllegalStateError("BrokerConnection.connect() may be called once")
        loop = self._loop = asyncio.get_running_loop()
        timeout = (timeout_ms if timeout_ms is not None else self.answer_timeout_ms) / 1000
        deadline = loop.time() + timeout
        tls: dict[str, Any] = {}
        if self.security_protocol in ("SSL", "SASL_SSL"):
            tls = {
                "ssl": self.ssl_context or ssl.create_default_context(),
                "server_hostname": self.host,
            }
        self._lost = loop.create_future()
        opening = loop.create_connection(lambda: Stream(self), self.host, self.port, **tls)
        try:
            transport, _proto = await asyncio.wait_for(opening, timeout)
        except asyncio.TimeoutError:
            self._fail_connect()
            raise Errors.KafkaConnectionError(
                f"connect to {self.host}:{self.port} timed out after {timeout * 1000:.0f} ms"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            self._fail_connect()
            raise Errors.KafkaConnectionError(
                f"cannot connect to {self.host}:{self.port}: {exc}"
            ) from exc
        self._transport = transport
        if self.closed:  # lost between the handshake and here
            transport.abort()
            raise self._closed_error()
        self._opened = True
        if self._h_connect:
            emit(self._h_connect, self.node_id, self.host, self.port, self.group)
        try:
            self._high_water = max(transport.get_write_buffer_limits()[1], 16 * 1024)
        except (AttributeError, NotImplementedError):  # pragma: no cover - exotic transports
            pass
        self.last_activity = loop.time()
        lifetime_ms, auth_start = 0, 0.0
        try:
            await self._negotiate_versions(deadline)
            if self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                auth_start = loop.time()
                lifetime_ms = await authenticate(self.sasl, self._sasl_send, deadline)
        except BaseException as exc:
            self.close(exc if isinstance(exc, Errors.KafkaError) else None)
            raise
        self._connected = True
        self._schedule_idle_check()
        self._reauth.schedule(lifetime_ms, auth_start)

    def _fail_connect(self) -> None:
        self._closed = True
        if self._on_close is not None:
            self._on_close(self, None)

    def _remaining_ms(self, deadline: float) -> float:
        assert self._loop is not None
        return max((deadline - self._loop.time()) * 1000, 1.0)

    def _loop_time(self) -> float:
        assert self._loop is not None
        return self._loop.time()

    async def _negotiate_versions(self, deadline: float) -> None:
        req_cls = m.ApiVersionsRequest
        req = req_cls(
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION,
        )
        if self.expected_cluster_id is not None and self.node_id is not None and self.node_id >= 0:
            req.cluster_id, req.node_id = self.expected_cluster_id, self.node_id  # v5+ only
        version = req_cls.MAX_VERSION
        resp = await self.send(req, timeout_ms=self._remaining_ms(deadline), _version=version)
        while (lower := handshake.api_versions_retry(resp, version)) is not None:
            version = lower
            resp = await self.send(req, timeout_ms=self._remaining_ms(deadline), _version=version)
        if resp.error_code:
            raise Errors.for_code(resp.error_code)(
                f"ApiVersions v{version} to {self.host}:{self.port} failed"
            )
        self.api_versions, self.finalized_features_epoch, self.finalized_features = (
            handshake.read_api_versions(resp)
        )

    # ------------------------------------------------------------ versions

    def version_for(self, request_class: type) -> int:
        """The wire version this connection uses for ``request_class`` (cached).

        Raises ``UnsupportedVersionError`` when the client's and the broker's ranges do not meet.
        """
        version = self._versions.get(request_class)
        if version is None:
            version = pick_version(
                request_class,
                self.api_versions,
                f"broker {self.host}:{self.port} (node {self.node_id})",
            )
            self._versions[request_class] = version
        return version

    # ------------------------------------------------------------------ send

    async def send(
        self,
        request: Any,
        *,
        expect_response: bool = True,
        timeout_ms: float | None = None,
        max_version: int | None = None,
        _version: int | None = None,
    ) -> Any:
        """Write ``request`` and (unless ``expect_response`` is False) await its response.

        ``expect_response=False`` is for acks=0 produce: nothing is registered and the call
        returns None once the frame is queued (it is written before the loop's next iteration,
        and before the socket closes if :meth:`close` comes first). ``max_version`` caps the
        negotiated version for this one request (a Fetch naming a topic whose id is unknown
        stays at v12, the last version addressing topics by name).
        """
        if self._closed:
            raise self._closed_error()
        loop = self._loop
        assert loop is not None, "connect() first"
        cls = type(request)
        version = _version if _version is not None else self._versions.get(cls)
        if version is None:
            version = self.version_for(cls)
        if max_version is not None and version > max_version:
            where = f"broker {self.host}:{self.port} (node {self.node_id})"
            version = capped_version(cls, self.api_versions, max_version, where)
        deadline = loop.time() + (
            (timeout_ms if timeout_ms is not None else self.answer_timeout_ms) / 1000
        )

        if not expect_response:  # no slot, nothing registered: written (or held) now
            self._issue(request, cls, version, None, deadline)
            if self._transport.get_write_buffer_size() > self._high_water:
                await self._drain(deadline)
            return None

        if self._slots >= self.max_in_flight or self._slot_waiters:
            await self._wait_slot(deadline)
            if self._closed:  # closed after the slot was handed over, before we resumed
                raise self._closed_error()
        else:
            self._slots += 1
        fut: asyncio.Future[Any] = loop.create_future()
        try:
            self._issue(request, cls, version, fut, deadline)
        except BaseException:
            self._release_slot()
            raise
        if self._transport.get_write_buffer_size() > self._high_water:
            try:
                await self._drain(deadline)
            except BaseException:
                if fut.done():
                    if not fut.cancelled():
                        fut.exception()  # the drain error is what the caller sees
                else:
                    fut.cancel()  # the entry stays registered: its answer will be skipped
                raise
        return await fut

    def send_nowait(
        self,
        request: Any,
        on_done: Callable[[Any, BaseException | None], None],
        *,
        timeout_ms: float | None = None,
    ) -> bool:
        """Write ``request`` now; ``on_done(response, None)`` or ``on_done(None, error)`` is
        called from the event that ends it (its response frame, its deadline, the close),
        with no task and no event-loop turn in between. Returns False, having written
        nothing, when the connection is closed or no in-flight slot is free (then use
        :meth:`send`). ``on_done`` must not raise (an exception is logged)."""
        if self._closed or self._slots >= self.max_in_flight or self._slot_waiters:
            return False
        loop = self._loop
        assert loop is not None, "connect() first"
        cls = type(request)
        version = self._versions.get(cls)
        if version is None:
            version = self.version_for(cls)
        ms = timeout_ms if timeout_ms is not None else self.answer_timeout_ms
        self._slots += 1
        try:
            self._issue(request, cls, version, Callback(on_done), loop.time() + ms / 1000)
        except BaseException:
            self._release_slot()
            raise
        return True

    def _issue(self, request: Any, cls: Any, version: int, waiter: Any, deadline: float) -> None:
        """The ONE way a request goes out: encode ``request`` under the next correlation id,
        register ``waiter`` (a future, or a :class:`~aiokafka_lite._transport.Callback`) for its answer, due by
        ``deadline``, and write it. The caller holds an in-flight slot; nothing is registered
        when encoding fails. ``waiter`` None (``expect_response=False``, acks=0 Produce): no
        slot, nothing registered. While a re-authentication is on the wire the request is
        held instead (:mod:`aiokafka_lite._reauth` issues it, in order, right after)."""
        if self._held is not None:
            self._held.append((request, cls, version, waiter, deadline))
            return
        corr, frame = self._session.frame(request, version)
        if waiter is not None:
            timer = self._loop.call_at(deadline, self._expire, corr)  # type: ignore[union-attr]
            self._pending[corr] = (waiter, cls, version, timer)
        self._write(frame)
        if self._observe:
            self._observe_request(cls, corr, len(frame), waiter is not None)

    def _observe_request(self, cls: Any, corr: int, size: int, answered: bool) -> None:
        """Hooks: the request was written (its answer, if ``answered``, is reported by
        :meth:`_answered`)."""
        if self._h_sent:
            emit(self._h_sent, self.node_id, cls.API_KEY, api_name(cls), size)
        if self._h_response and answered:
            self._sent_at[corr] = self._loop.time()  # type: ignore[union-attr]

    def _answered(
        self, corr: int, cls: Any, fut: asyncio.Future[Any], error: BaseException | None
    ) -> None:
        """Hooks: the request ``corr`` ended (answered, or ``error``). Called where its entry
        leaves ``_pending``; a caller that stopped waiting (``fut`` cancelled) is reported as
        an ``asyncio.CancelledError`` instance, never raised."""
        sent = self._sent_at.pop(corr, None)
        if sent is None:
            return
        if fut.cancelled():
            error = asyncio.CancelledError()
        latency = self._loop.time() - sent  # type: ignore[union-attr]
        emit(self._h_response, self.node_id, cls.API_KEY, api_name(cls), latency, error)

    # ------------------------------------------------------------------ read

    def _get_buffer(self, sizehint: int) -> memoryview:
        """Where the transport reads next (``BufferedProtocol.get_buffer``)."""
        return self._session.get_buffer()

    def _buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were read into the last buffer: complete each request answered."""
        try:
            for corr, entry, payload in self._session.received(nbytes):
                self._frame(corr, entry, payload)
                if self._closed:
                    return
        except Errors.KafkaError as exc:
            self._fail_head(exc)
            self.close(exc)

    def _frame(self, corr: int, entry: Any, payload: bytes) -> None:
        """One complete response frame (after the size): resolve its request's future."""
        fut, cls, version, timer = entry
        timer.cancel()
        self._release_slot()
        if fut.done():  # the caller gave up (cancelled); the stream stays in sync
            if self._h_response:
                self._answered(corr, cls, fut, None)
            return
        try:
            resp = decode_answer(cls, version, payload)
        except Exception as exc:  # a codec bug must fail this request, not the stream
            err = (
                exc
                if isinstance(exc, Errors.KafkaError)
                else Errors.KafkaProtocolError(f"cannot decode {cls.__name__} v{version}: {exc!r}")
            )
            if self._h_response:
                self._answered(corr, cls, fut, err)
            fut.set_exception(err)
            return
        if self._h_response:
            self._answered(corr, cls, fut, None)
        fut.set_result(resp)

    def _connection_lost(self, exc: BaseException | None) -> None:
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        if self._closed:
            return
        if exc is None:
            partial = self._session.buffered
            self.close(
                Errors.KafkaConnectionError(
                    f"connection to {self.host}:{self.port} closed by the broker"
                    + (f" in the middle of a frame ({partial} bytes read)" if partial else "")
                )
            )
        else:
            self.close(Errors.KafkaConnectionError(f"connection to {self.host}:{self.port}: {exc}"))

    def _fail_head(self, exc: BaseException) -> None:
        """Give a framing error to the oldest pending request (the one the bad frame answered).

        The caller closes the connection next, which fails the others.
        """
        if self._pending:
            corr = next(iter(self._pending))
            fut, cls, _v, timer = self._pending.pop(corr)
            timer.cancel()
            if not fut.done():
                fut.set_exception(exc)
            if self._sent_at:
                self._answered(corr, cls, fut, exc)

    def _expire(self, corr: int) -> None:
        entry = self._pending.pop(corr, None)
        if entry is None:
            return
        fut, cls, version, _timer = entry
        err = Errors.KafkaTimeoutError(
            f"{cls.__name__} v{version} to node {self.node_id} ({self.host}:{self.port}) "
            f"got no response before its deadline"
        )
        if not fut.done():
            fut.set_exception(err)
        if self._sent_at:
            self._answered(corr, cls, fut, err)
        self.close(
            Errors.KafkaConnectionError(
                f"connection to {self.host}:{self.port} closed: an earlier request timed out"
            )
        )

    # ----------------------------------------------------------------- close

    def _closed_error(self) -> Errors.KafkaConnectionError:
        reason = f": {self.close_reason}" if self.close_reason is not None else ""
        return Errors.KafkaConnectionError(
            f"connection to node {self.node_id} ({self.host}:{self.port}) is closed{reason}"
        )

    def close(self, reason: BaseException | None = None) -> None:
        """Close the stream and fail every pending request and slot waiter at once."""
        if self._closed:
            return
        if self._wqueue:  # frames already accepted (e.g. acks=0) still go out before the FIN
            try:
                self._flush()
            except Exception:  # pragma: no cover - transport already broken
                self._wqueue.clear()
        self._closed = True
        self._connected = False
        self.close_reason = reason
        pending = self._session.reset()
        self._pending = self._session.pending
        self._slots = 0
        for corr, (fut, cls, _v, timer) in pending.items():
            timer.cancel()
            if not fut.done():
                fut.set_exception(self._closed_error())
            if self._sent_at:
                self._answered(corr, cls, fut, self._closed_error())
        waiters, self._slot_waiters = self._slot_waiters, deque()
        for w in waiters:
            if not w.done():
                w.set_exception(self._closed_error())
        self._reauth.close()
        if self._idle_handle is not None:
            self._idle_handle.cancel()
            self._idle_handle = None
        drains, self._drain_waiters = self._drain_waiters, []
        for w in drains:
            if not w.done():
                w.set_exception(self._closed_error())
        self._wqueue.clear()
        if self._transport is not None:
            try:
                self._transport.close()
            except Exception:  # pragma: no cover - transport already gone
                pass
        if reason is not None:
            log.debug("closed %r: %s", self, reason)
        if self._opened and self._h_disconnect:
            emit(self._h_disconnect, self.node_id, self.host, self.port, self.group, reason)
        if self._on_close is not None:
            self._on_close(self, reason)

    async def wait_closed(self, timeout: float = 1.0) -> None:
        """Wait (bounded) until the transport is gone after :meth:`close`."""
        lost = self._lost
        if lost is not None and self._transport is not None and not lost.done():
            await asyncio.wait([lost], timeout=timeout)

    # -------------------------------------------------------- re-authentication

    async def _sasl_send(self, request: Any, deadline: float) -> Any:
        """Send a SaslHandshake/SaslAuthenticate request now, past any hold (it takes an
        in-flight slot beyond ``max_in_flight`` if need be: it is the one request that must
        go out) and await its answer, due by ``deadline``."""
        if self._closed:
            raise self._closed_error()
        cls = type(request)
        fut: asyncio.Future[Any] = self._loop.create_future()  # type: ignore[union-attr]
        held, self._held = self._held, None
        self._slots += 1
        try:
            self._issue(request, cls, self.version_for(cls), fut, deadline)
        except BaseException:
            self._release_slot()
            raise
        finally:
            self._held = held
        return await fut
