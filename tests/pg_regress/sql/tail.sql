-- The tail: a transaction that leaves buckets with fewer than
-- tsbucket.tail_bucket_rows rows writes their rows to the table's tail, row
-- by row; reads see them at once, DML changes them where they are, and a
-- drain (compaction, the worker) merges them into buckets.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
SHOW tsbucket.tail_bucket_rows;
CREATE TABLE tr (time timestamptz NOT NULL, sensor text, temp float8, hum int4) USING tsbucket;
SELECT tsbucket.create_timeseries('tr', 'time', 'sensor');
CREATE TABLE tr_heap (time timestamptz NOT NULL, sensor text, temp float8, hum int4);
-- Rows in buckets (one big INSERT) and rows in the tail (single-row INSERTs, as devices send them).
INSERT INTO tr SELECT '2024-01-01'::timestamptz + i * interval '10 s', 's' || (i % 4), i / 10.0, i % 100
  FROM generate_series(0, 1999) i;
INSERT INTO tr VALUES ('2024-01-01 06:00:00', 's1', 100.5, 1);
INSERT INTO tr VALUES ('2024-01-01 06:00:01', 's1', 101.5, NULL);
INSERT INTO tr VALUES ('2024-01-01 06:00:02', 's9', NULL, 3);
INSERT INTO tr VALUES ('2024-01-01 00:00:05', 's2', -1, 4);   -- late: an old window
INSERT INTO tr VALUES ('2024-01-01 06:00:03', NULL, 7, 5);    -- the NULL series
INSERT INTO tr (time, sensor) VALUES ('2024-01-01 06:00:04', 's9');
INSERT INTO tr_heap SELECT * FROM tr;
SELECT buckets, rows, tail_rows, tail_bytes > 0 AS tail_has_bytes, total_bytes >= tail_bytes AS total_counts_tail
  FROM tsbucket.stats('tr');
SELECT (SELECT table_bytes FROM tsbucket.table_detailed_size('tr')) > 0 AS sized;

-- Every path answers as the heap copy does.
CREATE FUNCTION tail_differs(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a bigint; b bigint; n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((%s) EXCEPT ALL (%s)) x', q, replace(q, ' tr', ' tr_heap')) INTO a;
  EXECUTE format('SELECT count(*) FROM ((%s) EXCEPT ALL (%s)) x', replace(q, ' tr', ' tr_heap'), q) INTO b;
  EXECUTE format('SELECT count(*) FROM (%s) x', q) INTO n;
  RETURN format('%s rows, %s extra, %s missing', n, a, b);
END $$;
SELECT tail_differs('SELECT * FROM tr');
SELECT tail_differs($$SELECT * FROM tr WHERE sensor = 's1'$$);
SELECT tail_differs($$SELECT * FROM tr WHERE sensor IN ('s9', 's2') AND time >= '2024-01-01'$$);
SELECT tail_differs($$SELECT * FROM tr WHERE sensor IS NULL$$);
SELECT tail_differs($$SELECT * FROM tr WHERE time > '2024-01-01 05:59:59'$$);
SELECT tail_differs($$SELECT * FROM tr WHERE temp > 100$$);
SELECT tail_differs('SELECT sensor, count(*), count(temp), sum(temp), min(hum), max(hum), avg(hum) FROM tr GROUP BY sensor');
SELECT tail_differs($$SELECT date_bin('1 hour', time, '2024-01-01'), count(*), max(temp) FROM tr GROUP BY 1$$);
SELECT * FROM tr ORDER BY time DESC LIMIT 4;
SELECT * FROM tr WHERE sensor = 's2' ORDER BY time LIMIT 2;
SELECT DISTINCT ON (sensor) sensor, time, temp FROM tr ORDER BY sensor, time DESC;
-- Last points: without conditions on rows only each series' latest tail rows are read whole; a condition
-- on a measurement or on time may reject them, and an older row is the answer.
SELECT DISTINCT ON (sensor) sensor, time, temp FROM tr WHERE temp < 101 ORDER BY sensor, time DESC;
SELECT DISTINCT ON (sensor) sensor, time, temp FROM tr WHERE time < '2024-01-01 06:00:01' ORDER BY sensor, time DESC;
SELECT DISTINCT ON (sensor) sensor, time, temp FROM tr WHERE sensor IN ('s1', 's9') ORDER BY sensor, time DESC;
SELECT sensor, time FROM tr WHERE time >= '2024-01-01 05:33:00' ORDER BY sensor, time;
SELECT count(*), max(time) FROM tr;
-- EXPLAIN ANALYZE counts the rows read from the tail.
CREATE FUNCTION tail_scan_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF line ~ 'Tail|Custom Scan' THEN
      RETURN NEXT regexp_replace(line, ' \(actual.*\)', '');
    END IF;
  END LOOP;
END $$;
SELECT tail_scan_lines($$SELECT * FROM tr WHERE sensor = 's9'$$);
SELECT tail_scan_lines('SELECT count(*) FROM tr');
-- A last point reads every tail row (time and meta), whole only the latest ones.
SELECT tail_scan_lines('SELECT DISTINCT ON (sensor) sensor, time, temp FROM tr ORDER BY sensor, time DESC');
-- Rows tied at a series' latest time: either is its last point.
CREATE TABLE tr_tie (time timestamptz NOT NULL, sensor text, temp float8) USING tsbucket;
SELECT tsbucket.create_timeseries('tr_tie', 'time', 'sensor');
INSERT INTO tr_tie VALUES ('2024-01-01 01:00', 'a', 1);
INSERT INTO tr_tie VALUES ('2024-01-01 01:00', 'a', 2);
INSERT INTO tr_tie VALUES ('2024-01-01 00:59', 'a', 3);
INSERT INTO tr_tie VALUES ('2024-01-01 00:58', 'b', 4);
SELECT sensor, time, temp IN (1, 2) AS latest FROM (SELECT DISTINCT ON (sensor) * FROM tr_tie ORDER BY sensor, time DESC) x;
SELECT sensor, time, temp FROM (SELECT DISTINCT ON (sensor) * FROM tr_tie WHERE temp <> 2 ORDER BY sensor, time DESC) x;
DROP TABLE tr_tie;
-- A parallel scan reads the tail once.
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT count(*), sum(hum) FROM tr;
SELECT count(*), sum(hum) FROM tr_heap;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- A scrollable cursor walks the tail both ways.
BEGIN;
DECLARE sc SCROLL CURSOR FOR SELECT time, sensor FROM tr WHERE time > '2024-01-01 05:59:59';
FETCH 2 FROM sc;
FETCH LAST FROM sc;
FETCH BACKWARD 3 FROM sc;
COMMIT;

-- System columns of tail rows are their own heap tuple's.
CREATE TABLE marks (x xid8);
INSERT INTO tr VALUES ('2024-01-01 06:00:10', 's5', 1, 1) RETURNING sensor;
INSERT INTO marks SELECT pg_current_xact_id();
SELECT count(*) FILTER (WHERE xmin::text = (SELECT (x::text::bigint - 1)::text FROM marks)) AS by_that_insert,
       count(*) FILTER (WHERE xmax::text = '0') AS not_deleted, count(*)
  FROM tr WHERE sensor = 's5';

-- DELETE and UPDATE of tail rows (only meta may change, as for buckets).
DELETE FROM tr WHERE sensor = 's9' RETURNING time, sensor, temp, hum;
DELETE FROM tr_heap WHERE sensor = 's9';
UPDATE tr SET sensor = 's8' WHERE sensor IS NULL RETURNING time, sensor, temp;
UPDATE tr_heap SET sensor = 's8' WHERE sensor IS NULL;
UPDATE tr SET temp = 0 WHERE sensor = 's8';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tail_differs('SELECT * FROM tr WHERE sensor <> $$s5$$');
-- By TID, as a tail row's ctid names it.
SELECT temp FROM tr WHERE ctid = (SELECT ctid FROM tr WHERE sensor = 's8');
DELETE FROM tr WHERE ctid = (SELECT ctid FROM tr WHERE sensor = 's5');
DELETE FROM tr_heap WHERE sensor = 's5';

-- Many INSERTs in one transaction fill buckets, as one COPY of their rows would.
BEGIN;
INSERT INTO tr VALUES ('2024-01-02 00:00:00', 'm', 1, 1);
INSERT INTO tr VALUES ('2024-01-02 00:00:01', 'm', 2, 2);
DO $$ BEGIN
  FOR i IN 3 .. 40 LOOP
    INSERT INTO tr VALUES ('2024-01-02'::timestamptz + i * interval '1 s', 'm', i, i);
  END LOOP;
END $$;
COMMIT;
INSERT INTO tr_heap SELECT * FROM tr WHERE sensor = 'm';
SELECT rows, close_reason FROM tsbucket.buckets('tr') WHERE meta = 'm';
-- ...but a query between them writes what came before it (it must see those rows).
BEGIN;
INSERT INTO tr VALUES ('2024-01-02 00:01:00', 'q', 1, 1);
SELECT count(*) FROM tr WHERE sensor = 'q';
INSERT INTO tr VALUES ('2024-01-02 00:01:01', 'q', 2, 2);
COMMIT;
INSERT INTO tr_heap SELECT * FROM tr WHERE sensor = 'q';
SELECT rows FROM tsbucket.buckets('tr') WHERE meta = 'q';
-- A cursor opened between INSERTs sees only the rows before it.
BEGIN;
INSERT INTO tr VALUES ('2024-01-03 00:00:00', 'c', 1, 1);
DECLARE cc CURSOR FOR SELECT hum FROM tr WHERE sensor = 'c' ORDER BY time;
INSERT INTO tr VALUES ('2024-01-03 00:00:01', 'c', 2, 2);
FETCH ALL FROM cc;
SELECT count(*) FROM tr WHERE sensor = 'c';
ROLLBACK;
-- ROLLBACK TO SAVEPOINT keeps rows an earlier statement left open, even
-- after a query inside the savepoint wrote them.
BEGIN;
INSERT INTO tr VALUES ('2024-01-04 00:00:00', 'v', 1, 1);
SAVEPOINT a;
INSERT INTO tr VALUES ('2024-01-04 00:00:01', 'v', 2, 2);
SELECT count(*) FROM tr WHERE sensor = 'v';
ROLLBACK TO a;
SELECT count(*) FROM tr WHERE sensor = 'v';
INSERT INTO tr VALUES ('2024-01-04 00:00:02', 'v', 3, 3);
COMMIT;
SELECT time, hum FROM tr WHERE sensor = 'v' ORDER BY time;
INSERT INTO tr_heap SELECT * FROM tr WHERE sensor = 'v';
-- An error midway loses nothing that committed and keeps nothing that did not.
INSERT INTO tr VALUES ('2024-01-05 00:00:00', 'e', 1, 1), ('infinity', 'e', 2, 2);
SELECT count(*) FROM tr WHERE sensor = 'e';

-- The threshold: 0 writes buckets as they are, a larger one sends more to the tail.
SET tsbucket.tail_bucket_rows = 0;
INSERT INTO tr VALUES ('2024-01-06 00:00:00', 'z0', 1, 1);
SET tsbucket.tail_bucket_rows = 100;
INSERT INTO tr SELECT '2024-01-06'::timestamptz + i * interval '1 s', 'z1', i, i FROM generate_series(1, 50) i;
RESET tsbucket.tail_bucket_rows;
SELECT meta, rows FROM tsbucket.buckets('tr') WHERE meta IN ('z0', 'z1');
SELECT count(*) FROM tr WHERE sensor = 'z1';
INSERT INTO tr_heap SELECT * FROM tr WHERE sensor IN ('z0', 'z1');

-- Columns added and dropped while rows wait in the tail.
INSERT INTO tr VALUES ('2024-01-07 00:00:00', 'd', 1, 1);
ALTER TABLE tr ADD COLUMN unit text DEFAULT 'C';
ALTER TABLE tr_heap ADD COLUMN unit text DEFAULT 'C';
INSERT INTO tr VALUES ('2024-01-07 00:00:01', 'd', 2, 2, 'F');
INSERT INTO tr_heap VALUES ('2024-01-07 00:00:00', 'd', 1, 1, 'C'), ('2024-01-07 00:00:01', 'd', 2, 2, 'F');
ALTER TABLE tr DROP COLUMN hum;
ALTER TABLE tr_heap DROP COLUMN hum;
SELECT * FROM tr WHERE sensor = 'd' ORDER BY time;
SELECT tail_differs('SELECT * FROM tr');

-- Compaction drains the tail into buckets, merged with the under-filled
-- buckets of the same series and window; then no row is in the tail.
SELECT tail_rows > 0 AS waiting FROM tsbucket.stats('tr');
SELECT buckets_after > 0 AS wrote, rows_moved >= 20 AS moved FROM tsbucket.compact('tr');
SELECT tail_rows FROM tsbucket.stats('tr');
SELECT count(*) AS drained_segments FROM tsbucket.tail_drained WHERE relid = 'tr'::regclass;
SELECT tail_differs('SELECT * FROM tr');
SELECT count(*) AS problems FROM tsbucket.verify('tr');
-- New rows go on to the next segment meanwhile.
INSERT INTO tr VALUES ('2024-01-08 00:00:00', 'n', 1);
INSERT INTO tr_heap VALUES ('2024-01-08 00:00:00', 'n', 1);
SELECT tail_rows FROM tsbucket.stats('tr');
SELECT tail_differs('SELECT * FROM tr');
-- Under REPEATABLE READ compaction leaves the tail alone (it could not see
-- every row a drain must take); the worker runs at READ COMMITTED.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT rows_moved FROM tsbucket.compact('tr');
COMMIT;
SELECT tail_rows FROM tsbucket.stats('tr');

-- Expiry takes rows from the tail too.
CREATE TABLE old (time timestamptz NOT NULL, s text) USING tsbucket;
SELECT tsbucket.create_timeseries('old', 'time', 's', expire_after => '1 day');
INSERT INTO old VALUES (now() - interval '10 days', 'a');
INSERT INTO old VALUES (now(), 'a');
SELECT * FROM tsbucket.expire('old');
SELECT count(*) FROM old;

-- A table owner without superuser rights drains its table's tail.
CREATE ROLE regress_tail_owner;
GRANT CREATE ON SCHEMA public TO regress_tail_owner;
SET ROLE regress_tail_owner;
CREATE TABLE owned (time timestamptz NOT NULL, s text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('owned', 'time', 's');
INSERT INTO owned VALUES ('2024-01-01', 'a', 1);
INSERT INTO owned VALUES ('2024-01-01 00:00:01', 'a', 2);
SELECT tail_rows FROM tsbucket.stats('owned');
SELECT rows_moved FROM tsbucket.compact('owned');
SELECT buckets, rows, tail_rows FROM tsbucket.stats('owned');
-- Nobody reaches the segments directly.
DO $$ BEGIN
  EXECUTE format('SELECT count(*) FROM %s', (SELECT tail_segments[1]::regclass FROM tsbucket.catalog WHERE relid = 'owned'::regclass));
EXCEPTION WHEN insufficient_privilege THEN
  RAISE WARNING 'reading a segment refused: %', SQLSTATE;
END $$;
RESET ROLE;

-- Rows of equal time in the tail, of several series, come out in meta order
-- when the query orders by time, then meta (the merge's tie-break).
CREATE TABLE ties (time timestamptz NOT NULL, dev text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('ties', 'time', 'dev');
INSERT INTO ties VALUES ('2024-03-01 00:05:33', 'b', 1);
INSERT INTO ties VALUES ('2024-03-01 00:07:19', 'b', 2);
INSERT INTO ties VALUES ('2024-03-01 00:05:33', 'c', 3);
INSERT INTO ties VALUES ('2024-03-01 00:05:33', 'a', 4);
SELECT time, dev FROM ties ORDER BY time DESC, dev DESC;
SELECT time, dev FROM ties ORDER BY time, dev;
DROP TABLE ties;

-- A statement after INSERTs in one transaction writes the buckets they left
-- open; a payload big enough for TOAST is then deleted, rewritten and
-- compacted by that same statement.
CREATE TABLE big (time timestamptz NOT NULL, s text, note text) USING tsbucket;
SELECT tsbucket.create_timeseries('big', 'time', 's');
BEGIN;
INSERT INTO big SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', md5(i::text) || md5((i * 7)::text) FROM generate_series(1, 300) i;
INSERT INTO big VALUES ('2024-01-01 00:10', 'a', 'one more');
DELETE FROM big WHERE time < '2024-01-01 00:00:11';
SELECT count(*) FROM big;
INSERT INTO big SELECT '2024-01-01 00:20'::timestamptz + i * interval '1 s', 'a', md5(i::text) || md5((i * 3)::text) FROM generate_series(1, 300) i;
SELECT buckets_before, buckets_after FROM tsbucket.compact('big');
UPDATE big SET s = 'b' WHERE s = 'a';
SELECT s, count(*) FROM big GROUP BY s ORDER BY s;
COMMIT;
SELECT s, count(*), count(DISTINCT note) FROM big GROUP BY s ORDER BY s;
DROP TABLE big;

-- TRUNCATE empties the tail; DROP TABLE removes it.
TRUNCATE tr;
SELECT count(*), (SELECT tail_rows FROM tsbucket.stats('tr')) FROM tr;
SELECT array_length(tail_segments, 1) AS segments FROM tsbucket.catalog WHERE relid = 'tr'::regclass;
SELECT tail_segments AS segs FROM tsbucket.catalog WHERE relid = 'owned'::regclass \gset
DROP TABLE owned;
SELECT count(*) AS left_behind FROM pg_class WHERE oid = ANY (:'segs'::oid[]);
DROP TABLE tr, tr_heap, marks, old;
DROP FUNCTION tail_differs(text), tail_scan_lines(text);
REVOKE CREATE ON SCHEMA public FROM regress_tail_owner;
DROP ROLE regress_tail_owner;
