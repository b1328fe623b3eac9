"""Idempotence and transactions on real actors: the transaction coordinator, partition leaders
and the producer (issue 7)."""
import pytest
import ray

from actors import naming
from actors.server.deployment import start_partition_hosts
from runtime.errors import Errors, KafkaError
from runtime.messages.topics import (LATEST_TIMESTAMP, READ_COMMITTED, FetchRequest, ListOffsetsRequest,
                                     ProduceRequest)
from runtime.messages.txn import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
                                  AddPartitionsToTxnTransaction, DescribeTransactionsRequest, EndTxnRequest,
                                  InitProducerIdRequest, ListTransactionsRequest, WritableTxnMarker,
                                  WritableTxnMarkerTopic, WriteTxnMarkersRequest)
from runtime.topics.data import decode_entries, encode_records
from runtime.topics.isolation import filter_aborted
from tests.conftest import wait_until


CLUSTER_CONFIG = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
                  "transaction.state.log.num.partitions": 2}


@pytest.fixture(scope="module")
def topic(cluster):
    cluster.create_topic("txn", 1)
    return "txn"


def fetch(cluster, topic, committed, offset=0):
    response = ray.get(cluster.partition_leader(topic, 0).fetch.remote(FetchRequest(
        topic, 0, offset, max_wait_ms=0, isolation_level=READ_COMMITTED if committed else 0)))
    assert response.error_code == 0, response
    return response


def values(cluster, topic, committed=True):
    r = fetch(cluster, topic, committed)
    batches = filter_aborted(r.batches, r.aborted_transactions) if committed else [
        b for b in r.batches if not b.is_control]
    return [rec.value for b in batches for rec in decode_entries(b.records, b.base_offset)]


def coordinator_call(cluster, method, request, tid=None):
    """Call the coordinator that owns the request's transactional id (or ``tid``'s)."""
    tid = tid or getattr(request, "transactional_id", None) or "t"
    return ray.get(getattr(cluster.transaction_coordinator(tid), method).remote(request), timeout=30)


def describe(cluster, tid):
    (state,) = cluster.describe_transactions([tid])
    return state


def produce_request(topic, values_, pid, epoch, seq, txn=False, tid=None, partition=0, version=2):
    return ProduceRequest(topic, partition, encode_records([(1, None, v, []) for v in values_]), len(values_), 1,
                          transactional_id=tid, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          is_transactional=txn, transaction_version=version)


def add_partitions(tid, pid, epoch, topic, partitions=(0,)):
    return AddPartitionsToTxnRequest((AddPartitionsToTxnTransaction(
        tid, pid, epoch, False, (AddPartitionsToTxnTopic(topic, tuple(partitions)),)),))


def partition_codes(response):
    return [p.partition_error_code for r in response.results_by_transaction for t in r.topic_results
            for p in t.results_by_partition]


# ---------------------------------------------------------------------- producers


def test_idempotent_producer_is_the_default_and_numbers_its_batches(cluster):
    cluster.create_topic("idem", 1)
    with cluster.producer(linger_ms=1, batch_size=64) as producer:
        futures = [producer.send("idem", f"v{i}".encode()) for i in range(40)]
        producer.flush()
        assert [f.get(10).offset for f in futures] == list(range(40))
    batches = fetch(cluster, "idem", False).batches
    assert len(batches) > 1 and len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    assert values(cluster, "idem") == [f"v{i}".encode() for i in range(40)]


def test_committed_transactions_are_visible_and_aborted_ones_never_are(cluster, topic):
    with cluster.producer(transactional_id="tx-basic", linger_ms=1) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"committed-1")
        producer.send(topic, b"committed-2")
        producer.commit_transaction()
        assert values(cluster, topic) == [b"committed-1", b"committed-2"]

        producer.begin_transaction()
        producer.send(topic, b"aborted").get(10)
        # Open: read_committed stops before it, read_uncommitted sees it.
        assert values(cluster, topic) == [b"committed-1", b"committed-2"]
        assert b"aborted" in values(cluster, topic, committed=False)
        lso = ray.get(cluster.partition_leader(topic, 0).list_offsets.remote(
            ListOffsetsRequest(topic, 0, LATEST_TIMESTAMP, READ_COMMITTED))).offset
        assert lso == fetch(cluster, topic, True).last_stable_offset < fetch(cluster, topic, True).high_watermark
        producer.abort_transaction()

        producer.begin_transaction()
        producer.send(topic, b"committed-3")
        producer.commit_transaction()
    assert values(cluster, topic) == [b"committed-1", b"committed-2", b"committed-3"]
    state = describe(cluster, "tx-basic")
    assert (state.error_code, state.transaction_state, state.topics) == (0, "CompleteCommit", ())


def test_a_zombie_producer_with_an_old_epoch_cannot_commit(cluster, topic):
    zombie = cluster.producer(transactional_id="tx-zombie", linger_ms=1)
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send(topic, b"zombie").get(10)
    successor = cluster.producer(transactional_id="tx-zombie", linger_ms=1)
    successor.init_transactions()  # fences the zombie and aborts its open transaction
    with pytest.raises(KafkaError) as e:
        zombie.commit_transaction()
    assert e.value.error is Errors.PRODUCER_FENCED
    with pytest.raises(KafkaError) as e:
        zombie.send(topic, b"more")
    assert e.value.error is Errors.PRODUCER_FENCED
    successor.begin_transaction()
    successor.send(topic, b"successor")
    successor.commit_transaction()
    assert b"zombie" not in values(cluster, topic) and b"successor" in values(cluster, topic)
    zombie.close()
    successor.close()


def test_version_2_bumps_the_epoch_at_every_end_and_a_zombie_cannot_open_a_hanging_transaction(cluster):
    # Transactions version 2 (the cluster's default): every commit or abort bumps the
    # producer's epoch, the producer goes on with the epoch EndTxn answers, and a fenced
    # producer's batch is stopped by the partition leader's own verification, so it
    # cannot leave an open transaction that holds back read_committed readers.
    cluster.create_topic("tv2", 2)
    producer = cluster.producer(transactional_id="tx-v2", linger_ms=1)
    producer.init_transactions()
    pid = describe(cluster, "tx-v2").producer_id
    for n in range(3):
        producer.begin_transaction()
        producer.send("tv2", b"kept-%d" % n, partition=0).get(10)
        if n == 1:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
        state = describe(cluster, "tx-v2")
        assert (state.producer_id, state.producer_epoch) == (pid, n + 1)
    assert values(cluster, "tv2") == [b"kept-0", b"kept-2"]

    successor = cluster.producer(transactional_id="tx-v2", linger_ms=1)
    successor.init_transactions()  # fences epoch 3
    assert describe(cluster, "tx-v2").producer_epoch == 4
    # The zombie writes where it never wrote before, with its last epoch (sequence 0, as
    # its producer would): the leader asks the coordinator, which has fenced that epoch.
    leader = cluster.partition_leader("tv2", 1)
    zombie_batch = produce_request("tv2", [b"zombie"], pid, 3, 0, txn=True, tid="tx-v2", partition=1)
    r = ray.get(leader.produce.remote(zombie_batch), timeout=30)
    assert r.error_code == Errors.INVALID_PRODUCER_EPOCH.code
    r = ray.get(leader.fetch.remote(FetchRequest("tv2", 1, 0, max_wait_ms=0, isolation_level=READ_COMMITTED)))
    assert (r.high_watermark, r.last_stable_offset) == (0, 0)
    # The zombie producer itself is fenced at its next transaction.
    with pytest.raises(KafkaError) as e:
        producer.begin_transaction()
        producer.send("tv2", b"zombie", partition=0).get(10)
        producer.commit_transaction()
    assert e.value.error in (Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH)
    successor.begin_transaction()
    successor.send("tv2", b"successor", partition=1).get(10)
    successor.commit_transaction()
    r = ray.get(leader.fetch.remote(FetchRequest("tv2", 1, 0, max_wait_ms=0, isolation_level=READ_COMMITTED)))
    assert r.last_stable_offset == r.high_watermark == 2  # the successor's record and its marker
    assert b"zombie" not in values(cluster, "tv2")
    producer.close()
    successor.close()


def test_send_outside_a_transaction_and_transaction_calls_without_an_id_are_refused(cluster, topic):
    with cluster.producer(transactional_id="tx-misuse") as producer:
        with pytest.raises(KafkaError) as e:
            producer.send(topic, b"x")
        assert e.value.error is Errors.INVALID_TXN_STATE
        producer.init_transactions()
        with pytest.raises(KafkaError):
            producer.send(topic, b"x")  # begin_transaction() first
        producer.begin_transaction()
        producer.commit_transaction()  # nothing sent: nothing for the coordinator to end
    with cluster.producer() as plain:
        with pytest.raises(KafkaError):
            plain.begin_transaction()
    with pytest.raises(ValueError):
        cluster.producer(max_in_flight_requests_per_connection=6, enable_idempotence=True)
    with pytest.raises(ValueError):
        cluster.producer(acks=1, transactional_id="tx-acks")
    with cluster.producer(acks=1) as unsafe:  # idempotence is quietly off, as in Kafka
        assert unsafe._txn is None


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(cluster, topic):
    producer = cluster.producer(transactional_id="tx-timeout", transaction_timeout_ms=300, linger_ms=1)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"too slow").get(10)
    wait_until(lambda: describe(cluster, "tx-timeout").transaction_state == "CompleteAbort", 20)
    with pytest.raises(KafkaError) as e:
        producer.commit_transaction()
    assert e.value.error is Errors.PRODUCER_FENCED
    assert b"too slow" not in values(cluster, topic)
    producer.close()


# ---------------------------------------------------------------------- error codes through the actors


def test_init_producer_id_errors(cluster):
    r = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("e-init", 10**9))
    assert r.error_code == Errors.INVALID_TRANSACTION_TIMEOUT.code
    r = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("", 1000))
    assert r.error_code == Errors.INVALID_REQUEST.code
    r = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("e-init", 1000, producer_id=5))
    assert r.error_code == Errors.INVALID_REQUEST.code
    first = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("e-init", 1000))
    assert (first.error_code, first.producer_epoch) == (0, 0)
    again = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("e-init", 1000))
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
    # An idempotent producer gets a fresh id each time.
    a = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest())
    b = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest())
    assert a.error_code == b.error_code == 0 and a.producer_id != b.producer_id


def test_transaction_request_errors(cluster, topic):
    init = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("e-txn", 60000))
    pid, epoch = init.producer_id, init.producer_epoch
    r = coordinator_call(cluster, "add_partitions_to_txn", add_partitions("e-txn", pid + 1, epoch, topic))
    assert partition_codes(r) == [Errors.INVALID_PRODUCER_ID_MAPPING.code]
    r = coordinator_call(cluster, "add_partitions_to_txn", add_partitions("e-txn", pid, epoch - 1, topic))
    assert partition_codes(r) == [Errors.PRODUCER_FENCED.code]
    r = coordinator_call(cluster, "end_txn", EndTxnRequest("e-txn", pid, epoch, True))
    assert r.error_code == Errors.INVALID_TXN_STATE.code  # nothing to commit
    r = coordinator_call(cluster, "add_offsets_to_txn", AddOffsetsToTxnRequest("e-txn", pid, epoch, ""))
    assert r.error_code == Errors.INVALID_REQUEST.code
    assert partition_codes(coordinator_call(cluster, "add_partitions_to_txn",
                                            add_partitions("e-txn", pid, epoch, topic))) == [0]
    # Another producer taking over the id while the transaction is open: the open one is
    # aborted first (CONCURRENT_TRANSACTIONS until then).
    r = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("e-txn", 60000))
    assert r.error_code == Errors.CONCURRENT_TRANSACTIONS.code
    r = coordinator_call(cluster, "end_txn", EndTxnRequest("e-txn", pid, epoch, True))
    assert r.error_code == Errors.PRODUCER_FENCED.code
    wait_until(lambda: describe(cluster, "e-txn").transaction_state == "CompleteAbort")
    # Transaction version 2: the fence and its abort bumped twice, InitProducerId once more.
    r = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("e-txn", 60000))
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 3)


def test_a_coordinator_refuses_transactional_ids_of_another_partition(cluster):
    assert naming.coordinator_partition(naming.CoordinatorType.TRANSACTION, "other-0", cluster.config) == 1
    wrong = ray.get(cluster._actor(naming.transaction_coordinator(0)).init_producer_id.remote(
        InitProducerIdRequest("other-0", 1000)), timeout=30)
    assert wrong.error_code == Errors.NOT_COORDINATOR.code
    right = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("other-0", 1000))
    assert right.error_code == 0
    r = ray.get(cluster._actor(naming.transaction_coordinator(0)).describe_transactions.remote(
        DescribeTransactionsRequest(("other-0",))), timeout=30)
    assert r.transaction_states[0].error_code == Errors.NOT_COORDINATOR.code
    # Producer ids from different coordinators never collide (their blocks are striped).
    other = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("other-1", 1000))
    assert other.error_code == 0 and other.producer_id != right.producer_id


def test_describe_and_list_transactions(cluster, topic):
    init = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("e-list", 60000))
    coordinator_call(cluster, "add_partitions_to_txn", add_partitions("e-list", init.producer_id, 0, topic))
    state = describe(cluster, "e-list")
    assert (state.error_code, state.transaction_state, state.producer_id) == (0, "Ongoing", init.producer_id)
    assert [(t.topic, t.partitions) for t in state.topics] == [(topic, (0,))]
    assert describe(cluster, "never-seen").error_code == Errors.TRANSACTIONAL_ID_NOT_FOUND.code
    listed = cluster.list_transactions(state_filters=["Ongoing"], transactional_id_pattern="e-li.*")
    assert [(t.transactional_id, t.transaction_state) for t in listed] == [("e-list", "Ongoing")]
    r = coordinator_call(cluster, "list_transactions", ListTransactionsRequest(state_filters=("Nope",)))
    assert r.unknown_state_filters == ("Nope",)
    r = coordinator_call(cluster, "list_transactions", ListTransactionsRequest(transactional_id_pattern="("))
    assert r.error_code == Errors.INVALID_REQUEST.code
    r = coordinator_call(cluster, "describe_transactions", DescribeTransactionsRequest(("",)))
    assert r.transaction_states[0].error_code == Errors.INVALID_REQUEST.code
    coordinator_call(cluster, "end_txn", EndTxnRequest("e-list", init.producer_id, 0, False))
    assert describe(cluster, "e-list").transaction_state == "CompleteAbort"


def test_partition_leader_errors(cluster):
    cluster.create_topic("leader-errors", 1)
    leader = cluster.partition_leader("leader-errors", 0)

    def produce(request):
        return ray.get(leader.produce.remote(request), timeout=30)

    assert produce(produce_request("leader-errors", [b"a"], 900001, 3, 0)).base_offset == 0
    again = produce(produce_request("leader-errors", [b"a"], 900001, 3, 0))
    assert (again.error_code, again.base_offset) == (0, 0)  # a duplicate: acknowledged, not appended
    assert produce(produce_request("leader-errors", [b"b"], 900001, 3, 7)).error_code == \
        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER.code
    assert produce(produce_request("leader-errors", [b"b"], 900001, 2, 1)).error_code == \
        Errors.INVALID_PRODUCER_EPOCH.code
    # A transactional batch is appended only once the coordinator has the partition in the
    # producer's transaction (the leader's verify-only AddPartitionsToTxn).
    init = coordinator_call(cluster, "init_producer_id", InitProducerIdRequest("leader-txn", 60000))
    pid = init.producer_id

    def txn_request(value, seq, epoch=0, version=2):
        return produce_request("leader-errors", [value], pid, epoch, seq, txn=True, tid="leader-txn", version=version)

    assert produce(txn_request(b"u", 0)).error_code == Errors.TRANSACTION_ABORTABLE.code  # not added
    assert produce(txn_request(b"u", 0, version=1)).error_code == Errors.INVALID_TXN_STATE.code  # older clients
    assert produce(txn_request(b"u", 0, epoch=5)).error_code == Errors.INVALID_PRODUCER_EPOCH.code  # fenced
    assert fetch(cluster, "leader-errors", True).last_stable_offset == 1  # no transaction was opened
    assert partition_codes(coordinator_call(cluster, "add_partitions_to_txn",
                                            add_partitions("leader-txn", pid, 0, "leader-errors"))) == [0]
    assert produce(txn_request(b"t", 0)).error_code == 0
    assert produce(produce_request("leader-errors", [b"p"], pid, 0, 1)).error_code == Errors.INVALID_TXN_STATE.code
    assert produce(produce_request("leader-errors", [b"t"], -1, -1, -1, txn=True)).error_code == \
        Errors.INVALID_REQUEST.code

    def markers(pid, epoch, commit, topic="leader-errors", version=1):
        r = ray.get(leader.write_txn_markers.remote(WriteTxnMarkersRequest((WritableTxnMarker(
            pid, epoch, commit, (WritableTxnMarkerTopic(topic, (0,)),), transaction_version=version),))), timeout=30)
        return [p.error_code for m in r.markers for t in m.topics for p in t.partitions]

    assert markers(pid, -1, True) == [Errors.INVALID_PRODUCER_EPOCH.code]
    assert markers(pid, 0, True, version=2) == [Errors.INVALID_PRODUCER_EPOCH.code]  # version 2 bumps first
    assert markers(pid, 0, True, topic="elsewhere") == [Errors.NOT_LEADER_OR_FOLLOWER.code]
    assert values(cluster, "leader-errors") == [b"a"]  # the transaction is still open
    # The coordinator's own commit writes the version 2 marker, at epoch 1.
    assert coordinator_call(cluster, "end_txn", EndTxnRequest("leader-txn", pid, 0, True)).producer_epoch == 1
    assert values(cluster, "leader-errors") == [b"a", b"t"]
    assert fetch(cluster, "leader-errors", True).last_stable_offset == 3


def test_a_transaction_whose_topic_was_deleted_still_commits(cluster):
    cluster.create_topic("doomed", 1)
    cluster.create_topic("kept", 1)
    with cluster.producer(transactional_id="tx-doomed", linger_ms=1) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("doomed", b"gone").get(10)
        producer.send("kept", b"stays").get(10)
        cluster.delete_topic("doomed")
        producer.commit_transaction()  # the deleted partition's marker is dropped, not retried for ever
    assert values(cluster, "kept") == [b"stays"]
    assert describe(cluster, "tx-doomed").transaction_state == "CompleteCommit"


# ---------------------------------------------------------------------- coordinator failover


def test_a_coordinator_killed_between_prepare_and_complete_finishes_the_commit(cluster):
    cluster.create_topic("failover", 1)
    producer = cluster.producer(transactional_id="tx-failover", linger_ms=1)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("failover", b"survives").get(10)
    # The partition's host goes away, so the markers cannot be written and the commit stays prepared.
    ray.kill(cluster.partition_host("failover", 0), no_restart=True)
    cluster._forget(naming.partition_host_of("failover", 0, cluster.config))
    state = describe(cluster, "tx-failover")
    end = cluster.transaction_coordinator("tx-failover").end_txn.remote(
        EndTxnRequest("tx-failover", state.producer_id, state.producer_epoch, True))
    wait_until(lambda: describe(cluster, "tx-failover").transaction_state == "PrepareCommit")
    coordinator = cluster.transaction_coordinator("tx-failover")
    wait_until(lambda: ray.get(coordinator.pending_markers.remote()) == ["tx-failover"])
    ray.kill(coordinator, no_restart=False)
    with pytest.raises(Exception):
        ray.get(end, timeout=30)
    ray.get(start_partition_hosts(cluster.directory, cluster._deployment, []))  # it comes back and reloads
    wait_until(lambda: describe(cluster, "tx-failover").transaction_state == "CompleteCommit", 60)
    assert values(cluster, "failover") == [b"survives"]
    producer.close()


# ---------------------------------------------------------------------- offsets in transactions


def fetch_committed(cluster, group_id, topic, stable=True):
    from runtime.messages.group import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics
    request = OffsetFetchRequest((OffsetFetchRequestGroup(group_id, topics=(OffsetFetchRequestTopics(topic, (0,)),)),),
                                 require_stable=stable)
    (p,) = ray.get(cluster.group_coordinator(group_id).offset_fetch.remote(request), timeout=30).groups[0].topics[0] \
        .partitions
    return p.error_code, p.committed_offset


def test_offsets_sent_to_a_transaction_commit_and_abort_with_it(cluster, topic):
    from actors import OffsetAndMetadata, TopicPartition
    with cluster.producer(transactional_id="tx-offsets", linger_ms=1) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"with offsets")
        producer.send_offsets_to_transaction({TopicPartition("input", 0): OffsetAndMetadata(5, "m")}, "txn-group")
        assert fetch_committed(cluster, "txn-group", "input") == (Errors.UNSTABLE_OFFSET_COMMIT.code, -1)
        producer.commit_transaction()
        assert fetch_committed(cluster, "txn-group", "input") == (0, 5)

        producer.begin_transaction()
        producer.send_offsets_to_transaction({TopicPartition("input", 0): 9}, "txn-group")
        producer.abort_transaction()  # offsets only: the coordinator still has a transaction to end
        assert fetch_committed(cluster, "txn-group", "input") == (0, 5)
    assert describe(cluster, "tx-offsets").transaction_state == "CompleteAbort"


def test_consume_transform_produce_crashing_at_random_points_yields_each_result_once(cluster):
    """Each incarnation reads the group's stable offset, transforms a few records at a time in
    transactions that also commit the input offsets, and 'crashes' (is abandoned mid-way,
    a zombie whose batches may still arrive) at random points. The output, read with
    read_committed, holds every input's result exactly once, in order."""
    import random

    from actors import TopicPartition
    cluster.create_topic("ctp-in", 1)
    cluster.create_topic("ctp-out", 1)
    total = 120
    with cluster.producer(linger_ms=1) as plain:
        for i in range(total):
            plain.send("ctp-in", str(i).encode())
    rng = random.Random(7)
    zombies = []
    position = 0
    incarnations = 0
    while position < total:
        incarnations += 1
        producer = cluster.producer(transactional_id="ctp", linger_ms=1)
        producer.init_transactions()  # fences the zombie and aborts what it left open
        code, position = wait_until(lambda: (lambda r: r if r[0] == 0 else None)(
            fetch_committed(cluster, "ctp-group", "ctp-in")), message="a stable input offset")
        position = max(position, 0)
        crashed = False
        while position < total and not crashed:
            batch = fetch(cluster, "ctp-in", False, position).batches
            records = [r for b in batches_of(batch) for r in b if r.offset >= position][:rng.randint(1, 15)]
            crash_at = rng.choice(["before-offsets", "before-commit", "after-commit", None, None, None])
            producer.begin_transaction()
            for r in records:
                producer.send("ctp-out", b"out-" + r.value)
            if crash_at == "before-offsets":
                crashed = True
                break
            next_position = records[-1].offset + 1
            producer.send_offsets_to_transaction({TopicPartition("ctp-in", 0): next_position}, "ctp-group")
            if crash_at == "before-commit":
                crashed = True
                break
            producer.commit_transaction()
            position = next_position
            crashed = crash_at == "after-commit"
        zombies.append(producer)
    assert incarnations > 3
    assert values(cluster, "ctp-out") == [f"out-{i}".encode() for i in range(total)]
    for zombie in zombies:
        try:
            zombie.close(5)
        except KafkaError:
            pass  # a fenced zombie cannot flush


def batches_of(fetched):
    return [decode_entries(b.records, b.base_offset) for b in fetched if not b.is_control]


def test_a_read_committed_consumer_sees_committed_transactions_only(cluster):
    from actors import TopicPartition
    cluster.create_topic("rc", 1)
    with cluster.producer(transactional_id="tx-rc", linger_ms=1) as producer:
        producer.init_transactions()
        for i, commit in enumerate([True, False, True]):
            producer.begin_transaction()
            producer.send("rc", f"txn-{i}".encode())
            producer.commit_transaction() if commit else producer.abort_transaction()
        producer.begin_transaction()
        producer.send("rc", b"open").get(10)  # still open: read_committed stops before it

        def read(isolation_level):
            consumer = cluster.consumer(None, isolation_level=isolation_level, auto_offset_reset="earliest",
                                        enable_auto_commit=False)
            consumer.assign([TopicPartition("rc", 0)])
            got = []
            wait_until(lambda: got.extend(r.value for rs in consumer.poll(200).values() for r in rs)
                       or len(got) >= (2 if isolation_level == "read_committed" else 4))
            consumer.close()
            return got

        assert read("read_committed") == [b"txn-0", b"txn-2"]
        assert read("read_uncommitted") == [b"txn-0", b"txn-1", b"txn-2", b"open"]
        producer.abort_transaction()
    with pytest.raises(ValueError):
        cluster.consumer(None, isolation_level="serializable")
