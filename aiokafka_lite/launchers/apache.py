"""Apache Kafka itself, from Maven Central jars: one KRaft node or a cluster of several, on loopback.

The nodes, the jars and the TLS material are :mod:`.apache_node`; this module is the cluster
(:class:`ApacheKafka`) and ``python -m aiokafka_lite.launchers.apache fetch``.

No Docker engine is needed: Java >= 17 and Maven on PATH are. The broker is Apache Kafka's own
``kafka_2.13`` artifact (the code the release tarball and the official image run); ``apache-pom.xml``
beside this file names it, and Maven resolves its runtime classpath into ``~/.m2`` once::

    with ApacheKafka() as kafka:                  # newest pinned 4.x line, one combined node
        run_client(kafka.bootstrap)               # "127.0.0.1:PORT" (PLAINTEXT listener)
        kafka.sasl_bootstrap, kafka.ssl_bootstrap # the SASL_PLAINTEXT and SSL listeners
    with ApacheKafka(nodes=3) as cluster:         # three brokers, each also a controller voter
        cluster.node(1).kill(); cluster.node(1).start()

Every node listens on five loopback ports: PLAINTEXT, SASL_PLAINTEXT (mechanisms PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512, users in :data:`SASL_USERS`, and OAUTHBEARER with the broker's
built-in unsecured JWS validator: any ``alg: none`` token with ``sub`` and ``exp`` claims), SSL
(a throw-away CA and server certificate made with the ``openssl`` command at start; clients
trust ``ssl_cafile``), ``REAUTH`` (``reauth_bootstrap``: SASL_PLAINTEXT with the same mechanisms
and ``connections.max.reauth.ms`` = :data:`REAUTH_MS`, for KIP-368 re-authentication) and the
controller listener. Settings are those of a user's single-node broker (auto topic creation on,
internal topics with replication factor 1 for one node), plus ``group.initial.rebalance.delay.ms=0``
and lower floors for the KIP-848 and share groups' configs (sessions from 6 s, heartbeats from
0.5 s, acquisition locks from 2 s: the defaults stay Kafka's, a group config can ask for less).

``start()`` returns once every node answers ApiVersions and a Metadata request lists all nodes,
or raises :class:`ApacheKafkaError` with the tail of the failing node's log.

Opt-in, ``ApacheKafka(kerberos=KerberosListener(krb5_conf, keytab, principal))`` adds a sixth
listener, ``GSSAPI`` (``gssapi_bootstrap``): SASL_PLAINTEXT with mechanism GSSAPI only, service
name ``kafka``, the broker logging in from ``keytab`` as ``principal`` (``kafka/HOST@REALM``) and
its JVM reading ``krb5_conf`` (the KDC is the caller's: tests/kerberos.py makes one). Without it
nothing changes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from .apache_node import (
    DEFAULT_VERSION,
    KAFKA_VERSIONS,
    REAUTH_MS,
    SASL_USERS,
    ApacheKafkaError,
    ApacheNode,
    KerberosListener,
    _make_tls,
    _probe_metadata_brokers,
    apache_available,
    kafka_classpath,
    node_port,
)
from .embedded import probe_api_versions

__all__ = [
    "ApacheKafka",
    "QUICK_JVM_OPTIONS",
    "main",
    "KAFKA_VERSIONS",
    "DEFAULT_VERSION",
    "SASL_USERS",
    "REAUTH_MS",
    "KerberosListener",
    "ApacheKafkaError",
    "apache_available",
    "kafka_classpath",
    "ApacheNode",
    "node_port",
]

#: JVM options for a short-lived broker (tests, demos): the C1 compiler only. A broker's
#: start-up takes about 40 % less CPU (8.8 -> 5.1 s measured), its peak throughput is lower
#: (no C2): not for benchmarks. (The storage formatting, a short-lived tool, always uses it.)
QUICK_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)

_live: weakref.WeakSet[ApacheKafka] = weakref.WeakSet()
_live_lock = threading.Lock()


class ApacheKafka:
    """A KRaft cluster of ``nodes`` combined broker+controller processes on loopback ports.

    ``kind`` is ``"apache"`` (the name tests and the CLI use for this broker); ``version`` is an
    Apache Kafka release served by Maven Central (default: the newest pinned 4.x line).
    ``extra_config`` adds or overrides ``server.properties`` entries on every node;
    ``extra_classpath`` puts more directories or jars on the brokers' classpath (a plugin:
    ``metric.reporters``, e.g. the tests' KIP-714 ``TelemetryRecorder``); ``jvm_options`` are
    added to each node's ``java`` command (:data:`QUICK_JVM_OPTIONS` for short-lived brokers);
    with ``class_data_sharing`` the nodes map a class-data-sharing archive of the broker's
    classes (written by the first node's JVM at its first clean stop, kept in the user cache:
    start-up takes about 40 % less CPU; skipped where the classpath has directories).
    """

    kind = "apache"

    def __init__(
        self,
        version: str = DEFAULT_VERSION,
        *,
        nodes: int = 1,
        host: str = "127.0.0.1",
        startup_timeout: float = 120.0,
        extra_config: dict[str, str] | None = None,
        kerberos: KerberosListener | None = None,
        extra_classpath: list[str] | None = None,
        jvm_options: Sequence[str] = (),
        class_data_sharing: bool = False,
    ) -> None:
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        self.version = version
        self.host = host
        self.startup_timeout = startup_timeout
        self.extra_config = dict(extra_config or {})
        self.extra_classpath = list(extra_classpath or ())
        self.jvm_options = list(jvm_options)
        self.class_data_sharing = class_data_sharing
        #: the opt-in GSSAPI listener's Kerberos settings (None: no such listener)
        self.kerberos = kerberos
        self.workdir = Path(tempfile.mkdtemp(prefix=f"aiokafka_lite-apache-{version}-"))
        self.nodes: list[ApacheNode] = []
        self.nodes = [ApacheNode(self, i + 1, self.workdir / f"node{i + 1}") for i in range(nodes)]
        self.cluster_id: str | None = None
        self.classpath = ""
        self.tls_ca: Path | None = None
        self.tls_keystore: Path | None = None

    # -- addresses ------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Every node's PLAINTEXT listener, comma-separated (``bootstrap_servers``)."""
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def sasl_bootstrap(self) -> str:
        """Every node's SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256/512; :data:`SASL_USERS`)."""
        return ",".join(f"{n.host}:{n.sasl_port}" for n in self.nodes)

    @property
    def reauth_bootstrap(self) -> str:
        """Every node's REAUTH listener: SASL_PLAINTEXT like :attr:`sasl_bootstrap`, but the
        broker grants sessions of :data:`REAUTH_MS` only (KIP-368: clients re-authenticate or
        are disconnected)."""
        return ",".join(f"{n.host}:{n.reauth_port}" for n in self.nodes)

    @property
    def gssapi_bootstrap(self) -> str:
        """Every node's opt-in GSSAPI listener (SASL_PLAINTEXT, mechanism GSSAPI, service name
        ``kafka``); only with ``kerberos=``."""
        if self.kerberos is None:
            raise ApacheKafkaError("no GSSAPI listener: start ApacheKafka(kerberos=...)")
        return ",".join(f"{n.host}:{n.gssapi_port}" for n in self.nodes)

    @property
    def ssl_bootstrap(self) -> str:
        """Every node's SSL listener; trust :attr:`ssl_cafile`."""
        return ",".join(f"{n.host}:{n.ssl_port}" for n in self.nodes)

    @property
    def ssl_cafile(self) -> str:
        """The CA certificate (PEM) that signed the SSL listeners' certificate."""
        if self.tls_ca is None:
            raise ApacheKafkaError("start() the cluster first")
        return str(self.tls_ca)

    @property
    def running(self) -> bool:
        """True while every node's process is alive."""
        return all(n.running for n in self.nodes)

    @property
    def pid(self) -> int | None:
        """The first node's process id (one-node clusters)."""
        return self.nodes[0].pid

    def node(self, node_id: int) -> ApacheNode:
        """The node with broker id ``node_id`` (1-based)."""
        return self.nodes[node_id - 1]

    def __repr__(self) -> str:
        return f"<ApacheKafka {self.version} nodes={self.nodes}>"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ApacheKafka:
        """Resolve the jars, format storage (first time), start every node and wait for them.

        Ports are picked free just before the start, which leaves a small race with other
        processes (parallel test workers): a first start whose node lost a port is retried
        on new ports, twice at most."""
        first = self.cluster_id is None
        if first:
            self.classpath = os.pathsep.join([kafka_classpath(self.version), *self.extra_classpath])
            self.tls_ca, self.tls_keystore = _make_tls(self.workdir / "tls")
        with _live_lock:
            _live.add(self)
        for attempt in range(3 if first else 1):
            if self.cluster_id is None:
                self._format()
            for n in self.nodes:
                n.start()
            try:
                self.wait_ready()
                return self
            except ApacheKafkaError:
                lost_port = any("Address already in use" in n.log_tail(400) for n in self.nodes)
                if not (first and lost_port) or attempt == 2:
                    self.stop(timeout=10.0)
                    raise
                self._new_ports()
            except (
                BaseException
            ):  # re-raised (Ctrl-C included) once the half-started broker is gone
                self.stop(timeout=10.0)
                raise
        raise AssertionError("unreachable")

    def _new_ports(self) -> None:
        """Stop every node, forget its storage and pick new ports (a retried first start)."""
        for n in self.nodes:
            n.kill()
            shutil.rmtree(n.workdir, ignore_errors=True)
            n.port, n.sasl_port = node_port(self.host), node_port(self.host)
            n.ssl_port, n.controller_port = node_port(self.host), node_port(self.host)
            n.reauth_port, n.gssapi_port = node_port(self.host), node_port(self.host)
        self.cluster_id = None

    def _format(self) -> None:
        voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)
        cluster_id = _random_cluster_id()
        self.cluster_id = cluster_id
        scram = [
            arg
            for user, pwd in SASL_USERS.items()
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
            for arg in ("--add-scram", f"{mech}=[name={user},password={pwd}]")
        ]
        for n in self.nodes:
            n.workdir.mkdir(parents=True, exist_ok=True)
            n.write_config(voters)
            cmd = [
                "java", "-Xmx256m", *QUICK_JVM_OPTIONS, "-XX:+UseSerialGC",
                "-cp", self.classpath, "kafka.tools.StorageTool", "format",
                "-t", cluster_id, "-c", str(n.config_path), *scram,
            ]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                raise ApacheKafkaError(
                    f"formatting node {n.node_id} failed: {(proc.stdout + proc.stderr)[-2000:]}"
                )

    def bring_back(self) -> None:
        """Resume paused nodes and start stopped ones, without waiting (see :meth:`wait_ready`)."""
        for n in self.nodes:
            if n.paused:
                n.resume()
            if not n.running:
                n.start()

    def wait_ready(self, nodes: list[ApacheNode] | None = None) -> None:
        """Wait until the given nodes (default: all) answer and Metadata lists every running node."""
        targets = self.nodes if nodes is None else nodes
        deadline = time.monotonic() + self.startup_timeout
        want = sum(1 for n in self.nodes if n.running and not n.paused)
        last: BaseException | None = None
        pending = list(targets)
        while pending:
            n = pending[0]
            if not n.running:
                raise self._failure(n, "exited during startup")
            try:
                if (
                    probe_api_versions(n.host, n.port, timeout=2.0) == 0
                    and _probe_metadata_brokers(n.host, n.port) >= want
                ):
                    pending.pop(0)
                    continue
            except (OSError, ValueError, struct.error) as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise self._failure(
                    n, f"not ready within {self.startup_timeout:g} s (last: {last!r})"
                )
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every node (controlled shutdown, then SIGKILL) and delete the data."""
        # the brokers first, in parallel (a lone controller cannot finish a controlled shutdown)
        threads = [threading.Thread(target=n.stop, args=(timeout,)) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with _live_lock:
            _live.discard(self)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def restart(self, timeout: float = 30.0) -> None:
        """Stop and start every node, keeping the data."""
        for n in self.nodes:
            n.stop(timeout)
        for n in self.nodes:
            n.start()
        self.wait_ready()

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of each node's log."""
        return "\n".join(f"[node {n.node_id}]\n{n.log_tail(lines)}" for n in self.nodes)

    def _failure(self, node: ApacheNode, what: str) -> ApacheKafkaError:
        return ApacheKafkaError(
            f"Apache Kafka {self.version} node {node.node_id} on {node.bootstrap} {what}; "
            f"log tail:\n{node.log_tail()}"
        )


def _random_cluster_id() -> str:
    """A cluster id as Kafka writes them: a random UUID in URL-safe base64 without padding,
    never starting with "-" (the storage tool would read it as an option; Kafka's own
    Uuid.randomUuid() avoids it for that reason: 1 start in 64 failed)."""
    import base64

    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


@atexit.register
def _stop_all() -> None:
    """Never leave a JVM behind when the interpreter exits."""
    with _live_lock:
        clusters = list(_live)
    for c in clusters:
        with contextlib.suppress(Exception):
            c.stop(timeout=5.0)


def main(argv: list[str] | None = None) -> int:
    """``python -m aiokafka_lite.launchers.apache fetch [VERSION ...]``: resolve the jars ahead of time."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "fetch":
        print(
            "usage: python -m aiokafka_lite.launchers.apache fetch [VERSION ...]", file=sys.stderr
        )
        return 2
    reason = apache_available()
    if reason is not None:
        print(f"skipping the Apache Kafka jars: {reason}", file=sys.stderr)
        return 0
    for version in args[1:] or list(KAFKA_VERSIONS.values()):
        cp = kafka_classpath(version)
        print(f"Apache Kafka {version}: {len(cp.split(os.pathsep))} jars resolved")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
