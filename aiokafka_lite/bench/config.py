"""Benchmark settings shared by the engine (parent) and the workers (one child process per run)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = [
    "CLIENTS",
    "HOOK_VARIANTS",
    "CLIENT_ALIASES",
    "KINDS",
    "PRODUCE_APIS",
    "CONSUME_APIS",
    "CODECS",
    "RunConfig",
    "canonical_client",
    "parse_clients",
]

#: Canonical client names, in the order tables list them.
#: ``confluent`` is confluent-kafka's synchronous API, ``confluent-aio`` its asyncio API
#: (``confluent_kafka.aio.AIOProducer`` / ``AIOConsumer``: librdkafka calls on a thread pool).
CLIENTS = ("aiokafka_lite", "aiokafka", "confluent-aio", "confluent", "kafka-python")
#: aiokafka_lite with other hooks than its default (the built-in metrics hook only): the hooks
#: overhead scenario (benchmarks: produce-hooks) runs them next to plain ``aiokafka_lite``.
#: ``-nohooks``: no hook at all; ``-noop``: the metrics hook plus one hook with a no-op method
#: for every event, on_send (per record) included.
HOOK_VARIANTS = ("aiokafka_lite-nohooks", "aiokafka_lite-noop")
CLIENT_ALIASES = {
    "aiokafka_lite-nohooks": "aiokafka_lite-nohooks",
    "aiokafka_lite-noop": "aiokafka_lite-noop",
    "aiokafka_lite": "aiokafka_lite",
    "aiokafka-lite": "aiokafka_lite",
    "lite": "aiokafka_lite",
    "aiokafka": "aiokafka",
    "confluent": "confluent",
    "confluent-kafka": "confluent",
    "confluent_kafka": "confluent",
    "librdkafka": "confluent",
    "confluent-aio": "confluent-aio",
    "confluent_aio": "confluent-aio",
    "confluent-kafka-aio": "confluent-aio",
    "aioconfluent": "confluent-aio",
    "kafka-python": "kafka-python",
    "kafka_python": "kafka-python",
    "kafkapython": "kafka-python",
    "kafka": "kafka-python",
}
KINDS = ("produce", "consume", "roundtrip")
#: produce APIs: ``send`` = pipelined per-record send(), handles dropped, then flush() (fire and
#: forget); ``gather`` = ``futs.append(await send(...))`` per record, then
#: ``await asyncio.gather(*futs)`` (the common application pattern); ``wait`` = send_and_wait()
#: per record; ``batch`` = create_batch/send_batch; ``many`` = send_many() in chunks of 1000
#: (peers without a bulk API run their send loop instead, and the table says so); ``arrow`` =
#: send_arrow() of pyarrow tables of ARROW_CHUNK rows (peers: their send loop).
PRODUCE_APIS = ("send", "gather", "wait", "batch", "many", "arrow")
#: consume APIs: ``getmany`` = ``await getmany()`` in a loop; ``iter`` = ``async for record in
#: consumer`` (one record at a time); ``lag`` = a slow application: ``getmany(max_records=500)``
#: then a 5 ms pause, so the backlog waits in the broker and the client's peak RSS shows whether
#: its buffering is bounded by the fetch limits (asyncio clients only). Peers run their
#: idiomatic equivalent. ``arrow`` = ``await getmany_arrow()`` in a loop, the value bytes summed
#: by pyarrow.compute (peers: their getmany equivalent).
CONSUME_APIS = ("getmany", "iter", "lag", "arrow")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def canonical_client(name: str) -> str:
    """Map a user-facing client name or alias to its canonical name (ValueError if unknown)."""
    key = name.strip().lower()
    try:
        return CLIENT_ALIASES[key]
    except KeyError:
        raise ValueError(
            f"unknown client {name!r}; expected one of: {', '.join(CLIENTS + HOOK_VARIANTS)}"
        ) from None


def parse_clients(spec: str) -> list[str]:
    """``"aiokafka,confluent"`` -> canonical names, duplicates removed, order kept."""
    out: list[str] = []
    for part in spec.split(","):
        if part.strip():
            name = canonical_client(part)
            if name not in out:
                out.append(name)
    return out


@dataclass
class RunConfig:
    """Everything one worker run needs (JSON-serialisable: sent to the child on its command line)."""

    kind: str = "produce"
    client: str = "aiokafka_lite"
    bootstrap: str = "127.0.0.1:9092"
    topic: str = "bench"
    records: int = 100_000
    size: int = 100
    partitions: int = 1
    codec: str = "none"
    acks: int = 1
    linger_ms: int = 5
    batch_size: int = 16384
    concurrency: int = 1
    api: str = "send"  # produce: one of PRODUCE_APIS; consume: one of CONSUME_APIS
    keys: bool = False  # produce: every record gets a key (256 distinct 8-byte keys)
    headers: bool = False  # produce: every record gets two headers (see worker.HEADERS)
    latency_samples: int = 20_000
    timeout_s: float = 300.0
    progress_interval_s: float = 0.1
    profile_path: str = ""  # non-empty: run under cProfile and dump the stats there
    loop: str = "asyncio"  # event loop of the asyncio clients: "asyncio" or "uvloop"

    def to_json(self) -> str:
        """Serialise for the worker's command line."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        """Inverse of :meth:`to_json`; unknown keys are an error."""
        data: dict[str, Any] = json.loads(text)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown run config keys: {sorted(unknown)}")
        return cls(**data)

    @property
    def compression(self) -> str | None:
        """The codec as producer libraries want it (None for no compression)."""
        return None if self.codec in ("none", "") else self.codec
