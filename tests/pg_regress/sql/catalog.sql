-- The DBA's view: tsbucket.timeseries, stats, buckets, verify.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE weather (time timestamptz NOT NULL, sensor text NOT NULL, temp float8, humidity float8) USING tsbucket;
SELECT tsbucket.create_timeseries('weather', 'time', 'sensor', granularity => 'minutes');
INSERT INTO weather SELECT '2024-08-01'::timestamptz + (i / 10) * interval '10 s', 'sensor' || (i % 10),
       round((20 + 5 * sin(i / 100.0))::numeric, 1), 50 + i % 7
  FROM generate_series(0, 29999) i;
SELECT buckets, rows, avg_rows_per_bucket, compression_ratio > 5 AS compresses,
       closed_by_count, closed_by_size, closed_by_time_window, closed_by_memory_limit,
       closed_by_end_of_statement, rewritten
  FROM tsbucket.stats('weather');
SELECT bucket_id > 0 AS has_id, meta, window_start, min_time, max_time, rows, compressed_bytes > 0 AS sized, close_reason
  FROM tsbucket.buckets('weather') LIMIT 5;
SELECT * FROM tsbucket.verify('weather');
-- Memory limit: a small buffer writes the fullest buckets early.
SET tsbucket.catalog_memory_limit = '64kB';
INSERT INTO weather SELECT '2024-08-05'::timestamptz + (i / 10) * interval '10 s', 'sensor' || (i % 10), 1, 1
  FROM generate_series(0, 9999) i;
RESET tsbucket.catalog_memory_limit;
SELECT closed_by_memory_limit > 0 AS memory_limit_used FROM tsbucket.stats('weather');
SELECT * FROM tsbucket.verify('weather');
-- Row estimates for the planner come from the bucket store.
EXPLAIN SELECT * FROM weather;
-- GUC bounds.
SET tsbucket.bucket_max_count = 0;
SET tsbucket.bucket_max_count = 2001;
SHOW tsbucket.bucket_max_size;
SHOW tsbucket.catalog_memory_limit;
-- Errors on tables that are not time-series tables.
CREATE TABLE plain (x int);
SELECT * FROM tsbucket.stats('plain');
SELECT * FROM tsbucket.buckets('plain');
SELECT * FROM tsbucket.verify('plain');
DROP TABLE weather, plain;
