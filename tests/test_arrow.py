"""The Arrow API on a real broker: send_arrow() partitions and stamps rows as send() does, and
getmany_arrow() returns the records getmany() returns, with Spark's Kafka schema, moving the
group's positions and commits the same way."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka_lite.structs import TopicPartition

pa = pytest.importorskip("pyarrow")

ROWS = 120
#: the rows' timestamps: recent ones (noida applies the default 7-day time retention to record
#: timestamps at once: rows stamped in 2023 were deleted within seconds, log start = high water)
T0 = (int(time.time()) - 3600) * 1000
SPARK_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def _table() -> Any:
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.table(
        {
            "key": pa.array([b"key-%d" % (i % 17) for i in range(ROWS)], pa.binary()),
            "value": pa.array([None if i % 13 == 5 else b"v%d" % i * 3 for i in range(ROWS)]),
            "partition": pa.array([1 if i % 10 == 0 else None for i in range(ROWS)], pa.int32()),
            "timestamp": pa.array([T0 + i for i in range(ROWS)], pa.timestamp("ms", tz="UTC")),
            "headers": pa.array(
                [
                    [{"key": "n", "value": b"%d" % i}, {"key": "z", "value": None}]
                    if i % 4
                    else None
                    for i in range(ROWS)
                ],
                pa.list_(header),
            ),
        }
    )


def _rows(records: Any) -> list[tuple[Any, ...]]:
    return sorted(
        ((r.partition, r.key, r.value, r.timestamp, tuple(r.headers)) for r in records), key=repr
    )


async def _read_all(consumer: AIOKafkaConsumer, arrow: bool) -> list[Any]:
    out: list[Any] = []
    n = 0
    async with asyncio.timeout(60):
        while n < ROWS:
            if arrow:
                table = await consumer.getmany_arrow(
                    timeout_ms=500, max_records=50, include_headers=True
                )
                out.append(table)
                n += table.num_rows
            else:
                recs = await consumer.getmany(timeout_ms=500, max_records=50)
                for records in recs.values():
                    out.extend(records)
                    n += len(records)
    return out


async def test_send_arrow_and_getmany_arrow_match_send_and_getmany(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    by_arrow = await new_topic(partitions=3)
    by_send = await new_topic(partitions=3)
    table = _table()
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, compression_type="gzip", linger_ms=5
    ) as producer:
        handles = await producer.send_arrow(by_arrow, table)
        metas = await asyncio.gather(*handles)
        futs = [
            await producer.send(
                by_send,
                row["value"],
                row["key"],
                row["partition"],
                T0 + i,
                [(h["key"], h["value"]) for h in row["headers"]] if row["headers"] else None,
            )
            for i, row in enumerate(table.to_pylist())
        ]
        await asyncio.gather(*futs)
    # one awaitable per batch: fewer than rows, every partition used
    assert 3 <= len(handles) < ROWS
    assert {m.partition for m in metas} == {0, 1, 2}

    def consumer(topic: str, group: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=kafka_bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )

    async with consumer(by_send, f"{by_send}-g") as c:
        sent = await _read_all(c, arrow=False)
    async with consumer(by_arrow, f"{by_arrow}-g") as c:
        plain = await _read_all(c, arrow=False)
    group = f"{by_arrow}-arrow"
    async with consumer(by_arrow, group) as c:
        tables = await _read_all(c, arrow=True)
        assert not await c.getmany_arrow(timeout_ms=200)  # positions moved past every row
        await c.commit()
        last = pa.concat_tables(tables).group_by("partition").aggregate([("offset", "max")])
        for p, high in zip(last["partition"].to_pylist(), last["offset_max"].to_pylist()):
            tp = TopicPartition(by_arrow, p)
            assert await c.position(tp) == high + 1
            assert await c.committed(tp) == high + 1
    # send_arrow() put each row where send() put it, with the same fields
    assert _rows(plain) == _rows(sent)
    table = pa.concat_tables(tables)
    assert table.column_names == [*SPARK_COLUMNS, "headers"]
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    got = sorted(
        (
            (
                r["partition"],
                r["key"],
                r["value"],
                round(r["timestamp"].timestamp() * 1000),
                tuple((h["key"], h["value"]) for h in r["headers"] or ()),
            )
            for r in table.to_pylist()
        ),
        key=repr,
    )
    assert got == _rows(plain)
    assert {(r["topic"], r["partition"], r["offset"]) for r in table.to_pylist()} == {
        (r.topic, r.partition, r.offset) for r in plain
    }


async def _read_n(bootstrap: str, topic: str, n: int) -> list[Any]:
    out: list[Any] = []
    async with AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=f"{topic}-g", auto_offset_reset="earliest"
    ) as c:
        async with asyncio.timeout(60):
            while len(out) < n:
                for records in (await c.getmany(timeout_ms=500)).values():
                    out.extend(records)
    return out


async def test_send_arrow_from_columns_matches_send(kafka_bootstrap: str, new_topic: Any) -> None:
    # no headers, raw bytes: with the compiled codec the rows are encoded from the columns'
    # buffers (keyed: murmur2 per distinct key; explicit partitions; the sticky partition for a
    # table without keys); the records land where send() puts them, with the same fields
    by_cols, by_send, sticky = [await new_topic(partitions=3) for _ in range(3)]
    keyed = pa.table(
        {
            "key": pa.array([None if i % 10 == 0 else b"k%d" % (i % 17) for i in range(ROWS)]),
            "value": pa.array([None if i % 13 == 5 else b"v%d" % i for i in range(ROWS)]),
            "partition": pa.array([2 if i % 10 == 0 else None for i in range(ROWS)], pa.int32()),
            "timestamp": pa.array([T0 + i for i in range(ROWS)], pa.int64()),
        }
    )
    values = pa.table({"value": pa.array([b"s%05d" % i for i in range(2000)], pa.binary())})
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, linger_ms=5, max_batch_size=4096
    ) as producer:
        handles = await producer.send_arrow(by_cols, keyed)
        metas = await asyncio.gather(*handles)
        rows = keyed.to_pylist()
        futs = [
            await producer.send(by_send, r["value"], r["key"], r["partition"], r["timestamp"])
            for r in rows
        ]
        await asyncio.gather(*futs)
        sticky_handles = await producer.send_arrow(sticky, values)
        await asyncio.gather(*sticky_handles)
    assert {m.partition for m in metas} == {0, 1, 2} and len(handles) < ROWS

    def fields(records: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((r.partition, r.offset, r.key, r.value, r.timestamp) for r in records)

    assert fields(await _read_n(kafka_bootstrap, by_cols, ROWS)) == fields(
        await _read_n(kafka_bootstrap, by_send, ROWS)
    )
    # sticky: every row once, in table order within each partition, many batches
    got = await _read_n(kafka_bootstrap, sticky, 2000)
    assert sorted(r.value for r in got) == values.column("value").to_pylist()
    for p in {r.partition for r in got}:
        mine = [r.value for r in sorted(got, key=lambda r: r.offset) if r.partition == p]
        assert mine == sorted(mine)
    assert 5 < len(sticky_handles) < 2000  # ~28 kB in 4 kB batches
