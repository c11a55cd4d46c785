"""``ConfigResource`` / ``ConfigResourceType`` (aiokafka's names and path)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import Any

from .. import errors as Errors

__all__ = ["ConfigResource", "ConfigResourceType"]


class ConfigResourceType(IntEnum):
    """Kinds of config resources (the protocol's numbers)."""

    BROKER = 4
    TOPIC = 2


#: resource types beyond aiokafka's enum (kept as plain ints): a group's configs (Kafka 4:
#: share.auto.offset.reset, share.record.lock.duration.ms ...), broker loggers, client metrics
_MORE_TYPES = {"GROUP": 32, "BROKER_LOGGER": 8, "CLIENT_METRICS": 16}


class ConfigResource:
    """A resource whose configs to describe or alter.

    ``configs``: for describe, the names to return (None: all); for alter, name -> value; for
    incremental alter, name -> value (set), None (delete) or ``(AlterOp, value)``.
    ``resource_type`` may also be given by name (``"topic"``, ``"BROKER"``); ``"group"`` (32),
    ``"broker_logger"`` (8) and ``"client_metrics"`` (16), which aiokafka's enum lacks, are
    accepted by name or number and kept as ints.
    """

    def __init__(
        self,
        resource_type: ConfigResourceType | str | int,
        name: str,
        configs: dict[str, Any] | None = None,
    ) -> None:
        kind: ConfigResourceType | int
        if isinstance(resource_type, ConfigResourceType):
            kind = resource_type
        elif isinstance(resource_type, int) and resource_type in _MORE_TYPES.values():
            kind = int(resource_type)
        elif str(resource_type).upper() in _MORE_TYPES:
            kind = _MORE_TYPES[str(resource_type).upper()]
        else:
            try:
                if isinstance(resource_type, int):
                    kind = ConfigResourceType(resource_type)
                else:
                    kind = ConfigResourceType[str(resource_type).upper()]
            except (KeyError, ValueError):
                raise Errors.IllegalArgumentError(
                    f"unknown config resource type {resource_type!r}"
                ) from None
        self.resource_type = kind
        self.name = name
        self.configs = configs

    def __repr__(self) -> str:
        kind = self.resource_type
        names = {v: k for k, v in _MORE_TYPES.items()}
        label = kind.name if isinstance(kind, ConfigResourceType) else names[kind]
        return f"ConfigResource({label}, {self.name!r}, configs={self.configs!r})"


def by_target(
    config_resources: Iterable[ConfigResource],
) -> tuple[dict[int, list[ConfigResource]], list[ConfigResource]]:
    """``(broker resources by node id, the other resources)``: a broker's configs are asked of
    that broker."""
    brokers: dict[int, list[ConfigResource]] = {}
    others: list[ConfigResource] = []
    for res in config_resources:
        if res.resource_type == ConfigResourceType.BROKER:
            if not str(res.name).isdigit():
                raise Errors.IllegalArgumentError(
                    f"a BROKER config resource is named by its node id, not {res.name!r}"
                )
            brokers.setdefault(int(res.name), []).append(res)
        else:
            others.append(res)
    return brokers, others
