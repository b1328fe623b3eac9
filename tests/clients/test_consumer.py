"""The classic consumer end to end on real actors: a group of consumers shares a topic,
commits, rebalances on join, leave and crash, and resumes from committed offsets."""
import ray

from actors import OffsetAndMetadata, TopicPartition
from runtime.messages.topics import ListOffsetsRequest
from tests.helpers import Recorder, owns_each_once, poll_consumers_until, produce_values

CLUSTER_CONFIG = {"group.min.session.timeout.ms": 200, "group.initial.rebalance.delay.ms": 0}
CLUSTER_TOPICS = {"orders": 6}
FAST = dict(session_timeout_ms=2000, heartbeat_interval_ms=150, fetch_max_wait_ms=200, auto_offset_reset="earliest",
            enable_auto_commit=False, max_poll_interval_ms=20000)
ALL = {TopicPartition("orders", p) for p in range(6)}


def test_three_consumers_share_commit_rebalance_and_resume(cluster):
    produce_values(cluster, "orders", [f"a{i}" for i in range(60)], keyed=True)
    # auto commit also commits before partitions are revoked: no record is seen twice
    settings = dict(FAST, enable_auto_commit=True, auto_commit_interval_ms=300)
    c1 = cluster.consumer("g-main", **settings)
    c1.subscribe(["orders"])
    seen = poll_consumers_until([c1], lambda: c1.assignment() == ALL, message="c1 owns everything")
    c2, c3 = cluster.consumer("g-main", **settings), cluster.consumer("g-main", **settings)
    c2.subscribe(["orders"])
    c3.subscribe("orders")
    group = [c1, c2, c3]
    poll_consumers_until(group, lambda: owns_each_once(group, ALL) and len(seen) >= 60, seen,
                         message="three own each once")
    assert sorted(seen) == sorted(f"a{i}" for i in range(60))
    assert [len(c.assignment()) for c in group] == [2, 2, 2]
    for c in group:
        c.commit()
    for tp in ALL:
        owner = next(c for c in group if tp in c.assignment())
        assert c1.committed(tp) == OffsetAndMetadata(owner.position(tp), "", -1)

    c3.close()  # leaves: the other two take its partitions
    produce_values(cluster, "orders", [f"b{i}" for i in range(30)], keyed=True)
    group = [c1, c2]
    poll_consumers_until(group, lambda: owns_each_once(group, ALL) and sum(v.startswith("b") for v in seen) >= 30, seen,
                         message="two own each once")
    assert sorted(v for v in seen if v.startswith("b")) == sorted(f"b{i}" for i in range(30))
    for c in group:
        c.commit()
        c.close()

    produce_values(cluster, "orders", [f"c{i}" for i in range(12)], keyed=True)
    resumed = cluster.consumer("g-main", **FAST)
    resumed.subscribe(["orders"])
    later = []
    poll_consumers_until([resumed], lambda: len(later) >= 12, later, message="resume")
    assert sorted(later) == sorted(f"c{i}" for i in range(12))  # from the committed offsets on
    resumed.close()


def end_offsets(cluster):
    return {tp: ray.get(cluster.partition_leader(*tp).list_offsets.remote(ListOffsetsRequest(*tp))).offset
            for tp in ALL}


def test_a_killed_consumer_loses_its_partitions_after_the_session_timeout(cluster):
    produce_values(cluster, "orders", [f"k{i}" for i in range(24)], keyed=True)
    end = end_offsets(cluster)
    c1, c2 = cluster.consumer("g-kill", **FAST), cluster.consumer("g-kill", **FAST)
    c1.subscribe(["orders"])
    c2.subscribe(["orders"])
    both = [c1, c2]
    poll_consumers_until(both, lambda: owns_each_once(both, ALL) and all(
        next(c for c in both if tp in c.assignment()).position(tp) == end[tp] for tp in ALL), message="all read")
    c1.commit()
    c2.commit()
    taken = c2.assignment()
    ray.kill(c2._actor)  # a crash: no LeaveGroup
    poll_consumers_until([c1], lambda: c1.assignment() == ALL, timeout_s=30, message="c1 takes over")
    assert {tp: c1.committed(tp) for tp in ALL} == {tp: OffsetAndMetadata(end[tp], "", -1) for tp in ALL}
    assert {tp: c1.position(tp) for tp in taken} == {tp: end[tp] for tp in taken}  # where c2 committed
    c1.close()


def test_cooperative_sticky_never_gives_a_partition_to_two_consumers(cluster):
    settings = dict(FAST, partition_assignment_strategy=["cooperative-sticky"])
    listeners = [Recorder(), Recorder(), Recorder()]
    consumers = []
    by_generation: dict[int, dict] = {}

    def sample():
        for i, c in enumerate(consumers):
            state = ray.get(c._actor.group_state.remote())
            if state["state"] == "stable":
                by_generation.setdefault(state["generation"], {})[i] = set(map(tuple, state["assignment"]))
        return owns_each_once(consumers, ALL)

    for i in range(3):
        c = cluster.consumer("g-coop", **settings)
        c.subscribe(["orders"], listener=listeners[i])
        consumers.append(c)
        poll_consumers_until(consumers, sample, message=f"{i + 1} cooperative consumers settle")
    for generation, owned in by_generation.items():
        parts = [p for ps in owned.values() for p in ps]
        assert len(parts) == len(set(parts)), f"generation {generation}: a partition has two owners"
    # Sticky and incremental: the first consumer only ever gave up what moved away.
    first = listeners[0].events
    assert first[0] == ("assigned", frozenset(ALL))
    revoked = [ps for kind, ps in first if kind == "revoked"]
    assert all(len(ps) < 6 for ps in revoked) and len(consumers[0].assignment()) == 2
    assert not any(kind == "lost" for lst in listeners for kind, _ in lst.events)
    for c in consumers:
        c.close()
    assert listeners[0].events[-1][0] == "revoked"  # close runs on_partitions_revoked


def test_a_fetch_max_bytes_smaller_than_a_batch_still_reads_every_partition_in_turn(cluster):
    """fetch_max_bytes=1: each Fetch of the host carries one batch (the first partition's
    first, for progress), and the partitions that got records longest ago go first, so no
    partition waits for another to be read to its end."""
    cluster.create_topic("fmb-c", 3)
    with cluster.producer(linger_ms=0) as producer:
        for n in range(10):
            for p in range(3):
                producer.send("fmb-c", f"{p}-{n}".encode(), partition=p).get(30)
    consumer = cluster.consumer(None, auto_offset_reset="earliest", fetch_max_bytes=1)
    consumer.assign([TopicPartition("fmb-c", p) for p in range(3)])
    got = []
    while len(got) < 30:
        for tp, records in consumer.poll(timeout_ms=5000).items():
            got += [r.value.decode() for r in records]
    consumer.close(autocommit=False)
    assert sorted(got) == sorted(f"{p}-{n}" for n in range(10) for p in range(3))
    # In turn: by the time half the records are in, every partition has given some.
    assert {v.split("-")[0] for v in got[:15]} == {"0", "1", "2"}
