"""KafkaClient: bootstrap, connection pool, metadata refresher, coordinator lookup.

One :class:`KafkaClient` serves one producer, consumer or admin client.

* Connections are pooled per ``(node_id, group)``; ``group`` gives coordination traffic its own
  socket so it never queues behind a long-poll fetch. Each key has its own connect task (no
  global connect lock); concurrent senders share it.
* Failed connects put the node in reconnect backoff: ``reconnect_backoff_ms`` doubling up to
  ``reconnect_backoff_max_ms``, +-20 % jitter; a successful connect resets it.
* Bootstrap addresses are pseudo-nodes with ids ``-1, -2, ...``; they are used until the first
  metadata answer and later only as a last resort.
* ONE refresher task owns metadata (:mod:`aiokafka_lite._metadata`): it refreshes every
  ``metadata_max_age_ms`` and whenever :meth:`KafkaClient.request_update` asks (requests
  coalesce into one future), never more often than ``retry_backoff_ms``, always on the
  least-loaded node.
* The coordinator cache (:class:`CoordinatorCache`, ``client.coordinators``): group and
  transaction coordinators by ``(key_type, key)``, filled and invalidated by the executor's
  look-up (:func:`aiokafka_lite.ops._exec.find_coordinator`) on NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE and failed sends; the consumer group, transactions and admin share it.
* ``client.timeouts`` (:class:`~aiokafka_lite._timeouts.Timeouts`) names the waits that
  ``request_timeout_ms`` covers.
* A caller's cancellation is never turned into another error; ``close()`` turns pending
  connects and refresh waits into ``KafkaConnectionError``.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import random
import ssl
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import errors as Errors
from ._metadata import MetadataRefresher
from ._timeouts import Timeouts
from .auth import AbstractTokenProvider
from .cluster import ClusterMetadata
from .conn import BrokerConnection, pick_version
from .hooks import ClientInfo, HookSet

__all__ = ["AIOKafkaClient", "CoordinatorCache", "KafkaClient", "parse_bootstrap"]

log = logging.getLogger(__name__)

_UNCONNECTED_PENALTY = 1 << 20  # least-loaded: any connected node beats an unconnected one


def _port(text: str, item: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise Errors.KafkaConfigurationError(f"bad port in bootstrap address {item!r}")
    return int(text)


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2"`` or ``["h1:9092", "[::1]:9093"]`` -> ``[(host, port), ...]``."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        host, port = item, 9092
        if item.startswith("["):  # [ipv6]:port
            end = item.find("]")
            if end < 0:
                raise Errors.KafkaConfigurationError(f"bad bootstrap address {item!r}")
            host, rest = item[1:end], item[end + 1 :]
            if rest.startswith(":"):
                port = _port(rest[1:], item)
        elif item.count(":") == 1:
            host, p = item.split(":")
            port = _port(p, item)
        out.append((host, port))
    if not out:
        raise Errors.KafkaConfigurationError(f"no bootstrap servers in {servers!r}")
    return out


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def check_security_args(
    security_protocol: str,
    ssl_context: ssl.SSLContext | None,
    sasl_mechanism: str | None,
    sasl_plain_username: str | None,
    sasl_plain_password: str | None,
    sasl_oauth_token_provider: object = None,
) -> None:
    """Refuse inconsistent security settings at construction, with aiokafka's rules and
    exception class (ValueError). aiokafka checks the OAUTHBEARER provider when it opens a
    connection (start()); this checks it at construction already."""
    if security_protocol not in SECURITY_PROTOCOLS:
        raise ValueError(
            "`security_protocol` should be SSL or PLAINTEXT (or SASL_PLAINTEXT, SASL_SSL), "
            f"got {security_protocol!r}"
        )
    if security_protocol in ("SSL", "SASL_SSL") and ssl_context is None:
        raise ValueError(
            f"`ssl_context` is mandatory if security_protocol=='SSL' (or 'SASL_SSL'; "
            f"got {security_protocol!r}): see aiokafka_lite.helpers.create_ssl_context"
        )
    if security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = sasl_mechanism or "PLAIN"
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(
                f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, got {mechanism!r}"
            )
        if mechanism == "GSSAPI" and importlib.util.find_spec("gssapi") is None:
            # not imported here (it loads libkrb5): the exchange imports it at connect
            raise Errors.MissingExtraError(
                "sasl_mechanism='GSSAPI' needs the gssapi package: "
                "pip install 'aiokafka_lite[gssapi]'"
            )
        if mechanism == "PLAIN" and (sasl_plain_username is None or sasl_plain_password is None):
            raise ValueError("sasl_plain_username and sasl_plain_password required for PLAIN sasl")
        if mechanism == "OAUTHBEARER" and not isinstance(
            sasl_oauth_token_provider, AbstractTokenProvider
        ):
            raise ValueError(
                "sasl_oauth_token_provider needs to be provided implementing "
                "aiokafka_lite.abc.AbstractTokenProvider"
                + (
                    f" (got {type(sasl_oauth_token_provider).__name__})"
                    if sasl_oauth_token_provider is not None
                    else ""
                )
            )


class CoordinatorCache:
    """Known group (key_type 0) and transaction (1) coordinators by ``(key_type, key)``.

    Filled by the FindCoordinator look-up of the executor and forgotten by it when a request
    there fails with NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection.
    """

    def __init__(self) -> None:
        self._nodes: dict[tuple[int, str], int] = {}

    def get(self, key: str, key_type: int = 0) -> int | None:
        """The known coordinator of ``key``, or None."""
        return self._nodes.get((key_type, key))

    def put(self, key: str, key_type: int, node_id: int) -> None:
        """Remember ``node_id`` as the coordinator of ``key``."""
        self._nodes[(key_type, key)] = node_id

    def forget(self, key: str, key_type: int = 0, node_id: int | None = None) -> None:
        """Forget the coordinator of ``key`` (only if it is ``node_id``, when given: a late
        failure at an old coordinator does not drop a newer answer)."""
        if node_id is None or self._nodes.get((key_type, key)) == node_id:
            self._nodes.pop((key_type, key), None)


class KafkaClient:
    """Connections, metadata and coordinator lookup shared by one producer/consumer/admin."""

    def __init__(
        self,
        *,
        loop: Any = None,
        bootstrap_servers: str | Iterable[str] | None = "localhost",
        client_id: str = "aiokafka_lite",
        request_timeout_ms: int = 40000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        connections_max_idle_ms: int = 540000,
        max_in_flight_requests_per_connection: int = 100,
        max_response_size: int = 100 * 1024 * 1024,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: AbstractTokenProvider | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        allow_auto_topic_creation: bool = True,
        hooks: HookSet | Iterable[object] | None = None,
    ) -> None:
        """``hooks``: objects implementing :class:`~aiokafka_lite.hooks.Hook` methods (an
        aiokafka_lite extension), or the :class:`~aiokafka_lite.hooks.HookSet` a producer or
        consumer made; this client reports connections and requests to them."""
        check_security_args(
            security_protocol,
            ssl_context,
            sasl_mechanism,
            sasl_plain_username,
            sasl_plain_password,
            sasl_oauth_token_provider,
        )
        # kept as given (a generator read once) for the ``_bootstrap_servers`` compat view.
        # None is accepted here and refused by start() with aiokafka's TypeError (kafkaesk
        # builds its clients from a setting that may still be unset)
        self._bootstrap_given: str | list[str] | None = (
            bootstrap_servers
            if bootstrap_servers is None or isinstance(bootstrap_servers, str)
            else list(bootstrap_servers)
        )
        self._bootstrap = (
            [] if self._bootstrap_given is None else parse_bootstrap(self._bootstrap_given)
        )
        self.client_id = client_id
        if not isinstance(hooks, HookSet):
            hooks = HookSet(
                hooks or (), ClientInfo.of("client", client_id, None, bootstrap_servers)
            )
        #: the hooks connections report to (see aiokafka_lite.hooks)
        self.hooks = hooks
        self.request_timeout_ms = request_timeout_ms
        #: the named waits of request_timeout_ms (connect, request, broker-side, retry budget)
        self.timeouts = Timeouts.from_settings(request_timeout_ms)
        #: group and transaction coordinators (the executor fills and invalidates it)
        self.coordinators = CoordinatorCache()
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._conn_args: dict[str, Any] = dict(
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            max_in_flight=max_in_flight_requests_per_connection,
            max_response_size=max_response_size,
            connections_max_idle_ms=connections_max_idle_ms,
            security_protocol=security_protocol,
            ssl_context=ssl_context,
            sasl_mechanism=sasl_mechanism,
            sasl_plain_username=sasl_plain_username,
            sasl_plain_password=sasl_plain_password,
            sasl_oauth_token_provider=sasl_oauth_token_provider,
            sasl_kerberos_service_name=sasl_kerberos_service_name,
            sasl_kerberos_domain_name=sasl_kerberos_domain_name,
            hooks=hooks,
        )
        self.cluster = ClusterMetadata()
        self._conns: dict[tuple[int, str], BrokerConnection] = {}
        self._connecting: dict[tuple[int, str], asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, int] = {}
        self._backoff_until: dict[int, float] = {}
        self._api_versions: dict[int, tuple[int, int]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._metadata = MetadataRefresher(
            self.cluster,
            # looked up at call time (instrumentation may wrap send on the class)
            least_loaded_node=lambda: self.least_loaded_node(),
            send=lambda node_id, request: self.send(node_id, request),
            on_update=lambda: self._after_metadata_update(),
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
            allow_auto_topic_creation=allow_auto_topic_creation,
        )
        self._started = False
        self._closed = False

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bootstrap (each address in turn until one answers Metadata) and start the refresher."""
        if self._started:
            return
        if self._closed:
            raise Errors.IllegalStateError("KafkaClient is closed")
        if self._bootstrap_given is None:  # aiokafka's exception class, a clearer message
            raise TypeError("bootstrap_servers is None: give 'host:port' or a list of them")
        self._loop = asyncio.get_running_loop()
        try:
            await self._bootstrap_metadata()
        except BaseException:
            # cancelled or failed: no half-made bootstrap connection may outlive this call
            # (a later start() would wait on it, or inherit its failure)
            self._drop_bootstrap_conns()
            raise
        self._started = True
        self._metadata.start(self._loop.time())

    def _drop_bootstrap_conns(self) -> None:
        for key, task in list(self._connecting.items()):
            if key[0] < 0:
                task.cancel()
                del self._connecting[key]
        for key, conn in list(self._conns.items()):
            if key[0] < 0:
                del self._conns[key]
                conn.close(None)

    async def _bootstrap_metadata(self) -> None:
        errors: list[str] = []
        for idx, (host, port) in enumerate(self._bootstrap):
            node_id = -(idx + 1)
            try:
                conn = await self._get_conn(node_id, "default")
                resp = await conn.send(self._metadata.request())
                if not resp.brokers:
                    raise Errors.KafkaConnectionError("metadata answer lists no brokers")
            except Errors.KafkaError as exc:
                log.info("bootstrap %s:%s failed: %s", host, port, exc)
                errors.append(f"{host}:{port}: {exc}")
                continue
            self._api_versions = conn.api_versions
            self.cluster.update_metadata(resp)
            self._after_metadata_update()
            break
        else:
            raise Errors.KafkaConnectionError(
                "Unable to bootstrap from "
                + ", ".join(f"{h}:{p}" for h, p in self._bootstrap)
                + " ("
                + "; ".join(errors)
                + ")"
            )

    bootstrap = start  # aiokafka's name

    async def close(self) -> None:
        """Stop the refresher, close every connection, fail pending waiters. Idempotent."""
        if self._closed:
            return
        self._closed = True
        tasks: list[asyncio.Task[Any]] = []
        md_task = self._metadata.stop()
        if md_task is not None:
            tasks.append(md_task)
        for t in list(self._connecting.values()):
            t.cancel()
            tasks.append(t)
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close(None)
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        for conn in conns:
            await conn.wait_closed(timeout=0.5)

    def abandon(self) -> None:
        """Synchronous last resort for a client whose owner was garbage-collected without
        stopping it (``__del__`` of the producer/consumer): cancel its tasks and close its
        sockets at once, as aiokafka's connections do when collected.  Nothing is awaited;
        does nothing once the event loop is closed."""
        if self._closed or self._loop is None or self._loop.is_closed():
            return
        self._closed = True
        self._metadata.stop()
        for t in list(self._connecting.values()):
            t.cancel()
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close(None)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    async def __aenter__(self) -> KafkaClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -------------------------------------------------------------- metadata

    @property
    def need_all_topics(self) -> bool:
        """Fetch metadata for every topic (pattern subscriptions)."""
        return self._metadata.need_all_topics

    @need_all_topics.setter
    def need_all_topics(self, value: bool) -> None:
        self._metadata.need_all_topics = value

    @property
    def allow_auto_topic_creation(self) -> bool:
        """Sent in every metadata request (the broker may create unknown tracked topics)."""
        return self._metadata.allow_auto_topic_creation

    @allow_auto_topic_creation.setter
    def allow_auto_topic_creation(self, value: bool) -> None:
        self._metadata.allow_auto_topic_creation = bool(value)

    @property
    def topics(self) -> frozenset[str]:
        """Topics whose metadata the refresher fetches."""
        return frozenset(self._metadata.topics)

    def add_topics(self, topics: Iterable[str]) -> asyncio.Future[ClusterMetadata]:
        """Track more topics; returns the refresh future (already done if nothing changed)."""
        return self._metadata.add_topics(topics)

    def add_topic(self, topic: str) -> asyncio.Future[ClusterMetadata]:
        """Track one more topic (aiokafka's ``AIOKafkaClient.add_topic``)."""
        return self._metadata.add_topics([topic])

    def set_topics(self, topics: Iterable[str]) -> asyncio.Future[ClusterMetadata]:
        """Track exactly ``topics``; returns the refresh future (done if nothing was added)."""
        return self._metadata.set_topics(topics)

    def track_topics(self, topics: Iterable[str]) -> None:
        """Track exactly ``topics`` without asking for a refresh (no event loop needed):
        before start(), the bootstrap metadata request then fetches them."""
        self._metadata.topics = set(topics)

    def request_update(self) -> asyncio.Future[ClusterMetadata]:
        """Ask for a refresh; returns a future resolved with the cluster after the next success.

        Calls before the refresh starts share one future. The future only resolves on success:
        wait on it with a timeout (it fails with KafkaConnectionError once the client is closed).
        """
        return self._metadata.request_update()

    async def force_metadata_update(self) -> bool:
        """Refresh now; True on success, False if no refresh succeeded in request_timeout_ms."""
        try:
            await asyncio.wait_for(
                asyncio.shield(self.request_update()), self.timeouts.retry_ms / 1000
            )
            return True
        except asyncio.TimeoutError:
            return False

    async def _wait_on_metadata(self, topic: str) -> set[int]:
        """aiokafka's name: partitions of ``topic`` (UnknownTopicOrPartitionError after
        request_timeout_ms)."""
        try:
            return await self.wait_for_topic(topic)
        except Errors.KafkaTimeoutError as exc:
            raise Errors.UnknownTopicOrPartitionError(str(exc)) from None

    async def wait_for_topic(self, topic: str, timeout_ms: float | None = None) -> set[int]:
        """Partition ids of ``topic``, refreshing metadata until known; KafkaTimeoutError after."""
        timeout = timeout_ms if timeout_ms is not None else self.timeouts.retry_ms
        return await self._metadata.wait_for_topic(topic, timeout / 1000)

    def _after_metadata_update(self) -> None:
        """Connection housekeeping after each successful metadata update."""
        self._adopt_bootstrap_conns()
        self._close_moved_conns()

    def _close_moved_conns(self) -> None:
        """Close connections to nodes that left the cluster or changed address."""
        for (node_id, _group), conn in list(self._conns.items()):
            if node_id < 0:
                continue
            b = self.cluster.broker_metadata(node_id)
            if b is None or (b.host, b.port) != (conn.host, conn.port):
                log.info("node %s left or moved; closing %r", node_id, conn)
                conn.close(None)

    def _adopt_bootstrap_conns(self) -> None:
        """Re-key bootstrap connections to the real node at the same address; close the rest."""
        by_addr = {(b.host, b.port): int(b.nodeId) for b in self.cluster.brokers()}
        for key, conn in list(self._conns.items()):
            node_id, group = key
            if node_id >= 0:
                continue
            del self._conns[key]
            real = by_addr.get((conn.host, conn.port))
            if real is not None and conn.connected and (real, group) not in self._conns:
                conn.node_id = real
                self._conns[(real, group)] = conn
            else:
                conn.close(None)

    # ------------------------------------------------------------ node choice

    def least_loaded_node(self) -> int:
        """The node with the fewest in-flight requests.

        Connected nodes first, then connectable ones; nodes in reconnect backoff are skipped;
        bootstrap addresses (negative ids) are the last resort. If every candidate is backing
        off, the one whose backoff ends first.
        """
        now = _now()
        brokers = [int(b.nodeId) for b in self.cluster.brokers()]
        best, best_score = None, None
        n = len(brokers)
        offset = random.randrange(n) if n > 1 else 0
        for i in range(n):
            node_id = brokers[(offset + i) % n]
            conn = self._conns.get((node_id, "default"))
            if conn is not None and conn.connected:
                score = conn.in_flight
                if score == 0:
                    return node_id
            elif self._backoff_until.get(node_id, 0.0) > now:
                continue
            else:
                score = _UNCONNECTED_PENALTY
            if best_score is None or score < best_score:
                best, best_score = node_id, score
        if best is not None:
            return best
        for idx in range(len(self._bootstrap)):
            if self._backoff_until.get(-(idx + 1), 0.0) <= now:
                return -(idx + 1)
        candidates = brokers + [-(i + 1) for i in range(len(self._bootstrap))]
        return min(candidates, key=lambda nid: self._backoff_until.get(nid, 0.0))

    # ----------------------------------------------------------- connections

    def is_connected(self, node_id: int, group: str = "default") -> bool:
        """True if a handshaken connection to ``node_id`` (for ``group``) is open."""
        conn = self._conns.get((node_id, group))
        return conn is not None and conn.connected

    async def ready(self, node_id: int, group: str = "default") -> bool:
        """Connect to ``node_id`` if needed; False (no exception) when that fails."""
        try:
            await self._get_conn(node_id, group)
            return True
        except Errors.KafkaError:
            return False

    def in_backoff(self, node_id: int) -> bool:
        """True while ``node_id`` is waiting out a reconnect backoff."""
        return self._backoff_until.get(node_id, 0.0) > _now()

    async def _get_conn(
        self, node_id: int, group: str, timeout_ms: float | None = None
    ) -> BrokerConnection:
        if self._closed:
            raise Errors.KafkaConnectionError("client closed")
        key = (node_id, group)
        conn = self._conns.get(key)
        if conn is not None and conn.connected:
            return conn
        task = self._connecting.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(node_id, group))
            self._connecting[key] = task
            task.add_done_callback(functools.partial(self._connect_done, key))
        timeout = (timeout_ms if timeout_ms is not None else self.timeouts.request_ms) / 1000
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
        if self._connecting.get(key) is task:
            del self._connecting[key]
        if not task.cancelled():
            task.exception()  # retrieved here; the waiters re-raise it

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            idx = -node_id - 1
            if idx < len(self._bootstrap):
                return self._bootstrap[idx]
        else:
            broker = self.cluster.broker_metadata(node_id)
            if broker is not None:
                return broker.host, broker.port
        raise Errors.KafkaConnectionError(f"node {node_id} is not in the cluster metadata")

    async def _connect(self, node_id: int, group: str) -> BrokerConnection:
        loop = asyncio.get_running_loop()
        delay = self._backoff_until.get(node_id, 0.0) - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            host, port = self._address(node_id)
        except Errors.KafkaConnectionError:
            if self._started and not self._closed:
                self.request_update()
            raise
        conn = BrokerConnection(
            host,
            port,
            node_id=node_id,
            group=group,
            on_close=self._on_conn_close,
            **self._conn_args,
        )
        try:
            await conn.connect(int(self.timeouts.connect_ms))
        except Errors.KafkaError:
            n = self._failures.get(node_id, 0) + 1
            self._failures[node_id] = n
            base = min(
                self.reconnect_backoff_max_ms, self.reconnect_backoff_ms * 2 ** min(n - 1, 30)
            )
            self._backoff_until[node_id] = loop.time() + base * random.uniform(0.8, 1.2) / 1000
            raise
        self._failures.pop(node_id, None)
        self._backoff_until.pop(node_id, None)
        if self._closed:
            conn.close(None)
            raise Errors.KafkaConnectionError("client closed")
        self._conns[(node_id, group)] = conn
        self._api_versions = conn.api_versions
        return conn

    def _on_conn_close(self, conn: BrokerConnection, reason: BaseException | None) -> None:
        key = (conn.node_id if conn.node_id is not None else 0, conn.group)
        if self._conns.get(key) is conn:
            del self._conns[key]
        if reason is not None and self._started and not self._closed:
            self.request_update()  # a broken connection often means the metadata moved

    # ------------------------------------------------------------------ send

    async def send(
        self,
        node_id: int,
        request: Any,
        *,
        group: str = "default",
        timeout_ms: float | None = None,
        expect_response: bool = True,
    ) -> Any:
        """Send ``request`` to ``node_id`` (connecting on demand) and return the response.

        ``expect_response=False`` (acks=0 produce) returns None once written.
        """
        conn = self._conns.get((node_id, group))
        if conn is None or not conn.connected:
            conn = await self._get_conn(node_id, group, timeout_ms)
        return await conn.send(request, expect_response=expect_response, timeout_ms=timeout_ms)

    def send_nowait(
        self,
        node_id: int,
        request: Any,
        on_done: Callable[[Any, BaseException | None], None],
        *,
        group: str = "default",
    ) -> bool:
        """:meth:`BrokerConnection.send_nowait` on the open connection to ``node_id``; False
        (nothing written) when there is none or it has no free in-flight slot."""
        conn = self._conns.get((node_id, group))
        if conn is None or not conn.connected:
            return False
        return conn.send_nowait(request, on_done)

    async def send_least_loaded(self, request: Any, *, timeout_ms: float | None = None) -> Any:
        """Send ``request`` to :meth:`least_loaded_node`."""
        return await self.send(self.least_loaded_node(), request, timeout_ms=timeout_ms)

    def supports(self, request_class: type, min_version: int = 0) -> bool:
        """True if the brokers (as last negotiated) and the client share ``min_version``+."""
        try:
            return pick_version(request_class, self._api_versions, "broker") >= min_version
        except Errors.UnsupportedVersionError:
            return False

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's api key -> (min, max) ranges from the most recent handshake."""
        return dict(self._api_versions)

    # -- aiokafka compatibility names ------------------------------------------------------
    # Semi-private names of aiokafka's AIOKafkaClient that libraries built on aiokafka read;
    # read-only views of this client's own state (each commented with who needs it).
    # ``_wait_on_metadata`` (opentelemetry-instrumentation-aiokafka) sits next to
    # force_metadata_update above.

    def get_random_node(self) -> int | None:
        """A random broker id from the metadata, None before any (aiokafka's public name;
        ddtrace's aiokafka integration asks it for the cluster id request)."""
        nodes = [int(b.nodeId) for b in self.cluster.brokers()]
        return random.choice(nodes) if nodes else None

    @property
    def _bootstrap_servers(self) -> str | list[str] | None:
        """``bootstrap_servers`` as given, a string or a list, as aiokafka keeps it
        (opentelemetry-instrumentation-aiokafka reports it as is; kstreams' tests compare it
        with the list they passed)."""
        return self._bootstrap_given

    @property
    def _client_id(self) -> str:
        """``client_id`` (opentelemetry-instrumentation-aiokafka)."""
        return self.client_id

    @property
    def _ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context connections use (kstreams' test helpers)."""
        ctx: ssl.SSLContext | None = self._conn_args["ssl_context"]
        return ctx

    @property
    def _topics(self) -> set[str]:
        """The topics the metadata tracks (kstreams' test helpers)."""
        return set(self._metadata.topics)


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


#: aiokafka's name for the shared client
AIOKafkaClient = KafkaClient
