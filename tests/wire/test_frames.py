"""Size-prefixed frames (Kafka's NetworkReceive): a size, then the payload; a declared size
that is negative or above socket.request.max.bytes breaks the connection before anything
of the frame is buffered."""
import struct

import pytest

from runtime.wire.frames import SOCKET_REQUEST_MAX_BYTES, FrameError, FrameReader, frame


def test_frames_arrive_in_any_cut():
    stream = frame(b"one") + frame(b"") + frame(b"three")
    for cut in range(len(stream) + 1):
        reader, got = FrameReader(), []
        for part in (stream[:cut], stream[cut:]):
            reader.feed(part)
            while (f := reader.next_frame()) is not None:
                got.append(f)
        assert got == [b"one", b"", b"three"]
        assert not reader.partial


def test_half_a_frame_waits():
    reader = FrameReader()
    reader.feed(frame(b"abcdef")[:7])
    assert reader.next_frame() is None
    assert reader.partial


def test_socket_request_max_bytes_is_kafkas_default():
    assert SOCKET_REQUEST_MAX_BYTES == 100 * 1024 * 1024


@pytest.mark.parametrize("size", [-1, -2**31, SOCKET_REQUEST_MAX_BYTES + 1, 2**31 - 1])
def test_a_size_out_of_bounds_is_refused_on_its_four_bytes(size):
    reader = FrameReader()
    reader.feed(struct.pack(">i", size)[:3])
    with pytest.raises(FrameError):
        reader.feed(struct.pack(">i", size)[3:])
    assert not reader.partial  # nothing kept


def test_a_size_at_the_limit_is_taken():
    reader = FrameReader(max_bytes=8)
    reader.feed(frame(b"12345678"))
    assert reader.next_frame() == b"12345678"
