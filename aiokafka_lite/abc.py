"""Abstract interfaces users implement, importable from the same place as in aiokafka.

:class:`AbstractTokenProvider` (``sasl_oauth_token_provider`` for ``sasl_mechanism=
"OAUTHBEARER"``) is defined in :mod:`aiokafka_lite.auth`, beside the built-in
:class:`~aiokafka_lite.auth.OIDCTokenProvider`: the connection awaits its ``token()`` when it
authenticates and when it re-authenticates (KIP-368), and sends its ``extensions()``.
"""

from __future__ import annotations

from .auth import AbstractTokenProvider
from .consumer.consumer import ConsumerRebalanceListener

__all__ = ["AbstractTokenProvider", "ConsumerRebalanceListener"]
