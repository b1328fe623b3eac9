"""The group coordinator shard of one __consumer_offsets partition (Kafka's
GroupCoordinatorShard): a thin router over the protocol managers.

`groups` holds every group of the partition, whatever its protocol; each group object has
`.type` ("classic", "consumer", "share"), `.state`, and Kafka's Group interface
(`validate_offset_commit`, `validate_offset_fetch`, `validate_offset_delete`,
`validate_delete`, `is_empty`, `is_subscribed_to_topic`, `offset_expiration_base`,
`as_listed_group`, `describe`, and for modern groups `tombstones`). `replay` dispatches on
the record's key class through `self.replayers`; another protocol adds its record keys there.
Dynamic group configs (configs.py) live beside the groups: a group need not exist to have them.
"""
from __future__ import annotations

from ..codec import Record
from ..coordinator import CoordinatorContext, CoordinatorShard, Result
from ..errors import Errors, KafkaError, raise_if
from ..messages.group import (
    DeletableGroupResult, DescribedGroup, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListedGroup,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
)
from .classic import ClassicGroupManager
from .configs import GroupConfigManager
from .consumer import ConsumerGroupManager
from .modern import ModernGroup
from .offsets import OffsetMetadataManager
from .records import GroupMetadataKey, OffsetCommitKey, PendingTxnOffsetCommitKey, group_metadata_tombstone
from .share import ShareGroupManager
from .txn_offsets import TxnOffsetManager

__all__ = ["GroupCoordinatorShard", "EXPIRE_GROUP_METADATA_KEY"]

EXPIRE_GROUP_METADATA_KEY = "expire-group-metadata"


class GroupCoordinatorShard(CoordinatorShard):
    def __init__(self, context: CoordinatorContext) -> None:
        self.context = context
        self.groups: dict = {}
        self.offsets = OffsetMetadataManager(context.config, self.groups)
        self.txn_offsets = TxnOffsetManager(self.offsets)
        self.classic = ClassicGroupManager(context, self.groups)
        self.retention_check_interval_ms = int(context.config.get("offsets.retention.check.interval.ms", 600000))
        self.configs = GroupConfigManager(context.config)
        self.consumer = ConsumerGroupManager(context, self.groups, self.classic, group_configs=self.configs)
        self.share = ShareGroupManager(context, self.groups, self.configs)
        self.replayers = {
            OffsetCommitKey: self.offsets.replay_offset_commit,
            PendingTxnOffsetCommitKey: self.txn_offsets.replay,
            GroupMetadataKey: self.classic.replay_group_metadata,
            **self.consumer.replayers(),
            **self.share.replayers(),
            **self.configs.replayers(),
        }
        # Groups whose records the current write applied, for their rebalance clocks.
        self._membership_keys = frozenset({GroupMetadataKey, *self.consumer.replayers(), *self.share.replayers()})
        self._touched: set[str] = set()

    # ------------------------------------------------------------------ records and lifecycle

    def replay(self, offset: int, record: Record) -> None:
        replayer = self.replayers.get(type(record.key))
        if replayer is None:
            raise ValueError(f"the group coordinator has no use for {type(record.key).__name__} records")
        replayer(offset, record.key, record.value)
        if type(record.key) in self._membership_keys:
            key = record.key
            self._touched.add(key.group if isinstance(key, GroupMetadataKey) else key.group_id)

    def records_applied(self, now_ms: int) -> None:
        """A write's records are in memory: a group they changed may have begun or finished
        a rebalance."""
        for group_id in self._touched:
            group = self.groups.get(group_id)
            if group is not None:
                group.track_rebalance(now_ms)
        self._touched.clear()

    def on_loaded(self, now_ms: int) -> None:
        for group in self.groups.values():
            if isinstance(group, ModernGroup):
                group.track_rebalance(now_ms, loaded=True)
        self._touched.clear()
        self.classic.on_loaded(now_ms)
        self.consumer.on_loaded(now_ms)
        self.share.on_loaded(now_ms)
        self._schedule_expiry(now_ms)

    # ------------------------------------------------------------------ classic group protocol

    # A consumer group with members serves the classic APIs to its members of the classic
    # protocol (consumer_classic.py); an empty one gives way to a new classic group.

    def join_group(self, request: JoinGroupRequest, now_ms: int, new_member_id: str,
                   client_id: str = "", client_host: str = "") -> Result:
        group = self.groups.get(request.group_id)
        if group is not None and group.type == "consumer":
            self.classic.validate_join(request)
            if not group.is_empty():
                return self.consumer.classic_join(group, request, now_ms, new_member_id, client_id, client_host)
            return self.classic.join_group(request, now_ms, new_member_id, client_id, client_host,
                                           replacing=group.tombstones())
        return self.classic.join_group(request, now_ms, new_member_id, client_id, client_host)

    def sync_group(self, request: SyncGroupRequest, now_ms: int) -> Result:
        group = self._consumer_group_with_members(request.group_id)
        if group is not None:
            return self.consumer.classic_sync(group, request, now_ms)
        return self.classic.sync_group(request, now_ms)

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> Result:
        group = self._consumer_group_with_members(request.group_id)
        if group is not None:
            return self.consumer.classic_heartbeat(group, request, now_ms)
        return self.classic.heartbeat(request, now_ms)

    def leave_group(self, request: LeaveGroupRequest, now_ms: int) -> Result:
        group = self._consumer_group_with_members(request.group_id)
        if group is not None:
            return self.consumer.classic_leave(group, request, now_ms)
        return self.classic.leave_group(request, now_ms)

    def _consumer_group_with_members(self, group_id: str):
        group = self.groups.get(group_id) if group_id else None
        return group if group is not None and group.type == "consumer" and not group.is_empty() else None

    # ------------------------------------------------------------------ KIP-848 consumer group protocol

    def consumer_group_heartbeat(self, request, now_ms: int, new_member_id: str,
                                 client_id: str = "", client_host: str = "") -> Result:
        return self.consumer.consumer_group_heartbeat(request, now_ms, new_member_id, client_id, client_host)

    def consumer_group_describe(self, group_ids) -> list:
        """A read: a ConsumerGroupDescribeResponseDescribedGroup per id."""
        return self.consumer.consumer_group_describe(group_ids)

    def update_topics(self, topics, now_ms: int, topic_ids=None) -> Result:
        """The topics (name -> partition count, and name -> topic id) consumer and share
        groups subscribe to; call it after every load, and whenever topics change."""
        consumer = self.consumer.update_topics(topics, now_ms)
        share = self.share.update_topics(topics, topic_ids, now_ms)
        return Result([*consumer.records, *share.records])

    # ------------------------------------------------------------------ share groups (KIP-932)

    def share_group_heartbeat(self, request, now_ms: int, new_member_id: str,
                              client_id: str = "", client_host: str = "") -> Result:
        return self.share.share_group_heartbeat(request, now_ms, new_member_id, client_id, client_host)

    def share_group_describe(self, group_ids) -> list:
        """A read: a ShareGroupDescribeResponseDescribedGroup per id."""
        return self.share.share_group_describe(group_ids)

    def pending_share_initializations(self) -> list:
        """The share-group state the share coordinator must initialise now, each listed
        once (PendingShareInitialization); call it after writes complete."""
        return self.share.pending_share_initializations()

    def released_share_members(self) -> list:
        """Share-group members that left or were fenced (ReleasedShareMember), each listed
        once; call it after writes complete."""
        return self.share.released_share_members()

    def share_group_initialized(self, group_id: str, topic_id: str, partitions, now_ms: int) -> Result:
        return self.share.share_group_initialized(group_id, topic_id, partitions, now_ms)

    def alter_share_group_offsets(self, group_id: str, offsets, now_ms: int) -> Result:
        return self.share.alter_share_group_offsets(group_id, offsets, now_ms)

    def share_group_initialize_failed(self, group_id: str, topic_id: str, partitions, now_ms: int) -> Result:
        return self.share.share_group_initialize_failed(group_id, topic_id, partitions, now_ms)

    def share_group_state_partitions(self, group_id: str) -> list:
        """A read: (topic id, topic name, partitions) the share coordinator may hold state of
        for the group, to delete there before delete_groups."""
        return self.share.share_group_state_partitions(group_id)

    # ------------------------------------------------------------------ dynamic group configs

    def alter_group_config(self, group_id: str, configs, now_ms: int) -> Result:
        """Incremental: {name: value, or None to remove}; INVALID_CONFIG changes nothing."""
        return self.configs.alter_group_config(group_id, configs, now_ms)

    def describe_group_config(self, group_id: str) -> list:
        """A read: a GroupConfigEntry per group config, the group's value or the default."""
        return self.configs.describe_group_config(group_id)

    def configured_group_ids(self) -> list[str]:
        """A read: the groups with a config of their own."""
        return self.configs.group_ids()

    # ------------------------------------------------------------------ offsets

    def offset_commit(self, request: OffsetCommitRequest, now_ms: int) -> Result:
        group = self.offsets.validate_offset_commit(request)
        if group is not None and group.type == "classic":
            self.classic.touch_member(group, request.member_id, now_ms)
        records, response = self.offsets.commit_offset(request, now_ms)
        return Result(records, response)

    def offset_fetch(self, request: OffsetFetchRequest, pending_from: int | None = None) -> OffsetFetchResponse:
        """A read. `pending_from` (the log's durable end, when run as a write so that its
        response waits for the current batch) makes require_stable fetches answer
        UNSTABLE_OFFSET_COMMIT for commits at or after it."""
        return self.offsets.fetch(request, pending_from)

    def txn_offset_commit(self, request, now_ms: int) -> Result:
        """Offsets committed with a transaction: pending until `complete_txn_offsets`."""
        records, response = self.txn_offsets.txn_offset_commit(request, now_ms)
        return Result(records, response)

    def complete_txn_offsets(self, producer_id: int, commit: bool, now_ms: int) -> Result:
        """A transaction marker for this partition: commit or discard the producer's pending
        offsets. Result response: None."""
        return Result(self.txn_offsets.complete(producer_id, commit))

    def offset_delete(self, request: OffsetDeleteRequest, now_ms: int) -> Result:
        records, response = self.offsets.delete_offsets(request)
        return Result(records, response)

    # ------------------------------------------------------------------ admin

    def delete_groups(self, group_ids, now_ms: int) -> Result:
        """Result response: a list of DeletableGroupResult, one per id."""
        records = []
        results = []
        for group_id in group_ids:
            try:
                raise_if(not group_id, Errors.INVALID_GROUP_ID, "empty group id")
                group = self.groups.get(group_id)
                raise_if(group is None, Errors.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
                group.validate_delete()
            except KafkaError as e:
                results.append(DeletableGroupResult(group_id, e.code))
                continue
            records.extend(self.offsets.delete_all_offsets(group_id))
            records.extend(self._tombstones(group))
            results.append(DeletableGroupResult(group_id))
        return Result(records, results)

    def describe_groups(self, group_ids) -> list[DescribedGroup]:
        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                out.append(DescribedGroup(group_id, error_code=Errors.INVALID_GROUP_ID.code))
            elif group is None:
                out.append(DescribedGroup(group_id, group_state="Dead"))
            else:
                out.append(group.describe())
        return out

    def list_groups(self, states_filter=(), types_filter=()) -> list[ListedGroup]:
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        return [g.as_listed_group() for _, g in sorted(self.groups.items())
                if (not states or str(g.state).lower() in states) and (not types or g.type in types)]

    # ------------------------------------------------------------------ offset expiry

    def _schedule_expiry(self, now_ms: int) -> None:
        self.context.timer.schedule(EXPIRE_GROUP_METADATA_KEY, now_ms + self.retention_check_interval_ms,
                                    self._cleanup_group_metadata)

    def _cleanup_group_metadata(self, now_ms: int) -> Result:
        """Every offsets.retention.check.interval.ms: tombstones for expired offsets, and for
        empty groups that have no offsets left (they become Dead). Share groups have no
        offsets here and stay: their state lives with the share coordinator."""
        records = []
        for group_id, group in sorted(self.groups.items()):
            if (self.offsets.expire_offsets(group_id, now_ms, records) and group.is_empty()
                    and group.type != "share"):
                records.extend(self._tombstones(group))
        self._schedule_expiry(now_ms)
        return Result(records)

    def _tombstones(self, group) -> list:
        """The records that delete an empty group, and its dynamic configs: a modern group
        knows its own; a classic one is a GroupMetadata tombstone."""
        own = [group_metadata_tombstone(group.group_id)] if group.type == "classic" else group.tombstones()
        return own + self.configs.tombstones(group.group_id)
