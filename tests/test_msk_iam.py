"""MSKIAMTokenProvider: AWS MSK IAM tokens for OAUTHBEARER, signed by AWS's own package.

No AWS account here: the credentials are fake ones in environment variables (signing is local,
no network), and the provider's contract is what is tested: a real signed MSK token, produced
in a worker thread while the event loop keeps running, bounded by the timeout, cached until
its refresh point and signed again after it, clear errors. Apache Kafka does not accept MSK
tokens (they are signed URLs, not JWS), so the broker test checks only that the token goes
through the OAUTHBEARER exchange and its refusal is the broker's clean error.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
import time
import urllib.parse

import pytest

from aiokafka_lite import errors as Errors

try:
    import aws_msk_iam_sasl_signer  # noqa: F401
    from botocore.credentials import CredentialProvider, Credentials
except ImportError:  # the tests that need it skip; the missing-package test runs
    HAVE_SIGNER = False
    CredentialProvider = object  # type: ignore[assignment,misc]
else:
    HAVE_SIGNER = True

from aiokafka_lite.auth import MissingExtraError, MSKIAMTokenProvider  # noqa: E402

needs_signer = pytest.mark.skipif(
    not HAVE_SIGNER,
    reason="aws-msk-iam-sasl-signer-python is not installed (extra 'msk', in 'dev')",
)

KEY_ID = "AKIAAIOKAFKALITETEST"


@pytest.fixture(autouse=True)
def fake_aws(monkeypatch, tmp_path):
    """Fake static credentials; no shared files, no instance metadata, no other source."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_STS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key-for-tests")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")


def signed_url(token: str) -> urllib.parse.SplitResult:
    return urllib.parse.urlsplit(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())


def query(token: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(signed_url(token).query))


class GatedCredentials(CredentialProvider):
    """botocore credentials that are only handed out once ``gate`` is set (a slow source)."""

    METHOD = "aiokafka-lite-test"

    def __init__(self, key_id: str = "AKIAGATEDCREDENTIALS") -> None:
        super().__init__()
        self.key_id = key_id
        self.gate = threading.Event()
        self.threads: list[int] = []

    def load(self) -> Credentials:
        self.threads.append(threading.get_ident())
        assert self.gate.wait(10), "the gate was never opened"
        return Credentials(self.key_id, "gated-secret")


@needs_signer
async def test_token_is_a_signed_msk_connect_url():
    provider = MSKIAMTokenProvider("us-east-1")
    token = await provider.token()
    url = signed_url(token)
    params = query(token)
    assert (url.scheme, url.hostname) == ("https", "kafka.us-east-1.amazonaws.com")
    assert params["Action"] == "kafka-cluster:Connect"
    assert params["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert params["X-Amz-Credential"].startswith(f"{KEY_ID}/")
    assert params["X-Amz-Credential"].endswith("/us-east-1/kafka-cluster/aws4_request")
    assert params["X-Amz-Expires"] == "900"
    assert len(params["X-Amz-Signature"]) == 64
    assert "=" not in token and "+" not in token and "/" not in token  # base64url, no padding
    assert provider.fetches == 1


@needs_signer
async def test_signing_runs_in_a_thread_while_the_loop_keeps_running():
    creds = GatedCredentials()
    provider = MSKIAMTokenProvider("eu-west-1", credentials_provider=creds)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
            if ticks == 5:  # the loop ran 5 times while the signer waits: let it go on
                creds.gate.set()

    task = asyncio.create_task(ticker())
    try:
        token = await asyncio.wait_for(provider.token(), 15)
    finally:
        task.cancel()
    assert ticks >= 5
    assert creds.threads and creds.threads[0] != threading.get_ident()
    assert query(token)["X-Amz-Credential"].startswith("AKIAGATEDCREDENTIALS/")


@needs_signer
async def test_a_hanging_credentials_source_times_out():
    creds = GatedCredentials()
    provider = MSKIAMTokenProvider("eu-west-1", credentials_provider=creds, timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(Errors.KafkaTimeoutError, match=r"0\.5 s"):
            await provider.token()
    finally:
        creds.gate.set()  # let the worker thread finish
    assert time.monotonic() - started < 3


@needs_signer
async def test_token_is_cached_until_its_refresh_point_then_signed_again():
    # 900 s tokens; refresh after 0.3 % of the lifetime = 2.7 s
    provider = MSKIAMTokenProvider("eu-west-1", refresh_fraction=0.003)
    started = time.monotonic()
    first = await provider.token()
    together = await asyncio.gather(*(provider.token() for _ in range(5)))
    assert together == [first] * 5 and provider.fetches == 1
    seen_first_until = started
    deadline = started + 20
    while True:
        token = await provider.token()
        if token != first:
            break
        seen_first_until = time.monotonic()
        assert seen_first_until < deadline, "the token was never signed again"
        await asyncio.sleep(0.1)
    refreshed_after = time.monotonic() - started
    # kept for (nearly) the whole 2.7 s, replaced soon after it
    assert seen_first_until - started >= 2.0
    assert refreshed_after < 2.7 + 5
    assert provider.fetches == 2


@needs_signer
async def test_named_profile_is_used(monkeypatch, tmp_path):
    config = tmp_path / "config"
    config.write_text(
        "[profile kafka-writer]\n"
        "aws_access_key_id = AKIAPROFILEKEYTEST00\n"
        "aws_secret_access_key = profile-secret\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    token = await MSKIAMTokenProvider("ap-south-1", profile="kafka-writer").token()
    assert query(token)["X-Amz-Credential"].startswith("AKIAPROFILEKEYTEST00/")
    assert "/ap-south-1/" in query(token)["X-Amz-Credential"]
    with pytest.raises(Errors.AuthenticationFailedError, match="ProfileNotFound"):
        await MSKIAMTokenProvider("ap-south-1", profile="nobody").token()


@needs_signer
async def test_missing_credentials_fail_clearly(monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    started = time.monotonic()
    with pytest.raises(Errors.AuthenticationFailedError, match="no AWS credentials found"):
        await MSKIAMTokenProvider("eu-west-1").token()
    assert time.monotonic() - started < 5


@needs_signer
async def test_role_arn_asks_sts_and_its_failure_is_clear(monkeypatch):
    """The role is assumed through STS: here an endpoint that refuses connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"http://127.0.0.1:{port}")
    provider = MSKIAMTokenProvider(
        "eu-west-1", role_arn="arn:aws:iam::123456789012:role/kafka", timeout=8
    )
    with pytest.raises(Errors.AuthenticationFailedError, match="EndpointConnectionError"):
        await provider.token()


@needs_signer
def test_bad_arguments_are_configuration_errors():
    for kw in (
        {"region": ""},
        {"region": "eu-west-1", "profile": "a", "role_arn": "arn:aws:iam::1:role/r"},
        {"region": "eu-west-1", "sts_session_name": "s"},
        {"region": "eu-west-1", "timeout": 0},
        {"region": "eu-west-1", "refresh_fraction": 0},
    ):
        with pytest.raises(Errors.KafkaConfigurationError):
            MSKIAMTokenProvider(**kw)


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "aws_msk_iam_sasl_signer", None)
    with pytest.raises(MissingExtraError, match=r"aiokafka_lite\[msk\]") as info:
        MSKIAMTokenProvider("eu-west-1")
    assert isinstance(info.value, ImportError) and isinstance(info.value, Errors.KafkaError)


@needs_signer
async def test_apache_kafka_receives_the_token_and_refuses_it_cleanly(broker):
    """Apache Kafka's validator wants a JWS: the MSK token reaches it through the OAUTHBEARER
    exchange and is refused with the broker's message (MSK itself accepts it)."""
    if broker.kind != "apache" or not hasattr(broker.process, "sasl_bootstrap"):
        pytest.skip(f"[{broker.kind}] only the apache broker has an OAUTHBEARER listener")
    from aiokafka_lite.conn import BrokerConnection

    host, port = broker.process.sasl_bootstrap.split(",")[0].rsplit(":", 1)
    provider = MSKIAMTokenProvider("eu-west-1")
    conn = BrokerConnection(
        host,
        int(port),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
    )
    with pytest.raises(Errors.SaslAuthenticationFailed, match="invalid_token"):
        await conn.connect(10000)
    assert conn.closed and provider.fetches == 1
