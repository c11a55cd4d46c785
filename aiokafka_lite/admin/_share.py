"""Share-group administration methods of :class:`~aiokafka_lite.admin.AIOKafkaAdminClient`
(KIP-932; aiokafka has none): describe, list, their start offsets, delete."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .. import errors as Errors
from ..ops import groups as group_ops
from ..ops import share_groups as share_ops
from ..ops._exec import ItemError
from ..structs import TopicPartition

if TYPE_CHECKING:
    from ..client import KafkaClient

__all__ = ["ShareGroupAdmin"]


class ShareGroupAdmin:
    """The admin client's share-group methods (mixed into AIOKafkaAdminClient)."""

    _client: KafkaClient

    async def describe_share_groups(
        self, group_ids: Iterable[str], include_authorized_operations: bool = False
    ) -> dict[str, share_ops.ShareGroupDescription]:
        """``{group_id: ShareGroupDescription}`` (state, epochs, members and their assigned
        partitions). A coordinator error is raised; other group errors (GROUP_ID_NOT_FOUND,
        a group of another type) are in ``description.error``."""
        found = await share_ops.describe_share_groups(
            self._client, group_ids, include_authorized_operations=include_authorized_operations
        )
        out: dict[str, share_ops.ShareGroupDescription] = {}
        for gid, d in found.items():
            if isinstance(d, ItemError):
                raise d.exception(f"ShareGroupDescribe of {gid!r}")
            out[gid] = d
        return out

    async def list_share_groups(self) -> list[group_ops.ListedGroup]:
        """Every share group of the cluster (ListGroups, type ``share``), sorted by id."""
        return [g for g in await group_ops.list_groups(self._client) if g.group_type == "share"]

    async def list_share_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, share_ops.ShareOffset]:
        """The group's start offset (first record not yet done with) and lag per partition:
        every partition it has state for, or ``partitions``. The first partition error is
        raised."""
        found = await share_ops.describe_share_group_offsets(
            self._client,
            group_id,
            None if partitions is None else [TopicPartition(*tp) for tp in partitions],
        )
        out: dict[TopicPartition, share_ops.ShareOffset] = {}
        for tp, v in found.items():
            if isinstance(v, ItemError):
                raise v.exception(f"DescribeShareGroupOffsets of {tp} in {group_id!r}")
            out[tp] = v
        return out

    async def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, Errors.KafkaError | None]:
        """Move the group's start offset in each partition (the group must be empty):
        ``{partition: None | its error}``."""
        res = await share_ops.alter_share_group_offsets(self._client, group_id, offsets)
        return {
            tp: (None if e is None else e.exception(f"AlterShareGroupOffsets of {tp}"))
            for tp, e in res.items()
        }

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str]
    ) -> dict[str, Errors.KafkaError | None]:
        """Forget the group's state for ``topics`` (the group must be empty):
        ``{topic: None | its error}``."""
        res = await share_ops.delete_share_group_offsets(self._client, group_id, topics)
        return {
            t: (None if e is None else e.exception(f"DeleteShareGroupOffsets of {t!r}"))
            for t, e in res.items()
        }

    async def delete_share_groups(
        self, group_ids: Iterable[str]
    ) -> dict[str, Errors.KafkaError | None]:
        """Delete share groups (they must have no members): ``{group_id: None | its error}``."""
        res = await group_ops.delete_groups(self._client, group_ids)
        return {
            gid: (None if err is None else err.exception(f"DeleteGroups of {gid!r}"))
            for gid, err in res.items()
        }
