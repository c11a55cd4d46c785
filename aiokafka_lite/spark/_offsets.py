"""Driver-side offset planning: which partitions to read and which offsets bound them.

Coroutines here open their own :class:`~aiokafka_lite.client.KafkaClient` and close it before
returning; run them with :func:`aiokafka_lite.sync.run`.

The exact end of a partition is taken from a Fetch response's high watermark (or last stable
offset under ``read_committed``), not from ListOffsets(latest) alone: Tansu 0.6 answers that
with the base offset of its newest batch + 1, which is short of the end whenever that batch
holds more than one record. So the planner lists the latest offset, then fetches at it
(``max_wait_ms=1``: Tansu answers ``0`` with no partitions at all) and keeps the watermark; the
fetch returns nothing on a correct broker and one batch on Tansu. (Fetching at the log start
instead would be exact too, but noida-db ignores ``max_bytes`` and sends the whole partition.)
The log start comes from ListOffsets(earliest).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import re
import ssl
from dataclasses import dataclass
from typing import Any

from aiokafka_lite import errors as Errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.ops import offsets as offset_ops
from aiokafka_lite.spark._options import EARLIEST, LATEST, KafkaOptions
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "SSL_OPTIONS",
    "OffsetRange",
    "PlanningClient",
    "check_client_options",
    "client_kwargs",
    "commit_to_group",
    "plan_batch",
    "report_data_loss",
    "split_ranges",
]

log = logging.getLogger("aiokafka_lite.spark")

#: How long planning may retry retriable errors (leader changes, metadata not ready).
_PLAN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic-partition: the unit of work of one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Number of offsets in the range (records, unless compacted or transactional)."""
        return max(0, self.end - self.start)


#: ``kafka.ssl.*`` options turned into an ``ssl_context`` (an SSLContext cannot be pickled, so
#: it is built where the client is created).
SSL_OPTIONS = ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname")


def _ssl_context(client: dict[str, Any]) -> ssl.SSLContext | None:
    tls = str(client.get("security_protocol", "")).upper() in ("SSL", "SASL_SSL")
    if not tls and not any(k in client for k in SSL_OPTIONS):
        return None  # (TLS without ssl options: the system's trusted CAs)
    ctx = ssl.create_default_context(cafile=client.get("ssl_cafile"))
    if client.get("ssl_certfile"):
        ctx.load_cert_chain(
            client["ssl_certfile"], client.get("ssl_keyfile"), client.get("ssl_password")
        )
    if client.get("ssl_check_hostname") is False:
        ctx.check_hostname = False
    return ctx


#: OAUTHBEARER token source options (``kafka.sasl.oauthbearer.*``, the OAuthBearerLoginModule
#: JAAS line), made into a token provider where the client is created (like ``ssl_context``).
OAUTH_OPTIONS = (
    "sasl_oauth_token_endpoint_url",
    "sasl_oauth_client_id",
    "sasl_oauth_client_secret",
    "sasl_oauth_scope",
    "sasl_oauth_extensions",
    "sasl_oauth_header_urlencode",
)


def _token_provider(client: dict[str, Any]) -> Any:
    """The ``sasl_oauth_token_provider`` the options describe: ``module:callable`` called with
    no arguments, else an :class:`~aiokafka_lite.auth.OIDCTokenProvider` for the token endpoint;
    None when neither is set."""
    from aiokafka_lite.abc import AbstractTokenProvider

    spec = client.get("sasl_oauth_token_provider")
    if isinstance(spec, str):
        import importlib

        module_name, _, attr = spec.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise Errors.KafkaConfigurationError(
                f"kafka.sasl.oauth.token.provider: cannot load {spec!r}: {exc}"
            ) from exc
        try:
            provider = target()
        except Errors.KafkaError:
            raise
        except Exception as exc:  # the application's callable failed
            raise Errors.KafkaConfigurationError(
                f"kafka.sasl.oauth.token.provider: {spec}() raised {exc!r}"
            ) from exc
        if not isinstance(provider, AbstractTokenProvider):
            raise Errors.KafkaConfigurationError(
                f"kafka.sasl.oauth.token.provider: {spec} returned {type(provider).__name__}, "
                "not an aiokafka_lite.abc.AbstractTokenProvider"
            )
        return provider
    url = client.get("sasl_oauth_token_endpoint_url")
    if url is None:
        return None
    from aiokafka_lite.auth import OIDCTokenProvider

    return OIDCTokenProvider(
        str(url),
        str(client["sasl_oauth_client_id"]),
        str(client["sasl_oauth_client_secret"]),
        scope=client.get("sasl_oauth_scope"),
        extensions=client.get("sasl_oauth_extensions"),
        header_urlencode=client.get("sasl_oauth_header_urlencode") is True,
    )


def report_data_loss(options: KafkaOptions, what: str) -> None:
    """Records the query should have read are gone (``what`` says which): raise
    ``IllegalStateError`` when ``failOnDataLoss`` is on (the default), else log a warning."""
    if options.fail_on_data_loss:
        raise Errors.IllegalStateError(
            f"{what}. Some data may have been lost: it is no longer in Kafka (aged out or "
            "deleted, or the topic was deleted). Set the option failOnDataLoss=false to skip it "
            "and go on."
        )
    log.warning("%s; failOnDataLoss=false: skipped, reading goes on", what)


def _renamed_back() -> dict[str, str]:
    from aiokafka_lite.spark._options import _RENAMED

    return {kwarg: java for java, kwarg in _RENAMED.items()}


def check_client_options(options: KafkaOptions) -> list[str]:
    """Warnings for ``kafka.*`` options no client understands (a typo would otherwise do
    nothing): each names the closest known Kafka client setting when one is close."""
    from aiokafka_lite.consumer import AIOKafkaConsumer
    from aiokafka_lite.producer import AIOKafkaProducer
    from aiokafka_lite.spark._options import closest

    known = set(SSL_OPTIONS) | set(OAUTH_OPTIONS)
    for cls in (KafkaClient, AIOKafkaConsumer, AIOKafkaProducer):
        known.update(inspect.signature(cls).parameters)
    back = _renamed_back()

    def java(kwarg: str) -> str:
        return back.get(kwarg, kwarg.replace("_", "."))

    java_names = sorted({java(k) for k in known} | {"bootstrap.servers", "group.id"})
    out = []
    for kwarg in sorted(k for k in options.client if k not in known):
        name = java(kwarg)
        hint = closest(name, java_names)
        out.append(
            f"unknown Kafka client option 'kafka.{name}' is ignored"
            + (f": did you mean kafka.{hint}?" if hint else "")
        )
    return out


def client_kwargs(target: Any, options: KafkaOptions, **extra: Any) -> dict[str, Any]:
    """Keyword arguments for ``target`` (a client class): bootstrap, the ``kafka.*`` options it
    accepts, an ``ssl_context`` built from ``kafka.ssl.*`` files, a token provider from the
    OAUTHBEARER options, then ``extra`` (which wins)."""
    accepted = set(inspect.signature(target).parameters)
    kw: dict[str, Any] = {"bootstrap_servers": options.bootstrap_servers}
    kw.update({k: v for k, v in options.client.items() if k in accepted})
    ctx = _ssl_context(options.client)
    if ctx is not None and "ssl_context" in accepted:
        kw["ssl_context"] = ctx
    if "sasl_oauth_token_provider" in accepted:
        provider = _token_provider(options.client)
        if provider is not None:
            kw["sasl_oauth_token_provider"] = provider
    kw.update(extra)
    return kw


class PlanningClient:
    """A metadata + offsets view of the cluster for planning (``async with`` it)."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options
        self.client = KafkaClient(
            **client_kwargs(KafkaClient, options, allow_auto_topic_creation=False)
        )
        self.isolation = 1 if options.read_committed else 0

    async def __aenter__(self) -> PlanningClient:
        await self.client.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    # ---------------------------------------------------------------- partitions

    async def topic_partitions(self) -> list[TopicPartition]:
        """The partitions named by subscribe / subscribePattern / assign, sorted."""
        opts = self.options
        client = self.client
        if opts.assign is not None:
            return sorted(TopicPartition(t, p) for t, ps in opts.assign.items() for p in ps)
        if opts.pattern is not None:
            client.need_all_topics = True
            await client.force_metadata_update()
            rx = re.compile(opts.pattern)
            topics = sorted(t for t in client.cluster.topics() if rx.fullmatch(t))
        else:
            topics = list(opts.subscribe)
            await asyncio.wait_for(asyncio.shield(client.set_topics(topics)), _PLAN_TIMEOUT_S)
        out: list[TopicPartition] = []
        for topic in topics:
            parts = client.cluster.partitions_for_topic(topic)
            out.extend(TopicPartition(topic, p) for p in sorted(parts or ()))
        return out

    # ------------------------------------------------------------------- offsets

    async def list_offsets(
        self, tps: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets for ``timestamp`` (-2 earliest, -1 latest, else ms): -1 where none."""
        found = await offset_ops.list_offsets(
            self.client,
            dict.fromkeys(tps, timestamp),
            isolation_level=self.isolation,
            timeout_ms=_PLAN_TIMEOUT_S * 1000,
        )
        return {tp: v.offset for tp, v in found.items()}

    async def high_watermarks(
        self, tps: list[TopicPartition], fetch_at: dict[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """The exact end of each partition: a Fetch's high watermark (LSO if read_committed).

        ``fetch_at`` gives an offset at or below the end, as close to it as known (the
        response carries the records from there on).
        """
        return await offset_ops.high_watermarks(
            self.client,
            {tp: fetch_at.get(tp, 0) for tp in tps},
            isolation_level=self.isolation,
            timeout_ms=_PLAN_TIMEOUT_S * 1000,
        )

    async def bounds(self, tps: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """``{tp: (log start, exact end)}``."""
        if not tps:
            return {}
        earliest = await self.list_offsets(tps, EARLIEST)
        listed = await self.list_offsets(tps, LATEST)
        # Fetch where the end is claimed to be: an empty answer on a correct broker, the newest
        # batch on Tansu. Never at the log start: noida-db ignores max_bytes and would send the
        # whole partition.
        ends = await self.high_watermarks(tps, {tp: max(earliest[tp], listed[tp]) for tp in tps})
        return {tp: (earliest[tp], max(earliest[tp], ends[tp])) for tp in tps}

    async def resolve(
        self,
        tps: list[TopicPartition],
        spec: Any,
        bounds: dict[TopicPartition, tuple[int, int]],
        *,
        default: int,
        starting: bool = False,
    ) -> dict[TopicPartition, int]:
        """Concrete offsets for an offset spec ("earliest" / "latest" / JSON dict / timestamps).

        Partitions missing from a JSON spec get ``default`` (EARLIEST or LATEST). A timestamp
        maps to the first offset whose record timestamp is at or after it; where there is none,
        an ending bound is the end and a ``starting`` one raises ``IllegalArgumentError`` unless
        ``startingOffsetsByTimestampStrategy`` is ``latest`` (then it is the end), as in Spark.
        """
        if isinstance(spec, tuple):
            if spec[0] == "timestamp":
                wanted = {tp: int(spec[1]) for tp in tps}
            else:
                wanted = {
                    tp: int(spec[1][tp.topic][tp.partition])
                    for tp in tps
                    if tp.partition in spec[1].get(tp.topic, {})
                }
            found: dict[TopicPartition, int] = {}
            for ts in sorted(set(wanted.values())):
                group = [tp for tp, t in wanted.items() if t == ts]
                found.update(await self.list_offsets(group, ts))
            out: dict[TopicPartition, int] = {}
            for tp in tps:
                lo, hi = bounds[tp]
                if tp not in wanted:
                    out[tp] = lo if default == EARLIEST else hi
                elif found.get(tp, -1) >= 0:
                    out[tp] = found[tp]
                elif starting and self.options.timestamp_strategy != "latest":
                    raise Errors.IllegalArgumentError(
                        f"{tp}: no record at or after the starting timestamp {wanted[tp]}; set "
                        "startingOffsetsByTimestampStrategy=latest to start at the end instead"
                    )
                else:
                    out[tp] = hi
            return out
        out = {}
        for tp in tps:
            if spec == "earliest":
                want = EARLIEST
            elif spec == "latest":
                want = LATEST
            else:
                want = spec.get(tp.topic, {}).get(tp.partition, default)
            lo, hi = bounds[tp]
            out[tp] = lo if want == EARLIEST else hi if want == LATEST else want
        return out


def _divide(r: OffsetRange, pieces: int) -> list[OffsetRange]:
    """``r`` cut into ``pieces`` consecutive ranges; later pieces take the remainder (as Spark)."""
    out = []
    start, left = r.start, r.size
    for i in range(pieces):
        size = left // (pieces - i)
        out.append(OffsetRange(r.topic, r.partition, start, start + size))
        start += size
        left -= size
    return out


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def split_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None,
    max_records: int | None = None,
) -> list[OffsetRange]:
    """Spark's task split: ``maxRecordsPerPartition`` cuts every range into pieces of at most
    that many offsets; then, while there are fewer than ``minPartitions`` ranges, the big ones
    are cut further in proportion to their size (a range whose share rounds to one piece stays
    whole and the others share what is left). Empty ranges are dropped."""
    out = [r for r in ranges if r.size > 0]
    if max_records:
        out = [p for r in out for p in _divide(r, -(-r.size // max_records))]
    if not min_partitions or len(out) >= min_partitions:
        return out
    total = sum(r.size for r in out)
    whole = {
        (r.topic, r.partition)
        for r in out
        if max(_round_half_up(r.size / total * min_partitions), 1) == 1
    }
    rest = total - sum(r.size for r in out if (r.topic, r.partition) in whole)
    rest_min = max(min_partitions - len([r for r in out if (r.topic, r.partition) in whole]), 1)
    result: list[OffsetRange] = []
    for r in out:
        if (r.topic, r.partition) in whole:
            result.append(r)
        else:
            result.extend(_divide(r, max(_round_half_up(r.size / rest * rest_min), 1)))
    return [r for r in result if r.size > 0]


async def plan_batch(options: KafkaOptions) -> list[OffsetRange]:
    """Resolve a batch query's offset ranges (one or more per topic-partition)."""
    async with PlanningClient(options) as pc:
        tps = await pc.topic_partitions()
        bounds = await pc.bounds(tps)
        starts = await pc.resolve(tps, options.starting, bounds, default=EARLIEST, starting=True)
        ends = await pc.resolve(tps, options.ending, bounds, default=LATEST)
    ranges = []
    for tp in tps:
        lo, hi = bounds[tp]
        start, end = starts[tp], ends[tp]
        if start < lo:
            report_data_loss(
                options,
                f"{tp.topic}-{tp.partition}: startingOffsets {start} is before the log start "
                f"{lo} (offsets [{start}, {lo}) were deleted)",
            )
            start = lo
        end = min(end, hi)
        if end > start:
            ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
    return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)


async def commit_to_group(
    options: KafkaOptions, group_id: str, offsets: dict[TopicPartition, int]
) -> None:
    """Commit ``offsets`` to ``group_id`` from outside the group (generation -1, no member:
    what Kafka accepts for a group with no active members), for ``commitOffsetsToGroup``.

    Raises the first partition's error (an active group answers UNKNOWN_MEMBER_ID)."""
    async with PlanningClient(options) as pc:
        codes = await offset_ops.commit_offsets(
            pc.client, group_id, offsets, timeout_ms=_PLAN_TIMEOUT_S * 1000
        )
    for tp, code in sorted(codes.items()):
        if code:
            raise Errors.for_code(code)(f"OffsetCommit of {tp} to group {group_id!r}")
