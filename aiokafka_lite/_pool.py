"""The connection pool of a :class:`~aiokafka_lite.client.KafkaClient`.

* One connection per ``(node_id, group)``; ``group`` gives coordination traffic its own socket
  so it never queues behind a long-poll fetch. Each key has its own connect task (no global
  connect lock); concurrent callers share it, each through a future of its own.
* Failed connects put the node in reconnect backoff: ``reconnect_backoff_ms`` doubling up to
  ``reconnect_backoff_max_ms``, +-20 % jitter; a successful connect resets it.
* Bootstrap addresses are pseudo-nodes with ids ``-1, -2, ...``; after a metadata answer their
  connections are re-keyed to the real node at the same address (or closed), and they are later
  used only as a last resort by :meth:`ConnectionPool.least_loaded_node`.

The pool is handed the cluster metadata (node addresses), the connection settings and an
``on_broken()`` callable it calls when a connection broke or a node has no known address (the
client asks for a metadata refresh then); it never imports the client.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from . import errors as Errors
from ._timeouts import Timeouts
from .cluster import ClusterMetadata
from .conn import BrokerConnection

__all__ = ["ConnectionPool"]

log = logging.getLogger(__name__)

_UNCONNECTED_PENALTY = 1 << 20  # least-loaded: any connected node beats an unconnected one


_API_VERSIONS_KEY = 18


class ConnectionPool:
    """Connections by ``(node_id, group)``, their connect tasks and each node's backoff."""

    def __init__(
        self,
        cluster: ClusterMetadata,
        bootstrap: list[tuple[str, int]],
        conn_args: dict[str, Any],
        timeouts: Timeouts,
        *,
        reconnect_backoff_ms: int,
        reconnect_backoff_max_ms: int,
        on_broken: Callable[[], None],
        rebootstrap: bool = True,
        on_rebootstrap_required: Callable[[], None] | None = None,
    ) -> None:
        self._cluster = cluster
        #: KIP-899: the bootstrap addresses are a last resort also once brokers are known
        #: (metadata_recovery_strategy="rebootstrap"); else only before the first metadata
        self.rebootstrap = rebootstrap
        self._bootstrap = bootstrap
        self._conn_args = conn_args
        self._timeouts = timeouts
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._on_broken = on_broken
        #: a broker answered ApiVersions with REBOOTSTRAP_REQUIRED (KIP-1242: it is not the
        #: node of the cluster the metadata names): the metadata starts again from bootstrap
        self._on_rebootstrap_required = on_rebootstrap_required
        #: open (or closing) connections by (node_id, group); the client sends on them directly
        self.conns: dict[tuple[int, str], BrokerConnection] = {}
        #: the connect task of each key being connected
        self.connecting: dict[tuple[int, str], asyncio.Task[BrokerConnection]] = {}
        #: consecutive failed connects per node (the backoff's exponent)
        self.failures: dict[int, int] = {}
        #: loop time until which a node is not connected to again
        self.backoff_until: dict[int, float] = {}
        #: the broker's api key -> (min, max) ranges from the most recent handshake
        self.api_versions: dict[int, tuple[int, int]] = {}
        #: the finalized feature levels of the newest view any handshake reported (the
        #: highest features epoch, as the Java client keeps them), and that epoch
        self.finalized_features: dict[str, int] = {}
        self.finalized_features_epoch = -1
        self.closed = False

    # ------------------------------------------------------------ node choice

    def least_loaded_node(self) -> int:
        """The node with the fewest in-flight requests.

        Connected nodes first, then connectable ones; nodes in reconnect backoff are skipped;
        bootstrap addresses (negative ids) are the last resort. If every candidate is backing
        off, the one whose backoff ends first.
        """
        now = _now()
        brokers = [int(b.nodeId) for b in self._cluster.brokers()]
        backoff_until = self.backoff_until
        best, best_score = None, None
        n = len(brokers)
        offset = random.randrange(n) if n > 1 else 0
        for i in range(n):
            node_id = brokers[(offset + i) % n]
            conn = self.conns.get((node_id, "default"))
            if conn is not None and conn.connected:
                score = conn.in_flight
                if score == 0:
                    return node_id
            elif backoff_until.get(node_id, 0.0) > now:
                continue
            else:
                score = _UNCONNECTED_PENALTY
            if best_score is None or score < best_score:
                best, best_score = node_id, score
        if best is not None:
            return best
        if brokers and not self.rebootstrap:  # "none": the known brokers only
            return min(brokers, key=lambda nid: backoff_until.get(nid, 0.0))
        for idx in range(len(self._bootstrap)):
            if backoff_until.get(-(idx + 1), 0.0) <= now:
                return -(idx + 1)
        candidates = brokers + [-(i + 1) for i in range(len(self._bootstrap))]
        return min(candidates, key=lambda nid: backoff_until.get(nid, 0.0))

    def in_backoff(self, node_id: int) -> bool:
        """True while ``node_id`` is waiting out a reconnect backoff."""
        return self.backoff_until.get(node_id, 0.0) > _now()

    # ----------------------------------------------------------- connections

    async def get(
        self, node_id: int, group: str, timeout_ms: float | None = None
    ) -> BrokerConnection:
        """The open connection to ``node_id`` for ``group``, connecting (or joining the
        pending connect) if needed; KafkaConnectionError when that fails or takes longer than
        ``timeout_ms`` (default: request_timeout_ms) plus the longest reconnect backoff."""
        if self.closed:
            raise Errors.KafkaConnectionError("client closed")
        key = (node_id, group)
        conn = self.conns.get(key)
        if conn is not None and conn.connected:
            return conn
        task = self.connecting.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(node_id, group))
            self.connecting[key] = task
            task.add_done_callback(functools.partial(self._connect_done, key))
        timeout = (timeout_ms if timeout_ms is not None else self._timeouts.request_ms) / 1000
        timeout += self.reconnect_backoff_max_ms / 1000
        # Each waiter has its own future, completed from the shared connect task: a connect
        # cancelled by close() completes it with a connection error, so a CancelledError seen
        # here is always this task's own cancellation and propagates (on every Python: 3.10 has
        # no Task.cancelling() to tell the two apart afterwards).
        waiter: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        relay = functools.partial(_relay_connect, waiter)
        task.add_done_callback(relay)
        try:
            return await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            raise Errors.KafkaConnectionError(
                f"connecting to node {node_id} did not finish within {timeout * 1000:.0f} ms"
            ) from None
        finally:
            task.remove_done_callback(relay)

    def _connect_done(self, key: tuple[int, str], task: asyncio.Task[BrokerConnection]) -> None:
        if self.connecting.get(key) is task:
            del self.connecting[key]
        if not task.cancelled():
            task.exception()  # retrieved here; the waiters re-raise it

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            idx = -node_id - 1
            if idx < len(self._bootstrap):
                return self._bootstrap[idx]
        else:
            broker = self._cluster.broker_metadata(node_id)
            if broker is not None:
                return broker.host, broker.port
        raise Errors.KafkaConnectionError(f"node {node_id} is not in the cluster metadata")

    async def _connect(self, node_id: int, group: str) -> BrokerConnection:
        loop = asyncio.get_running_loop()
        delay = self.backoff_until.get(node_id, 0.0) - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            host, port = self._address(node_id)
        except Errors.KafkaConnectionError:
            self._on_broken()
            raise
        conn = BrokerConnection(
            host,
            port,
            node_id=node_id,
            group=group,
            on_close=self._on_conn_close,
            cluster_id=self._cluster_check(node_id),
            **self._conn_args,
        )
        try:
            await conn.connect(int(self._timeouts.connect_ms))
        except Errors.RebootstrapRequiredError:
            if self._on_rebootstrap_required is not None:
                self._on_rebootstrap_required()
            raise
        except Errors.KafkaError:
            n = self.failures.get(node_id, 0) + 1
            self.failures[node_id] = n
            base = min(
                self.reconnect_backoff_max_ms, self.reconnect_backoff_ms * 2 ** min(n - 1, 30)
            )
            self.backoff_until[node_id] = loop.time() + base * random.uniform(0.8, 1.2) / 1000
            raise
        self.failures.pop(node_id, None)
        self.backoff_until.pop(node_id, None)
        if self.closed:
            conn.close(None)
            raise Errors.KafkaConnectionError("client closed")
        self.conns[(node_id, group)] = conn
        self.api_versions = conn.api_versions
        if conn.finalized_features_epoch >= self.finalized_features_epoch:
            self.finalized_features_epoch = conn.finalized_features_epoch
            self.finalized_features = conn.finalized_features
        return conn

    def _cluster_check(self, node_id: int) -> str | None:
        """The cluster id a connection to ``node_id`` sends in ApiVersions v5 (KIP-1242): with
        rebootstrap on (Java's rule), to a known node, once a handshake showed the cluster speaks
        v5 (Tansu closes the connection on a v5 request that carries a cluster id)."""
        if node_id < 0 or not self.rebootstrap:
            return None
        if self.api_versions.get(_API_VERSIONS_KEY, (0, 0))[1] < 5:
            return None
        return self._cluster.cluster_id

    def _on_conn_close(self, conn: BrokerConnection, reason: BaseException | None) -> None:
        key = (conn.node_id if conn.node_id is not None else 0, conn.group)
        if self.conns.get(key) is conn:
            del self.conns[key]
        if reason is not None:
            self._on_broken()  # a broken connection often means the metadata moved

    # ------------------------------------------------- after metadata answers

    def after_metadata_update(self) -> None:
        """Connection housekeeping after each successful metadata update: bootstrap
        connections re-keyed to their real node, connections to nodes that left or moved
        closed."""
        self._adopt_bootstrap_conns()
        self._close_moved_conns()

    def _close_moved_conns(self) -> None:
        """Close connections to nodes that left the cluster or changed address."""
        for (node_id, _group), conn in list(self.conns.items()):
            if node_id < 0:
                continue
            b = self._cluster.broker_metadata(node_id)
            if b is None or (b.host, b.port) != (conn.host, conn.port):
                log.info("node %s left or moved; closing %r", node_id, conn)
                conn.close(None)

    def _adopt_bootstrap_conns(self) -> None:
        """Re-key bootstrap connections to the real node at the same address; close the rest."""
        by_addr = {(b.host, b.port): int(b.nodeId) for b in self._cluster.brokers()}
        for key, conn in list(self.conns.items()):
            node_id, group = key
            if node_id >= 0:
                continue
            del self.conns[key]
            real = by_addr.get((conn.host, conn.port))
            if real is not None and conn.connected and (real, group) not in self.conns:
                conn.node_id = real
                self.conns[(real, group)] = conn
            else:
                conn.close(None)

    def drop_bootstrap_conns(self) -> None:
        """Cancel the bootstrap connects and close the bootstrap connections (a failed or
        cancelled start() leaves none behind for a later one to wait on or inherit)."""
        for key, task in list(self.connecting.items()):
            if key[0] < 0:
                task.cancel()
                del self.connecting[key]
        for key, conn in list(self.conns.items()):
            if key[0] < 0:
                del self.conns[key]
                conn.close(None)

    # -------------------------------------------------------------- shutdown

    def shut(self) -> tuple[list[asyncio.Task[Any]], list[BrokerConnection]]:
        """Refuse new connects, cancel the pending ones and close every connection (nothing
        awaited); returns the cancelled connect tasks and the closed connections, for the
        client's close() to wait on."""
        self.closed = True
        tasks: list[asyncio.Task[Any]] = list(self.connecting.values())
        for t in tasks:
            t.cancel()
        conns = list(self.conns.values())
        self.conns.clear()
        for conn in conns:
            conn.close(None)
        return tasks, conns


def _relay_connect(
    waiter: asyncio.Future[BrokerConnection], task: asyncio.Task[BrokerConnection]
) -> None:
    """Complete one connect waiter from the shared connect task; a cancelled connect becomes the
    connection error close() gives every waiter."""
    if waiter.done():
        return
    if task.cancelled():  # close(), or a failed start() dropping its bootstrap connections
        waiter.set_exception(Errors.KafkaConnectionError("connect aborted: client closed"))
    elif (exc := task.exception()) is not None:
        waiter.set_exception(exc)
    else:
        waiter.set_result(task.result())


def _now() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # called outside the loop (e.g. from a sync helper)
        return time.monotonic()  # what the default event loops use for loop.time()
