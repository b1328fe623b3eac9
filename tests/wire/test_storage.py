"""A Kafka client's batch through shoal's partition log and back: what kafka-python's
producer builds, its consumer reads from the fetch, with the same keys, values, headers,
timestamps and producer state; a transaction marker reads as Kafka's control batch."""
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from runtime.topics.partition import PartitionLog
from runtime.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from runtime.wire.records import decode_batch
from runtime.wire.storage import fetched_records, produce_request

RECORDS = [(1700000000000 + i, b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)]) for i in range(5)]


def client_batch(codec, producer_id=-1, epoch=-1, sequence=-1, transactional=False):
    builder = DefaultRecordBatchBuilder(2, codec, transactional, producer_id, epoch, sequence, 1 << 20)
    for i, (ts, k, v, h) in enumerate(RECORDS):
        builder.append(i, timestamp=ts, key=k, value=v, headers=h)
    return bytes(builder.build())


def read(data):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(data)]


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_a_client_batch_round_trips_through_the_log(tmp_path, codec):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    for _ in range(2):
        batch, _ = decode_batch(client_batch(codec))
        plog.append(produce_request("t", 0, batch, acks=-1, timeout_ms=1000, transactional_id=None), 0)
    plog.flush()
    fetched = plog.fetch(0, 1 << 20)
    # Converted at the edge (README, "where shoal differs from Kafka"): the client's codec
    # is not kept, the batch comes back uncompressed.
    assert {DefaultRecordBatch(fetched_records(b)).compression_type for b in fetched.batches} == {NONE}
    assert [read(fetched_records(b)) for b in fetched.batches] == [
        [(base + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(RECORDS)] for base in (0, 5)]
    plog.close()


def test_producer_state_and_markers_pass(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    batch, _ = decode_batch(client_batch(NONE, producer_id=3, epoch=0, sequence=0, transactional=True))
    request = produce_request("t", 0, batch, acks=-1, timeout_ms=1000, transactional_id="tx")
    assert (request.producer_id, request.producer_epoch, request.base_sequence, request.is_transactional) == \
        (3, 0, 0, True)
    plog.append(request, 0, plog.verification_guard(request))
    plog.append_control_marker(3, 0, True, 0, 10)
    plog.flush()
    data, marker = (fetched_records(b) for b in plog.fetch(0, 1 << 20).batches)
    assert DefaultRecordBatch(data).is_transactional and DefaultRecordBatch(data).producer_id == 3
    control = DefaultRecordBatch(marker)
    assert control.is_control_batch and control.base_offset == 5
    assert next(iter(control)).commit
    plog.close()
