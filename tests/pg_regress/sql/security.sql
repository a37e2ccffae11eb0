-- Roles: a non-superuser owns and runs its time-series tables end to end;
-- installing tsbucket changes nothing about DROP of other objects; no user
-- code runs with elevated rights through a catalog function.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE ROLE regress_ts_owner;
CREATE ROLE regress_ts_member IN ROLE regress_ts_owner;
CREATE ROLE regress_ts_reader;
CREATE ROLE regress_ts_nobody;
CREATE SCHEMA ts_sec AUTHORIZATION regress_ts_owner;
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO regress_ts_owner', current_database()); END $$;
GRANT USAGE ON SCHEMA ts_sec TO regress_ts_reader, regress_ts_nobody;
SET search_path = ts_sec, public;

-- A non-superuser owner: create, configure, load, query, alter, compact,
-- set retention, expire, truncate, drop.
SET ROLE regress_ts_owner;
CREATE TABLE m (time timestamptz NOT NULL, host text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('m', 'time', 'host');
INSERT INTO m SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'h' || (i % 3), i FROM generate_series(1, 30) i;
INSERT INTO m VALUES ('2024-01-01', 'h0', 100);
COPY m FROM stdin;
2024-01-01 00:10:00+00	h1	101
\.
SELECT host, count(*) FROM m GROUP BY 1 ORDER BY 1;
DELETE FROM m WHERE v = 100;
UPDATE m SET host = 'h9' WHERE host = 'h2';
SELECT tsbucket.alter_timeseries('m', expire_after => '3650 days');
SELECT buckets_before > 0 AS compacted FROM tsbucket.compact('m');
SELECT tsbucket.set_series_retention('m', 'h1'::text, '7300 days');
SELECT * FROM tsbucket.expire('m');
SELECT tsbucket.reset_series_retention('m', 'h1'::text);
SELECT count(*) AS buckets FROM tsbucket.buckets('m');
SELECT buckets > 0 AS has_stats FROM tsbucket.stats('m');
SELECT count(*) AS problems FROM tsbucket.verify('m');
GRANT SELECT ON m TO regress_ts_reader;
RESET ROLE;

-- A member of the owning role may do what the owner may.
SET ROLE regress_ts_member;
SELECT tsbucket.set_series_retention('m', 'h0'::text, '7300 days');
SELECT * FROM tsbucket.expire('m');
SELECT buckets_before >= 0 AS compacted FROM tsbucket.compact('m');
RESET ROLE;

-- The owner's DDL and TRUNCATE work as on a heap table.
SET ROLE regress_ts_owner;
ALTER TABLE m ADD COLUMN note text;
ALTER TABLE m RENAME COLUMN note TO remark;
ALTER TABLE m DROP COLUMN remark;
CREATE TABLE m_scratch (time timestamptz NOT NULL, host text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('m_scratch', 'time', 'host');
INSERT INTO m_scratch VALUES ('2024-01-01', 'x', 1);
TRUNCATE m_scratch;
DROP TABLE m_scratch;
RESET ROLE;
-- A member of the owning role: writes and TRUNCATE too.
SET ROLE regress_ts_member;
CREATE TABLE m_member (time timestamptz NOT NULL, host text, v int) USING tsbucket;
RESET ROLE;
ALTER TABLE m_member OWNER TO regress_ts_owner;
SET ROLE regress_ts_member;
SELECT tsbucket.create_timeseries('m_member', 'time', 'host');
INSERT INTO m_member VALUES ('2024-01-01', 'x', 1);
TRUNCATE m_member;
DROP TABLE m_member;
RESET ROLE;

-- A reader may query and list buckets, not write or administer.
SET ROLE regress_ts_reader;
INSERT INTO m VALUES ('2024-01-02', 'h0', 1);
UPDATE m SET host = 'h5' WHERE host = 'h0';
TRUNCATE m;
ALTER TABLE m ADD COLUMN x int;
DROP TABLE m;
SELECT tsbucket.alter_timeseries('m', expire_after => '1 day');
SELECT count(*) FROM m;
SELECT count(*) > 0 AS listed FROM tsbucket.buckets('m');
SELECT * FROM tsbucket.expire('m');
SELECT tsbucket.set_series_retention('m', 'h0'::text, '1 day');
SELECT tsbucket.reset_series_retention('m', 'h0'::text);
SELECT * FROM tsbucket.compact('m');
DELETE FROM m;
RESET ROLE;

-- A role with no rights may do nothing with it.
SET ROLE regress_ts_nobody;
SELECT count(*) FROM m;
SELECT * FROM tsbucket.buckets('m');
SELECT * FROM tsbucket.expire('m');
RESET ROLE;

-- The privilege matrix: every statement on a time-series table, tried by the
-- owner, a member of the owning role, a reader (SELECT only), a role with no
-- rights and a superuser. Each try is rolled back (so nothing changes between
-- tries); the cell is 'ok' or the SQLSTATE it failed with.
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    EXECUTE q;
    RAISE EXCEPTION USING ERRCODE = 'T0001';
  EXCEPTION WHEN SQLSTATE 'T0001' THEN
    RETURN 'ok';
  END;
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;
CREATE FUNCTION pg_temp.try_as(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE result text;
BEGIN
  PERFORM set_config('role', r, true);
  result := pg_temp.try(q);
  PERFORM set_config('role', 'none', true);
  RETURN result;
END $$;
SET client_min_messages = error;
SELECT n, regexp_replace(q, 'bucket_store_\d+', 'bucket_store_<oid>') AS statement, pg_temp.try_as('regress_ts_owner', q) AS owner, pg_temp.try_as('regress_ts_member', q) AS member,
       pg_temp.try_as('regress_ts_reader', q) AS reader, pg_temp.try_as('regress_ts_nobody', q) AS nobody,
       pg_temp.try_as('none', q) AS superuser
  FROM (VALUES
    (1, $q$SELECT count(*) FROM m$q$),
    (2, $q$INSERT INTO m VALUES ('2024-01-03', 'h7', 7)$q$),
    (3, $q$UPDATE m SET host = 'h8' WHERE host = 'h1'$q$),
    (4, $q$DELETE FROM m WHERE v = 1$q$),
    (5, $q$TRUNCATE m$q$),
    (6, $q$ALTER TABLE m ADD COLUMN z int$q$),
    (7, $q$ALTER TABLE m RENAME COLUMN host TO hostname$q$),
    (8, $q$DROP TABLE m$q$),
    (9, $q$SELECT tsbucket.create_timeseries('m', 'time', 'host')$q$),
    (10, $q$SELECT tsbucket.alter_timeseries('m', expire_after => '3650 days')$q$),
    (11, $q$SELECT * FROM tsbucket.compact('m')$q$),
    (12, $q$SELECT * FROM tsbucket.expire('m')$q$),
    (13, $q$SELECT tsbucket.set_series_retention('m', 'h0'::text, '7300 days')$q$),
    (14, $q$SELECT tsbucket.reset_series_retention('m', 'h1'::text)$q$),
    (15, $q$SELECT * FROM tsbucket.stats('m')$q$),
    (16, $q$SELECT * FROM tsbucket.buckets('m')$q$),
    (17, $q$SELECT * FROM tsbucket.verify('m')$q$),
    (18, $q$SELECT tsbucket.table_size('m')$q$),
    (19, $q$SELECT * FROM tsbucket.timeseries WHERE table_name = 'm'::regclass$q$),
    (20, $q$SELECT * FROM tsbucket.series_retention WHERE relid = 'm'::regclass$q$),
    (21, $q$SELECT tsbucket._invalidate('m'::regclass)$q$),
    (22, $q$SELECT tsbucket._sync_label('m'::regclass)$q$),
    (23, $q$SELECT tsbucket._label_of('m')$q$),
    (24, $q$SELECT * FROM tsbucket._buckets('m'::regclass)$q$),
    (25, $q$SELECT * FROM tsbucket._verify('m'::regclass)$q$),
    (26, $q$SELECT * FROM tsbucket._store_totals('m'::regclass)$q$),
    (27, $q$SELECT tsbucket._analyze('m'::regclass)$q$),
    (28, 'SELECT count(*) FROM ' || (SELECT store_relid::regclass::text FROM tsbucket.catalog WHERE relid = 'm'::regclass))
  ) t(n, q) ORDER BY n;
SET client_min_messages = warning;

-- The overrides of a table are visible to whoever may read the table, only.
SET ROLE regress_ts_reader;
SELECT meta, expire_after FROM tsbucket.series_retention WHERE relid = 'm'::regclass;
RESET ROLE;
SET ROLE regress_ts_nobody;
SELECT count(*) AS overrides_seen FROM tsbucket.series_retention;
SELECT count(*) FROM tsbucket.series_retention_data;
RESET ROLE;

-- Sizes: the table's own relation is empty; tsbucket.table_size counts the store.
SELECT pg_total_relation_size('m') AS own_relation, tsbucket.table_size('m') > 0 AS has_size,
       (SELECT table_bytes + toast_bytes + index_bytes FROM tsbucket.table_detailed_size('m')) = tsbucket.table_size('m') AS parts_add_up;

-- Logical replication would send no changes of a time-series table: publishing one is refused.
SET client_min_messages = error;
CREATE PUBLICATION p_one FOR TABLE m;
CREATE PUBLICATION p_schema FOR TABLES IN SCHEMA ts_sec;
CREATE PUBLICATION p_empty;
ALTER PUBLICATION p_empty ADD TABLE m;
CREATE TABLE ts_sec.later (time timestamptz NOT NULL, v int) USING tsbucket;
CREATE PUBLICATION p_later FOR TABLE ts_sec.later;
SELECT tsbucket.create_timeseries('ts_sec.later', 'time');
DROP PUBLICATION p_empty, p_later;
DROP TABLE ts_sec.later;
SET client_min_messages = warning;
-- Nor its internal relations: the store, the tail segments, their schema.
-- (The outcomes go to a table: wal_level's warning is worded differently across versions.)
CREATE TEMP TABLE pub_outcome (n int, outcome text);
DO $$
DECLARE
    stmt text;
    n int := 0;
BEGIN
    SET LOCAL client_min_messages = error;
    FOREACH stmt IN ARRAY ARRAY[
        format('CREATE PUBLICATION p_store FOR TABLE tsbucket_internal.bucket_store_%s', 'm'::regclass::oid),
        format('CREATE PUBLICATION p_tail FOR TABLE tsbucket_internal.bucket_tail_%s_1', 'm'::regclass::oid),
        'CREATE PUBLICATION p_internal FOR TABLES IN SCHEMA tsbucket_internal'] LOOP
        n := n + 1;
        BEGIN
            EXECUTE stmt;
            INSERT INTO pub_outcome VALUES (n, 'published: ' || stmt);
        EXCEPTION WHEN feature_not_supported THEN
            INSERT INTO pub_outcome VALUES (n, format('refused (%s): %s', SQLSTATE, regexp_replace(SQLERRM, '_[0-9]+(_[0-9])?', '_N', 'g')));
        END;
    END LOOP;
END $$;
SELECT * FROM pub_outcome ORDER BY n;
DROP TABLE pub_outcome;

-- Row-level security active for the caller: per-bucket listings are refused.
ALTER TABLE m ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_h0 ON m TO regress_ts_reader USING (host = 'h0');
SET ROLE regress_ts_reader;
SELECT DISTINCT host FROM m;
SELECT * FROM tsbucket.buckets('m');
SELECT * FROM tsbucket.stats('m');
RESET ROLE;
ALTER TABLE m DISABLE ROW LEVEL SECURITY;

-- Under row-level security, a meta type whose equality is not leakproof (a
-- composite's) neither prunes buckets nor reaches them through the index:
-- pruning would show it every bucket's meta value before the policy filters.
SET ROLE regress_ts_owner;
CREATE TYPE pair AS (a int, b int);
CREATE TABLE pairs (time timestamptz NOT NULL, p pair, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('pairs', 'time', 'p');
INSERT INTO pairs SELECT '2024-01-01'::timestamptz + i * interval '1 s', ROW(i % 3, 0)::pair, i FROM generate_series(1, 30) i;
GRANT SELECT ON pairs TO regress_ts_reader;
ALTER TABLE pairs ENABLE ROW LEVEL SECURITY;
CREATE POLICY pairs_a0 ON pairs TO regress_ts_reader USING ((p).a = 0);
RESET ROLE;
SET ROLE regress_ts_reader;
EXPLAIN (COSTS OFF) SELECT v FROM pairs WHERE p = ROW(1, 0)::pair;
SELECT count(*) FROM pairs WHERE p = ROW(1, 0)::pair;
SELECT count(*) FROM pairs WHERE p = ROW(0, 0)::pair;
RESET ROLE;
-- Without a policy for the caller, the same condition uses the index.
SET ROLE regress_ts_owner;
EXPLAIN (COSTS OFF) SELECT v FROM pairs WHERE p = ROW(1, 0)::pair;
DROP TABLE pairs;
DROP TYPE pair;
RESET ROLE;

-- The retention view is a security barrier: a reader's leaky function in
-- WHERE sees no override of a table it may not read.
CREATE FUNCTION pg_temp.leak(t text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
  RAISE WARNING 'leaked: %', t;
  RETURN true;
END $$;
SET ROLE regress_ts_nobody;
SELECT count(*) FROM tsbucket.series_retention WHERE pg_temp.leak(meta);
RESET ROLE;

-- Moving a time-series table into a schema published FOR TABLES IN SCHEMA is
-- refused, as publishing it is.
CREATE SCHEMA ts_pub;
SET client_min_messages = error;
CREATE PUBLICATION p_pub FOR TABLES IN SCHEMA ts_pub;
CREATE TABLE ts_sec.mover (time timestamptz NOT NULL, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('ts_sec.mover', 'time');
ALTER TABLE ts_sec.mover SET SCHEMA ts_pub;
SET client_min_messages = warning;
SELECT relnamespace::regnamespace AS still_in FROM pg_class WHERE oid = 'ts_sec.mover'::regclass;
DROP TABLE ts_sec.mover;
DROP PUBLICATION p_pub;
DROP SCHEMA ts_pub;

-- A meta type's cast to text never runs with elevated rights: the catalog
-- functions render meta values with the type's output function, as the
-- caller (or, for expiry, as the table owner in a restricted context).
SET ROLE regress_ts_owner;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE cast_log (who name, super bool);
GRANT INSERT ON cast_log TO PUBLIC;
CREATE FUNCTION mood_text(m mood) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ts_sec.cast_log SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user;
    RETURN format('%s!', m);
END $$;
CREATE CAST (mood AS text) WITH FUNCTION mood_text(mood);
CREATE TABLE moods (time timestamptz NOT NULL, m mood, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('moods', 'time', 'm', expire_after => '1 day');
INSERT INTO moods VALUES (now() - interval '10 days', 'sad', 1), (now(), 'happy', 2), (now() - interval '10 days', 'ok', 3);
SELECT tsbucket.set_series_retention('moods', 'ok'::mood, '100 days');
SELECT meta, rows FROM tsbucket.buckets('moods');
GRANT SELECT ON moods TO regress_ts_reader;
RESET ROLE;
SET ROLE regress_ts_reader;
SELECT meta, rows FROM tsbucket.buckets('moods');
RESET ROLE;
-- As a superuser (as the worker runs it): the overrides still match, and no
-- user code ran as a superuser.
SELECT * FROM tsbucket.expire('moods');
SELECT m, v FROM moods ORDER BY v;
SELECT meta, expire_after FROM tsbucket.series_retention WHERE relid = 'moods'::regclass;
SELECT count(*) FILTER (WHERE super) AS ran_as_superuser FROM cast_log;

-- Installing tsbucket changes nothing for DROP of other objects.
SET ROLE regress_ts_owner;
CREATE TABLE plain_heap (a int, b int);
CREATE FUNCTION plain_fn() RETURNS int LANGUAGE sql AS 'SELECT 1';
ALTER TABLE plain_heap DROP COLUMN b;
DROP TABLE plain_heap;
DROP FUNCTION plain_fn();
CREATE SCHEMA ts_sec_other;
CREATE TABLE ts_sec_other.t (a int);
DROP SCHEMA ts_sec_other CASCADE;
-- Dropping its own time-series tables drops their stores too.
DROP TABLE m, moods;
RESET ROLE;
SELECT count(*) AS catalog_rows FROM tsbucket.catalog WHERE relid::regclass::text LIKE 'ts_sec.%';
DROP SCHEMA ts_sec CASCADE;
DO $$ BEGIN EXECUTE format('REVOKE CREATE ON DATABASE %I FROM regress_ts_owner', current_database()); END $$;
DROP ROLE regress_ts_member, regress_ts_reader, regress_ts_nobody, regress_ts_owner;
