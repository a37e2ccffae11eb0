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
