"""Spark's own Kafka connector (``format("kafka")``) as a reference, and one SparkSession builder.

Tests (``tests/test_spark_reference.py``) and ``benchmarks/bench_spark.py`` compare the
``aiokafka_lite`` data source with Spark's built-in ``spark-sql-kafka-0-10`` connector. That
connector is not part of pyspark; it is a Maven artifact. :func:`reference_jars` asks Maven
(``spark-reference-pom.xml`` beside this file, version pinned) for its runtime classpath once, keeps
only the jars pyspark does not already ship (the connector, its token provider, kafka-clients,
commons-pool2) and caches the list; :func:`spark_session` hands them to the session with
``spark.jars``. Nothing goes through Ivy (``spark.jars.packages``) or any repository but Maven
Central, and later runs need no network while the jars stay in ``~/.m2``.

Spark 4.3.0's connector is not on Maven Central (the newest there is 4.2.0), so
:data:`SPARK_KAFKA_VERSION` pins 4.2.0; it loads and runs on pyspark 4.3.0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = [
    "QUICK_JVM_CONF",
    "SPARK_KAFKA_VERSION",
    "has_reference",
    "ReferenceUnavailable",
    "reference_available",
    "reference_jars",
    "spark_session",
]

#: spark-sql-kafka-0-10_2.13 version used as the reference (see the module docstring).
SPARK_KAFKA_VERSION = "4.2.0"

#: Settings for short test queries: C1-only JIT and the serial GC run them ~2x faster on a cold
#: JVM; a small driver heap; streaming queries stop promptly.
QUICK_JVM_CONF = {
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.streaming.stopTimeout": "10s",
}

_POM = Path(__file__).with_name("spark-reference-pom.xml")
_lock = threading.Lock()


class ReferenceUnavailable(RuntimeError):
    """Spark's Kafka connector jars could not be resolved."""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "aiokafka_lite"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pyspark_jar_names() -> list[str]:
    import pyspark

    return [jar.name for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")]


def _shipped(jar: str, pyspark_jars: list[str]) -> bool:
    """True when pyspark ships an artifact of the same name as ``jar`` (any version).

    ``jar`` is a path in the Maven repository, ``.../<artifactId>/<version>/<file>.jar``.
    """
    artifact = Path(jar).parent.parent.name
    pattern = re.compile(re.escape(artifact) + r"-\d")
    return any(pattern.match(name) for name in pyspark_jars)


def reference_available() -> str | None:
    """None when the connector can be resolved here (Java, Maven, pyspark), else why not."""
    missing = [n for n in ("java", "mvn") if shutil.which(n) is None]
    if missing:
        return f"Spark's Kafka connector needs {' and '.join(missing)} on PATH"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed: pip install 'aiokafka_lite[spark]'"
    return None


def reference_jars(version: str = SPARK_KAFKA_VERSION, *, offline: bool = False) -> list[str]:
    """Paths of the jars ``format("kafka")`` needs beyond pyspark's own, resolved once by Maven.

    The first call downloads into ``~/.m2`` (a few MB, seconds); later calls read the cached
    list while every jar in it exists. Raises :class:`ReferenceUnavailable` on failure.
    """
    out = _cache_dir() / f"spark-sql-kafka-{version}.jars"
    with _lock:
        if out.exists():
            jars = out.read_text().split()
            if jars and all(os.path.exists(p) for p in jars):
                return jars
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ReferenceUnavailable("Maven (mvn) is not on PATH")
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        cmd = [
            mvn, "-q", "-B", "-f", str(_POM), "dependency:build-classpath",
            "-Dmdep.includeScope=runtime", f"-Dspark.kafka.version={version}",
            f"-Dmdep.outputFile={tmp}",
        ]  # fmt: skip
        if offline:
            cmd.insert(1, "-o")
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as exc:
            raise ReferenceUnavailable("Maven did not resolve the connector within 600 s") from exc
        if proc.returncode != 0 or not tmp.exists():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise ReferenceUnavailable(
                f"Maven could not resolve spark-sql-kafka {version}:\n{tail}"
            )
        classpath = tmp.read_text().strip().split(os.pathsep)
        shipped = _pyspark_jar_names()
        jars = [p for p in classpath if p and not _shipped(p, shipped)]
        tmp.write_text("\n".join(jars) + "\n")
        os.replace(tmp, out)  # atomic: a concurrent process reads the old list or the new one
        return jars


def spark_session(
    app_name: str,
    master: str = "local[2]",
    *,
    reference: bool = True,
    conf: dict[str, str] | None = None,
    cds_dump: bool = False,
) -> Any:
    """A SparkSession with ``aiokafka_lite`` registered and, if ``reference``, ``format("kafka")``.

    Python workers run this interpreter and import the same ``aiokafka_lite`` as this process
    (its directory goes first on the workers' ``PYTHONPATH``). The reference jars are added when
    they resolve; check :func:`has_reference` on the result. One session per process: Spark
    reuses an existing one (``getOrCreate``) and ignores new static settings.

    A new driver JVM maps the drivers' class-data-sharing archive (``spark_cds``) when there is
    one; with ``cds_dump`` and none yet it writes it, kept when the session ends through
    :func:`aiokafka_lite.launchers.spark_cds.stop_session`.
    """
    import aiokafka_lite

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    root = str(Path(aiokafka_lite.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    if root not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + path if path else "")

    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from aiokafka_lite.launchers.spark_cds import driver_java_options
    from aiokafka_lite.spark import register

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if reference and reference_available() is None:
        try:
            builder = builder.config("spark.jars", ",".join(reference_jars()))
        except ReferenceUnavailable:
            pass  # has_reference() says so; callers skip or report
    conf = dict(conf or {})
    if SparkContext._gateway is None:  # a new JVM: its options apply
        options = conf.get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = driver_java_options(options, dump=cds_dump)
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def has_reference(session: Any) -> bool:
    """True when ``format("kafka")`` is loadable in ``session`` (the connector jar is on it)."""
    jars = session.sparkContext.getConf().get("spark.jars", "") or ""
    return "spark-sql-kafka-0-10" in jars
