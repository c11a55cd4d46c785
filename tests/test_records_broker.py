"""records/ against a real broker: batches from our builder, every codec, raw Produce + Fetch."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka_lite.client import KafkaClient
from aiokafka_lite.ops.fetch import max_version
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.records import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    RecordBatchBuilder,
    iter_batches,
)
from aiokafka_lite.structs import TopicPartition

CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
PER_BATCH = 30


def _expected(
    codec: int,
) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    out: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = []
    for i in range(PER_BATCH):
        key = None if i % 5 == 0 else b"codec%d-key%d" % (codec, i)
        value = None if i % 11 == 3 else b"value %d of codec %d " % (i, codec) * (1 + i % 7)
        headers: list[tuple[str, bytes | None]] = (
            [("codec", b"%d" % codec), ("n", None)] if i % 3 == 0 else []
        )
        out.append((1_700_000_000_000 + codec * 1000 + i, key, value, headers))
    return out


async def _produce(client: KafkaClient, leader: int, topic: str, buf: bytearray) -> int:
    req = m.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=10000,
        topic_data=[
            m.ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    m.ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=buf)
                ],
            )
        ],
    )
    resp = await client.send(leader, req)
    (part,) = [p for t in resp.responses for p in t.partition_responses]
    assert part.error_code == 0, part
    return int(part.base_offset)


async def _fetch_all(client: KafkaClient, leader: int, topic: str, until: int) -> list[Any]:
    """Fetch from offset 0 until offset ``until`` is covered; return the batches."""
    batches: list[Any] = []
    offset = 0
    deadline = time.monotonic() + 20
    while offset < until:
        assert time.monotonic() < deadline, f"fetch stuck at offset {offset}"
        req = m.FetchRequest(
            replica_id=-1,
            max_wait_ms=100,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                m.FetchRequest.FetchTopic(
                    topic=topic,
                    topic_id=client.cluster.topic_id(topic),
                    partitions=[
                        m.FetchRequest.FetchTopic.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
            ],
        )
        resp = await client.send(leader, req, timeout_ms=10000, max_version=max_version(req))
        (pd,) = [p for t in resp.responses for p in t.partitions]
        assert pd.error_code == 0, pd
        for batch in iter_batches(pd.records):
            if batch.last_offset >= offset:
                batches.append(batch)
                offset = batch.last_offset + 1
        await asyncio.sleep(0)
    return batches


async def test_our_batches_through_the_broker(kafka_bootstrap: str, new_topic: Any) -> None:
    topic = await new_topic(partitions=1)
    client = KafkaClient(bootstrap_servers=kafka_bootstrap)
    await client.start()
    try:
        await client.wait_for_topic(topic, 10000)
        leader = client.cluster.leader_for_partition(TopicPartition(topic, 0))
        assert leader is not None
        base_offsets = []
        for codec in CODECS:
            builder = RecordBatchBuilder(codec, batch_size=1 << 20)
            for ts, key, value, headers in _expected(codec):
                builder.append(ts, key, value, headers)
            base_offsets.append(await _produce(client, leader, topic, builder.build()))
        assert base_offsets == [i * PER_BATCH for i in range(len(CODECS))]

        batches = await _fetch_all(client, leader, topic, len(CODECS) * PER_BATCH)
        got = [(t[0], t[1], t[2], t[3], t[4]) for b in batches for t in b.record_tuples()]
        want = [
            (c * PER_BATCH + i, ts, k, v, h)
            for c in CODECS
            for i, (ts, k, v, h) in enumerate(_expected(c))
        ]
        assert got == want
        # compression.type=producer (the default) keeps each batch as we compressed it
        assert [(b.magic, b.compression_type, b.record_count) for b in batches] == [
            (2, c, PER_BATCH) for c in CODECS
        ]
    finally:
        await client.close()
