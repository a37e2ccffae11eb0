-- Compaction by hand: a table fed one row per statement ends up with full buckets.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE trickle (time timestamptz NOT NULL, sensor text, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('trickle', 'time', 'sensor');
-- 40 single-row statements, out of time order, two sensors; a column added halfway.
DO $$
BEGIN
  FOR i IN 1..20 LOOP
    INSERT INTO trickle VALUES ('2024-01-01 00:00:00+00'::timestamptz + ((i * 7) % 20) * interval '1 min', 'a', i);
    INSERT INTO trickle VALUES ('2024-01-01 00:00:00+00'::timestamptz + i * interval '1 min', 'b', -i);
    -- A query between INSERTs writes their buckets (else they would fill one, as COPY does).
    PERFORM count(*) FROM trickle;
  END LOOP;
END $$;
ALTER TABLE trickle ADD COLUMN unit text DEFAULT 'C';
INSERT INTO trickle VALUES ('2024-01-01 00:30:00+00', 'a', 100, 'F');
SELECT buckets, rows, avg_rows_per_bucket FROM tsbucket.stats('trickle');
CREATE TABLE before_compaction AS SELECT * FROM trickle;
SELECT * FROM tsbucket.compact('trickle');
SELECT buckets, rows, avg_rows_per_bucket, compacted FROM tsbucket.stats('trickle');
SELECT meta, rows, min_time, max_time, close_reason FROM tsbucket.buckets('trickle');
-- Same rows, now in time order within each bucket; the added column reads its default.
SELECT count(*) AS differing_rows FROM (
  (SELECT * FROM trickle EXCEPT ALL SELECT * FROM before_compaction)
  UNION ALL (SELECT * FROM before_compaction EXCEPT ALL SELECT * FROM trickle)) d;
SELECT time, v, unit FROM trickle WHERE sensor = 'a' LIMIT 4;
SELECT * FROM tsbucket.verify('trickle');
-- Nothing left to merge.
SELECT * FROM tsbucket.compact('trickle');
-- Buckets are filled up to the limits.
SET tsbucket.bucket_max_count = 8;
INSERT INTO trickle SELECT '2024-01-01 00:40:00+00'::timestamptz + i * interval '1 s', 'c', i, 'K' FROM generate_series(1, 5) i;
INSERT INTO trickle SELECT '2024-01-01 00:30:00+00'::timestamptz + i * interval '1 s', 'c', i, 'K' FROM generate_series(1, 5) i;
INSERT INTO trickle SELECT '2024-01-01 00:50:00+00'::timestamptz + i * interval '1 s', 'c', i, 'K' FROM generate_series(1, 5) i;
SELECT * FROM tsbucket.compact('trickle');
SELECT rows, min_time, max_time FROM tsbucket.buckets('trickle') WHERE meta = 'c';
RESET tsbucket.bucket_max_count;
-- Convergence when the size limit binds before the count: merged buckets
-- that are full by size are not merged again, so a second round has nothing
-- to do until new rows arrive.
CREATE TABLE wide (time timestamptz NOT NULL, s text, payload text) USING tsbucket;
SELECT tsbucket.create_timeseries('wide', 'time', 's');
SET tsbucket.bucket_max_size = '1kB';
DO $$ BEGIN
  FOR i IN 1 .. 40 LOOP
    INSERT INTO wide VALUES ('2024-01-01'::timestamptz + i * interval '1 s', 'a', repeat('x', 100));
    PERFORM count(*) FROM wide;
  END LOOP;
END $$;
SELECT * FROM tsbucket.compact('wide');
SELECT close_reason, count(*), sum(rows) FROM tsbucket.buckets('wide') GROUP BY 1 ORDER BY 1;
SELECT * FROM tsbucket.compact('wide');
INSERT INTO wide VALUES ('2024-01-01 00:01:00', 'a', 'new');
SELECT * FROM tsbucket.compact('wide');
RESET tsbucket.bucket_max_size;
-- Fairness: with one group per round, each round serves the group that has
-- waited longest, so every group is merged in turn.
CREATE TABLE fair (time timestamptz NOT NULL, s text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('fair', 'time', 's');
INSERT INTO fair VALUES ('2024-01-01 00:00:01', 'x', 1);
INSERT INTO fair VALUES ('2024-01-01 00:00:01', 'y', 1);
INSERT INTO fair VALUES ('2024-01-01 00:00:01', 'z', 1);
INSERT INTO fair VALUES ('2024-01-01 00:00:02', 'x', 2);
INSERT INTO fair VALUES ('2024-01-01 00:00:02', 'y', 2);
INSERT INTO fair VALUES ('2024-01-01 00:00:02', 'z', 2);
SELECT * FROM tsbucket._compact('fair'::regclass, 1);
SELECT meta, count(*) FROM tsbucket.buckets('fair') GROUP BY 1 ORDER BY 1;
SELECT * FROM tsbucket._compact('fair'::regclass, 1);
SELECT * FROM tsbucket._compact('fair'::regclass, 1);
SELECT meta, count(*) FROM tsbucket.buckets('fair') GROUP BY 1 ORDER BY 1;
-- Where merged rows went is kept only while a bucket version that DML could
-- still follow exists: after VACUUM, the next round forgets it.
CREATE FUNCTION pg_temp.moves_rows(t regclass) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %s', (SELECT moves_relid::regclass FROM tsbucket.catalog WHERE relid = t)) INTO n;
  RETURN n;
END $$;
SELECT pg_temp.moves_rows('fair') > 0 AS moves_recorded;
VACUUM fair;
SELECT * FROM tsbucket.compact('fair');
SELECT pg_temp.moves_rows('fair') AS moves_left;
DROP TABLE wide, fair;
-- Only the owner may compact.
CREATE ROLE ts_compactor;
GRANT SELECT ON trickle TO ts_compactor;
SET SESSION AUTHORIZATION ts_compactor;
SELECT * FROM tsbucket.compact('trickle');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET SESSION AUTHORIZATION;
DROP TABLE trickle, before_compaction;
DROP ROLE ts_compactor;
