-- Every Postgres type round-trips, NULLs included.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE pair AS (a int, b text);
CREATE DOMAIN positive AS int CHECK (VALUE > 0);

CREATE TABLE all_types (
    time timestamptz NOT NULL, tag text,
    b bool, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, num numeric, txt text, vc varchar(10),
    ch char(3), by bytea, d date, tm time, ttz timetz, ts timestamp, iv interval, u uuid, j jsonb,
    js json, arr int[], tarr text[], p pair, e mood, dom positive, inet_ inet, pt point, nm name,
    r int4range, bits bit varying, c "char", money_ money, oid_ oid
) USING tsbucket;
SELECT tsbucket.create_timeseries('all_types', 'time', 'tag');
INSERT INTO all_types VALUES
  ('2024-01-01 00:00:00', 'x', true, -32768, -2147483648, -9223372036854775808, -1.5, 'NaN', 1e-100, '', 'abc',
   'a', '\x00ff', '4713-01-01 BC', '00:00', '23:59:59+14', '294276-12-31 23:59:59', '-178000000 years',
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2, {"b": null}]}', '{"x" : 1}', '{1,NULL,3}',
   '{"", NULL, "q\"uote"}', '(1,"x y")', 'sad', 1, '::1', '(1.5,-2)', 'nm', '[1,10)', B'1011', 'z',
   -92233720368547758.08, 4294967295),
  ('2024-01-01 00:00:01', 'x', false, 32767, 2147483647, 9223372036854775807, 'Infinity', '-Infinity',
   123456789012345678901234567890.123456789, repeat('long ', 30), NULL, NULL, '', '5874897-12-31', '24:00',
   NULL, '4713-11-24 00:00:00 BC'::timestamp, '1 mon 2 days 3 us', NULL, 'null', '[]', '{}', '{}',
   '(,)', 'happy', 2147483647, '10.0.0.0/8', NULL, '', 'empty', B'', 'a', 0, 0),
  ('2024-01-01 00:00:02', NULL, NULL, NULL, NULL, NULL, NULL, '-0', 'NaN', NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT * FROM all_types ORDER BY time;
-- Compare with a heap copy column by column.
CREATE TABLE all_types_heap AS SELECT * FROM all_types;
SELECT count(*) AS differing_rows FROM (
  (SELECT t::text FROM all_types t EXCEPT ALL SELECT h::text FROM all_types_heap h)
  UNION ALL
  (SELECT h::text FROM all_types_heap h EXCEPT ALL SELECT t::text FROM all_types t)) d;
SELECT f8::text AS negative_zero, num::text AS numeric_nan FROM all_types WHERE time = '2024-01-01 00:00:02';
SELECT * FROM tsbucket.verify('all_types');
-- Meta columns of other types: integer and NULL meta values.
-- One bucket per series, as written (not waiting in the tail).
SET tsbucket.tail_bucket_rows = 0;
CREATE TABLE int_meta (time timestamp NOT NULL, device int, v float4) USING tsbucket;
SELECT tsbucket.create_timeseries('int_meta', 'time', 'device');
INSERT INTO int_meta VALUES ('2024-01-01', 1, 0.1), ('2024-01-01', NULL, 0.2), ('2024-01-01', -5, 3.4028235e38);
SELECT * FROM int_meta ORDER BY device NULLS FIRST;
SELECT meta, rows FROM tsbucket.buckets('int_meta');
DROP TABLE all_types, all_types_heap, int_meta;
DROP TYPE mood, pair;
DROP DOMAIN positive;
