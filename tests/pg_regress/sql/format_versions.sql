-- Buckets written by earlier releases stay readable. This payload and its
-- column statistics were written by tsbucket 0.5.0 (bucket format version 1:
-- a NaN sends temp to Gorilla XOR, booleans as raw bits, text as an lz4
-- dictionary) for the 200 rows inserted below; the same rows written now take
-- version 5. Swapped into the store, the old bucket must read back as the
-- same rows, pass verify, and answer aggregates from its header as before.
SET client_min_messages = warning;
SET timezone = 'UTC';
CREATE EXTENSION IF NOT EXISTS tsbucket;
CREATE TABLE old_fmt (time timestamptz NOT NULL, dev text, temp float8, hum float4, cnt int8, ok bool, note text) USING tsbucket;
SELECT tsbucket.create_timeseries('old_fmt', 'time', 'dev');
INSERT INTO old_fmt SELECT '2024-01-01'::timestamptz + i * interval '10 s', 'd1',
       CASE WHEN i % 17 = 0 THEN NULL WHEN i = 5 THEN 'NaN' ELSE (i % 50) / 10.0 END,
       (i % 7) * 0.5, CASE WHEN i % 30 = 0 THEN NULL ELSE i * i END, i % 3 = 0,
       CASE WHEN i % 4 = 0 THEN 'warn' ELSE 'ok' END
  FROM generate_series(0, 199) i;
CREATE TEMP TABLE now_written AS SELECT * FROM old_fmt;
-- The store's one bucket: its format version and sizes.
CREATE FUNCTION pg_temp.bucket_info() RETURNS TABLE (format_version int, payload_bytes int, stats_bytes int)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT get_byte(payload, 0), length(payload), length(column_stats) FROM %s',
                              (SELECT store_relid::regclass FROM tsbucket.catalog WHERE relid = 'old_fmt'::regclass));
END $$;
SELECT * FROM pg_temp.bucket_info();
DO $$
BEGIN
  EXECUTE format('UPDATE %s SET payload = decode(%L, ''hex''), column_stats = decode(%L, ''hex'')',
                 (SELECT store_relid::regclass FROM tsbucket.catalog WHERE relid = 'old_fmt'::regclass),
                 '01c8010601000011c801038080cacebab5d80280dac409000003020119fefffdfffbfff7ffefffdfffbfff7ffffffefffdfffbfff7fff70b01bc019a9999999999b93f27c25fe85455555555555daaaaaaaaaaaa3ae89b999999999921c0037f66666666666603585555555555550120feffffffffff074057555555555505809a9999999999390069666666666606004a55555555551500e4ffffffffff7f006855555555555500909999999999990320cdcccccccccc004057555555555505805655555555550500999999999999f9ff6b66666666660600745555555555150088ffffffffff7f005055555555555500a09999999999990340cdcccccccccc0080aeaaaaaaaaaa0200f1ffffffffff0f00aaaaaaaaaaaa0a00343333333333f300a899999999991900d05555555555550020feffffffffff014066666666666606809a999999999901005d55555555550500e2ffffffffff1f005455555555551500686666666666e6039099999999991900a05555555555550040feffffffffff018052555555555501006966666666660e003233333333330300b4aaaaaaaaaa0a00c8ffffffffff3f0050aaaaaaaaaa2a0020cdcccccccccc09609a9999999999c9bf5255555555553500a5aaaaaaaaaa2a00d2cccccccccccc013433333333333300a8aaaaaaaaaaaa0010ffffffffffff03a0abaaaaaaaaaa0240cdcccccccccc1c803433333333330300a5aaaaaaaaaa0a00f2ffffffffff3f00b4aaaaaaaaaa2a00c8cccccccccccc019066666666666600a054555555555501405555555555550580ccccccccccccfcff3533333333330300baaaaaaaaaaa0a00c4ffffffffff3f00a8aaaaaaaaaa2a00d0cccccccccccc01a066666666666600405755555555550180f8ffffffffff070055555555555505009a99999999997900d4cccccccccc0c00e8aaaaaaaaaa2a0010ffffffffffff00a0aaaaaaaaaaaa0040feffffffffff0780aeaaaaaaaaaa0200f1ffffffffff0f00aaaaaaaaaaaa0a00343333333333f301c8cccccccccc0c00d0aaaaaaaaaa2a0020ffffffffffff0040a9aaaaaaaaaa0080343333333333070099999999999901005a55555555550500e4ffffffffff1f002855555555551500906666666666e60430cdccccccccccdc5fa9aaaaaaaaaa6a805255555555551500696666666666e6009a99999999991900545555555555550088ffffffffffff01d055555555555501a06666666666660e409a999999999901805255555555550500f9ffffffffff1f005a55555555551500646666666666e600483333333333330050aaaaaaaaaaaa0020ffffffffffff0340cdccccccccccfcff9a999999999901005d55555555550500e2ffffffffff1f005455555555551500686666666666e6005033333333333300a0abaaaaaaaaaa0040fcffffffffff0380aaaaaaaaaaaa0200cdcccccccccc3c006a66666666660600745555555555150088ffffffffff7f005055555555555500a099999999999903409a99999999990180f8ffffffffff070055555555555505009a9999999999f9006466666666660600685555555555150090ffffffffff7f00a054555555555500409a99999999990380cccccccccccc0000adaaaaaaaaaa0200f2ffffffffff0f0094aaaaaaaaaa0a00483333333333730298666666666666ee2f000000000000384000000000000010803433333333337300cdcccccccccc0c00aaaaaaaaaaaa2a00c4ffffffffffff00e8aaaaaaaaaaaa00503333333333330720cdcccccccccc0040a9aaaaaaaaaa0280fcffffffffff0f00adaaaaaaaaaa0a003233333333337300a499999999991900285555555555550090ffffffffffff01a05555555555550140abaaaaaaaaaafeffaeaaaaaaaaaa0200f1ffffffffff0f00aaaaaaaaaaaa0a003433333333337300a899999999991900d05555555555550020feffffffffff014055555555555501806666666666661e003533333333330300baaaaaaaaaaa0a00c4ffffffffff3f00a8aaaaaaaaaa2a00d0cccccccccccc01a06666666666660040abaaaaaaaaaa0280aaaaaaaaaaaa0200cdcccccccccc7c003233333333330300b4aaaaaaaaaa0a00c8ffffffffff3f0050aaaaaaaaaa2a0020cdcccccccccc014066666666666600805655555555550100f9ffffffffff07004a555555555505000004030085010001c801010005a0a847b307453d9a3d28ead1ec41518f660f8a7a347b50d4a3d983a21ecd1e14f568f6a0a847b307453d9a3d28ead1ec41518f660f8a7a347b50d4a3d983a21ecd1e14f568f6a0a847b307453d9a3d2805ead1ec41518f660f8a7a347b50d4a3d983a21ecd1e14f568f6a0a847b307453d9a3d28ead1ec41518f660f8a7a05010119feffffbfffffffeffffffffbfffffffeffffbfffffffefffffe601c10103020609040810204080000102040810204080000102040810204080000102040810f01387000102040810204080000102040810204080000102040810204080000102f6d2112040800001020408102040800001020408102040800001020408102040c06d5802040810204080000102040810204080000102040810204080000102040898cf4e800001020408102040800001020a04104000010410400001041040000104104080975112400001041040000104104000010410400001041040000104104000010410400001d6264b0001041040000104104000010410400001041040000604001bc801499224499224499224499224499224499224499224499224490705002d00020308030806607761726e6f6bc801010001eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee01eeeeeeeeeeeeeeeeee',
                 '0401038080cacebab5d80280f6b1b8c9b5d80200030500000000000000009a99999999991340030c000000000000f87f040400000000000000000000000000000840010000000000907240050302e2ea040307808bb902');
END $$;
SELECT * FROM pg_temp.bucket_info();
SELECT count(*) AS rows_differing FROM ((TABLE old_fmt EXCEPT ALL TABLE now_written) UNION ALL (TABLE now_written EXCEPT ALL TABLE old_fmt)) d;
SELECT * FROM tsbucket.verify('old_fmt');
SELECT count(*), count(temp), sum(hum), avg(cnt), min(temp), max(temp), count(*) FILTER (WHERE ok), min(note), max(note) FROM old_fmt;
SELECT count(*), sum(hum) FROM old_fmt WHERE time >= '2024-01-01' AND time < '2024-01-02';
SELECT time, temp, hum, cnt, ok, note FROM old_fmt WHERE temp > 4.8 OR temp <> temp ORDER BY time LIMIT 5;
-- Compaction rewrites it in the current version.
DELETE FROM old_fmt WHERE cnt = 4;
SELECT format_version FROM pg_temp.bucket_info();
SELECT count(*), sum(hum) FROM old_fmt;
DROP TABLE old_fmt;

-- jsonb that format version 2 (0.6.0) kept as its datum's bytes reads back
-- as the same documents; a rewrite stores it shredded by path (version 5).
CREATE TABLE old_docs (time timestamptz NOT NULL, dev text, doc jsonb) USING tsbucket;
SELECT tsbucket.create_timeseries('old_docs', 'time', 'dev');
INSERT INTO old_docs VALUES ('2024-01-01 00:00:00', 'd1', '{"a": 1.50, "b": [true, null]}'), ('2024-01-01 00:00:10', 'd1', '"s"'),
                            ('2024-01-01 00:00:20', 'd1', NULL), ('2024-01-01 00:00:30', 'd1', '{}');
SELECT count(*) > 0 AS compacted FROM tsbucket.compact('old_docs');
CREATE TEMP TABLE docs_now AS SELECT * FROM old_docs;
CREATE FUNCTION pg_temp.docs_version() RETURNS SETOF int LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT get_byte(payload, 0) FROM %s',
                              (SELECT store_relid::regclass FROM tsbucket.catalog WHERE relid = 'old_docs'::regclass));
END $$;
SELECT * FROM pg_temp.docs_version();
DO $$
BEGIN
  -- With the header 0.6.0 wrote for it: no column entries (the jsonb column has none), no field statistics.
  EXECUTE format('UPDATE %s SET payload = decode(%L, ''hex''), column_stats = ''\x00''::bytea',
                 (SELECT store_relid::regclass FROM tsbucket.catalog WHERE relid = 'old_docs'::regclass),
                 '02040201000f04038080cacebab5d80280dac409000315010b45040303604d07443d0200002001000080010000000c0000100e0000506162000028000000008101008813000002000040000000b00000004001000050010000807300000020');
END $$;
SELECT * FROM pg_temp.docs_version();
SELECT count(*) AS rows_differing FROM old_docs o FULL JOIN docs_now n USING (time) WHERE o.doc::text IS DISTINCT FROM n.doc::text OR o.dev IS NULL OR n.dev IS NULL;
SELECT * FROM tsbucket.verify('old_docs');
SELECT time, doc, doc->'b'->0 AS b0 FROM old_docs ORDER BY time;
DELETE FROM old_docs WHERE doc = '"s"';
SELECT * FROM pg_temp.docs_version();
SELECT time, doc FROM old_docs ORDER BY time;
DROP TABLE old_docs;

-- A payload longer than a TOAST chunk (1996 bytes) is stored in two parts:
-- its whole chunks in `payload` and the rest inline in the store row, so that
-- TOAST pages hold four full chunks each. Four buckets of one and three
-- times three chunks (and their rests) take three TOAST pages, and read back
-- whole.
CREATE TABLE split (time timestamptz NOT NULL, dev text, v float8, w float8) USING tsbucket;
SELECT tsbucket.create_timeseries('split', 'time', 'dev');
INSERT INTO split SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'd' || d, sin(i * d) * 100, cos(i + d) * 1e6
  FROM generate_series(0, 3) d, generate_series(0, 399) i;
INSERT INTO split VALUES ('2024-01-02', 'small', 1, 2);
CREATE TEMP TABLE split_rows AS SELECT * FROM split;
CREATE FUNCTION pg_temp.split_parts() RETURNS TABLE (row_count int, whole_chunks int, chunk_multiple bool, rest_inline bool)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT row_count, length(payload) / 1996, length(payload) %% 1996 = 0,
                                      pg_column_size(payload_rest) > length(payload_rest)
                                 FROM %s ORDER BY meta_1', (SELECT store_relid::regclass FROM tsbucket.catalog WHERE relid = 'split'::regclass));
END $$;
SELECT * FROM pg_temp.split_parts();
SELECT pg_relation_size(t.reltoastrelid) / current_setting('block_size')::int AS toast_pages
  FROM tsbucket.catalog c JOIN pg_class t ON t.oid = c.store_relid WHERE c.relid = 'split'::regclass;
SELECT count(*) AS rows_differing FROM ((TABLE split EXCEPT ALL TABLE split_rows) UNION ALL (TABLE split_rows EXCEPT ALL TABLE split)) d;
SELECT * FROM tsbucket.verify('split');
-- tsbucket.buckets counts both parts.
CREATE FUNCTION pg_temp.split_bytes() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT sum(pg_column_size(payload) + coalesce(pg_column_size(payload_rest), 0)) FROM %s',
                 (SELECT store_relid::regclass FROM tsbucket.catalog WHERE relid = 'split'::regclass)) INTO n;
  RETURN n;
END $$;
SELECT sum(compressed_bytes) = pg_temp.split_bytes() AS both_parts_counted FROM tsbucket.buckets('split');
-- A new series value rewrites the row with its parts as they were.
UPDATE split SET dev = 'd9' WHERE dev = 'd1';
UPDATE split_rows SET dev = 'd9' WHERE dev = 'd1';
SELECT * FROM pg_temp.split_parts();
SELECT count(*) AS rows_differing FROM ((TABLE split EXCEPT ALL TABLE split_rows) UNION ALL (TABLE split_rows EXCEPT ALL TABLE split)) d;
-- A DELETE rewrites a bucket; compaction merges buckets: both split again.
DELETE FROM split WHERE dev = 'd2' AND time < '2024-01-01 00:01';
DELETE FROM split_rows WHERE dev = 'd2' AND time < '2024-01-01 00:01';
SELECT tsbucket.compact('split');
SELECT * FROM pg_temp.split_parts();
SELECT count(*) AS rows_differing FROM ((TABLE split EXCEPT ALL TABLE split_rows) UNION ALL (TABLE split_rows EXCEPT ALL TABLE split)) d;
SELECT dev, count(*), round(sum(v)::numeric, 6), max(w) FROM split GROUP BY dev ORDER BY dev;
DROP TABLE split;
