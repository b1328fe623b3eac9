"""The README's first command runs examples/quickstart.py: it must keep working, and finish
in about a minute (here inside the test session's Ray, which Cluster.local reuses)."""
import os
import runpy
import time

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def test_the_quickstart_runs_and_tells_what_happens(ray_session, capsys):
    started = time.monotonic()
    runpy.run_path(os.path.join(EXAMPLES, "quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert time.monotonic() - started < 120
    for line in ("consumer-2 now reads partitions [2, 3]", "job-1 comes back, delivery 2",
                 "its lock on worker-a timed out", "lag 0 (no job left to do)", "committed offsets leave a lag of 0"):
        assert line in out, line
