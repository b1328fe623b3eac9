"""OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, DescribeGroups, ListGroups."""
from __future__ import annotations

import pytest

from runtime.coordinator import Result
from runtime.errors import Errors, KafkaError
from runtime.group.records import group_metadata_tombstone, offset_commit_record, offset_commit_tombstone
from runtime.messages.group import (
    DeletableGroupResult, DescribedGroup, DescribedGroupMember, ListedGroup, OffsetCommitRequest,
    OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetCommitResponse,
    OffsetCommitResponsePartition, OffsetCommitResponseTopic, OffsetDeleteRequest, OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic, OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics, OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
)

from .helpers import (
    G, commit, committed, fetch, harness, join, leave, protocols, stable_group, state, sub,
)
from .test_join import records_of


def err(fn):
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.error


def test_standalone_commit_creates_a_simple_group(tmp_path):
    h = harness(tmp_path)
    h.clock.now_ms = 500
    resp = commit(h, {("t", 0): 10, ("t", 1): 11, ("u", 0): 5}, metadata="m")
    assert resp == OffsetCommitResponse((
        OffsetCommitResponseTopic("t", (OffsetCommitResponsePartition(0), OffsetCommitResponsePartition(1))),
        OffsetCommitResponseTopic("u", (OffsetCommitResponsePartition(0),))))
    assert records_of(h) == [offset_commit_record(G, "t", 0, 10, -1, "m", 500),
                             offset_commit_record(G, "t", 1, 11, -1, "m", 500),
                             offset_commit_record(G, "u", 0, 5, -1, "m", 500)]
    g = h.shard.groups[G]
    assert (g.type, str(g.state), g.protocol_type) == ("classic", "Empty", None)
    assert committed(h) == {("t", 0): 10, ("t", 1): 11, ("u", 0): 5}
    h.reload()
    assert committed(h) == {("t", 0): 10, ("t", 1): 11, ("u", 0): 5} and state(h) == "Empty"


def test_commit_to_a_missing_group_with_a_generation_is_refused(tmp_path):
    h = harness(tmp_path)
    assert err(lambda: commit(h, {("t", 0): 1}, member_id="m", generation=3)) is Errors.GROUP_ID_NOT_FOUND
    assert err(lambda: commit(h, {("t", 0): 1}, group="")) is Errors.INVALID_GROUP_ID
    assert h.shard.groups == {}


def test_member_commit_validation(tmp_path):
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    assert commit(h, {("t", 0): 7}, member_id="a", generation=gen).topics[0].partitions[0].error_code == 0
    assert err(lambda: commit(h, {("t", 0): 1}, member_id="a", generation=gen + 1)) is Errors.ILLEGAL_GENERATION
    assert err(lambda: commit(h, {("t", 0): 1}, member_id="zz", generation=gen)) is Errors.UNKNOWN_MEMBER_ID
    assert err(lambda: commit(h, {("t", 0): 1})) is Errors.UNKNOWN_MEMBER_ID  # standalone, but members exist
    assert err(lambda: commit(h, {("t", 0): 1}, member_id="a", generation=gen,
                              instance="i")) is Errors.UNKNOWN_MEMBER_ID
    join(h, "b", protos=protocols("range", "roundrobin"))
    a = join(h, "a")
    new_gen = a.result().generation_id
    assert state(h) == "CompletingRebalance"
    assert err(lambda: commit(h, {("t", 0): 1}, member_id="a", generation=new_gen)) is Errors.REBALANCE_IN_PROGRESS
    assert committed(h) == {("t", 0): 7}


def test_stale_static_member_commit_is_fenced(tmp_path):
    from .test_static_and_restart import static_stable_group
    h = harness(tmp_path)
    gen, _ = static_stable_group(h)
    join(h, new_id="m1-new", instance="i-b")
    assert err(lambda: commit(h, {("t", 0): 1}, member_id="m1", generation=gen,
                              instance="i-b")) is Errors.FENCED_INSTANCE_ID


def test_too_large_metadata_fails_its_partition_alone(tmp_path):
    h = harness(tmp_path, **{"offset.metadata.max.bytes": 4})
    req = OffsetCommitRequest(G, (OffsetCommitRequestTopic("t", (
        OffsetCommitRequestPartition(0, 1, -1, "four"), OffsetCommitRequestPartition(1, 2, -1, "fives"),
        OffsetCommitRequestPartition(2, 3, 4, None))),))
    resp = h.call(lambda s, now: s.offset_commit(req, now))
    assert resp == OffsetCommitResponse((OffsetCommitResponseTopic("t", (
        OffsetCommitResponsePartition(0), OffsetCommitResponsePartition(1, Errors.OFFSET_METADATA_TOO_LARGE.code),
        OffsetCommitResponsePartition(2))),))
    assert committed(h) == {("t", 0): 1, ("t", 2): 3}
    assert fetch(h, {"t": [2]}).topics[0].partitions[0] == OffsetFetchResponsePartitions(2, 3, 4, "")


def test_fetch_some_all_and_missing(tmp_path):
    h = harness(tmp_path)
    commit(h, {("t", 1): 11, ("t", 0): 10}, metadata="x")
    assert fetch(h, {"t": [0, 5], "u": [0]}) == OffsetFetchResponseGroup(G, (
        OffsetFetchResponseTopics("t", (OffsetFetchResponsePartitions(0, 10, -1, "x"),
                                        OffsetFetchResponsePartitions(5, -1, -1, ""))),
        OffsetFetchResponseTopics("u", (OffsetFetchResponsePartitions(0, -1, -1, ""),))))
    assert fetch(h) == OffsetFetchResponseGroup(G, (OffsetFetchResponseTopics("t", (
        OffsetFetchResponsePartitions(0, 10, -1, "x"), OffsetFetchResponsePartitions(1, 11, -1, "x"))),))
    assert fetch(h, group="none") == OffsetFetchResponseGroup("none")
    assert fetch(h, {"t": [0]}, group="none") == OffsetFetchResponseGroup("none", (
        OffsetFetchResponseTopics("t", (OffsetFetchResponsePartitions(0),)),))


def test_require_stable_answers_unstable_for_a_commit_not_yet_durable(tmp_path):
    h = harness(tmp_path)
    commit(h, {("t", 0): 1})
    h.auto_flush = False
    req = OffsetFetchRequest((OffsetFetchRequestGroup(G, (OffsetFetchRequestTopics("t", (0, 1)),)),),
                             require_stable=True)
    second = OffsetCommitRequest(G, (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, 2),)),))
    commit_req_pending = h.write(lambda s, now: s.offset_commit(second, now))
    durable_end = h.runtime.log.end_offset
    pending = h.write(lambda s, now: Result((), s.offset_fetch(req, pending_from=durable_end)))
    h.runtime.flush(h.clock())
    assert commit_req_pending.done
    parts = pending.result().groups[0].topics[0].partitions
    assert parts == (OffsetFetchResponsePartitions(0, error_code=Errors.UNSTABLE_OFFSET_COMMIT.code),
                     OffsetFetchResponsePartitions(1))
    # as a read, the batch is durable first: nothing is pending
    assert h.read(lambda s: s.offset_fetch(req, h.runtime.log.end_offset)).groups[0].topics[0].partitions[0] \
        == OffsetFetchResponsePartitions(0, 2, -1, "")


def delete_offsets(h, topics: dict, group=G):
    req = OffsetDeleteRequest(group, tuple(OffsetDeleteRequestTopic(t, tuple(OffsetDeleteRequestPartition(p)
                                                                             for p in ps))
                                           for t, ps in topics.items()))
    return h.call(lambda s, now: s.offset_delete(req, now))


def test_offset_delete(tmp_path):
    h = harness(tmp_path)
    gen = stable_group(h, ("a",))  # subscribed to "t"
    commit(h, {("t", 0): 1, ("u", 0): 2, ("u", 1): 3}, member_id="a", generation=gen)
    before = len(records_of(h))
    resp = delete_offsets(h, {"t": [0], "u": [0, 9]})
    assert resp == OffsetDeleteResponse(topics=(
        OffsetDeleteResponseTopic("t", (OffsetDeleteResponsePartition(0, Errors.GROUP_SUBSCRIBED_TO_TOPIC.code),)),
        OffsetDeleteResponseTopic("u", (OffsetDeleteResponsePartition(0), OffsetDeleteResponsePartition(9)))))
    assert records_of(h)[before:] == [offset_commit_tombstone(G, "u", 0)]
    assert committed(h) == {("t", 0): 1, ("u", 1): 3}
    assert err(lambda: delete_offsets(h, {"t": [0]}, group="none")) is Errors.GROUP_ID_NOT_FOUND
    assert err(lambda: delete_offsets(h, {"t": [0]}, group="")) is Errors.INVALID_GROUP_ID


def test_offset_delete_in_a_non_consumer_group_with_members_is_refused(tmp_path):
    h = harness(tmp_path)
    join(h, new_id="a", protocol_type="connect")
    join(h, "a", protocol_type="connect")
    assert err(lambda: delete_offsets(h, {"t": [0]})) is Errors.NON_EMPTY_GROUP


def test_delete_groups(tmp_path):
    h = harness(tmp_path)
    stable_group(h, ("a",))
    commit(h, {("t", 0): 1}, group="simple")
    before = len(records_of(h))
    results = h.call(lambda s, now: s.delete_groups([G, "simple", "none", ""], now))
    assert results == [DeletableGroupResult(G, Errors.NON_EMPTY_GROUP.code), DeletableGroupResult("simple"),
                       DeletableGroupResult("none", Errors.GROUP_ID_NOT_FOUND.code),
                       DeletableGroupResult("", Errors.INVALID_GROUP_ID.code)]
    assert records_of(h)[before:] == [offset_commit_tombstone("simple", "t", 0), group_metadata_tombstone("simple")]
    assert "simple" not in h.shard.groups and committed(h, "simple") == {}
    h.reload()
    assert "simple" not in h.shard.groups and G in h.shard.groups


def test_describe_and_list_groups(tmp_path):
    h = harness(tmp_path)
    stable_group(h, ("a", "b"))
    commit(h, {("t", 0): 1}, group="simple")
    join(h, new_id="x", group="joining")
    described = h.read(lambda s: s.describe_groups([G, "joining", "none"]))
    members = tuple(DescribedGroupMember(m, None, "client", "/127.0.0.1", sub("t"), m.encode()) for m in ("a", "b"))
    assert described == [DescribedGroup(G, group_state="Stable", protocol_type="consumer", protocol_data="range",
                                        members=members),
                         DescribedGroup("joining", group_state="Empty"),
                         DescribedGroup("none", group_state="Dead")]
    listed = h.read(lambda s: s.list_groups())
    assert listed == [ListedGroup(G, "consumer", "Stable", "classic"), ListedGroup("joining", "", "Empty", "classic"),
                      ListedGroup("simple", "", "Empty", "classic")]
    assert h.read(lambda s: s.list_groups(["STABLE"])) == listed[:1]
    assert h.read(lambda s: s.list_groups([], ["consumer"])) == []
    leave(h, "a")
    # during a rebalance members are shown without metadata
    assert h.read(lambda s: s.describe_groups([G]))[0].members == (
        DescribedGroupMember("b", None, "client", "/127.0.0.1", b"", b"b"),)
