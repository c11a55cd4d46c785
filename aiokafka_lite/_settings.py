"""One value for the settings a facade gives its :class:`~aiokafka_lite.client.KafkaClient`.

The producer, the consumer, the share consumer and the admin client take the same dozen connection keyword
arguments (aiokafka's signatures); each facade builds one :class:`ClientSettings` from them once,
with :meth:`ClientSettings.of` over its constructor's arguments, and makes every client it needs
from it (the consumer also makes a short-lived one for a ``commit()`` after ``stop()``), so the
list of what reaches the client is written once, here. Also here: the steps the facades share
around their settings: the warning for the arguments aiokafka deprecated
(:func:`warn_ignored_arguments`) and the report of a facade collected unclosed
(:func:`report_unclosed`).
"""

from __future__ import annotations

import ssl
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ._timeouts import Timeouts
from .client import KafkaClient

__all__ = ["ClientSettings", "report_unclosed", "warn_ignored_arguments"]


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

    @property
    def timeouts(self) -> Timeouts:
        """The named waits of ``request_timeout_ms`` (those of every client made from these
        settings: ``KafkaClient.timeouts``)."""
        return Timeouts.from_settings(self.request_timeout_ms)

    def new_client(self, hooks: Any = None) -> KafkaClient:
        """A new (not started) :class:`KafkaClient` with these settings, reporting to
        ``hooks`` (a :class:`~aiokafka_lite.hooks.HookSet` or hook objects, or None)."""
        # field by field, not dataclasses.asdict: that deep-copies (an SSLContext cannot be)
        kwargs = {f.name: getattr(self, f.name) for f in fields(self)}
        return KafkaClient(**kwargs, hooks=hooks)


def warn_ignored_arguments(loop: Any, api_version: Any) -> None:
    """As aiokafka: ``loop`` and ``api_version`` are accepted with a DeprecationWarning (the
    running loop is used; versions are negotiated with each broker)."""
    if loop is not None:
        warnings.warn("the loop argument is ignored", DeprecationWarning, stacklevel=3)
    if api_version is not None:
        warnings.warn(
            "api_version is ignored: versions are negotiated with each broker",
            DeprecationWarning,
            stacklevel=3,
        )


def report_unclosed(
    facade: object,
    kind: str,
    parts: Iterable[Any],
    client: Any,
    warn: Callable[..., None],
) -> None:
    """A facade garbage-collected without ``stop()``: as aiokafka's, a resource leak. Its
    ``parts`` (objects with ``abandon()``, None skipped) release their sockets and tasks now;
    the loop's exception handler hears of it (``{kind: facade, "message": ...}``), then
    ``warn`` (``warnings.warn``, bound by the caller's ``__del__``) gives a ResourceWarning,
    last: it raises where warnings are errors."""
    for part in parts:
        if part is not None:
            part.abandon()
    name = f"AIOKafka{kind.capitalize()}"
    loop = getattr(client, "_loop", None)
    if loop is not None and not loop.is_closed():
        loop.call_exception_handler({kind: facade, "message": f"Unclosed {name}"})
    warn(f"Unclosed {name} {facade!r}", ResourceWarning, source=facade)
