"""Error classes of aiokafka_lite.

Two families share the :class:`KafkaError` base:

* client-side errors (timeouts, lost connections, malformed bytes, misuse of the API), raised by the
  client itself; their ``errno`` is -1 and they are not reachable through :func:`for_code`;
* broker errors, one class per Kafka protocol error code, found with :func:`for_code` and raised with
  :func:`raise_for_code`. Class names follow aiokafka (kafka-python where aiokafka has none), and the
  other library's spelling is kept as an alias, so ``except`` clauses written for either still work.

Every class carries ``errno``, ``message`` (the protocol's upper-case error name), ``description``,
``retriable`` (the same request may succeed if sent again) and ``invalid_metadata`` (refresh the
cluster metadata before retrying). The flags follow the Java client's exception hierarchy.
"""

from __future__ import annotations

import enum
from typing import Any, NoReturn

__all__ = [
    "BrokerResponseError",
    "KafkaError",
    "RetryAction",
    "TxnErrorClass",
    "for_code",
    "kafka_errors",
    "raise_for_code",
    "retry_action",
    "txn_error_class",
]


class KafkaError(RuntimeError):
    """Base class of every error raised by aiokafka_lite."""

    errno: int = -1
    message: str = ""
    description: str = ""
    retriable: bool = False
    invalid_metadata: bool = False

    def __str__(self) -> str:
        detail = ", ".join(str(arg) for arg in self.args)
        text = self.__class__.__name__
        if detail:
            text = f"{text}: {detail}"
        return text


# --------------------------------------------------------------------------------------------
# Client-side errors
# --------------------------------------------------------------------------------------------


class ApplicationRecoverableError(KafkaError):
    """KIP-1050's application-recoverable errors (Java's ``ApplicationRecoverableException``):
    the producer (or consumer member) was fenced by a newer one or lost its identity. It is done:
    stop it; the application recovers by starting a new one (a producer with the same
    ``transactional_id`` then aborts what this one left open). See
    :func:`txn_error_class`."""


class IllegalStateError(KafkaError):
    """The client was used in a state that does not allow the operation."""


class IllegalArgumentError(KafkaError):
    """An argument given to the client is invalid."""


class RecordDeserializationError(KafkaError):
    """The key or value deserializer failed on a record (Java's RecordDeserializationException).

    ``topic_partition`` and ``offset`` name the record; the deserializer's own exception is the
    ``__cause__``. A share consumer raises it from the poll that would have handed the record
    out: the record is released unless the application acknowledges it otherwise (explicit
    mode: ``acknowledge(topic, partition, offset, AcknowledgeType.REJECT)``) before polling
    again."""

    def __init__(self, message: str, topic_partition: Any, offset: int) -> None:
        super().__init__(message)
        self.topic_partition = topic_partition
        self.offset = offset


class KafkaConfigurationError(KafkaError):
    """The client configuration is invalid."""


class NoBrokersAvailable(KafkaError):
    """None of the bootstrap servers could be reached."""

    retriable = True
    invalid_metadata = True


class NodeNotReadyError(KafkaError):
    """The connection to the broker is not established yet."""

    retriable = True


class KafkaConnectionError(KafkaError):
    """A connection to a broker failed or was closed while a request was outstanding."""

    retriable = True
    invalid_metadata = True


class KafkaProtocolError(KafkaError):
    """Bytes read from the wire do not form a valid Kafka message (truncated, bad length...)."""

    retriable = True


class CorrelationIdError(KafkaProtocolError):
    """A response carried a correlation id that matches no outstanding request."""


class KafkaTimeoutError(KafkaError):
    """An operation did not complete before its deadline."""


class Cancelled(KafkaError):
    """The request was cancelled before a response arrived."""

    retriable = True


class TooManyInFlightRequests(KafkaError):
    """The connection already has the maximum number of requests in flight."""

    retriable = True


class StaleMetadata(KafkaError):
    """The cached cluster metadata is out of date."""

    retriable = True
    invalid_metadata = True


class MetadataEmptyBrokerList(KafkaError):
    """A metadata response listed no brokers."""

    retriable = True


class UnrecognizedBrokerVersion(KafkaError):
    """The broker's API versions could not be recognised."""


class IncompatibleBrokerVersion(KafkaError):
    """The broker does not support an API version the operation needs."""


_COMMIT_FAILED = (
    "Commit cannot be completed: the group has rebalanced and the partitions "
    "were assigned to another member"
)


class CommitFailedError(KafkaError):
    """An offset commit failed because the group rebalanced and the partitions moved.

    Usually the time between two ``getmany()``/``getone()`` calls exceeded
    ``max_poll_interval_ms``: process faster, fetch fewer records per call (``max_poll_records``)
    or raise ``max_poll_interval_ms``.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*(args or (_COMMIT_FAILED,)))


class AuthenticationMethodNotSupported(KafkaError):
    """The requested SASL mechanism is not supported by the client."""


class AuthenticationFailedError(KafkaError):
    """SASL authentication failed."""


class MissingExtraError(KafkaConfigurationError, ImportError):
    """An optional dependency is not installed: the message names the extra that brings it
    (both a :class:`~aiokafka_lite.errors.KafkaError` and an :class:`ImportError`)."""


class KafkaUnavailableError(KafkaError):
    """Kafka could not be reached."""


class UnsupportedCodecError(KafkaError):
    """The compression codec is unknown or its library is not available."""


class QuotaViolationError(KafkaError):
    """A client quota was exceeded."""


class ConsumerStoppedError(KafkaError):
    """The consumer was stopped while (or before) waiting for records."""


class IllegalOperation(KafkaError):
    """The operation is not possible with the current configuration (commit without group_id...)."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and no reset policy (``auto_offset_reset='none'``) for a partition."""


class RecordTooLargeError(KafkaError):
    """A record is larger than ``max_request_size`` or the buffer memory."""


class ProducerClosed(KafkaError):
    """The producer was stopped: no more records can be sent, and a record not acknowledged
    when ``stop(timeout=...)`` ran out (Java: "closed forcefully") fails with it (its request
    may have reached the broker: not confirmed, not known to be lost)."""


# --------------------------------------------------------------------------------------------
# Broker errors: one class per protocol error code
# --------------------------------------------------------------------------------------------

kafka_errors: dict[int, type[BrokerResponseError]] = {}
"""errno -> broker error class, for every code the protocol defines (and 0 -> NoError)."""


class BrokerResponseError(KafkaError):
    """An error code returned by a broker. Subclasses declare their code as class keywords."""

    def __init_subclass__(
        cls,
        *,
        errno: int | None = None,
        name: str = "",
        retriable: bool = False,
        invalid_metadata: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if errno is None:  # a derived class that is not a table entry (see for_code)
            return
        if errno in kafka_errors:
            raise RuntimeError(f"duplicate Kafka error code {errno}")
        cls.errno = errno
        cls.message = name
        # the first paragraph: the broker's meaning (more may follow for the client's use)
        cls.description = " ".join((cls.__doc__ or "").split("\n\n")[0].split())
        cls.retriable = retriable or invalid_metadata
        cls.invalid_metadata = invalid_metadata
        kafka_errors[errno] = cls

    def __str__(self) -> str:
        text = f"[Error {self.errno}] {self.__class__.__name__}"
        detail = ", ".join(str(arg) for arg in self.args)
        if detail:
            text = f"{text}: {detail}"
        return f"{text} ({self.message}: {self.description})"


class UnknownError(BrokerResponseError, errno=-1, name="UNKNOWN_SERVER_ERROR"):
    """The server hit an unexpected error while handling the request."""


class NoError(BrokerResponseError, errno=0, name="NONE"):
    """Success."""


class OffsetOutOfRangeError(BrokerResponseError, errno=1, name="OFFSET_OUT_OF_RANGE"):
    """The offset asked for is outside the range the broker holds for the partition."""


class CorruptRecordException(BrokerResponseError, errno=2, name="CORRUPT_MESSAGE", retriable=True):
    """A record failed its CRC check, has an invalid size, or is otherwise corrupt."""


class UnknownTopicOrPartitionError(
    BrokerResponseError, errno=3, name="UNKNOWN_TOPIC_OR_PARTITION", invalid_metadata=True
):
    """This server does not host this topic-partition."""


class InvalidFetchRequestError(BrokerResponseError, errno=4, name="INVALID_FETCH_SIZE"):
    """The requested fetch size is invalid."""


class LeaderNotAvailableError(
    BrokerResponseError, errno=5, name="LEADER_NOT_AVAILABLE", invalid_metadata=True
):
    """The partition has no leader right now (an election is in progress)."""


class NotLeaderForPartitionError(
    BrokerResponseError, errno=6, name="NOT_LEADER_OR_FOLLOWER", invalid_metadata=True
):
    """This broker is not the leader (or a follower) of the partition: the metadata is stale."""


class RequestTimedOutError(BrokerResponseError, errno=7, name="REQUEST_TIMED_OUT", retriable=True):
    """The broker did not complete the request within its timeout."""


class BrokerNotAvailableError(BrokerResponseError, errno=8, name="BROKER_NOT_AVAILABLE"):
    """The broker is not available."""


class ReplicaNotAvailableError(
    BrokerResponseError, errno=9, name="REPLICA_NOT_AVAILABLE", invalid_metadata=True
):
    """The replica is not available for the requested topic-partition."""


class MessageSizeTooLargeError(BrokerResponseError, errno=10, name="MESSAGE_TOO_LARGE"):
    """The request contains a record batch larger than the broker or topic accepts."""


class StaleControllerEpochError(BrokerResponseError, errno=11, name="STALE_CONTROLLER_EPOCH"):
    """The controller moved to another broker."""


class OffsetMetadataTooLargeError(BrokerResponseError, errno=12, name="OFFSET_METADATA_TOO_LARGE"):
    """The metadata string of the offset commit is too long."""


class StaleLeaderEpochCodeError(
    BrokerResponseError, errno=13, name="NETWORK_EXCEPTION", invalid_metadata=True
):
    """The server disconnected before a response was received."""


class GroupLoadInProgressError(
    BrokerResponseError, errno=14, name="COORDINATOR_LOAD_IN_PROGRESS", retriable=True
):
    """The coordinator is still loading the group or transaction state."""


class GroupCoordinatorNotAvailableError(
    BrokerResponseError, errno=15, name="COORDINATOR_NOT_AVAILABLE", retriable=True
):
    """The coordinator is not available."""


class NotCoordinatorForGroupError(
    BrokerResponseError, errno=16, name="NOT_COORDINATOR", retriable=True
):
    """This broker is not the coordinator of the group or transactional id."""


class InvalidTopicError(BrokerResponseError, errno=17, name="INVALID_TOPIC_EXCEPTION"):
    """The topic name is invalid, or the operation is not allowed on an internal topic."""


class RecordListTooLargeError(BrokerResponseError, errno=18, name="RECORD_LIST_TOO_LARGE"):
    """The record batch is larger than the maximum segment size."""


class NotEnoughReplicasError(
    BrokerResponseError, errno=19, name="NOT_ENOUGH_REPLICAS", retriable=True
):
    """Fewer in-sync replicas than required: the records were not written."""


class NotEnoughReplicasAfterAppendError(
    BrokerResponseError, errno=20, name="NOT_ENOUGH_REPLICAS_AFTER_APPEND", retriable=True
):
    """The records were written, but to fewer in-sync replicas than required."""


class InvalidRequiredAcksError(BrokerResponseError, errno=21, name="INVALID_REQUIRED_ACKS"):
    """The requested acks value is invalid (use -1, 0 or 1)."""


class IllegalGenerationError(
    BrokerResponseError, ApplicationRecoverableError, errno=22, name="ILLEGAL_GENERATION"
):
    """The generation id given by the member is not the group's current generation."""


class InconsistentGroupProtocolError(
    BrokerResponseError, errno=23, name="INCONSISTENT_GROUP_PROTOCOL"
):
    """The member's protocol type or protocols do not match the group's."""


class InvalidGroupIdError(BrokerResponseError, errno=24, name="INVALID_GROUP_ID"):
    """The group id is invalid."""


class UnknownMemberIdError(
    BrokerResponseError, ApplicationRecoverableError, errno=25, name="UNKNOWN_MEMBER_ID"
):
    """The coordinator does not know this member id."""


class InvalidSessionTimeoutError(BrokerResponseError, errno=26, name="INVALID_SESSION_TIMEOUT"):
    """The session timeout is outside the range the broker allows."""


class RebalanceInProgressError(
    BrokerResponseError, CommitFailedError, errno=27, name="REBALANCE_IN_PROGRESS"
):
    """The group is rebalancing: the member must rejoin.

    Raised by a consumer's commit refused because its group is rebalancing (Java's retriable
    ``RebalanceInProgressException``): the partitions have not moved, so poll again (that
    finishes the rebalance) and commit again. It is a :class:`CommitFailedError`, so
    aiokafka-style ``except CommitFailedError`` clauses still catch it; catch it first to tell
    "the rebalance is still going on" from "my partitions are gone".
    """

    def __init__(self, *args: Any) -> None:
        KafkaError.__init__(self, *args)  # no CommitFailedError default message


class InvalidCommitOffsetSizeError(
    BrokerResponseError, errno=28, name="INVALID_COMMIT_OFFSET_SIZE"
):
    """The offset commit was rejected because of its oversized metadata."""


class TopicAuthorizationFailedError(
    BrokerResponseError, errno=29, name="TOPIC_AUTHORIZATION_FAILED"
):
    """The client is not authorized to access the topic."""


class GroupAuthorizationFailedError(
    BrokerResponseError, errno=30, name="GROUP_AUTHORIZATION_FAILED"
):
    """The client is not authorized to access the group."""


class ClusterAuthorizationFailedError(
    BrokerResponseError, errno=31, name="CLUSTER_AUTHORIZATION_FAILED"
):
    """The client is not authorized to use an inter-broker or administrative API."""


class InvalidTimestampError(BrokerResponseError, errno=32, name="INVALID_TIMESTAMP"):
    """A record timestamp is outside the accepted range."""


class UnsupportedSaslMechanismError(
    BrokerResponseError, errno=33, name="UNSUPPORTED_SASL_MECHANISM"
):
    """The broker does not support the requested SASL mechanism."""


class IllegalSaslStateError(BrokerResponseError, errno=34, name="ILLEGAL_SASL_STATE"):
    """The request is not valid in the current SASL state."""


class UnsupportedVersionError(BrokerResponseError, errno=35, name="UNSUPPORTED_VERSION"):
    """The broker does not support this version of the API."""


class TopicAlreadyExistsError(BrokerResponseError, errno=36, name="TOPIC_ALREADY_EXISTS"):
    """A topic with this name already exists."""


class InvalidPartitionsError(BrokerResponseError, errno=37, name="INVALID_PARTITIONS"):
    """The number of partitions is invalid."""


class InvalidReplicationFactorError(
    BrokerResponseError, errno=38, name="INVALID_REPLICATION_FACTOR"
):
    """The replication factor is invalid."""


class InvalidReplicationAssignmentError(
    BrokerResponseError, errno=39, name="INVALID_REPLICA_ASSIGNMENT"
):
    """The replica assignment is invalid."""


class InvalidConfigurationError(BrokerResponseError, errno=40, name="INVALID_CONFIG"):
    """A configuration value is invalid."""


class NotControllerError(BrokerResponseError, errno=41, name="NOT_CONTROLLER", retriable=True):
    """This broker is not the active controller."""


class InvalidRequestError(BrokerResponseError, errno=42, name="INVALID_REQUEST"):
    """The request is malformed or violates the protocol; see the broker log for details."""


class UnsupportedForMessageFormatError(
    BrokerResponseError, errno=43, name="UNSUPPORTED_FOR_MESSAGE_FORMAT"
):
    """The topic's message format version does not support the request."""


class PolicyViolationError(BrokerResponseError, errno=44, name="POLICY_VIOLATION"):
    """The request parameters violate a policy configured on the broker."""


class OutOfOrderSequenceNumber(BrokerResponseError, errno=45, name="OUT_OF_ORDER_SEQUENCE_NUMBER"):
    """The broker received a sequence number out of order for this producer."""


class DuplicateSequenceNumber(BrokerResponseError, errno=46, name="DUPLICATE_SEQUENCE_NUMBER"):
    """The broker received a duplicate sequence number."""


class ProducerFenced(
    BrokerResponseError, ApplicationRecoverableError, errno=90, name="PRODUCER_FENCED"
):
    """A newer producer with the same transactional id fenced this one."""


class InvalidProducerEpoch(ProducerFenced, errno=47, name="INVALID_PRODUCER_EPOCH"):
    """The producer epoch is older than the broker's: another producer took over.

    A :class:`ProducerFenced` too: aiokafka raises ``ProducerFenced`` for this code, so its
    ``except ProducerFenced`` clauses catch it here. From a Produce answer inside a transaction
    it is abortable, as in the Java client (a zombie's send; its abort then meets
    ``ProducerFenced``); from the transaction coordinator it is ``ProducerFenced`` itself."""


class InvalidTxnState(BrokerResponseError, errno=48, name="INVALID_TXN_STATE"):
    """The operation is not valid in the transaction's current state."""


class InvalidProducerIdMapping(
    BrokerResponseError, ApplicationRecoverableError, errno=49, name="INVALID_PRODUCER_ID_MAPPING"
):
    """The producer id does not match the transactional id's current producer id."""


class InvalidTransactionTimeout(BrokerResponseError, errno=50, name="INVALID_TRANSACTION_TIMEOUT"):
    """The transaction timeout exceeds the broker's transaction.max.timeout.ms."""


class ConcurrentTransactions(
    BrokerResponseError, errno=51, name="CONCURRENT_TRANSACTIONS", retriable=True
):
    """Another transaction with this transactional id is still being completed."""


class TransactionCoordinatorFenced(
    BrokerResponseError, errno=52, name="TRANSACTION_COORDINATOR_FENCED"
):
    """A newer transaction coordinator replaced the one that sent this request."""


class TransactionalIdAuthorizationFailed(
    BrokerResponseError, errno=53, name="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
):
    """The client is not authorized to use the transactional id."""


class SecurityDisabled(BrokerResponseError, errno=54, name="SECURITY_DISABLED"):
    """Security features are disabled on the broker."""


class OperationNotAttempted(BrokerResponseError, errno=55, name="OPERATION_NOT_ATTEMPTED"):
    """The broker did not attempt the operation because another part of the request failed."""


class KafkaStorageError(
    BrokerResponseError, errno=56, name="KAFKA_STORAGE_ERROR", invalid_metadata=True
):
    """A disk error on the broker made the partition unavailable there."""


class LogDirNotFound(BrokerResponseError, errno=57, name="LOG_DIR_NOT_FOUND"):
    """The user-specified log directory is not configured on the broker."""


class SaslAuthenticationFailed(BrokerResponseError, errno=58, name="SASL_AUTHENTICATION_FAILED"):
    """SASL authentication failed."""


class UnknownProducerId(BrokerResponseError, errno=59, name="UNKNOWN_PRODUCER_ID"):
    """The broker has no state for this producer id (its records may have been deleted)."""


class ReassignmentInProgress(BrokerResponseError, errno=60, name="REASSIGNMENT_IN_PROGRESS"):
    """A partition reassignment is in progress."""


class DelegationTokenAuthDisabled(
    BrokerResponseError, errno=61, name="DELEGATION_TOKEN_AUTH_DISABLED"
):
    """Delegation token authentication is disabled."""


class DelegationTokenNotFound(BrokerResponseError, errno=62, name="DELEGATION_TOKEN_NOT_FOUND"):
    """The delegation token was not found."""


class DelegationTokenOwnerMismatch(
    BrokerResponseError, errno=63, name="DELEGATION_TOKEN_OWNER_MISMATCH"
):
    """The principal is not the delegation token's owner or renewer."""


class DelegationTokenRequestNotAllowed(
    BrokerResponseError, errno=64, name="DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
):
    """Delegation token requests are not allowed on this connection's authentication."""


class DelegationTokenAuthorizationFailed(
    BrokerResponseError, errno=65, name="DELEGATION_TOKEN_AUTHORIZATION_FAILED"
):
    """The client is not authorized for the delegation token operation."""


class DelegationTokenExpired(BrokerResponseError, errno=66, name="DELEGATION_TOKEN_EXPIRED"):
    """The delegation token has expired."""


class InvalidPrincipalType(BrokerResponseError, errno=67, name="INVALID_PRINCIPAL_TYPE"):
    """The principal type is not supported."""


class NonEmptyGroup(BrokerResponseError, errno=68, name="NON_EMPTY_GROUP"):
    """The group still has members."""


class GroupIdNotFound(BrokerResponseError, errno=69, name="GROUP_ID_NOT_FOUND"):
    """The group id does not exist."""


class FetchSessionIdNotFound(
    BrokerResponseError, errno=70, name="FETCH_SESSION_ID_NOT_FOUND", retriable=True
):
    """The fetch session id was not found."""


class InvalidFetchSessionEpoch(
    BrokerResponseError, errno=71, name="INVALID_FETCH_SESSION_EPOCH", retriable=True
):
    """The fetch session epoch is invalid."""


class ListenerNotFound(
    BrokerResponseError, errno=72, name="LISTENER_NOT_FOUND", invalid_metadata=True
):
    """The leader has no endpoint for the listener the request came in on."""


class TopicDeletionDisabledError(BrokerResponseError, errno=73, name="TOPIC_DELETION_DISABLED"):
    """Topic deletion is disabled on the broker."""


class FencedLeaderEpochError(
    BrokerResponseError, errno=74, name="FENCED_LEADER_EPOCH", invalid_metadata=True
):
    """The leader epoch in the request is older than the broker's."""


class UnknownLeaderEpochError(
    BrokerResponseError, errno=75, name="UNKNOWN_LEADER_EPOCH", retriable=True
):
    """The leader epoch in the request is newer than the broker's."""


class UnsupportedCompressionTypeError(
    BrokerResponseError, errno=76, name="UNSUPPORTED_COMPRESSION_TYPE"
):
    """The consumer's fetch version does not support the topic's compression type."""


class StaleBrokerEpochError(BrokerResponseError, errno=77, name="STALE_BROKER_EPOCH"):
    """The broker epoch is stale."""


class OffsetNotAvailableError(
    BrokerResponseError, errno=78, name="OFFSET_NOT_AVAILABLE", retriable=True
):
    """The leader's high watermark has not caught up after an election; retry later."""


class MemberIdRequired(BrokerResponseError, errno=79, name="MEMBER_ID_REQUIRED"):
    """The member must rejoin the group with the member id given in this response."""


class PreferredLeaderNotAvailableError(
    BrokerResponseError, errno=80, name="PREFERRED_LEADER_NOT_AVAILABLE", invalid_metadata=True
):
    """The preferred leader was not available."""


class GroupMaxSizeReachedError(BrokerResponseError, errno=81, name="GROUP_MAX_SIZE_REACHED"):
    """The group has reached its maximum size."""


class FencedInstanceIdError(
    BrokerResponseError, ApplicationRecoverableError, errno=82, name="FENCED_INSTANCE_ID"
):
    """Another member with the same group.instance.id fenced this one."""


class EligibleLeadersNotAvailableError(
    BrokerResponseError, errno=83, name="ELIGIBLE_LEADERS_NOT_AVAILABLE", invalid_metadata=True
):
    """No eligible leader is available for the election."""


class ElectionNotNeededError(
    BrokerResponseError, errno=84, name="ELECTION_NOT_NEEDED", invalid_metadata=True
):
    """The leader election is not needed."""


class NoReassignmentInProgressError(
    BrokerResponseError, errno=85, name="NO_REASSIGNMENT_IN_PROGRESS"
):
    """No partition reassignment is in progress."""


class GroupSubscribedToTopicError(BrokerResponseError, errno=86, name="GROUP_SUBSCRIBED_TO_TOPIC"):
    """The group is still subscribed to the topic whose offsets are being deleted."""


class InvalidRecordError(BrokerResponseError, errno=87, name="INVALID_RECORD"):
    """A record failed the broker's validation (e.g. a compacted topic needs keys)."""


class UnstableOffsetCommitError(
    BrokerResponseError, errno=88, name="UNSTABLE_OFFSET_COMMIT", retriable=True
):
    """A transactional offset commit for the partition is still pending."""


class ThrottlingQuotaExceededError(
    BrokerResponseError, errno=89, name="THROTTLING_QUOTA_EXCEEDED", retriable=True
):
    """The throttling quota was exceeded."""


class ResourceNotFoundError(BrokerResponseError, errno=91, name="RESOURCE_NOT_FOUND"):
    """A resource the request refers to does not exist."""


class DuplicateResourceError(BrokerResponseError, errno=92, name="DUPLICATE_RESOURCE"):
    """The request names the same resource more than once."""


class UnacceptableCredentialError(BrokerResponseError, errno=93, name="UNACCEPTABLE_CREDENTIAL"):
    """The requested credential does not meet the broker's criteria."""


class InconsistentVoterSetError(BrokerResponseError, errno=94, name="INCONSISTENT_VOTER_SET"):
    """The voter is not in the replica's voter set."""


class InvalidUpdateVersionError(BrokerResponseError, errno=95, name="INVALID_UPDATE_VERSION"):
    """The update version is invalid."""


class FeatureUpdateFailedError(BrokerResponseError, errno=96, name="FEATURE_UPDATE_FAILED"):
    """The feature update could not be applied."""


class PrincipalDeserializationFailureError(
    BrokerResponseError, errno=97, name="PRINCIPAL_DESERIALIZATION_FAILURE"
):
    """The forwarded request's principal could not be deserialized."""


class SnapshotNotFoundError(BrokerResponseError, errno=98, name="SNAPSHOT_NOT_FOUND"):
    """The requested snapshot was not found."""


class PositionOutOfRangeError(BrokerResponseError, errno=99, name="POSITION_OUT_OF_RANGE"):
    """The requested position is outside the snapshot."""


class UnknownTopicIdError(
    BrokerResponseError, errno=100, name="UNKNOWN_TOPIC_ID", invalid_metadata=True
):
    """This server does not host a topic with this id."""


class DuplicateBrokerRegistrationError(
    BrokerResponseError, errno=101, name="DUPLICATE_BROKER_REGISTRATION"
):
    """A broker with this id is already registered."""


class BrokerIdNotRegisteredError(BrokerResponseError, errno=102, name="BROKER_ID_NOT_REGISTERED"):
    """The broker id is not registered."""


class InconsistentTopicIdError(
    BrokerResponseError, errno=103, name="INCONSISTENT_TOPIC_ID", invalid_metadata=True
):
    """The topic id in the request does not match the topic id in the log."""


class InconsistentClusterIdError(BrokerResponseError, errno=104, name="INCONSISTENT_CLUSTER_ID"):
    """The cluster id in the request does not match the cluster's."""


class TransactionalIdNotFoundError(
    BrokerResponseError, errno=105, name="TRANSACTIONAL_ID_NOT_FOUND"
):
    """The transactional id was not found."""


class FetchSessionTopicIdError(
    BrokerResponseError, errno=106, name="FETCH_SESSION_TOPIC_ID_ERROR", retriable=True
):
    """The fetch session's topic id usage changed between requests."""


class IneligibleReplicaError(BrokerResponseError, errno=107, name="INELIGIBLE_REPLICA"):
    """The new ISR contains at least one ineligible replica."""


class NewLeaderElectedError(BrokerResponseError, errno=108, name="NEW_LEADER_ELECTED"):
    """A new leader was elected; the partition change was not committed."""


class OffsetMovedToTieredStorageError(
    BrokerResponseError, errno=109, name="OFFSET_MOVED_TO_TIERED_STORAGE"
):
    """The requested offset has moved to tiered storage."""


class FencedMemberEpochError(BrokerResponseError, errno=110, name="FENCED_MEMBER_EPOCH"):
    """The member epoch is fenced by the group coordinator; the member must rejoin."""


class UnreleasedInstanceIdError(BrokerResponseError, errno=111, name="UNRELEASED_INSTANCE_ID"):
    """The group instance id is still used by another member."""


class UnsupportedAssignorError(BrokerResponseError, errno=112, name="UNSUPPORTED_ASSIGNOR"):
    """The assignor or its version range is not supported by the group."""


class StaleMemberEpochError(BrokerResponseError, errno=113, name="STALE_MEMBER_EPOCH"):
    """The member epoch is stale; retry after receiving an updated epoch."""


class MismatchedEndpointTypeError(BrokerResponseError, errno=114, name="MISMATCHED_ENDPOINT_TYPE"):
    """The request was sent to an endpoint of the wrong type."""


class UnsupportedEndpointTypeError(
    BrokerResponseError, errno=115, name="UNSUPPORTED_ENDPOINT_TYPE"
):
    """This endpoint type is not supported yet."""


class UnknownControllerIdError(BrokerResponseError, errno=116, name="UNKNOWN_CONTROLLER_ID"):
    """This controller id is not known."""


class UnknownSubscriptionIdError(BrokerResponseError, errno=117, name="UNKNOWN_SUBSCRIPTION_ID"):
    """The client sent a telemetry push with an unknown or outdated subscription id."""


class TelemetryTooLargeError(BrokerResponseError, errno=118, name="TELEMETRY_TOO_LARGE"):
    """The client's telemetry payload is larger than the broker accepts."""


class InvalidRegistrationError(BrokerResponseError, errno=119, name="INVALID_REGISTRATION"):
    """The controller rejected the broker registration."""


class TransactionAbortableError(BrokerResponseError, errno=120, name="TRANSACTION_ABORTABLE"):
    """The server hit an error the producer can recover from by aborting the transaction."""


class InvalidRecordStateError(BrokerResponseError, errno=121, name="INVALID_RECORD_STATE"):
    """The record state is invalid; the acknowledgement was rejected."""


class ShareSessionNotFoundError(
    BrokerResponseError, errno=122, name="SHARE_SESSION_NOT_FOUND", retriable=True
):
    """The share session was not found."""


class InvalidShareSessionEpochError(
    BrokerResponseError, errno=123, name="INVALID_SHARE_SESSION_EPOCH", retriable=True
):
    """The share session epoch is invalid."""


class FencedStateEpochError(BrokerResponseError, errno=124, name="FENCED_STATE_EPOCH"):
    """The share-group state epoch is fenced by a newer one."""


class InvalidVoterKeyError(BrokerResponseError, errno=125, name="INVALID_VOTER_KEY"):
    """The voter key does not match the receiving replica's key."""


class DuplicateVoterError(BrokerResponseError, errno=126, name="DUPLICATE_VOTER"):
    """The voter is already part of the voter set."""


class VoterNotFoundError(BrokerResponseError, errno=127, name="VOTER_NOT_FOUND"):
    """The voter is not part of the voter set."""


class InvalidRegularExpressionError(
    BrokerResponseError, errno=128, name="INVALID_REGULAR_EXPRESSION"
):
    """The regular expression in the subscription is invalid."""


class RebootstrapRequiredError(BrokerResponseError, errno=129, name="REBOOTSTRAP_REQUIRED"):
    """The client must rebuild its metadata from the bootstrap servers."""


class StreamsInvalidTopologyError(BrokerResponseError, errno=130, name="STREAMS_INVALID_TOPOLOGY"):
    """The Streams topology is invalid."""


class StreamsInvalidTopologyEpochError(
    BrokerResponseError, errno=131, name="STREAMS_INVALID_TOPOLOGY_EPOCH"
):
    """The Streams topology epoch is invalid."""


class StreamsTopologyFencedError(BrokerResponseError, errno=132, name="STREAMS_TOPOLOGY_FENCED"):
    """The Streams topology was fenced by a newer one."""


class ShareSessionLimitReachedError(
    BrokerResponseError, errno=133, name="SHARE_SESSION_LIMIT_REACHED", retriable=True
):
    """The broker's share session cache is full."""


# --------------------------------------------------------------------------------------------
# Aliases: the other libraries' spellings of the same codes
# --------------------------------------------------------------------------------------------

UnknownServerError = UnknownError
CorruptRecordError = CorruptRecordException
InvalidMessageError = CorruptRecordException
InvalidFetchSizeError = InvalidFetchRequestError
NotLeaderOrFollowerError = NotLeaderForPartitionError
NetworkExceptionError = StaleLeaderEpochCodeError
CoordinatorLoadInProgressError = GroupLoadInProgressError
CoordinatorNotAvailableError = GroupCoordinatorNotAvailableError
NotCoordinatorError = NotCoordinatorForGroupError
OutOfOrderSequenceNumberError = OutOfOrderSequenceNumber
DuplicateSequenceNumberError = DuplicateSequenceNumber
InvalidProducerEpochError = InvalidProducerEpoch
InvalidTxnStateError = InvalidTxnState
InvalidProducerIdMappingError = InvalidProducerIdMapping
InvalidTransactionTimeoutError = InvalidTransactionTimeout
ConcurrentTransactionsError = ConcurrentTransactions
TransactionCoordinatorFencedError = TransactionCoordinatorFenced
TransactionalIdAuthorizationFailedError = TransactionalIdAuthorizationFailed
SecurityDisabledError = SecurityDisabled
OperationNotAttemptedError = OperationNotAttempted
LogDirNotFoundError = LogDirNotFound
SaslAuthenticationFailedError = SaslAuthenticationFailed
UnknownProducerIdError = UnknownProducerId
ReassignmentInProgressError = ReassignmentInProgress
DelegationTokenAuthDisabledError = DelegationTokenAuthDisabled
DelegationTokenNotFoundError = DelegationTokenNotFound
DelegationTokenOwnerMismatchError = DelegationTokenOwnerMismatch
DelegationTokenRequestNotAllowedError = DelegationTokenRequestNotAllowed
DelegationTokenAuthorizationFailedError = DelegationTokenAuthorizationFailed
DelegationTokenExpiredError = DelegationTokenExpired
InvalidPrincipalTypeError = InvalidPrincipalType
NonEmptyGroupError = NonEmptyGroup
#: Java's name for it (GroupNotEmptyException)
GroupNotEmptyError = NonEmptyGroup
GroupIdNotFoundError = GroupIdNotFound
FetchSessionIdNotFoundError = FetchSessionIdNotFound
InvalidFetchSessionEpochError = InvalidFetchSessionEpoch
ListenerNotFoundError = ListenerNotFound
MemberIdRequiredError = MemberIdRequired
ProducerFencedError = ProducerFenced

_unknown_codes: dict[int, type[BrokerResponseError]] = {}


def for_code(code: int) -> type[BrokerResponseError]:
    """Return the error class of a protocol error code (``NoError`` for 0).

    A code this table does not know gets its own ``UnknownError`` subclass carrying that ``errno``
    (the same class every time), so it can still be told apart and printed.
    """
    cls = kafka_errors.get(code)
    if cls is not None:
        return cls
    cls = _unknown_codes.get(code)
    if cls is None:
        cls = type(
            f"UnknownError{code}",
            (UnknownError,),
            {"errno": code, "message": f"UNKNOWN_ERROR_CODE_{code}", "__module__": __name__},
        )
        cls.description = f"The broker returned error code {code}, unknown to this client."
        _unknown_codes[code] = cls
    return cls


def raise_for_code(code: int, msg: str | None = None) -> None:
    """Raise the error for ``code`` (with ``msg`` as its argument, if given); no-op for 0."""
    if code == 0:
        return
    _raise(for_code(code), msg)


def _raise(cls: type[BrokerResponseError], msg: str | None) -> NoReturn:
    raise cls(msg) if msg is not None else cls()


# --------------------------------------------------------------------------------------------
# The one retry classifier
# --------------------------------------------------------------------------------------------


class RetryAction(enum.Enum):
    """What a retry loop does after an error (see :func:`retry_action`)."""

    #: send the same request to the same target again after the backoff
    RETRY = "retry"
    #: refresh the cluster metadata first (the leader or the topic moved)
    REFRESH_METADATA = "refresh_metadata"
    #: forget the coordinator and look it up again
    FIND_COORDINATOR = "find_coordinator"
    #: the group moved on without this member: rejoin (classic: JoinGroup with a new
    #: generation; KIP-848, FENCED_MEMBER_EPOCH: the same member id at epoch 0); a commit
    #: raises CommitFailedError
    REJOIN = "rejoin"
    #: KIP-848 STALE_MEMBER_EPOCH: the member is still in the group but the request carried an
    #: older epoch; send it again with the current one (after the next heartbeat answer). A
    #: generic retry loop cannot, so for it this is not retriable (as FATAL)
    REFRESH_EPOCH = "refresh_epoch"
    #: raise: sending again cannot help
    FATAL = "fatal"

    @property
    def retriable(self) -> bool:
        """True for the actions a retry loop retries (all but REJOIN, REFRESH_EPOCH and FATAL)."""
        return self in _RETRIED


_RETRIED = frozenset(
    {RetryAction.RETRY, RetryAction.REFRESH_METADATA, RetryAction.FIND_COORDINATOR}
)
_COORDINATOR_GONE = frozenset({15, 16})  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
#: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_MEMBER_EPOCH
_MEMBERSHIP_LOST = frozenset({22, 25, 27, 110})
_STALE_EPOCH = 113  # STALE_MEMBER_EPOCH


def retry_action(
    err: int | BaseException | type[BaseException], *, coordinator: bool = False
) -> RetryAction:
    """Classify an error code, exception or exception class for every retry loop.

    ``coordinator``: the request went to a group or transaction coordinator; then a lost
    connection, a client-side timeout and REQUEST_TIMED_OUT also look the coordinator up again
    (as the Java client marks the coordinator unknown). Anything that is not a
    :class:`KafkaError` is FATAL (bugs and cancellations are never retried).
    """
    if isinstance(err, int):
        cls: type[BaseException] = for_code(err)
    elif isinstance(err, BaseException):
        cls = type(err)
    else:
        cls = err
    if not issubclass(cls, KafkaError):
        return RetryAction.FATAL
    code = cls.errno if issubclass(cls, BrokerResponseError) else None
    if code in _COORDINATOR_GONE:
        return RetryAction.FIND_COORDINATOR
    if code in _MEMBERSHIP_LOST:
        return RetryAction.REJOIN
    if code == _STALE_EPOCH:
        return RetryAction.REFRESH_EPOCH
    if coordinator and (
        code == RequestTimedOutError.errno
        or issubclass(cls, (KafkaConnectionError, NodeNotReadyError, KafkaTimeoutError))
    ):
        return RetryAction.FIND_COORDINATOR
    if cls.invalid_metadata:
        return RetryAction.REFRESH_METADATA
    if cls.retriable or issubclass(cls, KafkaTimeoutError):
        return RetryAction.RETRY
    return RetryAction.FATAL


# --------------------------------------------------------------------------------------------
# KIP-1050: what an error means to a transactional producer
# --------------------------------------------------------------------------------------------


class TxnErrorClass(enum.Enum):
    """KIP-1050's classes of transaction errors, as the Java client 4.x sorts them (see
    :func:`txn_error_class` and the transactions guide's table)."""

    #: handled inside the client (retried until ``max_block_ms``/``delivery_timeout_ms``); the
    #: application sees it only as a ``KafkaTimeoutError`` when retrying ran out
    RETRIABLE = "retriable"
    #: the transaction is lost, the producer is not: ``abort_transaction()`` and go on
    ABORTABLE = "abortable"
    #: the producer was fenced or lost its identity (:class:`ApplicationRecoverableError`):
    #: stop it and start a new one with the same ``transactional_id``
    APPLICATION_RECOVERABLE = "application_recoverable"
    #: the producer cannot go on (an authorization or protocol failure, an invalid
    #: transaction state): stop it, fix the cause
    PRODUCER_FATAL = "producer_fatal"


#: errors after which a transactional producer cannot go on and a new one would not help
#: unless the cause is fixed (Java: fatal, or ``InvalidConfigurationException``)
_PRODUCER_FATAL: tuple[type[KafkaError], ...] = (
    InvalidTxnState,
    TransactionCoordinatorFenced,
    TransactionalIdAuthorizationFailed,
    ClusterAuthorizationFailedError,
    UnsupportedVersionError,
    UnsupportedForMessageFormatError,
    InvalidTransactionTimeout,
    IncompatibleBrokerVersion,
)


def txn_error_class(err: BaseException | type[BaseException]) -> TxnErrorClass:
    """The KIP-1050 class of an error a transactional producer raised (or of its class).

    ``InvalidProducerEpoch`` is the one code whose class depends on where it came from: from
    a Produce answer (``send()``, then ``commit_transaction()``) it is ABORTABLE, as Java's
    ``InvalidProducerEpochException``; from the coordinator the producer raises
    ``ProducerFenced`` instead. Anything that is not a :class:`KafkaError` is PRODUCER_FATAL.
    """
    cls = err if isinstance(err, type) else type(err)
    if not issubclass(cls, KafkaError):
        return TxnErrorClass.PRODUCER_FATAL
    if issubclass(cls, InvalidProducerEpoch):
        return TxnErrorClass.ABORTABLE
    if issubclass(cls, ApplicationRecoverableError):
        return TxnErrorClass.APPLICATION_RECOVERABLE
    if issubclass(cls, _PRODUCER_FATAL):
        return TxnErrorClass.PRODUCER_FATAL
    if retry_action(cls).retriable:
        return TxnErrorClass.RETRIABLE
    return TxnErrorClass.ABORTABLE
