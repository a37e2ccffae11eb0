-- MongoDB's rules: UPDATE only of and by meta columns, DELETE anything, no unique indexes.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
\set VERBOSITY default
CREATE TABLE w (time timestamptz NOT NULL, sensor text, site text, temp float8) USING tsbucket;
SELECT tsbucket.create_timeseries('w', 'time', meta_columns => ARRAY['sensor', 'site']::name[]);
INSERT INTO w SELECT '2024-08-01'::timestamptz + i * interval '1 min', 's' || (i % 3), 'north', i
  FROM generate_series(1, 3000) i;

-- UPDATE of meta columns filtered by meta columns moves whole buckets.
SELECT count(*) AS buckets_before FROM tsbucket.buckets('w');
UPDATE w SET sensor = 'renamed' WHERE sensor = 's1';
UPDATE w SET site = upper(site) WHERE sensor = 's2' AND site = 'north';
SELECT sensor, site, count(*), sum(temp) FROM w GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS buckets_after, count(*) FILTER (WHERE close_reason = 'rewrite') AS rewritten
  FROM tsbucket.buckets('w');
-- Setting a meta column to NULL, and back.
UPDATE w SET sensor = NULL WHERE sensor = 'renamed';
SELECT count(*) FROM w WHERE sensor IS NULL;
UPDATE w SET sensor = 's1' WHERE sensor IS NULL;
-- The rules, with SQLSTATE 0A000.
UPDATE w SET temp = 0 WHERE sensor = 's0';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE w SET sensor = 'x' WHERE temp > 10;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE w SET sensor = 'x' WHERE time > '2024-08-02';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE w SET sensor = temp::text WHERE sensor = 's0';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
UPDATE w SET time = now();
\echo SQLSTATE :LAST_ERROR_SQLSTATE
WITH u AS (UPDATE w SET temp = 1 RETURNING 1) SELECT count(*) FROM u;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
INSERT INTO w VALUES (now(), 'a', 'b', 1) ON CONFLICT DO NOTHING;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
MERGE INTO w USING (SELECT 1) s ON false WHEN NOT MATCHED THEN DO NOTHING;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT * FROM w FOR UPDATE;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- No meta column: no UPDATE at all.
CREATE TABLE nometa (time timestamptz NOT NULL, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('nometa', 'time');
UPDATE nometa SET v = 1;

-- DELETE takes any filter. Whole buckets disappear, partial ones are rewritten.
DELETE FROM w WHERE sensor = 's0';
WITH d AS (DELETE FROM w WHERE temp > 2995 RETURNING sensor, temp) SELECT * FROM d ORDER BY temp;
DELETE FROM w WHERE temp::int % 2 = 0;
SELECT sensor, count(*), sum(temp), min(temp), max(temp) FROM w GROUP BY 1 ORDER BY 1;
SELECT count(*) FILTER (WHERE close_reason = 'rewrite') > 0 AS rewritten FROM tsbucket.buckets('w');
SELECT * FROM tsbucket.verify('w');
DELETE FROM w;
SELECT count(*) AS rows_left, (SELECT buckets FROM tsbucket.stats('w')) AS buckets_left FROM w;

-- No unique indexes, primary keys, unique or exclusion constraints; no other index either.
CREATE UNIQUE INDEX ON w (time);
ALTER TABLE w ADD PRIMARY KEY (time);
ALTER TABLE w ADD UNIQUE (time, sensor);
CREATE INDEX ON w (time);
CREATE TABLE pk (time timestamptz PRIMARY KEY, v int) USING tsbucket;
DROP TABLE w, nometa;
