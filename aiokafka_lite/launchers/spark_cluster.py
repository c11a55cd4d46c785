"""Spark where it runs for real: a standalone cluster and a Spark Connect server, from pyspark.

Tests (``tests/test_spark_cluster.py``) and ``benchmarks/bench_spark.py --cluster`` start them.
Everything comes from the pip package ``pyspark`` (its ``bin/spark-class`` and ``jars/``, which
include ``spark-connect_2.13``): the ``sbin/start-master.sh`` family is not in the package, so
the master, the workers and the Connect server are launched directly as ``java`` processes
through ``spark-class``, each in its own process group (a worker's executors are its children
and go with it). Java 17+ must be on PATH or in ``JAVA_HOME``.

Python workers everywhere run this interpreter and import the same ``aiokafka_lite`` as this
process (its directory goes first on their ``PYTHONPATH``), as a cluster deployment would have
the package installed on every node.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

from aiokafka_lite.launchers.spark_cds import driver_java_options

__all__ = ["ConnectServer", "SparkProcessError", "StandaloneCluster", "free_port", "python_env"]

#: daemon JVM settings: a small heap, C1-only JIT and the serial GC (a cold JVM starts faster)
_DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkProcessError(RuntimeError):
    """A Spark process did not start (its log tail is in the message)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> str:
    """The pyspark package's directory, a complete SPARK_HOME (bin/, jars/)."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent)


def python_env() -> dict[str, str]:
    """Environment for Spark processes whose Python workers must run this ``aiokafka_lite``."""
    import aiokafka_lite

    root = str(Path(aiokafka_lite.__file__).resolve().parent.parent)
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    env = dict(os.environ)
    env.update(
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join([root, *path]),
    )
    return env


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class _Proc:
    """One JVM started through spark-class / spark-submit in its own process group."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(log_dir),
        )

    def running(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the process group, SIGKILL after ``timeout``."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        if not self._log.closed:
            self._log.close()


class StandaloneCluster:
    """A Spark standalone master and ``workers`` one-core workers on 127.0.0.1.

    ``with StandaloneCluster(workers=2) as cluster:`` then ``cluster.master_url``
    (``spark://127.0.0.1:P``) for ``SparkSession.builder.master(...)``.
    """

    def __init__(
        self, workers: int = 2, *, cores: int = 1, memory: str = "1g", work_dir: str | None = None
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._tmp = None if work_dir else tempfile.TemporaryDirectory(prefix="aiokafka-lite-spark-")
        self.dir = Path(work_dir or self._tmp.name)  # type: ignore[union-attr]
        self.port = 0
        self.webui_port = 0
        self._procs: list[_Proc] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spark_class(self, name: str, *args: str) -> _Proc:
        env = python_env()
        env["SPARK_DAEMON_MEMORY"] = "256m"
        # the drivers' class-data-sharing archive, when there is one: the same jars, the same
        # JVM options (spark_cds)
        env["SPARK_DAEMON_JAVA_OPTS"] = driver_java_options(_DAEMON_JAVA_OPTS, dump=False)
        env["SPARK_LOG_DIR"] = str(self.dir)
        env["SPARK_LOCAL_DIRS"] = str(self.dir / "local")  # executors' scratch space: ours too
        cmd = [os.path.join(env["SPARK_HOME"], "bin", "spark-class"), *args]
        proc = _Proc(name, cmd, env, self.dir)
        self._procs.append(proc)
        return proc

    def state(self) -> dict[str, Any]:
        """The master's JSON status (``/json/``): workers, alive workers, applications."""
        url = f"http://127.0.0.1:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as resp:
            result: dict[str, Any] = json.load(resp)
            return result

    def alive_workers(self) -> int:
        try:
            state = self.state()
        except OSError:
            return 0
        return sum(1 for w in state.get("workers", ()) if w.get("state") == "ALIVE")

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        """Launch the master and the workers; return once every worker registered."""
        self.launch()
        return self.wait_ready(timeout)

    def launch(self, timeout: float = 60.0) -> None:
        """Start the master, wait until it listens, start the workers (then :meth:`wait_ready`).

        A worker that finds no master retries its registration only after 2.5-7.5 s (Spark's
        fuzzed backoff), so starting the workers before the master listens costs seconds.
        """
        self.port, self.webui_port = free_port(), free_port()
        master = self._spark_class(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", str(self.webui_port),
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not _listening(self.port):
            if not master.running() or time.monotonic() > deadline:
                self.stop()
                why = "exited" if not master.running() else f"is not listening after {timeout} s"
                raise SparkProcessError(f"the Spark master {why}:\n{master.log_tail()}")
            time.sleep(0.1)
        for i in range(self.workers):
            work = self.dir / f"worker-{i}"
            work.mkdir(exist_ok=True)
            self._spark_class(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker", self.master_url,
                "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                "--webui-port", str(free_port()), "--work-dir", str(work),
            )  # fmt: skip

    def wait_ready(self, timeout: float = 90.0) -> StandaloneCluster:
        """Wait until every worker registered with the master (stop all and raise if not)."""
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            dead = [p for p in self._procs if not p.running()]
            if dead or time.monotonic() > deadline:
                culprit = dead[0] if dead else self._procs[0]
                self.stop()
                why = (
                    "exited" if dead else f"has {self.workers} workers not alive after {timeout} s"
                )
                raise SparkProcessError(f"Spark {culprit.name} {why}:\n{culprit.log_tail()}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        for proc in reversed(self._procs):  # workers (and their executors) first
            proc.stop()
        self._procs.clear()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ConnectServer:
    """A Spark Connect server (``spark-connect_2.13``, shipped in pyspark's jars) on 127.0.0.1.

    Its driver runs ``master`` (default ``local[2]``); ``url`` (``sc://127.0.0.1:P``) is for
    ``SparkSession.builder.remote(...)``. Python data sources a client registers run in the
    server's Python workers, which import this process's ``aiokafka_lite``.
    """

    CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

    def __init__(
        self, master: str = "local[2]", *, conf: dict[str, str] | None = None, log_dir: str
    ) -> None:
        self.master = master
        self.conf = dict(conf or {})
        self.dir = Path(log_dir)
        self.port = 0
        self._proc: _Proc | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> ConnectServer:
        """Launch the server; return once it accepts connections."""
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the server process without waiting (then :meth:`wait_ready`)."""
        self.port = free_port()
        env = python_env()
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "1g",
            "spark.driver.extraJavaOptions": driver_java_options(_DAEMON_JAVA_OPTS, dump=False),
            "spark.executorEnv.PYTHONPATH": env["PYTHONPATH"],
            "spark.local.dir": str(self.dir / "local"),
            **self.conf,
        }
        cmd = [
            os.path.join(env["SPARK_HOME"], "bin", "spark-submit"),
            "--class", self.CLASS, "--name", "aiokafka_lite Connect server",
            "--master", self.master,
        ]  # fmt: skip
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd.append("spark-internal")
        self._proc = _Proc("connect-server", cmd, env, self.dir)

    def wait_ready(self, timeout: float = 90.0) -> ConnectServer:
        """Wait until the server accepts connections on its port (stop it and raise if not)."""
        assert self._proc is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while not _listening(self.port):
            if not self._proc.running() or time.monotonic() > deadline:
                tail = self._proc.log_tail()
                self.stop()
                raise SparkProcessError(f"the Spark Connect server did not start:\n{tail}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()
            self._proc = None

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
