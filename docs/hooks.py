"""MkDocs hook: pages that quote the code's own tables get them from the code at build time.

``<!-- api-versions -->`` in a page becomes the table of the Kafka APIs the client sends, with
the version range its codec speaks (aiokafka_lite.protocol.messages.REQUESTS_BY_KEY), so the
protocol page cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- api-versions -->"


def _api_versions_table() -> str:
    from aiokafka_lite.protocol.messages import REQUESTS_BY_KEY

    rows = ["| key | API | versions the client speaks |", "|---:|---|---|"]
    for key, cls in sorted(REQUESTS_BY_KEY.items()):
        rows.append(f"| {key} | {cls.API_NAME} | {cls.MIN_VERSION}-{cls.MAX_VERSION} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace the markers of generated tables with the tables."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, _api_versions_table())
    return markdown
