"""Errors reach the client as Postgres raised them, whatever passes through
tsbucket's hooks and whatever the server's environment: every field of an
error (constraint, table and schema names, the position), and no Rust
backtrace in its DETAIL even with RUST_BACKTRACE=1."""

import psycopg
import pytest

from conftest import Cluster, as_postgres


class BacktraceCluster(Cluster):
    def start(self):
        as_postgres(["env", "RUST_BACKTRACE=1", f"{self.bindir}/pg_ctl", "-D", self.data, "-l", f"{self.dir}/server.log",
                     "-w", "start"])


@pytest.fixture(scope="module")
def cluster():
    c = BacktraceCluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    yield c
    c.destroy()


def test_foreign_key_violation_keeps_its_fields(cluster):
    with cluster.connect() as c:
        c.execute("CREATE TABLE parent (id int PRIMARY KEY)")
        c.execute("CREATE TABLE child (id int CONSTRAINT child_parent_fk REFERENCES parent)")
        with pytest.raises(psycopg.errors.ForeignKeyViolation) as e:
            c.execute("INSERT INTO child VALUES (1)")
        diag = e.value.diag
        assert (diag.schema_name, diag.table_name, diag.constraint_name) == ("public", "child", "child_parent_fk")
        assert "backtrace" not in (diag.message_detail or "")


def test_utility_error_keeps_its_position(cluster):
    with cluster.connect() as c:
        with pytest.raises(psycopg.errors.UndefinedObject) as e:
            c.execute("CREATE TABLE bad (a int, b no_such_type)")
        assert e.value.diag.statement_position == "28"
        assert "backtrace" not in (e.value.diag.message_detail or "")


def test_tsbucket_errors_carry_no_backtrace(cluster):
    with cluster.connect() as c:
        c.execute("CREATE TABLE t (time timestamptz NOT NULL, s text, v int) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('t', 'time', 's')")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            c.execute("CREATE UNIQUE INDEX ON t (time)")
        assert e.value.diag.message_detail is None
        assert e.value.diag.message_hint
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            c.execute("UPDATE t SET v = 1")
        assert e.value.diag.message_detail is None


def test_errors_raised_inside_a_tsbucket_scan_keep_their_fields(cluster):
    """An error raised while a TsBucketScan's rows are checked against the
    query's conditions (a function called in WHERE, in plain and time-ordered
    scans) reaches the client with every field and its context, as from a
    heap scan. (Not yet for last-point scans, which check rows themselves:
    README, "Security".)"""
    with cluster.connect() as c:
        c.execute("CREATE TABLE e (time timestamptz NOT NULL, s text, v int) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('e', 'time', 's')")
        c.execute("INSERT INTO e SELECT '2024-01-01'::timestamptz + i * interval '1 s', 's' || (i % 3), i FROM generate_series(1, 100) i")
        c.execute("CREATE TABLE e_heap AS SELECT * FROM e")
        c.execute("""CREATE FUNCTION boom(v int) RETURNS boolean LANGUAGE plpgsql AS $$
                     BEGIN
                       IF v = 50 THEN
                         RAISE EXCEPTION USING MESSAGE = 'boom', ERRCODE = 'unique_violation', DETAIL = 'the detail',
                           HINT = 'the hint', SCHEMA = 'my_schema', TABLE = 'my_table', COLUMN = 'my_column',
                           CONSTRAINT = 'my_constraint';
                       END IF;
                       RETURN true;
                     END $$""")
        queries = ["SELECT * FROM {t} WHERE boom(v)",
                   "SELECT * FROM {t} WHERE boom(v) ORDER BY time DESC LIMIT 200"]
        for q in queries:
            fields = []
            for t in ("e_heap", "e"):
                with pytest.raises(psycopg.errors.UniqueViolation) as err:
                    c.execute(q.format(t=t))
                d = err.value.diag
                fields.append((d.message_primary, d.message_detail, d.message_hint, d.schema_name, d.table_name,
                               d.column_name, d.constraint_name, "PL/pgSQL function boom" in (d.context or "")))
            assert fields[1] == fields[0], q
            assert fields[1][6] == "my_constraint" and fields[1][7]
