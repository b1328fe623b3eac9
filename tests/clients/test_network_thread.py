"""The process's network thread, where share consumers do their background work: one loop
for the whole process, calls that time out cancel their work, and a call made from the loop
itself is refused rather than left to wait for itself forever."""
import asyncio

import pytest

from actors.clients.network_thread import NetworkThread, result_within
from runtime.errors import Errors, KafkaError


def test_every_client_of_a_process_shares_one_network_thread():
    assert NetworkThread.instance() is NetworkThread.instance()


def test_a_call_that_times_out_is_cancelled_and_raises_request_timed_out():
    network = NetworkThread.instance()
    cancelled = asyncio.Event()

    async def slow():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def was_cancelled():
        await asyncio.wait_for(cancelled.wait(), 10)
        return True

    with pytest.raises(KafkaError) as e:
        result_within(network.submit(slow()), 0.05)
    assert e.value.error is Errors.REQUEST_TIMED_OUT
    assert result_within(network.submit(was_cancelled()), 15)


def test_a_call_from_the_network_thread_itself_is_refused():
    network = NetworkThread.instance()

    async def nested():
        async def inner():
            return 1
        with pytest.raises(RuntimeError):
            network.submit(inner())
        return "refused"

    assert result_within(network.submit(nested()), 10) == "refused"


def test_a_cluster_stops_the_share_consumers_it_made_before_it_shuts_down(ray_session, tmp_path):
    """Ray's shutdown takes its core worker away under any call still in flight on the network
    thread: a share consumer left open must have no background work left by then."""
    from actors import Cluster
    cluster = Cluster.local(data_dir=str(tmp_path / "shoal"), config={"log.flush.fsync": False})
    try:
        cluster.create_topic("left-open", 1)
        consumer = cluster.share_consumer("g-left-open", fetch_max_wait_ms=100)
        consumer.subscribe("left-open")
        consumer.poll(0.2)
        assert consumer._background._tasks  # heartbeats (and fetches) under way
    finally:
        cluster.shutdown()
    assert not consumer._background._tasks
    with pytest.raises(KafkaError):
        consumer.poll(0)


def test_stopping_a_client_ends_work_that_lost_a_cancellation_and_starts_no_more():
    """A task can miss its cancellation (on Python 3.11 asyncio.wait_for returns an answer
    that arrived with it): stopping cancels again until the work has ended, and a task that
    the ending work spawns is cancelled before it runs."""
    from actors.clients.client import ClientActor
    network = NetworkThread.instance()
    client = ClientActor("stop-test", {}, "stop-test")
    started_after_stop = []

    async def stubborn():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            pass  # the cancellation is lost here...
        client._spawn(spawned())  # ...and the ending work would start more
        await asyncio.sleep(60)

    async def spawned():
        started_after_stop.append(True)

    async def start():
        client._spawn(stubborn())
        await asyncio.sleep(0.05)

    result_within(network.submit(start()), 10)
    network.stop(client, timeout_s=10)
    assert not client._tasks and not started_after_stop
