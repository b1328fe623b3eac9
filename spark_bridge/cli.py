"""The bridge's `shoal` commands: ``shoal compact [LOG|--all]`` and
``shoal report lag|share|members [--out DIR]``. The main CLI (actors/cli/main.py) calls
`add_commands` with its subparsers."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Iterator

DEFAULT_DATA_DIR = "shoal-data"


class ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, total: int, width: int = 30, stream=None) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.width = width
        self.stream = stream or sys.stderr
        self.started = time.monotonic()

    def update(self, label: str, step: int = 0) -> None:
        self.done = min(self.done + step, self.total)
        filled = self.width * self.done // self.total
        line = (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"{time.monotonic() - self.started:5.1f}s {label}")
        if self.stream.isatty():
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()


def add_commands(subparsers) -> None:
    compact = subparsers.add_parser("compact", help="compact coordinator state logs with Spark on Ray")
    target = compact.add_mutually_exclusive_group(required=True)
    target.add_argument("log", nargs="?", help="a log folder (a name under --data-dir, or a path)")
    target.add_argument("--all", action="store_true", help="every coordinator state log under --data-dir")
    compact.add_argument("--delete-retention-ms", type=int, default=86_400_000,
                         help="how long tombstones survive after their batch's timestamp (Kafka's default: 1 day)")
    _common(compact)
    compact.set_defaults(func=cmd_compact)

    report = subparsers.add_parser("report", help="consumer lag, share-group state or membership history")
    report.add_argument("kind", choices=["lag", "share", "members"])
    report.add_argument("--out", help="also write the report as Parquet under this directory")
    _common(report)
    report.set_defaults(func=cmd_report)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default=os.path.abspath(DEFAULT_DATA_DIR), help="where the logs live")
    parser.add_argument("--executors", type=int, default=1, help="Spark executors")
    parser.add_argument("--executor-cores", type=int, default=1)
    parser.add_argument("--executor-memory", default="1g")


@contextlib.contextmanager
def _spark(args) -> Iterator:
    """The running SparkSession if this process has one, else Spark on the Ray cluster at
    --address (a local Ray if there is none and the address is "auto")."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    import ray

    from .session import spark_session
    if not ray.is_initialized():
        address = getattr(args, "address", "auto")
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except ConnectionError:
            if address != "auto":
                raise
            ray.init(include_dashboard=False, log_to_driver=False)
    # Our progress bar replaces Spark's stage bars, which would overwrite it.
    with spark_session("shoal-" + args.command, args.executors, args.executor_cores, args.executor_memory,
                       {"spark.ui.showConsoleProgress": "false"}) as spark:
        spark.sparkContext.setLogLevel("ERROR")
        yield spark


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(1)


def cmd_compact(args) -> None:
    from runtime.log_compaction import CompactionInProgress

    from .compaction import compact_log
    from .loader import CorruptSegmentError, find_logs

    if args.all:
        logs = [log.directory for log in find_logs(args.data_dir) if log.internal]
        if not logs:
            _fail(f"no coordinator state logs under {args.data_dir}")
    else:
        path = args.log if os.path.isdir(args.log) else os.path.join(args.data_dir, args.log)
        if not os.path.isdir(path):
            _fail(f"no log {args.log!r} (looked in {path})")
        logs = [path]
    stages = ("written", "swapped")
    results = []
    bar = None
    try:
        with _spark(args) as spark:
            bar = ProgressBar(len(logs) * (len(stages) + 1))
            for directory in logs:
                bar.update(f"{os.path.basename(directory)}: reading closed segments", 1)

                def progress(log, stage):
                    bar.update(f"{log}: {stage}", 1 if stage in stages else 0)

                result = compact_log(spark, directory, delete_retention_ms=args.delete_retention_ms,
                                     progress=progress)
                if result.status != "compacted":
                    bar.update(f"{result.log}: nothing to do", len(stages))
                results.append(result)
    except (CompactionInProgress, CorruptSegmentError, FileNotFoundError, ValueError) as e:
        if bar is not None:
            bar.close()
        _fail(str(e))
    bar.close()
    for result in results:
        print(result)


def _table(rows: list[tuple], columns: list[str]) -> str:
    cells = [columns] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def cmd_report(args) -> None:
    from .analytics import REPORTS
    from .loader import CorruptSegmentError, raise_corrupt_segment

    bar = None
    try:
        with _spark(args) as spark:
            bar = ProgressBar(2)
            bar.update(f"{args.kind}: reading the logs")
            frame = REPORTS[args.kind](spark, args.data_dir).cache()  # printed and exported: compute once
            try:
                rows = [tuple(r) for r in frame.collect()]
                bar.update(f"{args.kind}: computed", 1)
                if args.out:
                    frame.write.mode("overwrite").parquet(os.path.join(args.out, args.kind))
            except Exception as e:
                raise_corrupt_segment(e)
                raise
            bar.update(f"{args.kind}: done" + (f", Parquet in {os.path.join(args.out, args.kind)}" if args.out else ""), 1)
    except (CorruptSegmentError, FileNotFoundError) as e:
        if bar is not None:
            bar.close()
        _fail(str(e))
    bar.close()
    print(_table(rows, frame.columns))
