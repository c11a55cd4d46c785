"""The optional compiled record codec (package ``aiokafka_lite_native``, built from native/ by
``make install``): :data:`native` is its ``_v2`` module, or None when it is not installed or
``AIOKAFKA_LITE_NO_EXTENSIONS`` is set (to anything but "" or "0"), like aio-libs'
``*_NO_EXTENSIONS`` switches. The pure-Python code beside it is the reference (internal)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["NATIVE", "native"]


def _load() -> Any:
    if os.environ.get("AIOKAFKA_LITE_NO_EXTENSIONS", "") not in ("", "0"):
        return None
    try:
        from aiokafka_lite_native import _v2
    except ImportError:
        return None
    return _v2


native: Any = _load()
#: True when the compiled record codec is in use.
NATIVE = native is not None
