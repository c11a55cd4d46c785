"""Abstract interfaces users implement, importable from the same place as in aiokafka."""

from __future__ import annotations

import abc
from typing import Any

from .consumer.consumer import ConsumerRebalanceListener

__all__ = ["AbstractTokenProvider", "ConsumerRebalanceListener"]


class AbstractTokenProvider(abc.ABC):
    """Supplies bearer tokens for SASL/OAUTHBEARER (``sasl_oauth_token_provider``).

    aiokafka_lite accepts such a provider for API compatibility; the OAUTHBEARER exchange itself
    is not implemented yet (PLAIN and SCRAM are).
    """

    @abc.abstractmethod
    async def token(self) -> str:
        """Return a fresh token (may perform I/O)."""

    def extensions(self) -> dict[str, Any]:
        """Optional SASL extensions sent with the token."""
        return {}
