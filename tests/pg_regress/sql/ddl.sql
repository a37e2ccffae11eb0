-- Schema changes on tables that hold data.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
\set VERBOSITY default
CREATE TABLE d (time timestamptz NOT NULL, sensor text, a int, b text) USING tsbucket;
SELECT tsbucket.create_timeseries('d', 'time', 'sensor');
INSERT INTO d VALUES ('2024-01-01 00:00:00', 'x', 1, 'one'), ('2024-01-01 00:00:01', 'x', 2, 'two');

-- Metrics can be added (with or without a default) and dropped; old buckets read back.
ALTER TABLE d ADD COLUMN c float8;
ALTER TABLE d ADD COLUMN e int DEFAULT 42;
ALTER TABLE d ADD COLUMN f text DEFAULT 'dflt' NOT NULL;
ALTER TABLE d DROP COLUMN a;
INSERT INTO d (time, sensor, b, c, e, f) VALUES ('2024-01-01 00:00:02', 'x', 'three', 3.5, 7, 'set');
SELECT * FROM d ORDER BY time;
-- Renaming the time and meta columns is fine.
ALTER TABLE d RENAME COLUMN time TO ts;
ALTER TABLE d RENAME COLUMN sensor TO device;
SELECT ts, device FROM d ORDER BY ts;
SELECT time_column, meta_columns FROM tsbucket.timeseries WHERE table_name = 'd'::regclass;
UPDATE d SET device = 'y' WHERE device = 'x';
SELECT device, count(*) FROM d GROUP BY 1;
-- Dropping or retyping them is not.
ALTER TABLE d DROP COLUMN ts;
ALTER TABLE d DROP COLUMN device;
ALTER TABLE d ALTER COLUMN device TYPE varchar(20);
ALTER TABLE d ALTER COLUMN ts TYPE timestamp;
ALTER TABLE d ALTER COLUMN b TYPE varchar(20);
ALTER TABLE d ADD COLUMN r float8 DEFAULT random();
SELECT count(*) FROM d;

-- Maintenance commands.
VACUUM d;
VACUUM ANALYZE d;
ANALYZE d;
VACUUM FULL d;
CLUSTER d;
ALTER TABLE d SET TABLESPACE pg_default;
SELECT * FROM d TABLESAMPLE SYSTEM (50);
SELECT * FROM tsbucket.verify('d');

-- The bucket store belongs to the table: not droppable alone, dropped with it.
DO $$
BEGIN
  EXECUTE format('DROP TABLE %s', (SELECT bucket_store FROM tsbucket.timeseries WHERE table_name = 'd'::regclass));
EXCEPTION WHEN dependent_objects_still_exist THEN
  RAISE WARNING 'the bucket store cannot be dropped on its own: %', SQLSTATE;
END $$;
DROP TABLE d;
SELECT count(*) AS stores_left FROM pg_class WHERE relnamespace = 'tsbucket_internal'::regnamespace;

-- Access methods: a time-series table stays one; a heap table holding rows
-- cannot become one by SET ACCESS METHOD (no time or meta columns chosen), an
-- empty one can, and is then configured as any table.
CREATE TABLE am (time timestamptz NOT NULL, s text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('am', 'time', 's');
ALTER TABLE am SET ACCESS METHOD heap;
CREATE TABLE am_heap (time timestamptz NOT NULL, s text, v int);
INSERT INTO am_heap VALUES ('2024-01-01', 'a', 1);
ALTER TABLE am_heap SET ACCESS METHOD tsbucket;
TRUNCATE am_heap;
ALTER TABLE am_heap SET ACCESS METHOD tsbucket;
SELECT tsbucket.create_timeseries('am_heap', 'time', 's');
INSERT INTO am_heap VALUES ('2024-01-01', 'a', 1);
SELECT * FROM am_heap;
-- tsbucket's security labels belong to time-series tables.
CREATE TABLE am_other (time timestamptz NOT NULL);
SECURITY LABEL FOR tsbucket ON TABLE am_other IS '{"version": 1, "time_column": "time", "meta_columns": []}';
DROP TABLE am, am_heap, am_other;
