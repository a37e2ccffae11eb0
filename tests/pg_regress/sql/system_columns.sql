-- System columns read as heap reports them, from the bucket version that
-- holds the row: xmin/cmin of the transaction and command that wrote that
-- version, xmax/cmax 0, a locker or a deleter. Every rewrite of a bucket
-- (compaction, DELETE, meta UPDATE) gives all its rows a new xmin.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE sc (time timestamptz NOT NULL, m int4, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('sc', time_column => 'time', meta_column => 'm');
CREATE TABLE sc_heap (time timestamptz NOT NULL, m int4, v float8);
CREATE FUNCTION xid_now() RETURNS xid LANGUAGE sql AS $$ SELECT (txid_current() % 4294967296)::text::xid $$;

-- The same writes into both tables, command by command, in one transaction.
BEGIN;
INSERT INTO sc SELECT '2024-01-01'::timestamptz + i * interval '1 s', i % 3, i FROM generate_series(1, 3000) i;
INSERT INTO sc_heap SELECT '2024-01-01'::timestamptz + i * interval '1 s', i % 3, i FROM generate_series(1, 3000) i;
INSERT INTO sc VALUES ('2024-01-02', 1, -1) RETURNING xmin = xid_now() AS xmin_is_mine, cmin, xmax, cmax;
INSERT INTO sc_heap VALUES ('2024-01-02', 1, -1) RETURNING xmin = xid_now() AS xmin_is_mine, cmin, xmax, cmax;
COPY sc FROM stdin;
2024-01-03 00:00:00+00	2	-2
\.
-- Within the transaction: each row's own command.
SELECT cmin::text, cmax::text, xmax::text, count(*), bool_and(xmin = xid_now()) AS mine FROM sc GROUP BY 1, 2, 3 ORDER BY 1;
SELECT cmin::text, cmax::text, xmax::text, count(*), bool_and(xmin = xid_now()) AS mine FROM sc_heap GROUP BY 1, 2, 3 ORDER BY 1;
COMMIT;

-- Every row has them, on every path: plain, vectorised, ordered, last point.
SELECT count(xmin), count(cmin), count(xmax), count(cmax), count(DISTINCT xmin::text) FROM sc;
SELECT (SELECT min(xmin::text) FROM sc) = (SELECT min(xmin::text) FROM sc_heap) AS same_transaction_as_heap;
EXPLAIN (COSTS OFF) SELECT count(*) FROM sc WHERE xmax::text = '0';
SELECT count(*) FROM sc WHERE xmax::text = '0';
EXPLAIN (COSTS OFF) SELECT time, cmin, xmax FROM sc ORDER BY time DESC LIMIT 3;
SELECT time, cmin, xmax FROM sc ORDER BY time DESC LIMIT 3;
ANALYZE sc;
EXPLAIN (COSTS OFF) SELECT DISTINCT ON (m) m, time, cmin, xmax FROM sc ORDER BY m, time DESC;
SELECT DISTINCT ON (m) m, time, cmin, xmax FROM sc ORDER BY m, time DESC;
SELECT m, cmin, count(*) FROM sc WHERE m = 1 AND time >= '2024-01-01 00:40' GROUP BY 1, 2 ORDER BY 1, 2::text;
-- In parallel workers too.
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT count(xmin), count(*) FILTER (WHERE xmax::text = '0') FROM sc;
SELECT count(xmin), count(*) FILTER (WHERE xmax::text = '0') FROM sc;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- DELETE ... RETURNING: the deleter in xmax, as heap (the bucket is locked by this transaction).
BEGIN;
DELETE FROM sc WHERE v = 5 RETURNING v, xmax = xid_now() AS xmax_is_mine;
DELETE FROM sc_heap WHERE v = 5 RETURNING v, xmax = xid_now() AS xmax_is_mine;
ROLLBACK;

-- A row-version token never misses a change: a DELETE of one row gives the
-- other rows of its bucket a new xmin (and a meta UPDATE its moved rows).
CREATE TEMP TABLE before AS SELECT time, m, xmin::text AS x FROM sc;
DELETE FROM sc WHERE v = 5;
SELECT count(*) FILTER (WHERE b.x <> s.xmin::text) AS changed, count(*) FILTER (WHERE b.x = s.xmin::text) AS unchanged
  FROM before b JOIN sc s USING (time, m);
WITH u AS (UPDATE sc SET m = 9 WHERE m = 2 RETURNING v, xmin = xid_now() AS new_xmin_is_mine, xmax::text AS xmax)
  SELECT new_xmin_is_mine, xmax, count(*) FROM u GROUP BY 1, 2;
SELECT m, count(*), count(DISTINCT xmin::text) FROM sc GROUP BY m ORDER BY m;
-- Compaction rewrites the buckets it merges.
INSERT INTO sc VALUES ('2024-01-01 00:00:00.5', 0, 0.5);
INSERT INTO sc VALUES ('2024-01-01 00:00:00.6', 0, 0.6);
TRUNCATE before;
INSERT INTO before SELECT time, m, xmin::text FROM sc;
SELECT buckets_before AS merged FROM tsbucket.compact('sc');
SELECT count(*) FILTER (WHERE b.x <> s.xmin::text) AS changed FROM before b JOIN sc s USING (time, m);
SELECT count(*) AS verify_problems FROM tsbucket.verify('sc');

-- INSERT ... SELECT from a time-series table into another.
CREATE TABLE sc2 (time timestamptz NOT NULL, m int4) USING tsbucket;
SELECT tsbucket.create_timeseries('sc2', 'time', 'm');
INSERT INTO sc2 SELECT time, m FROM sc WHERE v = 1 RETURNING xmin = xid_now() AS mine;

-- WHERE CURRENT OF acts on the row the cursor fetched last, as on heap, also
-- where the scan returns plain columns without Postgres's projection. (After
-- a DELETE or UPDATE rewrote the cursor's bucket, its rows are another
-- version's: a later WHERE CURRENT OF in that bucket finds none, README.)
CREATE TABLE cur (time timestamptz NOT NULL, m int4, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('cur', 'time', 'm');
INSERT INTO cur SELECT '2024-01-01'::timestamptz + i * interval '1 s', 1, i FROM generate_series(1, 10) i;
CREATE TABLE cur_heap AS SELECT * FROM cur;
BEGIN;
DECLARE c CURSOR FOR SELECT time, v FROM cur WHERE v > 2;
DECLARE h CURSOR FOR SELECT time, v FROM cur_heap WHERE v > 2;
FETCH 3 FROM c;
FETCH 3 FROM h;
DELETE FROM cur WHERE CURRENT OF c RETURNING v;
DELETE FROM cur_heap WHERE CURRENT OF h RETURNING v;
COMMIT;
BEGIN;
DECLARE c CURSOR FOR SELECT time, v FROM cur;
DECLARE h CURSOR FOR SELECT time, v FROM cur_heap;
FETCH 2 FROM c;
FETCH 2 FROM h;
UPDATE cur SET m = 2 WHERE CURRENT OF c RETURNING v, m;
UPDATE cur_heap SET m = 2 WHERE CURRENT OF h RETURNING v, m;
COMMIT;
SELECT m, array_agg(v ORDER BY v) FROM cur GROUP BY m ORDER BY m;
SELECT m, array_agg(v ORDER BY v) FROM cur_heap GROUP BY m ORDER BY m;
-- A scrollable cursor goes back and forth over the same rows.
BEGIN;
DECLARE s SCROLL CURSOR FOR SELECT v, time FROM cur WHERE m = 1;
FETCH 4 FROM s;
FETCH BACKWARD 2 FROM s;
FETCH 3 FROM s;
FETCH LAST FROM s;
COMMIT;
DROP TABLE sc, sc_heap, sc2, cur, cur_heap;
DROP FUNCTION xid_now();
