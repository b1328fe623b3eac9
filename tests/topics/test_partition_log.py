"""The data log of one topic partition, without Ray: produce, fetch, list offsets, retention."""
import pytest

from runtime.errors import Errors, KafkaError, RecordErrors
from runtime.messages import error_response
from runtime.messages.topics import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, ProduceRequest
from runtime.topics.data import decode_entries, encode_records
from runtime.topics.partition import PartitionLog


def produce(plog, values, ts=1000, key=None):
    payload = encode_records([(ts + i, key, v, [("h", b"1")]) for i, v in enumerate(values)])
    base = plog.append(ProduceRequest("t", 0, payload, len(values), ts + len(values) - 1), 0)
    plog.flush()
    return base


def fetched_values(response, from_offset=0):
    return [r.value for b in response.batches for r in decode_entries(b.records, b.base_offset)
            if r.offset >= from_offset]


def test_produce_then_fetch_in_order(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    assert produce(plog, [b"a", b"b"]) == 0
    assert produce(plog, [b"c"]) == 2
    r = plog.fetch(0, 1 << 20)
    assert r.error_code == 0 and r.high_watermark == 3
    assert fetched_values(r) == [b"a", b"b", b"c"]
    rec = decode_entries(r.batches[0].records, 0)[0]
    assert rec.headers == (("h", b"1"),) and rec.timestamp == 1000
    assert fetched_values(plog.fetch(2, 1 << 20), 2) == [b"c"]
    assert plog.fetch(3, 1 << 20).batches == ()


def test_records_are_invisible_until_flushed(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    plog.append(ProduceRequest("t", 0, encode_records([(1, None, b"x", [])]), 1, 1), 0)
    assert plog.high_watermark == 0 and plog.log_end_offset == 1
    assert plog.fetch(0, 1 << 20).batches == ()
    plog.flush()
    assert fetched_values(plog.fetch(0, 1 << 20)) == [b"x"]


def test_fetch_limits_bytes_and_records_but_returns_one_batch(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    for i in range(5):
        produce(plog, [bytes(100)] * 10)
    assert len(plog.fetch(0, 1).batches) == 1
    assert len(plog.fetch(0, 1 << 20, max_records=15).batches) == 2


@pytest.mark.parametrize("offset", [-1, 4])
def test_fetch_outside_the_log_is_offset_out_of_range(tmp_path, offset):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    produce(plog, [b"a", b"b", b"c"])
    with pytest.raises(KafkaError) as e:
        plog.fetch(offset, 1 << 20)
    assert e.value.error is Errors.OFFSET_OUT_OF_RANGE


def test_oversized_and_malformed_batches_are_refused_and_change_nothing(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, {"max.message.bytes": 1000}, fsync=False)
    big = encode_records([(1, None, bytes(2000), [])])
    with pytest.raises(KafkaError) as e:
        plog.append(ProduceRequest("t", 0, big, 1, 1), 0)
    assert e.value.error is Errors.MESSAGE_TOO_LARGE
    with pytest.raises(KafkaError) as e:
        plog.append(ProduceRequest("t", 0, b"\xc1garbage", 1, 1), 0)
    assert e.value.error is Errors.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as e:
        plog.append(ProduceRequest("t", 0, encode_records([(1, None, b"x", [])]), 2, 1), 0)
    assert e.value.error is Errors.INVALID_RECORD
    assert plog.log_end_offset == 0


def test_a_compacted_topic_refuses_a_batch_with_a_record_without_key_naming_that_record(tmp_path):
    """KIP-467: the batch is INVALID_RECORD and its record errors name the keyless records
    (index in the batch), so a producer retries the others alone; nothing is written."""
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, {"cleanup.policy": "compact,delete"}, fsync=False)
    payload = encode_records([(1, b"k0", b"a", []), (2, None, b"b", []), (3, b"k2", b"c", []), (4, None, b"d", [])])
    with pytest.raises(RecordErrors) as e:
        plog.append(ProduceRequest("t", 0, payload, 4, 4), 0)
    assert e.value.error is Errors.INVALID_RECORD
    assert [i for i, _ in e.value.record_errors] == [1, 3]
    assert "Compacted topic cannot accept message without key in topic partition t-0." in e.value.record_errors[0][1]
    assert e.value.message.startswith("One or more records have been rejected due to 2 record errors in total")
    assert error_response(ProduceRequest("t", 0, payload, 4, 4), e.value).record_errors == e.value.record_errors
    assert plog.log_end_offset == 0
    assert produce(plog, [b"a", b"b"], key=b"k") == 0
    plain = PartitionLog(str(tmp_path / "u-0"), "u", 0, fsync=False)
    assert produce(plain, [b"a"]) == 0  # a key is needed on compacted topics only


def test_list_offsets(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, fsync=False)
    produce(plog, [b"a", b"b"], ts=1000)
    produce(plog, [b"c"], ts=5000)
    assert plog.list_offsets(EARLIEST_TIMESTAMP).offset == 0
    assert plog.list_offsets(LATEST_TIMESTAMP).offset == 3
    assert (plog.list_offsets(MAX_TIMESTAMP).timestamp, plog.list_offsets(MAX_TIMESTAMP).offset) == (5000, 2)
    assert plog.list_offsets(1001).offset == 1
    assert plog.list_offsets(2000).offset == 2
    assert plog.list_offsets(9999).offset == -1


def test_retention_by_bytes_and_time_deletes_whole_old_segments(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, {"segment.bytes": 400, "retention.bytes": 800}, fsync=False)
    for i in range(10):
        produce(plog, [bytes(200)], ts=1000 + i)
    segments_before = len(plog.log.manifest.segments)
    deleted = plog.apply_retention(now_ms=2000)
    assert deleted and len(plog.log.manifest.segments) == segments_before - len(deleted)
    assert plog.log_start_offset > 0
    assert sum(s.size for s in plog.log.manifest.segments) - plog.log.manifest.segments[0].size < 800
    with pytest.raises(KafkaError):
        plog.fetch(0, 1 << 20)
    assert fetched_values(plog.fetch(plog.log_start_offset, 1 << 20))

    timed = PartitionLog(str(tmp_path / "u-0"), "u", 0, {"segment.bytes": 400, "retention.ms": 100}, fsync=False)
    for i in range(4):
        produce(timed, [bytes(300)], ts=1000)
    timed.apply_retention(now_ms=1050)
    assert timed.log_start_offset == 0
    timed.apply_retention(now_ms=1200)
    assert timed.log_start_offset == 3  # only the active segment stays


def test_reopen_keeps_every_flushed_record(tmp_path):
    d = str(tmp_path / "t-0")
    plog = PartitionLog(d, "t", 0, fsync=True)
    produce(plog, [b"a", b"b"])
    plog.close()
    again = PartitionLog(d, "t", 0)
    assert fetched_values(again.fetch(0, 1 << 20)) == [b"a", b"b"]


def test_delete_records_moves_the_log_start_durably_and_never_back(tmp_path):
    """Kafka's DeleteRecords: the records before the offset are gone for readers (a fetch
    there is OFFSET_OUT_OF_RANGE, earliest is the new start), after a reopen too; the closed
    segments wholly before it are deleted; -1 is the high watermark; past it is refused."""
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, {"segment.bytes": 200}, fsync=False)
    for i in range(10):
        produce(plog, [bytes(100)], ts=i)
    segments = len(plog.log.manifest.segments)
    assert plog.delete_records(4) == 4
    assert len(plog.log.manifest.segments) < segments
    with pytest.raises(KafkaError) as e:
        plog.fetch(3, 1 << 20)
    assert e.value.error is Errors.OFFSET_OUT_OF_RANGE
    assert plog.list_offsets(EARLIEST_TIMESTAMP).offset == 4
    assert plog.delete_records(2) == 4  # never back
    with pytest.raises(KafkaError) as e:
        plog.delete_records(11)
    assert e.value.error is Errors.OFFSET_OUT_OF_RANGE and plog.log_start_offset == 4
    plog.close()
    plog = PartitionLog(str(tmp_path / "t-0"), "t", 0, {"segment.bytes": 200}, fsync=False)
    assert plog.log_start_offset == 4 and plog.fetch(4, 1 << 20).log_start_offset == 4
    assert plog.delete_records(-1) == 10
    assert plog.fetch(10, 1 << 20).batches == ()
    assert produce(plog, [b"after"]) == 10


def test_a_folder_left_by_a_deleted_topic_of_the_same_name_is_not_its_data(tmp_path):
    folder = str(tmp_path / "t-0")
    old = PartitionLog(folder, "t", 0, fsync=False, topic_id="old-id")
    produce(old, [b"of the deleted topic"])
    old.close()
    again = PartitionLog(folder, "t", 0, fsync=False, topic_id="old-id")
    assert fetched_values(again.fetch(0, 1 << 20)) == [b"of the deleted topic"]  # the same topic: its data
    again.close()
    new = PartitionLog(folder, "t", 0, fsync=False, topic_id="new-id")
    assert new.log_end_offset == 0 and new.fetch(0, 1 << 20).batches == ()
    assert produce(new, [b"of the new topic"]) == 0
    new.close()
    assert (tmp_path / "t-0" / "partition.metadata").read_text() == "version: 0\ntopic_id: new-id\n"
