"""Drop-in checks: the names code written for aiokafka imports exist here with the same shape."""

from __future__ import annotations

import inspect
import ssl

import pytest

import aiokafka_lite
from aiokafka_lite import errors, structs
from aiokafka_lite.abc import AbstractTokenProvider, ConsumerRebalanceListener
from aiokafka_lite.helpers import create_ssl_context

aiokafka = pytest.importorskip("aiokafka")


def test_top_level_names_match_aiokafka() -> None:
    # AIOKafkaClient is aiokafka's internal client; ours is KafkaClient
    missing = [
        n for n in aiokafka.__all__ if n != "AIOKafkaClient" and not hasattr(aiokafka_lite, n)
    ]
    assert missing == []


def test_error_and_struct_names_match_aiokafka() -> None:
    import aiokafka.errors as theirs_errors
    import aiokafka.structs as theirs_structs

    for name, obj in vars(theirs_errors).items():
        if (
            inspect.isclass(obj)
            and issubclass(obj, Exception)
            and obj.__module__ == theirs_errors.__name__
        ):
            assert hasattr(errors, name), name
    for name in ("TopicPartition", "OffsetAndMetadata", "RecordMetadata", "BrokerMetadata"):
        assert getattr(structs, name)._fields == getattr(theirs_structs, name)._fields, name
    ours = {f for f in structs.ConsumerRecord.__dataclass_fields__}
    assert ours >= set(theirs_structs.ConsumerRecord.__dataclass_fields__)


@pytest.mark.parametrize("cls", ["AIOKafkaProducer", "AIOKafkaConsumer"])
def test_constructor_keywords_cover_aiokafka(cls: str) -> None:
    ours = inspect.signature(getattr(aiokafka_lite, cls)).parameters
    theirs = inspect.signature(getattr(aiokafka, cls)).parameters
    assert [n for n in theirs if n not in ours] == []
    for name, p in theirs.items():
        if name in ("loop", "client_id", "api_version") or p.default is inspect.Parameter.empty:
            continue
        if isinstance(p.default, (int, str, bool, type(None))):
            assert ours[name].default == p.default, name


def test_abc_and_helpers() -> None:
    assert issubclass(ConsumerRebalanceListener, object)
    with pytest.raises(TypeError):
        AbstractTokenProvider()  # type: ignore[abstract]
    ctx = create_ssl_context()
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


@pytest.mark.parametrize("servers", ["localhost:9093,localhost:9094", ["localhost:9093"]])
async def test_client_bootstrap_servers_kept_as_given(servers: str | list[str]) -> None:
    # kstreams' tests compare producer.client._bootstrap_servers / consumer._client's with
    # the list they passed; opentelemetry-instrumentation-aiokafka reports it as is
    for lib in (aiokafka, aiokafka_lite):
        producer = lib.AIOKafkaProducer(bootstrap_servers=servers, client_id="my-client")
        consumer = lib.AIOKafkaConsumer(bootstrap_servers=servers)
        assert producer.client._bootstrap_servers == servers, lib.__name__
        assert consumer._client._bootstrap_servers == servers, lib.__name__
        assert producer.client._client_id == "my-client", lib.__name__
        await producer.client.close()
        await consumer._client.close()


async def test_consumer_client_tracks_topics_before_start() -> None:
    # kstreams' tests read consumer._client._topics right after AIOKafkaConsumer(*topics)
    tp = aiokafka_lite.TopicPartition
    for lib in (aiokafka, aiokafka_lite):
        consumer = lib.AIOKafkaConsumer("my-topic", "my-topic-2", bootstrap_servers="h:1")
        assert consumer._client._topics == {"my-topic", "my-topic-2"}, lib.__name__
        consumer.subscribe(topics=["other"])
        assert consumer._client._topics == {"other"}, lib.__name__
        consumer.unsubscribe()
        consumer.assign([tp("t1", 0), tp("t2", 1)])
        assert consumer._client._topics == {"t1", "t2"}, lib.__name__
        await consumer._client.close()


@pytest.mark.parametrize(
    "kwargs", [{}, {"enable_idempotence": True}, {"transactional_id": "my-transaction-id"}]
)
async def test_producer_txn_manager_view(kwargs: dict[str, object]) -> None:
    # kstreams' transaction tests read producer._txn_manager.transactional_id
    for lib in (aiokafka, aiokafka_lite):
        producer = lib.AIOKafkaProducer(bootstrap_servers="h:1", **kwargs)
        txn = producer._txn_manager
        if kwargs:
            assert txn.transactional_id == kwargs.get("transactional_id"), lib.__name__
        else:
            assert txn is None, lib.__name__
        await producer.client.close()
