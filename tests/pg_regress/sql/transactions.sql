-- Visibility inside a transaction, ROLLBACK, savepoints, TRUNCATE.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tsbucket;
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE TABLE tx (time timestamptz NOT NULL, s text, v int) USING tsbucket;
SELECT tsbucket.create_timeseries('tx', 'time', 's');

BEGIN;
INSERT INTO tx VALUES ('2024-01-01 00:00:00', 'a', 1);
SELECT count(*) AS seen_by_next_statement FROM tx;
ROLLBACK;
SELECT count(*) AS after_rollback FROM tx;

BEGIN;
INSERT INTO tx VALUES ('2024-01-01 00:00:00', 'a', 1);
SAVEPOINT s1;
INSERT INTO tx VALUES ('2024-01-01 00:00:01', 'a', 2);
SAVEPOINT s2;
INSERT INTO tx VALUES ('2024-01-01 00:00:02', 'a', 3);
ROLLBACK TO s2;
INSERT INTO tx VALUES ('2024-01-01 00:00:03', 'a', 4);
RELEASE s1;
SAVEPOINT s3;
DELETE FROM tx WHERE v = 1;
ROLLBACK TO s3;
COMMIT;
SELECT v FROM tx ORDER BY v;

-- A PL/pgSQL exception block is a subtransaction: its rows go, earlier ones stay.
DO $$
BEGIN
  INSERT INTO tx VALUES ('2024-01-02 00:00:00', 'p', 10);
  BEGIN
    INSERT INTO tx VALUES ('2024-01-02 00:00:01', 'p', 11);
    PERFORM count(*) FROM tx;
    RAISE EXCEPTION 'undo';
  EXCEPTION WHEN raise_exception THEN NULL;
  END;
  INSERT INTO tx VALUES ('2024-01-02 00:00:02', 'p', 12);
END $$;
SELECT v FROM tx WHERE s = 'p' ORDER BY v;

-- INSERT ... SELECT from the table itself sees only rows from before the statement.
INSERT INTO tx SELECT time + interval '1 day', s, v + 100 FROM tx;
SELECT count(*) FROM tx;

-- TRUNCATE empties the table; ROLLBACK brings the rows back.
BEGIN;
TRUNCATE tx;
SELECT count(*) AS truncated FROM tx;
ROLLBACK;
SELECT count(*) AS restored FROM tx;
TRUNCATE tx;
SELECT count(*) AS truncated FROM tx;
SELECT buckets FROM tsbucket.stats('tx');
INSERT INTO tx VALUES ('2024-01-01 00:00:00', 'a', 1);
SELECT count(*) FROM tx;
DROP TABLE tx;
