"""``aiokafka-lite produce TOPIC``: one record per input line (stdin or ``--file``)."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, BinaryIO

from ._common import (
    CODECS,
    CliError,
    add_bootstrap,
    non_negative_int,
    parse_acks,
    parse_headers,
    run,
)

__all__ = ["register", "read_lines"]

_CHUNK = 1 << 16


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``produce`` command."""
    p = sub.add_parser(
        "produce",
        help="produce one record per line of stdin (or --file)",
        description="Send each input line as a record (empty lines are skipped). With --key-sep, "
        "the text before the first separator is the key.",
    )
    p.add_argument("topic", metavar="TOPIC")
    add_bootstrap(p)
    p.add_argument("-f", "--file", default=None, help="read lines from this file instead of stdin")
    p.add_argument("-K", "--key-sep", default=None, metavar="SEP",
                   help="split each line at the first SEP into key and value")  # fmt: skip
    p.add_argument("-H", "--headers", type=parse_headers, default=[], metavar="K=V[,K=V...]",
                   help="headers added to every record")  # fmt: skip
    p.add_argument(
        "-z", "--compression", choices=CODECS, default="none", help="default: %(default)s"
    )
    p.add_argument("--acks", type=parse_acks, default=1, help="0, 1 or all (default: %(default)s)")
    p.add_argument("-p", "--partition", type=non_negative_int, default=None,
                   help="send every record to this partition (default: the partitioner picks)")  # fmt: skip
    p.add_argument("--linger-ms", type=non_negative_int, default=5, help="default: %(default)s")
    p.set_defaults(func=cmd_produce)


async def read_lines(stream: BinaryIO) -> AsyncIterator[bytes]:
    """Lines of ``stream`` without their newline, read by a daemon thread so the loop keeps going.

    Whatever is available is read at once (one ``os.read``), so typed lines are sent as they come and
    piped files are read in 64 KiB chunks. A daemon thread (not the loop's executor) does the
    blocking reads: Ctrl-C must not wait for a read that only returns on the next input line.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
    slots = threading.Semaphore(8)  # at most 8 chunks read ahead
    read: Callable[[int], bytes]
    try:
        # os.read on the descriptor, not the buffered object: a daemon thread blocked inside
        # BufferedReader.read holds its lock, and the interpreter's final flush of stdin then
        # aborts ("could not acquire lock ... at interpreter shutdown")
        read = functools.partial(os.read, stream.fileno())
    except (AttributeError, OSError, ValueError):
        read = stream.read

    def reader() -> None:
        while True:
            slots.acquire()
            try:
                item: bytes | BaseException = read(_CHUNK)
            except BaseException as exc:  # handed to the loop, raised there
                item = exc
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:
                return  # the loop is closed
            if not isinstance(item, bytes) or not item:
                return

    threading.Thread(target=reader, name="aiokafka-lite-stdin", daemon=True).start()
    rest = b""
    while True:
        chunk = await queue.get()
        slots.release()
        if isinstance(chunk, BaseException):
            raise CliError(f"cannot read input: {chunk}")
        if not chunk:
            break
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line
    if rest:
        yield rest


def cmd_produce(args: argparse.Namespace) -> int:
    """Send the lines, wait for every acknowledgement, report the count on stderr."""
    if args.key_sep == "":
        raise CliError("--key-sep must not be empty", 2)
    if args.file is not None:
        try:
            stream: BinaryIO = open(args.file, "rb")  # noqa: SIM115
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror}", 2) from None
    else:
        stream = sys.stdin.buffer
    try:
        count = run(_produce(args, stream))
    finally:
        if args.file is not None:
            stream.close()
    print(f"produced {count} record(s) to {args.topic}", file=sys.stderr)
    return 0


async def _produce(args: argparse.Namespace, stream: BinaryIO) -> int:
    from ..producer import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap,
        client_id="aiokafka-lite-cli",
        acks=args.acks,
        compression_type=None if args.compression == "none" else args.compression,
        linger_ms=args.linger_ms,
        request_timeout_ms=int(args.timeout * 1000),
        max_block_ms=int(args.timeout * 1000),
    )
    await asyncio.wait_for(producer.start(), args.timeout)
    sep = args.key_sep.encode() if args.key_sep is not None else None
    headers = args.headers or None
    pending: list[Any] = []
    check_at = 10000
    count = 0
    try:
        async for line in read_lines(stream):
            if not line:
                continue
            key = None
            if sep is not None:
                head, found, tail = line.partition(sep)
                if found:
                    key, line = head, tail
            pending.append(
                await producer.send(
                    args.topic, line, key=key, partition=args.partition, headers=headers
                )
            )
            count += 1
            if len(pending) >= check_at:  # amortised: each handle is scanned O(1) times
                pending = _check_done(pending)
                check_at = max(10000, 2 * len(pending))
        await asyncio.wait_for(producer.flush(), args.timeout)
        if _check_done(pending):
            raise CliError("some records were not acknowledged after flush()")
    finally:
        await asyncio.wait_for(producer.stop(), args.timeout)
    return count


def _check_done(pending: list[Any]) -> list[Any]:
    """Raise the first failure among finished sends; keep the unfinished ones."""
    keep = []
    for handle in pending:
        if handle.done():
            exc = handle.exception()
            if exc is not None:
                raise exc
        else:
            keep.append(handle)
    return keep
