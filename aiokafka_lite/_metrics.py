"""The built-in metrics hook behind ``metrics()`` of the producer, consumer, share consumer and
admin client.

Every one of them registers one :class:`ClientMetrics` before the user's hooks. It
keeps plain counters, updated per connection, request, batch, fetched partition, commit and
rebalance: never per record (it implements neither ``on_send`` nor ``on_consume``). Rates are
averages over the client's lifetime (since it was constructed); latencies are milliseconds.
"""

from __future__ import annotations

import time
from asyncio import CancelledError
from collections.abc import Mapping, Sequence
from typing import Any

from .structs import OffsetAndMetadata, TopicPartition

__all__ = ["ClientMetrics"]


class ClientMetrics:
    """Counters fed by hook events; :meth:`producer_snapshot` / :meth:`consumer_snapshot` /
    :meth:`share_snapshot` / :meth:`common_snapshot` (the admin client's)."""

    def __init__(self) -> None:
        self.created = time.monotonic()
        self.connections = 0
        self.connects = 0
        self.disconnects = 0
        self.requests = 0
        self.request_bytes = 0
        #: api name -> [answers, latency sum (s), latency max (s), errors]
        self.by_api: dict[str, list[Any]] = {}
        # producer
        self.batches_sent = 0
        self.retries = 0
        self.queue_time_sum = 0.0
        self.queue_time_max = 0.0
        self.batches_acked = 0
        self.records_acked = 0
        self.bytes_acked = 0
        self.batch_size_max = 0
        self.delivery_sum = 0.0
        self.delivery_max = 0.0
        self.batches_failed = 0
        self.records_failed = 0
        # consumer
        self.fetched_partitions = 0
        self.records_fetched = 0
        self.bytes_fetched = 0
        self.commits = 0
        self.commit_errors = 0
        self.commit_sum = 0.0
        self.commit_max = 0.0
        self.rebalances = 0
        self.revoked_total = 0
        # share consumer: acknowledgements answered (records), of them failed
        self.acks_sent = 0
        self.acks_failed = 0

    # -- hook events -----------------------------------------------------------------------
    def on_connect(self, node_id: int | None, host: str, port: int, purpose: str) -> None:
        self.connects += 1
        self.connections += 1

    def on_disconnect(
        self, node_id: int | None, host: str, port: int, purpose: str, reason: BaseException | None
    ) -> None:
        self.disconnects += 1
        self.connections -= 1

    def on_request_sent(self, node_id: int | None, api_key: int, api_name: str, size: int) -> None:
        self.requests += 1
        self.request_bytes += size

    def on_response(
        self,
        node_id: int | None,
        api_key: int,
        api_name: str,
        latency: float,
        error: BaseException | None,
    ) -> None:
        stats = self.by_api.get(api_name)
        if stats is None:
            stats = self.by_api[api_name] = [0, 0.0, 0.0, 0]
        stats[0] += 1
        stats[1] += latency
        if latency > stats[2]:
            stats[2] = latency
        if error is not None and not isinstance(error, CancelledError):  # abandoned: no error
            stats[3] += 1

    def on_batch_sent(
        self, topic: str, partition: int, records: int, size: int, queue_time: float, attempt: int
    ) -> None:
        self.batches_sent += 1
        if attempt > 1:
            self.retries += 1
            return
        self.queue_time_sum += queue_time
        if queue_time > self.queue_time_max:
            self.queue_time_max = queue_time

    def on_batch_acked(
        self, topic: str, partition: int, records: int, size: int, base_offset: int, latency: float
    ) -> None:
        self.batches_acked += 1
        self.records_acked += records
        self.bytes_acked += size
        if size > self.batch_size_max:
            self.batch_size_max = size
        self.delivery_sum += latency
        if latency > self.delivery_max:
            self.delivery_max = latency

    def on_batch_failed(
        self, topic: str, partition: int, records: int, size: int, error: BaseException
    ) -> None:
        self.batches_failed += 1
        self.records_failed += records

    def on_fetch(
        self, topic: str, partition: int, records: int, size: int, high_watermark: int, lag: int
    ) -> None:
        self.fetched_partitions += 1
        self.records_fetched += records
        self.bytes_fetched += size

    def on_commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        latency: float,
        error: BaseException | None,
    ) -> None:
        self.commits += 1
        if error is not None:
            self.commit_errors += 1
        self.commit_sum += latency
        if latency > self.commit_max:
            self.commit_max = latency

    def on_acknowledge(
        self,
        group_id: str,
        results: Mapping[TopicPartition, BaseException | None],
        offsets: Mapping[TopicPartition, Sequence[int]],
    ) -> None:
        for tp, error in results.items():
            n = len(offsets.get(tp, ()))
            self.acks_sent += n
            if error is not None:
                self.acks_failed += n

    def on_partitions_revoked(self, group_id: str, revoked: set[TopicPartition]) -> None:
        self.revoked_total += len(revoked)

    def on_partitions_assigned(self, group_id: str, assigned: set[TopicPartition]) -> None:
        self.rebalances += 1

    # -- snapshots -------------------------------------------------------------------------
    def common_snapshot(self) -> dict[str, Any]:
        """The connection and request counters every client has (the admin client's metrics)."""
        return self._common()

    def _common(self) -> dict[str, Any]:
        elapsed = max(time.monotonic() - self.created, 1e-9)
        answers = sum(s[0] for s in self.by_api.values())
        latency_sum = sum(s[1] for s in self.by_api.values())
        return {
            "connection-count": self.connections,
            "connection-creation-total": self.connects,
            "connection-close-total": self.disconnects,
            "request-total": self.requests,
            "request-rate": self.requests / elapsed,
            "request-latency-avg": _ms(latency_sum / answers) if answers else 0.0,
            "request-latency-max": _ms(max((s[2] for s in self.by_api.values()), default=0.0)),
            "request-error-total": sum(s[3] for s in self.by_api.values()),
            "outgoing-byte-total": self.request_bytes,
            "outgoing-byte-rate": self.request_bytes / elapsed,
            "requests-by-api": {
                name: {
                    "total": s[0],
                    "latency-avg": _ms(s[1] / s[0]) if s[0] else 0.0,
                    "latency-max": _ms(s[2]),
                    "error-total": s[3],
                }
                for name, s in sorted(self.by_api.items())
            },
        }

    def producer_snapshot(self) -> dict[str, Any]:
        """The producer's metrics (see ``AIOKafkaProducer.metrics``)."""
        out = self._common()
        elapsed = max(time.monotonic() - self.created, 1e-9)
        acked = self.batches_acked
        first = self.batches_sent - self.retries
        out.update(
            {
                "record-send-total": self.records_acked,
                "record-send-rate": self.records_acked / elapsed,
                "record-error-total": self.records_failed,
                "record-error-rate": self.records_failed / elapsed,
                "record-retry-total": self.retries,
                "batch-total": acked,
                "batch-error-total": self.batches_failed,
                "batch-size-avg": self.bytes_acked / acked if acked else 0.0,
                "batch-size-max": self.batch_size_max,
                "records-per-batch-avg": self.records_acked / acked if acked else 0.0,
                "byte-total": self.bytes_acked,
                "byte-rate": self.bytes_acked / elapsed,
                "record-queue-time-avg": _ms(self.queue_time_sum / first) if first else 0.0,
                "record-queue-time-max": _ms(self.queue_time_max),
                "delivery-latency-avg": _ms(self.delivery_sum / acked) if acked else 0.0,
                "delivery-latency-max": _ms(self.delivery_max),
            }
        )
        api = self.by_api.get("Produce")
        out["produce-latency-avg"] = _ms(api[1] / api[0]) if api and api[0] else 0.0
        out["produce-latency-max"] = _ms(api[2]) if api else 0.0
        return out

    def consumer_snapshot(
        self, lags: Mapping[TopicPartition, int], assigned: int
    ) -> dict[str, Any]:
        """The consumer's metrics; ``lags``: the current lag of each assigned partition whose
        high watermark and position are known; ``assigned``: partitions assigned now."""
        out = self._common()
        elapsed = max(time.monotonic() - self.created, 1e-9)
        api = self.by_api.get("Fetch")
        fetches = api[0] if api else 0
        commits = self.commits
        out.update(
            {
                "fetch-total": fetches,
                "fetch-rate": fetches / elapsed,
                "fetch-latency-avg": _ms(api[1] / fetches) if api and fetches else 0.0,
                "fetch-latency-max": _ms(api[2]) if api else 0.0,
                "records-consumed-total": self.records_fetched,
                "records-consumed-rate": self.records_fetched / elapsed,
                "bytes-consumed-total": self.bytes_fetched,
                "bytes-consumed-rate": self.bytes_fetched / elapsed,
                "records-per-request-avg": self.records_fetched / fetches if fetches else 0.0,
                "fetch-size-avg": self.bytes_fetched / fetches if fetches else 0.0,
                "records-lag-max": max(lags.values(), default=0),
                "records-lag": dict(lags),
                "commit-total": commits,
                "commit-error-total": self.commit_errors,
                "commit-rate": commits / elapsed,
                "commit-latency-avg": _ms(self.commit_sum / commits) if commits else 0.0,
                "commit-latency-max": _ms(self.commit_max),
                "rebalance-total": self.rebalances,
                "partitions-revoked-total": self.revoked_total,
                "assigned-partitions": assigned,
            }
        )
        return out

    def share_snapshot(self, records: int, size: int) -> dict[str, Any]:
        """The share consumer's metrics; ``records`` / ``size``: records (and their bytes)
        the share fetches acquired so far."""
        out = self._common()
        elapsed = max(time.monotonic() - self.created, 1e-9)
        api = self.by_api.get("ShareFetch")
        fetches = api[0] if api else 0
        beats = self.by_api.get("ShareGroupHeartbeat")
        out.update(
            {
                "fetch-total": fetches,
                "fetch-rate": fetches / elapsed,
                "fetch-latency-avg": _ms(api[1] / fetches) if api and fetches else 0.0,
                "fetch-latency-max": _ms(api[2]) if api else 0.0,
                "records-consumed-total": records,
                "records-consumed-rate": records / elapsed,
                "bytes-consumed-total": size,
                "bytes-consumed-rate": size / elapsed,
                "records-per-request-avg": records / fetches if fetches else 0.0,
                "fetch-size-avg": size / fetches if fetches else 0.0,
                "acknowledgements-send-total": self.acks_sent,
                "acknowledgements-send-rate": self.acks_sent / elapsed,
                "acknowledgements-error-total": self.acks_failed,
                "acknowledgements-error-rate": self.acks_failed / elapsed,
                "heartbeat-total": beats[0] if beats else 0,
                "heartbeat-rate": (beats[0] if beats else 0) / elapsed,
                "heartbeat-response-time-max": _ms(beats[2]) if beats else 0.0,
            }
        )
        return out


def _ms(seconds: float) -> float:
    return seconds * 1000.0
