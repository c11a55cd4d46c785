"""The sans-I/O pieces the client layer itself needs, below :mod:`aiokafka_lite.client`.

The Metadata request (built by the ONE metadata refresher, :mod:`aiokafka_lite._metadata`) and
FindCoordinator (``KafkaClient.find_coordinator``), plus :class:`ItemError`, the per-item error
of every parsed answer. They live here, not in :mod:`aiokafka_lite.ops`, so that the client never
imports the operations layer that sits above it; :mod:`aiokafka_lite.ops.topics`,
:mod:`aiokafka_lite.ops.groups` and :mod:`aiokafka_lite.ops._exec` re-export them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import errors as Errors
from .protocol import messages as m

__all__ = [
    "Coordinator",
    "ItemError",
    "find_coordinator_request",
    "metadata_request",
    "parse_find_coordinator",
]


@dataclass(frozen=True)
class ItemError:
    """A per-item error in a parsed response: the code and the broker's message (if any)."""

    code: int
    message: str | None = None

    def exception(self, what: str) -> Errors.KafkaError:
        """The :mod:`~aiokafka_lite.errors` exception for this code, naming ``what``."""
        text = f"{what}: {self.message}" if self.message else what
        return Errors.for_code(self.code)(text)

    @property
    def retriable(self) -> bool:
        """True for codes worth retrying (retriable, stale metadata, coordinator moved)."""
        return Errors.retry_action(self.code).retriable


# ---------------------------------------------------------------------------------- Metadata


def metadata_request(topics: Iterable[str] | None, allow_auto_topic_creation: bool = False) -> Any:
    """Metadata of ``topics`` (None: every topic; an empty list: brokers only)."""
    return m.MetadataRequest(
        topics=None
        if topics is None
        else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=allow_auto_topic_creation,
    )


# -------------------------------------------------------------------------- FindCoordinator


@dataclass(frozen=True)
class Coordinator:
    """A FindCoordinator answer for one key (``error`` set when it failed)."""

    node_id: int
    host: str
    port: int
    error: ItemError | None = None


def find_coordinator_request(key: str, key_type: int = 0) -> Any:
    """FindCoordinator for a group (``key_type`` 0) or transactional id (1)."""
    # Both shapes are filled; the codec writes the one the negotiated version has.
    return m.FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key])


def parse_find_coordinator(resp: Any, key: str) -> Coordinator:
    """The coordinator of ``key`` from a v0-v3 or batched v4+ answer."""
    if resp.coordinators:
        c = next((c for c in resp.coordinators if c.key == key), resp.coordinators[0])
        code, msg, nid, host, port = c.error_code, c.error_message, c.node_id, c.host, c.port
    else:
        code, msg = resp.error_code, resp.error_message
        nid, host, port = resp.node_id, resp.host, resp.port
    return Coordinator(int(nid), host, int(port), ItemError(code, msg) if code else None)
