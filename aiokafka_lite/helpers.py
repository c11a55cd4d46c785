"""Small helpers with aiokafka's names."""

from __future__ import annotations

import ssl

__all__ = ["create_ssl_context"]


def create_ssl_context(
    *,
    cafile: str | None = None,
    capath: str | None = None,
    cadata: str | bytes | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    crlfile: str | None = None,
) -> ssl.SSLContext:
    """Build a client-side TLS context for ``ssl_context=`` (``security_protocol="SSL"``).

    Verifies the broker's certificate and host name against ``cafile``/``capath``/``cadata``
    (the system store when none is given); ``certfile``/``keyfile``/``password`` add a client
    certificate; ``crlfile`` enables certificate revocation checks against that CRL.
    """
    context = ssl.create_default_context(
        ssl.Purpose.SERVER_AUTH, cafile=cafile, capath=capath, cadata=cadata
    )
    if crlfile:
        context.load_verify_locations(crlfile)
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if certfile:
        context.load_cert_chain(certfile, keyfile, password)
    return context
