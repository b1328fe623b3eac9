"""The share consumer's membership manager (Kafka's ShareMembershipManager), sans I/O.

It shares the KIP-848 member's state table, fencing and leaving with the consumer's manager
(`membership.py`). What differs: a share member tells the coordinator only its subscription
(ShareGroupHeartbeat carries no owned partitions); it takes an assignment at once, since
nothing needs revoking first (several members may fetch one partition, and each
SharePartition releases what a member held when it goes); and a fenced member has no
partitions-lost callback to wait for, so it joins again at epoch 0 straight away.

Errors that fence come from the coordinator's heartbeat and from the SharePartitions
(`partition_refused`), which refuse a member the group no longer has.
"""
from __future__ import annotations

from runtime.errors import Errors
from runtime.messages.consumer import JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH
from runtime.messages.share_group import ShareGroupHeartbeatRequest

from .membership import FENCING_ERRORS, AbstractMembershipManager, MemberState as S

__all__ = ["ShareMembershipManager"]


class ShareMembershipManager(AbstractMembershipManager):

    def _request(self, joining: bool) -> ShareGroupHeartbeatRequest:
        # A joining member, or one whose last heartbeat was lost, says everything; otherwise
        # the subscription goes only when it changed.
        full = joining or self._sent is None
        send_topics = full or self._sent.get("topics") != self.topics
        self._sent = {"topics": self.topics}
        return ShareGroupHeartbeatRequest(
            self.group_id, self.member_id, JOIN_GROUP_MEMBER_EPOCH if joining else self.member_epoch,
            rack_id=self.rack_id if full else None,
            subscribed_topic_names=self.topics if send_topics else None)

    def _leave_request(self) -> ShareGroupHeartbeatRequest:
        return ShareGroupHeartbeatRequest(self.group_id, self.member_id, LEAVE_GROUP_MEMBER_EPOCH)

    def _settle(self) -> None:
        if self.target != self.owned:
            if self.state is not S.RECONCILING:
                self._transition(S.RECONCILING)
            rec = self.next_reconciliation()
            self.revocation_done(rec)
            self.reconciliation_done(rec)  # ACKNOWLEDGING: the next heartbeat goes at once
        elif self.state is S.JOINING:
            self._transition(S.STABLE)

    def _fence(self) -> None:
        super()._fence()
        self.lost_done()

    def _on_unexpected_error(self, error: Errors, message: str | None) -> None:
        # shoal departs from Kafka here (README): the member keeps heartbeating at a backoff
        # rather than failing, so a full group (GROUP_MAX_SIZE_REACHED) takes it when a
        # place frees up.
        self.heartbeat_failed()

    def leave(self) -> frozenset:
        """Leave (close or unsubscribe): nothing to revoke first, the next heartbeat says
        goodbye. Returns the partitions it gives up."""
        owned = super().leave()
        self.leave_ready()
        return owned

    def stamp(self) -> int | None:
        """What a request to a SharePartition carries back to `partition_refused`: the
        membership it was sent in, or None before the member has joined."""
        return self.joins if self.member_epoch > 0 else None

    def partition_refused(self, error: Errors, stamp: int | None) -> None:
        """A SharePartition answered a fetch or acknowledgement with `error`: a fencing error
        means the group no longer has this member, so it stops fetching and joins again. A
        refusal of a request sent before the join completed, or in an earlier membership, is
        moot."""
        if error in FENCING_ERRORS and stamp is not None and stamp == self.joins and self.state in (
                S.RECONCILING, S.ACKNOWLEDGING, S.STABLE):
            self._fence()
