"""Cluster-level configuration: Kafka's dotted names and defaults, except where a laptop
needs smaller numbers (said in the README)."""
from __future__ import annotations

DEFAULTS: dict = {
    # Kafka defaults these to 50; one actor per partition costs a process (~140 MB), so a
    # laptop deployment starts with one of each. Raise them on a real cluster.
    "offsets.topic.num.partitions": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    # The transaction.version cluster feature: 2 (KIP-890 part 2, Kafka 4.x) or 1.
    "transaction.version": 2,
    # The runtime's write path: -1 is adaptive, Kafka 4.2's default (runtime.coordinator.RuntimeConfig).
    "append.linger.ms": -1,
    "log.flush.fsync": True,
    "offsets.topic.segment.bytes": 104857600,
    # Resources each actor asks Ray for: zero CPUs so one laptop can host them all.
    "actor.num.cpus": 0,
    "actor.resources": {},
    # A SharePartition actor with no call and no record acquired for this long exits (its
    # state is with the share coordinator; the next ShareFetch brings it back). 0: never.
    # Ten minutes, as Kafka's connections.max.idle.ms: long enough that a consumer that
    # pauses between batches does not reload it each time.
    "group.share.partition.idle.ms": 600000,
    # Where actors run: "default" (Ray's scheduler) or "spread" (coordinators and partition
    # leaders over the nodes); see actors/placement.py.
    "actor.placement": "default",
    # A dotted path of a runtime.log.OsIO subclass, built with this config, that every log's
    # file operations go through (fault injection in tests); None: the OS's.
    "log.io.class": None,
    # Partition hosts (Kafka's brokers for topic data): how many run on each Ray node at
    # deployment, each carrying the leaders of many topic partitions.
    "partition.hosts.per.node": 1,
    # The most topic partitions the deployment takes (CreateTopics and CreatePartitions past
    # it get POLICY_VIOLATION); unset: 4,000 per partition host.
    "max.partitions": None,
    # The data path.
    "log.retention.check.interval.ms": 300000,
    # A partition with no write for this long closes its active segment's file (the next
    # write opens it again), so an idle partition holds one descriptor, its folder's lock.
    # 0: never.
    "log.segment.idle.close.ms": 60000,
    "fetch.max.wait.ms": 500,
    # Kafka's: a Metadata request names a topic that does not exist and allows it, and the
    # gateway creates it with num.partitions partitions.
    "auto.create.topics.enable": True,
    "num.partitions": 1,
}


def merged(config: dict | None) -> dict:
    out = dict(DEFAULTS)
    for k, v in (config or {}).items():
        out[str(k)] = v
    return out


def parse_value(text: str):
    """A value given on the command line (--config k=v): int, float, bool, a JSON object
    (`actor.resources={"shoal": 1}`) or string."""
    low = text.strip().lower()
    if low.startswith("{"):
        import json
        return json.loads(text)
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
