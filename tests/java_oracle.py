"""The official Apache Kafka Java client as a test oracle (``tests/java/KafkaOracle``).

Interop tests use it to check aiokafka_lite against the reference implementation: produce with
one client, consume with the other, compare partitioning and group behaviour. Each call runs a
short-lived ``java`` process (about a second each); :class:`GroupMember` keeps one running.

    from java_oracle import GroupMember, consume, produce

    meta = produce(bootstrap, topic, [{"key": b"k", "value": b"v", "headers": [("h", b"1")]}])
    records = consume(bootstrap, topic, until_end=True)      # from the beginning by default
    assert records[0]["value"] == b"v"

Keys, values and header values are ``bytes`` (``str`` is accepted on input and sent as UTF-8)
or ``None``. The helper is built with Maven the first time it is needed (:func:`build`, cached
in ``tests/java/target``); :func:`unavailable_reason` says why it cannot run (no Java 17+, no
Maven), for ``pytest.skip``. ``KAFKA_ORACLE_VERSION`` picks the kafka-clients version
(default 4.4.0); builds of other versions go to ``tests/java/target/kafka-VERSION``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "OracleError",
    "unavailable_reason",
    "java_available",
    "build",
    "java_command",
    "produce",
    "consume",
    "partitions_for",
    "create_topic",
    "GroupMember",
    "KipScript",
    "ShareMember",
    "ShareApiScript",
    "ShareScript",
    "set_transaction_version",
    "txn_scenario",
]

JAVA_DIR = Path(__file__).resolve().parent / "java"
POM = JAVA_DIR / "pom.xml"
SOURCE = JAVA_DIR / "src" / "main" / "java" / "KafkaOracle.java"
STAMP = "oracle-build.stamp"  # in the build dir: when the last successful build finished
BASE_VERSION = "4.4.0"  # the pom's default kafka.version: its build lives in target/ itself
DEFAULT_KAFKA_VERSION = os.environ.get("KAFKA_ORACLE_VERSION", BASE_VERSION)

BUILD_TIMEOUT = 900.0  # the first build downloads kafka-clients and the Maven plugins
JVM_SLACK = 60.0  # added to each command's own time limit: JVM start, connecting, closing
JVM_OPTIONS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
#: the oracle's own classes as Maven packages them (class-data sharing maps jars only)
JAR = "kafka-oracle-1.jar"
#: in the build dir: a class-data-sharing archive of the classes a client start loads, made once
#: per build (:func:`_make_cds_archive`); each oracle JVM maps it instead of loading and
#: verifying those classes again: about half of a JVM's start-up CPU (1.5 -> 0.8 s measured)
CDS_ARCHIVE = "oracle-cds.jsa"
#: a missing or stale archive is not used, silently (the oracle's stdout is parsed)
CDS_QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]

Bytes = bytes | bytearray | memoryview | str


class OracleError(RuntimeError):
    """A KafkaOracle command (or its build) failed; ``stderr`` has the Java side of the story."""

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "") -> None:
        tail = "\n".join(stderr.strip().splitlines()[-30:])
        super().__init__(f"{message}\n{tail}" if tail else message)
        self.returncode = returncode
        self.stderr = stderr


# --------------------------------------------------------------------------------------------
# availability and build


@cache
def _java_major() -> int | None:
    java = shutil.which("java")
    if java is None:
        return None
    try:
        result = subprocess.run(
            [java, "-version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr)
    if result.returncode != 0 or match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def unavailable_reason(kafka_version: str | None = None) -> str | None:
    """Why the oracle cannot run here (a sentence for ``pytest.skip``), or None when it can."""
    major = _java_major()
    if major is None:
        return "the Java oracle needs a JDK 17+ ('java' is not on PATH or does not run)"
    if major < 17:
        return f"the Java oracle needs Java 17+, found Java {major}"
    if shutil.which("mvn") is None and not _is_fresh(_build_dir(kafka_version), kafka_version):
        return "the Java oracle needs Maven ('mvn' is not on PATH) to build tests/java"
    return None


def java_available(kafka_version: str | None = None) -> bool:
    """True when the oracle can run (Java 17+, and Maven unless it is built already)."""
    return unavailable_reason(kafka_version) is None


def _build_dir(kafka_version: str | None) -> Path:
    version = kafka_version or DEFAULT_KAFKA_VERSION
    if not re.fullmatch(r"[0-9A-Za-z.\-]+", version):
        raise ValueError(f"bad kafka version {version!r}")
    target = JAVA_DIR / "target"
    return target if version == BASE_VERSION else target / f"kafka-{version}"


def _is_fresh(build_dir: Path, kafka_version: str | None = None) -> bool:
    """``build_dir`` has a build finished after the last change of the source and the pom."""
    version = kafka_version or DEFAULT_KAFKA_VERSION
    try:
        # _run_maven touches the stamp when Maven succeeds: Maven itself leaves files that did
        # not need to change (classpath.txt, classes) with their old times.
        built = (build_dir / STAMP).stat().st_mtime
        sources = [p.stat().st_mtime for p in SOURCE.parent.glob("*.java")]
        if built < max(POM.stat().st_mtime, SOURCE.stat().st_mtime, *sources):
            return False
        if not (build_dir / "classes" / "KafkaOracle.class").exists():
            return False
        classpath = (build_dir / "classpath.txt").read_text().strip()
    except OSError:
        return False
    jars = [Path(jar) for jar in classpath.split(os.pathsep) if jar]
    if not any(jar.name == f"kafka-clients-{version}.jar" for jar in jars):
        return False  # built by hand with another -Dkafka.version
    return all(jar.exists() for jar in jars)


_built: dict[str, Path] = {}
_build_lock = threading.Lock()


def build(kafka_version: str | None = None) -> Path:
    """Build the oracle against kafka-clients ``kafka_version`` (once) and return its build dir.

    The directory holds ``classes/`` and ``classpath.txt`` (the dependency jars); use
    :func:`java_command` for a ready command line. A build newer than the Java source and the
    pom is reused; a file lock keeps two pytest processes from running Maven at once.
    """
    version = kafka_version or DEFAULT_KAFKA_VERSION
    with _build_lock:
        if version in _built:
            return _built[version]
        build_dir = _build_dir(version)
        if not _is_fresh(build_dir, version):
            reason = unavailable_reason(version)
            if reason is not None:
                raise OracleError(reason)
            build_dir.mkdir(parents=True, exist_ok=True)
            with open(JAVA_DIR / "target" / f".build-{version}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building: wait for it
                try:
                    if not _is_fresh(build_dir, version):
                        _run_maven(version, build_dir)
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)
        if not _cds_fresh(build_dir):
            with open(JAVA_DIR / "target" / f".build-{version}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    if not _cds_fresh(build_dir):
                        _make_cds_archive(build_dir)
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)
        _built[version] = build_dir
        return build_dir


def _classpath(build_dir: Path) -> str:
    """The oracle's jar (its classes directory before Maven packaged it) and the dependencies."""
    jars = (build_dir / "classpath.txt").read_text().strip()
    jar = build_dir / JAR
    own = jar if jar.exists() else build_dir / "classes"
    return os.pathsep.join([str(own), jars])


def _cds_fresh(build_dir: Path) -> bool:
    """The archive (or the note that making it failed) is newer than the build, or there is
    none to make (no jar)."""
    if not (build_dir / JAR).exists():
        return True
    try:
        built = (build_dir / STAMP).stat().st_mtime
    except OSError:
        return False
    for name in (CDS_ARCHIVE, CDS_ARCHIVE + ".failed"):
        with contextlib.suppress(OSError):
            if (build_dir / name).stat().st_mtime >= built:
                return True
    return False


def _make_cds_archive(build_dir: Path) -> None:
    """Archive the classes a producer's start and close load (no broker: the bootstrap
    address is refused). Best effort: without an archive the JVMs load their classes as usual."""
    archive = build_dir / CDS_ARCHIVE
    partial = archive.with_suffix(f".{os.getpid()}.tmp")
    command = [
        shutil.which("java") or "java",
        *JVM_OPTIONS,
        f"-XX:ArchiveClassesAtExit={partial}",
        *CDS_QUIET,
        "-cp",
        _classpath(build_dir),
        "KafkaOracle",
        *("produce", "--bootstrap", "127.0.0.1:1", "--topic", "cds-warm-up"),
    ]
    try:
        subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, timeout=120, check=False
        )
        if partial.exists():
            partial.replace(archive)
            return
    except (OSError, subprocess.TimeoutExpired):
        partial.unlink(missing_ok=True)
    archive.unlink(missing_ok=True)
    (build_dir / (CDS_ARCHIVE + ".failed")).touch()  # not again for this build


def _run_maven(version: str, build_dir: Path) -> None:
    command = [
        shutil.which("mvn") or "mvn",
        "-q",
        "-B",
        "-f",
        str(POM),
        f"-Dkafka.version={version}",
        f"-Doracle.build.dir={build_dir}",
        "package",
        "dependency:build-classpath",
        f"-Dmdep.outputFile={build_dir / 'classpath.txt'}",
    ]
    try:
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise OracleError(f"Maven build of the Java oracle took over {BUILD_TIMEOUT:.0f}s") from e
    if result.returncode == 0:
        (build_dir / STAMP).touch()
    if result.returncode != 0 or not _is_fresh(build_dir, version):
        raise OracleError(
            f"Maven build of the Java oracle failed (exit {result.returncode}): {' '.join(command)}",
            returncode=result.returncode,
            stderr=result.stdout + result.stderr,
        )


def java_command(kafka_version: str | None = None) -> list[str]:
    """``java ... KafkaOracle``, built if needed; append a subcommand and its options."""
    build_dir = build(kafka_version)
    archive = build_dir / CDS_ARCHIVE
    cds = [f"-XX:SharedArchiveFile={archive}", *CDS_QUIET] if archive.exists() else []
    java = shutil.which("java") or "java"
    return [java, *JVM_OPTIONS, *cds, "-cp", _classpath(build_dir), "KafkaOracle"]


# --------------------------------------------------------------------------------------------
# running commands


def _options(**options: Any) -> list[str]:
    """``--name value`` pairs from keyword arguments (``_`` -> ``-``); None is left out."""
    args: list[str] = []
    for name, value in options.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        args += [f"--{name.replace('_', '-')}", str(value)]
    return args


def _run(
    command: str,
    options: Mapping[str, Any],
    *,
    stdin: str = "",
    timeout: float,
    kafka_version: str | None,
) -> list[dict[str, Any]]:
    """Run one subcommand to completion; its stdout JSON lines, parsed. A
    ``client_properties`` option (a mapping) goes to the Java client as a properties file."""
    options = dict(options)
    props = options.pop("client_properties", None)
    props_file = None
    if props:
        fd, props_file = tempfile.mkstemp(prefix="kafka-oracle-", suffix=".properties")
        with os.fdopen(fd, "w") as f:  # values as Java reads them: backslashes escaped
            for k, v in props.items():
                f.write(k + "=" + str(v).replace("\\", "\\\\") + "\n")
        options["client_properties"] = props_file
    args = [*java_command(kafka_version), command, *_options(**options)]
    try:
        result = subprocess.run(
            args,
            input=stdin.encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        stderr = (e.stderr or b"").decode(errors="replace")
        raise OracleError(
            f"KafkaOracle {command} timed out after {timeout:.0f}s", stderr=stderr
        ) from e
    finally:
        if props_file is not None:
            os.unlink(props_file)
    stderr = result.stderr.decode(errors="replace")
    if result.returncode != 0:
        raise OracleError(
            f"KafkaOracle {command} failed (exit {result.returncode})",
            returncode=result.returncode,
            stderr=stderr,
        )
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]


def _b64(data: Bytes | None) -> str | None:
    if data is None:
        return None
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(bytes(data)).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _decode_record(line: dict[str, Any]) -> dict[str, Any]:
    """A consumed record with key, value and header values back as bytes (or None)."""
    record = dict(line)
    record["key"] = _unb64(line["key"])
    record["value"] = _unb64(line["value"])
    record["headers"] = [(name, _unb64(value)) for name, value in line["headers"]]
    return record


_RECORD_FIELDS = {"key", "value", "headers", "timestamp", "partition"}


def _record_line(record: Mapping[str, Any] | tuple[Any, Any] | Bytes) -> str:
    if isinstance(record, tuple):
        key, value = record
        record = {"key": key, "value": value}
    elif not isinstance(record, Mapping):
        record = {"value": record}
    unknown = set(record) - _RECORD_FIELDS
    if unknown:
        raise ValueError(f"unknown record field(s) {sorted(unknown)}; use {sorted(_RECORD_FIELDS)}")
    return json.dumps(
        {
            "key": _b64(record.get("key")),
            "value": _b64(record.get("value")),
            "headers": [[name, _b64(value)] for name, value in record.get("headers") or ()],
            "timestamp": record.get("timestamp"),
            "partition": record.get("partition"),
        }
    )


# --------------------------------------------------------------------------------------------
# the commands


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Mapping[str, Any] | tuple[Any, Any] | Bytes],
    *,
    compression: str | None = None,
    idempotent: bool | None = None,
    acks: str | int | None = None,
    transactional_id: str | None = None,
    txn: str | None = None,
    partition: int | None = None,
    linger_ms: int | None = None,
    timeout_ms: int = 30_000,
    kafka_version: str | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Send ``records`` with the Java producer; their ``{"partition", "offset", "timestamp"}``.

    A record is a mapping with any of ``key``, ``value``, ``headers`` (``[(name, value), ...]``),
    ``timestamp`` (ms) and ``partition``; a ``(key, value)`` tuple; or just the value. With
    ``transactional_id`` all records go in one transaction, committed or (``txn="abort"``)
    aborted. ``None`` options keep the Java client's defaults (idempotence on, acks=all).
    Raises :class:`OracleError` when any record fails.
    """
    stdin = "".join(_record_line(record) + "\n" for record in records)
    options = {
        "bootstrap": bootstrap,
        "topic": topic,
        "compression": compression,
        "idempotent": idempotent,
        "acks": acks,
        "transactional_id": transactional_id,
        "txn": txn,
        "partition": partition,
        "linger_ms": linger_ms,
        "timeout_ms": timeout_ms,
        "client_properties": client_properties,
    }
    return _run(
        "produce",
        options,
        stdin=stdin,
        timeout=timeout_ms / 1000 + JVM_SLACK,
        kafka_version=kafka_version,
    )


def consume(
    bootstrap: str,
    topic: str,
    *,
    group: str | None = None,
    isolation: str | None = None,
    from_beginning: bool = True,
    max_records: int | None = None,
    until_end: bool = False,
    timeout_ms: int = 10_000,
    assignor: str | None = None,
    commit: bool = False,
    partitions: Sequence[int] | None = None,
    kafka_version: str | None = None,
    client_properties: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Read records with the Java consumer, each as a dict with ``topic``, ``partition``,
    ``offset``, ``timestamp``, ``timestamp_type`` ("CreateTime"/"LogAppendTime"), ``key``,
    ``value`` and ``headers`` (``[(name, bytes | None), ...]``).

    Stops after ``max_records``, or with ``until_end`` once it is at the end offsets the
    partitions had when assigned (the last stable offsets under ``read_committed``), or after
    ``timeout_ms`` in all, whichever comes first; running out of time is not an error. Without
    ``group`` (or with ``partitions``) it assigns partitions itself; ``from_beginning`` sets
    ``auto.offset.reset=earliest`` (committed offsets still win). ``commit=True`` commits what
    it returned, synchronously, before exiting.
    """
    options = {
        "bootstrap": bootstrap,
        "topic": topic,
        "group": group,
        "isolation": isolation,
        "from": "beginning" if from_beginning else "latest",
        "max_records": max_records,
        "until_end": until_end or None,
        "timeout_ms": timeout_ms,
        "assignor": assignor,
        "commit": commit or None,
        "partitions": partitions,
        "client_properties": client_properties,
    }
    lines = _run(
        "consume",
        options,
        timeout=timeout_ms / 1000 + JVM_SLACK,
        kafka_version=kafka_version,
    )
    return [_decode_record(line) for line in lines]


def partitions_for(
    bootstrap: str,
    topic: str,
    keys: Iterable[Bytes | None],
    *,
    method: str = "produce",
    kafka_version: str | None = None,
) -> list[int | None]:
    """The partition the Java producer's default partitioner picks for each key.

    ``method="produce"`` (the default) really sends a record per key (with an empty value) and
    reports where it landed; ``"compute"`` asks ``Utils.murmur2`` without sending (None for a
    None key, which the producer places by its sticky logic instead).
    """
    stdin = "".join(("-" if key is None else _b64(key)) + "\n" for key in keys)
    lines = _run(
        "partition-for",
        {"bootstrap": bootstrap, "topic": topic, "method": method},
        stdin=stdin,
        timeout=30 + JVM_SLACK,
        kafka_version=kafka_version,
    )
    return [line["partition"] for line in lines]


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    *,
    replication_factor: int = 1,
    config: Mapping[str, str] | None = None,
    if_not_exists: bool = True,
    kafka_version: str | None = None,
) -> bool:
    """Create ``topic`` with the Java Admin client; False when it existed already."""
    options = {
        "bootstrap": bootstrap,
        "topic": topic,
        "partitions": partitions,
        "replication_factor": replication_factor,
        "config": ",".join(f"{k}={v}" for k, v in config.items()) if config else None,
        "if_not_exists": if_not_exists,
    }
    lines = _run("create-topic", options, timeout=60 + JVM_SLACK, kafka_version=kafka_version)
    return bool(lines[0]["created"])


def set_transaction_version(bootstrap: str, level: int) -> None:
    """Finalize the cluster's ``transaction.version`` at ``level`` with the Java Admin client
    (upgrade or safe downgrade, as ``kafka-features.sh``), waiting until it is described so."""
    _run(
        "txn-feature",
        {"bootstrap": bootstrap, "level": level},
        timeout=60 + JVM_SLACK,
        kafka_version=None,
    )


def txn_scenario(
    bootstrap: str,
    topic: str,
    transactional_id: str,
    scenario: str,
    *,
    timeout: float = 90.0,
    **options: Any,
) -> list[dict[str, Any]]:
    """Run one transaction scenario with the Java producer (``TxnOracle.java``: ``commits``,
    ``zombie``, ``abort-after-failed-send``, ``ctp`` with ``input``/``group``/``count``); its
    steps, ``{"step", "error": simple class name or None, ...}``."""
    return _run(
        "txn-scenario",
        {
            "bootstrap": bootstrap,
            "topic": topic,
            "transactional_id": transactional_id,
            "scenario": scenario,
            **options,
        },
        timeout=timeout + JVM_SLACK,
        kafka_version=None,
    )


def txn_admin(
    bootstrap: str,
    ids: Sequence[str],
    partitions: Sequence[tuple[str, int]],
    *,
    timeout: float = 90.0,
    **options: Any,
) -> list[dict[str, Any]]:
    """The Java Admin client's transaction calls (``TxnAdminOracle.java``): ``abort``
    (``"T:P:PID:EPOCH:COORDEPOCH"``) and ``fence`` (an id) when given, then its view of ``ids``
    and ``partitions`` (listTransactions with each filter, describeTransactions,
    describeProducers); one dict per step, the view last."""
    return _run(
        "txn-admin",
        {
            "bootstrap": bootstrap,
            "ids": list(ids),
            "partitions": [f"{t}:{p}" for t, p in partitions],
            **options,
        },
        timeout=timeout + JVM_SLACK,
        kafka_version=None,
    )


class GroupMember:
    """A Java consumer in a consumer group (classic protocol), in its own process.

    It prints ``assigned`` / ``revoked`` / ``lost`` events from its rebalance listener and every
    record it reads, and commits synchronously after each poll. A background thread collects
    them: :meth:`assigned` is the current assignment, :attr:`records` what it read so far.
    :meth:`stop` (or leaving the ``with`` block) closes the consumer, so it leaves the group.

        with GroupMember(bootstrap, topic, "g", assignor="roundrobin") as a, GroupMember(...) as b:
            a.wait_for(lambda m: len(m.assigned()) == 2)
    """

    #: the KafkaOracle subcommand it runs (``group-member-consumer``: the KIP-848 protocol;
    #: ShareMember: ``share-member``)
    command = "group-member"

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        assignor: str = "range",
        run_ms: int = 120_000,
        from_beginning: bool = True,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        kafka_version: str | None = None,
    ) -> None:
        self.args = _options(
            bootstrap=bootstrap,
            topic=topic,
            group=group,
            assignor=assignor,
            run_ms=run_ms,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            **{"from": "beginning" if from_beginning else "latest"},
        )
        self.run_ms = run_ms
        self.kafka_version = kafka_version
        self.process: subprocess.Popen[bytes] | None = None
        self._lines: list[dict[str, Any]] = []
        self._stderr: list[str] = []
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []

    # lifecycle

    def start(self) -> GroupMember:
        if self.process is not None:
            raise RuntimeError("GroupMember already started")
        self.process = subprocess.Popen(
            [*java_command(self.kafka_version), self.command, *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self._threads = [
            threading.Thread(target=self._read_stdout, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self.process.stderr,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 30.0, *, check: bool = True) -> int:
        """Ask the member to leave the group and wait for it; its exit status.

        Kills it when it does not exit within ``timeout`` seconds; with ``check`` (the default),
        raises :class:`OracleError` when it was killed or exited with an error.
        """
        process = self.process
        if process is None:
            raise RuntimeError("GroupMember was not started")
        killed = False
        if process.poll() is None:
            try:
                assert process.stdin is not None
                process.stdin.write(b"stop\n")
                process.stdin.close()
            except (BrokenPipeError, ValueError):
                pass  # it is already on its way out
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
                killed = True
        elif process.stdin is not None and not process.stdin.closed:
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass
        for thread in self._threads:
            thread.join(timeout=10)
        if check and killed:
            raise OracleError(
                f"group member did not stop within {timeout:.0f}s", stderr=self.stderr
            )
        if check and process.returncode != 0:
            raise OracleError(
                f"group member failed (exit {process.returncode})",
                returncode=process.returncode,
                stderr=self.stderr,
            )
        return process.returncode

    def __enter__(self) -> GroupMember:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.process is not None:
            self.stop(check=exc_type is None)  # don't hide the error that got us here

    # what it saw

    @property
    def lines(self) -> list[dict[str, Any]]:
        """Everything it printed so far, in order: events and (decoded) records."""
        with self._changed:
            return list(self._lines)

    @property
    def events(self) -> list[dict[str, Any]]:
        """The ``assigned`` / ``revoked`` / ``lost`` / ``commit_failed`` / ``closed`` events."""
        return [line for line in self.lines if "event" in line]

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records it consumed so far (as :func:`consume` returns them)."""
        return [line for line in self.lines if "event" not in line]

    @property
    def stderr(self) -> str:
        with self._changed:
            return "".join(self._stderr)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def assigned(self) -> set[tuple[str, int]]:
        """Its current assignment, from the listener's events (works for eager and
        cooperative rebalancing alike: assigned adds, revoked and lost remove)."""
        current: set[tuple[str, int]] = set()
        for event in self.events:
            partitions = {(topic, partition) for topic, partition in event.get("partitions", ())}
            if event["event"] == "assigned":
                current |= partitions
            elif event["event"] in ("revoked", "lost"):
                current -= partitions
        return current

    def wait_for(
        self, predicate: Callable[[GroupMember], bool], timeout: float = 30.0, what: str = ""
    ) -> None:
        """Wait until ``predicate(self)`` holds (checked after every line it prints)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if predicate(self):
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (not self.running and not self._threads[0].is_alive()):
                    break
                self._changed.wait(min(remaining, 0.5))
        state = "running" if self.running else f"exited {self.process and self.process.returncode}"
        raise TimeoutError(
            f"group member ({state}): no {what or 'condition'} within {timeout:.0f}s; "
            f"events={self.events}; records={len(self.records)}; stderr tail:\n"
            + "\n".join(self.stderr.splitlines()[-20:])
        )

    def wait_assigned(self, timeout: float = 30.0) -> set[tuple[str, int]]:
        """Wait for its first ``assigned`` event; its assignment then."""
        self.wait_for(
            lambda m: any(e["event"] == "assigned" for e in m.events), timeout, "assignment"
        )
        return self.assigned()

    # background readers

    def _read_stdout(self, stream: Any) -> None:
        for raw in stream:
            try:
                line = json.loads(raw)
            except ValueError:  # not ours (a JVM notice?): keep it with the diagnostics
                with self._changed:
                    self._stderr.append("stdout: " + raw.decode(errors="replace"))
                continue
            if "event" not in line:
                line = _decode_record(line)
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _read_stderr(self, stream: Any) -> None:
        for raw in stream:
            with self._changed:
                self._stderr.append(raw.decode(errors="replace"))


class ShareMember(GroupMember):
    """A Java ``KafkaShareConsumer`` in share group ``group`` (``ShareOracle.java``), kept
    running like :class:`GroupMember`: implicit acknowledgement, ``commitSync()`` after every
    poll. :attr:`records` carry ``delivery_count``; ``commit`` events count failed
    acknowledgements (``errors``)."""

    command = "share-member"

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        run_ms: int = 120_000,
        kafka_version: str | None = None,
    ) -> None:
        super().__init__(bootstrap, topic, group, run_ms=run_ms, kafka_version=kafka_version)
        self.args = _options(bootstrap=bootstrap, topic=topic, group=group, run_ms=run_ms)


class ShareScript(GroupMember):
    """A Java ``KafkaShareConsumer`` driven one command at a time (``ShareScript.java``):
    :meth:`do` sends a command (``"subscribe T"``, ``"poll 2000"``, ``"ack 3 RELEASE"``,
    ``"commit"``, ``"close"``, ...) and returns what it printed until the command was done
    (records, ``polled`` / ``commit`` / ``ack_callback`` / ``error`` events). Nothing is
    subscribed at start: send ``subscribe`` first (or later, for the start-then-subscribe
    scenario)."""

    command = "share-member"

    def __init__(
        self,
        bootstrap: str,
        group: str,
        *,
        mode: str = "implicit",
        max_poll_records: int | None = None,
        callback: bool = False,
        kafka_version: str | None = None,
    ) -> None:
        super().__init__(bootstrap, "-", group, kafka_version=kafka_version)
        self.args = _options(
            script=True,
            bootstrap=bootstrap,
            group=group,
            mode=mode,
            max_poll_records=max_poll_records,
            callback=callback,
        )

    def do(self, command: str, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Run ``command``; the lines it printed (the final ``done`` left out)."""
        process = self.process
        if process is None or process.stdin is None:
            raise RuntimeError("ShareScript was not started")
        start = len(self.lines)
        done = sum(1 for e in self.events if e["event"] == "done")
        process.stdin.write(command.encode() + b"\n")
        process.stdin.flush()
        self.wait_for(
            lambda m: sum(1 for e in m.events if e["event"] == "done") > done,
            timeout + JVM_SLACK,
            f"end of {command!r}",
        )
        out = self.lines[start:]
        return [line for line in out if line.get("event") != "done"]


class ShareApiScript:
    """A Java ``KafkaShareConsumer`` driven one step at a time (``ShareApiScript.java``), so a
    scenario runs the same steps on Java and on aiokafka_lite.

    ``config``: consumer configs (``{"share.acknowledgement.mode": "explicit"}``);
    ``fail_prefix``: its value deserializer throws on values starting with it. :meth:`call` sends
    one command (``"poll 1000"``, ``"poll-until 30000"`` (polls until some records come),
    ``"ack T P O REJECT"``, ``"ack-record 0 ACCEPT"``,
    ``"commit-sync"``, ``"commit-async"``, ``"sleep MS"``, ``"lock-timeout"``, ``"close"``) and
    returns its answer: ``error`` (None or ``{"class", "message"[, "topic", "partition",
    "offset"]}``), ``records`` for a poll (values as bytes), ``results`` for commit-sync.
    :attr:`callbacks` are the acknowledgement commit callback's calls so far (``offsets``:
    ``{"topic-partition": [offsets]}``, ``error``: class name or None).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        config: Mapping[str, Any] | None = None,
        fail_prefix: str | None = None,
        kafka_version: str | None = None,
    ) -> None:
        self.args = _options(
            bootstrap=bootstrap,
            topic=topic,
            group=group,
            config=",".join(f"{k}={v}" for k, v in (config or {}).items()) or None,
            fail_prefix=fail_prefix,
        )
        self.kafka_version = kafka_version
        self.process: subprocess.Popen[bytes] | None = None
        self.callbacks: list[dict[str, Any]] = []
        self._replies: list[dict[str, Any]] = []
        self._stderr: list[str] = []
        self._changed = threading.Condition()

    def start(self) -> ShareApiScript:
        self.process = subprocess.Popen(
            [*java_command(self.kafka_version), "share-script", *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for target, stream in ((self._read, self.process.stdout), (self._err, self.process.stderr)):
            threading.Thread(target=target, args=(stream,), daemon=True).start()
        return self

    def call(self, command: str, timeout: float = 60.0) -> dict[str, Any]:
        """Run ``command`` and return its answer (OracleError if none within ``timeout``)."""
        assert self.process is not None and self.process.stdin is not None
        with self._changed:
            self._replies.clear()
        self.process.stdin.write(command.encode() + b"\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout + JVM_SLACK
        with self._changed:
            while not self._replies:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise OracleError(f"share-script: no answer to {command!r}", stderr=self.stderr)
                self._changed.wait(min(remaining, 0.5))
            reply = self._replies.pop(0)
        for r in reply.get("records", ()):
            r["value"] = _unb64(r["value"])
        return reply

    def close(self) -> None:
        """Close the consumer (``close()``: it leaves the group) and wait for the process."""
        if self.process is None:
            return
        if self.process.poll() is None:
            try:
                self.call("close")
            finally:
                try:
                    self.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=30)

    @property
    def stderr(self) -> str:
        with self._changed:
            return "".join(self._stderr)

    def __enter__(self) -> ShareApiScript:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            try:
                line = json.loads(raw)
            except ValueError:
                with self._changed:
                    self._stderr.append("stdout: " + raw.decode(errors="replace"))
                continue
            with self._changed:
                (self.callbacks if line.get("event") == "callback" else self._replies).append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _err(self, stream: Any) -> None:
        for raw in stream:
            with self._changed:
                self._stderr.append(raw.decode(errors="replace"))


def share_group_view(
    bootstrap: str, group: str, *, kafka_version: str | None = None
) -> dict[str, Any]:
    """The Java ``Admin`` client's view of share group ``group`` (``ShareAdminOracle.java``):
    ``listed`` (every share group ``listGroups`` reports: ``group_id``, ``state``), then the
    group's description (``state``, ``group_epoch``, ``assignment_epoch``, ``members`` sorted
    by ``member_id``, each with ``assignment`` as sorted ``[topic, partition]`` pairs) and its
    ``offsets`` (``topic``, ``partition``, ``start_offset``, ``leader_epoch``, ``lag``; -1 for
    absent)."""
    lines = _run(
        "share-admin",
        {"bootstrap": bootstrap, "group": group},
        timeout=60 + JVM_SLACK,
        kafka_version=kafka_version,
    )
    return lines[0]


if __name__ == "__main__":  # `python -m tests.java_oracle build [VERSION ...]` (make jars)
    import sys

    if sys.argv[1:2] != ["build"]:
        print("usage: python -m tests.java_oracle build [KAFKA_VERSION ...]", file=sys.stderr)
        sys.exit(2)
    for version in sys.argv[2:] or [None]:
        reason = unavailable_reason(version)
        if reason is not None:
            print(f"skipping the Java oracle: {reason}", file=sys.stderr)
            sys.exit(0)
        print(f"Java oracle built in {build(version)}")


class TelemetryClient(GroupMember):
    """A Java ``KafkaShareConsumer`` (``kind="share"``: subscribed to ``topic`` in share group
    ``group``, polling and committing) or ``Admin`` client (``kind="admin"``: describeCluster
    every 200 ms; ``push``: its ``enable.metrics.push``, off by default) with client id ``client_id``, kept running like :class:`GroupMember` until
    :meth:`stop` (``TelemetryClients.java``): for the KIP-714 tests, whose broker plugin
    records its pushes."""

    command = "telemetry-client"

    def __init__(
        self,
        bootstrap: str,
        kind: str,
        client_id: str,
        *,
        topic: str = "-",
        group: str = "-",
        push: bool | None = None,
        run_ms: int = 120_000,
    ) -> None:
        super().__init__(bootstrap, topic, group, run_ms=run_ms)
        self.args = _options(
            bootstrap=bootstrap,
            kind=kind,
            client_id=client_id,
            topic=topic,
            group=group,
            push=push,
            run_ms=run_ms,
        )


class KipScript(GroupMember):
    """One of ``KipScripts.java``'s scenarios, kept running like :class:`GroupMember` until
    :meth:`stop`: ``assign-reader`` (a group-less consumer of partitions ``0..partitions-1``
    from the beginning: its records and ``error`` events) or ``flood-producer`` (an idempotent
    producer to partition 0: an ``acked`` event with its offset and wall time ``t`` in ms per
    record, ``error`` events); ``recovery`` / ``trigger_ms``: Java's
    ``metadata.recovery.strategy`` / ``metadata.recovery.rebootstrap.trigger.ms``."""

    def __init__(
        self,
        command: str,
        bootstrap: str,
        topic: str,
        *,
        partitions: int = 1,
        reset: str = "earliest",
        run_ms: int = 120_000,
        recovery: str = "rebootstrap",
        trigger_ms: int = 300_000,
        delivery_timeout_ms: int = 60_000,
        interval_ms: int = 1,
        kafka_version: str | None = None,
    ) -> None:
        super().__init__(bootstrap, topic, "-", run_ms=run_ms, kafka_version=kafka_version)
        self.command = command
        only = (
            {"partitions": partitions, "from": reset}
            if command == "assign-reader"
            else {"delivery_timeout_ms": delivery_timeout_ms, "interval_ms": interval_ms}
        )
        self.args = _options(
            bootstrap=bootstrap,
            topic=topic,
            run_ms=run_ms,
            recovery=recovery,
            trigger_ms=trigger_ms,
            **only,
        )

    def send(self, line: str) -> None:
        """Write one command line (``pause``, ``resume``) to its stdin."""
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
