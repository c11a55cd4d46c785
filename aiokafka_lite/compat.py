"""``install_as_aiokafka()``: make ``import aiokafka`` resolve to aiokafka_lite.

The drop-in convention of PyMySQL's ``pymysql.install_as_MySQLdb()``: call it once, before a
framework built on aiokafka (FastStream, ...) is imported, and every ``aiokafka`` module path
that applications import resolves to aiokafka_lite's own objects::

    import aiokafka_lite

    aiokafka_lite.install_as_aiokafka()

    from faststream.kafka import KafkaBroker  # runs on aiokafka_lite

Where aiokafka_lite has a module with the same meaning (``errors``, ``structs``, ``consumer``,
``admin.client``, ...) ``aiokafka.X`` IS that module, so ``isinstance`` checks and
``mock.patch("aiokafka.X.Y")`` act on the names aiokafka_lite's code looks up.  aiokafka paths
without such a module (``aiokafka.coordinator.assignors.roundrobin``, ...) are small alias
modules whose attributes are aiokafka_lite's classes; each path is one module object whether
it is reached by ``import``, by attribute access or by ``mock.patch``.  Importing any other ``aiokafka.*`` path raises ImportError naming
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
    "aiokafka.admin.client": "aiokafka_lite.admin.client",
    "aiokafka.admin.config_resource": "aiokafka_lite.admin.config_resource",
    "aiokafka.admin.new_partitions": "aiokafka_lite.admin.new_partitions",
    "aiokafka.admin.new_topic": "aiokafka_lite.admin.new_topic",
    "aiokafka.admin.records_to_delete": "aiokafka_lite.admin.records_to_delete",
    "aiokafka.client": "aiokafka_lite.client",
    "aiokafka.cluster": "aiokafka_lite.cluster",
    "aiokafka.consumer": "aiokafka_lite.consumer",
    "aiokafka.consumer.consumer": "aiokafka_lite.consumer.consumer",
    "aiokafka.consumer.fetcher": "aiokafka_lite.consumer.fetcher",
    "aiokafka.conn": "aiokafka_lite.conn",
    "aiokafka.protocol": "aiokafka_lite.protocol",
    "aiokafka.producer": "aiokafka_lite.producer",
    "aiokafka.producer.producer": "aiokafka_lite.producer.producer",
    "aiokafka.errors": "aiokafka_lite.errors",
    "aiokafka.structs": "aiokafka_lite.structs",
    "aiokafka.helpers": "aiokafka_lite.helpers",
    "aiokafka.partitioner": "aiokafka_lite.producer.partitioner",
}

#: aiokafka's names for objects of a _SAME_MODULE module that has them under another name:
#: install_as_aiokafka() adds each (when missing) to that module, uninstall removes it again
_EXTRA_NAMES: dict[str, dict[str, str]] = {
    "aiokafka.conn": {"AIOKafkaConnection": "aiokafka_lite.conn:BrokerConnection"},
    # the Fetch request class (requests handed to client.send() carry its API_KEY)
    "aiokafka.consumer.fetcher": {"FetchRequest": "aiokafka_lite.protocol.messages:FetchRequest"},
}

_ASSIGNORS = "aiokafka_lite.consumer.assignors"

#: aiokafka module path -> {name: "aiokafka_lite.module:attribute"} for alias modules.  Names
#: whose target does not exist (yet) in aiokafka_lite are left out of the alias module.
_ALIAS_MODULES: dict[str, dict[str, str]] = {
    # read by libraries built on aiokafka: kstreams (BatchBuilder), tracers that patch
    # GroupCoordinator.commit_offsets (ddtrace), type hints naming the subscription state
    "aiokafka.producer.message_accumulator": {
        "BatchBuilder": "aiokafka_lite.producer.user_batch:BatchBuilder"
    },
    "aiokafka.consumer.group_coordinator": {
        "GroupCoordinator": "aiokafka_lite.consumer.group:Coordinator"
    },
    "aiokafka.consumer.subscription_state": {
        "SubscriptionState": "aiokafka_lite.consumer.subscription:SubscriptionState"
    },
    # ddtrace builds one Metadata request (for the cluster id tag) and sends it with
    # client.send(): MetadataRequest, or MetadataRequest_v5 when aiokafka.__version__ (here
    # aiokafka_lite's) is below 0.13; no other protocol class is provided
    "aiokafka.protocol.metadata": {
        "MetadataRequest": "aiokafka_lite.compat:MetadataRequest",
        "MetadataRequest_v5": "aiokafka_lite.compat:MetadataRequest",
    },
    # the module-level imports of aiokafka's own test modules (test_consumer decodes Fetch
    # answers with MemoryRecords, test_producer compares API keys with ProduceResponse_vN,
    # test_transactional_producer reads producer._txn_manager.state): every versioned name
    # is the one generated message class (API_KEY, isinstance), not aiokafka's struct
    "aiokafka.record": {"MemoryRecords": "aiokafka_lite.records.memory:MemoryRecords"},
    "aiokafka.protocol.produce": {
        f"Produce{kind}{suffix}": f"aiokafka_lite.protocol.messages:Produce{kind}"
        for kind in ("Request", "Response")
        for suffix in ("", *(f"_v{v}" for v in range(9)))
    },
    "aiokafka.producer.transaction_manager": {
        "TransactionManager": "aiokafka_lite.producer.transaction:TransactionManager",
        "TransactionState": "aiokafka_lite.producer.transaction:TxnState",
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
        "get_running_loop": "asyncio:get_running_loop",
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


class _ExistingModule(importlib.abc.Loader):
    """Loader that hands the import system a module that is already loaded."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set the aiokafka path's spec: undo it


class _AiokafkaFinder(importlib.abc.MetaPathFinder):
    """Resolves the ``aiokafka.*`` paths install_as_aiokafka() did not list.

    A submodule of a package that IS aiokafka_lite's (``aiokafka.producer.sender`` is
    ``aiokafka_lite.producer.sender``, as attribute access from ``aiokafka.producer`` already
    gives) is that module, so import and attribute access agree.  Every other path is refused,
    so no module of the real aiokafka (or a second copy of one of ours) is ever loaded beside
    the aliases."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "aiokafka" or fullname.startswith("aiokafka."):
            parent_name, _, child = fullname.rpartition(".")
            parent = sys.modules.get(parent_name)
            ours = getattr(parent, "__name__", "")
            if parent is not None and (
                ours == "aiokafka_lite" or ours.startswith("aiokafka_lite.")
            ):
                module: types.ModuleType | None
                try:
                    module = importlib.import_module(f"{ours}.{child}")
                except ImportError:
                    module = None
                same = module is not None and getattr(parent, child, None) is module
                if same and module is not None:
                    return importlib.machinery.ModuleSpec(fullname, _ExistingModule(module))
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: aiokafka_lite is installed as aiokafka "
                f"(install_as_aiokafka) and does not provide this module",
                name=fullname,
            )
        return None


_finder = _AiokafkaFinder()


#: (module, attribute) pairs install_as_aiokafka() set on aiokafka_lite's own modules
_added: list[tuple[types.ModuleType, str]] = []


def _set_added(module: types.ModuleType, attr: str, value: object) -> None:
    setattr(module, attr, value)
    if (module, attr) not in _added:
        _added.append((module, attr))


def install_as_aiokafka() -> None:
    """Make ``import aiokafka`` (and its public submodules) resolve to aiokafka_lite.

    Call it before importing anything that imports aiokafka.  Any aiokafka module already
    imported in this process is replaced in ``sys.modules`` (objects created from the real
    aiokafka before the call keep working but are not aiokafka_lite's).  Idempotent.

    Every aiokafka path is ONE module object, whether reached by ``import``, by attribute
    access from its parent (``aiokafka.admin.client``) or by ``mock.patch``: the aiokafka_lite
    module itself where one exists at that path, else the alias module, which is also set as
    the attribute of its parent.
    """
    modules: dict[str, types.ModuleType] = {}
    for name, ours in _SAME_MODULE.items():
        modules[name] = importlib.import_module(ours)
        for attr, target in _EXTRA_NAMES.get(name, {}).items():
            if not hasattr(modules[name], attr):
                _set_added(modules[name], attr, _resolve(target))
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
    # parent.child attribute access (``aiokafka.protocol.metadata``): an alias module becomes
    # its parent's attribute; a same module already is (importing a submodule sets it)
    for name, mod in modules.items():
        parent_name, _, child = name.rpartition(".")
        if not parent_name:
            continue
        parent = modules[parent_name]
        current = getattr(parent, child, None)
        if current is mod:
            continue
        if current is None or getattr(current, "__aiokafka_lite_alias__", False):
            _set_added(parent, child, mod)
        else:  # a table error: the aiokafka path would be two objects
            raise RuntimeError(
                f"install_as_aiokafka: {parent_name}.{child} is {current!r}, not the module "
                f"{name} resolves to"
            )
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall_as_aiokafka() -> None:
    """Undo :func:`install_as_aiokafka`: drop the ``aiokafka`` entries from ``sys.modules`` and
    the names it added to aiokafka_lite's modules."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n in sys.modules if n == "aiokafka" or n.startswith("aiokafka.")]:
        del sys.modules[name]
    while _added:
        module, attr = _added.pop()
        if hasattr(module, attr):
            delattr(module, attr)
