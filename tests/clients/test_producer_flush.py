"""`flush()` waits for every record, also for a batch the sender has taken from its queue
but not yet handed to the leader (while it gets its producer id or adds its partition to a
transaction, which takes long during a failover). It used to miss such a batch, so
`commit_transaction` could end a transaction before its records were sent."""
import threading

TOPIC = "flush"
CLUSTER_TOPICS = {TOPIC: 1}


def test_flush_waits_for_a_batch_on_its_way_to_the_leader(cluster):
    with cluster.producer(linger_ms=0) as producer:
        gate, taken = threading.Event(), threading.Event()
        send = producer._send

        def held_send(batch):  # the batch is out of the queue, not yet in flight
            taken.set()
            gate.wait(30)
            send(batch)

        producer._send = held_send
        future = producer.send(TOPIC, b"on its way")
        assert taken.wait(30)
        outcome = {}

        def flush():
            producer.flush(60)
            outcome["done"] = future.done()

        flusher = threading.Thread(target=flush)
        flusher.start()
        flusher.join(2)  # a flush that misses the batch returns at once
        gate.set()
        flusher.join(60)
        assert outcome == {"done": True}
        assert future.get(10).offset == 0
