"""`shoal groups|share-groups|transactions` in-process against real actors: tables and JSON
checked against the offsets committed and the log end offsets produced here; bad input is one
line with Kafka's error name, a non-zero exit, and no change."""
import json

import pytest

from actors import AcknowledgeType, OffsetAndMetadata, TopicPartition
from actors.cli.main import main
from tests.conftest import wait_until

CLUSTER_CONFIG = {"group.min.session.timeout.ms": 200, "group.initial.rebalance.delay.ms": 0,
                  "share.auto.offset.reset": "earliest"}
FAST = dict(session_timeout_ms=3000, heartbeat_interval_ms=150, fetch_max_wait_ms=200, auto_offset_reset="earliest",
            enable_auto_commit=False, max_poll_interval_ms=20000)
T = "clicks"
TP = [TopicPartition(T, p) for p in range(2)]
COUNTS = (8, 12)


@pytest.fixture(scope="module")
def cluster(cluster):
    """The module's cluster, with COUNTS records in T's partitions."""
    cluster.create_topic(T, 2)
    with cluster.producer(linger_ms=1) as producer:
        for p, count in enumerate(COUNTS):
            for i in range(count):
                producer.send(T, f"{p}-{i}".encode(), partition=p, timestamp_ms=1_700_000_000_000 + i * 1000)
        producer.flush()
    return cluster


@pytest.fixture
def shoal(cluster, capsys):
    def run(*argv, output="table"):
        code = main(["--namespace", cluster.namespace, "--output", output, *argv])
        out, err = capsys.readouterr()
        return code, (json.loads(out) if output == "json" and code == 0 else out), err
    return run


@pytest.fixture(scope="module")
def active(cluster):
    """A consumer of group g-cli that owns both partitions and committed 3 and 12."""
    c = cluster.consumer("g-cli", client_id="cli-client", **FAST)
    c.subscribe([T])
    wait_until(lambda: c.poll(timeout_ms=50) is not None and c.assignment() == set(TP), message="assigned")
    c.commit({TP[0]: OffsetAndMetadata(3), TP[1]: OffsetAndMetadata(12)})
    yield c
    c.close()


def one_error_line(err: str, name: str) -> bool:
    lines = err.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith(f"error: {name}")


def committed(cluster, group):
    with cluster.admin() as admin:
        return {tp: o.committed_offset for tp, o in admin.list_group_offsets(group).items()}


def test_list_and_describe_an_active_group(cluster, shoal, active):
    code, out, _ = shoal("groups", "list")
    assert code == 0
    assert out.splitlines()[0].split() == ["GROUP", "TYPE", "PROTOCOL", "STATE"]
    assert ["g-cli", "classic", "consumer", "Stable"] in [line.split() for line in out.splitlines()]

    code, rows, _ = shoal("groups", "describe", "--group", "g-cli", output="json")
    member = rows[0]["CONSUMER-ID"]
    assert code == 0 and member
    assert rows == [
        {"GROUP": "g-cli", "TOPIC": T, "PARTITION": 0, "CURRENT-OFFSET": 3, "LOG-END-OFFSET": 8, "LAG": 5,
         "CONSUMER-ID": member, "HOST": rows[0]["HOST"], "CLIENT-ID": "cli-client"},
        {"GROUP": "g-cli", "TOPIC": T, "PARTITION": 1, "CURRENT-OFFSET": 12, "LOG-END-OFFSET": 12, "LAG": 0,
         "CONSUMER-ID": member, "HOST": rows[0]["HOST"], "CLIENT-ID": "cli-client"}]
    code, out, _ = shoal("groups", "describe", "--group", "g-cli")
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                        "HOST", "CLIENT-ID"]
    assert lines[1][:6] == ["g-cli", T, "0", "3", "8", "5"] and lines[1][-1] == "cli-client"

    code, rows, _ = shoal("groups", "describe", "--group", "g-cli", "--members", "--verbose", output="json")
    assert [(r["CONSUMER-ID"], r["CLIENT-ID"], r["#PARTITIONS"], r["CURRENT-ASSIGNMENT"]) for r in rows] == [
        (member, "cli-client", 2, f"{T}:0|1")]
    code, rows, _ = shoal("groups", "describe", "--group", "g-cli", "--state", output="json")
    assert [(r["GROUP"], r["TYPE"], r["ASSIGNMENT-STRATEGY"], r["STATE"], r["#MEMBERS"]) for r in rows] == [
        ("g-cli", "classic", "range", "Stable", 1)]


def test_resets_of_an_active_group_are_refused(cluster, shoal, active):
    for spec in (["--to-earliest", "--execute"], ["--to-earliest", "--dry-run"]):
        code, out, err = shoal("groups", "reset-offsets", "--group", "g-cli", "--all-topics", *spec)
        assert code == 1 and one_error_line(err, "NON_EMPTY_GROUP") and "Stable" in err and out == ""
    assert committed(cluster, "g-cli") == {TP[0]: 3, TP[1]: 12}


def test_reset_offsets_of_an_empty_group(cluster, shoal):
    with cluster.admin() as admin:
        admin.alter_group_offsets("g-reset", {TP[0]: 6, TP[1]: 2})
    code, rows, err = shoal("groups", "reset-offsets", "--group", "g-reset", "--all-topics", "--to-earliest",
                            "--dry-run", output="json")
    assert code == 0 and [(r["PARTITION"], r["NEW-OFFSET"]) for r in rows] == [(0, 0), (1, 0)]
    assert committed(cluster, "g-reset") == {TP[0]: 6, TP[1]: 2}  # a dry run changes nothing
    code, rows, err = shoal("groups", "reset-offsets", "--group", "g-reset", "--all-topics", "--to-latest")
    assert code == 0 and "--execute option is missing" in err
    assert committed(cluster, "g-reset") == {TP[0]: 6, TP[1]: 2}

    code, out, _ = shoal("groups", "reset-offsets", "--group", "g-reset", "--topic", f"{T}:1", "--shift-by", "5",
                         "--execute")
    assert code == 0 and out.splitlines()[1].split() == ["g-reset", T, "1", "7"]
    assert committed(cluster, "g-reset") == {TP[0]: 6, TP[1]: 7}
    code, _, _ = shoal("groups", "reset-offsets", "--group", "g-reset", "--topic", T, "--to-datetime",
                       "2023-11-14T22:13:24", "--execute")  # 1_700_000_004_000 ms: offset 4 of each partition
    assert code == 0 and committed(cluster, "g-reset") == {TP[0]: 4, TP[1]: 4}
    code, _, _ = shoal("groups", "reset-offsets", "--group", "g-reset", "--all-topics", "--to-offset", "10",
                       "--execute")
    assert code == 0 and committed(cluster, "g-reset") == {TP[0]: 8, TP[1]: 10}  # kept within the log

    for argv, error in [
        (["--all-topics", "--to-datetime", "yesterday", "--execute"], "INVALID_REQUEST"),
        (["--all-topics", "--to-earliest", "--shift-by", "2", "--execute"], "INVALID_REQUEST"),
        (["--all-topics", "--execute"], "INVALID_REQUEST"),
        (["--all-topics", "--to-offset", "-1", "--execute"], "INVALID_REQUEST"),
        (["--topic", f"{T}:x", "--to-earliest", "--execute"], "INVALID_REQUEST"),
        (["--topic", f"{T}:9", "--to-earliest", "--execute"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["--topic", "nope", "--to-earliest", "--execute"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["--to-earliest", "--execute"], "INVALID_REQUEST"),
    ]:
        code, out, err = shoal("groups", "reset-offsets", "--group", "g-reset", *argv)
        assert code == 1 and one_error_line(err, error), (argv, err)
    assert committed(cluster, "g-reset") == {TP[0]: 8, TP[1]: 10}


def test_delete_offsets_and_groups(cluster, shoal):
    with cluster.admin() as admin:
        admin.alter_group_offsets("g-del", {TP[0]: 1, TP[1]: 1})
    code, out, _ = shoal("groups", "delete-offsets", "--group", "g-del", "--topic", f"{T}:0")
    assert code == 0 and out.splitlines()[1].split() == [T, "0", "Successful"]
    assert committed(cluster, "g-del") == {TP[1]: 1}
    code, out, _ = shoal("groups", "delete", "--group", "g-del")
    assert code == 0 and out.strip() == "Deletion of requested consumer groups ('g-del') was successful."
    for argv in (["groups", "delete", "--group", "g-del"], ["groups", "describe", "--group", "g-del"]):
        code, out, err = shoal(*argv)
        assert code == 1 and one_error_line(err, "GROUP_ID_NOT_FOUND")


def test_share_groups_describe(cluster, shoal):
    cluster.create_topic("jobs", 1)
    with cluster.producer(linger_ms=1) as producer:
        for i in range(10):
            producer.send("jobs", f"j{i}".encode())
        producer.flush()
    with cluster.share_consumer("g-workers", share_acknowledgement_mode="explicit", fetch_max_wait_ms=200) as c:
        c.subscribe(["jobs"])
        got = []
        wait_until(lambda: got.extend(c.poll(0.2)) or len(got) >= 10, message="10 records")
        for r in got:
            c.acknowledge(r, AcknowledgeType.ACCEPT if r.offset < 4 else AcknowledgeType.RELEASE)
        c.commit_sync()
    code, rows, _ = shoal("share-groups", "describe", "--group", "g-workers", output="json")
    assert code == 0 and [(r["GROUP"], r["TOPIC"], r["PARTITION"], r["LAG"]) for r in rows] == [
        ("g-workers", "jobs", 0, 6)]
    code, out, _ = shoal("share-groups", "describe", "--group", "g-workers")
    assert out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    with cluster.admin() as admin:  # the member's leave is a heartbeat of its own
        wait_until(lambda: [g.state for g in admin.list_groups(types=["share"])] == ["Empty"], message="empty")
    code, rows, _ = shoal("share-groups", "list", output="json")
    assert code == 0 and rows == [{"GROUP": "g-workers", "STATE": "Empty"}]
    code, out, err = shoal("share-groups", "describe", "--group", "g-nobody")
    assert code == 1 and one_error_line(err, "GROUP_ID_NOT_FOUND")


def test_transactions_list_and_describe(cluster, shoal):
    with cluster.producer(transactional_id="tx-cli", linger_ms=1) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(T, b"t", partition=1)
        producer.flush()
        code, rows, _ = shoal("transactions", "list", output="json")
        assert code == 0 and [(r["TRANSACTIONAL-ID"], r["TRANSACTION-STATE"]) for r in rows] == [("tx-cli", "Ongoing")]
        code, rows, _ = shoal("transactions", "describe", "--transactional-id", "tx-cli", output="json")
        assert [(r["TRANSACTION-STATE"], r["TOPIC-PARTITIONS"]) for r in rows] == [("Ongoing", f"{T}-1")]
        producer.commit_transaction()
    code, out, _ = shoal("transactions", "list", "--state", "Ongoing")
    assert code == 0 and out.strip() == "(none)"
    code, out, err = shoal("transactions", "describe", "--transactional-id", "tx-nope")
    assert code == 1 and one_error_line(err, "TRANSACTIONAL_ID_NOT_FOUND")


def test_nothing_deployed(cluster, capsys):
    assert main(["--namespace", "shoal-nothing-here", "groups", "list"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "no shoal deployment" in err
