"""Reports over the state logs of a data directory, as DataFrames (and Parquet exports).

* `consumer_group_lag`: the columns of ``kafka-consumer-groups.sh --describe``: the newest
  committed offset of each group and partition against that partition's log end offset.
* `share_group_state`: per share-partition, the state the share coordinator would load (the
  newest ShareSnapshot with the later ShareUpdates combined on top), summarised.
* `membership_history`: joins, leaves and epoch changes of group members over time, from
  classic GroupMetadata records and the consumer/share member records.
"""
from __future__ import annotations

import json
import os
from typing import Iterator

from .loader import LogInfo, find_logs, log_end_offset, records_frame

LAG_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
LEO_SCHEMA = "topic string, partition int, log_end_offset long"
SHARE_SCHEMA = ("group_id string, topic_id string, partition int, state_epoch int, leader_epoch int, "
                "start_offset long, in_flight long, available long, acquired long, acknowledged long, "
                "archived long, max_delivery_count int, delivery_counts string, last_offset long")
MEMBERS_SCHEMA = ("log string, group_id string, protocol string, member_id string, event string, "
                  "epoch int, offset long, timestamp long")
_RECORD_STATES = {0: "available", 1: "acquired", 2: "acknowledged", 4: "archived"}
_MEMBER_TYPES = {"ConsumerGroupMemberMetadata": "consumer", "ShareGroupMemberMetadata": "share"}
_ASSIGNMENT_TYPES = {"ConsumerGroupCurrentMemberAssignment": "consumer", "ShareGroupCurrentMemberAssignment": "share"}


def _logs(data_dir: str, topic: str) -> list[LogInfo]:
    return [log for log in find_logs(data_dir) if log.topic == topic]


def _latest(records, *keys):
    """The newest record (by offset) of each key, tombstones included."""
    from pyspark.sql import functions as F
    return (records.groupBy(*keys)
            .agg(F.max_by(F.struct("offset", "value", "tombstone", "batch_timestamp"), "offset").alias("r"))
            .select(*keys, "r.*"))


# ---------------------------------------------------------------------- lag

def log_end_offsets(spark, data_dir: str):
    """(topic, partition, log_end_offset) of every topic partition log, read by Spark tasks."""
    logs = [log for log in find_logs(data_dir) if not log.internal]
    rows = [(log.topic, log.partition, log.directory) for log in logs]
    frame = spark.createDataFrame(rows, "topic string, partition int, directory string")

    def read(batches):
        import pyarrow as pa
        for b in batches:
            rows = b.to_pylist()
            yield pa.RecordBatch.from_pylist(
                [{"topic": r["topic"], "partition": r["partition"], "log_end_offset": log_end_offset(r["directory"])}
                 for r in rows], schema=pa.schema([("topic", pa.string()), ("partition", pa.int32()),
                                                   ("log_end_offset", pa.int64())]))

    return frame.repartition(max(1, min(len(rows), 8))).mapInArrow(read, LEO_SCHEMA)


def consumer_group_lag(spark, data_dir: str):
    """GROUP, TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG for every committed
    offset in the __consumer_offsets logs; LOG-END-OFFSET and LAG are null for a partition
    that has no log here."""
    from pyspark.sql import functions as F
    commits = records_frame(spark, _logs(data_dir, "__consumer_offsets")).where(F.col("record_type") == "OffsetCommit")
    latest = _latest(commits, "log", "key").where(~F.col("tombstone"))
    offsets = latest.select(
        F.get_json_object("key", "$.group").alias("GROUP"),
        F.get_json_object("key", "$.topic").alias("topic"),
        F.get_json_object("key", "$.partition").cast("int").alias("partition"),
        F.get_json_object("value", "$.offset").cast("long").alias("CURRENT-OFFSET"))
    leo = log_end_offsets(spark, data_dir)
    return (offsets.join(leo, ["topic", "partition"], "left")
            .select("GROUP", F.col("topic").alias("TOPIC"), F.col("partition").alias("PARTITION"), "CURRENT-OFFSET",
                    F.col("log_end_offset").alias("LOG-END-OFFSET"),
                    (F.col("log_end_offset") - F.col("CURRENT-OFFSET")).alias("LAG"))
            .orderBy("GROUP", "TOPIC", "PARTITION"))


# ---------------------------------------------------------------------- share groups

def share_partition_summary(key: dict, records: list[tuple[int, str, dict | None]]) -> dict | None:
    """The loaded state of one share-partition from its records in offset order
    ((offset, record type, value or None)), summarised; None once its state is deleted."""
    from runtime.share_state.coordinator import apply_update
    from runtime.share_state.records import PersisterStateBatch, ShareSnapshotValue, ShareUpdateValue

    def value_of(cls, value: dict):
        return cls(**{**value, "state_batches": tuple(PersisterStateBatch(**b) for b in value["state_batches"])})

    # The share coordinator's own replay: a tombstone of either kind forgets the state.
    state = None
    last = -1
    for offset, rtype, value in records:
        last = offset
        if value is None:
            state = None
        elif rtype == "ShareSnapshot":
            state = value_of(ShareSnapshotValue, value)
        else:
            state = apply_update(state, value_of(ShareUpdateValue, value))
    if state is None:
        return None
    counts = dict.fromkeys(_RECORD_STATES.values(), 0)
    deliveries: dict[int, int] = {}
    for b in state.state_batches:
        n = b.last_offset - b.first_offset + 1
        counts[_RECORD_STATES.get(b.delivery_state, "available")] += n
        deliveries[b.delivery_count] = deliveries.get(b.delivery_count, 0) + n
    return {**key, "state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
            "start_offset": state.start_offset, "in_flight": sum(counts.values()), **counts,
            "max_delivery_count": max(deliveries, default=0),
            "delivery_counts": json.dumps({str(k): v for k, v in sorted(deliveries.items())}), "last_offset": last}


def _json_or_none(v) -> dict | None:
    """A JSON column value from pandas, where a null may arrive as None or NaN."""
    return json.loads(v) if isinstance(v, str) else None


def _share_groups(rows) -> Iterator:
    import pandas as pd
    rows = rows.sort_values("offset")
    key = json.loads(rows["key"].iloc[0])
    summary = share_partition_summary(
        {"group_id": key["group_id"], "topic_id": key["topic_id"], "partition": key["partition"]},
        [(o, t, _json_or_none(v)) for o, t, v in zip(rows["offset"], rows["record_type"],
                                                                         rows["value"])])
    return pd.DataFrame([summary] if summary else [], columns=[c.split()[0] for c in SHARE_SCHEMA.split(", ")])


def share_group_state(spark, data_dir: str):
    """Per share-partition (group, topic id, partition): start offset, in-flight records by
    delivery state, and delivery counts, as the share coordinator would load them."""
    from pyspark.sql import functions as F
    records = records_frame(spark, _logs(data_dir, "__share_group_state")).where(
        F.col("record_type").isin("ShareSnapshot", "ShareUpdate"))
    return (records.groupBy("log", "key").applyInPandas(_share_groups, SHARE_SCHEMA)
            .orderBy("group_id", "topic_id", "partition"))


# ---------------------------------------------------------------------- membership

def member_events(log: str, group_id: str, records: list[tuple]) -> list[tuple]:
    """Membership events of one group from its records in offset order
    ((offset, timestamp, record type, key, value or None)), as MEMBERS_SCHEMA rows."""
    out = []
    classic: dict[str, int] = {}  # member -> generation, from the newest GroupMetadata
    modern: dict[tuple[str, str], int | None] = {}  # (protocol, member) -> member epoch

    def event(protocol, member, kind, epoch, offset, ts):
        out.append((log, group_id, protocol, member, kind, epoch, offset, ts))

    for offset, ts, rtype, key, value in records:
        if rtype == "GroupMetadata":
            members = {m["member_id"] for m in value["members"]} if value else set()
            generation = value["generation"] if value else None
            for m in sorted(set(classic) - members):
                event("classic", m, "leave", classic[m], offset, ts)
            for m in sorted(members):
                if m not in classic:
                    event("classic", m, "join", generation, offset, ts)
                elif classic[m] != generation:
                    event("classic", m, "epoch", generation, offset, ts)
            classic = dict.fromkeys(members, generation)
        elif rtype in _MEMBER_TYPES:
            member = (_MEMBER_TYPES[rtype], key["member_id"])
            if value is None and member in modern:
                event(*member, "leave", modern.pop(member), offset, ts)
            elif value is not None and member not in modern:
                modern[member] = None
                event(*member, "join", None, offset, ts)
        elif rtype in _ASSIGNMENT_TYPES and value is not None:
            member = (_ASSIGNMENT_TYPES[rtype], key["member_id"])
            if modern.get(member, -1) != value["member_epoch"]:
                modern[member] = value["member_epoch"]
                event(*member, "epoch", value["member_epoch"], offset, ts)
    return out


def _member_groups(rows) -> Iterator:
    import pandas as pd
    rows = rows.sort_values("offset")
    records = [(o, ts, t, json.loads(k), _json_or_none(v))
               for o, ts, t, k, v in zip(rows["offset"], rows["batch_timestamp"], rows["record_type"],
                                         rows["key"], rows["value"])]
    events = member_events(rows["log"].iloc[0], rows["group_id"].iloc[0], records)
    return pd.DataFrame(events, columns=[c.split()[0] for c in MEMBERS_SCHEMA.split(", ")])


def membership_history(spark, data_dir: str):
    """Joins, leaves and epoch (classic: generation) changes of every group's members,
    in log order: MEMBERS_SCHEMA."""
    from pyspark.sql import functions as F
    types = ["GroupMetadata", *_MEMBER_TYPES, *_ASSIGNMENT_TYPES]
    records = (records_frame(spark, _logs(data_dir, "__consumer_offsets")).where(F.col("record_type").isin(types))
               .withColumn("group_id", F.coalesce(F.get_json_object("key", "$.group_id"),
                                                  F.get_json_object("key", "$.group"))))
    return (records.groupBy("log", "group_id").applyInPandas(_member_groups, MEMBERS_SCHEMA)
            .orderBy("log", "offset", "member_id"))


REPORTS = {"lag": consumer_group_lag, "share": share_group_state, "members": membership_history}


def export_report(spark, name: str, data_dir: str, out_dir: str):
    """Compute a report and write it as Parquet under `out_dir`/<name>; returns the frame."""
    frame = REPORTS[name](spark, data_dir)
    frame.write.mode("overwrite").parquet(os.path.join(out_dir, name))
    return frame
