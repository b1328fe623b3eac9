"""Coordinator metrics through `ray.util.metrics`, so they reach Prometheus and the Ray
dashboard, named after Kafka's GroupCoordinatorMetrics, CoordinatorRuntimeMetrics and
share-group metrics (Kafka's `group-count` is `shoal_group_count` here: Prometheus names
have no dashes).

Each actor process keeps one `MetricsRegistry`. Everything it gives Ray it also keeps, so
`snapshot()` (and the `metrics_snapshot()` RPC of every shard host) returns exactly the values
Ray was given: counters and gauges as numbers, histograms as count and sum.

Where the numbers come from:
- the host, protocol-blind: requests and their latency per RPC (heartbeats, join and sync
  latency, offset commits...), batch flush time, partition load time;
- the shard, through `shard_metrics(shard)` every `metrics.export.interval.ms`: groups per
  protocol and state, offsets retained, rebalances (group epoch increases) and how long they
  took (the groups' rebalance clocks);
- the responses of offset commits (offsets committed), share fetches (records acquired) and
  share-state writes (records acknowledged, archived and released);
- the SharePartition actors: acquisition locks that ran out, and the records in flight.
"""
from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from typing import Any, Callable

log = logging.getLogger(__name__)

__all__ = ["MetricsRegistry", "registry", "instrument_rpcs", "shard_metrics", "ShardSampler", "TimedLog",
           "METRICS"]

LATENCY_BOUNDARIES_MS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000]

# name -> (kind, description, tag keys)
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # GroupCoordinatorMetrics
    "shoal_group_count": ("gauge", "The number of groups, per protocol (classic, consumer, share).",
                          ("coordinator", "protocol")),
    "shoal_classic_group_count": ("gauge", "The number of classic groups in each state.", ("coordinator", "state")),
    "shoal_consumer_group_count": ("gauge", "The number of consumer groups in each state.", ("coordinator", "state")),
    "shoal_share_group_count": ("gauge", "The number of share groups in each state.", ("coordinator", "state")),
    "shoal_offset_count": ("gauge", "The number of offsets retained.", ("coordinator",)),
    "shoal_offset_commit_count": ("counter", "Offsets committed (one per partition of a successful commit).",
                                  ("coordinator",)),
    "shoal_group_completed_rebalance_count": ("counter", "Classic group completed rebalances.", ("coordinator",)),
    "shoal_consumer_group_rebalance_count": ("counter", "Consumer group rebalances (group epoch bumps).",
                                             ("coordinator",)),
    "shoal_share_group_rebalance_count": ("counter", "Share group rebalances (group epoch bumps).", ("coordinator",)),
    "shoal_group_rebalance_duration_ms": ("histogram", "How long rebalances took, per protocol: classic groups from "
                                                       "PreparingRebalance to Stable, consumer groups from a new "
                                                       "group epoch to every member reconciled.",
                                          ("coordinator", "protocol")),
    # Kafka's RequestMetrics, per coordinator RPC (heartbeat, join_group, sync_group, offset_commit...)
    "shoal_request_count": ("counter", "Requests served, per coordinator RPC.", ("coordinator", "request")),
    "shoal_request_latency_ms": ("histogram", "Time from a request's arrival to its response (a long poll "
                                              "such as JoinGroup waits for the rebalance).",
                                 ("coordinator", "request")),
    # CoordinatorRuntimeMetrics
    "shoal_batch_flush_time_ms": ("histogram", "Time to append and flush a batch of the state log.",
                                  ("coordinator",)),
    "shoal_partition_load_time_ms": ("histogram", "Time to load a coordinator partition from its log.",
                                     ("coordinator",)),
    # share-group state (written by SharePartitions to the share coordinator)
    "shoal_share_records_acknowledged_count": ("counter", "Share-group records acknowledged (ACCEPT).",
                                               ("coordinator",)),
    "shoal_share_records_archived_count": ("counter", "Share-group records archived (REJECT, or the delivery "
                                                      "count limit reached).", ("coordinator",)),
    "shoal_share_records_released_count": ("counter", "Share-group records made available again (RELEASE, or "
                                                      "an acquisition lock that timed out).", ("coordinator",)),
    # SharePartitionMetrics, per share partition (its `coordinator` tag is group/topic-partition)
    "shoal_share_records_acquired_count": ("counter", "Records acquired by share fetches.", ("coordinator",)),
    "shoal_share_acquisition_lock_timeout_count": ("counter", "Records whose acquisition lock ran out before "
                                                              "they were acknowledged.", ("coordinator",)),
    "shoal_share_in_flight_records": ("gauge", "Records in the share partition's in-flight window, from its "
                                               "start offset to the last record fetched (Kafka's "
                                               "InFlightMessageCount).", ("coordinator",)),
}


class MetricsRegistry:
    """The Ray metric objects of one process, and a copy of what they were given."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ray: dict[str, Any] = {}
        self._values: dict[tuple[str, tuple], Any] = {}

    def _metric(self, name: str):
        metric = self._ray.get(name)
        if metric is None:
            kind, description, tag_keys = METRICS[name]
            try:
                from ray.util import metrics as ray_metrics
                if kind == "counter":
                    metric = ray_metrics.Counter(name, description, tag_keys)
                elif kind == "gauge":
                    metric = ray_metrics.Gauge(name, description, tag_keys)
                else:
                    metric = ray_metrics.Histogram(name, description, LATENCY_BOUNDARIES_MS, tag_keys)
            except Exception:  # outside a Ray worker: keep the copy only
                metric = False
            self._ray[name] = metric
        return metric

    def _key(self, name: str, tags: dict) -> tuple[str, tuple]:
        return name, tuple(sorted((k, str(v)) for k, v in tags.items()))

    def inc(self, name: str, value: float = 1, **tags) -> None:
        if value <= 0:
            return
        metric = self._metric(name)
        with self._lock:
            key = self._key(name, tags)
            self._values[key] = self._values.get(key, 0) + value
        if metric:
            metric.inc(value, tags={k: str(v) for k, v in tags.items()})

    def set(self, name: str, value: float, **tags) -> None:
        metric = self._metric(name)
        with self._lock:
            self._values[self._key(name, tags)] = value
        if metric:
            metric.set(value, tags={k: str(v) for k, v in tags.items()})

    def observe(self, name: str, value: float, **tags) -> None:
        metric = self._metric(name)
        with self._lock:
            key = self._key(name, tags)
            count, total = self._values.get(key, (0, 0.0))
            self._values[key] = (count + 1, total + value)
        if metric:
            metric.observe(value, tags={k: str(v) for k, v in tags.items()})

    def snapshot(self) -> list[dict]:
        """Every value given to Ray: {"name", "tags", "value"} (histograms: {"count", "sum"})."""
        with self._lock:
            items = sorted(self._values.items())
        out = []
        for (name, tags), value in items:
            if isinstance(value, tuple):
                value = {"count": value[0], "sum": value[1]}
            out.append({"name": name, "tags": dict(tags), "value": value})
        return out


registry = MetricsRegistry()


# ---------------------------------------------------------------------- RPC instrumentation

def instrument_rpcs(cls, coordinator: Callable[[Any], str]) -> None:
    """Wrap the public coroutine methods `cls` defines itself so that each call counts and
    times itself as a request named after the method. Protocol-blind: only names."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not inspect.iscoroutinefunction(fn) or getattr(fn, "_instrumented", False):
            continue
        setattr(cls, name, _timed(name, fn, coordinator))


def _timed(request: str, fn, coordinator):
    @functools.wraps(fn)
    async def wrapper(self, *args, **kwargs):
        started = time.monotonic()
        try:
            response = await fn(self, *args, **kwargs)
        finally:
            name = coordinator(self)
            registry.inc("shoal_request_count", coordinator=name, request=request)
            registry.observe("shoal_request_latency_ms", (time.monotonic() - started) * 1000,
                             coordinator=name, request=request)
        observer = _OBSERVERS.get(request)
        if observer is not None:
            try:
                observer(name, args, response)
            except Exception:  # a metric must never cost the caller its response
                log.exception("%s: metrics of %s failed", name, request)
        return response
    wrapper._instrumented = True
    return wrapper


def _share_state_written(coordinator: str, args: tuple, response: Any) -> None:
    """Records moved to a terminal or available state by a successful share-state write."""
    from runtime.share_state.records import RecordState
    request = args[0]
    ok = {(r.topic_id, p.partition) for r in response.results for p in r.partitions if not p.error_code}
    counts = {RecordState.ACKNOWLEDGED: 0, RecordState.ARCHIVED: 0, RecordState.AVAILABLE: 0}
    for topic in request.topics:
        for p in topic.partitions:
            if (topic.topic_id, p.partition) not in ok:
                continue
            for b in p.state_batches:
                state = RecordState(b.delivery_state)
                if state in counts:
                    counts[state] += b.last_offset - b.first_offset + 1
    registry.inc("shoal_share_records_acknowledged_count", counts[RecordState.ACKNOWLEDGED], coordinator=coordinator)
    registry.inc("shoal_share_records_archived_count", counts[RecordState.ARCHIVED], coordinator=coordinator)
    registry.inc("shoal_share_records_released_count", counts[RecordState.AVAILABLE], coordinator=coordinator)


def _records_acquired(share_partition: str, args: tuple, response: Any) -> None:
    registry.inc("shoal_share_records_acquired_count",
                 sum(r.last_offset - r.first_offset + 1 for t in response.responses for p in t.partitions
                     for r in p.acquired_records), coordinator=share_partition)


def _offsets_committed(coordinator: str, args: tuple, response: Any) -> None:
    registry.inc("shoal_offset_commit_count", sum(1 for t in response.topics for p in t.partitions
                                                   if not p.error_code), coordinator=coordinator)


_OBSERVERS: dict[str, Callable[[str, tuple, Any], None]] = {
    "offset_commit": _offsets_committed,
    "write_share_group_state": _share_state_written,
    "share_fetch": _records_acquired,
}


# ---------------------------------------------------------------------- the state log

class TimedLog:
    """A FileLog whose batch writes (append, then flush) are timed as batch flush time."""

    def __init__(self, log, coordinator: str) -> None:
        self._log = log
        self._coordinator = coordinator
        self._appended_at: float | None = None

    def append(self, *args, **kwargs):
        if self._appended_at is None:
            self._appended_at = time.monotonic()
        return self._log.append(*args, **kwargs)

    def flush(self) -> None:
        started = self._appended_at if self._appended_at is not None else time.monotonic()
        self._appended_at = None
        self._log.flush()
        registry.observe("shoal_batch_flush_time_ms", (time.monotonic() - started) * 1000,
                         coordinator=self._coordinator)

    def __getattr__(self, name: str):
        return getattr(self._log, name)


# ---------------------------------------------------------------------- shard gauges

class ShardSampler:
    """Turns periodic reads of a shard into gauges, and group epoch increases since the last
    read into rebalance counts."""

    def __init__(self, coordinator: str) -> None:
        self.coordinator = coordinator
        self._epochs: dict[str, tuple[str, int]] = {}
        self._gauges: set[tuple[str, tuple]] = set()

    def export(self, sample: dict | None) -> None:
        if sample is None:
            return
        current = set()
        for (name, tags), value in sample["gauges"].items():
            registry.set(name, value, coordinator=self.coordinator, **dict(tags))
            current.add((name, tags))
        for name, tags in self._gauges - current:  # a state nobody is in any more
            registry.set(name, 0, coordinator=self.coordinator, **dict(tags))
        self._gauges |= current
        counters = {"classic": "shoal_group_completed_rebalance_count", "consumer":
                    "shoal_consumer_group_rebalance_count", "share": "shoal_share_group_rebalance_count"}
        for kind, duration_ms in sample["rebalance_durations"]:
            registry.observe("shoal_group_rebalance_duration_ms", duration_ms, coordinator=self.coordinator,
                             protocol=kind)
        for group_id, (kind, epoch) in sample["epochs"].items():
            before = self._epochs.get(group_id)
            previous = before[1] if before is not None and before[0] == kind else 0
            if kind in counters and epoch > previous:
                registry.inc(counters[kind], epoch - previous, coordinator=self.coordinator)
        self._epochs = dict(sample["epochs"])


def shard_metrics(shard) -> dict | None:
    """A look at a group coordinator shard: gauges {(name, tags): value}, each group's
    (type, epoch), and the (type, duration) of the rebalances that ended since the last look
    (taken from the groups' rebalance clocks). Other shards have no protocol metrics (None)."""
    groups = getattr(shard, "groups", None)
    if not isinstance(groups, dict):
        return None
    gauges: dict[tuple[str, tuple], int] = {}
    epochs = {}
    durations = []
    for group_id, group in groups.items():
        kind = group.type
        if f"shoal_{kind}_group_count" not in METRICS:
            continue
        durations += [(kind, d) for d in group.rebalance_clock.take()]
        key = ("shoal_group_count", (("protocol", kind),))
        gauges[key] = gauges.get(key, 0) + 1
        key = (f"shoal_{kind}_group_count", (("state", str(group.state)),))
        gauges[key] = gauges.get(key, 0) + 1
        epoch = getattr(group, "group_epoch", None)
        if epoch is None:
            epoch = getattr(group, "generation_id", 0)
        epochs[group_id] = (kind, int(epoch))
    offsets = getattr(getattr(shard, "offsets", None), "offsets", {})
    gauges[("shoal_offset_count", ())] = sum(len(ps) for topics in offsets.values() for ps in topics.values())
    return {"gauges": gauges, "epochs": epochs, "rebalance_durations": durations}
