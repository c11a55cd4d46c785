"""The ops layer's sans-I/O parsers read every wire shape the codec can produce.

Each response is encoded at an old and a new version (where the shape changed) and decoded back,
as the connection does, then parsed: the results must not depend on the version.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.ops import ItemError
from aiokafka_lite.ops import groups as group_ops
from aiokafka_lite.ops import offsets as offset_ops
from aiokafka_lite.protocol import encode_data
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition


def _wire(obj: Any, version: int) -> Any:
    out = bytearray()
    type(obj).encoder(version)(out, obj)
    decoded, end = type(obj).decoder(version)(bytes(out), 0)
    assert end == len(out)
    return decoded


@pytest.mark.parametrize("version", [1, 7, 8, 9])
def test_offset_fetch_old_and_batched_shapes(version):
    partitions = [
        dict(partition_index=0, committed_offset=5, metadata="m", error_code=0),
        dict(partition_index=1, committed_offset=-1, metadata="", error_code=0),
        dict(partition_index=2, committed_offset=-1, metadata="", error_code=3),
    ]
    if version >= 8:
        resp = m.OffsetFetchResponse(
            groups=[
                m.OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id="g",
                    topics=[
                        m.OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics(
                            name="t",
                            partitions=[
                                m.OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics.OffsetFetchResponsePartitions(
                                    **p
                                )
                                for p in partitions
                            ],
                        )
                    ],
                )
            ]
        )
    else:
        resp = m.OffsetFetchResponse(
            topics=[
                m.OffsetFetchResponse.OffsetFetchResponseTopic(
                    name="t",
                    partitions=[
                        m.OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition(
                            **p
                        )
                        for p in partitions
                    ],
                )
            ]
        )
    parsed = offset_ops.parse_offset_fetch(_wire(resp, version), "g")["g"]
    assert parsed == {
        TopicPartition("t", 0): OffsetAndMetadata(5, "m"),
        TopicPartition("t", 1): OffsetAndMetadata(-1, ""),
        TopicPartition("t", 2): ItemError(3),
    }


def test_offset_fetch_retriable_partition_error_retries_the_group():
    resp = m.OffsetFetchResponse(
        topics=[
            m.OffsetFetchResponse.OffsetFetchResponseTopic(
                name="t",
                partitions=[
                    m.OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition(
                        partition_index=0, committed_offset=-1, error_code=88
                    )
                ],
            )
        ]
    )
    assert offset_ops.parse_offset_fetch(_wire(resp, 7), "g") == {"g": ItemError(88)}


@pytest.mark.parametrize("version", [0, 3, 4, 6])
def test_find_coordinator_old_and_batched_shapes(version):
    if version >= 4:
        resp = m.FindCoordinatorResponse(
            coordinators=[
                m.FindCoordinatorResponse.Coordinator(
                    key="g", node_id=2, host="h", port=9, error_code=0
                )
            ]
        )
    else:
        resp = m.FindCoordinatorResponse(node_id=2, host="h", port=9, error_code=0)
    found = group_ops.parse_find_coordinator(_wire(resp, version), "g")
    assert (found.node_id, found.host, found.port, found.error) == (2, "h", 9, None)


@pytest.mark.parametrize("version", [0, 1, 10])
def test_list_offsets_v0_old_style_offsets(version):
    part = m.ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    p = (
        part(partition_index=0, old_style_offsets=[7])
        if version == 0
        else part(partition_index=0, offset=7, timestamp=11)
    )
    resp = m.ListOffsetsResponse(
        topics=[m.ListOffsetsResponse.ListOffsetsTopicResponse(name="t", partitions=[p])]
    )
    [(tp, listed)] = offset_ops.parse_list_offsets(_wire(resp, version)).items()
    assert tp == TopicPartition("t", 0) and listed.offset == 7


def test_describe_groups_decodes_consumer_assignments():
    assignment = m.ConsumerProtocolAssignment(
        assigned_partitions=[
            m.ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[0, 2])
        ]
    )
    data = encode_data(assignment, 0)
    member = m.DescribeGroupsResponse.DescribedGroup.DescribedGroupMember
    resp = m.DescribeGroupsResponse(
        groups=[
            m.DescribeGroupsResponse.DescribedGroup(
                group_id="g",
                group_state="Stable",
                protocol_type="consumer",
                protocol_data="range",
                members=[
                    member(
                        member_id="a",
                        client_id="c",
                        client_host="/h",
                        member_metadata=b"",
                        member_assignment=data,
                    )
                ],
            ),
            m.DescribeGroupsResponse.DescribedGroup(group_id="x", error_code=15),
        ]
    )
    parsed = group_ops.parse_describe_groups(_wire(resp, 5))
    assert parsed["x"] == ItemError(15)  # coordinator not available: the executor retries
    g = parsed["g"]
    assert isinstance(g, group_ops.GroupDescription)
    assert g.members[0].assignment == (TopicPartition("t", 0), TopicPartition("t", 2))
