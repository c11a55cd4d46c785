"""A tiny misbehaving TCP server for failure injection in connection tests.

It answers ApiVersions (v0 body; UNSUPPORTED_VERSION for newer versions, as a real broker does,
so the client's fallback path runs) and hands every other request to a behaviour coroutine.
Everything that is not failure injection runs against the real broker fixtures instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Awaitable, Callable

Behaviour = Callable[["FakeConn", int, int, int], Awaitable[None]]

API_RANGES = [(18, 0, 0), (3, 0, 12), (10, 0, 6)]  # ApiVersions, Metadata, FindCoordinator


def api_versions_v0(
    corr: int, error: int, ranges: list[tuple[int, int, int]] | None = None
) -> bytes:
    ranges = API_RANGES if ranges is None else ranges
    body = struct.pack(">ih", corr, error) + struct.pack(">i", len(ranges))
    body += b"".join(struct.pack(">hhh", *r) for r in ranges)
    return struct.pack(">i", len(body)) + body


class FakeConn:
    """One accepted connection: its streams and the requests seen so far."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.requests: list[tuple[int, int, int]] = []  # (api_key, version, correlation id)

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    def close(self) -> None:
        self.writer.close()


class FakeBroker:
    """``async with FakeBroker(behaviour) as fb: fb.port``; ``behaviour(conn, key, ver, corr)``.

    ``ranges`` replaces the advertised ``(api_key, min, max)`` list.
    """

    def __init__(
        self, behaviour: Behaviour | None = None, ranges: list[tuple[int, int, int]] | None = None
    ):
        self.behaviour = behaviour
        self.ranges = ranges
        self.conns: list[FakeConn] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for c in self.conns:
            c.writer.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.wait_for(self.server.wait_closed(), 2)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = FakeConn(reader, writer)
        self.conns.append(conn)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                payload = await reader.readexactly(size)
                key, ver, corr = struct.unpack_from(">hhi", payload)
                conn.requests.append((key, ver, corr))
                if key == 18:
                    writer.write(api_versions_v0(corr, 35 if ver > 0 else 0, self.ranges))
                elif self.behaviour is not None:
                    await self.behaviour(conn, key, ver, corr)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()


def dead_port() -> int:
    """A loopback port nobody listens on (bound then released)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)
