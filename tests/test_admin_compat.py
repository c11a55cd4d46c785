"""The admin client's public surface against aiokafka 0.14's (installed as the reference).

Every public method of aiokafka's ``AIOKafkaAdminClient`` must exist here with the same
parameters (names, kinds, defaults) and a result type of the same shape; the argument classes
must exist at the same module paths with the same constructors.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from typing import Any

import pytest

aiokafka_admin = pytest.importorskip("aiokafka.admin")

from aiokafka_lite import admin as lite_admin  # noqa: E402
from aiokafka_lite.admin import Response  # noqa: E402

#: parameters whose default differs on purpose
_OWN_DEFAULTS = {"client_id"}  # this client's name in broker logs, not "aiokafka-<version>"


def _public_methods(cls: type) -> dict[str, Any]:
    return {n: f for n, f in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


def _shape(tp: Any) -> Any:
    """A comparable form of a type hint: class names, with aiokafka's protocol ``Response``
    and this client's response classes (subclasses of its ``Response``) both "Response"."""
    origin = typing.get_origin(tp)
    if origin is not None:
        args = typing.get_args(tp)
        if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
            return ("union", frozenset(_shape(a) for a in args))
        return (getattr(origin, "__name__", str(origin)), tuple(_shape(a) for a in args))
    if tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if isinstance(tp, type):
        if issubclass(tp, Response) or (
            tp.__name__ == "Response" and tp.__module__.startswith("aiokafka.protocol")
        ):
            return "Response"
        return tp.__name__
    return str(tp)


def _hints(fn: Any) -> dict[str, Any]:
    return typing.get_type_hints(fn)


#: constructor arguments aiokafka's admin client lacks (README's differences table): keyword-only
#: with defaults, so no aiokafka call changes meaning
_OWN_EXTRAS = {
    "metadata_recovery_strategy",
    "metadata_recovery_rebootstrap_trigger_ms",
    "enable_metrics_push",  # KIP-714, off by default as in Java's Admin
}


def _params(fn: Any) -> list[tuple[str, Any, Any]]:
    sig = inspect.signature(fn)
    return [
        (p.name, p.kind, None if p.name in _OWN_DEFAULTS else p.default)
        for p in sig.parameters.values()
        if p.name not in _OWN_EXTRAS
    ]


@pytest.mark.parametrize("name", sorted(_public_methods(aiokafka_admin.AIOKafkaAdminClient)))
def test_method_signature_and_result_type(name):
    theirs = getattr(aiokafka_admin.AIOKafkaAdminClient, name)
    ours = getattr(lite_admin.AIOKafkaAdminClient, name, None)
    assert ours is not None, f"AIOKafkaAdminClient.{name} is missing"
    assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(theirs)
    assert _params(ours) == _params(theirs)
    their_return = _hints(theirs).get("return")
    if their_return is not None:
        assert _shape(_hints(ours)["return"]) == _shape(their_return)
    for param, hint in _hints(theirs).items():
        if param != "return":
            assert _shape(_hints(ours)[param]) == _shape(hint), param


def test_constructor_parameters():
    assert _params(lite_admin.AIOKafkaAdminClient.__init__) == _params(
        aiokafka_admin.AIOKafkaAdminClient.__init__
    )
    extras = inspect.signature(lite_admin.AIOKafkaAdminClient.__init__).parameters
    for name in _OWN_EXTRAS:
        assert extras[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert extras[name].default is not inspect.Parameter.empty


@pytest.mark.parametrize(
    "module, name",
    [
        ("new_topic", "NewTopic"),
        ("new_partitions", "NewPartitions"),
        ("records_to_delete", "RecordsToDelete"),
        ("config_resource", "ConfigResource"),
        ("config_resource", "ConfigResourceType"),
        ("client", "AIOKafkaAdminClient"),
    ],
)
def test_names_at_the_same_module_paths(module, name):
    theirs = getattr(importlib.import_module(f"aiokafka.admin.{module}"), name)
    ours = getattr(importlib.import_module(f"aiokafka_lite.admin.{module}"), name)
    if name in aiokafka_admin.__all__:
        assert getattr(lite_admin, name) is ours
    if isinstance(theirs, type) and issubclass(theirs, int):  # the enum
        assert {m.name: m.value for m in ours} == {m.name: m.value for m in theirs}
    else:
        their_params = _params(theirs)
        assert _params(ours)[: len(their_params)] == their_params


def test_every_aiokafka_admin_export_exists():
    missing = [n for n in aiokafka_admin.__all__ if not hasattr(lite_admin, n)]
    assert missing == []
