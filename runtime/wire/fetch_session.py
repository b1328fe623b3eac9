"""Incremental fetch sessions (KIP-227): the broker remembers what a consumer fetches, so
that a consumer of many partitions sends only what changed and hears only about partitions
where something happened.

A Fetch request names a session id and an epoch:

| session id | epoch | meaning |
|---|---|---|
| 0 | -1 | sessionless full fetch |
| any | 0 | full fetch that opens a session (closing the one named, if any) |
| n | -1 | close session n, then a sessionless full fetch |
| n | e > 0 | incremental fetch in session n, which expects epoch e |

An incremental request adds or updates the partitions it names and drops the forgotten
ones; the broker reads every partition of the session and answers only those with records,
an error, or a high watermark or log start offset that changed since the session last told
the client. A partition that had records moves to the end of the session, so that a
response capped by max_bytes serves the others next time. An unknown session is
FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH, and a session opened
with topic names used with topic ids (Fetch v13+) or the other way FETCH_SESSION_TOPIC_ID_ERROR;
an error changes nothing.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions (Kafka's
default 1000). When full, a new session evicts, as Kafka's does, the least recently used
session if it has been idle for over MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, or else the
session with the fewest partitions among those older than that, if the new one has more;
otherwise the client gets session id 0 and goes on with full fetches. Kafka's privileged
(follower) sessions and cache shards are left out: a gateway serves consumers only.

Use: `context = cache.new_context(request, now_ms)`; read `context.reads`;
`cache.complete(context, results, now_ms)` says which partitions the response holds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..errors import Errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS = 1000
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120000
_INT32_MAX = 2**31 - 1

# (topic, partition): the topic's name before Fetch v13, its id (a string) from v13.
Key = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`; it wraps to 1, as 0 opens a session."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


@dataclass(frozen=True)
class FetchPartition:
    """What a client asks of one partition."""
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int = -1


@dataclass(frozen=True)
class FetchSessionRequest:
    version: int
    session_id: int
    epoch: int
    partitions: dict[Key, FetchPartition]  # in the request's order
    forgotten: tuple[Key, ...] = ()

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(frozen=True)
class PartitionResult:
    """What the read of one partition gave, as far as the session cares."""
    error_code: int
    high_watermark: int
    log_start_offset: int
    has_records: bool


@dataclass
class CachedPartition:
    fetch: FetchPartition
    # What the client was last told; -1 until then, so a new partition is always answered.
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, result: PartitionResult) -> bool:
        """Whether the client must hear about this partition, and remember what it hears.
        An error resets the high watermark so that the partition is sent again when the
        error goes away."""
        changed = (result.has_records or result.error_code != 0 or self.high_watermark != result.high_watermark
                   or self.log_start_offset != result.log_start_offset)
        self.high_watermark = -1 if result.error_code else result.high_watermark
        self.log_start_offset = result.log_start_offset
        return changed


@dataclass
class FetchSession:
    id: int
    uses_topic_ids: bool
    partitions: dict[Key, CachedPartition]  # in the order they are read
    epoch: int
    creation_ms: int
    last_used_ms: int


@dataclass(frozen=True)
class FetchContext:
    """How one Fetch request is served: its error (the whole response), the partitions to
    read in order, and for an incremental one the session it belongs to."""
    request: FetchSessionRequest
    error: Errors = Errors.NONE
    reads: tuple[tuple[Key, FetchPartition], ...] = ()
    session: FetchSession | None = field(default=None, repr=False)

    @property
    def opens_session(self) -> bool:
        return self.request.epoch == INITIAL_EPOCH and not self.error.code


@dataclass(frozen=True)
class FetchAnswer:
    error: Errors
    session_id: int
    partitions: tuple[Key, ...]  # those the response holds, in order


class RandomSource(Protocol):
    def randrange(self, start: int, stop: int) -> int: ...


class FetchSessionCache:
    def __init__(self, random: RandomSource, max_slots: int = MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS,
                 eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS) -> None:
        if max_slots < 0:
            raise ValueError("max.incremental.fetch.session.cache.slots must not be negative")
        self._random = random
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}

    def new_context(self, request: FetchSessionRequest, now_ms: int) -> FetchContext:
        if request.is_full:
            # A full request closes the session it names, if any.
            self.sessions.pop(request.session_id, None)
            return FetchContext(request, reads=tuple(request.partitions.items()))
        session = self.sessions.get(request.session_id)
        if session is None:
            return FetchContext(request, Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != request.epoch:
            return FetchContext(request, Errors.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (request.version >= 13):
            return FetchContext(request, Errors.FETCH_SESSION_TOPIC_ID_ERROR)
        for key, fetch in request.partitions.items():
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = CachedPartition(fetch)
            else:
                cached.fetch = fetch
        for key in request.forgotten:
            session.partitions.pop(key, None)
        if not session.partitions:
            # Nothing left to follow: the session closes and this request is sessionless.
            del self.sessions[session.id]
            return FetchContext(request, reads=tuple(request.partitions.items()))
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        return FetchContext(request, reads=tuple((k, c.fetch) for k, c in session.partitions.items()),
                            session=session)

    def complete(self, context: FetchContext, results: dict[Key, PartitionResult], now_ms: int) -> FetchAnswer:
        """The response's session id and partitions, once the reads gave `results`."""
        request = context.request
        if context.error.code:
            return FetchAnswer(context.error, INVALID_SESSION_ID, ())
        session = context.session
        if session is None:
            session_id = self._maybe_create(context, results, now_ms) if context.opens_session else INVALID_SESSION_ID
            return FetchAnswer(Errors.NONE, session_id, tuple(k for k, _ in context.reads))
        if session.epoch != next_epoch(request.epoch):
            # Another request of the same epoch got in between: a duplicate.
            return FetchAnswer(Errors.INVALID_FETCH_SESSION_EPOCH, session.id, ())
        included = []
        for key, _ in context.reads:
            cached = session.partitions.get(key)
            if cached is None or not cached.must_respond(results[key]):
                continue
            included.append(key)
            if results[key].has_records:
                session.partitions[key] = session.partitions.pop(key)
        return FetchAnswer(Errors.NONE, session.id, tuple(included))

    # ------------------------------------------------------------------ internals

    def _maybe_create(self, context: FetchContext, results: dict[Key, PartitionResult], now_ms: int) -> int:
        size = len(context.reads)
        if len(self.sessions) >= self.max_slots and not self._try_evict(size, now_ms):
            return INVALID_SESSION_ID
        partitions = {}
        for key, fetch in context.reads:
            cached = CachedPartition(fetch)
            cached.must_respond(results[key])
            partitions[key] = cached
        session = FetchSession(self._new_session_id(), context.request.version >= 13, partitions,
                               next_epoch(INITIAL_EPOCH), now_ms, now_ms)
        self.sessions[session.id] = session
        return session.id

    def _try_evict(self, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            del self.sessions[lru.id]
            return True
        old = [s for s in self.sessions.values() if now_ms - s.creation_ms > self.eviction_ms]
        if not old:
            return False
        smallest = min(old, key=lambda s: (len(s.partitions), s.id))
        if len(smallest.partitions) >= size:
            return False
        del self.sessions[smallest.id]
        return True

    def _new_session_id(self) -> int:
        while True:
            session_id = self._random.randrange(1, _INT32_MAX)
            if session_id not in self.sessions:
                return session_id
