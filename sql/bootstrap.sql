-- Objects the Rust code relies on: the configuration catalog and the access method.

CREATE SCHEMA IF NOT EXISTS tsbucket_internal;
REVOKE ALL ON SCHEMA tsbucket_internal FROM PUBLIC;

CREATE TABLE tsbucket.catalog (
    relid            oid PRIMARY KEY,
    store_relid      oid NOT NULL,
    id_index         oid NOT NULL,
    id_sequence      oid NOT NULL,
    -- Where rows of rewritten buckets went (old bucket, row -> new bucket, row),
    -- for DML that meets a bucket rewritten since its snapshot (src/store.rs).
    moves_relid      oid,
    moves_index      oid,
    time_attnum      int2 NOT NULL,
    time_type        oid NOT NULL,
    meta_attnums     int2[] NOT NULL,
    meta_types       oid[] NOT NULL,
    granularity      text,
    bucket_max_span  interval NOT NULL,
    span_micros      int8 NOT NULL CHECK (span_micros > 0),
    expire_after     interval,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- The tail: rows written a few at a time wait here, row by row, until the
    -- worker drains them into buckets (src/store/tail.rs). Its segments, and
    -- the sequence whose value is the segment new rows go to.
    tail_segments    oid[],
    tail_current     oid
);
GRANT SELECT ON tsbucket.catalog TO PUBLIC;

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

CREATE FUNCTION tsbucket.tsbucket_tableam_handler(internal) RETURNS table_am_handler
    LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'tsbucket_tableam_handler';
CREATE ACCESS METHOD tsbucket TYPE TABLE HANDLER tsbucket.tsbucket_tableam_handler;
COMMENT ON ACCESS METHOD tsbucket IS 'time-series tables stored as compressed columnar buckets';
GRANT USAGE ON SCHEMA tsbucket TO PUBLIC;
