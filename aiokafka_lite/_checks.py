"""A client's connection settings checked at construction: the bootstrap addresses
(:func:`parse_bootstrap`) and the security arguments (:func:`check_security_args`, aiokafka's
rules and exception class), so a bad setting fails in the constructor, not at the first connect.
"""

from __future__ import annotations

import importlib.util
import ssl
from collections.abc import Iterable

from . import errors as Errors
from .auth import AbstractTokenProvider

__all__ = ["SASL_MECHANISMS", "SECURITY_PROTOCOLS", "check_security_args", "parse_bootstrap"]


def _port(text: str, item: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise Errors.KafkaConfigurationError(f"bad port in bootstrap address {item!r}")
    return int(text)


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2"`` or ``["h1:9092", "[::1]:9093"]`` -> ``[(host, port), ...]``."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        host, port = item, 9092
        if item.startswith("["):  # [ipv6]:port
            end = item.find("]")
            if end < 0:
                raise Errors.KafkaConfigurationError(f"bad bootstrap address {item!r}")
            host, rest = item[1:end], item[end + 1 :]
            if rest.startswith(":"):
                port = _port(rest[1:], item)
        elif item.count(":") == 1:
            host, p = item.split(":")
            port = _port(p, item)
        out.append((host, port))
    if not out:
        raise Errors.KafkaConfigurationError(f"no bootstrap servers in {servers!r}")
    return out


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def check_security_args(
    security_protocol: str,
    ssl_context: ssl.SSLContext | None,
    sasl_mechanism: str | None,
    sasl_plain_username: str | None,
    sasl_plain_password: str | None,
    sasl_oauth_token_provider: object = None,
) -> None:
    """Refuse inconsistent security settings at construction, with aiokafka's rules and
    exception class (ValueError). aiokafka checks the OAUTHBEARER provider when it opens a
    connection (start()); this checks it at construction already."""
    if security_protocol not in SECURITY_PROTOCOLS:
        raise ValueError(
            "`security_protocol` should be SSL or PLAINTEXT (or SASL_PLAINTEXT, SASL_SSL), "
            f"got {security_protocol!r}"
        )
    if security_protocol in ("SSL", "SASL_SSL") and ssl_context is None:
        raise ValueError(
            f"`ssl_context` is mandatory if security_protocol=='SSL' (or 'SASL_SSL'; "
            f"got {security_protocol!r}): see aiokafka_lite.helpers.create_ssl_context"
        )
    if security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = sasl_mechanism or "PLAIN"
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(
                f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, got {mechanism!r}"
            )
        if mechanism == "GSSAPI" and importlib.util.find_spec("gssapi") is None:
            # not imported here (it loads libkrb5): the exchange imports it at connect
            raise Errors.MissingExtraError(
                "sasl_mechanism='GSSAPI' needs the gssapi package: "
                "pip install 'aiokafka_lite[gssapi]'"
            )
        if mechanism == "PLAIN" and (sasl_plain_username is None or sasl_plain_password is None):
            raise ValueError("sasl_plain_username and sasl_plain_password required for PLAIN sasl")
        if mechanism == "OAUTHBEARER" and not isinstance(
            sasl_oauth_token_provider, AbstractTokenProvider
        ):
            raise ValueError(
                "sasl_oauth_token_provider needs to be provided implementing "
                "aiokafka_lite.abc.AbstractTokenProvider"
                + (
                    f" (got {type(sasl_oauth_token_provider).__name__})"
                    if sasl_oauth_token_provider is not None
                    else ""
                )
            )
