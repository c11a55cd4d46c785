"""The PySpark Python Data Source ``aiokafka_lite``: Kafka topics as DataFrames, batch and streaming.

Register it once per session, then use it like Spark's own Kafka source::

    from aiokafka_lite.spark import register
    register(spark)
    df = (spark.read.format("aiokafka_lite")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())
    df.selectExpr("key", "upper(cast(value as string)) as value") \\
      .write.format("aiokafka_lite").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
      .option("topic", "events_upper").save()

How the work is split: the driver resolves one offset range per topic-partition (more with
``minPartitions``) and hands each to a Spark task inside its :class:`KafkaInputPartition`; the
task reads the range with :class:`~aiokafka_lite.AIOKafkaConsumer` on a fresh event loop and
yields Arrow record batches. Writes run :class:`~aiokafka_lite.AIOKafkaProducer` per task and
wait for every acknowledgement before the task reports success (at-least-once, as Spark's own
Kafka sink). Reader and writer objects hold only plain options; clients live inside tasks.

No filter pushdown on purpose (pyspark 4.3 gave wrong counts on later scans with it enabled):
filters on ``offset`` or ``timestamp`` are applied by Spark after reading; bound a read with
``startingOffsets``/``endingOffsets`` or the timestamp options instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from aiokafka_lite import sync
from aiokafka_lite.errors import IllegalArgumentError
from aiokafka_lite.spark._io import read_range, read_schema_ddl, write_batches
from aiokafka_lite.spark._offsets import (
    OffsetRange,
    PlanningClient,
    check_client_options,
    plan_batch,
    split_ranges,
)
from aiokafka_lite.spark._options import EARLIEST, KafkaOptions, parse_options
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "KafkaCommitMessage",
    "KafkaDataSource",
    "KafkaInputPartition",
    "register",
]

log = logging.getLogger(__name__)

#: Upper bound for one driver-side planning call (metadata + offsets).
PLAN_TIMEOUT_S = 60.0

#: Streaming offsets as Spark checkpoints them: ``{"topic": {"0": 42}}``.
JsonOffsets = dict[str, dict[str, int]]


class KafkaInputPartition(InputPartition):
    """One Spark task's work: an offset range and the options to read it (all picklable)."""

    def __init__(self, rng: OffsetRange, options: KafkaOptions) -> None:
        super().__init__(rng)
        self.range = rng
        self.options = options

    def __repr__(self) -> str:
        r = self.range
        return f"KafkaInputPartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver: records acknowledged by the broker."""

    count: int


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if type(partition) is InputPartition and partition.value is None:
        return  # Spark's stand-in task when partitions() found nothing to read
    if not isinstance(partition, KafkaInputPartition):
        raise TypeError(f"unexpected input partition {partition!r}")
    # read_range bounds its own waits (pollTimeoutMs); this is only a backstop
    backstop = partition.options.poll_timeout_ms / 1000 + 60
    yield from sync.iterate(
        lambda: read_range(partition.options, partition.range), item_timeout=backstop
    )


class KafkaBatchReader(DataSourceReader):
    """Batch read: offsets are resolved once on the driver, when Spark plans the scan."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        ranges = sync.run(plan_batch(self.options), timeout=PLAN_TIMEOUT_S)
        return [KafkaInputPartition(r, self.options) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class KafkaBatchWriter(DataSourceArrowWriter):
    """Batch write: each task produces its rows and waits for every acknowledgement."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return KafkaCommitMessage(sync.run(write_batches(self.options, iterator)))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.count for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("aiokafka_lite: wrote %d records to Kafka", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = sum(m.count for m in messages if isinstance(m, KafkaCommitMessage))
        log.warning(
            "aiokafka_lite: write aborted; %d records from successful tasks were already "
            "written (Kafka writes are at-least-once and cannot be rolled back)",
            done,
        )


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Streaming write: one produce per task and micro-batch, acknowledged before commit."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return KafkaCommitMessage(sync.run(write_batches(self.options, iterator)))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.count for m in messages if isinstance(m, KafkaCommitMessage))
        log.debug("aiokafka_lite: micro-batch %d wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("aiokafka_lite: micro-batch %d aborted (records already written stay)", batchId)


def _to_json(offsets: dict[TopicPartition, int]) -> JsonOffsets:
    out: JsonOffsets = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def _from_json(offsets: JsonOffsets) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}


def rate_limit(
    start: dict[TopicPartition, int], latest: dict[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """Advance from ``start`` towards ``latest`` by at most ``max_rows`` offsets in total.

    ``start`` must hold every partition of ``latest``.
    Shares are proportional to each partition's backlog; the remainder goes one offset at a
    time to the partitions in sorted order, so the result is deterministic.
    """
    sizes = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(latest)
    take = {tp: (max_rows * n) // total for tp, n in sizes.items()}
    left = max_rows - sum(take.values())
    for tp in sorted(sizes):
        if left <= 0:
            break
        if take[tp] < sizes[tp]:
            take[tp] += 1
            left -= 1
    return {tp: start[tp] + take[tp] for tp in latest}


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch streaming read with per-partition offsets, read limits and AvailableNow."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options
        self._target: dict[TopicPartition, int] | None = None
        self._available: JsonOffsets | None = None

    def _bounds(self) -> dict[TopicPartition, tuple[int, int]]:
        """``{tp: (log start, end)}`` of every partition the options name, right now."""

        async def current() -> dict[TopicPartition, tuple[int, int]]:
            async with PlanningClient(self.options) as pc:
                return await pc.bounds(await pc.topic_partitions())

        return sync.run(current(), timeout=PLAN_TIMEOUT_S)

    def initialOffset(self) -> JsonOffsets:
        """Where a new query starts: ``startingOffsets`` (default latest) resolved now."""

        async def resolve() -> dict[TopicPartition, int]:
            async with PlanningClient(self.options) as pc:
                tps = await pc.topic_partitions()
                bounds = await pc.bounds(tps)
                return await pc.resolve(
                    tps, self.options.starting, bounds, default=EARLIEST, starting=True
                )

        return _to_json(sync.run(resolve(), timeout=PLAN_TIMEOUT_S))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when that option is set."""
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Pin the end of an AvailableNow run to the offsets available right now."""
        self._target = {tp: end for tp, (_, end) in self._bounds().items()}

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        """The end of the next micro-batch: the available end, capped by the target and limit.

        Partitions that appeared since ``start`` begin at their log start.
        """
        begin = _from_json(start)
        bounds = self._bounds()
        latest = {tp: end for tp, (_, end) in bounds.items()}
        self._available = _to_json(latest)
        if self._target is not None:
            latest = {
                tp: min(end, self._target.get(tp, bounds[tp][0])) for tp, end in latest.items()
            }
        for tp, off in begin.items():  # a partition never moves backwards in the offsets log
            latest[tp] = max(latest.get(tp, off), off)
        full_start = {tp: begin.get(tp, bounds[tp][0] if tp in bounds else 0) for tp in latest}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(full_start, latest, limit.max_rows)
        return _to_json(latest)

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> Sequence[InputPartition]:
        """One input partition per topic-partition with new offsets in ``[start, end)``."""
        begin, stop = _from_json(start), _from_json(end)
        missing = [tp for tp in stop if tp not in begin]
        if missing:  # new partitions: from their log start

            async def earliest() -> dict[TopicPartition, int]:
                async with PlanningClient(self.options) as pc:
                    return await pc.list_offsets(missing, EARLIEST)

            begin.update(sync.run(earliest(), timeout=PLAN_TIMEOUT_S))
        ranges = [
            OffsetRange(tp.topic, tp.partition, begin[tp], off) for tp, off in sorted(stop.items())
        ]
        return [
            KafkaInputPartition(r, self.options)
            for r in split_ranges(ranges, self.options.min_partitions)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def reportLatestOffset(self) -> JsonOffsets | None:
        """The available end of every partition (for the query's progress report), as seen by
        the last :meth:`latestOffset` call (no extra round trip)."""
        if self._available is None:
            self._available = _to_json({tp: end for tp, (_, end) in self._bounds().items()})
        return self._available

    def commit(self, end: JsonOffsets) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, never in a Kafka group."""

    def stop(self) -> None:
        """Nothing to release: clients exist only inside calls."""


class KafkaDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("aiokafka_lite")`` (see module doc)."""

    @classmethod
    def name(cls) -> str:
        return "aiokafka_lite"

    def _include_headers(self) -> bool:
        return str(self.options.get("includeHeaders", "false")).strip().lower() == "true"

    def schema(self) -> str:
        return read_schema_ddl(self._include_headers())

    def _parse(self, streaming: bool, *, read: bool) -> KafkaOptions:
        opts = parse_options(self.options, streaming=streaming)
        check_client_options(opts)
        if read and not opts.has_source():
            raise ValueError(
                "give exactly one of the options 'subscribe', 'subscribePattern', 'assign'"
            )
        return opts

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(self._parse(False, read=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self._parse(True, read=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:  # as Spark's own Kafka sink: records can be appended, never replaced
            raise IllegalArgumentError(
                "save mode 'overwrite' is not supported: Kafka topics can only be appended to "
                "(use mode 'append')"
            )
        return KafkaBatchWriter(self._parse(False, read=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return KafkaStreamWriter(self._parse(True, read=False))


def register(spark: SparkSession) -> None:
    """Register :class:`KafkaDataSource` under the format name ``aiokafka_lite``."""
    spark.dataSource.register(KafkaDataSource)
