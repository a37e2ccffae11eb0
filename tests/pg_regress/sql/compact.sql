-- Compaction by hand: a table fed one row per statement ends up with full buckets.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
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
-- Only the owner may compact.
CREATE ROLE ts_compactor;
GRANT SELECT ON trickle TO ts_compactor;
SET SESSION AUTHORIZATION ts_compactor;
SELECT * FROM tsbucket.compact('trickle');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET SESSION AUTHORIZATION;
DROP TABLE trickle, before_compaction;
DROP ROLE ts_compactor;
