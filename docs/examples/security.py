"""Security settings (docs/guides/security.md): each function returns keyword arguments that
work for AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaShareConsumer and AIOKafkaAdminClient.

    producer = AIOKafkaProducer(bootstrap_servers="kafka:9094", **scram_settings("alice", pw, tls))
"""

import asyncio
import os
import ssl
from typing import Any

from aiokafka_lite import AIOKafkaProducer
from aiokafka_lite.abc import AbstractTokenProvider
from aiokafka_lite.auth import MSKIAMTokenProvider, OIDCTokenProvider
from aiokafka_lite.helpers import create_ssl_context


def tls_settings(
    cafile: str, certfile: str | None = None, keyfile: str | None = None
) -> dict[str, Any]:
    """TLS: verify the brokers with your CA; add certfile/keyfile for mutual TLS."""
    tls = create_ssl_context(cafile=cafile, certfile=certfile, keyfile=keyfile)
    return {"security_protocol": "SSL", "ssl_context": tls}


def scram_settings(user: str, password: str, tls: ssl.SSLContext | None) -> dict[str, Any]:
    """SCRAM-SHA-512 (or -256; "PLAIN" the same way), over TLS unless tls is None."""
    return {
        "security_protocol": "SASL_SSL" if tls is not None else "SASL_PLAINTEXT",
        "ssl_context": tls,
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


class MyTokens(AbstractTokenProvider):
    """OAUTHBEARER with your own token source (aiokafka's AbstractTokenProvider)."""

    def __init__(self, fetch_token: Any) -> None:
        self.fetch_token = fetch_token

    async def token(self) -> str:  # awaited at each (re-)authentication
        return await self.fetch_token()  # cache it; fresh before it expires

    def extensions(self) -> dict[str, str]:  # optional SASL extensions (KIP-342)
        return {"logicalCluster": "lkc-abc123"}


def oidc_settings(token_endpoint: str, client_id: str, client_secret: str) -> dict[str, Any]:
    """OIDC client credentials (Keycloak, Entra ID, Okta, Auth0, ...), built in."""
    tokens = OIDCTokenProvider(token_endpoint, client_id, client_secret, scope="kafka")
    return {
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(),  # the system's CAs
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": tokens,
    }


def msk_iam_settings(region: str) -> dict[str, Any]:
    """AWS MSK with IAM: pip install 'aiokafka_lite[msk]' (AWS's own signer, botocore's
    credential chain; profile= or role_arn= to choose)."""
    return {
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(),
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": MSKIAMTokenProvider(region),
    }


def kerberos_settings(tls: ssl.SSLContext) -> dict[str, Any]:
    """Kerberos: pip install 'aiokafka_lite[gssapi]'; a `kinit` ticket cache (KRB5CCNAME) or a
    client keytab (KRB5_CLIENT_KTNAME=/etc/security/app.keytab)."""
    return {
        "security_protocol": "SASL_SSL",
        "ssl_context": tls,
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",  # the broker's sasl.kerberos.service.name
        # "sasl_kerberos_domain_name": "kafka.corp.example",  # else each broker's host name
    }


async def send_one(bootstrap: str, topic: str, **settings: Any) -> int:
    """Connect with the settings and write one record; its offset."""
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, **settings) as producer:
        meta = await producer.send_and_wait(topic, b"secured")
        return meta.offset


if __name__ == "__main__":
    settings = scram_settings(
        os.environ["KAFKA_USER"],
        os.environ["KAFKA_PASSWORD"],
        create_ssl_context(cafile=os.environ["KAFKA_CAFILE"]),
    )
    asyncio.run(send_one(os.environ["KAFKA_BOOTSTRAP"], "orders", **settings))
