"""Test launchers: real brokers and Spark rigs for the tests, the benchmarks and the CLI.

* :mod:`.apache` (with :mod:`.apache_node`): Apache Kafka itself from Maven Central jars, one
  KRaft node or a cluster (``python -m aiokafka_lite.launchers.apache fetch`` resolves the jars);
* :mod:`.embedded`: the Tansu and noida-db binaries (``aiokafka-lite broker``);
* :mod:`.spark_cluster`: a standalone Spark cluster and a Spark Connect server from pyspark;
* :mod:`.spark_reference`: Spark's own Kafka connector, the reference for the Spark tests.

Nothing of the client imports this package; only the CLI, the benchmark engine and the tests do.
"""
