"""PySpark integration: the ``aiokafka_lite`` Python Data Source (needs the ``spark`` extra).

``pip install 'aiokafka_lite[spark]'``, then::

    from aiokafka_lite.spark import register
    register(spark)                      # format "aiokafka_lite"

Nothing here is imported by the rest of the package; pyspark and pyarrow are loaded on first
use of a name below (see :mod:`aiokafka_lite.spark.datasource` for the options and behaviour).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiokafka_lite.spark.datasource import KafkaDataSource, register

__all__ = ["KafkaDataSource", "register"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        try:
            from aiokafka_lite.spark import datasource
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"aiokafka_lite.spark.{name} needs pyspark and pyarrow: "
                "pip install 'aiokafka_lite[spark]'"
            ) from exc
        return getattr(datasource, name)
    raise AttributeError(f"module 'aiokafka_lite.spark' has no attribute {name!r}")
