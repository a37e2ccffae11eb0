-- jsonb columns are stored shredded by path (bucket format version 3 on): each
-- path's values compressed with the codec of their kind, and read back as the
-- same jsonb, numeric scales included, whatever the documents hold: paths
-- that come and go or change type, SQL NULL against JSON null, scalars, empty
-- containers, deep nesting, more than 32 keys or elements (where jsonb keeps
-- offsets), numbers beyond an int8 or far from 1, unicode, big strings.
SET client_min_messages = warning;
SET timezone = 'UTC';
CREATE EXTENSION IF NOT EXISTS tsbucket;
CREATE TABLE docs_h (time timestamptz NOT NULL, dev text, doc jsonb);
CREATE TABLE docs_t (time timestamptz NOT NULL, dev text, doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('docs_t', 'time', 'dev');
INSERT INTO docs_h SELECT '2024-01-01'::timestamptz + i * interval '10 s', 'd' || (i % 3),
  CASE
    WHEN i % 97 = 0 THEN NULL
    WHEN i % 89 = 0 THEN 'null'::jsonb
    WHEN i % 83 = 0 THEN '{}'::jsonb
    WHEN i % 79 = 0 THEN '[]'::jsonb
    WHEN i % 73 = 0 THEN to_jsonb(i * 1.50)
    WHEN i % 71 = 0 THEN '"a scalar string"'
    ELSE jsonb_build_object('temp', round((20 + sin(i) * 5)::numeric, 1 + i % 3), 'count', i,
                            'status', CASE WHEN i % 10 = 0 THEN 'warn' ELSE 'ok' END, 'on', i % 7 <> 0)
      || CASE WHEN i % 10 = 0 THEN jsonb_build_object('gps', jsonb_build_object('lat', 48.1 + i / 1e5, 'lon', 11.50)) ELSE '{}'::jsonb END
      || CASE WHEN i % 31 = 0 THEN '{"temp": "n/a"}'::jsonb ELSE '{}'::jsonb END
      || CASE WHEN i % 41 = 0 THEN jsonb_build_object('big', 123456789012345678901234567890.123456789 * i, 'tiny', 1e-300 * i,
                                                       'huge', 1e300, 'neg', -0.000100, 'int8max', 9223372036854775807,
                                                       'past', 9223372036854775808, 'zero', 0.000) ELSE '{}'::jsonb END
      || CASE WHEN i % 43 = 0 THEN jsonb_build_object('text', E'ünïcødé ☃ "quoted" \\ back\nslash', 'long', repeat('xyz', 1500), '', 'empty key')
              ELSE '{}'::jsonb END
      || CASE WHEN i % 47 = 0 THEN jsonb_build_object('deep', '[[[[[[[[{"a": [[[1.0]]]}]]]]]]]]'::jsonb,
                                                       'mixed', jsonb_build_array(1, 'a', NULL, true, '{"k": [2.50, []]}'::jsonb, '{}'::jsonb),
                                                       'many', (SELECT jsonb_agg(g * 0.5) FROM generate_series(1, 40) g),
                                                       'wide', (SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 40) g)) ELSE '{}'::jsonb END
  END
  FROM generate_series(0, 1999) i;
INSERT INTO docs_t SELECT * FROM docs_h;
-- Rows written one statement at a time wait in the tail, then drain into buckets.
INSERT INTO docs_h VALUES ('2024-01-02', 'd0', '{"temp": 1.50, "x": [1, {"y": null}]}');
INSERT INTO docs_t VALUES ('2024-01-02', 'd0', '{"temp": 1.50, "x": [1, {"y": null}]}');
INSERT INTO docs_h VALUES ('2024-01-02 00:00:10', 'd0', NULL);
INSERT INTO docs_t VALUES ('2024-01-02 00:00:10', 'd0', NULL);
CREATE FUNCTION pg_temp.differing() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM docs_h h FULL JOIN docs_t t USING (time)
   WHERE h.doc::text IS DISTINCT FROM t.doc::text OR jsonb_send(h.doc) IS DISTINCT FROM jsonb_send(t.doc)
      OR h.dev IS DISTINCT FROM t.dev OR h.time IS NULL OR t.time IS NULL $$;
SELECT pg_temp.differing() AS rows_differing, (SELECT tail_rows FROM tsbucket.stats('docs_t')) AS tail_rows;
SELECT count(*) > 0 AS compacted FROM tsbucket.compact('docs_t');
SELECT pg_temp.differing() AS rows_differing, (SELECT tail_rows FROM tsbucket.stats('docs_t')) AS tail_rows;
-- Every bucket is written in format version 4 (documents came with 3).
CREATE FUNCTION pg_temp.versions() RETURNS SETOF int LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT DISTINCT get_byte(payload, 0) FROM %s',
                              (SELECT store_relid::regclass FROM tsbucket.catalog WHERE relid = 'docs_t'::regclass));
END $$;
SELECT * FROM pg_temp.versions();
-- Readings of one shape with an optional path (gps), kept as jsonb, take a
-- fraction of the room of the same documents kept as text (bytes, lz4).
CREATE TABLE rd_j (time timestamptz NOT NULL, dev text, doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('rd_j', 'time', 'dev');
CREATE TABLE rd_x (time timestamptz NOT NULL, dev text, doc text) USING tsbucket;
SELECT tsbucket.create_timeseries('rd_x', 'time', 'dev');
INSERT INTO rd_j SELECT '2024-01-01'::timestamptz + i * interval '10 s', 'd' || (i % 3),
   jsonb_build_object('temp', round((20 + sin(i / 50.0) * 5)::numeric, 1 + i % 2), 'count', i,
                      'status', CASE WHEN i % 100 < 10 THEN 'warn' ELSE 'ok' END, 'on', i % 70 <> 0)
   || CASE WHEN i % 10 = 0 THEN jsonb_build_object('gps', jsonb_build_object('lat', 48.1 + i / 1e5, 'lon', 11.50)) ELSE '{}'::jsonb END
  FROM generate_series(0, 9999) i;
INSERT INTO rd_x SELECT time, dev, doc::text FROM rd_j;
SELECT (SELECT sum(compressed_bytes) FROM tsbucket.buckets('rd_j')) * 3
     < (SELECT sum(compressed_bytes) FROM tsbucket.buckets('rd_x')) AS shredded_is_smaller;
SELECT count(*) FROM (TABLE rd_j EXCEPT ALL SELECT time, dev, doc::jsonb FROM rd_x) d;
-- Queries on the documents answer as on the heap.
SELECT count(*) FROM ((SELECT dev, doc->>'status' s, avg((doc->>'count')::int) a, max(doc->>'temp') m, count(doc->'gps') g
                         FROM docs_h WHERE jsonb_typeof(doc) = 'object' GROUP BY 1, 2
                       EXCEPT ALL
                       SELECT dev, doc->>'status' s, avg((doc->>'count')::int) a, max(doc->>'temp') m, count(doc->'gps') g
                         FROM docs_t WHERE jsonb_typeof(doc) = 'object' GROUP BY 1, 2)) d;
SELECT count(*) AS warn_rows, count(*) FILTER (WHERE doc ? 'gps') AS with_gps, sum((doc #>> '{gps,lat}')::numeric) AS lat_sum
  FROM docs_t WHERE doc @> '{"status": "warn"}';
SELECT count(*) AS warn_rows, count(*) FILTER (WHERE doc ? 'gps') AS with_gps, sum((doc #>> '{gps,lat}')::numeric) AS lat_sum
  FROM docs_h WHERE doc @> '{"status": "warn"}';
SELECT doc FROM docs_t WHERE doc ? 'big' ORDER BY time LIMIT 2;
SELECT doc->'deep', doc->'mixed', doc->'wide'->'k33' FROM docs_t WHERE doc ? 'deep' ORDER BY time LIMIT 1;
-- A query that reads documents only through key accessors decodes only
-- those keys' sub-columns (EXPLAIN's Decoded Columns names them); answers
-- are the heap's.
EXPLAIN (COSTS OFF) SELECT doc->>'status', count(*), max((doc->>'count')::int) FROM docs_t GROUP BY 1;
EXPLAIN (COSTS OFF) SELECT doc #>> '{gps,lat}', doc['temp'] FROM docs_t WHERE doc ? 'big' OR doc @> '{"on": false}';
EXPLAIN (COSTS OFF) SELECT doc->>'status' FROM docs_t WHERE doc IS NOT NULL AND doc->2 IS NULL;
-- The document itself, a whole row, a key that is not a constant, or a use
-- in a sub-query read documents whole.
EXPLAIN (COSTS OFF) SELECT doc->>'status', doc FROM docs_t;
EXPLAIN (COSTS OFF) SELECT doc->>dev FROM docs_t;
EXPLAIN (COSTS OFF) SELECT t FROM docs_t t WHERE t.doc->>'status' = 'warn';
EXPLAIN (COSTS OFF) SELECT doc->>'status' FROM docs_t t WHERE EXISTS (SELECT 1 FROM docs_h h WHERE h.doc = t.doc);
SELECT count(*) FROM ((SELECT doc->>'status', count(*), max((doc->>'count')::int), sum((doc #>> '{gps,lat}')::numeric),
                              count(*) FILTER (WHERE doc ? 'big' OR doc @> '{"on": false}'), count(doc['temp']), count(doc->2)
                         FROM docs_t GROUP BY 1
                       EXCEPT ALL
                       SELECT doc->>'status', count(*), max((doc->>'count')::int), sum((doc #>> '{gps,lat}')::numeric),
                              count(*) FILTER (WHERE doc ? 'big' OR doc @> '{"on": false}'), count(doc['temp']), count(doc->2)
                         FROM docs_h GROUP BY 1)) d;
SELECT dev, doc->'gps' FROM docs_t WHERE doc ? 'gps' ORDER BY time DESC LIMIT 3;
SELECT dev, doc->'gps' FROM docs_h WHERE doc ? 'gps' ORDER BY time DESC LIMIT 3;
SELECT DISTINCT ON (dev) dev, doc->>'temp' FROM docs_t ORDER BY dev, time DESC;
SELECT DISTINCT ON (dev) dev, doc->>'temp' FROM docs_h ORDER BY dev, time DESC;
-- Aggregates of a field cast to a number ((doc->>'k')::float8, ::int,
-- ::bigint) run in the scan on the field's sub-column alone (Decoded
-- Columns: "numbers"); rows whose field holds anything else (a string, a
-- boolean, a decimal an integer cast refuses) are cast on the row, as the
-- heap casts them: their value, or the heap's error, and only when the row
-- passes the query's conditions.
EXPLAIN (COSTS OFF) SELECT dev, count((doc->>'count')::int), sum((doc->>'count')::int), max((doc->>'count')::bigint), avg((doc->>'temp')::float8)
  FROM docs_t WHERE doc->>'temp' <> 'n/a' GROUP BY dev;
EXPLAIN (COSTS OFF) SELECT dev, sum((doc->>'count')::int), min((doc->>'count')::int) FROM docs_t WHERE time < '2024-01-01 02:00' GROUP BY dev;
SELECT count(*) FROM ((SELECT dev, date_trunc('hour', time), count((doc->>'count')::int), sum((doc->>'count')::int), avg((doc->>'count')::int),
                              min((doc->>'count')::bigint), max((doc->>'temp')::float8), round(sum((doc->>'temp')::float8)::numeric, 6),
                              round(stddev((doc->>'temp')::float8)::numeric, 6), count((doc->>'missing')::float8)
                         FROM docs_t WHERE doc->>'temp' <> 'n/a' GROUP BY 1, 2
                       EXCEPT ALL
                       SELECT dev, date_trunc('hour', time), count((doc->>'count')::int), sum((doc->>'count')::int), avg((doc->>'count')::int),
                              min((doc->>'count')::bigint), max((doc->>'temp')::float8), round(sum((doc->>'temp')::float8)::numeric, 6),
                              round(stddev((doc->>'temp')::float8)::numeric, 6), count((doc->>'missing')::float8)
                         FROM docs_h WHERE doc->>'temp' <> 'n/a' GROUP BY 1, 2)) d;
SELECT sum((doc->>'temp')::float8) FROM docs_t;
SELECT sum((doc->>'temp')::float8) FROM docs_h;
-- first and last of a field cast too: the time column picks the row, the
-- sub-column gives its value.
EXPLAIN (COSTS OFF) SELECT dev, tsbucket.first((doc->>'count')::int, time), tsbucket.last((doc->>'temp')::float8, time)
  FROM docs_t WHERE doc->>'temp' <> 'n/a' GROUP BY dev;
SELECT count(*) FROM ((SELECT dev, date_trunc('hour', time), tsbucket.first((doc->>'count')::int, time), tsbucket.last((doc->>'count')::bigint, time),
                              tsbucket.first((doc->>'temp')::float8, time), tsbucket.last((doc->>'temp')::float8, time)
                         FROM docs_t WHERE doc->>'temp' <> 'n/a' GROUP BY 1, 2
                       EXCEPT ALL
                       SELECT dev, date_trunc('hour', time), tsbucket.first((doc->>'count')::int, time), tsbucket.last((doc->>'count')::bigint, time),
                              tsbucket.first((doc->>'temp')::float8, time), tsbucket.last((doc->>'temp')::float8, time)
                         FROM docs_h WHERE doc->>'temp' <> 'n/a' GROUP BY 1, 2)) d;
CREATE TABLE fc_t (time timestamptz NOT NULL, dev text, doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('fc_t', 'time', 'dev');
INSERT INTO fc_t SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'd' || (i % 2),
  (CASE i WHEN 7 THEN '{"v": " 12.5e1 "}' WHEN 8 THEN '{"v": null}' WHEN 9 THEN '{"v": true}' WHEN 10 THEN '[1]'
          WHEN 11 THEN '{"v": 2.50}' WHEN 12 THEN '{"v": 3000000000}' ELSE '{"v": ' || i || '}' END)::jsonb
  FROM generate_series(0, 99) i;
SELECT count(*) > 0 AS compacted FROM tsbucket.compact('fc_t');
CREATE TEMP TABLE fc_h AS SELECT * FROM fc_t;
SELECT dev, sum((doc->>'v')::float8), count((doc->>'v')::float8), max((doc->>'v')::float8) FROM fc_t WHERE time <> '2024-01-01 00:00:09' GROUP BY dev ORDER BY dev;
SELECT dev, sum((doc->>'v')::float8), count((doc->>'v')::float8), max((doc->>'v')::float8) FROM fc_h WHERE time <> '2024-01-01 00:00:09' GROUP BY dev ORDER BY dev;
SELECT sum((doc->>'v')::float8) FROM fc_t;
SELECT sum((doc->>'v')::float8) FROM fc_h;
SELECT sum((doc->>'v')::int) FROM fc_t WHERE time BETWEEN '2024-01-01 00:00:07' AND '2024-01-01 00:00:07';
SELECT sum((doc->>'v')::int) FROM fc_h WHERE time BETWEEN '2024-01-01 00:00:07' AND '2024-01-01 00:00:07';
SELECT sum((doc->>'v')::int) FROM fc_t WHERE time = '2024-01-01 00:00:11';
SELECT sum((doc->>'v')::int) FROM fc_h WHERE time = '2024-01-01 00:00:11';
SELECT max((doc->>'v')::int) FROM fc_t WHERE time > '2024-01-01 00:00:11';
SELECT max((doc->>'v')::int) FROM fc_h WHERE time > '2024-01-01 00:00:11';
SELECT dev, max((doc->>'v')::bigint), sum((doc->>'v')::int) FROM fc_t WHERE time > '2024-01-01 00:00:12' GROUP BY dev ORDER BY dev;
SELECT dev, max((doc->>'v')::bigint), sum((doc->>'v')::int) FROM fc_h WHERE time > '2024-01-01 00:00:12' GROUP BY dev ORDER BY dev;
-- first/last cast every row they read, as the heap does: a string the cast
-- reads, JSON null, and the heap's error for 2.50 read as an integer.
SELECT dev, tsbucket.first((doc->>'v')::float8, time), tsbucket.last((doc->>'v')::float8, time) FROM fc_t WHERE time BETWEEN '2024-01-01 00:00:07' AND '2024-01-01 00:00:08' GROUP BY dev ORDER BY dev;
SELECT dev, tsbucket.first((doc->>'v')::float8, time), tsbucket.last((doc->>'v')::float8, time) FROM fc_h WHERE time BETWEEN '2024-01-01 00:00:07' AND '2024-01-01 00:00:08' GROUP BY dev ORDER BY dev;
SELECT tsbucket.first((doc->>'v')::int, time), tsbucket.last((doc->>'v')::bigint, time) FROM fc_t WHERE time > '2024-01-01 00:00:12';
SELECT tsbucket.first((doc->>'v')::int, time), tsbucket.last((doc->>'v')::bigint, time) FROM fc_h WHERE time > '2024-01-01 00:00:12';
SELECT tsbucket.last((doc->>'v')::int, time) FROM fc_t WHERE time >= '2024-01-01 00:00:11' AND dev = 'd1';
SELECT tsbucket.last((doc->>'v')::int, time) FROM fc_h WHERE time >= '2024-01-01 00:00:11' AND dev = 'd1';
-- Rows still in the tail, and a jsonb column added after the buckets were
-- written (its default in every older bucket), are cast on the row.
INSERT INTO fc_t VALUES ('2024-01-01 00:02:00', 'd0', '{"v": "7.5"}'), ('2024-01-01 00:02:01', 'd1', '{"v": 1.25}');
ALTER TABLE fc_t ADD COLUMN extra jsonb DEFAULT '{"w": 2}';
INSERT INTO fc_h VALUES ('2024-01-01 00:02:00', 'd0', '{"v": "7.5"}'), ('2024-01-01 00:02:01', 'd1', '{"v": 1.25}');
ALTER TABLE fc_h ADD COLUMN extra jsonb DEFAULT '{"w": 2}';
SELECT dev, sum((doc->>'v')::float8), sum((extra->>'w')::int), count((extra->>'w')::bigint) FROM fc_t WHERE time > '2024-01-01 00:00:12' GROUP BY dev ORDER BY dev;
SELECT dev, sum((doc->>'v')::float8), sum((extra->>'w')::int), count((extra->>'w')::bigint) FROM fc_h WHERE time > '2024-01-01 00:00:12' GROUP BY dev ORDER BY dev;
DROP TABLE fc_t;
-- An integer subscript on an object looks up the key of its digits.
CREATE TABLE sub_t (time timestamptz NOT NULL, doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('sub_t', 'time');
INSERT INTO sub_t VALUES ('2024-01-01', '{"0": 1, "x": 2}'), ('2024-01-01 00:00:01', '[10, 20]'), ('2024-01-01 00:00:02', '{"1": "one"}');
SELECT count(*) > 0 AS compacted FROM tsbucket.compact('sub_t');
EXPLAIN (COSTS OFF) SELECT doc[0], doc[1] FROM sub_t;
SELECT doc[0], doc[1], doc['x'], doc->0, doc->>'x' FROM sub_t ORDER BY time;
DROP TABLE sub_t;
-- A jsonb meta column (MongoDB's metaField as an object) is a series key;
-- conditions on meta columns alone, subfields included, run once per bucket
-- on its meta values, and the buckets they fail are skipped unread.
CREATE TABLE mt (time timestamptz NOT NULL, meta jsonb, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('mt', 'time', 'meta');
INSERT INTO mt SELECT '2024-01-01'::timestamptz + i * interval '1 min', jsonb_build_object('site', 's' || (i % 4), 'rack', i % 2), i
  FROM generate_series(0, 999) i;
SELECT count(*) > 0 AS compacted FROM tsbucket.compact('mt');
CREATE TEMP TABLE mt_h AS SELECT * FROM mt;
-- (EXPLAIN ANALYZE differs across versions: the scan's own lines.)
CREATE FUNCTION pg_temp.scan_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF line ~ 'Custom Scan|Decoded|Bucket|Vectorized Filter' THEN
      RETURN NEXT regexp_replace(line, ' \(actual.*\)', '');
    END IF;
  END LOOP;
END $$;
SELECT pg_temp.scan_lines($q$SELECT count(*), sum(v) FROM mt WHERE meta->>'site' = 's1'$q$);
SELECT count(*), sum(v) FROM mt WHERE meta->>'site' = 's1';
SELECT count(*), sum(v) FROM mt_h WHERE meta->>'site' = 's1';
SELECT meta->>'site', count(*) FROM mt WHERE (meta->>'rack')::int = 1 AND time < '2024-01-01 10:00' OR meta @> '{"site": "s2"}' GROUP BY 1 ORDER BY 1;
SELECT meta->>'site', count(*) FROM mt_h WHERE (meta->>'rack')::int = 1 AND time < '2024-01-01 10:00' OR meta @> '{"site": "s2"}' GROUP BY 1 ORDER BY 1;
-- A meta column's function, a volatile one (never per bucket), a NULL meta value.
INSERT INTO mt VALUES ('2024-01-01', NULL, -1);
SELECT count(*) > 0 AS compacted FROM tsbucket.compact('mt');
SELECT count(*) FROM mt WHERE meta IS NULL OR jsonb_typeof(meta) = 'null';
SELECT count(*) FROM mt WHERE coalesce(meta->>'site', 'none') = 'none';
SELECT count(*) >= 0 AS ran FROM mt WHERE meta->>'site' = 's' || (random() * 0)::int::text;
DROP TABLE mt;
-- A bucket keeps the statistics of each top-level field whose values all
-- are decimals (or missing), as of a float8 column: whole buckets answer
-- count, sum, avg, min and max of (doc->>'k')::float8 from their headers.
-- A field holding anything else in a bucket has none there: that bucket is
-- read, and the cast fails as on heap.
CREATE TABLE fs_t (time timestamptz NOT NULL, dev text, doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('fs_t', 'time', 'dev');
INSERT INTO fs_t SELECT '2024-01-01'::timestamptz + i * interval '10 s', 'd' || (i % 3),
  CASE WHEN i % 7 = 0 THEN jsonb_build_object('w', i * 0.25) ELSE jsonb_build_object('v', i % 100, 'w', i * 0.25) END
  || CASE WHEN i = 1000 THEN '{"w": "n/a"}'::jsonb ELSE '{}'::jsonb END
  FROM generate_series(0, 2999) i;
CREATE TEMP TABLE fs_h AS SELECT * FROM fs_t;
CREATE FUNCTION pg_temp.fs(t text, k text) RETURNS TABLE (dev text, n bigint, s float8, lo float8, hi float8, a float8) LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT dev, count((doc->>%L)::float8), sum((doc->>%L)::float8), min((doc->>%L)::float8),
                                      max((doc->>%L)::float8), avg((doc->>%L)::float8) FROM %s GROUP BY dev ORDER BY dev', k, k, k, k, k, t);
END $$;
SELECT pg_temp.scan_lines($q$SELECT dev, count((doc->>'v')::float8), sum((doc->>'v')::float8), avg((doc->>'v')::float8) FROM fs_t GROUP BY dev$q$);
SELECT * FROM pg_temp.fs('fs_t', 'v');
SELECT * FROM pg_temp.fs('fs_h', 'v');
SELECT * FROM pg_temp.fs('(SELECT * FROM fs_t WHERE time < ''2024-01-01 02:00'') x', 'w');
SELECT * FROM pg_temp.fs('(SELECT * FROM fs_h WHERE time < ''2024-01-01 02:00'') x', 'w');
SELECT sum((doc->>'w')::float8) FROM fs_t;
SELECT sum((doc->>'w')::float8) FROM fs_h;
SELECT count(*) AS problems FROM tsbucket.verify('fs_t');
-- Conditions on a field cast to a number: buckets whose statistics of the
-- field rule every row out are skipped unread; in the others the field's
-- sub-column filters rows before any document is built, and only the rows
-- that pass get theirs. The condition still runs on those rows: a field
-- holding no number is cast by Postgres, errors included.
SELECT pg_temp.scan_lines($q$SELECT * FROM fs_t WHERE (doc->>'v')::float8 > 97$q$);
SELECT count(*), sum(hashtext(doc::text)) FROM fs_t WHERE (doc->>'v')::float8 > 97;
SELECT count(*), sum(hashtext(doc::text)) FROM fs_h WHERE (doc->>'v')::float8 > 97;
SELECT count(*) FROM (SELECT time, doc FROM fs_t WHERE 97 < (doc->>'v')::float8 EXCEPT ALL SELECT time, doc FROM fs_h WHERE (doc->>'v')::float8 > 97) d;
SELECT count(*), sum((doc->>'w')::float8) FROM fs_t WHERE (doc->>'v')::float8 >= 98 OR NOT (doc->>'v')::float8 < 2;
SELECT count(*), sum((doc->>'w')::float8) FROM fs_h WHERE (doc->>'v')::float8 >= 98 OR NOT (doc->>'v')::float8 < 2;
SELECT dev, count(*), min(time) FROM fs_t WHERE (doc->>'v')::int = 5 AND (doc->>'w')::bigint > 100 GROUP BY dev ORDER BY dev;
SELECT dev, count(*), min(time) FROM fs_h WHERE (doc->>'v')::int = 5 AND (doc->>'w')::bigint > 100 GROUP BY dev ORDER BY dev;
SELECT count(*) FROM fs_t WHERE (doc->>'w')::float8 > 100;
SELECT count(*) FROM fs_h WHERE (doc->>'w')::float8 > 100;
SELECT count(*) FROM fs_t WHERE (doc->>'w')::float8 > 100 AND time > '2024-01-01 04:00';
SELECT count(*) FROM fs_h WHERE (doc->>'w')::float8 > 100 AND time > '2024-01-01 04:00';
SELECT count(*) FROM fs_t WHERE (doc->>'w')::float8 > 100 AND (doc->>'v')::float8 > 200;
SELECT count(*) FROM fs_t WHERE (doc->>'v')::float8 > 'NaN' OR (doc->>'v')::float8 IS NULL;
SELECT count(*) FROM fs_h WHERE (doc->>'v')::float8 > 'NaN' OR (doc->>'v')::float8 IS NULL;
-- In a bucket where every value of the field is a decimal the cast reads
-- (or missing), the vector filter decides the condition: it does not run on
-- the rows and their documents are not built (only the field's sub-column
-- is decoded: 9 bytes a row). The bucket holding "n/a" in w builds the
-- documents of its passing rows and casts them, failing as on heap.
CREATE FUNCTION pg_temp.decoded(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    IF line ~ 'Bytes Decompressed|Rows Removed by Filter|Rows Aggregated' THEN
      RETURN NEXT btrim(line);
    END IF;
  END LOOP;
END $$;
SELECT pg_temp.decoded($q$SELECT count(*) FROM fs_t WHERE (doc->>'v')::float8 > 90 AND time >= '2024-01-01 04:00'$q$);
SELECT count(*) FROM fs_t WHERE (doc->>'v')::float8 > 90 AND time >= '2024-01-01 04:00';
SELECT count(*) FROM fs_h WHERE (doc->>'v')::float8 > 90 AND time >= '2024-01-01 04:00';
SELECT dev, count(*), sum((doc->>'v')::float8) FROM fs_t WHERE (doc->>'v')::float8 < 3 OR (doc->>'v')::float8 IS NULL GROUP BY dev ORDER BY dev;
SELECT dev, count(*), sum((doc->>'v')::float8) FROM fs_h WHERE (doc->>'v')::float8 < 3 OR (doc->>'v')::float8 IS NULL GROUP BY dev ORDER BY dev;
-- A whole-row reference reads the documents even where the filter decides.
SELECT count(*) FROM fs_t t WHERE (doc->>'v')::float8 > 90 AND t::text LIKE '%"v"%';
SELECT count(*) FROM fs_h t WHERE (doc->>'v')::float8 > 90 AND t::text LIKE '%"v"%';
SELECT count(*) FROM fs_t WHERE (doc->>'w')::float8 > 249;
-- doc ? 'k' reads the key's sub-column: rows whose object lacks the key are
-- dropped before any document is built; JSON null counts as there; a
-- document that is no object (an array of strings, a string) or SQL NULL
-- goes on to the operator, which decides as on heap.
CREATE TABLE ex_t (time timestamptz NOT NULL, dev text, doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('ex_t', 'time', 'dev');
INSERT INTO ex_t SELECT '2024-01-01'::timestamptz + i * interval '10 s', 'd' || (i % 3),
  CASE WHEN i % 97 = 0 THEN '["g", "x"]'::jsonb WHEN i % 89 = 0 THEN '"g"'::jsonb WHEN i % 83 = 0 THEN NULL
       WHEN i % 5 = 0 THEN jsonb_build_object('g', NULL, 'v', i) WHEN i % 3 = 0 THEN jsonb_build_object('g', i % 10, 'v', i)
       ELSE jsonb_build_object('v', i) END
  FROM generate_series(0, 2999) i;
CREATE TEMP TABLE ex_h AS SELECT * FROM ex_t;
SELECT pg_temp.scan_lines($q$SELECT time, doc FROM ex_t WHERE doc ? 'g'$q$);
SELECT count(*), sum(hashtext(doc::text)) FROM ex_t WHERE doc ? 'g';
SELECT count(*), sum(hashtext(doc::text)) FROM ex_h WHERE doc ? 'g';
SELECT count(*), sum(hashtext(doc::text)) FROM ex_t WHERE NOT doc ? 'g';
SELECT count(*), sum(hashtext(doc::text)) FROM ex_h WHERE NOT doc ? 'g';
SELECT count(*), sum(hashtext(doc::text)) FROM ex_t WHERE doc ? 'g' OR (doc->>'v')::int < 100;
SELECT count(*), sum(hashtext(doc::text)) FROM ex_h WHERE doc ? 'g' OR (doc->>'v')::int < 100;
SELECT dev, count(*) FROM ex_t WHERE doc ? 'nope' OR doc ? 'x' GROUP BY dev ORDER BY dev;
SELECT dev, count(*) FROM ex_h WHERE doc ? 'nope' OR doc ? 'x' GROUP BY dev ORDER BY dev;
SELECT count(*) FROM (SELECT time, doc FROM ex_t WHERE doc ? 'g' EXCEPT ALL SELECT time, doc FROM ex_h WHERE doc ? 'g') d;
-- A document that is no object or SQL NULL leaves ? unknown, whatever the
-- other side of an OR: such a bucket is not decided by the vector filter.
SELECT count(*) FROM ex_t WHERE doc ? 'g' OR (doc->>'v')::int < 100;
SELECT count(*) FROM ex_h WHERE doc ? 'g' OR (doc->>'v')::int < 100;
DROP TABLE ex_t;
-- Output columns: (doc->>'k')::float8 (::int, ::bigint) in a plain scan's
-- select list is read from the field's sub-column into a column of the
-- scan's own tuple, no document built for it (EXPLAIN VERBOSE shows the
-- expression as the scan's output; Decoded Columns the field alone). Where
-- a value needs Postgres's cast ("n/a", a fraction for ::bigint), the
-- bucket's documents are built and the expression runs on the rows that
-- pass the conditions, with heap's value or error. Missing keys, JSON null,
-- SQL NULL and documents that are no object give NULL.
CREATE FUNCTION pg_temp.run(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  -- Materialized, so that the query's select list is its own plan's (not the aggregate's here).
  EXECUTE format('WITH s AS MATERIALIZED (%s) SELECT md5(coalesce(string_agg(s::text, E''\n'' ORDER BY s::text), '''')) || '' '' || count(*) FROM s', q) INTO r;
  RETURN r;
EXCEPTION WHEN others THEN RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
CREATE FUNCTION pg_temp.same(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a text := pg_temp.run(q); b text := pg_temp.run(replace(replace(q, 'fs_t', 'fs_h'), 'tx_t', 'tx_h'));
BEGIN
  RETURN CASE WHEN a = b THEN 'same: ' || regexp_replace(a, '^[0-9a-f]{32} ', 'rows: ') ELSE 'DIFFERENT: ' || a || ' | heap: ' || b END;
END $$;
EXPLAIN (VERBOSE, COSTS OFF) SELECT time, (doc->>'v')::float8, (doc->>'v')::float8 FROM fs_t WHERE dev = 'd1';
SELECT pg_temp.scan_lines($q$SELECT time, (doc->>'v')::int FROM fs_t WHERE dev = 'd1'$q$);
SELECT pg_temp.decoded($q$SELECT time, (doc->>'v')::float8 FROM fs_t WHERE dev = 'd1' AND time >= '2024-01-01 04:00'$q$);
SELECT pg_temp.decoded($q$SELECT time, (doc->>'v')::float8 FROM fs_t WHERE (doc->>'v')::float8 > 95 AND time >= '2024-01-01 04:00'$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'v')::float8 FROM fs_t WHERE dev = 'd1'$q$);
SELECT pg_temp.same($q$SELECT time, dev, (doc->>'v')::float8 FROM fs_t WHERE (doc->>'v')::float8 > 95$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'v')::int, (doc->>'v')::bigint, (doc->>'w')::float8 FROM fs_t WHERE time < '2024-01-01 02:00'$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'w')::float8 FROM fs_t$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'w')::bigint FROM fs_t WHERE time < '2024-01-01 01:00'$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'w')::float8 FROM fs_t WHERE time BETWEEN '2024-01-01 02:30' AND '2024-01-01 03:00' AND time <> '2024-01-01 02:46:40'$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'w')::float8 FROM fs_t WHERE time BETWEEN '2024-01-01 02:30' AND '2024-01-01 03:00' AND doc->>'w' <> 'n/a'$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'w')::float8, doc->>'v' FROM fs_t WHERE (doc->>'v')::float8 > 95 AND time > '2024-01-01 02:00'$q$);
SELECT pg_temp.same($q$SELECT t.time, (t.doc->>'v')::float8, t FROM fs_t t WHERE dev = 'd2'$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'v')::float8 + 1, (doc->>'nope')::int FROM fs_t WHERE (doc->>'v')::int % 7 = 3$q$);
SELECT pg_temp.same($q$SELECT dev, max(v) FROM (SELECT dev, (doc->>'v')::float8 AS v FROM fs_t WHERE time < '2024-01-01 02:00') x GROUP BY dev$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'v')::float8 FROM fs_t WHERE doc IS NULL OR jsonb_typeof(doc) <> 'object' OR NOT doc ? 'v'$q$);
SELECT time, (doc->>'v')::float8 FROM fs_t ORDER BY 2 DESC NULLS LAST, 1 LIMIT 3;
SELECT time, (doc->>'v')::float8 FROM fs_h ORDER BY 2 DESC NULLS LAST, 1 LIMIT 3;
-- The tail's rows (not yet in buckets) are cast on their documents.
INSERT INTO fs_t VALUES ('2024-02-01', 'd1', '{"v": 1.50}'), ('2024-02-01 00:01', 'd1', '{"v": "x"}'), ('2024-02-01 00:02', 'd1', '[1]');
INSERT INTO fs_h VALUES ('2024-02-01', 'd1', '{"v": 1.50}'), ('2024-02-01 00:01', 'd1', '{"v": "x"}'), ('2024-02-01 00:02', 'd1', '[1]');
SELECT pg_temp.same($q$SELECT time, (doc->>'v')::float8 FROM fs_t WHERE time >= '2024-02-01' AND doc->>'v' <> 'x'$q$);
SELECT pg_temp.same($q$SELECT time, (doc->>'v')::float8 FROM fs_t WHERE time >= '2024-02-01'$q$);
DELETE FROM fs_t WHERE time >= '2024-02-01';
DELETE FROM fs_h WHERE time >= '2024-02-01';
-- Text conditions on a field: doc->>'k' = 'v' (or <>, either way round, a
-- parameter too, of a deterministic collation) and doc @> '{"k": "v"}' read
-- the key's strings from its sub-column (Vectorized Filter). A row holding
-- anything else there (a number, an object), whose document is no object,
-- or SQL NULL goes on to the operator; in a bucket where every row's answer
-- is known, the condition does not run and no document is built.
CREATE TABLE tx_t (time timestamptz NOT NULL, dev text, doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('tx_t', 'time', 'dev');
INSERT INTO tx_t SELECT '2024-01-01'::timestamptz + i * interval '10 s', 'd' || (i % 3),
  CASE WHEN i % 211 = 0 THEN '["s"]'::jsonb WHEN i % 199 = 0 THEN NULL
       WHEN i % 101 = 0 THEN jsonb_build_object('s', 5) WHEN i % 103 = 0 THEN jsonb_build_object('s', jsonb_build_object('x', 1))
       WHEN i % 7 = 0 THEN jsonb_build_object('v', i) WHEN i % 11 = 0 THEN jsonb_build_object('s', NULL, 'v', i)
       WHEN i >= 2400 THEN jsonb_build_object('s', CASE WHEN i % 5 = 0 THEN 'warn' ELSE 'ok' END)
       ELSE jsonb_build_object('s', CASE WHEN i % 5 = 0 THEN 'warn' WHEN i % 5 = 1 THEN 'été' ELSE 'ok' END, 'v', i) END
  FROM generate_series(0, 2999) i;
CREATE TEMP TABLE tx_h AS SELECT * FROM tx_t;
SELECT pg_temp.scan_lines($q$SELECT time, doc FROM tx_t WHERE doc->>'s' = 'warn'$q$);
SELECT pg_temp.scan_lines($q$SELECT count(*) FROM tx_t WHERE doc @> '{"s": "warn"}'$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE doc->>'s' = 'warn'$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE doc->>'s' <> 'ok'$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE 'été' = doc->>'s'$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE doc->>'s' = 'warn' COLLATE "C"$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE doc @> '{"s": "warn"}'$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE NOT doc @> '{"s": "ok"}'$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE doc->>'s' = 'warn' OR (doc->>'v')::int < 10$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE NOT (doc->>'s' <> 'warn' AND doc ? 's')$q$);
SELECT pg_temp.same($q$SELECT time, doc FROM tx_t WHERE doc->>'s' = NULL$q$);
SELECT pg_temp.same($q$SELECT dev, count(*), sum((doc->>'v')::int) FROM tx_t WHERE doc->>'s' = 'ok' GROUP BY dev$q$);
SELECT pg_temp.same($q$SELECT dev, count(*) FROM tx_t WHERE doc @> '{"s": "été"}' OR doc @> '{"s": "warn"}' GROUP BY dev$q$);
SELECT pg_temp.same($q$SELECT count(*) FROM tx_t WHERE doc->>'s' <> 'ok' AND time >= '2024-01-01 06:40'$q$);
SELECT pg_temp.decoded($q$SELECT count(*) FROM tx_t WHERE doc->>'s' <> 'ok' AND time >= '2024-01-01 06:40'$q$);
SELECT pg_temp.decoded($q$SELECT time FROM tx_t WHERE doc @> '{"s": "warn"}' AND time >= '2024-01-01 06:40'$q$);
-- Two columns of conflicting collations compare only when a row is met (as on heap).
CREATE TABLE coll_t (time timestamptz NOT NULL, a text COLLATE "C", b text COLLATE "POSIX", doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('coll_t', 'time');
SELECT count(*) FROM coll_t WHERE a = b AND doc->>'s' = 'x';
INSERT INTO coll_t VALUES ('2024-01-01', 'x', 'x', '{"s": "x"}');
SELECT count(*) FROM coll_t WHERE a = b AND doc->>'s' = 'x';
DROP TABLE coll_t;
PREPARE tx(text) AS SELECT count(*) FROM tx_t WHERE doc->>'s' = $1;
EXECUTE tx('warn');
EXECUTE tx('été');
SELECT count(*) FROM tx_h WHERE doc->>'s' = 'été';
DEALLOCATE tx;
DROP TABLE tx_t;
-- A cursor reads the columns both ways, and again once rewound (a rescan).
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT time, (doc->>'v')::int FROM fs_t WHERE dev = 'd0' AND time < '2024-01-01 00:10';
FETCH 3 FROM c;
FETCH BACKWARD 2 FROM c;
DECLARE r SCROLL CURSOR FOR SELECT time, (doc->>'v')::float8 FROM fs_t WHERE (doc->>'v')::float8 > 98;
MOVE FORWARD ALL IN r;
MOVE BACKWARD ALL IN r;
FETCH 2 FROM r;
FETCH ABSOLUTE 26 FROM r;
COMMIT;
SELECT count(*) FROM fs_h WHERE (doc->>'v')::float8 > 98;
-- The inner side of a nested loop is rescanned for every outer row.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT pg_temp.same($q$SELECT d, x.time, x.v FROM (VALUES ('d1'), ('d2')) v(d) CROSS JOIN LATERAL (SELECT time, (t.doc->>'v')::float8 AS v FROM fs_t t WHERE t.dev = v.d AND (t.doc->>'v')::float8 > 95) x$q$);
SELECT pg_temp.same($q$SELECT d, x.time FROM (VALUES ('d1'), ('d2')) v(d) CROSS JOIN LATERAL (SELECT time FROM fs_t t WHERE t.dev = v.d AND (t.doc->>'v')::float8 > 95) x$q$);
RESET enable_hashjoin;
RESET enable_mergejoin;
-- Where a whole-row reference or an entry that may fail comes with the
-- field, the scan keeps Postgres's projection (and heap's order of errors).
SELECT pg_temp.same($q$SELECT t, (t.doc->>'v')::float8 FROM fs_t t WHERE dev = 'd2'$q$);
SELECT pg_temp.same($q$SELECT to_jsonb(t) ->> 'dev', (doc->>'v')::int FROM fs_t t WHERE dev = 'd2'$q$);
SELECT pg_temp.same($q$SELECT 1 / (length(dev) - length(dev)), (doc->>'w')::float8 FROM fs_t$q$);
SELECT pg_temp.same($q$SELECT (doc->>'w')::float8, 1 / (length(dev) - length(dev)) FROM fs_t$q$);
EXPLAIN (VERBOSE, COSTS OFF) SELECT 1 / (length(dev) - length(dev)), (doc->>'w')::float8 FROM fs_t;
-- The last point per series builds the document of the row it returns alone
-- (all of the bucket's when that row fails a condition).
SELECT pg_temp.scan_lines($q$SELECT DISTINCT ON (dev) dev, time, doc FROM fs_t ORDER BY dev, time DESC$q$);
SELECT DISTINCT ON (dev) dev, time, doc FROM fs_t ORDER BY dev, time DESC;
SELECT DISTINCT ON (dev) dev, time, doc FROM fs_t WHERE (doc->>'v')::float8 < 50 ORDER BY dev, time DESC;
SELECT DISTINCT ON (dev) dev, time, doc FROM fs_h WHERE (doc->>'v')::float8 < 50 ORDER BY dev, time DESC;
-- Its conditions run cheapest first, as a scan's: the cast that fails on
-- row 1000 ("n/a") is never tried, the cheap test having rejected every row.
ANALYZE fs_t;
SELECT pg_temp.scan_lines($q$SELECT DISTINCT ON (dev) dev, time FROM fs_t WHERE (doc->>'w')::float8 > 0 AND doc IS NULL ORDER BY dev, time DESC$q$);
SELECT DISTINCT ON (dev) dev, time FROM fs_t WHERE (doc->>'w')::float8 > 0 AND doc IS NULL ORDER BY dev, time DESC;
SELECT DISTINCT ON (dev) dev, time FROM fs_h WHERE (doc->>'w')::float8 > 0 AND doc IS NULL ORDER BY dev, time DESC;
DROP TABLE fs_t;
-- DELETE and UPDATE of meta rewrite buckets; the documents stay the same.
DELETE FROM docs_h WHERE (doc->>'count')::int % 5 = 1;
DELETE FROM docs_t WHERE (doc->>'count')::int % 5 = 1;
UPDATE docs_h SET dev = 'moved' WHERE dev = 'd2';
UPDATE docs_t SET dev = 'moved' WHERE dev = 'd2';
SELECT pg_temp.differing() AS rows_differing;
SELECT count(*) AS problems FROM tsbucket.verify('docs_t');
DROP TABLE docs_h, docs_t, rd_j, rd_x;
