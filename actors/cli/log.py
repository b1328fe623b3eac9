"""`shoal log dump` and `shoal log verify`: what kafka-dump-log.sh shows of a log folder, and
a check of every problem that would keep a log from opening. Both read the files directly
(no Ray, no lock, nothing written), so they work on a live deployment's data directory and
on a copy an operator is repairing.
"""
from __future__ import annotations

import json
import os

from runtime.logcheck import ERROR, dump_log, verify_log
from runtime.logformat import log_dirs

__all__ = ["add_commands"]

_BATCH_FIELDS = [("base_offset", "baseOffset"), ("last_offset", "lastOffset"), ("count", "count"),
                 ("position", "position"), ("size", "size"), ("timestamp", "CreateTime"),
                 ("is_transactional", "isTransactional"), ("is_control", "isControl"),
                 ("is_compacted", "isCompacted"), ("producer_id", "producerId"),
                 ("producer_epoch", "producerEpoch"), ("base_sequence", "baseSequence"), ("crc_valid", "crcValid")]


def _plain(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _text(row: dict) -> str:
    if "error" in row:
        return f"{row['segment']}: cannot read past byte {row.get('position', 0)}: {row['error']}"
    return " ".join(f"{label}: {json.dumps(row[key])}" for key, label in _BATCH_FIELDS)


def cmd_log_dump(args) -> int:
    for directory in log_dirs(args.path):
        if args.output != "json":
            print(f"Dumping {directory}")
        segment = None
        for row in dump_log(directory, records=args.records):
            if args.output == "json":
                print(json.dumps({"log": os.path.basename(directory), **_plain(row)}))
                continue
            if row["segment"] != segment:
                segment = row["segment"]
                print(f"Segment {segment}")
            print(_text(row))
            for record in row.get("records", ()):
                print("| " + " ".join(f"{k}: {json.dumps(_plain(v))}" for k, v in record.items()))
    return 0


def cmd_log_verify(args) -> int:
    failed = False
    for directory in log_dirs(args.path):
        problems = verify_log(directory)
        failed = failed or any(p.severity == ERROR for p in problems)
        if args.output == "json":
            print(json.dumps({"log": os.path.basename(directory), "ok": not any(p.severity == ERROR for p in problems),
                              "problems": [p.__dict__ for p in problems]}))
            continue
        print(f"{os.path.basename(directory)}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for p in problems:
            print(f"  {p}")
    return 1 if failed else 0


def add_commands(sub) -> None:
    logs = sub.add_parser("log", help="dump or verify log folders on disk (kafka-dump-log.sh); no cluster needed")
    lsub = logs.add_subparsers(dest="action", required=True, metavar="ACTION")
    d = lsub.add_parser("dump", help="every batch of a log folder (or of every log in a data directory)")
    d.add_argument("path", help="a log folder such as shoal-data/__consumer_offsets-3, or a data directory")
    d.add_argument("--records", action="store_true", help="decode the records too (--print-data-log)")
    d.set_defaults(func=cmd_log_dump)
    v = lsub.add_parser("verify", help="check a log folder (or every log in a data directory); exit 1 on any "
                                       "problem that keeps a log from opening")
    v.add_argument("path")
    v.set_defaults(func=cmd_log_verify)
