-- Row identifiers: every store tuple version has its own bucket id (so a
-- fetch by TID never reads a dead version), ids span 36 bits and are reused
-- once no version carries them, and only tsbucket draws them.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';

-- UPDATE of one of several meta columns, then of another: the second UPDATE
-- must read the rows' current meta values, not those of a dead version.
CREATE TABLE mm (time timestamptz NOT NULL, host text, region text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('mm', 'time', meta_columns => ARRAY['host', 'region']);
INSERT INTO mm SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', 'us', i FROM generate_series(1, 100) i;
UPDATE mm SET region = 'eu' WHERE host = 'a';
UPDATE mm SET host = 'b' WHERE host = 'a';
SELECT host, region, count(*) FROM mm GROUP BY 1, 2 ORDER BY 1, 2;
-- The same in one transaction, and with part of the bucket moving.
BEGIN;
UPDATE mm SET region = 'ap' WHERE host = 'b';
UPDATE mm SET host = 'c' WHERE region = 'ap';
UPDATE mm SET region = 'us' WHERE host = 'c';
COMMIT;
SELECT host, region, count(*) FROM mm GROUP BY 1, 2 ORDER BY 1, 2;

CREATE TABLE m3 (time timestamptz NOT NULL, a int, b text, c bool, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('m3', 'time', meta_columns => ARRAY['a', 'b', 'c']);
INSERT INTO m3 SELECT '2024-01-01'::timestamptz + i * interval '1 s', i % 2, 'x', true, i FROM generate_series(1, 50) i;
UPDATE m3 SET b = 'y' WHERE a = 0;
UPDATE m3 SET c = false WHERE b = 'y';
UPDATE m3 SET a = 5 WHERE c = false;
UPDATE m3 SET b = 'z', c = NULL WHERE a = 1;
SELECT a, b, c, count(*), sum(v) FROM m3 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT count(*) AS problems FROM tsbucket.verify('m3');

-- Only tsbucket draws bucket ids: a role without rights cannot exhaust them.
CREATE ROLE regress_tsbucket_nobody;
SET ROLE regress_tsbucket_nobody;
DO $$ BEGIN
  PERFORM nextval(id_sequence::regclass) FROM tsbucket.catalog WHERE relid = 'mm'::regclass;
EXCEPTION WHEN insufficient_privilege THEN
  RAISE WARNING 'nextval refused: %', SQLSTATE;
END $$;
RESET ROLE;

-- Across the old 32-bit limit: ids above 2^32 use the high offset bits.
CREATE TABLE big (time timestamptz NOT NULL, s text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('big', 'time', 's');
INSERT INTO big VALUES ('2024-01-01 00:00:00', 'k', 100);
INSERT INTO big VALUES ('2024-01-01 00:00:00', 'a', 0);
SELECT setval(id_sequence::regclass, 4294967290) FROM tsbucket.catalog WHERE relid = 'big'::regclass;
DO $$ BEGIN
  FOR i IN 1 .. 10 LOOP
    INSERT INTO big VALUES ('2024-01-01 00:00:00'::timestamptz + i * interval '1 s', 'a', i);
    -- A query between the INSERTs: each writes a bucket of its own (they would fill one).
    PERFORM count(*) FROM big;
  END LOOP;
END $$;
-- The id that maps to the invalid block (2^32 - 1) is never handed out.
SELECT count(*) FILTER (WHERE bucket_id > 4294967295) AS above_2_32,
       count(*) FILTER (WHERE bucket_id = 4294967295) AS invalid_block,
       count(DISTINCT bucket_id) = count(*) AS distinct_ids
  FROM tsbucket.buckets('big');
SELECT ctid, v FROM big WHERE v IN (0, 10) ORDER BY v;
SELECT v FROM big WHERE ctid = (SELECT ctid FROM big WHERE v = 9);
DELETE FROM big WHERE v IN (3, 7);
UPDATE big SET s = 'b' WHERE s = 'a';
SELECT * FROM tsbucket.compact('big');
SELECT s, count(*), sum(v) FROM big GROUP BY 1 ORDER BY 1;
SELECT count(*) AS problems FROM tsbucket.verify('big');

-- Across the end of the id space: the sequence cycles; an id still carried by
-- a live bucket (1, series k) is skipped, one freed by VACUUM (2) is reused,
-- and 2^36 - 1 (the invalid block again) is never handed out.
VACUUM big;
SELECT setval(id_sequence::regclass, 68719476733) FROM tsbucket.catalog WHERE relid = 'big'::regclass;
SELECT bucket_id, meta FROM tsbucket.buckets('big') WHERE bucket_id < 100;
DO $$ BEGIN
  FOR i IN 11 .. 15 LOOP
    INSERT INTO big VALUES ('2024-01-01 00:00:00'::timestamptz + i * interval '1 s', 'b', i);
    PERFORM count(*) FROM big;
  END LOOP;
END $$;
SELECT bucket_id, meta, rows FROM tsbucket.buckets('big') WHERE bucket_id < 100 OR bucket_id > 68719476000 ORDER BY bucket_id;
DELETE FROM big WHERE v = 12;
SELECT * FROM tsbucket.compact('big');
SELECT s, count(*), sum(v) FROM big GROUP BY 1 ORDER BY 1;
SELECT count(*) AS problems FROM tsbucket.verify('big');
DROP TABLE mm, m3, big;
DROP ROLE regress_tsbucket_nobody;
