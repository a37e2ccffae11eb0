"""The randomized differential fuzzer (tests/fuzz) as CI runs it: two minutes
against a cluster with the worker compacting every second and tables owned by
a non-superuser, no mismatch allowed, every TsBucketScan path taken at least
20 times; one minute writing row by row (the tail) and one with the
time-series table partitioned by time, no mismatch allowed; then
the planted bug (debug builds), which it must find.

TSBUCKET_FUZZ_SECONDS sets the length (default 120), TSBUCKET_FUZZ_SEED the
seed (default: a new one, printed)."""

import os
import random
import sys

import pytest

from conftest import Cluster

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
import fuzz  # noqa: E402

SECONDS = float(os.environ.get("TSBUCKET_FUZZ_SECONDS", "120"))


@pytest.fixture(scope="module")
def dsn():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    d = f"host={c.dir} port={c.port} user=postgres dbname=test"
    yield d
    c.destroy()


def seed():
    return int(os.environ.get("TSBUCKET_FUZZ_SEED") or random.randrange(1, 10**9))


def fuzz_clean(dsn, capsys, seconds, flag="", **mode):
    """Runs the fuzzer (no planted bug) for `seconds`, prints its report and
    requires no mismatch; returns it for the caller's own checks."""
    s = seed()
    fz = fuzz.Fuzzer(dsn, s, plant=False, force_parallel=fuzz.prepare_database(dsn), **mode)
    lines = []
    found = fz.run(seconds, minimize=True, log=lines.append)
    with capsys.disabled():
        print(f"\n[{os.environ.get('TSBUCKET_PG', 'pg15')}] fuzz.py{flag} --seed {s} --seconds {seconds:g}")
        print(fz.report())
        for line in lines:
            print(line)
    assert found is None, f"seed {s}: {found}"
    return fz, s


def test_fuzzer_finds_no_mismatch(dsn, capsys):
    fz, s = fuzz_clean(dsn, capsys, SECONDS)
    short = [p for p in fuzz.PATHS if fz.paths[p] < 20]
    assert not short, f"seed {s}: paths taken fewer than 20 times: {short} ({dict(fz.paths)})"


def test_fuzzer_row_by_row(dsn, capsys):
    """Rows written one per statement wait in the tail; queries run on them
    before and after the worker drains them."""
    fz, s = fuzz_clean(dsn, capsys, SECONDS / 2, " --row-by-row", row_by_row=True)
    assert fz.with_tail >= fz.queries / 4, f"seed {s}: only {fz.with_tail} of {fz.queries} queries ran with rows in the tail"


def test_fuzzer_partitioned(dsn, capsys):
    """The time-series side partitioned by time (configured on the parent,
    partitions made after it): every write, query and compaction goes through
    the parent."""
    fz, s = fuzz_clean(dsn, capsys, SECONDS / 2, " --partitioned", partitioned=True)
    assert fz.queries > 0, f"seed {s}: no query ran"


def test_fuzzer_finds_the_planted_bug(dsn, capsys):
    s = seed()
    fz = fuzz.Fuzzer(dsn, s, plant=True, force_parallel=fuzz.prepare_database(dsn))
    lines = []
    found = fz.run(SECONDS, log=lines.append)
    with capsys.disabled():
        print(f"\n[{os.environ.get('TSBUCKET_PG', 'pg15')}] fuzz.py --plant --seed {s}: "
              f"{'found after ' + str(fz.queries) + ' queries' if found else 'NOT found'}")
    assert found is not None, f"seed {s}: the planted off-by-one in time pruning was not found"
