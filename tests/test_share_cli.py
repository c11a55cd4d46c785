"""``aiokafka-lite share consume|list|describe`` on Apache Kafka 4.4 (share groups)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from share_helpers import configure_group, share_groups_supported

from aiokafka_lite.cli import main

pytestmark = pytest.mark.integration


def test_share_consume_release_then_accept_and_describe(broker, capsys, tmp_path):
    if not asyncio.run(share_groups_supported(broker.bootstrap)):
        pytest.skip(f"[{broker.kind}] no share groups (KIP-932): ShareGroupHeartbeat missing")
    b = ["-b", broker.bootstrap]
    topic = f"share-cli-{uuid.uuid4().hex[:8]}"
    group = topic + "-g"
    assert main(["topics", "create", topic, "--partitions", "1", *b]) == 0
    asyncio.run(configure_group(broker.bootstrap, group, share_auto_offset_reset="earliest"))
    src = tmp_path / "jobs.txt"
    src.write_text("job-1\n")
    assert main(["produce", topic, "--file", str(src), *b]) == 0
    capsys.readouterr()

    fmt = ["--format", "{offset} {value} {delivery_count}"]
    assert (
        main(["share", "consume", topic, "-g", group, "-n", "1", "--ack", "release", *fmt, *b]) == 0
    )
    assert capsys.readouterr().out == "0 job-1 1\n"
    # released: delivered again, now accepted
    assert main(["share", "consume", topic, "-g", group, "-n", "1", "--format", "json", *b]) == 0
    line = json.loads(capsys.readouterr().out)
    assert (line["offset"], line["value"], line["delivery_count"]) == (0, "job-1", 2)

    assert main(["share", "list", *b]) == 0
    assert group in capsys.readouterr().out
    assert main(["share", "describe", group, *b]) == 0
    out = capsys.readouterr().out
    assert f"share group {group}: Empty" in out
    assert topic in out
    assert main(["share", "describe", f"{group}-nosuch", *b]) == 1
    assert "GroupIdNotFound" in capsys.readouterr().err
