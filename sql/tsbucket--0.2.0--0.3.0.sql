-- tsbucket 0.2.0 -> 0.3.0 (ALTER EXTENSION tsbucket UPDATE).
-- tests/integration/test_extension_update.py checks that a database updated
-- by this script has the same schema as a fresh 0.3.0 install.

-- The worker skipped this database while its SQL was 0.2.0: make it due again.
SELECT tsbucket._extension_created();

-- New stores get the window_start index too.
CREATE OR REPLACE FUNCTION tsbucket._create_store(
    relation regclass, time_attnum int2, meta_attnums int2[], granularity text,
    span interval, span_micros int8, expire_after interval)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    store_name text := format('bucket_store_%s', relation::oid);
    time_type text;
    meta_defs text := '';
    meta_keys text := '';
    meta_types oid[] := '{}';
    att record;
    i int;
    store regclass;
    id_index regclass;
    id_seq regclass;
    moves regclass;
    moves_index regclass;
BEGIN
    SELECT format_type(atttypid, atttypmod) INTO time_type
      FROM pg_attribute WHERE attrelid = relation AND attnum = time_attnum;
    FOR i IN 1 .. coalesce(array_length(meta_attnums, 1), 0) LOOP
        SELECT a.atttypid, format_type(a.atttypid, a.atttypmod) AS typ,
               CASE WHEN a.attcollation <> 0 THEN
                   ' COLLATE ' || quote_ident(n.nspname) || '.' || quote_ident(c.collname) ELSE '' END AS coll
          INTO att
          FROM pg_attribute a
          LEFT JOIN pg_collation c ON c.oid = a.attcollation
          LEFT JOIN pg_namespace n ON n.oid = c.collnamespace
         WHERE a.attrelid = relation AND a.attnum = meta_attnums[i];
        meta_defs := meta_defs || format(', meta_%s %s%s', i, att.typ, att.coll);
        meta_keys := meta_keys || format('meta_%s, ', i);
        meta_types := meta_types || att.atttypid;
    END LOOP;
    EXECUTE format('CREATE TABLE tsbucket_internal.%I (
        bucket_id int8 NOT NULL, window_start %s NOT NULL, min_time %s NOT NULL, max_time %s NOT NULL,
        row_count int4 NOT NULL, uncompressed_bytes int8 NOT NULL, close_reason int2 NOT NULL,
        column_stats bytea, payload bytea NOT NULL%s) USING heap', store_name, time_type, time_type, time_type, meta_defs);
    store := format('tsbucket_internal.%I', store_name)::regclass;
    -- Payloads are compressed already; keep TOAST from trying again.
    EXECUTE format('ALTER TABLE %s ALTER COLUMN payload SET STORAGE EXTERNAL', store);
    EXECUTE format('CREATE INDEX %I ON %s (bucket_id)', store_name || '_id', store);
    EXECUTE format('CREATE INDEX %I ON %s (%swindow_start)', store_name || '_series', store, meta_keys);
    -- Expiry finds its buckets, and finds out that there are none, by max_time.
    EXECUTE format('CREATE INDEX %I ON %s (max_time)', store_name || '_max_time', store);
    -- Scans bounded in time but not by series reach their buckets by window start.
    EXECUTE format('CREATE INDEX %I ON %s (window_start)', store_name || '_window', store);
    -- Bucket ids cycle through the 37 bits a row identifier holds for them
    -- (src/tid.rs); only tsbucket's code draws from it (no grants).
    EXECUTE format('CREATE SEQUENCE tsbucket_internal.%I MINVALUE 1 MAXVALUE 137438953471 CYCLE', store_name || '_ids');
    id_index := format('tsbucket_internal.%I', store_name || '_id')::regclass;
    id_seq := format('tsbucket_internal.%I', store_name || '_ids')::regclass;
    EXECUTE format('CREATE TABLE tsbucket_internal.%I (old_id int8 NOT NULL, new_ids int8[] NOT NULL, map bytea NOT NULL) USING heap',
                   store_name || '_moves');
    moves := format('tsbucket_internal.%I', store_name || '_moves')::regclass;
    EXECUTE format('CREATE INDEX %I ON %s (old_id)', store_name || '_moves_old', moves);
    moves_index := format('tsbucket_internal.%I', store_name || '_moves_old')::regclass;
    -- Members of the extension, so that pg_dump leaves them out (the rows are
    -- dumped through the user table) and pg_upgrade carries them over.
    -- tsbucket._drop_cleanup drops them with the user table.
    EXECUTE format('ALTER EXTENSION tsbucket ADD TABLE %s', store);
    EXECUTE format('ALTER EXTENSION tsbucket ADD SEQUENCE %s', id_seq);
    EXECUTE format('ALTER EXTENSION tsbucket ADD TABLE %s', moves);
    INSERT INTO tsbucket.catalog (relid, store_relid, id_index, id_sequence, moves_relid, moves_index, time_attnum, time_type,
                                  meta_attnums, meta_types, granularity, bucket_max_span, span_micros, expire_after)
    VALUES (relation, store, id_index, id_seq, moves, moves_index, time_attnum,
            (SELECT atttypid FROM pg_attribute WHERE attrelid = relation AND attnum = time_attnum),
            meta_attnums, meta_types, granularity, span, span_micros, expire_after);
END $$;

-- Stores made by 0.2.0 lack the window_start index that time-bounded scans use
-- (tsbucket._create_store makes it for new ones). Column 2 is window_start.
DO $$
DECLARE
    store regclass;
BEGIN
    FOR store IN SELECT c.store_relid FROM tsbucket.catalog c LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i
                        WHERE i.indrelid = store AND i.indnatts = 1 AND i.indkey[0] = 2) THEN
            EXECUTE format('CREATE INDEX %I ON %s (window_start)',
                           (SELECT relname FROM pg_catalog.pg_class WHERE oid = store) || '_window', store);
        END IF;
    END LOOP;
END
$$;

-- Statistics: ANALYZE of a time-series table gathers them from the store
-- (src/stats.rs), and the worker does when enough buckets were written.
CREATE  FUNCTION tsbucket."_analyze"(
	"relation" oid /* pg_sys :: Oid */
) RETURNS void
STRICT
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_analyze_wrapper';
REVOKE EXECUTE ON FUNCTION tsbucket._analyze(oid) FROM PUBLIC;
ALTER TABLE tsbucket.job_state ADD COLUMN last_analyze timestamptz, ADD COLUMN analyzed_through bigint;
CREATE OR REPLACE VIEW tsbucket.jobs AS
SELECT j.relid::regclass AS table_name, j.last_expiry, j.buckets_expired, j.rows_expired,
       j.last_compaction, j.buckets_merged, j.buckets_written, j.last_error, j.last_error_at,
       j.last_analyze
  FROM tsbucket.job_state j JOIN tsbucket.catalog c USING (relid);
CREATE OR REPLACE FUNCTION tsbucket._run_jobs(relation regclass, max_groups int DEFAULT 200) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    e record;
    c record;
    ids_now bigint;
    quiet boolean;
    last_analyzed bigint;
BEGIN
    -- The user table first (as TRUNCATE and DROP lock it), then tsbucket's
    -- catalog rows and the store: maintenance never deadlocks with them.
    BEGIN
        EXECUTE format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE', relation);
    EXCEPTION WHEN undefined_table THEN
        RETURN;  -- dropped since the worker listed it
    END;
    IF NOT EXISTS (SELECT 1 FROM tsbucket.catalog WHERE relid = relation) THEN
        RETURN;
    END IF;
    INSERT INTO tsbucket.job_state (relid) VALUES (relation) ON CONFLICT (relid) DO NOTHING;
    BEGIN
        IF (SELECT expire_after FROM tsbucket.catalog WHERE relid = relation) IS NOT NULL
           OR EXISTS (SELECT 1 FROM tsbucket.series_retention_data WHERE relid = relation) THEN
            SELECT * INTO e FROM tsbucket.expire(relation);
            UPDATE tsbucket.job_state SET last_expiry = now(), buckets_expired = e.buckets_expired,
                   rows_expired = e.rows_expired WHERE relid = relation;
        END IF;
        -- No bucket written since a round found nothing to merge: nothing to do
        -- (a catalog look-up instead of a scan of the store). A round records
        -- that only when no other transaction was running as it began, so no
        -- bucket with an older id can still be on its way.
        ids_now := pg_sequence_last_value((SELECT id_sequence FROM tsbucket.catalog WHERE relid = relation));
        quiet := NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()));
        IF ids_now IS DISTINCT FROM (SELECT compacted_through FROM tsbucket.job_state WHERE relid = relation) THEN
            SELECT * INTO c FROM tsbucket._compact(relation, max_groups);
            UPDATE tsbucket.job_state SET last_compaction = now(), buckets_merged = c.buckets_before,
                   buckets_written = c.buckets_after,
                   compacted_through = CASE WHEN c.buckets_before = 0 AND quiet THEN ids_now END
             WHERE relid = relation;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        UPDATE tsbucket.job_state SET last_error = SQLERRM, last_error_at = now() WHERE relid = relation;
        RAISE WARNING 'tsbucket background job on %: %', relation, SQLERRM;
    END;
    -- Statistics (ANALYZE cannot sample a table whose rows live in the store)
    -- once a tenth of the table's buckets, and at least 10, were written since
    -- they were last gathered: bucket ids count the buckets written. A failure
    -- here leaves expiry and compaction done.
    BEGIN
        last_analyzed := (SELECT analyzed_through FROM tsbucket.job_state WHERE relid = relation);
        IF ids_now IS NOT NULL AND (last_analyzed IS NULL OR ids_now < last_analyzed OR ids_now - last_analyzed >=
               greatest(10, 0.1 * (SELECT greatest(store.reltuples, 0) FROM pg_class store JOIN tsbucket.catalog cat
                                       ON store.oid = cat.store_relid WHERE cat.relid = relation))) THEN
            PERFORM tsbucket._analyze(relation);
            UPDATE tsbucket.job_state SET last_analyze = now(), analyzed_through = ids_now WHERE relid = relation;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        UPDATE tsbucket.job_state SET last_error = SQLERRM, last_error_at = now() WHERE relid = relation;
        RAISE WARNING 'tsbucket statistics of %: %', relation, SQLERRM;
    END;
END $$;
