"""Random runs of writes, flushes, disk failures and restarts: the shard's state is always
the replay of what was acknowledged plus what is pending, and a failed flush takes exactly the
pending part away."""
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.coordinator import CoordinatorState
from runtime.errors import KafkaError
from runtime.testing import ShardHarness

from .kv_shard import KvShard

KEYS = ["a", "b", "c"]
steps = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.integers(0, 9)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("fail"), st.integers(0, 60)),  # the disk fills up after n bytes
    st.tuples(st.just("reload")),
), max_size=40)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_state_is_always_the_acknowledged_writes_plus_the_pending_ones(run):
    with tempfile.TemporaryDirectory() as tmp:
        h = ShardHarness(tmp, KvShard, auto_flush=False, config={"segment.bytes": 150})
        durable: dict = {}
        pending: list = []  # (PendingWrite, key, value or None)
        expected = dict(durable)
        for step in run:
            if step[0] == "put":
                _, key, value = step
                pending.append((h.write(lambda s, now: s.put(key, value, now)), key, value))
                expected[key] = value
            elif step[0] == "delete":
                try:
                    p = h.write(lambda s, now: s.delete(step[1]))
                except KafkaError:
                    assert step[1] not in expected
                    continue
                pending.append((p, step[1], None))
                expected.pop(step[1])
            elif step[0] == "fail":
                h.io.fail_after_bytes = step[1]
                h.runtime.flush(h.clock())
                h.io.fail_after_bytes = None
                if h.runtime.state is CoordinatorState.FAILED:
                    # The log went offline and its reopen failed on the full disk too: the
                    # owner loads again once the disk has room (ShardHost retries).
                    h.runtime.load_all(h.clock())
            elif step[0] == "flush":
                h.runtime.flush(h.clock())
            else:
                h.reload()
            if all(p.done for p, _, _ in pending):
                for p, key, value in pending:
                    if p.error is None:
                        if value is None:
                            durable.pop(key)
                        else:
                            durable[key] = value
                failed = any(p.error is not None for p, _, _ in pending)
                assert not failed or all(p.error is not None and p.error.retriable for p, _, _ in pending)
                pending = []
                expected = dict(durable)
            assert not any(p.done for p, _, _ in pending)
            assert h.shard.data == expected
        h.runtime.flush(h.clock())
        if all(p.error is None for p, _, _ in pending):
            for _, key, value in pending:
                if value is None:
                    durable.pop(key)
                else:
                    durable[key] = value
        assert h.reload().data == durable
