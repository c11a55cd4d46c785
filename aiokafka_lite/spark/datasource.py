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
``minPartitions`` / ``maxRecordsPerPartition``) and hands each to a Spark task inside its :class:`KafkaInputPartition`; the
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
import time
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
    ReadMinRows,
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
    commit_to_group,
    plan_batch,
    report_data_loss,
    split_ranges,
)
from aiokafka_lite.spark._options import EARLIEST, KafkaOptions, option_warnings, parse_options
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "KafkaCommitMessage",
    "KafkaDataSource",
    "KafkaInputPartition",
    "register",
]

log = logging.getLogger(__name__)
#: Where option and data-loss warnings go (a Spark user sees them in the driver's stderr).
options_log = logging.getLogger("aiokafka_lite.spark")

#: Upper bound for one driver-side planning call (metadata + offsets).
PLAN_TIMEOUT_S = 60.0

#: Upper bound for one ``commitOffsetsToGroup`` commit (a failure is a warning, never fatal).
GROUP_COMMIT_TIMEOUT_S = 40.0

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


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch streaming read with per-partition offsets, admission control and AvailableNow.

    Admission control follows Spark's Kafka source: ``maxOffsetsPerTrigger`` caps a micro-batch
    (shared in proportion to each partition's backlog); ``minOffsetsPerTrigger`` holds a
    micro-batch back (``latestOffset`` answers the start offsets: no new batch) until that many
    new offsets are available, unless ``maxTriggerDelay`` passed since the previous batch (the
    first call always admits one, as Spark's source). Under ``Trigger.AvailableNow`` nothing is
    held back: the run ends once everything available at its start was read.
    """

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options
        self._target: dict[TopicPartition, int] | None = None
        self._available: JsonOffsets | None = None
        self._log_starts: dict[TopicPartition, int] = {}
        self._last_trigger_ms = float("-inf")
        self._clock = time.monotonic  # seconds; for maxTriggerDelay
        self._group_failing = False  # commitOffsetsToGroup: inside a failure episode
        self._group_committed: JsonOffsets | None = None  # ... and the last end committed
        self._initial: JsonOffsets | None = None  # what initialOffset() answered, if called

    def _bounds(self) -> dict[TopicPartition, tuple[int, int]]:
        """``{tp: (log start, end)}`` of every partition the options name, right now."""

        async def current() -> dict[TopicPartition, tuple[int, int]]:
            async with PlanningClient(self.options) as pc:
                return await pc.bounds(await pc.topic_partitions())

        return sync.run(current(), timeout=PLAN_TIMEOUT_S)

    def _checked_bounds(
        self, known: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """:meth:`_bounds`, fetched again (``fetchOffset.numRetries`` attempts in all,
        ``fetchOffset.retryIntervalMs`` apart) while a partition of ``known`` is missing or
        ends below its known offset: a broker can answer from a stale view for a moment."""
        attempts = max(1, self.options.fetch_offset_retries)
        for attempt in range(1, attempts + 1):
            bounds = self._bounds()
            odd = [tp for tp, off in known.items() if tp not in bounds or bounds[tp][1] < off]
            if not odd or attempt == attempts:
                return bounds
            log.debug("aiokafka_lite: offsets of %s look wrong, fetching them again", odd)
            time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def initialOffset(self) -> JsonOffsets:
        """Where a new query starts: ``startingOffsets`` (default latest) resolved now."""

        async def resolve() -> dict[TopicPartition, int]:
            async with PlanningClient(self.options) as pc:
                tps = await pc.topic_partitions()
                bounds = await pc.bounds(tps)
                return await pc.resolve(
                    tps, self.options.starting, bounds, default=EARLIEST, starting=True
                )

        self._initial = _to_json(sync.run(resolve(), timeout=PLAN_TIMEOUT_S))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)``, else ``ReadMinRows(minOffsetsPerTrigger)``.

        PySpark takes one limit; with both options set :meth:`latestOffset` applies the
        minimum from the options too (Spark's source returns a composite limit).
        """
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Pin the end of an AvailableNow run to the offsets available right now."""
        self._target = {tp: end for tp, (_, end) in self._bounds().items()}

    def _hold_back(self, new_offsets: int, min_rows: int) -> bool:
        """True when a micro-batch must wait for more offsets (``minOffsetsPerTrigger``)."""
        now = self._clock() * 1000
        if now - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
            self._last_trigger_ms = now  # maxTriggerDelay passed (or the first batch): go
            return False
        if new_offsets < min_rows:
            return True
        self._last_trigger_ms = now
        return False

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        """The end of the next micro-batch: the available end, capped by the AvailableNow
        target and the read limits; ``start`` itself when the batch is held back.

        Partitions that appeared since ``start`` begin at their log start. A partition that
        disappeared, or whose end is now below ``start`` (deleted and re-created), is data
        loss: the query fails unless ``failOnDataLoss`` is false (then a deleted partition is
        dropped and a re-created one is read from its log start).

        With ``commitOffsetsToGroup``, ``start`` (unless it is the initial offset) is the end of
        the micro-batch Spark last wrote to its commit log: it is committed to the group here,
        as Spark calls :meth:`commit` for a batch only once it plans the next one
        (so an idle or an availableNow query would leave its last batch out of the group).
        """
        if start != self._initial:
            self._commit_to_group(start)
        begin = _from_json(start)
        bounds = self._checked_bounds(begin)
        self._log_starts = {tp: lo for tp, (lo, _) in bounds.items()}
        latest = {tp: end for tp, (_, end) in bounds.items()}
        self._available = _to_json(latest)
        gone = sorted(tp for tp in begin if tp not in bounds)
        if gone:
            names = ", ".join(_name(tp) for tp in gone)
            report_data_loss(self.options, f"partitions {names} have been deleted")
            begin = {tp: off for tp, off in begin.items() if tp in bounds}
        reset = sorted(tp for tp, off in begin.items() if latest[tp] < off)
        for tp in reset:
            report_data_loss(
                self.options,
                f"{_name(tp)}: the offset went back from {begin[tp]} to {latest[tp]} (the topic "
                f"was deleted and re-created?): offsets from {begin[tp]} on were not read",
            )
        if self._target is not None:
            latest = {
                tp: min(end, self._target.get(tp, bounds[tp][0])) for tp, end in latest.items()
            }
        for tp, off in begin.items():  # a partition never moves backwards in the offsets log ...
            if tp not in reset:  # ... unless it was re-created (read from its log start)
                latest[tp] = max(latest[tp], off)
        full_start = {
            tp: bounds[tp][0] if tp in reset or tp not in begin else begin[tp] for tp in latest
        }
        if isinstance(limit, ReadAllAvailable):
            return _to_json(latest)
        min_rows = (
            limit.min_rows
            if isinstance(limit, ReadMinRows)
            else self.options.min_offsets_per_trigger
        )
        max_rows = (
            limit.max_rows
            if isinstance(limit, ReadMaxRows)
            else self.options.max_offsets_per_trigger
        )
        if min_rows and self._target is None and not (gone or reset):  # loss: move past it
            new = sum(max(0, latest[tp] - full_start[tp]) for tp in latest)
            if self._hold_back(new, min_rows):
                log.debug(
                    "aiokafka_lite: %d new offsets < minOffsetsPerTrigger=%d: waiting",
                    new,
                    min_rows,
                )
                return start
        if max_rows:
            latest = rate_limit(full_start, latest, max_rows)
        return _to_json(latest)

    def _earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Log starts of ``tps``: as the last :meth:`latestOffset` saw them, else fetched."""
        if all(tp in self._log_starts for tp in tps):
            return {tp: self._log_starts[tp] for tp in tps}

        async def earliest() -> dict[TopicPartition, int]:
            async with PlanningClient(self.options) as pc:
                return await pc.list_offsets(tps, EARLIEST)

        return sync.run(earliest(), timeout=PLAN_TIMEOUT_S)

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> Sequence[InputPartition]:
        """Input partitions for the offsets ``[start, end)`` of each topic-partition (split by
        ``minPartitions`` / ``maxRecordsPerPartition``).

        Offsets of ``start`` already deleted from the log are data loss (the query fails unless
        ``failOnDataLoss`` is false: then reading starts at the log start). A partition whose
        end is below its start was re-created: it is read from its log start.
        """
        begin, stop = _from_json(start), _from_json(end)
        tps = sorted(stop)
        lows = self._earliest(tps) if tps else {}
        ranges = []
        for tp in tps:
            lo, until = lows[tp], stop[tp]
            if tp not in begin:  # a new partition: from its log start, which should be 0
                if lo > 0:
                    report_data_loss(
                        self.options,
                        f"{_name(tp)}: added partition starts at offset {lo}, not 0 "
                        f"(offsets [0, {lo}) were deleted before the query saw them)",
                    )
                first = lo
            elif until < begin[tp]:  # re-created (latestOffset reported the loss)
                if self.options.fail_on_data_loss:
                    report_data_loss(
                        self.options,
                        f"{_name(tp)}: the offset went back from {begin[tp]} to {until}",
                    )
                first = min(lo, until)
            elif begin[tp] < lo:
                report_data_loss(
                    self.options,
                    f"{_name(tp)}: offsets [{begin[tp]}, {min(lo, until)}) were deleted before "
                    f"they were read (log start is now {lo})",
                )
                first = min(lo, until)
            else:
                first = begin[tp]
            ranges.append(OffsetRange(tp.topic, tp.partition, first, until))
        return [
            KafkaInputPartition(r, self.options)
            for r in split_ranges(
                ranges, self.options.min_partitions, self.options.max_records_per_partition
            )
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
        """Spark made the micro-batch ending at ``end`` durable in its checkpoint: with
        ``commitOffsetsToGroup``, copy ``end`` to that consumer group (else nothing to do)."""
        self._commit_to_group(end)

    def _commit_to_group(self, end: JsonOffsets) -> None:
        """``commitOffsetsToGroup``: commit ``end`` (a micro-batch end in Spark's commit log) to
        the group, unless it is the last one committed.

        The group is for monitoring (lag tools) only: the checkpoint stays the source of truth.
        A failed commit never fails the query: the first failure of an episode is logged as a
        warning (later ones at debug level), and the next success ends the episode.
        """
        group = self.options.commit_group
        if group is None or end == self._group_committed:
            return
        try:
            sync.run(
                commit_to_group(self.options, group, _from_json(end)),
                timeout=GROUP_COMMIT_TIMEOUT_S,
            )
        except Exception as exc:  # noqa: BLE001 - monitoring only; CancelledError propagates
            if not self._group_failing:
                self._group_failing = True
                options_log.warning(
                    "aiokafka_lite: could not commit offsets to group %r (the query goes on; "
                    "its checkpoint is not affected; logged once until a commit succeeds): %r",
                    group,
                    exc,
                )
            else:
                log.debug("aiokafka_lite: commit to group %r failed again: %r", group, exc)
            return
        self._group_committed = end
        if self._group_failing:
            self._group_failing = False
            options_log.info("aiokafka_lite: commits to group %r succeed again", group)

    def stop(self) -> None:
        """Nothing to release: clients exist only inside calls."""


class KafkaDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("aiokafka_lite")`` (see module doc)."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``aiokafka_lite``."""
        return "aiokafka_lite"

    def _include_headers(self) -> bool:
        return str(self.options.get("includeHeaders", "false")).strip().lower() == "true"

    def schema(self) -> str:
        """The rows' schema, Spark's Kafka source's (with ``headers`` when ``includeHeaders``)."""
        return read_schema_ddl(self._include_headers())

    def _parse(self, streaming: bool, *, read: bool) -> KafkaOptions:
        opts = parse_options(self.options, streaming=streaming, read=read)
        warnings = option_warnings(self.options, streaming=streaming, read=read)
        for text in warnings + check_client_options(opts):
            options_log.warning("aiokafka_lite: %s", text)
        if read and not opts.has_source():
            raise ValueError(
                "give exactly one of the options 'subscribe', 'subscribePattern', 'assign'"
            )
        return opts

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader (``spark.read``): one task per offset range."""
        return KafkaBatchReader(self._parse(False, read=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The streaming reader (``spark.readStream``): checkpointed per-partition offsets."""
        return KafkaStreamReader(self._parse(True, read=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """The batch writer (``df.write``, mode ``append`` only)."""
        if overwrite:  # as Spark's own Kafka sink: records can be appended, never replaced
            raise IllegalArgumentError(
                "save mode 'overwrite' is not supported: Kafka topics can only be appended to "
                "(use mode 'append')"
            )
        return KafkaBatchWriter(self._parse(False, read=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        """The streaming writer (``df.writeStream``)."""
        return KafkaStreamWriter(self._parse(True, read=False))


def register(spark: SparkSession) -> None:
    """Register :class:`KafkaDataSource` under the format name ``aiokafka_lite``."""
    spark.dataSource.register(KafkaDataSource)
