"""Every public name has a docstring: the API reference (docs/reference/api/, mkdocstrings) is
generated from them, and a name without one would be a bare signature on the site.

Broker-free. The public modules are the ones the API reference renders (docs/reference/api/*.md
``::: module`` lines); a public module added to the site is checked here by that alone.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

API_PAGES = Path(__file__).resolve().parents[1] / "docs" / "reference" / "api"


def _public_modules() -> list[str]:
    modules: list[str] = []
    for page in sorted(API_PAGES.glob("*.md")):
        modules += re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), flags=re.MULTILINE)
    return modules


MODULES = _public_modules()


def _own_doc(obj: Any) -> str:
    """The object's own docstring; '' for none or the one Python made up (a NamedTuple's or a
    dataclass's ``Name(field, ...)``, a class that only inherits ``object``'s)."""
    doc = obj.__doc__ if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if inspect.isclass(obj) and "__doc__" not in vars(obj):
        return ""
    doc = (doc or "").strip()
    name = getattr(obj, "__name__", "")
    if inspect.isclass(obj) and name and doc.startswith(f"{name}("):
        return ""
    return doc


def _undocumented(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    missing: list[str] = []
    if not (module.__doc__ or "").strip():
        missing.append(module_name)
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # constants and type aliases carry no docstring of their own
        if not _own_doc(obj):
            missing.append(f"{module_name}.{name}")
        if not inspect.isclass(obj) or not obj.__module__.startswith("aiokafka_lite"):
            continue
        for attr, value in vars(obj).items():  # the public methods and properties it defines
            if attr.startswith("_"):
                continue
            func = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            if inspect.isfunction(func) and not (func.__doc__ or "").strip():
                missing.append(f"{module_name}.{name}.{attr}")
    return missing


def test_the_api_reference_renders_the_public_modules() -> None:
    """The pages name the modules a user imports (a page emptied by mistake fails here)."""
    for expected in (
        "aiokafka_lite",
        "aiokafka_lite.producer",
        "aiokafka_lite.consumer",
        "aiokafka_lite.share",
        "aiokafka_lite.admin",
        "aiokafka_lite.errors",
    ):
        assert expected in MODULES


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_name_has_a_docstring(module_name: str) -> None:
    if module_name == "aiokafka_lite.spark":
        pytest.importorskip("pyspark")
    assert _undocumented(module_name) == []


def test_the_check_sees_a_missing_docstring() -> None:
    """The check itself: a class, a function and a method without docstrings are reported."""

    class Bare:
        def method(self) -> None:
            pass

    def bare() -> None:
        pass

    Bare.__module__ = "aiokafka_lite.fake"
    assert _own_doc(Bare) == "" and _own_doc(bare) == ""
    fake = type(importlib)("aiokafka_lite_fake_module", "a module")
    fake.__all__ = ["Bare", "bare"]  # type: ignore[attr-defined]
    fake.Bare = Bare  # type: ignore[attr-defined]
    fake.bare = bare  # type: ignore[attr-defined]
    import sys

    sys.modules["aiokafka_lite_fake_module"] = fake
    try:
        assert _undocumented("aiokafka_lite_fake_module") == [
            "aiokafka_lite_fake_module.Bare",
            "aiokafka_lite_fake_module.Bare.method",
            "aiokafka_lite_fake_module.bare",
        ]
    finally:
        del sys.modules["aiokafka_lite_fake_module"]
