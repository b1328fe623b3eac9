"""A Kafka client's batch through shoal's partition log and back: what kafka-python's
producer builds comes back byte for byte but for the offset the leader gave it, shoal's
readers see the same records, and a transaction marker reads as Kafka's control batch. A
batch that is not what its request says is refused and nothing is appended."""
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from runtime.errors import Errors, KafkaError
from runtime.topics.data import decode_entries, encode_records
from runtime.topics.partition import PartitionLog
from runtime.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from runtime.wire.records import encode_batch
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
def test_a_client_batch_is_stored_and_served_as_it_came(tmp_path, codec):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    sent = client_batch(codec)
    for _ in range(2):
        plog.append(produce_request("t", 0, sent, acks=-1, timeout_ms=1000, transactional_id=None), 0)
    plog.flush()
    fetched = plog.fetch(0, 1 << 20)
    served = [fetched_records(b) for b in fetched.batches]
    # Only the base offset differs (it is outside the CRC); the leader epoch stays unknown.
    assert [s[16:] for s in served] == [sent[16:]] * 2 and [s[8:12] for s in served] == [sent[8:12]] * 2
    assert [struct.unpack(">qii", s[:16])[::2] for s in served] == [(0, -1), (5, -1)]
    assert {DefaultRecordBatch(s).compression_type for s in served} == {DefaultRecordBatch(sent).compression_type}
    assert [read(s) for s in served] == [
        [(base + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(RECORDS)] for base in (0, 5)]
    # shoal's own consumers read the same records from the stored batch.
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers))
            for b in fetched.batches for r in decode_entries(b.records, b.base_offset)] == [
        (base + i, ts, k, v, h) for base in (0, 5) for i, (ts, k, v, h) in enumerate(RECORDS)]
    plog.close()


def test_a_shoal_batch_is_served_as_a_v2_batch_at_its_offsets(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    plog.append(produce_request("t", 0, client_batch(NONE), acks=-1, timeout_ms=1000, transactional_id=None), 0)
    from runtime.messages.topics import ProduceRequest
    plog.append(ProduceRequest("t", 0, encode_records([(ts, k, v, h) for ts, k, v, h in RECORDS]), 5,
                               RECORDS[-1][0]), 0)
    plog.flush()
    _, shoal = plog.fetch(0, 1 << 20).batches
    assert read(fetched_records(shoal)) == [(5 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(RECORDS)]
    plog.close()


def _corrupted(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


@pytest.mark.parametrize("bad, error", [
    (lambda sent: _corrupted(sent), Errors.CORRUPT_MESSAGE),  # the CRC no longer matches
    (lambda sent: sent + sent, Errors.INVALID_RECORD),  # two batches for one partition
    (lambda sent: encode_batch([(1, None, b"x", ())], control=True), Errors.INVALID_RECORD),
    (lambda sent: sent[:16] + b"\x01" + sent[17:], Errors.INVALID_RECORD),  # magic 1
    (lambda sent: sent[:40], Errors.CORRUPT_MESSAGE),  # truncated
])
def test_a_bad_batch_is_refused_and_nothing_is_appended(tmp_path, bad, error):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    with pytest.raises(KafkaError) as e:
        plog.append(produce_request("t", 0, bad(client_batch(NONE)), acks=-1, timeout_ms=1000,
                                    transactional_id=None), 0)
    assert e.value.error is error
    assert plog.log_end_offset == 0
    plog.close()


def test_a_batch_whose_producer_fields_differ_from_its_request_is_refused(tmp_path):
    from dataclasses import replace
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    request = produce_request("t", 0, client_batch(NONE, producer_id=3, epoch=0, sequence=0), acks=-1,
                              timeout_ms=1000, transactional_id=None)
    for lie in (replace(request, base_sequence=5), replace(request, record_count=4)):
        with pytest.raises(KafkaError) as e:
            plog.append(lie, 0)
        assert e.value.error is Errors.INVALID_RECORD
    assert plog.log_end_offset == 0
    plog.close()


def test_producer_state_and_markers_pass(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    request = produce_request("t", 0, client_batch(NONE, producer_id=3, epoch=0, sequence=0, transactional=True),
                              acks=-1, timeout_ms=1000, transactional_id="tx")
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
