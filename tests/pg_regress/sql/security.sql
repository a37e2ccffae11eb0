-- Roles: a non-superuser owns and runs its time-series tables end to end;
-- installing tsbucket changes nothing about DROP of other objects; no user
-- code runs with elevated rights through a catalog function.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
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

-- Row-level security active for the caller: per-bucket listings are refused.
ALTER TABLE m ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_h0 ON m TO regress_ts_reader USING (host = 'h0');
SET ROLE regress_ts_reader;
SELECT DISTINCT host FROM m;
SELECT * FROM tsbucket.buckets('m');
SELECT * FROM tsbucket.stats('m');
RESET ROLE;
ALTER TABLE m DISABLE ROW LEVEL SECURITY;

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
