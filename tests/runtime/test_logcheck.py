"""`shoal log verify` and `shoal log dump` (runtime.logcheck and actors.cli.log): every
problem the writer refuses or repairs is reported, verify agrees with the writer, and the
dump decodes each kind of batch. They read only: no lock, nothing written."""
import json
import os

import pytest

from actors.cli.main import main
from runtime.codec import encode_records as encode_state_records
from runtime.errors import CorruptRecordError
from runtime.group.records import group_metadata_tombstone, offset_commit_record
from runtime.log import ATTR_CONTROL, ATTR_TRANSACTIONAL, FileLog, LogConfig, read_manifest
from runtime.logcheck import ERROR, WARNING, dump_log, verify_log
from runtime.topics.data import encode_control, encode_records

from .logutil import append_kv, cut_file, file_bytes, flip_byte, log_with_segments


def closed_log(tmp_path, name="log", segments=3):
    log = log_with_segments(tmp_path / name, segments, 300)
    append_kv(log, 1)  # the active segment holds two batches
    assert len(log.manifest.segments) == segments
    log.flush()
    log.close()
    return log


def problems(directory):
    return [(p.severity, p.file, p.byte, p.offset) for p in verify_log(directory)]


def opens(directory) -> bool:
    try:
        FileLog(directory, LogConfig(segment_bytes=300)).close()
        return True
    except CorruptRecordError:
        return False


def test_a_healthy_log_has_no_problems_and_verify_writes_nothing(tmp_path):
    log = closed_log(tmp_path)
    before = {n: file_bytes(os.path.join(log.directory, n)) for n in os.listdir(log.directory)}
    assert verify_log(log.directory) == []
    list(dump_log(log.directory, records=True))
    assert {n: file_bytes(os.path.join(log.directory, n)) for n in os.listdir(log.directory)} == before


def test_verify_reports_what_the_writer_refuses_and_what_it_repairs(tmp_path):
    log = closed_log(tmp_path)
    segments = log.manifest.segments
    closed, active = segments[1], segments[-1]
    closed_path = os.path.join(log.directory, closed.file)
    active_path = os.path.join(log.directory, active.file)
    first_batch = next(iter(dump_log(log.directory)))["size"]
    # A torn tail of the active segment: a warning, the writer cuts it.
    whole = os.path.getsize(active_path)
    with open(active_path, "ab") as f:
        f.write(b"\x00\x00\x01\x00half a batch")
    assert [p[:3] for p in problems(log.directory)] == [(WARNING, active.file, whole)]
    assert opens(log.directory)
    # A flipped byte in the first batch of the active segment, with a valid batch after it.
    flip_byte(active_path, 50)
    (severity, file, byte, offset), = problems(log.directory)
    assert (severity, file, byte, offset) == (ERROR, active.file, 0, active.base_offset)
    assert not opens(log.directory)
    flip_byte(active_path, 50)
    # A closed segment cut at a batch boundary, and a stray file.
    cut_file(closed_path, closed.size - first_batch)
    with open(os.path.join(log.directory, "00000000000000099999.log"), "wb") as f:
        f.write(b"left over")
    found = problems(log.directory)
    assert (WARNING, "00000000000000099999.log", None, None) in found
    assert any(sev == ERROR and file == closed.file and "manifest says" in str(p)
               for (sev, file, _, _), p in zip(found, verify_log(log.directory)))
    assert not opens(log.directory)


def test_verify_agrees_with_the_writer_at_every_flipped_byte(tmp_path):
    log = closed_log(tmp_path, segments=2)
    active_path = os.path.join(log.directory, log.manifest.segments[-1].file)
    closed_path = os.path.join(log.directory, log.manifest.segments[0].file)
    for path in (active_path, closed_path):
        original = file_bytes(path)
        for pos in range(0, len(original), 3):
            flip_byte(path, pos)
            refused = any(p.severity == ERROR for p in verify_log(log.directory))
            if path == closed_path:
                # The writer checks a closed segment's header on open and its batches on
                # the first read; the loads read every batch.
                assert refused, pos
            else:
                assert refused == (not opens(log.directory)), pos
            with open(path, "wb") as f:
                f.write(original)


def test_a_missing_segment_and_a_broken_manifest_chain(tmp_path):
    log = closed_log(tmp_path)
    segments = log.manifest.segments
    os.unlink(os.path.join(log.directory, segments[1].file))
    manifest = read_manifest(log.directory)
    manifest.segments[0].end_offset += 1
    with open(os.path.join(log.directory, "manifest.json"), "w") as f:
        json.dump(manifest.to_json(), f)
    messages = [str(p) for p in verify_log(log.directory)]
    assert any("in the manifest but not on disk" in m and segments[1].file in m for m in messages)
    assert any("but the next segment starts at" in m for m in messages)


def test_dump_decodes_data_control_and_coordinator_records(tmp_path):
    topic = FileLog(str(tmp_path / "orders-0"), LogConfig(fsync=False))
    topic.append(encode_records([(5, b"k", b"v", [("h", b"1")])]), 1, 5, attributes=ATTR_TRANSACTIONAL,
                 producer_id=7, producer_epoch=1, base_sequence=0)
    topic.append(encode_control(True, 3, 6), 1, 6, attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL,
                 producer_id=7, producer_epoch=1)
    topic.flush()
    topic.close()
    data_batch, marker = dump_log(topic.directory, records=True)
    assert (data_batch["producer_id"], data_batch["is_transactional"], data_batch["crc_valid"]) == (7, True, True)
    assert data_batch["records"] == [{"offset": 0, "timestamp": 5, "key": b"k", "value": b"v",
                                      "headers": (("h", b"1"),)}]
    assert marker["is_control"] and marker["records"] == [{"offset": 1, "control": "COMMIT",
                                                            "coordinator_epoch": 3}]
    state = FileLog(str(tmp_path / "__consumer_offsets-0"), LogConfig(fsync=False))
    state.append(encode_state_records([offset_commit_record("g", "orders", 0, 42, -1, "", 9),
                                       group_metadata_tombstone("g")]), 2, 9)
    state.flush()
    state.close()
    (batch,) = dump_log(state.directory, records=True)
    commit, tombstone = batch["records"]
    assert commit == {"offset": 0, "type": "OffsetCommitKey",
                      "key": {"group": "g", "topic": "orders", "partition": 0},
                      "value": {"offset": 42, "leader_epoch": -1, "metadata": "", "commit_timestamp": 9,
                                "expire_timestamp": -1}}
    assert tombstone["type"] == "GroupMetadataKey" and tombstone["value"] is None


def test_the_cli_dumps_and_verifies_a_data_directory(tmp_path, capsys):
    closed_log(tmp_path, "__share_group_state-1")
    closed_log(tmp_path, "orders-2")
    assert main(["log", "verify", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["__share_group_state-1: ok", "orders-2: ok"]
    assert main(["--output", "json", "log", "dump", str(tmp_path / "orders-2")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["log"] == "orders-2" and rows[0]["base_offset"] == 0 and all(r["crc_valid"] for r in rows)
    assert main(["log", "dump", str(tmp_path / "orders-2")]) == 0
    text = capsys.readouterr().out
    assert "baseOffset: 0 lastOffset: 2 count: 3" in text and "crcValid: true" in text
    active = os.path.join(tmp_path, "orders-2", read_manifest(str(tmp_path / "orders-2")).segments[-1].file)
    flip_byte(active, 50)
    assert main(["log", "verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "orders-2: 1 problem(s)" in out and "error:" in out and "a valid batch follows" in out
    assert main(["log", "verify", str(tmp_path / "missing")]) == 1
    assert "no log or data directory" in capsys.readouterr().err


@pytest.mark.parametrize("records", [False, True])
def test_dump_goes_on_past_an_undecodable_batch_and_stops_at_a_corrupt_one(tmp_path, records):
    log = FileLog(str(tmp_path / "__consumer_offsets-0"), LogConfig(fsync=False))
    log.append(b"\xc1 not msgpack", 1, 0)
    append_kv(log, 2)
    log.flush()
    log.close()
    path = os.path.join(log.directory, log.manifest.segments[-1].file)
    rows = list(dump_log(log.directory, records=records))
    assert [r["base_offset"] for r in rows] == [0, 1]
    if records:
        assert "undecodable" in rows[0]["records"][0]["error"]
    flip_byte(path, rows[1]["position"] + 50)
    rows = list(dump_log(log.directory))
    assert rows[-1]["crc_valid"] is False and rows[-1]["position"] == rows[0]["size"]
