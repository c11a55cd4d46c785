"""The sans-I/O SASL/OAUTHBEARER messages (aiokafka_lite._sasl), against RFC 7628's examples.

The golden messages are RFC 7628's own (section 4: the base64 the IMAP examples exchange),
decoded; the Kafka form is Apache Kafka's (``OAuthBearerClientInitialResponse``: ``auth``
first, then the KIP-342 extensions).
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokafka_lite import errors as Errors
from aiokafka_lite._sasl import (
    GssapiClient,
    OAuthBearerClient,
    PlainClient,
    oauthbearer_client_response,
)

# RFC 7628 4.1 (successful IMAP exchange): the client's initial response
RFC_4_1 = (
    "bixhPXVzZXJAZXhhbXBsZS5jb20sAWhvc3Q9c2VydmVyLmV4YW1wbGUuY29tAXBvcnQ9MTQzAWF1dGg9QmVhcmVy"
    "IHZGOWRmdDRxbVRjMk52YjNSbGNrQmhiSFJoZG1semRHRXVZMjl0Q2c9PQEB"
)
RFC_TOKEN = "vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg=="
# RFC 7628 4.3 (failed exchange): the server's error challenge and the client's answer to it
RFC_4_3_CHALLENGE = (
    "eyJzdGF0dXMiOiJpbnZhbGlkX3Rva2VuIiwic2NvcGUiOiJleGFtcGxlX3Njb3BlIiwib3BlbmlkLWNvbmZpZ3Vy"
    "YXRpb24iOiJodHRwczovL2V4YW1wbGUuY29tLy53ZWxsLWtub3duL29wZW5pZC1jb25maWd1cmF0aW9uIn0="
)
RFC_4_3_ANSWER = "AQ=="


def test_client_response_matches_rfc_7628_example():
    msg = oauthbearer_client_response(
        [("host", "server.example.com"), ("port", "143"), ("auth", f"Bearer {RFC_TOKEN}")],
        authzid="user@example.com",
    )
    assert msg == base64.b64decode(RFC_4_1)


def test_kafka_initial_response_layout():
    client = OAuthBearerClient("a.b.c", {"logicalCluster": "lkc-1", "traceId": "x y"})
    assert client.first_message() == (
        b"n,,\x01auth=Bearer a.b.c\x01logicalCluster=lkc-1\x01traceId=x y\x01\x01"
    )
    assert OAuthBearerClient("a.b.").first_message() == b"n,,\x01auth=Bearer a.b.\x01\x01"


def test_error_challenge_gets_the_lone_0x01_then_fails():
    client = OAuthBearerClient(RFC_TOKEN)
    assert client.next_message(b"") is None  # success: the broker answers empty bytes
    client = OAuthBearerClient(RFC_TOKEN)
    challenge = base64.b64decode(RFC_4_3_CHALLENGE)
    assert client.next_message(challenge) == base64.b64decode(RFC_4_3_ANSWER)
    assert "invalid_token" in client.refusal()
    # a broker that does not fail the exchange after our 0x01 is not believed
    with pytest.raises(Errors.SaslAuthenticationFailed, match="invalid_token"):
        client.next_message(b"")


def test_authzid_is_saslname_escaped():
    msg = oauthbearer_client_response([("auth", "Bearer t")], authzid="a=b,c")
    assert msg == b"n,a=a=3Db=2Cc,\x01auth=Bearer t\x01\x01"


@pytest.mark.parametrize(
    "token, extensions",
    [
        ("", {}),
        ("has space", {}),
        ("ctl\x01a", {}),
        (None, {}),
        ("t", {"auth": "x"}),  # reserved
        ("t", {"key1": "x"}),  # keys are letters only
        ("t", {"k": "bad\x01value"}),
        ("t", {"k": "caf\u00e9"}),  # not VCHAR
    ],
)
def test_invalid_tokens_and_extensions_are_refused(token, extensions):
    with pytest.raises(Errors.IllegalArgumentError):
        OAuthBearerClient(token, extensions)


def test_plain_message():
    assert PlainClient("alice", "pw").first_message() == b"\0alice\0pw"


_B64TOKEN = st.from_regex(r"[A-Za-z0-9\-._~+/]{1,40}={0,2}", fullmatch=True)
_KEYS = st.from_regex(r"[A-Za-z]{1,12}", fullmatch=True).filter(lambda k: k != "auth")
_VALUES = st.text(
    alphabet=st.sampled_from([chr(c) for c in range(0x21, 0x7F)] + [" ", "\t", "\r", "\n"]),
    max_size=30,
)


def _parse(msg: bytes) -> tuple[str, dict[str, str]]:
    """RFC 7628 section 3.1, read back independently: gs2-header, kvpairs, final kvsep."""
    text = msg.decode()
    assert text.startswith("n,") and text.endswith("\x01\x01")
    gs2, rest = text.split("\x01", 1)
    assert gs2 in ("n,,",) or gs2.startswith("n,a=")
    pairs = rest[:-2].split("\x01")
    out: dict[str, str] = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        assert key not in out
        out[key] = value
    return gs2, out


@given(_B64TOKEN, st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_initial_response_reads_back(token, extensions):
    gs2, pairs = _parse(OAuthBearerClient(token, extensions).first_message())
    assert gs2 == "n,,"
    assert pairs.pop("auth") == f"Bearer {token}"
    assert pairs == extensions


@given(st.text(max_size=20), st.dictionaries(st.text(max_size=5), st.text(max_size=5)))
def test_anything_else_is_sent_or_refused_never_garbled(token, extensions):
    try:
        msg = OAuthBearerClient(token, extensions).first_message()
    except Errors.IllegalArgumentError:
        return
    _gs2, pairs = _parse(msg)
    assert pairs.pop("auth") == f"Bearer {token}"
    assert pairs == extensions


# ------------------------------------------------------------------ GSSAPI (RFC 4752)


class _Wrapped:
    def __init__(self, message: bytes) -> None:
        self.message = message


class _ToyContext:
    """Stands in for gssapi.SecurityContext: two context tokens (AP-REQ, then the AP-REP
    completes it), wrap/unwrap as a visible prefix so the test sees what was wrapped."""

    def __init__(self) -> None:
        self.complete = False
        self.seen: list[bytes | None] = []

    def step(self, token: bytes | None) -> bytes | None:
        self.seen.append(token)
        if token is None:
            return b"AP-REQ"
        self.complete = True
        return None

    def wrap(self, message: bytes, encrypt: bool) -> _Wrapped:
        assert encrypt is False  # integrity only: RFC 4752 3.1
        return _Wrapped(b"W:" + message)

    def unwrap(self, message: bytes) -> _Wrapped:
        assert message.startswith(b"W:")
        return _Wrapped(message[2:])


def _gssapi_after_context() -> tuple[GssapiClient, _ToyContext]:
    ctx = _ToyContext()
    client = GssapiClient(ctx, service="kafka@broker1")
    client.start()
    assert client.first_message() == b"AP-REQ"
    assert client.next_message(b"AP-REP") == b""  # context complete: an empty token
    assert ctx.seen == [None, b"AP-REP"]
    return client, ctx


def test_gssapi_exchange_chooses_no_security_layer():
    client, _ = _gssapi_after_context()
    # the broker offers all three layers (0x07) and a 64 KiB buffer
    answer = client.next_message(b"W:" + bytes([0x07, 0x01, 0x00, 0x00]))
    assert answer == b"W:" + bytes([0x01, 0x00, 0x00, 0x00])  # no layer, no buffer, no authzid
    assert client.next_message(b"") is None


def test_gssapi_authzid_follows_the_layer_octets():
    ctx = _ToyContext()
    client = GssapiClient(ctx, authzid="alice")
    client.start()
    client.next_message(b"AP-REP")
    assert client.next_message(b"W:\x01\x00\x00\x00") == b"W:\x01\x00\x00\x00alice"


def test_gssapi_offer_without_the_no_layer_option_is_refused():
    client, _ = _gssapi_after_context()
    with pytest.raises(Errors.AuthenticationFailedError, match="security layer"):
        client.next_message(b"W:" + bytes([0x04, 0x01, 0x00, 0x00]))


def test_gssapi_malformed_offer_is_a_protocol_error():
    client, _ = _gssapi_after_context()
    with pytest.raises(Errors.KafkaProtocolError, match="4"):
        client.next_message(b"W:\x01\x00")


def test_gssapi_first_message_needs_start():
    with pytest.raises(Errors.IllegalStateError):
        GssapiClient(_ToyContext()).first_message()


def test_gssapi_library_errors_become_authentication_failed():
    gssapi = pytest.importorskip("gssapi", reason="the gssapi package is not installed")

    class Failing(_ToyContext):
        def step(self, token: bytes | None) -> bytes | None:
            raise gssapi.exceptions.GSSError(851968, 0)

    client = GssapiClient(Failing(), service="nosuch@broker1")
    with pytest.raises(Errors.AuthenticationFailedError, match="nosuch@broker1") as info:
        client.start()
    assert isinstance(info.value.__cause__, gssapi.exceptions.GSSError)
