"""The metadata refresher: the ONE task that keeps a client's ClusterMetadata fresh.

It refreshes every ``metadata_max_age_ms`` and whenever :meth:`MetadataRefresher.request_update`
asks. Requests made before a refresh starts share one future, resolved with the cluster after
that refresh succeeds; a request made while a refresh runs gets the next one (the topic list may
have changed). Refreshes start at least ``retry_backoff_ms`` apart, except the first one after
the tracked topics grew, which starts at once (as aiokafka's: a producer's first send to a topic
it has not seen is not held back by a refresh made just before); a failed refresh is retried
after that backoff and its waiters wait for the next success. Each refresh asks the client's
least-loaded node for the tracked topics (or every topic when ``need_all_topics``). An
unexpected exception of a refresh (not a ``KafkaError``) follows the supervision rule
(``_supervise``): logged once, raised once to that refresh's waiters, retried after an
exponential back-off.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from . import errors as Errors
from ._supervise import Supervisor
from ._wire import metadata_request
from .cluster import ClusterMetadata
from .structs import BrokerMetadata, TopicPartition

__all__ = ["MetadataRefresher"]

log = logging.getLogger(__name__)

Waiter = asyncio.Future[ClusterMetadata]

#: UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE: the topic may appear or get leaders soon
_TOPIC_PENDING_CODES = (3, 5)
#: refresh interval while a tracked topic is missing or leaderless
_MISSING_TOPIC_REFRESH_S = 1.0


class MetadataRefresher:
    """Tracked topics, the refresh task and the futures of those waiting for a refresh."""

    def __init__(
        self,
        cluster: ClusterMetadata,
        *,
        least_loaded_node: Callable[[], int],
        send: Callable[[int, Any], Awaitable[Any]],
        on_update: Callable[[], None],
        metadata_max_age_ms: int,
        retry_backoff_ms: int,
        allow_auto_topic_creation: bool,
        rebootstrap_trigger_ms: int | None = None,
    ) -> None:
        self.cluster = cluster
        #: KIP-1102: no metadata for this long (a failed refresh past it) or REBOOTSTRAP_REQUIRED
        #: -> forget the known brokers, start again from the bootstrap addresses (None: never)
        self.rebootstrap_trigger_ms = rebootstrap_trigger_ms
        self._least_loaded_node = least_loaded_node
        self._send = send
        self._on_update = on_update
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.topics: set[str] = set()
        self._need_all_topics = False
        self._task: asyncio.Task[None] | None = None
        self._event: asyncio.Event | None = None
        self._future: Waiter | None = None
        self._last_refresh = 0.0
        self._last_attempt = -1e9
        self._topics_grew = False  # the next refresh asks about a topic not asked about yet
        #: an unexpected exception of a refresh: logged once, raised once to the refresh's
        #: waiters, the next attempt after an exponential back-off (self._pause)
        self._sup = Supervisor("metadata refresher", retry_backoff_ms, log)
        self._guard = self._sup.guard("refresh")
        self._pause = 0.0
        self._stopped = False

    # ---------------------------------------------------------------- topics

    @property
    def need_all_topics(self) -> bool:
        """Fetch metadata for every topic (pattern subscriptions)."""
        return self._need_all_topics

    @need_all_topics.setter
    def need_all_topics(self, value: bool) -> None:
        if bool(value) != self._need_all_topics:
            self._need_all_topics = bool(value)
            if self._task is not None:
                self.request_update()

    def add_topics(self, topics: Iterable[str]) -> Waiter:
        """Track more topics; returns the refresh future (already done if nothing changed)."""
        new = set(topics) - self.topics
        if new:
            self.topics |= new
            self._topics_grew = True
            return self.request_update()
        return self._done_future()

    def set_topics(self, topics: Iterable[str]) -> Waiter:
        """Track exactly ``topics``; returns the refresh future (done if nothing was added)."""
        new = set(topics)
        added = new - self.topics
        self.topics = new
        if not added:
            return self._done_future()
        self._topics_grew = True
        return self.request_update()

    def _done_future(self) -> Waiter:
        fut: Waiter = asyncio.get_running_loop().create_future()
        fut.set_result(self.cluster)
        return fut

    def request(self) -> Any:
        """The MetadataRequest a refresh sends (also used for bootstrap)."""
        topics = None if self._need_all_topics else sorted(self.topics)
        return metadata_request(topics, self.allow_auto_topic_creation)

    def apply_leaders(
        self, leaders: Mapping[TopicPartition, tuple[int, int]], endpoints: Iterable[Any]
    ) -> set[TopicPartition]:
        """KIP-951 leader discovery: the new leaders a Produce/Fetch answer named (see
        :meth:`ClusterMetadata.apply_leaders`), applied without a Metadata round trip."""
        current = self.cluster.apply_leaders(
            leaders,
            [BrokerMetadata(e.node_id, e.host, e.port, e.rack) for e in endpoints],
        )
        self._on_update()
        return current

    # --------------------------------------------------------------- waiting

    def request_update(self) -> Waiter:
        """Ask for a refresh; returns a future resolved with the cluster after the next success.

        The future only resolves on success: wait on it with a timeout. Once stopped, the
        future returned is already failed (KafkaConnectionError) and marked retrieved.
        """
        loop = asyncio.get_running_loop()
        if self._stopped:
            failed: Waiter = loop.create_future()
            failed.set_exception(Errors.KafkaConnectionError("client closed"))
            failed.exception()
            return failed
        fut = self._future
        if fut is None or fut.done():
            fut = self._future = loop.create_future()
        if self._event is not None:
            self._event.set()
        return fut

    async def wait_for_topic(self, topic: str, timeout: float) -> set[int]:
        """Partition ids of ``topic``, refreshing until known; KafkaTimeoutError after ``timeout`` s.

        A non-retriable topic error (e.g. TopicAuthorizationFailedError) is raised at once.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.add_topics([topic])
        while True:
            parts = self.cluster.partitions_for_topic(topic)
            if parts:
                return parts
            code = self.cluster.topic_error(topic)
            if code and not Errors.for_code(code).retriable:
                raise Errors.for_code(code)(f"metadata for topic {topic!r}")
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(asyncio.shield(self.request_update()), remaining)
            except asyncio.TimeoutError:
                break
        raise Errors.KafkaTimeoutError(
            f"topic {topic!r} not found in metadata after {timeout * 1000:.0f} ms"
        )

    # ------------------------------------------------------------- lifecycle

    def start(self, refreshed_at: float) -> None:
        """Start the refresh task; ``refreshed_at`` is the loop time of the bootstrap refresh."""
        loop = asyncio.get_running_loop()
        self._last_refresh = self._last_attempt = refreshed_at
        self._event = asyncio.Event()
        fut, self._future = self._future, None
        if fut is not None and not fut.done():
            fut.set_result(self.cluster)  # asked before start: the bootstrap refresh answered it
        self._task = loop.create_task(self._run())

    def stop(self) -> asyncio.Task[None] | None:
        """Cancel the task (returned, to be awaited) and fail whoever still waits."""
        self._stopped = True
        fut, self._future = self._future, None
        if fut is not None and not fut.done():
            fut.set_exception(Errors.KafkaConnectionError("client closed"))
            fut.exception()  # nobody may be waiting: mark retrieved
        task = self._task
        if task is not None:
            task.cancel()
        return task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        event = self._event
        assert event is not None
        backoff = self.retry_backoff_ms / 1000
        while True:
            fut = self._future
            if fut is None or fut.done():
                max_age = self.metadata_max_age_ms / 1000
                if self._waiting_for_topics():  # learn a topic soon after it appears
                    max_age = min(max_age, _MISSING_TOPIC_REFRESH_S)
                wait = self._last_refresh + max_age - loop.time()
                if wait > 0:
                    try:
                        await asyncio.wait_for(event.wait(), wait)
                    except asyncio.TimeoutError:
                        pass
            gap = self._last_attempt + max(backoff, self._pause) - loop.time()
            if gap > 0 and (self._pause or not self._topics_grew):
                await asyncio.sleep(gap)
            self._topics_grew = False
            event.clear()
            fut, self._future = self._future, None
            self._last_attempt = loop.time()
            if await self._refresh_once():
                self._last_refresh = loop.time()
                if fut is not None and not fut.done():
                    fut.set_result(self.cluster)
            else:
                err = self._sup.take() if fut is not None and not fut.done() else None
                if err is not None:  # an unexpected error: its waiters see it, once
                    assert fut is not None
                    fut.set_exception(err)
                    fut.exception()  # nobody may be waiting any more: mark retrieved
                elif fut is not None and not fut.done():
                    self._requeue(fut)
                event.set()  # retry after retry_backoff_ms (or the back-off, self._pause)

    def _waiting_for_topics(self) -> bool:
        """True when a tracked topic is unknown or has a partition without a leader (it may be
        being created): such metadata is refreshed every second, not every max age."""
        if self._need_all_topics:
            return False
        cluster = self.cluster
        for topic in self.topics:
            if cluster.topic_error(topic) in _TOPIC_PENDING_CODES:
                return True
            parts = cluster.partitions_for_topic(topic)
            if not parts:  # unknown, or listed without partitions (Tansu)
                return True
            available = cluster.available_partitions_for_topic(topic) or set()
            if len(available) < len(parts):
                return True
        return False

    def _requeue(self, fut: Waiter) -> None:
        """A refresh failed: its waiters wait for the next one (merged with newer waiters)."""
        newer = self._future
        if newer is None or newer.done():
            self._future = fut
        else:
            newer.add_done_callback(functools.partial(_chain, dst=fut))

    async def _refresh_once(self) -> bool:
        node_id = self._least_loaded_node()
        try:
            resp = await self._send(node_id, self.request())
        except Errors.KafkaError as exc:  # CancelledError (a BaseException) propagates
            log.info("metadata refresh via node %s failed: %s", node_id, exc)
            self._maybe_rebootstrap(f"no metadata since {exc!r}")
            return False
        except Exception as exc:  # a bug must not kill the one refresher task
            self._pause = self._guard.failed(exc)
            return False
        if resp.error_code == Errors.RebootstrapRequiredError.errno:
            log.warning("node %s answered REBOOTSTRAP_REQUIRED", node_id)
            self._maybe_rebootstrap("the broker asked for it", now=True)
            return False
        if resp.error_code:
            log.info("metadata refresh via node %s failed: error %s", node_id, resp.error_code)
            return False
        if not resp.brokers:
            log.warning("ignoring a metadata answer without brokers from node %s", node_id)
            return False
        try:
            self.cluster.update_metadata(resp)
            self._on_update()
        except Exception as exc:
            self._pause = self._guard.failed(exc)
            return False
        self._guard.ok()
        self._pause = 0.0
        self._sup.pending = None  # recovered before anyone waited for it
        return True

    def rebootstrap_now(self, where: str) -> None:
        """A broker answered REBOOTSTRAP_REQUIRED to ``where`` (KIP-1242: ApiVersions v5 found
        it is not the node of this cluster the metadata names): rebootstrap at once, as for a
        Metadata answer with that error (nothing with ``metadata_recovery_strategy="none"``)."""
        log.warning("a broker answered REBOOTSTRAP_REQUIRED to %s", where)
        self._maybe_rebootstrap("the broker asked for it", now=True)

    def _maybe_rebootstrap(self, why: str, now: bool = False) -> None:
        """KIP-1102: forget the known brokers when the trigger time has passed since the last
        metadata (or ``now``), so the next refresh starts from the bootstrap addresses."""
        trigger = self.rebootstrap_trigger_ms
        if trigger is None:
            return
        loop = asyncio.get_running_loop()
        if not now and loop.time() - self._last_refresh < trigger / 1000:
            return
        log.warning("rebootstrapping from the bootstrap servers (%s)", why)
        self._last_refresh = loop.time()  # the trigger starts again
        self.cluster.forget()
        self._on_update()


def _chain(src: Waiter, dst: Waiter) -> None:
    if dst.done():
        return
    if src.cancelled():
        dst.cancel()
    elif src.exception() is not None:
        dst.set_exception(src.exception())  # type: ignore[arg-type]
        dst.exception()
    else:
        dst.set_result(src.result())
