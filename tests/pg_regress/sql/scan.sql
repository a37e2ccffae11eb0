-- TsBucketScan: decodes only what the query reads; skips buckets by time and meta.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE w (time timestamptz NOT NULL, sensor text, temp float8, note text) USING tsbucket;
SELECT tsbucket.create_timeseries('w', 'time', 'sensor');
INSERT INTO w SELECT '2024-08-01'::timestamptz + i * interval '10 s', 's' || (i % 10), i, 'n' || i
  FROM generate_series(1, 100000) i;
INSERT INTO w VALUES ('2024-08-01 00:00:00', NULL, -1, 'null meta');
SELECT count(*) AS buckets FROM tsbucket.buckets('w');
-- EXPLAIN ANALYZE differs across versions (buffers, fractional rows): keep the scan's own lines.
CREATE FUNCTION scan_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF line ~ 'Custom Scan|Decoded|Bucket' THEN
      RETURN NEXT regexp_replace(line, ' \(actual.*\)', '');
    END IF;
  END LOOP;
END $$;

-- Only the referenced columns are decoded.
SELECT scan_lines($q$SELECT count(*), sum(temp) FROM w$q$);
EXPLAIN (COSTS OFF) SELECT count(*) FROM w;
EXPLAIN (COSTS OFF) SELECT w FROM w;
-- Time ranges skip buckets; the answer is unchanged.
SELECT scan_lines($q$SELECT count(*), sum(temp) FROM w WHERE time >= '2024-08-02' AND time < '2024-08-02 06:00'$q$);
SELECT count(*), sum(temp) FROM w WHERE time >= '2024-08-02' AND time < '2024-08-02 06:00';
SELECT count(*), sum(temp) FROM w WHERE time + interval '0' >= '2024-08-02' AND time + interval '0' < '2024-08-02 06:00';
-- Constant on the left, equality, bounds on window edges.
SELECT count(*) FROM w WHERE '2024-08-02' > time;
SELECT count(*) FROM w WHERE time = '2024-08-01 01:00:00';
SELECT count(*) FROM w WHERE time > '2024-08-01 00:59:59.999999' AND time <= '2024-08-01 01:00:00';
-- Meta equality and IN lists; NULL meta never matches.
SELECT scan_lines($q$SELECT count(*) FROM w WHERE sensor IN ('s3', 's4')$q$);
SELECT count(*) FROM w WHERE sensor IN ('s3', 's4');
SELECT count(*) FROM w WHERE sensor = 's3' AND time < '2024-08-01 12:00';
SELECT count(*) FROM w WHERE sensor IS NULL;
-- Parameters are evaluated when the scan starts (generic plans included).
PREPARE p(timestamptz, text) AS SELECT count(*) FROM w WHERE time < $1 AND sensor = $2;
EXECUTE p('2024-08-01 01:00', 's1');
EXECUTE p('2024-08-01 02:00', 's1');
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE p('2024-08-01 06:00', 's1');
EXECUTE p('2024-08-01 06:00', 's1');
RESET plan_cache_mode;
-- A parameterized inner scan is re-evaluated per outer row.
SELECT a.sensor, (SELECT count(*) FROM w b WHERE b.sensor = a.sensor AND b.time < '2024-08-01 01:00')
  FROM (VALUES ('s1'), ('s2'), ('zz')) a(sensor) ORDER BY 1;
-- Per-column min/max statistics prune measurement columns too.
SELECT scan_lines($q$SELECT count(*) FROM w WHERE temp > 99000$q$);
SELECT count(*), min(temp), max(temp) FROM w WHERE temp > 99000;
SELECT count(*) FROM w WHERE temp BETWEEN 500 AND 520;
SELECT count(*) FROM w WHERE 50000 <= temp AND temp < 50010;
SELECT count(*) FROM w WHERE temp = 77777;
-- NaN sorts above every number: a bucket holding one is never skipped for >.
INSERT INTO w VALUES ('2024-08-01 00:00:05', 's5', 'NaN', 'nan row');
SELECT count(*) FROM w WHERE temp > 1e9;
SELECT count(*) FROM w WHERE temp < -0.5;
-- Integer and float4 columns, and a column added later (no statistics in old buckets).
CREATE TABLE m (time timestamptz NOT NULL, sensor text, n int, f float4) USING tsbucket;
SELECT tsbucket.create_timeseries('m', 'time', 'sensor');
INSERT INTO m SELECT '2024-01-01'::timestamptz + i * interval '1 s', 's' || (i % 4), i, i / 4.0 FROM generate_series(1, 10000) i;
ALTER TABLE m ADD COLUMN late int DEFAULT 7;
SELECT scan_lines($q$SELECT count(*) FROM m WHERE n >= 9990$q$);
SELECT count(*) FROM m WHERE n >= 9990;
SELECT count(*) FROM m WHERE f < 2.5::float4;
SELECT count(*) FROM m WHERE late = 7;
SELECT count(*) FROM m WHERE n > 5000 AND n < 5002;
DROP TABLE m;
-- now() and other stable expressions prune too.
SELECT count(*) FROM w WHERE time > now() + interval '100 years';
DROP TABLE w;
DROP FUNCTION scan_lines;
