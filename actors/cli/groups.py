"""`shoal groups`, `shoal share-groups` and `shoal transactions`: kafka-consumer-groups.sh,
kafka-share-groups.sh and kafka-transactions.sh over the admin API, with their columns.

Every failure is a KafkaError with Kafka's error name, which `actors.cli.main.main` prints as one
line with a non-zero exit; nothing is changed before the input has been checked.
"""
from __future__ import annotations

import datetime as dt
import sys

from runtime.errors import Errors, KafkaError, raise_if

from ..clients.admin import UNKNOWN, OffsetReset
from runtime.clients.types import TopicPartition

__all__ = ["add_commands"]

OFFSET_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID"]
MEMBER_COLUMNS = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
MEMBER_VERBOSE_COLUMNS = ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-ASSIGNMENT"]
STATE_COLUMNS = ["GROUP", "COORDINATOR", "TYPE", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
SHARE_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]


def _admin(args):
    from .main import _connect
    return _connect(args).admin()


def _emit(args, rows, columns):
    from .main import emit
    emit(args, rows, columns)


def _known(value: int):
    return None if value == UNKNOWN else value  # a table shows "-"


def _partition_list(partitions) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(f"{t}:{'|'.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def _topic_partitions(admin, specs: list[str] | None, all_topics: bool) -> list[TopicPartition] | None:
    """--topic t (every partition) or t:0,2; None with --all-topics (the committed ones)."""
    if all_topics:
        return None
    raise_if(not specs, Errors.INVALID_REQUEST, "name the partitions: --topic TOPIC[:P,P...] or --all-topics")
    counts = {t.name: t.partitions for t in admin.cluster.describe_topics(sorted({s.split(":", 1)[0] for s in specs}))}
    out = []
    for spec in specs:
        topic, _, listed = spec.partition(":")
        if not listed:
            out.extend(TopicPartition(topic, p) for p in range(counts[topic]))
            continue
        try:
            out.extend(TopicPartition(topic, int(p)) for p in listed.split(","))
        except ValueError:
            raise KafkaError(Errors.INVALID_REQUEST,
                             f"bad partitions in --topic {spec!r}: expected TOPIC:0,1,2") from None
    return out


def _timestamp_ms(text: str) -> int:
    """Kafka's --to-datetime format, YYYY-MM-DDTHH:mm:SS.sss with an optional zone; without a
    zone, UTC."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"bad --to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[+HH:MM]") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def _describe_group(admin, group_id: str) -> list[dict]:
    group = admin.describe_groups([group_id])[group_id]
    owners = {tp: m for m in group.members for tp in m.assignment}
    offsets = admin.list_group_offsets(group_id, None)
    owned_only = sorted(set(owners) - set(offsets))
    if owned_only:
        offsets.update(admin.list_group_offsets(group_id, owned_only))
    rows = []
    for tp, o in sorted(offsets.items()):
        m = owners.get(tp)
        rows.append({"GROUP": group_id, "TOPIC": tp.topic, "PARTITION": tp.partition,
                     "CURRENT-OFFSET": _known(o.committed_offset), "LOG-END-OFFSET": o.log_end_offset,
                     "LAG": _known(o.lag), "CONSUMER-ID": m and m.member_id, "HOST": m and m.host,
                     "CLIENT-ID": m and m.client_id})
    if not group.members:
        print(f"Consumer group '{group_id}' has no active members.", file=sys.stderr)
    return rows


def _members(group, verbose: bool) -> list[dict]:
    rows = []
    for m in group.members:
        row = {"GROUP": group.group_id, "CONSUMER-ID": m.member_id, "GROUP-INSTANCE-ID": m.group_instance_id,
               "HOST": m.host, "CLIENT-ID": m.client_id, "#PARTITIONS": len(m.assignment)}
        if verbose:
            row.update({"CURRENT-EPOCH": m.member_epoch, "CURRENT-ASSIGNMENT": _partition_list(m.assignment),
                        "TARGET-ASSIGNMENT": None if m.target_assignment is None
                        else _partition_list(m.target_assignment)})
        rows.append(row)
    return rows


# ---------------------------------------------------------------------- groups

def cmd_groups_list(args) -> None:
    admin = _admin(args)
    groups = admin.list_groups(types=args.type, states=args.state)
    _emit(args, [{"GROUP": g.group_id, "TYPE": g.type, "PROTOCOL": g.protocol_type, "STATE": g.state}
                 for g in groups], ["GROUP", "TYPE", "PROTOCOL", "STATE"])


def _group_ids(admin, args) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_groups()]
    raise_if(not args.group, Errors.INVALID_REQUEST, "name a group with --group, or use --all-groups")
    return args.group


def cmd_groups_describe(args) -> None:
    admin = _admin(args)
    rows = []
    columns = OFFSET_COLUMNS
    for group_id in _group_ids(admin, args):
        if args.members:
            columns = MEMBER_COLUMNS + (MEMBER_VERBOSE_COLUMNS if args.verbose else [])
            rows.extend(_members(admin.describe_groups([group_id])[group_id], args.verbose))
        elif args.state:
            columns = STATE_COLUMNS
            g = admin.describe_groups([group_id])[group_id]
            rows.append({"GROUP": group_id, "COORDINATOR": admin._group_coordinator(group_id), "TYPE": g.type,
                         "ASSIGNMENT-STRATEGY": g.protocol or None, "STATE": g.state, "#MEMBERS": len(g.members)})
        else:
            rows.extend(_describe_group(admin, group_id))
    _emit(args, rows, columns)


def _one_group(args, command: str) -> str:
    raise_if(not args.group or len(args.group) != 1, Errors.INVALID_REQUEST, f"{command} takes exactly one --group")
    return args.group[0]


def _reset_spec(args) -> OffsetReset:
    return OffsetReset(to_earliest=args.to_earliest, to_latest=args.to_latest,
                       to_timestamp=None if args.to_datetime is None else _timestamp_ms(args.to_datetime),
                       shift_by=args.shift_by, to_offset=args.to_offset)


def cmd_groups_reset_offsets(args) -> None:
    raise_if(args.dry_run and args.execute, Errors.INVALID_REQUEST, "give --dry-run or --execute, not both")
    reset = _reset_spec(args)
    admin = _admin(args)
    group_id = _one_group(args, "reset-offsets")
    partitions = _topic_partitions(admin, args.topic, args.all_topics)
    if args.execute:
        plan = admin.reset_group_offsets(group_id, reset, partitions)
    else:
        admin._run(admin._raise_if_active(group_id, "offsets can be reset"))
        plan = admin.plan_offset_reset(group_id, reset, partitions)
        if not args.dry_run:
            print("WARN: No action will be performed as the --execute option is missing. "
                  "Add --execute to reset the offsets (--dry-run shows this plan).", file=sys.stderr)
    _emit(args, [{"GROUP": group_id, "TOPIC": tp.topic, "PARTITION": tp.partition, "NEW-OFFSET": o}
                 for tp, o in sorted(plan.items())], ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])


def cmd_groups_delete(args) -> None:
    admin = _admin(args)
    groups = _group_ids(admin, args)
    admin.delete_groups(groups)
    print(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in groups)}) was successful.")


def cmd_groups_delete_offsets(args) -> None:
    admin = _admin(args)
    group_id = _one_group(args, "delete-offsets")
    partitions = _topic_partitions(admin, args.topic, False)
    admin.delete_group_offsets(group_id, partitions)
    _emit(args, [{"TOPIC": tp.topic, "PARTITION": tp.partition, "STATUS": "Successful"} for tp in sorted(partitions)],
          ["TOPIC", "PARTITION", "STATUS"])


# ---------------------------------------------------------------------- share groups

def cmd_share_groups_list(args) -> None:
    admin = _admin(args)
    groups = admin.list_groups(types=["share"], states=args.state)
    _emit(args, [{"GROUP": g.group_id, "STATE": g.state} for g in groups], ["GROUP", "STATE"])


def cmd_share_groups_describe(args) -> None:
    admin = _admin(args)
    rows = []
    for group_id in args.group:
        offsets = admin.describe_share_group_offsets(group_id)
        if not offsets:
            admin.describe_groups([group_id])  # GROUP_ID_NOT_FOUND, or a group that has not consumed yet
        rows.extend({"GROUP": group_id, "TOPIC": tp.topic, "PARTITION": tp.partition,
                     "START-OFFSET": o.start_offset, "LAG": _known(o.lag)} for tp, o in offsets.items())
    _emit(args, rows, SHARE_COLUMNS)


# ---------------------------------------------------------------------- transactions

def cmd_transactions_list(args) -> None:
    admin = _admin(args)
    states = admin.list_transactions(states=args.state or ())
    _emit(args, [{"TRANSACTIONAL-ID": s.transactional_id, "PRODUCER-ID": s.producer_id,
                  "TRANSACTION-STATE": s.transaction_state} for s in states],
          ["TRANSACTIONAL-ID", "PRODUCER-ID", "TRANSACTION-STATE"])


def cmd_transactions_describe(args) -> None:
    admin = _admin(args)
    s = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    _emit(args, [{"TRANSACTIONAL-ID": s.transactional_id, "PRODUCER-ID": s.producer_id,
                  "PRODUCER-EPOCH": s.producer_epoch, "TRANSACTION-STATE": s.transaction_state,
                  "TRANSACTION-TIMEOUT-MS": s.transaction_timeout_ms,
                  "CURRENT-TRANSACTION-START-TIME-MS": _known(s.transaction_start_time_ms),
                  "TOPIC-PARTITIONS": ",".join(f"{t.topic}-{p}" for t in s.topics for p in t.partitions) or None}],
          ["TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "TRANSACTION-STATE", "TRANSACTION-TIMEOUT-MS",
           "CURRENT-TRANSACTION-START-TIME-MS", "TOPIC-PARTITIONS"])


# ---------------------------------------------------------------------- parser

def add_commands(sub) -> None:
    groups = sub.add_parser("groups", help="list, describe, reset and delete consumer groups "
                                           "(kafka-consumer-groups.sh)")
    gsub = groups.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = gsub.add_parser("list", help="every group, with its type and state")
    p.add_argument("--type", action="append", help="classic, consumer or share (repeatable)")
    p.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    p.set_defaults(func=cmd_groups_list)

    p = gsub.add_parser("describe", help="offsets and lag (default), --members or --state of groups")
    p.add_argument("--group", action="append", help="the group (repeatable)")
    p.add_argument("--all-groups", action="store_true")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets, log end offsets and lag (default)")
    view.add_argument("--members", action="store_true", help="the members and their partitions")
    view.add_argument("--state", action="store_true", help="the group's coordinator, assignor and state")
    p.add_argument("--verbose", action="store_true", help="with --members: epochs and assignments")
    p.set_defaults(func=cmd_groups_describe)

    p = gsub.add_parser("reset-offsets", help="move a group's offsets (only while it has no active members)")
    p.add_argument("--group", action="append")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,P]", help="partitions to reset (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="the first offset at or after this "
                                                                            "time (UTC unless a zone is given)")
    p.add_argument("--shift-by", type=int, metavar="N", help="move each offset by N (may be negative)")
    p.add_argument("--to-offset", type=int, metavar="N")
    p.add_argument("--dry-run", action="store_true", help="show the new offsets (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.set_defaults(func=cmd_groups_reset_offsets)

    p = gsub.add_parser("delete", help="delete empty groups and their offsets")
    p.add_argument("--group", action="append")
    p.add_argument("--all-groups", action="store_true")
    p.set_defaults(func=cmd_groups_delete)

    p = gsub.add_parser("delete-offsets", help="delete a group's offsets of topics it no longer consumes")
    p.add_argument("--group", action="append")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,P]")
    p.set_defaults(func=cmd_groups_delete_offsets)

    share = sub.add_parser("share-groups", help="list and describe share groups (kafka-share-groups.sh)")
    ssub = share.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = ssub.add_parser("list", help="share groups known to the group coordinators")
    p.add_argument("--state", action="append")
    p.set_defaults(func=cmd_share_groups_list)
    p = ssub.add_parser("describe", help="start offset and lag per partition (KIP-1226)")
    p.add_argument("--group", action="append", required=True)
    p.set_defaults(func=cmd_share_groups_describe)

    txn = sub.add_parser("transactions", help="list and describe transactions (kafka-transactions.sh)")
    xsub = txn.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = xsub.add_parser("list", help="every coordinator's transactions")
    p.add_argument("--state", action="append", help="only transactions in this state (repeatable)")
    p.set_defaults(func=cmd_transactions_list)
    p = xsub.add_parser("describe", help="one transaction's state, producer and partitions")
    p.add_argument("--transactional-id", required=True)
    p.set_defaults(func=cmd_transactions_describe)
