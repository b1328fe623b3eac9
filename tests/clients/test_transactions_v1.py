"""A cluster whose transaction.version feature is 1 still serves transactions the old way:
the producer keeps its epoch from one transaction to the next, and the markers carry it."""
import ray

from runtime.messages.topics import READ_COMMITTED, FetchRequest
from runtime.messages.txn import DescribeTransactionsRequest
from runtime.topics.data import decode_entries
from runtime.topics.isolation import filter_aborted

CLUSTER_CONFIG = {"transaction.version": 1}
CLUSTER_TOPICS = {"v1": 1}


def committed(cluster):
    r = ray.get(cluster.partition_leader("v1", 0).fetch.remote(
        FetchRequest("v1", 0, 0, max_wait_ms=0, isolation_level=READ_COMMITTED)), timeout=30)
    return [rec.value for b in filter_aborted(r.batches, r.aborted_transactions)
            for rec in decode_entries(b.records, b.base_offset)]


def epoch(cluster, tid):
    (state,) = ray.get(cluster.transaction_coordinator(tid).describe_transactions.remote(
        DescribeTransactionsRequest((tid,))), timeout=30).transaction_states
    return state.producer_epoch


def test_version_1_keeps_the_epoch_across_transactions(cluster):
    with cluster.producer(transactional_id="tx-v1", linger_ms=1) as producer:
        producer.init_transactions()
        for n in range(3):
            producer.begin_transaction()
            producer.send("v1", b"r%d" % n).get(10)
            if n == 1:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
            assert epoch(cluster, "tx-v1") == 0
    assert committed(cluster) == [b"r0", b"r2"]
    # Only InitProducerId bumps it.
    with cluster.producer(transactional_id="tx-v1", linger_ms=1) as successor:
        successor.init_transactions()
        assert epoch(cluster, "tx-v1") == 1


def test_version_1_fences_an_open_transaction_with_one_bump(cluster):
    zombie = cluster.producer(transactional_id="tx-v1-fence", linger_ms=1)
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("v1", b"zombie").get(10)
    successor = cluster.producer(transactional_id="tx-v1-fence", linger_ms=1)
    successor.init_transactions()  # the fence's abort at epoch 1, then its own bump to 2
    assert epoch(cluster, "tx-v1-fence") == 2
    successor.begin_transaction()
    successor.send("v1", b"successor").get(10)
    successor.commit_transaction()
    assert b"zombie" not in committed(cluster) and b"successor" in committed(cluster)
    zombie.close()
    successor.close()
