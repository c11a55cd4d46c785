"""The Spark guide's code (docs/examples/spark_jobs.py) runs: a batch write, an availableNow
stream and a batch read through the `aiokafka_lite` data source, on the Spark session the
Spark shard already has (conftest's _SPARK_MODULES) and a real broker (noida: the guide's code
is broker-neutral; tests/test_spark*.py cover the brokers option by option)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

pytest.importorskip(
    "pyspark", reason="pyspark is not installed: pip install 'aiokafka_lite[spark]'"
)
pytest.importorskip(
    "pyarrow", reason="pyarrow is not installed: pip install 'aiokafka_lite[spark]'"
)

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "spark_jobs.py"


@pytest.fixture(scope="session")
def spark() -> Any:
    """The process's local[2] session (the same builder as tests/test_spark.py: one session per
    process serves every Spark module of the shard)."""
    home = os.environ.get("JAVA_HOME")
    if not (home and os.path.exists(os.path.join(home, "bin", "java"))) and not shutil.which(
        "java"
    ):
        pytest.skip("no Java runtime (java not on PATH, JAVA_HOME unset): PySpark needs Java 17+")
    from aiokafka_lite.launchers.spark_cds import stop_session
    from aiokafka_lite.launchers.spark_reference import QUICK_JVM_CONF, spark_session

    session = spark_session("aiokafka_lite-tests", conf=QUICK_JVM_CONF, cds_dump=True)
    yield session
    stop_session(session)  # and its JVM, keeping the class-data-sharing archive it wrote


def test_spark_guide_jobs(spark: Any, broker: Any) -> None:
    broker.skip_on(
        "apache", "tansu", "kafka", "external", reason="broker-neutral guide: runs on noida"
    )
    spec = importlib.util.spec_from_file_location("docs_example_spark_jobs", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tag = uuid.uuid4().hex[:8]
    rows = module.main(spark, broker.bootstrap, source=f"orders-{tag}", sink=f"upper-{tag}")
    assert rows == [("alice", "APPLE"), ("alice", "PLUM"), ("bob", "PEAR")]
