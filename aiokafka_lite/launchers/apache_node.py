"""One Apache Kafka node (a JVM child process) and what it needs: Java and Maven checks, the
jars Maven resolves from ``apache-pom.xml``, the listeners' ports, a throw-away TLS CA.

:class:`~aiokafka_lite.launchers.apache.ApacheKafka` (one node or a KRaft cluster) is the API.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, NamedTuple

from .embedded import ChildProcess, free_port


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

_POM = Path(__file__).with_name("apache-pom.xml")
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


#: a missing, stale or unusable class-data-sharing archive is skipped silently (the JVM's
#: unified logging would otherwise print to the broker's stdout)
_CDS_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


@functools.cache
def _cds_dump_works(java: str) -> bool:
    """True when ``java`` can write a dynamic class-data-sharing archive: it needs the JDK's
    base archive, without which the VM does not start at all with ``ArchiveClassesAtExit``."""
    with tempfile.TemporaryDirectory(prefix="aiokafka_lite-cds-") as tmp:
        probe = [java, f"-XX:ArchiveClassesAtExit={tmp}/probe.jsa", *_CDS_QUIET, "-version"]
        try:
            result = subprocess.run(probe, capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return result.returncode == 0


def cds_archive(classpath: str, jvm_options: list[str]) -> Path | None:
    """Where the class-data-sharing archive of brokers started with ``classpath`` and
    ``jvm_options`` lives (in the user cache, named after the java binary, the options and the
    jars' sizes and times), or None when the classpath has anything but jar files (CDS maps
    jars only)."""
    entries = [e for e in classpath.split(os.pathsep) if e]
    if not entries or not all(e.endswith(".jar") and os.path.isfile(e) for e in entries):
        return None
    java = os.path.realpath(shutil.which("java") or "java")
    stats = [f"{e}:{os.stat(e).st_size}:{os.stat(e).st_mtime_ns}" for e in entries]
    key = hashlib.sha256("\n".join([java, *jvm_options, *stats]).encode()).hexdigest()[:20]
    return _cache_dir() / f"apache-kafka-cds-{key}.jsa"


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
    # what X.509 strict verification (Python 3.13's default contexts) asks of a server
    # certificate: the issuer's key identifier, not a CA, the names in subjectAltName
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        "subjectKeyIdentifier=hash\n"
        "basicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
    )
    steps = [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", ca_key, "-out", ca, "-subj", "/CN=aiokafka_lite test CA",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
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

    def __init__(self, cluster: Any, node_id: int, workdir: Path) -> None:
        # cluster: the launchers.apache.ApacheKafka this node belongs to (not imported here:
        # that module imports this one)
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
        #: (partial, archive) while this node's JVM writes the class-data-sharing archive
        self._cds_dump: tuple[Path, Path] | None = None

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
            # lower FLOORS only (the defaults stay Kafka's: 45 s sessions, 5 s heartbeats, 30 s
            # locks): a group config (IncrementalAlterConfigs on the group) may ask for a short
            # session, heartbeat or acquisition lock, so a test waits seconds, not Kafka's minimums
            "group.consumer.min.session.timeout.ms": "6000",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.share.min.session.timeout.ms": "6000",
            "group.share.min.heartbeat.interval.ms": "500",
            "group.share.min.record.lock.duration.ms": "2000",
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
            *c.jvm_options, *self._cds_options(),
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

    def _cds_options(self) -> list[str]:
        """With the cluster's ``class_data_sharing``: map the archive, or (none yet, and no
        other node of this cluster writing it) write it when this JVM exits cleanly."""
        c = self.cluster
        if not c.class_data_sharing:
            return []
        archive = cds_archive(c.classpath, c.jvm_options)
        if archive is None:
            return []
        if archive.exists():
            return [f"-XX:SharedArchiveFile={archive}", *_CDS_QUIET]
        if any(n._cds_dump is not None for n in c.nodes) or not _cds_dump_works("java"):
            return []
        partial = archive.with_name(f"{archive.name}.{os.getpid()}-{self.node_id}.tmp")
        self._cds_dump = (partial, archive)
        return [f"-XX:ArchiveClassesAtExit={partial}", *_CDS_QUIET]

    def _cds_done(self, clean: bool) -> None:
        """The JVM is gone: keep the archive it wrote on a clean exit (atomically: other
        processes may start brokers meanwhile), else drop what there is of it."""
        if self._cds_dump is None:
            return
        partial, archive = self._cds_dump
        self._cds_dump = None
        with contextlib.suppress(OSError):
            if clean and partial.exists():
                os.replace(partial, archive)
            else:
                partial.unlink(missing_ok=True)

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
        clean = sig != signal.SIGKILL
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                if self.paused:
                    os.kill(proc.pid, signal.SIGCONT)
                proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                clean = False
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                try:
                    proc.wait(10.0)
                except subprocess.TimeoutExpired as exc:
                    raise ApacheKafkaError(f"node {self.node_id} ignores SIGKILL") from exc
        self._proc = None
        self.paused = False
        self._cds_done(clean)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines this node logged."""
        if not self.log_path.exists():
            return ""
        text = self.log_path.read_bytes()[-32768:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])
