"""The ``aiokafka-lite`` command line: argument handling offline, every command against a broker.

Most commands run in-process through ``main(argv)`` (fast); the ones whose point is process
behaviour (closed stdout pipe, Ctrl-C of the broker command, the console entry) run as
subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from aiokafka_lite.cli import main

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _cli(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [PY, "-m", "aiokafka_lite", *args],
        capture_output=True,
        text=True,
        timeout=kw.pop("timeout", 60),
        env=env,
        cwd=ROOT,
        **kw,
    )


def _topic(prefix: str = "cli") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- offline: parsing and errors


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["broker"],
        ["topics"],
        ["topics", "create"],
        ["groups", "describe"],
        ["groups", "reset-offsets", "g"],
        ["topics", "alter-config"],
        ["produce"],
        ["consume"],
        ["bench"],
        ["bench", "roundtrip"],
        ["demo"],
    ],
)
def test_help_everywhere(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") or "usage" in out.lower()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["nosuch"], "invalid choice"),
        (["topics", "create", "t", "--partitions", "0"], "must be positive"),
        (["produce", "t", "--acks", "2"], "acks must be"),
        (["produce", "t", "--headers", "novalue"], "not key=value"),
        (["bench", "produce", "--records", "x"], "not an integer"),
        (["bench", "produce", "--api", "nope"], "invalid choice"),
        (["consume", "t", "--max", "-1"], "must be positive"),
        (["groups", "reset-offsets", "g"], "one of the arguments --to-earliest"),
        (["groups", "reset-offsets", "g", "--to-datetime", "yesterday"], "not an ISO-8601"),
        (["topics", "list", "--bootstrap", "host:notaport"], "is not host:port"),
        (["bench", "consume", "--bootstrap", "h:70000"], "is not host:port"),
    ],
)
def test_bad_arguments_give_usage_error(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err


def test_bad_values_found_after_parsing_are_one_line(capsys):
    assert main(["bench", "produce", "--compare", "aiokafka,nosuchclient"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aiokafka-lite: error: unknown client 'nosuchclient'")
    assert len(err.splitlines()) == 1
    assert main(["consume", "t", "--format", "{nosuchfield}"]) == 2
    assert "bad --format template" in capsys.readouterr().err


def _dead_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "list"],
        ["topics", "describe", "x"],
        ["groups", "list"],
        ["consume", "t", "--max", "1"],
        ["bench", "produce", "-n", "10", "--progress", "none"],
    ],
)
def test_unreachable_broker_is_one_line_and_fast(argv, capsys):
    port = _dead_port()
    if argv[0] == "bench":
        argv = [*argv, "--bootstrap", f"127.0.0.1:{port}"]
    else:
        argv = [*argv, "--bootstrap", f"127.0.0.1:{port}", "--timeout", "3"]
    started = time.monotonic()
    code = main(argv)
    assert code == 1
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err.strip()
    assert err.startswith("aiokafka-lite: error:"), err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err


def test_console_entry_point_and_version():
    proc = _cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("aiokafka-lite ")


# ---------------------------------------------------------------- against a broker


def test_topics_lifecycle(kafka_bootstrap, capsys):
    b = ["--bootstrap", kafka_bootstrap]
    name = _topic("cli-topics")
    assert main(["topics", "create", name, "--partitions", "3", *b]) == 0
    assert f"created {name}" in capsys.readouterr().out
    # a second create fails with one line; --if-not-exists makes it a no-op
    assert main(["topics", "create", name, *b]) == 1
    assert "TopicAlreadyExists" in capsys.readouterr().err
    assert main(["topics", "create", name, "--if-not-exists", *b]) == 0
    capsys.readouterr()

    assert main(["topics", "list", *b]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["TOPIC", "PARTITIONS"]
    assert [name, "3"] in rows

    assert main(["topics", "describe", name, *b]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
    parts = [line.split() for line in lines[1:]]
    assert sorted(int(p[1]) for p in parts) == [0, 1, 2]
    assert all(p[0] == name and int(p[2]) >= 0 for p in parts)

    assert main(["topics", "delete", name, *b]) == 0
    assert f"deleted {name}" in capsys.readouterr().out
    assert main(["topics", "delete", name, "--if-exists", *b]) == 0
    capsys.readouterr()
    assert main(["topics", "describe", name, *b]) == 1
    assert f"topic {name!r} does not exist" in capsys.readouterr().err


def test_produce_then_consume(kafka_bootstrap, capsys, tmp_path):
    b = ["--bootstrap", kafka_bootstrap]
    name = _topic("cli-pc")
    assert main(["topics", "create", name, "--partitions", "1", *b]) == 0
    lines = ["k1:hello", "k2:wörld", "", "nokey", "k3:a:b"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["produce", name, "--file", str(src), "--key-sep", ":", "--headers", "h=1,e="]
    assert main([*argv, "--compression", "gzip", "--acks", "all", *b]) == 0
    assert "produced 4 record(s)" in capsys.readouterr().err

    fmt = "{offset}|{key}|{value}|{headers}"
    assert main(["consume", name, "--from-beginning", "--max", "4", "--format", fmt, *b]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "0|k1|hello|h=1,e=",
        "1|k2|wörld|h=1,e=",
        "2||nokey|h=1,e=",
        "3|k3|a:b|h=1,e=",
    ]

    assert main(["consume", name, "--from-beginning", "--max", "2", "--format", "json", *b]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["value"] for r in recs] == ["hello", "wörld"]
    assert recs[0]["key"] == "k1" and recs[0]["headers"] == [["h", "1"], ["e", ""]]
    assert recs[0]["topic"] == name and recs[0]["partition"] == 0 and recs[1]["offset"] == 1

    # one partition from an offset
    argv = ["consume", name, "--partition", "0", "--offset", "2", "--max", "2", "--format", fmt]
    assert main([*argv, *b]) == 0
    assert capsys.readouterr().out.splitlines() == ["2||nokey|h=1,e=", "3|k3|a:b|h=1,e="]
    assert main(["consume", name, "--partition", "5", "--max", "1", *b]) == 1
    assert "no partition 5" in capsys.readouterr().err
    assert main(["consume", name, "--group", "g", "--offset", "1", *b]) == 2

    # --idle-timeout ends a consumer that has seen everything
    started = time.monotonic()
    assert main(["consume", name, "--from-beginning", "--idle-timeout", "1", *b]) == 0
    assert capsys.readouterr().out.splitlines() == ["hello", "wörld", "nokey", "a:b"]
    assert time.monotonic() - started < 15

    assert main(["consume", _topic("missing"), "--max", "1", "--timeout", "5", *b]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_consume_into_closed_pipe_exits_cleanly(kafka_bootstrap):
    name = _topic("cli-pipe")
    b = ["--bootstrap", kafka_bootstrap]
    assert main(["topics", "create", name, *b]) == 0
    payload = "".join(f"line-{i}\n" for i in range(3000))
    assert _cli("produce", name, *b, input=payload).returncode == 0
    # `consume | head -2`: head exits after two lines; the consumer must notice and stop
    shell = (
        f"{PY} -m aiokafka_lite consume {name} --bootstrap {kafka_bootstrap} --from-beginning"
        ' | head -n 2; echo "status=${PIPESTATUS[0]}" >&2'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )
    assert proc.stdout.splitlines() == ["line-0", "line-1"]
    assert "status=0" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_groups_list_and_describe(broker, kafka_bootstrap, capsys):
    b = ["--bootstrap", kafka_bootstrap]
    name = _topic("cli-groups")
    group = _topic("grp")
    assert main(["topics", "create", name, "--partitions", "2", *b]) == 0
    src = "".join(f"v{i}\n" for i in range(10))
    assert _cli("produce", name, "--partition", "0", *b, input=src).returncode == 0
    capsys.readouterr()
    # a group member that reads 4 records then leaves, committing its position
    assert main(["consume", name, "--group", group, "--from-beginning", "--max", "4", *b]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4

    assert main(["groups", "list", *b]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0][:2] == ["GROUP", "STATE"]
    assert any(r[0] == group for r in rows[1:])

    assert main(["groups", "describe", group, *b]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"group {group}: state ")
    assert out[1].split()[:5] == ["TOPIC", "PARTITION", "COMMITTED", "LOG", "END"]
    rows = {
        (parts[0], int(parts[1])): parts[2:5]
        for parts in (line.split() for line in out[2:])
        if parts and parts[0] == name
    }
    committed, end, lag = rows[(name, 0)]
    assert committed == "4", out
    # Tansu answers ListOffsets "latest" with the newest batch's base offset + 1
    if broker.kind != "tansu":
        assert (end, lag) == ("10", "6"), out


def test_groups_reset_offsets_dry_run_then_execute(broker, kafka_bootstrap, capsys):
    broker.skip_on("tansu", reason="Tansu's ListOffsets latest is the newest batch's base offset + 1, "
                   "so resets clamp below the real end")  # fmt: skip
    b = ["--bootstrap", kafka_bootstrap]
    name = _topic("cli-reset")
    group = _topic("grp")
    assert main(["topics", "create", name, "--partitions", "1", *b]) == 0
    src = "".join(f"v{i}\n" for i in range(10))
    assert _cli("produce", name, "--partition", "0", *b, input=src).returncode == 0
    assert main(["consume", name, "--group", group, "--from-beginning", "--max", "4", *b]) == 0
    capsys.readouterr()

    def committed() -> str:
        assert main(["groups", "describe", group, *b]) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()]
        return next(r[2] for r in rows if r and r[0] == name)

    assert committed() == "4"
    # dry run (the default): the plan is printed, nothing moves
    assert main(["groups", "reset-offsets", group, "--to-earliest", *b]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["TOPIC", "PARTITION", "OLD", "OFFSET", "NEW", "OFFSET"]
    assert out[1].split() == [name, "0", "4", "0"]
    assert "dry run" in out[-1]
    assert committed() == "4"

    assert main(["groups", "reset-offsets", group, "--topic", f"{name}:0", "--to-offset", "7",
                 "--execute", *b]) == 0  # fmt: skip
    assert capsys.readouterr().out.splitlines()[1].split() == [name, "0", "4", "7"]
    assert committed() == "7"
    assert main(["groups", "reset-offsets", group, "--to-latest", "--execute", *b]) == 0
    capsys.readouterr()
    assert committed() == "10"
    # an offset past the end is clamped to the log's bounds, as kafka-consumer-groups does
    assert main(["groups", "reset-offsets", group, "--to-offset", "-5", "--execute", *b]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[3] == "0"
    # a datetime before every record: the first offset
    assert main(["groups", "reset-offsets", group, "--to-datetime", "2000-01-01T00:00:00Z",
                 "--execute", *b]) == 0  # fmt: skip
    capsys.readouterr()
    assert committed() == "0"


def test_topics_alter_config(broker, kafka_bootstrap, capsys):
    broker.skip_on("tansu", reason="Tansu answers DescribeConfigs with 0 entries")
    b = ["--bootstrap", kafka_bootstrap]
    name = _topic("cli-config")
    assert main(["topics", "create", name, *b]) == 0
    capsys.readouterr()
    argv = ["topics", "alter-config", name, "--set", "retention.ms=123456", *b]
    assert main(argv) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["TOPIC", "CONFIG", "VALUE"]
    assert [name, "retention.ms", "123456"] in rows
    assert main(["topics", "alter-config", name, "--delete", "retention.ms", *b]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [name, "retention.ms", "604800000"] in rows  # back to the broker default (7 days)
    assert main(["topics", "alter-config", name, *b]) == 2
    assert "nothing to change" in capsys.readouterr().err


def test_broker_command_starts_and_stops_on_ctrl_c():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [PY, "-m", "aiokafka_lite", "broker", "--kind", "tansu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        host, _, port = bootstrap.rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0
        from aiokafka_lite.launchers.embedded import probe_api_versions

        assert probe_api_versions(host, int(port)) == 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        err = proc.stderr.read() if proc.stderr else ""
        assert "Traceback" not in err
        with pytest.raises(OSError):
            probe_api_versions(host, int(port), timeout=1.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_bench_produce_json(kafka_bootstrap, tmp_path, capsys):
    out = tmp_path / "bench.json"
    png = tmp_path / "bench.png"
    pytest.importorskip("matplotlib")
    code = main(
        ["bench", "produce", "-n", "2000", "--progress", "none", "--json", str(out),
         "--plot", str(png), "--bootstrap", kafka_bootstrap, "--broker-label", "the test broker"]
    )  # fmt: skip
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert code == 0, capsys.readouterr().err
    table = capsys.readouterr().out
    assert "records/s" in table and "aiokafka_lite" in table
    report = json.loads(out.read_text())
    row = report["summary"]["aiokafka_lite"]
    assert row["rounds"] == 1 and row["errors"] == 0
    assert row["records_per_s"] > 0 and row["p50_ms"] is not None
    assert report["runs"][0]["records"] == 2000
    assert report["machine"]["cores"] >= 1
    assert report["broker"] == {"name": "the test broker", "bootstrap": kafka_bootstrap}


@pytest.mark.slow
def test_demo_names_the_broker_it_started(monkeypatch, capsys):
    """``make demo`` starts an embedded broker; its comparison names that broker."""
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    code = main(["demo", "--records", "500", "--bench-records", "300", "--partitions", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"consumed 500 records .* in [0-9.]+ s: [0-9,]+ records/s", out), out
    assert "; broker embedded noida;" in out, out
    assert "broker external" not in out


def _wait_connected(pid: int, port: int, timeout: float = 30.0) -> None:
    """Wait until process ``pid`` has an established TCP connection to ``port`` (Linux /proc).

    A signal sent while the interpreter is still importing would land before ``main()``.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        inodes = set()
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
            with open(f"/proc/{pid}/net/tcp") as table:
                rows = [line.split() for line in table.readlines()[1:]]
        except OSError:
            rows = []
        for row in rows:  # remote address is row[2] "IP:PORT" in hex, state 01 = established
            if row[9] in inodes and int(row[2].split(":")[1], 16) == port and row[3] == "01":
                return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not connect to port {port} within {timeout} s")


@pytest.mark.parametrize("command", ["consume", "produce"])
def test_ctrl_c_stops_cleanly(kafka_bootstrap, command):
    name = _topic("cli-sigint")
    assert main(["topics", "create", name, "--bootstrap", kafka_bootstrap]) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [PY, "-m", "aiokafka_lite", command, name, "--bootstrap", kafka_bootstrap]
    # consume waits for records that never come; produce waits for input that never comes
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        _wait_connected(proc.pid, int(kafka_bootstrap.rpartition(":")[2]))
        time.sleep(0.5)  # connected: now it waits for records / input
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
        assert proc.returncode == 130, err
        assert err.strip().splitlines()[-1] == "aiokafka-lite: interrupted", err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=5)
