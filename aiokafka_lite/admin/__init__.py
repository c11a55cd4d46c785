"""The admin client, laid out as aiokafka's ``aiokafka.admin`` package.

``aiokafka_lite.admin.AIOKafkaAdminClient`` and the argument classes ``NewTopic``,
``NewPartitions``, ``RecordsToDelete``, ``ConfigResource`` / ``ConfigResourceType`` live in
modules of the same names as aiokafka's (``admin.client``, ``admin.new_topic`` ...). ACL
arguments and results (``AclBinding``, ``AclFilter``), ``LogDirInfo`` and the group results
(``GroupDescription``, ``GroupMember``, ``ListedGroup``) and the transaction ones
(``ListedTransaction``, ``TransactionDescription``, ``ProducerState``, ``AbortTransactionSpec``,
``FencedProducer``) come from the operations layer.
"""

from ..ops.acls import AclBinding, AclFilter, LogDirInfo
from ..ops.groups import GroupDescription, GroupMember, ListedGroup
from ..ops.transactions import (
    AbortTransactionSpec,
    FencedProducer,
    ListedTransaction,
    ProducerState,
    TransactionDescription,
)
from ._responses import Response
from .client import AIOKafkaAdminClient
from .config_resource import ConfigResource, ConfigResourceType
from .new_partitions import NewPartitions
from .new_topic import NewTopic
from .records_to_delete import RecordsToDelete

__all__ = [
    "AIOKafkaAdminClient",
    "AbortTransactionSpec",
    "FencedProducer",
    "ListedTransaction",
    "ProducerState",
    "TransactionDescription",
    "AclBinding",
    "AclFilter",
    "ConfigResource",
    "ConfigResourceType",
    "GroupDescription",
    "GroupMember",
    "ListedGroup",
    "LogDirInfo",
    "NewPartitions",
    "NewTopic",
    "RecordsToDelete",
    "Response",
]
