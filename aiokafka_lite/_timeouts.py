"""The client's timeouts, named apart (as the Java client and franz-go name them).

aiokafka has one setting, ``request_timeout_ms``, that covers three different waits.
:class:`Timeouts` is made ONCE from the settings (``KafkaClient.timeouts``) and names each:

* ``connect_ms``: TCP/TLS connect, ApiVersions and SASL of one connection (Java's
  ``socket.connection.setup.timeout.ms``, franz-go's dial timeout);
* ``request_ms``: how long one request may wait for its answer on its connection; past it the
  connection is closed (Java's ``request.timeout.ms``);
* ``broker_ms``: the timeout written INTO a request for the broker to use (CreateTopics,
  DeleteTopics, CreatePartitions, DeleteRecords) when the caller gives none; the client waits
  that long plus ``broker_overhead_ms`` for the answer (franz-go's
  ``RequestTimeoutOverhead``): :meth:`Timeouts.client_wait_ms`;
* ``retry_ms``: the budget of a whole operation with its retries (admin operations, coordinator
  look-ups, commits; franz-go's ``RetryTimeout``). A transactional producer's coordinator
  requests use ``max_block_ms`` instead, as aiokafka.

Every retry budget runs on ONE clock, the event loop's (``loop.time()``), through
:class:`aiokafka_lite.ops.Deadline`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONNECT_TIMEOUT_MS", "Timeouts"]

#: TCP/TLS connect + ApiVersions + SASL must finish within this (or request_timeout_ms if less),
#: so a black-holed bootstrap address does not hold up the next one for a whole request timeout
CONNECT_TIMEOUT_MS = 10000


@dataclass(frozen=True)
class Timeouts:
    """The named timeouts of one client, in milliseconds (see the module docstring)."""

    connect_ms: float
    request_ms: float
    broker_ms: float
    broker_overhead_ms: float
    retry_ms: float

    @classmethod
    def from_settings(cls, request_timeout_ms: float) -> Timeouts:
        """aiokafka's meaning of its one setting: each wait is ``request_timeout_ms`` (the
        connect is capped at :data:`CONNECT_TIMEOUT_MS`)."""
        return cls(
            connect_ms=min(request_timeout_ms, CONNECT_TIMEOUT_MS),
            request_ms=request_timeout_ms,
            broker_ms=request_timeout_ms,
            broker_overhead_ms=request_timeout_ms,
            retry_ms=request_timeout_ms,
        )

    def client_wait_ms(self, broker_timeout_ms: float) -> float:
        """How long the client waits for a request carrying ``broker_timeout_ms``."""
        return broker_timeout_ms + self.broker_overhead_ms
