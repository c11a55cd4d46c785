"""The supervision rule for background tasks (``aiokafka_lite._supervise``), against a real
broker: one internal call of OUR client is patched to raise ``TypeError`` (a bug; the broker
stays real) while the test holds it armed, for each background task in turn:

* the fetcher's fetch (``client.send`` of Fetch), the classic group's heartbeat (Heartbeat) and
  main loop (``Coordinator._step``), the KIP-848 heartbeat (ConsumerGroupHeartbeat), the share
  heartbeat (ShareGroupHeartbeat) and fetch round (ShareFetch), the producer's sender
  (``Sender._drain_sinks``) and the metadata refresher (Metadata).

Each test checks what the application sees: the error is raised once by its next call (a
``KafkaError`` caused by the ``TypeError``; the producer: the records queued at each failed
step fail with it), it is logged once (caplog records naming it), the failed step is retried
no sooner than the back-off (``retry_backoff_ms`` doubling: the gap before the i-th retry is at
least ``retry_backoff_ms * 2**i``), and the task recovers once the patch is removed (records
flow again). Before the rule the fetcher started a new fetch at once after such an error
(millions of log lines in minutes): ``test_fetcher`` fails there.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from share_helpers import configure_group, need_share_groups, produce_values, wait_until

from aiokafka_lite import AIOKafkaConsumer, AIOKafkaProducer, AIOKafkaShareConsumer
from aiokafka_lite import errors as Errors
from aiokafka_lite._supervise import MAX_BACKOFF_S
from aiokafka_lite.share.acks import ShareAcknowledgementError
from aiokafka_lite.structs import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

INJECTED = "injected by test_supervise"
BACKOFF_MS = 100
#: failures waited for: the back-offs before retries 1..3 add up to 0.7 s
FAILURES = 4

PRODUCE, FETCH, METADATA, HEARTBEAT, CONSUMER_HEARTBEAT, SHARE_HEARTBEAT, SHARE_FETCH = (
    0,
    1,
    3,
    12,
    68,
    76,
    78,
)


class Inject:
    """``obj.name`` raises ``TypeError(INJECTED)`` for the calls ``when`` picks, while armed;
    records when each raise happened and counts the calls let through."""

    def __init__(self, obj: Any, name: str, when: Callable[..., bool] = lambda *a, **k: True):
        self.obj, self.name = obj, name
        self.armed = True
        self.raised: list[float] = []
        self.passed = 0
        orig = getattr(obj, name)

        def check(a: tuple[Any, ...], k: dict[str, Any]) -> bool:
            if not when(*a, **k):
                return False
            if self.armed:
                self.raised.append(time.monotonic())
                raise TypeError(INJECTED)
            self.passed += 1
            return True

        if asyncio.iscoroutinefunction(orig):

            async def patched(*a: Any, **k: Any) -> Any:
                check(a, k)
                return await orig(*a, **k)

        else:

            def patched(*a: Any, **k: Any) -> Any:  # type: ignore[misc]
                check(a, k)
                return orig(*a, **k)

        setattr(obj, name, patched)  # on the instance: the class stays untouched

    def remove(self) -> None:
        """Calls go through from now on (still counted in ``passed``)."""
        self.armed = False

    async def wait_failures(self, n: int, app_call: Callable[[], Awaitable[Any]], timeout: float):
        """Call ``app_call()`` until ``n`` injected failures happened; the injected errors the
        application's calls raised."""
        seen: list[BaseException] = []
        deadline = time.monotonic() + timeout
        while len(self.raised) < n:
            assert time.monotonic() < deadline, f"{len(self.raised)} failures in {timeout} s"
            try:
                await app_call()
            except Errors.KafkaError as exc:
                if not injected(exc):
                    raise
                seen.append(exc)
        return seen


def api(key: int) -> Callable[..., bool]:
    """Picks ``client.send(node, request, ...)`` calls of one API."""

    def when(*a: Any, **k: Any) -> bool:
        request = a[1] if len(a) > 1 else k.get("request")
        return getattr(request, "API_KEY", None) == key

    return when


def injected(exc: BaseException) -> bool:
    """The error the application got is the injected one (wrapped in a KafkaError)."""
    cause = exc.__cause__
    return isinstance(cause, TypeError) and INJECTED in str(cause)


def log_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Log records that name the injected error (message or traceback)."""
    out = []
    for r in caplog.records:
        exc = r.exc_info[1] if r.exc_info else None
        if INJECTED in r.getMessage() or (exc is not None and INJECTED in str(exc)):
            out.append(r)
    return out


def assert_backed_off(times: list[float], n: int = FAILURES) -> None:
    """The gap before the i-th retry is at least the back-off: BACKOFF_MS * 2**(i-1)."""
    gaps = [b - a for a, b in itertools.pairwise(times)][: n - 1]
    for i, gap in enumerate(gaps):
        want = min(BACKOFF_MS / 1000 * 2**i, MAX_BACKOFF_S)
        assert gap >= want * 0.9, (
            f"retry {i + 1} came {gap * 1000:.1f} ms after the failure before it; "
            f"the back-off is {want * 1000:.0f} ms (gaps: {[round(g, 4) for g in gaps]})"
        )


def assert_once(caplog: pytest.LogCaptureFixture, seen: list[BaseException]) -> None:
    lines = log_lines(caplog)
    assert len(lines) == 1, [f"{r.levelname} {r.name}: {r.getMessage()[:120]}" for r in lines]
    assert lines[0].levelno == logging.ERROR and lines[0].exc_info, "logged with its traceback"
    assert len(seen) == 1, f"the application saw the error {len(seen)} times"


async def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap) as producer:
        await producer.send_and_wait(topic, value)


async def _consume_until(consumer: Any, value: bytes, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, f"{value!r} not consumed within {timeout} s"
        batch = await consumer.getmany(timeout_ms=200)
        if any(r.value == value for recs in batch.values() for r in recs):
            return


# -- the consumer ---------------------------------------------------------------------------


async def test_fetcher(broker: Any, new_topic: Any, caplog: pytest.LogCaptureFixture) -> None:
    topic = await new_topic()
    await _produce(broker.bootstrap, topic, b"before")
    consumer = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        retry_backoff_ms=BACKOFF_MS,
        fetch_max_wait_ms=100,
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await _consume_until(consumer, b"before", 15)
        caplog.set_level(logging.INFO)
        inj = Inject(consumer._client, "send", api(FETCH))
        seen = await inj.wait_failures(
            FAILURES, lambda: consumer.getmany(timeout_ms=50), timeout=15
        )
        assert_backed_off(inj.raised)
        assert_once(caplog, seen)
        inj.remove()
        await _produce(broker.bootstrap, topic, b"after")
        await _consume_until(consumer, b"after", 15)
    finally:
        await consumer.stop()


def _group_consumer(broker: Any, topic: str, **kw: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=f"sup-{uuid.uuid4().hex[:10]}",
        auto_offset_reset="earliest",
        retry_backoff_ms=BACKOFF_MS,
        fetch_max_wait_ms=100,
        **kw,
    )


async def test_classic_heartbeat(
    broker: Any, new_topic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    topic = await new_topic()
    await _produce(broker.bootstrap, topic, b"before")
    consumer = _group_consumer(broker, topic, heartbeat_interval_ms=100, session_timeout_ms=10000)
    await consumer.start()
    try:
        await _consume_until(consumer, b"before", 20)
        caplog.set_level(logging.INFO)
        inj = Inject(consumer._client, "send", api(HEARTBEAT))
        seen = await inj.wait_failures(
            FAILURES, lambda: consumer.getmany(timeout_ms=50), timeout=15
        )
        assert_backed_off(inj.raised)
        assert_once(caplog, seen)
        inj.remove()
        await wait_until(lambda: inj.passed > 0, 15, "heartbeat after the patch was removed")
        await _produce(broker.bootstrap, topic, b"after")
        await _consume_until(consumer, b"after", 15)
    finally:
        await consumer.stop()


async def test_classic_main_loop(
    broker: Any, new_topic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    topic = await new_topic()
    other = await new_topic(name=f"{topic}-other")
    await _produce(broker.bootstrap, other, b"other")
    consumer = _group_consumer(broker, topic)
    await consumer.start()
    try:
        caplog.set_level(logging.INFO)
        inj = Inject(consumer._coordinator, "_step")
        seen = await inj.wait_failures(
            FAILURES, lambda: consumer.getmany(timeout_ms=50), timeout=15
        )
        assert_backed_off(inj.raised)
        assert_once(caplog, seen)
        inj.remove()
        consumer.subscribe([topic, other])  # the main loop joins again with the new topic
        await _consume_until(consumer, b"other", 30)
    finally:
        await consumer.stop()


async def test_kip848_heartbeat(
    broker: Any, new_topic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    broker.skip_on("tansu", "noida", reason="no KIP-848 consumer groups (ConsumerGroupHeartbeat)")
    topic = await new_topic()
    await _produce(broker.bootstrap, topic, b"before")
    consumer = _group_consumer(broker, topic, group_protocol="consumer")
    await consumer.start()
    try:
        await _consume_until(consumer, b"before", 30)
        caplog.set_level(logging.INFO)
        inj = Inject(consumer._client, "send", api(CONSUMER_HEARTBEAT))
        seen = await inj.wait_failures(
            FAILURES, lambda: consumer.getmany(timeout_ms=50), timeout=20
        )
        assert_backed_off(inj.raised)
        assert_once(caplog, seen)
        inj.remove()
        await wait_until(lambda: inj.passed > 0, 15, "heartbeat after the patch was removed")
        await _produce(broker.bootstrap, topic, b"after")
        await _consume_until(consumer, b"after", 15)
    finally:
        await consumer.stop()


# -- the share consumer ---------------------------------------------------------------------


async def _share_consumer(broker: Any, topic: str) -> AIOKafkaShareConsumer:
    await need_share_groups(broker)
    group = f"sup-share-{uuid.uuid4().hex[:10]}"
    await configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest")
    consumer = AIOKafkaShareConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        retry_backoff_ms=BACKOFF_MS,
        fetch_max_wait_ms=100,
    )
    await consumer.start()
    return consumer


@pytest.mark.parametrize("task", ["heartbeat", "fetch round"])
async def test_share_consumer(
    broker: Any, new_topic: Any, caplog: pytest.LogCaptureFixture, task: str
) -> None:
    topic = await new_topic()
    await produce_values(broker.bootstrap, topic, [b"before"])
    consumer = await _share_consumer(broker, topic)
    try:
        await _consume_until(consumer, b"before", 30)
        caplog.set_level(logging.INFO)
        inj = Inject(
            consumer._client, "send", api(SHARE_HEARTBEAT if task == "heartbeat" else SHARE_FETCH)
        )

        async def poll() -> None:
            try:
                await consumer.getmany(timeout_ms=50)
            except ShareAcknowledgementError as exc:
                # a ShareFetch that failed took the acknowledgements it carried with it: the
                # session is reset and they are reported failed (as for a lost connection)
                assert all(
                    e is None or isinstance(e, Errors.ShareSessionNotFoundError)
                    for e in exc.results.values()
                ), exc

        seen = await inj.wait_failures(FAILURES, poll, timeout=20)
        assert_backed_off(inj.raised)
        assert_once(caplog, seen)
        inj.remove()
        await produce_values(broker.bootstrap, topic, [b"after"])
        await _consume_until(consumer, b"after", 15)  # fetch rounds start from the polls
        await wait_until(lambda: inj.passed > 0, 15, f"{task} after the patch was removed")
    finally:
        await consumer.stop()


# -- the producer and the metadata refresher ------------------------------------------------


@pytest.mark.parametrize("where", ["step", "request"])
async def test_sender(
    broker: Any, new_topic: Any, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    topic = await new_topic()
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, retry_backoff_ms=BACKOFF_MS)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"before")
        caplog.set_level(logging.INFO)
        also = None
        if where == "step":  # the loop's step
            inj = Inject(producer._sender, "_drain_sinks")
        else:  # the Produce request (counted at send: the sink falls back to it when
            # send_nowait fails)
            inj = Inject(producer.client, "send", api(PRODUCE))
            also = Inject(producer.client, "send_nowait", api(PRODUCE))
        failed: list[BaseException] = []

        async def send() -> None:
            try:
                await producer.send_and_wait(topic, b"lost")
            except Errors.KafkaError as exc:
                assert injected(exc), exc  # each record queued at a failed step gets it
                failed.append(exc)

        await inj.wait_failures(FAILURES, send, timeout=15)
        assert failed, "no send failed with the injected error"
        assert_backed_off(inj.raised)
        assert_once(caplog, failed[:1])
        inj.remove()
        if also is not None:
            also.remove()
        md = await asyncio.wait_for(producer.send_and_wait(topic, b"after"), 15)
        assert md.offset >= 1
    finally:
        await producer.stop()


async def test_metadata_refresher(
    broker: Any, new_topic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, retry_backoff_ms=BACKOFF_MS, max_block_ms=300
    )
    await producer.start()
    try:
        caplog.set_level(logging.INFO)
        inj = Inject(producer.client, "send", api(METADATA))
        # made after the producer's bootstrap (Tansu and noida answer it with every topic)
        topic = await new_topic()

        async def send() -> None:  # the topic is new to the producer: it waits for metadata
            with pytest.raises(Errors.KafkaError) as info:
                await producer.send_and_wait(topic, b"x")
            if not injected(info.value):  # later sends: the wait for the topic times out
                assert isinstance(info.value, Errors.KafkaTimeoutError), info.value
            else:
                raise info.value

        seen = await inj.wait_failures(FAILURES, send, timeout=15)
        assert_backed_off(inj.raised)
        assert_once(caplog, seen)
        inj.remove()
        deadline = time.monotonic() + 15
        while True:  # the refresher may be in its back-off: a send may still time out
            try:
                md = await producer.send_and_wait(topic, b"after")
                break
            except Errors.KafkaTimeoutError:
                assert time.monotonic() < deadline, "no metadata 15 s after the patch was removed"
        assert md.topic == topic and inj.passed > 0
    finally:
        await producer.stop()
