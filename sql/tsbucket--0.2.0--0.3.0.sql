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

-- Security: the retention view is a security barrier; the label text is made
-- only by tsbucket's own code (as the extension owner).
CREATE OR REPLACE VIEW tsbucket.series_retention WITH (security_barrier) AS
SELECT relid, meta, expire_after FROM tsbucket.series_retention_data
 WHERE has_table_privilege(relid, 'SELECT');
REVOKE EXECUTE ON FUNCTION tsbucket._label_of(regclass) FROM PUBLIC;

-- The DDL guard also refuses moving a time-series table into a published schema.
CREATE OR REPLACE FUNCTION tsbucket._ddl_guard() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    a record;
    i int;
    published regclass;
BEGIN
    -- Logical replication would send no changes of a time-series table (its
    -- rows are written to the internal bucket store): refuse to publish one,
    -- also by moving it into a schema published FOR TABLES IN SCHEMA.
    IF TG_TAG IN ('CREATE PUBLICATION', 'ALTER PUBLICATION', 'ALTER TABLE') THEN
        SELECT c.relid::regclass INTO published FROM tsbucket.catalog c
         WHERE EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prrelid = c.relid)
            OR EXISTS (SELECT 1 FROM pg_publication_namespace pn JOIN pg_class k ON k.relnamespace = pn.pnnspid
                        WHERE k.oid = c.relid)
         LIMIT 1;
        IF published IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
                MESSAGE = format('time-series table %s cannot be published for logical replication', published),
                HINT = 'Its rows live in an internal bucket store, so a subscriber would receive no changes. '
                       'Use streaming replication, or copy the data with pg_dump.';
        END IF;
        IF TG_TAG <> 'ALTER TABLE' THEN
            RETURN;
        END IF;
    END IF;
    FOR r IN SELECT * FROM tsbucket.catalog LOOP
        SELECT attname, atttypid, attisdropped INTO a FROM pg_attribute
         WHERE attrelid = r.relid AND attnum = r.time_attnum;
        IF NOT FOUND THEN
            CONTINUE;  -- the table itself is being dropped
        END IF;
        IF a.attisdropped OR a.atttypid <> r.time_type THEN
            RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
                MESSAGE = format('cannot drop or change the type of the time column of time-series table %s', r.relid::regclass),
                HINT = 'The time and meta columns are fixed at creation; renaming them is allowed.';
        END IF;
        FOR i IN 1 .. coalesce(array_length(r.meta_attnums, 1), 0) LOOP
            SELECT attname, atttypid, attisdropped INTO a FROM pg_attribute
             WHERE attrelid = r.relid AND attnum = r.meta_attnums[i];
            IF a.attisdropped OR a.atttypid <> r.meta_types[i] THEN
                RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
                    MESSAGE = format('cannot drop or change the type of meta column of time-series table %s', r.relid::regclass),
                    HINT = 'The time and meta columns are fixed at creation; renaming them is allowed.';
            END IF;
        END LOOP;
        IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = r.relid AND tgtype & 1 = 1 AND tgtype & 66 = 0) THEN
            RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
                MESSAGE = format('AFTER ROW triggers and foreign keys are not supported on time-series table %s', r.relid::regclass),
                HINT = 'Use a BEFORE ROW trigger or an AFTER STATEMENT trigger.';
        END IF;
    END LOOP;
    -- Renamed time or meta columns: the label names them for pg_dump.
    FOR r IN SELECT DISTINCT d.objid FROM pg_event_trigger_ddl_commands() d JOIN tsbucket.catalog c ON c.relid = d.objid
              WHERE d.classid = 'pg_class'::regclass LOOP
        PERFORM tsbucket._sync_label(r.objid);
    END LOOP;
END $$;

-- alter_timeseries locks the table when the span grows.
CREATE OR REPLACE FUNCTION tsbucket.alter_timeseries(
    relation regclass,
    granularity text DEFAULT NULL,
    bucket_max_span interval DEFAULT NULL,
    bucket_rounding interval DEFAULT NULL,
    expire_after interval DEFAULT NULL,
    expire_never boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c tsbucket.catalog;
    new_span interval;
    new_gran text;
    rank_of jsonb := '{"seconds": 1, "minutes": 2, "hours": 3}';
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    PERFORM tsbucket._require_owner(relation);
    SELECT * INTO c FROM tsbucket.catalog WHERE relid = relation;
    IF granularity IS NOT NULL AND (bucket_max_span IS NOT NULL OR bucket_rounding IS NOT NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'granularity cannot be combined with bucket_max_span and bucket_rounding';
    END IF;
    IF (bucket_max_span IS NULL) <> (bucket_rounding IS NULL) OR bucket_max_span <> bucket_rounding THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'bucket_max_span and bucket_rounding must be given together and be equal';
    END IF;
    IF expire_never AND expire_after IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'expire_after and expire_never cannot both be given';
    END IF;
    IF expire_after IS NOT NULL AND expire_after <= interval '0' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('expire_after must be positive, not %s', expire_after);
    END IF;
    new_span := c.bucket_max_span;
    new_gran := c.granularity;
    IF granularity IS NOT NULL THEN
        IF NOT rank_of ? granularity THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('unknown granularity "%s"', granularity),
                HINT = 'Use seconds, minutes or hours.';
        END IF;
        IF c.granularity IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('table %s has a custom bucket span; change it with bucket_max_span', relation);
        END IF;
        IF (rank_of ->> granularity)::int < (rank_of ->> c.granularity)::int THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('granularity can only grow, not go from %s to %s', c.granularity, granularity),
                HINT = 'seconds -> minutes -> hours.';
        END IF;
        new_gran := granularity;
        new_span := CASE granularity WHEN 'seconds' THEN interval '1 hour' WHEN 'minutes' THEN interval '1 day'
                                     ELSE interval '30 days' END;
    ELSIF bucket_max_span IS NOT NULL THEN
        PERFORM tsbucket._check_span(bucket_max_span);
        IF bucket_max_span < c.bucket_max_span THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('bucket_max_span can only grow, not go from %s to %s', c.bucket_max_span, bucket_max_span);
        END IF;
        -- New windows must nest the old ones, or a row could fall in two.
        IF (extract(epoch FROM bucket_max_span)::bigint % extract(epoch FROM c.bucket_max_span)::bigint) <> 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('bucket_max_span %s must be a multiple of the current %s', bucket_max_span, c.bucket_max_span);
        END IF;
        new_gran := NULL;
        new_span := bucket_max_span;
    END IF;
    -- A wider span changes where scans look for rows (a bucket's rows lie
    -- within the current span of its window start): wait for running readers,
    -- and make later ones see the new span, as ALTER TABLE does.
    IF new_span IS DISTINCT FROM c.bucket_max_span THEN
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', relation);
    END IF;
    -- Runs as the caller; the catalog row is written by Rust after an ownership check.
    PERFORM tsbucket._update_catalog(relation, new_gran, new_span, (extract(epoch FROM new_span) * 1000000)::int8,
        CASE WHEN alter_timeseries.expire_never THEN NULL ELSE coalesce(alter_timeseries.expire_after, c.expire_after) END);
    PERFORM tsbucket._invalidate(relation);
    PERFORM tsbucket._sync_label(relation);
    PERFORM tsbucket._worker_notice();
END $$;
