"""The sans-I/O half of a broker connection: framing, correlation ids, the pending table.

:class:`Session` turns requests into frames under consecutive correlation ids and a byte stream
back into response payloads, and keeps the table of requests awaiting an answer. It performs no
I/O and knows no event loop: :class:`aiokafka_lite.conn.BrokerConnection` (the I/O shell) writes
the frames it makes, feeds it the bytes its transport receives and stores in the table whatever
it needs to complete a request (its waiter, deadline timer, ...), as h11 does for HTTP/1.1.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from ..errors import CorrelationIdError, KafkaProtocolError, UnsupportedVersionError
from .frames import decode_response, encode_request

__all__ = [
    "Session",
    "api_name",
    "api_versions_retry",
    "capped_version",
    "decode_answer",
    "pick_version",
    "read_api_versions",
]

_I32 = struct.Struct(">i")
_API_VERSIONS_KEY = 18
# error_code int16 35 right after the 4-byte correlation id of an ApiVersions response
_API_VERSIONS_UNSUPPORTED = b"\x00\x23"
#: the receive buffer of :meth:`Session.get_buffer` (one per connection, reused for every read)
_RECV_BUFFER = 128 * 1024


class Session:
    """Correlation ids, the pending table and the framing of one connection.

    ``pending`` maps the correlation id of each request awaiting an answer to the caller's
    entry, oldest first (Kafka answers in order); the shell reads and writes it directly.
    """

    __slots__ = (
        "client_id",
        "max_response_size",
        "peer",
        "pending",
        "_next_corr",
        "_head",
        "_recv",
        "_frame",
        "_frame_view",
        "_fpos",
    )

    def __init__(self, client_id: str, max_response_size: int, peer: str) -> None:
        self.client_id = client_id
        self.max_response_size = max_response_size
        self.peer = peer  # "host:port", for error messages
        self.pending: dict[int, Any] = {}
        self._next_corr = 0
        # the reads (get_buffer/received): a receive buffer the transport reads into, reused;
        # the first bytes of a size prefix cut by a read (fewer than 4); and the payload of a
        # frame whose size is known but whose bytes are not all in, which the transport then
        # reads into directly (no chunk per read, no join) until `_fpos` reaches its end
        self._recv: memoryview | None = None
        self._head = b""
        self._frame: bytearray | None = None
        self._frame_view: memoryview | None = None
        self._fpos = 0

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame received so far."""
        if self._frame is not None:
            return 4 + self._fpos
        return len(self._head)

    def get_buffer(self) -> memoryview:
        """Where the next read goes (an ``asyncio.BufferedProtocol``'s ``get_buffer``): the
        rest of an incomplete frame's payload, else the session's receive buffer; then call
        :meth:`received` with the number of bytes read."""
        view = self._frame_view
        if view is not None:
            return view[self._fpos :]
        recv = self._recv
        if recv is None:
            recv = self._recv = memoryview(bytearray(_RECV_BUFFER))
        return recv

    def received(self, nbytes: int) -> Iterator[tuple[int, Any, bytes]]:
        """``(correlation id, entry, payload)`` for each response frame completed by the
        ``nbytes`` just read into :meth:`get_buffer`, its entry taken out of the pending table.
        A frame that does not arrive whole gets a buffer of its size once its size prefix is
        in, and is read into it (a large Fetch response is copied by the kernel only: no
        chunks, no join); its payload is then a ``bytearray``. A frame size outside
        ``4..max_response_size`` raises ``KafkaProtocolError`` before anything is allocated,
        and a correlation id matching no pending request ``CorrelationIdError``. Stopping the
        iteration early drops what was not yet yielded (the stream is closing)."""
        frame = self._frame
        if frame is not None:
            self._fpos += nbytes
            if self._fpos < len(frame):
                return
            self._frame = self._frame_view = None
            yield self._answer(frame)  # type: ignore[arg-type]
            return
        assert self._recv is not None
        data = self._recv[:nbytes].tobytes()
        if self._head:  # a size prefix cut by the last read
            data = self._head + data
            self._head = b""
        end = len(data)
        pos = 0
        unpack = _I32.unpack_from
        while end - pos >= 4:
            (size,) = unpack(data, pos)
            if size < 4 or size > self.max_response_size:
                raise KafkaProtocolError(
                    f"response frame size {size} from {self.peer} is outside "
                    f"4..{self.max_response_size} (max_response_size)"
                )
            stop = pos + 4 + size
            if stop > end:  # the rest is read straight into the frame's buffer
                frame = self._frame = bytearray(size)
                got = end - pos - 4
                if got:
                    frame[:got] = memoryview(data)[pos + 4 :]
                self._fpos = got
                self._frame_view = memoryview(frame)
                return
            payload = data[pos + 4 : stop]
            pos = stop
            yield self._answer(payload)
        if pos < end:
            self._head = data[pos:]

    def frame(self, request: Any, version: int) -> tuple[int, bytearray]:
        """``request`` encoded as a frame under the next correlation id: ``(id, frame)``.
        The id is used up only when encoding succeeds."""
        corr = self._next_corr
        frame = encode_request(request, version, corr, self.client_id)
        self._next_corr = (corr + 1) & 0x7FFFFFFF
        return corr, frame

    def _answer(self, payload: bytes) -> tuple[int, Any, bytes]:
        (corr,) = _I32.unpack_from(payload)
        entry = self.pending.pop(corr, None)
        if entry is None:
            raise CorrelationIdError(
                f"response from {self.peer} has correlation id {corr}, "
                f"which matches no pending request"
            )
        return corr, entry, payload

    def reset(self) -> dict[int, Any]:
        """Forget the stream (it closed): the pending entries, handed back, and the buffer."""
        pending, self.pending = self.pending, {}
        self._head = b""
        self._frame = self._frame_view = None
        self._fpos = 0
        return pending


def decode_answer(cls: Any, version: int, payload: bytes) -> Any:
    """The response of ``cls`` at ``version`` in ``payload`` (an ApiVersions refusal of the
    version always comes in the v0 body)."""
    if cls.API_KEY == _API_VERSIONS_KEY and payload[4:6] == _API_VERSIONS_UNSUPPORTED:
        version = 0
    return decode_response(cls, version, payload)


_API_NAMES: dict[Any, str] = {}


def api_name(request_class: Any) -> str:
    """``ProduceRequest`` -> ``"Produce"`` (cached)."""
    name = _API_NAMES.get(request_class)
    if name is None:
        name = request_class.__name__
        if name.endswith("Request"):
            name = name[:-7]
        _API_NAMES[request_class] = name
    return name


def pick_version(request_class: type, api_versions: dict[int, tuple[int, int]], where: str) -> int:
    """``min(client max, broker max)`` for ``request_class``; both minimums must be met.

    ``api_versions`` maps api key -> (broker min, broker max) as learnt from ApiVersions.
    Raises ``UnsupportedVersionError`` with both ranges in the message otherwise.
    """
    key = request_class.API_KEY  # type: ignore[attr-defined]
    cmin, cmax = request_class.MIN_VERSION, request_class.MAX_VERSION  # type: ignore[attr-defined]
    rng = api_versions.get(key)
    if rng is None:
        raise UnsupportedVersionError(
            f"{where} does not support {request_class.__name__} (api key {key})"
        )
    bmin, bmax = rng
    version = min(cmax, bmax)
    if version < cmin or version < bmin:
        raise UnsupportedVersionError(
            f"no common version for {request_class.__name__} (api key {key}): client supports "
            f"v{cmin}-v{cmax}, {where} supports v{bmin}-v{bmax}"
        )
    return int(version)


def capped_version(
    request_class: Any, api_versions: dict[int, tuple[int, int]], max_version: int, where: str
) -> int:
    """``max_version`` (below what :func:`pick_version` gives, for an answer the caller can
    only read up to it) when both sides speak it, else UnsupportedVersionError."""
    bmin = api_versions.get(request_class.API_KEY, (0, 0))[0]
    if max_version < max(bmin, request_class.MIN_VERSION):
        raise UnsupportedVersionError(
            f"{request_class.__name__} v{max_version} or older is needed, and {where} speaks "
            f"v{bmin} at least"
        )
    return max_version


def api_versions_retry(resp: Any, version: int) -> int | None:
    """After an ApiVersions answer at ``version``: the lower version to ask again at, when the
    broker refused this one (UNSUPPORTED_VERSION, in the v0 body, with its own ApiVersions range;
    a proxy's range may be lower again than the broker's behind it), else None."""
    if resp.error_code != 35 or version <= 0:
        return None
    theirs = [k for k in resp.api_keys if k.api_key == _API_VERSIONS_KEY]
    return max(min(theirs[0].max_version, version - 1) if theirs else 0, 0)


def read_api_versions(resp: Any) -> tuple[dict[int, tuple[int, int]], int, dict[str, int]]:
    """An ApiVersions answer's API ranges, finalized features epoch and feature levels (below
    v3 the codec gives those fields' defaults: -1, none)."""
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    features = {f.name: f.max_version_level for f in resp.finalized_features or ()}
    return ranges, resp.finalized_features_epoch, features
