"""confluent-kafka 2.16's ShareConsumer (librdkafka's KIP-932 client), unmodified, against the
gateway: share sessions, explicit and implicit acknowledgement, RELEASE and REJECT, a closed
consumer's records back for the others, and a Kafka and a shoal share consumer in one group."""
from confluent_kafka import AcknowledgeType, ShareConsumer

from tests.conftest import wait_until
from tests.helpers import produce_record_through_gateway, produce_through_gateway, record_states, share_start_offset

CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.heartbeat.interval.ms": 500,
                  "group.share.min.heartbeat.interval.ms": 100}


class BoundedClose:
    """A ShareConsumer whose close() fails the test after `CLOSE_TIMEOUT_S` rather than
    hanging it (one clean-clone run saw librdkafka's close never return, with the group empty
    and idle, which held the whole suite until CI's limit)."""
    CLOSE_TIMEOUT_S = 30

    def __init__(self, consumer):
        self._consumer = consumer

    def __getattr__(self, name):
        return getattr(self._consumer, name)

    def close(self):
        import threading
        closing = threading.Thread(target=self._consumer.close, daemon=True)
        closing.start()
        closing.join(self.CLOSE_TIMEOUT_S)
        assert not closing.is_alive(), f"ShareConsumer.close() still running after {self.CLOSE_TIMEOUT_S}s"


def share_consumer(bootstrap, group, mode="explicit"):
    return BoundedClose(ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": mode}))


def poll_until(consumer, count, acknowledge=None, timeout_s=60):
    got = []

    def step():
        for m in consumer.poll(0.5):
            assert m.error() is None, m.error()
            got.append(m)
            if acknowledge is not None:
                consumer.acknowledge(m, acknowledge)
        return len(got) >= count
    wait_until(step, timeout_s=timeout_s, interval_s=0, message=f"{count} records")
    return got


def test_explicit_acknowledgement_accepts_every_record(cluster, bootstrap):
    cluster.create_topic("sq1", 1)
    produce_through_gateway(bootstrap, "sq1", 10)
    c = share_consumer(bootstrap, "sg1")
    try:
        c.subscribe(["sq1"])
        got = poll_until(c, 10, AcknowledgeType.ACCEPT)
        assert sorted(m.value() for m in got) == sorted(f"v{i}".encode() for i in range(10))
        assert {m.key() for m in got} == {f"k{i}".encode() for i in range(10)}
        outcome = c.commit_sync(30)
        assert outcome and all(v is None for v in outcome.values())
    finally:
        c.close()
    assert record_states(cluster, "sg1", "sq1")["start_offset"] == 10  # all acknowledged: the start moved past them


def test_release_redelivers_and_reject_never_again(cluster, bootstrap):
    cluster.create_topic("sq2", 1)
    produce_through_gateway(bootstrap, "sq2", 2)
    c = share_consumer(bootstrap, "sg2")
    try:
        c.subscribe(["sq2"])
        first = poll_until(c, 2)
        by_offset = {m.offset(): m for m in first}
        c.acknowledge(by_offset[0], AcknowledgeType.RELEASE)
        c.acknowledge(by_offset[1], AcknowledgeType.REJECT)
        assert all(v is None for v in c.commit_sync(30).values())
        (again,) = poll_until(c, 1, AcknowledgeType.ACCEPT)
        assert again.offset() == 0 and again.value() == b"v0"
        assert all(v is None for v in c.commit_sync(30).values())
        s = record_states(cluster, "sg2", "sq2")
        assert s["start_offset"] == 2  # 0 accepted on its second delivery, 1 archived
    finally:
        c.close()


def test_implicit_mode_accepts_on_the_next_poll(cluster, bootstrap):
    cluster.create_topic("sq3", 1)
    produce_through_gateway(bootstrap, "sq3", 5)
    c = share_consumer(bootstrap, "sg3", mode="implicit")
    try:
        c.subscribe(["sq3"])
        poll_until(c, 5)
        wait_until(lambda: not c.poll(0.2) and record_states(cluster, "sg3", "sq3")["start_offset"] == 5,
                   timeout_s=30, interval_s=0, message="the records accepted")
    finally:
        c.close()


def test_a_closed_consumers_records_go_to_another(cluster, bootstrap):
    cluster.create_topic("sq4", 1)
    produce_through_gateway(bootstrap, "sq4", 4)
    first = share_consumer(bootstrap, "sg4")
    first.subscribe(["sq4"])
    held = poll_until(first, 4)
    assert len(held) == 4
    # Closed without acknowledging: in explicit mode nothing was accepted, so the session's
    # end releases them and another member gets them at once, long before their locks end.
    first.close()
    second = share_consumer(bootstrap, "sg4")
    try:
        second.subscribe(["sq4"])
        again = poll_until(second, 4, AcknowledgeType.ACCEPT, timeout_s=20)
        assert sorted(m.offset() for m in again) == [0, 1, 2, 3]
        assert all(v is None for v in second.commit_sync(30).values())
    finally:
        second.close()


def test_a_kafka_and_a_shoal_share_consumer_split_a_queue(cluster, bootstrap):
    cluster.create_topic("sq5", 2)
    produce_through_gateway(bootstrap, "sq5", 40, partitions=2)
    kafka = share_consumer(bootstrap, "sg5")
    shoal = cluster.share_consumer("sg5", share_acknowledgement_mode="explicit", fetch_max_wait_ms=100)
    seen = []
    try:
        kafka.subscribe(["sq5"])
        shoal.subscribe("sq5")

        def step():
            for m in kafka.poll(0.2):
                seen.append(("kafka", m.partition(), m.offset()))
                kafka.acknowledge(m, AcknowledgeType.ACCEPT)
            for r in shoal.poll(0.2):
                seen.append(("shoal", r.partition, r.offset))
                shoal.acknowledge(r)
            kafka.commit_sync(30)
            shoal.commit_sync()
            return len({(p, o) for _, p, o in seen}) >= 40
        wait_until(step, timeout_s=90, interval_s=0, message="40 records")
    finally:
        kafka.close()
        shoal.close()
    # Each record went to one member once: no record was held by both.
    assert len(seen) == len({(p, o) for _, p, o in seen}) == 40


# ------------------------------------------------------------------ on the wire

def test_a_record_on_one_partition_does_not_wait_for_the_others_long_polls(cluster, bootstrap):
    """A ShareFetch answers once a partition has records, as Kafka's does with fetch.min.bytes
    1, not when the long polls of the partitions without any run out: the record comes long
    before the fetch's max wait, handed out once."""
    import time
    cluster.create_topic("sq12", 4)
    produce_through_gateway(bootstrap, "sq12", 4, partitions=4)
    c = BoundedClose(ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "sg12",
                                    "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 10000}))
    try:
        c.subscribe(["sq12"])
        poll_until(c, 4, AcknowledgeType.ACCEPT)  # every SharePartition up, the session open
        assert all(v is None for v in c.commit_sync(30).values())
        for _ in range(3):
            produce_record_through_gateway(bootstrap, "sq12", 2, b"late")
            sent = time.monotonic()
            (m,) = poll_until(c, 1, AcknowledgeType.ACCEPT, timeout_s=30)
            waited = time.monotonic() - sent
            assert (m.partition(), m.value(), m.delivery_count()) == (2, b"late", 1)
            assert waited < 5, f"the record waited {waited:.1f} s for the other partitions' 10 s long polls"
            assert all(v is None for v in c.commit_sync(30).values())
    finally:
        c.close()


def test_share_session_errors_on_the_wire_change_nothing(cluster, bootstrap):
    from runtime.errors import Errors
    from tests.gateway.raw import RawClient
    client = RawClient(bootstrap)
    SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
    cluster.create_topic("sq6", 1)
    produce_through_gateway(bootstrap, "sq6", 1)
    fetch = dict(group_id="sg6", member_id="m-raw", max_wait=0, min_bytes=1, max_bytes=1 << 20, max_records=10,
                 batch_size=10, topics=[], forgotten_topics_data=[])
    # No session for an incremental fetch or acknowledgement; a ShareAcknowledge cannot open one.
    assert client.request(SHARE_FETCH, 1, {**fetch, "share_session_epoch": 1})["error_code"] == \
        Errors.SHARE_SESSION_NOT_FOUND.code
    ack = dict(group_id="sg6", member_id="m-raw", topics=[])
    assert client.request(SHARE_ACKNOWLEDGE, 1, {**ack, "share_session_epoch": 3})["error_code"] == \
        Errors.SHARE_SESSION_NOT_FOUND.code
    assert client.request(SHARE_ACKNOWLEDGE, 1, {**ack, "share_session_epoch": 0})["error_code"] == \
        Errors.INVALID_SHARE_SESSION_EPOCH.code
    # A member the group does not have opens a session but acquires nothing.
    topic_id = cluster.describe_topics(["sq6"])[0].topic_id
    opened = client.request(SHARE_FETCH, 1, {**fetch, "share_session_epoch": 0, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]})
    client.close()
    (part,) = opened["responses"][0]["partitions"]
    assert part["error_code"] == Errors.UNKNOWN_MEMBER_ID.code and not part["acquired_records"]


HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
held = 0
while held < int(sys.argv[4]):
    held += len([m for m in c.poll(0.5) if m.error() is None])
print("HELD", held, flush=True)
sys.stdin.read()  # holds them until killed
"""


def test_a_killed_consumers_records_come_back_when_its_connection_goes(cluster, bootstrap):
    import os
    import signal
    import subprocess
    import sys
    cluster.create_topic("sq7", 1)
    produce_through_gateway(bootstrap, "sq7", 3)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, bootstrap, "sg7", "sq7", "3"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().split() == ["HELD", "3"]
        assert {s[0] for o, s in record_states(cluster, "sg7", "sq7").items() if o != "start_offset"} == {"ACQUIRED"}
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    # Its locks last 30 s; its connection's end releases them at once.
    wait_until(lambda: {s[0] for o, s in record_states(cluster, "sg7", "sq7").items() if o != "start_offset"} ==
               {"AVAILABLE"}, timeout_s=20, message="the killed consumer's records released")
    other = share_consumer(bootstrap, "sg7")
    try:
        other.subscribe(["sq7"])
        again = poll_until(other, 3, AcknowledgeType.ACCEPT)
        assert sorted(m.offset() for m in again) == [0, 1, 2]
        assert all(v is None for v in other.commit_sync(30).values())
    finally:
        other.close()


WORKER = """
import sys
from confluent_kafka import AcknowledgeType, ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
while True:
    got = [m for m in c.poll(0.3) if m.error() is None]
    for m in got:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    if got:
        outcome = c.commit_sync(30)
        done = {(tp.partition) for tp, error in outcome.items() if error is None}
        for m in got:
            if m.partition() in done:
                print("ACK", m.partition(), m.offset(), flush=True)
"""


def test_a_mixed_group_under_random_kills_accepts_every_record_once(cluster, bootstrap):
    """Two confluent ShareConsumers in processes that get SIGKILLed and replaced, and a shoal
    share consumer: every record ends acknowledged, and none was accepted twice (a record held
    by two members at once could be). A worker killed between its commit and its report
    leaves a record out of the ledger, never in it twice."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import threading
    cluster.create_topic("sq8", 2)
    total = 300
    seed = int(os.environ.get("SHOAL_CHAOS_SEED", random.randrange(1 << 30)))  # a fresh one each run
    print(f"seed {seed}")
    rng = random.Random(seed)
    accepted: list[tuple[str, int, int]] = []
    lock = threading.Lock()

    def start(i: int) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", WORKER, bootstrap, "sg8", "sq8"], stdout=subprocess.PIPE,
                                text=True)

        def read():
            for line in proc.stdout:
                _, p, o = line.split()
                with lock:
                    accepted.append((f"kafka-{i}", int(p), int(o)))
        threading.Thread(target=read, daemon=True).start()
        return proc

    procs = {i: start(i) for i in range(2)}
    shoal = cluster.share_consumer("sg8", share_acknowledgement_mode="explicit", fetch_max_wait_ms=100)
    shoal.subscribe("sq8")
    p = cluster.producer(linger_ms=5)
    try:
        for i in range(total):
            p.send("sq8", f"v{i}".encode(), partition=i % 2)
            if i % 50 == 49:
                p.flush()
                victim = rng.choice(sorted(procs))
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                procs[victim] = start(victim + 10 * (i // 50))
        p.flush()
        # The workers last replaced take seconds to start and join: the shoal consumer waits
        # until one of them has accepted a record, lest it drain the queue alone.
        wait_until(lambda: any(who.startswith("kafka") for who, _, _ in list(accepted)), timeout_s=120,
                   message="a Kafka worker accepting a record")
        shoal_assigned = set()

        def step():
            shoal_assigned.update(shoal.assignment())
            records = shoal.poll(0.2)
            for r in records:
                shoal.acknowledge(r)
            if records:
                outcome = shoal.commit_sync()
                with lock:
                    accepted.extend(("shoal", r.partition, r.offset) for r in records
                                    if outcome.get((r.topic, r.partition)) is None)
            # A partition no member has fetched yet has no SharePartition to ask (-1).
            return all(share_start_offset(cluster, "sg8", "sq8", q) == total // 2 for q in range(2))
        wait_until(step, timeout_s=180, interval_s=0, message=f"{total} records acknowledged")
    finally:
        p.close()
        shoal.close()
        for proc in procs.values():
            proc.kill()
            proc.wait()
    with lock:
        keys = [(q, o) for _, q, o in accepted]
    assert len(keys) == len(set(keys)), f"seed {seed}: a record accepted twice"
    assert len(keys) > total * 0.9 and {o for _, o in keys} <= set(range(total // 2))
    assert "kafka" in {who.split("-")[0] for who, _, _ in accepted}
    assert shoal_assigned  # the shoal consumer shared the partitions (the faster prefetch may win them all)


def test_a_session_names_the_deliveries_it_was_handed_and_a_new_one_keeps_its_own(cluster, bootstrap):
    """Raw ShareFetch and ShareAcknowledge: a session opened again releases what the old one
    held before it acquires, so what the new answer hands out stays held, and the session
    names the delivery of each offset it handed out, so its acknowledgement holds."""
    from runtime.errors import Errors
    from tests.gateway.raw import RawClient
    SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
    cluster.create_topic("sq9", 1)
    produce_through_gateway(bootstrap, "sq9", 4)
    topic_id = cluster.describe_topics(["sq9"])[0].topic_id
    client = RawClient(bootstrap)
    member = "m-raw-9"

    def heartbeat(epoch):
        return client.request(SHARE_GROUP_HEARTBEAT, 1, dict(group_id="sg9", member_id=member, member_epoch=epoch,
                                                              rack_id=None, subscribed_topic_names=["sq9"]))
    epoch = heartbeat(0)["member_epoch"]
    wait_until(lambda: (heartbeat(epoch)["assignment"] or {}).get("topic_partitions"), message="sq9 assigned")
    fetch = dict(group_id="sg9", member_id=member, max_wait=2000, min_bytes=1, max_bytes=1 << 20, max_records=2,
                 batch_size=2, forgotten_topics_data=[],
                 topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}])

    def acquired(response):
        (part,) = response["responses"][0]["partitions"]
        return [(a["first_offset"], a["last_offset"]) for a in part["acquired_records"]]
    first = client.request(SHARE_FETCH, 1, {**fetch, "share_session_epoch": 0})
    assert acquired(first) == [(0, 3)] and first["acquisition_lock_timeout"] > 0  # one log batch
    again = client.request(SHARE_FETCH, 1, {**fetch, "share_session_epoch": 0})  # opened again
    assert acquired(again) == [(0, 3)]  # given back by the old session's end, then acquired anew
    assert {o: s[:3] for o, s in record_states(cluster, "sg9", "sq9").items() if o != "start_offset"} == {
        o: ("ACQUIRED", 1, member) for o in range(4)}  # the old session's delivery was given back

    def acknowledge(session_epoch, first_offset, last_offset):
        response = client.request(SHARE_ACKNOWLEDGE, 1, dict(
            group_id="sg9", member_id=member, share_session_epoch=session_epoch, topics=[
                {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": first_offset, "last_offset": last_offset, "acknowledge_types": [1]}]}]}]))
        (part,) = response["responses"][0]["partitions"]
        return Errors.for_code(part["error_code"])
    assert acknowledge(1, 4, 5) is Errors.INVALID_REQUEST  # past anything acquired, as Kafka answers
    assert acknowledge(2, 0, 3) is Errors.NONE
    assert record_states(cluster, "sg9", "sq9")["start_offset"] == 4
    heartbeat(-1)
    client.close()


def test_acknowledgements_of_a_deleted_topic_are_refused_and_the_other_topic_goes_on(cluster, bootstrap):
    """librdkafka's 0176/0181: acknowledgements committed after their topic was deleted get a
    per-partition error (Kafka's UNKNOWN_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION), not a silent
    success; the consumer goes on with the topic that stays, and its acknowledgements hold."""
    cluster.create_topic("sq13-gone", 1)
    cluster.create_topic("sq13-kept", 1)
    c = share_consumer(bootstrap, "sg13")
    try:
        c.subscribe(["sq13-gone", "sq13-kept"])
        produce_through_gateway(bootstrap, "sq13-kept", 3)
        assert {m.topic() for m in poll_until(c, 3, AcknowledgeType.ACCEPT)} == {"sq13-kept"}
        assert all(v is None for v in c.commit_sync(30).values())
        produce_through_gateway(bootstrap, "sq13-gone", 3)
        assert {m.topic() for m in poll_until(c, 3, AcknowledgeType.ACCEPT)} == {"sq13-gone"}
        cluster.delete_topic("sq13-gone")
        outcome = {tp.topic: error for tp, error in c.commit_sync(30).items()}
        assert set(outcome) == {"sq13-gone"} and outcome["sq13-gone"] is not None, outcome
        assert outcome["sq13-gone"].args[0].name() in ("UNKNOWN_TOPIC_ID", "UNKNOWN_TOPIC_OR_PART"), outcome
        produce_through_gateway(bootstrap, "sq13-kept", 3, start=3)
        more = poll_until(c, 3, AcknowledgeType.ACCEPT, timeout_s=30)
        assert {m.topic() for m in more} == {"sq13-kept"}
        assert all(v is None for v in c.commit_sync(30).values())
    finally:
        c.close()
    assert record_states(cluster, "sg13", "sq13-kept")["start_offset"] == 6
