-- The demo: 100 sensors x 10,000 readings (1M rows), loaded with COPY.
\timing on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
DROP TABLE IF EXISTS weather, weather_heap;
SET timezone = 'UTC';

CREATE TABLE weather (
    time      timestamptz NOT NULL,
    sensor    text        NOT NULL,
    temp      float8,
    humidity  float8,
    note      text
) USING tsbucket;
SELECT tsbucket.create_timeseries('weather', time_column => 'time', meta_column => 'sensor',
                                  granularity => 'seconds');

\echo '-- generating /tmp/tsbucket-demo-readings.csv (1M readings: 100 sensors, one per second each)'
SELECT setseed(0.42);
COPY (
  SELECT '2024-08-01'::timestamptz + (i / 100) * interval '1 s' AS time,
         'sensor_' || lpad((i % 100)::text, 3, '0') AS sensor,
         round((20 + 8 * sin(i / 300000.0 + i % 100) + random())::numeric, 1) AS temp,
         round((55 + 20 * cos(i / 50000.0 + i % 7) + random() * 2)::numeric, 1) AS humidity,
         CASE WHEN i % 997 = 0 THEN 'maintenance' END AS note
    FROM generate_series(0, 999999) i
) TO '/tmp/tsbucket-demo-readings.csv' (FORMAT csv);

\echo '-- COPY into the time-series table'
COPY weather FROM '/tmp/tsbucket-demo-readings.csv' (FORMAT csv);
\echo '-- the same rows in a plain heap table with an index, for comparison'
CREATE TABLE weather_heap (LIKE weather);
COPY weather_heap FROM '/tmp/tsbucket-demo-readings.csv' (FORMAT csv);
CREATE INDEX ON weather_heap (sensor, time);

\echo '-- what is stored'
SELECT * FROM tsbucket.stats('weather');
SELECT pg_size_pretty(pg_total_relation_size('weather_heap')) AS heap_with_index,
       pg_size_pretty((SELECT total_bytes FROM tsbucket.stats('weather'))) AS tsbucket,
       round(pg_total_relation_size('weather_heap')::numeric / (SELECT total_bytes FROM tsbucket.stats('weather')), 1) AS times_smaller;
SELECT * FROM tsbucket.buckets('weather') LIMIT 5;

\echo '-- an hour of averages per sensor (only buckets of that hour are read)'
SELECT sensor, count(*), round(avg(temp)::numeric, 2) AS avg_temp, min(time), max(time)
  FROM weather WHERE time >= '2024-08-01 01:00' AND time < '2024-08-01 02:00'
 GROUP BY sensor ORDER BY sensor LIMIT 5;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
SELECT sensor, avg(temp) FROM weather WHERE time >= '2024-08-01 01:00' AND time < '2024-08-01 02:00' GROUP BY sensor;

\echo '-- one sensor, every 15 minutes'
SELECT date_bin('15 minutes', time, '2024-08-01') AS quarter, round(avg(temp)::numeric, 2) AS temp,
       round(avg(humidity)::numeric, 1) AS humidity
  FROM weather WHERE sensor = 'sensor_042' GROUP BY 1 ORDER BY 1;

\echo '-- MongoDB rules: a sensor can be renamed (whole buckets move) ...'
UPDATE weather SET sensor = 'sensor_042_renamed' WHERE sensor = 'sensor_042';
\echo '-- ... but measurements cannot be updated, and DELETE takes any filter'
\set ON_ERROR_STOP off
UPDATE weather SET temp = 0 WHERE sensor = 'sensor_001';
\set ON_ERROR_STOP on
DELETE FROM weather WHERE note = 'maintenance';
SELECT count(*) AS rows_left FROM weather;
SELECT count(*) AS problems FROM tsbucket.verify('weather');
