"""Idempotence, transactions and read_committed on one partition log, without Ray."""
import pytest

from runtime.errors import Errors, KafkaError
from runtime.messages.topics import LATEST_TIMESTAMP, READ_COMMITTED, AbortedTransaction, ProduceRequest
from runtime.topics.data import decode_entries, encode_records
from runtime.topics.isolation import filter_aborted
from runtime.topics.partition import PartitionLog


def request(values, pid=-1, epoch=-1, seq=-1, txn=False):
    payload = encode_records([(1000 + i, None, v, []) for i, v in enumerate(values)])
    return ProduceRequest("t", 0, payload, len(values), 1000 + len(values) - 1, producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


def produce(plog, values, **kw):
    """As a leader does, with a transaction coordinator that has the partition in the
    producer's transaction: verify what needs it, then append."""
    r = request(values, **kw)
    base = plog.append(r, 0, plog.verification_guard(r))
    plog.flush()
    return base


def committed_values(plog, offset=0):
    r = plog.fetch(offset, 1 << 20, isolation_level=READ_COMMITTED)
    return [rec.value for b in filter_aborted(r.batches, r.aborted_transactions)
            for rec in decode_entries(b.records, b.base_offset) if rec.offset >= offset]


def all_values(plog):
    r = plog.fetch(0, 1 << 20)
    return [rec.value for b in r.batches if not b.is_control for rec in decode_entries(b.records, b.base_offset)]


@pytest.fixture
def plog(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    yield log
    log.close()


def test_a_retried_batch_gets_its_original_offsets_without_a_second_append(plog):
    assert produce(plog, [b"a", b"b"], pid=7, epoch=0, seq=0) == 0
    assert produce(plog, [b"c"], pid=7, epoch=0, seq=2) == 2
    assert produce(plog, [b"a", b"b"], pid=7, epoch=0, seq=0) == 0  # a retry
    assert plog.log_end_offset == 3 and all_values(plog) == [b"a", b"b", b"c"]


def test_sequence_gaps_and_zombie_epochs_are_refused_and_change_nothing(plog):
    produce(plog, [b"a"], pid=7, epoch=1, seq=0)
    with pytest.raises(KafkaError) as e:
        plog.append(request([b"x"], pid=7, epoch=1, seq=5), 0)
    assert e.value.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as e:
        plog.append(request([b"x"], pid=7, epoch=0, seq=1), 0)
    assert e.value.error is Errors.INVALID_PRODUCER_EPOCH
    assert plog.log_end_offset == 1 and plog.producers.producers[7].last_seq == 0
    assert produce(plog, [b"b"], pid=7, epoch=1, seq=1) == 1


def test_producer_state_is_rebuilt_when_the_log_opens(tmp_path):
    d = str(tmp_path / "t-0")
    plog = PartitionLog(d, "t", 0, fsync=False)
    produce(plog, [b"a", b"b"], pid=7, epoch=0, seq=0)
    produce(plog, [b"t"], pid=8, epoch=0, seq=0, txn=True)
    plog.close()
    again = PartitionLog(d, "t", 0, fsync=False)
    assert again.producers == plog.producers
    assert [b.base_offset for b in again._all_batches(chunk_bytes=1)] == [0, 2]  # read a batch at a time
    assert again.append(request([b"a", b"b"], pid=7, epoch=0, seq=0), 0) == 0  # still a duplicate
    assert again.last_stable_offset == 2  # the transaction is still open
    again.close()


def test_read_committed_stops_at_the_open_transaction_and_drops_aborted_ones(plog):
    produce(plog, [b"plain"])
    produce(plog, [b"t1-a"], pid=1, epoch=0, seq=0, txn=True)  # offset 1
    produce(plog, [b"t2-a"], pid=2, epoch=0, seq=0, txn=True)  # offset 2
    produce(plog, [b"t1-b"], pid=1, epoch=0, seq=1, txn=True)  # offset 3
    assert plog.last_stable_offset == 1 and plog.high_watermark == 4
    assert committed_values(plog) == [b"plain"]
    assert plog.list_offsets(LATEST_TIMESTAMP, READ_COMMITTED).offset == 1
    assert plog.list_offsets(LATEST_TIMESTAMP).offset == 4

    assert plog.append_control_marker(1, 0, False, 0, 2000) == 4  # abort producer 1
    plog.flush()
    assert plog.last_stable_offset == 2  # producer 2 is still open
    assert plog.append_control_marker(2, 0, True, 0, 2000) == 5  # commit producer 2
    plog.flush()
    assert plog.last_stable_offset == 6
    r = plog.fetch(0, 1 << 20, isolation_level=READ_COMMITTED)
    assert r.aborted_transactions == (AbortedTransaction(1, 1),)
    assert committed_values(plog) == [b"plain", b"t2-a"]
    assert all_values(plog) == [b"plain", b"t1-a", b"t2-a", b"t1-b"]
    # A fetch that starts after the aborted range is not told about it.
    assert plog.fetch(5, 1 << 20, isolation_level=READ_COMMITTED).aborted_transactions == ()


def test_markers_from_an_older_epoch_or_coordinator_are_refused(plog):
    produce(plog, [b"x"], pid=1, epoch=3, seq=0, txn=True)
    with pytest.raises(KafkaError) as e:
        plog.append_control_marker(1, 2, True, 0, 0)
    assert e.value.error is Errors.INVALID_PRODUCER_EPOCH
    plog.append_control_marker(1, 3, False, 5, 0)
    with pytest.raises(KafkaError) as e:
        plog.append_control_marker(1, 3, True, 4, 0)
    assert e.value.error is Errors.TRANSACTION_COORDINATOR_FENCED
    assert plog.log_end_offset == 2


def test_read_committed_waits_for_the_marker_to_be_durable(plog):
    produce(plog, [b"a", b"b"], pid=1, epoch=0, seq=0, txn=True)  # 0-1, durable
    assert plog.append_control_marker(1, 1, True, 0, 0, transaction_version=2) == 2  # not flushed yet
    r = plog.fetch(0, 1 << 20, isolation_level=READ_COMMITTED)
    assert (r.high_watermark, r.last_stable_offset) == (2, 0)
    assert committed_values(plog) == [] and plog.list_offsets(LATEST_TIMESTAMP, READ_COMMITTED).offset == 0
    plog.flush()
    assert plog.last_stable_offset == 3 and committed_values(plog) == [b"a", b"b"]


def test_an_unverified_transactional_batch_is_refused(plog):
    # The leader appends a batch that opens a transaction only with the guard of its
    # verification by the transaction coordinator, so no hanging transaction can start.
    with pytest.raises(KafkaError) as e:
        plog.append(request([b"x"], pid=1, epoch=0, seq=0, txn=True), 0)
    assert e.value.error is Errors.INVALID_TXN_STATE
    assert plog.log_end_offset == 0 and plog.last_stable_offset == plog.high_watermark
    guard = plog.verification_guard(request([b"x"], pid=1, epoch=0, seq=0, txn=True))
    assert guard is not None and plog.verification_guard(request([b"x"])) is None
    plog.append(request([b"x"], pid=1, epoch=0, seq=0, txn=True), 0, guard)
    assert plog.verification_guard(request([b"y"], pid=1, epoch=0, seq=1, txn=True)) is None  # it is open now


def test_a_plain_batch_inside_a_transaction_is_refused(plog):
    produce(plog, [b"x"], pid=1, epoch=0, seq=0, txn=True)
    with pytest.raises(KafkaError) as e:
        plog.append(request([b"y"], pid=1, epoch=0, seq=1), 0)
    assert e.value.error is Errors.INVALID_TXN_STATE


def test_a_failed_flush_forgets_the_producer_state_of_the_lost_batches(tmp_path):
    from runtime.log import LogWriteError, OsIO

    class FailingFsync(OsIO):
        fail = False

        def fsync(self, fd):
            if self.fail:
                raise OSError(5, "disk gone")
            super().fsync(fd)

    io = FailingFsync()
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=True, io=io)
    produce(plog, [b"a"], pid=1, epoch=0, seq=0)
    io.fail = True
    plog.append(request([b"b"], pid=1, epoch=0, seq=1), 0)
    with pytest.raises(LogWriteError):
        plog.flush()
    assert plog.offline
    with pytest.raises(LogWriteError):
        plog.append(request([b"c"], pid=1, epoch=0, seq=1), 0)
    io.fail = False
    plog.reopen()
    assert plog.producers.producers[1].last_seq == 0
    # The producer's retry of the lost batch is appended, not taken for a duplicate.
    assert plog.append(request([b"b"], pid=1, epoch=0, seq=1), 0) == 1
    plog.close()


def test_filter_aborted_keeps_other_producers_and_later_transactions():
    from runtime.messages.topics import FetchedBatch
    from runtime.topics.data import encode_control

    def data(offset, pid, txn=True):
        return FetchedBatch(offset, offset, encode_records([(0, None, b"v", [])]), pid, txn)

    def marker(offset, pid, commit):
        return FetchedBatch(offset, offset, encode_control(commit, 0, 0), pid, True, True)

    batches = [data(0, 1), data(1, 2), marker(2, 1, False), data(3, 1), marker(4, 1, True), data(5, 9, False)]
    kept = filter_aborted(batches, [AbortedTransaction(1, 0)])
    assert [b.base_offset for b in kept] == [1, 3, 5]
