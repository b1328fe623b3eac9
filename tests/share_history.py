"""A history checker for share groups, in the spirit of Jepsen's Elle and Knossos: consumers
record what they saw (every delivery a poll handed out, every acknowledgement and its outcome,
members ending, faults injected, start offsets observed), each with the time it happened on
this process's monotonic clock; `check` then looks for what KIP-932 forbids, over the whole
history rather than counts at the end.

What it verifies, per record (topic partition, offset):
(a) no record is held by two members at once. Each acquisition raises the delivery count, so
    the SharePartition's order of a record's deliveries is their counts' (a poll may hand out a
    copy that waited in the consumer's buffer past its lock, after a later delivery: that is
    not a second holder). A record is handed out again with the same delivery count only when
    the earlier delivery was given back: its holder's membership ended (killed, closed, or
    fenced and joined again: the SharePartition gives the delivery back, as Kafka does), or the
    SharePartition or its share coordinator restarted (acquisitions are not persisted: the
    delivery count is a lower bound there, as KIP-932 says);
(b) a record whose ACCEPT or REJECT was acknowledged successfully is never acquired again (no
    delivery with a higher count, none with the same count after it, unless a SharePartition
    restart between its delivery before and the acknowledgement may have lost a same-count
    acquisition whose copy a consumer's buffer hands out later), and is settled successfully
    once. A delivery with a higher count handed out *before* the acknowledgement was sent is
    allowed only across a SharePartition-side restart: a count is durable once written, and a
    lock expiry frees its records before its write lands (as in Kafka), so an instance that
    dies then leaves the next one the count written before, below the one it handed out;
(c) a successful RELEASE is followed by a delivery with a higher count (none with the same
    count after it, with (b)'s exception), or by the record being archived at the delivery
    limit;
(d) once producers stop and consumers drain, every produced record ended acknowledged
    (ACCEPT or REJECT, successfully), archived at the delivery limit (its last delivery may
    be unseen: acquired for a member that died before a poll handed it out), or has an
    acknowledgement whose outcome its consumer never learnt. An acknowledgement answered with
    an error after which the record was never delivered again counts as one of those: the
    client retries a call across a SharePartition restart, so the try whose answer was lost
    may have settled the record, and the retry then finds it settled
    (INVALID_RECORD_STATE);
(e) the start offset never passes an unsettled record: the observed start offsets of a
    partition never go back, every record below one ends settled by (d), and no record below
    an observed start offset is acknowledged (ACCEPT, REJECT or RELEASE) by a send after it
    was observed. (The records held below a moved log start offset are an exception that
    these histories never make: nothing deletes records under them.)
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Iterable

from actors import AcknowledgeType

SETTLING = (AcknowledgeType.ACCEPT, AcknowledgeType.REJECT)
Key = tuple  # (topic partition, offset); the topic partition as the recorder is given it


@dataclass(frozen=True)
class Delivery:
    at: float
    member: str
    membership: int  # the member's joins when it was handed out (a fence and a new join end it)
    count: int


@dataclass(frozen=True)
class Ack:
    sent: float
    done: float
    member: str
    ack_type: AcknowledgeType
    count: int  # the delivery count of the delivery acknowledged
    ok: bool | None  # None: the outcome was never learnt


class ShareHistory:
    def __init__(self, delivery_limit: int) -> None:
        self.limit = delivery_limit
        self._lock = threading.Lock()
        self.deliveries: dict[Key, list[Delivery]] = {}
        self.acks: dict[Key, list[Ack]] = {}
        self.ended: dict[str, float] = {}  # member -> when its membership ended for good
        self.joins: dict[str, list[tuple[float, int]]] = {}  # member -> [(when seen, joins)]
        self.faults: list[tuple[float, str]] = []  # (when, kind) of SharePartition-side restarts
        self.start_offsets: dict = {}  # topic partition -> [(when, start offset)]
        self._held: dict[tuple, tuple[int, AcknowledgeType | None]] = {}  # (member, key) -> (count, last ack)

    # ------------------------------------------------------------------ recording

    @staticmethod
    def _now() -> float:
        return time.monotonic()

    def delivered(self, member: str, records: Iterable, joins: int = 0) -> None:
        """What a poll handed out (ConsumerRecords). A record the consumer hands back after a
        RENEW that held is not a new delivery."""
        at = self._now()
        with self._lock:
            self.joins.setdefault(member, []).append((at, joins))
            for r in records:
                key = ((r.topic, r.partition), r.offset)
                held = self._held.get((member, key))
                self._held[(member, key)] = (r.delivery_count, None)
                if held == (r.delivery_count, AcknowledgeType.RENEW):
                    continue
                self.deliveries.setdefault(key, []).append(Delivery(at, member, joins, r.delivery_count))

    def acknowledged(self, member: str, acks: dict, outcomes: dict | None, sent: float) -> None:
        """Acknowledgements sent at `sent` ({ConsumerRecord: type}) and their outcome per
        topic partition ({(topic, partition): error or None}); `outcomes` None: never learnt."""
        done = self._now()
        with self._lock:
            for r, ack_type in acks.items():
                tp = (r.topic, r.partition)
                key = (tp, r.offset)
                ok = None if outcomes is None or tp not in outcomes else outcomes[tp] is None
                self.acks.setdefault(key, []).append(Ack(sent, done, member, AcknowledgeType(ack_type),
                                                         r.delivery_count, ok))
                self._held[(member, key)] = (r.delivery_count, AcknowledgeType(ack_type) if ok else None)

    def member_ended(self, member: str) -> None:
        with self._lock:
            self.ended.setdefault(member, self._now())

    def member_joins(self, member: str, joins: int) -> None:
        with self._lock:
            self.joins.setdefault(member, []).append((self._now(), joins))

    def fault(self, kind: str) -> None:
        """A SharePartition or share coordinator restarted (or a node with them went)."""
        with self._lock:
            self.faults.append((self._now(), kind))

    def start_offset(self, tp, offset: int) -> None:
        with self._lock:
            self.start_offsets.setdefault(tp, []).append((self._now(), offset))

    def settled(self) -> list[Key]:
        """The records acknowledged (ACCEPT or REJECT) successfully so far."""
        with self._lock:
            return [k for k, acks in self.acks.items() if any(a.ok and a.ack_type in SETTLING for a in acks)]

    # ------------------------------------------------------------------ checking

    def _membership_ended_after(self, d: Delivery) -> bool:
        if d.member in self.ended:
            return True
        return any(joins > d.membership for at, joins in self.joins.get(d.member, ()) if at >= d.at)

    def _fault_before(self, at: float) -> bool:
        # When the acquisition happened is not seen here (a poll may hand out a buffered copy
        # long after): a restart before the later delivery may have lost the earlier one's.
        return any(t <= at for t, _ in self.faults)

    def _lost_acquisition_before(self, a: Ack, seen: list[Delivery]) -> bool:
        """Whether a SharePartition-side restart came after the record's last delivery with a
        lower count than the one `a` acknowledged, and before `a` was sent: a delivery of the
        same count made by the instance before it (lost with it) may then still be handed out
        by its member's buffer after `a`."""
        since = max((d.at for d in seen if d.count < a.count), default=float("-inf"))
        return self._fault_between(since, a.sent)

    def _fault_between(self, since: float, until: float) -> bool:
        return any(since <= t <= until for t, _ in self.faults)

    def _again(self, d: Delivery, a: Ack, seen: list[Delivery]) -> bool:
        """Whether delivery `d` of a record went out though the settling acknowledgement `a`
        held."""
        if d.count < a.count:
            return False
        if d.count == a.count:
            return d.at > a.done and not self._lost_acquisition_before(a, seen)
        return d.at > a.sent or not self._count_went_back(d, a, seen)

    def _count_went_back(self, d: Delivery, a: Ack, seen: list[Delivery]) -> bool:
        """Whether a SharePartition-side restart came after `d` was acquired and before the
        delivery `a` acknowledged (a lower count than d's) was handed out. d was acquired after
        the record's last delivery with a lower count before it (the record goes out again only
        once that one ended); when a delivery is handed out bounds when it was acquired."""
        since = max((x.at for x in seen if x.count < d.count and x.at < d.at), default=float("-inf"))
        until = max((x.at for x in seen if x.member == a.member and x.count == a.count and x.at <= a.sent),
                    default=a.sent)
        return self._fault_between(since, until)

    def check(self, produced: Iterable[Key] = ()) -> list[str]:
        """The violations, each a sentence naming the record and what was seen of it."""
        with self._lock:
            v: list[str] = []
            for key, seen in self.deliveries.items():
                v += self._exclusive(key, sorted(seen, key=lambda d: d.at))
            for key, acks in self.acks.items():
                v += self._settled_once(key, acks, self.deliveries.get(key, []))
            for key in produced:
                v += self._ended(key)
            v += self._start_offsets()
            return v

    def _exclusive(self, key, seen: list[Delivery]) -> list[str]:
        out = []
        for i, d in enumerate(seen):
            if d.count > self.limit:
                out.append(f"(a) {key} delivered with count {d.count}, past the limit {self.limit}: {seen}")
            for later in seen[i + 1:]:
                if later.count == d.count and not (self._membership_ended_after(d) or self._fault_before(later.at)):
                    out.append(f"(a) {key} handed to {later.member} with count {later.count} while {d.member} "
                               f"held that delivery: {seen}")
                    break
        return out

    def _settled_once(self, key, acks: list[Ack], seen: list[Delivery]) -> list[str]:
        out = []
        settled = [a for a in acks if a.ok and a.ack_type in SETTLING]
        if len(settled) > 1:
            out.append(f"(b) {key} acknowledged successfully {len(settled)} times: {settled}")
        for a in settled:
            again = [d for d in seen if self._again(d, a, seen)]
            if again:
                out.append(f"(b) {key} delivered again after its {a.ack_type.name} (count {a.count}) held ({a}): "
                           f"{again}")
        for a in acks:
            if a.ok and a.ack_type is AcknowledgeType.RELEASE and not self._lost_acquisition_before(a, seen):
                if any(d.count == a.count and d.at > a.done for d in seen):
                    out.append(f"(c) {key} delivered with count {a.count} again after its RELEASE held: {seen}")
        return out

    def explain(self, key) -> dict:
        """Everything recorded of one record, with the members and faults around it, in time
        order: what a violation's reader needs to see what happened."""
        with self._lock:
            seen = self.deliveries.get(key, [])
            acks = self.acks.get(key, [])
            times = [d.at for d in seen] + [t for a in acks for t in (a.sent, a.done)]
            lo, hi = (min(times) - 60, max(times) + 5) if times else (0, 0)
            members = {d.member for d in seen} | {a.member for a in acks}
            return {"deliveries": [vars(d) for d in seen],
                    "acks": [{**vars(a), "ack_type": a.ack_type.name} for a in acks],
                    "ended": {m: t for m, t in self.ended.items() if m in members},
                    "joins": {m: self.joins.get(m, [])[-20:] for m in members},
                    "faults": [f for f in self.faults if lo <= f[0] <= hi]}

    def _ended(self, key) -> list[str]:
        acks = self.acks.get(key, [])
        if any(a.ok and a.ack_type in SETTLING for a in acks) or any(a.ok is None for a in acks):
            return []
        seen = self.deliveries.get(key, [])
        last = max((d.at for d in seen), default=None)
        if any(a.ok is False and a.ack_type in SETTLING and (last is None or a.sent > last) for a in acks):
            return []  # its outcome may have been lost with a retried call's first answer
        counts = [d.count for d in self.deliveries.get(key, [])]
        released = [a.count for a in acks if a.ok and a.ack_type is AcknowledgeType.RELEASE]
        if max(counts + released, default=0) >= self.limit - 1:
            return []  # archived at the limit (its last delivery may be unseen)
        return [f"(d) {key} ended neither acknowledged nor archived: delivered {counts}, acks {acks}"]

    def _start_offsets(self) -> list[str]:
        out = []
        for tp, seen in self.start_offsets.items():
            seen = sorted(seen)
            for (t1, s1), (t2, s2) in zip(seen, seen[1:]):
                if s2 < s1:
                    out.append(f"(e) {tp} start offset went back from {s1} to {s2}")
            for key, acks in self.acks.items():
                if key[0] != tp:
                    continue
                for a in acks:
                    if a.ok and a.ack_type is not AcknowledgeType.RENEW and any(
                            t < a.sent and key[1] < s for t, s in seen):
                        out.append(f"(e) {key} acknowledged ({a.ack_type.name}) after the start offset passed it")
                        break
            final = seen[-1][1] if seen else 0
            for key in self.deliveries:
                if key[0] == tp and key[1] < final:
                    out += [f"(e) below the start offset {final}: {m}" for m in self._ended(key)]
        return out
