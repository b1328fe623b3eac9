"""shoal's Ray shell: the actors that host the runtime, the clients, the Cluster facade and
the CLI."""
from runtime.errors import Errors, KafkaError

from .cluster import Cluster, DeploymentNotFound, TopicDescription
from .clients.consumer import CommitFailedError, Consumer, NoOffsetForPartitionError
from .clients.produce_result import FutureRecordMetadata, RecordMetadata
from .clients.producer import Producer
from .clients.share_consumer import AcknowledgeType, ShareConsumer
from runtime.clients.types import ConsumerRebalanceListener, ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["Cluster", "DeploymentNotFound", "TopicDescription", "Producer", "RecordMetadata",
           "FutureRecordMetadata", "Errors", "KafkaError", "Consumer", "CommitFailedError",
           "NoOffsetForPartitionError", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata",
           "TopicPartition", "AcknowledgeType", "ShareConsumer"]
