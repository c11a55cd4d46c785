"""The error table: completeness, flags, lookup and compatibility with aiokafka's names."""

from __future__ import annotations

import pickle

import pytest

from aiokafka_lite import errors as E
from aiokafka_lite.structs import ConsumerRecord, PartitionMetadata, TopicPartition

NEWEST_CODE = 133


def test_every_code_has_a_distinct_class() -> None:
    codes = sorted(E.kafka_errors)
    assert codes == list(range(-1, NEWEST_CODE + 1))
    classes = list(E.kafka_errors.values())
    assert len(set(classes)) == len(classes)
    for code, cls in E.kafka_errors.items():
        assert cls.errno == code
        assert issubclass(cls, E.BrokerResponseError)
        assert issubclass(cls, E.KafkaError)
        assert cls.message.isupper() or cls.message == "NONE"
        assert cls.description, cls
        assert E.for_code(code) is cls
    names = [cls.message for cls in classes]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize(
    ("code", "retriable", "invalid_metadata"),
    [
        (-1, False, False),
        (1, False, False),
        (2, True, False),
        (3, True, True),
        (5, True, True),
        (6, True, True),
        (7, True, False),
        (10, False, False),
        (13, True, True),
        (14, True, False),
        (15, True, False),
        (16, True, False),
        (19, True, False),
        (22, False, False),
        (25, False, False),
        (27, False, False),
        (35, False, False),
        (41, True, False),
        (45, False, False),
        (47, False, False),
        (51, True, False),
        (56, True, True),
        (59, False, False),
        (74, True, True),
        (75, True, False),
        (78, True, False),
        (79, False, False),
        (89, True, False),
        (90, False, False),
        (100, True, True),
    ],
)
def test_flags(code: int, retriable: bool, invalid_metadata: bool) -> None:
    cls = E.for_code(code)
    assert (cls.retriable, cls.invalid_metadata) == (retriable, invalid_metadata)


def test_invalid_metadata_implies_retriable() -> None:
    for cls in E.kafka_errors.values():
        if cls.invalid_metadata:
            assert cls.retriable, cls


def test_known_names_and_aliases() -> None:
    assert E.NotLeaderForPartitionError.errno == 6
    assert E.UnknownTopicOrPartitionError.errno == 3
    assert E.OffsetOutOfRangeError.errno == 1
    assert E.CorruptRecordError is E.CorruptRecordException
    assert E.CorruptRecordException.errno == 2
    assert E.MessageSizeTooLargeError.errno == 10
    assert E.UnsupportedVersionError.errno == 35
    assert E.ProducerFenced.errno == 90
    assert E.ProducerFencedError is E.ProducerFenced
    assert E.InvalidProducerEpochError.errno == 47
    assert E.OutOfOrderSequenceNumber.errno == 45
    assert E.UnknownProducerIdError.errno == 59
    assert E.RebalanceInProgressError.errno == 27
    assert E.IllegalGenerationError.errno == 22
    assert E.UnknownMemberIdError.errno == 25
    assert E.MemberIdRequiredError.errno == 79
    assert E.CoordinatorNotAvailableError.errno == 15
    assert E.NotCoordinatorError.errno == 16


def test_unknown_code_gets_its_own_stable_class() -> None:
    cls = E.for_code(9999)
    assert cls is E.for_code(9999)
    assert cls is not E.for_code(9998)
    assert issubclass(cls, E.UnknownError)
    assert cls.errno == 9999
    assert cls not in E.kafka_errors.values()
    assert "9999" in str(cls())
    assert E.kafka_errors[-1] is E.UnknownError  # the table is not polluted


def test_raise_for_code() -> None:
    E.raise_for_code(0)
    with pytest.raises(E.RebalanceInProgressError) as info:
        E.raise_for_code(27, "group g")
    text = str(info.value)
    assert "27" in text and "group g" in text and "REBALANCE_IN_PROGRESS" in text
    assert E.RebalanceInProgressError.description in text
    with pytest.raises(E.UnknownError):
        E.raise_for_code(-1)
    with pytest.raises(E.KafkaError):
        E.raise_for_code(12345)


def test_client_side_errors() -> None:
    for cls in (
        E.KafkaTimeoutError,
        E.KafkaConnectionError,
        E.KafkaProtocolError,
        E.IllegalStateError,
        E.ProducerClosed,
        E.ConsumerStoppedError,
        E.CommitFailedError,
        E.IncompatibleBrokerVersion,
        E.NodeNotReadyError,
        E.CorrelationIdError,
        E.NoBrokersAvailable,
        E.IllegalOperation,
        E.RecordTooLargeError,
        E.UnsupportedCodecError,
    ):
        assert issubclass(cls, E.KafkaError)
        assert not issubclass(cls, E.BrokerResponseError)
        assert cls not in E.kafka_errors.values()
    assert E.KafkaConnectionError.retriable
    assert not E.KafkaTimeoutError.retriable
    assert issubclass(E.CorrelationIdError, E.KafkaProtocolError)
    assert str(E.KafkaTimeoutError("5 s")) == "KafkaTimeoutError: 5 s"
    assert "rebalanced" in str(E.CommitFailedError())


def test_errors_pickle() -> None:
    err = E.NotCoordinatorError("g")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is E.NotCoordinatorError and back.args == ("g",)


def test_aiokafka_names_exist_with_same_code() -> None:
    aiokafka_errors = pytest.importorskip("aiokafka.errors")
    for name in dir(aiokafka_errors):
        theirs = getattr(aiokafka_errors, name)
        if not (isinstance(theirs, type) and issubclass(theirs, Exception)):
            continue
        if theirs.__module__ != aiokafka_errors.__name__:
            continue
        ours = getattr(E, name, None)
        assert ours is not None, name
        if hasattr(theirs, "errno"):
            assert ours.errno == theirs.errno, name


def test_structs() -> None:
    tp = TopicPartition("t", 1)
    assert tp == ("t", 1) and tp.topic == "t" and {tp: 1}[TopicPartition("t", 1)] == 1
    pm = PartitionMetadata("t", 0, 1, [1], [1], None)
    assert pm.leader_epoch == -1 and tuple(pm.offline_replicas) == ()
    rec: ConsumerRecord[bytes, bytes] = ConsumerRecord("t", 0, 5, 1, 0, None, b"v", None, -1, 1, [])
    assert rec.value == b"v" and rec.offset == 5
    # as aiokafka's (a plain dataclass): applications may attach attributes (FastStream does)
    rec.extra = 1  # type: ignore[attr-defined]
    assert rec.extra == 1  # type: ignore[attr-defined]


def test_rebalance_in_progress_is_a_commit_failure() -> None:
    """A commit refused because the group rebalances raises RebalanceInProgressError; aiokafka
    code catching CommitFailedError still catches it, and it keeps the broker error's code and
    text (no CommitFailedError default message)."""
    err = E.RebalanceInProgressError()
    assert isinstance(err, E.CommitFailedError) and isinstance(err, E.BrokerResponseError)
    assert E.for_code(27) is E.RebalanceInProgressError and err.errno == 27
    assert str(err) == (
        "[Error 27] RebalanceInProgressError (REBALANCE_IN_PROGRESS: The group is rebalancing: "
        "the member must rejoin.)"
    )
    assert not issubclass(E.CommitFailedError, E.BrokerResponseError)
