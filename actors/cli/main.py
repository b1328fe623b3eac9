"""The `shoal` command: deploy on a `ray start` cluster, inspect, and try things by hand.

Errors are one line with Kafka's error name and a non-zero exit status, never a stack trace.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Callable

from runtime.errors import Errors, KafkaError
from runtime.security import scram

from .. import naming
from ..config import parse_value
from ..placement import PLACEMENTS

COMMAND_GROUPS: list[Callable[[Any], None]] = []  # other packages add their subcommands here


def _check_reachable(address: str) -> None:
    """Ray retries an unreachable address for minutes; say so at once instead."""
    import socket
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        raise ConnectionError(f"nothing answers at {address} ({e})") from None


def _init_ray(args) -> None:
    import ray
    if not ray.is_initialized():
        _check_reachable(args.address)
        ray.init(address=args.address, namespace=args.namespace, logging_level=logging.ERROR,
                 log_to_driver=False)


def _connect(args):
    from ..cluster import Cluster
    _init_ray(args)
    return Cluster.connect(args.address, args.namespace)


def render_table(rows: list[dict], columns: list[str]) -> str:
    """A plain, aligned text table, as Kafka's tools print."""
    cells = [[str(c) for c in columns]] + [["-" if r.get(c) is None else str(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells)


def emit(args, rows: list[dict], columns: list[str]) -> None:
    if getattr(args, "output", "table") == "json":
        print(json.dumps(rows, indent=2, default=str))
    elif rows:
        print(render_table(rows, columns))
    else:
        print("(none)")


# ---------------------------------------------------------------------- deployment

def cmd_up(args) -> None:
    from ..cluster import Cluster
    _init_ray(args)
    config = dict(_parse_config(args.config))
    if args.placement:
        config["actor.placement"] = args.placement
    if args.listeners:
        config["listeners"] = args.listeners
    if args.advertised_listeners:
        config["advertised.listeners"] = args.advertised_listeners
    cluster = Cluster.up(args.data_dir, config, namespace=args.namespace)
    print(f"shoal is up in namespace {args.namespace!r}: {len(cluster.actors())} actors, data in {cluster.data_dir}")
    if args.listeners:
        print(f"Kafka clients connect to {cluster.bootstrap_servers}")


def cmd_status(args) -> None:
    cluster = _connect(args)
    emit(args, cluster.status(), ["actor", "state", "pid", "address", "error"])


def cmd_down(args) -> None:
    cluster = _connect(args)
    names = cluster.actors()
    cluster.destroy()
    print(f"removed {len(names)} actors from namespace {args.namespace!r} (the data directory stays)")


def _parse_config(pairs: list[str]) -> list[tuple[str, Any]]:
    out = []
    for pair in pairs or []:
        if "=" not in pair:
            raise SystemExit(f"error: --config takes key=value, got {pair!r}")
        k, v = pair.split("=", 1)
        out.append((k.strip(), parse_value(v)))
    return out


# ---------------------------------------------------------------------- topics

def cmd_topics_create(args) -> None:
    cluster = _connect(args)
    t = cluster.create_topic(args.topic, args.partitions, dict(_parse_config(args.config)))
    print(f"Created topic {t.name} ({t.partitions} partitions, id {t.topic_id}).")


def cmd_topics_list(args) -> None:
    cluster = _connect(args)
    rows = [{"topic": t.name, "partitions": t.partitions, "topic_id": t.topic_id} for t in cluster.describe_topics()]
    if args.output == "json":
        emit(args, rows, [])
    else:
        for r in rows:
            print(r["topic"])


def cmd_topics_describe(args) -> None:
    from runtime.messages.topics import LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, ListOffsetsRequest
    import ray
    cluster = _connect(args)
    topics = cluster.describe_topics([args.topic] if args.topic else None)
    rows = []
    for t in topics:
        for p in range(t.partitions):
            leader = cluster.partition_leader(t.name, p)
            start, end = ray.get([leader.list_offsets.remote(ListOffsetsRequest(t.name, p, EARLIEST_TIMESTAMP)),
                                  leader.list_offsets.remote(ListOffsetsRequest(t.name, p, LATEST_TIMESTAMP))])
            rows.append({"topic": t.name, "topic_id": t.topic_id, "partition": p, "log_start_offset": start.offset,
                         "log_end_offset": end.offset, "configs": ",".join(f"{k}={v}" for k, v in t.configs.items())})
    emit(args, rows, ["topic", "partition", "log_start_offset", "log_end_offset", "topic_id", "configs"])


def cmd_topics_delete(args) -> None:
    cluster = _connect(args)
    cluster.delete_topic(args.topic)
    print(f"Deleted topic {args.topic}.")


# ---------------------------------------------------------------------- users

def cmd_users_add(args) -> None:
    """The password comes from --password or standard input (never echoed when a terminal)."""
    password = args.password
    if password is None:
        import getpass
        password = getpass.getpass(f"password of {args.user}: ") if sys.stdin.isatty() else sys.stdin.readline()
        password = password.rstrip("\n")
    if not password:
        raise KafkaError(Errors.UNACCEPTABLE_CREDENTIAL, "the password must not be empty")
    cluster = _connect(args)
    for mechanism in args.mechanism or ["SCRAM-SHA-256"]:
        cluster.add_user(args.user, password, mechanism, args.iterations)
    print(f"Set the {', '.join(args.mechanism or ['SCRAM-SHA-256'])} credentials of user {args.user}.")


def cmd_users_delete(args) -> None:
    cluster = _connect(args)
    cluster.delete_user(args.user, args.mechanism)
    print(f"Deleted the {args.mechanism or 'SCRAM'} credentials of user {args.user}.")


def cmd_users_list(args) -> None:
    emit(args, _connect(args).list_users(), ["user", "mechanism", "iterations"])


# ---------------------------------------------------------------------- console clients

def cmd_console_producer(args) -> None:
    """Each line of standard input is a record; with --key-separator, 'key<sep>value'."""
    cluster = _connect(args)
    producer = cluster.producer(linger_ms=5)
    sent = 0
    for line in sys.stdin:
        line = line.rstrip("\n")
        key = None
        if args.key_separator and args.key_separator in line:
            k, line = line.split(args.key_separator, 1)
            key = k.encode()
        producer.send(args.topic, line.encode(), key=key, partition=args.partition)
        sent += 1
    producer.close()
    print(f"sent {sent} records to {args.topic}", file=sys.stderr)


def cmd_console_consumer(args) -> None:
    """Read records of a topic from its partitions' leaders, from the beginning or the end."""
    import ray

    from runtime.messages.topics import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, FetchRequest, ListOffsetsRequest
    from runtime.topics.data import decode_entries
    cluster = _connect(args)
    topic = cluster.describe_topic(args.topic)
    partitions = [args.partition] if args.partition is not None else list(range(topic.partitions))
    leaders = {p: cluster.partition_leader(args.topic, p) for p in partitions}
    when = EARLIEST_TIMESTAMP if args.from_beginning else LATEST_TIMESTAMP
    positions = {p: ray.get(leaders[p].list_offsets.remote(ListOffsetsRequest(args.topic, p, when))).offset
                 for p in partitions}
    shown = 0
    idle_ms = 0
    while args.max_messages is None or shown < args.max_messages:
        responses = ray.get([leaders[p].fetch.remote(FetchRequest(args.topic, p, positions[p], max_wait_ms=200))
                             for p in partitions])
        got = 0
        for p, r in zip(partitions, responses):
            for b in r.batches:
                if b.is_control:
                    positions[p] = b.last_offset + 1
                    continue
                for rec in decode_entries(b.records, b.base_offset):
                    if rec.offset < positions[p]:
                        continue
                    positions[p] = rec.offset + 1
                    value = rec.value.decode(errors="replace") if rec.value is not None else "null"
                    if args.print_key:
                        key = rec.key.decode(errors="replace") if rec.key is not None else "null"
                        print(f"{key}\t{value}")
                    else:
                        print(value)
                    shown += 1
                    got += 1
                    if args.max_messages is not None and shown >= args.max_messages:
                        return
        idle_ms = 0 if got else idle_ms + 200
        if args.timeout_ms is not None and idle_ms >= args.timeout_ms:
            return


# ---------------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shoal", description="Kafka's group coordination on Ray.")
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"),
                        help="the Ray cluster (default: auto, or $RAY_ADDRESS)")
    parser.add_argument("--namespace", default=naming.DEFAULT_NAMESPACE, help="the deployment's Ray namespace")
    parser.add_argument("--output", choices=["table", "json"], default="table", help="listing format")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="deploy shoal's actors (detached) on a running `ray start` cluster")
    up.add_argument("--data-dir", default=os.path.abspath("shoal-data"),
                    help="where the logs live; a shared filesystem lets restarted actors move")
    up.add_argument("--config", action="append", metavar="KEY=VALUE", help="a cluster config (repeatable)")
    up.add_argument("--placement", choices=PLACEMENTS,
                    help="spread: coordinators and partition leaders over the nodes (actor.placement)")
    up.add_argument("--listeners", metavar="PLAINTEXT://HOST:PORT",
                    help="serve Kafka clients: a gateway on every node (Kafka's listeners; port 0 picks one)")
    up.add_argument("--advertised-listeners", metavar="PLAINTEXT://HOST:PORT",
                    help="what Metadata tells Kafka clients, when they reach the gateways by another address")
    up.set_defaults(func=cmd_up)
    sub.add_parser("status", help="list the deployment's actors and their state").set_defaults(func=cmd_status)
    sub.add_parser("down", help="remove the deployment's actors (keeps the data)").set_defaults(func=cmd_down)

    topics = sub.add_parser("topics", help="create, list, describe and delete topics")
    tsub = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = tsub.add_parser("create", help="create a topic")
    c.add_argument("topic")
    c.add_argument("--partitions", type=int, default=1)
    c.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)")
    c.set_defaults(func=cmd_topics_create)
    tsub.add_parser("list", help="list topics").set_defaults(func=cmd_topics_list)
    d = tsub.add_parser("describe", help="partitions and offsets of one topic or all")
    d.add_argument("topic", nargs="?")
    d.set_defaults(func=cmd_topics_describe)
    x = tsub.add_parser("delete", help="delete a topic and its data")
    x.add_argument("topic")
    x.set_defaults(func=cmd_topics_delete)

    users = sub.add_parser("users", help="add, delete and list SASL/SCRAM users")
    usub = users.add_subparsers(dest="users_command", required=True)
    ua = usub.add_parser("add", help="create a user, or set its password")
    ua.add_argument("user")
    ua.add_argument("--password", help="the password (default: read from standard input)")
    ua.add_argument("--mechanism", action="append", choices=list(scram.MECHANISMS),
                    help="SCRAM mechanism to store a credential for; repeatable (default SCRAM-SHA-256)")
    ua.add_argument("--iterations", type=int, default=scram.MIN_ITERATIONS)
    ua.set_defaults(func=cmd_users_add)
    ud = usub.add_parser("delete", help="delete a user's credentials")
    ud.add_argument("user")
    ud.add_argument("--mechanism", choices=list(scram.MECHANISMS), help="only this mechanism's (default: all)")
    ud.set_defaults(func=cmd_users_delete)
    usub.add_parser("list", help="users and their SCRAM mechanisms").set_defaults(func=cmd_users_list)

    cp = sub.add_parser("console-producer", help="send lines of standard input as records")
    cp.add_argument("topic")
    cp.add_argument("--partition", type=int)
    cp.add_argument("--key-separator", help="split each line into key and value at this string")
    cp.set_defaults(func=cmd_console_producer)
    cc = sub.add_parser("console-consumer", help="print a topic's records")
    cc.add_argument("topic")
    cc.add_argument("--partition", type=int)
    cc.add_argument("--from-beginning", action="store_true")
    cc.add_argument("--max-messages", type=int)
    cc.add_argument("--timeout-ms", type=int, help="stop after this long without a record")
    cc.add_argument("--print-key", action="store_true")
    cc.set_defaults(func=cmd_console_consumer)

    for add in COMMAND_GROUPS:
        add(sub)
    return parser


def _load_command_groups() -> None:
    from .groups import add_commands as add_group_commands
    from .log import add_commands as add_log_commands
    for add in (add_group_commands, add_log_commands):
        if add not in COMMAND_GROUPS:
            COMMAND_GROUPS.append(add)
    try:
        from spark_bridge.cli import add_commands
    except ImportError:
        return
    if add_commands not in COMMAND_GROUPS:
        COMMAND_GROUPS.append(add_commands)


def main(argv: list[str] | None = None) -> int:
    _load_command_groups()
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    from ..cluster import DeploymentNotFound
    try:
        code = args.func(args)  # a command that finds problems (`log verify`) returns 1
        return code if isinstance(code, int) else 0
    except KafkaError as e:
        print(f"error: {e.error.name}: {e.message}", file=sys.stderr)
        return 1
    except DeploymentNotFound as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ConnectionError as e:
        print(f"error: cannot reach the Ray cluster at {args.address}: {e}", file=sys.stderr)
        return 1
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
