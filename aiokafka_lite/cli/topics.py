"""``aiokafka-lite topics list|create|delete|describe|alter-config`` (thin callers of the admin client)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from ._common import CliError, add_bootstrap, positive_int, print_table, run

__all__ = ["register"]

_TOPIC_CONFIG_SOURCE = 1  # DescribeConfigs ConfigSource DYNAMIC_TOPIC_CONFIG


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``topics`` command group."""
    p = sub.add_parser("topics", help="list, create, delete and describe topics",
                       description="Topic administration.")  # fmt: skip
    tsub = p.add_subparsers(dest="topics_cmd", metavar="ACTION", required=True)

    q = tsub.add_parser("list", help="list topic names with their partition counts")
    add_bootstrap(q)
    q.add_argument("--internal", action="store_true", help="include internal topics")
    q.set_defaults(func=cmd_list)

    q = tsub.add_parser("create", help="create topics")
    add_bootstrap(q)
    q.add_argument("topics", nargs="+", metavar="TOPIC")
    q.add_argument("-p", "--partitions", type=positive_int, default=1, help="default: %(default)s")
    q.add_argument(
        "-r", "--replication-factor", type=positive_int, default=1, help="default: %(default)s"
    )
    q.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config (repeatable)")  # fmt: skip
    q.add_argument("--if-not-exists", action="store_true", help="no error when a topic exists")
    q.set_defaults(func=cmd_create)

    q = tsub.add_parser("delete", help="delete topics")
    add_bootstrap(q)
    q.add_argument("topics", nargs="+", metavar="TOPIC")
    q.add_argument("--if-exists", action="store_true", help="no error when a topic is missing")
    q.set_defaults(func=cmd_delete)

    q = tsub.add_parser(
        "alter-config",
        help="set or delete topic configs (IncrementalAlterConfigs)",
        description="Change only the named configs of topics; print the resulting values.",
    )
    add_bootstrap(q)
    q.add_argument("topics", nargs="+", metavar="TOPIC")
    q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config (repeatable)")  # fmt: skip
    q.add_argument("--delete", action="append", default=[], metavar="KEY",
                   help="reset a config to its default (repeatable)")  # fmt: skip
    q.add_argument("--validate-only", action="store_true", help="check, change nothing")
    q.set_defaults(func=cmd_alter_config)

    q = tsub.add_parser("describe", help="partitions, leaders, replicas and ISR of topics")
    add_bootstrap(q)
    q.add_argument("topics", nargs="*", metavar="TOPIC", help="default: every topic")
    q.set_defaults(func=cmd_describe)


def _admin(args: argparse.Namespace) -> Any:
    from ..admin import AIOKafkaAdminClient

    return AIOKafkaAdminClient(
        bootstrap_servers=args.bootstrap,
        client_id="aiokafka-lite-cli",
        request_timeout_ms=int(args.timeout * 1000),
    )


def cmd_list(args: argparse.Namespace) -> int:
    """``topics list``."""

    async def main() -> list[dict[str, Any]]:
        async with _admin(args) as admin:
            return await admin.describe_topics(None)  # type: ignore[no-any-return]

    described = run(main(), args.timeout)
    rows = [
        (t["topic"], len(t["partitions"]))
        for t in sorted(described, key=lambda t: t["topic"] or "")
        if t["topic"] and (args.internal or not t["is_internal"])
    ]
    print_table(("TOPIC", "PARTITIONS"), rows)
    return 0


def _configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--config {item!r} is not KEY=VALUE", 2)
        out[key] = value
    return out


def _failure(action: str, topic: str, code: int, message: str | None) -> str:
    from .. import errors as Errors

    err = Errors.for_code(code).__name__
    return f"{action} topic {topic!r}: {err} (error {code})" + (f": {message}" if message else "")


def cmd_create(args: argparse.Namespace) -> int:
    """``topics create``."""
    from .. import errors as Errors
    from ..admin import NewTopic

    configs = _configs(args.config)

    async def main() -> list[str]:
        async with _admin(args) as admin:
            resp = await admin.create_topics(
                [
                    NewTopic(name, args.partitions, args.replication_factor, topic_configs=configs)
                    for name in args.topics
                ]
            )
        created = []
        for topic, code, message in resp.topic_errors:
            if code == Errors.TopicAlreadyExistsError.errno and args.if_not_exists:
                continue
            if code:
                raise CliError(_failure("create", topic, code, message))
            created.append(topic)
        return created

    for name in run(main(), args.timeout):
        print(f"created {name} ({args.partitions} partitions)")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """``topics delete``."""
    from .. import errors as Errors

    async def main() -> list[str]:
        async with _admin(args) as admin:
            resp = await admin.delete_topics(list(args.topics))
        deleted = []
        for topic, code in resp.topic_error_codes:
            if code == Errors.UnknownTopicOrPartitionError.errno and args.if_exists:
                continue
            if code:
                raise CliError(_failure("delete", topic, code, None))
            deleted.append(topic)
        return deleted

    for name in run(main(), args.timeout):
        print(f"deleted {name}")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """``topics describe``."""
    from .. import errors as Errors

    async def main() -> list[dict[str, Any]]:
        async with _admin(args) as admin:
            return await admin.describe_topics(args.topics or None)  # type: ignore[no-any-return]

    described = run(main(), args.timeout)
    rows = []
    for t in sorted(described, key=lambda t: t["topic"] or ""):
        if t["error_code"] == Errors.UnknownTopicOrPartitionError.errno:
            raise CliError(f"topic {t['topic']!r} does not exist")
        if t["error_code"]:
            err = Errors.for_code(t["error_code"])
            raise CliError(f"topic {t['topic']!r}: {err.__name__} (error {t['error_code']})")
        for p in sorted(t["partitions"], key=lambda p: p["partition"]):
            rows.append(
                (
                    t["topic"],
                    p["partition"],
                    p["leader"],
                    ",".join(map(str, p["replicas"])),
                    ",".join(map(str, p["isr"])),
                    Errors.for_code(p["error_code"]).__name__ if p["error_code"] else "",
                )
            )
    print_table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "ERROR"), rows)
    return 0


def cmd_alter_config(args: argparse.Namespace) -> int:
    """``topics alter-config``."""
    from .. import errors as Errors
    from ..admin import ConfigResource, ConfigResourceType

    changes: dict[str, str | None] = dict(_configs(args.set))
    for key in args.delete:
        if key in changes:
            raise CliError(f"config {key!r} is both set and deleted", 2)
        changes[key] = None
    if not changes:
        raise CliError("nothing to change: give --set KEY=VALUE and/or --delete KEY", 2)

    async def main() -> list[tuple[str, str, str | None]]:
        async with _admin(args) as admin:
            resources = [ConfigResource(ConfigResourceType.TOPIC, t, changes) for t in args.topics]
            for resp in await admin.incremental_alter_configs(
                resources, validate_only=args.validate_only
            ):
                for code, message, _type, name in resp.resources:
                    if code:
                        err = Errors.for_code(code).__name__
                        raise CliError(
                            f"topic {name!r}: {err} (error {code})"
                            + (f": {message}" if message else "")
                        )
            query = [
                ConfigResource(ConfigResourceType.TOPIC, t, dict.fromkeys(changes))
                for t in args.topics
            ]
            # A KRaft broker applies a committed change to its own view a moment later, so a
            # describe right after the alter can still show the old value: describe until it
            # shows the change (bounded by the command's --timeout).
            while True:
                rows: list[tuple[str, str, str | None]] = []
                applied = True
                for resp in await admin.describe_configs(query):
                    for _code, _msg, _type, name, entries in resp.resources:
                        for e in entries:
                            rows.append((name, e.config_names, e.config_value))
                            want = changes.get(e.config_names)
                            if want is None:
                                applied &= e.config_source != _TOPIC_CONFIG_SOURCE
                            else:
                                applied &= e.config_value == want
                if applied or args.validate_only:
                    return rows
                await asyncio.sleep(0.05)

    rows = run(main(), args.timeout)
    print_table(("TOPIC", "CONFIG", "VALUE"), sorted(rows, key=lambda r: (r[0], r[1])))
    if args.validate_only:
        print("(validate only: nothing changed)")
    return 0
