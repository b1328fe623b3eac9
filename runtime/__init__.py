"""shoal's coordinator core: sans-I/O state machines, records, the state log and the write
path. Nothing here imports Ray or asyncio, reads the clock or draws random numbers."""
from .errors import CorruptRecordError, Errors, KafkaError
from .hashing import partition_for

__all__ = ["Errors", "KafkaError", "CorruptRecordError", "partition_for"]
