"""The classic consumer: kafka-python's KafkaConsumer API over a client actor.

`Consumer` is the facade in the user's process: one Ray call per `poll`, which returns the
records its `ConsumerActor` (actors/clients/consumer_actor.py) buffered, together with the rebalance
events; the facade runs the ConsumerRebalanceListener callbacks there, as kafka-python does
inside poll. With ``group_protocol="consumer"`` the actor is the KIP-848 one
(actors/clients/modern_consumer.py).
"""
from __future__ import annotations

import math
import time
import uuid
from collections import deque
from typing import Any, Callable

import ray

from runtime.assignors import client_assignor
from runtime.errors import Errors, KafkaError
from runtime.messages.topics import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

from .client import ClientFacade
from .consumer_actor import ConsumerActor
from .consumer_base import LOST, REVOKED, PollResult
from ..errors import to_kafka_error
from .modern_consumer import ModernConsumerActor
from runtime.clients.fetch import NoOffsetForPartitionError
from runtime.clients.offsets import CommitFailedError
from runtime.clients.types import ConsumerRebalanceListener, ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["Consumer", "ConsumerActor", "NoOffsetForPartitionError", "CommitFailedError", "DEFAULT_CONFIG"]

# kafka-python's defaults (group_protocol as the classic protocol; the assignors as Kafka 3.x).
DEFAULT_CONFIG: dict = {
    "client_id": None,
    "group_protocol": "classic",  # or "consumer": KIP-848 (actors/clients/modern_consumer.py)
    "group_remote_assignor": None,  # the consumer protocol's server-side assignor; None: the group's default
    "group_instance_id": None,
    "partition_assignment_strategy": ("range", "cooperative-sticky"),
    "session_timeout_ms": 10000,
    "heartbeat_interval_ms": 3000,
    "rebalance_timeout_ms": None,  # None: max_poll_interval_ms, as Kafka's consumer sends it
    "max_poll_interval_ms": 300000,
    "max_poll_records": 500,
    "enable_auto_commit": True,
    "auto_commit_interval_ms": 5000,
    "auto_offset_reset": "latest",
    "fetch_max_wait_ms": 500,
    "fetch_min_bytes": 1,
    "max_partition_fetch_bytes": 1048576,
    "fetch_max_bytes": 52428800,  # of one Fetch, across the partitions of a partition host
    "isolation_level": "read_uncommitted",  # "read_committed": only committed transactions' records
    "request_timeout_ms": 30000,
    "retry_backoff_ms": 100,
    "metadata_max_age_ms": 300000,
    "key_deserializer": None,
    "value_deserializer": None,
    "consumer_timeout_ms": float("inf"),  # how long iterating waits for a record before it stops
}


class Consumer(ClientFacade):
    """kafka-python's KafkaConsumer: `cluster.consumer(group_id, **config)` with
    kafka-python's keyword names. Values (and keys) are bytes unless deserializers are given."""

    def __init__(self, cluster, group_id: str | None = None, **config) -> None:
        unknown = set(config) - set(DEFAULT_CONFIG)
        if unknown:
            raise TypeError(f"unknown consumer settings: {sorted(unknown)}")
        settings = {**DEFAULT_CONFIG, **config}
        if settings["group_protocol"] not in ("classic", "consumer"):
            raise KafkaError(Errors.UNSUPPORTED_VERSION, f"group_protocol {settings['group_protocol']!r} is not "
                                                          "served by this consumer")
        if settings["isolation_level"] not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation_level is read_uncommitted or read_committed, "
                             f"not {settings['isolation_level']!r}")
        if isinstance(settings["partition_assignment_strategy"], str):
            settings["partition_assignment_strategy"] = (settings["partition_assignment_strategy"],)
        for name in settings["partition_assignment_strategy"]:
            client_assignor(name)  # an unknown name fails here, not in the background
        self._key_deserializer = settings.pop("key_deserializer")
        self._value_deserializer = settings.pop("value_deserializer")
        client_id = settings["client_id"] or f"consumer-{group_id or 'none'}-{uuid.uuid4().hex[:8]}"
        settings["client_id"] = client_id
        self.config = settings
        self._listener: ConsumerRebalanceListener | None = None
        self._async_commits: list[tuple[Any, dict | None, Callable | None]] = []
        self._closed = False
        self._subscription: set = set()
        self._iterated: deque = deque()
        super().__init__(cluster, "consumer", _actor_class(settings["group_protocol"]), client_id, group_id, settings)

    # ------------------------------------------------------------------ subscription

    def subscribe(self, topics, listener: ConsumerRebalanceListener | None = None) -> None:
        if isinstance(topics, str):
            topics = [topics]
        self._listener = listener
        self._call("subscribe", list(topics), listener is not None)
        self._subscription = set(topics)

    def subscription(self) -> set | None:
        return set(self._subscription) if self._subscription else None

    def unsubscribe(self) -> None:
        self._subscription = set()
        self._run_callbacks(self._call("unsubscribe"))

    def assign(self, partitions) -> None:
        self._call("assign", [TopicPartition(*tp) for tp in partitions])

    def assignment(self) -> set:
        return self._call("assignment")

    # ------------------------------------------------------------------ consuming

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        """{TopicPartition: [ConsumerRecord]}; rebalance callbacks run here."""
        deadline = time.monotonic() + timeout_ms / 1000
        self._finish_async_commits()
        while True:
            remaining = max(int((deadline - time.monotonic()) * 1000), 0)
            result: PollResult = self._call("poll", remaining, max_records, timeout_s=remaining / 1000 + 60)
            self._run_callbacks(result.events)
            if result.barrier is not None:
                self._call("callbacks_done", result.barrier)
            if result.error is not None:
                raise result.error
            if result.records or time.monotonic() >= deadline:
                return self._deserialize(result.records)

    def _deserialize(self, rows: dict) -> dict:
        """The actor's rows ({(topic, partition): [(offset, timestamp, key, value, headers)]},
        runtime.clients.fetch's drain) as {TopicPartition: [ConsumerRecord]}."""
        kd, vd = self._key_deserializer, self._value_deserializer
        if kd is None and vd is None:
            return {TopicPartition(t, p): [ConsumerRecord(t, p, *row) for row in rs] for (t, p), rs in rows.items()}
        return {TopicPartition(t, p): [ConsumerRecord(t, p, o, ts, kd(k) if kd and k is not None else k,
                                                      vd(v) if vd and v is not None else v, h)
                                       for o, ts, k, v, h in rs]
                for (t, p), rs in rows.items()}

    def _run_callbacks(self, events) -> None:
        if self._listener is None:
            return
        for kind, partitions in events:
            if kind == REVOKED:
                self._listener.on_partitions_revoked(set(partitions))
            elif kind == LOST:
                self._listener.on_partitions_lost(set(partitions))
            else:
                self._listener.on_partitions_assigned(set(partitions))

    def position(self, tp) -> int:
        return self._call("position", TopicPartition(*tp))

    def seek(self, tp, offset: int) -> None:
        self._call("seek", TopicPartition(*tp), offset)

    def seek_to_beginning(self, *partitions) -> None:
        self._call("seek_to", [TopicPartition(*tp) for tp in partitions], EARLIEST_TIMESTAMP)

    def seek_to_end(self, *partitions) -> None:
        self._call("seek_to", [TopicPartition(*tp) for tp in partitions], LATEST_TIMESTAMP)

    def pause(self, *partitions) -> None:
        self._call("pause", [TopicPartition(*tp) for tp in partitions], True)

    def resume(self, *partitions) -> None:
        self._call("pause", [TopicPartition(*tp) for tp in partitions], False)

    def paused(self) -> set:
        return self._call("paused")

    def beginning_offsets(self, partitions) -> dict:
        return self._call("list_offsets", list(partitions), EARLIEST_TIMESTAMP)

    def end_offsets(self, partitions) -> dict:
        return self._call("list_offsets", list(partitions), LATEST_TIMESTAMP)

    def __iter__(self) -> "Consumer":
        return self

    def __next__(self) -> ConsumerRecord:
        """kafka-python's iteration: records one by one; stops after consumer_timeout_ms
        without one."""
        deadline = time.monotonic() + self.config["consumer_timeout_ms"] / 1000
        while not self._iterated:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StopIteration
            batch = self.poll(timeout_ms=int(min(remaining, 1.0) * 1000))
            self._iterated.extend(r for records in batch.values() for r in records)
        return self._iterated.popleft()

    # ------------------------------------------------------------------ offsets

    def commit(self, offsets: dict | None = None, timeout_ms: int | None = None) -> None:
        """Synchronous commit of `offsets` ({TopicPartition: OffsetAndMetadata}) or of
        everything consumed so far, retried until it succeeds or fails for good, or until
        `timeout_ms` (then REQUEST_TIMED_OUT), as kafka-python's commit()."""
        self._finish_async_commits()
        self._blocking_call("commit", _offsets_arg(offsets), timeout_ms)

    def commit_async(self, offsets: dict | None = None, callback: Callable | None = None):
        """Starts the commit; `callback(offsets, response_or_exception)` runs in a later poll,
        commit or close, as in kafka-python."""
        ref = self._submit("commit", _offsets_arg(offsets))
        self._async_commits.append((ref, offsets, callback))
        return ref

    def _finish_async_commits(self, wait: bool = False) -> None:
        if not self._async_commits:
            return
        refs = [ref for ref, _, _ in self._async_commits]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=30 if wait else 0)
        done = set(done)
        pending = []
        for ref, offsets, callback in self._async_commits:
            if ref not in done:
                pending.append((ref, offsets, callback))
                continue
            try:
                ray.get(ref)
                outcome = None
            except Exception as e:
                outcome = to_kafka_error(e)
            if callback is not None:
                callback(offsets, outcome)
        self._async_commits = pending

    def committed(self, tp, timeout_ms: int | None = None) -> OffsetAndMetadata | None:
        """The group's committed offset of `tp`, waiting for the coordinator as commit() does."""
        tp = TopicPartition(*tp)
        return self._blocking_call("committed", [tp], timeout_ms)[tp]

    def _blocking_call(self, method: str, arg, timeout_ms: int | None):
        """A call that blocks as kafka-python's does: until it succeeds or fails for good, or
        for `timeout_ms`. The actor keeps the deadline; the facade waits for its answer."""
        if timeout_ms is None:
            return self._call(method, arg, math.inf, timeout_s=None)
        return self._call(method, arg, timeout_ms / 1000, timeout_s=timeout_ms / 1000 + 30)

    # ------------------------------------------------------------------ closing

    def close(self, autocommit: bool = True) -> None:
        """Commit (with auto commit), run on_partitions_revoked, leave the group, end the
        client actor."""
        if self._closed:
            return
        self._closed = True
        try:
            self._finish_async_commits(wait=True)
            self._run_callbacks(self._call("prepare_close"))
            self._call("close", autocommit)
        finally:
            self._kill()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _actor_class(group_protocol: str) -> type:
    return ModernConsumerActor if group_protocol == "consumer" else ConsumerActor


def _offsets_arg(offsets: dict | None) -> dict | None:
    if offsets is None:
        return None
    return {TopicPartition(*tp): om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om))
            for tp, om in offsets.items()}
