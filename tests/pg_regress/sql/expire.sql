-- Expiry by hand: whole buckets whose newest row is older than expire_after.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE readings (time timestamptz NOT NULL, sensor text, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('readings', 'time', 'sensor', bucket_max_span => '365 days',
                                  bucket_rounding => '365 days', expire_after => '1 day');
-- Sensor a: a bucket of old rows goes. Sensor b: a bucket whose newest row is
-- recent keeps its older row (both in the current 365-day window). Sensor c stays.
INSERT INTO readings VALUES (now() - interval '400 days', 'a', 1), (now() - interval '400 days' + interval '1 s', 'a', 2);
INSERT INTO readings VALUES
  (greatest(to_timestamp(floor(extract(epoch FROM now()) / 31536000) * 31536000), now() - interval '3 days'), 'b', 1),
  (now() - interval '1 minute', 'b', 2);
INSERT INTO readings VALUES (now() - interval '1 hour', 'c', 3);
SELECT * FROM tsbucket.expire('readings');
SELECT sensor, count(*) FROM readings GROUP BY 1 ORDER BY 1;
SELECT * FROM tsbucket.expire('readings');
-- Per-series retention: series d keeps 1000 days, series e never expires, f follows the table.
INSERT INTO readings VALUES (now() - interval '400 days', 'd', 1), (now() - interval '400 days', 'e', 1),
                            (now() - interval '400 days', 'f', 1);
SELECT tsbucket.set_series_retention('readings', 'd'::text, '1000 days');
SELECT tsbucket.set_series_retention('readings', 'e'::text, NULL);
SELECT relid::regclass, meta, expire_after FROM tsbucket.series_retention ORDER BY meta;
SELECT * FROM tsbucket.expire('readings');
SELECT sensor, count(*) FROM readings GROUP BY 1 ORDER BY 1;
SELECT tsbucket.reset_series_retention('readings', 'd'::text);
SELECT * FROM tsbucket.expire('readings');
SELECT sensor, count(*) FROM readings GROUP BY 1 ORDER BY 1;
SELECT tsbucket.set_series_retention('readings', 'd'::text, '-1 day');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.set_series_retention('readings', NULL::text, '1 day');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Series g's bucket lies in the window that straddles the cutoff, but its
-- only row is older than the cutoff: it goes (expiry looks old buckets up
-- by window start, then checks each one's newest row).
INSERT INTO readings VALUES (now() - interval '2 days', 'g', 1);
SELECT * FROM tsbucket.expire('readings');
SELECT sensor, count(*) FROM readings GROUP BY 1 ORDER BY 1;
-- Only the owner may expire; tables without expire_after cannot.
CREATE ROLE ts_expirer;
GRANT SELECT ON readings TO ts_expirer;
SET SESSION AUTHORIZATION ts_expirer;
SELECT * FROM tsbucket.expire('readings');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.set_series_retention('readings', 'c'::text, '1 day');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET SESSION AUTHORIZATION;
CREATE TABLE forever (time timestamptz NOT NULL) USING tsbucket;
SELECT tsbucket.create_timeseries('forever', 'time');
SELECT * FROM tsbucket.expire('forever');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
DROP TABLE readings, forever;
SELECT count(*) AS overrides_left FROM tsbucket.series_retention;
DROP ROLE ts_expirer;
