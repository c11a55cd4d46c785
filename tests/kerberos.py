"""An MIT Kerberos KDC on loopback for the GSSAPI tests, made in a temporary directory.

``MitKdc(realm).start()`` writes its own ``krb5.conf`` and ``kdc.conf``, creates the database
(``kdb5_util create -s``), starts ``krb5kdc`` in the foreground on a free port (UDP and TCP) and
waits until it answers. ``add_principal(name, keytab)`` makes a principal with a random key and
exports it to a keytab (``kadmin.local``). ``env()`` is what a client process (or this one) sets
to use it: ``KRB5_CONFIG``, and a private ``KRB5CCNAME``. Nothing outside the directory is read
or written; ``stop()`` ends the KDC (its own process only) and removes the directory.

:func:`kdc_unavailable` gives the reason the KDC cannot run here (the Debian packages
``krb5-kdc``, ``krb5-admin-server``, ``krb5-user``: ``.ci/run`` installs them), or None.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from aiokafka_lite.launchers.embedded import free_port

_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def _which(tool: str) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(_SBIN)
    return shutil.which(tool, path=path)


def kdc_unavailable() -> str | None:
    """None when MIT Kerberos's KDC tools are installed, else why the GSSAPI tests skip."""
    missing = [t for t in _TOOLS if _which(t) is None]
    if missing:
        return (
            f"MIT Kerberos tools missing ({', '.join(missing)}): apt-get install krb5-kdc "
            "krb5-admin-server krb5-user"
        )
    return None


class MitKdc:
    """A throw-away MIT KDC for ``realm`` on 127.0.0.1."""

    def __init__(self, realm: str = "AIOKAFKA.TEST", host: str = "127.0.0.1") -> None:
        self.realm = realm
        self.host = host
        self.dir = Path(tempfile.mkdtemp(prefix="aiokafka_lite-kdc-"))
        self.port = free_port(host)
        self.krb5_conf = self.dir / "krb5.conf"
        self.kdc_conf = self.dir / "kdc.conf"
        self.ccache = self.dir / "ccache"
        self._proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """Environment variables pointing Kerberos clients at this KDC (and a private ccache)."""
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            "KRB5CCNAME": f"FILE:{self.ccache}",
        }

    def _run(self, *args: str, stdin: str | None = None) -> str:
        tool = _which(args[0]) or args[0]
        env = {**os.environ, **self.env()}
        res = subprocess.run(
            [tool, *args[1:]], input=stdin, env=env, capture_output=True, text=True, timeout=60
        )
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {res.stderr.strip() or res.stdout}")
        return res.stdout

    def start(self) -> MitKdc:
        """Configure, create the database, run krb5kdc and wait until it answers (30 s)."""
        d = self.dir
        self.krb5_conf.write_text(
            f"[libdefaults]\n default_realm = {self.realm}\n dns_lookup_realm = false\n"
            " dns_lookup_kdc = false\n rdns = false\n dns_canonicalize_hostname = false\n"
            " udp_preference_limit = 1\n forwardable = false\n ticket_lifetime = 1h\n"
            f"[realms]\n {self.realm} = {{\n  kdc = {self.host}:{self.port}\n }}\n"
            f"[domain_realm]\n {self.host} = {self.realm}\n localhost = {self.realm}\n"
        )
        self.kdc_conf.write_text(
            f"[kdcdefaults]\n kdc_ports = {self.port}\n kdc_tcp_ports = {self.port}\n"
            f"[realms]\n {self.realm} = {{\n  database_name = {d}/principal\n"
            f"  key_stash_file = {d}/stash\n  acl_file = {d}/kadm5.acl\n"
            f"  kdc_ports = {self.port}\n  kdc_tcp_ports = {self.port}\n  max_life = 1h\n"
            "  supported_enctypes = aes256-cts-hmac-sha1-96:normal "
            "aes128-cts-hmac-sha1-96:normal\n }\n"
            f"[logging]\n kdc = FILE:{d}/kdc.log\n"
        )
        (d / "kadm5.acl").write_text("")
        self._run("kdb5_util", "-r", self.realm, "create", "-s", "-W", stdin="master\nmaster\n")
        log = open(d / "krb5kdc.out", "ab")  # noqa: SIM115 - owned by the child
        self._proc = subprocess.Popen(
            [_which("krb5kdc") or "krb5kdc", "-n", "-r", self.realm],
            env={**os.environ, **self.env()},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + 30
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"krb5kdc exited: {self.log_tail()}")
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"krb5kdc not listening: {self.log_tail()}") from None
                time.sleep(0.1)

    def add_principal(self, name: str, keytab: Path | None = None) -> str:
        """Create ``name@REALM`` with a random key; export it to ``keytab`` when given."""
        principal = f"{name}@{self.realm}"
        self._run("kadmin.local", "-r", self.realm, "-q", f"addprinc -randkey {principal}")
        if keytab is not None:
            self._run("kadmin.local", "-r", self.realm, "-q", f"ktadd -k {keytab} {principal}")
        return principal

    def add_principal_keys(self, name: str, keytab: Path) -> None:
        """Export ``name@REALM`` to ``keytab`` again: new random keys, older keytabs go stale."""
        self._run("kadmin.local", "-r", self.realm, "-q", f"ktadd -k {keytab} {name}@{self.realm}")

    def kinit(self, principal: str, keytab: Path, ccache: Path | None = None) -> None:
        """Get a ticket-granting ticket for ``principal`` from ``keytab`` into ``ccache``
        (default :attr:`ccache`)."""
        self._run(
            "kinit", "-c", f"FILE:{ccache or self.ccache}", "-k", "-t", str(keytab), principal
        )

    def log_tail(self, lines: int = 20) -> str:
        """The end of the KDC's logs."""
        out = []
        for name in ("krb5kdc.out", "kdc.log"):
            path = self.dir / name
            if path.exists():
                out += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)

    def stop(self) -> None:
        """End the KDC and remove its directory."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
