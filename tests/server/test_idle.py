"""IdleExpiry without Ray: an actor leaves only after idle_ms with no call and nothing
under way, and refuses calls once it is leaving."""
import asyncio
import time

import pytest

from actors.server.idle import IdleExpiry
from runtime.errors import Errors, KafkaError

IDLE_MS = 100


def run(scenario):
    asyncio.run(asyncio.wait_for(scenario(), 10))


async def until(predicate, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def test_it_exits_after_the_idle_time_and_then_refuses_calls():
    exits = []

    async def scenario():
        idle = IdleExpiry(IDLE_MS, lambda: False, lambda: exits.append(time.monotonic()))
        with idle.call():
            last = time.monotonic()
        await until(lambda: exits)
        assert exits[0] - last >= IDLE_MS / 1000
        with pytest.raises(KafkaError) as e:
            with idle.call():
                pass
        assert e.value.error is Errors.COORDINATOR_NOT_AVAILABLE
    run(scenario)


def test_a_call_under_way_or_busy_work_keeps_it():
    exits, busy = [], [True]

    async def scenario():
        idle = IdleExpiry(IDLE_MS, lambda: busy[0], lambda: exits.append(1))
        with idle.call():
            await asyncio.sleep(3 * IDLE_MS / 1000)  # a long call
        assert not exits
        await asyncio.sleep(3 * IDLE_MS / 1000)  # busy: records still acquired, say
        assert not exits
        busy[0] = False
        await until(lambda: exits)
    run(scenario)


def test_no_idle_time_never_expires():
    exits = []

    async def scenario():
        idle = IdleExpiry(0, lambda: False, lambda: exits.append(1))
        with idle.call():
            pass
        await asyncio.sleep(0.2)
        assert not exits
    run(scenario)
