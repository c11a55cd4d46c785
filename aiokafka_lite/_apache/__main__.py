"""``python -m aiokafka_lite._apache fetch``: resolve Apache Kafka's jars through Maven."""

import sys

from . import main

sys.exit(main())
