"""Bearer tokens for SASL/OAUTHBEARER: the provider interface and a built-in OIDC provider.

:class:`AbstractTokenProvider` is aiokafka's interface (``sasl_oauth_token_provider``): the
connection awaits ``token()`` before each authentication and re-authentication and sends
``extensions()`` with it. :class:`OIDCTokenProvider` implements it with the OAuth 2
client-credentials grant (RFC 6749 section 4.4) against any OpenID Connect / OAuth 2 token
endpoint (Keycloak, Entra ID, Okta, Auth0, ...), over asyncio streams with the standard library
only: the event loop is never blocked, every exchange is bounded by ``timeout``, and the token is
cached and fetched again in the background once ``refresh_fraction`` of its lifetime has passed
(as librdkafka and the Java client do, 80% by default).
"""

from __future__ import annotations

import abc
import asyncio
import base64
import json
import logging
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from . import errors as Errors

__all__ = ["AbstractTokenProvider", "MSKIAMTokenProvider", "MissingExtraError", "OIDCTokenProvider"]

log = logging.getLogger(__name__)

#: a token endpoint's answer larger than this is refused (a JSON document of a few KiB is usual)
_MAX_RESPONSE = 1024 * 1024


class AbstractTokenProvider(abc.ABC):
    """Supplies bearer tokens for SASL/OAUTHBEARER (``sasl_oauth_token_provider``).

    ``token()`` is awaited each time a connection authenticates: when it opens, and again when
    the broker's session lifetime (KIP-368) is about to end, so it should return a cached token
    while that one is valid and fetch a new one before it expires. An exception it raises, or
    a call that does not return within the connection's timeout, fails that connection attempt
    with a :class:`~aiokafka_lite.errors.KafkaError`. For a synchronous source, run it in a
    thread: ``return await asyncio.to_thread(self._fetch)``.
    """

    @abc.abstractmethod
    async def token(self) -> str:
        """Return a valid token (a JWS compact serialization, as Kafka expects)."""

    def extensions(self) -> dict[str, Any]:
        """Optional SASL extensions (KIP-342) sent with the token: names of letters only,
        printable values (for example Confluent Cloud's ``logicalCluster``)."""
        return {}


class _CachingTokenProvider(AbstractTokenProvider):
    """A token from ``_fetch()`` (token, lifetime in seconds), reused until ``refresh_fraction``
    of its lifetime has passed; one fetch at a time; a failed refresh keeps a still-valid token.

    With ``background_refresh`` (the default) a task on the event loop of the latest
    ``token()`` call fetches the successor at the refresh point, so a connection that
    (re-)authenticates gets a cached token at once, as librdkafka's background refresh. The
    task retries a failed refresh every second while the current token is valid, stops by
    itself when nobody asked for a token for two lifetimes (at least 5 minutes: ``token()``
    starts it again) and with :meth:`close` or the end of its event loop."""

    refresh_fraction = 0.8
    background_refresh = True

    def _init_cache(self) -> None:
        self._token: str | None = None
        self._expires_at = 0.0  # time.monotonic() when the cached token expires
        self._refresh_at = 0.0  # ... and when it should be replaced
        self._lifetime = 0.0
        self._last_used = 0.0  # time.monotonic() of the latest token() call
        self._lock: asyncio.Lock | None = None
        self._refresher: asyncio.Task[None] | None = None
        #: tokens fetched (or signed) so far
        self.fetches = 0

    @abc.abstractmethod
    async def _fetch(self) -> tuple[str, float]:
        """A new token and its lifetime in seconds (raises a KafkaError)."""

    async def token(self) -> str:
        """The cached token, or a new one once the refresh point passed (one fetch at a time:
        concurrent callers share it)."""
        now = time.monotonic()
        self._last_used = now
        if self._token is not None and now < self._refresh_at:
            return self._token
        token = await self._refresh()
        if self.background_refresh:
            self._start_refresher()
        return token

    async def close(self) -> None:
        """Stop the background refresh (the cached token stays usable; ``token()`` fetches
        again on demand and restarts it)."""
        task, self._refresher = self._refresher, None
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            await asyncio.wait([task])

    async def _refresh(self) -> str:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = time.monotonic()
            if self._token is not None and now < self._refresh_at:
                return self._token
            try:
                token, lifetime = await self._fetch()
            except Errors.KafkaError as exc:
                if self._token is not None and time.monotonic() < self._expires_at:
                    log.warning("refreshing the token failed, the current one is kept: %s", exc)
                    self._refresh_at = min(self._expires_at, time.monotonic() + 1.0)
                    return self._token
                raise
            now = time.monotonic()
            self._token = token
            self._lifetime = lifetime
            self._expires_at = now + lifetime
            self._refresh_at = now + lifetime * self.refresh_fraction
            self.fetches += 1
            return token

    def _start_refresher(self) -> None:
        task = self._refresher
        loop = asyncio.get_running_loop()
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        self._refresher = loop.create_task(
            self._refresh_loop(), name=f"aiokafka_lite-token-refresh-{type(self).__name__}"
        )

    async def _refresh_loop(self) -> None:
        while self._token is not None:
            now = time.monotonic()
            if now - self._last_used > max(2 * self._lifetime, 300.0):
                return  # idle: token() fetches on demand and starts this again
            if now < self._refresh_at:
                await asyncio.sleep(self._refresh_at - now)
                continue
            try:
                await self._refresh()
            except Errors.KafkaError as exc:  # the token expired too: token() raises it
                log.warning("background token refresh failed: %s", exc)
                return


class OIDCTokenProvider(_CachingTokenProvider):
    """OAuth 2 client credentials (RFC 6749 4.4) from ``token_endpoint``, cached and refreshed.

    ``client_id`` / ``client_secret`` authenticate the client to the endpoint with HTTP Basic
    (``auth_method="basic"``, RFC 6749 2.3.1) or as form fields (``"post"``). In the Basic
    header they go as given; ``header_urlencode=True`` URL-encodes them first, as RFC 6749
    2.3.1 asks and some identity providers require (Java's
    ``sasl.oauthbearer.header.urlencode``, also off by default). ``scope`` and
    ``audience`` are sent when given, ``params`` adds further form fields. ``ssl_context``
    verifies an ``https://`` endpoint (default: the system's CAs). ``timeout`` (seconds)
    bounds one whole exchange (connect, request, answer). A token is reused until
    ``refresh_fraction`` of its lifetime (``expires_in``, else the JWT's ``exp`` claim, else
    ``default_lifetime``) has passed, when a background task fetches its successor
    (``background_refresh=False``: the next ``token()`` call does); if that fetch fails while
    the token is still valid, the old token is kept (and the failure logged, the fetch retried
    every second), so a short outage of the identity provider does not fail connections.
    :meth:`close` stops the background task. Errors: ``AuthenticationFailedError`` (the
    endpoint refused, e.g. ``invalid_client``, or answered something that is not a token),
    ``KafkaConnectionError`` (unreachable), ``KafkaTimeoutError`` (no answer in ``timeout``).
    """

    def __init__(
        self,
        token_endpoint: str,
        client_id: str,
        client_secret: str,
        *,
        scope: str | None = None,
        audience: str | None = None,
        params: Mapping[str, str] | None = None,
        extensions: Mapping[str, str] | None = None,
        auth_method: str = "basic",
        header_urlencode: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 10.0,
        refresh_fraction: float = 0.8,
        background_refresh: bool = True,
        default_lifetime: float = 3600.0,
    ) -> None:
        url = urllib.parse.urlsplit(token_endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise Errors.KafkaConfigurationError(
                f"token_endpoint must be an http(s) URL, got {token_endpoint!r}"
            )
        if auth_method not in ("basic", "post"):
            raise Errors.KafkaConfigurationError("auth_method must be 'basic' or 'post'")
        if not 0 < refresh_fraction <= 1:
            raise Errors.KafkaConfigurationError("refresh_fraction must be in (0, 1]")
        if timeout <= 0:
            raise Errors.KafkaConfigurationError("timeout must be positive")
        self.token_endpoint = token_endpoint
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        self.audience = audience
        self._params = dict(params or {})
        self._extensions = dict(extensions or {})
        self.auth_method = auth_method
        self.header_urlencode = header_urlencode
        self._ssl = ssl_context
        self.timeout = timeout
        self.refresh_fraction = refresh_fraction
        self.background_refresh = background_refresh
        self.default_lifetime = default_lifetime
        self._url = url
        self._init_cache()

    def __repr__(self) -> str:
        return f"<OIDCTokenProvider {self.token_endpoint} client_id={self.client_id!r}>"

    def extensions(self) -> dict[str, Any]:
        """The ``extensions`` given at construction."""
        return dict(self._extensions)

    # ------------------------------------------------------------------ HTTP

    def _form(self) -> tuple[bytes, dict[str, str]]:
        fields: dict[str, str] = {"grant_type": "client_credentials"}
        if self.scope:
            fields["scope"] = self.scope
        if self.audience:
            fields["audience"] = self.audience
        fields.update(self._params)
        headers: dict[str, str] = {}
        if self.auth_method == "basic":
            user, pwd = self.client_id, self._secret
            if self.header_urlencode:
                user = urllib.parse.quote(user, safe="")
                pwd = urllib.parse.quote(pwd, safe="")
            cred = base64.b64encode(f"{user}:{pwd}".encode()).decode()
            headers["Authorization"] = f"Basic {cred}"
        else:
            fields["client_id"] = self.client_id
            fields["client_secret"] = self._secret
        return urllib.parse.urlencode(fields).encode(), headers

    async def _fetch(self) -> tuple[str, float]:
        try:
            status, body = await asyncio.wait_for(self._post(), self.timeout)
        except asyncio.TimeoutError:
            raise Errors.KafkaTimeoutError(
                f"token endpoint {self.token_endpoint} did not answer within {self.timeout:g} s"
            ) from None
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError) as exc:
            raise Errors.KafkaConnectionError(
                f"cannot reach token endpoint {self.token_endpoint}: {exc!r}"
            ) from exc
        return self._parse(status, body)

    async def _post(self) -> tuple[int, bytes]:
        url = self._url
        https = url.scheme == "https"
        host = url.hostname or ""
        port = url.port or (443 if https else 80)
        target = url.path or "/"
        if url.query:
            target += "?" + url.query
        body, headers = self._form()
        tls: dict[str, Any] = {}
        if https:
            tls = {"ssl": self._ssl or ssl.create_default_context(), "server_hostname": host}
        reader, writer = await asyncio.open_connection(host, port, **tls)
        try:
            hostport = host if url.port is None else f"{host}:{url.port}"
            lines = [
                f"POST {target} HTTP/1.1",
                f"Host: {hostport}",
                "Content-Type: application/x-www-form-urlencoded",
                "Accept: application/json",
                f"Content-Length: {len(body)}",
                "Connection: close",
                *(f"{k}: {v}" for k, v in headers.items()),
            ]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            await writer.drain()
            return await _read_http_response(reader)
        finally:
            writer.close()

    def _parse(self, status: int, body: bytes) -> tuple[str, float]:
        where = f"token endpoint {self.token_endpoint}"
        try:
            doc = json.loads(body.decode("utf-8")) if body else {}
        except (UnicodeDecodeError, ValueError):
            doc = None
        if status != 200:
            if isinstance(doc, dict) and "error" in doc:
                desc = doc.get("error_description")
                why = f"{doc['error']}" + (f": {desc}" if desc else "")
            else:
                why = body[:200].decode("utf-8", "replace")
            raise Errors.AuthenticationFailedError(f"{where} answered HTTP {status}: {why}")
        if not isinstance(doc, dict) or not isinstance(doc.get("access_token"), str):
            raise Errors.AuthenticationFailedError(f"{where} answered without an access_token")
        token: str = doc["access_token"]
        kind = doc.get("token_type", "Bearer")
        if not isinstance(kind, str) or kind.lower() != "bearer":
            raise Errors.AuthenticationFailedError(f"{where} answered token_type {kind!r}")
        lifetime = doc.get("expires_in")
        if not isinstance(lifetime, (int, float)) or isinstance(lifetime, bool) or lifetime <= 0:
            lifetime = _jwt_lifetime(token)
        if lifetime is None:
            lifetime = self.default_lifetime
        return token, float(lifetime)


MissingExtraError = Errors.MissingExtraError  # defined in errors.py (GSSAPI raises it too)


class MSKIAMTokenProvider(_CachingTokenProvider):
    """AWS MSK IAM tokens for OAUTHBEARER, signed by AWS's own ``aws-msk-iam-sasl-signer-python``
    (``pip install 'aiokafka_lite[msk]'``; a :class:`MissingExtraError` naming the extra when it
    is missing).

    The credentials come from botocore's default chain (environment, ``~/.aws``, SSO, container
    and instance roles), or from the named ``profile``, or by assuming ``role_arn`` through STS
    (``sts_session_name``), or from a botocore ``CredentialProvider`` (``credentials_provider``);
    at most one of the three. The signer is synchronous (reading files, maybe calling STS or the
    instance metadata service), so it runs in a worker thread, never on the event loop, each
    call bounded by ``timeout`` seconds (``KafkaTimeoutError``). A token (valid 15 minutes) is
    reused until ``refresh_fraction`` of its lifetime has passed, when a background task signs
    its successor (``background_refresh=False``: the next ``token()`` call does), so each
    re-authentication (MSK closes sessions after their lifetime, KIP-368) gets a fresh one at
    once. Signing failures
    (no credentials, unknown profile, STS refusing the role) raise
    ``AuthenticationFailedError`` with the signer's exception chained.
    """

    def __init__(
        self,
        region: str,
        *,
        profile: str | None = None,
        role_arn: str | None = None,
        sts_session_name: str | None = None,
        credentials_provider: Any = None,
        timeout: float = 10.0,
        refresh_fraction: float = 0.8,
        background_refresh: bool = True,
    ) -> None:
        try:
            from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer
        except ImportError as exc:
            raise MissingExtraError(
                "MSKIAMTokenProvider needs AWS's signer package: "
                "pip install 'aiokafka_lite[msk]' (aws-msk-iam-sasl-signer-python)"
            ) from exc
        if not region or not isinstance(region, str):
            raise Errors.KafkaConfigurationError("region must be an AWS region name")
        if sum(x is not None for x in (profile, role_arn, credentials_provider)) > 1:
            raise Errors.KafkaConfigurationError(
                "give at most one of profile, role_arn and credentials_provider"
            )
        if sts_session_name is not None and role_arn is None:
            raise Errors.KafkaConfigurationError("sts_session_name needs role_arn")
        if not 0 < refresh_fraction <= 1:
            raise Errors.KafkaConfigurationError("refresh_fraction must be in (0, 1]")
        if timeout <= 0:
            raise Errors.KafkaConfigurationError("timeout must be positive")
        self.region = region
        self.profile = profile
        self.role_arn = role_arn
        self.sts_session_name = sts_session_name
        self.credentials_provider = credentials_provider
        self.timeout = timeout
        self.refresh_fraction = refresh_fraction
        self.background_refresh = background_refresh
        self._signer = signer
        self._init_cache()

    def __repr__(self) -> str:
        via = (
            f" profile={self.profile!r}"
            if self.profile
            else f" role_arn={self.role_arn!r}"
            if self.role_arn
            else ""
        )
        return f"<MSKIAMTokenProvider region={self.region!r}{via}>"

    def _sign(self) -> tuple[str, int]:
        signer, region = self._signer, self.region
        if self.profile is not None:
            return signer.generate_auth_token_from_profile(region, self.profile)  # type: ignore[no-any-return]
        if self.role_arn is not None:
            if self.sts_session_name is not None:
                return signer.generate_auth_token_from_role_arn(  # type: ignore[no-any-return]
                    region, self.role_arn, self.sts_session_name
                )
            return signer.generate_auth_token_from_role_arn(region, self.role_arn)  # type: ignore[no-any-return]
        if self.credentials_provider is not None:
            return signer.generate_auth_token_from_credentials_provider(  # type: ignore[no-any-return]
                region, self.credentials_provider
            )
        return signer.generate_auth_token(region)  # type: ignore[no-any-return]

    async def _fetch(self) -> tuple[str, float]:
        try:
            token, expiry_ms = await asyncio.wait_for(asyncio.to_thread(self._sign), self.timeout)
        except asyncio.TimeoutError:
            raise Errors.KafkaTimeoutError(
                f"signing the MSK IAM token took more than {self.timeout:g} s "
                "(credentials chain or STS not answering)"
            ) from None
        except Errors.KafkaError:
            raise
        except Exception as exc:  # the signer's and botocore's own errors
            why = (
                "no AWS credentials found"
                if isinstance(exc, AttributeError) and "access_key" in str(exc)
                else f"{type(exc).__name__}: {exc}"
            )
            raise Errors.AuthenticationFailedError(
                f"cannot sign an MSK IAM token for {self.region}: {why}"
            ) from exc
        lifetime = float(expiry_ms) / 1000.0 - time.time()
        if lifetime <= 0:
            raise Errors.AuthenticationFailedError("the signer returned an expired MSK IAM token")
        return str(token), lifetime


async def _read_http_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of an HTTP/1.x response (Content-Length, chunked, or until EOF)."""
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > 64 * 1024:
        raise Errors.AuthenticationFailedError("token endpoint sent oversized headers")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise Errors.AuthenticationFailedError(f"token endpoint answered {lines[0]!r}")
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                break
            if len(body) + size > _MAX_RESPONSE:
                raise Errors.AuthenticationFailedError("token endpoint answer is too large")
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        return status, bytes(body)
    if "content-length" in headers:
        length = int(headers["content-length"])
        if length > _MAX_RESPONSE:
            raise Errors.AuthenticationFailedError("token endpoint answer is too large")
        return status, await reader.readexactly(length)
    body_eof = await reader.read(_MAX_RESPONSE + 1)
    if len(body_eof) > _MAX_RESPONSE:
        raise Errors.AuthenticationFailedError("token endpoint answer is too large")
    return status, body_eof


def _jwt_lifetime(token: str) -> float | None:
    """Seconds until a JWT's ``exp`` claim, None when it is not a JWT with one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload))
        exp = float(claims["exp"])
    except (ValueError, KeyError, TypeError):
        return None
    left = exp - time.time()
    return left if left > 0 else None
