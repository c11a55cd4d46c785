"""The one executor of the operations layer: routing, retries, metadata refresh, deadline.

Every protocol operation of :mod:`aiokafka_lite.ops` is a sans-I/O pair (build a request for a
set of items, parse a response into per-item results) run by one of four routes here:

* :func:`by_leader`: items keyed by partition, one request per partition leader (ListOffsets,
  DeleteRecords, Fetch for watermarks);
* :func:`by_coordinator`: items keyed by group id, one request per group coordinator
  (OffsetFetch, OffsetCommit, DescribeGroups, DeleteGroups, OffsetDelete);
* :func:`to_controller`: one request to the controller (CreateTopics, DeleteTopics,
  CreatePartitions), resent after a metadata refresh on NOT_CONTROLLER;
* :func:`to_node`: one request to a given node, or the least-loaded one (Metadata, ListGroups,
  DescribeConfigs, ...);
* :func:`coordinator_call`: one request to the coordinator of one key, with hooks for the
  caller's own errors (transactions, the consumer's commit/committed and their membership
  errors); :func:`find_coordinator` is the FindCoordinator look-up behind every coordinator
  route, through the client's coordinator cache.

Which errors are retried, and how, is decided by ONE classifier,
:func:`aiokafka_lite.errors.retry_action`. Retriable errors (connection failures, per-item
retriable codes, unknown leaders or coordinators) are retried every ``retry_backoff_ms`` until
the operation's deadline (a :class:`Deadline` on the event loop clock, by default the client's
``timeouts.retry_ms``), refreshing metadata (through the client's ONE refresher) or forgetting
the coordinator first when the error says so; the last error is raised when the deadline
passes. Non-retriable per-item errors are returned to the caller in the results (the caller
decides whether to raise). Cancellation always propagates: nothing here catches
``CancelledError``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .. import errors as Errors
from .._wire import Coordinator, ItemError, find_coordinator_request, parse_find_coordinator
from ..errors import RetryAction, retry_action
from ..structs import TopicPartition

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = [
    "Coordinator",
    "Deadline",
    "at_coordinator",
    "ItemError",
    "by_coordinator",
    "coordinator_call",
    "find_coordinator",
    "find_coordinator_request",
    "parse_find_coordinator",
    "by_leader",
    "raise_item_errors",
    "to_controller",
    "to_node",
]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
R = TypeVar("R")

NOT_CONTROLLER = Errors.NotControllerError.errno  # 41
_UNKNOWN_TOPIC = Errors.UnknownTopicOrPartitionError.errno  # 3
#: CONCURRENT_TRANSACTIONS clears quickly: retried after this instead of retry_backoff_ms
_CONCURRENT_TRANSACTIONS = Errors.ConcurrentTransactions.errno  # 51
_CONCURRENT_TRANSACTIONS_BACKOFF_MS = 20


def raise_item_errors(results: Mapping[Any, Any], what: str) -> None:
    """Raise the first :class:`ItemError` found among ``results``' values."""
    for key, value in results.items():
        if isinstance(value, ItemError):
            raise value.exception(f"{what} {key}")


class Deadline:
    """An operation's overall deadline (its retry budget) on the event loop clock, the one
    clock of every retry budget."""

    def __init__(self, timeout_ms: float) -> None:
        self._loop = asyncio.get_running_loop()
        self.timeout_ms = timeout_ms
        self.at = self._loop.time() + timeout_ms / 1000

    @classmethod
    def of(cls, client: KafkaClient, timeout_ms: float | None) -> Deadline:
        """``timeout_ms``, or the client's operation retry budget (``timeouts.retry_ms``)."""
        return cls(timeout_ms if timeout_ms is not None else client.timeouts.retry_ms)

    @property
    def remaining_ms(self) -> float:
        """Milliseconds left (never negative)."""
        return max(0.0, (self.at - self._loop.time()) * 1000)

    @property
    def expired(self) -> bool:
        """True once the deadline has passed."""
        return self._loop.time() >= self.at

    async def backoff(
        self, client: KafkaClient, *, refresh: bool, last: BaseException | None, what: str
    ) -> None:
        """Wait before the next attempt: a metadata refresh if asked, then ``retry_backoff_ms``.

        Raises the last error (or KafkaTimeoutError) if the deadline has passed.
        """
        if refresh:
            try:
                await asyncio.wait_for(
                    asyncio.shield(client.request_update()), self.remaining_ms / 1000
                )
            except asyncio.TimeoutError:
                pass
        delay = min(client.retry_backoff_ms, self.remaining_ms) / 1000
        if delay > 0:
            await asyncio.sleep(delay)
        if self.expired:
            self.fail(last, what)

    def keep(self, last: BaseException | None, exc: BaseException) -> BaseException:
        """The error to remember after ``exc``: a client-side timeout of an attempt that the
        deadline itself cut short keeps the error that made the retries (``last``)."""
        if last is not None and isinstance(exc, Errors.KafkaTimeoutError) and self.expired:
            return last
        return exc

    def fail(self, last: BaseException | None, what: str) -> None:
        """Raise ``last`` (a retriable error that outlived the deadline) or KafkaTimeoutError."""
        if isinstance(last, Errors.KafkaError):
            raise last
        raise Errors.KafkaTimeoutError(f"{what} did not complete within {self.timeout_ms:g} ms")


def _retriable_exc(exc: BaseException) -> bool:
    return retry_action(exc).retriable


async def _gather(calls: Iterable[Awaitable[R]]) -> list[R | BaseException]:
    """Run ``calls`` together; KafkaErrors come back as values, anything else is raised."""
    calls = list(calls)
    if len(calls) == 1:  # the common single-broker case: no task per call
        try:
            return [await calls[0]]
        except Errors.KafkaError as exc:
            return [exc]
    results = await asyncio.gather(*calls, return_exceptions=True)
    for res in results:
        if isinstance(res, BaseException) and not isinstance(res, Errors.KafkaError):
            raise res  # a bug or a cancellation: never swallowed
    return results


async def to_node(
    client: KafkaClient,
    request: Any,
    *,
    timeout_ms: float | None = None,
    node_id: int | None = None,
    what: str = "request",
) -> Any:
    """Send ``request`` to ``node_id`` (default: the least-loaded node) and return the response.

    Connection errors and timeouts are retried (on another node when none was named) until
    ``timeout_ms`` (default the client's retry budget, ``timeouts.retry_ms``).
    """
    deadline = Deadline.of(client, timeout_ms)
    while True:
        node = node_id if node_id is not None else client.least_loaded_node()
        try:
            return await client.send(node, request, timeout_ms=max(1.0, deadline.remaining_ms))
        except Errors.KafkaError as exc:
            if not _retriable_exc(exc):
                raise
            log.debug("%s to node %s failed: %r", what, node, exc)
            await deadline.backoff(client, refresh=False, last=exc, what=what)


async def to_controller(
    client: KafkaClient,
    request: Any,
    codes: Callable[[Any], Iterable[int]],
    *,
    timeout_ms: float | None = None,
    what: str = "request",
) -> Any:
    """Send ``request`` to the controller; resend after a refresh while any of ``codes(response)``
    is NOT_CONTROLLER (or the send fails retriably). Returns the last response."""
    deadline = Deadline.of(client, timeout_ms)
    refresh = client.cluster.controller_id < 0
    last: BaseException | None = None
    while True:
        if refresh:
            await deadline.backoff(client, refresh=True, last=last, what=what)
        controller = client.cluster.controller_id
        if controller < 0 or client.cluster.broker_metadata(controller) is None:
            controller = client.least_loaded_node()  # old brokers: any node forwards
        try:
            resp = await client.send(
                controller, request, timeout_ms=max(1.0, deadline.remaining_ms)
            )
        except Errors.KafkaError as exc:
            if not _retriable_exc(exc):
                raise
            last, refresh = exc, True
            continue
        if NOT_CONTROLLER not in set(codes(resp)):
            return resp
        last, refresh = Errors.NotControllerError(f"{what}: node {controller}"), True


async def by_leader(
    client: KafkaClient,
    items: Mapping[TopicPartition, V],
    build: Callable[[Mapping[TopicPartition, V]], Any],
    parse: Callable[[Any], Mapping[TopicPartition, R | ItemError]],
    *,
    timeout_ms: float | None = None,
    what: str = "request",
    unknown_topic_is_error: bool = False,
    max_version: Callable[[Any], int | None] | None = None,
) -> dict[TopicPartition, R | ItemError]:
    """Send ``build(items of one leader)`` to each partition leader; results by partition.

    The topics named become tracked by the client's metadata. A partition of a known topic that
    does not exist gets ``ItemError(UNKNOWN_TOPIC_OR_PARTITION)``; unknown leaders, retriable
    per-partition codes and failed sends are retried after a metadata refresh until the deadline.
    ``unknown_topic_is_error``: a topic that fresh metadata does not know fails at once with
    UNKNOWN_TOPIC_OR_PARTITION instead of being waited for. ``max_version(request)``: the
    highest version that request may go out at (None: any).
    """
    deadline = Deadline.of(client, timeout_ms)
    remaining = dict(items)
    results: dict[TopicPartition, R | ItemError] = {}
    topics = {tp.topic for tp in remaining}
    fresh = bool(topics - client.topics)  # adding topics refreshes the metadata
    if fresh:
        await _wait_tracked(client, client.add_topics(topics), deadline)
    last: BaseException | None = None
    while remaining:
        cluster = client.cluster
        by_node: dict[int, dict[TopicPartition, V]] = {}
        retry = False
        for tp, value in list(remaining.items()):
            leader = cluster.leader_for_partition(tp)
            if leader is None or leader < 0:
                known = cluster.partitions_for_topic(tp.topic)
                code = cluster.topic_error(tp.topic)
                if known is not None and tp.partition not in known:
                    results[tp] = ItemError(Errors.UnknownTopicOrPartitionError.errno)
                    del remaining[tp]
                elif code and (
                    not ItemError(code).retriable
                    or (unknown_topic_is_error and fresh and code == _UNKNOWN_TOPIC)
                ):
                    results[tp] = ItemError(code)
                    del remaining[tp]
                else:
                    retry = True
                    last = Errors.LeaderNotAvailableError(f"{what}: no leader for {tp}")
                continue
            by_node.setdefault(leader, {})[tp] = value
        nodes = list(by_node)
        requests = [build(by_node[node]) for node in nodes]
        answers = await _gather(
            client.send(
                node,
                request,
                timeout_ms=max(1.0, deadline.remaining_ms),
                max_version=None if max_version is None else max_version(request),
            )
            for node, request in zip(nodes, requests)
        )
        for node, answer in zip(nodes, answers):
            if isinstance(answer, BaseException):
                if not _retriable_exc(answer):
                    raise answer
                retry, last = True, answer
                continue
            for tp, res in parse(answer).items():
                if tp not in remaining:
                    continue
                if isinstance(res, ItemError) and res.retriable:
                    retry, last = True, res.exception(f"{what} {tp}")
                    continue
                results[tp] = res
                del remaining[tp]
            for tp in by_node[node]:
                if tp in remaining and tp not in results:
                    retry = True  # not in the answer: ask again
        if remaining:
            await deadline.backoff(client, refresh=retry, last=last, what=what)
            fresh = fresh or retry
    return results


async def _wait_tracked(client: KafkaClient, fut: asyncio.Future[Any], deadline: Deadline) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(fut), deadline.remaining_ms / 1000)
    except asyncio.TimeoutError:
        pass  # the retry loop waits for leaders and reports a timeout


async def by_coordinator(
    client: KafkaClient,
    keys: Iterable[K],
    build: Callable[[list[K]], Any],
    parse: Callable[[Any], Mapping[K, R | ItemError]],
    *,
    timeout_ms: float | None = None,
    what: str = "request",
    coordinator: int | None = None,
    max_version: Callable[[Any], int | None] | None = None,
) -> dict[K, R | ItemError]:
    """Send ``build(keys of one coordinator)`` to each group coordinator; results by group id.

    ``coordinator`` skips the first lookup (aiokafka's ``group_coordinator_id``). Coordinator
    errors (not available, not coordinator, loading) and failed sends are retried, looking the
    coordinator up again (through the client's cache, forgotten first) where the error says it
    moved, until the deadline. ``max_version(request)`` caps a request's version (None: any).
    """
    deadline = Deadline.of(client, timeout_ms)
    remaining = list(dict.fromkeys(keys))
    results: dict[K, R | ItemError] = {}
    known: dict[K, int] = {}
    if coordinator is not None:
        known = {k: coordinator for k in remaining}
    last: BaseException | None = None
    while remaining:
        by_node: dict[int, list[K]] = {}
        for key in remaining:
            node = known.get(key)
            if node is None:
                try:
                    node = await find_coordinator(client, str(key), deadline=deadline)
                except Errors.KafkaError as exc:
                    if not _retriable_exc(exc):
                        results[key] = ItemError(getattr(exc, "errno", -1) or -1, str(exc) or None)
                        continue
                    last = exc
                    continue
                known[key] = node
            by_node.setdefault(node, []).append(key)
        remaining = [k for k in remaining if k not in results]
        nodes = list(by_node)
        requests = [build(by_node[node]) for node in nodes]
        answers = await _gather(
            client.send(
                node,
                request,
                group="coordinator",
                timeout_ms=max(1.0, deadline.remaining_ms),
                max_version=None if max_version is None else max_version(request),
            )
            for node, request in zip(nodes, requests)
        )
        for node, answer in zip(nodes, answers):
            if isinstance(answer, BaseException):
                if not _retriable_exc(answer):
                    raise answer
                last = answer
                for key in by_node[node]:
                    known.pop(key, None)
                    client.coordinators.forget(str(key), 0, node)
                continue
            for key, res in parse(answer).items():
                if key not in by_node[node] or key in results:
                    continue
                if isinstance(res, ItemError):
                    action = retry_action(res.code, coordinator=True)
                    if action.retriable:
                        if action is RetryAction.FIND_COORDINATOR:
                            known.pop(key, None)
                            client.coordinators.forget(str(key), 0, node)
                        last = res.exception(f"{what} {key!r}")
                        continue
                results[key] = res
        remaining = [k for k in remaining if k not in results]
        if remaining:
            await deadline.backoff(client, refresh=False, last=last, what=what)
    return results


async def at_coordinator(
    client: KafkaClient,
    group_id: str,
    build: Callable[[], Any],
    parse: Callable[[Any], R | ItemError],
    *,
    timeout_ms: float | None = None,
    what: str = "request",
    coordinator: int | None = None,
    max_version: Callable[[Any], int | None] | None = None,
) -> R:
    """:func:`by_coordinator` for one group; a group-level error left at the end is raised."""
    res = await by_coordinator(
        client,
        [group_id],
        lambda _groups: build(),
        lambda resp: {group_id: parse(resp)},
        timeout_ms=timeout_ms,
        what=what,
        coordinator=coordinator,
        max_version=max_version,
    )
    value = res[group_id]
    if isinstance(value, ItemError):
        raise value.exception(f"{what} of group {group_id!r}")
    return value


# -------------------------------------------------------------------------- FindCoordinator


async def find_coordinator(
    client: KafkaClient,
    key: str,
    key_type: int = 0,
    *,
    timeout_ms: float | None = None,
    deadline: Deadline | None = None,
    fresh: bool = False,
) -> int:
    """Node id of the group (``key_type`` 0) or transaction (1) coordinator of ``key``.

    The client's coordinator cache answers unless ``fresh``; else FindCoordinator at the
    least-loaded node, retrying retriable errors (coordinator not available / loading,
    connection errors) every ``retry_backoff_ms`` until ``deadline`` (or ``timeout_ms``,
    default the client's retry budget), then raising the last error. The answer is cached.
    """
    if not fresh:
        cached = client.coordinators.get(key, key_type)
        if cached is not None:
            return cached
    if deadline is None:
        deadline = Deadline.of(client, timeout_ms)
    what = f"FindCoordinator({key!r}, key_type={key_type})"
    request = find_coordinator_request(key, key_type)
    last: BaseException | None = None
    while True:
        try:
            resp = await client.send(
                client.least_loaded_node(), request, timeout_ms=max(1.0, deadline.remaining_ms)
            )
        except Errors.KafkaError as exc:
            if not _retriable_exc(exc):
                raise
            last = deadline.keep(last, exc)
        else:
            found = parse_find_coordinator(resp, key)
            if found.error is None:
                client.cluster.add_coordinator(found.node_id, found.host, found.port)
                client.coordinators.put(key, key_type, found.node_id)
                return found.node_id
            err = found.error.exception(what)
            if not found.error.retriable:
                raise err
            last = err
        log.debug("%s failed: %r", what, last)
        await deadline.backoff(client, refresh=False, last=last, what=what)


async def coordinator_call(
    client: KafkaClient,
    key: str | None,
    key_type: int,
    request: Any,
    error_of: Callable[[Any], int],
    *,
    timeout_ms: float | None = None,
    backoff_ms: float | None = None,
    what: str = "request",
    on_error: Callable[[int], RetryAction] | None = None,
    failure: Callable[[int], BaseException] | None = None,
    on_expired: Callable[[BaseException | None, bool], BaseException] | None = None,
    max_version: int | None = None,
) -> Any:
    """Send ``request`` to the coordinator of ``key`` (any node when ``key`` is None) on the
    ``"coordinator"`` connection and return the answer whose ``error_of(answer)`` is 0.

    Failed sends and error codes are classified by :func:`~aiokafka_lite.errors.retry_action`
    (as a coordinator request), or for codes by ``on_error`` when given (the consumer's hook for
    its membership errors: it may raise, e.g. CommitFailedError). FIND_COORDINATOR forgets the
    cached coordinator and looks it up again; RETRY asks the same node again after the backoff
    (``backoff_ms``, default ``retry_backoff_ms``; 20 ms for CONCURRENT_TRANSACTIONS); other
    codes raise ``failure(code)`` (default: the code's error class). Each attempt waits at most
    the client's ``timeouts.request_ms``; past the budget (``timeout_ms``, default the client's
    retry budget) ``on_expired(last error, it came from the look-up)`` is raised (default: the
    last error). ``max_version`` caps the request's version.
    """
    deadline = Deadline.of(client, timeout_ms)
    backoff = client.retry_backoff_ms if backoff_ms is None else backoff_ms
    last: BaseException | None = None
    while True:
        pause = backoff
        node: int | None = None
        try:
            if key is None:
                node = client.least_loaded_node()
            else:
                node = await find_coordinator(client, key, key_type, deadline=deadline)
            resp = await client.send(
                node,
                request,
                group="coordinator",
                timeout_ms=max(1.0, min(client.timeouts.request_ms, deadline.remaining_ms)),
                max_version=max_version,
            )
        except Errors.KafkaError as exc:
            if not retry_action(exc, coordinator=key is not None).retriable:
                raise
            if key is not None and node is not None:
                client.coordinators.forget(key, key_type, node)
            last = deadline.keep(last, exc)
        else:
            code = error_of(resp)
            if not code:
                return resp
            action = (
                on_error(code) if on_error is not None else retry_action(code, coordinator=True)
            )
            if not action.retriable:
                raise failure(code) if failure is not None else Errors.for_code(code)(what)
            if action is RetryAction.FIND_COORDINATOR and key is not None:
                client.coordinators.forget(key, key_type, node)
            if code == _CONCURRENT_TRANSACTIONS:
                pause = _CONCURRENT_TRANSACTIONS_BACKOFF_MS
            last = Errors.for_code(code)(f"{what} still failing after retries")
        log.debug("%s at the coordinator of %r failed: %r", what, key, last)
        if not deadline.expired:
            await asyncio.sleep(min(pause, deadline.remaining_ms) / 1000)
        if deadline.expired:
            if on_expired is not None:
                raise on_expired(last, node is None and key is not None)
            deadline.fail(last, what)
