"""``install_as_aiokafka()``: make ``import aiokafka`` resolve to aiokafka_lite.

The drop-in convention of PyMySQL's ``pymysql.install_as_MySQLdb()``: call it once, before a
framework built on aiokafka (FastStream, ...) is imported, and every ``aiokafka`` module path
that applications import resolves to aiokafka_lite's own objects::

    import aiokafka_lite

    aiokafka_lite.install_as_aiokafka()

    from faststream.kafka import KafkaBroker  # runs on aiokafka_lite

Where aiokafka_lite has a module with the same meaning (``errors``, ``structs``, ``consumer``,
...) ``aiokafka.X`` IS that module, so ``isinstance`` checks and ``mock.patch("aiokafka.X.Y")``
act on aiokafka_lite's objects.  aiokafka paths without such a module (``aiokafka.admin.client``,
``aiokafka.coordinator.assignors.roundrobin``, ...) are small alias modules whose attributes are
aiokafka_lite's classes.  Importing any other ``aiokafka.*`` path raises ImportError naming
aiokafka_lite.  Nothing here re-implements behaviour: it only wires names.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

__all__ = ["ALIASES", "install_as_aiokafka", "uninstall_as_aiokafka"]

_T = TypeVar("_T")

#: aiokafka module path -> aiokafka_lite module that IS that module
_SAME_MODULE: dict[str, str] = {
    "aiokafka": "aiokafka_lite",
    "aiokafka.abc": "aiokafka_lite.abc",
    "aiokafka.admin": "aiokafka_lite.admin",
    "aiokafka.client": "aiokafka_lite.client",
    "aiokafka.cluster": "aiokafka_lite.cluster",
    "aiokafka.consumer": "aiokafka_lite.consumer",
    "aiokafka.consumer.consumer": "aiokafka_lite.consumer.consumer",
    "aiokafka.producer": "aiokafka_lite.producer",
    "aiokafka.producer.producer": "aiokafka_lite.producer.producer",
    "aiokafka.errors": "aiokafka_lite.errors",
    "aiokafka.structs": "aiokafka_lite.structs",
    "aiokafka.helpers": "aiokafka_lite.helpers",
    "aiokafka.partitioner": "aiokafka_lite.producer.partitioner",
}

_ASSIGNORS = "aiokafka_lite.consumer.assignors"

#: aiokafka module path -> {name: "aiokafka_lite.module:attribute"} for alias modules.  Names
#: whose target does not exist (yet) in aiokafka_lite are left out of the alias module.
_ALIAS_MODULES: dict[str, dict[str, str]] = {
    "aiokafka.admin.client": {"AIOKafkaAdminClient": "aiokafka_lite.admin:AIOKafkaAdminClient"},
    "aiokafka.admin.new_topic": {"NewTopic": "aiokafka_lite.admin:NewTopic"},
    "aiokafka.admin.new_partitions": {"NewPartitions": "aiokafka_lite.admin:NewPartitions"},
    "aiokafka.admin.records_to_delete": {"RecordsToDelete": "aiokafka_lite.admin:RecordsToDelete"},
    "aiokafka.admin.config_resource": {
        "ConfigResource": "aiokafka_lite.admin:ConfigResource",
        "ConfigResourceType": "aiokafka_lite.admin:ConfigResourceType",
    },
    # read by libraries built on aiokafka: kstreams (BatchBuilder), tracers that patch
    # GroupCoordinator.commit_offsets (ddtrace), type hints naming the connection/fetcher
    "aiokafka.producer.message_accumulator": {
        "BatchBuilder": "aiokafka_lite.producer.batch:BatchBuilder"
    },
    "aiokafka.consumer.group_coordinator": {
        "GroupCoordinator": "aiokafka_lite.consumer.group:Coordinator"
    },
    "aiokafka.consumer.subscription_state": {
        "SubscriptionState": "aiokafka_lite.consumer.subscription:SubscriptionState"
    },
    "aiokafka.consumer.fetcher": {"Fetcher": "aiokafka_lite.consumer.fetcher:Fetcher"},
    "aiokafka.conn": {"AIOKafkaConnection": "aiokafka_lite.conn:BrokerConnection"},
    # ddtrace builds one Metadata request (for the cluster id tag) and sends it with
    # client.send(): MetadataRequest, or MetadataRequest_v5 when aiokafka.__version__ (here
    # aiokafka_lite's) is below 0.13; no other protocol class is provided
    "aiokafka.protocol": {},
    "aiokafka.protocol.metadata": {
        "MetadataRequest": "aiokafka_lite.compat:MetadataRequest",
        "MetadataRequest_v5": "aiokafka_lite.compat:MetadataRequest",
    },
    "aiokafka.coordinator": {},
    "aiokafka.coordinator.protocol": {
        "ConsumerProtocolMemberMetadata": f"{_ASSIGNORS}:ConsumerProtocolMemberMetadata",
        "ConsumerProtocolMemberAssignment": f"{_ASSIGNORS}:ConsumerProtocolMemberAssignment",
    },
    "aiokafka.coordinator.assignors": {},
    "aiokafka.coordinator.assignors.abstract": {
        "AbstractPartitionAssignor": f"{_ASSIGNORS}:AbstractPartitionAssignor"
    },
    "aiokafka.coordinator.assignors.range": {
        "RangePartitionAssignor": f"{_ASSIGNORS}:RangePartitionAssignor"
    },
    "aiokafka.coordinator.assignors.roundrobin": {
        "RoundRobinPartitionAssignor": f"{_ASSIGNORS}:RoundRobinPartitionAssignor"
    },
    "aiokafka.coordinator.assignors.sticky": {
        "StickyPartitionAssignor": f"{_ASSIGNORS}:StickyPartitionAssignor"
    },
    "aiokafka.coordinator.assignors.sticky.sticky_assignor": {
        "StickyPartitionAssignor": f"{_ASSIGNORS}:StickyPartitionAssignor"
    },
    "aiokafka.util": {
        "create_future": "aiokafka_lite.compat:create_future",
        "create_task": "aiokafka_lite.compat:create_task",
        "INTEGER_MAX_VALUE": "aiokafka_lite.compat:INTEGER_MAX_VALUE",
        "INTEGER_MIN_VALUE": "aiokafka_lite.compat:INTEGER_MIN_VALUE",
        "NO_EXTENSIONS": "aiokafka_lite.compat:NO_EXTENSIONS",
    },
}

#: every aiokafka module path install_as_aiokafka() provides
ALIASES: tuple[str, ...] = tuple(sorted({*_SAME_MODULE, *_ALIAS_MODULES}))

# aiokafka.util's public constants and helpers (aiokafka_lite has no such module)
INTEGER_MAX_VALUE = 2**31 - 1
INTEGER_MIN_VALUE = -(2**31)
NO_EXTENSIONS = True


def create_future(loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Future[Any]:
    """A future on ``loop`` (default: the running loop), as ``aiokafka.util.create_future``."""
    return (loop or asyncio.get_running_loop()).create_future()


def create_task(coro: Coroutine[Any, Any, _T], *, name: str | None = None) -> asyncio.Task[_T]:
    """``asyncio.create_task``, as ``aiokafka.util.create_task``."""
    return asyncio.create_task(coro, name=name)


def MetadataRequest(  # noqa: N802 (aiokafka's class name)
    topics: list[str] | None = None, allow_auto_topic_creation: bool | None = None
) -> Any:
    """A Metadata request for ``client.send()`` from aiokafka's ``MetadataRequest(topics,
    allow_auto_topic_creation)`` call (ddtrace's aiokafka integration sends one): aiokafka_lite's
    own request object, built by ``ops.topics.metadata_request``."""
    from .ops.topics import metadata_request

    allow = True if allow_auto_topic_creation is None else allow_auto_topic_creation
    return metadata_request(topics, allow)


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr, None)


def _alias_module(name: str, names: dict[str, str]) -> types.ModuleType:
    mod = types.ModuleType(name, f"aiokafka_lite's stand-in for {name} (install_as_aiokafka)")
    mod.__path__ = []  # a package, so aiokafka.X.Y lookups reach our finder
    mod.__package__ = name
    exported = []
    for attr, target in names.items():
        obj = _resolve(target)
        if obj is not None:
            setattr(mod, attr, obj)
            exported.append(attr)
    setattr(mod, "__all__", exported)  # noqa: B010 (a ModuleType attribute mypy does not know)
    return mod


class _AiokafkaFinder(importlib.abc.MetaPathFinder):
    """Refuses every ``aiokafka.*`` path install_as_aiokafka() did not provide, so no module of
    the real aiokafka (or a second copy of one of ours) is ever loaded beside the aliases."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "aiokafka" or fullname.startswith("aiokafka."):
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: aiokafka_lite is installed as aiokafka "
                f"(install_as_aiokafka) and does not provide this module",
                name=fullname,
            )
        return None


_finder = _AiokafkaFinder()


def install_as_aiokafka() -> None:
    """Make ``import aiokafka`` (and its public submodules) resolve to aiokafka_lite.

    Call it before importing anything that imports aiokafka.  Any aiokafka module already
    imported in this process is replaced in ``sys.modules`` (objects created from the real
    aiokafka before the call keep working but are not aiokafka_lite's).  Idempotent.
    """
    modules: dict[str, types.ModuleType] = {}
    for name, ours in _SAME_MODULE.items():
        modules[name] = importlib.import_module(ours)
    for name, names in _ALIAS_MODULES.items():
        existing = sys.modules.get(name)
        if existing is not None and getattr(existing, "__aiokafka_lite_alias__", False):
            modules[name] = existing
            continue
        mod = _alias_module(name, names)
        mod.__aiokafka_lite_alias__ = True  # type: ignore[attr-defined]
        modules[name] = mod
    for name in [n for n in sys.modules if n == "aiokafka" or n.startswith("aiokafka.")]:
        if name not in modules:
            del sys.modules[name]
    sys.modules.update(modules)
    # parent.child attribute access (``aiokafka.admin.client.X`` after ``import aiokafka``),
    # where the parent has no attribute of that name already
    for name, mod in modules.items():
        parent_name, _, child = name.rpartition(".")
        if parent_name and not hasattr(modules[parent_name], child):
            setattr(modules[parent_name], child, mod)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall_as_aiokafka() -> None:
    """Undo :func:`install_as_aiokafka` (drop the ``aiokafka`` entries from ``sys.modules``)."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n in sys.modules if n == "aiokafka" or n.startswith("aiokafka.")]:
        del sys.modules[name]
