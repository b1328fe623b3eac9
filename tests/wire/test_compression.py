"""The batch codecs: every one round-trips; snappy reads both the xerial stream that Kafka's
Java client writes and the single raw block librdkafka may write; bad data is CORRUPT_MESSAGE."""
import cramjam
import pytest

from runtime.errors import Errors, KafkaError
from runtime.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress

DATA = bytes(range(256)) * 500  # over one 32 KiB xerial block


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_round_trip(codec):
    assert decompress(codec, compress(codec, DATA)) == DATA


def test_snappy_is_written_in_xerial_framing():
    assert compress(SNAPPY, DATA).startswith(b"\x82SNAPPY\x00")


def test_a_raw_snappy_block_is_read():
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(DATA))) == DATA


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD, 5])
def test_garbage_is_corrupt(codec):
    with pytest.raises(KafkaError) as e:
        decompress(codec, b"\x82SNAPPY\x00garbage" if codec == SNAPPY else b"garbage")
    assert e.value.error is Errors.CORRUPT_MESSAGE
