"""SASL authentication for :class:`~aiokafka_lite.conn.BrokerConnection`.

Runs after ApiVersions: SaslHandshake (choose the mechanism) then one or more
SaslAuthenticate round trips carrying the mechanism's tokens. Mechanisms: ``PLAIN`` and
``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802 / RFC 7677). :class:`ScramClient` is sans-I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING

from . import errors as Errors
from .protocol import messages as m

if TYPE_CHECKING:
    from .conn import BrokerConnection

__all__ = ["authenticate", "ScramClient", "MECHANISMS"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


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


async def authenticate(conn: BrokerConnection, deadline: float) -> None:
    """Run SaslHandshake + SaslAuthenticate on a freshly negotiated connection."""
    mechanism = (conn.sasl_mechanism or "PLAIN").upper()
    if mechanism not in MECHANISMS:
        raise Errors.UnsupportedSaslMechanismError(
            f"sasl_mechanism {mechanism!r} not supported (use one of {', '.join(MECHANISMS)})"
        )
    user = conn.sasl_plain_username or ""
    password = conn.sasl_plain_password or ""

    async def call(request: object) -> object:
        return await conn.send(request, timeout_ms=conn._remaining_ms(deadline))

    hs = await call(m.SaslHandshakeRequest(mechanism=mechanism))
    if hs.error_code:  # type: ignore[attr-defined]
        raise Errors.for_code(hs.error_code)(  # type: ignore[attr-defined]
            f"SASL mechanism {mechanism} rejected; broker enables {hs.mechanisms}"  # type: ignore[attr-defined]
        )

    async def step(token: bytes) -> bytes:
        resp = await call(m.SaslAuthenticateRequest(auth_bytes=token))
        if resp.error_code:  # type: ignore[attr-defined]
            raise Errors.for_code(resp.error_code)(  # type: ignore[attr-defined]
                resp.error_message or "SASL authentication failed"  # type: ignore[attr-defined]
            )
        return bytes(resp.auth_bytes or b"")  # type: ignore[attr-defined]

    if mechanism == "PLAIN":
        await step(b"\0" + user.encode() + b"\0" + password.encode())
        return
    scram = ScramClient(mechanism, user, password)
    server_first = await step(scram.first_message())
    server_final = await step(scram.final_message(server_first))
    scram.verify_server_final(server_final)
