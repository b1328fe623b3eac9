"""The producer: kafka-python's KafkaProducer API over partition-leader actors.

`send` adds a record to its partition's open batch and returns a future. A background
sender thread (Kafka's Sender) ships a batch when it reaches ``batch_size`` bytes or has
waited ``linger_ms``, keeps up to ``max_in_flight_requests_per_connection`` batches in
flight per partition, and retries retriable failures (a leader restarting, a storage
error) with backoff until ``delivery_timeout_ms``. Batches of one partition are sent in
order, and a leader appends them in arrival order.

Idempotence is on by default, as in Kafka 3+: the producer gets a producer id from a
transaction coordinator and numbers each partition's batches, so a batch retried after a
lost answer (a leader killed mid-flush) is acknowledged with its original offsets instead of
being written twice, and a batch that overtakes an unacknowledged one is refused
(OUT_OF_ORDER_SEQUENCE_NUMBER) and sent again behind it. With a ``transactional_id`` the
producer also has kafka-python's transaction methods; `TransactionManager` keeps their state.
"""
from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import ray

from runtime.errors import Errors, KafkaError
from runtime.hashing import default_partition
from runtime.messages.topics import ProduceRequest
from runtime.topics.data import encode_entry, pack_batch
from runtime.topics.producer_state import NUM_BATCHES_TO_RETAIN, increment_sequence

from . import naming
from .errors import to_kafka_error
from .produce_result import FutureRecordMetadata, ProduceRequestResult
from .retry import Backoff
from .transaction_manager import TransactionManager

log = logging.getLogger(__name__)


@dataclass
class _Batch:
    topic: str
    partition: int
    created: float
    result: ProduceRequestResult
    entries: list = field(default_factory=list)
    bytes: int = 0
    max_ts: int = -1
    deadline: float = 0.0
    attempts: int = 0
    retry_at: float = 0.0
    seq: int = 0  # the order batches were sealed in, across partitions
    # Idempotence: fixed at the first send, kept on every retry.
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int | None = None
    overtaking: bool = False  # sent while an earlier batch of its partition was unacknowledged


class Producer:
    def __init__(self, cluster, *, client_id: str | None = None, acks: int | str = -1,
                 linger_ms: int = 5, batch_size: int = 16384, max_in_flight_requests_per_connection: int = 5,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000, delivery_timeout_ms: int = 120000,
                 request_timeout_ms: int = 30000, key_serializer: Callable | None = None,
                 value_serializer: Callable | None = None, max_request_size: int = 1048576,
                 metadata_max_age_ms: int = 300000, enable_idempotence: bool | None = None,
                 transactional_id: str | None = None, transaction_timeout_ms: int = 60000,
                 max_block_ms: int = 60000) -> None:
        compatible = (int(-1 if acks == "all" else acks) == -1
                      and 1 <= max_in_flight_requests_per_connection <= NUM_BATCHES_TO_RETAIN)
        # As Kafka 3+: on by default, quietly off when other settings rule it out, an error
        # when asked for (or a transactional id given) together with them.
        wanted = enable_idempotence is True or transactional_id is not None
        if wanted and not compatible:
            raise ValueError(f"idempotence needs acks='all' and max_in_flight_requests_per_connection "
                             f"<= {NUM_BATCHES_TO_RETAIN}")
        idempotent = wanted or (enable_idempotence is None and compatible)
        self._cluster = cluster
        self.client_id = client_id or f"producer-{next(_ids)}"
        self._acks = -1 if acks == "all" else int(acks)
        self._linger_s = linger_ms / 1000
        self._batch_size = batch_size
        self._max_in_flight = max(1, max_in_flight_requests_per_connection)
        self._backoff = (retry_backoff_ms, retry_backoff_max_ms)
        self._delivery_timeout_s = delivery_timeout_ms / 1000
        self._request_timeout_s = request_timeout_ms / 1000
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._max_request_size = max_request_size
        self._metadata_max_age_s = metadata_max_age_ms / 1000
        self._partitions: dict[str, tuple[int, float]] = {}
        self._sticky: dict[str, int] = {}
        self._open: dict[tuple[str, int], _Batch] = {}
        self._queued: dict[tuple[str, int], list[_Batch]] = {}
        self._in_flight: dict[Any, _Batch] = {}
        self._sending = 0  # batches taken from the queues that are not in flight yet
        self._cond = threading.Condition()
        self._flushing = 0
        self._closed = False
        self._txn = TransactionManager(cluster, self.client_id, transactional_id, transaction_timeout_ms,
                                       max_block_ms) if idempotent else None
        self._next_sequence: dict[tuple[str, int], int] = {}
        self._sequence_started: set[tuple[str, int]] = set()  # a batch was acknowledged since the numbering began
        # A transaction's batch opened since the sender last looked: its partition may be new
        # to the transaction, and the sender adds it at once (see _add_partitions_early).
        self._batch_opened = False
        self._sender = threading.Thread(target=self._run, name=f"{self.client_id}-sender", daemon=True)
        self._sender.start()

    # ------------------------------------------------------------------ the user's side

    def send(self, topic: str, value: Any = None, key: Any = None, headers=None, partition: int | None = None,
             timestamp_ms: int | None = None) -> FutureRecordMetadata:
        if self._closed:
            raise KafkaError(Errors.INVALID_REQUEST, "send after close")
        if self._txn is not None:
            self._txn.raise_if_cannot_send()
        key_bytes = self._key_serializer(key) if self._key_serializer and key is not None else key
        value_bytes = self._value_serializer(value) if self._value_serializer and value is not None else value
        for what, b in (("key", key_bytes), ("value", value_bytes)):
            if b is not None and not isinstance(b, (bytes, bytearray)):
                raise TypeError(f"{what} must be bytes (or set {what}_serializer), got {type(b).__name__}")
        count = self.partition_count(topic)
        if partition is None:
            partition = (default_partition(bytes(key_bytes), count) if key_bytes is not None
                         else self._sticky_partition(topic, count))
        elif not 0 <= partition < count:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {partition}")
        ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        entry = encode_entry(ts, bytes(key_bytes) if key_bytes is not None else None,
                             bytes(value_bytes) if value_bytes is not None else None, headers or ())
        if len(entry) > self._max_request_size:
            raise KafkaError(Errors.MESSAGE_TOO_LARGE, f"the record is {len(entry)} bytes, over max_request_size")
        woke_sender = False
        with self._cond:
            tp = (topic, partition)
            batch = self._open.get(tp)
            if batch is not None and batch.bytes + len(entry) > max(self._batch_size, len(entry)):
                self._seal(tp)
                batch = None
            if batch is None:
                batch = self._open[tp] = _Batch(topic, partition, time.monotonic(),
                                                ProduceRequestResult(topic, partition))
                if key_bytes is None and partition == self._sticky.get(topic):
                    # Kafka's sticky partitioner moves on when a batch is started.
                    self._sticky.pop(topic, None)
                self._cond.notify_all()  # the sender times the new batch's linger
                self._batch_opened = self._txn is not None and self._txn.transactional
                woke_sender = True
            future = FutureRecordMetadata(batch.result, len(batch.entries), ts,
                                          len(key_bytes) if key_bytes is not None else -1,
                                          len(value_bytes) if value_bytes is not None else -1)
            batch.entries.append(entry)
            batch.bytes += len(entry)
            batch.max_ts = max(batch.max_ts, ts)
            if batch.bytes >= self._batch_size:
                self._seal(tp)
                woke_sender = True
        if woke_sender:
            # Hand the sender the interpreter now: a thread that keeps calling send() would
            # otherwise hold it for a whole switch interval (5 ms) while the batch waits.
            time.sleep(0)
        return future

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait until each record is acknowledged or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            try:
                for tp in list(self._open):
                    self._seal(tp)
                self._cond.notify_all()
                while self._open or any(self._queued.values()) or self._sending or self._in_flight:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise KafkaError(Errors.REQUEST_TIMED_OUT, "flush timed out")
                    self._cond.wait(remaining if remaining is not None else 0.1)
            finally:
                self._flushing -= 1

    # ------------------------------------------------------------------ transactions (kafka-python's names)

    def init_transactions(self) -> None:
        """Register the transactional id: fences every older producer with the same id and
        aborts (or waits for the end of) the transaction it left behind."""
        self._transactional().init_transactions()

    def begin_transaction(self) -> None:
        self._transactional().begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict, group_metadata) -> None:
        """Commit a consumer's offsets ({TopicPartition: OffsetAndMetadata or offset}) with
        this transaction (consume-transform-produce). ``group_metadata`` is the group id, or
        an object with its ``group_id`` and the member's ``generation_id``/``member_id``."""
        self._transactional().send_offsets_to_transaction(offsets, group_metadata)

    def commit_transaction(self) -> None:
        """Send everything, then commit. Returns once read_committed consumers can read it."""
        txn = self._transactional()
        txn.begin_completion(commit=True)
        self.flush()
        txn.end_transaction(commit=True)

    def abort_transaction(self) -> None:
        txn = self._transactional()
        txn.begin_completion(commit=False)
        self.flush()
        txn.end_transaction(commit=False)

    def _transactional(self) -> TransactionManager:
        if self._txn is None or not self._txn.transactional:
            raise KafkaError(Errors.INVALID_TXN_STATE, "the producer has no transactional_id")
        return self._txn

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._sender.join(5)

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.partition_count(topic)))

    def partition_count(self, topic: str) -> int:
        cached = self._partitions.get(topic)
        if cached is not None and time.monotonic() - cached[1] < self._metadata_max_age_s:
            return cached[0]
        count = self._cluster.describe_topic(topic).partitions
        self._partitions[topic] = (count, time.monotonic())
        return count

    def _sticky_partition(self, topic: str, count: int) -> int:
        p = self._sticky.get(topic)
        if p is None or p >= count:
            p = self._sticky[topic] = random.randrange(count)
        return p

    # ------------------------------------------------------------------ the sender thread

    def _seal(self, tp: tuple[str, int]) -> None:
        batch = self._open.pop(tp, None)
        if batch is not None:
            batch.deadline = batch.created + self._delivery_timeout_s
            batch.seq = next(_batch_seq)
            self._queued.setdefault(tp, []).append(batch)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                for tp, batch in list(self._open.items()):
                    if now - batch.created >= self._linger_s:
                        self._seal(tp)
                to_send = self._ready_batches(now)
                # Out of the queues but not yet in flight: flush() must wait for these too,
                # or a commit could end the transaction before they are sent.
                self._sending += len(to_send)
                opened, self._batch_opened = self._batch_opened, False
                if not to_send and not self._in_flight and not opened:
                    if self._closed and not self._open and not any(self._queued.values()):
                        return
                    self._cond.wait(self._next_wake(now))
                    continue
            try:
                if opened:
                    self._add_partitions_early()
                sending = self._prepare_idempotent(to_send) if to_send and self._txn is not None else to_send
                for batch in sending:
                    self._send(batch)
            finally:
                with self._cond:
                    self._sending -= len(to_send)
                    self._cond.notify_all()
            self._collect()

    def _next_wake(self, now: float) -> float:
        waits = [b.created + self._linger_s - now for b in self._open.values()]
        waits += [b.retry_at - now for q in self._queued.values() for b in q]
        return max(min(waits, default=0.1), 0.0005)

    def _in_flight_by_partition(self) -> dict[tuple[str, int], int]:
        """How many batches each partition has in flight. Called under the lock."""
        counts: dict[tuple[str, int], int] = {}
        for b in self._in_flight.values():
            counts[(b.topic, b.partition)] = counts.get((b.topic, b.partition), 0) + 1
        return counts

    def _ready_batches(self, now: float) -> list[_Batch]:
        in_flight = self._in_flight_by_partition()
        ready = []
        for tp, queue in self._queued.items():
            # A leader accepts any first sequence from a producer it does not know, so until
            # the first batch is in, a later one (Ray may deliver it first) must not go. Not
            # so under transaction version 2: there a transaction starts at sequence 0.
            limit = (self._max_in_flight if self._txn is None or tp in self._sequence_started
                     or self._txn.starts_at_sequence_zero else 1)
            room = limit - in_flight.get(tp, 0)
            # In order: a batch waiting for its retry holds back the ones behind it.
            while queue and room > 0 and queue[0].retry_at <= now:
                ready.append(queue.pop(0))
                room -= 1
        return ready

    def _prepare_idempotent(self, batches: list[_Batch]) -> list[_Batch]:
        """Give first-time batches the producer id and their partition's next sequence, and
        add new partitions to the transaction. Batches that cannot go fail here."""
        try:
            producer_id, epoch = self._txn.producer_id_and_epoch(
                self._has_unacknowledged_batches(batches))
            self._txn.add_partitions({(b.topic, b.partition) for b in batches if b.base_sequence is None})
        except KafkaError as e:
            for batch in batches:
                self._fail(batch, e)
            return []
        with self._cond:
            if (producer_id, epoch) != self._txn.sequences_for:
                self._next_sequence.clear()
                self._sequence_started.clear()
                self._txn.sequences_for = (producer_id, epoch)
            for b in batches:
                if b.base_sequence is None:
                    tp = (b.topic, b.partition)
                    b.producer_id, b.producer_epoch = producer_id, epoch
                    b.base_sequence = self._next_sequence.get(tp, 0)
                    self._next_sequence[tp] = increment_sequence(b.base_sequence, len(b.entries))
        return batches

    def _add_partitions_early(self) -> None:
        """As Kafka's producer does, add a partition to the transaction as soon as a batch for
        it is opened: the AddPartitionsToTxn round trip overlaps the batch filling up instead
        of delaying its send."""
        with self._cond:
            partitions = set(self._open)
        if partitions:
            try:
                self._txn.add_partitions(partitions)
            except KafkaError:
                pass  # the transaction has failed: its batches fail when they are sent

    def _has_unacknowledged_batches(self, sending: list[_Batch]) -> bool:
        """Whether a batch numbered with the current producer id may still be in the air: a
        new producer id must wait until none is."""
        with self._cond:
            return bool(self._in_flight) or any(b.base_sequence is not None for b in sending) or any(
                b.base_sequence is not None for q in self._queued.values() for b in q)

    def _send(self, batch: _Batch) -> None:
        request = ProduceRequest(batch.topic, batch.partition, pack_batch(batch.entries), len(batch.entries),
                                 batch.max_ts, acks=self._acks, timeout_ms=int(self._request_timeout_s * 1000),
                                 transactional_id=self._txn.transactional_id if self._txn else None,
                                 producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                                 base_sequence=-1 if batch.base_sequence is None else batch.base_sequence,
                                 is_transactional=bool(self._txn and self._txn.transactional),
                                 transaction_version=self._txn.transaction_version if self._txn else 2)
        batch.overtaking = self._earlier_batch_unacknowledged(batch)
        try:
            leader = self._cluster.partition_leader(batch.topic, batch.partition)
            ref = leader.produce.remote(request)
        except Exception as e:
            self._retry_or_fail(batch, to_kafka_error(e))
            return
        with self._cond:
            self._in_flight[ref] = batch

    def _collect(self) -> None:
        with self._cond:
            refs = list(self._in_flight)
            in_flight = self._in_flight_by_partition()
            # A batch being filled that could go as soon as it is sealed: ray.wait cannot be
            # woken by the user's thread, so look again soon rather than hold the batch back.
            room = any(in_flight.get(tp, 0) < self._max_in_flight for tp in self._open)
        if not refs:
            return
        done, _ = ray.wait(refs, num_returns=1, timeout=0.001 if room else 0.005)
        if not done:
            return
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in done:
            with self._cond:
                batch = self._in_flight[ref]  # in flight until handled, so flush() cannot return meanwhile
            error = None
            try:
                response = ray.get(ref)
                if response.error_code:
                    error = KafkaError(Errors.for_code(response.error_code), response.error_message)
            except Exception as e:
                self._cluster._forget(naming.partition_leader(batch.topic, batch.partition))
                with self._cond:
                    # A restarted leader may have lost every batch of ours: one at a time again.
                    self._sequence_started.discard((batch.topic, batch.partition))
                error = to_kafka_error(e)
            if error is not None:
                self._retry_or_fail(batch, error)
            else:
                with self._cond:
                    if self._txn is not None and (batch.producer_id, batch.producer_epoch) == self._txn.sequences_for:
                        self._sequence_started.add((batch.topic, batch.partition))
                batch.result.complete(response.base_offset)
            with self._cond:
                del self._in_flight[ref]
        with self._cond:
            self._cond.notify_all()

    def _retry_or_fail(self, batch: _Batch, error: KafkaError) -> None:
        retriable = error.retriable or error.error in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR)
        overtook = error.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER and (
            batch.overtaking or self._earlier_batch_unacknowledged(batch))
        now = time.monotonic()
        if (retriable or overtook) and now < batch.deadline:
            backoff = Backoff(*self._backoff)
            backoff.attempts = batch.attempts
            batch.attempts += 1
            # A batch that overtook an unacknowledged one goes again behind it, at once.
            batch.retry_at = now if overtook else now + backoff.next_s()
            log.info("retrying a batch of %s-%d after %s", batch.topic, batch.partition, error)
            with self._cond:
                queue = self._queued.setdefault((batch.topic, batch.partition), [])
                queue.append(batch)
                queue.sort(key=lambda b: b.seq)  # failed batches go back in their order
                self._cond.notify_all()
            return
        self._fail(batch, error)

    def _earlier_batch_unacknowledged(self, batch: _Batch) -> bool:
        tp = (batch.topic, batch.partition)
        with self._cond:
            return any((b.topic, b.partition) == tp and b.seq < batch.seq
                       for b in [*self._in_flight.values(), *self._queued.get(tp, ())])

    def _fail(self, batch: _Batch, error: KafkaError) -> None:
        if self._txn is not None:
            self._txn.batch_failed(error, sent=batch.base_sequence is not None)
        batch.result.fail(error)
        with self._cond:
            self._cond.notify_all()


_ids = itertools.count(1)
_batch_seq = itertools.count()
