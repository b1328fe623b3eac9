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
producer also has kafka-python's transaction methods.

The decisions are the sans-I/O cores' (runtime/clients): `RecordAccumulator` owns the
batches, their order, in-flight limits, retries and sequence numbers; `TransactionManager`
owns the producer id, epoch and transaction state. This file is the shell: serializers and
partitioner, the futures, the sender thread and the Ray calls.
"""
from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from typing import Any, Callable

import ray

from runtime.clients.accumulator import Outcome, ProducerBatch, RecordAccumulator
from runtime.errors import Errors, KafkaError
from runtime.hashing import default_partition
from runtime.messages.topics import ProduceRequest
from runtime.topics.data import encode_entry, pack_batch
from runtime.topics.producer_state import NUM_BATCHES_TO_RETAIN

from .. import naming
from ..errors import to_kafka_error
from .produce_result import FutureRecordMetadata, ProduceRequestResult
from .transaction_manager import TransactionManager

log = logging.getLogger(__name__)


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
        self._request_timeout_ms = request_timeout_ms
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._max_request_size = max_request_size
        self._metadata_max_age_s = metadata_max_age_ms / 1000
        self._partitions: dict[str, tuple[int, float]] = {}
        self._sticky: dict[str, int] = {}
        self._txn = TransactionManager(cluster, self.client_id, transactional_id, transaction_timeout_ms,
                                       max_block_ms) if idempotent else None
        transactional = self._txn is not None and self._txn.transactional
        # The accumulator is touched under _cond only.
        self._accumulator = RecordAccumulator(
            batch_size=batch_size, linger_ms=linger_ms, max_in_flight=max_in_flight_requests_per_connection,
            delivery_timeout_ms=delivery_timeout_ms, retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms, idempotent=idempotent,
            first_batch_alone=not (self._txn is not None and self._txn.starts_at_sequence_zero),
            track_new_partitions=transactional)
        self._in_flight: dict[Any, tuple[str, list[ProducerBatch]]] = {}  # Ray call -> (its host, its batches)
        self._settling = 0  # batches answered whose futures are being completed
        self._cond = threading.Condition()
        self._closed = False
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
        with self._cond:
            batch, index, new = self._accumulator.append(topic, partition, entry, ts, _now_ms())
            if new:
                batch.result = ProduceRequestResult(topic, partition)
                if key_bytes is None and partition == self._sticky.get(topic):
                    # Kafka's sticky partitioner moves on when a batch is started.
                    self._sticky.pop(topic, None)
            woke_sender = new or batch.is_sealed  # the sender times a new batch's linger, or sends
            if woke_sender:
                self._cond.notify_all()
        future = FutureRecordMetadata(batch.result, index, ts, len(key_bytes) if key_bytes is not None else -1,
                                      len(value_bytes) if value_bytes is not None else -1)
        if batch.is_sealed:
            # Hand the sender the interpreter now: a thread that keeps calling send() would
            # otherwise hold it for a whole switch interval (5 ms) while the full batch
            # waits. A new batch does not: its linger is as long as that interval, and a
            # producer writing to many partitions starts one at almost every send.
            time.sleep(0)
        return future

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait until each record is acknowledged or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._accumulator.seal_all()
            self._cond.notify_all()
            while self._accumulator.has_incomplete() or self._settling:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise KafkaError(Errors.REQUEST_TIMED_OUT, "flush timed out")
                self._cond.wait(remaining if remaining is not None else 0.1)

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
        txn.end_transaction()

    def abort_transaction(self) -> None:
        txn = self._transactional()
        txn.begin_completion(commit=False)
        self.flush()
        txn.end_transaction()

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

    def _run(self) -> None:
        acc = self._accumulator
        while True:
            with self._cond:
                now = _now_ms()
                acc.seal_lingered(now)
                to_send = acc.drain(now, self._host_of)
                new_partitions = acc.take_new_partitions()
                if not to_send and not self._in_flight and not new_partitions:
                    if self._closed and acc.is_idle():
                        return
                    wake = acc.next_wake_ms(now)
                    self._cond.wait(0.1 if wake is None else max((wake - now) / 1000, 0.0005))
                    continue
            if new_partitions:
                self._add_partitions_early(new_partitions)
            if to_send and self._txn is not None:
                to_send = self._prepare_idempotent(to_send)
            self._send(to_send)
            self._collect()

    def _prepare_idempotent(self, batches: list[ProducerBatch]) -> list[ProducerBatch]:
        """Get the producer id (and epoch) and add new partitions to the transaction; then the
        accumulator numbers the batches. Batches that cannot go fail here."""
        with self._cond:
            busy = self._accumulator.has_numbered_unacknowledged()
        try:
            producer_id, epoch = self._txn.producer_id_and_epoch(busy)
            self._txn.add_partitions({b.tp for b in batches if b.base_sequence is None})
        except KafkaError as e:
            for batch in batches:
                with self._cond:
                    self._accumulator.fail(batch, e)
                    self._settling += 1
                self._settle(batch, Outcome.FAILED)
            return []
        with self._cond:
            self._accumulator.number(batches, producer_id, epoch)
        return batches

    def _add_partitions_early(self, partitions: set[tuple[str, int]]) -> None:
        """As Kafka's producer does, add a partition to the transaction as soon as a batch for
        it is opened: the AddPartitionsToTxn round trip overlaps the batch filling up instead
        of delaying its send."""
        try:
            self._txn.add_partitions(partitions)
        except KafkaError:
            pass  # the transaction has failed: its batches fail when they are sent

    def _request(self, batch: ProducerBatch) -> ProduceRequest:
        txn = self._txn
        return ProduceRequest(batch.topic, batch.partition, pack_batch(batch.entries), len(batch.entries),
                              batch.max_timestamp, acks=self._acks, timeout_ms=self._request_timeout_ms,
                              transactional_id=txn.transactional_id if txn else None,
                              producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                              base_sequence=-1 if batch.base_sequence is None else batch.base_sequence,
                              is_transactional=bool(txn and txn.transactional),
                              transaction_version=txn.transaction_version if txn else 2)

    def _host_of(self, tp: tuple[str, int]) -> str:
        return naming.partition_host_of(tp[0], tp[1], self._cluster.config)

    def _send(self, batches: list[ProducerBatch]) -> None:
        """The batches ready to go, one Ray call per partition host (Kafka's producer sends
        one Produce request per broker)."""
        by_host: dict[str, list[ProducerBatch]] = {}
        for batch in batches:
            by_host.setdefault(self._host_of(batch.tp), []).append(batch)
        for host, batches in by_host.items():
            with self._cond:
                for batch in batches:
                    self._accumulator.sending(batch)
            try:
                ref = self._cluster._actor(host).batched.remote("produce", [(self._request(b),) for b in batches])
            except Exception as e:
                for batch in batches:
                    self._answer(batch, to_kafka_error(e), -1)
                continue
            with self._cond:
                self._in_flight[ref] = (host, batches)

    def _collect(self) -> None:
        with self._cond:
            refs = list(self._in_flight)
            # A batch being filled that could go as soon as it is sealed: ray.wait cannot be
            # woken by the user's thread, so look again soon rather than hold the batch back.
            room = self._accumulator.open_batch_could_go()
        if not refs:
            return
        done, _ = ray.wait(refs, num_returns=1, timeout=0.001 if room else 0.005)
        if not done:
            return
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in done:
            with self._cond:
                host, batches = self._in_flight.pop(ref)
            try:
                responses = ray.get(ref)
            except Exception as e:
                self._cluster._forget(host)
                with self._cond:
                    for batch in batches:
                        self._accumulator.leader_lost(batch.tp)
                responses = [to_kafka_error(e)] * len(batches)
            for batch, response in zip(batches, responses):
                error, base_offset = None, -1
                if isinstance(response, KafkaError):
                    error = response
                elif response.error_code:
                    error = KafkaError(Errors.for_code(response.error_code), response.error_message)
                else:
                    base_offset = response.base_offset
                self._answer(batch, error, base_offset)

    def _answer(self, batch: ProducerBatch, error: KafkaError | None, base_offset: int) -> None:
        with self._cond:
            outcome = self._accumulator.on_response(batch, error, base_offset, _now_ms())
            if outcome is Outcome.RETRY:
                log.info("retrying a batch of %s-%d after %s", batch.topic, batch.partition, error)
                self._cond.notify_all()
                return
            self._settling += 1
        self._settle(batch, outcome)

    def _settle(self, batch: ProducerBatch, outcome: Outcome) -> None:
        """Complete the futures of a batch the accumulator is done with (counted in
        _settling, under the lock that took it from the accumulator): flush() waits for this
        too, so it cannot return before a record's future is done."""
        try:
            if outcome is Outcome.ACKNOWLEDGED:
                batch.result.complete(batch.base_offset)
            else:
                if self._txn is not None:
                    self._txn.batch_failed(batch.error, sent=batch.base_sequence is not None)
                batch.result.fail(batch.error)
        finally:
            with self._cond:
                self._settling -= 1
                self._cond.notify_all()


def _now_ms() -> float:
    return time.monotonic() * 1000


_ids = itertools.count(1)
