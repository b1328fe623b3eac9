"""shoal quickstart: an embedded cluster, a topic, a producer, and a fetch from each
partition leader through its Ray actor handle.

    bash scripts/quickstart.sh
"""
import ray

from actors import Cluster
from runtime.messages.topics import FetchRequest
from runtime.topics.data import decode_entries


def main() -> None:
    with Cluster.local() as cluster:  # starts Ray if needed; everything is removed on exit
        topic = cluster.create_topic("orders", partitions=3)
        print(f"created topic {topic.name} with {topic.partitions} partitions (id {topic.topic_id})")

        producer = cluster.producer(linger_ms=5)
        futures = [producer.send("orders", f"order {i}".encode(), key=f"customer-{i % 4}".encode())
                   for i in range(12)]
        producer.flush()
        for f in futures[:4]:
            md = f.get()
            print(f"  acknowledged {md.topic}-{md.partition}@{md.offset}")
        print(f"produced {len(futures)} records; records with the same key share a partition")

        for p in range(topic.partitions):
            leader = cluster.partition_leader("orders", p)  # a plain Ray actor handle
            response = ray.get(leader.fetch.remote(FetchRequest("orders", p, fetch_offset=0)))
            records = [r for b in response.batches for r in decode_entries(b.records, b.base_offset)]
            print(f"partition {p}: high watermark {response.high_watermark}")
            for r in records:
                print(f"  offset {r.offset}  key={r.key.decode()}  value={r.value.decode()}")
        producer.close()


if __name__ == "__main__":
    main()
