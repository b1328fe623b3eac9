"""Share sessions (KIP-932): what a member's share fetches go on fetching, sans I/O.

A member opens its session with epoch 0, naming the partitions it fetches; each later
ShareFetch or ShareAcknowledge carries the next epoch and only what changed (partitions
added, topics forgotten), and fetches from the session's whole set. Epoch -1 acknowledges and
closes the session. When a session ends (closed, replaced by a new epoch 0, or its
connection gone) the records its member holds on those partitions are released: the caller
gets the ended session back and does that.

Errors as Kafka gives them: SHARE_SESSION_NOT_FOUND (no session for an incremental or final
request), INVALID_SHARE_SESSION_EPOCH (another epoch than the next, or a ShareAcknowledge
opening a session), SHARE_SESSION_LIMIT_REACHED (group.share.max.share.sessions sessions
open), INVALID_REQUEST (acknowledgements in an opening fetch). A closing fetch acquires
nothing.
A refused request changes no session.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable

from ..errors import Errors, KafkaError
from ..messages.share import NO_ACQUISITION, AcknowledgementBatch, name_deliveries

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SHARE_SESSIONS = 2000  # Kafka's group.share.max.share.sessions default

TopicIdPartition = tuple[str, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`; it wraps to 1, never back to the opening 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


@dataclass
class ShareSession:
    """A member's share session. It also keeps what it was handed on each partition:
    [(first offset, last offset, acquisition id, lock deadline)], newest last. Kafka's clients
    acknowledge by offset; the session names the delivery each offset was handed out in, so
    a late acknowledgement never applies to a later delivery of the same offset. A delivery is
    forgotten once its lock has run out: an acknowledgement of it then names none, and the
    SharePartition refuses it, as it would have."""
    group_id: str
    member_id: str
    connection: Hashable
    partitions: set[TopicIdPartition] = field(default_factory=set)
    epoch: int = 1  # the epoch the next request must carry
    delivered: dict[TopicIdPartition, list] = field(default_factory=dict)

    def handed_out(self, tp: TopicIdPartition, ranges: Iterable[tuple[int, int]], acquisition_id: int,
                   deadline_ms: float, now_ms: float) -> None:
        """Records acquired for this session, whose lock runs out at `deadline_ms` at the latest."""
        kept = [r for r in self.delivered.get(tp, ()) if r[3] > now_ms]
        kept += [(first, last, acquisition_id, deadline_ms) for first, last in ranges]
        self.delivered[tp] = kept

    def renewed(self, tp: TopicIdPartition, offsets: Iterable[int], deadline_ms: float) -> None:
        """A RENEW of these offsets held: their deliveries' locks run out later."""
        offsets = sorted(offsets)
        self.delivered[tp] = [(f, l, a, max(d, deadline_ms)) if any(f <= o <= l for o in offsets) else (f, l, a, d)
                              for f, l, a, d in self.delivered.get(tp, ())]

    def name(self, tp: TopicIdPartition, batches: Iterable[AcknowledgementBatch],
             now_ms: float) -> tuple[AcknowledgementBatch, ...]:
        """Offset-only acknowledgements as acknowledgements of what this session was handed."""
        ranges = [r for r in self.delivered.get(tp, ()) if r[3] > now_ms]

        def acquisition_of(offset: int) -> int:
            for first, last, acquisition_id, _ in reversed(ranges):
                if first <= offset <= last:
                    return acquisition_id
            return NO_ACQUISITION
        return name_deliveries(batches, acquisition_of)


class ShareSessionCache:
    def __init__(self, max_sessions: int = MAX_SHARE_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def fetch(self, group_id: str, member_id: str, epoch: int, connection: Hashable,
              added: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition],
              acknowledging: bool) -> tuple[set[TopicIdPartition], ShareSession | None]:
        """A ShareFetch: the partitions to fetch from (none for a closing one), and the
        session it ended if any (a replaced or closed one), whose records the caller releases."""
        added, forgotten = set(added), set(forgotten)
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise KafkaError(Errors.INVALID_REQUEST, "a share session's opening fetch cannot acknowledge")
            ended = self._sessions.get(key)
            if ended is None and len(self._sessions) >= self.max_sessions:
                raise KafkaError(Errors.SHARE_SESSION_LIMIT_REACHED,
                                 f"{self.max_sessions} share sessions are open (group.share.max.share.sessions)")
            session = ShareSession(group_id, member_id, connection, added - forgotten)
            self._sessions[key] = session
            return set(session.partitions), ended
        if epoch == FINAL_EPOCH:
            return set(), self._take(key)  # its partitions carry acknowledgements only
        session = self._current(key, epoch)
        session.partitions = (session.partitions | added) - forgotten
        session.epoch = next_epoch(epoch)
        session.connection = connection
        return set(session.partitions), None

    def acknowledge(self, group_id: str, member_id: str, epoch: int, connection: Hashable) -> ShareSession | None:
        """A ShareAcknowledge: checks the epoch and moves it on; a closing one (-1) ends the
        session, which is returned (its records are released after these acknowledgements)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            raise KafkaError(Errors.INVALID_SHARE_SESSION_EPOCH, "a ShareAcknowledge cannot open a share session")
        if epoch == FINAL_EPOCH:
            return self._take(key)
        session = self._current(key, epoch)
        session.epoch = next_epoch(epoch)
        session.connection = connection
        return None

    def connection_closed(self, connection: Hashable) -> list[ShareSession]:
        """The sessions of a closed connection end with it (as in Kafka 4.1 and later)."""
        ended = [s for s in self._sessions.values() if s.connection == connection]
        for s in ended:
            del self._sessions[(s.group_id, s.member_id)]
        return ended

    def _current(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise KafkaError(Errors.SHARE_SESSION_NOT_FOUND, f"no share session for member {key[1]}")
        if epoch != session.epoch:
            raise KafkaError(Errors.INVALID_SHARE_SESSION_EPOCH,
                             f"share session epoch {epoch}, expected {session.epoch}")
        return session

    def _take(self, key: tuple[str, str]) -> ShareSession:
        session = self._sessions.pop(key, None)
        if session is None:
            raise KafkaError(Errors.SHARE_SESSION_NOT_FOUND, f"no share session for member {key[1]}")
        return session

