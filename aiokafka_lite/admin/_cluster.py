"""ACL and log-directory methods of :class:`~aiokafka_lite.admin.AIOKafkaAdminClient`
(beyond aiokafka): DescribeAcls/CreateAcls/DeleteAcls and DescribeLogDirs, built and parsed
in :mod:`aiokafka_lite.ops.acls`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import errors as Errors
from ..ops import ItemError
from ..ops import acls as acl_ops
from ..structs import TopicPartition

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = ["ClusterAdmin"]


class ClusterAdmin:
    """The admin client's ACL and log-directory methods (mixed into AIOKafkaAdminClient)."""

    _client: KafkaClient

    async def describe_acls(self, acl_filter: acl_ops.AclFilter) -> list[acl_ops.AclBinding]:
        """ACLs matching ``acl_filter`` (SecurityDisabled when the broker has no authorizer)."""
        return await acl_ops.describe_acls(self._client, acl_filter)

    async def create_acls(
        self, acls: Sequence[acl_ops.AclBinding]
    ) -> list[Errors.KafkaError | None]:
        """Create ACLs: per ACL (same order) None or its error."""
        res = await acl_ops.create_acls(self._client, acls)
        return [None if e is None else e.exception("CreateAcls") for e in res]

    async def delete_acls(
        self, filters: Sequence[acl_ops.AclFilter]
    ) -> list[list[acl_ops.AclBinding] | Errors.KafkaError]:
        """Delete ACLs: per filter (same order) the ACLs deleted, or the filter's error."""
        res = await acl_ops.delete_acls(self._client, filters)
        return [r.exception("DeleteAcls") if isinstance(r, ItemError) else r for r in res]

    async def describe_log_dirs(
        self,
        partitions: list[TopicPartition] | None = None,
        broker_ids: list[int] | None = None,
    ) -> list[acl_ops.LogDirInfo]:
        """Log directories of each broker and the partition sizes in them (DescribeLogDirs);
        UnsupportedVersionError when the brokers do not advertise it."""
        if not acl_ops.log_dirs_supported(self._client):
            raise Errors.UnsupportedVersionError("the brokers do not support DescribeLogDirs")
        return await acl_ops.describe_log_dirs(self._client, partitions, broker_ids)
