"""The client's timeouts, named apart (as the Java client and franz-go name them), and its clock.

aiokafka has one setting, ``request_timeout_ms``, that covers three different waits.
:class:`Timeouts` is made ONCE from the settings (``KafkaClient.timeouts``, and
``ClientSettings.timeouts`` for a facade before its client exists) and names each; no other
module derives a wait from ``request_timeout_ms`` (only the constructors and
``_settings.py`` pass it on):

* ``connect_ms``: TCP/TLS connect, ApiVersions and SASL of one connection (Java's
  ``socket.connection.setup.timeout.ms``, franz-go's dial timeout);
* ``request_ms``: the wait for ONE answer: how long one request may wait for its answer on its
  connection; past it the connection is closed (Java's ``request.timeout.ms``);
* ``broker_ms``: the timeout written INTO a request for the broker to use (Produce's
  ``timeout_ms``, CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords) when the caller
  gives none; the client waits that long plus ``broker_overhead_ms`` for the answer (franz-go's
  ``RequestTimeoutOverhead``): :meth:`Timeouts.client_wait_ms`, also the wait for a long poll
  (Fetch, ShareFetch: the broker holds it up to its ``max_wait_ms``);
* ``retry_ms``: the budget of a whole operation with its retries (admin operations, coordinator
  look-ups, commits, ListOffsets, a consumer's ``position()``, waiting for metadata, the share
  consumer's close; franz-go's ``RetryTimeout``), as an :class:`aiokafka_lite.ops.Deadline`
  (``Deadline.of(client, timeout_ms)``) or a ``loop.time()`` deadline. A transactional
  producer's coordinator requests use ``max_block_ms`` instead, as aiokafka.

With aiokafka's one setting each of them is ``request_timeout_ms`` (:meth:`from_settings`;
the connect capped at :data:`CONNECT_TIMEOUT_MS`): the names say which wait a module means.

ONE clock for every deadline: the event loop's (``loop.time()``; uvloop's own on uvloop).
Retry budgets (:class:`aiokafka_lite.ops.Deadline`), connection deadlines, the producer's
batches (linger, ``delivery_timeout_ms``, retry back-offs: a batch's ``created``, ``ready_at``
and ``deadline``), the fetcher's back-offs and prefetch hold, the share consumer's rounds:
all are compared with ``loop.time()`` (:func:`loop_time` where no loop is at hand), and timers (``call_at``/``call_later``,
``wait_for``) run on that clock too. Durations measured only for reporting (the metrics'
lifetime rates, a commit's latency handed to hooks) may use ``time.monotonic()``; they are
never compared with a deadline.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

__all__ = ["CONNECT_TIMEOUT_MS", "Timeouts", "loop_time"]

#: TCP/TLS connect + ApiVersions + SASL must finish within this (or request_timeout_ms if less),
#: so a black-holed bootstrap address does not hold up the next one for a whole request timeout
CONNECT_TIMEOUT_MS = 10000


def loop_time() -> float:
    """Now on the one clock of every deadline: the running event loop's ``time()``."""
    return asyncio.get_running_loop().time()


@dataclass(frozen=True)
class Timeouts:
    """The named timeouts of one client, in milliseconds (see the module docstring)."""

    #: TCP/TLS connect, ApiVersions and SASL of one connection
    connect_ms: float
    #: the wait for one answer on a connection
    request_ms: float
    #: the timeout written into a request for the broker (when the caller gives none)
    broker_ms: float
    #: what the client waits beyond a broker-side timeout or a long poll's wait
    broker_overhead_ms: float
    #: the budget of a whole operation with its retries
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
        """How long the client waits for a request carrying ``broker_timeout_ms`` (a
        broker-side timeout, or a long poll's ``max_wait_ms``)."""
        return broker_timeout_ms + self.broker_overhead_ms
