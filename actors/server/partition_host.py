"""A partition host: Kafka's broker for topic data. One actor carries the leaders of many
topic partitions (actors/server/partition_leader.py), so that a partition costs a log and a
little state, not a process.

Which host leads a partition is `naming.partition_host_index`, a function of the topic, the
partition and the number of hosts the deployment runs; a host (re)started by Ray asks the
controller for the topics, opens the logs of the partitions that are its own on threads, in
parallel, and serves once they are open (`status()` says how long that took). Requests for
a partition it does not lead are answered NOT_LEADER_OR_FOLLOWER, as a broker does, which
clients retry after they refresh their metadata.

Every Produce partition, every Fetch partition and every marker names its partition, so a
caller sends one call per host for a request's partitions: `batched("produce", ...)` (the
gateway's produce line, shoal's producer) and `fetch_many` (one long poll across
partitions). The host flushes every partition appended to in a turn of its loop together:
one pass, so producers of many partitions share the flush (group commit).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import resource
import threading
import time

import ray

from runtime.errors import Errors, KafkaError
from runtime.log_sync import sync_all
from runtime.messages.errors import error_response
from runtime.messages.topics import (DeleteRecordsRequest, DeleteRecordsResponse, FetchRequest, FetchResponse,
                                     ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, ProduceRequest,
                                     ProduceResponse)
from runtime.messages.txn import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from .. import naming
from ..placement import current_node
from ..retry import ActorDirectory, Backoff
from .coalescing import run_batched
from .partition_leader import PartitionLeader

log = logging.getLogger(__name__)

# Threads that open a restarted host's logs (recovery reads each log's tail and producer state).
OPEN_THREADS = 4
CONTROLLER_TIMEOUT_S = 30.0
# File descriptors a host keeps free for Ray's sockets and pipes, reads of closed segments
# and manifest rewrites: a log is opened only while it leaves these, so running out of
# descriptors refuses new partitions instead of starving the process that holds the others.
FD_RESERVE = 256
# Descriptors an open log holds at most: its folder's lock and its active segment (a parked
# log counts as open: its next write opens the segment again).
FDS_PER_LOG = 2


class PartitionHostActor:
    def __init__(self, data_dir: str, index: int, config: dict) -> None:
        self.index = index
        self._data_dir = data_dir
        self._config = dict(config)
        self._name = naming.partition_host(index)
        self._leaders: dict[tuple[str, int], PartitionLeader] = {}
        self._opening: dict[tuple[str, int], asyncio.Future] = {}
        self._loading: asyncio.Task | None = None
        self._reload_s: float | None = None
        self._dirty: list[PartitionLeader] = []  # appended to, waiting for the next flush pass
        self._flushing = False  # a flush pass is scheduled or its fsyncs are under way
        # The fsyncs run here, off the loop: a slow disk never stalls a long poll or another
        # partition's request, and appends go on while a pass syncs.
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="shoal-fsync")
        self._openers = concurrent.futures.ThreadPoolExecutor(OPEN_THREADS, thread_name_prefix="shoal-open")
        self._data = asyncio.Event()  # set when any partition's high watermark moves
        self._retention: asyncio.Task | None = None
        self._idle: asyncio.Task | None = None
        self._fd_room: int | None = None  # descriptors left for logs, counted at _fd_counted_at
        self._fd_counted_at = float("-inf")
        self._fd_lock = threading.Lock()
        self._actors = ActorDirectory(config.get(naming.NAMESPACE_KEY))
        self._node = current_node() if ray.is_initialized() else None  # None: a test's host, without Ray

    # ------------------------------------------------------------------ partitions

    def _new_leader(self, topic: str, partition: int, topic_id: str, configs: dict) -> PartitionLeader:
        return PartitionLeader(self._data_dir, topic, partition, topic_id, configs, self._config, self._actors,
                               self._wants_flush, self._moved, self._room_to_open)

    def _room_to_open(self) -> str | None:
        """None if this process has the descriptors for one more log (and takes them), or
        why not. Counting /proc/self/fd costs a millisecond per few thousand, so the count
        is taken at most once a second and run down by each log opened meanwhile; what
        else the process opens in that second, FD_RESERVE absorbs."""
        with self._fd_lock:  # the opening threads count and take together
            now = time.monotonic()
            if now - self._fd_counted_at > 1.0:
                self._fd_counted_at = now
                parked = sum(leader.parked for leader in list(self._leaders.values()))  # a copy: threads call this
                self._fd_room = _descriptors_left(parked)
            if self._fd_room is None:
                return None
            if self._fd_room < FDS_PER_LOG:
                return (f"too many open files: {self._name} leads {len(self._leaders)} partitions and keeps "
                        f"{FD_RESERVE} descriptors free for its own use; raise `ulimit -n` (at least "
                        f"{FDS_PER_LOG} per partition a host leads) or run more partition hosts")
            self._fd_room -= FDS_PER_LOG
            return None

    async def _loaded(self) -> None:
        """Until this host's partitions are open (started by the first call)."""
        await asyncio.shield(self._start_loading())

    def _start_loading(self) -> asyncio.Task:
        if self._loading is None:
            self._loading = asyncio.get_running_loop().create_task(self._load())
        return self._loading

    async def _load(self) -> None:
        """The partitions the controller's topics give this host, their logs opened."""
        started = time.monotonic()
        mine = await self._assigned()
        await self._open(mine)
        self._reload_s = time.monotonic() - started
        if mine:
            log.info("%s: %d partitions open in %.2fs", self._name, len(mine), self._reload_s)
        loop = asyncio.get_running_loop()
        if self._retention is None:
            interval = int(self._config.get("log.retention.check.interval.ms", 300000)) / 1000
            self._retention = loop.create_task(self._retention_loop(interval))
        idle_ms = int(self._config.get("log.segment.idle.close.ms", 60000))
        if self._idle is None and idle_ms > 0:
            self._idle = loop.create_task(self._park_idle_loop(idle_ms / 1000))

    async def _assigned(self) -> list[tuple[str, int, str, dict]]:
        """(topic, partition, topic id, topic configs) of every partition this host leads, as the
        controller's topics give them; waits for the controller as long as it takes."""
        backoff = Backoff(100, 2000)
        while True:
            try:
                response = await self._actors.call_async(naming.CONTROLLER, "metadata", MetadataRequest(None),
                                                         timeout_s=CONTROLLER_TIMEOUT_S)
                break
            except KafkaError as e:
                log.warning("%s: waiting for the controller's topics: %s", self._name, e)
                await asyncio.sleep(backoff.next_s())
        return [(t.name, p.partition_index, t.topic_id, t.configs) for t in response.topics if not t.error_code
                for p in t.partitions
                if naming.partition_host_index(t.name, p.partition_index, self._config) == self.index]

    async def _open(self, partitions: list[tuple[str, int, str, dict]]) -> None:
        """Leaders for these partitions, their logs opened on threads; a leader serves only
        once in `_leaders`, so nothing else touches it while its log opens, and callers
        asking for one partition at once share its opening."""
        loop = asyncio.get_running_loop()
        waits = []
        for topic, partition, topic_id, configs in partitions:
            key = (topic, partition)
            if key in self._leaders:
                continue
            opening = self._opening.get(key)
            if opening is None:
                leader = self._new_leader(topic, partition, topic_id, configs)
                opening = self._opening[key] = loop.run_in_executor(self._openers, leader.open)
                opening.add_done_callback(lambda _, key=key, leader=leader: self._opened(key, leader))
            waits.append(opening)
        await asyncio.gather(*waits)

    def _opened(self, key: tuple[str, int], leader: PartitionLeader) -> None:
        self._opening.pop(key, None)
        self._leaders.setdefault(key, leader)

    def _leader(self, topic: str, partition: int) -> PartitionLeader:
        leader = self._leaders.get((topic, partition))
        if leader is None:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"{self._name} does not lead {topic}-{partition}")
        return leader

    async def add_partitions(self, topic: str, topic_id: str, configs: dict, partitions: list[int]) -> list[dict]:
        """Lead these partitions of a topic the controller has (created or grown); their
        statuses. Partitions led already are kept as they are."""
        await self._loaded()
        await self._open([(topic, p, topic_id, configs) for p in partitions])
        return [await self.partition_status(topic, p) for p in partitions]

    async def delete_partitions(self, topic: str, partitions: list[int]) -> None:
        """The topic was deleted: close these partitions' logs and remove their folders."""
        await self._loaded()
        for p in partitions:
            leader = self._leaders.pop((topic, p), None)
            if leader is not None:
                leader.delete_data()

    async def alter_configs(self, topic: str, configs: dict) -> None:
        """The topic's configs after the controller changed them."""
        await self._loaded()
        for (t, _), leader in self._leaders.items():
            if t == topic:
                leader.alter_configs(configs)

    async def ready(self) -> dict:
        await self._loaded()
        return await self.status()

    async def status(self) -> dict:
        """The host's state ("loading" until its partitions are open: asking starts that)."""
        loaded = self._start_loading().done()
        statuses = [await leader.status() for leader in self._leaders.values()]
        offline = sorted(s["name"] for s in statuses if s["state"] != "active")  # offline, or did not open
        return {"name": self._name, "state": "active" if loaded else "loading",
                "error": f"offline partitions: {', '.join(offline)}" if offline else None,
                "partitions": len(statuses), "offline_partitions": offline, "reload_seconds": self._reload_s,
                "pid": os.getpid(), "node_id": self._node}

    async def partition_status(self, topic: str, partition: int) -> dict:
        await self._loaded()
        return {**await self._leader(topic, partition).status(), "host": self._name, "pid": os.getpid(),
                "node_id": self._node}

    # ------------------------------------------------------------------ the data path

    async def batched(self, method: str, calls: list[tuple]) -> list:
        """Many requests in one Ray call (a Produce request's partitions that this host
        leads, or the produces the gateway gathered), started in order in one turn of the
        loop: each partition's batches keep their order and share the flush."""
        await self._loaded()
        return await run_batched(self, method, calls)

    async def _on_leader(self, method: str, request):
        """The request's partition's leader's answer to it, or the error a partition this
        host does not lead gets."""
        await self._loaded()
        try:
            leader = self._leader(request.topic, request.partition)
        except KafkaError as e:
            return error_response(request, e)
        return await getattr(leader, method)(request)

    async def produce(self, request: ProduceRequest) -> ProduceResponse:
        return await self._on_leader("produce", request)

    def _wants_flush(self, leader: PartitionLeader) -> None:
        self._dirty.append(leader)
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """A flush pass over every partition appended to since the last one: it starts once
        the loop has started every request that arrived with the first append, and its
        fsyncs run one after another on the writer thread; what is appended meanwhile goes
        in the next pass, which starts when this one is over (group commit)."""
        dirty, self._dirty = list(dict.fromkeys(self._dirty)), []
        points = [(leader, point) for leader in dirty if (point := leader.begin_flush()) is not None]
        if not points:
            self._flushing = False
            return
        synced = asyncio.get_running_loop().run_in_executor(self._writer, sync_all, [p for _, p in points])
        synced.add_done_callback(lambda _: self._flushed(points))

    def _flushed(self, points: list) -> None:
        for leader, point in points:
            leader.end_flush(point)
        if self._dirty:
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._flushing = False

    def _moved(self) -> None:
        self._data.set()
        self._data = asyncio.Event()

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        """The long poll of one partition (a SharePartition's read, the console consumer)."""
        (response,) = await self.fetch_many([request], request.max_wait_ms, request.min_bytes)
        return response

    async def fetch_many(self, requests: list[FetchRequest], max_wait_ms: int, min_bytes: int,
                         max_bytes: int | None = None) -> list[FetchResponse]:
        """Kafka's Fetch over this host's partitions: read them all, at most `max_bytes`
        between them (Kafka's fetch.max.bytes; None: no limit); until they hold min_bytes
        between them, or one has an error, wait for data until max_wait_ms and read again.
        One answer per request, in order."""
        await self._loaded()
        deadline = time.monotonic() + max(max_wait_ms, 0) / 1000
        while True:
            moved = self._data
            responses, size = self._read_many(requests, max_bytes)
            remaining = deadline - time.monotonic()
            if size >= max(min_bytes, 1) or remaining <= 0 or any(r.error_code for r in responses):
                return responses
            try:
                await asyncio.wait_for(moved.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    def _read_many(self, requests: list[FetchRequest], max_bytes: int | None) -> tuple[list[FetchResponse], int]:
        """The reads of a Fetch and their bytes, as Kafka's broker limits them: partitions in
        request order, each at most what is left of `max_bytes`; the first to give records
        gives its first batch whole even when larger (so that the consumer makes progress),
        and once nothing is left the rest answer without records (but with where their logs
        stand), to be fetched again."""
        responses, size = [], 0
        for request in requests:
            if max_bytes is None:
                response = self._read(request)
            else:
                left = max(max_bytes - size, 0)
                response = self._read(request, min(request.partition_max_bytes, left), min_one=size == 0)
            size += sum(len(b.records) for b in response.batches)
            responses.append(response)
        return responses, size

    def _read(self, request: FetchRequest, max_bytes: int | None = None, min_one: bool = True) -> FetchResponse:
        try:
            return self._leader(request.topic, request.partition).read(request, max_bytes, min_one)
        except KafkaError as e:
            return FetchResponse(request.topic, request.partition, e.code, -1, -1, -1, error_message=e.message)

    async def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        return await self._on_leader("list_offsets", request)

    async def delete_records(self, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
        return await self._on_leader("delete_records", request)

    async def write_txn_markers(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """Append the commit or abort markers addressed to this host's partitions (a marker
        naming another partition gets NOT_LEADER_OR_FOLLOWER) and answer once they are
        durable."""
        await self._loaded()
        results: list[tuple[int, str, int, int]] = []  # (producer id, topic, partition, error code)
        appended: dict[tuple[str, int], PartitionLeader] = {}
        for marker in request.markers:
            for topic in marker.topics:
                for partition in topic.partition_indexes:
                    leader = self._leaders.get((topic.name, partition))
                    if leader is None:
                        code = Errors.NOT_LEADER_OR_FOLLOWER.code
                    else:
                        code = leader.append_txn_marker(marker)
                        if code == 0:
                            appended[(topic.name, partition)] = leader
                    results.append((marker.producer_id, topic.name, partition, code))
        errors = await asyncio.gather(*[leader.flushed() for leader in appended.values()])
        failed = {key for key, error in zip(appended, errors) if error is not None}
        results = [(pid, t, p, Errors.KAFKA_STORAGE_ERROR.code if code == 0 and (t, p) in failed else code)
                   for pid, t, p, code in results]
        return WriteTxnMarkersResponse.from_results(results)

    # ------------------------------------------------------------------ retention

    async def _park_idle_loop(self, idle_s: float) -> None:
        """Close the active segment files of the partitions not written to for idle_s."""
        while True:
            await asyncio.sleep(idle_s / 2)
            idle_before = time.monotonic() - idle_s
            parked = sum(leader.park(idle_before) for leader in list(self._leaders.values()))
            if parked:
                log.debug("%s: parked %d idle partitions' segments", self._name, parked)

    async def _retention_loop(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.apply_retention()

    async def apply_retention(self, topic: str | None = None, partition: int | None = None) -> list[str]:
        """Delete the segments retention lets go, of one partition or of all; their files."""
        await self._loaded()
        leaders = [self._leader(topic, partition)] if topic is not None else list(self._leaders.values())
        deleted = []
        for leader in leaders:
            deleted.extend(await leader.apply_retention())
        return deleted


def _descriptors_left(parked: int) -> int | None:
    """Descriptors this process may still open before it is FD_RESERVE below its limit,
    `parked` logs counted as open; None where it cannot tell (no /proc, no limit)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        used = len(os.listdir("/proc/self/fd"))
    except (OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    return soft - FD_RESERVE - used - parked
