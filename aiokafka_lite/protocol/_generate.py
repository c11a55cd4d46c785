"""Development-time generator: Kafka JSON message definitions -> ``_schemas.py``.

Run from the repository root whenever the set of APIs changes (``make protocol`` does it)::

    python -m aiokafka_lite.protocol._generate ../shared/kafka-protocol/message DIR44

where ``DIR44`` holds ``common/message/*.json`` unpacked from the ``kafka-clients`` 4.4 jar.
The long-lived APIs come from both: the 4.4 definition (newest versions and fields), merged
with the first directory's, whose definitions still carry the old versions that Kafka 3.x and the
embedded brokers speak (4.x definitions dropped them and the fields only they had; :func:`merge`). The Kafka 4
group APIs (:data:`APIS_4X`: KIP-848 consumer groups, KIP-932 share groups) come from the second,
because their early-access versions were replaced before they became generally available; so do
the transaction APIs with KIP-890 versions (:data:`APIS_TXN_V2`).

It reads Apache Kafka's JSON definitions (the authority for fields and versions) and writes
compact Python declarations (``F``/``S``/``ApiSpec``/``DataSpec`` calls) that
:mod:`aiokafka_lite.protocol.schema` turns into message classes at import time. The JSON files
themselves are not shipped; only the facts extracted from them are.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any

#: Request/response pairs the client uses (JSON base names without Request/Response).
APIS = [
    "ListOffsets",
    "OffsetCommit",
    "OffsetFetch",
    "FindCoordinator",
    "JoinGroup",
    "Heartbeat",
    "LeaveGroup",
    "SyncGroup",
    "DescribeGroups",
    "ListGroups",
    "SaslHandshake",
    "ApiVersions",
    "CreateTopics",
    "DeleteTopics",
    "DeleteRecords",
    "InitProducerId",
    "OffsetForLeaderEpoch",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "DescribeConfigs",
    "AlterConfigs",
    "DeleteGroups",
    "SaslAuthenticate",
    "CreatePartitions",
    "IncrementalAlterConfigs",
    "OffsetDelete",
    "DescribeCluster",
    "DescribeProducers",
    # Admin abortTransaction (KIP-664): the transaction markers written at a partition leader
    "WriteTxnMarkers",
    "DescribeTransactions",
    "ListTransactions",
    "DescribeAcls",
    "CreateAcls",
    "DeleteAcls",
    "DescribeLogDirs",
]
#: Kafka 4 group APIs, read from the newer (4.4) definitions.
APIS_4X = [
    # Fetch v13+ (KIP-516 topic ids, KIP-951 leader discovery): the 4.4 definition, v4-18
    "Fetch",
    # Metadata v13: the top-level error code (REBOOTSTRAP_REQUIRED, KIP-1102)
    "Metadata",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
    "ShareGroupHeartbeat",
    "ShareGroupDescribe",
    "ShareFetch",
    "ShareAcknowledge",
    "DescribeShareGroupOffsets",
    "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
    # KIP-714 client telemetry
    "GetTelemetrySubscriptions",
    "PushTelemetry",
]
#: Transaction APIs read from the 4.4 definitions too: their KIP-890 versions (Produce v12,
#: TxnOffsetCommit v5: the partition or group joins the transaction implicitly; EndTxn v5
#: answers with the bumped epoch) are newer than ../shared's, and only Produce dropped old
#: versions there (v0-2, below the client's floor v3 anyway).
APIS_TXN_V2 = ["Produce", "EndTxn", "TxnOffsetCommit"]
#: Standalone data structures (no API key), e.g. the consumer protocol's member metadata.
DATA = ["ConsumerProtocolSubscription", "ConsumerProtocolAssignment"]


def _merge_fields(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``new``'s fields (the 4.4 definition), with the fields only ``old`` has put back.

    Kafka 4.0 dropped old versions from its definitions (KIP-896) and with them the fields only
    those versions had (OffsetCommit v1's ``CommitTimestamp``, ListOffsets v0's
    ``MaxNumOffsets``). Such a field goes back after the field that precedes it in ``old``; a
    field both have takes ``new``'s declaration, its nested fields merged the same way.
    """
    olds = {f["name"]: f for f in old}
    out: list[dict[str, Any]] = []
    for f in new:
        if "fields" in f and f["name"] in olds and "fields" in olds[f["name"]]:
            f = {**f, "fields": _merge_fields(olds[f["name"]]["fields"], f["fields"])}
        out.append(f)
    names = [f["name"] for f in out]
    prev: str | None = None
    for f in old:
        if f["name"] not in names:
            at = names.index(prev) + 1 if prev is not None else 0
            out.insert(at, f)
            names.insert(at, f["name"])
        prev = f["name"]
    return out


def _floor(valid: str) -> int:
    return int(valid.split("-")[0].rstrip("+"))


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """One definition from the long-lived (``old``) and 4.4 (``new``) ones of a message: the
    4.4 fields and newest version, down to the old definition's oldest version."""
    lo = min(_floor(old["validVersions"]), _floor(new["validVersions"]))
    hi = new["validVersions"].split("-")[-1]
    valid = str(lo) if hi == str(lo) else f"{lo}-{hi}"
    common_old = {c["name"]: c for c in old.get("commonStructs", [])}
    commons = []
    for c in new.get("commonStructs", []):
        if c["name"] in common_old:
            c = {**c, "fields": _merge_fields(common_old[c["name"]]["fields"], c["fields"])}
        commons.append(c)
    names = {c["name"] for c in commons}
    commons += [c for c in old.get("commonStructs", []) if c["name"] not in names]
    return {
        **new,
        "validVersions": valid,
        "fields": _merge_fields(old.get("fields", []), new.get("fields", [])),
        "commonStructs": commons,
    }


def snake(name: str) -> str:
    """CamelCase -> snake_case (``ThrottleTimeMs`` -> ``throttle_time_ms``)."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    return s + "_" if keyword.iskeyword(s) else s


def load(path: Path) -> dict[str, Any]:
    text = re.sub(r"//.*", "", path.read_text())
    return json.loads(text)  # type: ignore[no-any-return]


class Emitter:
    def __init__(self, spec_dir: Path, spec_dir_4x: Path | None = None) -> None:
        self.spec_dir = spec_dir
        self.spec_dir_4x = spec_dir_4x
        self.lines: list[str] = []

    def struct(
        self, name: str, fields: list[dict[str, Any]], common: dict[str, Any], ind: int
    ) -> str:
        pad = " " * ind
        parts = [f'S("{name}", [']
        for f in fields:
            parts.append(pad + "    " + self.field(f, common, ind + 4) + ",")
        parts.append(pad + "])")
        return "\n".join(parts)

    def field(self, f: dict[str, Any], common: dict[str, Any], ind: int) -> str:
        ftype: str = f["type"]
        base = ftype[2:] if ftype.startswith("[]") else ftype
        args = [repr(snake(f["name"])), repr(ftype), repr(f.get("versions", "0+"))]
        kw = []
        if f.get("nullableVersions"):
            kw.append(f"nullable={f['nullableVersions']!r}")
        if "tag" in f:
            kw.append(f"tag={f['tag']!r}, tagged={f['taggedVersions']!r}")
        if "default" in f:
            kw.append(f"default={str(f['default'])!r}")
        if "fields" in f:
            kw.append("struct=" + self.struct(base, f["fields"], common, ind))
        elif base in common:
            kw.append("struct=" + self.struct(base, common[base]["fields"], common, ind))
        return "F(" + ", ".join(args + kw) + ")"

    def message(self, d: dict[str, Any], ind: int) -> str:
        common = {c["name"]: c for c in d.get("commonStructs", [])}
        return self.struct(d["name"], d.get("fields", []), common, ind)

    def run(self) -> str:
        out = [
            "# Generated by aiokafka_lite/protocol/_generate.py from Apache Kafka's JSON message",
            "# definitions. Do not edit by hand; regenerate instead.",
            "# fmt: off",
            "# ruff: noqa: E501",
            "from .schema import ApiSpec, DataSpec, F, S",
            "",
            "APIS = [",
        ]
        apis = [(api, self.spec_dir) for api in APIS]
        if self.spec_dir_4x is not None:
            apis += [(api, self.spec_dir_4x) for api in APIS_4X + APIS_TXN_V2]
        else:
            apis += [(api, self.spec_dir) for api in APIS_TXN_V2]
        for api, src in apis:
            req = load(src / f"{api}Request.json")
            resp = load(src / f"{api}Response.json")
            if src is self.spec_dir and self.spec_dir_4x is not None:
                # the long-lived APIs: their 4.4 versions and fields, down to the oldest version
                req = merge(req, load(self.spec_dir_4x / f"{api}Request.json"))
                resp = merge(resp, load(self.spec_dir_4x / f"{api}Response.json"))
            assert req["validVersions"] == resp["validVersions"], api
            unstable = bool(req.get("latestVersionUnstable", False))
            out.append(
                f"    ApiSpec({req['apiKey']}, {api!r}, {req['validVersions']!r}, "
                f"{req['flexibleVersions']!r}, unstable_latest={unstable!r},"
            )
            out.append("        request=" + self.message(req, 8) + ",")
            out.append("        response=" + self.message(resp, 8) + ",")
            out.append("    ),")
        out.append("]")
        out.append("")
        out.append("DATA = [")
        for name in DATA:
            d = load(self.spec_dir / f"{name}.json")
            out.append(
                f"    DataSpec({name!r}, {d['validVersions']!r}, {d['flexibleVersions']!r}, "
                + self.message(d, 4)
                + "),"
            )
        out.append("]")
        return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    spec_dir = Path(argv[0] if argv else "../shared/kafka-protocol/message")
    spec_dir_4x = Path(argv[1]) if len(argv) > 1 else None
    target = Path(__file__).with_name("_schemas.py")
    target.write_text(Emitter(spec_dir, spec_dir_4x).run())
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1:])
