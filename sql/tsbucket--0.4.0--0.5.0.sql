-- tsbucket 0.4.0 -> 0.5.0: the aggregates first(value, time) and last(value, time).

-- first / last: the value at the least / greatest time, the earliest row read
-- on ties; a NULL time is skipped. Partial states combine (parallel query,
-- and TsBucketScan's in-scan aggregation).
CREATE FUNCTION tsbucket._first_transition(internal, anyelement, timestamptz) RETURNS internal
    LANGUAGE c IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_first_transition';
CREATE FUNCTION tsbucket._first_transition(internal, anyelement, timestamp) RETURNS internal
    LANGUAGE c IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_first_transition';
CREATE FUNCTION tsbucket._last_transition(internal, anyelement, timestamptz) RETURNS internal
    LANGUAGE c IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_last_transition';
CREATE FUNCTION tsbucket._last_transition(internal, anyelement, timestamp) RETURNS internal
    LANGUAGE c IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_last_transition';
CREATE FUNCTION tsbucket._first_combine(internal, internal) RETURNS internal
    LANGUAGE c IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_first_combine';
CREATE FUNCTION tsbucket._last_combine(internal, internal) RETURNS internal
    LANGUAGE c IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_last_combine';
CREATE FUNCTION tsbucket._first_last_serialize(internal) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_first_last_serialize';
CREATE FUNCTION tsbucket._first_last_deserialize(bytea, internal) RETURNS internal
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_first_last_deserialize';
CREATE FUNCTION tsbucket._first_last_final(internal, anyelement, timestamptz) RETURNS anyelement
    LANGUAGE c IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_first_last_final';
CREATE FUNCTION tsbucket._first_last_final(internal, anyelement, timestamp) RETURNS anyelement
    LANGUAGE c IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_first_last_final';
CREATE AGGREGATE tsbucket.first(value anyelement, "time" timestamptz) (
    sfunc = tsbucket._first_transition, stype = internal,
    finalfunc = tsbucket._first_last_final, finalfunc_extra, combinefunc = tsbucket._first_combine,
    serialfunc = tsbucket._first_last_serialize, deserialfunc = tsbucket._first_last_deserialize, parallel = safe);
CREATE AGGREGATE tsbucket.first(value anyelement, "time" timestamp) (
    sfunc = tsbucket._first_transition, stype = internal,
    finalfunc = tsbucket._first_last_final, finalfunc_extra, combinefunc = tsbucket._first_combine,
    serialfunc = tsbucket._first_last_serialize, deserialfunc = tsbucket._first_last_deserialize, parallel = safe);
CREATE AGGREGATE tsbucket.last(value anyelement, "time" timestamptz) (
    sfunc = tsbucket._last_transition, stype = internal,
    finalfunc = tsbucket._first_last_final, finalfunc_extra, combinefunc = tsbucket._last_combine,
    serialfunc = tsbucket._first_last_serialize, deserialfunc = tsbucket._first_last_deserialize, parallel = safe);
CREATE AGGREGATE tsbucket.last(value anyelement, "time" timestamp) (
    sfunc = tsbucket._last_transition, stype = internal,
    finalfunc = tsbucket._first_last_final, finalfunc_extra, combinefunc = tsbucket._last_combine,
    serialfunc = tsbucket._first_last_serialize, deserialfunc = tsbucket._first_last_deserialize, parallel = safe);
