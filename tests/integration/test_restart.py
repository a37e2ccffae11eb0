"""Crash and restart: committed buckets survive kill -9, uncommitted ones vanish."""

from conftest import make_table, problems


def test_kill_9_keeps_committed_and_drops_uncommitted(cluster):
    with cluster.connect() as c:
        make_table(c, "crash")
        c.execute("INSERT INTO crash SELECT '2024-01-01'::timestamptz + i * interval '1 s', 's' || i % 5, i, i FROM generate_series(1, 50000) i")
        c.execute("DELETE FROM crash WHERE n % 10 = 0")
    open_tx = cluster.connect(autocommit=False)
    open_tx.execute("INSERT INTO crash SELECT now(), 'uncommitted', i, i FROM generate_series(1, 5000) i")
    open_tx.execute("DELETE FROM crash WHERE sensor = 's1'")
    cluster.crash()
    cluster.start()
    with cluster.connect() as c:
        assert c.execute("SELECT count(*), sum(n) FROM crash").fetchone() == (45000, sum(i for i in range(1, 50001) if i % 10))
        assert c.execute("SELECT count(*) FROM crash WHERE sensor = 'uncommitted'").fetchone()[0] == 0
        assert problems(c, "crash") == []
