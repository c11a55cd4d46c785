"""Shared fixtures: a real Kafka broker per test session, and topics on it.

Which brokers a run uses (``broker`` is parametrized, so ONE run covers every broker listed):

* ``KAFKA_BOOTSTRAP=host:port`` set: that broker only (param ``external``, nothing is started);
* else ``KAFKA_BROKER=apache|tansu|noida|kafka`` (or a comma list): those;
* else Apache Kafka in Docker through testcontainers (param ``kafka``) when a Docker engine answers;
* else Apache Kafka from Maven Central jars (param ``apache``, see ``aiokafka_lite.launchers.apache``) AND
  both embedded brokers, ``tansu`` and ``noida`` (see ``aiokafka_lite.launchers.embedded``). Without Java
  >= 17 and Maven the ``apache`` tests are skipped with one reason, unless
  ``AIOKAFKA_LITE_REQUIRE_APACHE=1`` (set by CI) makes that a failure.

Beyond the parametrized ``broker``: ``apache39`` (Apache Kafka 3.9, the last line with the protocol
versions 4.0 removed) and ``apache_cluster`` (three Apache Kafka 4.x nodes, for fault tests marked
``cluster``) start lazily for the tests that ask for them.

Each broker starts lazily, the first time a test needs it, once per session, and is stopped when
pytest moves on to the next broker or the session ends (also on Ctrl-C; ``launchers.embedded`` has an atexit
safety net too). Tests using the ``broker`` fixture (directly or through ``kafka_bootstrap`` /
``new_topic``) get the ``integration`` marker automatically.

Skipping a test on a broker that lacks a feature (give the reason, from DESIGN.md's table)::

    @pytest.mark.skip_broker("tansu", reason="Tansu does not filter aborted records")
    async def test_read_committed(kafka_bootstrap, new_topic): ...

    async def test_x(broker):
        broker.skip_on("noida", reason="...")   # inside a test, same effect
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pytest

EMBEDDED_KINDS = ("tansu", "noida")
STARTABLE_KINDS = ("apache", *EMBEDDED_KINDS, "kafka")
ALL_KINDS = (*STARTABLE_KINDS, "external")
REQUIRE_APACHE = os.environ.get("AIOKAFKA_LITE_REQUIRE_APACHE", "") not in ("", "0")


@dataclass
class BrokerInfo:
    """What tests see of the session's broker."""

    kind: str  # "apache" | "tansu" | "noida" | "kafka" | "external"
    bootstrap: str  # "host:port"
    process: Any = field(default=None, repr=False)  # ApacheKafka / EmbeddedBroker / ... / None
    #: SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256/512 with ``sasl_users``), where there is one
    sasl_bootstrap: str | None = None
    sasl_users: dict[str, str] = field(default_factory=dict)
    #: SSL listener and the CA file that signed its certificate, where there is one
    ssl_bootstrap: str | None = None
    ssl_cafile: str | None = None

    def skip_on(self, *kinds: str, reason: str) -> None:
        """Skip the running test when this broker is one of ``kinds``."""
        skip_on(self, *kinds, reason=reason)


def skip_on(broker: BrokerInfo, *kinds: str, reason: str) -> None:
    """Skip the running test when ``broker.kind`` is one of ``kinds``, with ``reason``."""
    unknown = set(kinds) - set(ALL_KINDS)
    if unknown:
        raise ValueError(f"unknown broker kind(s) {sorted(unknown)}; expected {ALL_KINDS}")
    if broker.kind in kinds:
        pytest.skip(f"[{broker.kind}] {reason}")


@cache
def _docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        result = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


@cache
def broker_params() -> tuple[str, ...]:
    """The broker kinds this run covers (see the module docstring)."""
    if os.environ.get("KAFKA_BOOTSTRAP"):
        return ("external",)
    wanted = os.environ.get("KAFKA_BROKER", "").strip()
    if wanted:
        kinds = tuple(k.strip() for k in wanted.split(",") if k.strip())
        bad = [k for k in kinds if k not in STARTABLE_KINDS]
        if bad:
            raise pytest.UsageError(f"KAFKA_BROKER: unknown kind(s) {bad}; use {STARTABLE_KINDS}")
        return kinds
    if _docker_available():
        return ("kafka",)
    return ("apache", *EMBEDDED_KINDS)


@cache
def _apache_unavailable() -> str | None:
    from aiokafka_lite.launchers.apache import apache_available

    return apache_available()


def _need_apache() -> None:
    """Skip (or, with AIOKAFKA_LITE_REQUIRE_APACHE=1, fail) when Apache Kafka cannot run here."""
    reason = _apache_unavailable()
    if reason is not None:
        if REQUIRE_APACHE:
            pytest.fail(f"AIOKAFKA_LITE_REQUIRE_APACHE is set but {reason}", pytrace=False)
        pytest.skip(f"[apache] {reason}")


def _apache_info(kafka: Any, kind: str = "apache") -> BrokerInfo:
    from aiokafka_lite.launchers.apache import SASL_USERS

    return BrokerInfo(
        kind,
        kafka.bootstrap,
        kafka,
        sasl_bootstrap=kafka.sasl_bootstrap,
        sasl_users=dict(SASL_USERS),
        ssl_bootstrap=kafka.ssl_bootstrap,
        ssl_cafile=kafka.ssl_cafile,
    )


def _start_kafka_container() -> tuple[Any, str]:
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # older testcontainers
        from testcontainers.kafka import KafkaContainer
    image = os.environ.get("KAFKA_IMAGE", "confluentinc/cp-kafka:7.6.0")
    container = KafkaContainer(image).with_kraft()
    container.start()
    return container, str(container.get_bootstrap_server())


@pytest.fixture(scope="session", params=broker_params())
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerInfo]:
    """The session's Kafka broker: ``.kind`` and ``.bootstrap`` (parametrized over kinds)."""
    kind: str = request.param
    if kind == "external":
        yield BrokerInfo("external", os.environ["KAFKA_BOOTSTRAP"])
        return
    if kind == "apache":
        _need_apache()
        from aiokafka_lite.launchers.apache import QUICK_JVM_OPTIONS, ApacheKafka

        kafka = ApacheKafka(jvm_options=QUICK_JVM_OPTIONS, class_data_sharing=True)
        try:
            kafka.start()
            yield _apache_info(kafka)
        finally:
            kafka.stop()
        return
    if kind == "kafka":
        container, bootstrap = _start_kafka_container()
        try:
            yield BrokerInfo("kafka", bootstrap, container)
        finally:
            container.stop()
        return
    from aiokafka_lite.launchers.embedded import EmbeddedBroker

    embedded = EmbeddedBroker(kind)
    try:
        embedded.start()
        yield BrokerInfo(kind, embedded.bootstrap, embedded)
    finally:
        embedded.stop()


@pytest.fixture(scope="session")
def apache39() -> Iterator[BrokerInfo]:
    """Apache Kafka 3.9 (one node), for protocol-version and interop tests."""
    _need_apache()
    from aiokafka_lite.launchers.apache import KAFKA_VERSIONS, QUICK_JVM_OPTIONS, ApacheKafka

    kafka = ApacheKafka(
        KAFKA_VERSIONS["3.9"], jvm_options=QUICK_JVM_OPTIONS, class_data_sharing=True
    )
    try:
        kafka.start()
        yield _apache_info(kafka, "apache")
    finally:
        kafka.stop()


@pytest.fixture(scope="session")
def apache_cluster() -> Iterator[BrokerInfo]:
    """Three Apache Kafka 4.x nodes (each broker and controller voter); ``.process`` controls them."""
    _need_apache()
    from aiokafka_lite.launchers.apache import QUICK_JVM_OPTIONS, ApacheKafka

    kafka = ApacheKafka(nodes=3, jvm_options=QUICK_JVM_OPTIONS, class_data_sharing=True)
    try:
        kafka.start()
        yield _apache_info(kafka)
    finally:
        kafka.stop()


@pytest.fixture(autouse=True)
def _whole_cluster(request: pytest.FixtureRequest) -> Iterator[None]:
    """For tests on ``apache_cluster``: every node running and ready before the test, and again
    after it (a test kills, stops or pauses nodes and only starts them again). The waits are
    set-up and tear-down, bounded by the cluster's own ``startup_timeout``, outside the test's
    timeout (``timeout_func_only``): a restart slowed by a busy machine is not a failure of
    the behaviour the test asserts."""
    if "apache_cluster" not in request.fixturenames:
        yield
        return
    cluster = request.getfixturevalue("apache_cluster").process
    cluster.bring_back()
    cluster.wait_ready()
    yield
    cluster.bring_back()
    cluster.wait_ready()


@pytest.fixture(scope="session")
def kafka_bootstrap(broker: BrokerInfo) -> str:
    """``"host:port"`` of the session's broker."""
    return broker.bootstrap


NewTopicFactory = Callable[..., Awaitable[str]]


def _topic_name(request: pytest.FixtureRequest) -> str:
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:60].strip("-.")
    return f"{base or 'topic'}-{uuid.uuid4().hex[:8]}"


async def _create_topic_lite(
    bootstrap: str, name: str, partitions: int, rf: int, configs: dict[str, str]
) -> None:
    from aiokafka_lite.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(name, partitions, rf, topic_configs=configs)])
        for err in resp.topic_errors:
            if err.error_code:
                raise RuntimeError(f"creating topic {name}: {err}")
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline:  # wait until every partition has a leader
            described = await admin.describe_topics([name])
            parts = described[0]["partitions"] if described else []
            if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"topic {name} has no leaders after 15 s")
    finally:
        await admin.close()


@pytest.fixture
async def new_topic(
    request: pytest.FixtureRequest, broker: BrokerInfo
) -> AsyncIterator[NewTopicFactory]:
    """Factory: ``name = await new_topic(partitions=1, name=None, replication_factor=1, configs=None)``.

    Creates a uniquely named topic (derived from the test name) on the session's broker and
    returns its name once the broker has leaders for all its partitions.
    """

    async def create(
        partitions: int = 1,
        *,
        name: str | None = None,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
    ) -> str:
        topic = name or _topic_name(request)
        args = (broker.bootstrap, topic, partitions, replication_factor, dict(configs or {}))
        await asyncio.wait_for(_create_topic_lite(*args), 30)
        return topic

    yield create


def pytest_report_header(config: pytest.Config) -> str:
    line = f"kafka brokers: {', '.join(broker_params())}"
    if "apache" in broker_params():
        from aiokafka_lite.launchers.apache import DEFAULT_VERSION

        reason = _apache_unavailable()
        line += f" (apache: {reason})" if reason else f" (apache: Kafka {DEFAULT_VERSION})"
    return line


#: fixtures that start a real broker: their tests are marked ``integration``
_BROKER_FIXTURES = frozenset({"broker", "apache_cluster", "apache39", "kerberos_kafka"})
#: modules whose tests need a Spark session (one per worker process that runs them)
_SPARK_MODULES = (
    "test_spark",
    "test_spark_reference",
    "test_spark_cluster",
    "test_docs_spark",
)
#: Apache-only modules that drive other clients (the Java oracle, the 3.9 broker, SASL/TLS
#: listeners) split in two shards of the apache tests: the 3.9 broker's users here (so it starts
#: once) ...
_APACHE_INTEROP_MODULES = (
    "test_java_interop",
    "test_share_java",
    "test_txn_v2",
    "test_apache_versions",
    "test_security",
    "test_msk_iam",
    "test_interop",
    "test_records_interop",
    "test_records_broker",
)
#: ... and the rest, beside the Java oracle or other JVMs (OAuth/OIDC, KIP-516, KIP-714, the
#: re-bootstrap), in "apache-java"
_APACHE_JAVA_MODULES = (
    "test_oauth",
    "test_java_oracle_smoke",
    "test_topic_ids",
    "test_rebootstrap",
    "test_telemetry",
)
#: Apache-only group-protocol modules (KIP-848 with the Java client, the live migration, churn,
#: cooperative rebalancing): long-waiting rebalances, one shard with its own broker
_APACHE_GROUP_MODULES = (
    "test_java_group_protocol",
    "test_group_protocol_consumer",
    "test_group_migration",
    "test_group_churn",
    "test_group_cooperative",
)
#: Apache-only side-by-side modules of Kafka 4 semantics (the Java share consumer and KIP-848
#: member driven step by step beside ours: a JVM per scenario, lock and session waits; the
#: transaction error classes beside Java: one JVM, ten fault proxies; the KIP-1092 close options
#: beside Java; the transaction admin calls beside Java's Admin; the share consumer's and admin
#: client's KIP-714 pushes beside Java's): one shard of their own, so the plain "apache" shard
#: stays short
_APACHE_SIDE_BY_SIDE_MODULES = (
    "test_share_lifecycle_java",
    "test_share_java_api",
    "test_group848_java_corners",
    "test_txn_errors",
    "test_close_options",
    "test_txn_admin",
    "test_telemetry_share_admin",
)
#: modules of long-waiting tests (fault paths, differential runs on aiokafka and on us): a
#: second shard of each broker kind ("<kind>-b"), with its own broker; Apache's go with its
#: group-protocol shard (one broker fewer to start)
_SLOW_MODULES = ("test_faults", "test_differential", "test_faststream")
#: the order xdist hands groups out in (Makefile: --no-loadscope-reorder), longest first: each
#: worker gets one at the start, then the next whenever two or fewer of its tests are left
#: (seconds: the whole-suite run of 2026-11-28 15:00 on the 2-core machine, less what the
#: changes of helper-suitetime measured: churn in 20 s, Spark's class-data-sharing archive,
#: the telemetry and JWKS brokers started as the fixtures' are, a 10 s session on Tansu)
_FIRST = (
    "apache",  # 394
    "apache-cluster",  # 380
    "apache-groups",  # 396 - 39 (test_group_churn) - 7 (a Java close)
    "tansu-b",  # 347
    "tansu",  # 363 - 18 (test_group_leave's classic session)
    "apache-spark",  # 317 - 8 (the Spark session's JVM on the archive)
    "apache-side-by-side",  # 316 - 8 (recorder broker) - 14 (max poll interval) - 25 (Java close)
    "apache-java",  # 237 - 20 (the JWKS and telemetry brokers)
    "apache-spark-cluster",  # 226 - 26 (drivers, daemons, executors on the archive)
    "noida-spark",  # 188 - 8
    "noida",  # 149
    "noida-b",  # 140
    "apache-interop",  # 135
    "tansu-spark",  # 130 - 8
    "no-broker",  # 94
    "apache-gssapi",  # 9 (skips without the gssapi package)
)


def _xdist_group(item: pytest.Item) -> str:
    """The parallel-run group of a test: under ``pytest -n N --dist loadgroup`` a worker runs
    a group's tests one after another and starts only the brokers they need. A broker kind's
    tests are split in shards (its Spark tests; Apache's interop tests; the rest), each shard
    with its own broker, so no group is much longer than the others."""
    names = getattr(item, "fixturenames", ())
    if "apache_cluster" in names:
        return "apache-cluster"
    if "kerberos_kafka" in names:  # tests/test_gssapi.py: its own KDC and Apache Kafka
        return "apache-gssapi"
    module = getattr(getattr(item, "module", None), "__name__", "").rsplit(".", 1)[-1]
    callspec = getattr(item, "callspec", None)
    kind = callspec.params.get("broker") if callspec is not None else None
    if module == "test_spark_cluster" and kind == "apache":  # its own JVMs (a standalone
        return "apache-spark-cluster"  # cluster, Spark Connect), not the local Spark session
    if module in _SPARK_MODULES:
        return f"{kind or 'tansu'}-spark"  # broker-free Spark tests beside one Spark session
    if kind == "apache" and module in _APACHE_INTEROP_MODULES:
        return "apache-interop"
    if kind == "apache" and module in _APACHE_JAVA_MODULES:
        return "apache-java"
    if kind == "apache" and module in (*_APACHE_GROUP_MODULES, *_SLOW_MODULES):
        return "apache-groups"
    if kind == "apache" and module in _APACHE_SIDE_BY_SIDE_MODULES:
        return "apache-side-by-side"
    if kind is not None:
        return f"{kind}-b" if module in _SLOW_MODULES else str(kind)
    return "apache-interop" if "apache39" in names else "no-broker"


# tryfirst: xdist's worker reads the xdist_group markers in its own pytest_collection_modifyitems
# (suffixing node ids with @group); run after it, the groups were never seen and every worker
# started every broker (4 Apache 4.x, 4 Apache 3.9, 4 Spark sessions ... on 2 cores)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {id(item): _xdist_group(item) for item in items}
    # the longest groups first, each group's tests in their own order
    rank = {name: i for i, name in enumerate(_FIRST)}
    items.sort(key=lambda it: rank.get(groups[id(it)], len(rank)))
    for item in items:
        group = groups[id(item)]
        item.add_marker(pytest.mark.xdist_group(group))
        # reports carry it to the process that prints the per-kind counts (xdist's controller)
        item.user_properties.append(("broker_kind", group))
        names = getattr(item, "fixturenames", ())
        if _BROKER_FIXTURES.intersection(names):  # `-m "not integration"`: no broker at all
            item.add_marker(pytest.mark.integration)
        if "broker" not in names:
            continue
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("broker") if callspec is not None else None
        for mark in item.iter_markers("skip_broker"):
            kinds = mark.args
            reason = mark.kwargs.get("reason", "feature missing on this broker")
            unknown = set(kinds) - set(ALL_KINDS)
            if unknown:
                raise pytest.UsageError(
                    f"{item.nodeid}: skip_broker got unknown kind(s) {sorted(unknown)}"
                )
            if kind in kinds:
                item.add_marker(pytest.mark.skip(reason=f"[{kind}] {reason}"))


_outcomes_by_kind: dict[str, dict[str, int]] = {}
_seconds_by_kind: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count outcomes per broker kind (the group conftest gave each test at collection) and
    the time spent in each group (set-up, call and tear-down: the groups' wall times)."""
    kind = dict(report.user_properties).get("broker_kind", "no-broker")
    _seconds_by_kind[str(kind)] = _seconds_by_kind.get(str(kind), 0.0) + report.duration
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    counts = _outcomes_by_kind.setdefault(str(kind), {})
    counts[report.outcome] = counts.get(report.outcome, 0) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line per broker kind: how many tests passed, failed and were skipped on it."""
    if not _outcomes_by_kind:
        return
    terminalreporter.section("outcomes per broker kind")
    for kind, counts in sorted(_outcomes_by_kind.items()):
        parts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
        seconds = _seconds_by_kind.get(kind, 0.0)
        terminalreporter.write_line(f"{kind}: {parts} ({seconds:.0f} s)")
