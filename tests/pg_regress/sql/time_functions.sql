-- $dateTrunc, $dateAdd/$dateSubtract, $dateDiff and the $setWindowFields
-- operators, with MongoDB's documented examples reproduced.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

-- MongoDB $dateTrunc examples (cakeSales).
CREATE TABLE cake (id int, order_date timestamptz, quantity int);
INSERT INTO cake VALUES (0, '2020-05-18T14:10:30Z', 120), (1, '2021-03-20T11:30:05Z', 140),
  (2, '2021-01-11T06:31:15Z', 145), (3, '2020-02-08T13:13:23Z', 104), (4, '2019-05-18T16:09:01Z', 162),
  (5, '2019-01-08T06:12:03Z', 134);
SELECT id, order_date,
       tsbucket.date_trunc('week', order_date, 2, 'America/Los_Angeles', 'Monday') AS truncated_order_date
  FROM cake ORDER BY id;
SELECT tsbucket.date_trunc('month', order_date, 6) AS truncated_order_date, sum(quantity) AS sum_quantity
  FROM cake GROUP BY 1 ORDER BY 1;
SELECT tsbucket.date_trunc('hour', '2021-03-20T11:30:05Z'::timestamptz) AS one_hour,
       tsbucket.date_trunc('hour', '2021-03-20T11:30:05Z'::timestamptz, 2) AS two_hours,
       tsbucket.date_trunc('year', '2025-06-01'::timestamptz, 10) AS decade;
-- Every unit, and bins counted from 2000-01-01 (before it too).
SELECT u, tsbucket.date_trunc(u, '2023-08-17 13:47:29.123456+00'::timestamptz) AS bin1,
          tsbucket.date_trunc(u, '2023-08-17 13:47:29.123456+00'::timestamptz, 3) AS bin3,
          tsbucket.date_trunc(u, '1999-12-31 23:59:59.999999+00'::timestamptz, 7) AS before_ref
  FROM unnest(ARRAY['year', 'quarter', 'month', 'week', 'day', 'hour', 'minute', 'second', 'millisecond']) u;
-- Every start of week, from a Wednesday.
SELECT d, tsbucket.date_trunc('week', '2024-07-17 12:00+00'::timestamptz, 1, 'UTC', d) AS week_start
  FROM unnest(ARRAY['sunday', 'mon', 'TUESDAY', 'wed', 'thu', 'friday', 'Sat']) d;
-- DST in America/New_York (spring forward 2021-03-14, fall back 2021-11-07) and Europe/Berlin.
SELECT ts, tsbucket.date_trunc('day', ts, 1, 'America/New_York') AS ny_day,
           tsbucket.date_trunc('hour', ts, 1, 'America/New_York') AS ny_hour,
           tsbucket.date_trunc('day', ts, 1, 'Europe/Berlin') AS berlin_day
  FROM unnest(ARRAY['2021-03-14 06:30+00', '2021-03-14 07:30+00', '2021-11-07 05:30+00', '2021-11-07 06:30+00',
                    '2021-03-28 00:30+00', '2021-03-28 01:30+00', '2021-10-31 00:30+00', '2021-10-31 01:30+00']::timestamptz[]) ts;
-- UTC offsets in MongoDB's forms (ISO signs), and timestamp / date overloads.
SELECT tsbucket.date_trunc('hour', '2024-01-01 10:45+00'::timestamptz, 1, '+05:30') AS plus_0530,
       tsbucket.date_trunc('day', '2024-01-01 20:45+00'::timestamptz, 1, '-0800') AS minus_0800,
       tsbucket.date_trunc('day', '2024-01-01 22:45+00'::timestamptz, 1, '+03') AS plus_03,
       tsbucket.date_trunc('quarter', '2024-05-31 10:00'::timestamp) AS ts_quarter,
       tsbucket.date_trunc('month', '2024-02-29'::date) AS date_month,
       tsbucket.date_trunc('week', '2024-02-29'::date, 1, 'UTC', 'monday') AS date_week;
-- Leap years, proleptic Gregorian before 1583, after 2038, BC, infinity.
SELECT tsbucket.date_trunc('month', '2024-02-29 23:00+00'::timestamptz) AS leap_day,
       tsbucket.date_trunc('year', '2000-02-29 12:00+00'::timestamptz, 4) AS leap_year_bins,
       tsbucket.date_trunc('day', '1500-03-01 12:00+00'::timestamptz) AS y1500,
       tsbucket.date_trunc('week', '1582-10-15 12:00+00'::timestamptz) AS gregorian_start,
       tsbucket.date_trunc('month', '2100-03-15 12:00+00'::timestamptz, 5) AS y2100,
       tsbucket.date_trunc('year', '0044-03-15 12:00+00 BC'::timestamptz) AS bc,
       tsbucket.date_trunc('day', 'infinity'::timestamptz) AS inf;

-- $dateAdd examples.
SELECT tsbucket.date_add('2020-10-31T12:10:05Z', 'month', 1) AS month_end_clamped;
SELECT purchase, tsbucket.date_add(purchase, 'day', 3) AS expected_delivery
  FROM unnest(ARRAY['2020-12-31', '2021-02-28', '2021-02-26']::timestamptz[]) purchase;
SELECT location, login,
       tsbucket.date_add(login, 'day', 1, location) AS one_day,
       tsbucket.date_add(login, 'hour', 24, location) AS hours_24
  FROM (VALUES ('America/New_York', '2021-03-13T10:00:00-0500'::timestamptz),
               ('America/Mexico_City', '2021-03-13T10:00:00-00:00')) v(location, login);
-- $dateSubtract examples: month-end adjustment, 3 hours off January logouts, DST billing.
SELECT tsbucket.date_subtract('2021-03-31T12:10:05Z', 'month', 1) AS feb_28;
SELECT cust_id, logout, tsbucket.date_subtract(logout, 'hour', 3) AS logout_time
  FROM (VALUES (457, '2021-01-28T13:05:00Z'::timestamptz), (458, '2021-01-31T11:00:00Z')) v(cust_id, logout);
-- (MongoDB's table for Mexico City contradicts its own input; New York's rows are reproduced.)
SELECT location, login, tsbucket.date_subtract(login, 'day', 1, location) AS one_day,
       tsbucket.date_subtract(login, 'hour', 24, location) AS hours_24
  FROM (VALUES ('America/New_York', '2021-03-14T10:00:00-0500'::timestamptz),
               ('America/Mexico_City', '2021-03-14T10:00:00-00:00')) v(location, login);
-- Negative amounts, subtract, clamping, leap days, units below a day.
SELECT tsbucket.date_add('2024-03-31 08:00+00', 'month', -1) AS feb_clamped,
       tsbucket.date_subtract('2024-03-31 08:00+00', 'quarter', 1) AS dec_31,
       tsbucket.date_add('2024-02-29 00:00+00', 'year', 1) AS leap_clamped,
       tsbucket.date_add('2024-02-29 00:00+00', 'year', 4) AS leap_kept,
       tsbucket.date_subtract('2024-01-01 00:00+00', 'week', 2) AS two_weeks_back,
       tsbucket.date_add('2024-01-01 00:00+00', 'millisecond', -1) AS ms_back,
       tsbucket.date_add('2024-01-01 00:00+00', 'minute', 90) AS plus_90_min,
       tsbucket.date_subtract('2021-11-08 12:00+00', 'day', 1, 'America/New_York') AS across_fall_back;
SELECT tsbucket.date_add('2024-01-01 00:00+00', 'year', 300000);

-- $dateDiff examples.
SELECT purchased, delivered, tsbucket.date_diff(purchased, delivered, 'day') AS days
  FROM (VALUES ('2020-12-31'::timestamptz, '2021-01-05'::timestamptz), ('2021-02-28', '2021-03-07'),
               ('2021-02-16', '2021-02-18')) v(purchased, delivered);
SELECT trunc(avg(tsbucket.date_diff(p, d, 'day')), 1) AS num_days
  FROM (VALUES ('2020-12-31'::timestamptz, '2021-01-05'::timestamptz), ('2021-02-28', '2021-03-07'),
               ('2021-02-16', '2021-02-18')) v(p, d);
SELECT s, e, tsbucket.date_diff(s, e, 'year') AS years, tsbucket.date_diff(s, e, 'month') AS months,
       tsbucket.date_diff(s, e, 'day') AS days
  FROM (VALUES ('2010-01-01'::timestamptz, '2011-01-01'::timestamptz), ('2010-01-01', '2011-07-01'),
               ('2010-03-01', '2010-04-30')) v(s, e);
SELECT m, tsbucket.date_diff(s, e, 'week') AS sunday, tsbucket.date_diff(s, e, 'week', 'UTC', 'Monday') AS monday,
       tsbucket.date_diff(s, e, 'week', 'UTC', 'fri') AS friday
  FROM (VALUES ('January', '2021-01-01'::timestamptz, '2021-01-31'::timestamptz),
               ('February', '2021-02-01', '2021-02-28'), ('March', '2021-03-01', '2021-03-31')) v(m, s, e);
SELECT tsbucket.date_diff('2024-01-01 00:00:00.999+00', '2024-01-01 00:00:01+00', 'second') AS crossed_one_second,
       tsbucket.date_diff('2024-01-01 00:00:01+00', '2024-01-01 00:00:00.999+00', 'millisecond') AS negative,
       tsbucket.date_diff('2023-12-31 23:00+00', '2024-01-01 01:00+00', 'year') AS new_year,
       tsbucket.date_diff('2023-12-31 23:00+00', '2024-01-01 01:00+00', 'year', '-05:00') AS same_year_in_new_york,
       tsbucket.date_diff('2021-03-13 12:00+00', '2021-03-15 12:00+00', 'day', 'America/New_York') AS dst_days,
       tsbucket.date_diff('2021-03-14 06:30+00', '2021-03-14 07:30+00', 'hour', 'America/New_York') AS dst_hours;

-- NULLs give NULL; bad units, bin sizes, zones and week days are 22023.
SELECT tsbucket.date_trunc(NULL, now()) IS NULL AS a, tsbucket.date_trunc('day', NULL::timestamptz) IS NULL AS b,
       tsbucket.date_add(NULL, 'day', 1) IS NULL AS c, tsbucket.date_diff(now(), NULL, 'day') IS NULL AS d;
SELECT tsbucket.date_trunc('fortnight', now());
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.date_trunc('day', now(), 0);
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.date_trunc('day', now(), 1, 'Mars/Olympus');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.date_trunc('day', now(), 1, '+5');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.date_trunc('week', now(), 1, 'UTC', 'funday');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.date_diff(now(), now(), 'eon');
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- $expMovingAvg examples (stockPrices).
CREATE TABLE stock_prices (stock text, date timestamptz, price float8);
INSERT INTO stock_prices VALUES ('MDB', '2020-05-18T20:00:00Z', 13), ('MDB', '2020-05-19T20:00:00Z', 15.4),
  ('MDB', '2020-05-20T20:00:00Z', 12), ('MDB', '2020-05-21T20:00:00Z', 11.7), ('MSFT', '2020-05-18T20:00:00Z', 82),
  ('MSFT', '2020-05-19T20:00:00Z', 94), ('MSFT', '2020-05-20T20:00:00Z', 112), ('MSFT', '2020-05-21T20:00:00Z', 97.3);
SELECT stock, date, price, tsbucket.exp_moving_avg(price, 2) OVER w AS n_2,
       tsbucket.exp_moving_avg(price, 0.75) OVER w AS alpha_075
  FROM stock_prices WINDOW w AS (PARTITION BY stock ORDER BY date) ORDER BY stock, date;
SELECT tsbucket.exp_moving_avg(price, 0) OVER () FROM stock_prices LIMIT 1;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.exp_moving_avg(price, 1.5) OVER () FROM stock_prices LIMIT 1;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT tsbucket.exp_moving_avg(price, 0.0) OVER () FROM stock_prices LIMIT 1;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- NULL values are skipped, as MongoDB ignores null inputs.
SELECT x, tsbucket.exp_moving_avg(x, 1.0::float8 / 2) OVER (ORDER BY i) FROM (VALUES (1, 10.0::float8), (2, NULL), (3, 20)) v(i, x);

-- $derivative example (deliveryFleet): trucks faster than 50 mph over 30 seconds.
CREATE TABLE delivery_fleet (truck_id text, time_stamp timestamptz, miles float8);
INSERT INTO delivery_fleet VALUES ('1', '2020-05-18T14:10:30Z', 1295.1), ('1', '2020-05-18T14:11:00Z', 1295.63),
  ('1', '2020-05-18T14:11:30Z', 1296.25), ('1', '2020-05-18T14:12:00Z', 1296.76), ('2', '2020-05-18T14:10:30Z', 10234.1),
  ('2', '2020-05-18T14:11:00Z', 10234.33), ('2', '2020-05-18T14:11:30Z', 10234.73), ('2', '2020-05-18T14:12:00Z', 10235.13);
SELECT * FROM (
  SELECT truck_id, time_stamp, miles,
         tsbucket.derivative(miles, time_stamp, 'hour') OVER (PARTITION BY truck_id ORDER BY time_stamp
                             RANGE BETWEEN '30 seconds' PRECEDING AND CURRENT ROW) AS truck_average_speed
    FROM delivery_fleet) s
 WHERE truck_average_speed > 50 ORDER BY truck_id, time_stamp;

-- $integral example (powerConsumption): kilowatt-hours since the first reading.
CREATE TABLE power_consumption (meter text, time_stamp timestamptz, kilowatts float8);
INSERT INTO power_consumption VALUES ('1', '2020-05-18T14:10:30Z', 2.95), ('1', '2020-05-18T14:11:00Z', 2.7),
  ('1', '2020-05-18T14:11:30Z', 2.6), ('1', '2020-05-18T14:12:00Z', 2.98), ('2', '2020-05-18T14:10:30Z', 2.5),
  ('2', '2020-05-18T14:11:00Z', 2.25), ('2', '2020-05-18T14:11:30Z', 2.75), ('2', '2020-05-18T14:12:00Z', 2.82);
SELECT meter, time_stamp, kilowatts,
       tsbucket.integral(kilowatts, time_stamp, 'hour') OVER (PARTITION BY meter ORDER BY time_stamp) AS kilowatt_hours,
       tsbucket.time_weighted_avg(kilowatts, time_stamp) OVER (PARTITION BY meter ORDER BY time_stamp) AS twa
  FROM power_consumption ORDER BY meter, time_stamp;
SELECT tsbucket.integral(kilowatts, time_stamp, 'month') OVER () FROM power_consumption LIMIT 1;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
-- Time-weighted average: each value holds until the next reading.
SELECT tsbucket.time_weighted_avg(v, t) FROM (VALUES (10.0::float8, '2024-01-01 00:00+00'::timestamptz),
  (20, '2024-01-01 00:45+00'), (100, '2024-01-01 01:00+00')) x(v, t);

-- $linearFill and $locf examples (stock).
CREATE TABLE stock (time timestamptz, price float8);
INSERT INTO stock VALUES ('2021-03-08T09:00:00Z', 500), ('2021-03-08T10:00:00Z', NULL), ('2021-03-08T11:00:00Z', 515),
  ('2021-03-08T12:00:00Z', NULL), ('2021-03-08T13:00:00Z', NULL), ('2021-03-08T14:00:00Z', 485);
SELECT time, tsbucket.linear_fill(price, time) OVER (ORDER BY time) AS linear_fill_price,
       tsbucket.locf(price) OVER (ORDER BY time) AS locf_price
  FROM stock ORDER BY time;
-- Leading and trailing NULLs stay NULL; interpolation is by time, not by position.
SELECT i, tsbucket.linear_fill(v, t) OVER (ORDER BY t), tsbucket.locf(v) OVER (ORDER BY t)
  FROM (VALUES (1, NULL::float8, '2024-01-01 00:00+00'::timestamptz), (2, 0, '2024-01-01 01:00+00'),
               (3, NULL, '2024-01-01 01:15+00'), (4, 100, '2024-01-01 02:00+00'), (5, NULL, '2024-01-01 03:00+00')) x(i, v, t);
SELECT tsbucket.locf(s) OVER (ORDER BY i) FROM (VALUES (1, 'a'::text), (2, NULL), (3, 'c')) v(i, s);

-- moving_avg equals avg over sliding frames (within float rounding), NaN and infinities included.
SELECT x, tsbucket.moving_avg(x) OVER w, avg(x) OVER w
  FROM (VALUES (1, 1.0::float8), (2, 'Infinity'), (3, 3), (4, 4), (5, NULL), (6, 'NaN'), (7, 7), (8, 8), (9, 9)) v(i, x)
WINDOW w AS (ORDER BY i ROWS 2 PRECEDING);
SELECT setseed(0.5);
CREATE TABLE noisy AS SELECT i, (random() * 1000 - 500)::float8 AS x, (random() * 50)::int AS frame FROM generate_series(1, 20000) i;
SELECT count(*) AS rows_compared,
       count(*) FILTER (WHERE abs(m - a) > 1e-9 * greatest(1, abs(a))) AS mismatches
  FROM (SELECT tsbucket.moving_avg(x) OVER w AS m, avg(x) OVER w AS a
          FROM noisy WINDOW w AS (ORDER BY i ROWS BETWEEN 100 PRECEDING AND 3 FOLLOWING)) s;
SELECT count(*) FILTER (WHERE abs(m - a) > 1e-9 * greatest(1, abs(a))) AS range_frame_mismatches
  FROM (SELECT tsbucket.moving_avg(x) OVER w AS m, avg(x) OVER w AS a
          FROM noisy WINDOW w AS (ORDER BY frame RANGE BETWEEN 5 PRECEDING AND CURRENT ROW)) s;
SELECT tsbucket.moving_avg(x) AS plain_aggregate, avg(x) FROM noisy;
DROP TABLE cake, stock_prices, delivery_fleet, power_consumption, stock, noisy;
