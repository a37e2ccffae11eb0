-- tsbucket 0.5.0 -> 0.6.0: tails. Rows that a transaction leaves in
-- under-filled buckets (single-row INSERTs, a few rows per series) wait, row
-- by row, in one of three heap segments of their table until the worker
-- drains them into buckets (src/store/tail.rs). Bucket ids now stay below
-- 2^36: the ids above name tail rows.

ALTER TABLE tsbucket.catalog ADD COLUMN tail_segments oid[], ADD COLUMN tail_current oid;


-- A tail segment whose rows a drain moved into buckets: scans whose snapshot
-- sees this row read the buckets and skip the segment; older ones read the
-- segment. Deleted when the segment is emptied for reuse, once no snapshot
-- can still need it.
CREATE TABLE tsbucket.tail_drained (
    relid    oid  NOT NULL,
    segment  int2 NOT NULL,
    PRIMARY KEY (relid, segment)
);
GRANT SELECT ON tsbucket.tail_drained TO PUBLIC;

-- Creates a table's tail: three segments (heap tables of rows not yet in
-- buckets: the time, the meta values, the other columns encoded as one row,
-- keyed by column number) and the sequence naming the segment new rows go to.
-- Runs as the extension owner (from _create_store and the update script).
CREATE FUNCTION tsbucket._create_tail(relation regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c tsbucket.catalog;
    base text := format('bucket_tail_%s', relation::oid);
    meta_defs text := '';
    att record;
    i int;
    segments oid[] := '{}';
    seg regclass;
    cur regclass;
BEGIN
    SELECT * INTO c FROM tsbucket.catalog WHERE relid = relation;
    FOR i IN 1 .. coalesce(array_length(c.meta_attnums, 1), 0) LOOP
        SELECT format_type(a.atttypid, a.atttypmod) AS typ,
               CASE WHEN a.attcollation <> 0 THEN
                   ' COLLATE ' || quote_ident(n.nspname) || '.' || quote_ident(co.collname) ELSE '' END AS coll
          INTO att
          FROM pg_attribute a
          LEFT JOIN pg_collation co ON co.oid = a.attcollation
          LEFT JOIN pg_namespace n ON n.oid = co.collnamespace
         WHERE a.attrelid = relation AND a.attnum = c.meta_attnums[i];
        meta_defs := meta_defs || format(', meta_%s %s%s', i, att.typ, att.coll);
    END LOOP;
    FOR i IN 0 .. 2 LOOP
        -- No autovacuum: a segment is emptied whole (TRUNCATE), not row by row.
        EXECUTE format('CREATE TABLE tsbucket_internal.%I (time %s NOT NULL%s, row bytea NOT NULL) USING heap
                        WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false)',
                       base || '_' || i, format_type(c.time_type, NULL), meta_defs);
        seg := format('tsbucket_internal.%I', base || '_' || i)::regclass;
        -- Members of the extension, as the store is (an update script's own
        -- objects are members already).
        IF NOT EXISTS (SELECT 1 FROM pg_depend WHERE classid = 'pg_class'::regclass AND objid = seg AND deptype = 'e') THEN
            PERFORM tsbucket._extension_member(seg, true);
        END IF;
        segments := segments || seg::oid;
    END LOOP;
    EXECUTE format('CREATE SEQUENCE tsbucket_internal.%I MINVALUE 0 MAXVALUE 2 START 0', base || '_current');
    cur := format('tsbucket_internal.%I', base || '_current')::regclass;
    IF NOT EXISTS (SELECT 1 FROM pg_depend WHERE classid = 'pg_class'::regclass AND objid = cur AND deptype = 'e') THEN
        PERFORM tsbucket._extension_member(cur, true);
    END IF;
    UPDATE tsbucket.catalog SET tail_segments = segments, tail_current = cur WHERE relid = relation;
END $$;
REVOKE EXECUTE ON FUNCTION tsbucket._create_tail(regclass) FROM PUBLIC;

-- Payloads are compressed already: keep TOAST from trying again. A large
-- payload is split (src/store/insert.rs): whole TOAST chunks in `payload`,
-- which fill TOAST pages four to a page, and the remainder inline in the
-- store row as `payload_rest` (NULL when not split), rather than a short
-- last chunk that would leave most of a TOAST page's last slot empty.
-- Statistics stay inline and uncompressed while the row fits (MAIN): every
-- header read decodes them, and TOAST would otherwise try to compress them
-- before it moves a payload of one chunk out.
CREATE FUNCTION tsbucket._store_storage(store regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ALTER COLUMN payload SET STORAGE EXTERNAL, ALTER COLUMN payload_rest SET STORAGE EXTERNAL,
                    ALTER COLUMN column_stats SET STORAGE MAIN', store);
END $$;
REVOKE EXECUTE ON FUNCTION tsbucket._store_storage(regclass) FROM PUBLIC;

-- Creates the bucket store, its id sequence and moves table, and the catalog
-- row. Runs as the extension owner, called only by tsbucket._create_store_for
-- (Rust), which first checks that the calling role owns the table.
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
        column_stats bytea, payload bytea NOT NULL%s, payload_rest bytea) USING heap', store_name, time_type, time_type, time_type, meta_defs);
    store := format('tsbucket_internal.%I', store_name)::regclass;
    PERFORM tsbucket._store_storage(store);
    EXECUTE format('CREATE INDEX %I ON %s (bucket_id)', store_name || '_id', store);
    EXECUTE format('CREATE INDEX %I ON %s (%swindow_start)', store_name || '_series', store, meta_keys);
    -- Scans bounded in time but not by series reach their buckets by window
    -- start, and expiry its old buckets.
    EXECUTE format('CREATE INDEX %I ON %s (window_start)', store_name || '_window', store);
    -- Bucket ids cycle through the 36 bits a row identifier gives them
    -- (src/store/tid.rs); only tsbucket's code draws from it (no grants).
    -- (2^36 - 1: ids above it name rows of the tail, src/store/tid.rs.)
    EXECUTE format('CREATE SEQUENCE tsbucket_internal.%I MINVALUE 1 MAXVALUE 68719476735 CYCLE', store_name || '_ids');
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
    PERFORM tsbucket._extension_member(store, true);
    PERFORM tsbucket._extension_member(id_seq, true);
    PERFORM tsbucket._extension_member(moves, true);
    INSERT INTO tsbucket.catalog (relid, store_relid, id_index, id_sequence, moves_relid, moves_index, time_attnum, time_type,
                                  meta_attnums, meta_types, granularity, bucket_max_span, span_micros, expire_after)
    VALUES (relation, store, id_index, id_seq, moves, moves_index, time_attnum,
            (SELECT atttypid FROM pg_attribute WHERE attrelid = relation AND attnum = time_attnum),
            meta_attnums, meta_types, granularity, span, span_micros, expire_after);
    PERFORM tsbucket._create_tail(relation);
END $$;
REVOKE EXECUTE ON FUNCTION tsbucket._create_store(regclass, int2, int2[], text, interval, int8, interval) FROM PUBLIC;

-- Sizes a DBA reads: the user table's own relation is always empty (its rows
-- live in the bucket store), so pg_total_relation_size shows 0 for it.
CREATE OR REPLACE FUNCTION tsbucket.table_detailed_size(relation regclass)
RETURNS TABLE (table_bytes bigint, toast_bytes bigint, index_bytes bigint, total_bytes bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c tsbucket.catalog;
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    IF tsbucket._citus_table(relation) OR tsbucket._partitioned_label(relation) IS NOT NULL THEN
        -- A distributed or partitioned table: the sum over its shards (the shell holds no rows).
        RETURN QUERY
        SELECT sum(x.table_bytes)::bigint, sum(x.toast_bytes)::bigint, sum(x.index_bytes)::bigint, sum(x.total_bytes)::bigint
          FROM tsbucket._shard_rows(relation, 'table_detailed_size') o,
               json_to_record(o.r) AS x(table_bytes bigint, toast_bytes bigint, index_bytes bigint, total_bytes bigint);
        RETURN;
    END IF;
    SELECT * INTO c FROM tsbucket.catalog WHERE relid = relation;
    -- The store, its moves table and the tail's segments (rows not yet in buckets).
    RETURN QUERY
    WITH rels AS (
        SELECT r FROM unnest(ARRAY[c.store_relid, c.moves_relid] || coalesce(c.tail_segments, '{}')) r
         WHERE r IS NOT NULL AND EXISTS (SELECT 1 FROM pg_class WHERE oid = r))
    SELECT sum(pg_relation_size(r))::bigint,
           coalesce(sum((SELECT pg_total_relation_size(t.reltoastrelid) FROM pg_class t WHERE t.oid = r AND t.reltoastrelid <> 0)), 0)::bigint,
           sum(pg_indexes_size(r))::bigint,
           (sum(pg_total_relation_size(r)) + pg_total_relation_size(relation))::bigint
      FROM rels;
END $$;

-- Drops the bucket stores (and forgets the settings) of time-series tables
-- that no longer exist. Harmless to call for anyone: a table that still
-- exists is never touched.
CREATE OR REPLACE FUNCTION tsbucket._forget_dropped(relids oid[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c record;
    seg oid;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'tsbucket') THEN
        RETURN;
    END IF;
    FOR c IN SELECT * FROM tsbucket.catalog WHERE relid = ANY (relids)
                AND NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = catalog.relid) LOOP
        DELETE FROM tsbucket.catalog WHERE relid = c.relid;
        DELETE FROM tsbucket.series_retention_data WHERE relid = c.relid;
        DELETE FROM tsbucket.job_state WHERE relid = c.relid;
        IF EXISTS (SELECT 1 FROM pg_class WHERE oid = c.store_relid) THEN
            PERFORM tsbucket._extension_member(c.store_relid, false);
            EXECUTE format('DROP TABLE %s', c.store_relid::regclass);
        END IF;
        IF c.moves_relid IS NOT NULL AND EXISTS (SELECT 1 FROM pg_class WHERE oid = c.moves_relid) THEN
            PERFORM tsbucket._extension_member(c.moves_relid, false);
            EXECUTE format('DROP TABLE %s', c.moves_relid::regclass);
        END IF;
        IF EXISTS (SELECT 1 FROM pg_class WHERE oid = c.id_sequence) THEN
            PERFORM tsbucket._extension_member(c.id_sequence, false);
            EXECUTE format('DROP SEQUENCE %s', c.id_sequence::regclass);
        END IF;
        DELETE FROM tsbucket.tail_drained WHERE relid = c.relid;
        FOR seg IN SELECT s FROM unnest(coalesce(c.tail_segments, '{}')) s WHERE EXISTS (SELECT 1 FROM pg_class WHERE oid = s) LOOP
            PERFORM tsbucket._extension_member(seg, false);
            EXECUTE format('DROP TABLE %s', seg::regclass);
        END LOOP;
        IF c.tail_current IS NOT NULL AND EXISTS (SELECT 1 FROM pg_class WHERE oid = c.tail_current) THEN
            PERFORM tsbucket._extension_member(c.tail_current, false);
            EXECUTE format('DROP SEQUENCE %s', c.tail_current::regclass);
        END IF;
    END LOOP;
END $$;

-- One table's background run: expiry (if configured), then compaction of up
-- to max_groups series-windows (the rest waits for the next run, which keeps
-- the transaction short). Errors are recorded, not raised, so that one table
-- cannot stop the others.
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
    -- Without waiting, as autovacuum: a table someone holds (DDL, a DBA's
    -- compact) is left for the next visit, and the worker never queues in
    -- front of another session's lock (a DROP behind it would wait too).
    BEGIN
        EXECUTE format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE NOWAIT', relation);
    EXCEPTION WHEN undefined_table THEN
        RETURN;  -- dropped since the worker listed it
    WHEN lock_not_available THEN
        PERFORM tsbucket._worker_notice();  -- come back at the next interval
        RETURN;
    WHEN OTHERS THEN
        -- (Not recorded: that needs the lock.) The other tables still get their turn.
        RAISE WARNING 'tsbucket background job on %: %', relation, SQLERRM;
        RETURN;
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
        -- bucket with an older id can still be on its way, and when it left no
        -- window's buckets to grow (those merge once their window ends).
        ids_now := pg_sequence_last_value((SELECT id_sequence FROM tsbucket.catalog WHERE relid = relation));
        quiet := NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()));
        -- Or rows wait in the tail (or a drained segment waits to be emptied).
        IF ids_now IS DISTINCT FROM (SELECT compacted_through FROM tsbucket.job_state WHERE relid = relation)
           OR EXISTS (SELECT 1 FROM tsbucket.catalog cat, unnest(cat.tail_segments) s
                       WHERE cat.relid = relation AND pg_relation_size(s) > 0) THEN
            SELECT * INTO c FROM tsbucket._compact_round(relation, max_groups);
            UPDATE tsbucket.job_state SET last_compaction = now(), buckets_merged = c.buckets_before,
                   buckets_written = c.buckets_after,
                   compacted_through = CASE WHEN c.buckets_before = 0 AND c.deferred = 0 AND quiet THEN ids_now END
             WHERE relid = relation;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        UPDATE tsbucket.job_state SET last_error = SQLERRM, last_error_at = now() WHERE relid = relation;
        RAISE WARNING 'tsbucket background job on %: %', relation, SQLERRM;
        -- The work is still there (rows in the tail, buckets to merge): try
        -- again at the next interval, as autovacuum does after a failure.
        PERFORM tsbucket._worker_notice();
    END;
    -- Statistics (ANALYZE cannot sample a table whose rows live in the store)
    -- once a tenth of the table's buckets, and at least 10, were written since
    -- they were last gathered: bucket ids count the buckets written. At most
    -- once per worker interval, as autovacuum analyzes once per naptime: the
    -- rounds a drain wakes rewrite the open buckets, and would analyze every
    -- time. A failure here leaves expiry and compaction done.
    BEGIN
        last_analyzed := (SELECT analyzed_through FROM tsbucket.job_state WHERE relid = relation);
        IF ids_now IS NOT NULL AND (last_analyzed IS NULL OR ids_now < last_analyzed OR ids_now - last_analyzed >=
               greatest(10, 0.1 * (SELECT greatest(store.reltuples, 0) FROM pg_class store JOIN tsbucket.catalog cat
                                       ON store.oid = cat.store_relid WHERE cat.relid = relation)))
           AND NOT EXISTS (SELECT 1 FROM tsbucket.job_state WHERE relid = relation
                            AND last_analyze > now() - coalesce(current_setting('tsbucket.worker_interval', true), '1min')::interval) THEN
            PERFORM tsbucket._analyze(relation);
            -- Bucket ids are drawn outside transactions: with a writer still
            -- running as the round began, ids up to ids_now may belong to
            -- buckets this sample could not see, so the next round samples again.
            UPDATE tsbucket.job_state SET last_analyze = now(),
                   analyzed_through = CASE WHEN quiet THEN ids_now ELSE last_analyzed END WHERE relid = relation;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        UPDATE tsbucket.job_state SET last_error = SQLERRM, last_error_at = now() WHERE relid = relation;
        RAISE WARNING 'tsbucket statistics of %: %', relation, SQLERRM;
    END;
END $$;
REVOKE EXECUTE ON FUNCTION tsbucket._run_jobs(regclass, int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION tsbucket._analyze(oid) FROM PUBLIC;

-- DDL guards. The time and meta columns are fixed at creation; AFTER ROW
-- triggers (and so foreign keys from a time-series table) are refused because
-- rows reach the store only at the end of the statement.
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
                       'Use streaming replication, or copy the data with pg_dump.'
                       || CASE WHEN to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
                              ' On Citus: create_distributed_table rather than create_distributed_table_concurrently, '
                              'and shard moves and splits with shard_transfer_mode => ''block_writes''.' ELSE '' END;
        END IF;
        -- Nor the internal relations themselves (stores, tails): a subscriber
        -- would get rows of tables it cannot read, without the catalog naming them.
        SELECT k.oid::regclass INTO published FROM pg_class k
         WHERE k.relnamespace = 'tsbucket_internal'::regnamespace AND k.relkind = 'r'
           AND (EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prrelid = k.oid)
                OR EXISTS (SELECT 1 FROM pg_publication_namespace pn WHERE pn.pnnspid = k.relnamespace))
         ORDER BY k.oid LIMIT 1;
        IF published IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
                MESSAGE = format('internal relation %s of tsbucket cannot be published for logical replication', published),
                HINT = 'It holds the rows of a time-series table, which logical replication does not replicate. '
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

-- Makes an internal relation a member of the extension, or no longer one (src/sql/catalog.rs).
CREATE  FUNCTION tsbucket."_extension_member"(
	"rel" oid, /* pgrx::pg_sys::Oid */
	"add" bool /* bool */
) RETURNS void
STRICT
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_extension_member_wrapper';
REVOKE EXECUTE ON FUNCTION tsbucket._extension_member(oid, bool) FROM PUBLIC;

-- The background worker's compaction round (src/sql/maintenance.rs).
CREATE  FUNCTION tsbucket."_compact_round"(
	"relid" oid, /* pgrx::pg_sys::Oid */
	"max_groups" INT /* i32 */
) RETURNS TABLE (
	"buckets_before" bigint,  /* i64 */
	"buckets_after" bigint,  /* i64 */
	"rows_moved" bigint,  /* i64 */
	"deferred" bigint  /* i64 */
)
STRICT
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_compact_round_wrapper';

-- compact and expire of a distributed table refuse a transaction block (src/sql/maintenance.rs).
CREATE  FUNCTION tsbucket."_outside_transaction_block"(
	"what" TEXT /* &str */
) RETURNS void
STRICT
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_outside_transaction_block_wrapper';

-- Writes a partitioned time-series table's label (src/sql/catalog.rs).
CREATE  FUNCTION tsbucket."_set_partitioned_label"(
	"relid" oid, /* pgrx::pg_sys::Oid */
	"label" TEXT /* &str */
) RETURNS void
STRICT
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_set_partitioned_label_wrapper';

-- Rows of a table's tail, for tsbucket.stats (src/sql/inspect.rs).
CREATE  FUNCTION tsbucket."_tail_rows"(
	"relid" oid /* pgrx::pg_sys::Oid */
) RETURNS bigint /* i64 */
STRICT
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_tail_rows_wrapper';


CREATE FUNCTION tsbucket._citus_table(relation regclass) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    found boolean;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)' INTO found USING relation;
    RETURN found;
END $$;

CREATE OR REPLACE FUNCTION tsbucket.buckets(relation regclass)
RETURNS TABLE (bucket_id bigint, meta text, window_start text, min_time text, max_time text,
               rows integer, compressed_bytes integer, close_reason text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    IF tsbucket._citus_table(relation) OR tsbucket._partitioned_label(relation) IS NOT NULL THEN
        -- A distributed or partitioned table: every shard's buckets (a bucket id is its shard's).
        RETURN QUERY
        SELECT x.* FROM tsbucket._shard_rows(relation, 'buckets') o,
               json_to_record(o.r) AS x(bucket_id bigint, meta text, window_start text, min_time text,
                   max_time text, rows integer, compressed_bytes integer, close_reason text);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM tsbucket._buckets(relation);
END $$;

CREATE OR REPLACE FUNCTION tsbucket.verify(relation regclass)
RETURNS TABLE (bucket_id bigint, problem text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    IF tsbucket._citus_table(relation) OR tsbucket._partitioned_label(relation) IS NOT NULL THEN
        -- A distributed or partitioned table: every shard checked, its problems named by shard.
        RETURN QUERY
        SELECT x.bucket_id, o.shard || ': ' || x.problem
          FROM tsbucket._shard_rows(relation, 'verify') o,
               json_to_record(o.r) AS x(bucket_id bigint, problem text);
        RETURN;
    END IF;
    RETURN QUERY SELECT v.bucket_id, v.problem FROM tsbucket._verify(relation) v;
END $$;

-- A table's tsbucket label as stored (what pg_dump writes), or NULL.
CREATE FUNCTION tsbucket._stored_label(relation regclass) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT l.label FROM pg_seclabel l
     WHERE l.objoid = relation AND l.classoid = 'pg_class'::regclass AND l.objsubid = 0 AND l.provider = 'tsbucket'
$$;

-- A settings change of a Citus table (alter_timeseries, series retention)
-- reaches every shard: made on the shell here, its new label goes to the
-- other nodes' shells through Citus (tsbucket._configure_citus_shards), and
-- each node's label hook gives it to that node's shards (tsbucket._take_label).
CREATE FUNCTION tsbucket._citus_follow(relation regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF current_setting('tsbucket_internal.applying_label', true) IS DISTINCT FROM 'on' AND tsbucket._citus_table(relation) THEN
        PERFORM tsbucket._configure_citus_shards(relation);
    END IF;
END $$;

-- The label hook's answer to a new label on a configured table: taken (its
-- settings applied) only from tsbucket itself, or from Citus carrying a
-- shell's new label to this node, whose shards then take it too; false
-- otherwise (the hook refuses: settings change through alter_timeseries).
-- Runs as the caller, whom SECURITY LABEL found owning the table.
CREATE FUNCTION tsbucket._take_label(relation regclass, label text) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    shell boolean := tsbucket._citus_table(relation);
BEGIN
    IF current_setting('tsbucket_internal.applying_label', true) IS DISTINCT FROM 'on'
       AND NOT (shell AND current_setting('citus.enable_ddl_propagation', true) = 'off'
                AND current_setting('application_name') LIKE 'citus_internal%') THEN
        RETURN false;
    END IF;
    PERFORM tsbucket._apply_label(relation, label);
    IF shell THEN
        PERFORM tsbucket._configure_citus_shards(relation);
    END IF;
    RETURN true;
END $$;

-- Makes a configured table's settings those of `label` (its time and meta
-- columns must be the same), through the functions a DBA calls, with their checks.
CREATE FUNCTION tsbucket._apply_label(relation regclass, label text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    l jsonb := label::jsonb;
    cur jsonb := tsbucket._stored_label(relation)::jsonb;
    changed_span boolean;
    r record;
BEGIN
    IF l -> 'time_column' IS DISTINCT FROM cur -> 'time_column' OR l -> 'meta_columns' IS DISTINCT FROM cur -> 'meta_columns' THEN
        RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
            MESSAGE = format('the time and meta columns of time-series table %s cannot change', relation),
            HINT = 'They are fixed when the table is configured.';
    END IF;
    PERFORM set_config('tsbucket_internal.applying_label', 'on', true);
    changed_span := l ->> 'granularity' IS NULL AND (l ->> 'bucket_max_span') IS DISTINCT FROM (cur ->> 'bucket_max_span');
    IF (l ->> 'granularity') IS DISTINCT FROM (cur ->> 'granularity') OR changed_span
       OR (l ->> 'expire_after') IS DISTINCT FROM (cur ->> 'expire_after') THEN
        PERFORM tsbucket.alter_timeseries(relation,
            granularity => CASE WHEN (l ->> 'granularity') IS DISTINCT FROM (cur ->> 'granularity') THEN l ->> 'granularity' END,
            bucket_max_span => CASE WHEN changed_span THEN (l ->> 'bucket_max_span')::interval END,
            bucket_rounding => CASE WHEN changed_span THEN (l ->> 'bucket_max_span')::interval END,
            expire_after => (l ->> 'expire_after')::interval,
            expire_never => l ->> 'expire_after' IS NULL);
    END IF;
    FOR r IN SELECT o ->> 0 AS meta FROM jsonb_array_elements(coalesce(cur -> 'series_retention', '[]')) o
              WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(l -> 'series_retention', '[]')) n WHERE n ->> 0 = o ->> 0) LOOP
        PERFORM tsbucket._write_series_retention(relation, r.meta, NULL, true);
    END LOOP;
    FOR r IN SELECT n ->> 0 AS meta, (n ->> 1)::interval AS expire_after FROM jsonb_array_elements(coalesce(l -> 'series_retention', '[]')) n
              WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(cur -> 'series_retention', '[]')) o WHERE o = n) LOOP
        PERFORM tsbucket._write_series_retention(relation, r.meta, r.expire_after, false);
    END LOOP;
    PERFORM tsbucket._invalidate(relation);
    PERFORM tsbucket._sync_label(relation);
    PERFORM set_config('tsbucket_internal.applying_label', '', true);
    -- SECURITY LABEL stores the text given: only ever what the catalog now says.
    IF tsbucket._stored_label(relation)::jsonb IS DISTINCT FROM l THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('security label of provider tsbucket on %s is not a tsbucket configuration', relation),
            HINT = 'tsbucket writes this label itself; change settings with tsbucket.alter_timeseries().';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION tsbucket.create_timeseries(
    relation regclass,
    time_column name,
    meta_column name DEFAULT NULL,
    granularity text DEFAULT NULL,
    bucket_max_span interval DEFAULT NULL,
    bucket_rounding interval DEFAULT NULL,
    expire_after interval DEFAULT NULL,
    meta_columns name[] DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    amname name;
    time_att record;
    metas name[];
    meta_attnums int2[] := '{}';
    m name;
    meta_attnum int2;
    span interval;
    gran text;
    partitioned boolean := (SELECT relkind FROM pg_class WHERE oid = relation) = 'p';
BEGIN
    SELECT a.amname INTO amname FROM pg_class c LEFT JOIN pg_am a ON a.oid = c.relam WHERE c.oid = relation;
    -- A partitioned table holds no rows: its configuration is its label, which
    -- every partition, present and future, takes (tsbucket._configure_partitions).
    IF amname IS DISTINCT FROM 'tsbucket' AND NOT partitioned THEN
        RAISE EXCEPTION USING ERRCODE = 'wrong_object_type',
            MESSAGE = format('table %s does not use the tsbucket access method', relation),
            HINT = 'Create the table with CREATE TABLE ... USING tsbucket.';
    END IF;
    IF NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = relation), 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = format('must be owner of table %s', relation);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_publication_rel WHERE prrelid = relation)
       OR EXISTS (SELECT 1 FROM pg_publication_namespace pn JOIN pg_class k ON k.relnamespace = pn.pnnspid
                   WHERE k.oid = relation) THEN
        RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
            MESSAGE = format('table %s is published for logical replication', relation),
            HINT = 'A time-series table''s rows live in an internal bucket store, which logical replication would not send; '
                   'remove the table (or its schema) from the publication first.';
    END IF;
    IF EXISTS (SELECT 1 FROM tsbucket.catalog WHERE relid = relation)
       OR (partitioned AND tsbucket._partitioned_label(relation) IS NOT NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'duplicate_object',
            MESSAGE = format('table %s is already a time-series table', relation),
            HINT = 'The time and meta columns and the bucket span are fixed at creation.';
    END IF;

    SELECT attnum, atttypid, attnotnull INTO time_att FROM pg_attribute
     WHERE attrelid = relation AND attname = time_column AND attnum > 0 AND NOT attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'undefined_column',
            MESSAGE = format('time column "%s" does not exist in table %s', time_column, relation);
    END IF;
    IF time_att.atttypid NOT IN ('timestamptz'::regtype, 'timestamp'::regtype) THEN
        RAISE EXCEPTION USING ERRCODE = 'datatype_mismatch',
            MESSAGE = format('time column "%s" has type %s', time_column, format_type(time_att.atttypid, NULL)),
            HINT = 'The time column must be of type timestamptz or timestamp.';
    END IF;
    IF NOT time_att.attnotnull THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_table_definition',
            MESSAGE = format('time column "%s" must be NOT NULL', time_column),
            HINT = format('ALTER TABLE %s ALTER COLUMN %I SET NOT NULL', relation, time_column);
    END IF;

    IF meta_column IS NOT NULL AND meta_columns IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'meta_column and meta_columns cannot both be given',
            HINT = 'Use meta_columns for several meta columns.';
    END IF;
    metas := coalesce(meta_columns, CASE WHEN meta_column IS NULL THEN '{}'::name[] ELSE ARRAY[meta_column] END);
    FOREACH m IN ARRAY metas LOOP
        SELECT attnum INTO meta_attnum FROM pg_attribute
         WHERE attrelid = relation AND attname = m AND attnum > 0 AND NOT attisdropped;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'undefined_column',
                MESSAGE = format('meta column "%s" does not exist in table %s', m, relation);
        END IF;
        IF meta_attnum = time_att.attnum THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('column "%s" cannot be both the time column and a meta column', m);
        END IF;
        IF meta_attnum = ANY (meta_attnums) THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('meta column "%s" is given twice', m);
        END IF;
        meta_attnums := meta_attnums || meta_attnum;
    END LOOP;

    IF granularity IS NOT NULL AND (bucket_max_span IS NOT NULL OR bucket_rounding IS NOT NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'granularity cannot be combined with bucket_max_span and bucket_rounding',
            HINT = 'Give either a granularity or a custom span.';
    END IF;
    IF (bucket_max_span IS NULL) <> (bucket_rounding IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'bucket_max_span and bucket_rounding must be given together',
            HINT = 'Give both, with the same value.';
    END IF;
    IF bucket_max_span IS NOT NULL THEN
        IF bucket_max_span <> bucket_rounding THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('bucket_max_span (%s) and bucket_rounding (%s) must be equal', bucket_max_span, bucket_rounding);
        END IF;
        PERFORM tsbucket._check_span(bucket_max_span);
        span := bucket_max_span;
        gran := NULL;
    ELSE
        gran := coalesce(granularity, 'seconds');
        span := CASE gran WHEN 'seconds' THEN interval '1 hour' WHEN 'minutes' THEN interval '1 day'
                          WHEN 'hours' THEN interval '30 days' END;
        IF span IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('unknown granularity "%s"', gran),
                HINT = 'Use seconds (1 hour buckets), minutes (1 day) or hours (30 days), or bucket_max_span.';
        END IF;
    END IF;
    IF expire_after IS NOT NULL AND expire_after <= interval '0' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('expire_after must be positive, not %s', expire_after);
    END IF;

    IF partitioned THEN
        -- The label, as tsbucket._label_of writes one; the label hook then
        -- configures the partitions from it (as a restore would). A call into
        -- the library first: it registers the label provider in this session.
        PERFORM tsbucket._worker_notice();
        EXECUTE format('SECURITY LABEL FOR tsbucket ON TABLE %s IS %L', relation, jsonb_build_object(
            'version', 1, 'time_column', time_column, 'meta_columns', to_jsonb(metas), 'granularity', gran,
            'bucket_max_span', span::text, 'expire_after', expire_after::text, 'series_retention', '[]'::jsonb)::text);
        RETURN;
    END IF;
    PERFORM tsbucket._create_store_for(relation, time_att.attnum::int2, meta_attnums, gran, span,
                                       (extract(epoch FROM span) * 1000000)::int8, expire_after);
    PERFORM tsbucket._invalidate(relation);
    PERFORM tsbucket._sync_label(relation);
    IF tsbucket._citus_table(relation) THEN
        PERFORM tsbucket._configure_citus_shards(relation);
    END IF;
    PERFORM tsbucket._worker_notice();
END $$;

CREATE OR REPLACE FUNCTION tsbucket.set_series_retention(relation regclass, meta anyelement, expire_after interval)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    PERFORM tsbucket._require_owner(relation);
    IF meta IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'the series of NULL meta values has no retention of its own',
            HINT = 'It follows the table''s expire_after.';
    END IF;
    IF expire_after <= interval '0' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('expire_after must be positive, not %s', expire_after);
    END IF;
    IF tsbucket._partitioned_label(relation) IS NOT NULL THEN
        PERFORM tsbucket._partitioned_retention(relation, meta, format('%s', meta), expire_after, false);
        RETURN;
    END IF;
    PERFORM tsbucket._write_series_retention(relation, format('%s', meta), expire_after, false);
    PERFORM tsbucket._sync_label(relation);
    PERFORM tsbucket._citus_follow(relation);
    PERFORM tsbucket._worker_notice();
END $$;

CREATE OR REPLACE FUNCTION tsbucket.reset_series_retention(relation regclass, meta anyelement)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    PERFORM tsbucket._require_owner(relation);
    IF tsbucket._partitioned_label(relation) IS NOT NULL THEN
        PERFORM tsbucket._partitioned_retention(relation, meta, format('%s', meta), NULL, true);
        RETURN;
    END IF;
    PERFORM tsbucket._write_series_retention(relation, format('%s', meta), NULL, true);
    PERFORM tsbucket._sync_label(relation);
    PERFORM tsbucket._citus_follow(relation);
END $$;

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
    parent jsonb;
    leaf regclass;
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    PERFORM tsbucket._require_owner(relation);
    parent := tsbucket._partitioned_label(relation)::jsonb;
    IF parent IS NULL THEN
        SELECT * INTO c FROM tsbucket.catalog WHERE relid = relation;
    ELSE
        -- A partitioned table: the same checks against its label.
        c.granularity := parent ->> 'granularity';
        c.bucket_max_span := (parent ->> 'bucket_max_span')::interval;
        c.expire_after := (parent ->> 'expire_after')::interval;
    END IF;
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
    IF parent IS NOT NULL THEN
        -- Every partition changes, and the label later partitions take.
        PERFORM set_config('tsbucket_internal.altering_partitions', 'on', true);
        FOR leaf IN SELECT tsbucket._leaves(relation) LOOP
            PERFORM tsbucket.alter_timeseries(leaf, granularity, bucket_max_span, bucket_rounding, expire_after, expire_never);
        END LOOP;
        PERFORM set_config('tsbucket_internal.altering_partitions', '', true);
        PERFORM tsbucket._set_partitioned_label(relation, (parent || jsonb_build_object(
            'granularity', new_gran, 'bucket_max_span', new_span::text,
            'expire_after', (CASE WHEN alter_timeseries.expire_never THEN NULL
                                  ELSE coalesce(alter_timeseries.expire_after, c.expire_after) END)::text))::text);
        RETURN;
    END IF;
    -- The partitions of a time-series parent share its span (ATTACH and
    -- pg_restore check it): it changes through the parent only.
    IF new_span IS DISTINCT FROM c.bucket_max_span
       AND current_setting('tsbucket_internal.altering_partitions', true) IS DISTINCT FROM 'on'
       AND EXISTS (SELECT 1 FROM pg_partition_ancestors(relation) p
                    WHERE p <> relation AND tsbucket._partitioned_label(p) IS NOT NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
            MESSAGE = format('cannot change the bucket span of partition %s alone', relation),
            HINT = 'Alter its partitioned time-series parent: its partitions share its bucket span.';
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
    PERFORM tsbucket._citus_follow(relation);
    PERFORM tsbucket._worker_notice();
END $$;

CREATE FUNCTION tsbucket._configure_citus_shards(relation regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    label text := tsbucket._stored_label(relation);
    originating boolean := current_setting('citus.enable_ddl_propagation', true) IS DISTINCT FROM 'off';
    shard text;
    rel regclass;
    distributed_by text;
    schema_name text := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = relation);
BEGIN
    IF originating THEN
        -- Distributed in this transaction: Citus made the shards over connections of their own, which the nodes'
        -- connections carrying the label may not be.
        EXECUTE 'SELECT xmin::text FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1' INTO distributed_by USING relation;
        IF distributed_by = (pg_current_xact_id_if_assigned()::text::bigint & 4294967295)::text THEN
            RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
                MESSAGE = format('cannot configure table %s in the transaction that distributed it', relation),
                HINT = 'Commit create_distributed_table() first, then call tsbucket.create_timeseries(); or configure the table before distributing it.';
        END IF;
        IF current_setting('citus.enable_alter_role_propagation', true) = 'off' THEN
            RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
                MESSAGE = format('cannot configure table %s on the other nodes: Citus does not carry security labels', relation),
                HINT = 'SET citus.enable_alter_role_propagation = on (its default), or configure the table before create_distributed_table().';
        END IF;
        EXECUTE format('SECURITY LABEL FOR tsbucket ON TABLE %s IS %L', relation, label);
    ELSIF current_setting('application_name') NOT LIKE 'citus_internal%' THEN
        -- Not Citus applying the label here: a user who turned propagation off would configure this node alone.
        RAISE EXCEPTION USING ERRCODE = 'feature_not_supported',
            MESSAGE = format('cannot configure distributed table %s with citus.enable_ddl_propagation off: its shards on the other nodes would stay unconfigured', relation),
            HINT = 'RESET citus.enable_ddl_propagation, then call tsbucket.create_timeseries() again.';
    END IF;
    FOR shard IN EXECUTE 'SELECT pg_catalog.shard_name(s.logicalrelid, s.shardid)
                            FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p USING (shardid)
                           WHERE s.logicalrelid = $1 AND p.groupid = (SELECT groupid FROM pg_catalog.pg_dist_local_group)'
                 USING relation LOOP
        -- (shard_name leaves the shards of tables in public unqualified.)
        rel := coalesce(to_regclass(shard), to_regclass(quote_ident(schema_name) || '.' || shard));
        IF rel IS NULL THEN
            -- (On another node a shard not made yet gets the label when it is made.)
            IF originating THEN
                RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
                    MESSAGE = format('shard %s of table %s is not visible to this transaction', shard, relation),
                    HINT = 'Citus made the shards over other connections of this transaction: commit create_distributed_table() first, then call tsbucket.create_timeseries().';
            END IF;
            CONTINUE;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM tsbucket.catalog WHERE relid = rel) THEN
            EXECUTE format('SECURITY LABEL FOR tsbucket ON TABLE %s IS %L', rel, label);
        ELSIF tsbucket._stored_label(rel) IS DISTINCT FROM label THEN
            -- A configured shard takes the shell's new settings (tsbucket._take_label).
            PERFORM set_config('tsbucket_internal.applying_label', 'on', true);
            EXECUTE format('SECURITY LABEL FOR tsbucket ON TABLE %s IS %L', rel, label);
            PERFORM set_config('tsbucket_internal.applying_label', '', true);
        END IF;
    END LOOP;
END $$;

CREATE FUNCTION tsbucket._shard_rows(relation regclass, fn text, OUT shard text, OUT r json) RETURNS SETOF record
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o record;
    leaf regclass;
BEGIN
    IF tsbucket._partitioned_label(relation) IS NOT NULL THEN
        -- A time-series parent: each of its partitions (that is configured).
        FOR leaf IN SELECT tsbucket._leaves(relation) LOOP
            shard := leaf::text;
            FOR r IN EXECUTE format('SELECT to_json(x) FROM tsbucket.%I(%L) x', fn, leaf) LOOP
                RETURN NEXT;
            END LOOP;
        END LOOP;
        RETURN;
    END IF;
    FOR o IN EXECUTE 'SELECT shard_name(s.logicalrelid, s.shardid) AS shard, o.success, o.result
                        FROM run_command_on_shards($1, $2) o JOIN pg_dist_shard s USING (shardid) ORDER BY o.shardid'
             USING relation, format('SELECT coalesce(json_agg(r), ''[]'')::text FROM tsbucket.%I(%%L) r', fn) LOOP
        IF NOT o.success THEN
            RAISE EXCEPTION USING ERRCODE = 'connection_failure',
                MESSAGE = format('shard %s of table %s did not answer: %s', o.shard, relation, o.result),
                HINT = 'Check that every node of the Citus cluster is up and has tsbucket installed.';
        END IF;
        shard := o.shard;
        FOR r IN SELECT json_array_elements(o.result::json) LOOP
            RETURN NEXT;
        END LOOP;
    END LOOP;
END $$;

CREATE FUNCTION tsbucket._partitioned_label(relation regclass) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT l.label FROM pg_seclabel l JOIN pg_class k ON k.oid = l.objoid
     WHERE l.objoid = relation AND l.classoid = 'pg_class'::regclass AND l.objsubid = 0
       AND l.provider = 'tsbucket' AND k.relkind = 'p'
$$;

CREATE FUNCTION tsbucket._label_partitioned(relation regclass, label text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    l jsonb;
BEGIN
    BEGIN
        l := label::jsonb;
    EXCEPTION WHEN OTHERS THEN
        l := NULL;
    END;
    IF jsonb_typeof(l) IS DISTINCT FROM 'object' OR (l ->> 'version') IS DISTINCT FROM '1'
       OR NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = relation AND attname = l ->> 'time_column'
                       AND attnum > 0 AND NOT attisdropped AND atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype)) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('security label of provider tsbucket on %s is not a tsbucket configuration', relation),
            HINT = 'tsbucket writes this label itself; configure tables with tsbucket.create_timeseries().';
    END IF;
    PERFORM tsbucket._configure_partitions(relation, relation, label);
END $$;

CREATE FUNCTION tsbucket._configure_partitions(relation regclass, parent regclass, label text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    leaf regclass;
    mine jsonb;
    l jsonb := label::jsonb;
BEGIN
    FOR leaf IN SELECT t.relid FROM pg_partition_tree(relation) t JOIN pg_class k ON k.oid = t.relid
                 WHERE t.isleaf AND k.relkind <> 'f' ORDER BY t.level, t.relid LOOP
        IF EXISTS (SELECT 1 FROM tsbucket.catalog WHERE relid = leaf) THEN
            SELECT jsonb_build_object(
                       'time_column', (SELECT attname FROM pg_attribute WHERE attrelid = c.relid AND attnum = c.time_attnum),
                       'meta_columns', to_jsonb(ARRAY(SELECT a.attname FROM unnest(c.meta_attnums) WITH ORDINALITY AS m(attnum, ord)
                                                        JOIN pg_attribute a ON a.attrelid = c.relid AND a.attnum = m.attnum ORDER BY m.ord)),
                       'bucket_max_span', c.bucket_max_span::text)
              INTO mine FROM tsbucket.catalog c WHERE c.relid = leaf;
            -- (Spans compared as intervals: the label's text is in the IntervalStyle of whoever wrote it.)
            IF (mine -> 'time_column', mine -> 'meta_columns', (mine ->> 'bucket_max_span')::interval)
               IS DISTINCT FROM (l -> 'time_column', l -> 'meta_columns', (l ->> 'bucket_max_span')::interval) THEN
                RAISE EXCEPTION USING ERRCODE = 'invalid_table_definition',
                    MESSAGE = format('partition %s is a time-series table configured unlike %s', leaf, parent),
                    DETAIL = format('%s: %s; %s: %s', leaf, mine, parent, jsonb_build_object('time_column', l -> 'time_column',
                                    'meta_columns', l -> 'meta_columns', 'bucket_max_span', l -> 'bucket_max_span')),
                    HINT = 'A partition takes the time and meta columns and the bucket span of its time-series parent.';
            END IF;
            CONTINUE;
        END IF;
        IF (SELECT a.amname FROM pg_class k LEFT JOIN pg_am a ON a.oid = k.relam WHERE k.oid = leaf) IS DISTINCT FROM 'tsbucket' THEN
            RAISE EXCEPTION USING ERRCODE = 'wrong_object_type',
                MESSAGE = format('partition %s of time-series table %s does not use the tsbucket access method', leaf, parent),
                HINT = 'Create its partitions with CREATE TABLE ... PARTITION OF ... USING tsbucket.';
        END IF;
        EXECUTE format('SECURITY LABEL FOR tsbucket ON TABLE %s IS %L', leaf, label);
    END LOOP;
END $$;

CREATE FUNCTION tsbucket._partition_guard() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    a record;
    t regclass;
    l jsonb;
    old_name name;
    new_name name;
    renamed boolean;
BEGIN
    -- A new partitioned table may get a tsbucket label next (a restore): a
    -- call into tsbucket's library registers the label provider in this
    -- session, also without shared_preload_libraries.
    IF TG_TAG = 'CREATE TABLE' AND EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands() d JOIN pg_class k ON k.oid = d.objid
                                            WHERE d.classid = 'pg_class'::regclass AND k.relkind = 'p') THEN
        PERFORM count(*) FROM tsbucket.worker_status();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_seclabel l WHERE l.provider = 'tsbucket' AND l.classoid = 'pg_class'::regclass
                    AND EXISTS (SELECT 1 FROM pg_class k WHERE k.oid = l.objoid AND k.relkind = 'p')) THEN
        RETURN;
    END IF;
    -- A renamed time or meta column of a partitioned time-series table:
    -- Postgres renames it in every partition (whose configuration follows
    -- column numbers), and the labels of the partitioned tables, which name
    -- it (for pg_dump and later partitions), follow here. A rename reports
    -- the column (objsubid); the name a label holds that the table no
    -- longer has is the old one.
    FOR r IN SELECT d.objid, d.objsubid FROM pg_event_trigger_ddl_commands() d JOIN pg_class k ON k.oid = d.objid
              WHERE d.classid = 'pg_class'::regclass AND d.objsubid > 0 AND k.relkind = 'p' LOOP
        SELECT attname INTO new_name FROM pg_attribute WHERE attrelid = r.objid AND attnum = r.objsubid AND NOT attisdropped;
        CONTINUE WHEN new_name IS NULL;
        renamed := false;
        FOR t IN SELECT p.relid FROM pg_partition_tree(r.objid) p JOIN pg_class k ON k.oid = p.relid WHERE k.relkind = 'p' LOOP
            l := tsbucket._partitioned_label(t)::jsonb;
            CONTINUE WHEN l IS NULL;
            SELECT n.c INTO old_name FROM (SELECT l ->> 'time_column' AS c UNION ALL SELECT jsonb_array_elements_text(l -> 'meta_columns')) n
             WHERE NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = n.c AND attnum > 0 AND NOT attisdropped);
            CONTINUE WHEN old_name IS NULL;
            IF l ->> 'time_column' = old_name THEN
                l := jsonb_set(l, '{time_column}', to_jsonb(new_name));
            ELSE
                l := jsonb_set(l, '{meta_columns}', (SELECT jsonb_agg(CASE WHEN e.c = old_name THEN new_name ELSE e.c END ORDER BY e.o)
                                                        FROM jsonb_array_elements_text(l -> 'meta_columns') WITH ORDINALITY e(c, o)));
            END IF;
            PERFORM tsbucket._set_partitioned_label(t, l::text);
            renamed := true;
        END LOOP;
        -- The leaves' own labels (tsbucket._ddl_guard rewrites those of the tables a command names), when the
        -- column was a time or meta column.
        IF renamed THEN
            PERFORM tsbucket._sync_label(x) FROM tsbucket._leaves(r.objid) x;
        END IF;
    END LOOP;
    FOR r IN SELECT DISTINCT d.objid FROM pg_event_trigger_ddl_commands() d JOIN pg_class k ON k.oid = d.objid
              WHERE d.classid = 'pg_class'::regclass AND k.relkind IN ('r', 'p') LOOP
        -- The table itself (ATTACH reports the parent), or its nearest configured ancestor.
        SELECT x.relid, tsbucket._partitioned_label(x.relid) AS label INTO a
          FROM (SELECT r.objid::regclass AS relid, 0 AS level
                UNION ALL SELECT p, row_number() OVER () FROM pg_partition_ancestors(r.objid) p WHERE p <> r.objid) x
         WHERE tsbucket._partitioned_label(x.relid) IS NOT NULL ORDER BY x.level LIMIT 1;
        IF FOUND THEN
            PERFORM tsbucket._configure_partitions(r.objid, a.relid, a.label);
        END IF;
    END LOOP;
END $$;

CREATE FUNCTION tsbucket._partitioned_retention(relation regclass, meta anyelement, meta_text text, expire_after interval,
                                                reset boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    l jsonb := tsbucket._partitioned_label(relation)::jsonb;
    leaf regclass;
BEGIN
    FOR leaf IN SELECT tsbucket._leaves(relation) LOOP
        IF reset THEN
            PERFORM tsbucket.reset_series_retention(leaf, meta);
        ELSE
            PERFORM tsbucket.set_series_retention(leaf, meta, expire_after);
        END IF;
    END LOOP;
    l := jsonb_set(l, '{series_retention}', coalesce((
        SELECT jsonb_agg(e ORDER BY e ->> 0) FROM (
            SELECT e FROM jsonb_array_elements(coalesce(l -> 'series_retention', '[]'::jsonb)) e WHERE e ->> 0 <> meta_text
            UNION ALL SELECT jsonb_build_array(meta_text, expire_after::text) WHERE NOT reset) x), '[]'::jsonb));
    PERFORM tsbucket._set_partitioned_label(relation, l::text);
END $$;

CREATE OR REPLACE FUNCTION tsbucket._require_timeseries(relation regclass) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM tsbucket.catalog WHERE relid = relation)
       AND tsbucket._partitioned_label(relation) IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('table %s is not a time-series table', relation),
            HINT = 'Call tsbucket.create_timeseries() on it first.';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION tsbucket.compact(relation regclass)
RETURNS TABLE (buckets_before bigint, buckets_after bigint, rows_moved bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    IF tsbucket._citus_table(relation) THEN
        -- Each shard compacts in a transaction of its own (run_command_on_shards), as the worker does it there.
        PERFORM tsbucket._outside_transaction_block('tsbucket.compact of a distributed table');
    END IF;
    IF tsbucket._citus_table(relation) OR tsbucket._partitioned_label(relation) IS NOT NULL THEN
        RETURN QUERY
        SELECT coalesce(sum(x.buckets_before), 0)::bigint, coalesce(sum(x.buckets_after), 0)::bigint,
               coalesce(sum(x.rows_moved), 0)::bigint
          FROM tsbucket._shard_rows(relation, 'compact') o,
               json_to_record(o.r) AS x(buckets_before bigint, buckets_after bigint, rows_moved bigint);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM tsbucket._compact(relation);
END $$;

CREATE OR REPLACE FUNCTION tsbucket.expire(relation regclass)
RETURNS TABLE (buckets_expired bigint, rows_expired bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    expiring regclass[];
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    PERFORM tsbucket._require_owner(relation);
    IF tsbucket._partitioned_label(relation) IS NOT NULL THEN
        -- Its partitions that expire (a month's partition dropped whole is the bulk alternative).
        expiring := ARRAY(SELECT l FROM tsbucket._leaves(relation) l JOIN tsbucket.catalog c ON c.relid = l
                           WHERE c.expire_after IS NOT NULL
                              OR EXISTS (SELECT 1 FROM tsbucket.series_retention r WHERE r.relid = l));
        IF cardinality(expiring) = 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
                MESSAGE = format('no partition of table %s has an expire_after', relation),
                HINT = 'Set one with tsbucket.alter_timeseries() or tsbucket.set_series_retention().';
        END IF;
        RETURN QUERY
        SELECT coalesce(sum(x.buckets_expired), 0)::bigint, coalesce(sum(x.rows_expired), 0)::bigint
          FROM unnest(expiring) l CROSS JOIN LATERAL tsbucket.expire(l) x;
        RETURN;
    END IF;
    IF (SELECT c.expire_after FROM tsbucket.catalog c WHERE c.relid = relation) IS NULL
       AND NOT EXISTS (SELECT 1 FROM tsbucket.series_retention r WHERE r.relid = relation) THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('table %s has no expire_after', relation),
            HINT = 'Set one with tsbucket.alter_timeseries() or tsbucket.set_series_retention().';
    END IF;
    IF tsbucket._citus_table(relation) THEN
        -- Each shard expires in a transaction of its own (run_command_on_shards), as the worker does it there.
        PERFORM tsbucket._outside_transaction_block('tsbucket.expire of a distributed table');
        RETURN QUERY
        SELECT coalesce(sum(x.buckets_expired), 0)::bigint, coalesce(sum(x.rows_expired), 0)::bigint
          FROM tsbucket._shard_rows(relation, 'expire') o,
               json_to_record(o.r) AS x(buckets_expired bigint, rows_expired bigint);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM tsbucket._expire(relation);
END $$;

CREATE FUNCTION tsbucket._leaves(relation regclass) RETURNS SETOF regclass
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT t.relid FROM pg_partition_tree(relation) t JOIN tsbucket.catalog c ON c.relid = t.relid
     WHERE t.isleaf ORDER BY t.level, t.relid
$$;

-- stats() gains tail_rows and tail_bytes; its total_bytes counts everything that holds the rows.
DROP FUNCTION tsbucket.stats(regclass);
-- Runs as the caller: tsbucket._store_totals and tsbucket._tail_rows check
-- the caller's SELECT right. `rows` counts the rows in buckets; `tail_rows`
-- those not yet in buckets, whose segments take `tail_bytes` (in `total_bytes`,
-- as everything that holds the table's rows is).
CREATE FUNCTION tsbucket.stats(relation regclass)
RETURNS TABLE (buckets bigint, rows bigint, avg_rows_per_bucket numeric, compressed_bytes bigint,
               uncompressed_bytes bigint, compression_ratio numeric, total_bytes bigint,
               closed_by_count bigint, closed_by_size bigint, closed_by_time_window bigint,
               closed_by_memory_limit bigint, closed_by_end_of_statement bigint, rewritten bigint,
               compacted bigint, tail_rows bigint, tail_bytes bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM tsbucket._require_timeseries(relation);
    IF tsbucket._citus_table(relation) OR tsbucket._partitioned_label(relation) IS NOT NULL THEN
        -- A distributed or partitioned table: the sum over its shards (the shell holds no rows).
        RETURN QUERY
        WITH per AS (
            SELECT x.* FROM tsbucket._shard_rows(relation, 'stats') o,
                   json_to_record(o.r) AS x(buckets bigint, rows bigint, compressed_bytes bigint,
                       uncompressed_bytes bigint, total_bytes bigint, closed_by_count bigint, closed_by_size bigint,
                       closed_by_time_window bigint, closed_by_memory_limit bigint, closed_by_end_of_statement bigint,
                       rewritten bigint, compacted bigint, tail_rows bigint, tail_bytes bigint))
        SELECT sum(p.buckets)::bigint, sum(p.rows)::bigint,
               round(CASE WHEN coalesce(sum(p.buckets), 0) = 0 THEN 0 ELSE sum(p.rows)::numeric / sum(p.buckets) END, 1),
               sum(p.compressed_bytes)::bigint, sum(p.uncompressed_bytes)::bigint,
               round(coalesce(sum(p.uncompressed_bytes)::numeric / nullif(sum(p.compressed_bytes), 0), 0), 2),
               sum(p.total_bytes)::bigint, sum(p.closed_by_count)::bigint, sum(p.closed_by_size)::bigint,
               sum(p.closed_by_time_window)::bigint, sum(p.closed_by_memory_limit)::bigint,
               sum(p.closed_by_end_of_statement)::bigint, sum(p.rewritten)::bigint, sum(p.compacted)::bigint,
               sum(p.tail_rows)::bigint, sum(p.tail_bytes)::bigint
          FROM per p;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT t.buckets, t.rows,
           round(CASE WHEN t.buckets = 0 THEN 0 ELSE t.rows::numeric / t.buckets END, 1),
           t.compressed_bytes, t.uncompressed_bytes,
           round(coalesce(t.uncompressed_bytes::numeric / nullif(t.compressed_bytes, 0), 0), 2),
           tsbucket.table_size(relation),
           t.by_reason[1], t.by_reason[2], t.by_reason[3], t.by_reason[4], t.by_reason[5], t.by_reason[6], t.by_reason[7],
           tsbucket._tail_rows(relation),
           (SELECT coalesce(sum(pg_total_relation_size(s)), 0)::bigint
              FROM tsbucket.catalog c, unnest(c.tail_segments) s WHERE c.relid = relation)
      FROM tsbucket._store_totals(relation) t;
END $$;

-- Every table gets its tail; its bucket ids wrap at 2^36 from now on.
DO $$
DECLARE
    r record;
    top bigint;
    ix oid;
BEGIN
    FOR r IN SELECT c.relid, c.store_relid, c.id_sequence FROM tsbucket.catalog c ORDER BY c.relid LOOP
        EXECUTE format('SELECT max(bucket_id) FROM %s', r.store_relid::regclass) INTO top;
        IF top > 68719476735 THEN
            RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
                MESSAGE = format('table %s has bucket ids at or above 2^36, which tsbucket 0.6.0 gives to rows of its tail', r.relid::regclass),
                HINT = 'Rewrite the table (CREATE TABLE ... AS, or pg_dump and restore) with tsbucket 0.5.0, then update.';
        END IF;
        IF pg_sequence_last_value(r.id_sequence) > 68719476735 THEN
            EXECUTE format('ALTER SEQUENCE %s MAXVALUE 68719476735 RESTART WITH 1', r.id_sequence::regclass);
        ELSE
            EXECUTE format('ALTER SEQUENCE %s MAXVALUE 68719476735', r.id_sequence::regclass);
        END IF;
        PERFORM tsbucket._create_tail(r.relid);
        -- Large payloads are split from now on; rows written before read as one piece.
        EXECUTE format('ALTER TABLE %s ADD COLUMN payload_rest bytea', r.store_relid::regclass);
        PERFORM tsbucket._store_storage(r.store_relid);
        -- Expiry looks for old buckets through the window_start index now
        -- (src/store/reader.rs): the index on max_time only cost space.
        FOR ix IN SELECT i.indexrelid FROM pg_index i
                    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                   WHERE i.indrelid = r.store_relid AND i.indnatts = 1 AND a.attname = 'max_time' LOOP
            EXECUTE format('DROP INDEX %s', ix::regclass);
        END LOOP;
    END LOOP;
END $$;

-- Partitions of a time-series parent take its configuration.
CREATE EVENT TRIGGER tsbucket_partition_guard ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION tsbucket._partition_guard();
