"""AIOKafkaAdminClient against the real brokers: aiokafka's surface and the ops-tooling extras.

Where practical a result is compared with aiokafka's admin client on the same broker (the
behavioural oracle). Per-broker skips name what the broker lacks (DESIGN.md's table).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import pytest

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka_lite import errors as Errors
from aiokafka_lite.admin import (
    AclFilter,
    AIOKafkaAdminClient,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    RecordsToDelete,
)
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

TIMEOUT = 30.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _until(check, what: str, timeout: float = TIMEOUT):
    """Poll ``check()`` (async) until it returns a truthy value."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: not true after {timeout} s")
        await asyncio.sleep(0.05)


async def _produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        for i in range(n):
            await producer.send_and_wait(topic, f"v{i}".encode(), key=b"k", partition=partition)


async def _consume_and_commit(bootstrap: str, topic: str, group: str, n: int) -> None:
    """A group member reads ``n`` records, commits them and leaves (the group becomes Empty)."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
        max_poll_records=n,
    )  # fmt: skip
    await consumer.start()
    try:
        got = 0
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while got < n:
            assert asyncio.get_running_loop().time() < deadline, "records did not arrive"
            batches = await consumer.getmany(timeout_ms=1000, max_records=n - got)
            got += sum(len(v) for v in batches.values())
        await consumer.commit()
    finally:
        await consumer.stop()


# ------------------------------------------------------------------------------------ topics


async def test_create_list_delete_topics(broker):
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        a, b = _name("admin-a"), _name("admin-b")
        resp = await admin.create_topics([NewTopic(a, 3, 1), NewTopic(b, 1, 1)])
        assert sorted(resp.topic_errors) == sorted([(a, 0, None), (b, 0, None)])

        async def listed() -> bool:  # Apache Kafka: brokers learn new topics asynchronously
            return {a, b} <= set(await admin.list_topics())

        await _until(listed, f"{a} and {b} listed")
        described = await admin.describe_topics([a])
        assert described[0]["topic"] == a
        assert sorted(p["partition"] for p in described[0]["partitions"]) == [0, 1, 2]

        # a per-topic error is returned, not raised (as aiokafka)
        again = await admin.create_topics([NewTopic(a, 3, 1)])
        [(topic, code, _message)] = again.topic_errors
        assert (topic, code) == (a, Errors.TopicAlreadyExistsError.errno)
        assert again.to_object()["topic_errors"][0]["error_code"] == code

        deleted = await admin.delete_topics([a, "never-created-" + a])
        assert dict(deleted.topic_error_codes) == {
            a: 0,
            "never-created-" + a: Errors.UnknownTopicOrPartitionError.errno,
        }

        async def gone() -> bool:  # deletion is asynchronous on Apache Kafka
            return a not in await admin.list_topics()

        await _until(gone, f"{a} deleted")
        assert b in await admin.list_topics()
        await admin.delete_topics([b])


async def test_describe_cluster_and_coordinator(broker):
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        info = await admin.describe_cluster()
        ids = {b["node_id"] for b in info["brokers"]}
        assert ids and info["controller_id"] in ids
        assert info["cluster_id"]
        assert await admin.find_coordinator("admin-test-group") in ids


async def test_create_partitions(broker, new_topic):
    broker.skip_on("tansu", reason="Tansu does not advertise CreatePartitions")
    topic = await new_topic(partitions=1)
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        resp = await admin.create_partitions({topic: NewPartitions(3)})
        assert list(resp.topic_errors) == [(topic, 0, None)]

        async def three() -> bool:
            described = await admin.describe_topics([topic])
            return len(described[0]["partitions"]) == 3

        await _until(three, "3 partitions")
        with pytest.raises(Errors.InvalidPartitionsError):  # not an increase: raised (aiokafka)
            await admin.create_partitions({topic: NewPartitions(2)})


def test_new_topic_validation():
    with pytest.raises(Errors.IllegalArgumentError):
        NewTopic("x", 3, 1, replica_assignments={0: [1]})
    t = NewTopic("x", -1, -1, replica_assignment={0: [1], 1: [1]})
    assert t.replica_assignments == {0: [1], 1: [1]}
    assert NewTopic("y", 1, 1, topic_configs={"retention.ms": "1000"}).topic_configs
    with pytest.raises(Errors.IllegalArgumentError):
        ConfigResource("nonsense", "x")


def test_unknown_keyword_argument_is_a_type_error():
    with pytest.raises(TypeError):
        AIOKafkaAdminClient(bootstrap_server="somewhere:9092")  # typo of bootstrap_servers


# ----------------------------------------------------------------------------------- configs


async def test_describe_alter_and_incremental_alter_configs(broker, new_topic):
    broker.skip_on("tansu", reason="Tansu answers DescribeConfigs with 0 entries")
    topic = await new_topic()
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:

        async def value(name: str) -> str | None:
            [resp] = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, {name: None})]
            )
            [(code, _msg, rtype, rname, entries)] = resp.resources
            assert (code, rtype, rname) == (0, ConfigResourceType.TOPIC, topic)
            return next(e.config_value for e in entries if e.config_names == name)

        async def shows(name: str, expected: str) -> bool:
            # A KRaft broker applies a committed config change to its own view a moment after
            # the alter returns: describe until it shows the change (bounded).
            deadline = asyncio.get_running_loop().time() + 15
            while (current := await value(name)) != expected:
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"{name} is {current!r}, not {expected!r}, after 15 s")
                await asyncio.sleep(0.05)
            return True

        [altered] = await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "123456"})]
        )
        [res] = altered.resources
        assert (res.error_code, res.resource_type, res.resource_name) == (0, 2, topic)
        assert await shows("retention.ms", "123456")

        [inc] = await admin.incremental_alter_configs(
            [ConfigResource("topic", topic, {"segment.ms": "3600000", "retention.ms": None})]
        )
        assert inc.resources[0].error_code == 0
        assert await shows("segment.ms", "3600000")
        assert await shows("retention.ms", "604800000")  # deleted: back to the default

        [bad] = await admin.incremental_alter_configs(
            [ConfigResource("topic", topic, {"retention.ms": "not-a-number"})]
        )
        assert bad.resources[0].error_code == Errors.InvalidConfigurationError.errno


async def test_describe_broker_configs(broker):
    broker.skip_on("tansu", reason="Tansu answers DescribeConfigs with 0 entries")
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        node = (await admin.describe_cluster())["brokers"][0]["node_id"]
        [resp] = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(node))], include_synonyms=True
        )
        [res] = resp.resources
        assert res.error_code == 0 and res.resource_name == str(node)
        names = {e.config_names for e in res.config_entries}
        assert "num.partitions" in names
        with pytest.raises(Errors.IllegalArgumentError):
            await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "localhost")])


# ------------------------------------------------------------------------------------ groups


async def test_consumer_group_lifecycle(broker, new_topic):
    topic = await new_topic(partitions=2)
    group = _name("admin-grp")
    await _produce(broker.bootstrap, topic, 10)
    await _consume_and_commit(broker.bootstrap, topic, group, 4)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        assert (group, "consumer") in await admin.list_consumer_groups()
        [resp] = await admin.describe_consumer_groups([group])
        [(code, gid, state, ptype, _protocol, members)] = resp.groups
        assert (code, gid, state, ptype, members) == (0, group, "Empty", "consumer", [])

        offsets = await admin.list_consumer_group_offsets(group)
        assert offsets[tp0] == OffsetAndMetadata(4, "")
        asked = await admin.list_consumer_group_offsets(group, partitions=[tp0, tp1])
        assert asked[tp0].offset == 4 and asked.get(tp1, OffsetAndMetadata(-1, "")).offset in (
            -1,
            0,
        )

        await admin.alter_consumer_group_offsets(group, {tp0: OffsetAndMetadata(6, "meta")})
        after = (await admin.list_consumer_group_offsets(group))[tp0]
        assert after.offset == 6
        if broker.kind != "tansu":  # Tansu does not keep commit metadata
            assert after.metadata == "meta"

        planned = await admin.reset_consumer_group_offsets(group, "earliest", dry_run=True)
        assert planned[tp0].offset == 0
        assert (await admin.list_consumer_group_offsets(group))[tp0].offset == 6  # dry run
        await admin.reset_consumer_group_offsets(group, 100)  # clamped to the log end
        if broker.kind != "tansu":  # Tansu's ListOffsets "latest" is the newest batch's base + 1
            assert (await admin.list_consumer_group_offsets(group))[tp0].offset == 10
        await admin.reset_consumer_group_offsets(
            group, dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
        )
        assert (await admin.list_consumer_group_offsets(group))[tp0].offset == 0
        with pytest.raises(Errors.IllegalArgumentError):
            await admin.reset_consumer_group_offsets(group, "yesterday")

        if broker.kind != "tansu":  # Tansu does not advertise OffsetDelete
            await admin.delete_consumer_group_offsets(group, [tp0])
            assert tp0 not in await admin.list_consumer_group_offsets(group)

        result = await admin.delete_consumer_groups([group])
        assert result == {group: None}

        async def gone() -> bool:
            return (group, "consumer") not in await admin.list_consumer_groups()

        await _until(gone, f"group {group} deleted")


async def test_reset_refuses_an_active_group(broker, new_topic):
    topic = await new_topic()
    group = _name("admin-active")
    await _produce(broker.bootstrap, topic, 2)
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group,
        auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
    )  # fmt: skip
    await consumer.start()
    try:
        await asyncio.wait_for(consumer.getone(), TIMEOUT)
        async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
            with pytest.raises(Errors.NonEmptyGroup):
                await admin.reset_consumer_group_offsets(group, "earliest")
            descriptions = await admin.describe_groups([group])
            [member] = descriptions[group].members
            if broker.kind != "tansu":  # Tansu's DescribeGroups has no member assignments
                assert set(member.assignment) == {TopicPartition(topic, 0)}
    finally:
        await consumer.stop()


async def test_delete_unknown_group(broker):
    broker.skip_on("tansu", reason="Tansu answers DeleteGroups of an unknown group without error")
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        group = _name("never-used")
        [(gid, err)] = (await admin.delete_consumer_groups([group])).items()
        assert gid == group and isinstance(err, Errors.GroupIdNotFound)


# ----------------------------------------------------------------------------------- offsets


async def test_list_offsets_and_delete_records(broker, new_topic):
    topic = await new_topic(partitions=2)
    await _produce(broker.bootstrap, topic, 5)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        found = await admin.list_offsets({tp0: "earliest", tp1: "latest"})
        assert found[tp0].offset == 0 and found[tp1].offset == 0
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            await admin.list_offsets({TopicPartition(_name("missing"), 0): "latest"})
        with pytest.raises(Errors.IllegalArgumentError):
            await admin.list_offsets({tp0: "soon"})
        if broker.kind == "tansu":
            pytest.skip("Tansu panics on DeleteRecords and its ListOffsets latest is inexact")
        assert (await admin.list_offsets({tp0: "latest"}))[tp0].offset == 5
        assert await admin.delete_records({tp0: RecordsToDelete(2)}) == {tp0: 2}
        assert (await admin.list_offsets({tp0: "earliest"}))[tp0].offset == 2
        with pytest.raises(Errors.OffsetOutOfRangeError):  # raised, as aiokafka
            await admin.delete_records({tp0: RecordsToDelete(100)})


# ------------------------------------------------------------------------- ACLs and log dirs


async def test_acls_without_an_authorizer(broker):
    broker.skip_on("tansu", reason="Tansu answers DescribeAcls with [] (no authorizer, no error)")
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(Errors.SecurityDisabled):
            await admin.describe_acls(AclFilter())


async def test_describe_log_dirs_unsupported_is_a_clear_error(broker):
    if broker.kind != "tansu":
        pytest.skip(f"[{broker.kind}] advertises DescribeLogDirs")
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(Errors.UnsupportedVersionError):
            await admin.describe_log_dirs()


async def test_describe_log_dirs(broker, new_topic):
    broker.skip_on("tansu", reason="Tansu does not advertise DescribeLogDirs")
    topic = await new_topic()
    await _produce(broker.bootstrap, topic, 3)
    async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        dirs = await admin.describe_log_dirs([TopicPartition(topic, 0)])
        sizes = {tp: size for d in dirs for tp, size in d.partition_sizes.items()}
        assert sizes[TopicPartition(topic, 0)] > 0


# ---------------------------------------------------------------- against aiokafka (oracle)


async def test_same_results_as_aiokafka(broker, new_topic):
    broker.skip_on("tansu", reason="aiokafka's admin client cannot decode Tansu's answers")
    from aiokafka.admin import AIOKafkaAdminClient as OracleAdmin

    topic = await new_topic(partitions=2)
    group = _name("oracle-grp")
    await _produce(broker.bootstrap, topic, 3)
    await _consume_and_commit(broker.bootstrap, topic, group, 3)
    oracle = OracleAdmin(bootstrap_servers=broker.bootstrap)
    await oracle.start()
    try:
        async with AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
            assert await admin.describe_topics([topic]) == await oracle.describe_topics([topic])
            assert set(await admin.list_topics()) == set(await oracle.list_topics())
            ours = await admin.list_consumer_group_offsets(group)
            theirs = await oracle.list_consumer_group_offsets(group)
            assert {tuple(tp): tuple(om) for tp, om in ours.items()} == {
                tuple(tp): tuple(om) for tp, om in theirs.items()
            }
            assert (group, "consumer") in await admin.list_consumer_groups()
            assert (group, "consumer") in await oracle.list_consumer_groups()
            name = _name("oracle-topic")
            ours_created = await admin.create_topics([NewTopic(name, 1, 1)])
            theirs_dup = await oracle.create_topics([NewTopic(name, 1, 1)])
            assert ours_created.to_object().keys() == theirs_dup.to_object().keys()
            ours_dup = await admin.create_topics([NewTopic(name, 1, 1)])
            assert [(t, c) for t, c, _m in ours_dup.topic_errors] == [
                (t, c) for t, c, _m in theirs_dup.topic_errors
            ]
            await admin.delete_topics([name])
    finally:
        await oracle.close()
