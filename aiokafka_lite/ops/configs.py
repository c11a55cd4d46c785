"""Configs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

Broker resources are sent to that broker (a broker answers only for itself); topic and other
resources to the least-loaded node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol import messages as m
from ._exec import to_node

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = [
    "BROKER",
    "TOPIC",
    "AlterOp",
    "ConfigEntry",
    "ConfigResult",
    "Resource",
    "alter_configs",
    "alter_configs_request",
    "describe_configs",
    "describe_configs_request",
    "incremental_alter_configs_request",
    "parse_alter_configs",
    "parse_describe_configs",
]

#: Resource types (the protocol's numbers)
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
#: group configs (share groups' share.auto.offset.reset, share.record.lock.duration.ms ...)
GROUP = 32


class AlterOp:
    """IncrementalAlterConfigs operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class Resource:
    """A config resource: type (:data:`TOPIC`, :data:`BROKER` ...), name and configs.

    ``configs``: names to describe (None: all) / values to set for AlterConfigs /
    ``(op, value)`` pairs for IncrementalAlterConfigs.
    """

    type: int
    name: str
    configs: Mapping[str, Any] | Sequence[str] | None = None


@dataclass(frozen=True)
class ConfigEntry:
    """One described config value."""

    name: str
    value: str | None
    read_only: bool
    source: int
    is_sensitive: bool
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    is_default: bool = False


@dataclass(frozen=True)
class ConfigResult:
    """A per-resource answer (``entries`` empty for the alter calls)."""

    type: int
    name: str
    error_code: int = 0
    error_message: str | None = None
    entries: tuple[ConfigEntry, ...] = ()


def _values(res: Resource) -> dict[str, Any]:
    if res.configs is None:
        return {}
    if not isinstance(res.configs, Mapping):
        raise TypeError(f"configs of {res.name!r} must map names to values")
    return dict(res.configs)


def _node_of(res: Resource) -> int | None:
    if res.type in (BROKER, BROKER_LOGGER) and str(res.name).lstrip("-").isdigit():
        return int(res.name)
    return None


def _split(resources: Sequence[Resource]) -> dict[int | None, list[Resource]]:
    groups: dict[int | None, list[Resource]] = {}
    for res in resources:
        groups.setdefault(_node_of(res), []).append(res)
    return groups


async def _per_node(
    client: KafkaClient,
    resources: Sequence[Resource],
    build: Any,
    parse: Any,
    timeout_ms: float | None,
    what: str,
) -> list[ConfigResult]:
    groups = _split(resources)
    answers = await asyncio.gather(
        *(
            to_node(client, build(res), node_id=node, timeout_ms=timeout_ms, what=what)
            for node, res in groups.items()
        )
    )
    out: list[ConfigResult] = []
    for resp in answers:
        out.extend(parse(resp))
    return out


# --------------------------------------------------------------------------- DescribeConfigs


def describe_configs_request(resources: Sequence[Resource], include_synonyms: bool = False) -> Any:
    """DescribeConfigs of ``resources`` (their ``configs`` name the keys; None: all)."""
    return m.DescribeConfigsRequest(
        resources=[
            m.DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=r.type,
                resource_name=str(r.name),
                configuration_keys=None if r.configs is None else list(r.configs),
            )
            for r in resources
        ],
        include_synonyms=include_synonyms,
    )


def parse_describe_configs(resp: Any) -> list[ConfigResult]:
    """Per-resource results with their entries."""
    return [
        ConfigResult(
            type=r.resource_type,
            name=r.resource_name,
            error_code=r.error_code,
            error_message=r.error_message,
            entries=tuple(
                ConfigEntry(
                    name=c.name,
                    value=c.value,
                    read_only=c.read_only,
                    source=c.config_source,
                    is_sensitive=c.is_sensitive,
                    synonyms=tuple((s.name, s.value, s.source) for s in c.synonyms or ()),
                    is_default=bool(c.is_default),
                )
                for c in r.configs or ()
            ),
        )
        for r in resp.results
    ]


async def describe_configs(
    client: KafkaClient,
    resources: Sequence[Resource],
    *,
    include_synonyms: bool = False,
    timeout_ms: float | None = None,
) -> list[ConfigResult]:
    """DescribeConfigs; per-resource errors are returned."""
    return await _per_node(
        client,
        resources,
        lambda res: describe_configs_request(res, include_synonyms),
        parse_describe_configs,
        timeout_ms,
        "DescribeConfigs",
    )


# ------------------------------------------------------------------------------ AlterConfigs


def alter_configs_request(resources: Sequence[Resource], validate_only: bool = False) -> Any:
    """AlterConfigs: replaces each resource's whole dynamic config with ``configs``."""
    return m.AlterConfigsRequest(
        resources=[
            m.AlterConfigsRequest.AlterConfigsResource(
                resource_type=r.type,
                resource_name=str(r.name),
                configs=[
                    m.AlterConfigsRequest.AlterConfigsResource.AlterableConfig(name=k, value=v)
                    for k, v in _values(r).items()
                ],
            )
            for r in resources
        ],
        validate_only=validate_only,
    )


def incremental_alter_configs_request(
    resources: Sequence[Resource], validate_only: bool = False
) -> Any:
    """IncrementalAlterConfigs: ``configs`` maps name -> ``(AlterOp, value)``."""
    req = m.IncrementalAlterConfigsRequest
    return req(
        resources=[
            req.AlterConfigsResource(
                resource_type=r.type,
                resource_name=str(r.name),
                configs=[
                    req.AlterConfigsResource.AlterableConfig(
                        name=k, config_operation=int(op), value=v
                    )
                    for k, (op, v) in _values(r).items()
                ],
            )
            for r in resources
        ],
        validate_only=validate_only,
    )


def parse_alter_configs(resp: Any) -> list[ConfigResult]:
    """Per-resource results of AlterConfigs / IncrementalAlterConfigs."""
    return [
        ConfigResult(r.resource_type, r.resource_name, r.error_code, r.error_message)
        for r in resp.responses
    ]


async def alter_configs(
    client: KafkaClient,
    resources: Sequence[Resource],
    *,
    validate_only: bool = False,
    incremental: bool = False,
    timeout_ms: float | None = None,
) -> list[ConfigResult]:
    """AlterConfigs (``incremental``: IncrementalAlterConfigs, ``configs`` values then being
    ``(AlterOp, value)``); per-resource errors are returned."""
    build = incremental_alter_configs_request if incremental else alter_configs_request
    return await _per_node(
        client,
        resources,
        lambda res: build(res, validate_only),
        parse_alter_configs,
        timeout_ms,
        "IncrementalAlterConfigs" if incremental else "AlterConfigs",
    )
