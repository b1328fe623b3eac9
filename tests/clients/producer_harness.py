"""A producer without Ray: the accumulator and transaction manager cores, a manual clock,
partition leaders that validate batches with the runtime's ProducerStateManager (the
leader's own rules), and a network the test drives by hand: it chooses which request
arrives next, and whether its answer is lost."""
from __future__ import annotations

from runtime.clients.accumulator import Outcome, ProducerBatch, RecordAccumulator
from runtime.clients.transaction_manager import TransactionManager
from runtime.errors import Errors, KafkaError
from runtime.messages.txn import InitProducerIdResponse
from runtime.timer import ManualClock
from runtime.topics.producer_state import DuplicateBatch, ProducerStateManager


class Leader:
    """A partition leader's log and producer state: appends in sequence, answers a retried
    batch with its original offsets, refuses a gap with OUT_OF_ORDER_SEQUENCE_NUMBER."""

    def __init__(self) -> None:
        self.producers = ProducerStateManager()
        self.log: list[bytes] = []

    def produce(self, batch: ProducerBatch) -> tuple[KafkaError | None, int]:
        try:
            check = self.producers.validate_append(batch.producer_id, batch.producer_epoch,
                                                   -1 if batch.base_sequence is None else batch.base_sequence,
                                                   len(batch.entries), False, len(self.log))
        except KafkaError as e:
            return e, -1
        if isinstance(check, DuplicateBatch):
            return None, check.first_offset
        base = len(self.log)
        self.log.extend(batch.entries)
        self.producers.apply(check)
        return None, base


class ProducerHarness:
    def __init__(self, *, transactional_id: str | None = None, idempotent: bool = True, **config) -> None:
        config.setdefault("linger_ms", 5)
        self.clock = ManualClock(0)
        self.txn = TransactionManager(transactional_id, offsets_partition_for=lambda group_id: 0)
        self.accumulator = RecordAccumulator(idempotent=idempotent,
                                             first_batch_alone=not self.txn.starts_at_sequence_zero, **config)
        self.leaders: dict[tuple[str, int], Leader] = {}
        self.wire: list[ProducerBatch] = []  # sent, not yet arrived
        self.failed: list[ProducerBatch] = []
        self.next_producer_id = 1000

    def leader(self, topic: str = "t", partition: int = 0) -> Leader:
        return self.leaders.setdefault((topic, partition), Leader())

    def send(self, value: bytes, topic: str = "t", partition: int = 0) -> ProducerBatch:
        batch, _, _ = self.accumulator.append(topic, partition, value, self.clock(), self.clock())
        return batch

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    def sender_step(self) -> list[ProducerBatch]:
        """What the sender thread does once: seal lingered batches, drain, number, send."""
        acc = self.accumulator
        acc.seal_lingered(self.clock())
        batches = acc.drain(self.clock())
        if batches and acc.idempotent:
            request = self.txn.producer_id_request(acc.has_numbered_unacknowledged())
            if request is not None:
                self.txn.handle_init_producer_id(InitProducerIdResponse(0, self.next_producer_id, 0))
                self.next_producer_id += 1
            acc.number(batches, self.txn.producer_id, self.txn.producer_epoch)
        for b in batches:
            acc.sending(b)
        self.wire.extend(batches)
        return batches

    def arrive(self, batch: ProducerBatch | None = None, lose_answer: bool = False) -> Outcome | None:
        """Deliver a request on the wire (the oldest by default) to its leader and, unless
        the answer is lost, hand the answer to the accumulator."""
        batch = batch or self.wire[0]
        self.wire.remove(batch)
        error, offset = self.leader(batch.topic, batch.partition).produce(batch)
        if lose_answer:
            return self.answer(batch, KafkaError(Errors.REQUEST_TIMED_OUT, "the answer was lost"))
        return self.answer(batch, error, offset)

    def answer(self, batch: ProducerBatch, error: KafkaError | None, offset: int = -1) -> Outcome:
        outcome = self.accumulator.on_response(batch, error, offset, self.clock())
        if outcome is Outcome.FAILED:
            self.failed.append(batch)
            self.txn.batch_failed(batch.error, sent=batch.base_sequence is not None)
        return outcome
