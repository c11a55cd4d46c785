"""SASL authentication for :class:`~aiokafka_lite.conn.BrokerConnection` (which it never imports).

Runs after ApiVersions: SaslHandshake (choose the mechanism) then one or more
SaslAuthenticate round trips carrying the mechanism's tokens. Mechanisms: ``PLAIN``,
``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802 / RFC 7677), ``OAUTHBEARER`` (RFC 7628,
KIP-255) and ``GSSAPI`` (Kerberos V5, RFC 4752, through the ``gssapi`` package, extra
``gssapi``). The message building is sans-I/O (:class:`ScramClient`, :class:`OAuthBearerClient`,
:func:`oauthbearer_client_response`, :class:`GssapiClient` given a GSS-API context);
:func:`prepare` does the I/O a mechanism needs before the exchange (awaiting the token provider;
for GSSAPI, acquiring credentials and the service ticket from the KDC in a worker thread) and
:func:`exchange` runs the round trips through a ``send`` callable the connection hands it,
returning the session lifetime the broker granted (``session_lifetime_ms``, SaslAuthenticate
v1+, 0 when the session does not expire). The settings come as one :class:`SaslSettings`.

The same two steps re-authenticate an open connection (KIP-368): the connection calls
:func:`prepare` while its traffic goes on, then holds new requests for the duration of
:func:`exchange` only.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import errors as Errors
from .protocol import messages as m

__all__ = [
    "MECHANISMS",
    "SaslSettings",
    "SaslSend",
    "GssapiClient",
    "OAuthBearerClient",
    "PlainClient",
    "ScramClient",
    "authenticate",
    "exchange",
    "oauthbearer_client_response",
    "prepare",
]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")

#: RFC 7628 section 3.1: ``key = 1*(ALPHA)``, ``value = *(VCHAR / SP / HTAB / CR / LF)``
_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7E \t\r\n]*")
#: RFC 6750 b64token, the bearer token's syntax
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_KVSEP = "\x01"

#: sends one SaslHandshake/SaslAuthenticate request, due by a deadline (the event loop's
#: clock), and returns its answer: the connection's ``_sasl_send``
SaslSend = Callable[[Any, float], Awaitable[Any]]


@dataclass(frozen=True)
class SaslSettings:
    """What a SASL login needs from its connection: the mechanism, the credentials (the token
    provider is duck-typed: ``token()``, ``extensions()``) and the broker's host (GSSAPI's
    default service host)."""

    host: str
    mechanism: str | None = None
    plain_username: str | None = None
    plain_password: str | None = None
    oauth_token_provider: Any = None
    kerberos_service_name: str | None = "kafka"
    kerberos_domain_name: str | None = None


def _remaining_s(deadline: float) -> float:
    """Seconds left until ``deadline`` (at least 1 ms)."""
    return max(deadline - asyncio.get_running_loop().time(), 0.001)


class ScramClient:
    """The client side of a SCRAM exchange: first message, final message, server check."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        if mechanism == "SCRAM-SHA-256":
            self._hash = hashlib.sha256
            self._hname = "sha256"
        elif mechanism == "SCRAM-SHA-512":
            self._hash = hashlib.sha512
            self._hname = "sha512"
        else:
            raise ValueError(f"not a SCRAM mechanism: {mechanism!r}")
        self.username = username
        self.password = password
        self.nonce = nonce or base64.b64encode(secrets.token_bytes(18)).decode()
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={self.nonce}"
        self._auth_message = ""
        self._server_signature = b""

    def first_message(self) -> bytes:
        """client-first-message (no channel binding, no authzid)."""
        return ("n,," + self._first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        """client-final-message with the proof, computed from server-first-message."""
        text = server_first.decode()
        attrs = _parse(text)
        if "e" in attrs:
            raise Errors.KafkaError(f"SCRAM server error: {attrs['e']}")
        try:
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError) as exc:
            raise Errors.KafkaProtocolError(
                f"malformed SCRAM server-first message: {text!r}"
            ) from exc
        if not nonce.startswith(self.nonce) or iterations < 1:
            raise Errors.KafkaProtocolError("SCRAM server nonce/iterations invalid")
        salted = hashlib.pbkdf2_hmac(self._hname, self.password.encode(), salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = self._hash(client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._first_bare},{text},{without_proof}"
        signature = self._hmac(stored_key, self._auth_message.encode())
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(
            self._hmac(salted, b"Server Key"), self._auth_message.encode()
        )
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Check the server's signature (proves the server knows the password too)."""
        attrs = _parse(server_final.decode())
        if "e" in attrs:
            raise Errors.KafkaError(f"SCRAM authentication failed: {attrs['e']}")
        if base64.b64decode(attrs.get("v", "")) != self._server_signature:
            raise Errors.KafkaError("SCRAM server signature mismatch")

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self._hash).digest()


def _parse(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        if len(part) >= 2 and part[1] == "=":
            out[part[0]] = part[2:]
    return out


def oauthbearer_client_response(
    kvpairs: Iterable[tuple[str, str]], authzid: str | None = None
) -> bytes:
    """RFC 7628 ``client-resp``: the GS2 header then ``key=value`` pairs, each ended by 0x01,
    then a final 0x01. Keys must be letters, values printable (VCHAR, SP, HTAB, CR, LF);
    raises ``IllegalArgumentError`` otherwise."""
    if authzid is None:
        header = "n,,"
    else:
        name = authzid.replace("=", "=3D").replace(",", "=2C")
        header = f"n,a={name},"
    out = [header, _KVSEP]
    for key, value in kvpairs:
        if not _KEY.fullmatch(key):
            raise Errors.IllegalArgumentError(
                f"OAUTHBEARER key {key!r} is invalid: RFC 7628 keys are letters only"
            )
        if not isinstance(value, str) or not _VALUE.fullmatch(value):
            raise Errors.IllegalArgumentError(
                f"OAUTHBEARER value for {key!r} is invalid: printable characters only"
            )
        out += [key, "=", value, _KVSEP]
    out.append(_KVSEP)
    return "".join(out).encode()


class PlainClient:
    """PLAIN (RFC 4616): one message, no authorization id."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._msg = b"\0" + username.encode() + b"\0" + password.encode()

    def first_message(self) -> bytes:
        """The only message."""
        return self._msg

    def next_message(self, server: bytes) -> bytes | None:
        """Nothing follows."""
        return None


class _ScramExchange:
    """Drives :class:`ScramClient` through the two round trips."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._scram = ScramClient(mechanism, username, password)
        self._step = 0

    def first_message(self) -> bytes:
        return self._scram.first_message()

    def next_message(self, server: bytes) -> bytes | None:
        self._step += 1
        if self._step == 1:
            return self._scram.final_message(server)
        self._scram.verify_server_final(server)
        return None


class OAuthBearerClient:
    """The client side of OAUTHBEARER (RFC 7628) as Kafka speaks it (KIP-255, KIP-342).

    ``first_message()`` is ``n,,\x01auth=Bearer <token>\x01<ext>=<value>\x01...\x01``. The broker
    answers success with empty bytes; it answers a refused token with an error challenge (a
    JSON document such as ``{"status":"invalid_token"}``), to which the client must reply with
    a lone 0x01 (RFC 7628 3.2.3) so that the broker fails the exchange with its error message:
    ``next_message`` returns that 0x01 and :meth:`refusal` the challenge. A token that is not an
    RFC 6750 b64token, or an extension named ``auth``, raises ``IllegalArgumentError``.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, token: str, extensions: Mapping[str, Any] | None = None) -> None:
        if not isinstance(token, str) or not _B64TOKEN.fullmatch(token):
            raise Errors.IllegalArgumentError(
                "the token provider returned "
                + (f"a {type(token).__name__}" if not isinstance(token, str) else "a token")
                + " that is not a bearer token (RFC 6750 b64token: letters, digits, -._~+/ "
                "then '=' padding)"
            )
        ext = {str(k): str(v) for k, v in (extensions or {}).items()}
        if "auth" in ext:
            raise Errors.IllegalArgumentError("'auth' is reserved: not a valid extension name")
        self._msg = oauthbearer_client_response([("auth", f"Bearer {token}"), *ext.items()])
        self._challenge: bytes | None = None

    def first_message(self) -> bytes:
        """The client's initial response."""
        return self._msg

    def next_message(self, server: bytes) -> bytes | None:
        """None when ``server`` is the empty success answer; 0x01 after an error challenge."""
        if self._challenge is not None:
            # the broker must fail the exchange after our 0x01; it did not
            raise Errors.SaslAuthenticationFailed(self.refusal())
        if not server:
            return None
        self._challenge = bytes(server)
        return _KVSEP.encode()

    def refusal(self, error_message: str | None = None) -> str:
        """The error message for a refused token: the broker's final error message, else its
        error challenge (Apache Kafka sends the same JSON document in both)."""
        text = error_message or (self._challenge or b"").decode("utf-8", "replace")
        return f"the broker refused the OAUTHBEARER token: {text}"


class GssapiClient:
    """The client side of SASL GSSAPI (RFC 4752) as Kafka speaks it (KIP-43 framing).

    Sans-I/O over an initiating GSS-API security context (``gssapi.SecurityContext``, Kerberos
    mechanism, mutual authentication): :meth:`start` makes the first context token (the
    Kerberos AP-REQ; this may block: it may contact the KDC, so run it off the event loop), then
    each :meth:`next_message` steps the context with the broker's token (the AP-REP, verified
    locally) until it is complete. The broker then sends its security-layer offer wrapped by the
    context (4 octets: the layers it supports, its maximum buffer size); the client unwraps it,
    chooses "no security layer" (Kafka never uses one: TLS protects the connection when wanted)
    and answers with the wrapped 4 octets ``01 00 00 00`` followed by ``authzid`` (empty: act as
    the authenticated principal). The broker's empty answer ends the exchange. GSS-API failures
    raise ``AuthenticationFailedError`` with the GSS-API message.
    """

    mechanism = "GSSAPI"
    #: RFC 4752 section 3.3: the "no security layer" bit of the offer and the answer
    NO_SECURITY_LAYER = 0x01

    def __init__(self, context: Any, authzid: str = "", service: str = "") -> None:
        self._ctx = context
        self._authzid = authzid.encode()
        self._service = service
        self._first: bytes | None = None
        self._state = "context"  # -> "layer" -> "done"

    def start(self) -> None:
        """Make the first context token (blocking: may ask the KDC for a service ticket)."""
        self._first = self._call(self._ctx.step, None) or b""
        if self._ctx.complete:
            self._state = "layer"

    def first_message(self) -> bytes:
        """The first context token (:meth:`start` must have run)."""
        if self._first is None:
            raise Errors.IllegalStateError("GssapiClient.start() has not run")
        return self._first

    def next_message(self, server: bytes) -> bytes | None:
        """The answer to the broker's token; None once the exchange is over."""
        if self._state == "context":
            token = self._call(self._ctx.step, server)
            if self._ctx.complete:
                self._state = "layer"
            return token or b""
        if self._state == "layer":
            offer = bytes(self._call(self._ctx.unwrap, server).message)
            if len(offer) != 4:
                raise Errors.KafkaProtocolError(
                    f"GSSAPI security-layer offer of {len(offer)} bytes (RFC 4752 says 4)"
                )
            if not offer[0] & self.NO_SECURITY_LAYER:
                raise Errors.AuthenticationFailedError(
                    f"the broker requires a GSSAPI security layer (offer {offer[0]:#04x}); "
                    "Kafka clients support only 'no security layer' (use SASL_SSL to encrypt)"
                )
            self._state = "done"
            answer = bytes([self.NO_SECURITY_LAYER, 0, 0, 0]) + self._authzid
            return bytes(self._call(self._ctx.wrap, answer, False).message)
        return None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Errors.KafkaError:
            raise
        except Exception as exc:  # gssapi.exceptions.GSSError and its subclasses
            if type(exc).__module__.split(".")[0] != "gssapi":
                raise
            target = f" for service {self._service}" if self._service else ""
            raise Errors.AuthenticationFailedError(
                f"GSSAPI authentication{target} failed: {exc}"
            ) from exc


def _gssapi_module() -> Any:
    try:
        import gssapi
    except ImportError as exc:
        raise Errors.MissingExtraError(
            "sasl_mechanism='GSSAPI' needs the gssapi package: pip install "
            "'aiokafka_lite[gssapi]' (it builds against the system's Kerberos: libkrb5-dev "
            "on Debian/Ubuntu, krb5-devel on Fedora)"
        ) from exc
    return gssapi


def _gssapi_start(gssapi: Any, service: str, host: str) -> GssapiClient:
    """Blocking part of GSSAPI: the target name, the context, its first token."""
    principal = f"{service}@{host}"
    client = GssapiClient(None, service=principal)
    name = client._call(gssapi.Name, principal, gssapi.NameType.hostbased_service)
    name = client._call(name.canonicalize, gssapi.MechType.kerberos)
    client._ctx = client._call(
        gssapi.SecurityContext, name=name, usage="initiate", mech=gssapi.MechType.kerberos
    )
    client.start()
    return client


async def _prepare_gssapi(settings: SaslSettings, deadline: float) -> GssapiClient:
    gssapi = _gssapi_module()
    service = settings.kerberos_service_name or "kafka"
    host = settings.kerberos_domain_name or settings.host
    timeout = _remaining_s(deadline)
    # a daemon thread of its own, not the loop's default executor: a KDC that never answers
    # keeps it blocked (libkrb5's own timeouts are long) after our deadline has passed, and
    # must not hold up asyncio.run()'s executor shutdown or the interpreter's exit
    done: concurrent.futures.Future[GssapiClient] = concurrent.futures.Future()

    def run() -> None:
        if not done.set_running_or_notify_cancel():
            return
        try:
            done.set_result(_gssapi_start(gssapi, service, host))
        except BaseException as exc:  # a thread, not a task: handed to the awaiting task
            done.set_exception(exc)

    threading.Thread(target=run, name="aiokafka_lite-gssapi", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.wrap_future(done), timeout)
    except asyncio.TimeoutError:
        raise Errors.KafkaTimeoutError(
            f"GSSAPI: no Kerberos service ticket for {service}@{host} within "
            f"{timeout * 1000:.0f} ms (is the KDC reachable?)"
        ) from None


Exchange = Any  # PlainClient | _ScramExchange | OAuthBearerClient | GssapiClient


async def prepare(settings: SaslSettings, deadline: float) -> Exchange:
    """Everything a mechanism needs before its exchange; awaits the token provider (bounded by
    ``deadline``: a provider that raises or hangs gives a KafkaError)."""
    mechanism = (settings.mechanism or "PLAIN").upper()
    if mechanism not in MECHANISMS:
        raise Errors.UnsupportedSaslMechanismError(
            f"sasl_mechanism {mechanism!r} not supported (use one of {', '.join(MECHANISMS)})"
        )
    user = settings.plain_username or ""
    password = settings.plain_password or ""
    if mechanism == "PLAIN":
        return PlainClient(user, password)
    if mechanism.startswith("SCRAM-"):
        return _ScramExchange(mechanism, user, password)
    if mechanism == "GSSAPI":
        return await _prepare_gssapi(settings, deadline)
    provider = settings.oauth_token_provider
    if provider is None:
        raise Errors.KafkaConfigurationError("OAUTHBEARER needs sasl_oauth_token_provider")
    timeout = _remaining_s(deadline)
    try:
        token = await asyncio.wait_for(provider.token(), timeout)
        extensions = (
            provider.extensions() if callable(getattr(provider, "extensions", None)) else {}
        )
    except asyncio.TimeoutError:
        raise Errors.KafkaTimeoutError(
            f"sasl_oauth_token_provider.token() did not return within {timeout * 1000:.0f} ms"
        ) from None
    except Errors.KafkaError:
        raise
    except Exception as exc:
        raise Errors.AuthenticationFailedError(
            f"sasl_oauth_token_provider failed: {exc!r}"
        ) from exc
    return OAuthBearerClient(token, extensions)


async def exchange(send: SaslSend, ex: Exchange, deadline: float) -> int:
    """SaslHandshake then the SaslAuthenticate round trips of ``ex``; returns the broker's
    ``session_lifetime_ms`` (0: the session does not expire)."""
    hs = await send(m.SaslHandshakeRequest(mechanism=ex.mechanism), deadline)
    if hs.error_code:
        raise Errors.for_code(hs.error_code)(
            f"SASL mechanism {ex.mechanism} rejected; broker enables {hs.mechanisms}"
        )
    token: bytes | None = ex.first_message()
    lifetime = 0
    while token is not None:
        resp = await send(m.SaslAuthenticateRequest(auth_bytes=token), deadline)
        if resp.error_code:
            message = resp.error_message or "SASL authentication failed"
            if isinstance(ex, OAuthBearerClient) and ex._challenge is not None:
                message = ex.refusal(resp.error_message)
            raise Errors.for_code(resp.error_code)(message)
        lifetime = int(resp.session_lifetime_ms or 0) or lifetime
        token = ex.next_message(bytes(resp.auth_bytes or b""))
    return lifetime


async def authenticate(settings: SaslSettings, send: SaslSend, deadline: float) -> int:
    """:func:`prepare` then :func:`exchange` on a freshly negotiated connection."""
    return await exchange(send, await prepare(settings, deadline), deadline)
