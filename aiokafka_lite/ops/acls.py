"""ACLs (DescribeAcls, CreateAcls, DeleteAcls) and DescribeLogDirs.

A broker without an authorizer answers the ACL calls with SECURITY_DISABLED.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol import messages as m
from ..structs import TopicPartition
from ._exec import ItemError, to_node

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = [
    "AclBinding",
    "AclFilter",
    "LogDirInfo",
    "create_acls",
    "delete_acls",
    "describe_acls",
    "describe_log_dirs",
    "log_dirs_supported",
]

#: resource types, pattern types, operations and permissions use the protocol's numbers:
#: resource ANY=1 TOPIC=2 GROUP=3 CLUSTER=4 TRANSACTIONAL_ID=5; pattern ANY=1 MATCH=2 LITERAL=3
#: PREFIXED=4; operation ANY=1 ALL=2 READ=3 WRITE=4 CREATE=5 DELETE=6 ALTER=7 DESCRIBE=8 ...;
#: permission ANY=1 DENY=2 ALLOW=3.
ANY = 1
LITERAL = 3


@dataclass(frozen=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not do what (operation) on which resource."""

    resource_type: int
    resource_name: str
    principal: str
    host: str
    operation: int
    permission_type: int
    pattern_type: int = LITERAL


@dataclass(frozen=True)
class AclFilter:
    """A filter over ACLs: None / ANY (1) match everything."""

    resource_type: int = ANY
    resource_name: str | None = None
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission_type: int = ANY
    pattern_type: int = ANY


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    """An AclFilter as the filter fields DescribeAcls and DeleteAcls share."""
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission_type,
    }


def describe_acls_request(f: AclFilter) -> Any:
    """DescribeAcls matching ``f``."""
    return m.DescribeAclsRequest(**_filter_fields(f))


def parse_describe_acls(resp: Any) -> list[AclBinding] | ItemError:
    """The matching ACLs, or the request's error."""
    if resp.error_code:
        return ItemError(resp.error_code, resp.error_message)
    return [
        AclBinding(
            r.resource_type,
            r.resource_name,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
            r.pattern_type,
        )
        for r in resp.resources
        for a in r.acls
    ]


async def describe_acls(
    client: KafkaClient, acl_filter: AclFilter, *, timeout_ms: float | None = None
) -> list[AclBinding]:
    """The ACLs matching ``acl_filter``; raises the broker's error (e.g. SecurityDisabledError)."""
    resp = await to_node(
        client, describe_acls_request(acl_filter), timeout_ms=timeout_ms, what="DescribeAcls"
    )
    res = parse_describe_acls(resp)
    if isinstance(res, ItemError):
        raise res.exception("DescribeAcls")
    return res


def create_acls_request(acls: Sequence[AclBinding]) -> Any:
    """CreateAcls of ``acls``."""
    return m.CreateAclsRequest(
        creations=[
            m.CreateAclsRequest.AclCreation(
                resource_type=a.resource_type,
                resource_name=a.resource_name,
                resource_pattern_type=a.pattern_type,
                principal=a.principal,
                host=a.host,
                operation=a.operation,
                permission_type=a.permission_type,
            )
            for a in acls
        ]
    )


async def create_acls(
    client: KafkaClient, acls: Sequence[AclBinding], *, timeout_ms: float | None = None
) -> list[ItemError | None]:
    """CreateAcls: per ACL (same order) None on success or its error."""
    resp = await to_node(
        client, create_acls_request(acls), timeout_ms=timeout_ms, what="CreateAcls"
    )
    return [
        ItemError(r.error_code, r.error_message) if r.error_code else None for r in resp.results
    ]


def delete_acls_request(filters: Sequence[AclFilter]) -> Any:
    """DeleteAcls matching any of ``filters``."""
    return m.DeleteAclsRequest(
        filters=[m.DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(f)) for f in filters]
    )


async def delete_acls(
    client: KafkaClient, filters: Sequence[AclFilter], *, timeout_ms: float | None = None
) -> list[list[AclBinding] | ItemError]:
    """DeleteAcls: per filter (same order) the ACLs deleted, or the filter's error."""
    resp = await to_node(
        client, delete_acls_request(filters), timeout_ms=timeout_ms, what="DeleteAcls"
    )
    out: list[list[AclBinding] | ItemError] = []
    for r in resp.filter_results:
        if r.error_code:
            out.append(ItemError(r.error_code, r.error_message))
            continue
        out.append(
            [
                AclBinding(
                    a.resource_type,
                    a.resource_name,
                    a.principal,
                    a.host,
                    a.operation,
                    a.permission_type,
                    a.pattern_type,
                )
                for a in r.matching_acls
                if not a.error_code
            ]
        )
    return out


# --------------------------------------------------------------------------- DescribeLogDirs


@dataclass(frozen=True)
class LogDirInfo:
    """One log directory of one broker, with the size of each partition it holds."""

    broker: int
    log_dir: str
    error_code: int
    partition_sizes: dict[TopicPartition, int]
    total_bytes: int = -1
    usable_bytes: int = -1


def describe_log_dirs_request(partitions: Iterable[TopicPartition] | None) -> Any:
    """DescribeLogDirs of ``partitions`` (None: all)."""
    if partitions is None:
        return m.DescribeLogDirsRequest(topics=None)
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return m.DescribeLogDirsRequest(
        topics=[
            m.DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=ps)
            for t, ps in by_topic.items()
        ]
    )


def log_dirs_supported(client: KafkaClient) -> bool:
    """True if the brokers (as last negotiated) advertise DescribeLogDirs."""
    return client.supports(m.DescribeLogDirsRequest)


async def describe_log_dirs(
    client: KafkaClient,
    partitions: Iterable[TopicPartition] | None = None,
    broker_ids: Iterable[int] | None = None,
    *,
    timeout_ms: float | None = None,
) -> list[LogDirInfo]:
    """DescribeLogDirs on each broker (default: all)."""
    tps = None if partitions is None else list(partitions)
    nodes = (
        sorted(int(b.nodeId) for b in client.cluster.brokers())
        if broker_ids is None
        else list(broker_ids)
    )
    answers = await asyncio.gather(
        *(
            to_node(
                client,
                describe_log_dirs_request(tps),
                node_id=n,
                timeout_ms=timeout_ms,
                what="DescribeLogDirs",
            )
            for n in nodes
        )
    )
    out: list[LogDirInfo] = []
    for node, resp in zip(nodes, answers):
        if resp.error_code:
            raise ItemError(resp.error_code).exception(f"DescribeLogDirs on broker {node}")
        for r in resp.results:
            sizes = {
                TopicPartition(t.name, p.partition_index): p.partition_size
                for t in r.topics
                for p in t.partitions
            }
            out.append(
                LogDirInfo(node, r.log_dir, r.error_code, sizes, r.total_bytes, r.usable_bytes)
            )
    return out
