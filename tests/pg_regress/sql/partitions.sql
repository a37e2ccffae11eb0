-- A partitioned time-series table: create_timeseries on the parent
-- configures every partition, present and future; what is refused.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE pw (time timestamptz NOT NULL, sensor text, v float8) PARTITION BY RANGE (time);
CREATE TABLE pw_01 PARTITION OF pw FOR VALUES FROM ('2024-01-01') TO ('2024-02-01') USING tsbucket;
SELECT tsbucket.create_timeseries('pw', 'time', 'sensor', granularity => 'minutes');
-- A later partition is configured as it is created; so is one attached.
CREATE TABLE pw_02 PARTITION OF pw FOR VALUES FROM ('2024-02-01') TO ('2024-03-01') USING tsbucket;
CREATE TABLE pw_03 (time timestamptz NOT NULL, sensor text, v float8) USING tsbucket;
ALTER TABLE pw ATTACH PARTITION pw_03 FOR VALUES FROM ('2024-03-01') TO ('2024-04-01');
SELECT table_name, time_column, meta_columns, granularity, bucket_max_span
  FROM tsbucket.timeseries WHERE table_name::text LIKE 'pw%' ORDER BY 1;
-- Refused: a partition that is not USING tsbucket, created or attached.
CREATE TABLE pw_04 PARTITION OF pw FOR VALUES FROM ('2024-04-01') TO ('2024-05-01');
CREATE TABLE pw_heap (time timestamptz NOT NULL, sensor text, v float8);
ALTER TABLE pw ATTACH PARTITION pw_heap FOR VALUES FROM ('2024-04-01') TO ('2024-05-01');
-- Refused: a time-series table with another bucket span.
CREATE TABLE pw_other (time timestamptz NOT NULL, sensor text, v float8) USING tsbucket;
SELECT tsbucket.create_timeseries('pw_other', 'time', 'sensor');
ALTER TABLE pw ATTACH PARTITION pw_other FOR VALUES FROM ('2024-04-01') TO ('2024-05-01');
SELECT count(*) AS partitions FROM pg_inherits WHERE inhparent = 'pw'::regclass;
-- Refused: configuring it twice; its label changed or removed by hand.
SELECT tsbucket.create_timeseries('pw', 'time', 'sensor');
SECURITY LABEL FOR tsbucket ON TABLE pw IS NULL;
SECURITY LABEL FOR tsbucket ON TABLE pw IS '{"version": 1}';
CREATE TABLE pw_bad (time timestamptz NOT NULL, sensor text, v float8) PARTITION BY RANGE (time);
SECURITY LABEL FOR tsbucket ON TABLE pw_bad IS '{"version": 1, "time_column": "nope"}';
-- Rows through the parent; the DBA functions answer for every partition.
INSERT INTO pw SELECT '2024-01-01'::timestamptz + i * interval '5 min', 's' || (i % 3), i FROM generate_series(0, 20000) i;
SELECT count(*), sum(v) FROM pw;
SELECT * FROM tsbucket.compact('pw');
SELECT buckets, rows, tail_rows FROM tsbucket.stats('pw');
SELECT count(*), sum(rows) FROM tsbucket.buckets('pw');
SELECT * FROM tsbucket.verify('pw');
-- Aggregates are planned partitionwise, each partition's scan aggregating bucket by bucket.
EXPLAIN (COSTS OFF) SELECT sensor, count(*), max(v) FROM pw WHERE time >= '2024-02-01' GROUP BY sensor;
SELECT sensor, count(*), max(v) FROM pw WHERE time >= '2024-02-01' GROUP BY sensor ORDER BY sensor;
SET tsbucket.vectorized_aggregation = off;
SELECT sensor, count(*), max(v) FROM pw WHERE time >= '2024-02-01' GROUP BY sensor ORDER BY sensor;
RESET tsbucket.vectorized_aggregation;
SELECT * FROM tsbucket.expire('pw');
-- Settings reach every partition, and those made later.
SELECT tsbucket.alter_timeseries('pw', expire_after => '3650 days');
SELECT tsbucket.alter_timeseries('pw', granularity => 'seconds');
SELECT tsbucket.set_series_retention('pw', 's1'::text, '7300 days');
-- Refused: one partition's span alone.
SELECT tsbucket.alter_timeseries('pw_01', granularity => 'hours');
-- Renames of the time and meta columns reach every partition's
-- configuration and the labels pg_dump writes (the parent's and each
-- partition's); a partition made after the rename takes the new names.
ALTER TABLE pw RENAME COLUMN sensor TO device;
ALTER TABLE pw RENAME COLUMN time TO ts;
ALTER TABLE pw RENAME COLUMN v TO value;
SELECT k.relname, l.label::jsonb -> 'time_column' AS time_column, l.label::jsonb -> 'meta_columns' AS meta_columns
  FROM pg_seclabel l JOIN pg_class k ON k.oid = l.objoid WHERE l.provider = 'tsbucket' AND k.relname LIKE 'pw%' ORDER BY 1;
SELECT table_name, time_column, meta_columns FROM tsbucket.timeseries WHERE table_name::text LIKE 'pw%' ORDER BY 1;
CREATE TABLE pw_late PARTITION OF pw FOR VALUES FROM ('2030-01-01') TO ('2030-02-01') USING tsbucket;
INSERT INTO pw VALUES ('2030-01-02', 's1', 5);
SELECT device, count(*), max(value) FROM pw WHERE ts >= '2030-01-01' GROUP BY device;
SELECT table_name, time_column, meta_columns FROM tsbucket.timeseries WHERE table_name::text = 'pw_late';
DROP TABLE pw_late;
ALTER TABLE pw RENAME COLUMN device TO sensor;
ALTER TABLE pw RENAME COLUMN ts TO time;
ALTER TABLE pw RENAME COLUMN value TO v;
SELECT k.relname, l.label::jsonb -> 'time_column' AS time_column, l.label::jsonb -> 'meta_columns' AS meta_columns
  FROM pg_seclabel l JOIN pg_class k ON k.oid = l.objoid WHERE l.provider = 'tsbucket' AND k.relname LIKE 'pw%' ORDER BY 1;
-- Through the parent, every partition's span changes.
SELECT tsbucket.alter_timeseries('pw', granularity => 'hours');
CREATE TABLE pw_05 PARTITION OF pw FOR VALUES FROM ('2024-05-01') TO ('2024-06-01') USING tsbucket;
SELECT table_name, granularity, expire_after FROM tsbucket.timeseries WHERE table_name::text LIKE 'pw%' ORDER BY 1;
SELECT relid::regclass, meta, expire_after FROM tsbucket.series_retention WHERE relid::regclass::text LIKE 'pw%' ORDER BY 1;
SELECT * FROM tsbucket.expire('pw');
-- A detached partition stays a time-series table; dropping the parent drops the rest.
ALTER TABLE pw DETACH PARTITION pw_03;
DROP TABLE pw, pw_heap, pw_other, pw_bad;
SELECT table_name FROM tsbucket.timeseries WHERE table_name::text LIKE 'pw%' ORDER BY 1;
DROP TABLE pw_03;
-- Series-ordered scans under a Merge Append: a time pinned to a constant is
-- no sort key (the plan failed with "could not find pathkey item to sort").
CREATE TABLE pk (time timestamp NOT NULL, dev text, v int) PARTITION BY RANGE (time);
SELECT tsbucket.create_timeseries('pk', 'time', 'dev');
CREATE TABLE pk_a PARTITION OF pk FOR VALUES FROM ('2024-03-01') TO ('2024-03-02') USING tsbucket;
CREATE TABLE pk_d PARTITION OF pk DEFAULT USING tsbucket;
INSERT INTO pk SELECT t + i * interval '1 min', 'd' || (i % 5), i
  FROM generate_series(0, 3000) i, (VALUES ('2024-03-01'::timestamp), ('1970-01-01')) s(t);
SELECT dev FROM pk WHERE '1970-01-01 00:05'::timestamp = time GROUP BY dev ORDER BY 1 LIMIT 1;
SELECT dev, count(*) FROM pk WHERE time = '2024-03-01 00:10' GROUP BY dev ORDER BY 1 DESC LIMIT 2;
DROP TABLE pk;
