-- ANALYZE of a time-series table gathers column statistics from a sample of
-- its buckets (src/stats.rs), so that row and group estimates are right.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
SET timezone = 'UTC';
CREATE ROLE stats_owner;
CREATE ROLE stats_other;
GRANT CREATE ON SCHEMA public TO stats_owner;
SET ROLE stats_owner;
CREATE TABLE st (time timestamptz NOT NULL, host text, dropme int, v float8, flag bool) USING tsbucket;
SELECT tsbucket.create_timeseries('st', 'time', 'host');
INSERT INTO st SELECT '2024-01-01'::timestamptz + i * interval '10 s', 'host_' || (i % 40), i,
    CASE WHEN i % 10 = 0 THEN NULL ELSE (i % 1000) END, i % 3 = 0
  FROM generate_series(1, 200000) i;
ALTER TABLE st DROP COLUMN dropme;
-- Estimated and actual rows of a query's top plan node, within 2x?
CREATE FUNCTION estimate(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE plan json; est float8; act float8;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF, SUMMARY OFF) ' || q INTO plan;
  est := (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
  act := (plan -> 0 -> 'Plan' ->> 'Actual Rows')::float8;
  RETURN CASE WHEN greatest(est, 1) / greatest(act, 1) BETWEEN 0.5 AND 2 THEN 'within 2x' ELSE format('OFF: estimated %s, actual %s', est, act) END;
END $$;
SELECT count(*) FROM pg_stats WHERE tablename = 'st';
ANALYZE st;
-- (Whether a column of 900 evenly spread values gets a most-common-values list
-- from a sample is a close call, which PostgreSQL 15 and 18 make differently.)
SELECT attname, null_frac > 0.05 AS has_nulls, n_distinct,
       CASE WHEN n_distinct BETWEEN 1 AND 100 THEN most_common_vals IS NOT NULL END AS mcv, histogram_bounds IS NOT NULL AS histogram
  FROM pg_stats WHERE tablename = 'st' ORDER BY attname;
-- The table's size, as ANALYZE records a heap table's (the planner scales it
-- by the store's growth since).
SELECT relpages > 0 AS has_pages, reltuples FROM pg_class WHERE oid = 'st'::regclass;
SELECT estimate($$SELECT * FROM st$$);
SELECT estimate($$SELECT * FROM st WHERE host = 'host_7'$$);
SELECT estimate($$SELECT * FROM st WHERE host IN ('host_1', 'host_2', 'host_3')$$);
SELECT estimate($$SELECT * FROM st WHERE v < 100$$);
SELECT estimate($$SELECT * FROM st WHERE v IS NULL$$);
SELECT estimate($$SELECT * FROM st WHERE flag$$);
SELECT estimate($$SELECT * FROM st WHERE time >= '2024-01-10' AND time < '2024-01-12'$$);
SELECT estimate($$SELECT host, count(*) FROM st GROUP BY host$$);
-- Grouping by a time bucket: Postgres has no statistics for the expression;
-- tsbucket offers a hashed aggregate estimated from the time range (src/grouping.rs).
SELECT estimate($$SELECT date_trunc('hour', time), host, avg(v) FROM st WHERE time < '2024-01-02' GROUP BY 1, 2$$);
SELECT estimate($$SELECT date_trunc('day', time), avg(v) FROM st GROUP BY 1$$);
SELECT estimate($$SELECT date_bin('90 minutes', time, '2024-01-01'), host, max(v) FROM st WHERE time >= '2024-01-05' AND time < '2024-01-06 12:00' GROUP BY 1, 2$$);
EXPLAIN (COSTS OFF) SELECT date_trunc('hour', time) AS h, host, avg(v) FROM st WHERE time < '2024-01-02' GROUP BY 1, 2 ORDER BY 1, 2;
-- A group key made redundant by the WHERE clause (PostgreSQL 16+ drops it).
SELECT count(*) FROM (SELECT date_trunc('hour', time), host, avg(v) FROM st WHERE host = 'host_1' AND time < '2024-01-02' GROUP BY 1, 2) x;
-- Aggregates with ORDER BY or DISTINCT are left to Postgres's own plan.
SELECT count(*) FROM (SELECT date_trunc('hour', time), string_agg(host, ',' ORDER BY host), count(DISTINCT host) FROM st WHERE time < '2024-01-02' GROUP BY 1) x;
-- A member of the owning role may analyze it (the sample table is the owner's).
RESET ROLE;
CREATE ROLE stats_member IN ROLE stats_owner;
SET ROLE stats_member;
ANALYZE st;
RESET ROLE;
DROP ROLE stats_member;
-- Others may not analyze it (ANALYZE itself warns, in words that differ
-- between versions, and skips it; so does tsbucket).
RESET ROLE;
SET ROLE stats_other;
SET client_min_messages = error;
ANALYZE st;
RESET client_min_messages;
RESET ROLE;
-- VACUUM ANALYZE, a database-wide ANALYZE (as superuser), and ANALYZE in a transaction.
VACUUM ANALYZE st;
ANALYZE;
-- Two time-series tables in one command: each is sampled in turn, in the
-- transaction ANALYZE leaves open after its own ones.
CREATE TABLE st2 (time timestamptz NOT NULL, host text, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('st2', 'time', 'host');
INSERT INTO st2 SELECT '2024-01-01'::timestamptz + i * interval '1 min', 'h' || (i % 5), i FROM generate_series(1, 5000) i;
ANALYZE st, st2;
VACUUM ANALYZE st2, st;
ANALYZE;
SELECT tablename, count(*) FROM pg_stats WHERE tablename IN ('st', 'st2') GROUP BY 1 ORDER BY 1;
DROP TABLE st2;
BEGIN;
DELETE FROM st WHERE host = 'host_7';
ANALYZE st;
SELECT estimate($$SELECT * FROM st WHERE host = 'host_8'$$);
ROLLBACK;
SELECT count(DISTINCT attname) FROM pg_stats WHERE tablename = 'st';
DROP TABLE st;
DROP FUNCTION estimate(text);
REVOKE CREATE ON SCHEMA public FROM stats_owner;
DROP ROLE stats_owner, stats_other;
