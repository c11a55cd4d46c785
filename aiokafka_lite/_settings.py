"""One value for the settings a facade gives its :class:`~aiokafka_lite.client.KafkaClient`.

The producer, the consumer, the share consumer and the admin client take the same dozen connection keyword
arguments (aiokafka's signatures); each facade builds one :class:`ClientSettings` from them once,
with :meth:`ClientSettings.of` over its constructor's arguments, and makes every client it needs
from it (the consumer also makes a short-lived one for a ``commit()`` after ``stop()``), so the
list of what reaches the client is written once, here.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .client import KafkaClient

__all__ = ["ClientSettings"]


@dataclass(frozen=True)
class ClientSettings:
    """The connection settings a facade hands to its clients (defaults: ``KafkaClient``'s)."""

    bootstrap_servers: str | Iterable[str] | None = "localhost"
    client_id: str = "aiokafka_lite"
    request_timeout_ms: int = 40000
    retry_backoff_ms: int = 100
    metadata_max_age_ms: int = 300000
    connections_max_idle_ms: int = 540000
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None
    sasl_oauth_token_provider: Any = None
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str | None = None
    allow_auto_topic_creation: bool = True
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger_ms: int = 300000

    @classmethod
    def of(cls, arguments: Mapping[str, Any], **overrides: Any) -> ClientSettings:
        """The settings found by name among a facade's constructor ``arguments`` (its
        ``locals()``), then ``overrides`` (a setting the facade names differently or fixes)."""
        names = {f.name for f in fields(cls)}
        return cls(**({k: v for k, v in arguments.items() if k in names} | overrides))

    def new_client(self, hooks: Any = None) -> KafkaClient:
        """A new (not started) :class:`KafkaClient` with these settings, reporting to
        ``hooks`` (a :class:`~aiokafka_lite.hooks.HookSet` or hook objects, or None)."""
        # field by field, not dataclasses.asdict: that deep-copies (an SSLContext cannot be)
        kwargs = {f.name: getattr(self, f.name) for f in fields(self)}
        return KafkaClient(**kwargs, hooks=hooks)
