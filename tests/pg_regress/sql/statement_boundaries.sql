-- Statement boundaries: every path COPY and INSERT take makes its rows
-- visible to what runs after it in the transaction (AFTER STATEMENT triggers
-- included); SQL nested in triggers and functions neither flushes nor applies
-- the outer statement's work; a row a join offers twice is changed, returned
-- and counted once, as with heap.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';

CREATE TABLE sb (time timestamptz NOT NULL, s text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('sb', 'time', 's');
CREATE TABLE other (x int);
INSERT INTO other VALUES (1);

-- COPY through a BEFORE ROW trigger (COPY's row-by-row path), then DELETE in
-- the same transaction: the DELETE sees and removes the COPY's rows.
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM other LIMIT 1;
    RETURN NEW;
END $$;
CREATE TRIGGER sb_touch BEFORE INSERT ON sb FOR EACH ROW EXECUTE FUNCTION touch();
CREATE FUNCTION count_sb() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'after statement: % rows', (SELECT count(*) FROM sb);
    RETURN NULL;
END $$;
CREATE TRIGGER sb_count AFTER INSERT ON sb FOR EACH STATEMENT EXECUTE FUNCTION count_sb();
BEGIN;
COPY sb FROM stdin;
2024-01-01 00:00:01+00	a	1
2024-01-01 00:00:02+00	a	2
2024-01-01 00:00:03+00	b	3
\.
DELETE FROM sb WHERE v <= 2;
SELECT s, v FROM sb ORDER BY v;
COMMIT;
SELECT s, v FROM sb ORDER BY v;

-- COPY's rows are written at the end of the COPY: a DELETE inside a later
-- savepoint sees and removes them.
BEGIN;
COPY sb FROM stdin;
2024-01-01 00:00:04+00	c	4
2024-01-01 00:00:05+00	c	5
\.
SAVEPOINT s1;
DELETE FROM sb WHERE s = 'c';
RELEASE s1;
COMMIT;
SELECT count(*) AS c_rows_left FROM sb WHERE s = 'c';

-- An INSERT whose BEFORE ROW trigger runs SQL still fills one bucket per series.
TRUNCATE sb;
INSERT INTO sb SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i FROM generate_series(1, 1000) i;
SELECT buckets, rows FROM tsbucket.stats('sb');
DROP TRIGGER sb_touch ON sb;
DROP TRIGGER sb_count ON sb;

-- COPY with a volatile default and with WHERE on a volatile function, then DELETE.
CREATE TABLE sbd (time timestamptz NOT NULL, s text, v float8 DEFAULT random()) USING tsbucket;
SELECT tsbucket.create_timeseries('sbd', 'time', 's');
BEGIN;
COPY sbd (time, s) FROM stdin;
2024-01-01 00:00:01+00	a
2024-01-01 00:00:02+00	a
\.
COPY sbd FROM stdin WHERE random() >= 0;
2024-01-01 00:00:03+00	a	3
\.
SELECT count(*) AS copied FROM sbd;
DELETE FROM sbd;
SELECT count(*) AS left_after_delete FROM sbd;
COMMIT;

-- A DELETE whose filter calls a function that runs a query.
TRUNCATE sb;
INSERT INTO sb SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i FROM generate_series(1, 100) i;
CREATE FUNCTION is_odd(v int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM other LIMIT 1;
    RETURN v % 2 = 1;
END $$;
DELETE FROM sb WHERE is_odd(v);
SELECT count(*), min(v), max(v) FROM sb;

-- A subquery of the table rescanned for every row of an INSERT into it does
-- not split the INSERT's buckets (its own rows are invisible to it anyway).
INSERT INTO sb SELECT '2024-01-03'::timestamptz + g * interval '1 s', 'q', g FROM generate_series(1, 200) g
 WHERE NOT EXISTS (SELECT 1 FROM sb x WHERE x.s = 'q' AND x.v = g);
SELECT count(*) AS q_buckets, sum(rows) AS q_rows FROM tsbucket.buckets('sb') WHERE meta = 'q';
DELETE FROM sb WHERE s = 'q';

-- A trigger that reads the table sees the outer statement's rows so far.
CREATE TABLE seen (n bigint);
CREATE FUNCTION record_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO seen SELECT count(*) FROM sb WHERE s = 'z';
    RETURN NEW;
END $$;
CREATE TRIGGER sb_seen BEFORE INSERT ON sb FOR EACH ROW EXECUTE FUNCTION record_seen();
INSERT INTO sb SELECT '2024-01-02'::timestamptz + i * interval '1 s', 'z', i FROM generate_series(1, 5) i;
SELECT n FROM seen ORDER BY n;
DROP TRIGGER sb_seen ON sb;

-- DELETE ... USING and UPDATE ... FROM where the join offers a row twice:
-- changed, returned and counted once, as with heap.
CREATE TABLE k (v int);
INSERT INTO k SELECT i FROM generate_series(1, 20) i;
INSERT INTO k SELECT i FROM generate_series(1, 20) i;
CREATE TABLE sbh (time timestamptz NOT NULL, s text, v int);
INSERT INTO sbh SELECT time, s, v FROM sb;
WITH d AS (DELETE FROM sb USING k WHERE sb.v = k.v RETURNING sb.v) SELECT count(*), count(DISTINCT v) FROM d;
WITH d AS (DELETE FROM sbh USING k WHERE sbh.v = k.v RETURNING sbh.v) SELECT count(*), count(DISTINCT v) FROM d;
DELETE FROM sb USING k WHERE sb.v = k.v + 20;
DELETE FROM sbh USING k WHERE sbh.v = k.v + 20;
UPDATE sb SET s = 'b' FROM (SELECT 'a' AS s UNION ALL SELECT 'a') x WHERE sb.s = x.s;
UPDATE sbh SET s = 'b' FROM (SELECT 'a' AS s UNION ALL SELECT 'a') x WHERE sbh.s = x.s;
SELECT (SELECT array_agg(v ORDER BY v) FROM sb) = (SELECT array_agg(v ORDER BY v) FROM sbh) AS same_rows,
       (SELECT count(*) FROM sb WHERE s = 'b') AS moved;
SELECT count(*) AS problems FROM tsbucket.verify('sb');

-- A BEFORE ROW trigger that deletes rows the outer DELETE is about to reach:
-- refused as heap refuses it ("already modified by an operation triggered by
-- the current command"), on tsbucket and on heap alike.
CREATE FUNCTION meddle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DELETE FROM %I WHERE v = $1', TG_TABLE_NAME) USING OLD.v + 1;
    RETURN OLD;
END $$;
CREATE TABLE sbt (time timestamptz NOT NULL, s text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('sbt', 'time', 's');
CREATE TABLE sbth (time timestamptz NOT NULL, s text, v int);
INSERT INTO sbt SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i FROM generate_series(1, 10) i;
INSERT INTO sbth SELECT * FROM sbt;
CREATE TRIGGER sbt_meddle BEFORE DELETE ON sbt FOR EACH ROW EXECUTE FUNCTION meddle();
CREATE TRIGGER sbth_meddle BEFORE DELETE ON sbth FOR EACH ROW EXECUTE FUNCTION meddle();
DELETE FROM sbt;
DELETE FROM sbth;
SELECT (SELECT count(*) FROM sbt) AS sbt_rows, (SELECT count(*) FROM sbth) AS heap_rows;
-- A BEFORE ROW trigger that reads the table in time order, or its last row
-- per series, sees the rows the statement inserted before (as with heap):
-- the time-ordered merge and the last-point scan write buffered rows first.
CREATE TABLE ord (time timestamptz NOT NULL, s text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('ord', 'time', 's');
CREATE TABLE ordh (time timestamptz NOT NULL, s text, v int);
CREATE TABLE ord_seen (tbl text, v int, newest text, lastpoints text);
CREATE FUNCTION record_order() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE newest text; lastpoints text;
BEGIN
    EXECUTE format('SELECT string_agg(v::text, '','') FROM (SELECT v FROM %I ORDER BY time DESC LIMIT 2) x', TG_TABLE_NAME) INTO newest;
    EXECUTE format('SELECT string_agg(s || ''='' || v, '','') FROM (SELECT DISTINCT ON (s) s, v FROM %I ORDER BY s, time DESC) x', TG_TABLE_NAME) INTO lastpoints;
    INSERT INTO ord_seen VALUES (TG_TABLE_NAME, NEW.v, newest, lastpoints);
    RETURN NEW;
END $$;
CREATE TRIGGER ord_record BEFORE INSERT ON ord FOR EACH ROW EXECUTE FUNCTION record_order();
CREATE TRIGGER ordh_record BEFORE INSERT ON ordh FOR EACH ROW EXECUTE FUNCTION record_order();
SET enable_sort = off;
INSERT INTO ord SELECT '2024-01-01'::timestamptz + i * interval '1 s', 's' || (i % 2), i FROM generate_series(1, 5) i;
INSERT INTO ordh SELECT '2024-01-01'::timestamptz + i * interval '1 s', 's' || (i % 2), i FROM generate_series(1, 5) i;
RESET enable_sort;
SELECT a.v, a.newest, a.lastpoints, a.newest IS NOT DISTINCT FROM b.newest AND a.lastpoints IS NOT DISTINCT FROM b.lastpoints AS as_heap
  FROM ord_seen a JOIN ord_seen b ON a.tbl = 'ord' AND b.tbl = 'ordh' AND a.v = b.v ORDER BY a.v;
DROP TABLE ord, ordh, ord_seen;
DROP FUNCTION record_order();
DROP TABLE sb, sbd, sbt, sbth, sbh, other, k, seen;
DROP FUNCTION touch(), count_sb(), is_odd(int), record_seen(), meddle();
