"""The operations layer: every admin-style protocol operation, built and parsed in one place.

Between :class:`~aiokafka_lite.client.KafkaClient` and the facades (consumer, admin, CLI, Spark).
One module per family:

* :mod:`.offsets`: ListOffsets, OffsetFetch, OffsetCommit, DeleteRecords, watermarks via Fetch;
* :mod:`.groups`: FindCoordinator, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete;
* :mod:`.topics`: CreateTopics, DeleteTopics, CreatePartitions, Metadata;
* :mod:`.configs`: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs;
* :mod:`.acls`: DescribeAcls, CreateAcls, DeleteAcls, DescribeLogDirs;
* :mod:`.transactions`: ListTransactions, DescribeTransactions;
* :mod:`.fetch`: the Fetch request builder; :mod:`.membership`: JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup builders (the consumer's coordinator runs those itself).

Each operation is a sans-I/O ``*_request`` builder and ``parse_*`` parser returning plain results
with per-item :class:`ItemError` s, and a coroutine running them through the ONE executor in
:mod:`._exec` (routing by leader / coordinator / controller / any node, retries with backoff,
metadata refresh, the overall deadline; cancellation always propagates). Nothing here imports a
facade; the facades import this package (never each other's protocol code).
"""

from ._exec import Deadline, ItemError, raise_item_errors

__all__ = ["Deadline", "ItemError", "raise_item_errors"]
