"""Which member ids a SharePartition serves, sans I/O: the members its share group has.

Kafka 4.2 checks no membership on ShareFetch itself. A fetch belongs to a share session,
keyed by group and member id, which the member opens with share session epoch 0 and which
goes when the member leaves or is fenced; a member shut out of its group has no session, so
its fetches fail until it joins again. shoal has no share sessions yet (they come with the
wire gateway), so a SharePartition asks the group coordinator instead, and refuses a member
id the group does not have with UNKNOWN_MEMBER_ID (see the README's design notes).

A Ray call costs about a millisecond and fetches are the data path, so the answer is cached:
the caller lists the group's members (ShareGroupDescribe) when a member id is not in the
last listing or that listing is older than `recheck_ms`, and serves from the cache
otherwise. The rules, all decided here:
- A member id is refused only by a listing begun after its request arrived (`ticket()`), so
  a member whose first heartbeat just succeeded is served even when an older listing missed it.
- The group coordinator tells the SharePartition when a member leaves or is fenced
  (`release`, with the member epoch it had then); that drops it at once. A listing under way
  at that moment may have been read before the member went, so it does not bring the member
  back at that epoch. The same member id may join again (at a newer member epoch) before the
  release arrives: a listing that has it at a newer epoch keeps it, and a fetch carrying an
  epoch no newer than the released one is refused.
- Each listing replaces the cache, so ids of members gone from the group are forgotten.
"""
from __future__ import annotations

from typing import Iterable

from ..errors import Errors, KafkaError, raise_if

__all__ = ["ShareMembers", "MEMBER_RECHECK_MS"]

# How old a listing may be before a fetch makes the SharePartition list the members again.
# Leaves and fences are pushed (release), so this only bounds how long a member fenced on
# a partition it was not assigned (and so not told about) may go on there.
MEMBER_RECHECK_MS = 5000


class ShareMembers:
    def __init__(self, group_id: str, recheck_ms: int = MEMBER_RECHECK_MS) -> None:
        self.group_id = group_id
        self.recheck_ms = recheck_ms
        self._members: frozenset[str] = frozenset()  # of the last listing, less those released since
        self._epochs: dict[str, int] = {}  # member epochs of the last listing
        self._fenced: dict[str, int] = {}  # member -> the newest member epoch it was released at
        self._listed_at: int | None = None
        self._begun = 0  # listings begun so far; the number of the newest
        self._completed = 0  # the number of the newest listing answered
        self._under_way: int | None = None
        self._released_meanwhile: dict[str, int] = {}

    def ticket(self) -> int:
        """Taken when a request arrives: only a listing begun after it may refuse the request."""
        return self._begun

    def admitted(self, member_id: str, now_ms: int, ticket: int) -> bool:
        """True: serve the member. False: a listing must be awaited (or begun) first.
        Raises UNKNOWN_MEMBER_ID when a listing begun after `ticket` did not have it, and
        INVALID_REQUEST for no member id at all (nothing to ask about)."""
        raise_if(not member_id, Errors.INVALID_REQUEST, "a share fetch or acknowledgement needs a member id")
        listed = member_id in self._members
        if listed and self._listed_at is not None and now_ms - self._listed_at < self.recheck_ms:
            return True
        if self._completed > ticket:
            self.raise_unless_member(member_id)
            return True
        return False

    def raise_unless_member(self, member_id: str, member_epoch: int = -1) -> None:
        """Right before records are acquired or acknowledged: the member may have been
        released while its request waited (or the request comes from before a fence, and says
        so with its member epoch)."""
        if member_id not in self._members or 0 <= member_epoch <= self._fenced.get(member_id, -1):
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of share group {self.group_id}.")

    def epoch_of(self, member_id: str, member_epoch: int = -1) -> int:
        """The member epoch a request of member_id is served in: its own, else the listing's."""
        return member_epoch if member_epoch >= 0 else self._epochs.get(member_id, -1)

    @property
    def listing(self) -> bool:
        """Whether a listing is under way."""
        return self._under_way is not None

    def begin_listing(self) -> None:
        if self._under_way is not None:
            raise ValueError("a listing of the members is under way already")
        self._begun += 1
        self._under_way = self._begun
        self._released_meanwhile = {}

    def listed(self, member_ids: Iterable[str], now_ms: int, epochs: dict[str, int] | None = None) -> None:
        """The group coordinator's answer to the listing under way: its members now (none
        when the group does not exist), with their member epochs where known."""
        number = self._end_listing()
        epochs = epochs or {}
        released = self._released_meanwhile
        self._members = frozenset(m for m in member_ids if m not in released or epochs.get(m, -1) > released[m])
        self._epochs = {m: e for m, e in epochs.items() if m in self._members}
        self._fenced = {m: e for m, e in self._fenced.items() if m in self._members}
        self._listed_at = now_ms
        self._completed = number
        self._released_meanwhile = {}

    def listing_failed(self) -> None:
        """The listing got no answer: the next request that needs one begins another."""
        self._end_listing()
        self._released_meanwhile = {}

    def _end_listing(self) -> int:
        if self._under_way is None:
            raise ValueError("no listing of the members is under way")
        number, self._under_way = self._under_way, None
        return number

    def release(self, member_id: str, member_epoch: int | None = None) -> None:
        """The member left the group or was fenced, at `member_epoch` if known. A listing that
        already has it at a newer epoch (it joined again) keeps it."""
        epoch = 0x7FFFFFFF if member_epoch is None else member_epoch
        if member_epoch is not None:
            self._fenced[member_id] = max(self._fenced.get(member_id, -1), member_epoch)
        if self._epochs.get(member_id, -1) <= epoch:
            self._members = self._members - {member_id}
            self._epochs.pop(member_id, None)
        if self._under_way is not None:
            self._released_meanwhile[member_id] = max(self._released_meanwhile.get(member_id, -1), epoch)
