"""Message classes for every supported Kafka API, built from :mod:`._schemas` at import time.

Naming:

* requests/responses: ``MetadataRequest``, ``MetadataResponse``, ...;
* nested structs are attributes of the message that holds them, e.g.
  ``MetadataRequest.MetadataRequestTopic`` or ``FetchRequest.FetchTopic``; names that are
  unique across all messages are also exported at module level (``MetadataRequestTopic``);
* standalone data: ``ConsumerProtocolSubscription``, ``ConsumerProtocolAssignment``.

Fields are snake_case of the Kafka names. Each request class carries ``API_KEY``,
``MIN_VERSION``/``MAX_VERSION`` (the range this client will speak, a sub-range of
``SPEC_MIN_VERSION``/``SPEC_MAX_VERSION``, the range the codec can encode) and ``RESPONSE``.
"""

from __future__ import annotations

from typing import Any

from . import _schemas
from .schema import ApiSpec, DataSpec, Struct, build_class

__all__ = ["REQUESTS_BY_KEY", "DATA_VERSIONS", "TOPIC_ID_VERSIONS", "TXN_V2_VERSIONS", "Struct"]

#: Client-side version floors/caps where the client needs more than the codec offers.
#: Produce/Fetch from v3/v4: record batch v2 (headers, idempotence) needs them. Fetch v13+
#: address topics by id only: a request naming a topic without a known id is sent at most at
#: v12 (``ops.fetch.max_version``). AddPartitionsToTxn v4+ (batched transactions, VerifyOnly)
#: are for broker-to-broker use only.
#: Produce stops at v11, EndTxn and TxnOffsetCommit at v4: the transaction V1 protocol (a
#: transactional producer adds partitions and groups with AddPartitionsToTxn/AddOffsetsToTxn;
#: Produce v13 and TxnOffsetCommit v6 address topics by id). Their KIP-890 versions are the
#: ``TXN_V2`` classes below.
_CLIENT_RANGE: dict[str, tuple[int | None, int | None]] = {
    "Produce": (3, 11),
    "Fetch": (4, None),
    "AddPartitionsToTxn": (None, 3),
    "EndTxn": (None, 4),
    "TxnOffsetCommit": (None, 4),
}

#: Transactions V2 (KIP-890 part 2, the broker's finalized ``transaction.version`` >= 2): the one
#: version each of these APIs is sent at then. Produce v12 and TxnOffsetCommit v5 add the
#: partition or group to the transaction implicitly; EndTxn v5 bumps the epoch on every commit
#: or abort and answers with it. Each request class ``X`` carries ``X.TXN_V2``, a subclass with
#: the same fields whose version range is exactly this one (None for the other APIs): a broker
#: without it refuses the request (UnsupportedVersionError), never a silent TV1 version.
TXN_V2_VERSIONS: dict[str, int] = {"Produce": 12, "EndTxn": 5, "TxnOffsetCommit": 5}

#: KIP-516 for Produce: v13 names topics by id only. ``ProduceRequest.BY_ID`` is the request
#: class whose range reaches it (the client's floor up to v13; ``TXN_V2.BY_ID``: v12-13), for a
#: request whose every topic has an id; the plain classes stop below it (by name).
TOPIC_ID_VERSIONS: dict[str, int] = {"Produce": 13, "TxnOffsetCommit": 6}
#: the APIs whose by-id version exists under transactions V2 only (TxnOffsetCommit v6, KIP-1319:
#: its V1 class stops at v4, ``TXN_V2.BY_ID`` is v5-6)
_BY_ID_TXN_V2_ONLY = {"TxnOffsetCommit"}

#: api_key -> request class
REQUESTS_BY_KEY: dict[int, type[Struct]] = {}
#: data class name -> (min version, max version)
DATA_VERSIONS: dict[str, tuple[int, int]] = {}

_registry: dict[str, type[Struct]] = {}
_counts: dict[str, int] = {}
_exports: dict[str, Any] = {}


def _collect_names(cls: type[Struct], top: type[Struct] | None = None) -> None:
    """Count nested struct names and make every descendant an attribute of the message."""
    for name, value in list(vars(cls).items()):
        if isinstance(value, type) and issubclass(value, Struct) and name == value.__name__:
            _counts[name] = _counts.get(name, 0) + 1
            _exports.setdefault(name, value)
            if top is not None and not hasattr(top, name):
                setattr(top, name, value)
            _collect_names(value, top or cls)


def _build_api(spec: ApiSpec) -> None:
    req = build_class(spec.request, spec.flexible, _registry)
    resp = build_class(spec.response, spec.flexible, _registry)
    lo, hi = spec.valid
    if spec.unstable_latest:
        hi -= 1
    cmin, cmax = _CLIENT_RANGE.get(spec.name, (None, None))
    req.API_KEY = resp.API_KEY = spec.api_key  # type: ignore[attr-defined]
    req.API_NAME = resp.API_NAME = spec.name  # type: ignore[attr-defined]
    req.SPEC_MIN_VERSION = spec.valid[0]  # type: ignore[attr-defined]
    req.SPEC_MAX_VERSION = spec.valid[1]  # type: ignore[attr-defined]
    req.MIN_VERSION = max(lo, cmin) if cmin is not None else lo  # type: ignore[attr-defined]
    req.MAX_VERSION = min(hi, cmax) if cmax is not None else hi  # type: ignore[attr-defined]
    req.RESPONSE = resp  # type: ignore[attr-defined]
    resp.REQUEST = req  # type: ignore[attr-defined]
    req.TXN_V2 = None  # type: ignore[attr-defined]
    v2 = TXN_V2_VERSIONS.get(spec.name)
    if v2 is not None:
        assert spec.valid[0] <= v2 <= spec.valid[1], spec.name
        variant = type(req.__name__, (req,), _variant_namespace())
        variant.MIN_VERSION = variant.MAX_VERSION = v2  # type: ignore[attr-defined]
        variant.__qualname__ = f"{req.__name__}.TXN_V2"
        req.TXN_V2 = variant  # type: ignore[attr-defined]
    req.BY_ID = None  # type: ignore[attr-defined]
    by_id = TOPIC_ID_VERSIONS.get(spec.name)
    if by_id is not None:
        assert spec.valid[0] <= by_id <= spec.valid[1], spec.name
        bases: list[tuple[Any, str]] = [(req, "BY_ID"), (req.TXN_V2, "TXN_V2.BY_ID")]  # type: ignore[attr-defined]
        for base, label in bases:
            if base is None or (base is req and spec.name in _BY_ID_TXN_V2_ONLY):
                continue
            ids: Any = type(req.__name__, (base,), _variant_namespace())
            ids.MIN_VERSION, ids.MAX_VERSION = base.MIN_VERSION, by_id
            ids.__qualname__ = f"{req.__name__}.{label}"
            ids.BY_ID = None
            base.BY_ID = ids
    REQUESTS_BY_KEY[spec.api_key] = req
    _exports[spec.request.name] = req
    _exports[spec.response.name] = resp
    _collect_names(req)
    _collect_names(resp)


def _variant_namespace() -> dict[str, Any]:
    """A request class variant's own (empty) codec caches: a decoder builds instances of the
    class it was compiled for, so a variant sharing its base's cache made the base decode into
    the variant (or the other way round), whichever decoded a version first."""
    return {"__slots__": (), "_encoders": {}, "_decoders": {}}


def _build_data(spec: DataSpec) -> None:
    cls = build_class(spec.struct, spec.flexible, _registry)
    cls.MIN_VERSION, cls.MAX_VERSION = spec.valid  # type: ignore[attr-defined]
    DATA_VERSIONS[spec.name] = spec.valid
    _exports[spec.name] = cls
    _collect_names(cls)


for _spec in _schemas.APIS:
    _build_api(_spec)
for _dspec in _schemas.DATA:
    _build_data(_dspec)

# Export top-level messages and nested struct names that are unambiguous.
for _name, _cls in _exports.items():
    if (
        _counts.get(_name, 0) <= 1
        or _name.endswith(("Request", "Response"))
        or _name in DATA_VERSIONS
    ):
        globals()[_name] = _cls
        __all__.append(_name)

del _name, _cls, _spec, _dspec


def __getattr__(name: str) -> Any:  # pragma: no cover - only for type checkers' benefit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
