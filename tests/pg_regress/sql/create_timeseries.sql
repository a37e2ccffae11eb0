-- Declaring time-series tables, and every way to get it wrong.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
\set VERBOSITY default

CREATE TABLE weather (
    time      timestamptz NOT NULL,
    sensor    text        NOT NULL,
    temp      float8,
    humidity  float8,
    note      text
) USING tsbucket;

-- Inserting before configuration is refused.
INSERT INTO weather VALUES ('2024-08-01 00:00:00+00', 'a', 1, 2, NULL);

SELECT tsbucket.create_timeseries('weather', time_column => 'time', meta_column => 'sensor',
                                  granularity => 'seconds');
SELECT table_name, time_column, meta_columns, granularity, bucket_max_span, expire_after
  FROM tsbucket.timeseries;

-- Already configured.
SELECT tsbucket.create_timeseries('weather', 'time', 'sensor');

-- Not a tsbucket table.
CREATE TABLE heap_table (time timestamptz NOT NULL, v int);
SELECT tsbucket.create_timeseries('heap_table', 'time');

CREATE TABLE t (ts timestamptz NOT NULL, ts_null timestamptz, d date NOT NULL,
                local timestamp NOT NULL, m int, m2 text) USING tsbucket;
-- Time column missing, nullable, wrong type.
SELECT tsbucket.create_timeseries('t', 'nope');
SELECT tsbucket.create_timeseries('t', 'ts_null');
SELECT tsbucket.create_timeseries('t', 'd');
-- Meta column missing, the time column itself, twice, or both forms.
SELECT tsbucket.create_timeseries('t', 'ts', meta_column => 'nope');
SELECT tsbucket.create_timeseries('t', 'ts', meta_column => 'ts');
SELECT tsbucket.create_timeseries('t', 'ts', meta_columns => ARRAY['m', 'm']::name[]);
SELECT tsbucket.create_timeseries('t', 'ts', meta_column => 'm', meta_columns => ARRAY['m2']::name[]);
-- Granularity and spans.
SELECT tsbucket.create_timeseries('t', 'ts', granularity => 'days');
SELECT tsbucket.create_timeseries('t', 'ts', bucket_max_span => '4 hours');
SELECT tsbucket.create_timeseries('t', 'ts', bucket_rounding => '4 hours');
SELECT tsbucket.create_timeseries('t', 'ts', bucket_max_span => '4 hours', bucket_rounding => '2 hours');
SELECT tsbucket.create_timeseries('t', 'ts', granularity => 'minutes', bucket_max_span => '4 hours',
                                  bucket_rounding => '4 hours');
SELECT tsbucket.create_timeseries('t', 'ts', bucket_max_span => '-4 hours', bucket_rounding => '-4 hours');
SELECT tsbucket.create_timeseries('t', 'ts', bucket_max_span => '0', bucket_rounding => '0');
SELECT tsbucket.create_timeseries('t', 'ts', bucket_max_span => '1 month', bucket_rounding => '1 month');
SELECT tsbucket.create_timeseries('t', 'ts', bucket_max_span => '400 days', bucket_rounding => '400 days');
SELECT tsbucket.create_timeseries('t', 'ts', bucket_max_span => '1.5 seconds', bucket_rounding => '1.5 seconds');
SELECT tsbucket.create_timeseries('t', 'ts', expire_after => '-1 day');
-- A timestamp (without time zone) column and several meta columns are fine.
SELECT tsbucket.create_timeseries('t', 'local', meta_columns => ARRAY['m', 'm2']::name[],
                                  bucket_max_span => '4 hours', bucket_rounding => '4 hours',
                                  expire_after => '30 days');
SELECT table_name, time_column, meta_columns, granularity, bucket_max_span, expire_after
  FROM tsbucket.timeseries ORDER BY table_name::text;

-- Granularity presets.
CREATE TABLE g_min (t timestamptz NOT NULL) USING tsbucket;
CREATE TABLE g_hours (t timestamptz NOT NULL) USING tsbucket;
SELECT tsbucket.create_timeseries('g_min', 't', granularity => 'minutes');
SELECT tsbucket.create_timeseries('g_hours', 't', granularity => 'hours');
SELECT table_name, meta_columns, granularity, bucket_max_span FROM tsbucket.timeseries
 WHERE table_name::text LIKE 'g_%' ORDER BY 1::text;

-- Only the owner may declare a table.
CREATE ROLE ts_other;
CREATE TABLE owned (t timestamptz NOT NULL) USING tsbucket;
SET ROLE ts_other;
SELECT tsbucket.create_timeseries('owned', 't');
RESET ROLE;

-- Unsupported table options.
CREATE UNLOGGED TABLE u (t timestamptz NOT NULL) USING tsbucket;

DROP TABLE weather, heap_table, t, g_min, g_hours, owned;
DROP ROLE ts_other;
SELECT count(*) AS catalog_rows_left FROM tsbucket.catalog;
