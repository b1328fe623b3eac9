"""A partition host that runs out of file descriptors (a real limit, set with setrlimit on
this process): new partitions are refused with KAFKA_STORAGE_ERROR, the partitions it leads
go on serving, an append that cannot open its parked segment fails alone, and nothing
acknowledged is lost. The host is the actor's class on an asyncio loop of this process."""
import asyncio
import concurrent.futures
import multiprocessing
import os
import resource
import time
from contextlib import contextmanager

from actors.server import partition_host, partition_leader
from runtime.errors import Errors
from runtime.messages.topics import FetchRequest, ProduceRequest
from runtime.topics.data import decode_entries, encode_records
from tests.helpers import host_of

STORAGE_ERROR = Errors.KAFKA_STORAGE_ERROR.code


def in_a_fresh_process(scenario, *args) -> None:
    """Run `scenario(*args)` (a coroutine function of this module) in a new interpreter:
    descriptor limits are the whole process's, and its count must not move with what other
    tests' threads open and close."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        pool.submit(_run, scenario, *args).result(timeout=120)


def _run(scenario, *args) -> None:
    partition_leader.OPEN_RETRY_S = 0.02
    asyncio.run(scenario(*args))


@contextmanager
def descriptor_limit(soft: int):
    """This process may hold `soft` descriptors (those open already stay open)."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)


@contextmanager
def all_descriptors_taken():
    """Every descriptor below the limit open: the next open gets EMFILE."""
    taken = []
    try:
        while True:
            try:
                taken.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        yield
    finally:
        for fd in taken:
            os.close(fd)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def send(host, topic: str, partition: int, value: bytes):
    return await host.produce(ProduceRequest(topic, partition, encode_records([(0, None, value, [])]), 1, 0))


async def read(host, topic: str, partition: int):
    r = await host.fetch(FetchRequest(topic, partition, 0, max_wait_ms=0))
    return r.error_code, [rec.value for b in r.batches for rec in decode_entries(b.records, b.base_offset)]


async def eventually(predicate, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def test_new_partitions_are_refused_before_the_host_runs_out_and_the_others_keep_serving(tmp_path):
    in_a_fresh_process(refused_before_running_out, str(tmp_path))


async def refused_before_running_out(data_dir: str):
    host = host_of(data_dir, [("old", p, "old-id", {}) for p in range(4)])
    await host.ready()
    for p in range(4):
        assert (await send(host, "old", p, f"acked-{p}".encode())).error_code == 0
    room_for = 3
    with descriptor_limit(open_descriptors() + partition_host.FD_RESERVE + room_for * partition_host.FDS_PER_LOG):
        host._fd_counted_at = float("-inf")  # count again under the new limit
        statuses = await host.add_partitions("new", "new-id", {}, list(range(8)))
        opened = [s["state"] for s in statuses].count("active")
        assert room_for <= opened <= room_for + 1, statuses  # a count can be one off: a listing takes one
        refused = [s for s in statuses if s["state"] != "active"]
        assert all("ulimit -n" in s["error"] for s in refused), refused
        code, _ = await read(host, "new", 7)
        assert code == STORAGE_ERROR
        assert (await send(host, "new", 7, b"refused")).error_code == STORAGE_ERROR
        for p in range(4):  # the partitions it leads serve as before
            assert (await send(host, "old", p, f"during-{p}".encode())).error_code == 0
            assert await read(host, "old", p) == (0, [f"acked-{p}".encode(), f"during-{p}".encode()])
        status = await host.status()
        assert status["partitions"] == 4 + 8 and len(status["offline_partitions"]) == 8 - opened
    # With descriptors again, a refused partition opens at its next request.
    for s in refused:
        await eventually(lambda: _accepted(host, "new", int(s["name"].rsplit("-", 1)[1])))
    assert (await host.status())["offline_partitions"] == []


async def _accepted(host, topic, partition) -> bool:
    return (await send(host, topic, partition, b"later")).error_code == 0


def test_a_parked_partition_that_cannot_open_its_segment_fails_that_request_only(tmp_path):
    in_a_fresh_process(parked_without_descriptors, str(tmp_path))


async def parked_without_descriptors(data_dir: str):
    host = host_of(data_dir, [("t", p, "t-id", {}) for p in range(3)], **{"log.segment.idle.close.ms": 50})
    await host.ready()
    for p in range(3):
        assert (await send(host, "t", p, b"acked")).error_code == 0
    before = open_descriptors()

    async def parked():
        return all(leader.parked for leader in host._leaders.values())
    await eventually(parked)
    assert open_descriptors() == before - 3, "an idle partition holds only its folder's lock"
    with descriptor_limit(open_descriptors() + 8), all_descriptors_taken():
        for p in range(3):
            assert (await send(host, "t", p, b"no descriptor")).error_code == STORAGE_ERROR
            assert (await read(host, "t", p))[0] == STORAGE_ERROR
        assert (await host.status())["offline_partitions"] == [], "the logs are not in doubt"
    for p in range(3):
        assert (await send(host, "t", p, b"after")).error_code == 0
        assert await read(host, "t", p) == (0, [b"acked", b"after"])


def test_a_partition_with_its_segment_open_still_takes_writes_when_descriptors_run_out(tmp_path):
    """The flush fsyncs a duplicate of the segment's descriptor off the loop; with none to
    duplicate it flushes on the loop, and the produce is acknowledged once durable."""
    in_a_fresh_process(open_without_descriptors, str(tmp_path))


async def open_without_descriptors(data_dir: str):
    host = host_of(data_dir, [("t", 0, "t-id", {})], **{"log.segment.idle.close.ms": 0})
    await host.ready()
    assert (await send(host, "t", 0, b"before")).error_code == 0
    with descriptor_limit(open_descriptors() + 8), all_descriptors_taken():
        assert (await send(host, "t", 0, b"while out")).error_code == 0
        assert await read(host, "t", 0) == (0, [b"before", b"while out"])
    assert (await send(host, "t", 0, b"after")).error_code == 0
    assert await read(host, "t", 0) == (0, [b"before", b"while out", b"after"])

