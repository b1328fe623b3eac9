"""Typed, versioned records and their msgpack encoding."""
from typing import NamedTuple

import msgpack
import pytest

from runtime import codec
from runtime.codec import Record, decode_records, encode_records, record_type, register
from runtime.errors import CorruptRecordError

from .kv_shard import KvKey, KvValue


class CodecPart(NamedTuple):
    partition: int
    offsets: tuple = ()


class CodecKey(NamedTuple):
    group: str


class CodecValue(NamedTuple):
    parts: tuple  # of CodecPart
    leader: CodecPart | None = None
    by_topic: dict | None = None  # topic -> CodecPart
    note: str = ""
    __nested__ = {"parts": [CodecPart], "leader": CodecPart, "by_topic": {"": CodecPart}}


register(901, CodecKey, CodecValue, version=2)


class OldKey(NamedTuple):
    name: str


class OldValue(NamedTuple):
    count: int
    label: str = "none"  # added in a later version
    flags: tuple = ()


register(902, OldKey, OldValue, version=1)


def round_trip(records, base_offset=0):
    return decode_records(encode_records(records), base_offset, log="__test-0")


def test_round_trip_keeps_types_and_values():
    records = [Record(KvKey("a"), KvValue(1, "x")), Record(KvKey("b"), KvValue(2, "", 50))]
    decoded = round_trip(records)
    assert decoded == records
    assert [type(r.key) for r in decoded] == [KvKey, KvKey]
    assert [type(r.value) for r in decoded] == [KvValue, KvValue]
    assert decoded[0].type is record_type(900)
    assert record_type(900).name == "Kv"


def test_tombstone_round_trips_as_none():
    (decoded,) = round_trip([Record(KvKey("a"))])
    assert decoded == Record(KvKey("a"), None)
    assert decoded.is_tombstone and decoded.value is None


def test_nested_fields_are_rebuilt():
    value = CodecValue((CodecPart(0, (1, 2)), CodecPart(1)), CodecPart(7, (3,)),
                       {"t1": CodecPart(2, (9,)), "t2": CodecPart(3)}, "n")
    (decoded,) = round_trip([Record(CodecKey("g"), value)])
    assert decoded.value == value
    assert type(decoded.value.parts[1]) is CodecPart
    assert type(decoded.value.leader) is CodecPart
    assert type(decoded.value.by_topic["t1"]) is CodecPart
    empty = CodecValue((), None, None)
    assert round_trip([Record(CodecKey("g"), empty)])[0].value == empty


def test_an_older_version_with_fewer_fields_decodes_with_the_defaults():
    # What an older writer put on disk: [type_id, version, key, value with fewer fields].
    payload = msgpack.packb([[902, 0, ["k"], [5]], [901, 1, ["g"], [[[1]]]]], use_bin_type=True)
    old, nested = decode_records(payload, 10)
    assert old == Record(OldKey("k"), OldValue(5, "none", ()))
    assert nested.value == CodecValue((CodecPart(1, ()),), None, None, "")


def test_more_fields_than_the_class_has_is_corrupt():
    payload = msgpack.packb([[902, 1, ["k"], [5, "l", [], "extra"]]], use_bin_type=True)
    with pytest.raises(CorruptRecordError, match=r"corrupt Old record.*\(log x, offset 3\)"):
        decode_records(payload, 3, log="x")


def test_unknown_type_names_the_offset():
    payload = msgpack.packb([[900, 0, ["a"], [1]], [977, 0, ["k"], [1]]], use_bin_type=True)
    with pytest.raises(CorruptRecordError) as info:
        decode_records(payload, 40, log="__consumer_offsets-1")
    assert "unknown record type 977" in str(info.value)
    assert (info.value.log, info.value.offset) == ("__consumer_offsets-1", 41)


@pytest.mark.parametrize("payload, offset", [
    (b"\xc1\x00\x01", 20),  # 0xc1 is never used by msgpack
    (msgpack.packb([[900, 0, ["a"], [1]]])[:-2], 20),  # cut short
    (msgpack.packb({"not": "a list"}), 20),
    (msgpack.packb([[900, 0, ["a"], [1]], [900, 0]]), 21),  # an entry with two fields
    (msgpack.packb([[900, 0, ["a"], [1]], 7]), 21),
    (msgpack.packb([[900, 0, ["a"], 5]]), 20),  # value is not an array
    (msgpack.packb([[900, 0, "a", [1]]]), 20),  # a string of the key's length
    (msgpack.packb([[901, 0, ["g"], [[{"x": 1}]]]]), 20),  # a map where a nested array belongs
])
def test_corrupt_bytes_fail_with_the_offset(payload, offset):
    with pytest.raises(CorruptRecordError) as info:
        decode_records(payload, 20, log="L")
    assert info.value.offset == offset and info.value.log == "L"


def test_encoding_checks_types():
    class Unregistered(NamedTuple):
        x: int
    with pytest.raises(TypeError):
        encode_records([Record(Unregistered(1), None)])
    with pytest.raises(TypeError):
        encode_records([Record(KvKey("a"), OldValue(1))])


def test_record_ids_are_not_reused():
    class Other(NamedTuple):
        key: str
    with pytest.raises(ValueError, match="taken"):
        register(900, Other, KvValue)
    with pytest.raises(ValueError):
        register(903, Other, KvValue, compaction="sometimes")


def test_nothing_is_pickled():
    # The encoding is plain msgpack: another language can read it, and no pickle opcode
    # (protocol marker 0x80) starts the payload.
    payload = encode_records([Record(KvKey("a"), KvValue(1, "x", 9))])
    assert msgpack.unpackb(payload) == [[900, 0, ["a"], [1, "x", 9]]]
    source = open(codec.__file__).read() + open(codec.__file__.replace("codec.py", "log.py")).read()
    assert "import pickle" not in source


def test_as_dict():
    value = CodecValue((CodecPart(0, (1,)),), None, {"t": CodecPart(1)})
    assert codec.as_dict(value) == {"parts": [{"partition": 0, "offsets": [1]}], "leader": None,
                                    "by_topic": {"t": {"partition": 1, "offsets": []}}, "note": ""}


def test_replay_entries_hands_over_records_and_names_the_bad_offset():
    from runtime.codec import replay_entries
    seen = []
    entries = codec.unpack(encode_records([Record(KvKey("a"), KvValue(1)), Record(KvKey("b"))]))
    assert replay_entries(entries, 7, lambda offset, record: seen.append((offset, record)), "L") == 2
    assert seen == [(7, Record(KvKey("a"), KvValue(1))), (8, Record(KvKey("b")))]
    bad = codec.unpack(msgpack.packb([[900, 0, ["a"], [1]], [977, 0, ["k"], [1]]]))
    seen.clear()
    with pytest.raises(CorruptRecordError) as info:
        replay_entries(bad, 7, lambda offset, record: seen.append(offset), "L")
    assert (info.value.offset, info.value.log, seen) == (8, "L", [7])

    def failing(offset, record):
        raise KeyError("a bug in a replay handler")
    with pytest.raises(KeyError):  # not dressed up as corruption
        replay_entries(entries, 0, failing)
