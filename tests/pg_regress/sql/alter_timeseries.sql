-- alter_timeseries: the span may only grow; expiry can be set, changed, switched off.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE g (time timestamptz NOT NULL, sensor text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('g', 'time', 'sensor', granularity => 'seconds');
INSERT INTO g VALUES ('2024-01-01 10:30+00', 'a', 1), ('2024-01-01 11:30+00', 'a', 2);
SELECT tsbucket.alter_timeseries('g', granularity => 'minutes', expire_after => '7 days');
SELECT granularity, bucket_max_span, expire_after FROM tsbucket.timeseries WHERE table_name = 'g'::regclass;
-- Old buckets keep their hour windows; new rows use day windows.
INSERT INTO g VALUES ('2024-01-01 10:45+00', 'a', 3), ('2024-01-01 12:00+00', 'a', 4);
SELECT window_start, rows FROM tsbucket.buckets('g');
SELECT count(*), sum(v) FROM g;
SELECT * FROM tsbucket.verify('g');
-- Shrinking, unknown values and contradictions are refused.
SELECT tsbucket.alter_timeseries('g', granularity => 'seconds');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.alter_timeseries('g', granularity => 'days');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.alter_timeseries('g', granularity => 'hours', bucket_max_span => '1 day', bucket_rounding => '1 day');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.alter_timeseries('g', expire_after => '1 day', expire_never => true);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.alter_timeseries('g', expire_after => '-1 day');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Expiry changed, then switched off; granularity grows to hours.
SELECT tsbucket.alter_timeseries('g', expire_after => '30 days');
SELECT tsbucket.alter_timeseries('g', granularity => 'hours', expire_never => true);
SELECT granularity, bucket_max_span, expire_after FROM tsbucket.timeseries WHERE table_name = 'g'::regclass;
-- Custom spans grow by multiples, up to 365 days.
CREATE TABLE s (time timestamptz NOT NULL) USING tsbucket;
SELECT tsbucket.create_timeseries('s', 'time', bucket_max_span => '2 hours', bucket_rounding => '2 hours');
SELECT tsbucket.alter_timeseries('s', bucket_max_span => '1 hour', bucket_rounding => '1 hour');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.alter_timeseries('s', bucket_max_span => '3 hours', bucket_rounding => '3 hours');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.alter_timeseries('s', bucket_max_span => '400 days', bucket_rounding => '400 days');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.alter_timeseries('s', granularity => 'hours');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.alter_timeseries('s', bucket_max_span => '1 day', bucket_rounding => '1 day');
SELECT granularity, bucket_max_span FROM tsbucket.timeseries WHERE table_name = 's'::regclass;
-- Only the owner may alter.
CREATE ROLE ts_alterer;
SET SESSION AUTHORIZATION ts_alterer;
SELECT tsbucket.alter_timeseries('g', expire_after => '1 day');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET SESSION AUTHORIZATION;
DROP TABLE g, s;
DROP ROLE ts_alterer;
