"""Pieces several actor test modules share."""
from actors import ConsumerRebalanceListener


class Recorder(ConsumerRebalanceListener):
    """A rebalance listener that records what it is told, in order."""

    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost):
        self.events.append(("lost", frozenset(lost)))
