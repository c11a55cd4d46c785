"""Apache Kafka itself, from Maven Central jars: one KRaft node or a cluster of several, on loopback.

No Docker engine is needed: Java >= 17 and Maven on PATH are. The broker is Apache Kafka's own
``kafka_2.13`` artifact (the code the release tarball and the official image run); ``pom.xml``
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
internal topics with replication factor 1 for one node), plus ``group.initial.rebalance.delay.ms=0``.

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
import random
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from .._embedded import ChildProcess, free_port, probe_api_versions


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral (outgoing connection) range."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def node_port(host: str) -> int:
    """A free port BELOW the ephemeral range, for a node's listeners: a node that is killed and
    started again must get its ports back, and a port of the ephemeral range can meanwhile
    become the local port of some client's outgoing connection (the restart then finds it
    taken). Falls back to any free port where no such range is left."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200):
        if low <= 10001:
            break
        port = rng.randint(10000, low - 1)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        return port
    return free_port(host)


__all__ = [
    "KAFKA_VERSIONS",
    "KerberosListener",
    "REAUTH_MS",
    "SASL_USERS",
    "ApacheKafka",
    "ApacheKafkaError",
    "ApacheNode",
    "apache_available",
    "kafka_classpath",
]

#: Pinned Apache Kafka versions by line: the newest 4.x, and 3.9 (the last line that still speaks
#: the protocol versions KIP-896 removed in 4.0).
KAFKA_VERSIONS: dict[str, str] = {"4": "4.4.0", "3.9": "3.9.1"}
DEFAULT_VERSION = KAFKA_VERSIONS["4"]

#: SASL users every node knows, for PLAIN and both SCRAM mechanisms.
SASL_USERS: dict[str, str] = {"alice": "alice-secret", "admin": "admin-secret"}

#: ``connections.max.reauth.ms`` of the REAUTH listener: sessions there last this long (KIP-368)
REAUTH_MS = 4000

_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

_POM = Path(__file__).with_name("pom.xml")
_live: weakref.WeakSet[ApacheKafka] = weakref.WeakSet()
_live_lock = threading.Lock()
_classpath_lock = threading.Lock()


class KerberosListener(NamedTuple):
    """What the opt-in GSSAPI listener needs: the KDC's ``krb5.conf``, the broker's keytab and
    its principal in it (``kafka/<host>@<REALM>``; the service name is ``kafka``)."""

    krb5_conf: Path
    keytab: Path
    principal: str


class ApacheKafkaError(RuntimeError):
    """Apache Kafka could not be resolved, started or stopped."""


def apache_available() -> str | None:
    """None when Java >= 17 and Maven are on PATH, else the reason Apache Kafka cannot run."""
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if java is None or mvn is None:
        missing = " and ".join(n for n, p in (("java", java), ("mvn", mvn)) if p is None)
        return f"Apache Kafka from Maven jars needs {missing} on PATH"
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`java -version` failed: {exc}"
    major = _java_major(out)
    if major is None or major < 17:
        return f"Apache Kafka 4.x needs Java >= 17 (found: {out.splitlines()[:1]})"
    return None


def _java_major(version_text: str) -> int | None:
    # 'openjdk version "17.0.15" 2025-04-15' / 'java version "1.8.0_392"'
    for line in version_text.splitlines():
        if '"' in line:
            ver = line.split('"')[1]
            parts = ver.split(".")
            try:
                return int(parts[1]) if parts[0] == "1" else int(parts[0])
            except (ValueError, IndexError):
                return None
    return None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "aiokafka_lite"
    path.mkdir(parents=True, exist_ok=True)
    return path


def kafka_classpath(version: str = DEFAULT_VERSION, *, offline: bool = False) -> str:
    """The broker's runtime classpath at ``version``, resolved by Maven once and cached.

    The first call downloads the jars into ``~/.m2`` (about 40 files, ~30 s); later calls read
    the cached classpath file when every jar it names still exists.
    """
    out = _cache_dir() / f"apache-kafka-{version}.classpath"
    with _classpath_lock:
        if out.exists():
            cp = out.read_text().strip()
            if cp and all(os.path.exists(p) for p in cp.split(os.pathsep)):
                return cp
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ApacheKafkaError("Maven (mvn) is not on PATH: cannot resolve the Kafka jars")
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        cmd = [
            mvn, "-q", "-B", "-f", str(_POM), "dependency:build-classpath",
            f"-Dkafka.version={version}", f"-Dmdep.outputFile={tmp}",
        ]  # fmt: skip
        if offline:
            cmd.insert(1, "-o")
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as exc:
            raise ApacheKafkaError(f"Maven did not resolve Kafka {version} within 600 s") from exc
        if proc.returncode != 0 or not tmp.exists():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise ApacheKafkaError(f"Maven could not resolve Kafka {version}:\n{tail}")
        os.replace(tmp, out)
        return out.read_text().strip()


# ------------------------------------------------------------------------------- TLS material


def _make_tls(directory: Path) -> tuple[Path, Path]:
    """A CA and a server certificate for 127.0.0.1/localhost; returns (ca.pem, server keystore)."""
    if shutil.which("openssl") is None:
        raise ApacheKafkaError("the openssl command is needed to make the TLS listener's keys")
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.pem"
    ext = directory / "server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    steps = [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", ca_key, "-out", ca, "-subj", "/CN=aiokafka_lite test CA"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
         "-subj", "/CN=127.0.0.1"],
        ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
         "-days", "2", "-out", cert, "-extfile", ext],
    ]  # fmt: skip
    for step in steps:
        proc = subprocess.run([str(a) for a in step], capture_output=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise ApacheKafkaError(f"openssl failed: {proc.stderr.decode(errors='replace')}")
    # Kafka's PEM key store: an unencrypted PKCS#8 key followed by the certificate chain
    pkcs8 = subprocess.run(
        ["openssl", "pkcs8", "-topk8", "-nocrypt", "-in", str(key)],
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    keystore = directory / "keystore.pem"
    keystore.write_bytes(pkcs8 + cert.read_bytes() + ca.read_bytes())
    return ca, keystore


# ------------------------------------------------------------------------------------ probes


def _probe_metadata_brokers(host: str, port: int, timeout: float = 2.0) -> int:
    """Send Metadata v4 for no topics and return how many brokers the reply lists."""
    corr = 0x5EEE
    client_id = b"aiokafka_lite-probe"
    # header v1 (api_key 3 = Metadata, v4), then topics = [] (empty: no topic) and
    # allow_auto_topic_creation = false
    body = struct.pack(">hhih", 3, 4, corr, len(client_id)) + client_id + struct.pack(">ib", 0, 0)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        head = _recv(sock, 4)
        (size,) = struct.unpack(">i", head)
        if not 12 <= size <= 1 << 20:
            raise ConnectionError(f"implausible Metadata response size {size}")
        reply = _recv(sock, size)
    got, _throttle, count = struct.unpack_from(">iii", reply)
    if got != corr:
        raise ConnectionError("Metadata reply for another correlation id")
    return int(count)


def _recv(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


# ------------------------------------------------------------------------------------- nodes


class ApacheNode(ChildProcess):
    """One KRaft process (broker and controller) of an :class:`ApacheKafka` cluster."""

    def __init__(self, cluster: ApacheKafka, node_id: int, workdir: Path) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.workdir = workdir
        self.host = cluster.host
        self.port = node_port(self.host)
        self.sasl_port = node_port(self.host)
        self.ssl_port = node_port(self.host)
        self.reauth_port = node_port(self.host)
        self.gssapi_port = node_port(self.host)
        self.controller_port = node_port(self.host)
        self.data_dir = workdir / "data"
        self.log_path = workdir / "broker.log"
        self.config_path = workdir / "server.properties"
        self._proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def bootstrap(self) -> str:
        """``"host:port"`` of this node's PLAINTEXT listener."""
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        state = "paused" if self.paused else ("running" if self.running else "stopped")
        return f"<ApacheNode {self.node_id} {self.bootstrap} {state}>"

    def write_config(self, voters: str) -> None:
        """Write ``server.properties`` for this node."""
        c = self.cluster
        h = self.host
        jaas_plain = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
            f'user_{u}="{p}"' for u, p in SASL_USERS.items()
        )
        rf = min(3, len(c.nodes))
        jaas = {
            "plain": jaas_plain + ";",
            "scram-sha-256": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "scram-sha-512": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            # the broker's own login (unused: inter-broker traffic is PLAINTEXT) needs a subject;
            # tokens are checked by Kafka's default OAUTHBEARER server callback handler, the
            # unsecured JWS validator (alg "none", "sub" and "exp" claims)
            "oauthbearer": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
            'required unsecuredLoginStringClaim_sub="admin";',
        }
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{h}:{self.port},SASL_PLAINTEXT://{h}:{self.sasl_port},"
            f"SSL://{h}:{self.ssl_port},REAUTH://{h}:{self.reauth_port},"
            f"CONTROLLER://{h}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{h}:{self.port},"
            f"SASL_PLAINTEXT://{h}:{self.sasl_port},SSL://{h}:{self.ssl_port},"
            f"REAUTH://{h}:{self.reauth_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,REAUTH:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": ",".join(_SASL_MECHANISMS),
            **{
                f"listener.name.{listener}.{mech}.sasl.jaas.config": text
                for listener in ("sasl_plaintext", "reauth")
                for mech, text in jaas.items()
            },
            "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(c.tls_keystore),
            "log.dirs": str(self.data_dir),
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": str(rf),
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(min(2, rf)),
            "share.coordinator.state.topic.replication.factor": str(rf),
            "share.coordinator.state.topic.min.isr": str(min(2, rf)),
            "default.replication.factor": str(rf) if len(c.nodes) > 1 else "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.cleaner.threads": "1",
            "num.recovery.threads.per.data.dir": "1",
            **c.extra_config,
        }
        for key, value in self._gssapi_config().items():
            props[key] = value + props[key] if value.endswith(",") else value
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _gssapi_config(self) -> dict[str, str]:
        """The opt-in GSSAPI listener added to ``listeners`` and its settings (none without it)."""
        krb = self.cluster.kerberos
        if krb is None:
            return {}
        h = self.host
        jaas = (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{krb.keytab}" principal="{krb.principal}";'
        )
        return {
            "listeners": f"GSSAPI://{h}:{self.gssapi_port},",
            "advertised.listeners": f"GSSAPI://{h}:{self.gssapi_port},",
            "listener.security.protocol.map": "GSSAPI:SASL_PLAINTEXT,",
            "listener.name.gssapi.sasl.enabled.mechanisms": "GSSAPI",
            "listener.name.gssapi.gssapi.sasl.jaas.config": jaas,
            "sasl.kerberos.service.name": "kafka",
        }

    def start(self) -> None:
        """Launch the JVM (the storage must have been formatted) without waiting for it."""
        if self.running:
            return
        c = self.cluster
        heap = "512m" if len(c.nodes) > 1 else "1g"
        cmd = [
            "java", "-Xms128m", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.log.kafka.server.BrokerServer=info",
            "-Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info",
            *([f"-Djava.security.krb5.conf={c.kerberos.krb5_conf}"] if c.kerberos else []),
            "-cp", c.classpath, "kafka.Kafka", str(self.config_path),
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            log.write(f"--- starting node {self.node_id} on {self.bootstrap}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # Ctrl-C in a terminal must not reach the broker first
            )
        self.paused = False

    def stop(self, timeout: float = 30.0) -> None:
        """Controlled shutdown (SIGTERM; leadership moves first), SIGKILL after ``timeout`` s."""
        self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: the node dies at once, as on a power cut."""
        self._signal_and_wait(signal.SIGKILL, 10.0)

    def pause(self) -> None:
        """SIGSTOP: the node keeps its sockets open but answers nothing until :meth:`resume`."""
        if self._proc is not None and self.running:
            os.kill(self._proc.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        """SIGCONT a paused node."""
        if self._proc is not None and self.running:
            os.kill(self._proc.pid, signal.SIGCONT)
        self.paused = False

    def _signal_and_wait(self, sig: signal.Signals, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                if self.paused:
                    os.kill(proc.pid, signal.SIGCONT)
                proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                try:
                    proc.wait(10.0)
                except subprocess.TimeoutExpired as exc:
                    raise ApacheKafkaError(f"node {self.node_id} ignores SIGKILL") from exc
        self._proc = None
        self.paused = False

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines this node logged."""
        if not self.log_path.exists():
            return ""
        text = self.log_path.read_bytes()[-32768:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])


class ApacheKafka:
    """A KRaft cluster of ``nodes`` combined broker+controller processes on loopback ports.

    ``kind`` is ``"apache"`` (the name tests and the CLI use for this broker); ``version`` is an
    Apache Kafka release served by Maven Central (default: the newest pinned 4.x line).
    ``extra_config`` adds or overrides ``server.properties`` entries on every node.
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
    ) -> None:
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        self.version = version
        self.host = host
        self.startup_timeout = startup_timeout
        self.extra_config = dict(extra_config or {})
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
            self.classpath = kafka_classpath(self.version)
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
            except BaseException:
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
                "java", "-Xmx256m", "-cp", self.classpath, "kafka.tools.StorageTool", "format",
                "-t", cluster_id, "-c", str(n.config_path), *scram,
            ]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                raise ApacheKafkaError(
                    f"formatting node {n.node_id} failed: {(proc.stdout + proc.stderr)[-2000:]}"
                )

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
    """``python -m aiokafka_lite._apache fetch [VERSION ...]``: resolve the jars ahead of time."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "fetch":
        print("usage: python -m aiokafka_lite._apache fetch [VERSION ...]", file=sys.stderr)
        return 2
    reason = apache_available()
    if reason is not None:
        print(f"skipping the Apache Kafka jars: {reason}", file=sys.stderr)
        return 0
    for version in args[1:] or list(KAFKA_VERSIONS.values()):
        cp = kafka_classpath(version)
        print(f"Apache Kafka {version}: {len(cp.split(os.pathsep))} jars resolved")
    return 0
