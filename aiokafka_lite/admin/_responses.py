"""aiokafka-shaped response objects returned by the admin client.

aiokafka's admin methods return its decoded protocol responses: attributes named after its
schemas (``topic_errors``, ``topic_error_codes``, ``resources`` ...), nested entries as tuples,
and ``to_object()``. These classes give the same shape (nested entries are named tuples, so both
unpacking and attribute access work) without exposing this client's codec classes.
``throttle_time_ms`` is always 0: the operations layer does not carry it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar

from .._wire import ItemError

if TYPE_CHECKING:
    from ..ops.groups import GroupDescription

__all__ = [
    "AlterConfigsResponse",
    "CreatePartitionsResponse",
    "CreateTopicsResponse",
    "DeleteTopicsResponse",
    "DescribeConfigsResponse",
    "DescribeGroupsResponse",
    "IncrementalAlterConfigsResponse",
    "Response",
]


def _to_object(value: Any) -> Any:
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: _to_object(v) for k, v in value._asdict().items()}
    if isinstance(value, list):
        return [_to_object(v) for v in value]
    return value


class Response:
    """Base: one attribute per field of ``FIELDS``, ``to_object()`` and a readable repr."""

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **fields: Any) -> None:
        unknown = set(fields) - set(self.FIELDS)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        for name in self.FIELDS:
            setattr(self, name, fields.get(name))

    def to_object(self) -> dict[str, Any]:
        """The response as nested dicts and lists (as aiokafka's ``to_object()``)."""
        return {name: _to_object(getattr(self, name)) for name in self.FIELDS}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.to_object() == other.to_object()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.FIELDS)
        return f"{type(self).__name__}({inner})"


class TopicError(NamedTuple):
    """Per-topic result of CreateTopics / CreatePartitions."""

    topic: str
    error_code: int
    error_message: str | None


class TopicErrorCode(NamedTuple):
    """Per-topic result of DeleteTopics."""

    topic: str
    error_code: int


class CreateTopicsResponse(Response):
    """``topic_errors``: ``[(topic, error_code, error_message)]``."""

    FIELDS = ("throttle_time_ms", "topic_errors")
    throttle_time_ms: int
    topic_errors: list[TopicError]


class DeleteTopicsResponse(Response):
    """``topic_error_codes``: ``[(topic, error_code)]``."""

    FIELDS = ("throttle_time_ms", "topic_error_codes")
    throttle_time_ms: int
    topic_error_codes: list[TopicErrorCode]


class CreatePartitionsResponse(Response):
    """``topic_errors``: ``[(topic, error_code, error_message)]``."""

    FIELDS = ("throttle_time_ms", "topic_errors")
    throttle_time_ms: int
    topic_errors: list[TopicError]


class ConfigSynonym(NamedTuple):
    """A config synonym (where else the value could come from)."""

    config_name: str
    config_value: str | None
    config_source: int


class ConfigEntry(NamedTuple):
    """One described config (aiokafka's field names, ``config_names`` included)."""

    config_names: str
    config_value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool
    config_synonyms: list[ConfigSynonym]


class DescribedResource(NamedTuple):
    """One resource of a DescribeConfigs answer."""

    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    config_entries: list[ConfigEntry]


class DescribeConfigsResponse(Response):
    """``resources``: ``[(error_code, error_message, resource_type, resource_name, entries)]``."""

    FIELDS = ("throttle_time_ms", "resources")
    throttle_time_ms: int
    resources: list[DescribedResource]


class AlteredResource(NamedTuple):
    """One resource of an (Incremental)AlterConfigs answer."""

    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class AlterConfigsResponse(Response):
    """``resources``: ``[(error_code, error_message, resource_type, resource_name)]``."""

    FIELDS = ("throttle_time_ms", "resources")
    throttle_time_ms: int
    resources: list[AlteredResource]


class IncrementalAlterConfigsResponse(AlterConfigsResponse):
    """Same shape as :class:`AlterConfigsResponse`."""


class GroupMember(NamedTuple):
    """A member of a described group (raw metadata and assignment bytes, as aiokafka)."""

    member_id: str
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class DescribedGroup(NamedTuple):
    """One group of a DescribeGroups answer (aiokafka's v2 shape)."""

    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]


class DescribedGroupWithOperations(NamedTuple):
    """One group with ``authorized_operations`` (when asked for, as aiokafka's v3 shape)."""

    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]
    authorized_operations: int


class DescribeGroupsResponse(Response):
    """``groups``: ``[(error_code, group, state, protocol_type, protocol, members)]``."""

    FIELDS = ("throttle_time_ms", "groups")
    throttle_time_ms: int
    groups: list[DescribedGroup | DescribedGroupWithOperations]


def described_group(
    d: GroupDescription | ItemError, gid: str, with_operations: bool
) -> DescribedGroup | DescribedGroupWithOperations:
    """A DescribeGroups result as aiokafka's response object (its error raised)."""
    if isinstance(d, ItemError):
        raise d.exception(f"DescribeGroups of {gid!r}")
    members = [
        GroupMember(
            mb.member_id,
            mb.client_id,
            mb.client_host,
            mb.member_metadata,
            mb.member_assignment,
        )
        for mb in d.members
    ]
    code = d.error.code if d.error is not None else 0
    if with_operations:
        return DescribedGroupWithOperations(
            code,
            d.group_id,
            d.state,
            d.protocol_type,
            d.protocol,
            members,
            d.authorized_operations,
        )
    return DescribedGroup(code, d.group_id, d.state, d.protocol_type, d.protocol, members)


_A = TypeVar("_A", bound=AlterConfigsResponse)


def altered(results: Iterable[Any], cls: type[_A]) -> _A:
    """Alter(Incremental)Configs results as aiokafka's response object of class ``cls``."""
    return cls(
        throttle_time_ms=0,
        resources=[AlteredResource(r.error_code, r.error_message, r.type, r.name) for r in results],
    )
