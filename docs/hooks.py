"""MkDocs hook: pages that quote the code's own tables get them from the code at build time.

``<!-- api-versions -->`` in a page becomes the table of the Kafka APIs the client sends, with
the version range its codec speaks (aiokafka_lite.protocol.messages.REQUESTS_BY_KEY), so the
protocol page cannot drift from the code.

``<!-- root-names -->`` becomes the table of ``aiokafka_lite.__all__``: each name linked to the API
page that documents it in its own module; ``ROOT_ONLY_MEMBERS`` (in the ``::: aiokafka_lite``
options) the names no other page documents, rendered on the root page itself.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

MARKER = "<!-- api-versions -->"
ROOT_MARKER = "<!-- root-names -->"
ERRORS_MARKER = "<!-- error-classes -->"
ROOT_MEMBERS = "ROOT_ONLY_MEMBERS"
API_PAGES = Path(__file__).parent / "reference" / "api"


def _documented_elsewhere() -> dict[str, str]:
    """Each public name of the modules the other API pages render: its module there."""
    where: dict[str, str] = {}
    for page in sorted(API_PAGES.glob("*.md")):
        if page.name == "index.md":
            continue
        for module_name in re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), flags=re.MULTILINE):
            module = importlib.import_module(module_name)
            for name in getattr(module, "__all__", ()):
                where.setdefault(name, module_name)
    return where


def _root_names() -> tuple[str, list[str]]:
    """The table of the package's names and the names only the root page documents."""
    import aiokafka_lite

    where = _documented_elsewhere()
    rows = ["| name | documented in |", "|---|---|"]
    root_only: list[str] = []
    for name in aiokafka_lite.__all__:
        module = where.get(name)
        if module is None:
            root_only.append(name)
            rows.append(f"| [`{name}`][aiokafka_lite.{name}] | below |")
        else:
            # a second name of one object (Producer = AIOKafkaProducer) is rendered under the
            # object's own name: link there
            target = getattr(getattr(aiokafka_lite, name), "__name__", name)
            if target not in getattr(importlib.import_module(module), "__all__", ()):
                target = name
            note = f" (as `{target}`)" if target != name else ""
            rows.append(f"| [`{name}`][{module}.{target}] | `{module}`{note} |")
    return "\n".join(rows), root_only


def _api_versions_table() -> str:
    from aiokafka_lite.protocol.messages import REQUESTS_BY_KEY

    rows = ["| key | API | versions the client speaks |", "|---:|---|---|"]
    for key, cls in sorted(REQUESTS_BY_KEY.items()):
        rows.append(f"| {key} | {cls.API_NAME} | {cls.MIN_VERSION}-{cls.MAX_VERSION} |")
    return "\n".join(rows)


def _error_classes_table() -> str:
    """Every KafkaError subclass of aiokafka_lite.errors: its Kafka error code, whether the
    client retries it, the first line of its docstring."""
    import inspect

    from aiokafka_lite import errors

    rows = ["| class | code | retriable | meaning |", "|---|---:|---|---|"]
    for name, cls in vars(errors).items():
        if not (inspect.isclass(cls) and issubclass(cls, errors.KafkaError)):
            continue
        if cls.__name__ != name:  # a second name of a class: listed under its own
            continue
        code = getattr(cls, "errno", -1)
        doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
        retriable = "yes" if getattr(cls, "retriable", False) else ""
        rows.append(f"| `{name}` | {code if code >= 0 else ''} | {retriable} | {doc} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace the markers of generated tables with the tables."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, _api_versions_table())
    if ERRORS_MARKER in markdown:
        markdown = markdown.replace(ERRORS_MARKER, _error_classes_table())
    if ROOT_MARKER in markdown:
        table, root_only = _root_names()
        markdown = markdown.replace(ROOT_MARKER, table)
        markdown = markdown.replace(ROOT_MEMBERS, "[" + ", ".join(root_only) + "]")
    return markdown
