-- Aggregates computed inside TsBucketScan (partial states per bucket and
-- group, combined by a Finalize Aggregate). Every answer is compared with a
-- heap copy of the same rows, and with the row-by-row plan
-- (tsbucket.vectorized_aggregation = off).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE va (time timestamptz NOT NULL, host text, zone text, f8 float8, f4 float4,
                 i4 int4, i2 int2, i8 int8, ts timestamp) USING tsbucket;
SELECT tsbucket.create_timeseries('va', 'time', meta_columns => ARRAY['host', 'zone'], granularity => 'minutes');
-- Five series over 3 days at 20 s, with NULLs, NaN, infinities and signed zeros.
INSERT INTO va SELECT '2024-05-01'::timestamptz + i * interval '20 s', 'h' || (i % 5),
       CASE WHEN i % 5 = 4 THEN NULL ELSE 'z' || (i % 5 % 2) END,
       CASE WHEN i % 13 = 0 THEN NULL WHEN i % 401 = 0 THEN 'NaN' WHEN i = 777 THEN '-Infinity'
            WHEN i % 97 = 0 THEN '-0' ELSE ((i * 7919) % 10007) / 17.0 - 200 END,
       CASE WHEN i % 17 = 0 THEN NULL ELSE ((i * 31) % 1000) / 8.0 END,
       CASE WHEN i % 19 = 0 THEN NULL ELSE (i * 7) % 100000 - 50000 END,
       (i % 600 - 300)::int2, i::int8 * 1000003,
       '2024-01-01'::timestamp + i * interval '1 min'
  FROM generate_series(0, 12959) i;
-- Late rows into old windows: buckets whose rows are not in time order.
INSERT INTO va SELECT '2024-05-01 06:00'::timestamptz + i * interval '7 s', 'h1', 'z1', i, i, i, i, i, NULL
  FROM generate_series(0, 199) i;
-- A series written newest first: its buckets hold rows in descending time order.
INSERT INTO va SELECT '2024-05-02'::timestamptz + i * interval '13 s', 'h9', 'z9', i, i, i, i, i, NULL
  FROM generate_series(0, 1499) i ORDER BY i DESC;
CREATE TABLE va_heap AS SELECT * FROM va;

-- Rows of the query on va that va_heap's answer lacks, and the other way round.
CREATE FUNCTION agg_differs(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a bigint; b bigint; n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM (%s EXCEPT ALL %s) x', replace(q, '$t', 'va'), replace(q, '$t', 'va_heap')) INTO a;
  EXECUTE format('SELECT count(*) FROM (%s EXCEPT ALL %s) x', replace(q, '$t', 'va_heap'), replace(q, '$t', 'va')) INTO b;
  EXECUTE format('SELECT count(*) FROM (%s) x', replace(q, '$t', 'va')) INTO n;
  RETURN format('%s groups, %s extra, %s missing', n, a, b);
END $$;
-- Whether the plan aggregates in the scan, and the scan's own lines.
CREATE FUNCTION plan_shape(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || replace(q, '$t', 'va') LOOP
    IF line ~ 'Aggregate|Custom Scan|Vectorized|Filter' THEN
      RETURN NEXT regexp_replace(regexp_replace(line, '(Finalize )?(Hash|Group|Mixed)?Aggregate', '\1Aggregate'), '^\s*(->\s*)?', '');
    END IF;
  END LOOP;
END $$;

-- Counts, sums, averages, min/max of every supported type, and float
-- variance; floats compared to 12 significant digits (order of addition).
SELECT plan_shape($$SELECT count(*) FROM $t$$);
SELECT agg_differs($$SELECT count(*), count(zone), count(f8), count(i4), sum(i4), sum(i2), avg(i4)::numeric(20,6), avg(i2)::numeric(20,6),
  min(i4), max(i4), min(i2), max(i2), min(i8), max(i8), min(time), max(time), min(ts), max(ts),
  min(f8), max(f8), min(f4), max(f4), round(sum(f8)::numeric, 6), round(avg(f8)::numeric, 9),
  round(avg(f4)::numeric, 9), round(stddev(f4)::numeric, 6), round(variance(f4)::numeric, 3) FROM $t WHERE f8 <> '-Infinity'$$);
SELECT agg_differs($$SELECT min(f8), max(f8), sum(f8), avg(f8) FROM $t$$);
-- Grouped by meta columns (NULL zone included), by time buckets, by both.
SELECT plan_shape($$SELECT host, zone, count(*), max(f8) FROM $t GROUP BY host, zone$$);
SELECT agg_differs($$SELECT host, zone, count(*), max(f8), min(i2), sum(i4) FROM $t GROUP BY host, zone$$);
SELECT agg_differs($$SELECT date_trunc('hour', time), host, count(*), max(f4), sum(i4), round(avg(f8)::numeric, 9) FROM $t GROUP BY 1, 2$$);
SELECT agg_differs($$SELECT date_bin('15 minutes', time, '2024-05-01 00:07'), count(*), min(f8) FROM $t GROUP BY 1$$);
SELECT agg_differs($$SELECT to_timestamp(floor(extract(epoch from time) / 300) * 300), count(*), max(i8) FROM $t GROUP BY 1$$);
SELECT agg_differs($$SELECT to_timestamp(floor(date_part('epoch', time) / 3600) * 3600), zone, count(*) FROM $t GROUP BY 1, 2$$);
SELECT agg_differs($$SELECT date_trunc('day', time, 'Asia/Kolkata'), count(*), sum(i2) FROM $t GROUP BY 1$$);
SELECT agg_differs($$SELECT tsbucket.date_trunc('hour', time, 2), count(*), sum(i2) FROM $t GROUP BY 1$$);
-- Each recognised time bucket is computed in the scan.
SELECT q, (SELECT count(*) FROM plan_shape(q) l WHERE l ~ 'Vectorized Aggregation') AS in_scan
  FROM unnest(ARRAY[
    $$SELECT date_trunc('hour', time), count(*) FROM $t GROUP BY 1$$,
    $$SELECT date_trunc('day', time, 'Asia/Kolkata'), count(*) FROM $t GROUP BY 1$$,
    $$SELECT date_bin('15 minutes', time, '2024-05-01'), count(*) FROM $t GROUP BY 1$$,
    $$SELECT to_timestamp(floor(extract(epoch from time) / 300) * 300), count(*) FROM $t GROUP BY 1$$,
    $$SELECT to_timestamp(floor(date_part('epoch', time) / 300) * 300), count(*) FROM $t GROUP BY 1$$,
    $$SELECT tsbucket.date_trunc('hour', time, 2), count(*) FROM $t GROUP BY 1$$,
    $$SELECT tsbucket.date_trunc('hour', time), host, max(f8) FROM $t GROUP BY 1, 2$$,
    $$SELECT time, count(*) FROM $t GROUP BY 1$$]) q;
SELECT agg_differs($$SELECT time, count(*), max(i4) FROM $t WHERE time < '2024-05-01 08:00' GROUP BY time$$);
-- Filters: ranges decided on the arrays, other conditions row by row, RLS-style ORs.
SELECT plan_shape($$SELECT host, count(*) FROM $t WHERE time >= '2024-05-02' AND f8 > 100 AND i4 % 3 = 0 GROUP BY host$$);
SELECT agg_differs($$SELECT host, count(*), sum(i4) FROM $t WHERE time >= '2024-05-02' AND f8 > 100 AND i4 % 3 = 0 GROUP BY host$$);
SELECT agg_differs($$SELECT count(*), max(f8) FROM $t WHERE f8 >= 'NaN'$$);
SELECT agg_differs($$SELECT count(*), max(f8) FROM $t WHERE f8 < 'NaN'$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE f8 = 0$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE i4 > NULL::int4$$);
SELECT agg_differs($$SELECT zone, count(*), min(time) FROM $t WHERE f8 IS NULL OR i2 = 7 GROUP BY zone$$);
SELECT agg_differs($$SELECT host, count(*) FROM $t WHERE host IN ('h1', 'h3') AND zone IS NOT NULL GROUP BY host$$);
-- OR, IN, IS [NOT] NULL and NOT of comparisons are decided on the arrays too
-- (three-valued: a NULL or NaN operand, a NULL in an IN list).
SELECT plan_shape($$SELECT count(*) FROM $t WHERE f8 IS NULL OR i4 IN (1, 2, 3)$$);
SELECT agg_differs($$SELECT host, count(*), sum(i4) FROM $t WHERE f8 IS NULL OR i4 IN (1, 2, 3) OR i2 < -290 GROUP BY host$$);
SELECT agg_differs($$SELECT count(*), max(f8) FROM $t WHERE NOT (f8 > 0 AND i4 IS NOT NULL)$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE NOT (i4 IN (7, NULL))$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE i4 IN (7, 14, NULL) OR f8 = 'NaN'$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE f8 <> 'NaN' AND (f4 < 10 OR f4 > 120)$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE i2 = ANY (NULL::int2[]) OR i4 > 49000$$);
SELECT agg_differs($$SELECT host, time, f8, i4 FROM $t WHERE (f8 < -190 OR f8 IS NULL) AND (time < '2024-05-01 06:00' OR i2 BETWEEN 0 AND 5)$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE ts IS NULL OR ts > '2024-01-08'$$);
PREPARE inlist(int4[], float8) AS SELECT count(*), sum(i2) FROM va WHERE i4 = ANY ($1) OR f8 > $2;
SET plan_cache_mode = force_generic_plan;
EXECUTE inlist(ARRAY[5, 10, 15, NULL], 190);
RESET plan_cache_mode;
SELECT count(*), sum(i2) FROM va_heap WHERE i4 = ANY (ARRAY[5, 10, 15, NULL]) OR f8 > 190;
-- HAVING, expressions over aggregates, ORDER BY an aggregate, LIMIT.
SELECT agg_differs($$SELECT host, max(i4) - min(i4), count(*) FROM $t GROUP BY host HAVING count(*) > 2600 AND max(i2) > 0$$);
SELECT host, count(*), max(i2) FROM va GROUP BY host HAVING sum(i2) > -1000000 ORDER BY count(*) DESC, host LIMIT 3;
-- The same aggregate twice shares one partial column.
SELECT max(i4), max(i4) + 1, count(*) FROM va;
-- first(value, time) / last(value, time): the value of the row at the least /
-- greatest time, computed in the scan for any column (meta, time, by-value
-- and by-reference measurements; a NULL value is a value). The row-by-row
-- path (heap, and tsbucket with vectorized_aggregation off) gives the same.
SELECT plan_shape($$SELECT host, tsbucket.first(f8, time), tsbucket.last(zone, time) FROM $t GROUP BY host$$);
SELECT agg_differs($$SELECT host, zone, tsbucket.first(f8, time), tsbucket.last(f8, time), tsbucket.first(i2, time),
  tsbucket.last(ts, time), tsbucket.first(zone, time), tsbucket.last(time, time), tsbucket.last(f4, time), count(*) FROM $t GROUP BY host, zone$$);
SELECT agg_differs($$SELECT date_trunc('hour', time), host, tsbucket.first(i4, time), tsbucket.last(i4, time), max(f8) FROM $t GROUP BY 1, 2$$);
SELECT agg_differs($$SELECT tsbucket.first(f8, time), tsbucket.last(i8, time), tsbucket.first(host, time) FROM $t WHERE f8 > 100 OR i4 IS NULL$$);
SELECT host, tsbucket.first(i4, time), tsbucket.last(i4, time), tsbucket.last(i4::text, time) AS row_by_row FROM va GROUP BY host ORDER BY host;
SET tsbucket.vectorized_aggregation = off;
SELECT host, tsbucket.first(i4, time), tsbucket.last(i4, time), tsbucket.last(i4::text, time) AS row_by_row FROM va GROUP BY host ORDER BY host;
RESET tsbucket.vectorized_aggregation;
-- Ties: the earliest row read wins; a NULL time is skipped; no rows, NULL.
SELECT tsbucket.first(v, t), tsbucket.last(v, t) FROM (VALUES (1, '2024-01-01'::timestamp), (2, '2024-01-01'), (3, NULL), (4, '2023-01-01')) x(v, t);
SELECT tsbucket.first(v, t) IS NULL AS empty FROM (VALUES (1, now())) x(v, t) WHERE false;
-- Equal times in a time-series table, within a bucket and across series
-- aggregated together: the scan keeps the row a row-by-row scan keeps.
CREATE TABLE ties (time timestamptz NOT NULL, s text, v int2) USING tsbucket;
SELECT tsbucket.create_timeseries('ties', 'time', 's', granularity => 'hours');
INSERT INTO ties VALUES ('2024-01-01 00:00', 'a', -5), ('2024-01-01 00:00', 'a', -7), ('2024-01-01 00:30', 'a', 1),
  ('2024-01-01 00:30', 'a', 2), ('2024-01-01 00:00', 'b', -9), ('2024-01-01 00:30', 'b', 3), ('2024-01-01 00:30', 'b', 4);
SET enable_sort = off;
SELECT plan_shape($$SELECT s, tsbucket.first(v, time) FROM ties GROUP BY s$$);
SELECT s, tsbucket.first(v, time), tsbucket.last(v, time) FROM ties GROUP BY s ORDER BY s;
SELECT tsbucket.first(v, time), tsbucket.last(v, time), tsbucket.first(s, time), tsbucket.last(s, time) FROM ties;
SET tsbucket.vectorized_aggregation = off;
SELECT s, tsbucket.first(v, time), tsbucket.last(v, time) FROM ties GROUP BY s ORDER BY s;
SELECT tsbucket.first(v, time), tsbucket.last(v, time), tsbucket.first(s, time), tsbucket.last(s, time) FROM ties;
RESET tsbucket.vectorized_aggregation;
RESET enable_sort;
DROP TABLE ties;
-- An aggregate a user made of first's transition function (no combine
-- function) is not one the scan computes: it runs row by row.
CREATE AGGREGATE my_first(anyelement, timestamptz) (sfunc = tsbucket._first_transition, stype = internal,
  finalfunc = tsbucket._first_last_final, finalfunc_extra);
SELECT plan_shape($$SELECT host, my_first(i4, time) FROM $t GROUP BY host$$);
SELECT agg_differs($$SELECT host, my_first(i4, time), tsbucket.first(i4, time) FROM $t GROUP BY host$$);
DROP AGGREGATE my_first(anyelement, timestamptz);
-- Not computed in the scan (same answers, row by row): FILTER, DISTINCT,
-- expressions as arguments, sum/avg of int8 (numeric) and sum of float4,
-- grouping by a measurement column.
SELECT plan_shape($$SELECT count(*) FILTER (WHERE i2 > 0) FROM $t$$);
SELECT plan_shape($$SELECT count(DISTINCT host) FROM $t$$);
SELECT plan_shape($$SELECT max(f8 * 2) FROM $t$$);
SELECT plan_shape($$SELECT sum(i8) FROM $t$$);
SELECT plan_shape($$SELECT sum(f4) FROM $t$$);
SELECT plan_shape($$SELECT i2, count(*) FROM $t GROUP BY i2$$);
SELECT plan_shape($$SELECT max(i4 ORDER BY time), tsbucket.first(f8, time ORDER BY time) FROM $t$$);
SELECT agg_differs($$SELECT host, max(i4 ORDER BY time), tsbucket.last(i4, time ORDER BY time DESC), string_agg(zone, ',' ORDER BY time) FROM $t GROUP BY host$$);
SELECT plan_shape($$SELECT tsbucket.date_trunc('day', time, 1, 'Europe/Paris'), count(*) FROM $t GROUP BY 1$$);
SELECT agg_differs($$SELECT count(*) FILTER (WHERE i2 > 0), sum(i8), count(DISTINCT host), max(f8 * 2), sum(f4) FROM $t$$);
SET tsbucket.vectorized_aggregation = off;
SELECT plan_shape($$SELECT count(*) FROM $t$$);
RESET tsbucket.vectorized_aggregation;
-- Float sums: per-bucket partial sums are added in another order than row
-- by row, so they may differ in the last bits (checked to 1e-12 relative).
SELECT abs(a.s - b.s) <= 1e-12 * abs(b.s) AS sums_within_1e_12
  FROM (SELECT sum(f8) s FROM va WHERE f8 <> '-Infinity') a, (SELECT sum(f8) s FROM va_heap WHERE f8 <> '-Infinity') b;
-- Overflow is the same error as row by row.
CREATE TABLE big (time timestamptz NOT NULL, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('big', 'time');
INSERT INTO big VALUES ('2024-01-01', 1e308), ('2024-01-01 00:00:01', 1e308);
SELECT sum(v) FROM big;
SELECT avg(v) FROM big;
SET tsbucket.vectorized_aggregation = off;
SELECT sum(v) FROM big;
RESET tsbucket.vectorized_aggregation;
-- EXPLAIN ANALYZE counts rows aggregated and partial rows.
CREATE FUNCTION scan_counts(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF line ~ 'Rows Aggregated|Partial Rows|Rows Removed by|Buckets|Payload|Decompressed' THEN
      RETURN NEXT regexp_replace(line, '^\s*', '');
    END IF;
  END LOOP;
END $$;
SELECT scan_counts($$SELECT host, count(*) FROM va WHERE time < '2024-05-01 12:00' AND i2 > 0 GROUP BY host$$);
-- Buckets wholly inside the time range and in one time bucket answer
-- count(*), min and max from their headers, their payloads unread; not when
-- another condition remains (the row's columns are needed) or under RLS.
SELECT scan_counts($$SELECT date_trunc('day', time), host, count(*), min(i4), max(f8), min(f4), max(time), min(ts) FROM va WHERE time >= '2024-05-01 12:00' GROUP BY 1, 2$$);
SELECT agg_differs($$SELECT date_trunc('day', time), host, count(*), min(i4), max(f8), min(f8), min(f4), max(time), min(ts) FROM $t WHERE time >= '2024-05-01 12:00' GROUP BY 1, 2$$);
SELECT agg_differs($$SELECT host, zone, count(*), min(i2), max(i8), max(f8), min(time) FROM $t GROUP BY host, zone$$);
SELECT agg_differs($$SELECT count(*), min(f4), max(f4), max(i2) FROM $t WHERE host = 'h2'$$);
SELECT scan_counts($$SELECT host, count(*) FROM va WHERE i2 > 0 GROUP BY host$$);
-- Headers also keep each column's NULL count and sum (buckets written since
-- 0.5.0): count(x), sum and avg come from them too, not avg of a bucket
-- holding a value beyond 1e100 (its sum of squares could overflow), nor
-- variance. The answers equal those of decoding the rows (an always-true
-- volatile condition keeps the headers out), and heap's.
SELECT scan_counts($$SELECT date_trunc('day', time), host, count(f8), count(i4), sum(i4), avg(i2), sum(f8), avg(f4), avg(i4) FROM va WHERE time >= '2024-05-01 12:00' GROUP BY 1, 2$$);
SELECT scan_counts($$SELECT host, avg(f8) FROM va WHERE time >= '2024-05-01 12:00' GROUP BY 1$$);
SELECT scan_counts($$SELECT host, variance(f4) FROM va WHERE time >= '2024-05-01 12:00' GROUP BY 1$$);
CREATE TEMP TABLE from_headers AS SELECT date_trunc('day', time) d, host, count(f8) c8, count(i4) c4, sum(i4) s4, avg(i2) a2,
  sum(f8) s8, avg(f4) a4, avg(i4) ai4, avg(f8) a8 FROM va WHERE time >= '2024-05-01 12:00' GROUP BY 1, 2;
CREATE TEMP TABLE from_rows AS SELECT date_trunc('day', time) d, host, count(f8) c8, count(i4) c4, sum(i4) s4, avg(i2) a2,
  sum(f8) s8, avg(f4) a4, avg(i4) ai4, avg(f8) a8 FROM va WHERE time >= '2024-05-01 12:00' AND random() >= 0 GROUP BY 1, 2;
SELECT count(*) AS groups, (SELECT count(*) FROM (TABLE from_headers EXCEPT ALL TABLE from_rows) x) AS extra,
       (SELECT count(*) FROM (TABLE from_rows EXCEPT ALL TABLE from_headers) x) AS missing FROM from_headers;
DROP TABLE from_headers, from_rows;
SELECT agg_differs($$SELECT date_trunc('day', time), host, count(f8), count(i4), sum(i4), avg(i2)::numeric(20,6), round(sum(f8)::numeric, 6),
  round(avg(f4)::numeric, 9), avg(i4)::numeric(20,6) FROM $t WHERE time >= '2024-05-01 12:00' GROUP BY 1, 2$$);
-- Header sums at the edges: signed zeros (sum keeps -0, avg gives 0), NaN,
-- NULLs only, values beyond 1e100 (read from the rows), and a sum that
-- overflows (not kept: the rows raise the error).
CREATE TABLE hs (time timestamptz NOT NULL, s text, v float8, i int4) USING tsbucket;
SELECT tsbucket.create_timeseries('hs', 'time', 's', granularity => 'hours');
INSERT INTO hs VALUES ('2024-01-01 00:00', 'zero', '-0', -1), ('2024-01-01 00:01', 'zero', '-0', 1),
  ('2024-01-01 00:00', 'big', 1e300, 2147483647), ('2024-01-01 00:01', 'big', 1e300, 2147483647),
  ('2024-01-01 00:00', 'nan', 'NaN', NULL), ('2024-01-01 00:01', 'nan', 1, 5), ('2024-01-01 00:00', 'null', NULL, NULL),
  ('2024-01-01 00:00', 'ovf', 1e308, 0), ('2024-01-01 00:01', 'ovf', 1e308, 0);
SELECT scan_counts($$SELECT s, sum(v), avg(v), count(v), sum(i), avg(i) FROM hs WHERE s IN ('big', 'nan', 'null', 'zero') GROUP BY s$$);
SELECT s, sum(v), avg(v), count(v), sum(i), avg(i) FROM hs WHERE s IN ('big', 'nan', 'null', 'zero') GROUP BY s ORDER BY s;
SELECT s, sum(v), avg(v), count(v), sum(i), avg(i) FROM hs WHERE s IN ('big', 'nan', 'null', 'zero') AND random() >= 0 GROUP BY s ORDER BY s;
SELECT sum(v) FROM hs WHERE s = 'ovf';
DROP TABLE hs;
-- count of a meta column (NULL for series h4: zone is NULL there).
SELECT scan_counts($$SELECT host, count(zone), count(host) FROM va WHERE time >= '2024-05-01 12:00' GROUP BY host$$);
SELECT agg_differs($$SELECT host, count(zone), count(host), count(*) FROM $t WHERE time >= '2024-05-01 12:00' GROUP BY host$$);
-- Parameters (generic plans), rescans under a nested loop, a cursor read backwards.
PREPARE byhost(text, timestamptz) AS SELECT count(*), max(i4), sum(i2) FROM va WHERE host = $1 AND time >= $2;
SET plan_cache_mode = force_generic_plan;
EXECUTE byhost('h2', '2024-05-02');
SELECT count(*), max(i4), sum(i2) FROM va_heap WHERE host = 'h2' AND time >= '2024-05-02';
RESET plan_cache_mode;
SELECT g.h, s.* FROM (VALUES ('h0'), ('h4'), ('none')) g(h),
  LATERAL (SELECT count(*), min(f8), max(i2) FROM va WHERE host = g.h AND i4 > 0) s ORDER BY 1;
SELECT g.h, s.* FROM (VALUES ('h0'), ('h4'), ('none')) g(h),
  LATERAL (SELECT count(*), min(f8), max(i2) FROM va_heap WHERE host = g.h AND i4 > 0) s ORDER BY 1;
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT host, count(*) FROM va GROUP BY host ORDER BY host;
FETCH 2 FROM c;
FETCH BACKWARD 1 FROM c;
COMMIT;
-- Plan shapes: a sorted Finalize GroupAggregate with group columns in the
-- select list, DISTINCT done as an aggregate, EXPLAIN VERBOSE's partial
-- states, a correlated subquery in the conditions.
SET enable_hashagg = off;
SELECT agg_differs($$SELECT zone, host, count(*), max(i2), host || '!' FROM $t GROUP BY host, zone$$);
RESET enable_hashagg;
SELECT agg_differs($$SELECT DISTINCT host, zone FROM $t$$);
EXPLAIN (VERBOSE, COSTS OFF) SELECT host, count(*), avg(f8) FROM va WHERE time < '2024-05-01 01:00' GROUP BY host;
CREATE TABLE lim AS SELECT DISTINCT host, 40000 - 100 * length(host) AS n FROM va_heap;
SELECT agg_differs($$SELECT host, count(*) FROM $t o WHERE i4 > (SELECT n FROM lim WHERE lim.host = o.host) GROUP BY host$$);
DROP TABLE lim;
-- Time buckets in a zone with DST changes (New York, 2024-11-03: 01:00-02:00 twice).
CREATE TABLE dst (time timestamptz NOT NULL, s text, v int4) USING tsbucket;
SELECT tsbucket.create_timeseries('dst', 'time', 's', granularity => 'hours');
INSERT INTO dst SELECT '2024-11-02 20:00-04'::timestamptz + i * interval '97 s', 's' || (i % 2), i FROM generate_series(0, 999) i;
CREATE TABLE dst_heap AS SELECT * FROM dst;
SET timezone = 'America/New_York';
SELECT (SELECT array_agg(x::text) FROM (SELECT date_trunc(u, time), s, count(*), sum(v) FROM dst GROUP BY 1, 2 ORDER BY 1, 2) x)
     = (SELECT array_agg(x::text) FROM (SELECT date_trunc(u, time), s, count(*), sum(v) FROM dst_heap GROUP BY 1, 2 ORDER BY 1, 2) x) AS same, u
  FROM unnest(ARRAY['minute', 'hour', 'day']) u;
SELECT date_trunc('hour', time), count(*), min(v), max(v) FROM dst WHERE time >= '2024-11-03 00:30' AND time < '2024-11-03 03:00' GROUP BY 1 ORDER BY 1;
-- Zones of one fixed offset: buckets computed as arithmetic by the scan,
-- the same as Postgres's date_trunc; date_bin with origins before and after
-- the rows; an infinite origin raises as Postgres does.
CREATE FUNCTION same_buckets(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE a text; b text;
BEGIN
  EXECUTE format('SELECT array_agg(x::text ORDER BY x::text) FROM (%s) x', replace(q, '$t', 'dst')) INTO a;
  EXECUTE format('SELECT array_agg(x::text ORDER BY x::text) FROM (%s) x', replace(q, '$t', 'dst_heap')) INTO b;
  RETURN a IS NOT DISTINCT FROM b AND a IS NOT NULL;
END $$;
SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE;
SELECT u, same_buckets(format($$SELECT date_trunc(%L, time), s, count(*), sum(v) FROM $t GROUP BY 1, 2$$, u)) FROM unnest(ARRAY['minute', 'hour', 'day']) u;
SET timezone = 'Etc/GMT+3';
SELECT u, same_buckets(format($$SELECT date_trunc(%L, time), s, count(*), sum(v) FROM $t GROUP BY 1, 2$$, u)) FROM unnest(ARRAY['second', 'hour', 'day']) u;
SELECT o, same_buckets(format($$SELECT date_bin('1 day 3 hours 7 minutes', time, %L), count(*), max(v) FROM $t GROUP BY 1$$, o))
  FROM unnest(ARRAY['2030-01-01 00:00:00.5', '1900-01-01', '2024-11-03 01:17']) o;
SELECT date_bin('1 hour', time, 'infinity'), count(*) FROM dst GROUP BY 1;
SELECT date_bin('1 hour', time, '-infinity'), count(*) FROM dst GROUP BY 1;
DROP FUNCTION same_buckets(text);
RESET timezone;
SET timezone = 'UTC';
-- Not computed in the scan: a domain column (stored by its own OID), a
-- user-defined aggregate (even with built-in functions).
CREATE DOMAIN score AS float8;
CREATE TABLE dom (time timestamptz NOT NULL, v score) USING tsbucket;
SELECT tsbucket.create_timeseries('dom', 'time');
INSERT INTO dom VALUES ('2024-01-01', -5), ('2024-01-01 00:00:01', 3), ('2024-01-01 00:00:02', -0.5);
SELECT plan_shape($$SELECT max(v) FROM dom$$);
SELECT max(v), min(v) FROM dom;
CREATE AGGREGATE my_max(int4) (sfunc = int4larger, stype = int4, combinefunc = int4larger);
SELECT plan_shape($$SELECT my_max(i4) FROM $t$$);
-- The zero a float min/max returns is the one a row-by-row scan keeps (the
-- later of equal values), also in buckets whose rows are not in time order.
CREATE TABLE z (time timestamptz NOT NULL, s text, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('z', 'time', 's');
INSERT INTO z VALUES ('2024-01-01 00:00:03', 'a', 0), ('2024-01-01 00:00:01', 'a', '-0'), ('2024-01-01 00:00:02', 'a', 1),
                     ('2024-01-01 00:00:05', 'a', '-0'), ('2024-01-01 00:00:04', 'a', 0);
SELECT date_trunc('hour', time), min(v), max(v) FROM z GROUP BY 1;
SET tsbucket.vectorized_aggregation = off;
SELECT date_trunc('hour', time), min(v), max(v) FROM z GROUP BY 1;
RESET tsbucket.vectorized_aggregation;
DROP TABLE dst, dst_heap, dom, z;
DROP DOMAIN score;
DROP AGGREGATE my_max(int4);
-- Columns added after buckets were written: those buckets hold the default
-- (or NULL) for every row, and the range filters decide on it exactly.
ALTER TABLE va ADD COLUMN extra int DEFAULT 7, ADD COLUMN bare float8;
ALTER TABLE va_heap ADD COLUMN extra int DEFAULT 7, ADD COLUMN bare float8;
INSERT INTO va (time, host, zone, extra, bare) SELECT '2024-05-04'::timestamptz + i * interval '1 min', 'h0', 'z0', i % 10, i FROM generate_series(0, 99) i;
INSERT INTO va_heap (time, host, zone, extra, bare) SELECT '2024-05-04'::timestamptz + i * interval '1 min', 'h0', 'z0', i % 10, i FROM generate_series(0, 99) i;
SELECT agg_differs($$SELECT count(*), sum(extra), max(bare) FROM $t WHERE extra > 5$$);
SELECT agg_differs($$SELECT count(*), sum(extra), max(bare) FROM $t WHERE extra < 5$$);
SELECT agg_differs($$SELECT count(*), min(extra) FROM $t WHERE bare >= 0$$);
SELECT agg_differs($$SELECT host, time, extra, bare FROM $t WHERE extra >= 7 AND time > '2024-05-02 20:00'$$);
SELECT agg_differs($$SELECT host, time, extra FROM $t WHERE bare < 50 OR extra = 3$$);
SELECT agg_differs($$SELECT count(*), sum(extra) FROM $t WHERE extra IN (7, 9) OR bare IS NOT NULL$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE bare IS NULL AND NOT (extra < 7)$$);
ALTER TABLE va ADD COLUMN label text DEFAULT 'old';
ALTER TABLE va_heap ADD COLUMN label text DEFAULT 'old';
INSERT INTO va (time, host, label) VALUES ('2024-05-05', 'h0', NULL), ('2024-05-05 00:00:01', 'h0', 'new');
INSERT INTO va_heap (time, host, label) VALUES ('2024-05-05', 'h0', NULL), ('2024-05-05 00:00:01', 'h0', 'new');
SELECT agg_differs($$SELECT count(*) FROM $t WHERE label IS NULL$$);
SELECT agg_differs($$SELECT count(*) FROM $t WHERE label IS NOT NULL OR i4 < 0$$);
-- Parallel plans (costs set so that even this small table gets them): the
-- participants share out the store's blocks; each computes partial rows in
-- its scan (no Partial Aggregate node), the leader combines them.
SELECT reloptions IS NULL AS no_parallel_workers_option FROM pg_class WHERE relname = 'va';
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT plan_shape($$SELECT host, count(*), avg(f8) FROM $t GROUP BY host$$);
EXPLAIN (COSTS OFF) SELECT count(*), max(i4) FROM va WHERE i2 > 0;
EXPLAIN (COSTS OFF) SELECT * FROM va WHERE i4 > 40000;
-- A block-sharing scan reads every bucket's header, the plain one only those
-- of the buckets its conditions reach: one host's first hour runs without
-- workers, even with workers costing nothing to start.
EXPLAIN (COSTS OFF) SELECT count(*), max(i4) FROM va WHERE host = 'h1' AND time < '2024-05-01 01:00';
SELECT agg_differs($$SELECT host, count(*), min(f8), max(i4), sum(i2) FROM $t GROUP BY host$$);
SELECT agg_differs($$SELECT date_trunc('hour', time), host, count(*), max(f4), round(avg(f8)::numeric, 9) FROM $t GROUP BY 1, 2$$);
SELECT agg_differs($$SELECT count(*), max(i4), sum(i4) FROM $t WHERE i2 > 0 AND time < '2024-05-02 12:00'$$);
SELECT agg_differs($$SELECT * FROM $t WHERE i4 > 40000$$);
SELECT agg_differs($$SELECT host, time, i4 FROM $t WHERE i4 % 1000 = 7$$);
SELECT plan_shape($$SELECT host, tsbucket.first(f8, time), tsbucket.last(label, time) FROM $t GROUP BY host$$);
SELECT agg_differs($$SELECT host, tsbucket.first(f8, time), tsbucket.last(label, time), tsbucket.last(bare, time), tsbucket.first(zone, time) FROM $t GROUP BY host$$);
-- A parallel query inside a statement that is writing the table (a BEFORE
-- ROW trigger counting its rows) sees the rows the statement wrote so far:
-- they are written to the store before the workers start.
CREATE TABLE seen (n bigint);
CREATE FUNCTION count_hp() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE c bigint;
BEGIN
  SELECT count(*) INTO c FROM va WHERE host = 'hp';
  INSERT INTO seen VALUES (c);
  RETURN NEW;
END $f$;
CREATE TRIGGER count_hp BEFORE INSERT ON va FOR EACH ROW WHEN (NEW.host = 'hp') EXECUTE FUNCTION count_hp();
INSERT INTO va (time, host) SELECT '2024-06-01'::timestamptz + i * interval '1 s', 'hp' FROM generate_series(1, 5) i;
SELECT array_agg(n ORDER BY n) AS counts_seen FROM seen;
DROP TRIGGER count_hp ON va;
DELETE FROM va WHERE host = 'hp';
DROP TABLE seen;
DROP FUNCTION count_hp();
-- The same with parallel workers surely at work: PL/pgSQL's SELECT INTO runs
-- its query without workers, EXPLAIN ANALYZE launches them. The rows the
-- workers aggregated are the ones the statement wrote so far. (The host is
-- compared as an expression: a meta condition would reach few buckets, and
-- a plan that reaches few buckets through an index runs without workers.)
CREATE TABLE seen (line text);
CREATE FUNCTION explain_hp() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT avg(f8) FROM va WHERE host || '''' = ''hp''' LOOP
    IF line ~ 'Workers Launched|Rows Aggregated' THEN
      INSERT INTO seen VALUES (NEW.time || ': ' || trim(line));
    END IF;
  END LOOP;
  RETURN NEW;
END $f$;
CREATE TRIGGER explain_hp BEFORE INSERT ON va FOR EACH ROW WHEN (NEW.host = 'hp') EXECUTE FUNCTION explain_hp();
INSERT INTO va (time, host) SELECT '2024-06-01'::timestamptz + i * interval '1 s', 'hp' FROM generate_series(1, 3) i;
SELECT line FROM seen ORDER BY line;
DROP TRIGGER explain_hp ON va;
DELETE FROM va WHERE host = 'hp';
DROP TABLE seen;
DROP FUNCTION explain_hp();
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- Row-level security: policies' conditions run before any row is aggregated.
CREATE ROLE va_reader;
GRANT SELECT ON va, va_heap TO va_reader;
ALTER TABLE va ENABLE ROW LEVEL SECURITY;
ALTER TABLE va_heap ENABLE ROW LEVEL SECURITY;
CREATE POLICY p ON va USING (host <> 'h1' AND i2 % 2 = 0);
CREATE POLICY p ON va_heap USING (host <> 'h1' AND i2 % 2 = 0);
SET ROLE va_reader;
SELECT agg_differs($$SELECT host, count(*), sum(i4), max(f8) FROM $t GROUP BY host$$);
RESET ROLE;
-- A policy the scan decides itself (a time range and meta values): still no
-- header answers under row-level security, the owner (exempt) gets them.
DROP POLICY p ON va;
DROP POLICY p ON va_heap;
CREATE POLICY p ON va USING (time >= '2024-05-02' AND host IN ('h0', 'h2'));
CREATE POLICY p ON va_heap USING (time >= '2024-05-02' AND host IN ('h0', 'h2'));
SET ROLE va_reader;
SELECT agg_differs($$SELECT host, count(*), sum(i4), max(f8), min(time) FROM $t WHERE time >= '2024-05-01 12:00' GROUP BY host$$);
RESET ROLE;
SELECT scan_counts($$SELECT host, count(*), max(f8) FROM va WHERE time >= '2024-05-01 12:00' GROUP BY host$$);
SET ROLE va_reader;
SELECT scan_counts($$SELECT host, count(*), max(f8) FROM va WHERE time >= '2024-05-01 12:00' GROUP BY host$$);
RESET ROLE;
DROP TABLE va, va_heap, big;
DROP ROLE va_reader;
