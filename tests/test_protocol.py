"""Codec tests: property-based round trips for every schema at every version, golden byte
vectors derived by hand from the protocol specification, and fuzzed decoders."""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import KafkaError, KafkaProtocolError
from aiokafka_lite.protocol import (
    REQUESTS_BY_KEY,
    decode_data,
    decode_response,
    encode_data,
    encode_request,
    read_correlation_id,
)
from aiokafka_lite.protocol import messages as m
from aiokafka_lite.protocol.schema import F, Struct, _within
from aiokafka_lite.protocol.types import (
    read_uvarint,
    read_varint,
    read_varlong,
    write_uvarint,
    write_varint,
)

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

text = st.text(max_size=12)


def _scalar(f: F, base: str, version: int) -> st.SearchStrategy[Any]:
    nullable = _within(f.nullable, version)
    if base in INT_RANGES:
        lo, hi = INT_RANGES[base]
        s: st.SearchStrategy[Any] = st.integers(lo, hi)
    elif base == "bool":
        s = st.booleans()
    elif base == "float64":
        s = st.floats(allow_nan=False)
    elif base == "uuid":
        s = st.uuids()
    elif base == "string":
        s = text
    elif base in ("bytes", "records"):
        s = st.binary(max_size=16)
        nullable = nullable or base == "records"
    else:
        raise AssertionError(base)
    return st.one_of(st.none(), s) if nullable else s


def struct_strategy(cls: type[Struct], version: int, depth: int = 0) -> st.SearchStrategy[Struct]:
    """Objects of ``cls`` with random values in every field present at ``version``."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls._decl.fields:
        if not _within(f.versions, version):
            continue
        is_array = f.type.startswith("[]")
        base = f.type[2:] if is_array else f.type
        if f.struct is not None:
            nested = getattr(cls, f.struct.name)
            elem: st.SearchStrategy[Any] = struct_strategy(nested, version, depth + 1)
        else:
            elem = (
                _scalar(f, base, version)
                if not is_array
                else _scalar(F(f.name, base, "0+"), base, version)
            )
        if is_array:
            s: st.SearchStrategy[Any] = st.lists(elem, max_size=2 if depth < 2 else 1)
            if _within(f.nullable, version):
                s = st.one_of(st.none(), s)
        elif f.struct is not None and _within(f.nullable, version):
            s = st.one_of(st.none(), elem)
        else:
            s = elem
        fields[f.name] = s
    return st.builds(lambda **kw: cls(**kw), **fields)


def _all_versions() -> list[tuple[type[Struct], int]]:
    cases = []
    for req in REQUESTS_BY_KEY.values():
        for v in range(req.SPEC_MIN_VERSION, req.SPEC_MAX_VERSION + 1):  # type: ignore[attr-defined]
            cases.append((req, v))
    return cases


CASES = _all_versions()


def _strip_request_header(frame: bytes) -> tuple[int, int, int, str | None, int]:
    size, api_key, version, corr = struct.unpack_from(">ihhi", frame, 0)
    assert size == len(frame) - 4
    n = struct.unpack_from(">h", frame, 12)[0]
    client_id = None if n < 0 else frame[14 : 14 + n].decode()
    return api_key, version, corr, client_id, 14 + max(n, 0)


@pytest.mark.parametrize(("cls", "version"), CASES, ids=lambda c: getattr(c, "__name__", str(c)))
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_request_round_trip_every_version(
    cls: type[Struct], version: int, data: st.DataObject
) -> None:
    obj = data.draw(struct_strategy(cls, version))
    frame = bytes(encode_request(obj, version, 42, "client"))
    api_key, v, corr, client_id, pos = _strip_request_header(frame)
    assert (api_key, v, corr, client_id) == (cls.API_KEY, version, 42, "client")  # type: ignore[attr-defined]
    flexible = _within(cls._flexible, version)
    if flexible:
        assert frame[pos] == 0  # empty header tagged fields
        pos += 1
    decoded, end = cls.decoder(version)(frame, pos)
    assert end == len(frame)
    assert decoded == obj


@pytest.mark.parametrize(("cls", "version"), CASES, ids=lambda c: getattr(c, "__name__", str(c)))
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_response_round_trip_every_version(
    cls: type[Struct], version: int, data: st.DataObject
) -> None:
    resp_cls = cls.RESPONSE  # type: ignore[attr-defined]
    obj = data.draw(struct_strategy(resp_cls, version))
    out = bytearray(struct.pack(">i", 99))
    if _within(resp_cls._flexible, version) and cls.API_KEY != 18:  # type: ignore[attr-defined]
        out.append(0)
    resp_cls.encoder(version)(out, obj)
    payload = bytes(out)
    assert read_correlation_id(payload) == 99
    assert decode_response(cls, version, payload) == obj


# ------------------------------------------------------------------ golden vectors


def test_golden_api_versions_request_v0() -> None:
    # size=10 | api_key=18 | version=0 | correlation_id=1 | client_id "ab"; empty body
    frame = encode_request(m.ApiVersionsRequest(), 0, 1, "ab")
    assert bytes(frame) == bytes.fromhex("0000000c001200000000000100026162")


def test_golden_api_versions_request_v3_flexible() -> None:
    req = m.ApiVersionsRequest(client_software_name="py", client_software_version="1")
    frame = encode_request(req, 3, 5, None)
    expected = (
        "0012"
        "0003"
        "00000005"
        "ffff"  # header v2: null client id (classic string)
        "00"  # header tagged fields: none
        "03"
        "7079"  # compact string "py" (len+1 = 3)
        "02"
        "31"  # compact string "1"
        "00"  # body tagged fields
    )
    assert bytes(frame[4:]).hex() == expected
    assert int.from_bytes(frame[:4], "big") == len(expected) // 2


def test_golden_metadata_request_v1_and_v12() -> None:
    req = m.MetadataRequest(topics=[m.MetadataRequestTopic(name="x")])
    body_v1 = bytes(encode_request(req, 1, 7, "c"))[4 + 11 :]
    assert body_v1.hex() == "00000001000178"  # int32 array count, int16 string
    body_v12 = bytes(encode_request(req, 12, 7, "c"))[4 + 12 :]
    # compact array(1+1) | uuid 16x00 | compact nullable string "x" | struct tags | allow_auto=1 |
    # include_topic_authorized_operations=0 | tags
    assert body_v12.hex() == "02" + "00" * 16 + "027800010000"
    null_topics = bytes(encode_request(m.MetadataRequest(topics=None), 12, 7, "c"))[4 + 12 :]
    assert null_topics.hex() == "00010000"


def test_golden_api_versions_response_v3_header_v0_and_tagged_field() -> None:
    payload = bytes.fromhex(
        "00000009"  # correlation id; ApiVersions keeps response header v0 (no tag section)
        "0000"  # error_code
        "02"
        "0012"
        "0000"
        "0004"
        "00"  # compact array of one ApiVersion (18, 0..4), no tags
        "00000000"  # throttle_time_ms
        "01"
        "01"
        "08"
        "0000000000000007"  # one tagged field: tag 1 (finalized epoch), 8 bytes
    )
    resp = decode_response(m.ApiVersionsRequest, 3, payload)
    assert resp.error_code == 0
    assert [(a.api_key, a.min_version, a.max_version) for a in resp.api_keys] == [(18, 0, 4)]
    assert resp.finalized_features_epoch == 7
    assert resp.supported_features == []  # absent tagged field keeps its default


def test_unknown_tagged_fields_are_skipped() -> None:
    payload = bytes.fromhex("00000001000000000000000000007f03616263")
    # Heartbeat v4: header tags | throttle | error | body tags: 0? -> use explicit builder below
    out = bytearray(b"\x00\x00\x00\x01\x00")
    out += struct.pack(">ih", 10, 0)
    write_uvarint(out, 2)  # two tagged fields, both unknown
    for tag, data in ((100, b"abc"), (7, b"")):
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
    resp = decode_response(m.HeartbeatRequest, 4, bytes(out))
    assert (resp.throttle_time_ms, resp.error_code) == (10, 0)
    assert payload  # silence unused


def test_golden_produce_request_v3_records_passthrough() -> None:
    records = b"\x01\x02\x03"
    req = m.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            m.TopicProduceData(
                name="t", partition_data=[m.PartitionProduceData(index=2, records=records)]
            )
        ],
    )
    body = bytes(encode_request(req, 3, 1, ""))[4 + 10 :]
    assert body.hex() == ("ffffffff000003e800000001000174000000010000000200000003010203")


def test_decoded_records_are_views_into_the_payload() -> None:
    out = bytearray(b"\x00\x00\x00\x01")
    part = m.FetchResponse.FetchableTopicResponse
    obj = m.FetchResponse(
        responses=[part(topic="t", partitions=[m.FetchResponse.PartitionData(records=b"abc")])]
    )
    m.FetchResponse.encoder(4)(out, obj)
    resp = decode_response(m.FetchRequest, 4, bytes(out))
    recs = resp.responses[0].partitions[0].records
    assert isinstance(recs, memoryview) and bytes(recs) == b"abc"


# ------------------------------------------------------------------ cross-check with kafka-python


def test_matches_kafka_python_encoding() -> None:
    kp = pytest.importorskip("kafka.protocol.metadata")
    theirs = kp.MetadataRequest[1](topics=["a", "bc"]).encode()
    ours = bytes(
        encode_request(
            m.MetadataRequest(topics=[m.MetadataRequestTopic(name=n) for n in ("a", "bc")]),
            1,
            0,
            "x",
        )
    )
    assert ours[4 + 11 :] == theirs


# ------------------------------------------------------------------ consumer protocol data


def test_consumer_protocol_subscription_round_trip_and_forward_compat() -> None:
    sub = m.ConsumerProtocolSubscription(topics=["a", "b"], user_data=b"u")
    data = encode_data(sub, 0)
    assert data.hex() == "0000000000020001610001620000000175"
    back, version = decode_data(m.ConsumerProtocolSubscription, data)
    assert version == 0 and back.topics == ["a", "b"] and back.user_data == b"u"
    # a newer member may send a higher version with fields appended: read what we know
    future = b"\x00\x09" + encode_data(sub, 3)[2:] + b"extra"
    back, version = decode_data(m.ConsumerProtocolSubscription, future)
    assert version == 9 and back.topics == ["a", "b"]


def test_consumer_protocol_assignment_v0() -> None:
    tp = m.ConsumerProtocolAssignment.TopicPartition
    asg = m.ConsumerProtocolAssignment(assigned_partitions=[tp(topic="t", partitions=[0, 3])])
    data = encode_data(asg, 0)
    assert data.hex() == "000000000001000174000000020000000000000003ffffffff"
    assert decode_data(m.ConsumerProtocolAssignment, data)[0] == asg


# ------------------------------------------------------------------ varints


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    out = bytearray()
    write_varint(out, n)
    assert read_varlong(bytes(out), 0) == (n, len(out))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n: int) -> None:
    out = bytearray()
    write_varint(out, n)
    assert read_varint(bytes(out), 0) == (n, len(out))


def test_varint_golden() -> None:
    for value, hexed in (
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (300, "d804"),
    ):
        out = bytearray()
        write_varint(out, value)
        assert out.hex() == hexed, value
    assert read_uvarint(bytes.fromhex("ac02"), 0) == (300, 2)


# ------------------------------------------------------------------ bad bytes


def _sample_payloads() -> list[tuple[type[Struct], int, bytes]]:
    rng = random.Random(7)
    samples = []
    meta = m.MetadataResponse(
        brokers=[m.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        topics=[
            m.MetadataResponseTopic(
                name="t",
                topic_id=uuid.uuid4(),
                partitions=[
                    m.MetadataResponsePartition(partition_index=i, replica_nodes=[1], isr_nodes=[1])
                    for i in range(3)
                ],
            )
        ],
    )
    for v in (0, 1, 5, 9, 12):
        out = bytearray(b"\x00\x00\x00\x01")
        if v >= 9:
            out.append(0)
        m.MetadataResponse.encoder(v)(out, meta)
        samples.append((m.MetadataRequest, v, bytes(out)))
    part = m.FetchResponse.PartitionData(records=bytes(rng.randrange(256) for _ in range(40)))
    fetch = m.FetchResponse(
        responses=[m.FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])]
    )
    for v in (4, 11, 12):
        out = bytearray(b"\x00\x00\x00\x01")
        if v >= 12:
            out.append(0)
        m.FetchResponse.encoder(v)(out, fetch)
        samples.append((m.FetchRequest, v, bytes(out)))
    return samples


def test_truncated_responses_raise_protocol_error() -> None:
    for cls, v, payload in _sample_payloads():
        for cut in range(len(payload)):
            try:
                decode_response(cls, v, payload[:cut])
            except KafkaProtocolError:
                continue
            # a prefix may be a valid shorter message only if it decodes completely
            pytest.fail(f"{cls.__name__} v{v} cut at {cut} decoded without error")


def test_fuzzed_responses_raise_only_kafka_errors() -> None:
    rng = random.Random(1234)
    for cls, v, payload in _sample_payloads():
        for _ in range(400):
            buf = bytearray(payload)
            for _ in range(rng.randrange(1, 6)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            try:
                decode_response(cls, v, bytes(buf))
            except KafkaError:
                pass


def test_huge_array_count_is_rejected_without_allocating() -> None:
    payload = b"\x00\x00\x00\x01" + struct.pack(">i", 0x7FFFFFF0)  # Metadata v0: brokers count
    with pytest.raises(KafkaProtocolError, match="claims"):
        decode_response(m.MetadataRequest, 0, payload)
    payload = (
        b"\x00\x00\x00\x01"
        + struct.pack(">i", 0)
        + struct.pack(">i", 1)
        + struct.pack(">hh", 0, 0x7FFF)
    )
    with pytest.raises(KafkaProtocolError, match="truncated"):
        decode_response(m.MetadataRequest, 0, payload)


def test_negative_lengths_are_rejected() -> None:
    # Metadata v0 brokers: one broker, node id, host string with length -5
    payload = b"\x00\x00\x00\x01" + struct.pack(">iih", 1, 1, -5)
    with pytest.raises(KafkaProtocolError, match="invalid string length"):
        decode_response(m.MetadataRequest, 0, payload)


def test_unknown_version_is_a_clear_error() -> None:
    with pytest.raises(KafkaProtocolError, match="no version 99"):
        encode_request(m.MetadataRequest(), 99, 1, None)


def test_unknown_field_name_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="no field"):
        m.MetadataRequest(topicz=[])


def test_request_variants_decode_into_their_own_class():
    """The TXN_V2 / BY_ID variants of a request class keep codec caches of their own: a
    variant's decoder built first no longer makes the base class decode into the variant (the
    whole-suite failure of the round trip above, after the fault proxy had decoded Produce)."""
    from aiokafka_lite.protocol import messages as m

    base = m.ProduceRequest
    obj = base(transactional_id=None, acks=1, timeout_ms=5, topic_data=[])
    frame = bytes(encode_request(obj, 11, 42, "client"))
    *_, pos = _strip_request_header(frame)
    pos += 1  # Produce v11 is flexible: the header's empty tagged fields
    for cls in (base.BY_ID, base.TXN_V2.BY_ID, base):
        if cls.MIN_VERSION <= 11 <= cls.MAX_VERSION:
            decoded, _ = cls.decoder(11)(frame, pos)
            assert type(decoded) is cls
    assert base.decoder(11)(frame, pos)[0] == obj
