"""`cluster.admin()`: Kafka's Admin API for groups, share groups and transactions, in snake_case.

Every method is written once, as a coroutine named `<name>_async` for callers inside async
actors; the plain `<name>` runs it to completion on a private event loop thread, so a driver,
a notebook or a Ray task can call it without an event loop of its own.

The admin asks the coordinators, as Kafka's admin client asks brokers: group requests go to
the group coordinator that owns the group (and list requests to every one), log end offsets
come from the partition leaders, share-group start offsets from the share coordinators.
Retriable failures (a coordinator restarting or loading) are retried until `timeout_s`.
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from runtime.errors import Errors, KafkaError, raise_if
from runtime.group.consumer_protocol import decode_assignment
from runtime.messages.consumer import ConsumerGroupDescribeRequest
from runtime.messages.group import (
    DeleteGroupsRequest, DescribeGroupsRequest, LeaveGroupRequest, ListGroupsRequest, MemberIdentity,
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetDeleteRequest,
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic, OffsetFetchRequest, OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from runtime.messages.share_group import (AlterGroupConfigRequest, AlterShareGroupOffsetsRequest,
                                          DescribeGroupConfigRequest, ShareGroupDescribeRequest)
from runtime.messages.topics import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ListOffsetsRequest, MetadataRequest
from runtime.messages.txn import DescribeTransactionsRequest, ListTransactionsRequest

from .. import naming, share_offsets
from runtime.clients.types import OffsetAndMetadata, TopicPartition

__all__ = ["Admin", "GroupListing", "GroupDescription", "MemberDescription", "ListedOffset", "OffsetReset",
           "SharePartitionOffset"]

UNKNOWN = share_offsets.UNKNOWN
_MEMBER_TYPES = {0: False, 1: True}  # ConsumerGroupDescribe's MemberType -> MemberDescription.upgraded


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    type: str  # "classic", "consumer" or "share"
    protocol_type: str
    state: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    member_epoch: int | None  # None for classic members (they have a generation, not an epoch)
    assignment: frozenset  # of TopicPartition
    target_assignment: frozenset | None  # None where the protocol has no target (classic)
    # in a consumer group, whether the member speaks the consumer protocol (False: it joined
    # with JoinGroup, as during an online migration); None in other groups (Kafka's upgraded())
    upgraded: bool | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    type: str
    state: str
    protocol_type: str
    protocol: str  # the classic protocol (assignor) name, or the server assignor
    group_epoch: int | None
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True)
class ListedOffset:
    """A group's position on one partition: the committed offset, the partition's log end
    offset and their difference (UNKNOWN where there is no commit)."""
    committed_offset: int
    log_end_offset: int
    lag: int
    metadata: str | None = None


@dataclass(frozen=True)
class OffsetReset:
    """Where to move a group's offsets (kafka-consumer-groups.sh --reset-offsets): exactly one
    of to_earliest, to_latest, to_timestamp (ms), shift_by (N, may be negative), to_offset."""
    to_earliest: bool = False
    to_latest: bool = False
    to_timestamp: int | None = None
    shift_by: int | None = None
    to_offset: int | None = None

    def __post_init__(self) -> None:
        chosen = [self.to_earliest, self.to_latest, self.to_timestamp is not None, self.shift_by is not None,
                  self.to_offset is not None]
        raise_if(sum(chosen) != 1, Errors.INVALID_REQUEST,
                 "an offset reset needs exactly one of to_earliest, to_latest, to_timestamp, shift_by, to_offset")
        raise_if(self.to_offset is not None and self.to_offset < 0, Errors.INVALID_REQUEST,
                 f"cannot reset to a negative offset ({self.to_offset})")


@dataclass(frozen=True)
class SharePartitionOffset:
    """KIP-1226: the share-partition start offset and the records after it not yet delivered
    to completion (log end offset - start offset - records already completed beyond it)."""
    start_offset: int
    lag: int


_MODERN_DESCRIBE = {"consumer": ("consumer_group_describe", ConsumerGroupDescribeRequest),
                    "share": ("share_group_describe", ShareGroupDescribeRequest)}


def _raise_for_code(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise KafkaError(Errors.for_code(code), message or what)


def _partitions(topic_partitions) -> frozenset:
    return frozenset(TopicPartition(tp.topic_name, p) for tp in topic_partitions for p in tp.partitions)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


class Admin:
    """Kafka's Admin API over a Cluster. Methods without `_async` block."""

    def __init__(self, cluster, timeout_s: float = 30.0) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ plumbing

    def _run(self, coroutine) -> Any:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="shoal-admin", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def close(self) -> None:
        with self._lock:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._loop = None

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def _call(self, name: str, method: str, *args) -> Any:
        return await self.cluster.directory.call_async(name, method, *args, timeout_s=self.timeout_s)

    def _group_coordinator(self, group_id: str) -> str:
        raise_if(not group_id, Errors.INVALID_GROUP_ID, "empty group id")
        return naming.find_coordinator(naming.CoordinatorType.GROUP, group_id, self.cluster.config)

    async def _ask_every(self, key_type: naming.CoordinatorType, method: str, request) -> list:
        """The same request to every coordinator of a kind (a list request); the responses,
        or the first whole-request error."""
        responses = await asyncio.gather(*(self._call(name, method, request)
                                           for name in naming.every_coordinator(key_type, self.cluster.config)))
        for r in responses:
            _raise_for_code(r.error_code, method)
        return responses

    async def _topics(self, names: Iterable[str] | None = None) -> dict[str, tuple[str, int]]:
        """name -> (topic id, partition count); UNKNOWN_TOPIC_OR_PARTITION for a missing name."""
        response = await self._call(naming.CONTROLLER, "metadata",
                                    MetadataRequest(tuple(names) if names is not None else None))
        out = {}
        for t in response.topics:
            _raise_for_code(t.error_code, f"topic {t.name!r} does not exist")
            out[t.name] = (t.topic_id, len(t.partitions))
        return out

    async def _check_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        topics = await self._topics({tp.topic for tp in partitions}) if partitions else {}
        for tp in partitions:
            raise_if(not 0 <= tp.partition < topics[tp.topic][1], Errors.UNKNOWN_TOPIC_OR_PARTITION,
                     f"topic {tp.topic!r} has no partition {tp.partition}")

    async def _list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        partitions = sorted(set(partitions))
        responses = await asyncio.gather(*(
            self._call(naming.partition_host_of(tp.topic, tp.partition, self.cluster.config), "list_offsets",
                       ListOffsetsRequest(tp.topic, tp.partition, timestamp)) for tp in partitions))
        out = {}
        for tp, r in zip(partitions, responses):
            _raise_for_code(r.error_code, f"list offsets of {tp}", r.error_message)
            out[tp] = r.offset
        return out

    # ------------------------------------------------------------------ groups

    async def list_groups_async(self, types: Iterable[str] | None = None,
                                states: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group of every coordinator, optionally only those of the given types
        ("classic", "consumer", "share") and states (case-insensitive, as Kafka's)."""
        request = ListGroupsRequest(tuple(states or ()), tuple(types or ()))
        responses = await self._ask_every(naming.CoordinatorType.GROUP, "list_groups", request)
        return sorted((GroupListing(g.group_id, g.group_type, g.protocol_type, g.group_state)
                       for r in responses for g in r.groups), key=lambda g: g.group_id)

    async def _group_type(self, group_id: str) -> str:
        response = await self._call(self._group_coordinator(group_id), "list_groups", ListGroupsRequest())
        for g in response.groups:
            if g.group_id == group_id:
                return g.group_type
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist")

    async def describe_groups_async(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """State, protocol, assignor and members (client id, host, member epoch, assigned and
        target partitions) of each group, whatever its protocol. GROUP_ID_NOT_FOUND for a
        group that does not exist."""
        group_ids = list(group_ids)
        described = await asyncio.gather(*(self._describe_group(g) for g in group_ids))
        return dict(zip(group_ids, described))

    async def _describe_group(self, group_id: str) -> GroupDescription:
        kind = await self._group_type(group_id)
        coordinator = self._group_coordinator(group_id)
        method, request_class = _MODERN_DESCRIBE.get(kind, (None, None))
        # A coordinator without the protocol's own describe still answers the classic one
        # (members with client ids and hosts, no assignments).
        if method is not None and hasattr(self.cluster._actor(coordinator), method):
            response = await self._call(coordinator, method, request_class((group_id,)))
            (g,) = response.groups
            _raise_for_code(g.error_code, f"describe group {group_id!r}", g.error_message)
            members = tuple(MemberDescription(
                m.member_id, getattr(m, "instance_id", None), m.client_id, m.client_host, m.member_epoch,
                _partitions(m.assignment.topic_partitions),
                _partitions(m.target_assignment.topic_partitions) if hasattr(m, "target_assignment") else None,
                _MEMBER_TYPES.get(getattr(m, "member_type", None)) if kind == "consumer" else None)
                for m in g.members)
            return GroupDescription(group_id, kind, g.group_state, kind if kind == "share" else "consumer",
                                    g.assignor_name, g.group_epoch, members)
        response = await self._call(coordinator, "describe_groups", DescribeGroupsRequest((group_id,)))
        (g,) = response.groups
        _raise_for_code(g.error_code, f"describe group {group_id!r}", g.error_message)
        members = []
        for m in g.members:
            assigned = frozenset()
            if g.protocol_type == "consumer" and m.member_assignment:
                partitions = decode_assignment(m.member_assignment).assigned_partitions
                assigned = frozenset(TopicPartition(t, p) for t, ps in partitions for p in ps)
            members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, None,
                                             assigned, None))
        return GroupDescription(group_id, kind, g.group_state, g.protocol_type, g.protocol_data, None,
                                tuple(members))

    async def delete_groups_async(self, group_ids: Iterable[str]) -> None:
        """Delete empty groups and their offsets. Every group is tried; the first failure
        (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) is raised afterwards."""
        by_coordinator: dict[str, list[str]] = {}
        for g in group_ids:
            by_coordinator.setdefault(self._group_coordinator(g), []).append(g)
        responses = await asyncio.gather(*(self._call(c, "delete_groups", DeleteGroupsRequest(tuple(gs)))
                                           for c, gs in by_coordinator.items()))
        for r in responses:
            for result in r.results:
                _raise_for_code(result.error_code, f"cannot delete group {result.group_id!r}")

    async def remove_group_members_async(self, group_id: str,
                                         members: Iterable[MemberIdentity] | None = None,
                                         reason: str | None = None) -> None:
        """Make members leave (LeaveGroup on their behalf); with no members, every member."""
        if members is None:
            (group,) = (await self.describe_groups_async([group_id])).values()
            members = [MemberIdentity("" if m.group_instance_id else m.member_id, m.group_instance_id)
                       for m in group.members]
        members = tuple(MemberIdentity(m.member_id, m.group_instance_id, reason or "the admin removed it")
                        for m in members)
        if not members:
            return
        response = await self._call(self._group_coordinator(group_id), "leave_group",
                                    LeaveGroupRequest(group_id, members))
        _raise_for_code(response.error_code, f"remove members of {group_id!r}")
        for m in response.members:
            _raise_for_code(m.error_code, f"remove member {m.group_instance_id or m.member_id} of {group_id!r}")

    # ------------------------------------------------------------------ group offsets

    async def _committed(self, group_id: str, partitions: Iterable[TopicPartition] | None
                         ) -> dict[TopicPartition, tuple[int, str | None]]:
        topics = None if partitions is None else tuple(
            OffsetFetchRequestTopics(t, tuple(ps)) for t, ps in _by_topic(partitions).items())
        response = await self._call(self._group_coordinator(group_id), "offset_fetch",
                                    OffsetFetchRequest((OffsetFetchRequestGroup(group_id, topics),)))
        (group,) = response.groups
        _raise_for_code(group.error_code, f"fetch offsets of {group_id!r}")
        out = {}
        for t in group.topics:
            for p in t.partitions:
                _raise_for_code(p.error_code, f"fetch offset of {t.name}-{p.partition_index}")
                out[TopicPartition(t.name, p.partition_index)] = (p.committed_offset, p.metadata)
        return out

    async def list_group_offsets_async(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                                       ) -> dict[TopicPartition, ListedOffset]:
        """The group's committed offsets (of the given partitions, or every committed one),
        each with the partition's log end offset and the lag."""
        if partitions is not None:
            partitions = [TopicPartition(*tp) for tp in partitions]
            await self._check_partitions(partitions)
        committed = await self._committed(group_id, partitions)
        wanted = committed if partitions is None else partitions
        ends = await self._list_offsets(wanted, LATEST_TIMESTAMP)
        out = {}
        for tp in sorted(wanted):
            offset, metadata = committed.get(tp, (UNKNOWN, None))
            lag = max(ends[tp] - offset, 0) if offset >= 0 else UNKNOWN
            out[tp] = ListedOffset(offset, ends[tp], lag, metadata)
        return out

    async def _raise_if_active(self, group_id: str, what: str) -> None:
        """Kafka lets offsets be changed only while nobody consumes them."""
        try:
            (group,) = (await self.describe_groups_async([group_id])).values()
        except KafkaError as e:
            if e.error is Errors.GROUP_ID_NOT_FOUND:
                return  # no group yet: the first commit creates it
            raise
        raise_if(bool(group.members), Errors.NON_EMPTY_GROUP,
                 f"{what} only if the group {group_id!r} is inactive, but the current state is {group.state} "
                 f"with {len(group.members)} member(s)")

    async def alter_group_offsets_async(self, group_id: str, offsets: Mapping[TopicPartition, Any]) -> None:
        """Commit offsets (ints or OffsetAndMetadata) for a group that has no active members;
        NON_EMPTY_GROUP otherwise."""
        offsets = {TopicPartition(*tp): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
                   for tp, o in offsets.items()}
        for tp, o in offsets.items():
            raise_if(o.offset < 0, Errors.INVALID_REQUEST, f"cannot commit a negative offset for {tp}")
        await self._check_partitions(offsets)
        await self._raise_if_active(group_id, "offsets can be altered")
        topics = tuple(OffsetCommitRequestTopic(t, tuple(
            OffsetCommitRequestPartition(p, offsets[TopicPartition(t, p)].offset,
                                         offsets[TopicPartition(t, p)].leader_epoch,
                                         offsets[TopicPartition(t, p)].metadata) for p in ps))
            for t, ps in _by_topic(offsets).items())
        response = await self._call(self._group_coordinator(group_id), "offset_commit",
                                    OffsetCommitRequest(group_id, topics))
        for t in response.topics:
            for p in t.partitions:
                _raise_for_code(p.error_code, f"commit offset of {t.name}-{p.partition_index} for {group_id!r}")

    async def plan_offset_reset_async(self, group_id: str, reset: OffsetReset,
                                      partitions: Iterable[TopicPartition] | None = None
                                      ) -> dict[TopicPartition, int]:
        """The offsets a reset would commit (kafka-consumer-groups.sh --dry-run): for the
        given partitions, or every partition the group has committed. Offsets are kept
        within the partition's log start and end offsets, as Kafka's tool does."""
        if partitions is None:
            partitions = list(await self._committed(group_id, None))
            raise_if(not partitions, Errors.INVALID_REQUEST,
                     f"group {group_id!r} has no committed offsets: name the topics to reset")
        partitions = sorted({TopicPartition(*tp) for tp in partitions})
        await self._check_partitions(partitions)
        starts, ends = await asyncio.gather(self._list_offsets(partitions, EARLIEST_TIMESTAMP),
                                            self._list_offsets(partitions, LATEST_TIMESTAMP))
        if reset.to_earliest:
            target = starts
        elif reset.to_latest:
            target = ends
        elif reset.to_timestamp is not None:
            found = await self._list_offsets(partitions, reset.to_timestamp)
            target = {tp: ends[tp] if o < 0 else o for tp, o in found.items()}
        elif reset.to_offset is not None:
            target = {tp: reset.to_offset for tp in partitions}
        else:
            committed = await self._committed(group_id, partitions)
            target = {tp: (committed[tp][0] if committed.get(tp, (UNKNOWN,))[0] >= 0 else ends[tp]) + reset.shift_by
                      for tp in partitions}
        return {tp: min(max(target[tp], starts[tp]), ends[tp]) for tp in partitions}

    async def reset_group_offsets_async(self, group_id: str, reset: OffsetReset,
                                        partitions: Iterable[TopicPartition] | None = None
                                        ) -> dict[TopicPartition, int]:
        """Plan a reset and commit it (kafka-consumer-groups.sh --execute); returns the new
        offsets. NON_EMPTY_GROUP while the group has members."""
        await self._raise_if_active(group_id, "offsets can be reset")
        plan = await self.plan_offset_reset_async(group_id, reset, partitions)
        await self.alter_group_offsets_async(group_id, plan)
        return plan

    async def delete_group_offsets_async(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Delete committed offsets; GROUP_SUBSCRIBED_TO_TOPIC for a topic the group consumes."""
        partitions = [TopicPartition(*tp) for tp in partitions]
        await self._check_partitions(partitions)
        topics = tuple(OffsetDeleteRequestTopic(t, tuple(OffsetDeleteRequestPartition(p) for p in ps))
                       for t, ps in _by_topic(partitions).items())
        response = await self._call(self._group_coordinator(group_id), "offset_delete",
                                    OffsetDeleteRequest(group_id, topics))
        _raise_for_code(response.error_code, f"delete offsets of {group_id!r}")
        for t in response.topics:
            for p in t.partitions:
                _raise_for_code(p.error_code, f"delete offset of {t.name}-{p.partition_index} for {group_id!r}")

    # ------------------------------------------------------------------ share-group offsets

    async def describe_share_group_offsets_async(self, group_id: str, topics: Iterable[str] | None = None
                                                 ) -> dict[TopicPartition, SharePartitionOffset]:
        """Start offset and lag (KIP-1226) of every partition the share group has state for."""
        raise_if(not group_id, Errors.INVALID_GROUP_ID, "empty group id")
        partitions = [(name, topic_id, p) for name, (topic_id, n) in sorted((await self._topics(topics)).items())
                      for p in range(n)]
        summaries = await share_offsets.read_summaries(self._call, group_id, partitions, self.cluster.config)
        for tp, s in summaries.items():
            if s.error is not None:
                raise KafkaError(s.error.error, f"read share-group state of {group_id!r}: {s.error.message}")
        found = {tp: s for tp, s in summaries.items() if s.start_offset >= 0}  # others: never consumed
        ends = await self._list_offsets(found, LATEST_TIMESTAMP)
        return {tp: SharePartitionOffset(s.start_offset, share_offsets.lag(ends[tp], s)) for tp, s in found.items()}

    async def _restart_share_state(self, group_id: str, starts: Mapping[TopicPartition, int]) -> None:
        """Start the share group's state on each partition over, at a start offset (-1: at
        share.auto.offset.reset when next consumed): the group coordinator decides (the group
        must be empty) and carries it out under a new state epoch."""
        offsets: dict[str, dict[int, int]] = {}
        for tp, o in starts.items():
            offsets.setdefault(tp.topic, {})[tp.partition] = o
        response = await self._call(self._group_coordinator(group_id), "alter_share_group_offsets",
                                    AlterShareGroupOffsetsRequest(group_id, offsets))
        _raise_for_code(response.error_code, f"change share-group offsets of {group_id!r}", response.error_message)

    async def alter_share_group_offsets_async(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Start the share group on each partition at a new offset (the group must have no
        members; NON_EMPTY_GROUP otherwise)."""
        offsets = {TopicPartition(*tp): int(o) for tp, o in offsets.items()}
        for tp, o in offsets.items():
            raise_if(o < 0, Errors.INVALID_REQUEST, f"cannot start {tp} at a negative offset")
        await self._check_partitions(offsets)
        await self._restart_share_state(group_id, offsets)

    async def delete_share_group_offsets_async(self, group_id: str, topics: Iterable[str]) -> None:
        """Forget where the share group is on every partition of the topics: its next share
        fetch there starts at share.auto.offset.reset (the group must have no members)."""
        counts = await self._topics(list(topics))
        await self._restart_share_state(group_id, {TopicPartition(t, p): UNKNOWN for t, (_, n) in counts.items()
                                                   for p in range(n)})

    # ------------------------------------------------------------------ dynamic group configs

    async def alter_group_config_async(self, group_id: str, configs: Mapping[str, Any]) -> None:
        """Kafka's incremental alter of a group's dynamic configs (share.record.lock.duration.ms,
        share.auto.offset.reset, consumer.session.timeout.ms, ...): a value sets one, None
        removes the group's own value. INVALID_CONFIG (and no change) for a bad name or value."""
        response = await self._call(self._group_coordinator(group_id), "alter_group_config",
                                    AlterGroupConfigRequest(group_id, dict(configs)))
        _raise_for_code(response.error_code, f"alter configs of {group_id!r}", response.error_message)

    async def describe_group_config_async(self, group_id: str) -> dict[str, Any]:
        """name -> GroupConfigEntry(name, value, is_default) for every dynamic group config."""
        response = await self._call(self._group_coordinator(group_id), "describe_group_config",
                                    DescribeGroupConfigRequest(group_id))
        _raise_for_code(response.error_code, f"describe configs of {group_id!r}", response.error_message)
        return {e.name: e for e in response.configs}

    # ------------------------------------------------------------------ transactions

    def _transaction_coordinator(self, transactional_id: str) -> str:
        return naming.find_coordinator(naming.CoordinatorType.TRANSACTION, transactional_id, self.cluster.config)

    async def describe_transactions_async(self, transactional_ids: Iterable[str]) -> dict[str, Any]:
        """DescribeTransactionsTransactionState of each id; TRANSACTIONAL_ID_NOT_FOUND for an
        id its coordinator does not know."""
        by_coordinator: dict[str, list[str]] = {}
        for tid in transactional_ids:
            by_coordinator.setdefault(self._transaction_coordinator(tid), []).append(tid)
        responses = await asyncio.gather(*(self._call(c, "describe_transactions",
                                                      DescribeTransactionsRequest(tuple(tids)))
                                           for c, tids in by_coordinator.items()))
        out = {}
        for r in responses:
            for s in r.transaction_states:
                _raise_for_code(s.error_code, f"describe transaction {s.transactional_id!r}")
                out[s.transactional_id] = s
        return out

    async def list_transactions_async(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                                      duration_ms: int = -1, transactional_id_pattern: str | None = None
                                      ) -> list:
        """ListTransactionsTransactionState of every coordinator's transactions that pass the
        filters (states, producer ids, running longer than duration_ms, id regex)."""
        request = ListTransactionsRequest(tuple(states), tuple(producer_ids), duration_ms, transactional_id_pattern)
        responses = await self._ask_every(naming.CoordinatorType.TRANSACTION, "list_transactions", request)
        return sorted((s for r in responses for s in r.transaction_states), key=lambda s: s.transactional_id)


def _blocking(name: str):
    def method(self, *args, **kwargs):
        return self._run(getattr(self, f"{name}_async")(*args, **kwargs))
    method.__name__ = name
    method.__doc__ = getattr(Admin, f"{name}_async").__doc__
    return method


# One source for both: each `<name>_async` coroutine gets its blocking twin `<name>`.
for _name in [n[:-len("_async")] for n in vars(Admin) if n.endswith("_async") and not n.startswith("_")]:
    setattr(Admin, _name, _blocking(_name))
