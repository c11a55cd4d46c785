"""The producer's constructor arguments that depend on each other, checked and resolved as
aiokafka resolves them: ``acks`` against ``enable_idempotence`` and ``transactional_id``, and
``compression_type``; and the partition a record would go to from known metadata (the
``_partition`` name libraries call)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from aiokafka_lite import errors as Errors
from aiokafka_lite.records.compression import codec_id

__all__ = ["MISSING", "DeliveryOptions", "delivery_options", "partition_from_metadata"]

#: ``acks`` not given (its default depends on ``enable_idempotence``)
MISSING: Any = object()
_INT32_MAX = 2**31 - 1


class DeliveryOptions(NamedTuple):
    """What :func:`delivery_options` resolved."""

    codec: int
    acks: int
    idempotent: bool
    transaction_timeout_ms: int


def delivery_options(
    compression_type: str | None,
    acks: Any,
    enable_idempotence: bool,
    transactional_id: str | None,
    transaction_timeout_ms: int,
) -> DeliveryOptions:
    """Check and resolve the producer's delivery arguments (ValueError on a bad one): a
    transactional id implies idempotence; idempotence implies ``acks=-1`` ("all"), the
    default then; else ``acks`` defaults to 1. Without a transactional id the transaction
    timeout is unused (the int32 maximum)."""
    try:
        codec = codec_id(compression_type)
    except Errors.KafkaError as exc:
        raise ValueError(f"unsupported compression_type {compression_type!r}") from exc
    if transactional_id is not None:
        enable_idempotence = True
    else:
        transaction_timeout_ms = _INT32_MAX
    if acks == "all":
        acks = -1
    if enable_idempotence:
        if acks is MISSING:
            acks = -1
        elif acks != -1:
            raise ValueError(f"acks={acks} not supported if enable_idempotence=True")
    elif acks is MISSING:
        acks = 1
    if acks not in (0, 1, -1):
        raise ValueError(f"invalid acks value {acks!r}: use 0, 1, -1 or 'all'")
    return DeliveryOptions(codec, acks, enable_idempotence, transaction_timeout_ms)


def partition_from_metadata(
    cluster: Any, partitioner: Callable[..., int], topic: str, serialized_key: bytes | None
) -> int:
    """The partition ``partitioner`` gives a record of ``topic`` with ``serialized_key``,
    from the metadata ``cluster`` knows (KafkaTimeoutError when it knows no partition)."""
    all_parts = sorted(cluster.partitions_for_topic(topic) or ())
    available = sorted(cluster.available_partitions_for_topic(topic) or ())
    if not all_parts:
        raise Errors.KafkaTimeoutError(f"no metadata for topic {topic!r} yet")
    return int(partitioner(serialized_key, all_parts, available))
