-- Every way of writing, every way of reading.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
-- Bucket layout is what this file checks: every bucket is written as it is
-- (tail_bucket_rows = 0), none waits in the tail (tail.sql tests that).
SET tsbucket.tail_bucket_rows = 0;
\set SHOW_CONTEXT never
SET timezone = 'UTC';

CREATE TABLE m (time timestamptz NOT NULL, sensor text NOT NULL, temp float8, n int,
                doubled int GENERATED ALWAYS AS (n * 2) STORED,
                status text DEFAULT 'ok', CHECK (temp > -100)) USING tsbucket;
SELECT tsbucket.create_timeseries('m', 'time', 'sensor');

-- Single and multi-row INSERT with RETURNING, defaults and generated columns.
INSERT INTO m (time, sensor, temp, n) VALUES ('2024-08-01 00:00:00', 'a', 1.5, 1) RETURNING *;
INSERT INTO m (time, sensor, temp, n) VALUES ('2024-08-01 00:00:10', 'a', 2.5, 2),
       ('2024-08-01 00:00:20', 'b', 3.5, 3) RETURNING sensor, doubled, status;
-- CHECK and NOT NULL constraints.
INSERT INTO m (time, sensor, temp) VALUES ('2024-08-01 00:00:30', 'a', -200);
INSERT INTO m (time, sensor, temp) VALUES ('2024-08-01 00:00:30', NULL, 1);
INSERT INTO m (time, sensor, temp) VALUES (NULL, 'a', 1);

-- INSERT ... SELECT and COPY end up as well-filled buckets (100 sensors, time order).
INSERT INTO m (time, sensor, temp, n)
SELECT '2024-08-02'::timestamptz + (i / 100) * interval '1 s', 's' || (i % 100), (i % 1000) / 10.0, i
  FROM generate_series(0, 99999) i;
SELECT count(*) AS buckets, min(rows), max(rows) FROM tsbucket.buckets('m') WHERE meta LIKE 's%';
COPY (SELECT '2024-08-03'::timestamptz + (i / 100) * interval '1 s', 'c' || (i % 100), (i % 1000) / 10.0, i
        FROM generate_series(0, 99999) i) TO '/tmp/tsbucket_regress_copy.csv' (FORMAT csv);
COPY m (time, sensor, temp, n) FROM '/tmp/tsbucket_regress_copy.csv' (FORMAT csv);
SELECT count(*) AS buckets, min(rows), max(rows) FROM tsbucket.buckets('m') WHERE meta LIKE 'c%';

-- Out-of-order rows go to the right window.
INSERT INTO m (time, sensor, temp) VALUES ('2024-08-02 00:10:00', 's1', 99), ('2024-08-01 23:59:59', 's1', 98);
SELECT window_start, rows FROM tsbucket.buckets('m') WHERE meta = 's1' ORDER BY window_start, rows;

-- Aggregates, joins, sorts, window functions.
SELECT sensor, count(*), avg(temp), min(time), max(time) FROM m
 WHERE time >= '2024-08-02' AND time < '2024-08-02 00:01:00' AND sensor IN ('s1', 's2')
 GROUP BY sensor ORDER BY sensor;
SELECT count(*), sum(n), sum(doubled), count(DISTINCT sensor) FROM m;
SELECT a.sensor, a.temp, b.temp FROM m a JOIN m b USING (time, sensor)
 WHERE a.sensor = 'a' ORDER BY a.time;
SELECT time, temp, avg(temp) OVER (ORDER BY time ROWS 1 PRECEDING) FROM m WHERE sensor = 's7'
 ORDER BY time LIMIT 3;
SELECT time, sensor, temp FROM m ORDER BY temp DESC, time, sensor LIMIT 3;

-- Cursors both ways.
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT time, sensor, n FROM m WHERE sensor IN ('a', 'b');
FETCH 2 FROM c;
FETCH NEXT FROM c;
FETCH NEXT FROM c;
FETCH BACKWARD 2 FROM c;
FETCH LAST FROM c;
FETCH FIRST FROM c;
FETCH ABSOLUTE -1 FROM c;
COMMIT;

-- BEFORE ROW triggers run; AFTER STATEMENT triggers see the statement's rows.
CREATE FUNCTION m_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.status := 'set by trigger'; RETURN NEW; END $$;
CREATE TRIGGER m_before BEFORE INSERT ON m FOR EACH ROW EXECUTE FUNCTION m_before();
CREATE FUNCTION m_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE WARNING 'rows of sensor z after statement: %', (SELECT count(*) FROM m WHERE sensor = 'z'); RETURN NULL; END $$;
CREATE TRIGGER m_after AFTER INSERT ON m FOR EACH STATEMENT EXECUTE FUNCTION m_after();
INSERT INTO m (time, sensor, temp) VALUES ('2024-08-05', 'z', 1), ('2024-08-05 00:00:01', 'z', 2);
SELECT sensor, status FROM m WHERE sensor = 'z';
-- AFTER ROW triggers are refused when created.
CREATE FUNCTION m_after_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER m_after_row AFTER INSERT ON m FOR EACH ROW EXECUTE FUNCTION m_after_row();
-- So are foreign keys from the table.
CREATE TABLE sensors (name text PRIMARY KEY);
INSERT INTO sensors SELECT DISTINCT sensor FROM m;
ALTER TABLE m ADD FOREIGN KEY (sensor) REFERENCES sensors (name);

-- Plans Postgres picks: EXPLAIN shows a plain Seq Scan.
EXPLAIN (COSTS OFF) SELECT count(*) FROM m WHERE sensor = 'a';
DROP TABLE m, sensors;
DROP FUNCTION m_before, m_after, m_after_row;
