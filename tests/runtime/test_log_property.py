"""Random runs of appends, flushes, rolls and crashes that tear the unflushed tail: after
every reopen the log holds exactly its whole batches, and nothing flushed is ever lost."""
import contextlib
import os
import tempfile

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.log import FileLog, LogConfig, LogWriteError
from runtime.testing import FaultyIO

from .logutil import append_kv, values

steps = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("crash"), st.integers(0, 200)),  # the last n unflushed bytes are lost
    st.tuples(st.just("fail")),  # a failed fsync takes the log offline; it is reopened
), max_size=40)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_the_log_always_holds_its_whole_batches(run):
    with tempfile.TemporaryDirectory() as tmp:
        config = LogConfig(segment_bytes=250, fsync=True)
        io = FaultyIO()
        log = FileLog(tmp, config, io=io)
        unflushed: list[tuple[int, int, int]] = []  # (base offset, start byte, end byte) in the active segment
        for step in run:
            if step[0] == "append":
                segment, start = log.active_segment.file, log.active_segment.size
                base = append_kv(log, step[1])
                if log.active_segment.file != segment:
                    unflushed, start = [], 0  # the roll flushed the closed segment
                unflushed.append((base, start, log.active_segment.size))
            elif step[0] == "flush":
                log.flush()
                unflushed = []
            elif step[0] == "fail":
                io.fail_fsync = True
                with pytest.raises(LogWriteError) if unflushed else contextlib.nullcontext():
                    log.flush()
                io.fail_fsync = False
                log.reopen()
                unflushed = []
            else:
                path = os.path.join(tmp, log.active_segment.file)
                durable_size = unflushed[0][1] if unflushed else log.active_segment.size
                size = max(durable_size, os.path.getsize(path) - step[1])
                torn = [base for base, _, end in unflushed if end > size]
                expected_end = torn[0] if torn else log.end_offset
                log.close()
                with open(path, "r+b") as f:
                    f.truncate(size)
                log = FileLog(tmp, config, io=io)
                assert (log.end_offset, log.durable_offset) == (expected_end, expected_end)
                # A repair is reported exactly when the cut fell inside a batch.
                boundaries = {durable_size} | {end for _, _, end in unflushed}
                assert bool(log.recovered) == (size not in boundaries)
                unflushed = []
            assert log.durable_offset == (unflushed[0][0] if unflushed else log.end_offset)
            # Flushed data reads back whole and in order.
            assert values(log.read()) == list(range(log.durable_offset))
        end = log.end_offset
        log.flush()
        log.close()
        assert values(FileLog(tmp, config).read()) == list(range(end))
