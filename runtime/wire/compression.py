"""The compression codecs of record batches (the low three bits of a batch's attributes),
through cramjam.

Snappy has two framings in Kafka's world: the Java client writes xerial's stream format
(snappy-java's SnappyOutputStream: a magic header, then length-prefixed raw blocks) and
librdkafka may write one raw block; both are read, xerial is written as the Java client
does. LZ4 is the standard LZ4 frame format (magic 2 fixed Kafka's old framing bug).
"""
from __future__ import annotations

import struct

import cramjam

from ..errors import Errors, KafkaError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version, compatible version
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_INT = struct.Struct(">i")


def _snappy_compress(data: bytes) -> bytes:
    out = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start:start + _XERIAL_BLOCK]))
        out += [_INT.pack(len(block)), block]
    return b"".join(out)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    if len(data) < len(_XERIAL_HEADER):
        raise ValueError("a truncated xerial snappy header")
    out, pos = [], len(_XERIAL_HEADER)
    while pos < len(data):
        (size,) = _INT.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError("a truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos:pos + size])))
        pos += size
    return b"".join(out)


_CODECS = {
    GZIP: (lambda d: bytes(cramjam.gzip.compress(d)), lambda d: bytes(cramjam.gzip.decompress(d))),
    SNAPPY: (_snappy_compress, _snappy_decompress),
    LZ4: (lambda d: bytes(cramjam.lz4.compress(d)), lambda d: bytes(cramjam.lz4.decompress(d))),
    ZSTD: (lambda d: bytes(cramjam.zstd.compress(d)), lambda d: bytes(cramjam.zstd.decompress(d))),
}


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    return _CODECS[codec][0](data)


def decompress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec not in _CODECS:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"unknown compression codec {codec}")
    try:
        return _CODECS[codec][1](data)
    except Exception as e:  # each library raises its own type
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"{NAMES[codec]} data does not decompress: {e}") from None
