-- How TsBucketScan reaches buckets: the series index (meta..., window_start)
-- for meta equalities, the window_start index for time bounds, else the whole
-- store. Every answer is compared with a heap copy of the same rows.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE r (time timestamptz NOT NULL, site text, unit int4, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('r', 'time', meta_columns => ARRAY['site', 'unit']);
-- Two days in 1-hour windows, then the span grows to 1 day (alter_timeseries)
-- and two more days arrive, some of them late, into old windows.
INSERT INTO r SELECT '2024-03-01'::timestamptz + i * interval '30 s', chr(97 + i % 4), i % 3, i
  FROM generate_series(0, 5759) i;
INSERT INTO r VALUES ('2024-03-01 05:00', NULL, 1, -1), ('2024-03-01 05:00', 'a', NULL, -2);
SELECT tsbucket.alter_timeseries('r', granularity => 'minutes');
INSERT INTO r SELECT '2024-03-03'::timestamptz + i * interval '30 s', chr(97 + i % 4), i % 3, 10000 + i
  FROM generate_series(0, 5759) i;
INSERT INTO r SELECT '2024-03-01 12:00'::timestamptz + i * interval '7 s', 'b', 1, 20000 + i
  FROM generate_series(0, 99) i;
CREATE TABLE r_heap AS SELECT * FROM r;
SELECT count(*) AS buckets, count(*) FILTER (WHERE window_start::timestamptz < '2024-03-03') AS hour_windows FROM tsbucket.buckets('r');

-- The scan's own EXPLAIN ANALYZE lines (others differ across versions).
CREATE FUNCTION scan_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF line ~ 'Custom Scan|Bucket' THEN
      RETURN NEXT regexp_replace(line, ' \(actual.*\)', '');
    END IF;
  END LOOP;
END $$;
-- Rows of the query on r that the heap copy lacks, and the other way round.
CREATE FUNCTION differs(cond text, t text DEFAULT 'r') RETURNS text LANGUAGE plpgsql AS $$
DECLARE a bigint; b bigint; n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM (SELECT * FROM %I WHERE %s EXCEPT ALL SELECT * FROM %I WHERE %s) x', t, cond, t || '_heap', cond) INTO a;
  EXECUTE format('SELECT count(*) FROM (SELECT * FROM %I WHERE %s EXCEPT ALL SELECT * FROM %I WHERE %s) x', t || '_heap', cond, t, cond) INTO b;
  EXECUTE format('SELECT count(*) FROM %I WHERE %s', t, cond) INTO n;
  RETURN format('%s rows, %s extra, %s missing', n, a, b);
END $$;

-- Meta equality on the leading meta column: the series index.
SELECT scan_lines($q$SELECT * FROM r WHERE site = 'a'$q$);
SELECT differs($$site = 'a'$$);
-- IN lists, repeated and NULL values: each bucket once.
SELECT scan_lines($q$SELECT * FROM r WHERE site IN ('a', 'a', 'c')$q$);
SELECT differs($$site IN ('a', 'a', 'c')$$);
SELECT differs($$site = ANY (ARRAY['b', NULL])$$);
SELECT differs($$site IN (NULL)$$);
SELECT differs($$'d' = site$$);
-- Both meta columns (a cross-type comparison for unit) and time: one range per series.
SELECT scan_lines($q$SELECT * FROM r WHERE site = 'b' AND unit = 1::int8 AND time >= '2024-03-01 11:00' AND time < '2024-03-01 13:00'$q$);
SELECT differs($$site = 'b' AND unit = 1::int8 AND time >= '2024-03-01 11:00' AND time < '2024-03-01 13:00'$$);
SELECT differs($$site IN ('a', 'b') AND unit IN (0, 1, 2) AND time > '2024-03-02 23:59:30' AND time <= '2024-03-03 00:30'$$);
-- Windows of the old (1 hour) and new (1 day) span around the change.
SELECT differs($$site = 'c' AND unit = 2 AND time >= '2024-03-02 23:30'$$);
SELECT differs($$site = 'c' AND unit = 2 AND time <= '2024-03-03 00:00'$$);
SELECT differs($$site = 'a' AND unit = 0 AND time BETWEEN '2024-03-02 12:00' AND '2024-03-03 12:00'$$);
-- IN lists computed when the scan starts (their values outlive the row that
-- computed them), and under a generic plan.
SET tsbucket_test.s1 = 'a';
SET tsbucket_test.s2 = 'c';
SELECT differs($$site IN (current_setting('tsbucket_test.s1'), current_setting('tsbucket_test.s2')) AND time < '2024-03-02'$$);
PREPARE inl(text, text) AS SELECT count(*), sum(v) FROM r WHERE site IN ($1, $2) AND unit = 1;
SET plan_cache_mode = force_generic_plan;
EXECUTE inl('b', 'd');
RESET plan_cache_mode;
SELECT count(*), sum(v) FROM r_heap WHERE site IN ('b', 'd') AND unit = 1;
-- The second meta column alone, or time alone: the window index.
SELECT scan_lines($q$SELECT * FROM r WHERE unit = 2 AND time >= '2024-03-03 22:00'$q$);
SELECT differs($$unit = 2 AND time >= '2024-03-03 22:00'$$);
SELECT differs($$time >= '2024-03-01 12:00' AND time < '2024-03-01 12:05'$$);
SELECT differs($$time < '2024-03-01 00:10'$$);
SELECT differs($$time > '2024-03-04 23:50'$$);
-- NULL series are reached by no equality.
SELECT differs($$site IS NULL$$);
SELECT differs($$unit IS NULL AND time < '2024-03-02'$$);
-- A comparison under another collation than the index's: not through the index.
EXPLAIN (COSTS OFF) SELECT * FROM r WHERE site = 'a' COLLATE "C";
SELECT differs($$site = 'a' COLLATE "C"$$);

-- Parameters: custom and generic plans.
PREPARE p(text, timestamptz) AS SELECT count(*), sum(v) FROM r WHERE site = $1 AND unit = 1 AND time >= $2;
EXECUTE p('b', '2024-03-01 12:00');
SELECT count(*), sum(v) FROM r_heap WHERE site = 'b' AND unit = 1 AND time >= '2024-03-01 12:00';
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE p('b', '2024-03-01 12:00');
EXECUTE p('b', '2024-03-01 12:00');
EXECUTE p(NULL, '2024-03-01 12:00');
RESET plan_cache_mode;
-- Rescans with new values (a lateral join's parameter).
SELECT s.site, x.n FROM (VALUES ('a'), ('b'), ('z'), (NULL)) s(site)
  CROSS JOIN LATERAL (SELECT count(*) AS n FROM r WHERE r.site = s.site AND r.time < '2024-03-02') x ORDER BY 1;
SELECT site, count(*) FROM r_heap WHERE time < '2024-03-02' AND site IN ('a', 'b') GROUP BY 1 ORDER BY 1;

-- Scroll cursors walk the index ranges in both directions.
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT site, unit, v FROM r WHERE site IN ('d', 'a') AND unit = 0 AND time < '2024-03-01 00:10';
FETCH 3 FROM c;
FETCH LAST FROM c;
FETCH BACKWARD 2 FROM c;
FETCH ABSOLUTE 1 FROM c;
FETCH BACKWARD 1 FROM c;
FETCH FORWARD ALL FROM c;
FETCH BACKWARD ALL FROM c;
COMMIT;

-- IN lists too long to give every combination a range of its own (over 1024):
-- the ranges pin fewer meta columns; a time-ordered scan then walks the window
-- index instead of one walk per series.
SELECT differs($$site IN ('a','b','c','d','e','f','g','h','i','j','k','l','m','n','o','p','q','r','s','t','u','v','w','x','y','z','A','B','C','D','E','F','G','H','I','J','K','L','M','N')
                 AND unit IN (0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29)$$);
SELECT string_agg(v::text, ',') AS newest FROM (SELECT v FROM r WHERE site IN ('a','b','c','d','e','f','g','h','i','j','k','l','m','n','o','p','q','r','s','t','u','v','w','x','y','z','A','B','C','D','E','F','G','H','I','J','K','L','M','N')
                 AND unit IN (0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29) ORDER BY time DESC, v LIMIT 6) x;
SELECT string_agg(v::text, ',') AS newest FROM (SELECT v FROM r_heap WHERE site IN ('a','b','c','d') ORDER BY time DESC, v LIMIT 6) x;
-- Infinite times have no window: refused.
INSERT INTO r VALUES ('infinity', 'a', 1, 1);
INSERT INTO r VALUES ('-infinity', 'a', 1, 1);
-- Row-level changes and compaction keep the index answers right.
DELETE FROM r WHERE site = 'a' AND v::int8 % 5 = 0;
DELETE FROM r_heap WHERE site = 'a' AND v::int8 % 5 = 0;
UPDATE r SET site = 'e' WHERE site = 'd' AND unit = 2;
UPDATE r_heap SET site = 'e' WHERE site = 'd' AND unit = 2;
SELECT count(*) > 0 AS compacted FROM tsbucket.compact('r');
SELECT differs($$site = 'a' AND time >= '2024-03-02 20:00'$$);
SELECT differs($$site IN ('d', 'e')$$);
SELECT differs($$time >= '2024-03-01 12:00' AND time < '2024-03-01 13:00'$$);
DROP TABLE r, r_heap;

-- Range conditions on measurement columns drop rows inside the scan, before a
-- tuple is formed: NULLs, NaN (above every number), float4, and types whose
-- order is unsigned (oid, "char"), which are left to the quals.
CREATE TABLE f (time timestamptz NOT NULL, x float8, y float4, o oid, c "char", n int2) USING tsbucket;
SELECT tsbucket.create_timeseries('f', 'time');
INSERT INTO f SELECT '2024-01-01'::timestamptz + i * interval '1 min',
    CASE WHEN i % 10 = 0 THEN NULL WHEN i % 17 = 0 THEN 'NaN'::float8 ELSE i END,
    i / 3.0, CASE WHEN i % 2 = 0 THEN 3000000000 + i ELSE i END, chr(60 + i % 60)::"char", i % 50 - 25
  FROM generate_series(1, 3000) i;
INSERT INTO f VALUES ('2024-01-01', 'Infinity', '-Infinity', 4294967295, 'z', -32768);
CREATE TABLE f_heap AS SELECT * FROM f;
SELECT scan_lines($q$SELECT * FROM f WHERE x > 2990 AND time < '2024-01-03'$q$);
SELECT differs($$x > 2990$$, 'f');
SELECT differs($$x >= 'NaN'$$, 'f');
SELECT differs($$x < 15 AND x >= 3$$, 'f');
SELECT differs($$x <= 'Infinity'$$, 'f');
SELECT differs($$y > 999.5 OR y < 0$$, 'f');
SELECT differs($$y <= 0.5$$, 'f');
SELECT differs($$n < -20 AND time >= '2024-01-02'$$, 'f');
SELECT differs($$o > 5$$, 'f');
SELECT differs($$o >= 4294967295$$, 'f');
SELECT differs($$c > 'u'$$, 'f');
EXPLAIN (COSTS OFF) SELECT * FROM f WHERE o > 5 AND c > 'u';
DROP TABLE f, f_heap;

-- The last row of each series: DISTINCT ON (meta...) ... ORDER BY meta...,
-- time DESC reads each series' newest buckets only (a skip scan of the
-- series index), honours every condition, and sorts series as the index does.
CREATE TABLE lp (time timestamptz NOT NULL, host text, v float8, w int) USING tsbucket;
SELECT tsbucket.create_timeseries('lp', 'time', 'host');
INSERT INTO lp SELECT '2024-05-01'::timestamptz + i * interval '10 s', 'h' || (i % 7), i, i % 100
  FROM generate_series(0, 30000) i;
INSERT INTO lp VALUES ('2024-05-01 00:00:01', NULL, -1, 1), ('2024-05-02 00:00:01', NULL, -2, 2);
SELECT tsbucket.alter_timeseries('lp', granularity => 'minutes');
-- Trickle into the newest window, a late row into an old one, and deletes of newest rows.
INSERT INTO lp VALUES ('2024-05-04 12:00:00', 'h1', 1e6, 5);
INSERT INTO lp VALUES ('2024-05-04 12:00:01', 'h1', 1e6 + 1, 6);
INSERT INTO lp VALUES ('2024-05-01 00:00:03', 'h_late', 7, 7);
DELETE FROM lp WHERE host = 'h2' AND time > '2024-05-04 09:00';
CREATE TABLE lp_heap AS SELECT * FROM lp;
EXPLAIN (COSTS OFF) SELECT DISTINCT ON (host) * FROM lp ORDER BY host, time DESC;
SELECT scan_lines($q$SELECT DISTINCT ON (host) * FROM lp ORDER BY host, time DESC$q$);
SELECT DISTINCT ON (host) * FROM lp ORDER BY host, time DESC;
SELECT DISTINCT ON (host) * FROM lp_heap ORDER BY host, time DESC;
-- Conditions: the newest row that passes may lie in an older bucket.
CREATE FUNCTION lp_differs(cond text, tail text DEFAULT '') RETURNS text LANGUAGE plpgsql AS $$
DECLARE a text; b text; q text := 'SELECT DISTINCT ON (host) host, time, v, w FROM %I WHERE %s ORDER BY host, time DESC %s';
BEGIN
  EXECUTE format('SELECT string_agg(x::text, '';'') FROM (' || q || ') x', 'lp', cond, tail) INTO a;
  EXECUTE format('SELECT string_agg(x::text, '';'') FROM (' || q || ') x', 'lp_heap', cond, tail) INTO b;
  RETURN CASE WHEN a IS NOT DISTINCT FROM b THEN 'same: ' || coalesce(length(a), 0) ELSE 'DIFFERENT: ' || a || ' vs ' || b END;
END $$;
SELECT lp_differs('v < 20000');
SELECT lp_differs('w = 3');
SELECT lp_differs($$time < '2024-05-03'$$);
SELECT lp_differs($$host IN ('h1', 'h2', 'nope') AND time >= '2024-05-04'$$);
SELECT lp_differs('w > 1000');
SELECT lp_differs('true', 'LIMIT 3');
SELECT lp_differs($$host > 'h3' OR host IS NULL$$);
PREPARE lpq(int) AS SELECT DISTINCT ON (host) host, time, w FROM lp WHERE w = $1 ORDER BY host, time DESC;
EXECUTE lpq(42);
SELECT DISTINCT ON (host) host, time, w FROM lp_heap WHERE w = 42 ORDER BY host, time DESC;
-- Other shapes do not take the last-point skip scan (a series-order walk, or a sort).
EXPLAIN (COSTS OFF) SELECT DISTINCT ON (host) * FROM lp ORDER BY host, time;
EXPLAIN (COSTS OFF) SELECT DISTINCT ON (host) * FROM lp ORDER BY host DESC, time DESC;
EXPLAIN (COSTS OFF) SELECT DISTINCT ON (host COLLATE "C") * FROM lp ORDER BY host COLLATE "C", time DESC;
-- Two meta columns, NULLs among them.
CREATE TABLE r2 (time timestamptz NOT NULL, site text, unit int4, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('r2', 'time', meta_columns => ARRAY['site', 'unit']);
INSERT INTO r2 SELECT '2024-03-01'::timestamptz + i * interval '30 s', CASE WHEN i % 5 = 0 THEN NULL ELSE chr(97 + i % 4) END,
    CASE WHEN i % 7 = 0 THEN NULL ELSE i % 3 END, i
  FROM generate_series(0, 9999) i;
-- (Small: with sorts allowed the planner would rather sort it.)
SET enable_sort = off;
SET enable_incremental_sort = off;
EXPLAIN (COSTS OFF) SELECT DISTINCT ON (site, unit) * FROM r2 ORDER BY site, unit, time DESC;
SELECT DISTINCT ON (site, unit) * FROM r2 ORDER BY site, unit, time DESC;
SELECT DISTINCT ON (site, unit) * FROM (SELECT * FROM r2 OFFSET 0) x ORDER BY site, unit, time DESC;
-- A scroll cursor over the skip scan.
BEGIN;
DECLARE lc SCROLL CURSOR FOR SELECT DISTINCT ON (site, unit) site, unit, v FROM r2 ORDER BY site, unit, time DESC;
FETCH 2 FROM lc;
FETCH BACKWARD 1 FROM lc;
FETCH LAST FROM lc;
COMMIT;
RESET enable_sort;
RESET enable_incremental_sort;
EXPLAIN (COSTS OFF) SELECT DISTINCT ON (site) * FROM r2 ORDER BY site, time DESC;
-- A finished index walk stays finished: FETCH past the end, then back.
BEGIN;
DECLARE ec SCROLL CURSOR FOR SELECT host, v FROM lp WHERE host IN ('h1', 'h_late') AND time > '2024-05-04 11:19:00';
FETCH ALL FROM ec;
FETCH NEXT FROM ec;
FETCH NEXT FROM ec;
FETCH PRIOR FROM ec;
COMMIT;

-- Rows in time order, merged across buckets: ORDER BY time [DESC] LIMIT n
-- and GROUP BY a time bucket ORDER BY it LIMIT n read the newest (or oldest)
-- windows only. Same rows, same order as the heap copy (times are distinct).
CREATE FUNCTION order_differs(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a text; b text;
BEGIN
  EXECUTE format('SELECT string_agg(x::text, '';'') FROM (' || q || ') x', 'lp') INTO a;
  EXECUTE format('SELECT string_agg(x::text, '';'') FROM (' || q || ') x', 'lp_heap') INTO b;
  RETURN CASE WHEN a IS NOT DISTINCT FROM b THEN 'same: ' || coalesce(length(a), 0) ELSE 'DIFFERENT' END;
END $$;
SELECT scan_lines($q$SELECT * FROM lp ORDER BY time DESC LIMIT 5$q$);
SELECT * FROM lp ORDER BY time DESC LIMIT 5;
SELECT * FROM lp ORDER BY time LIMIT 5;
SELECT order_differs('SELECT time, host, v FROM %I ORDER BY time DESC');
SELECT order_differs('SELECT time, host, v FROM %I ORDER BY time');
SELECT order_differs($$SELECT time, v FROM %I WHERE host IN ('h1', 'h_late', 'h3') AND w < 50 ORDER BY time DESC LIMIT 2000$$);
SELECT order_differs($$SELECT time, v FROM %I WHERE time >= '2024-05-01 23:00' AND time < '2024-05-02 01:00' ORDER BY time$$);
EXPLAIN (COSTS OFF) SELECT date_trunc('minute', time) AS m, max(v) FROM lp WHERE time < '2024-05-03' GROUP BY m ORDER BY m DESC LIMIT 5;
SELECT date_trunc('minute', time) AS m, max(v) FROM lp WHERE time < '2024-05-03' GROUP BY m ORDER BY m DESC LIMIT 5;
SELECT order_differs($$SELECT date_trunc('minute', time) AS m, max(v), count(*) FROM %I WHERE time < '2024-05-03' GROUP BY m ORDER BY m DESC LIMIT 5$$);
SELECT order_differs($$SELECT date_bin('15 minutes', time, '2024-01-01') AS m, min(v) FROM %I GROUP BY m ORDER BY m LIMIT 7$$);
SELECT order_differs($$SELECT date_trunc('hour', time) AS m, count(*) FROM %I GROUP BY m ORDER BY m DESC$$);
-- A scroll cursor gets a Materialize above the merge.
BEGIN;
DECLARE oc SCROLL CURSOR FOR SELECT time, v FROM lp ORDER BY time DESC;
FETCH 2 FROM oc;
FETCH PRIOR FROM oc;
COMMIT;
-- A table inheriting from it: DISTINCT ON over the parent reads the child too
-- (no last-point scan, which knows only the parent's store).
CREATE TABLE lp_child (extra int) INHERITS (lp);
INSERT INTO lp_child VALUES ('2025-01-01', 'h1', 42, 1, 0);
SELECT host, time, v FROM (SELECT DISTINCT ON (host) * FROM lp ORDER BY host, time DESC) x WHERE host = 'h1';
DROP TABLE lp_child;
DROP TABLE lp, lp_heap, r2;

-- Joins on the meta column: a nested loop with a scan parameterized by the
-- outer row reads only that series' buckets, through the series index.
CREATE TABLE j (time timestamptz NOT NULL, host text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('j', 'time', 'host');
INSERT INTO j SELECT '2024-06-01'::timestamptz + i * interval '1 min', 'h' || (i % 50), i FROM generate_series(0, 49999) i;
CREATE TABLE j_heap AS SELECT * FROM j;
CREATE TABLE hosts (name text, grp text);
INSERT INTO hosts SELECT 'h' || i, CASE WHEN i < 3 THEN 'a' ELSE 'b' END FROM generate_series(0, 59) i;
INSERT INTO hosts VALUES (NULL, 'a'), ('nope', 'a');
ANALYZE j;
ANALYZE hosts;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
-- (The plan's node lines only: versions deparse the join clause's sides in different orders.)
CREATE FUNCTION plan_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    IF line ~ 'Loop|Scan|Bucket Access|Aggregate' THEN
      RETURN NEXT line;
    END IF;
  END LOOP;
END $$;
SELECT plan_lines($q$SELECT h.name, count(*) FROM hosts h JOIN j ON j.host = h.name WHERE h.grp = 'a' AND j.time < '2024-06-10' GROUP BY h.name$q$);
SELECT h.name, count(*), sum(v) FROM hosts h JOIN j ON j.host = h.name WHERE h.grp = 'a' AND j.time < '2024-06-10' GROUP BY h.name ORDER BY 1;
SELECT h.name, count(*), sum(v) FROM hosts h JOIN j_heap j ON j.host = h.name WHERE h.grp = 'a' AND j.time < '2024-06-10' GROUP BY h.name ORDER BY 1;
SELECT h.name, count(j.v) FROM hosts h LEFT JOIN j ON j.host = h.name AND j.v % 1000 = 101 WHERE h.grp = 'a' GROUP BY h.name ORDER BY 1;
SELECT h.name, count(j.v) FROM hosts h LEFT JOIN j_heap j ON j.host = h.name AND j.v % 1000 = 101 WHERE h.grp = 'a' GROUP BY h.name ORDER BY 1;
RESET enable_hashjoin;
RESET enable_mergejoin;
DROP TABLE j, j_heap, hosts;

-- Rows in (meta..., time) order, both directions: one walk of the series
-- index merging each series' buckets in time order, for ORDER BY and merge
-- joins. Late rows and a grown span make a series' buckets overlap in time.
CREATE TABLE so (time timestamptz NOT NULL, site text, unit int4, v int8) USING tsbucket;
SELECT tsbucket.create_timeseries('so', 'time', meta_columns => ARRAY['site', 'unit']);
INSERT INTO so SELECT '2024-07-01'::timestamptz + i * interval '41 s', chr(97 + i % 3), CASE WHEN i % 7 = 0 THEN NULL ELSE i % 2 END, i
  FROM generate_series(0, 2999) i;
SELECT tsbucket.alter_timeseries('so', granularity => 'minutes');
INSERT INTO so SELECT '2024-07-01 00:30'::timestamptz + i * interval '13 s', 'b', 1, 100000 + i FROM generate_series(0, 299) i;
INSERT INTO so VALUES ('2024-07-01 00:31', NULL, 1, -1), ('2024-07-01 00:29', NULL, NULL, -2);
CREATE TABLE so_heap AS SELECT * FROM so;
CREATE FUNCTION access_line(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
    IF line ~ 'Bucket Access|Join|Sort' THEN
      RETURN NEXT regexp_replace(line, '^\s*(->\s*)?', '');
    END IF;
  END LOOP;
END $$;
SELECT access_line($$SELECT * FROM so ORDER BY site, unit, time LIMIT 10$$);
SELECT access_line($$SELECT * FROM so ORDER BY site DESC, unit DESC, time DESC LIMIT 10$$);
SELECT access_line($$SELECT * FROM so WHERE unit = 1 ORDER BY site, time LIMIT 10$$);
-- Same rows in the same order as the heap copy (ties on time broken by v there).
SELECT (SELECT array_agg(x::text) FROM (SELECT site, unit, time FROM so ORDER BY site, unit, time) x)
     = (SELECT array_agg(x::text) FROM (SELECT site, unit, time FROM so_heap ORDER BY site, unit, time) x) AS ascending_same;
SELECT (SELECT array_agg(x::text) FROM (SELECT site, unit, time FROM so ORDER BY site DESC, unit DESC, time DESC) x)
     = (SELECT array_agg(x::text) FROM (SELECT site, unit, time FROM so_heap ORDER BY site DESC, unit DESC, time DESC) x) AS descending_same;
SELECT (SELECT array_agg(x::text) FROM (SELECT site, time FROM so WHERE unit = 1 AND v % 5 = 0 ORDER BY site, time) x)
     = (SELECT array_agg(x::text) FROM (SELECT site, time FROM so_heap WHERE unit = 1 AND v % 5 = 0 ORDER BY site, time) x) AS filtered_same;
SELECT site, unit, time, v FROM so ORDER BY site, unit, time LIMIT 4;
SELECT site, unit, time, v FROM so ORDER BY site DESC, unit DESC, time DESC LIMIT 4;
-- A merge join on the meta column reads the table in series order, unsorted.
CREATE TABLE sites AS SELECT chr(96 + i) AS site, i AS n FROM generate_series(1, 4) i;
SET enable_hashjoin = off;
SET enable_nestloop = off;
SELECT access_line($$SELECT s.n, so.time FROM so JOIN sites s USING (site) WHERE so.time < '2024-07-01 01:00'$$);
SELECT count(*), sum(n), sum(v) FROM so JOIN sites USING (site) WHERE so.time < '2024-07-01 03:00';
SELECT count(*), sum(n), sum(v) FROM so_heap JOIN sites USING (site) WHERE so_heap.time < '2024-07-01 03:00';
RESET enable_hashjoin;
RESET enable_nestloop;
DROP TABLE so, so_heap, sites;

-- Time order with rows of equal time in meta order (ORDER BY time, meta...):
-- the merge breaks ties by each series' place in meta order, NULLs last
-- ascending, first descending; no sort above the scan.
CREATE TABLE tt (time timestamptz NOT NULL, site text, unit int4, v int8) USING tsbucket;
SELECT tsbucket.create_timeseries('tt', 'time', meta_columns => ARRAY['site', 'unit']);
INSERT INTO tt SELECT '2024-08-01'::timestamptz + (i / 12) * interval '1 min',
       CASE WHEN i % 12 = 5 THEN NULL ELSE chr(100 - i % 4) END, CASE WHEN i % 12 = 7 THEN NULL ELSE i % 3 END, i
  FROM generate_series(0, 5999) i ORDER BY random();
CREATE TABLE tt_heap AS SELECT * FROM tt;
SELECT access_line($$SELECT * FROM tt ORDER BY time, site, unit LIMIT 10$$);
SELECT access_line($$SELECT * FROM tt ORDER BY time DESC, site DESC, unit DESC LIMIT 10$$);
SELECT access_line($$SELECT * FROM tt ORDER BY time DESC, site LIMIT 10$$);
SELECT (SELECT array_agg(x::text) FROM (SELECT time, site, unit FROM tt ORDER BY time, site, unit) x)
     = (SELECT array_agg(x::text) FROM (SELECT time, site, unit FROM tt_heap ORDER BY time, site, unit) x) AS ascending_same;
SELECT (SELECT array_agg(x::text) FROM (SELECT time, site, unit FROM tt ORDER BY time DESC, site DESC, unit DESC) x)
     = (SELECT array_agg(x::text) FROM (SELECT time, site, unit FROM tt_heap ORDER BY time DESC, site DESC, unit DESC) x) AS descending_same;
SELECT (SELECT array_agg(x::text) FROM (SELECT time, site FROM tt WHERE v % 3 = 0 ORDER BY time DESC, site) x)
     = (SELECT array_agg(x::text) FROM (SELECT time, site FROM tt_heap WHERE v % 3 = 0 ORDER BY time DESC, site) x) AS mixed_same;
SELECT time, site, unit FROM tt ORDER BY time, site, unit LIMIT 13;
-- Ties are broken for equal times only, not equal time buckets: grouping by
-- (minute, site) in that order still sorts.
SET enable_hashagg = off;
SELECT (SELECT array_agg(x::text) FROM (SELECT date_trunc('minute', time), site, count(*), sum(v) FROM tt GROUP BY 1, 2 ORDER BY 1, 2) x)
     = (SELECT array_agg(x::text) FROM (SELECT date_trunc('minute', time), site, count(*), sum(v) FROM tt_heap GROUP BY 1, 2 ORDER BY 1, 2) x) AS bucket_then_meta_same;
RESET enable_hashagg;
DROP TABLE tt, tt_heap;
