"""Every wire version both sides speak, against Apache Kafka 4.x and 3.9.

The codec's own tests check round trips against the JSON specs; here each version of the common
requests goes to a real Apache Kafka and must be understood both ways: 3.9 still speaks the old
versions that 4.0 removed (KIP-896), 4.x speaks the newest ones. Then the ordinary producer,
consumer group and transactions run on 3.9 too (version negotiation picks other versions there).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka_lite.conn import BrokerConnection, pick_version
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.records import CODEC_NONE, RecordBatchBuilder, iter_batches

pytestmark = pytest.mark.slow


@pytest.fixture(params=["4.x", "3.9"])
def apache_any(request: pytest.FixtureRequest, broker: Any) -> Any:
    """The session's apache broker (4.x) or the 3.9 one; other broker kinds skip."""
    if request.param == "3.9":
        if broker.kind != "apache":
            pytest.skip("the 3.9 run happens once, alongside the apache broker")
        return request.getfixturevalue("apache39")
    broker.skip_on("tansu", "noida", reason="the version sweep checks Apache Kafka's answers")
    return broker


@pytest.fixture
async def conn(apache_any: Any) -> AsyncIterator[BrokerConnection]:
    host, port = apache_any.bootstrap.split(",")[0].rsplit(":", 1)
    c = BrokerConnection(host, int(port))
    await c.connect(timeout_ms=10000)
    yield c
    c.close()
    await c.wait_closed()


def _versions(conn: BrokerConnection, cls: Any) -> list[int]:
    key = cls.API_KEY
    bmin, bmax = conn.api_versions[key]
    lo, hi = max(bmin, cls.MIN_VERSION), min(bmax, cls.MAX_VERSION)
    assert lo <= hi, f"{cls.__name__}: no common version (broker {bmin}-{bmax})"
    return list(range(lo, hi + 1))


async def _create(conn: BrokerConnection, name: str, partitions: int = 1) -> Any:
    """Create ``name`` and wait for its leaders; its topic id (None below Metadata v10)."""
    topic = m.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
    )
    resp = await conn.send(m.CreateTopicsRequest(topics=[topic], timeout_ms=10000))
    assert resp.topics[0].error_code == 0, resp
    for _ in range(100):  # the leader appears shortly after creation
        md = await conn.send(
            m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)])
        )
        parts = md.topics[0].partitions if md.topics and md.topics[0].error_code == 0 else []
        if parts and all(p.leader_id >= 0 for p in parts):
            return md.topics[0].topic_id
        await asyncio.sleep(0.1)
    raise AssertionError(f"topic {name} has no leader")


async def test_metadata_every_version(conn):
    name = f"sweep-md-{uuid.uuid4().hex[:8]}"
    await _create(conn, name, 3)
    for v in _versions(conn, m.MetadataRequest):
        topics = [m.MetadataRequest.MetadataRequestTopic(name=name)]
        resp = await conn.send(m.MetadataRequest(topics=topics), _version=v)
        assert [t.name for t in resp.topics] == [name], v
        assert resp.topics[0].error_code == 0 and len(resp.topics[0].partitions) == 3, v
        assert resp.brokers and resp.brokers[0].port > 0, v


async def test_api_versions_every_version(conn):
    for v in _versions(conn, m.ApiVersionsRequest):
        resp = await conn.send(
            m.ApiVersionsRequest(client_software_name="sweep", client_software_version="1"),
            _version=v,
        )
        assert resp.error_code == 0 and resp.api_keys, v


async def test_produce_fetch_list_offsets_every_version(conn):
    """Each Produce version appends a batch; each Fetch version reads them all back."""
    name = f"sweep-pf-{uuid.uuid4().hex[:8]}"
    topic_id = await _create(conn, name)
    produced: list[bytes] = []
    now_ms = int(time.time() * 1000)  # an old timestamp is past retention: deleted by a check
    for v in _versions(conn, m.ProduceRequest.BY_ID):  # v13+ name the topic by id (KIP-516)
        builder = RecordBatchBuilder(CODEC_NONE, batch_size=16384)
        value = f"produce-v{v}".encode()
        assert builder.append(now_ms + v, b"k", value, [("h", b"v")]) is not None
        part = m.ProduceRequest.TopicProduceData.PartitionProduceData(
            index=0, records=builder.build()
        )
        req = m.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=10000,
            topic_data=[
                m.ProduceRequest.TopicProduceData(
                    name=name, topic_id=topic_id, partition_data=[part]
                )
            ],
        )
        resp = await conn.send(req, _version=v)
        assert (resp.responses[0].name or None) == (name if v < 13 else None), v
        answer = resp.responses[0].partition_responses[0]
        assert answer.error_code == 0, (v, answer)
        assert answer.base_offset == len(produced), v
        produced.append(value)

    for v in _versions(conn, m.FetchRequest):
        fpart = m.FetchRequest.FetchTopic.FetchPartition(
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        req = m.FetchRequest(
            replica_id=-1,
            max_wait_ms=100,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[m.FetchRequest.FetchTopic(topic=name, topic_id=topic_id, partitions=[fpart])],
        )
        resp = await conn.send(req, _version=v)  # v13+ name the topic by id (KIP-516)
        data = resp.responses[0].partitions[0]
        assert data.error_code == 0 and data.high_watermark == len(produced), v
        values = [
            rec[3] for batch in iter_batches(data.records or b"") for rec in batch.record_tuples()
        ]
        assert values == produced, v

    for v in _versions(conn, m.ListOffsetsRequest):
        lop = m.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
        parts = [lop(partition_index=0, current_leader_epoch=-1, timestamp=-1, max_num_offsets=1)]
        req = m.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[m.ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=parts)],
        )
        resp = await conn.send(req, _version=v)
        p = resp.topics[0].partitions[0]
        assert p.error_code == 0, v
        latest = p.offset if v >= 1 else p.old_style_offsets[0]
        assert latest == len(produced), v


async def test_group_reads_every_version(conn):
    """FindCoordinator, ListGroups, DescribeGroups and OffsetFetch for an unknown group."""
    group = f"sweep-g-{uuid.uuid4().hex[:8]}"
    for v in _versions(conn, m.FindCoordinatorRequest):
        req = m.FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group])
        for _ in range(50):  # the offsets topic is created on first use
            resp = await conn.send(req, _version=v)
            code = resp.coordinators[0].error_code if v >= 4 else resp.error_code
            if code != 15:  # COORDINATOR_NOT_AVAILABLE
                break
            await asyncio.sleep(0.2)
        assert code == 0, (v, resp)
    for v in _versions(conn, m.ListGroupsRequest):
        resp = await conn.send(m.ListGroupsRequest(states_filter=[], types_filter=[]), _version=v)
        assert resp.error_code == 0, v
    for v in _versions(conn, m.DescribeGroupsRequest):
        for _ in range(50):  # the group's offsets partition may still be loading
            resp = await conn.send(m.DescribeGroupsRequest(groups=[group]), _version=v)
            described = resp.groups[0]
            if described.error_code not in (14, 15, 16):  # loading / not available / not coord.
                break
            await asyncio.sleep(0.2)
        assert described.group_id == group, v
        # an unknown group: "Dead" with no error, v6+ (KIP-1043) "Dead" with GROUP_ID_NOT_FOUND
        assert (described.error_code, described.group_state) == (69 if v >= 6 else 0, "Dead"), v


async def test_offset_commit_fetch_every_version(conn):
    """Each OffsetCommit version commits (v10 names the topic by id, KIP-848 era) and each
    OffsetFetch version reads the last commit back, by name up to v9 and by id at v10."""
    name = f"sweep-oc-{uuid.uuid4().hex[:8]}"
    topic_id = await _create(conn, name)
    group = f"sweep-ocg-{uuid.uuid4().hex[:8]}"
    find = m.FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group])
    for _ in range(50):  # the offsets topic is created on first use (readiness, bounded)
        resp = await conn.send(find)
        code = resp.coordinators[0].error_code if resp.coordinators else resp.error_code
        if code == 0:
            break
        await asyncio.sleep(0.2)
    committed = -1
    # v0 keeps offsets in ZooKeeper: a KRaft broker (3.9) refuses it, 4.x no longer has it
    for v in [v for v in _versions(conn, m.OffsetCommitRequest) if v > 0]:
        part = m.OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=100 + v, committed_metadata=f"v{v}"
        )
        topic = m.OffsetCommitRequest.OffsetCommitRequestTopic(
            name=name, topic_id=topic_id, partitions=[part]
        )
        req = m.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[topic]
        )
        for _ in range(50):  # the group's offsets partition may still be loading
            resp = await conn.send(req, _version=v)
            code = resp.topics[0].partitions[0].error_code
            if code not in (14, 15, 16):
                break
            await asyncio.sleep(0.2)
        assert code == 0, (v, resp)
        assert (resp.topics[0].name, resp.topics[0].topic_id if v >= 10 else None) == (
            (name, None) if v < 10 else ("", topic_id)
        ), v
        committed = 100 + v
    for v in [v for v in _versions(conn, m.OffsetFetchRequest) if v > 0]:  # v0: ZooKeeper's
        topics = m.OffsetFetchRequest.OffsetFetchRequestTopic
        gtopics = m.OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics
        req = m.OffsetFetchRequest(
            group_id=group,
            topics=[topics(name=name, partition_indexes=[0])],
            groups=[
                m.OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[gtopics(name=name, topic_id=topic_id, partition_indexes=[0])],
                )
            ],
        )
        resp = await conn.send(req, _version=v)
        t = resp.groups[0].topics[0] if v >= 8 else resp.topics[0]
        assert (t.name or None, t.topic_id if v >= 10 else None) == (
            (name, None) if v < 10 else (None, topic_id)
        ), v
        assert t.partitions[0].committed_offset == committed, v


async def test_api_versions_v5_cluster_check(conn, apache_any):
    """ApiVersions v5 (KIP-1242) with the cluster id and node id the client expects: the
    right ones connect, another cluster's id is answered REBOOTSTRAP_REQUIRED (the client
    rebootstraps on it; Kafka 3.9 has no v5 and ignores the check)."""
    from aiokafka_lite import errors as Errors

    md = await conn.send(m.MetadataRequest(topics=[]))
    host, port = apache_any.bootstrap.split(",")[0].rsplit(":", 1)
    node = next(b.node_id for b in md.brokers if b.port == int(port))
    right = BrokerConnection(host, int(port), node_id=node, cluster_id=md.cluster_id)
    await right.connect(timeout_ms=10000)
    right.close()
    wrong = BrokerConnection(host, int(port), node_id=node, cluster_id="another-cluster-xxxxxx")
    if conn.api_versions[m.ApiVersionsRequest.API_KEY][1] < 5:
        await wrong.connect(timeout_ms=10000)  # 3.9: no check
        wrong.close()
        return
    with pytest.raises(Errors.RebootstrapRequiredError):
        await wrong.connect(timeout_ms=10000)


async def test_configs_every_version(conn):
    name = f"sweep-cfg-{uuid.uuid4().hex[:8]}"
    await _create(conn, name)
    for v in _versions(conn, m.DescribeConfigsRequest):
        res = m.DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=name, configuration_keys=None
        )
        resp = await conn.send(m.DescribeConfigsRequest(resources=[res]), _version=v)
        result = resp.results[0]
        assert result.error_code == 0, v
        assert "cleanup.policy" in {c.name for c in result.configs}, v


async def test_clients_on_kafka_39(apache39):
    """Producer, group consumer with commits, and a transaction, on the 3.9 line."""
    bootstrap = apache39.bootstrap
    topic = f"on39-{uuid.uuid4().hex[:8]}"
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4")
    await plain.start()
    try:
        for i in range(5):
            await plain.send_and_wait(topic, f"plain-{i}".encode())
    finally:
        await plain.stop()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"t-{topic}")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(topic, b"committed")
        await producer.begin_transaction()
        await producer.send(topic, b"aborted")
        await producer.abort_transaction()
    finally:
        await producer.stop()
    group = f"g-{topic}"
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        values: list[bytes] = []
        for _ in range(30):  # until all six arrive, each poll bounded
            batch = await consumer.getmany(timeout_ms=1000)
            values += [r.value for rs in batch.values() for r in rs]
            if len(values) >= 6:
                break
        await consumer.commit()
        tp = TopicPartition(topic, 0)
        assert await consumer.committed(tp) == await consumer.position(tp)
    finally:
        await consumer.stop()
    assert values == [f"plain-{i}".encode() for i in range(5)] + [b"committed"]


#: APIs the client sends below Apache Kafka 4.4's newest version, each named with its reason
#: in the site's protocol coverage page, "Kafka 4.4 client KIPs" (this test checks it names them)
README_SECTION = "## Kafka 4.4 client KIPs"


def _readme_behind() -> str:
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "reference" / "protocol.md").read_text()
    start = text.index(README_SECTION)
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


async def test_api_version_table(broker: Any) -> None:
    """The table of the versions the client uses against Apache Kafka 4.4's newest: every API
    at the broker's newest, or a row of docs/reference/protocol.md saying why not."""
    broker.skip_on("tansu", "noida", reason="the table is about Apache Kafka 4.4's versions")
    host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)
    c = BrokerConnection(host, int(port))
    await c.connect(timeout_ms=10000)
    try:
        theirs = c.api_versions
    finally:
        c.close()
        await c.wait_closed()
    rows, behind = [], []
    for key, cls in sorted(m.REQUESTS_BY_KEY.items()):
        if key not in theirs:
            continue  # an API this broker does not have (none on 4.4)
        # Produce: the BY_ID class (v13, topics by id, KIP-516) when the metadata has ids
        used = pick_version(getattr(cls, "BY_ID", None) or cls, theirs, "broker")
        newest = theirs[key][1]
        rows.append(f"  {cls.API_NAME:<28} v{used:<3} v{newest:<3} {'' if used == newest else '<'}")
        if used < newest:
            behind.append(cls.API_NAME)
    print("\n  api                          used broker's newest\n" + "\n".join(rows))
    section = _readme_behind()
    missing = [name for name in behind if f"| {name} |" not in section]
    assert not missing, (
        f"below the broker's newest with no row in docs/reference/protocol.md saying why: {missing}"
    )
