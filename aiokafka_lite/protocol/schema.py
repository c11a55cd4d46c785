"""Declarative, versioned message schemas and the interpreter that encodes and decodes them.

A message is declared once as a tree of :class:`F` (field) and :class:`S` (struct) objects that
carry the version ranges from Kafka's JSON definitions. :func:`build_class` turns a declaration
into a slotted Python class holding *every* field of *every* version, so code above the codec
never needs to know which wire version was spoken: absent fields keep their defaults.

Encoders and decoders are compiled lazily, once per (class, version), into flat lists of
``(attribute, reader/writer)`` steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import KafkaProtocolError
from .types import (
    PRIMITIVES,
    ZERO_UUID,
    Reader,
    Writer,
    make_bytes,
    make_string,
    read_int32,
    read_length,
    read_uvarint,
    write_uvarint,
)

__all__ = ["F", "S", "ApiSpec", "DataSpec", "Struct", "build_class", "parse_versions"]

VersionRange = tuple[int, int] | None
_MISSING: Any = object()
_INF = 1 << 30


def parse_versions(text: str | None) -> VersionRange:
    """Parse ``"3+"``, ``"1-4"``, ``"2"`` or ``"none"`` into an inclusive ``(lo, hi)`` range."""
    if text is None or text == "none" or text == "":
        return None
    if text.endswith("+"):
        return int(text[:-1]), _INF
    if "-" in text:
        lo, hi = text.split("-")
        return int(lo), int(hi)
    return int(text), int(text)


def _within(rng: VersionRange, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


class F:
    """One field declaration."""

    __slots__ = ("name", "type", "versions", "nullable", "tag", "tagged", "default", "struct")

    def __init__(
        self,
        name: str,
        type: str,
        versions: str,
        *,
        nullable: str | None = None,
        tag: int | None = None,
        tagged: str | None = None,
        default: str | None = None,
        struct: S | None = None,
    ) -> None:
        self.name = name
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.tag = tag
        self.tagged = parse_versions(tagged)
        self.default = default
        self.struct = struct


class S:
    """A struct declaration: a name and its fields."""

    __slots__ = ("name", "fields")

    def __init__(self, name: str, fields: list[F]) -> None:
        self.name = name
        self.fields = fields


class ApiSpec:
    """An API's request and response declarations with their version ranges."""

    __slots__ = ("api_key", "name", "valid", "flexible", "unstable_latest", "request", "response")

    def __init__(
        self,
        api_key: int,
        name: str,
        valid: str,
        flexible: str,
        *,
        unstable_latest: bool,
        request: S,
        response: S,
    ) -> None:
        self.api_key = api_key
        self.name = name
        rng = parse_versions(valid)
        assert rng is not None
        self.valid = rng
        self.flexible = parse_versions(flexible)
        self.unstable_latest = unstable_latest
        self.request = request
        self.response = response


class DataSpec:
    """A versioned standalone structure (e.g. consumer protocol member metadata)."""

    __slots__ = ("name", "valid", "flexible", "struct")

    def __init__(self, name: str, valid: str, flexible: str, struct: S) -> None:
        self.name = name
        rng = parse_versions(valid)
        assert rng is not None
        self.valid = rng
        self.flexible = parse_versions(flexible)
        self.struct = struct


class Struct:
    """Base of every generated message and nested struct class.

    Construct with keyword arguments; unspecified fields take their defaults. Instances compare
    equal when all fields are equal.
    """

    __slots__ = ()
    _field_names: ClassVar[tuple[str, ...]] = ()
    _decl: ClassVar[S]
    _flexible: ClassVar[VersionRange] = None
    _defaults: ClassVar[tuple[tuple[str, Any, Callable[[], Any] | None], ...]] = ()
    _encoders: ClassVar[dict[int, Callable[[bytearray, Any], None]]]
    _decoders: ClassVar[dict[int, Callable[[bytes, int], tuple[Any, int]]]]

    def __init__(self, **kwargs: Any) -> None:
        for name, value, factory in self._defaults:
            if name in kwargs:
                object.__setattr__(self, name, kwargs.pop(name))
            else:
                object.__setattr__(self, name, factory() if factory is not None else value)
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(kwargs)}")

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._field_names)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._field_names)

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a dict (nested structs converted too)."""

        def conv(v: Any) -> Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {n: conv(getattr(self, n)) for n in self._field_names}

    @classmethod
    def encoder(cls, version: int) -> Callable[[bytearray, Any], None]:
        """Return the compiled encoder for ``version``."""
        enc = cls._encoders.get(version)
        if enc is None:
            enc = cls._encoders[version] = _compile_encoder(cls, version)
        return enc

    @classmethod
    def decoder(cls, version: int) -> Callable[[bytes, int], tuple[Any, int]]:
        """Return the compiled decoder for ``version``."""
        dec = cls._decoders.get(version)
        if dec is None:
            dec = cls._decoders[version] = _compile_decoder(cls, version)
        return dec


# ------------------------------------------------------------------ class building


def _default_for(f: F, nested: type[Struct] | None) -> tuple[Any, Callable[[], Any] | None]:
    t = f.type
    d = f.default
    if t.startswith("[]"):
        if d == "null":
            return None, None
        return None, list
    if nested is not None:
        if d == "null":
            return None, None
        return None, nested
    if d == "null":
        return None, None
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return (int(d, 0) if d not in (None, "") else 0), None
    if t == "float64":
        return (float(d) if d else 0.0), None
    if t == "bool":
        return (d == "true"), None
    if t == "uuid":
        return ZERO_UUID, None
    if t == "string":
        return (d or ""), None
    if t in ("bytes", "records"):
        if t == "records" or f.nullable is not None:
            return None, None
        return b"", None
    raise ValueError(f"unknown type {t!r} for field {f.name}")


def build_class(
    decl: S, flexible: VersionRange, registry: dict[str, type[Struct]], prefix: str = ""
) -> type[Struct]:
    """Create the slotted class for ``decl`` (and, recursively, its nested structs)."""
    namespace: dict[str, Any] = {}
    defaults = []
    for f in decl.fields:
        nested = None
        if f.struct is not None:
            nested = build_class(f.struct, flexible, registry, prefix)
            namespace.setdefault(f.struct.name, nested)
        value, factory = _default_for(f, nested)
        defaults.append((f.name, value, factory))
    namespace["__slots__"] = tuple(f.name for f in decl.fields)
    namespace["_field_names"] = tuple(f.name for f in decl.fields)
    namespace["_decl"] = decl
    namespace["_flexible"] = flexible
    namespace["_defaults"] = tuple(defaults)
    namespace["_encoders"] = {}
    namespace["_decoders"] = {}
    namespace["__doc__"] = f"Kafka ``{decl.name}`` structure (all fields of all versions)."
    cls = type(decl.name, (Struct,), namespace)
    registry.setdefault(decl.name, cls)
    return cls


def _nested_class(cls: type[Struct], f: F) -> type[Struct]:
    assert f.struct is not None
    nested: type[Struct] = getattr(cls, f.struct.name)
    return nested


# ------------------------------------------------------------------ codecs


def _element_codec(
    cls: type[Struct], f: F, base: str, version: int, flexible: bool, nullable: bool
) -> tuple[Reader, Writer, bool]:
    """Reader/writer for one (non-array) value; the bool says whether it takes >= 1 byte."""
    if f.struct is not None:
        nested = _nested_class(cls, f)
        return (
            nested.decoder(version),
            _struct_writer(nested, version),
            bool(_present_fields(nested._decl, version) or flexible),
        )
    if base in PRIMITIVES:
        r, w = PRIMITIVES[base]
        return r, w, True
    if base == "string":
        r, w = make_string(flexible, nullable)
        return r, w, True
    if base == "bytes":
        r, w = make_bytes(flexible, nullable)
        return r, w, True
    if base == "records":
        r, w = make_bytes(flexible, True, view=True)
        return r, w, True
    raise ValueError(f"unknown type {base!r}")


def _struct_writer(nested: type[Struct], version: int) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        if value is None:
            value = nested()
        elif not isinstance(value, nested):
            raise KafkaProtocolError(f"expected {nested.__name__}, got {type(value).__name__}")
        nested.encoder(version)(out, value)

    return write


def _field_codec(cls: type[Struct], f: F, version: int, flexible: bool) -> tuple[Reader, Writer]:
    nullable = _within(f.nullable, version)
    if not f.type.startswith("[]"):
        r, w, _ = _element_codec(cls, f, f.type, version, flexible, nullable)
        if f.struct is not None and nullable:
            return _nullable_struct(r, w)
        return r, w
    er, ew, nonzero = _element_codec(cls, f, f.type[2:], version, flexible, False)
    return _array_codec(er, ew, nonzero, flexible, nullable, f.name)


def _nullable_struct(r: Reader, w: Writer) -> tuple[Reader, Writer]:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise KafkaProtocolError(f"truncated nullable struct marker at byte {pos}")
        if buf[pos] == 0xFF:
            return None, pos + 1
        return r(buf, pos + 1)

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out.append(0xFF)
        else:
            out.append(1)
            w(out, value)

    return read, write


def _array_codec(
    er: Reader, ew: Writer, nonzero: bool, compact: bool, nullable: bool, name: str
) -> tuple[Reader, Writer]:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos, compact, read_int32)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            if n == -1:  # tolerated: some brokers send null for empty arrays
                return [], pos
            raise KafkaProtocolError(f"invalid array length {n} for {name} at byte {pos}")
        if nonzero and n > len(buf) - pos:
            raise KafkaProtocolError(
                f"array {name} claims {n} elements but only {len(buf) - pos} bytes remain"
            )
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            v, pos = er(buf, pos)
            append(v)
        return items, pos

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            if not nullable:
                value = ()
            elif compact:
                out.append(0)
                return
            else:
                out += b"\xff\xff\xff\xff"
                return
        n = len(value)
        if compact:
            write_uvarint(out, n + 1)
        else:
            out += n.to_bytes(4, "big", signed=True)
        for item in value:
            ew(out, item)

    return read, write


def _present_fields(decl: S, version: int) -> list[F]:
    return [
        f for f in decl.fields if _within(f.versions, version) and not _within(f.tagged, version)
    ]


def _tagged_fields(decl: S, version: int) -> list[F]:
    return sorted(
        (f for f in decl.fields if _within(f.tagged, version) and _within(f.versions, version)),
        key=lambda f: f.tag or 0,
    )


def _compile_encoder(cls: type[Struct], version: int) -> Callable[[bytearray, Any], None]:
    flexible = _within(cls._flexible, version)
    steps = [
        (f.name, _field_codec(cls, f, version, flexible)[1])
        for f in _present_fields(cls._decl, version)
    ]
    tagged = []
    if flexible:
        defaults = {name: (value, factory) for name, value, factory in cls._defaults}
        for f in _tagged_fields(cls._decl, version):
            value, factory = defaults[f.name]
            dflt = factory() if factory is not None else value
            tagged.append((f.name, f.tag or 0, dflt, _field_codec(cls, f, version, flexible)[1]))

    if not flexible:

        def encode(out: bytearray, obj: Any) -> None:
            for name, w in steps:
                w(out, getattr(obj, name))

        return encode

    def encode_flexible(out: bytearray, obj: Any) -> None:
        for name, w in steps:
            w(out, getattr(obj, name))
        chunks = []
        for name, tag, dflt, w in tagged:
            v = getattr(obj, name)
            if v != dflt:
                tmp = bytearray()
                w(tmp, v)
                chunks.append((tag, tmp))
        write_uvarint(out, len(chunks))
        for tag, tmp in chunks:
            write_uvarint(out, tag)
            write_uvarint(out, len(tmp))
            out += tmp

    return encode_flexible


def _compile_decoder(cls: type[Struct], version: int) -> Callable[[bytes, int], tuple[Any, int]]:
    flexible = _within(cls._flexible, version)
    present = _present_fields(cls._decl, version)
    steps = [(f.name, _field_codec(cls, f, version, flexible)[0]) for f in present]
    tagged_readers = {}
    if flexible:
        for f in _tagged_fields(cls._decl, version):
            tagged_readers[f.tag] = (f.name, _field_codec(cls, f, version, flexible)[0])
    new = object.__new__
    setter = object.__setattr__
    present_names = {f.name for f in present}
    absent = tuple(d for d in cls._defaults if d[0] not in present_names)

    def decode(buf: bytes, pos: int) -> tuple[Any, int]:
        obj = new(cls)
        for name, value, factory in absent:
            setter(obj, name, factory() if factory is not None else value)
        for name, r in steps:
            value, pos = r(buf, pos)
            setter(obj, name, value)
        if flexible:
            count, pos = read_uvarint(buf, pos)
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise KafkaProtocolError(
                        f"tagged field {tag} of {size} bytes overruns the frame"
                    )
                known = tagged_readers.get(tag)
                if known is not None:
                    value, used = known[1](buf, pos)
                    if used != end:
                        raise KafkaProtocolError(f"tagged field {tag} has {end - used} stray bytes")
                    setter(obj, known[0], value)
                pos = end
        return obj, pos

    return decode
