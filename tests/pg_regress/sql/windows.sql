-- Buckets: one per meta value x aligned, half-open window.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';

CREATE TABLE readings (time timestamptz NOT NULL, sensor text, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('readings', 'time', 'sensor', granularity => 'seconds');
-- sensorA at 18:23:21 lands in [18:00, 19:00).
INSERT INTO readings VALUES ('2024-08-01T18:23:21Z', 'sensorA', 1);
-- Boundaries: 19:00:00 starts the next window; 18:59:59.999999 is still in the first.
INSERT INTO readings VALUES ('2024-08-01T19:00:00Z', 'sensorA', 2), ('2024-08-01T18:59:59.999999Z', 'sensorA', 3);
-- NULL meta is a series of its own; before 1970 and after 2038 work.
INSERT INTO readings VALUES ('2024-08-01T18:10:00Z', NULL, 4), ('1969-12-31T23:59:59Z', 'old', 5),
                            ('2262-01-01T00:30:00Z', 'far', 6);
SELECT meta, window_start, min_time, max_time, rows FROM tsbucket.buckets('readings');

-- A 4 hour custom span: 16:24:35 -> [16:00, 20:00).
CREATE TABLE spans (time timestamptz NOT NULL, sensor text) USING tsbucket;
SELECT tsbucket.create_timeseries('spans', 'time', 'sensor', bucket_max_span => '4 hours',
                                  bucket_rounding => '4 hours');
INSERT INTO spans VALUES ('2023-03-27T16:24:35Z', 'a'), ('2023-03-27T20:00:00Z', 'a'), ('2023-03-27T15:59:59Z', 'a');
SELECT meta, window_start, min_time, max_time, rows FROM tsbucket.buckets('spans');

-- minutes = 1 day, hours = 30 days (aligned on the Unix epoch).
CREATE TABLE daily (time timestamptz NOT NULL) USING tsbucket;
SELECT tsbucket.create_timeseries('daily', 'time', granularity => 'minutes');
CREATE TABLE monthly (time timestamptz NOT NULL) USING tsbucket;
SELECT tsbucket.create_timeseries('monthly', 'time', granularity => 'hours');
INSERT INTO daily VALUES ('2024-08-01T23:59:59Z'), ('2024-08-02T00:00:00Z');
INSERT INTO monthly VALUES ('2024-08-01T12:00:00Z');
SELECT window_start, rows FROM tsbucket.buckets('daily');
SELECT window_start, rows FROM tsbucket.buckets('monthly');

-- Count limit: 2500 rows of one series in one window make 1000 + 1000 + 500.
SET tsbucket.bucket_max_count = 1000;
INSERT INTO readings SELECT '2024-09-01T00:00:00Z'::timestamptz + i * interval '1 ms', 'dense', i
  FROM generate_series(1, 2500) i;
SELECT rows, close_reason FROM tsbucket.buckets('readings') WHERE meta = 'dense';
-- Size limit: rows of 40 kB text close a 125 kB bucket after 3 rows; a single
-- row larger than the limit gets a bucket of its own.
CREATE TABLE big (time timestamptz NOT NULL, payload text) USING tsbucket;
SELECT tsbucket.create_timeseries('big', 'time');
INSERT INTO big SELECT '2024-09-01T00:00:00Z'::timestamptz + i * interval '1 s', repeat(md5(i::text), 1250)
  FROM generate_series(1, 7) i;
INSERT INTO big VALUES ('2024-09-01T00:30:00Z', repeat('x', 300000));
SELECT rows, close_reason FROM tsbucket.buckets('big') ORDER BY bucket_id;
SELECT count(*), sum(length(payload)) FROM big;
SELECT * FROM tsbucket.verify('readings');
DROP TABLE readings, spans, daily, monthly, big;
