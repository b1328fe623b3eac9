"""Loading and compacting real state logs with Spark on RayDP."""
from __future__ import annotations

import hashlib
import json
import os
import re

import pytest

from runtime.log import FileLog, LogConfig, read_manifest
from runtime.log_compaction import CompactionInProgress, compaction_lock
from runtime.testing import ShardHarness
from runtime.topics.data import encode_records, stored_payload
from runtime.wire.compression import GZIP
from runtime.wire.records import encode_batch
from spark_bridge.compaction import compact_log, load_shard, state_digest
from spark_bridge.loader import CorruptSegmentError, load_logs

from .ledger_shard import DIGEST_EXCLUDE, LedgerShard

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
DAY = 86_400_000
LOG = "__ledger-0"


def ledger(tmp_path) -> ShardHarness:
    """A ledger log over several segments: balances rewritten many times, an old tombstone
    (a, past delete.retention.ms by the end) and a recent one (c), counters with snapshots
    and deltas (x), deltas only (y), and a deleted counter (z)."""
    h = ShardHarness(str(tmp_path / LOG), LedgerShard, config={"segment.bytes": 700}, name=LOG, now_ms=T0)
    h.call(lambda s, now: s.set_balances({"a": 1, "b": 2, "c": 3}))
    h.call(lambda s, now: s.bump("z", 7, True))
    h.call(lambda s, now: s.bump("z", 1, False))
    h.advance(1000)
    h.call(lambda s, now: s.set_balances({"a": None}))
    h.call(lambda s, now: s.drop_counter("z"))
    for i in range(12):
        h.call(lambda s, now: s.set_balances({"b": i, "d": 10 * i}))
        h.call(lambda s, now: s.bump("x", i, i % 4 == 0))
        h.call(lambda s, now: s.bump("y", 1, False))
        h.advance(10)
    h.advance(DAY)
    h.call(lambda s, now: s.set_balances({"c": None, "e": 5}))
    for i in range(6):
        h.call(lambda s, now: s.set_balances({"d": i}))
    return h


def digest(shard) -> str:
    return state_digest(shard, DIGEST_EXCLUDE)


def rows_of(spark, path) -> list[dict]:
    return sorted((r.asDict() for r in load_logs(spark, path).collect()), key=lambda r: (r["log"], r["offset"]))


def expected_survivors(rows: list[dict], end: int, now_ms: int) -> list[int]:
    """The offsets Kafka's cleaner keeps below `end`, worked out record by record."""
    closed = [r for r in rows if r["offset"] < end]
    newest: dict[tuple, int] = {}
    for r in closed:
        if r["record_type"] != "CounterUpdate":
            newest[(r["record_type"], r["key"])] = r["offset"]
    keep = []
    for r in closed:
        if r["record_type"] == "CounterUpdate":
            ok = r["offset"] > newest.get(("CounterSnapshot", r["key"]), -1)
        else:
            ok = newest[(r["record_type"], r["key"])] == r["offset"]
        if ok and not (r["tombstone"] and r["batch_timestamp"] + DAY <= now_ms):
            keep.append(r["offset"])
    return keep


def live_files(directory: str) -> dict[str, str]:
    """The manifest and every segment it lists, by content hash."""
    out = {}
    for name in ["manifest.json"] + [s.file for s in read_manifest(directory).segments]:
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def test_load_a_data_dir(spark, tmp_path):
    h = ledger(tmp_path)
    orders = FileLog(str(tmp_path / "orders-1"), LogConfig(fsync=False))
    orders.append(encode_records([(T0, b"k1", b"v1", [("h", b"x")]), (T0 + 1, None, b"\xff", [])]), 2, T0 + 1)
    orders.append(encode_records([(T0 + 2, b"k1", None, [])]), 1, T0 + 2)
    # What a Kafka client produced is stored as its record batch v2 (runtime.topics.data).
    orders.append(stored_payload(encode_batch([(T0 + 3, b"k2", b"v2", [("h", b"y")])], compression=GZIP), 3),
                  1, T0 + 3)
    orders.flush()

    rows = rows_of(spark, str(tmp_path))
    ledger_rows = [r for r in rows if r["log"] == LOG]
    assert [r["offset"] for r in ledger_rows] == list(range(h.runtime.log.end_offset))
    assert ledger_rows[0] == {"log": LOG, "partition": 0, "offset": 0, "batch_timestamp": T0,
                              "record_type": "Balance", "key": '{"account": "a"}',
                              "value": '{"amount": 1, "note": ""}', "tombstone": False}
    assert ledger_rows[5] == {"log": LOG, "partition": 0, "offset": 5, "batch_timestamp": T0 + 1000,
                              "record_type": "Balance", "key": '{"account": "a"}', "value": None, "tombstone": True}
    assert [(r["record_type"], r["tombstone"]) for r in ledger_rows[3:8]] == [
        ("CounterSnapshot", False), ("CounterUpdate", False), ("Balance", True), ("CounterSnapshot", True),
        ("CounterUpdate", True)]
    assert len(read_manifest(str(tmp_path / LOG)).segments) > 3  # closed segments and the active one
    assert [r for r in rows if r["log"] == "orders-1"] == [
        {"log": "orders-1", "partition": 1, "offset": 0, "batch_timestamp": T0 + 1, "record_type": "data",
         "key": '{"key": "k1"}', "value": json.dumps({"headers": [["h", "x"]], "timestamp": T0, "value": "v1"}),
         "tombstone": False},
        {"log": "orders-1", "partition": 1, "offset": 1, "batch_timestamp": T0 + 1, "record_type": "data",
         "key": '{"key": null}', "value": json.dumps({"headers": [], "timestamp": T0 + 1, "value": "base64:/w=="}),
         "tombstone": False},
        {"log": "orders-1", "partition": 1, "offset": 2, "batch_timestamp": T0 + 2, "record_type": "data",
         "key": '{"key": "k1"}', "value": json.dumps({"headers": [], "timestamp": T0 + 2, "value": None}),
         "tombstone": True},
        {"log": "orders-1", "partition": 1, "offset": 3, "batch_timestamp": T0 + 3, "record_type": "data",
         "key": '{"key": "k2"}', "value": json.dumps({"headers": [["h", "y"]], "timestamp": T0 + 3, "value": "v2"}),
         "tombstone": False},
    ]


def test_compaction_keeps_state_and_offsets_while_the_writer_appends(spark, tmp_path):
    h = ledger(tmp_path)
    directory = str(tmp_path / LOG)
    before = rows_of(spark, directory)
    closed = [s for s in read_manifest(directory).segments if s.end_offset is not None]
    end = closed[-1].end_offset
    now = h.clock()

    def writer_keeps_going(log, stage):
        if stage == "written":  # between the job and the swap: append and roll a segment
            for i in range(8):
                h.call(lambda s, _now: s.set_balances({"f": i, "b": -i}))

    stale = load_logs(spark, directory)  # its segment list is read now, its segments later
    result = compact_log(spark, directory, now_ms=now, progress=writer_keeps_going)

    kept = expected_survivors(before, end, now)
    assert (result.status, result.segments_in, result.records_in, result.records_out) == (
        "compacted", len(closed), end, len(kept))
    after = rows_of(spark, directory)
    by_offset = {r["offset"]: r for r in before}
    assert [r for r in after if r["offset"] < end] == [by_offset[o] for o in kept]
    tombstones = {(r["key"], r["record_type"]) for r in after if r["tombstone"]}
    assert ('{"account": "c"}', "Balance") in tombstones  # recent: kept
    assert not any(r["key"] == '{"account": "a"}' for r in after)  # its tombstone expired
    assert [r["offset"] for r in after if r["offset"] >= end] == list(range(end, h.runtime.log.end_offset))
    segments = read_manifest(directory).segments
    assert segments[0].file == f"{closed[0].base_offset:020d}-{end:020d}.compacted.log"
    assert segments[1].base_offset == end and len(segments) >= 3  # the writer rolled meanwhile
    # A load planned before the swap reads the replaced offsets from the compacted segment.
    assert sorted((r.asDict() for r in stale.collect()), key=lambda r: r["offset"]) == [
        r for r in after if r["offset"] < segments[1].end_offset]

    live = digest(h.shard)
    h.runtime.close()
    shard, progress, _ = load_shard(directory, LedgerShard)
    assert digest(shard) == live
    assert progress.records == len(after)
    assert shard.balances == {"b": -7, "d": 5, "e": 5, "f": 7}
    assert shard.counters == {"x": sum(range(12)), "y": 12}


class Killed(BaseException):
    pass


def test_interrupted_compaction_leaves_the_log_and_the_next_run_succeeds(spark, tmp_path):
    h = ledger(tmp_path)
    directory = str(tmp_path / LOG)
    state = digest(h.shard)
    h.runtime.close()
    files = live_files(directory)

    with compaction_lock(directory), pytest.raises(CompactionInProgress):
        compact_log(spark, directory)
    assert live_files(directory) == files

    def kill(log, stage):
        if stage == "written":
            raise Killed()

    with pytest.raises(Killed):
        compact_log(spark, directory, progress=kill)
    assert live_files(directory) == files
    # A job killed inside its write task leaves a partial temporary file as well.
    with open(os.path.join(directory, "00000000000000000000-00000000000000000009.compacted.log.tmp"), "wb") as f:
        f.write(b"\x00\x00\x01")
    assert live_files(directory) == files

    result = compact_log(spark, directory)
    assert result.status == "compacted"
    assert sorted(os.listdir(directory)) == sorted(
        [".compaction.lock", ".lock", ".manifest.lock", "manifest.json"] + [s.file for s in read_manifest(directory).segments])
    assert digest(load_shard(directory, LedgerShard)[0]) == state

    again = compact_log(spark, directory)
    assert (again.status, again.reason) == ("nothing to do", "the closed segments are compacted already")


def test_corrupt_segment_is_named_and_nothing_changes(spark, tmp_path):
    h = ledger(tmp_path)
    h.runtime.close()
    directory = str(tmp_path / LOG)
    second = read_manifest(directory).segments[1]
    path = os.path.join(directory, second.file)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        first_size = int.from_bytes(data[0:4], "big") + 4
        second_base = int.from_bytes(data[first_size + 8:first_size + 16], "big")
        data[first_size + 50] ^= 0xFF  # inside the second batch's payload
        f.seek(0)
        f.write(data)
    files = live_files(directory)

    with pytest.raises(CorruptSegmentError) as err:
        compact_log(spark, directory)
    assert (err.value.path, err.value.offset) == (path, second_base)
    with pytest.raises(Exception, match=f"corrupt segment {re.escape(path)} at offset {second_base}: "):
        load_logs(spark, directory).collect()
    assert live_files(directory) == files
    assert not any(n.endswith(".tmp") or n.endswith(".compacted.log") for n in os.listdir(directory))


def test_a_log_of_expired_tombstones_compacts_to_nothing(spark, tmp_path):
    h = ShardHarness(str(tmp_path / LOG), LedgerShard, name=LOG, now_ms=T0)
    h.call(lambda s, now: s.set_balances({"a": 1, "b": 2}))
    h.call(lambda s, now: s.set_balances({"a": None, "b": None}))
    h.runtime.log.roll()
    h.advance(DAY)
    h.call(lambda s, now: s.set_balances({"c": 3}))  # in the active segment: untouched
    h.runtime.close()

    result = compact_log(spark, str(tmp_path / LOG), now_ms=T0 + DAY)
    assert (result.status, result.records_in, result.records_out, result.bytes_out) == ("compacted", 4, 0, 0)
    assert [s.file for s in read_manifest(str(tmp_path / LOG)).segments] == [
        "00000000000000000000-00000000000000000004.compacted.log", "00000000000000000004.log"]
    shard = load_shard(str(tmp_path / LOG), LedgerShard)[0]
    assert (shard.balances, shard.offsets) == ({"c": 3}, [4])
