"""A coordinator actor on a failing disk (issue 15): a write whose flush failed gets no
answer while the disk refuses to cut it off the log, the actor reopens its log on its own
once the disk works (no other request needed), answers that write with a retriable error,
and the write is not in the log. The actor class runs on an asyncio loop, without Ray."""
import asyncio
import functools
import time

import pytest

from actors.server import shard_host
from actors.server.share_coordinator import ShareCoordinatorActor
from runtime.errors import Errors
from runtime.log import FileLog
from runtime.messages.share_state import (InitializeShareGroupStateRequest, InitializeStateData,
                                          InitializeStatePartitionData, ReadShareGroupStateRequest, ReadStateData,
                                          ReadStatePartitionData)
from runtime.testing import FaultyIO


@pytest.fixture
def disk(tmp_path, monkeypatch):
    io = FaultyIO()
    monkeypatch.setattr(shard_host, "FileLog", functools.partial(FileLog, io=io))
    monkeypatch.setattr(shard_host, "RELOAD_RETRY_S", 0.02)
    return lambda: ShareCoordinatorActor(str(tmp_path), 0, {"log.flush.fsync": True}), io


def initialize(partition: int) -> InitializeShareGroupStateRequest:
    return InitializeShareGroupStateRequest("g", (InitializeStateData("t", (
        InitializeStatePartitionData(partition, 1, 0),)),))


def error_of(response) -> int:
    return response.results[0].partitions[0].error_code


async def eventually(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def test_a_write_whose_flush_failed_is_answered_once_the_actor_has_reopened_its_log(disk):
    make, io = disk

    async def scenario():
        actor = make()
        assert error_of(await actor.initialize_share_group_state(initialize(0))) == 0
        io.fail_ops = {"fsync"}  # the flush fails, and so does the fsync of the cut
        write = asyncio.ensure_future(actor.initialize_share_group_state(initialize(1)))
        await eventually(lambda: io.ops.count("fsync") >= 4)  # the actor keeps trying to reopen
        assert not write.done()
        io.fail_ops = set()
        response = await asyncio.wait_for(write, 10)
        assert error_of(response) in (Errors.NOT_COORDINATOR.code, Errors.COORDINATOR_NOT_AVAILABLE.code)
        await eventually(lambda: actor.runtime.log.offline is None)
        # With no leader epoch (-1): a read claiming the initialised epoch 0 is fenced.
        read = await actor.read_share_group_state(ReadShareGroupStateRequest("g", (ReadStateData("t", (
            ReadStatePartitionData(0, -1), ReadStatePartitionData(1, -1))),)))
        found = {p.partition: p.error_code for p in read.results[0].partitions}
        assert found[0] == 0 and found[1] != 0  # the failed initialisation is not in the log
        assert error_of(await actor.initialize_share_group_state(initialize(1))) == 0
        await actor.shutdown()

    asyncio.run(scenario())
