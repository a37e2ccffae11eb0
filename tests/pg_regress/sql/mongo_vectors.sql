-- MongoDB's own test vectors for $dateTrunc, $dateAdd, $dateSubtract and $dateDiff, one row
-- per vector: got is tsbucket's answer, mongo MongoDB's, ok whether they agree (so any
-- disagreement shows as an f in the expected output). Each group names the file and TEST or
-- testCase it comes from, in github.com/mongodb/mongo:
-- src/mongo/db/query/datetime/date_time_support_test.cpp and
-- jstests/aggregation/expressions/date_trunc.js, date_diff.js, date_add_subtract.js.
-- Vectors before 1970 outside UTC are in mongo_vectors_lmt (they depend on the tz database).
-- Vectors about BSON types, about dates outside Postgres's range (year -200000000, Date_t min/max)
-- and bin sizes beyond int4 cannot be written here; the groups say which.

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

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Year) (the fourth vector,
-- from year 1002, is in mongo_vectors_lmt).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Year #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2000-12-31 23:59:59.500'), pg_temp.local('America/New_York', '2000-12-31 23:59:59.999'), 'year', 'America/New_York'), 0::bigint),
  ('DateDiff.Year #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2000-12-31 23:59:59.500'), pg_temp.local('America/New_York', '2001-01-01 00:00:00'), 'year', 'America/New_York'), 1::bigint),
  ('DateDiff.Year #3', tsbucket.date_diff(pg_temp.local('America/New_York', '2001-01-01 00:00:00'), pg_temp.local('America/New_York', '2000-12-31 23:59:59.500'), 'year', 'America/New_York'), -1::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Month) (the fourth vector,
-- from year 520, is in mongo_vectors_lmt).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Month #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-02-28 23:59:59.500'), pg_temp.local('America/New_York', '2020-02-29 23:59:59.999'), 'month', 'America/New_York'), 0::bigint),
  ('DateDiff.Month #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-02-29 23:59:59.999'), pg_temp.local('America/New_York', '2020-03-01 00:00:00'), 'month', 'America/New_York'), 1::bigint),
  ('DateDiff.Month #3', tsbucket.date_diff(pg_temp.local('America/New_York', '2010-02-28 23:59:59.999'), pg_temp.local('America/New_York', '2008-12-31 23:59:59.500'), 'month', 'America/New_York'), -14::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Quarter) (the third
-- vector, to year 1500, is in mongo_vectors_lmt).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Quarter #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-01-01 00:00:00'), pg_temp.local('America/New_York', '2020-03-31 23:59:59.999'), 'quarter', 'America/New_York'), 0::bigint),
  ('DateDiff.Quarter #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-01-01 00:00:00'), pg_temp.local('America/New_York', '2020-04-01 00:00:00'), 'quarter', 'America/New_York'), 1::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Week).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Week #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-02 00:00:00'), pg_temp.local('America/New_York', '2020-11-09 00:00:00'), 'week', 'America/New_York', 'monday'), 1::bigint),
  ('DateDiff.Week #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-02 00:00:00'), pg_temp.local('America/New_York', '2020-11-15 00:00:00'), 'week', 'America/New_York', 'monday'), 1::bigint),
  ('DateDiff.Week #3', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-02 00:00:00'), pg_temp.local('America/New_York', '2020-11-08 00:00:00'), 'week', 'America/New_York', 'monday'), 0::bigint),
  ('DateDiff.Week #4', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-02 00:00:00'), pg_temp.local('America/New_York', '2020-11-02 00:00:00'), 'week', 'America/New_York', 'monday'), 0::bigint),
  ('DateDiff.Week #5', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-02 00:00:00'), pg_temp.local('America/New_York', '2020-11-03 00:00:00'), 'week', 'America/New_York', 'monday'), 0::bigint),
  ('DateDiff.Week #6', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 00:00:00'), pg_temp.local('America/New_York', '2020-11-09 00:00:00'), 'week', 'America/New_York', 'monday'), 1::bigint),
  ('DateDiff.Week #7', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 00:00:00'), pg_temp.local('America/New_York', '2020-11-15 00:00:00'), 'week', 'America/New_York', 'monday'), 1::bigint),
  ('DateDiff.Week #8', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-10 00:00:00'), pg_temp.local('America/New_York', '2020-10-08 00:00:00'), 'week', 'America/New_York', 'monday'), -5::bigint),
  ('DateDiff.Week #9', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-13 00:00:00'), pg_temp.local('America/New_York', '2020-11-15 00:00:00'), 'week', 'America/New_York', 'sunday'), 1::bigint),
  ('DateDiff.Week #10', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-13 00:00:00'), pg_temp.local('America/New_York', '2020-11-14 00:00:00'), 'week', 'America/New_York', 'sunday'), 0::bigint),
  ('DateDiff.Week #11', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 00:00:00'), pg_temp.local('America/New_York', '2020-11-15 00:00:00'), 'week', 'America/New_York', 'sunday'), 1::bigint),
  ('DateDiff.Week #12', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-07 00:00:00'), pg_temp.local('America/New_York', '2020-11-15 00:00:00'), 'week', 'America/New_York', 'sunday'), 2::bigint),
  ('DateDiff.Week #13', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-04 00:00:00'), pg_temp.local('America/New_York', '2020-11-10 00:00:00'), 'week', 'America/New_York', 'wednesday'), 0::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Day) (the vectors from
-- 1583 and the loop over years -1000..2999 are in mongo_vectors_lmt).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Day #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 00:00:00'), pg_temp.local('America/New_York', '2020-11-08 23:59:59.999'), 'day', 'America/New_York'), 0::bigint),
  ('DateDiff.Day #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 00:00:00'), pg_temp.local('America/New_York', '2020-11-09 00:00:00'), 'day', 'America/New_York'), 1::bigint),
  ('DateDiff.Day #3', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-09 00:00:00'), pg_temp.local('America/New_York', '2020-11-08 23:59:59.999'), 'day', 'America/New_York'), -1::bigint),
  ('DateDiff.Day #4', tsbucket.date_diff(pg_temp.local('America/New_York', '1999-12-30 00:00:00'), pg_temp.local('America/New_York', '2001-01-02 00:00:00'), 'day', 'America/New_York'), 369::bigint),
  ('DateDiff.Day #7', tsbucket.date_diff(pg_temp.local('America/New_York', '2004-02-10 00:00:00'), pg_temp.local('America/New_York', '2004-03-10 00:00:00'), 'day', 'America/New_York'), 29::bigint),
  ('DateDiff.Day #8', tsbucket.date_diff(pg_temp.local('Australia/Eucla', '2005-02-10 00:00:00'), pg_temp.local('Australia/Eucla', '2005-03-10 00:00:00'), 'day', 'Australia/Eucla'), 28::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Hour): New York's DST
-- changes count elapsed hours (#5-#8), Lord Howe's 30-minute change counts the clock (#10), Eucla
-- is +08:45 (#4).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Hour #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:00:00'), pg_temp.local('America/New_York', '2020-11-08 01:59:59.999'), 'hour', 'America/New_York'), 0::bigint),
  ('DateDiff.Hour #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:59:59.999'), pg_temp.local('America/New_York', '2020-11-08 02:00:00'), 'hour', 'America/New_York'), 1::bigint),
  ('DateDiff.Hour #3', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-10 00:00:00'), pg_temp.local('America/New_York', '2020-11-08 23:59:59.999'), 'hour', 'America/New_York'), -25::bigint),
  ('DateDiff.Hour #4', tsbucket.date_diff(pg_temp.local('Australia/Eucla', '2020-11-10 20:55:00'), pg_temp.local('Australia/Eucla', '2020-11-10 21:05:00'), 'hour', 'Australia/Eucla'), 1::bigint),
  ('DateDiff.Hour #5', tsbucket.date_diff(timestamptz '2020-11-01 05:00:00+00', timestamptz '2020-11-01 06:00:00+00', 'hour', 'America/New_York'), 1::bigint),
  ('DateDiff.Hour #6', tsbucket.date_diff(timestamptz '2020-11-01 06:00:00+00', timestamptz '2020-11-01 05:00:00+00', 'hour', 'America/New_York'), -1::bigint),
  ('DateDiff.Hour #7', tsbucket.date_diff(timestamptz '2020-03-08 06:45:00+00', timestamptz '2020-03-08 07:00:00+00', 'hour', 'America/New_York'), 1::bigint),
  ('DateDiff.Hour #8', tsbucket.date_diff(timestamptz '2020-03-08 07:00:00+00', timestamptz '2020-03-08 06:45:00+00', 'hour', 'America/New_York'), -1::bigint),
  ('DateDiff.Hour #9', tsbucket.date_diff(pg_temp.local('America/New_York', '1999-01-01 00:00:00'), pg_temp.local('America/New_York', '2001-01-01 01:00:00'), 'hour', 'America/New_York'), 17545::bigint),
  ('DateDiff.Hour #10', tsbucket.date_diff(pg_temp.local('Australia/Lord_Howe', '2021-04-04 01:00:00'), pg_temp.local('Australia/Lord_Howe', '2021-04-04 02:00:00'), 'hour', 'Australia/Lord_Howe'), 1::bigint),
  ('DateDiff.Hour #11', tsbucket.date_diff(pg_temp.local('Australia/Lord_Howe', '2021-10-03 01:00:00'), pg_temp.local('Australia/Lord_Howe', '2021-10-03 02:30:00'), 'hour', 'Australia/Lord_Howe'), 1::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Minute) (the fourth
-- vector, from 1585, is in mongo_vectors_lmt).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Minute #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:30:00'), pg_temp.local('America/New_York', '2020-11-08 01:30:59.999'), 'minute', 'America/New_York'), 0::bigint),
  ('DateDiff.Minute #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:30:59.999'), pg_temp.local('America/New_York', '2020-11-08 01:31:00'), 'minute', 'America/New_York'), 1::bigint),
  ('DateDiff.Minute #3', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:55:00'), pg_temp.local('America/New_York', '2020-11-08 01:30:59.999'), 'minute', 'America/New_York'), -25::bigint),
  ('DateDiff.Minute #5', tsbucket.date_diff(pg_temp.local('Australia/Lord_Howe', '2021-04-04 01:00:00'), pg_temp.local('Australia/Lord_Howe', '2021-04-04 02:00:00'), 'minute', 'Australia/Lord_Howe'), 90::bigint),
  ('DateDiff.Minute #6', tsbucket.date_diff(pg_temp.local('Australia/Lord_Howe', '2021-10-03 01:00:00'), pg_temp.local('Australia/Lord_Howe', '2021-10-03 02:30:00'), 'minute', 'Australia/Lord_Howe'), 60::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Second) (the last vector,
-- Madrid in 1900, is in mongo_vectors_lmt).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Second #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:30:15'), pg_temp.local('America/New_York', '2020-11-08 01:30:15.999'), 'second', 'America/New_York'), 0::bigint),
  ('DateDiff.Second #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:30:15.999'), pg_temp.local('America/New_York', '2020-11-08 01:30:16'), 'second', 'America/New_York'), 1::bigint),
  ('DateDiff.Second #3', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 02:10:16.999'), pg_temp.local('America/New_York', '2020-11-08 01:30:15.999'), 'second', 'America/New_York'), -2401::bigint),
  ('DateDiff.Second #4', tsbucket.date_diff(timestamptz '1970-01-01 00:00:00+00', timestamptz '2020-11-10 01:30:16+00', 'second', 'America/New_York'), 1604971816::bigint),
  ('DateDiff.Second #5', tsbucket.date_diff(timestamptz '1969-12-31 23:59:59.999+00', timestamptz '1970-01-01 00:00:01+00', 'second', 'UTC'), 2::bigint),
  ('DateDiff.Second #6', tsbucket.date_diff(pg_temp.local('Australia/Lord_Howe', '2021-04-04 01:00:00'), pg_temp.local('Australia/Lord_Howe', '2021-04-04 02:00:00'), 'second', 'Australia/Lord_Howe'), 5400::bigint),
  ('DateDiff.Second #7', tsbucket.date_diff(pg_temp.local('Australia/Lord_Howe', '2021-10-03 01:00:00'), pg_temp.local('Australia/Lord_Howe', '2021-10-03 02:30:00'), 'second', 'Australia/Lord_Howe'), 3600::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateDiff, Millisecond) (its overflow
-- vector, from Date_t min to max, lies outside Postgres's timestamp range).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateDiff.Millisecond #1', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:30:15'), pg_temp.local('America/New_York', '2020-11-08 01:30:15.100'), 'millisecond', 'America/New_York'), 100::bigint),
  ('DateDiff.Millisecond #2', tsbucket.date_diff(pg_temp.local('America/New_York', '2020-11-08 01:30:16.500'), pg_temp.local('America/New_York', '2020-11-08 01:30:15'), 'millisecond', 'America/New_York'), -1500::bigint),
  ('DateDiff.Millisecond #3', tsbucket.date_diff(timestamptz '1970-01-01 00:00:00+00', timestamptz '2020-11-10 01:30:16+00', 'millisecond', 'America/New_York'), 1604971816000::bigint)
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Millisecond), for each
-- of kTimezones.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('TruncateDate.Millisecond #1 UTC', tsbucket.date_trunc('millisecond', pg_temp.local('UTC', '2000-01-01 00:00:02'), 1020, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #2 UTC', tsbucket.date_trunc('millisecond', pg_temp.local('UTC', '2000-01-01 00:00:01.020'), 1020, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #3 UTC', tsbucket.date_trunc('millisecond', pg_temp.local('UTC', '2000-01-01 00:00:02.039'), 1020, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #4 UTC', tsbucket.date_trunc('millisecond', pg_temp.local('UTC', '2000-01-01 00:00:02.040'), 1020, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:00:02.040')),
  ('TruncateDate.Millisecond #5 UTC', tsbucket.date_trunc('millisecond', pg_temp.local('UTC', '1999-12-31 23:59:59.999'), 1500, 'UTC'), pg_temp.local('UTC', '1999-12-31 23:59:58.500')),
  ('TruncateDate.Millisecond #1 America/New_York', tsbucket.date_trunc('millisecond', pg_temp.local('America/New_York', '2000-01-01 00:00:02'), 1020, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #2 America/New_York', tsbucket.date_trunc('millisecond', pg_temp.local('America/New_York', '2000-01-01 00:00:01.020'), 1020, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #3 America/New_York', tsbucket.date_trunc('millisecond', pg_temp.local('America/New_York', '2000-01-01 00:00:02.039'), 1020, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #4 America/New_York', tsbucket.date_trunc('millisecond', pg_temp.local('America/New_York', '2000-01-01 00:00:02.040'), 1020, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:00:02.040')),
  ('TruncateDate.Millisecond #5 America/New_York', tsbucket.date_trunc('millisecond', pg_temp.local('America/New_York', '1999-12-31 23:59:59.999'), 1500, 'America/New_York'), pg_temp.local('America/New_York', '1999-12-31 23:59:58.500')),
  ('TruncateDate.Millisecond #1 Australia/Eucla', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Eucla', '2000-01-01 00:00:02'), 1020, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #2 Australia/Eucla', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Eucla', '2000-01-01 00:00:01.020'), 1020, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #3 Australia/Eucla', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Eucla', '2000-01-01 00:00:02.039'), 1020, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #4 Australia/Eucla', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Eucla', '2000-01-01 00:00:02.040'), 1020, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:00:02.040')),
  ('TruncateDate.Millisecond #5 Australia/Eucla', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Eucla', '1999-12-31 23:59:59.999'), 1500, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '1999-12-31 23:59:58.500')),
  ('TruncateDate.Millisecond #1 Europe/Sofia', tsbucket.date_trunc('millisecond', pg_temp.local('Europe/Sofia', '2000-01-01 00:00:02'), 1020, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #2 Europe/Sofia', tsbucket.date_trunc('millisecond', pg_temp.local('Europe/Sofia', '2000-01-01 00:00:01.020'), 1020, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #3 Europe/Sofia', tsbucket.date_trunc('millisecond', pg_temp.local('Europe/Sofia', '2000-01-01 00:00:02.039'), 1020, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #4 Europe/Sofia', tsbucket.date_trunc('millisecond', pg_temp.local('Europe/Sofia', '2000-01-01 00:00:02.040'), 1020, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:00:02.040')),
  ('TruncateDate.Millisecond #5 Europe/Sofia', tsbucket.date_trunc('millisecond', pg_temp.local('Europe/Sofia', '1999-12-31 23:59:59.999'), 1500, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '1999-12-31 23:59:58.500')),
  ('TruncateDate.Millisecond #1 Australia/Sydney', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Sydney', '2000-01-01 00:00:02'), 1020, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #2 Australia/Sydney', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Sydney', '2000-01-01 00:00:01.020'), 1020, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #3 Australia/Sydney', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Sydney', '2000-01-01 00:00:02.039'), 1020, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #4 Australia/Sydney', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Sydney', '2000-01-01 00:00:02.040'), 1020, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:00:02.040')),
  ('TruncateDate.Millisecond #5 Australia/Sydney', tsbucket.date_trunc('millisecond', pg_temp.local('Australia/Sydney', '1999-12-31 23:59:59.999'), 1500, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '1999-12-31 23:59:58.500')),
  ('TruncateDate.Millisecond #1 -10:00', tsbucket.date_trunc('millisecond', pg_temp.local('-10:00', '2000-01-01 00:00:02'), 1020, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #2 -10:00', tsbucket.date_trunc('millisecond', pg_temp.local('-10:00', '2000-01-01 00:00:01.020'), 1020, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #3 -10:00', tsbucket.date_trunc('millisecond', pg_temp.local('-10:00', '2000-01-01 00:00:02.039'), 1020, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:00:01.020')),
  ('TruncateDate.Millisecond #4 -10:00', tsbucket.date_trunc('millisecond', pg_temp.local('-10:00', '2000-01-01 00:00:02.040'), 1020, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:00:02.040')),
  ('TruncateDate.Millisecond #5 -10:00', tsbucket.date_trunc('millisecond', pg_temp.local('-10:00', '1999-12-31 23:59:59.999'), 1500, '-10:00'), pg_temp.local('-10:00', '1999-12-31 23:59:58.500'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Second), for each of
-- kTimezones.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('TruncateDate.Second #1 UTC', tsbucket.date_trunc('second', pg_temp.local('UTC', '2000-01-01 00:00:09'), 5, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #2 UTC', tsbucket.date_trunc('second', pg_temp.local('UTC', '2000-01-01 00:00:05'), 5, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #3 UTC', tsbucket.date_trunc('second', pg_temp.local('UTC', '2000-01-01 00:00:09.999'), 5, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #4 UTC', tsbucket.date_trunc('second', pg_temp.local('UTC', '2000-01-01 00:00:10'), 5, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:00:10')),
  ('TruncateDate.Second #5 UTC', tsbucket.date_trunc('second', pg_temp.local('UTC', '1999-12-31 23:59:51'), 5, 'UTC'), pg_temp.local('UTC', '1999-12-31 23:59:50')),
  ('TruncateDate.Second #1 America/New_York', tsbucket.date_trunc('second', pg_temp.local('America/New_York', '2000-01-01 00:00:09'), 5, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #2 America/New_York', tsbucket.date_trunc('second', pg_temp.local('America/New_York', '2000-01-01 00:00:05'), 5, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #3 America/New_York', tsbucket.date_trunc('second', pg_temp.local('America/New_York', '2000-01-01 00:00:09.999'), 5, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #4 America/New_York', tsbucket.date_trunc('second', pg_temp.local('America/New_York', '2000-01-01 00:00:10'), 5, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:00:10')),
  ('TruncateDate.Second #5 America/New_York', tsbucket.date_trunc('second', pg_temp.local('America/New_York', '1999-12-31 23:59:51'), 5, 'America/New_York'), pg_temp.local('America/New_York', '1999-12-31 23:59:50')),
  ('TruncateDate.Second #1 Australia/Eucla', tsbucket.date_trunc('second', pg_temp.local('Australia/Eucla', '2000-01-01 00:00:09'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #2 Australia/Eucla', tsbucket.date_trunc('second', pg_temp.local('Australia/Eucla', '2000-01-01 00:00:05'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #3 Australia/Eucla', tsbucket.date_trunc('second', pg_temp.local('Australia/Eucla', '2000-01-01 00:00:09.999'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #4 Australia/Eucla', tsbucket.date_trunc('second', pg_temp.local('Australia/Eucla', '2000-01-01 00:00:10'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:00:10')),
  ('TruncateDate.Second #5 Australia/Eucla', tsbucket.date_trunc('second', pg_temp.local('Australia/Eucla', '1999-12-31 23:59:51'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '1999-12-31 23:59:50')),
  ('TruncateDate.Second #1 Europe/Sofia', tsbucket.date_trunc('second', pg_temp.local('Europe/Sofia', '2000-01-01 00:00:09'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #2 Europe/Sofia', tsbucket.date_trunc('second', pg_temp.local('Europe/Sofia', '2000-01-01 00:00:05'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #3 Europe/Sofia', tsbucket.date_trunc('second', pg_temp.local('Europe/Sofia', '2000-01-01 00:00:09.999'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #4 Europe/Sofia', tsbucket.date_trunc('second', pg_temp.local('Europe/Sofia', '2000-01-01 00:00:10'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:00:10')),
  ('TruncateDate.Second #5 Europe/Sofia', tsbucket.date_trunc('second', pg_temp.local('Europe/Sofia', '1999-12-31 23:59:51'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '1999-12-31 23:59:50')),
  ('TruncateDate.Second #1 Australia/Sydney', tsbucket.date_trunc('second', pg_temp.local('Australia/Sydney', '2000-01-01 00:00:09'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #2 Australia/Sydney', tsbucket.date_trunc('second', pg_temp.local('Australia/Sydney', '2000-01-01 00:00:05'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #3 Australia/Sydney', tsbucket.date_trunc('second', pg_temp.local('Australia/Sydney', '2000-01-01 00:00:09.999'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #4 Australia/Sydney', tsbucket.date_trunc('second', pg_temp.local('Australia/Sydney', '2000-01-01 00:00:10'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:00:10')),
  ('TruncateDate.Second #5 Australia/Sydney', tsbucket.date_trunc('second', pg_temp.local('Australia/Sydney', '1999-12-31 23:59:51'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '1999-12-31 23:59:50')),
  ('TruncateDate.Second #1 -10:00', tsbucket.date_trunc('second', pg_temp.local('-10:00', '2000-01-01 00:00:09'), 5, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #2 -10:00', tsbucket.date_trunc('second', pg_temp.local('-10:00', '2000-01-01 00:00:05'), 5, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #3 -10:00', tsbucket.date_trunc('second', pg_temp.local('-10:00', '2000-01-01 00:00:09.999'), 5, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:00:05')),
  ('TruncateDate.Second #4 -10:00', tsbucket.date_trunc('second', pg_temp.local('-10:00', '2000-01-01 00:00:10'), 5, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:00:10')),
  ('TruncateDate.Second #5 -10:00', tsbucket.date_trunc('second', pg_temp.local('-10:00', '1999-12-31 23:59:51'), 5, '-10:00'), pg_temp.local('-10:00', '1999-12-31 23:59:50'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Minute), for each of
-- kTimezones.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('TruncateDate.Minute #1 UTC', tsbucket.date_trunc('minute', pg_temp.local('UTC', '2000-01-01 00:09:00'), 5, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #2 UTC', tsbucket.date_trunc('minute', pg_temp.local('UTC', '2000-01-01 00:05:00'), 5, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #3 UTC', tsbucket.date_trunc('minute', pg_temp.local('UTC', '2000-01-01 00:09:59.999'), 5, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #4 UTC', tsbucket.date_trunc('minute', pg_temp.local('UTC', '2000-01-01 00:10:10'), 5, 'UTC'), pg_temp.local('UTC', '2000-01-01 00:10:00')),
  ('TruncateDate.Minute #5 UTC', tsbucket.date_trunc('minute', pg_temp.local('UTC', '1999-12-31 23:54:00'), 5, 'UTC'), pg_temp.local('UTC', '1999-12-31 23:50:00')),
  ('TruncateDate.Minute #1 America/New_York', tsbucket.date_trunc('minute', pg_temp.local('America/New_York', '2000-01-01 00:09:00'), 5, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #2 America/New_York', tsbucket.date_trunc('minute', pg_temp.local('America/New_York', '2000-01-01 00:05:00'), 5, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #3 America/New_York', tsbucket.date_trunc('minute', pg_temp.local('America/New_York', '2000-01-01 00:09:59.999'), 5, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #4 America/New_York', tsbucket.date_trunc('minute', pg_temp.local('America/New_York', '2000-01-01 00:10:10'), 5, 'America/New_York'), pg_temp.local('America/New_York', '2000-01-01 00:10:00')),
  ('TruncateDate.Minute #5 America/New_York', tsbucket.date_trunc('minute', pg_temp.local('America/New_York', '1999-12-31 23:54:00'), 5, 'America/New_York'), pg_temp.local('America/New_York', '1999-12-31 23:50:00')),
  ('TruncateDate.Minute #1 Australia/Eucla', tsbucket.date_trunc('minute', pg_temp.local('Australia/Eucla', '2000-01-01 00:09:00'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #2 Australia/Eucla', tsbucket.date_trunc('minute', pg_temp.local('Australia/Eucla', '2000-01-01 00:05:00'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #3 Australia/Eucla', tsbucket.date_trunc('minute', pg_temp.local('Australia/Eucla', '2000-01-01 00:09:59.999'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #4 Australia/Eucla', tsbucket.date_trunc('minute', pg_temp.local('Australia/Eucla', '2000-01-01 00:10:10'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2000-01-01 00:10:00')),
  ('TruncateDate.Minute #5 Australia/Eucla', tsbucket.date_trunc('minute', pg_temp.local('Australia/Eucla', '1999-12-31 23:54:00'), 5, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '1999-12-31 23:50:00')),
  ('TruncateDate.Minute #1 Europe/Sofia', tsbucket.date_trunc('minute', pg_temp.local('Europe/Sofia', '2000-01-01 00:09:00'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #2 Europe/Sofia', tsbucket.date_trunc('minute', pg_temp.local('Europe/Sofia', '2000-01-01 00:05:00'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #3 Europe/Sofia', tsbucket.date_trunc('minute', pg_temp.local('Europe/Sofia', '2000-01-01 00:09:59.999'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #4 Europe/Sofia', tsbucket.date_trunc('minute', pg_temp.local('Europe/Sofia', '2000-01-01 00:10:10'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2000-01-01 00:10:00')),
  ('TruncateDate.Minute #5 Europe/Sofia', tsbucket.date_trunc('minute', pg_temp.local('Europe/Sofia', '1999-12-31 23:54:00'), 5, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '1999-12-31 23:50:00')),
  ('TruncateDate.Minute #1 Australia/Sydney', tsbucket.date_trunc('minute', pg_temp.local('Australia/Sydney', '2000-01-01 00:09:00'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #2 Australia/Sydney', tsbucket.date_trunc('minute', pg_temp.local('Australia/Sydney', '2000-01-01 00:05:00'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #3 Australia/Sydney', tsbucket.date_trunc('minute', pg_temp.local('Australia/Sydney', '2000-01-01 00:09:59.999'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #4 Australia/Sydney', tsbucket.date_trunc('minute', pg_temp.local('Australia/Sydney', '2000-01-01 00:10:10'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2000-01-01 00:10:00')),
  ('TruncateDate.Minute #5 Australia/Sydney', tsbucket.date_trunc('minute', pg_temp.local('Australia/Sydney', '1999-12-31 23:54:00'), 5, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '1999-12-31 23:50:00')),
  ('TruncateDate.Minute #1 -10:00', tsbucket.date_trunc('minute', pg_temp.local('-10:00', '2000-01-01 00:09:00'), 5, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #2 -10:00', tsbucket.date_trunc('minute', pg_temp.local('-10:00', '2000-01-01 00:05:00'), 5, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #3 -10:00', tsbucket.date_trunc('minute', pg_temp.local('-10:00', '2000-01-01 00:09:59.999'), 5, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:05:00')),
  ('TruncateDate.Minute #4 -10:00', tsbucket.date_trunc('minute', pg_temp.local('-10:00', '2000-01-01 00:10:10'), 5, '-10:00'), pg_temp.local('-10:00', '2000-01-01 00:10:00')),
  ('TruncateDate.Minute #5 -10:00', tsbucket.date_trunc('minute', pg_temp.local('-10:00', '1999-12-31 23:54:00'), 5, '-10:00'), pg_temp.local('-10:00', '1999-12-31 23:50:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Hour), for each of
-- kTimezones.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('TruncateDate.Hour #1 UTC', tsbucket.date_trunc('hour', pg_temp.local('UTC', '2020-01-01 03:00:00'), 2, 'UTC'), pg_temp.local('UTC', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #2 UTC', tsbucket.date_trunc('hour', pg_temp.local('UTC', '2020-01-01 02:00:00'), 2, 'UTC'), pg_temp.local('UTC', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #3 UTC', tsbucket.date_trunc('hour', pg_temp.local('UTC', '2020-01-01 03:59:59.999'), 2, 'UTC'), pg_temp.local('UTC', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #4 UTC', tsbucket.date_trunc('hour', pg_temp.local('UTC', '2020-01-01 04:00:00'), 2, 'UTC'), pg_temp.local('UTC', '2020-01-01 04:00:00')),
  ('TruncateDate.Hour #5 UTC', tsbucket.date_trunc('hour', pg_temp.local('UTC', '1999-12-31 23:59:51'), 2, 'UTC'), pg_temp.local('UTC', '1999-12-31 22:00:00')),
  ('TruncateDate.Hour #1 America/New_York', tsbucket.date_trunc('hour', pg_temp.local('America/New_York', '2020-01-01 03:00:00'), 2, 'America/New_York'), pg_temp.local('America/New_York', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #2 America/New_York', tsbucket.date_trunc('hour', pg_temp.local('America/New_York', '2020-01-01 02:00:00'), 2, 'America/New_York'), pg_temp.local('America/New_York', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #3 America/New_York', tsbucket.date_trunc('hour', pg_temp.local('America/New_York', '2020-01-01 03:59:59.999'), 2, 'America/New_York'), pg_temp.local('America/New_York', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #4 America/New_York', tsbucket.date_trunc('hour', pg_temp.local('America/New_York', '2020-01-01 04:00:00'), 2, 'America/New_York'), pg_temp.local('America/New_York', '2020-01-01 04:00:00')),
  ('TruncateDate.Hour #5 America/New_York', tsbucket.date_trunc('hour', pg_temp.local('America/New_York', '1999-12-31 23:59:51'), 2, 'America/New_York'), pg_temp.local('America/New_York', '1999-12-31 22:00:00')),
  ('TruncateDate.Hour #1 Australia/Eucla', tsbucket.date_trunc('hour', pg_temp.local('Australia/Eucla', '2020-01-01 03:00:00'), 2, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #2 Australia/Eucla', tsbucket.date_trunc('hour', pg_temp.local('Australia/Eucla', '2020-01-01 02:00:00'), 2, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #3 Australia/Eucla', tsbucket.date_trunc('hour', pg_temp.local('Australia/Eucla', '2020-01-01 03:59:59.999'), 2, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #4 Australia/Eucla', tsbucket.date_trunc('hour', pg_temp.local('Australia/Eucla', '2020-01-01 04:00:00'), 2, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2020-01-01 04:00:00')),
  ('TruncateDate.Hour #5 Australia/Eucla', tsbucket.date_trunc('hour', pg_temp.local('Australia/Eucla', '1999-12-31 23:59:51'), 2, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '1999-12-31 22:00:00')),
  ('TruncateDate.Hour #1 Europe/Sofia', tsbucket.date_trunc('hour', pg_temp.local('Europe/Sofia', '2020-01-01 03:00:00'), 2, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #2 Europe/Sofia', tsbucket.date_trunc('hour', pg_temp.local('Europe/Sofia', '2020-01-01 02:00:00'), 2, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #3 Europe/Sofia', tsbucket.date_trunc('hour', pg_temp.local('Europe/Sofia', '2020-01-01 03:59:59.999'), 2, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #4 Europe/Sofia', tsbucket.date_trunc('hour', pg_temp.local('Europe/Sofia', '2020-01-01 04:00:00'), 2, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2020-01-01 04:00:00')),
  ('TruncateDate.Hour #5 Europe/Sofia', tsbucket.date_trunc('hour', pg_temp.local('Europe/Sofia', '1999-12-31 23:59:51'), 2, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '1999-12-31 22:00:00')),
  ('TruncateDate.Hour #1 Australia/Sydney', tsbucket.date_trunc('hour', pg_temp.local('Australia/Sydney', '2020-01-01 03:00:00'), 2, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #2 Australia/Sydney', tsbucket.date_trunc('hour', pg_temp.local('Australia/Sydney', '2020-01-01 02:00:00'), 2, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #3 Australia/Sydney', tsbucket.date_trunc('hour', pg_temp.local('Australia/Sydney', '2020-01-01 03:59:59.999'), 2, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #4 Australia/Sydney', tsbucket.date_trunc('hour', pg_temp.local('Australia/Sydney', '2020-01-01 04:00:00'), 2, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '2020-01-01 04:00:00')),
  ('TruncateDate.Hour #5 Australia/Sydney', tsbucket.date_trunc('hour', pg_temp.local('Australia/Sydney', '1999-12-31 23:59:51'), 2, 'Australia/Sydney'), pg_temp.local('Australia/Sydney', '1999-12-31 22:00:00')),
  ('TruncateDate.Hour #1 -10:00', tsbucket.date_trunc('hour', pg_temp.local('-10:00', '2020-01-01 03:00:00'), 2, '-10:00'), pg_temp.local('-10:00', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #2 -10:00', tsbucket.date_trunc('hour', pg_temp.local('-10:00', '2020-01-01 02:00:00'), 2, '-10:00'), pg_temp.local('-10:00', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #3 -10:00', tsbucket.date_trunc('hour', pg_temp.local('-10:00', '2020-01-01 03:59:59.999'), 2, '-10:00'), pg_temp.local('-10:00', '2020-01-01 02:00:00')),
  ('TruncateDate.Hour #4 -10:00', tsbucket.date_trunc('hour', pg_temp.local('-10:00', '2020-01-01 04:00:00'), 2, '-10:00'), pg_temp.local('-10:00', '2020-01-01 04:00:00')),
  ('TruncateDate.Hour #5 -10:00', tsbucket.date_trunc('hour', pg_temp.local('-10:00', '1999-12-31 23:59:51'), 2, '-10:00'), pg_temp.local('-10:00', '1999-12-31 22:00:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Day), for every zone
-- Postgres knows and -10:00 (kAllTimezones). mismatching_zones lists the zones whose result differs
-- from MongoDB's.
SELECT vector, count(*) > 300 AS all_zones, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(z, ' ' ORDER BY z) FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_zones,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM zones CROSS JOIN LATERAL (VALUES
    (1, 'TruncateDate.Day #1', tsbucket.date_trunc('day', pg_temp.local(z, '2000-01-08 00:00:02'), 2, z), pg_temp.local(z, '2000-01-07 00:00:00')),
    (2, 'TruncateDate.Day #2', tsbucket.date_trunc('day', pg_temp.local(z, '2000-01-09 00:00:00'), 2, z), pg_temp.local(z, '2000-01-09 00:00:00')),
    (3, 'TruncateDate.Day #3', tsbucket.date_trunc('day', pg_temp.local(z, '2000-01-10 23:59:59.999'), 2, z), pg_temp.local(z, '2000-01-09 00:00:00')),
    (4, 'TruncateDate.Day #4', tsbucket.date_trunc('day', pg_temp.local(z, '1999-12-29 23:59:59.999'), 2, z), pg_temp.local(z, '1999-12-28 00:00:00'))
  ) v(n, vector, got, mongo)
 GROUP BY n, vector ORDER BY n;

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Week), for every zone
-- Postgres knows and -10:00 (kAllTimezones). mismatching_zones lists the zones whose result differs
-- from MongoDB's.
SELECT vector, count(*) > 300 AS all_zones, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(z, ' ' ORDER BY z) FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_zones,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM zones CROSS JOIN LATERAL (VALUES
    (1, 'TruncateDate.Week #1', tsbucket.date_trunc('week', pg_temp.local(z, '2000-01-26 00:00:00'), 2, z, 'wednesday'), pg_temp.local(z, '2000-01-19 00:00:00')),
    (2, 'TruncateDate.Week #2', tsbucket.date_trunc('week', pg_temp.local(z, '2000-01-02 00:00:00'), 1, z, 'saturday'), pg_temp.local(z, '2000-01-01 00:00:00')),
    (3, 'TruncateDate.Week #3', tsbucket.date_trunc('week', pg_temp.local(z, '2021-07-26 00:00:00'), 1, z, 'monday'), pg_temp.local(z, '2021-07-26 00:00:00')),
    (4, 'TruncateDate.Week #4', tsbucket.date_trunc('week', pg_temp.local(z, '2021-08-01 23:59:59.999'), 1, z, 'monday'), pg_temp.local(z, '2021-07-26 00:00:00')),
    (5, 'TruncateDate.Week #5', tsbucket.date_trunc('week', pg_temp.local(z, '1999-12-19 23:59:59.999'), 2, z, 'monday'), pg_temp.local(z, '1999-12-06 00:00:00'))
  ) v(n, vector, got, mongo)
 GROUP BY n, vector ORDER BY n;

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Month), for every zone
-- Postgres knows and -10:00 (kAllTimezones). mismatching_zones lists the zones whose result differs
-- from MongoDB's.
SELECT vector, count(*) > 300 AS all_zones, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(z, ' ' ORDER BY z) FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_zones,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM zones CROSS JOIN LATERAL (VALUES
    (1, 'TruncateDate.Month #1', tsbucket.date_trunc('month', pg_temp.local(z, '2021-04-01 00:00:00'), 2, z), pg_temp.local(z, '2021-03-01 00:00:00')),
    (2, 'TruncateDate.Month #2', tsbucket.date_trunc('month', pg_temp.local(z, '2021-03-01 00:00:00'), 2, z), pg_temp.local(z, '2021-03-01 00:00:00')),
    (3, 'TruncateDate.Month #3', tsbucket.date_trunc('month', pg_temp.local(z, '2021-04-30 23:59:59.999'), 2, z), pg_temp.local(z, '2021-03-01 00:00:00')),
    (4, 'TruncateDate.Month #4', tsbucket.date_trunc('month', pg_temp.local(z, '2021-05-01 00:00:00'), 2, z), pg_temp.local(z, '2021-05-01 00:00:00')),
    (5, 'TruncateDate.Month #7', tsbucket.date_trunc('month', pg_temp.local(z, '2005-02-28 23:59:59.999'), 1, z), pg_temp.local(z, '2005-02-01 00:00:00'))
  ) v(n, vector, got, mongo)
 GROUP BY n, vector ORDER BY n;

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Quarter), for every
-- zone Postgres knows and -10:00 (kAllTimezones). mismatching_zones lists the zones whose result
-- differs from MongoDB's.
SELECT vector, count(*) > 300 AS all_zones, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(z, ' ' ORDER BY z) FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_zones,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM zones CROSS JOIN LATERAL (VALUES
    (1, 'TruncateDate.Quarter #1', tsbucket.date_trunc('quarter', pg_temp.local(z, '2021-05-01 00:00:00'), 2, z), pg_temp.local(z, '2021-01-01 00:00:00')),
    (2, 'TruncateDate.Quarter #2', tsbucket.date_trunc('quarter', pg_temp.local(z, '2021-01-01 00:00:00'), 2, z), pg_temp.local(z, '2021-01-01 00:00:00')),
    (3, 'TruncateDate.Quarter #3', tsbucket.date_trunc('quarter', pg_temp.local(z, '2021-06-30 23:59:59.999'), 2, z), pg_temp.local(z, '2021-01-01 00:00:00')),
    (4, 'TruncateDate.Quarter #4', tsbucket.date_trunc('quarter', pg_temp.local(z, '2021-07-01 00:00:00'), 2, z), pg_temp.local(z, '2021-07-01 00:00:00'))
  ) v(n, vector, got, mongo)
 GROUP BY n, vector ORDER BY n;

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Year), for every zone
-- Postgres knows and -10:00 (kAllTimezones). mismatching_zones lists the zones whose result differs
-- from MongoDB's.
SELECT vector, count(*) > 300 AS all_zones, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(z, ' ' ORDER BY z) FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_zones,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM zones CROSS JOIN LATERAL (VALUES
    (1, 'TruncateDate.Year #1', tsbucket.date_trunc('year', pg_temp.local(z, '2021-05-01 00:00:00'), 2, z), pg_temp.local(z, '2020-01-01 00:00:00')),
    (2, 'TruncateDate.Year #2', tsbucket.date_trunc('year', pg_temp.local(z, '2020-01-01 00:00:00'), 2, z), pg_temp.local(z, '2020-01-01 00:00:00')),
    (3, 'TruncateDate.Year #3', tsbucket.date_trunc('year', pg_temp.local(z, '2021-12-31 23:59:59.999'), 2, z), pg_temp.local(z, '2020-01-01 00:00:00')),
    (4, 'TruncateDate.Year #4', tsbucket.date_trunc('year', pg_temp.local(z, '2022-01-01 00:00:00'), 2, z), pg_temp.local(z, '2022-01-01 00:00:00'))
  ) v(n, vector, got, mongo)
 GROUP BY n, vector ORDER BY n;

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(TruncateDate, Day): the DST vectors
-- in New York and Sofia.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('TruncateDate.Day #5', tsbucket.date_trunc('day', pg_temp.local('America/New_York', '2021-03-13 04:00:00'), 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-03-13 00:00:00')),
  ('TruncateDate.Day #6', tsbucket.date_trunc('day', pg_temp.local('America/New_York', '2021-03-14 04:00:00'), 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-03-14 00:00:00')),
  ('TruncateDate.Day #7', tsbucket.date_trunc('day', pg_temp.local('America/New_York', '2021-03-15 01:00:00'), 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-03-15 00:00:00')),
  ('TruncateDate.Day #8', tsbucket.date_trunc('day', pg_temp.local('America/New_York', '2021-11-07 00:30:00'), 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-11-07 00:00:00')),
  ('TruncateDate.Day #9', tsbucket.date_trunc('day', pg_temp.local('America/New_York', '2021-11-07 02:00:00'), 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-11-07 00:00:00')),
  ('TruncateDate.Day #10', tsbucket.date_trunc('day', pg_temp.local('America/New_York', '2021-11-08 02:00:00'), 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-11-08 00:00:00')),
  ('TruncateDate.Day #11', tsbucket.date_trunc('day', pg_temp.local('Europe/Sofia', '2021-03-27 22:00:00'), 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-03-27 00:00:00')),
  ('TruncateDate.Day #12', tsbucket.date_trunc('day', pg_temp.local('Europe/Sofia', '2021-03-28 04:00:00'), 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-03-28 00:00:00')),
  ('TruncateDate.Day #13', tsbucket.date_trunc('day', pg_temp.local('Europe/Sofia', '2021-03-29 01:00:00'), 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-03-29 00:00:00')),
  ('TruncateDate.Day #14', tsbucket.date_trunc('day', pg_temp.local('Europe/Sofia', '2021-10-31 00:30:00'), 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-10-31 00:00:00')),
  ('TruncateDate.Day #15', tsbucket.date_trunc('day', pg_temp.local('Europe/Sofia', '2021-11-01 00:00:00.001'), 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-11-01 00:00:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd, DateAddYear).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAddYear #1', tsbucket.date_add(pg_temp.local('UTC', '2019-11-11 00:00:00.001'), 'year', 1), pg_temp.local('UTC', '2020-11-11 00:00:00.001')),
  ('DateAdd.DateAddYear #2', tsbucket.date_add(pg_temp.local('UTC', '2019-11-11 00:00:00'), 'year', -1), pg_temp.local('UTC', '2018-11-11 00:00:00')),
  ('DateAdd.DateAddYear #3', tsbucket.date_add(pg_temp.local('UTC', '2016-02-29 00:00:00'), 'year', 2), pg_temp.local('UTC', '2018-02-28 00:00:00')),
  ('DateAdd.DateAddYear #4', tsbucket.date_add(pg_temp.local('UTC', '2016-02-29 00:00:00'), 'year', -4), pg_temp.local('UTC', '2012-02-29 00:00:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd, DateAddQuarter).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAddQuarter #1', tsbucket.date_add(pg_temp.local('UTC', '2020-01-01 00:00:00.003'), 'quarter', 1), pg_temp.local('UTC', '2020-04-01 00:00:00.003')),
  ('DateAdd.DateAddQuarter #2', tsbucket.date_add(pg_temp.local('UTC', '2020-01-01 00:00:00.003'), 'quarter', -5), pg_temp.local('UTC', '2018-10-01 00:00:00.003')),
  ('DateAdd.DateAddQuarter #3', tsbucket.date_add(pg_temp.local('UTC', '2020-01-31 00:00:00'), 'quarter', 1), pg_temp.local('UTC', '2020-04-30 00:00:00')),
  ('DateAdd.DateAddQuarter #4', tsbucket.date_add(pg_temp.local('UTC', '2020-01-31 00:00:00'), 'quarter', -3), pg_temp.local('UTC', '2019-04-30 00:00:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd, DateAddMonth).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAddMonth #1', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.005'), 'month', 1), pg_temp.local('UTC', '2020-09-30 10:05:00.005')),
  ('DateAdd.DateAddMonth #2', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.005'), 'month', 5), pg_temp.local('UTC', '2021-01-31 10:05:00.005')),
  ('DateAdd.DateAddMonth #3', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.005'), 'month', 6), pg_temp.local('UTC', '2021-02-28 10:05:00.005')),
  ('DateAdd.DateAddMonth #4', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.005'), 'month', -1), pg_temp.local('UTC', '2020-07-31 10:05:00.005')),
  ('DateAdd.DateAddMonth #5', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.005'), 'month', -4), pg_temp.local('UTC', '2020-04-30 10:05:00.005')),
  ('DateAdd.DateAddMonth #6', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.005'), 'month', -6), pg_temp.local('UTC', '2020-02-29 10:05:00.005')),
  ('DateAdd.DateAddMonth #7', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.005'), 'month', -18), pg_temp.local('UTC', '2019-02-28 10:05:00.005')),
  ('DateAdd.DateAddMonth #8', tsbucket.date_add(pg_temp.local('UTC', '2021-04-30 00:00:00'), 'month', 1), pg_temp.local('UTC', '2021-05-30 00:00:00')),
  ('DateAdd.DateAddMonth #9', tsbucket.date_add(pg_temp.local('UTC', '2021-04-30 00:00:00'), 'month', -2), pg_temp.local('UTC', '2021-02-28 00:00:00')),
  ('DateAdd.DateAddMonth #10', tsbucket.date_add(pg_temp.local('UTC', '2021-03-01 00:00:00'), 'month', 2), pg_temp.local('UTC', '2021-05-01 00:00:00')),
  ('DateAdd.DateAddMonth #11', tsbucket.date_add(pg_temp.local('UTC', '2021-03-01 00:00:00'), 'month', -1), pg_temp.local('UTC', '2021-02-01 00:00:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd,
-- DateAddDayAdjustmentWithTimezone): Amsterdam, Sofia, New York, Eucla. (The New York list holds
-- {ny2020_12_30T22, month, 2} twice; so does this one.)
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAddDayAdjustmentWithTimezone #1', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-05-31 00:30:00.004'), 'month', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-06-30 00:30:00.004')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #2', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-05-31 00:30:00.004'), 'month', -1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-04-30 00:30:00.004')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #3', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-05-31 00:30:00.004'), 'quarter', -1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-02-28 00:30:00.004')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #4', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-05-31 00:30:00.004'), 'quarter', -5, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-02-29 00:30:00.004')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #5', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-02-01 00:00:00'), 'month', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-03-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #6', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-02-01 00:00:00'), 'month', -2, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-12-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #7', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-02-01 00:00:00'), 'quarter', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-05-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #8', tsbucket.date_add(pg_temp.local('Europe/Sofia', '2021-02-01 00:00:00.005'), 'month', 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-03-01 00:00:00.005')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #9', tsbucket.date_add(pg_temp.local('Europe/Sofia', '2021-02-01 00:00:00.005'), 'month', -2, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2020-12-01 00:00:00.005')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #10', tsbucket.date_add(pg_temp.local('Europe/Sofia', '2021-02-01 00:00:00.005'), 'quarter', 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-05-01 00:00:00.005')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #11', tsbucket.date_add(pg_temp.local('Europe/Sofia', '2021-03-01 00:00:00'), 'month', 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-04-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #12', tsbucket.date_add(pg_temp.local('Europe/Sofia', '2021-03-01 00:00:00'), 'month', -1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-02-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #13', tsbucket.date_add(pg_temp.local('Europe/Sofia', '2021-03-01 00:00:00'), 'quarter', 1, 'Europe/Sofia'), pg_temp.local('Europe/Sofia', '2021-06-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #14', tsbucket.date_add(timestamptz '2020-12-31 03:00:00+00', 'month', -1, 'America/New_York'), timestamptz '2020-12-01 03:00:00+00'),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #15', tsbucket.date_add(timestamptz '2020-12-31 03:00:00+00', 'month', 2, 'America/New_York'), timestamptz '2021-03-01 03:00:00+00'),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #16', tsbucket.date_add(timestamptz '2020-12-31 03:00:00+00', 'quarter', -2, 'America/New_York'), timestamptz '2020-07-01 02:00:00+00'),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #17', tsbucket.date_add(timestamptz '2020-12-31 03:00:00+00', 'month', 2, 'America/New_York'), timestamptz '2021-03-01 03:00:00+00'),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #18', tsbucket.date_add(pg_temp.local('America/New_York', '2021-04-30 20:00:00.006'), 'month', 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-05-30 20:00:00.006')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #19', tsbucket.date_add(pg_temp.local('America/New_York', '2021-04-30 20:00:00.006'), 'month', -2, 'America/New_York'), pg_temp.local('America/New_York', '2021-02-28 20:00:00.006')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #20', tsbucket.date_add(pg_temp.local('America/New_York', '2021-03-01 00:00:00'), 'month', 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-04-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #21', tsbucket.date_add(pg_temp.local('America/New_York', '2021-03-01 00:00:00'), 'month', -1, 'America/New_York'), pg_temp.local('America/New_York', '2021-02-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #22', tsbucket.date_add(pg_temp.local('America/New_York', '2021-03-01 00:00:00'), 'quarter', 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-06-01 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #23', tsbucket.date_add(pg_temp.local('Australia/Eucla', '2021-02-01 00:00:00.007'), 'month', 1, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2021-03-01 00:00:00.007')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #24', tsbucket.date_add(pg_temp.local('Australia/Eucla', '2021-02-01 00:00:00.007'), 'month', -2, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2020-12-01 00:00:00.007')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #25', tsbucket.date_add(pg_temp.local('Australia/Eucla', '2021-02-01 00:00:00.007'), 'quarter', 1, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2021-05-01 00:00:00.007')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #26', tsbucket.date_add(pg_temp.local('Australia/Eucla', '2021-04-30 00:00:00'), 'month', 1, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2021-05-30 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #27', tsbucket.date_add(pg_temp.local('Australia/Eucla', '2021-04-30 00:00:00'), 'month', -2, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2021-02-28 00:00:00')),
  ('DateAdd.DateAddDayAdjustmentWithTimezone #28', tsbucket.date_add(pg_temp.local('Australia/Eucla', '2021-04-30 00:00:00'), 'quarter', 1, 'Australia/Eucla'), pg_temp.local('Australia/Eucla', '2021-07-30 00:00:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd, DateAddDay), TEST(DateAdd,
-- DateAddHour), TEST(DateAdd, DateAddMinute).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAddDay #1', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.007'), 'day', 1), pg_temp.local('UTC', '2020-09-01 10:05:00.007')),
  ('DateAdd.DateAddDay #2', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.007'), 'day', -1), pg_temp.local('UTC', '2020-08-30 10:05:00.007')),
  ('DateAdd.DateAddDay #3', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.007'), 'day', -366), pg_temp.local('UTC', '2019-08-31 10:05:00.007')),
  ('DateAdd.DateAddHour #1', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.009'), 'hour', 1), pg_temp.local('UTC', '2020-08-31 11:05:00.009')),
  ('DateAdd.DateAddHour #2', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.009'), 'hour', -1), pg_temp.local('UTC', '2020-08-31 09:05:00.009')),
  ('DateAdd.DateAddHour #3', tsbucket.date_add(pg_temp.local('UTC', '2020-08-31 10:05:00.009'), 'hour', 168), pg_temp.local('UTC', '2020-09-07 10:05:00.009')),
  ('DateAdd.DateAddMinute #1', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:55:15.008'), 'minute', 1), pg_temp.local('UTC', '2020-12-31 23:56:15.008')),
  ('DateAdd.DateAddMinute #2', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:55:15.008'), 'minute', -1), pg_temp.local('UTC', '2020-12-31 23:54:15.008')),
  ('DateAdd.DateAddMinute #3', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:55:15.008'), 'minute', 10), pg_temp.local('UTC', '2021-01-01 00:05:15.008')),
  ('DateAdd.DateAddMinute #4', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:55:15.008'), 'minute', -1440), pg_temp.local('UTC', '2020-12-30 23:55:15.008'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd, DateAddWithTimezoneDST):
-- Amsterdam (#1-#17), New York (#18-#32). #7 and #24 land on a repeated local time and must give
-- the summer-time instant (MongoDB builds it as createFromDateParts(01:59:59 resp. 00:59:59) + 2
-- s); #12 and #27 land on one from winter time and must give the winter-time instant.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAddWithTimezoneDST #1', tsbucket.date_add(timestamptz '2020-10-25 00:50:05+00', 'minute', 10, 'Europe/Amsterdam'), timestamptz '2020-10-25 01:00:05+00'),
  ('DateAdd.DateAddWithTimezoneDST #2', tsbucket.date_add(timestamptz '2020-10-25 00:50:05+00', 'hour', 1, 'Europe/Amsterdam'), timestamptz '2020-10-25 01:50:05+00'),
  ('DateAdd.DateAddWithTimezoneDST #3', tsbucket.date_add(timestamptz '2020-10-25 01:10:05+00', 'minute', -20, 'Europe/Amsterdam'), timestamptz '2020-10-25 00:50:05+00'),
  ('DateAdd.DateAddWithTimezoneDST #4', tsbucket.date_add(timestamptz '2020-10-25 01:10:05+00', 'hour', -1, 'Europe/Amsterdam'), timestamptz '2020-10-25 00:10:05+00'),
  ('DateAdd.DateAddWithTimezoneDST #5', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-10-25 01:50:00'), 'day', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-10-26 01:50:00')),
  ('DateAdd.DateAddWithTimezoneDST #6', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-10-25 02:30:00'), 'day', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-10-26 02:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #7', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-10-24 02:00:01'), 'day', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-10-25 01:59:59') + interval '2000 milliseconds'),
  ('DateAdd.DateAddWithTimezoneDST #8', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-10-24 03:00:01'), 'day', 1, 'Europe/Amsterdam'), timestamptz '2020-10-25 02:00:01+00'),
  ('DateAdd.DateAddWithTimezoneDST #9', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-10-24 03:00:01'), 'day', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-10-25 03:00:01')),
  ('DateAdd.DateAddWithTimezoneDST #10', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-10-25 03:30:00'), 'day', -1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-10-24 03:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #11', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-10-25 02:30:00'), 'day', -1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-10-24 02:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #12', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-10-26 02:30:00'), 'day', -1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2020-10-25 02:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #13', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-03-28 01:20:00'), 'day', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-03-29 01:20:00')),
  ('DateAdd.DateAddWithTimezoneDST #14', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-03-27 02:20:00'), 'day', 1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-03-28 03:20:00')),
  ('DateAdd.DateAddWithTimezoneDST #15', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-03-28 03:20:00'), 'day', -1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-03-27 03:20:00')),
  ('DateAdd.DateAddWithTimezoneDST #16', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2021-03-29 02:20:00'), 'day', -1, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-03-28 03:20:00')),
  ('DateAdd.DateAddWithTimezoneDST #17', tsbucket.date_add(pg_temp.local('Europe/Amsterdam', '2020-11-28 02:20:00'), 'month', 4, 'Europe/Amsterdam'), pg_temp.local('Europe/Amsterdam', '2021-03-28 03:20:00')),
  ('DateAdd.DateAddWithTimezoneDST #18', tsbucket.date_add(timestamptz '2020-03-08 06:50:00+00', 'minute', 15, 'America/New_York'), timestamptz '2020-03-08 07:05:00+00'),
  ('DateAdd.DateAddWithTimezoneDST #19', tsbucket.date_add(timestamptz '2020-03-08 06:50:00+00', 'hour', 1, 'America/New_York'), timestamptz '2020-03-08 07:50:00+00'),
  ('DateAdd.DateAddWithTimezoneDST #20', tsbucket.date_add(timestamptz '2020-03-08 07:20:00+00', 'minute', -25, 'America/New_York'), timestamptz '2020-03-08 06:55:00+00'),
  ('DateAdd.DateAddWithTimezoneDST #21', tsbucket.date_add(timestamptz '2020-03-08 07:20:00+00', 'hour', -1, 'America/New_York'), timestamptz '2020-03-08 06:20:00+00'),
  ('DateAdd.DateAddWithTimezoneDST #22', tsbucket.date_add(pg_temp.local('America/New_York', '2020-11-01 00:30:00'), 'day', 1, 'America/New_York'), pg_temp.local('America/New_York', '2020-11-02 00:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #23', tsbucket.date_add(pg_temp.local('America/New_York', '2020-11-01 01:30:00'), 'day', 1, 'America/New_York'), pg_temp.local('America/New_York', '2020-11-02 01:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #24', tsbucket.date_add(pg_temp.local('America/New_York', '2020-10-31 01:00:01'), 'day', 1, 'America/New_York'), pg_temp.local('America/New_York', '2020-11-01 00:59:59') + interval '2000 milliseconds'),
  ('DateAdd.DateAddWithTimezoneDST #25', tsbucket.date_add(pg_temp.local('America/New_York', '2020-11-01 03:00:00'), 'day', -1, 'America/New_York'), pg_temp.local('America/New_York', '2020-10-31 03:00:00')),
  ('DateAdd.DateAddWithTimezoneDST #26', tsbucket.date_add(pg_temp.local('America/New_York', '2020-11-01 01:30:00'), 'day', -1, 'America/New_York'), pg_temp.local('America/New_York', '2020-10-31 01:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #27', tsbucket.date_add(pg_temp.local('America/New_York', '2020-11-02 01:30:00'), 'day', -1, 'America/New_York'), pg_temp.local('America/New_York', '2020-11-01 01:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #28', tsbucket.date_add(pg_temp.local('America/New_York', '2021-03-14 01:30:00'), 'day', 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-03-15 01:30:00')),
  ('DateAdd.DateAddWithTimezoneDST #29', tsbucket.date_add(pg_temp.local('America/New_York', '2021-03-13 02:20:00'), 'day', 1, 'America/New_York'), pg_temp.local('America/New_York', '2021-03-14 03:20:00')),
  ('DateAdd.DateAddWithTimezoneDST #30', tsbucket.date_add(pg_temp.local('America/New_York', '2021-03-14 03:20:00'), 'day', -1, 'America/New_York'), pg_temp.local('America/New_York', '2021-03-13 03:20:00')),
  ('DateAdd.DateAddWithTimezoneDST #31', tsbucket.date_add(pg_temp.local('America/New_York', '2021-03-15 02:20:00'), 'day', -1, 'America/New_York'), pg_temp.local('America/New_York', '2021-03-14 03:20:00')),
  ('DateAdd.DateAddWithTimezoneDST #32', tsbucket.date_add(pg_temp.local('America/New_York', '2021-01-14 02:20:00'), 'month', 2, 'America/New_York'), pg_temp.local('America/New_York', '2021-03-14 03:20:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd,
-- DateAdd_LordHoweTimezoneDST): a 30-minute DST shift. #1 starts at the summer-time 01:30:00
-- (createFromDateParts(01:29:59) + 1 s); #2 must give the summer-time 01:30:01
-- (createFromDateParts(01:29:59) + 2 s).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAdd_LordHoweTimezoneDST #1', tsbucket.date_add(pg_temp.local('Australia/Lord_Howe', '2021-04-04 01:29:59') + interval '1000 milliseconds', 'day', 1, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2021-04-05 01:30:00')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #2', tsbucket.date_add(pg_temp.local('Australia/Lord_Howe', '2021-04-03 01:30:01'), 'day', 1, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2021-04-04 01:29:59') + interval '2000 milliseconds'),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #3', tsbucket.date_add(pg_temp.local('Australia/Lord_Howe', '2021-04-05 01:00:00'), 'day', -1, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2021-04-04 01:00:00')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #4', tsbucket.date_add(pg_temp.local('Australia/Lord_Howe', '2021-03-04 05:30:00.005'), 'month', 1, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2021-04-04 05:30:00.005')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #5', tsbucket.date_add(timestamptz '2021-04-03 14:50:05+00', 'minute', 20, 'Australia/Lord_Howe'), timestamptz '2021-04-03 15:10:05+00'),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #6', tsbucket.date_add(timestamptz '2021-04-03 14:50:05+00', 'minute', 20, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2021-04-04 01:40:05')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #7', tsbucket.date_add(timestamptz '2021-04-03 14:50:05+00', 'hour', 1, 'Australia/Lord_Howe'), timestamptz '2021-04-03 15:50:05+00'),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #8', tsbucket.date_add(timestamptz '2021-04-03 14:50:05+00', 'hour', 1, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2021-04-04 02:20:05')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #9', tsbucket.date_add(pg_temp.local('Australia/Lord_Howe', '2020-10-04 01:30:00'), 'day', 1, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2020-10-05 01:30:00')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #10', tsbucket.date_add(pg_temp.local('Australia/Lord_Howe', '2020-10-03 02:15:00'), 'day', 1, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2020-10-04 02:45:00')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #11', tsbucket.date_add(pg_temp.local('Australia/Lord_Howe', '2020-10-05 01:00:00.008'), 'day', -1, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2020-10-04 01:00:00.008')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #12', tsbucket.date_add(pg_temp.local('Australia/Lord_Howe', '2021-01-03 18:25:00'), 'month', -3, 'Australia/Lord_Howe'), pg_temp.local('Australia/Lord_Howe', '2020-10-03 18:25:00')),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #13', tsbucket.date_add(timestamptz '2020-10-03 15:20:05+00', 'minute', 20, 'Australia/Lord_Howe'), timestamptz '2020-10-03 15:40:05+00'),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #14', tsbucket.date_add(timestamptz '2020-10-03 15:20:05+00', 'hour', 1, 'Australia/Lord_Howe'), timestamptz '2020-10-03 16:20:05+00'),
  ('DateAdd.DateAdd_LordHoweTimezoneDST #15', tsbucket.date_add(timestamptz '2020-10-03 15:30:20+00', 'second', -50, 'Australia/Lord_Howe'), timestamptz '2020-10-03 15:29:30+00')
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd, DateAdd_offsetTimezone).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAdd_offsetTimezone #1', tsbucket.date_add(pg_temp.local('+02:00', '2021-03-01 01:30:00'), 'month', 1, '+02:00'), pg_temp.local('+02:00', '2021-04-01 01:30:00')),
  ('DateAdd.DateAdd_offsetTimezone #2', tsbucket.date_add(pg_temp.local('+02:00', '2021-03-31 01:30:00'), 'month', 1, '+02:00'), pg_temp.local('+02:00', '2021-04-30 01:30:00')),
  ('DateAdd.DateAdd_offsetTimezone #3', tsbucket.date_add(pg_temp.local('+02:00', '2021-03-28 01:30:00'), 'day', 1, '+02:00'), pg_temp.local('+02:00', '2021-03-29 01:30:00')),
  ('DateAdd.DateAdd_offsetTimezone #4', tsbucket.date_add(pg_temp.local('+02:00', '2021-03-28 01:30:00'), 'hour', 1, '+02:00'), pg_temp.local('+02:00', '2021-03-28 02:30:00'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(DateAdd, DateAddSecond),
-- TEST(DateAdd, DateAddMillisecond).
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('DateAdd.DateAddSecond #1', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:55:15.002'), 'second', 1), pg_temp.local('UTC', '2020-12-31 23:55:16.002')),
  ('DateAdd.DateAddSecond #2', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:55:15.002'), 'second', -1), pg_temp.local('UTC', '2020-12-31 23:55:14.002')),
  ('DateAdd.DateAddSecond #3', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:55:15.002'), 'second', 300), pg_temp.local('UTC', '2021-01-01 00:00:15.002')),
  ('DateAdd.DateAddSecond #4', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:55:15.002'), 'second', -195), pg_temp.local('UTC', '2020-12-31 23:52:00.002')),
  ('DateAdd.DateAddMillisecond #1', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:59:15.001'), 'millisecond', 1), pg_temp.local('UTC', '2020-12-31 23:59:15.002')),
  ('DateAdd.DateAddMillisecond #2', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:59:15.001'), 'millisecond', -2), pg_temp.local('UTC', '2020-12-31 23:59:14.999')),
  ('DateAdd.DateAddMillisecond #3', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:59:15.001'), 'millisecond', 45000), pg_temp.local('UTC', '2021-01-01 00:00:00.001')),
  ('DateAdd.DateAddMillisecond #4', tsbucket.date_add(pg_temp.local('UTC', '2020-12-31 23:59:15.001'), 'millisecond', -1501), pg_temp.local('UTC', '2020-12-31 23:59:13.500'))
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp: vectors that MongoDB answers with an
-- error, and the SQLSTATE tsbucket raises. TEST(TruncateDate, ErrorHandling) (binSize 0; its other
-- vectors need bin sizes beyond int4 or dates beyond Postgres's range), TEST(DateAdd,
-- LargeAmountValues) (the invalid amounts from 2016-01-01; its other vectors start in year
-- -200000000), TEST(DateAdd, DateAddMillisecond) (overflow).
SELECT vector, mongo_error, got, got = expected AS ok FROM (VALUES
  ('TruncateDate.ErrorHandling binSize 0', '5439005', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''day'', timestamptz ''2000-01-01 02:00:00+00'', 0)'), '22023'),
  ('DateAdd.LargeAmountValues year 584942418', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''year'', 584942418)'), '22008'),
  ('DateAdd.LargeAmountValues year -584942418', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''year'', -584942418)'), '22008'),
  ('DateAdd.LargeAmountValues quarter 2339769672', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''quarter'', 2339769672)'), '22008'),
  ('DateAdd.LargeAmountValues quarter -2339769672', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''quarter'', -2339769672)'), '22008'),
  ('DateAdd.LargeAmountValues month 7019309016', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''month'', 7019309016)'), '22008'),
  ('DateAdd.LargeAmountValues month -7019309016', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''month'', -7019309016)'), '22008'),
  ('DateAdd.LargeAmountValues day 213503982335', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''day'', 213503982335)'), '22008'),
  ('DateAdd.LargeAmountValues day -213503982335', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''day'', -213503982335)'), '22008'),
  ('DateAdd.LargeAmountValues hour 5124095576040', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''hour'', 5124095576040)'), '22008'),
  ('DateAdd.LargeAmountValues hour -5124095576040', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''hour'', -5124095576040)'), '22008'),
  ('DateAdd.LargeAmountValues minute 307445734562400', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''minute'', 307445734562400)'), '22008'),
  ('DateAdd.LargeAmountValues minute -307445734562400', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''minute'', -307445734562400)'), '22008'),
  ('DateAdd.LargeAmountValues second 18446744073744000', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''second'', 18446744073744000)'), '22008'),
  ('DateAdd.LargeAmountValues second -18446744073744000', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2016-01-01 00:00:00+00'', ''second'', -18446744073744000)'), '22008'),
  ('DateAdd.DateAddMillisecond overflow', 'DurationOverflow', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2020-12-31 23:59:15.001+00'', ''millisecond'', 9223372036854775807)'), '22008')
) v(vector, mongo_error, got, expected);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(GetTimeZone, DoesParse*Offset): the
-- UTC offset each time zone string denotes (at 1500371861000 ms = 2017-07-18T09:57:41Z), read back
-- as the start of 2017 in UTC minus the start of 2017 in that zone.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('GetTimeZone.DoesParseHourOnlyOffset +02', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '+02'), interval '02:00'),
  ('GetTimeZone.DoesParseHourOnlyOffset -02', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '-02'), interval '-02:00'),
  ('GetTimeZone.DoesParseHourOnlyOffset +00', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '+00'), interval '00:00'),
  ('GetTimeZone.DoesParseHourOnlyOffset -00', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '-00'), interval '00:00'),
  ('GetTimeZone.DoesParseHourMinuteOffset +0200', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '+0200'), interval '02:00'),
  ('GetTimeZone.DoesParseHourMinuteOffset -0200', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '-0200'), interval '-02:00'),
  ('GetTimeZone.DoesParseHourMinuteOffset +0245', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '+0245'), interval '02:45'),
  ('GetTimeZone.DoesParseHourMinuteOffset -0245', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '-0245'), interval '-02:45'),
  ('GetTimeZone.DoesParseHourMinuteOffsetWithColon +12:00', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '+12:00'), interval '12:00'),
  ('GetTimeZone.DoesParseHourMinuteOffsetWithColon -11:00', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '-11:00'), interval '-11:00'),
  ('GetTimeZone.DoesParseHourMinuteOffsetWithColon +09:27', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '+09:27'), interval '09:27'),
  ('GetTimeZone.DoesParseHourMinuteOffsetWithColon -00:37', date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 'UTC') - tsbucket.date_trunc('year', timestamptz '2017-07-18 09:57:41+00', 1, '-00:37'), interval '-00:37')
) v(vector, got, mongo);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(GetTimeZone,
-- DoesReturnKnownTimeZone) (no error), DoesNotReturnUnknownTimeZone,
-- ThrowsUserExceptionIfGivenUnparsableUtcOffset (error 40485) and TEST(ParseUtcOffset,
-- InvalidInputs) (not an offset, and not a zone either; "\0" cannot be written in SQL text).
SELECT vector, mongo_error, got, got = expected AS ok FROM (VALUES
  ('GetTimeZone.DoesReturnKnownTimeZone UTC', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''UTC'')'), 'no error'),
  ('GetTimeZone.DoesReturnKnownTimeZone America/New_York', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''America/New_York'')'), 'no error'),
  ('GetTimeZone.DoesReturnKnownTimeZone Australia/Sydney', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''Australia/Sydney'')'), 'no error'),
  ('GetTimeZone.DoesNotReturnUnknownTimeZone The moon', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''The moon'')'), '22023'),
  ('GetTimeZone.DoesNotReturnUnknownTimeZone xyz', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''xyz'')'), '22023'),
  ('GetTimeZone.DoesNotReturnUnknownTimeZone Jupiter', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''Jupiter'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset 123', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''123'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset 1234', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''1234'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset 12345', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''12345'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset -123', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-123'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset -12*34', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-12*34'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset -1:23', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-1:23'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset -12:3', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-12:3'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset +123', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+123'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset +12*34', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+12*34'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset +1:23', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+1:23'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset +12:3', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+12:3'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset +0x4', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+0x4'')'), '22023'),
  ('GetTimeZone.ThrowsUserExceptionIfGivenUnparsableUtcOffset -0xa0', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-0xa0'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, '''')'), '22023'),
  ('ParseUtcOffset.InvalidInputs '' ''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, '' '')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''  ''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''  '')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''🤡''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''🤡'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''a''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''a'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''ABC''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''ABC'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''\n''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, E''\n'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs '' +''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, '' +'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''\n+''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, E''\n+'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''-''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs '':''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, '':'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''++''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''++'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''--''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''--'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+ 0''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+ 0'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''- 0''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''- 0'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+0:''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+0:'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+a''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+a'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+aa''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+aa'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+0a''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+0a'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''0''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''0'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''0:''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''0:'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+0:0''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+0:0'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+0a:0''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+0a:0'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+00:a''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+00:a'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+00:0''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+00:0'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''-00:0''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-00:0'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+01:000''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+01:000'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''-12:000''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-12:000'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''-01:0a''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-01:0a'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+09:ab''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+09:ab'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+00:0a''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+00:0a'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+00:00a''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+00:00a'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''-12:34x''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-12:34x'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+xx:xx''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+xx:xx'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''-  :  ''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-  :  '')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''+00:-00''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''+00:-00'')'), '22023'),
  ('ParseUtcOffset.InvalidInputs ''-00:+00''', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', now(), 1, ''-00:+00'')'), '22023')
) v(vector, mongo_error, got, expected);

-- src/mongo/db/query/datetime/date_time_support_test.cpp, TEST(ParseUtcOffset, HourInputs) and
-- TEST(ParseUtcOffset, MinuteInputs): every +HH, +HHMM, +HH:MM string with any two digits is an
-- offset (-99:00 .. +99:99), read back as above.
SELECT vector, count(*) AS strings, count(*) FILTER (WHERE got IS DISTINCT FROM mongo) AS mismatches,
       coalesce(string_agg(s, ' ') FILTER (WHERE got IS DISTINCT FROM mongo), '') AS mismatching_strings,
       count(*) FILTER (WHERE got IS DISTINCT FROM mongo) = 0 AS ok
  FROM (SELECT vector, s, mongo,
               timestamptz '2000-01-01 00:00+00' - tsbucket.date_trunc('year', timestamptz '2000-06-01 00:00+00', 1, s) AS got
          FROM (SELECT 'ParseUtcOffset.HourInputs' AS vector, s, mongo
                  FROM generate_series(-99, 99) i, to_char(i, 'S00') hh, LATERAL (VALUES
                       (hh, i * interval '1 hour'), (hh || '00', i * interval '1 hour'), (hh || ':00', i * interval '1 hour'),
                       (hh || ':99', i * interval '1 hour' + CASE WHEN i >= 0 THEN 99 ELSE -99 END * interval '1 minute'),
                       (hh || '99', i * interval '1 hour' + CASE WHEN i >= 0 THEN 99 ELSE -99 END * interval '1 minute'),
                       (hh || ':99', i * interval '1 hour' + CASE WHEN i >= 0 THEN 99 ELSE -99 END * interval '1 minute')) v(s, mongo)
                UNION ALL
                SELECT 'ParseUtcOffset.MinuteInputs', s, mongo
                  FROM generate_series(0, 99) i, to_char(i, 'FM00') mm, LATERAL (VALUES
                       ('+01' || mm, interval '1 hour' + i * interval '1 minute'),
                       ('-11:' || mm, -(interval '11 hours' + i * interval '1 minute')),
                       ('+04:' || mm, interval '4 hours' + i * interval '1 minute'),
                       ('-77:' || mm, -(interval '77 hours' + i * interval '1 minute'))) v(s, mongo)) inputs) checked
 GROUP BY vector ORDER BY vector;

-- jstests/aggregation/expressions/date_trunc.js: the testCases with a result. ObjectId and
-- Timestamp dates are given as the instants they hold; the decimal, long and int bin sizes as int.
-- startOfWeek 1 (a number) with unit year is given as the text '1': ignored either way.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('date_trunc.js constants, no timezone', tsbucket.date_trunc('hour', timestamptz '2020-11-01 18:23:36+00', 2), timestamptz '2020-11-01 18:00:00+00'),
  ('date_trunc.js field paths, startOfWeek IGNORED', tsbucket.date_trunc('hour', timestamptz '2021-12-01 18:23:36+00', 4, 'America/New_York', 'IGNORED'), timestamptz '2021-12-01 17:00:00+00'),
  ('date_trunc.js default binSize, timezone, startOfWeek', tsbucket.date_trunc('week', timestamptz '2021-02-15 18:23:36+00'), timestamptz '2021-02-14 00:00:00+00'),
  ('date_trunc.js optional parameters', tsbucket.date_trunc('week', timestamptz '2000-01-30 18:00:00+00', 2, 'America/New_York', 'mon'), timestamptz '2000-01-17 05:00:00+00'),
  ('date_trunc.js date is an ObjectId', tsbucket.date_trunc('minute', timestamptz '2012-10-15 21:26:17+00', 10), timestamptz '2012-10-15 21:20:00+00'),
  ('date_trunc.js date is a Timestamp', tsbucket.date_trunc('second', timestamptz '2012-10-15 21:26:17+00', 10), timestamptz '2012-10-15 21:26:10+00'),
  ('date_trunc.js decimal binSize', tsbucket.date_trunc('minute', timestamptz '2020-01-30 18:59:00+00', 15, 'UTC'), timestamptz '2020-01-30 18:45:00+00'),
  ('date_trunc.js long binSize', tsbucket.date_trunc('day', timestamptz '2020-01-30 18:59:00+00', 1, 'UTC'), timestamptz '2020-01-30 00:00:00+00'),
  ('date_trunc.js int binSize', tsbucket.date_trunc('millisecond', timestamptz '2020-01-30 18:59:00.003+00', 1000, 'UTC'), timestamptz '2020-01-30 18:59:00+00'),
  ('date_trunc.js startOfWeek 1, unit year', tsbucket.date_trunc('year', timestamptz '2020-01-30 18:59:00+00', 1, 'GMT', '1'), timestamptz '2020-01-01 00:00:00+00')
) v(vector, got, mongo);

-- jstests/aggregation/expressions/date_trunc.js: the testCases whose result is null. "Missing"
-- fields are NULL; where MongoDB also gives other fields of the wrong type, a wrong value of the
-- right type stands in (NULL wins before any check, as in MongoDB).
SELECT vector, got, got IS NULL AS ok FROM (VALUES
  ('date_trunc.js missing date, invalid others', (tsbucket.date_trunc('H', NULL::timestamptz, 1, 'Invalid'))::text),
  ('date_trunc.js null date', (tsbucket.date_trunc('hour', NULL::timestamptz, 1, 'UTC'))::text),
  ('date_trunc.js null unit', (tsbucket.date_trunc(NULL, timestamptz '2020-11-01 18:23:36+00', 1, 'UTC'))::text),
  ('date_trunc.js missing unit, invalid others', (tsbucket.date_trunc(NULL, timestamptz '2020-11-01 18:23:36+00', 0, 'Invalid'))::text),
  ('date_trunc.js null binSize', (tsbucket.date_trunc('hour', timestamptz '2020-11-01 18:23:36+00', NULL, 'UTC'))::text),
  ('date_trunc.js missing binSize, invalid others', (tsbucket.date_trunc('invalid', timestamptz '2020-11-01 18:23:36+00', NULL, 'Invalid'))::text),
  ('date_trunc.js null timezone', (tsbucket.date_trunc('hour', timestamptz '2020-11-01 18:23:36+00', 1, NULL))::text),
  ('date_trunc.js missing timezone, invalid others', (tsbucket.date_trunc('century', timestamptz '2020-11-01 18:23:36+00', 1, NULL))::text),
  ('date_trunc.js null startOfWeek', (tsbucket.date_trunc('week', timestamptz '2020-11-01 18:23:36+00', 1, 'UTC', NULL))::text),
  ('date_trunc.js missing startOfWeek, invalid others', (tsbucket.date_trunc('week', timestamptz '2020-11-01 18:23:36+00', 0, 'Invalid', NULL))::text)
) v(vector, got);

-- jstests/aggregation/expressions/date_trunc.js: the testCases MongoDB answers with an error (those
-- about BSON types cannot be written in SQL: date "string", unit 1, binSize "Number" and 2.5,
-- timezone 1, startOfWeek 1).
SELECT vector, mongo_error, got, got = expected AS ok FROM (VALUES
  ('date_trunc.js invalid unit century', '5439014', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''century'', timestamptz ''2020-11-01 18:23:36+00'', 1, ''UTC'')'), '22023'),
  ('date_trunc.js binSize 0', '5439018', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', timestamptz ''2020-11-01 18:23:36+00'', 0, ''UTC'')'), '22023'),
  ('date_trunc.js timezone America/Invalid', '40485', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''hour'', timestamptz ''2020-11-01 18:23:36+00'', 1, ''America/Invalid'')'), '22023'),
  ('date_trunc.js startOfWeek FRIDIE', '5439016', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', timestamptz ''2020-11-01 18:23:36+00'', 1, ''GMT'', ''FRIDIE'')'), '22023')
) v(vector, mongo_error, got, expected);

-- jstests/aggregation/expressions/date_diff.js: the testCases with a result (the two versions of
-- the file read: with and without startOfWeek "IGNORED"; ObjectId and Timestamp dates as instants;
-- startOfWeek 1 as the text '1').
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('date_diff.js constants, no timezone', tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-02 00:00:00+00', 'hour'), 6::bigint),
  ('date_diff.js field paths, New York', tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-02 00:00:00+00', 'hour', 'America/New_York'), 6::bigint),
  ('date_diff.js field paths, startOfWeek IGNORED', tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-02 00:00:00+00', 'hour', 'America/New_York', 'IGNORED'), 6::bigint),
  ('date_diff.js ObjectIds', tsbucket.date_diff(timestamptz '2012-10-15 21:26:17+00', timestamptz '2012-10-15 21:26:17+00', 'millisecond', 'America/New_York'), 0::bigint),
  ('date_diff.js Timestamps', tsbucket.date_diff(timestamptz '2021-06-01 12:00:00+00', timestamptz '2021-06-01 12:00:00+00', 'millisecond'), 0::bigint),
  ('date_diff.js startOfWeek MONDAY', tsbucket.date_diff(timestamptz '2021-01-24 18:23:36+00', timestamptz '2021-01-25 02:23:36+00', 'week', 'GMT', 'MONDAY'), 1::bigint),
  ('date_diff.js startOfWeek and timezone', tsbucket.date_diff(timestamptz '2021-01-17 05:00:00+00', timestamptz '2021-01-17 04:59:00+00', 'week', 'America/New_York', 'sunday'), -1::bigint),
  ('date_diff.js default startOfWeek', tsbucket.date_diff(timestamptz '2021-01-24 18:23:36+00', timestamptz '2021-01-25 02:23:36+00', 'week'), 0::bigint),
  ('date_diff.js startOfWeek 1, unit hour', tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-01 18:23:36+00', 'hour', 'GMT', '1'), 0::bigint)
) v(vector, got, mongo);

-- jstests/aggregation/expressions/date_diff.js: the testCases whose result is null (as for
-- date_trunc.js).
SELECT vector, got, got IS NULL AS ok FROM (VALUES
  ('date_diff.js missing startDate, invalid others', (tsbucket.date_diff(NULL, timestamptz '2020-11-01 18:23:36+00', 'century', 'INVALID'))::text),
  ('date_diff.js null startDate', (tsbucket.date_diff(NULL, timestamptz '2020-11-01 18:23:36+00', 'hour', 'UTC'))::text),
  ('date_diff.js missing endDate, invalid others', (tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', NULL, 'epoch', 'INVALID'))::text),
  ('date_diff.js null unit', (tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-01 18:23:36+00', NULL, 'UTC'))::text),
  ('date_diff.js missing unit, invalid others', (tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-01 18:23:36+00', NULL, 'INVALID'))::text),
  ('date_diff.js null timezone', (tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-01 18:23:36+00', 'hour', NULL))::text),
  ('date_diff.js missing timezone, invalid others', (tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-01 18:23:36+00', 'century', NULL))::text),
  ('date_diff.js null startOfWeek', (tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-01 18:23:36+00', 'week', 'UTC', NULL))::text),
  ('date_diff.js missing startOfWeek, invalid others', (tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-01 18:23:36+00', 'week', 'INVALID', NULL))::text)
) v(vector, got);

-- jstests/aggregation/expressions/date_diff.js: the testCases MongoDB answers with an error (BSON
-- type errors left out).
SELECT vector, mongo_error, got, got = expected AS ok FROM (VALUES
  ('date_diff.js invalid unit decade', '5439014 / 9', pg_temp.sqlstate('SELECT tsbucket.date_diff(timestamptz ''2020-11-01 18:23:36+00'', timestamptz ''2020-11-01 18:23:36+00'', ''decade'', ''UTC'')'), '22023'),
  ('date_diff.js timezone America/Invalid', '40485', pg_temp.sqlstate('SELECT tsbucket.date_diff(timestamptz ''2020-11-01 18:23:36+00'', timestamptz ''2020-11-01 18:23:36+00'', ''hour'', ''America/Invalid'')'), '22023'),
  ('date_diff.js startOfWeek FRIDIE', '5439016 / 9', pg_temp.sqlstate('SELECT tsbucket.date_diff(timestamptz ''2020-11-01 18:23:36+00'', timestamptz ''2020-11-01 18:23:36+00'', ''week'', ''GMT'', ''FRIDIE'')'), '22023')
) v(vector, mongo_error, got, expected);

-- jstests/aggregation/expressions/date_add_subtract.js: the vectors with a result, from the two
-- versions of the file read (each once). The collection's document is {date: 2020-12-31T12:10:05Z,
-- unit: "month", timezone: "Europe/Paris"}.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('date_add_subtract.js add day 1', tsbucket.date_add(timestamptz '2020-11-30 12:10:05+00', 'day', 1), timestamptz '2020-12-01 12:10:05+00'),
  ('date_add_subtract.js add hour 24 across DST, Paris', tsbucket.date_add(timestamptz '2020-10-24 18:10:00+00', 'hour', 24, 'Europe/Paris'), timestamptz '2020-10-25 18:10:00+00'),
  ('date_add_subtract.js add day 1 across DST, Paris', tsbucket.date_add(timestamptz '2020-10-24 18:10:00+00', 'day', 1, 'Europe/Paris'), timestamptz '2020-10-25 19:10:00+00'),
  ('date_add_subtract.js add month 1, last day, Paris', tsbucket.date_add(timestamptz '2021-01-30 23:30:00+00', 'month', 1, 'Europe/Paris'), timestamptz '2021-02-27 23:30:00+00'),
  ('date_add_subtract.js add year -1', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'year', -1), timestamptz '2019-12-31 12:10:05+00'),
  ('date_add_subtract.js add quarter 1', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'quarter', 1), timestamptz '2021-03-31 12:10:05+00'),
  ('date_add_subtract.js add month 2', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'month', 2), timestamptz '2021-02-28 12:10:05+00'),
  ('date_add_subtract.js add week 1', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'week', 1), timestamptz '2021-01-07 12:10:05+00'),
  ('date_add_subtract.js add day 1 to $date', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'day', 1), timestamptz '2021-01-01 12:10:05+00'),
  ('date_add_subtract.js add hour 2', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'hour', 2), timestamptz '2020-12-31 14:10:05+00'),
  ('date_add_subtract.js add minute 50', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'minute', 50), timestamptz '2020-12-31 13:00:05+00'),
  ('date_add_subtract.js add minute -20', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'minute', -20), timestamptz '2020-12-31 11:50:05+00'),
  ('date_add_subtract.js add millisecond 1050', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'millisecond', 1050), timestamptz '2020-12-31 12:10:06.050+00'),
  ('date_add_subtract.js add $unit 1', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'month', 1), timestamptz '2021-01-31 12:10:05+00'),
  ('date_add_subtract.js add hour 2, $timezone', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'hour', 2, 'Europe/Paris'), timestamptz '2020-12-31 14:10:05+00'),
  ('date_add_subtract.js add month 2, $timezone', tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'month', 2, 'Europe/Paris'), timestamptz '2021-02-28 12:10:05+00'),
  ('date_add_subtract.js subtract year 1', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'year', 1), timestamptz '2019-12-31 12:10:05+00'),
  ('date_add_subtract.js subtract year 2', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'year', 2), timestamptz '2018-12-31 12:10:05+00'),
  ('date_add_subtract.js subtract quarter 2', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'quarter', 2), timestamptz '2020-06-30 12:10:05+00'),
  ('date_add_subtract.js subtract $unit 1', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'month', 1), timestamptz '2020-11-30 12:10:05+00'),
  ('date_add_subtract.js subtract $unit 3', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'month', 3), timestamptz '2020-09-30 12:10:05+00'),
  ('date_add_subtract.js subtract $unit 3, $timezone', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'month', 3, 'Europe/Paris'), timestamptz '2020-09-30 11:10:05+00'),
  ('date_add_subtract.js subtract day 15', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'day', 15), timestamptz '2020-12-16 12:10:05+00'),
  ('date_add_subtract.js subtract hour 48', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'hour', 48), timestamptz '2020-12-29 12:10:05+00'),
  ('date_add_subtract.js subtract minute 15', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'minute', 15), timestamptz '2020-12-31 11:55:05+00'),
  ('date_add_subtract.js subtract second 125', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'second', 125), timestamptz '2020-12-31 12:08:00+00'),
  ('date_add_subtract.js subtract month 2, last day', tsbucket.date_subtract(timestamptz '2021-01-31 03:00:00+00', 'month', 2), timestamptz '2020-11-30 03:00:00+00'),
  ('date_add_subtract.js subtract month 2, last day, New York', tsbucket.date_subtract(timestamptz '2021-01-31 03:00:00+00', 'month', 2, 'America/New_York'), timestamptz '2020-12-01 03:00:00+00'),
  ('date_add_subtract.js subtract(add(hour 2), hour 2)', tsbucket.date_subtract(tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'hour', 2), 'hour', 2), timestamptz '2020-12-31 12:10:05+00'),
  ('date_add_subtract.js subtract month 1 = add second 5', tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'month', 1), tsbucket.date_add(timestamptz '2020-11-30 12:10:00+00', 'second', 5))
) v(vector, got, mongo);

-- jstests/aggregation/expressions/date_add_subtract.js: the vectors whose result is null (a string
-- startDate or a fractional amount cannot be written in SQL; NULL stands for each missing field).
SELECT vector, got, got IS NULL AS ok FROM (VALUES
  ('date_add_subtract.js null startDate', (tsbucket.date_add(NULL, 'day', 1))::text),
  ('date_add_subtract.js null unit', (tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', NULL, 1))::text),
  ('date_add_subtract.js null amount', (tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'day', NULL))::text),
  ('date_add_subtract.js null timezone', (tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'month', 1, NULL))::text),
  ('date_add_subtract.js null startDate, unit workday', (tsbucket.date_add(NULL, 'workday', 1))::text),
  ('date_add_subtract.js null amount, unit workday, timezone Unknown', (tsbucket.date_add(timestamptz '2020-12-31 12:10:05+00', 'workday', NULL, 'Unknown'))::text),
  ('date_add_subtract.js null timezone, subtract', (tsbucket.date_subtract(timestamptz '2020-12-31 12:10:05+00', 'month', 1, NULL))::text)
) v(vector, got);

-- jstests/aggregation/expressions/date_add_subtract.js: the vectors MongoDB answers with an error
-- (BSON type and parse errors left out).
SELECT vector, mongo_error, got, got = expected AS ok FROM (VALUES
  ('date_add_subtract.js unit epoch', 'FailedToParse', pg_temp.sqlstate('SELECT tsbucket.date_add(timestamptz ''2020-12-31 12:10:05+00'', ''epoch'', 10)'), '22023'),
  ('date_add_subtract.js overflow, month 12 * 300000000', '5166406', pg_temp.sqlstate('SELECT tsbucket.date_subtract(timestamptz ''2020-12-31 12:10:05+00'', ''month'', 3600000000)'), '22008'),
  ('date_add_subtract.js amount -30000000000 months', '5976500', pg_temp.sqlstate('SELECT tsbucket.date_subtract(timestamptz ''2020-12-31 12:10:05+00'', ''month'', -30000000000)'), '22008'),
  ('date_add_subtract.js subtract day -9223372036854775808', '6045000', pg_temp.sqlstate('SELECT tsbucket.date_subtract(timestamptz ''2020-12-31 12:10:05+00'', ''day'', bigint ''-9223372036854775808'')'), '22003'),
  ('date_add_subtract.js timezone Unknown', '40485', pg_temp.sqlstate('SELECT tsbucket.date_subtract(timestamptz ''2020-12-31 12:10:05+00'', ''year'', 1, ''Unknown'')'), '22023')
) v(vector, mongo_error, got, expected);

-- tsbucket's own vectors, derived from MongoDB's rules rather than taken from its tests: MongoDB's
-- dateDiff in hours and minutes (date_time_support.cpp, dateDiffHour / dateDiffMinute) counts the
-- local clock's marks plus the change of UTC offset in whole units, truncated toward zero.
-- Kathmandu is +05:45 (+05:30 before 1986): its hour marks fall on :15 UTC. Lord Howe moves 30
-- minutes: hours follow its clock across the shift, minutes are elapsed. The instants are given in
-- UTC because some local times here occur twice.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('Kathmandu hour, 10:50 to 11:10 local (0 UTC hour boundaries)', tsbucket.date_diff(timestamptz '2021-06-01 05:05:00+00', timestamptz '2021-06-01 05:25:00+00', 'hour', 'Asia/Kathmandu'), 1::bigint),
  ('Kathmandu hour, 10:20 to 10:55 local (1 UTC hour boundary)', tsbucket.date_diff(timestamptz '2021-06-01 04:35:00+00', timestamptz '2021-06-01 05:10:00+00', 'hour', 'Asia/Kathmandu'), 0::bigint),
  ('Kathmandu hour, backwards', tsbucket.date_diff(timestamptz '2021-06-01 05:25:00+00', timestamptz '2021-06-01 05:05:00+00', 'hour', 'Asia/Kathmandu'), -1::bigint),
  ('Kathmandu minute, 10:50 to 11:10 local', tsbucket.date_diff(timestamptz '2021-06-01 05:05:00+00', timestamptz '2021-06-01 05:25:00+00', 'minute', 'Asia/Kathmandu'), 20::bigint),
  ('Kathmandu hour, 1985-12-31 23:50 +05:30 to 1986-01-01 00:20 +05:45', tsbucket.date_diff(timestamptz '1985-12-31 18:20:00+00', timestamptz '1985-12-31 18:35:00+00', 'hour', 'Asia/Kathmandu'), 1::bigint),
  ('Kathmandu minute, across the 15-minute shift', tsbucket.date_diff(timestamptz '1985-12-31 18:20:00+00', timestamptz '1985-12-31 18:35:00+00', 'minute', 'Asia/Kathmandu'), 15::bigint),
  ('Kathmandu second, across the 15-minute shift', tsbucket.date_diff(timestamptz '1985-12-31 18:20:00+00', timestamptz '1985-12-31 18:35:00+00', 'second', 'Asia/Kathmandu'), 900::bigint),
  ('Lord Howe hour, 01:45 +11:00 to 01:45 +10:30 (the repeated half hour)', tsbucket.date_diff(timestamptz '2021-04-03 14:45:00+00', timestamptz '2021-04-03 15:15:00+00', 'hour', 'Australia/Lord_Howe'), 0::bigint),
  ('Lord Howe minute, 01:45 +11:00 to 01:45 +10:30', tsbucket.date_diff(timestamptz '2021-04-03 14:45:00+00', timestamptz '2021-04-03 15:15:00+00', 'minute', 'Australia/Lord_Howe'), 30::bigint),
  ('Lord Howe minute, 01:45 +10:30 back to 01:45 +11:00', tsbucket.date_diff(timestamptz '2021-04-03 15:15:00+00', timestamptz '2021-04-03 14:45:00+00', 'minute', 'Australia/Lord_Howe'), -30::bigint),
  ('Lord Howe hour, 01:50 +10:30 to 02:40 +11:00 (spring forward)', tsbucket.date_diff(timestamptz '2021-10-02 15:20:00+00', timestamptz '2021-10-02 15:40:00+00', 'hour', 'Australia/Lord_Howe'), 1::bigint),
  ('Lord Howe minute, 01:50 +10:30 to 02:40 +11:00', tsbucket.date_diff(timestamptz '2021-10-02 15:20:00+00', timestamptz '2021-10-02 15:40:00+00', 'minute', 'Australia/Lord_Howe'), 20::bigint)
) v(vector, got, mongo);

-- tsbucket's own vectors, derived from MongoDB's rules rather than taken from its tests: hour bins
-- are elapsed time from 2000-01-01T00:00 local (date_time_support.cpp, truncateDateMillis from the
-- reference point). Lord Howe's reference is in summer time (+11:00), so in winter (+10:30) its
-- hour bins start at local :30; Kathmandu's at local :00.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('Lord Howe hour bin in winter, 10:45 local', tsbucket.date_trunc('hour', timestamptz '2021-06-01 00:15:00+00', 1, 'Australia/Lord_Howe'), timestamptz '2021-06-01 00:00:00+00'),
  ('Kathmandu hour bin, 10:50 local', tsbucket.date_trunc('hour', timestamptz '2021-06-01 05:05:00+00', 1, 'Asia/Kathmandu'), timestamptz '2021-06-01 04:15:00+00'),
  ('New York 4-hour bins in summer stay on 2000-01-01T05:00Z + 4n', tsbucket.date_trunc('hour', timestamptz '2021-07-01 18:23:36+00', 4, 'America/New_York'), timestamptz '2021-07-01 17:00:00+00')
) v(vector, got, mongo);

-- tsbucket's own vectors, derived from MongoDB's rules rather than taken from its tests:
-- startOfWeek is read only for unit week, at every call site; for other units any value, NULL
-- included, is ignored (date_trunc.js / date_diff.js: "Ignored when unit is not week"; MongoDB
-- evaluates startOfWeek only for weeks). The answers are those of the MongoDB vectors above.
SELECT vector, got, mongo, got IS NOT DISTINCT FROM mongo AS ok FROM (VALUES
  ('date_trunc(timestamptz) hour, startOfWeek NULL', (tsbucket.date_trunc('hour', timestamptz '2021-12-01 18:23:36+00', 4, 'America/New_York', NULL))::text, (timestamptz '2021-12-01 17:00:00+00')::text),
  ('date_trunc(timestamp) hour, startOfWeek IGNORED', (tsbucket.date_trunc('hour', timestamp '2021-12-01 18:23:36', 4, 'America/New_York', 'IGNORED'))::text, (timestamp '2021-12-01 17:00:00')::text),
  ('date_trunc(timestamp) hour, startOfWeek NULL', (tsbucket.date_trunc('hour', timestamp '2021-12-01 18:23:36', 4, 'America/New_York', NULL))::text, (timestamp '2021-12-01 17:00:00')::text),
  ('date_trunc(date) year, startOfWeek 1', (tsbucket.date_trunc('year', date '2020-01-30', 1, 'GMT', '1'))::text, (date '2020-01-01')::text),
  ('date_trunc(date) day, startOfWeek IGNORED', (tsbucket.date_trunc('day', date '2020-01-30', 1, 'UTC', 'IGNORED'))::text, (date '2020-01-30')::text),
  ('date_trunc(date) month, startOfWeek NULL', (tsbucket.date_trunc('month', date '2020-01-30', 1, 'UTC', NULL))::text, (date '2020-01-01')::text),
  ('date_diff hour, startOfWeek NULL', (tsbucket.date_diff(timestamptz '2020-11-01 18:23:36+00', timestamptz '2020-11-02 00:00:00+00', 'hour', 'America/New_York', NULL))::text, (6)::text),
  ('date_trunc(timestamp) week, startOfWeek NULL', (tsbucket.date_trunc('week', timestamp '2021-02-15 18:23:36', 1, 'UTC', NULL))::text, (NULL)::text),
  ('date_trunc(date) week, startOfWeek NULL', (tsbucket.date_trunc('week', date '2021-02-15', 1, 'UTC', NULL))::text, (NULL)::text),
  ('date_trunc(timestamp) week, default startOfWeek', (tsbucket.date_trunc('week', timestamp '2021-02-15 18:23:36'))::text, (timestamp '2021-02-14 00:00:00')::text),
  ('date_trunc(date) week, default startOfWeek', (tsbucket.date_trunc('week', date '2021-02-15'))::text, (date '2021-02-14')::text),
  ('date_trunc(date) week, startOfWeek mon, 2 weeks', (tsbucket.date_trunc('week', date '2000-01-30', 2, 'UTC', 'mon'))::text, (date '2000-01-17')::text),
  ('date_trunc(timestamp) hour, 2 hours', (tsbucket.date_trunc('hour', timestamp '2020-11-01 18:23:36', 2))::text, (timestamp '2020-11-01 18:00:00')::text)
) v(vector, got, mongo);

-- tsbucket's own vectors, derived from MongoDB's rules rather than taken from its tests: a start of
-- week that is not a day name is an error for unit week at every call site (date_trunc.js /
-- date_diff.js "FRIDIE"; date_time_support_test.cpp IsValidDayOfWeek: "" and "SND" are not days),
-- and the day names it accepts (IsValidDayOfWeek, ParseDayOfWeek) work.
SELECT vector, mongo_error, got, got = expected AS ok FROM (VALUES
  ('date_trunc(timestamp) week, startOfWeek FRIDIE', '5439016', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', timestamp ''2021-02-15 18:23:36'', 1, ''UTC'', ''FRIDIE'')'), '22023'),
  ('date_trunc(date) week, startOfWeek SND', 'FailedToParse', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', date ''2021-02-15'', 1, ''UTC'', ''SND'')'), '22023'),
  ('date_diff week, startOfWeek ''''', 'FailedToParse', pg_temp.sqlstate('SELECT tsbucket.date_diff(now(), now(), ''week'', ''UTC'', '''')'), '22023'),
  ('IsValidDayOfWeek / ParseDayOfWeek monday', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', now(), 1, ''UTC'', ''monday'')'), 'no error'),
  ('IsValidDayOfWeek / ParseDayOfWeek tue', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', now(), 1, ''UTC'', ''tue'')'), 'no error'),
  ('IsValidDayOfWeek / ParseDayOfWeek Wednesday', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', now(), 1, ''UTC'', ''Wednesday'')'), 'no error'),
  ('IsValidDayOfWeek / ParseDayOfWeek FRIDAY', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', now(), 1, ''UTC'', ''FRIDAY'')'), 'no error'),
  ('IsValidDayOfWeek / ParseDayOfWeek thursday', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', now(), 1, ''UTC'', ''thursday'')'), 'no error'),
  ('IsValidDayOfWeek / ParseDayOfWeek SAT', '(none)', pg_temp.sqlstate('SELECT tsbucket.date_trunc(''week'', now(), 1, ''UTC'', ''SAT'')'), 'no error')
) v(vector, mongo_error, got, expected);
