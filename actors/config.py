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
    # The runtime's write path.
    "append.linger.ms": 5,
    "log.flush.fsync": True,
    "offsets.topic.segment.bytes": 104857600,
    # Resources each actor asks Ray for: zero CPUs so one laptop can host them all.
    "actor.num.cpus": 0,
    "actor.resources": {},
    # Partition leaders and the data path.
    "log.retention.check.interval.ms": 300000,
    "fetch.max.wait.ms": 500,
}


def merged(config: dict | None) -> dict:
    out = dict(DEFAULTS)
    for k, v in (config or {}).items():
        out[str(k)] = v
    return out


def parse_value(text: str):
    """A value given on the command line (--config k=v): int, float, bool or string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
