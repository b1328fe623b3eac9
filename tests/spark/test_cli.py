"""`shoal compact` and `shoal report` through the bridge's argparse commands."""
from __future__ import annotations

import argparse
import os

import pytest

from runtime.log import read_manifest
from spark_bridge.cli import add_commands
from spark_bridge.compaction import load_shard, state_digest

from .ledger_shard import DIGEST_EXCLUDE, LedgerShard
from .test_compaction import LOG, ledger

pytestmark = pytest.mark.spark


def shoal(*argv: str) -> None:
    parser = argparse.ArgumentParser(prog="shoal")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    args.func(args)


def test_compact_all_then_report(spark, tmp_path, capsys):
    h = ledger(tmp_path)
    h.runtime.close()
    directory = str(tmp_path / LOG)
    state = state_digest(load_shard(directory, LedgerShard)[0], DIGEST_EXCLUDE)
    os.makedirs(tmp_path / "__empty-0")
    open(tmp_path / "__empty-0" / "00000000000000000000.log", "wb").close()

    shoal("compact", "--all", "--data-dir", str(tmp_path))
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "__empty-0: nothing to do (no closed segments)"
    assert lines[1].startswith(f"{LOG}: ") and " records -> " in lines[1]
    assert "__empty-0: nothing to do" in err and f"{LOG}: swapped" in err  # the progress bar
    assert read_manifest(directory).segments[0].file.endswith(".compacted.log")
    assert state_digest(load_shard(directory, LedgerShard)[0], DIGEST_EXCLUDE) == state

    with pytest.raises(SystemExit):
        shoal("compact", "nope", "--data-dir", str(tmp_path))
    assert "error: no log 'nope'" in capsys.readouterr().err

    shoal("report", "lag", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out"))
    out, _ = capsys.readouterr()
    assert out.splitlines() == ["GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG"]
    assert os.path.isdir(tmp_path / "out" / "lag")
