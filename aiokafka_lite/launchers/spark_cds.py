"""A class-data-sharing archive for the Spark driver JVMs the tests and benchmarks start.

A local Spark session's JVM loads some 10,000 classes from pyspark's jars; mapped from a
dynamic CDS archive instead, its start-up and first query take about half the CPU (2-core
machine: 11.5 s -> 6.3 s to a session, 5.0 s -> 2.7 s for the first query). The archive lives
in the user cache (``~/.cache/aiokafka_lite``), named after the java binary, the JVM options and
pyspark's jars (names, sizes, times), so a new pyspark or JDK gets a new one.

No archive yet: :func:`driver_java_options` has the JVM write one when it exits
(``-XX:ArchiveClassesAtExit`` into a file of this process's own) and :func:`stop_session`, which
stops the session *and its JVM*, moves it into place atomically on a clean exit (other processes
may start drivers meanwhile). Drivers that are killed (or never stopped through
:func:`stop_session`) only map an archive that is there (``dump=False``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from aiokafka_lite.launchers.apache_node import _CDS_QUIET, _cache_dir, _cds_dump_works

__all__ = ["driver_java_options", "stop_session"]

#: the archive this process's driver JVM writes at exit: (partial file, final name)
_dumping: tuple[Path, Path] | None = None


def _archive(java_options: str) -> Path | None:
    """The archive's path for drivers started with ``java_options``, or None without pyspark."""
    try:
        import pyspark
    except ImportError:
        return None
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    if not jars:
        return None
    java_home = os.environ.get("JAVA_HOME")
    java = (
        os.path.join(java_home, "bin", "java")
        if java_home and os.path.exists(os.path.join(java_home, "bin", "java"))
        else shutil.which("java")
    )
    if java is None:
        return None
    stats = [f"{j.name}:{j.stat().st_size}:{j.stat().st_mtime_ns}" for j in jars]
    key = "\n".join([os.path.realpath(java), java_options, *stats])
    return _cache_dir() / f"spark-driver-cds-{hashlib.sha256(key.encode()).hexdigest()[:20]}.jsa"


def driver_java_options(java_options: str, *, dump: bool = True) -> str:
    """``java_options`` with the archive's options added: map it when it exists, else (``dump``,
    and the JDK can) write it when the JVM exits, for :func:`stop_session` to keep."""
    global _dumping
    archive = _archive(java_options)
    if archive is None:
        return java_options
    if archive.exists():
        return " ".join([java_options, f"-XX:SharedArchiveFile={archive}", *_CDS_QUIET])
    if not dump or _dumping is not None or not _cds_dump_works("java"):
        return java_options
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    _dumping = (partial, archive)
    return " ".join([java_options, f"-XX:ArchiveClassesAtExit={partial}", *_CDS_QUIET])


def stop_session(session: Any, timeout: float = 120.0) -> None:
    """Stop ``session``; if its JVM is writing the archive, end the JVM too (its gateway exits
    when its standard input closes), wait for it and keep the archive on a clean exit. Calling it
    again, or for another handle on the same session, does nothing."""
    global _dumping
    from pyspark import SparkContext

    if SparkContext._gateway is None:  # this process's JVM is gone already
        return
    session.stop()
    if _dumping is None:
        return
    partial, archive = _dumping
    _dumping = None
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    clean = False
    if proc is not None and proc.stdin is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()
        proc.stdin.close()
        try:
            clean = proc.wait(timeout) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        # the next session in this process starts a JVM of its own
        SparkContext._gateway = None
        SparkContext._jvm = None
    with contextlib.suppress(OSError):
        if clean and partial.exists():
            os.replace(partial, archive)
        else:
            partial.unlink(missing_ok=True)
