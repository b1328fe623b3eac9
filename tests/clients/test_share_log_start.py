"""The share-partition start offset when retention moves the log start offset, on real
actors. As in Kafka (ShareFetchUtils: updateCacheAndOffsets on OFFSET_OUT_OF_RANGE only), the
share partition takes the log start offset up only when a read from below it is refused, so
reads past it leave the start offset (the group's position) where Kafka's would be."""
import ray

from actors import AcknowledgeType
from runtime.messages.topics import DeleteRecordsRequest, ListOffsetsRequest
from runtime.share.partition import EARLIEST_TIMESTAMP
from tests.helpers import poll_records, share_start_offset
from tests.conftest import wait_until

LOCK_MS = 12000  # outlasts the steps before the locks must expire, with room for a loaded machine
CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS,
                  "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100}
FAST = dict(fetch_max_wait_ms=100)


def test_the_start_offset_takes_the_log_start_offset_up_when_kafkas_does(cluster):
    cluster.create_topic("short", 1, {"segment.bytes": 2000, "retention.bytes": 4000})
    with cluster.producer(linger_ms=0, batch_size=1) as producer:
        for i in range(30):
            producer.send("short", bytes(300)).get(10)
    holder = cluster.share_consumer("g-short", share_acknowledgement_mode="explicit", **FAST)
    holder.subscribe("short")
    held = sorted(poll_records(holder, 30), key=lambda r: r.offset)
    for r in held[10:]:
        holder.acknowledge(r)
    assert set(holder.commit_sync().values()) == {None}
    # The fetch its last poll left under way would take the late record below: it ends
    # first. Then 0-9 stay held until their locks expire, as the holder fetches no more.
    wait_until(lambda: not holder._call("state")["fetching"], message="the holder's last fetch over")
    holder._abandon()  # as if its process died: no acknowledgement, no leave

    leader = cluster.partition_leader("short", 0)
    assert ray.get(leader.apply_retention.remote())
    log_start = ray.get(leader.list_offsets.remote(ListOffsetsRequest("short", 0, EARLIEST_TIMESTAMP))).offset
    assert 10 < log_start < 30
    with cluster.producer(linger_ms=0) as producer:
        producer.send("short", b"late").get(10)
    with cluster.share_consumer("g-short", share_acknowledgement_mode="explicit", **FAST) as other:
        other.subscribe("short")
        (late,) = poll_records(other, 1)
        assert late.offset == 30
        other.acknowledge(late)
        assert set(other.commit_sync().values()) == {None}
        # The reads from 30 on were not refused: the start offset stays, held back by 0-9
        # (shoal used to take the log start offset from any read, and skip on to 31).
        assert share_start_offset(cluster, "g-short", "short") == 0

        # Once their locks expire, the read from 0 is refused: 0-9 are archived, not
        # delivered again, and the start offset moves past the log start offset.
        def step():
            assert other.poll(0.2) == []
            return share_start_offset(cluster, "g-short", "short") >= log_start
        wait_until(step, timeout_s=LOCK_MS / 1000 + 30, interval_s=0, message="the start offset past the log start")


def test_records_deleted_while_available_are_archived_not_delivered(cluster):
    """DeleteRecords past records a share group released: the next read from them is refused
    (OFFSET_OUT_OF_RANGE), so they are archived, never delivered again, and the start offset
    takes the new log start (it moves on past the settled records after it with the next
    change, as in Kafka)."""
    cluster.create_topic("trimmed", 1)
    with cluster.producer(linger_ms=0) as producer:
        for i in range(10):
            producer.send("trimmed", b"v%d" % i).get(10)
    with cluster.share_consumer("g-trimmed", share_acknowledgement_mode="explicit", **FAST) as c:
        c.subscribe("trimmed")
        got = sorted(poll_records(c, 10), key=lambda r: r.offset)
        for r in got:
            c.acknowledge(r, AcknowledgeType.RELEASE if r.offset < 6 else AcknowledgeType.ACCEPT)
        assert set(c.commit_sync().values()) == {None}
        deleted = ray.get(cluster.partition_leader("trimmed", 0).delete_records.remote(
            DeleteRecordsRequest("trimmed", 0, 6)))
        assert (deleted.error_code, deleted.low_watermark) == (0, 6)

        def step():
            assert c.poll(0.2) == []  # 0-5 are not delivered again
            return share_start_offset(cluster, "g-trimmed", "trimmed") >= 6
        wait_until(step, timeout_s=30, interval_s=0, message="the start offset past the deleted records")
        for _ in range(5):
            assert c.poll(0.2) == []
