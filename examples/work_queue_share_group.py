"""A work queue drained by a pool of Ray worker actors through a share group (KIP-932).

Unlike a consumer group, a share group lets every worker take records from the same
partition: each record is handed to one worker at a time, and the worker acknowledges it
explicitly.
- a job that succeeds is acknowledged (ACCEPT);
- a job that fails for a passing reason is released (RELEASE) and comes back, to any worker,
  with its delivery count raised: a retry;
- a poison job fails every time; once it has been delivered
  `group.share.delivery.count.limit` times the share partition archives it, and nobody sees
  it again.
At the end the admin API shows the share group's start offset and a lag of 0.

    python examples/work_queue_share_group.py
"""
import time

import ray

from actors import AcknowledgeType, Cluster

TOPIC, GROUP, JOBS, WORKERS, DELIVERY_LIMIT = "jobs", "workers", 60, 3, 3


@ray.remote(num_cpus=0)
class Worker:
    def __init__(self, namespace: str, name: str) -> None:
        self.name = name
        self.cluster = Cluster.connect(namespace=namespace)  # the deployment the driver made
        self.consumer = self.cluster.share_consumer(GROUP, client_id=name, share_acknowledgement_mode="explicit",
                                                    fetch_max_wait_ms=200, max_poll_records=5)
        self.consumer.subscribe([TOPIC])

    def ready(self) -> str:
        return self.name

    def drain(self, idle_s: float = 3.0) -> dict:
        """Work until nothing has come for `idle_s` (the jobs are queued before); report what happened."""
        report = {"worker": self.name, "done": [], "retried": [], "poison": []}
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            records = self.consumer.poll(0.3)
            for r in records:
                last = time.monotonic()
                job = r.value.decode()
                if job.startswith("poison"):
                    report["poison"].append((job, r.delivery_count))
                    self.consumer.acknowledge(r, AcknowledgeType.RELEASE)  # fails every time
                elif job.startswith("flaky") and r.delivery_count == 1:
                    report["retried"].append(job)
                    self.consumer.acknowledge(r, AcknowledgeType.RELEASE)  # fails once, then works
                else:
                    time.sleep(0.05)  # the work
                    report["done"].append(job)
                    self.consumer.acknowledge(r, AcknowledgeType.ACCEPT)
            if records:
                self.consumer.commit_sync()
        self.consumer.close()
        return report


def main() -> None:
    config = {"group.share.delivery.count.limit": DELIVERY_LIMIT, "share.auto.offset.reset": "earliest"}
    with Cluster.local(config=config) as cluster:
        cluster.create_topic(TOPIC, 1)  # one partition, yet every worker gets work
        with cluster.producer(linger_ms=5) as producer:
            for i in range(JOBS):
                kind = "poison" if i % 20 == 7 else "flaky" if i % 10 == 3 else "job"
                producer.send(TOPIC, f"{kind}-{i}".encode())
                if i % 5 == 4:
                    producer.flush()  # small batches: a share fetch acquires whole batches
        print(f"queued {JOBS} jobs on one partition; {WORKERS} workers drain it")
        workers = [Worker.remote(cluster.namespace, f"worker-{i}") for i in range(WORKERS)]
        ray.get([w.ready.remote() for w in workers])
        reports = [w.drain.remote() for w in workers]
        reports = ray.get(reports)
        done, poison = set(), {}
        for r in reports:
            print(f"{r['worker']}: {len(r['done'])} done, {len(r['retried'])} released for a retry, "
                  f"{len(r['poison'])} poison deliveries")
            done.update(r["done"])
            for job, count in r["poison"]:
                poison[job] = max(poison.get(job, 0), count)
        print(f"{len(done)} jobs done, each once: {len(done) == sum(len(r['done']) for r in reports)}")
        for job, count in sorted(poison.items()):
            print(f"{job} was delivered {count} times, then archived")
        for tp, offset in cluster.admin().describe_share_group_offsets(GROUP).items():
            print(f"share group {GROUP} on {tp.topic}-{tp.partition}: start offset {offset.start_offset}, "
                  f"lag {offset.lag}")
        assert len(done) == JOBS - len(poison) and all(c == DELIVERY_LIMIT for c in poison.values())


if __name__ == "__main__":
    main()
