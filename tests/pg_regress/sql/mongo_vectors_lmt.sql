-- MongoDB's test vectors (see mongo_vectors) before 1970 in zones other than UTC. Before the
-- standard time zones (1883 in New York, 1901 in Madrid) the tz database gives local mean time, and
-- some vectors depend on it; PostgreSQL 15 reads Debian's tzdata and PostgreSQL 18 its own copy, so
-- this file may need an expected output per version (mongo_vectors_lmt_1.out) if they ever differ.

SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- MongoDB's TimeZone::createFromDateParts(zone, local time). For the times used here
-- Postgres's AT TIME ZONE resolves as timelib does for it: a time that DST skips is read with
-- the offset before the change, a repeated one with the offset after it. Zones may also be
-- MongoDB's "+hh:mm".
-- (Through the TimeZone setting, not AT TIME ZONE: AT TIME ZONE reads CET, EET, MET and WET
-- as fixed-offset abbreviations, while they are also zones with DST, as in MongoDB.)
CREATE FUNCTION pg_temp.local(zone text, t timestamp) RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  saved text := current_setting('timezone');
  r timestamptz;
BEGIN
  IF zone ~ '^[+-]\d\d:\d\d$' THEN
    RETURN (t::text || zone)::timestamptz;
  END IF;
  PERFORM set_config('timezone', zone, true);
  r := t::text::timestamptz;
  PERFORM set_config('timezone', saved, true);
  RETURN r;
END $$;
-- The SQLSTATE a statement raises, or 'no error'.
CREATE FUNCTION pg_temp.sqlstate(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;
-- MongoDB's kAllTimezones: every zone of its database, and -10:00.
CREATE TEMP TABLE zones AS
  SELECT name AS z FROM pg_timezone_names
   WHERE name !~ '^(posix|right)/' AND name NOT IN ('Factory', 'localtime', 'posixrules')
  UNION ALL SELECT '-10:00';

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Month), for every zone
-- Postgres knows and -10:00 (kAllTimezones). mismatching_zones lists the zones whose result differs
-- from MongoDB's.
SELECT vector, count(*) > 300 AS all_zones, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(z, ' ' ORDER BY z) FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_zones,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM zones CROSS JOIN LATERAL (VALUES
    (1, 'TruncateDate.Month #5', tsbucket.date_trunc('month', pg_temp.local(z, '1900-01-01 00:00:00'), 1, z), pg_temp.local(z, '1900-01-01 00:00:00')),
    (2, 'TruncateDate.Month #6', tsbucket.date_trunc('month', pg_temp.local(z, '1900-03-31 23:59:59.999'), 3, z), pg_temp.local(z, '1900-01-01 00:00:00'))
  ) v(n, vector, got, mongo)
 GROUP BY n, vector ORDER BY n;

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Quarter), for every
-- zone Postgres knows and -10:00 (kAllTimezones). mismatching_zones lists the zones whose result
-- differs from MongoDB's.
SELECT vector, count(*) > 300 AS all_zones, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(z, ' ' ORDER BY z) FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_zones,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM zones CROSS JOIN LATERAL (VALUES
    (1, 'TruncateDate.Quarter #5', tsbucket.date_trunc('quarter', pg_temp.local(z, '1900-01-01 00:00:00'), 1, z), pg_temp.local(z, '1900-01-01 00:00:00')),
    (2, 'TruncateDate.Quarter #6', tsbucket.date_trunc('quarter', pg_temp.local(z, '1900-03-31 23:59:59.999'), 1, z), pg_temp.local(z, '1900-01-01 00:00:00'))
  ) v(n, vector, got, mongo)
 GROUP BY n, vector ORDER BY n;

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Year), for every zone
-- Postgres knows and -10:00 (kAllTimezones). mismatching_zones lists the zones whose result differs
-- from MongoDB's.
SELECT vector, count(*) > 300 AS all_zones, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(z, ' ' ORDER BY z) FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_zones,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM zones CROSS JOIN LATERAL (VALUES
    (1, 'TruncateDate.Year #5', tsbucket.date_trunc('year', pg_temp.local(z, '1950-01-01 00:00:00'), 1, z), pg_temp.local(z, '1950-01-01 00:00:00')),
    (2, 'TruncateDate.Year #6', tsbucket.date_trunc('year', pg_temp.local(z, '1950-12-31 23:59:59.999'), 1, z), pg_temp.local(z, '1950-01-01 00:00:00'))
  ) v(n, vector, got, mongo)
 GROUP BY n, vector ORDER BY n;

-- src/mongo/db/query/datetime/date_time_support_test.cpp: the vectors before 1970 in a zone other
-- than UTC. In years before 1883 New York keeps local mean time (-04:56:02) and Madrid until 1901
-- -00:14:44; the results below depend on that only through DateDiff.Minute #4 and DateDiff.Second
-- #8, the rest only need Postgres to read back the local times it was given.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Year #4', tsbucket.date_diff(pg_temp.local('America/New_York', '1002-01-01 00:00:00'), pg_temp.local('America/New_York', '2001-01-01 00:00:00'), 'year', 'America/New_York'), 999::bigint),
  ('DateDiff.Month #4', tsbucket.date_diff(pg_temp.local('America/New_York', '0520-03-01 00:00:00'), pg_temp.local('America/New_York', '2020-03-01 00:00:00'), 'month', 'America/New_York'), 18000::bigint),
  ('DateDiff.Quarter #3', tsbucket.date_diff(pg_temp.local('America/New_York', '2000-12-31 23:59:59.500'), pg_temp.local('America/New_York', '1500-09-30 23:59:59.999'), 'quarter', 'America/New_York'), -2001::bigint),
  ('DateDiff.Day #5', tsbucket.date_diff(pg_temp.local('America/New_York', '1583-01-01 00:00:00'), pg_temp.local('America/New_York', '1601-01-01 00:00:00'), 'day', 'America/New_York'), 6575::bigint),
  ('DateDiff.Day #6', tsbucket.date_diff(pg_temp.local('America/New_York', '1601-01-01 00:00:00'), pg_temp.local('America/New_York', '1583-01-01 00:00:00'), 'day', 'America/New_York'), -6575::bigint),
  ('DateDiff.Minute #4', tsbucket.date_diff(pg_temp.local('America/New_York', '1585-11-08 01:55:00'), pg_temp.local('America/New_York', '2030-11-08 01:30:59.999'), 'minute', 'America/New_York'), 234047498::bigint),
  ('DateDiff.Second #8', tsbucket.date_diff(pg_temp.local('Europe/Madrid', '1900-12-31 23:45:15'), pg_temp.local('Europe/Madrid', '1901-01-01 00:00:00'), 'second', 'Europe/Madrid'), 1::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Day): the loop over years
-- -1000 .. 2999 in New York, with timelib_day_of_year(year, 12, 31) + 1 (the length of the year) as
-- the oracle.
SELECT 'DateDiff.Day loop' AS vector, count(*) AS years,
       count(*) FILTER (WHERE got <> mongo) AS mismatches,
       coalesce(string_agg(y::text, ' ') FILTER (WHERE got <> mongo), '') AS mismatching_years,
       count(*) FILTER (WHERE got <> mongo) = 0 AS ok
  FROM generate_series(-1000, 2999) y,
       -- Astronomical year numbers, as timelib's: year 0 is 1 BC.
       LATERAL (SELECT CASE WHEN y > 0 THEN y ELSE y - 1 END AS py, CASE WHEN y + 1 > 0 THEN y + 1 ELSE y END AS py1) p,
       LATERAL (SELECT tsbucket.date_diff(make_timestamp(py, 2, 3, 0, 0, 0) AT TIME ZONE 'America/New_York',
                                          make_timestamp(py1, 2, 3, 0, 0, 0) AT TIME ZONE 'America/New_York', 'day',
                                          'America/New_York') AS got,
                       CASE WHEN y % 4 = 0 AND (y % 100 <> 0 OR y % 400 = 0) THEN 366 ELSE 365 END AS mongo) r;
