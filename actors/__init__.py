"""shoal's Ray shell: the actors that host the runtime, the clients, the Cluster facade and
the CLI.

The public names are imported when first used: every actor process imports this package,
and the client layer would cost each of them about 0.3 s of start-up it never needs."""
import importlib

from runtime.errors import Errors, KafkaError

_LAZY = {
    "Cluster": ".cluster", "DeploymentNotFound": ".cluster", "TopicDescription": ".cluster",
    "CommitFailedError": ".clients.consumer", "Consumer": ".clients.consumer",
    "NoOffsetForPartitionError": ".clients.consumer",
    "FutureRecordMetadata": ".clients.produce_result", "RecordMetadata": ".clients.produce_result",
    "Producer": ".clients.producer",
    "AcknowledgeType": ".clients.share_consumer", "ShareConsumer": ".clients.share_consumer",
    "ConsumerRebalanceListener": "runtime.clients.types", "ConsumerRecord": "runtime.clients.types",
    "OffsetAndMetadata": "runtime.clients.types", "TopicPartition": "runtime.clients.types",
}

__all__ = ["Errors", "KafkaError", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
