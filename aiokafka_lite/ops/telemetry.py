"""KIP-714 client telemetry: GetTelemetrySubscriptions, PushTelemetry and the push loop.

A producer, consumer or share consumer with ``enable_metrics_push=True`` (the default, as
Java's ``enable.metrics.push``), or an admin client with it set (off by default, as Java's
``Admin``), runs one :class:`TelemetryPusher`. It asks any broker for the client's
subscription; a broker without a subscription for this client (no ``client-metrics`` config
matches it, or no metrics plugin) answers with no requested metrics, and the client then only
asks again after the push interval the broker names (5 minutes by default): one small request,
nothing else. With a subscription, every push interval it encodes the metrics whose names start
with a requested prefix as OTLP (:mod:`aiokafka_lite._otlp`) and sends them; ``close()`` makes the
last push with ``terminating=True``.

Telemetry never fails the application: every error is logged at debug level and ends in a
pause or a new subscription request, never in an exception to the caller (cancellation still
propagates). A broker that does not speak the APIs (Kafka before 3.7, embedded brokers) stops the
loop for the client's life.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .. import errors as Errors
from .._otlp import CUMULATIVE, DELTA, Point, metrics_data
from ..protocol import messages as m

if TYPE_CHECKING:
    from ..client import KafkaClient

log = logging.getLogger(__name__)

__all__ = [
    "Subscription",
    "TelemetryPusher",
    "admin_metric_names",
    "consumer_metric_names",
    "new_pusher",
    "parse_subscription",
    "producer_metric_names",
    "push_request",
    "share_metric_names",
    "subscription_request",
]

_NO_ID = uuid.UUID(int=0)
#: error codes of PushTelemetry / GetTelemetrySubscriptions (KIP-714)
_UNKNOWN_SUBSCRIPTION_ID = 117
_UNSUPPORTED_COMPRESSION_TYPE = 76
_TELEMETRY_TOO_LARGE = 118
_INVALID_REQUEST = 42
_INVALID_RECORD = 87
#: the pause after a failed request when the broker named no interval yet
_RETRY_MS = 30000
#: the shortest pause between pushes, whatever a broker answers (Kafka's own floor is 100 ms)
_MIN_INTERVAL_MS = 100


class Subscription:
    """A GetTelemetrySubscriptions answer."""

    __slots__ = ("instance_id", "id", "prefixes", "interval_ms", "max_bytes", "delta")

    def __init__(
        self,
        instance_id: uuid.UUID,
        subscription_id: int,
        prefixes: list[str],
        interval_ms: int,
        max_bytes: int,
        delta: bool,
    ) -> None:
        self.instance_id = instance_id
        self.id = subscription_id
        #: metric name prefixes; empty: nothing subscribed, [""]: everything
        self.prefixes = prefixes
        self.interval_ms = interval_ms
        self.max_bytes = max_bytes
        self.delta = delta

    def wants(self, name: str) -> bool:
        """True when ``name`` matches a requested prefix."""
        return any(name.startswith(p) for p in self.prefixes)


def subscription_request(instance_id: uuid.UUID | None) -> Any:
    """GetTelemetrySubscriptions (the zero uuid the first time: the broker assigns one)."""
    return m.GetTelemetrySubscriptionsRequest(client_instance_id=instance_id or _NO_ID)


def parse_subscription(resp: Any, instance_id: uuid.UUID | None) -> Subscription:
    """The subscription, or the answer's error raised."""
    if resp.error_code:
        raise Errors.for_code(resp.error_code)("GetTelemetrySubscriptions")
    assigned = resp.client_instance_id
    return Subscription(
        assigned if assigned != _NO_ID else (instance_id or _NO_ID),
        resp.subscription_id,
        list(resp.requested_metrics or ()),
        resp.push_interval_ms,
        resp.telemetry_max_bytes,
        resp.delta_temporality,
    )


def push_request(sub: Subscription, payload: bytes, terminating: bool) -> Any:
    """PushTelemetry of an uncompressed OTLP ``payload`` (compression type 0 is always
    accepted)."""
    return m.PushTelemetryRequest(
        client_instance_id=sub.instance_id,
        subscription_id=sub.id,
        terminating=terminating,
        compression_type=0,
        metrics=payload,
    )


# ------------------------------------------------------------------------- metric names

#: the consumer's metrics by Java group (KIP-714 names are ``org.apache.kafka.`` + the group
#: without ``-metrics`` + the metric name, dashes as dots)
#: the fetch metrics the consumer's and the share consumer's fetch managers both have
_FETCH_MANAGER = (
    "fetch-total",
    "fetch-rate",
    "fetch-latency-avg",
    "fetch-latency-max",
    "records-consumed-total",
    "records-consumed-rate",
    "bytes-consumed-total",
    "bytes-consumed-rate",
    "records-per-request-avg",
    "fetch-size-avg",
)
_CONSUMER_GROUPS = {
    "fetch.manager": (*_FETCH_MANAGER, "records-lag-max"),
    "coordinator": (
        "commit-total",
        "commit-error-total",
        "commit-rate",
        "commit-latency-avg",
        "commit-latency-max",
        "rebalance-total",
        "partitions-revoked-total",
        "assigned-partitions",
    ),
}


def _dotted(name: str) -> str:
    return name.replace("-", ".")


def _points(prefix: str, snapshot: Mapping[str, Any], keys: Any) -> dict[str, tuple[float, bool]]:
    out: dict[str, tuple[float, bool]] = {}
    for key in keys:
        value = snapshot.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"{prefix}.{_dotted(key)}"] = (float(value), key.endswith("-total"))
    return out


def producer_metric_names(snapshot: Mapping[str, Any]) -> dict[str, tuple[float, bool]]:
    """``producer.metrics()`` as KIP-714 names: ``{name: (value, is a monotonic sum)}``."""
    return _points("org.apache.kafka.producer", snapshot, snapshot.keys())


def consumer_metric_names(snapshot: Mapping[str, Any]) -> dict[str, tuple[float, bool]]:
    """``consumer.metrics()`` as KIP-714 names (fetch manager and coordinator groups apart)."""
    return _grouped("org.apache.kafka.consumer", snapshot, _CONSUMER_GROUPS)


def _grouped(
    prefix: str, snapshot: Mapping[str, Any], groups: Mapping[str, tuple[str, ...]]
) -> dict[str, tuple[float, bool]]:
    """Each group's metrics under ``prefix.group``, every other metric under ``prefix``."""
    grouped = {k for keys in groups.values() for k in keys}
    out = _points(prefix, snapshot, [k for k in snapshot if k not in grouped])
    for group, keys in groups.items():
        out.update(_points(f"{prefix}.{group}", snapshot, keys))
    return out


#: the share consumer's metrics by Java group (``consumer-share-fetch-manager-metrics``,
#: ``consumer-share-coordinator-metrics``); the others are the common ``consumer-metrics``
_SHARE_GROUPS = {
    "share.fetch.manager": (
        *_FETCH_MANAGER,
        "acknowledgements-send-total",
        "acknowledgements-send-rate",
        "acknowledgements-error-total",
        "acknowledgements-error-rate",
    ),
    "share.coordinator": ("heartbeat-total", "heartbeat-rate", "heartbeat-response-time-max"),
}


def share_metric_names(snapshot: Mapping[str, Any]) -> dict[str, tuple[float, bool]]:
    """``share_consumer.metrics()`` as KIP-714 names, as Java's ``KafkaShareConsumer`` pushes
    them (``org.apache.kafka.consumer.share.fetch.manager.*``, ``...share.coordinator.*``; the
    connection and request counts under ``org.apache.kafka.consumer.``)."""
    return _grouped("org.apache.kafka.consumer", snapshot, _SHARE_GROUPS)


def admin_metric_names(snapshot: Mapping[str, Any]) -> dict[str, tuple[float, bool]]:
    """``admin.metrics()`` as KIP-714 names (Java's ``admin-client-metrics`` group)."""
    return _points("org.apache.kafka.admin.client", snapshot, snapshot.keys())


# ------------------------------------------------------------------------------ pusher


#: the longest a stop() waits for the terminating push
CLOSE_TIMEOUT_S = 2.0


def new_pusher(
    enabled: bool,
    client: KafkaClient,
    metrics: Callable[[], Mapping[str, Any]],
    names: Callable[[Mapping[str, Any]], dict[str, tuple[float, bool]]],
    client_id: str,
) -> TelemetryPusher | None:
    """The client's :class:`TelemetryPusher` (``enable_metrics_push``), or None: it pushes
    ``names(metrics())``, ``metrics`` being the client's bound ``metrics`` method, held weakly
    so the loop's task does not keep a client dropped without ``stop()`` alive (aiokafka's
    clients are collected at once, warn "Unclosed ..." and release their tasks)."""
    if not enabled:
        return None
    ref = weakref.WeakMethod(metrics)

    def snapshot() -> dict[str, tuple[float, bool]]:
        bound = ref()
        return {} if bound is None else names(bound())

    return TelemetryPusher(client, snapshot, client_id)


class TelemetryPusher:
    """The push loop of one client (see the module's docstring)."""

    def __init__(
        self,
        client: KafkaClient,
        metrics: Callable[[], Mapping[str, tuple[float, bool]]],
        client_id: str,
    ) -> None:
        self._client = client
        self._metrics = metrics
        self._client_id = client_id
        self._task: asyncio.Task[None] | None = None
        self._sub: Subscription | None = None
        self._instance_id: uuid.UUID | None = None
        self._last_push_ns = 0
        self._last_sums: dict[str, float] = {}
        self._started_ns = time.time_ns()
        #: pushes sent and answered without error (tests, ``metrics()``)
        self.pushes = 0
        self.closed = False

    @property
    def client_instance_id(self) -> uuid.UUID | None:
        """The id the broker assigned to this client (None before the first answer)."""
        return self._instance_id

    def start(self) -> None:
        """Start the loop (after the client started)."""
        if self._task is None and not self.closed:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def abandon(self) -> None:
        """Stop the loop now, without the last push (a cancelled or failed stop())."""
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self, timeout_s: float) -> None:
        """Stop the loop; with a subscription, a last push with ``terminating=True``, waited
        for at most ``timeout_s``. Never raises (but cancellation)."""
        if self.closed:
            return
        self.closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        sub = self._sub
        if sub is None or not sub.prefixes or timeout_s <= 0:
            return
        try:
            await asyncio.wait_for(self._push(sub, terminating=True), timeout_s)
        except Exception as exc:  # not CancelledError (a BaseException): it propagates  # telemetry never fails the application
            log.debug("the terminating telemetry push failed: %r", exc)

    async def _run(self) -> None:
        client = self._client
        if not (
            client.supports(m.GetTelemetrySubscriptionsRequest)
            and client.supports(m.PushTelemetryRequest)
        ):
            return  # Kafka before 3.7, Tansu (no PushTelemetry), noida: no telemetry here
        pause_ms = 0.0
        while True:
            if pause_ms:
                await asyncio.sleep(pause_ms / 1000)
            try:
                step = await self._step()
            except Errors.UnsupportedVersionError:
                return
            except Exception as exc:  # never the application's problem
                log.debug("client telemetry: %r", exc)
                interval = self._sub.interval_ms if self._sub is not None else 0
                pause_ms = interval or _RETRY_MS
                continue
            if step is None:
                return
            pause_ms = step

    async def _step(self) -> float | None:
        """One subscription request or one push; the pause before the next step (ms), None
        when the broker refused the client's telemetry for good."""
        sub = self._sub
        if sub is None:
            node = self._client.least_loaded_node()
            resp = await self._client.send(node, subscription_request(self._instance_id))
            sub = parse_subscription(resp, self._instance_id)
            self._sub, self._instance_id = sub, sub.instance_id
            if not sub.prefixes:  # nothing subscribed: ask again after the interval
                self._sub = None
                return float(
                    max(sub.interval_ms, _MIN_INTERVAL_MS) if sub.interval_ms else _RETRY_MS
                )
            # the first push after a random part of the interval (KIP-714: 0.5-1.5 of it)
            return max(sub.interval_ms, _MIN_INTERVAL_MS) * random.uniform(0.5, 1.5)
        code = await self._push(sub, terminating=False)
        if code in (_UNKNOWN_SUBSCRIPTION_ID, _UNSUPPORTED_COMPRESSION_TYPE):
            self._sub = None  # the subscription changed: ask again now
            return 0.0
        if code in (_INVALID_REQUEST, _INVALID_RECORD):
            log.debug("the broker refused the client's telemetry (error %s): stopped", code)
            return None
        return float(max(sub.interval_ms, _MIN_INTERVAL_MS))

    async def _push(self, sub: Subscription, terminating: bool) -> int:
        now_ns = time.time_ns()
        payload = self._encode(sub, now_ns)
        if sub.max_bytes and len(payload) > sub.max_bytes:
            log.debug("telemetry payload of %d bytes over the broker's limit", len(payload))
            return _TELEMETRY_TOO_LARGE
        node = self._client.least_loaded_node()
        resp = await self._client.send(node, push_request(sub, payload, terminating))
        if resp.error_code == 0:
            self.pushes += 1
            self._last_push_ns = now_ns
        return int(resp.error_code)

    def _encode(self, sub: Subscription, now_ns: int) -> bytes:
        points = []
        start_ns = self._last_push_ns if sub.delta and self._last_push_ns else self._started_ns
        for name, (value, is_sum) in sorted(self._metrics().items()):
            if not sub.wants(name):
                continue
            if is_sum and sub.delta:
                value, self._last_sums[name] = value - self._last_sums.get(name, 0.0), value
            points.append(Point(name, value, is_sum, start_ns if is_sum else 0))
        return metrics_data(
            points,
            time_ns=now_ns,
            temporality=DELTA if sub.delta else CUMULATIVE,
            resource={"client_id": self._client_id},
        )
