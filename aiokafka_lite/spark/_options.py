"""Parse the Spark data source options into plain, picklable settings (no pyspark, no I/O).

Option names follow Spark's built-in Kafka source where they apply (Spark passes them in
lower case; they are matched case-insensitively here too):

* ``kafka.bootstrap.servers`` (or ``bootstrap.servers``): required.
* One of ``subscribe`` (comma list), ``subscribePattern`` (regex, full match) or ``assign``
  (JSON ``{"topic": [0, 1]}``) for reads.
* ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or JSON
  ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest); ``startingTimestamp`` /
  ``endingTimestamp`` (ms since the epoch, for every partition) and
  ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (JSON
  ``{"topic": {"0": ms}}``). As in Spark, a global timestamp wins over the per-partition JSON,
  which wins over the offsets; a starting timestamp no record reaches fails the query unless
  ``startingOffsetsByTimestampStrategy`` is ``latest``; an ending one means the end.
* ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` + ``maxTriggerDelay`` (streaming
  admission), ``minPartitions`` / ``maxRecordsPerPartition`` (task splitting),
  ``includeHeaders``, ``failOnDataLoss``, ``kafkaConsumer.pollTimeoutMs``,
  ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs`` (planning retries);
  ``groupIdPrefix`` is accepted and unused (no consumer group is ever joined);
  ``commitOffsetsToGroup`` (streaming): commit each committed micro-batch's end offsets to this
  consumer group, for lag monitoring only (the checkpoint stays the source of truth).
* ``topic`` for writes (else a ``topic`` column per row).
* ``kafka.<java.config.name>``: passed to the producer/consumer as the keyword argument of the
  same meaning (``kafka.compression.type`` -> ``compression_type``, ``kafka.batch.size`` ->
  ``max_batch_size``, ...). Numbers and ``true``/``false`` are converted. Options that would
  ``kafka.ssl.cafile`` / ``certfile`` / ``keyfile`` / ``password`` (PEM files, read where the
  client is created) make the TLS context. ``kafka.sasl.jaas.config`` of Kafka's
  ``PlainLoginModule`` / ``ScramLoginModule`` gives the SASL user and password; of
  ``OAuthBearerLoginModule`` the client credentials (``clientId``, ``clientSecret``, ``scope``,
  ``extension_<name>``) that, with ``kafka.sasl.oauthbearer.token.endpoint.url``, make an
  ``OIDCTokenProvider`` where the client is created. Java login callback handler classes are
  refused (Kafka's own OAuthBearerLoginCallbackHandler is accepted): a Python
  ``kafka.sasl.oauth.token.provider=module:callable`` returning a token provider replaces them.
  Java key and
  trust stores (``kafka.ssl.keystore.*``, ``kafka.ssl.truststore.*``) and Kerberos
  (``kafka.sasl.kerberos.*``) are refused. Options that would break the data source's own offset handling
  (``auto.offset.reset``, ``enable.auto.commit``, (de)serializers, interceptors) are refused,
  as Spark does; ``kafka.group.id`` is accepted and unused (the data source never joins a
  group, so the name has nothing to do; see ``commitOffsetsToGroup``).

An option name nobody knows is not an error (Spark ignores it too) but gets a warning naming the
closest known option (:func:`option_warnings`; ``kafka.*`` names are checked against the
clients' settings in :func:`aiokafka_lite.spark._offsets.check_client_options`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.errors import IllegalArgumentError

__all__ = [
    "EARLIEST",
    "LATEST",
    "KafkaOptions",
    "OffsetSpec",
    "KNOWN_OPTIONS",
    "closest",
    "option_warnings",
    "parse_options",
    "parse_offsets_json",
    "parse_time_ms",
]

#: Special offsets in offset JSON, as in Spark and in Kafka's ListOffsets.
EARLIEST = -2
LATEST = -1

#: ``"earliest"`` / ``"latest"`` / ``{"topic": {partition: offset}}`` / ``("timestamp", ms)`` /
#: ``("timestamps", {"topic": {partition: ms}})``.
OffsetSpec = Any

# Java config name -> keyword argument, where the names differ beyond dots vs underscores.
_RENAMED = {
    "batch.size": "max_batch_size",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    # OAUTHBEARER client credentials (Kafka 4.1+ spells client id/secret and scope as options,
    # older clients in the OAuthBearerLoginModule JAAS line): made into an OIDCTokenProvider
    "sasl.oauthbearer.token.endpoint.url": "sasl_oauth_token_endpoint_url",
    "sasl.oauthbearer.client.credentials.client.id": "sasl_oauth_client_id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl_oauth_client_secret",
    "sasl.oauthbearer.scope": "sasl_oauth_scope",
    # Java's KIP-1082 switch (default false): URL-encode the id and secret in the Basic header
    "sasl.oauthbearer.header.urlencode": "sasl_oauth_header_urlencode",
}
#: Kafka's own OAUTHBEARER login callback handler (client credentials): what
#: ``sasl.oauthbearer.token.endpoint.url`` does here, so naming it changes nothing.
_BUILTIN_OAUTH_HANDLERS = {
    "org.apache.kafka.common.security.oauthbearer.oauthbearerlogincallbackhandler",
    "org.apache.kafka.common.security.oauthbearer.secured.oauthbearerlogincallbackhandler",
}
#: Java classes plugged into the SASL login: they cannot run in Python.
_JAVA_CLASS_OPTIONS = (
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
    "sasl.login.class",
)
# ``module:callable`` (``pkg.mod:make_provider``)
_CALLABLE_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
# Refused as Spark's connector refuses them ("Kafka option '<name>' is not supported<why>"; the
# (de)serializer reasons are Spark's words).
_REFUSED = {
    "auto.offset.reset": ": set the source option startingOffsets (or endingOffsets) instead",
    "enable.auto.commit": ": offsets live in the checkpoint (the source option "
    "commitOffsetsToGroup copies them to a group for monitoring)",
    "key.serializer": " as keys are serialized with ByteArraySerializer.",
    "value.serializer": " as value are serialized with ByteArraySerializer.",
    "key.deserializer": " as keys are deserialized as byte arrays with ByteArrayDeserializer. "
    "Use DataFrame operations to explicitly deserialize the keys.",
    "value.deserializer": " as values are deserialized as byte arrays with ByteArrayDeserializer. "
    "Use DataFrame operations to explicitly deserialize the values.",
    "interceptor.classes": ": interceptors could change records behind the data source's back",
}
# Java-only settings (key/trust stores, Kerberos): refused, a TLS or SASL setup without them
# would fail later with a less helpful error.
_REFUSED_PREFIXES = {
    "ssl.keystore.": "Java key stores are not supported: use kafka.ssl.certfile / keyfile (PEM)",
    "ssl.truststore.": "Java trust stores are not supported: use kafka.ssl.cafile (PEM)",
    "sasl.kerberos.": "Kerberos (GSSAPI) options are not supported by the Spark data source "
    "(the clients themselves support sasl_mechanism='GSSAPI')",
}
# Accepted for compatibility with Spark's source and not used.
_IGNORED = {"group.id"}

#: Every option the data source reads (Spark's spelling), besides ``kafka.*``: Spark's Kafka
#: source and sink options, this data source's ``bootstrap.servers`` alias, and what Spark itself
#: adds to a streaming sink's options (``checkpointLocation``, ``queryName``) or a ``load(path)``.
KNOWN_OPTIONS = (
    "assign",
    "subscribe",
    "subscribePattern",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsets",
    "startingOffsetsByTimestampStrategy",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "endingOffsets",
    "failOnDataLoss",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "groupIdPrefix",
    "commitOffsetsToGroup",
    "includeHeaders",
    "topic",
    "bootstrap.servers",
    "checkpointLocation",
    "queryName",
    "path",
)
_KNOWN_LOWER = {n.lower(): n for n in KNOWN_OPTIONS}
#: Streaming-only options Spark's connector ignores, with a warning, in batch reads.
_STREAM_ONLY = (
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "commitOffsetsToGroup",
)
# ``LoginModule required username="u" password="p";`` (single or double quotes)
_JAAS_MODULE = re.compile(
    r"^\s*[\w.$]+\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S
)
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([^\s;]+))""")


def _convert(value: str) -> Any:
    text = value.strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _client_options(opts: Mapping[str, str]) -> dict[str, Any]:
    """``kafka.*`` options as keyword arguments (bootstrap servers excluded)."""
    out: dict[str, Any] = {}
    for key, raw in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name == "bootstrap.servers" or name in _IGNORED:
            continue
        if name == "sasl.jaas.config":
            for arg, cred in _jaas_credentials(raw).items():
                out.setdefault(arg, cred)
            continue
        if name in _JAVA_CLASS_OPTIONS:
            if raw.strip().lower() in _BUILTIN_OAUTH_HANDLERS:
                continue
            raise IllegalArgumentError(
                f"Kafka option 'kafka.{name}' is not supported: Java classes cannot run here; "
                "set kafka.sasl.oauth.token.provider to a Python 'module:callable' returning an "
                "aiokafka_lite.abc.AbstractTokenProvider (or give the client-credentials options)"
            )
        if name in _REFUSED:
            raise IllegalArgumentError(f"Kafka option '{name}' is not supported{_REFUSED[name]}")
        for prefix, why in _REFUSED_PREFIXES.items():
            if name.startswith(prefix):
                raise IllegalArgumentError(f"Kafka option 'kafka.{name}' is not supported: {why}")
        kwarg = _RENAMED.get(name, name.replace(".", "_"))
        value = _convert(raw)
        if kwarg == "compression_type" and isinstance(value, str) and value.lower() in ("none", ""):
            value = None
        elif kwarg == "acks" and value == "all":
            value = -1
        out[kwarg] = value
    _check_oauth(out)
    return out


def _check_oauth(out: dict[str, Any]) -> None:
    """OAUTHBEARER needs a token source: a ``module:callable`` or a token endpoint with a client
    id and secret."""
    spec = out.get("sasl_oauth_token_provider")
    if spec is not None and not (isinstance(spec, str) and _CALLABLE_SPEC.fullmatch(spec)):
        raise IllegalArgumentError(
            f"kafka.sasl.oauth.token.provider: expected 'module:callable', got {spec!r}"
        )
    url = out.get("sasl_oauth_token_endpoint_url")
    if url is not None and not (
        out.get("sasl_oauth_client_id") and "sasl_oauth_client_secret" in out
    ):
        raise IllegalArgumentError(
            "kafka.sasl.oauthbearer.token.endpoint.url needs a client id and secret: clientId= "
            "and clientSecret= in kafka.sasl.jaas.config (OAuthBearerLoginModule), or "
            "kafka.sasl.oauthbearer.client.credentials.client.id / .client.secret"
        )
    if str(out.get("sasl_mechanism", "")).upper() == "OAUTHBEARER" and spec is None and url is None:
        raise IllegalArgumentError(
            "kafka.sasl.mechanism=OAUTHBEARER needs a token source: "
            "kafka.sasl.oauthbearer.token.endpoint.url with the client credentials, or "
            "kafka.sasl.oauth.token.provider naming a Python 'module:callable'"
        )


def _jaas_credentials(text: str) -> dict[str, Any]:
    """``username`` / ``password`` (PLAIN, SCRAM) or ``clientId`` / ``clientSecret`` / ``scope`` /
    ``extension_<name>`` (OAUTHBEARER) of a one-module JAAS line, as keyword arguments."""
    match = _JAAS_MODULE.match(text)
    if match is None:
        raise IllegalArgumentError(
            'kafka.sasl.jaas.config: expected \'<LoginModule> required username="..." '
            'password="...";\''
        )
    found: dict[str, str] = {}
    for name, dq, sq, bare in _JAAS_OPTION.findall(match.group(2)):
        value = dq or sq or bare
        found[name] = re.sub(r"\\(.)", r"\1", value) if (dq or sq) else value
    out: dict[str, Any] = {}
    if "username" in found:
        out["sasl_plain_username"] = found["username"]
    if "password" in found:
        out["sasl_plain_password"] = found["password"]
    # OAuthBearerLoginModule: client credentials and SASL extensions (``extension_<name>``)
    lower = {k.lower(): v for k, v in found.items()}
    for jaas, arg in (
        ("clientid", "sasl_oauth_client_id"),
        ("clientsecret", "sasl_oauth_client_secret"),
        ("scope", "sasl_oauth_scope"),
    ):
        if jaas in lower:
            out[arg] = lower[jaas]
    ext = {k[len("extension_") :]: v for k, v in found.items() if k.startswith("extension_")}
    if ext:
        out["sasl_oauth_extensions"] = ext
    return out


def parse_offsets_json(text: str, what: str) -> dict[str, dict[int, int]]:
    """Parse ``{"topic": {"0": 23, "1": -2}}`` into ``{"topic": {0: 23, 1: -2}}``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise IllegalArgumentError(f"{what}: not valid JSON: {text!r}") from exc
    if not isinstance(data, dict):
        raise IllegalArgumentError(f"{what}: expected a JSON object of topics, got {text!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise IllegalArgumentError(f"{what}: topic {topic!r} must map partitions to offsets")
        try:
            out[str(topic)] = {int(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError) as exc:
            raise IllegalArgumentError(
                f"{what}: bad partition/offset under {topic!r}: {parts!r}"
            ) from exc
    return out


def _parse_assign(text: str) -> dict[str, list[int]]:
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError
        return {str(t): sorted({int(p) for p in ps}) for t, ps in data.items()}
    except (TypeError, ValueError) as exc:
        raise IllegalArgumentError(
            f'assign: expected JSON like {{"topic": [0, 1]}}, got {text!r}'
        ) from exc


# Spark's spelling of the options read in lower case, for messages.
_DISPLAY = {
    n.lower(): n
    for n in (
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
    )
}


def _offset_spec(
    opts: Mapping[str, str], name: str, by_ts_name: str, ts_name: str, default: str
) -> OffsetSpec:
    """Spark's order: the global timestamp, else per-partition timestamps, else offsets."""
    if ts_name in opts:
        try:
            return ("timestamp", int(opts[ts_name].strip()))
        except ValueError as exc:
            raise IllegalArgumentError(
                f"{_DISPLAY[ts_name]}: expected milliseconds, got {opts[ts_name]!r}"
            ) from exc
    if by_ts_name in opts:
        return ("timestamps", parse_offsets_json(opts[by_ts_name], _DISPLAY[by_ts_name]))
    text = opts.get(name, default).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    return parse_offsets_json(text, _DISPLAY[name])


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    low = raw.strip().lower()
    if low not in ("true", "false"):
        raise IllegalArgumentError(f"{name}: expected true or false, got {raw!r}")
    return low == "true"


def _positive_int(opts: Mapping[str, str], name: str, *, allow_zero: bool = False) -> int | None:
    """The option ``name`` (lower case) as an integer > 0 (>= 0 with ``allow_zero``), or None.

    The message starts as Spark's ("minPartitions must be positive").
    """
    raw = opts.get(name)
    if raw is None:
        return None
    shown = _KNOWN_LOWER.get(name, name)
    what = (
        "must not be negative (an integer >= 0)"
        if allow_zero
        else "must be positive (an integer > 0)"
    )
    try:
        value = int(raw.strip())
    except ValueError as exc:
        raise IllegalArgumentError(f"{shown} {what}, got {raw!r}") from exc
    if value < 0 or (value == 0 and not allow_zero):
        raise IllegalArgumentError(f"{shown} {what}, got {raw!r}")
    return value


# Spark's time units (``Utils.timeStringAsMs``): a number with an optional unit, ms by default.
_TIME_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def parse_time_ms(text: str, name: str) -> int:
    """``"15m"`` / ``"30s"`` / ``"500ms"`` / ``"250"`` (ms) as milliseconds, as Spark reads times."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or (unit and unit not in _TIME_UNITS_MS):
        raise IllegalArgumentError(
            f"{name}: {text!r} is not a time. Time must be specified as seconds (s), "
            "milliseconds (ms), microseconds (us), minutes (m or min), hour (h), or day (d). "
            "E.g. 50s, 100ms, or 250us."
        )
    return int(int(match.group(1)) * _TIME_UNITS_MS[unit or "ms"])


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (case-insensitive), if one is close enough."""
    by_lower = {k.lower(): k for k in known}
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return by_lower[found[0]] if found else None


def option_warnings(raw: Mapping[str, str], *, streaming: bool, read: bool) -> list[str]:
    """Warnings about options that will have no effect: unknown names (with the closest known
    one) and, as Spark's connector warns, streaming-only options on a batch read.

    ``kafka.*`` names are not checked here (see ``check_client_options``).
    """
    out = []
    names = sorted({str(k).lower() for k in raw})
    for name in names:
        if name.startswith("kafka.") or name in _KNOWN_LOWER:
            continue
        hint = closest(name, KNOWN_OPTIONS)
        out.append(
            f"unknown option '{name}' is ignored" + (f": did you mean {hint}?" if hint else "")
        )
    if read and not streaming:
        out.extend(
            f"{shown} option ignored in batch queries"
            for shown in _STREAM_ONLY
            if shown.lower() in names
        )
    return out


@dataclass(frozen=True)
class KafkaOptions:
    """Everything the readers and writers need, as plain data (pickled to the executors)."""

    bootstrap_servers: str
    client: dict[str, Any] = field(default_factory=dict)
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: dict[str, list[int]] | None = None
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    #: ``startingOffsetsByTimestampStrategy``: ``error`` or ``latest``.
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    #: ``minOffsetsPerTrigger``: a micro-batch waits for this many new offsets ...
    min_offsets_per_trigger: int | None = None
    #: ... unless ``maxTriggerDelay`` (ms, default 15 min) passed since the previous batch.
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    #: ``maxRecordsPerPartition``: the most offsets one Spark task reads.
    max_records_per_partition: int | None = None
    #: ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``: attempts at fetching offsets.
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    topic: str | None = None
    #: ``commitOffsetsToGroup``: the consumer group a streaming read copies its committed
    #: micro-batch ends to (monitoring only; None: no group is touched).
    commit_group: str | None = None

    @property
    def read_committed(self) -> bool:
        """True when ``kafka.isolation.level`` is ``read_committed``."""
        return str(self.client.get("isolation_level", "")).lower() == "read_committed"

    def has_source(self) -> bool:
        """True when exactly one of subscribe / subscribePattern / assign was given."""
        return bool(self.subscribe) + (self.pattern is not None) + (self.assign is not None) == 1


def parse_options(
    raw: Mapping[str, str], *, streaming: bool = False, read: bool = True
) -> KafkaOptions:
    """Build :class:`KafkaOptions` from Spark's option map (see the module docstring).

    Refusals are worded as Spark's connector words them, with our option names added.
    """
    opts = {str(k).lower(): str(v) for k, v in raw.items()}
    bootstrap = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
    if not bootstrap:
        client = "consumer" if read else "producer"
        raise IllegalArgumentError(
            f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {client}"
        )
    subscribe = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
    pattern = opts.get("subscribepattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise IllegalArgumentError(
                f"subscribePattern: invalid regex {pattern!r}: {exc}"
            ) from exc
    assign = _parse_assign(opts["assign"]) if "assign" in opts else None
    if streaming:
        for name in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if name in opts:
                what = "timestamp" if name == "endingtimestamp" else "offset"
                raise IllegalArgumentError(
                    f"ending {what} not valid in streaming queries "
                    f"({_DISPLAY[name]} is for batch queries)"
                )
    starting = _offset_spec(
        opts,
        "startingoffsets",
        "startingoffsetsbytimestamp",
        "startingtimestamp",
        "latest" if streaming else "earliest",
    )
    ending = _offset_spec(
        opts, "endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp", "latest"
    )
    if not streaming and starting == "latest":
        raise IllegalArgumentError(
            "starting offset can't be latest for batch queries on Kafka (startingOffsets)"
        )
    if (
        not streaming
        and isinstance(starting, dict)
        and any(o == LATEST for ps in starting.values() for o in ps.values())
    ):
        raise IllegalArgumentError(
            "Starting offset not allowed to be set to latest offsets. "
            "(startingOffsets: -1 in a batch query)"
        )
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise IllegalArgumentError(
            f"startingOffsetsByTimestampStrategy: expected error or latest, got {strategy!r}"
        )
    if ending == "earliest":
        raise IllegalArgumentError(
            "ending offset can't be earliest for batch queries on Kafka (endingOffsets)"
        )
    if isinstance(ending, dict) and any(
        o == EARLIEST for ps in ending.values() for o in ps.values()
    ):
        raise IllegalArgumentError(
            "Ending offset not allowed to be set to earliest offsets. (endingOffsets: -2)"
        )
    poll = _positive_int(opts, "kafkaconsumer.polltimeoutms")
    delay = opts.get("maxtriggerdelay")
    interval = _positive_int(opts, "fetchoffset.retryintervalms", allow_zero=True)
    commit_group = opts.get("commitoffsetstogroup")
    if commit_group is not None and not commit_group.strip():
        raise IllegalArgumentError("commitOffsetsToGroup: expected a consumer group id, got ''")
    return KafkaOptions(
        bootstrap_servers=bootstrap,
        client=_client_options(opts),
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger"),
        min_offsets_per_trigger=_positive_int(opts, "minoffsetspertrigger"),
        max_trigger_delay_ms=(
            15 * 60_000 if delay is None else parse_time_ms(delay, "maxTriggerDelay")
        ),
        min_partitions=_positive_int(opts, "minpartitions"),
        max_records_per_partition=_positive_int(opts, "maxrecordsperpartition"),
        fetch_offset_retries=_positive_int(opts, "fetchoffset.numretries") or 3,
        fetch_offset_retry_interval_ms=10 if interval is None else interval,
        include_headers=_bool(opts, "includeheaders", False),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        poll_timeout_ms=poll or 120_000,
        topic=opts.get("topic"),
        commit_group=commit_group.strip() if commit_group is not None else None,
    )
