-- tsbucket 0.3.0 -> 0.4.0: TsBucketScan reads in parallel. Tables no longer
-- carry parallel_workers = 0 (which kept Postgres from planning parallel
-- scans of them): create_timeseries stops setting it and existing tables
-- lose it. A parallel_workers a DBA set to another value stays.

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
BEGIN
    SELECT a.amname INTO amname FROM pg_class c LEFT JOIN pg_am a ON a.oid = c.relam WHERE c.oid = relation;
    IF amname IS DISTINCT FROM 'tsbucket' THEN
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
    IF EXISTS (SELECT 1 FROM tsbucket.catalog WHERE relid = relation) THEN
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

    PERFORM tsbucket._create_store_for(relation, time_att.attnum::int2, meta_attnums, gran, span,
                                       (extract(epoch FROM span) * 1000000)::int8, expire_after);
    PERFORM tsbucket._invalidate(relation);
    PERFORM tsbucket._sync_label(relation);
    PERFORM tsbucket._worker_notice();
END $$;

DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.relid::regclass FROM tsbucket.catalog c JOIN pg_catalog.pg_class p ON p.oid = c.relid
              WHERE 'parallel_workers=0' = ANY (p.reloptions) LOOP
        EXECUTE format('ALTER TABLE %s RESET (parallel_workers)', t);
    END LOOP;
END $$;
