"""The group coordinator: classic groups and committed offsets, one shard per
__consumer_offsets partition."""
from .shard import GroupCoordinatorShard

__all__ = ["GroupCoordinatorShard"]
