"""``install_as_aiokafka()``: every public aiokafka 0.14 module path resolves to aiokafka_lite.

Each check runs in a fresh interpreter (the install replaces ``sys.modules`` entries, and the
rest of the suite keeps the real aiokafka as a reference client).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

import aiokafka_lite
from aiokafka_lite.compat import ALIASES

aiokafka = pytest.importorskip("aiokafka")

ROOT = Path(__file__).parent.parent.parent


def _run(code: str) -> Any:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _public_names(module_name: str) -> set[str]:
    """What the REAL aiokafka module offers an application (its __all__, else its own names)."""
    mod = importlib.import_module(module_name)
    names = getattr(mod, "__all__", None)
    if names is not None:
        return set(names)
    return {
        k
        for k, v in vars(mod).items()
        if not k.startswith("_") and getattr(v, "__module__", None) == module_name
    }


#: names aiokafka's modules define that are implementation details of aiokafka, not API
NOT_API = {
    "aiokafka.client": {"ConnectionGroup", "CoordinationType"},
    "aiokafka.structs": {"KT", "VT"},
    "aiokafka.util": {
        "T",
        "wait_for",
        "parse_kafka_version",
        "commit_structure_validate",
    },
    "aiokafka.coordinator.protocol": {"ConsumerProtocol"},
    # the sticky assignor's internal helpers (the assignor class itself is provided)
    "aiokafka.coordinator.assignors.sticky.sticky_assignor": {
        "ConsumerGenerationPair",
        "ConsumerSubscription",
        "StickyAssignmentExecutor",
        "StickyAssignorMemberMetadataV1",
        "StickyAssignorUserDataV1",
        "has_identical_list_elements",
        "partitions_comparator_key",
        "remove_if_present",
        "subscriptions_comparator_key",
    },
    # internals behind the one class each of these paths gives libraries (kstreams'
    # BatchBuilder, ddtrace's GroupCoordinator.commit_offsets, type hints): not API
    "aiokafka.conn": {"create_conn"},
    "aiokafka.consumer.fetcher": {
        "FetchError",
        "FetchResult",
        "OffsetResetStrategy",
        "PartitionRecords",
    },
    "aiokafka.consumer.group_coordinator": {
        "BaseCoordinator",
        "CoordinatorGroupRebalance",
        "NoGroupCoordinator",
    },
    "aiokafka.consumer.subscription_state": {
        "Assignment",
        "ManualSubscription",
        "PartitionStatus",
        "Subscription",
        "SubscriptionType",
        "TopicPartitionState",
    },
    "aiokafka.producer.message_accumulator": {"MessageAccumulator", "MessageBatch"},
    # the state enum and the manager are provided (aiokafka's own tests read the state)
    "aiokafka.producer.transaction_manager": {
        "PidAndEpoch",
        "SubscriptionType",
        "TransactionResult",
    },
    # only MetadataRequest (ddtrace sends one); aiokafka's per-version structs are its codec
    "aiokafka.protocol.metadata": {
        *(f"MetadataRequest_v{v}" for v in range(5)),
        *(f"MetadataResponse_v{v}" for v in range(6)),
    },
    # names the admin client does not provide yet (its own issue): listed, not hidden
    "aiokafka.admin": {"NewPartitions", "RecordsToDelete"},
    "aiokafka.admin.new_partitions": {"NewPartitions"},
    "aiokafka.admin.records_to_delete": {"RecordsToDelete"},
    "aiokafka.admin.config_resource": {"ConfigResource", "ConfigResourceType"},
}


def test_every_public_name_of_every_path_is_provided() -> None:
    wanted = {}
    for path in ALIASES:
        try:
            names = _public_names(path)
        except ImportError:
            continue
        wanted[path] = sorted(names - NOT_API.get(path, set()))
    missing = _run(
        f"""
        import importlib, json, aiokafka_lite
        aiokafka_lite.install_as_aiokafka()
        wanted = {wanted!r}
        missing = {{}}
        for path, names in wanted.items():
            mod = importlib.import_module(path)
            lack = [n for n in names if not hasattr(mod, n)]
            if lack:
                missing[path] = lack
        print(json.dumps(missing))
        """
    )
    assert missing == {}


def test_same_module_objects_and_errors() -> None:
    out = _run(
        """
        import json, sys
        import aiokafka_lite
        aiokafka_lite.install_as_aiokafka()
        import aiokafka, aiokafka.errors, aiokafka.structs, aiokafka.consumer, aiokafka.admin
        from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from aiokafka.partitioner import DefaultPartitioner, murmur2
        from aiokafka.producer.producer import _missing
        from unittest import mock
        import aiokafka_lite.producer.producer as pp
        out = {
            "top": aiokafka is aiokafka_lite,
            "errors": aiokafka.errors is aiokafka_lite.errors,
            "structs": aiokafka.structs is aiokafka_lite.structs,
            "consumer": aiokafka.consumer is aiokafka_lite.consumer,
            "admin_client_attr": aiokafka.admin.client.AIOKafkaAdminClient
                is aiokafka_lite.AIOKafkaAdminClient,
            "assignor": AbstractPartitionAssignor is aiokafka_lite.AbstractPartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor is aiokafka_lite.RoundRobinPartitionAssignor,
            "partitioner": DefaultPartitioner is aiokafka_lite.DefaultPartitioner,
            "missing_sentinel": _missing is pp._missing,
            "client": aiokafka.AIOKafkaClient is aiokafka_lite.KafkaClient,
        }
        with mock.patch("aiokafka.AIOKafkaProducer") as fake:
            out["patched"] = aiokafka_lite.AIOKafkaProducer is fake
        errors = {}
        for path in ("aiokafka.record.memory_records", "aiokafka.record.default_records", "aiokafka.nope"):
            try:
                __import__(path)
            except ImportError as exc:
                errors[path] = [type(exc).__name__, "aiokafka_lite" in str(exc)]
        out["errors_on_unknown"] = errors
        out["real_loaded"] = sorted(
            n for n, m in sys.modules.items()
            if n.split(".")[0] == "aiokafka"
            and "site-packages/aiokafka/" in (getattr(m, "__file__", None) or "")
        )
        print(json.dumps(out))
        """
    )
    unknown = out.pop("errors_on_unknown")
    assert out.pop("real_loaded") == []
    assert all(out.values()), out
    assert unknown == {
        p: ["ModuleNotFoundError", True]
        for p in (
            "aiokafka.record.memory_records",
            "aiokafka.record.default_records",
            "aiokafka.nope",
        )
    }


def test_install_replaces_an_already_imported_aiokafka_and_uninstall_restores() -> None:
    out = _run(
        """
        import json, sys
        import aiokafka as real
        import aiokafka_lite
        from aiokafka_lite.compat import uninstall_as_aiokafka
        aiokafka_lite.install_as_aiokafka()
        aiokafka_lite.install_as_aiokafka()  # idempotent
        import aiokafka
        first = aiokafka is aiokafka_lite and aiokafka is not real
        uninstall_as_aiokafka()
        import aiokafka as again
        print(json.dumps([first, again is not aiokafka_lite, again.__name__]))
        """
    )
    assert out == [True, True, "aiokafka"]


@pytest.mark.parametrize("cls", ["AIOKafkaProducer", "AIOKafkaConsumer"])
def test_unclosed_client_warns_like_aiokafka(cls: str) -> None:
    obj = getattr(aiokafka_lite, cls)(bootstrap_servers="127.0.0.1:1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del obj
        gc.collect()
    msgs = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert any(m.startswith(f"Unclosed {cls}") for m in msgs), msgs


@pytest.mark.parametrize(
    "kwargs",
    [
        {"security_protocol": "FOO"},
        {"security_protocol": "SSL"},
        {"security_protocol": "SASL_SSL"},
        {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"},
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "NOPE",
            "sasl_plain_username": "u",
            "sasl_plain_password": "p",
        },
    ],
)
@pytest.mark.parametrize("cls", ["AIOKafkaProducer", "AIOKafkaConsumer", "AIOKafkaAdminClient"])
async def test_security_arguments_validated_like_aiokafka(cls: str, kwargs: dict[str, Any]) -> None:
    import aiokafka.admin

    theirs = getattr(aiokafka.admin if cls == "AIOKafkaAdminClient" else aiokafka, cls)
    with pytest.raises(ValueError):
        theirs(bootstrap_servers="127.0.0.1:1", **kwargs)
    with pytest.raises(ValueError):
        getattr(aiokafka_lite, cls)(bootstrap_servers="127.0.0.1:1", **kwargs)


def test_every_path_is_one_module_object_by_import_attribute_and_patch() -> None:
    """``import aiokafka.X.Y``, ``aiokafka.X.Y`` (attribute access from the parent),
    ``importlib.import_module`` and ``mock.patch("aiokafka.X.Y.name")`` all reach one module
    object for every path install_as_aiokafka() provides, and a patched name is what each way
    of reaching the module then sees."""
    out = _run(
        """
        import importlib, json, sys
        from unittest import mock
        import aiokafka_lite
        from aiokafka_lite.compat import ALIASES
        aiokafka_lite.install_as_aiokafka()
        import aiokafka

        def by_attribute(path):
            obj = aiokafka
            for part in path.split(".")[1:]:
                obj = getattr(obj, part)
            return obj

        report = {}
        for path in ALIASES:
            exec(f"import {path}")  # the import statement itself, not only importlib
            mod = importlib.import_module(path)
            same = [
                by_attribute(path) is mod,
                sys.modules[path] is mod,
                importlib.import_module(path) is mod,
            ]
            names = [n for n in getattr(mod, "__all__", []) if hasattr(mod, n)]
            name = names[0] if names else "_patched_by_test"
            with mock.patch(f"{path}.{name}", create=not names) as fake:
                ns = {}
                exec(f"from {path} import {name} as seen", ns)
                same += [
                    getattr(mod, name) is fake,
                    getattr(by_attribute(path), name) is fake,
                    getattr(importlib.import_module(path), name) is fake,
                    ns["seen"] is fake,
                ]
            report[path] = same
        print(json.dumps(report))
        """
    )
    assert set(out) == set(ALIASES)
    split = {path: checks for path, checks in out.items() if not all(checks)}
    assert split == {}


def test_patching_the_admin_client_reaches_faststream_code() -> None:
    """FastStream builds its admin client as ``aiokafka.admin.client.AIOKafkaAdminClient(...)``
    (and its tests patch that path): the patch must be what that code calls, as on aiokafka."""
    pytest.importorskip("faststream")
    out = _run(
        """
        import asyncio, json
        from unittest import mock
        import aiokafka_lite
        aiokafka_lite.install_as_aiokafka()
        from faststream.kafka.helpers.admin import AdminService

        async def main():
            with mock.patch("aiokafka.admin.client.AIOKafkaAdminClient") as fake:
                fake.return_value.start = mock.AsyncMock()
                service = AdminService()
                await service.connect(bootstrap_servers="127.0.0.1:1")
                from aiokafka.admin.client import AIOKafkaAdminClient
                return [
                    fake.call_count,
                    fake.call_args.kwargs.get("bootstrap_servers"),
                    service.client is fake.return_value,
                    fake.return_value.start.await_count,
                    AIOKafkaAdminClient is fake,
                ]

        print(json.dumps(asyncio.run(main())))
        """
    )
    assert out == [1, "127.0.0.1:1", True, 1, True]


def test_uninstall_removes_the_names_install_added() -> None:
    out = _run(
        """
        import json
        import aiokafka_lite, aiokafka_lite.conn, aiokafka_lite.protocol
        from aiokafka_lite.compat import uninstall_as_aiokafka
        aiokafka_lite.install_as_aiokafka()
        import aiokafka.protocol.metadata
        first = aiokafka_lite.protocol.metadata is aiokafka.protocol.metadata
        uninstall_as_aiokafka()
        gone = [hasattr(aiokafka_lite.protocol, "metadata"),
                hasattr(aiokafka_lite.conn, "AIOKafkaConnection")]
        aiokafka_lite.install_as_aiokafka()
        import aiokafka.protocol.metadata as again
        print(json.dumps([first, gone, aiokafka_lite.protocol.metadata is again]))
        """
    )
    assert out == [True, [False, False], True]


def test_submodules_of_our_packages_are_one_object_too() -> None:
    """``aiokafka.producer`` IS ``aiokafka_lite.producer``, so ``aiokafka.producer.sender`` by
    attribute is aiokafka_lite's module: importing that path gives the same object (it does not
    raise while the attribute works), and the module keeps its own ``__spec__``."""
    out = _run(
        """
        import importlib, json, sys, types
        import aiokafka_lite
        from aiokafka_lite.compat import ALIASES
        aiokafka_lite.install_as_aiokafka()
        checked = {}
        for path in ALIASES:
            parent = importlib.import_module(path)
            if not parent.__name__.startswith("aiokafka_lite"):
                continue
            for child, mod in list(vars(parent).items()):
                sub = f"{path}.{child}"
                if (
                    not isinstance(mod, types.ModuleType)
                    or mod.__name__ != f"{parent.__name__}.{child}"
                    or sub in ALIASES
                ):
                    continue
                imported = importlib.import_module(sub)
                checked[sub] = [
                    imported is mod,
                    sys.modules[sub] is mod,
                    mod.__spec__.name == mod.__name__,
                ]
        print(json.dumps(checked))
        """
    )
    assert "aiokafka.protocol.types" in out and "aiokafka.producer.sender" in out
    assert {path: c for path, c in out.items() if not all(c)} == {}
