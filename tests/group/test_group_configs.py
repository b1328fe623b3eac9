"""Dynamic group configs: incremental alter and describe, validation against the broker
bounds (INVALID_CONFIG, nothing changes), the GroupConfig record and its tombstones, reload,
and their use by share and consumer groups."""
from __future__ import annotations

import pytest

from runtime.errors import Errors
from runtime.group import records as R
from runtime.group.configs import GROUP_CONFIG_NAMES, GroupConfigEntry, parse_iso_duration_ms
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import ConsumerGroupHeartbeatRequest
from runtime.testing import ShardHarness

from .test_share_group import TOPICS, IDS, G, hb, raises, written

DEFAULTS = {
    "consumer.heartbeat.interval.ms": 5000, "consumer.session.timeout.ms": 45000,
    "share.auto.offset.reset": "latest", "share.heartbeat.interval.ms": 5000,
    "share.isolation.level": "read_uncommitted", "share.record.lock.duration.ms": 30000,
    "share.session.timeout.ms": 45000,
}


def harness(tmp_path, **config):
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard, config=config)
    h.call(lambda s, now: s.update_topics(TOPICS, now, IDS))
    return h


def alter(h, configs, group=G):
    return written(h, lambda s, now: s.alter_group_config(group, configs, now))[1]


def described(h, group=G) -> dict:
    return {e.name: (e.value, e.is_default) for e in h.read(lambda s: s.describe_group_config(group))}


def test_describe_lists_every_config_with_the_broker_defaults(tmp_path):
    h = harness(tmp_path, **{"group.share.record.lock.duration.ms": 20000})
    entries = h.read(lambda s: s.describe_group_config(G))
    assert [e.name for e in entries] == list(GROUP_CONFIG_NAMES) == sorted(DEFAULTS)
    assert entries[0] == GroupConfigEntry("consumer.heartbeat.interval.ms", 5000, True)
    assert described(h) == {n: (20000 if n == "share.record.lock.duration.ms" else v, True)
                            for n, v in DEFAULTS.items()}


def test_alter_is_incremental_and_durable(tmp_path):
    h = harness(tmp_path)
    assert alter(h, {"share.record.lock.duration.ms": "20000", "share.auto.offset.reset": "earliest"}) == [
        R.group_config_record(G, {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": 20000})]
    assert alter(h, {"share.isolation.level": "read_committed", "share.auto.offset.reset": None}) == [
        R.group_config_record(G, {"share.isolation.level": "read_committed", "share.record.lock.duration.ms": 20000})]
    assert described(h)["share.isolation.level"] == ("read_committed", False)
    assert described(h)["share.auto.offset.reset"] == ("latest", True)
    assert alter(h, {"share.isolation.level": "read_committed"}) == []  # no change, no record
    h.reload()
    assert described(h)["share.record.lock.duration.ms"] == (20000, False)
    assert alter(h, {"share.isolation.level": None, "share.record.lock.duration.ms": None}) == [
        R.group_config_tombstone(G)]
    assert described(h) == {n: (v, True) for n, v in DEFAULTS.items()}
    assert alter(h, {"share.isolation.level": None}) == []
    h.reload()
    assert h.shard.configs.configs == {}


@pytest.mark.parametrize("configs", [
    {"no.such.config": "1"},
    {"share.record.lock.duration.ms": 14999},
    {"share.record.lock.duration.ms": 60001},
    {"share.record.lock.duration.ms": "soon"},
    {"share.record.lock.duration.ms": 20000.5},
    {"share.record.lock.duration.ms": True},
    {"share.session.timeout.ms": 44999},
    {"share.heartbeat.interval.ms": 15001},
    {"consumer.session.timeout.ms": 60001},
    {"consumer.heartbeat.interval.ms": 4999},
    {"share.isolation.level": "serializable"},
    {"share.isolation.level": 1},
    {"share.auto.offset.reset": "none"},
    {"share.auto.offset.reset": "by_duration:"},
    {"share.auto.offset.reset": "by_duration:1h"},
    {"share.auto.offset.reset": "by_duration:-PT1H"},
    # a valid value does not apply when another in the same request is invalid
    {"share.isolation.level": "read_committed", "share.heartbeat.interval.ms": 1},
])
def test_invalid_configs_change_nothing(tmp_path, configs):
    h = harness(tmp_path)
    alter(h, {"share.heartbeat.interval.ms": 6000})
    before, end = dict(h.shard.configs.configs), h.end_offset
    raises(Errors.INVALID_CONFIG, lambda: h.call(lambda s, now: s.alter_group_config(G, configs, now)))
    assert h.shard.configs.configs == before and h.end_offset == end


def test_the_heartbeat_interval_must_stay_below_the_session_timeout(tmp_path):
    h = harness(tmp_path, **{"group.share.min.session.timeout.ms": 1000, "group.share.min.heartbeat.interval.ms": 1000})
    error = raises(Errors.INVALID_CONFIG, lambda: h.call(lambda s, now: s.alter_group_config(
        G, {"share.session.timeout.ms": 5000}, now)))  # the default interval is 5000
    assert error.message == "share.heartbeat.interval.ms must be less than share.session.timeout.ms"
    assert alter(h, {"share.session.timeout.ms": 5000, "share.heartbeat.interval.ms": 1000}) != []


def test_the_broker_bounds_are_configurable(tmp_path):
    h = harness(tmp_path, **{"group.share.min.record.lock.duration.ms": 100,
                             "group.share.max.record.lock.duration.ms": 200})
    alter(h, {"share.record.lock.duration.ms": 100})
    error = raises(Errors.INVALID_CONFIG, lambda: h.call(lambda s, now: s.alter_group_config(
        G, {"share.record.lock.duration.ms": 201}, now)))
    assert "group.share.max.record.lock.duration.ms (200)" in error.message


def test_by_duration_and_empty_group_ids(tmp_path):
    h = harness(tmp_path)
    alter(h, {"share.auto.offset.reset": "by_duration:P1DT2H"})
    assert described(h)["share.auto.offset.reset"] == ("by_duration:P1DT2H", False)
    raises(Errors.INVALID_GROUP_ID, lambda: h.call(lambda s, now: s.alter_group_config("", {}, now)))
    raises(Errors.INVALID_GROUP_ID, lambda: h.read(lambda s: s.describe_group_config("")))


@pytest.mark.parametrize("text, ms", [
    ("PT1H", 3_600_000), ("P1D", 86_400_000), ("PT0.5S", 500), ("pt10m", 600_000), ("PT-1S", -1000),
    ("-PT1M", -60_000), ("P2DT3H4M5.123S", 183_845_123), ("PT0S", 0),
])
def test_iso_durations(text, ms):
    assert parse_iso_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "P1H", "1H", "PT1.5M", ""])
def test_not_iso_durations(text):
    with pytest.raises(ValueError):
        parse_iso_duration_ms(text)


def test_share_groups_use_their_timeouts(tmp_path):
    h = harness(tmp_path, **{"group.share.min.session.timeout.ms": 1000, "group.share.min.heartbeat.interval.ms": 100})
    alter(h, {"share.session.timeout.ms": 2000, "share.heartbeat.interval.ms": 500})
    assert hb(h, new_member_id="a").heartbeat_interval_ms == 500
    assert hb(h, new_member_id="b", group="other").heartbeat_interval_ms == 5000
    h.advance(2000)
    assert h.shard.groups[G].members == {}
    assert set(h.shard.groups["other"].members) == {"b"}


def test_consumer_groups_use_their_timeouts(tmp_path):
    h = harness(tmp_path, **{"group.consumer.min.session.timeout.ms": 1000,
                             "group.consumer.min.heartbeat.interval.ms": 100})
    alter(h, {"consumer.session.timeout.ms": 2000, "consumer.heartbeat.interval.ms": 500})
    request = ConsumerGroupHeartbeatRequest(G, "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",),
                                            topic_partitions=())
    assert h.call(lambda s, now: s.consumer_group_heartbeat(request, now, "c")).heartbeat_interval_ms == 500
    h.advance(1999)
    assert set(h.shard.groups[G].members) == {"c"}
    h.advance(1)
    assert h.shard.groups[G].members == {}


def test_deleting_a_group_drops_its_configs(tmp_path):
    h = harness(tmp_path)
    alter(h, {"share.isolation.level": "read_committed"})
    hb(h, new_member_id="a")
    hb(h, "a", -1)
    _, records = written(h, lambda s, now: s.delete_groups([G], now))
    assert records[-1] == R.group_config_tombstone(G)
    h.reload()
    assert h.shard.configs.configs == {}
