"""Fault injection for tests: a Kafka-aware TCP proxy in front of a real broker.

``FaultProxy`` (franz-go's kfake is the model, but the broker behind it is real) forwards every
request to the broker and every response back, decoding the frame headers with aiokafka_lite's
own codec so it knows which API each response answers. Rules act on chosen responses:

* ``error``: rewrite the error code (top-level, or only for a topic / partition), e.g. a Fetch
  partition answers NOT_LEADER_OR_FOLLOWER, a commit answers NOT_COORDINATOR;
* ``delay``: hold the response (and the ones after it on that connection) for a while;
* ``drop``: never deliver the response (the client's request times out);
* ``cut``: close the connection instead of delivering it (the broker did the work);
* ``corrupt``: flip a byte inside a Fetch partition's record data (CRC mismatch);
* ``observe``: change nothing, count the matches (``hits``; ``done`` is set after ``times``);
* ``cap_version`` (on ApiVersions answers): lower the broker's max version of API
  ``cap_api_key`` to ``max_version`` (a broker without a newer version of it).

Rules with ``direction="request"`` act on requests before the broker sees them: ``drop`` (the
broker never gets it; later requests on the connection still go through), ``delay``, ``cut``,
and ``reject`` (Produce only: answer every partition with ``error_code`` without forwarding,
i.e. the broker refused the batch and wrote nothing).

``silent = True`` turns the broker into a black hole: connections are accepted, nothing is
answered (a hung or paused broker, without touching the shared broker process).

Metadata and FindCoordinator answers are rewritten to advertise the proxy instead of the
broker, so a client that bootstraps through the proxy keeps talking through it; ApiVersions
answers name only the APIs and versions our codec decodes, so newer clients (Java 4.4) pick
versions the proxy can read. One proxy
fronts one broker (the test fixtures run single-node brokers).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.errors import KafkaProtocolError
from aiokafka_lite.protocol import REQUESTS_BY_KEY, decode_response, is_flexible
from aiokafka_lite.protocol import messages as m

__all__ = ["FaultProxy", "Rule", "API"]

_REQ_HEADER = struct.Struct(">hhi")


class API:
    """API keys used by the fault tests."""

    PRODUCE = m.ProduceRequest.API_KEY
    FETCH = m.FetchRequest.API_KEY
    LIST_OFFSETS = m.ListOffsetsRequest.API_KEY
    METADATA = m.MetadataRequest.API_KEY
    OFFSET_COMMIT = m.OffsetCommitRequest.API_KEY
    OFFSET_FETCH = m.OffsetFetchRequest.API_KEY
    FIND_COORDINATOR = m.FindCoordinatorRequest.API_KEY
    JOIN_GROUP = m.JoinGroupRequest.API_KEY
    HEARTBEAT = m.HeartbeatRequest.API_KEY
    SYNC_GROUP = m.SyncGroupRequest.API_KEY
    INIT_PRODUCER_ID = m.InitProducerIdRequest.API_KEY
    ADD_PARTITIONS_TO_TXN = m.AddPartitionsToTxnRequest.API_KEY
    ADD_OFFSETS_TO_TXN = m.AddOffsetsToTxnRequest.API_KEY
    END_TXN = m.EndTxnRequest.API_KEY
    DESCRIBE_GROUPS = m.DescribeGroupsRequest.API_KEY
    API_VERSIONS = m.ApiVersionsRequest.API_KEY
    SHARE_FETCH = m.ShareFetchRequest.API_KEY
    SHARE_ACKNOWLEDGE = m.ShareAcknowledgeRequest.API_KEY


@dataclass
class Rule:
    """What to do with the next ``times`` responses of ``api_key`` that match."""

    api_key: int
    action: str  # "error" | "delay" | "drop" | "cut" | "corrupt" | "observe" | "reject"
    error_code: int = 0
    topic: str | None = None
    partition: int | None = None
    seconds: float = 0.0
    times: int = 1  # -1: every matching response
    when: Callable[[Any], bool] | None = None  # extra predicate on the decoded message
    direction: str = "response"  # or "request"
    cap_api_key: int = -1  # cap_version: the API whose max version is lowered
    max_version: int = -1  # cap_version: to this
    #: "error": also edit the decoded response (e.g. a KIP-951 CurrentLeader beside the code)
    edit: Callable[[Any], None] | None = None
    hits: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def active(self) -> bool:
        """True while the rule still applies to more responses."""
        return self.times < 0 or self.hits < self.times


class _Cut(Exception):
    """Close the connection now."""


class FaultProxy:
    """``async with FaultProxy("127.0.0.1:9092") as proxy:`` then clients use
    ``proxy.bootstrap``; ``proxy.add(Rule(...))`` injects faults."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.host = "127.0.0.1"
        self.port = 0
        self.rules: list[Rule] = []
        self.silent = False
        #: the address Metadata / FindCoordinator answers name (default: this proxy), and a
        #: number added to every node id they name: a "cluster" of other nodes and ports in
        #: front of the same broker (the rebootstrap tests)
        self.advertise: tuple[str, int] | None = None
        self.node_offset = 0
        #: (api_key, version) of every response that reached a client, in order
        self.delivered: list[tuple[int, int]] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._to_client: dict[int, asyncio.Queue[bytes]] = {}

    @property
    def bootstrap(self) -> str:
        """Where clients connect."""
        return f"{self.host}:{self.port}"

    def add(self, rule: Rule) -> Rule:
        """Install a rule (applies to responses read from now on); returns it."""
        self.rules.append(rule)
        return rule

    async def cut_all(self) -> None:
        """Close every proxied connection (clients reconnect through the proxy)."""
        for w in list(self._writers):
            w.close()

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    # -- forwarding --------------------------------------------------------------------
    async def _accept(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.set_name("faultproxy-accept")
        self._tasks.add(task)
        self._writers.add(cwriter)
        bwriter: asyncio.StreamWriter | None = None
        try:
            breader, bwriter = await asyncio.open_connection(*self.upstream)
            self._writers.add(bwriter)
            pending: dict[int, tuple[int, int]] = {}
            # answers made by the proxy itself: registered before either task runs, since the
            # request side may answer the first request (an ApiVersions newer than the codec's)
            # before the response side has started
            self._to_client[id(pending)] = asyncio.Queue()
            up = asyncio.create_task(self._requests(creader, bwriter, pending), name="faultproxy")
            down = asyncio.create_task(
                self._responses(breader, cwriter, pending), name="faultproxy"
            )
            try:
                await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in (up, down):
                    t.cancel()
                await asyncio.wait([up, down])
                self._to_client.pop(id(pending), None)
        except OSError:
            pass
        finally:
            for w in (cwriter, bwriter):
                if w is not None:
                    w.close()
                    self._writers.discard(w)
            self._tasks.discard(task)

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int]],
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, _Cut):
            while True:
                frame = await _read_frame(reader)
                key, version, corr = _REQ_HEADER.unpack_from(frame, 4)
                pending[corr] = (key, version)
                if self.silent:
                    continue
                if key == API.API_VERSIONS and version > _PROXY_API_VERSIONS_MAX:
                    reply = _api_versions_too_new(frame[8:12])
                else:
                    reply = await self._apply_request(key, version, frame)
                if reply is None:
                    continue  # dropped
                if reply is not frame:  # answered here, the broker never sees it
                    pending.pop(corr, None)
                    await self._to_client[id(pending)].put(reply)
                    continue
                writer.write(frame)
                await writer.drain()

    async def _apply_request(self, key: int, version: int, frame: bytes) -> bytes | None:
        rules = [r for r in self.rules if r.direction == "request" and r.api_key == key]
        rules = [r for r in rules if r.active]
        if not rules:
            return frame
        req_cls = _request_class(key, version)
        request = _decode_request(req_cls, version, frame)
        for rule in rules:
            if not rule.active or (rule.when is not None and not rule.when(request)):
                continue
            rule.hits += 1
            if not rule.active:
                rule.done.set()
            if rule.action == "drop":
                return None
            if rule.action == "cut":
                raise _Cut
            if rule.action == "delay":
                await asyncio.sleep(rule.seconds)
            elif rule.action == "observe":
                pass
            elif rule.action == "reject" and key == API.PRODUCE:
                resp_cls = req_cls.RESPONSE  # type: ignore[attr-defined]
                tcls = resp_cls.TopicProduceResponse
                resp = resp_cls(
                    responses=[
                        tcls(
                            name=t.name,
                            partition_responses=[
                                tcls.PartitionProduceResponse(
                                    index=pd.index, error_code=rule.error_code, base_offset=-1
                                )
                                for pd in t.partition_data
                            ],
                        )
                        for t in request.topic_data
                    ]
                )
                return _encode_response(req_cls, version, frame[8:12], resp)
            else:  # pragma: no cover - a typo in a test
                raise ValueError(f"unknown request fault {rule.action!r}")
        return frame

    async def _responses(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int]],
    ) -> None:
        local = self._to_client[id(pending)]  # answers made by the proxy itself
        loop = asyncio.get_running_loop()
        read = loop.create_task(_read_frame(reader), name="faultproxy")
        got = loop.create_task(local.get(), name="faultproxy")
        try:
            while True:
                await asyncio.wait([read, got], return_when=asyncio.FIRST_COMPLETED)
                if got.done():
                    writer.write(got.result())
                    got = loop.create_task(local.get(), name="faultproxy")
                    await writer.drain()
                    continue
                frame = read.result()
                read = loop.create_task(_read_frame(reader), name="faultproxy")
                corr = int.from_bytes(frame[4:8], "big", signed=True)
                key, version = pending.pop(corr, (-1, -1))
                if self.silent or key < 0:
                    continue
                out = await self._apply(key, version, frame)
                if out is None:
                    continue
                writer.write(out)
                await writer.drain()
                self.delivered.append((key, version))
        except (OSError, asyncio.IncompleteReadError, _Cut):
            pass
        finally:
            read.cancel()
            got.cancel()

    async def _apply(self, key: int, version: int, frame: bytes) -> bytes | None:
        rules = [r for r in self.rules if r.api_key == key and r.active]
        rules = [r for r in rules if r.direction == "response"]
        # Produce / Fetch: KIP-951's NodeEndpoints and CurrentLeader name brokers too
        rewrite = key in (API.METADATA, API.FIND_COORDINATOR, API.API_VERSIONS) or (
            key in (API.PRODUCE, API.FETCH) and _names_nodes(frame)
        )
        if not rules and not rewrite:
            return frame
        req_cls = _request_class(key, version)
        if key == API.API_VERSIONS and not rules:
            try:
                resp = decode_response(req_cls, version, frame[4:])
            except KafkaProtocolError:  # noida-db's answer has tagged fields we do not read
                return frame  # (only the Java client needs the cut, on Apache Kafka)
        else:
            resp = decode_response(req_cls, version, frame[4:])
        changed = rewrite
        if key == API.API_VERSIONS:
            _only_versions_we_decode(resp)
        elif rewrite:
            self._advertise_proxy(resp)
            if key == API.METADATA:  # Fetch v13+ answers name topics by id only (KIP-516)
                for t in resp.topics:
                    if t.name and t.topic_id is not None:
                        _TOPIC_NAMES[t.topic_id] = t.name
        for rule in rules:
            if not rule.active or not _matches(rule, resp):
                continue
            rule.hits += 1
            if not rule.active:
                rule.done.set()
            if rule.action == "error":
                _set_errors(resp, rule.error_code, rule.topic, rule.partition)
                if rule.edit is not None:
                    rule.edit(resp)
                changed = True
            elif rule.action == "corrupt":
                _corrupt(resp, rule.topic, rule.partition)
                changed = True
            elif rule.action == "delay":
                await asyncio.sleep(rule.seconds)
            elif rule.action == "observe":
                pass
            elif rule.action == "cap_version":
                for k in resp.api_keys:
                    if k.api_key == rule.cap_api_key:
                        k.max_version = min(k.max_version, rule.max_version)
                    known = REQUESTS_BY_KEY.get(k.api_key)
                    if known is not None:  # (newer clients: only versions the proxy can read)
                        k.max_version = min(k.max_version, _max_decoded(known))
                changed = True
            elif rule.action == "drop":
                return None
            elif rule.action == "cut":
                raise _Cut
            else:  # pragma: no cover - a typo in a test
                raise ValueError(f"unknown fault action {rule.action!r}")
        if not changed:
            return frame
        return _encode_response(req_cls, version, frame[4:8], resp)

    def _advertise_proxy(self, resp: Any) -> None:
        host, port = self.advertise or (self.host, self.port)
        off = self.node_offset

        def node(n: int) -> int:
            return n + off if n >= 0 else n

        for b in getattr(resp, "brokers", None) or ():
            b.host, b.port, b.node_id = host, port, node(b.node_id)
        if getattr(resp, "host", None):
            resp.host, resp.port = host, port
            resp.node_id = node(resp.node_id)
        for c in getattr(resp, "coordinators", None) or ():
            if c.host:
                c.host, c.port, c.node_id = host, port, node(c.node_id)
        if off and getattr(resp, "controller_id", None) is not None:
            resp.controller_id = node(resp.controller_id)
        for e in getattr(resp, "node_endpoints", None) or ():
            e.host, e.port, e.node_id = host, port, node(e.node_id)
        for t in getattr(resp, "responses", None) or () if off else ():
            for p in getattr(t, "partitions", None) or getattr(t, "partition_responses", ()):
                p.current_leader.leader_id = node(p.current_leader.leader_id)
        for t in getattr(resp, "topics", None) or () if off else ():
            for p in getattr(t, "partitions", None) or ():
                p.leader_id = node(p.leader_id)
                p.replica_nodes = [node(n) for n in p.replica_nodes]
                p.isr_nodes = [node(n) for n in p.isr_nodes]
                p.offline_replicas = [node(n) for n in p.offline_replicas]


def _names_nodes(frame: bytes) -> bool:
    """A Produce/Fetch answer may name nodes (KIP-951) only when a partition failed: one
    with no error code in it (a cheap byte test, no decoding) is passed on as it is."""
    return b"\x00\x06" in frame or b"\x00\x4a" in frame  # NOT_LEADER, FENCED_LEADER_EPOCH


def _only_versions_we_decode(resp: Any) -> None:
    """The broker's ApiVersions answer, cut to the APIs and versions our codec decodes: a
    client that speaks newer versions (the Java client 4.4: Metadata v13, OffsetCommit v10)
    then picks ones the proxy can read and rewrite, as it would against an older broker."""
    kept = []
    for entry in resp.api_keys or ():
        cls = REQUESTS_BY_KEY.get(entry.api_key)
        if cls is None or entry.min_version > _max_decoded(cls):
            continue
        entry.max_version = min(entry.max_version, _max_decoded(cls))
        kept.append(entry)
    resp.api_keys = kept


#: ApiVersions v5+ carry the node id the client means to reach (KIP-1242): the proxy renumbers
#: nodes (the rebootstrap tests' "cluster B"), so it speaks v4 at most, and neither client (Java
#: 4.4, ours) sends the check through it, as through any proxy that renumbers nodes
_PROXY_API_VERSIONS_MAX = 4


def _variants(cls: Any) -> list[Any]:
    """A request class and the variants the codec reads further versions with: transactions
    V2 (Produce v12, EndTxn v5, TxnOffsetCommit v5) and topic ids (Produce v13, TxnOffsetCommit
    v6), so a client behind the proxy speaks what the broker offers."""
    out = [cls]
    for c in (cls, getattr(cls, "TXN_V2", None)):
        if c is not None:
            out += [v for v in (c if c is not cls else None, getattr(c, "BY_ID", None)) if v]
    return out


def _max_decoded(cls: Any) -> int:
    """The newest version of a request class the proxy reads (ApiVersions: v4, see above)."""
    if cls.API_KEY == API.API_VERSIONS:
        return _PROXY_API_VERSIONS_MAX
    return max(v.MAX_VERSION for v in _variants(cls))


def _request_class(key: int, version: int) -> Any:
    """The request class (or variant) whose range has ``version`` of API ``key``."""
    cls = REQUESTS_BY_KEY[key]
    for v in reversed(_variants(cls)):
        if v.MIN_VERSION <= version <= v.MAX_VERSION:
            return v
    return cls


def _api_versions_too_new(corr: bytes) -> bytes:
    """What a broker answers an ApiVersions request newer than it knows (v0, UNSUPPORTED_VERSION,
    its ApiVersions range): the client asks again at a version the proxy decodes."""
    req_cls = REQUESTS_BY_KEY[API.API_VERSIONS]
    resp_cls = req_cls.RESPONSE  # type: ignore[attr-defined]
    resp = resp_cls(
        error_code=35,
        api_keys=[
            resp_cls.ApiVersion(
                api_key=API.API_VERSIONS, min_version=0, max_version=_PROXY_API_VERSIONS_MAX
            )
        ],
    )
    return _encode_response(req_cls, 0, corr, resp)


def _decode_request(req_cls: Any, version: int, frame: bytes) -> Any:
    """Decode a request frame (size prefix included) with the codec's request decoder."""
    pos = 12
    (cid_len,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + max(cid_len, 0)
    if is_flexible(req_cls, version):
        pos += 1  # request header v2: an empty tagged-field section (what clients send)
    obj, _ = req_cls.decoder(version)(frame, pos)
    return obj


def _encode_response(req_cls: Any, version: int, corr: bytes, resp: Any) -> bytes:
    resp_cls = req_cls.RESPONSE
    body = bytearray(corr)
    if is_flexible(resp_cls, version) and req_cls.API_KEY != 18:
        body.append(0)  # response header v1: no tagged fields
    resp_cls.encoder(version)(body, resp)
    return len(body).to_bytes(4, "big") + bytes(body)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(4)
    size = int.from_bytes(head, "big", signed=True)
    return head + await reader.readexactly(size)


# -- walking decoded responses ---------------------------------------------------------------
_TOPIC_FIELDS = ("name", "topic")
#: topic id -> name, from every Metadata answer a proxy passed on (ids are unique clusterwide)
_TOPIC_NAMES: dict[Any, str] = {}
_PARTITION_FIELDS = ("partition_index", "partition", "index")
#: a partition's error code is ``partition_error_code`` in AddPartitionsToTxn answers
_ERROR_FIELDS = ("error_code", "partition_error_code")


def _error_field(node: Any) -> str | None:
    return next((f for f in _ERROR_FIELDS if f in node._field_names), None)


def _walk(node: Any, topic: str | None, partition: int | None) -> Any:
    """Yield (struct, topic, partition) for every struct in the response tree."""
    fields = getattr(node, "_field_names", None)
    if fields is None:
        return
    for f in _TOPIC_FIELDS:
        if f in fields and isinstance(getattr(node, f), str) and getattr(node, f):
            topic = getattr(node, f)
            break
    else:
        if "topic_id" in fields and node.topic_id in _TOPIC_NAMES:
            topic = _TOPIC_NAMES[node.topic_id]
    for f in _PARTITION_FIELDS:
        if f in fields and isinstance(getattr(node, f), int):
            partition = getattr(node, f)
            break
    yield node, topic, partition
    for f in fields:
        value = getattr(node, f)
        if isinstance(value, list):
            for item in value:
                yield from _walk(item, topic, partition)
        elif hasattr(value, "_field_names"):
            yield from _walk(value, topic, partition)


def _targets(resp: Any, topic: str | None, partition: int | None) -> list[Any]:
    """Structs with an error_code that the filter selects: with neither filter the response's
    top-level error code (else every nested one), else the matching partition entries."""
    if topic is None and partition is None:
        if "error_code" in resp._field_names:
            # FindCoordinator v4+ answers per key: its coordinators carry the error code
            return [resp, *(getattr(resp, "coordinators", None) or ())]
        return [n for n, _, _ in _walk(resp, None, None) if _error_field(n)]
    return [
        node
        for node, t, p in _walk(resp, None, None)
        if node is not resp
        and _error_field(node)
        and p is not None
        and (topic is None or t == topic)
        and (partition is None or p == partition)
    ]


def _matches(rule: Rule, resp: Any) -> bool:
    if rule.when is not None and not rule.when(resp):
        return False
    if rule.topic is None and rule.partition is None:
        return True
    return bool(_targets(resp, rule.topic, rule.partition))


def _set_errors(resp: Any, code: int, topic: str | None, partition: int | None) -> None:
    for node in _targets(resp, topic, partition):
        setattr(node, _error_field(node) or "error_code", code)
        if "records" in node._field_names:  # an erroring fetch partition carries no data
            node.records = b""
        if "high_watermark" in node._field_names:
            node.high_watermark = -1


def _corrupt(resp: Any, topic: str | None, partition: int | None) -> None:
    for node, t, p in _walk(resp, None, None):
        if "records" not in node._field_names or not node.records:
            continue
        if (topic is None or t == topic) and (partition is None or p == partition):
            data = bytearray(node.records)
            data[-1] ^= 0xFF  # inside the last record: the batch CRC no longer matches
            node.records = bytes(data)


def any_error(code: int) -> Callable[[Any], bool]:
    """A ``when`` predicate: the response carries ``code`` somewhere."""

    def check(resp: Any) -> bool:
        return any(
            getattr(node, "error_code", None) == code for node, _, _ in _walk(resp, None, None)
        )

    return check
