"""A group coordinator on a slow disk (issue 16): the shard host flushes its log on a writer
thread, so while a flush hangs the actor goes on taking requests. A heartbeat, which rests
on nothing being written (not on committed offsets, even its own group's), is answered at
once; an offset commit is answered only once its batch is durable, and so is a read that
may have seen it; a flush that fails fails every write it covered and every one computed on
top of them. The actor class runs on an asyncio loop, without Ray; the disk's fsync blocks
until the test lets it go."""
import asyncio
import functools
import threading
import time

import pytest

from actors.server import shard_host
from actors.server.group_coordinator import GroupCoordinatorActor
from runtime.errors import Errors
from runtime.log import FileLog
from runtime.messages.group import (HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, OffsetCommitRequest,
                                    OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetFetchRequest,
                                    OffsetFetchRequestGroup, SyncGroupRequest)
from runtime.testing import FaultyIO


class GatedDisk(FaultyIO):
    """A disk whose fsync waits, on the writer's thread, until the gate is open."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()  # an fsync is held at the gate

    def fsync(self, fd: int) -> None:
        if not self.gate.is_set():
            self.waiting.set()
            assert self.gate.wait(30), "the test never opened the gate"
            self.waiting.clear()
        super().fsync(fd)


@pytest.fixture
def disk(tmp_path, monkeypatch):
    io = GatedDisk()
    monkeypatch.setattr(shard_host, "FileLog", functools.partial(FileLog, io=io))
    monkeypatch.setattr(shard_host, "RELOAD_RETRY_S", 0.02)

    async def no_topics(self):  # classic groups need none, and there is no controller to ask
        pass

    monkeypatch.setattr(GroupCoordinatorActor, "_refresh_topics", no_topics)
    config = {"log.flush.fsync": True, "group.initial.rebalance.delay.ms": 0, "append.linger.ms": 0,
              "metadata.max.age.ms": 3600000}
    return lambda: GroupCoordinatorActor(str(tmp_path), 0, config), io


async def eventually(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def member_of(actor, group: str) -> HeartbeatRequest:
    """A classic group with one member, in Stable: the member's heartbeat."""
    protocols = (JoinGroupRequestProtocol("range", b""),)
    first = await actor.join_group(JoinGroupRequest(group, 30000, protocols=protocols), "c")
    assert first.error_code == Errors.MEMBER_ID_REQUIRED.code
    joined = await actor.join_group(JoinGroupRequest(group, 30000, first.member_id, protocols=protocols), "c")
    assert joined.error_code == 0, joined
    synced = await actor.sync_group(SyncGroupRequest(group, joined.generation_id, joined.member_id))
    assert synced.error_code == 0, synced
    return HeartbeatRequest(group, joined.generation_id, joined.member_id)


def commit(group: str, offset: int, member: HeartbeatRequest | None = None) -> OffsetCommitRequest:
    """A commit of partition t-0, by the group's member if given (else by an admin)."""
    topics = (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, offset),)),)
    if member is None:
        return OffsetCommitRequest(group, topics)
    return OffsetCommitRequest(group, topics, member.generation_id, member.member_id)


async def committed(actor, group: str) -> int:
    response = await actor.offset_fetch(OffsetFetchRequest((OffsetFetchRequestGroup(group),)))
    (group_response,) = response.groups
    return next((p.committed_offset for t in group_response.topics for p in t.partitions), -1)


def error_of(response) -> int:
    return response.topics[0].partitions[0].error_code


def test_heartbeats_are_answered_while_a_flush_hangs_and_commits_wait_for_it(disk):
    make, io = disk

    async def scenario():
        actor = make()
        heartbeat = await member_of(actor, "a")
        committer = await member_of(actor, "b")
        io.gate.clear()
        first = asyncio.ensure_future(actor.offset_commit(commit("b", 1, committer)))
        await eventually(io.waiting.is_set)  # the commit's batch is being flushed
        second = asyncio.ensure_future(actor.offset_commit(commit("b", 2, committer)))  # goes to the next batch
        # Both groups' members are heard at once, many times over, while the flush hangs.
        for _ in range(20):
            for member in (heartbeat, committer):
                response = await asyncio.wait_for(actor.heartbeat(member), 5)
                assert response.error_code == 0
        # A read may see the commits: it is answered with them.
        behind = asyncio.ensure_future(committed(actor, "b"))
        await asyncio.sleep(0.05)
        assert io.waiting.is_set() and not first.done() and not second.done() and not behind.done()
        io.gate.set()
        assert error_of(await asyncio.wait_for(first, 10)) == 0
        assert error_of(await asyncio.wait_for(second, 10)) == 0
        assert await asyncio.wait_for(behind, 10) == 2
        await actor.shutdown()

    asyncio.run(scenario())


def test_a_failed_flush_fails_every_write_it_covered_and_those_after_it(disk):
    make, io = disk

    async def scenario():
        actor = make()
        assert error_of(await actor.offset_commit(commit("b", 1))) == 0
        io.gate.clear()
        covered = asyncio.ensure_future(actor.offset_commit(commit("b", 2)))
        await eventually(io.waiting.is_set)
        after = [asyncio.ensure_future(actor.offset_commit(commit(g, 3))) for g in ("b", "c")]
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in [covered, *after])
        io.fail_ops = {"fsync"}  # the held fsync fails when the gate opens
        io.gate.set()
        await eventually(lambda: actor.runtime.log.offline is not None or covered.done())
        io.fail_ops = set()  # the disk works again: the log is cut and reopened
        for write in [covered, *after]:
            assert error_of(await asyncio.wait_for(write, 10)) == Errors.NOT_COORDINATOR.code
        await eventually(lambda: actor.runtime.log.offline is None and actor.runtime.state.value == "active")
        assert await committed(actor, "b") == 1 and await committed(actor, "c") == -1  # none of them is in the log
        assert error_of(await actor.offset_commit(commit("b", 4))) == 0
        assert await committed(actor, "b") == 4
        await actor.shutdown()

    asyncio.run(scenario())
