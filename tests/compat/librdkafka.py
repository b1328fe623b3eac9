"""librdkafka's own integration tests against a shoal gateway, in three passes, with a table
of what each test did.

scripts/compat-librdkafka.sh fetches and builds librdkafka (its tests/ directory, built into
tests/test-runner) and then runs this module:

    bash scripts/compat-librdkafka.sh --passes classic --tests 0001,0012
    .venv/bin/python -m tests.compat.librdkafka --tests-dir <librdkafka>/tests --list

Which tests. test-runner cannot list its tests (a TESTS filter that matches nothing names
them at TEST_LEVEL 3, without their flags), so the runner reads the `tests[]` table of
tests/test.c: each `_TEST(name, flags, ...)` with its flags, minimum broker version and
scenario. It leaves out the tests that need no broker or cannot run here: TEST_F_LOCAL ones
and the mock-cluster ones (`_mock` in the name; a few are not flagged local), TEST_F_MANUAL
and TEST_F_KNOWN_ISSUE ones (test-runner leaves those out too unless told), and
TEST_F_SOCKEM ones (socket emulation, off with `-E`). Of the rest:

- classic: all but the share-consumer tests, with TEST_CONSUMER_GROUP_PROTOCOL=classic;
- consumer: those whose source file subscribes (`subscribe(` in it: rd_kafka_subscribe,
  test_consumer_subscribe, KafkaConsumer::subscribe), with
  TEST_CONSUMER_GROUP_PROTOCOL=consumer. test-runner sets group.protocol only on the
  consumers it creates, and only a subscribing consumer joins a group, so these are the tests
  KIP-848 changes (one that does not apply to that protocol skips itself);
- share: the tests named share_consumer or share_group (KIP-932), group protocol not set.

How they run. test-runner picks tests by number only (TESTS=0045 runs every 0045 test), so
the runner starts it once per test number and scenario, with `-E -L -p1` (no sockem, no
local tests, one test at a time) and TEST_KAFKA_VERSION (default 4.2.0, which the share tests
need), and reads each test's outcome from test-runner's summary: PASSED, FAILED or SKIPPED
(the test found the broker version or a configuration it needs missing, and said why). The
first error line is test-runner's failure string: the test's first TEST_FAIL,
"function():line: message". Each run gets --timeout seconds per test in it; one that
overruns is killed (its process group) and its unfinished tests fail as "timeout", with the
subtest they were in and how many had passed.

A test's scenario (test.c's `.scenario`) names the broker configuration it was written for,
tests/scenarios/<scenario>.json (trivup's settings): "default" creates topics of 4
partitions on Metadata, "noautocreate" creates none (0045's topic-removal tests, 0107, 0111).
The runner starts one cluster per scenario it needs, with auto.create.topics.enable and
num.partitions from that file, and runs each pass's tests of that scenario there. test.conf
is what librdkafka's CI writes (tests/LibrdkafkaTestApp.py): the brokers and
test.timeout.multiplier=2. A SharePartition is an actor process here (a topic partition is
not: partition hosts carry them), and the share tests leave their groups behind, so a
cluster that grows past --max-actors actors is started afresh between two tests.

Output: a line per test as it ends, then the table (pass, test, outcome, seconds, first error
line) and the counts per pass. The same goes to .compat/librdkafka-results.json, rewritten
after every test so an interrupted run keeps what it got; each test's output goes to
.compat/librdkafka-logs/<pass>/<test>.log. Exit status 0 whatever the tests did (this is a
report, not a gate), 2 on a setup error.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Ray's workers find the project through the environment they inherit (tests/conftest.py).
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
COMPAT = os.path.join(ROOT, ".compat")
RESULTS = os.path.join(COMPAT, "librdkafka-results.json")
LOGS = os.path.join(COMPAT, "librdkafka-logs")

PASSES = ("classic", "consumer", "share")
GROUP_PROTOCOL = {"classic": "classic", "consumer": "consumer", "share": None}

CLUSTER_CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "log.flush.fsync": False,
    # As Kafka's own consumer integration tests (ConsumerBounceTest) set it: any session
    # timeout a test asks for (librdkafka's ask for 5-6 s). group.initial.rebalance.delay.ms
    # stays at Kafka's (and shoal's) 3 s, as on librdkafka's CI brokers: 0102 counts on two
    # static members that subscribe together landing in one first rebalance.
    "group.min.session.timeout.ms": 10,
    # librdkafka's CI brokers (tests/cluster_testing.py): its share tests lock records for 1 s.
    "group.share.min.record.lock.duration.ms": 1000,
}

# Flags that select nothing on Linux (test.h defines them as 0 there).
NO_FLAG = {"0", "TEST_F_KNOWN_ISSUE_WIN32", "TEST_F_KNOWN_ISSUE_OSX"}
# Tests test-runner itself leaves out of a `-E -L` run (MANUAL ones run once TESTS is set).
RUNNER_SKIPS = {"LOCAL", "KNOWN_ISSUE", "SOCKEM"}
NOT_SELECTED = RUNNER_SKIPS | {"MANUAL"}

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RUNNING = re.compile(r"=+ Running test (\S+) =+")
# test-runner's lines start "[<test> / <seconds since it started>s] "
SAID = re.compile(r"^\[(\S+)\s*/\s*([0-9.]+)s\] ")
SUBTEST_PASSED = re.compile(r"^\[ (.*): PASS \([0-9.]+s\) \]$")
SUBTEST = re.compile(r"^\[ (.*) \]$")
ENDED = re.compile(r"=+ Test (\S+) (PASSED|FAILED|SKIPPED) =+")
FAILURE = re.compile(r'^### Test "([^" ]+)(?: \((.*)\))?" failed at (\S+) at ')
SUMMARY = re.compile(r"^TEST \S+ \(.*\) SUMMARY$")
SUMMARY_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*([A-Z]+)\s*\|\s*([0-9.]+)s\s*\|\s?(.*)$")


class SetupError(Exception):
    """What stops the runner before any test can tell anything (exit status 2)."""


class Interrupted(Exception):
    """SIGTERM (e.g. from `timeout`): stop, and report what ran."""


def _interrupted(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up short
    raise Interrupted()


@dataclass(frozen=True)
class Test:
    name: str
    flags: frozenset  # TEST_F_* names without the prefix, as they hold on Linux
    minver: str | None  # TEST_BRKVER as a.b.c.d
    scenarios: str  # test.c's .scenario: comma-separated, "default" when unset
    source: str | None  # the file that defines main_<name>
    subscribes: bool  # that file calls a subscribe()

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]

    @property
    def scenario(self) -> str:
        return self.scenarios.split(",")[0]

    @property
    def share(self) -> bool:
        return "share_consumer" in self.name or "share_group" in self.name

    def runs_in(self, scenario: str) -> bool:
        """Whether test-runner runs this test in a `-E -L` run of its number in `scenario`
        (test.c's run_tests: the scenario is matched as a substring)."""
        return not self.flags & RUNNER_SKIPS and scenario in self.scenarios


# ---------------------------------------------------------------------------- reading test.c

def _arguments(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose "(" ends just before `start`."""
    args, depth, quoted, current = [], 0, False, []
    for i in range(start, len(text)):
        c = text[i]
        if quoted:
            quoted = c != '"' or text[i - 1] == "\\"
        elif c == '"':
            quoted = True
        elif c in "({":
            depth += 1
        elif c in ")}":
            if depth == 0:
                args.append("".join(current).strip())
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(c)
    raise ValueError("unterminated _TEST( in test.c")


def _sources(tests_dir: str) -> dict[str, tuple[str, bool]]:
    """Test name -> (its source file, whether that file subscribes)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(tests_dir, "[0-9][0-9][0-9][0-9]*.c*"))):
        with open(path, errors="replace") as f:
            text = f.read()
        subscribes = re.search(r"subscribe\s*\(", text) is not None
        for name in re.findall(r"\bint\s+main_(\w+)\s*\(", text):
            out[name] = (os.path.basename(path), subscribes)
    return out


def read_tests(tests_dir: str) -> list[Test]:
    """The tests of test.c's `tests[]` table, in its order."""
    with open(os.path.join(tests_dir, "test.c"), errors="replace") as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)  # comments hold commas
    start = text.index("struct test tests[] = {")
    table = text[start:text.index("{NULL}", start)]
    sources = _sources(tests_dir)
    tests = []
    for m in re.finditer(r"\b_TEST\(", table):
        name, flags, *rest = _arguments(table, m.end())
        minver, scenarios = None, "default"
        for arg in rest:
            if v := re.fullmatch(r"TEST_BRKVER\((\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)", arg):
                minver = ".".join(v.groups())
            elif arg == "TEST_BRKVER_TOPIC_ADMINAPI":  # testshared.h
                minver = "0.10.2.0"
            elif v := re.fullmatch(r'\.scenario\s*=\s*"([^"]*)"', arg):
                scenarios = v.group(1)
        names = {f.strip() for f in flags.split("|")} - NO_FLAG
        source, subscribes = sources.get(name, (None, False))
        tests.append(Test(name, frozenset(n.removeprefix("TEST_F_") for n in names), minver,
                          scenarios, source, subscribes))
    return tests


def select(tests: list[Test], pass_name: str, only: set[str] | None) -> list[Test]:
    """The tests of a pass (see the module's docstring), narrowed to `only` (numbers or
    names) when given."""
    chosen = []
    for t in tests:
        if t.flags & NOT_SELECTED or "_mock" in t.name:
            continue
        if only is not None and t.number not in only and t.name not in only:
            continue
        if pass_name == "share" and t.share \
                or pass_name == "classic" and not t.share \
                or pass_name == "consumer" and not t.share and t.subscribes:
            chosen.append(t)
    return chosen


# ------------------------------------------------------------------ running test-runner

def _strip(text: str) -> list[str]:
    return [ANSI.sub("", line) for line in text.splitlines()]


def outcomes(lines: list[str], names: list[str], killed_after: float | None,
             returncode: int) -> dict[str, tuple[str, float | None, str]]:
    """Each test's (outcome, seconds or None, first error line or skip reason) from
    test-runner's output."""
    summary, ended, failures, said, passed, current = {}, {}, {}, {}, {}, {}
    for i, line in enumerate(lines):
        if m := SAID.match(line):
            name, rest = m.group(1), line[m.end():]
            said[name] = float(m.group(2))  # how long each test has run, at its last line
            if SUBTEST_PASSED.match(rest):
                passed[name] = passed.get(name, 0) + 1
                current.pop(name, None)
            elif sub := SUBTEST.match(rest):
                current[name] = sub.group(1)
        if m := SUMMARY_ROW.match(line):
            summary[m.group(1)] = (m.group(2), float(m.group(3)), m.group(4).strip())
        elif m := ENDED.search(line):
            ended[m.group(1)] = m.group(2)
        elif (m := FAILURE.match(line)) and m.group(1) not in failures and i + 1 < len(lines):
            # where (file:line:function()) and, on the next line, the message
            subtest = f"{m.group(2)}: " if m.group(2) else ""
            failures[m.group(1)] = f"{subtest}{m.group(3)}: {lines[i + 1].strip()}"

    def where(name: str) -> str:
        """How far a test that did not end got: its subtests."""
        parts = [f"in {current[name]}"] if name in current else []
        if passed.get(name):
            parts.append(f"{passed[name]} subtests passed")
        return f" ({', '.join(parts)})" if parts else ""

    out = {}
    for name in names:
        # no summary when test-runner ended early (an abort, a kill)
        state, seconds, text = summary.get(name, (ended.get(name), said.get(name), ""))
        why = text or failures.get(name, "")
        if state in ("PASSED", "FAILED", "SKIPPED"):
            out[name] = (state.lower(), seconds, "" if state == "PASSED" else why)
        elif killed_after is not None:
            out[name] = ("failed", seconds, f"timeout: killed after {killed_after:.0f} s{where(name)}"
                         + (f": {why}" if why else ""))
        elif state is None and returncode in (0, 1):
            out[name] = ("skipped", None, "test-runner did not run it")
        else:
            last = next((line.strip() for line in reversed(lines) if line.strip()), "")
            out[name] = ("failed", seconds,
                         why or f"test-runner ended with status {returncode}{where(name)}: {last}")
    return out


def split_log(lines: list[str], name: str) -> str:
    """One test's part of a run's output: test-runner's preamble, the test's own lines
    (from its "Running test" line to the next test's) and the summary."""
    starts = [i for i, line in enumerate(lines) if RUNNING.search(line)]
    end = next((i for i, line in enumerate(lines) if SUMMARY.match(line)), len(lines))
    mine = [i for i in starts if RUNNING.search(lines[i]).group(1) == name]
    head = lines[:starts[0]] if starts else lines[:end]
    body = []
    if mine:
        stop = next((i for i in starts if i > mine[0]), end)
        body = lines[mine[0]:min(stop, end)]
    return "\n".join(head + body + lines[end:]) + "\n"


def run_number(args, conf_path: str, bootstrap: str, pass_name: str, number: str,
               scenario: str, wanted: list[Test], count: int) -> list[dict]:
    """Run test-runner once for the tests of `number` in `scenario` (`count` of them run);
    the results of those in `wanted`."""
    env = dict(os.environ, TESTS=number, TEST_SCENARIO=scenario, RDKAFKA_TEST_CONF=conf_path,
               TEST_KAFKA_VERSION=args.kafka_version, BROKERS=bootstrap)
    # The librdkafka just built, as run-test.sh finds it, but ahead of any the system has
    # (Debian's kcat brings one of its own).
    libs = [os.path.abspath(os.path.join(args.tests_dir, d)) for d in ("../src", "../src-cpp")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [p for p in (os.environ.get("LD_LIBRARY_PATH"),) if p])
    env.pop("TEST_CONSUMER_GROUP_PROTOCOL", None)
    if GROUP_PROTOCOL[pass_name]:
        env["TEST_CONSUMER_GROUP_PROTOCOL"] = GROUP_PROTOCOL[pass_name]
    stats_before = set(glob.glob(os.path.join(args.tests_dir, "stats_*.json")))
    log_dir = os.path.join(LOGS, pass_name)
    os.makedirs(log_dir, exist_ok=True)
    limit = args.timeout * count
    started = time.monotonic()
    killed_after = None
    try:
        with tempfile.TemporaryFile() as out:
            # A session of its own, so that a timeout kills whatever it started too.
            proc = subprocess.Popen(["./test-runner", "-E", "-L", "-p1"], cwd=args.tests_dir, env=env,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                killed_after = limit
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            out.seek(0)
            lines = _strip(out.read().decode("utf-8", errors="replace"))
    finally:
        # Tests with a stats callback leave stats_<test>_<id>.json in the tests directory
        # (an empty one when test-runner did not end by itself).
        for path in set(glob.glob(os.path.join(args.tests_dir, "stats_*.json"))) - stats_before:
            if os.path.getsize(path):
                shutil.move(path, os.path.join(log_dir, os.path.basename(path)))
            else:
                os.remove(path)
    wall = time.monotonic() - started
    results = []
    found = outcomes(lines, [t.name for t in wanted], killed_after, proc.returncode)
    for t in wanted:
        outcome, seconds, error = found[t.name]
        log = os.path.join(log_dir, f"{t.name}.log")
        with open(log, "w") as f:
            f.write(split_log(lines, t.name))
        results.append({"pass": pass_name, "test": t.name, "outcome": outcome,
                        "seconds": round(seconds if seconds is not None else wall, 1),
                        "error": error, "log": os.path.relpath(log, ROOT)})
    return results


def scenario_config(tests_dir: str, scenario: str) -> dict:
    """The settings of tests/scenarios/<scenario>.json (trivup's broker configuration) that
    shoal has; replication_factor it has not (one copy of each partition)."""
    with open(os.path.join(tests_dir, "scenarios", f"{scenario}.json")) as f:
        conf = json.loads(re.sub(r",(\s*[}\]])", r"\1", f.read()))  # trailing commas
    return {"auto.create.topics.enable": str(conf.get("auto_create_topics", "true")).lower() == "true",
            "num.partitions": int(conf.get("num_partitions", 1))}


def write_conf(directory: str, bootstrap: str, args) -> str:
    path = os.path.join(directory, "test.conf")
    with open(path, "w") as f:
        f.write(f"metadata.broker.list={bootstrap}\n")
        f.write(f"test.timeout.multiplier={args.timeout_multiplier}\n")
        for line in args.conf:
            f.write(line + "\n")
    return path


# -------------------------------------------------------------------------------- report

def counts(results: list[dict], pass_name: str) -> dict:
    out = {"passed": 0, "failed": 0, "skipped": 0, "not run": 0}
    for r in results:
        if r["pass"] == pass_name:
            out[r["outcome"]] += 1
    return out


def row(r: dict) -> str:
    return f"{r['pass']:<8}  {r['test']:<48}  {r['outcome']:<7}  {r['seconds']:>7.1f}  {r['error']}"


def report(results: list[dict], passes: list[str], args, started: float, complete: bool) -> None:
    order = {p: i for i, p in enumerate(PASSES)}
    results.sort(key=lambda r: (order[r["pass"]], r["test"]))
    with open(RESULTS, "w") as f:
        json.dump({"tests_dir": os.path.abspath(args.tests_dir), "kafka_version": args.kafka_version,
                   "timeout_s": args.timeout, "timeout_multiplier": args.timeout_multiplier,
                   "complete": complete, "wall_s": round(time.monotonic() - started, 1),
                   "counts": {p: counts(results, p) for p in passes}, "results": results}, f, indent=1)


def print_table(results: list[dict], passes: list[str]) -> None:
    print()
    print(f"{'pass':<8}  {'test':<48}  {'outcome':<7}  {'seconds':>7}  first error line")
    for r in results:
        print(row(r))
    print()
    for p in passes:
        c = counts(results, p)
        print(f"{p:<8}  " + ", ".join(f"{v} {k}" for k, v in c.items() if v or k != "not run"))
    print(f"results: {os.path.relpath(RESULTS, ROOT)}, logs: {os.path.relpath(LOGS, ROOT)}/")


# ---------------------------------------------------------------------------------- main

class Broker:
    """A Cluster.local serving Kafka clients through its gateway, and the test.conf that
    points test-runner at it.

    Every SharePartition is an actor process here, about 70 MB, and librdkafka's share tests
    consume partitions as they go and leave their groups: a pass would hold hundreds of them.
    So once the cluster holds more than --max-actors actors it is started afresh, its data
    gone with it, between two runs of test-runner. (Topic partitions cost no actor: the
    partition hosts carry them, up to max.partitions.)"""

    def __init__(self, args, config: dict, conf_dir: str) -> None:
        self.args, self.config, self.conf_dir = args, config, conf_dir
        self.cluster = None

    def start(self) -> None:
        from actors import Cluster
        try:
            self.cluster = Cluster.local(config=self.config)
            self.bootstrap = self.cluster.bootstrap_servers
        except Exception as e:
            raise SetupError(f"the cluster did not start: {e!r}") from e
        # ray.init put in a SIGTERM handler of its own that aborts the process: this one
        # stops the run and still reports and takes the cluster down.
        signal.signal(signal.SIGTERM, _interrupted)
        self.conf_path = write_conf(self.conf_dir, self.bootstrap, self.args)

    def stop(self, data_first: bool = False) -> None:
        """Take the cluster down, its data with it; `data_first` removes the data before
        asking Ray, which may be gone already."""
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            if data_first:
                shutil.rmtree(cluster.data_dir, ignore_errors=True)
            cluster.shutdown()

    def size(self) -> int:
        try:
            return len(self.cluster.actors())
        except Exception:  # a cluster that cannot say is not worth keeping
            return sys.maxsize

    def start_afresh_if_full(self, out) -> None:
        if (size := self.size()) > self.args.max_actors:
            print(f"# {size} actors: a fresh cluster", file=out, flush=True)
            self.stop()
            self.start()


def run_scenario(args, tests: list[Test], plan: dict, scenario: str, broker: Broker,
                 results: list[dict], started: float, out) -> None:
    """Run each pass's tests of `scenario` on `broker`, one test-runner at a time."""
    print(f"# scenario {scenario}: gateway {broker.bootstrap}", file=out, flush=True)
    for p in args.passes:
        wanted = [t for t in plan[p] if t.scenario == scenario]
        for number in dict.fromkeys(t.number for t in wanted):
            count = sum(1 for t in tests if t.number == number and t.runs_in(scenario))
            mine = [t for t in wanted if t.number == number]
            broker.start_afresh_if_full(out)
            for r in run_number(args, broker.conf_path, broker.bootstrap, p, number, scenario, mine,
                                max(count, 1)):
                results.append(r)
                print(row(r), file=out, flush=True)
            report(results, args.passes, args, started, complete=False)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests-dir", required=True, help="librdkafka's tests/ (with test-runner built)")
    parser.add_argument("--passes", default=",".join(PASSES), help="comma-separated: classic,consumer,share")
    parser.add_argument("--tests", default=None, help="comma-separated test numbers (0001) or names")
    parser.add_argument("--list", action="store_true", help="print the tests of each pass, run nothing")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per test before it is killed")
    parser.add_argument("--timeout-multiplier", type=float, default=2,
                        help="test.timeout.multiplier (librdkafka's CI uses 2)")
    parser.add_argument("--max-actors", type=int, default=120,
                        help="start a fresh cluster between tests once it holds more actors than this")
    parser.add_argument("--kafka-version", default="4.2.0", help="TEST_KAFKA_VERSION")
    parser.add_argument("--conf", action="append", default=[], metavar="K=V",
                        help="a further test.conf line (librdkafka client config, e.g. debug=cgrp)")
    parser.add_argument("--config", action="append", default=[], metavar="K=V",
                        help="a further shoal cluster setting")
    args = parser.parse_args(argv)
    args.passes = [p for p in args.passes.split(",") if p]
    if unknown := set(args.passes) - set(PASSES):
        parser.error(f"unknown pass: {', '.join(sorted(unknown))}")
    if args.tests is not None:
        args.tests = {t.zfill(4) if t.isdigit() else t for t in args.tests.split(",") if t}
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if not os.path.isfile(os.path.join(args.tests_dir, "test.c")):
        print(f"librdkafka compat: {args.tests_dir} is not librdkafka's tests/", file=sys.stderr)
        return 2
    tests = read_tests(args.tests_dir)
    plan = {p: select(tests, p, args.tests) for p in args.passes}
    if args.list:
        for p in args.passes:
            print(f"{p}: {len(plan[p])} tests")
            for t in plan[p]:
                extra = [s for s in (t.minver and f">= {t.minver}",
                                     t.scenario != "default" and f"scenario {t.scenario}") if s]
                print(f"  {t.name}" + (f"  ({', '.join(extra)})" if extra else ""))
        return 0
    runner = os.path.join(args.tests_dir, "test-runner")
    if not os.access(runner, os.X_OK):
        print(f"librdkafka compat: no test-runner at {runner} (make -C tests test-runner)", file=sys.stderr)
        return 2

    from actors.config import parse_value
    extra_config = {}
    for item in args.config:
        key, _, value = item.partition("=")
        extra_config[key] = parse_value(value)

    for p in args.passes:  # another pass's logs stay
        shutil.rmtree(os.path.join(LOGS, p), ignore_errors=True)
    started = time.monotonic()
    results: list[dict] = []
    scenarios = sorted({t.scenario for p in args.passes for t in plan[p]},
                       key=lambda s: (s != "default", s))
    out, status, broker = sys.stdout, 0, None
    conf_dir = tempfile.mkdtemp(prefix="shoal-librdkafka-")
    try:
        # Ray prints its workers' lines on stdout; this process's stdout is the report.
        with contextlib.redirect_stdout(sys.stderr):
            for scenario in scenarios:
                config = {**CLUSTER_CONFIG, **scenario_config(args.tests_dir, scenario), **extra_config}
                broker = Broker(args, config, conf_dir)
                broker.start()
                run_scenario(args, tests, plan, scenario, broker, results, started, out)
                broker.stop()
    except SetupError as e:
        print(f"librdkafka compat: {e}", file=sys.stderr)
        status = 2
    except (Interrupted, KeyboardInterrupt):
        print("librdkafka compat: interrupted; reporting what ran", file=sys.stderr)
    done = {(r["pass"], r["test"]) for r in results}
    complete = len(done) == sum(len(plan[p]) for p in args.passes)
    for p in args.passes:
        for t in plan[p]:
            if (p, t.name) not in done:
                results.append({"pass": p, "test": t.name, "outcome": "not run", "seconds": 0.0,
                                "error": "", "log": ""})
    report(results, args.passes, args, started, complete=complete)
    print_table(results, args.passes)
    # The cluster of an interrupted run goes last: `timeout` signals the whole process group,
    # Ray's own processes with it, and Ray ends this process within a minute of losing them.
    shutil.rmtree(conf_dir, ignore_errors=True)
    if broker is not None:
        broker.stop(data_first=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
