"""KafkaClient: bootstrap, connection pool, metadata refresher, coordinator lookup.

One :class:`KafkaClient` serves one producer, consumer or admin client.

* Connections (:class:`~aiokafka_lite._pool.ConnectionPool`): one per ``(node_id, group)``,
  ``group`` giving coordination traffic its own socket so it never queues behind a long-poll
  fetch; per-node reconnect backoff; bootstrap addresses as pseudo-nodes ``-1, -2, ...`` until
  the first metadata answer and later only as a last resort.
* Settings are checked at construction (:mod:`aiokafka_lite._checks`).
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
import logging
import random
import ssl
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import errors as Errors
from ._checks import SASL_MECHANISMS as SASL_MECHANISMS  # re-exported (their old home)
from ._checks import SECURITY_PROTOCOLS as SECURITY_PROTOCOLS
from ._checks import check_security_args as check_security_args
from ._checks import parse_bootstrap
from ._metadata import MetadataRefresher
from ._pool import ConnectionPool
from ._timeouts import Timeouts
from .auth import AbstractTokenProvider
from .cluster import ClusterMetadata
from .conn import pick_version
from .hooks import ClientInfo, HookSet
from .structs import TopicPartition

__all__ = ["AIOKafkaClient", "CoordinatorCache", "KafkaClient", "parse_bootstrap"]

log = logging.getLogger(__name__)


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
        metadata_recovery_strategy: str = "rebootstrap",
        metadata_recovery_rebootstrap_trigger_ms: int = 300000,
        hooks: HookSet | Iterable[object] | None = None,
    ) -> None:
        """``hooks``: objects implementing :class:`~aiokafka_lite.hooks.Hook` methods (an
        aiokafka_lite extension), or the :class:`~aiokafka_lite.hooks.HookSet` a producer or
        consumer made; this client reports connections and requests to them.

        ``metadata_recovery_strategy`` (KIP-899, Java's ``metadata.recovery.strategy``, default
        ``"rebootstrap"`` as Java 4.0's): when every known broker is unreachable, when no
        metadata came for ``metadata_recovery_rebootstrap_trigger_ms`` (KIP-1102), or when a
        broker answers REBOOTSTRAP_REQUIRED, the client forgets the brokers it knows and starts
        again from ``bootstrap_servers`` (resolved again: a cluster replaced behind the same
        address is found). ``"none"``: only the brokers the metadata named, once it has any."""
        if metadata_recovery_strategy not in ("none", "rebootstrap"):
            raise Errors.KafkaConfigurationError(
                "metadata_recovery_strategy must be 'none' or 'rebootstrap', "
                f"not {metadata_recovery_strategy!r}"
            )
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
            request_timeout_ms=int(self.timeouts.request_ms),
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
        self._pool = ConnectionPool(
            self.cluster,
            self._bootstrap,
            self._conn_args,
            self.timeouts,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            on_broken=self._connection_broken,
            rebootstrap=metadata_recovery_strategy == "rebootstrap",
            on_rebootstrap_required=self._rebootstrap_required,
        )
        # the pool's own tables (never rebound): send() reads _conns directly
        self._conns = self._pool.conns
        self._connecting = self._pool.connecting
        self._backoff_until = self._pool.backoff_until
        self._loop: asyncio.AbstractEventLoop | None = None
        self._metadata = MetadataRefresher(
            self.cluster,
            # looked up at call time (instrumentation may wrap send on the class)
            least_loaded_node=lambda: self.least_loaded_node(),
            send=lambda node_id, request: self.send(node_id, request),
            on_update=self._pool.after_metadata_update,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
            allow_auto_topic_creation=allow_auto_topic_creation,
            rebootstrap_trigger_ms=(
                metadata_recovery_rebootstrap_trigger_ms
                if metadata_recovery_strategy == "rebootstrap"
                else None
            ),
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
        except BaseException:  # re-raised, cancellation included, after the cleanup
            # cancelled or failed: no half-made bootstrap connection may outlive this call
            # (a later start() would wait on it, or inherit its failure)
            self._pool.drop_bootstrap_conns()
            raise
        self._started = True
        self._metadata.start(self._loop.time())

    def _connection_broken(self) -> None:
        """The pool lost a connection or met a node without an address: the metadata may have
        moved, refresh it (once started, until closed)."""
        if self._started and not self._closed:
            self.request_update()

    def _rebootstrap_required(self) -> None:
        """A broker answered ApiVersions with REBOOTSTRAP_REQUIRED (KIP-1242): the address the
        metadata gave leads to another cluster or node; start again from the bootstrap servers."""
        self._metadata.rebootstrap_now("ApiVersions")
        self._connection_broken()

    async def _bootstrap_metadata(self) -> None:
        errors: list[str] = []
        for idx, (host, port) in enumerate(self._bootstrap):
            node_id = -(idx + 1)
            try:
                conn = await self._pool.get(node_id, "default")
                resp = await conn.send(self._metadata.request())
                if not resp.brokers:
                    raise Errors.KafkaConnectionError("metadata answer lists no brokers")
            except Errors.KafkaError as exc:
                log.info("bootstrap %s:%s failed: %s", host, port, exc)
                errors.append(f"{host}:{port}: {exc}")
                continue
            self._pool.api_versions = conn.api_versions
            self.cluster.update_metadata(resp)
            self._pool.after_metadata_update()
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
        md_task = self._metadata.stop()
        tasks, conns = self._pool.shut()
        if md_task is not None:
            tasks.append(md_task)
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
        self._pool.shut()

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

    def apply_leaders(
        self, leaders: Mapping[TopicPartition, tuple[int, int]], endpoints: Iterable[Any] = ()
    ) -> set[TopicPartition]:
        """KIP-951: switch ``leaders`` (partition -> (leader id, leader epoch), as a
        NOT_LEADER_OR_FOLLOWER answer's ``CurrentLeader`` names them) at once, adding the
        answer's ``NodeEndpoints`` (``node_id``, ``host``, ``port``, ``rack``) to the brokers;
        no Metadata request. Returns the partitions now led by the node given; the caller asks
        for a refresh for the rest."""
        return self._metadata.apply_leaders(leaders, endpoints)

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

    # ------------------------------------------------------ nodes and connections

    def least_loaded_node(self) -> int:
        """The node with the fewest in-flight requests.

        Connected nodes first, then connectable ones; nodes in reconnect backoff are skipped;
        bootstrap addresses (negative ids) are the last resort. If every candidate is backing
        off, the one whose backoff ends first.
        """
        return self._pool.least_loaded_node()

    def is_connected(self, node_id: int, group: str = "default") -> bool:
        """True if a handshaken connection to ``node_id`` (for ``group``) is open."""
        conn = self._conns.get((node_id, group))
        return conn is not None and conn.connected

    async def ready(self, node_id: int, group: str = "default") -> bool:
        """Connect to ``node_id`` if needed; False (no exception) when that fails."""
        try:
            await self._pool.get(node_id, group)
            return True
        except Errors.KafkaError:
            return False

    def in_backoff(self, node_id: int) -> bool:
        """True while ``node_id`` is waiting out a reconnect backoff."""
        return self._pool.in_backoff(node_id)

    # ------------------------------------------------------------------ send

    async def send(
        self,
        node_id: int,
        request: Any,
        *,
        group: str = "default",
        timeout_ms: float | None = None,
        expect_response: bool = True,
        max_version: int | None = None,
    ) -> Any:
        """Send ``request`` to ``node_id`` (connecting on demand) and return the response.

        ``expect_response=False`` (acks=0 produce) returns None once written; ``max_version``
        caps the negotiated version for this request.
        """
        conn = self._conns.get((node_id, group))
        if conn is None or not conn.connected:
            conn = await self._pool.get(node_id, group, timeout_ms)
        return await conn.send(
            request,
            expect_response=expect_response,
            timeout_ms=timeout_ms,
            max_version=max_version,
        )

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
            return pick_version(request_class, self._pool.api_versions, "broker") >= min_version
        except Errors.UnsupportedVersionError:
            return False

    def feature_level(self, name: str) -> int:
        """The cluster's finalized level of feature ``name`` (e.g. ``"transaction.version"``)
        in the newest view a broker reported at a handshake; 0 when not finalized or not
        reported (brokers before ApiVersions v3)."""
        return self._pool.finalized_features.get(name, 0)

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's api key -> (min, max) ranges from the most recent handshake."""
        return dict(self._pool.api_versions)

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


#: aiokafka's name for the shared client
AIOKafkaClient = KafkaClient
