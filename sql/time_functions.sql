-- MongoDB's date operators and $setWindowFields window operators.
-- See README "Time functions" for semantics and examples.
-- date_trunc and date_diff are not STRICT: MongoDB reads start_of_week only
-- for unit week, so a NULL there must not make other units NULL (the
-- functions they call return NULL for every other NULL argument).

CREATE FUNCTION tsbucket.date_trunc(unit text, ts timestamptz, bin_size int DEFAULT 1,
                                    timezone text DEFAULT 'UTC', start_of_week text DEFAULT 'sunday')
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN tsbucket._date_trunc_tz(unit, ts, bin_size, timezone, start_of_week);

CREATE FUNCTION tsbucket.date_trunc(unit text, ts timestamp, bin_size int DEFAULT 1,
                                    timezone text DEFAULT 'UTC', start_of_week text DEFAULT 'sunday')
RETURNS timestamp LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN tsbucket._date_trunc_ts(unit, ts, bin_size, timezone, start_of_week);

CREATE FUNCTION tsbucket.date_trunc(unit text, d date, bin_size int DEFAULT 1,
                                    timezone text DEFAULT 'UTC', start_of_week text DEFAULT 'sunday')
RETURNS date LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN tsbucket._date_trunc_date(unit, d, bin_size, timezone, start_of_week);

CREATE FUNCTION tsbucket.date_add(ts timestamptz, unit text, amount bigint, timezone text DEFAULT 'UTC')
RETURNS timestamptz LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN tsbucket._date_add(ts, unit, amount, timezone);

CREATE FUNCTION tsbucket.date_subtract(ts timestamptz, unit text, amount bigint, timezone text DEFAULT 'UTC')
RETURNS timestamptz LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN tsbucket._date_add(ts, unit, -amount, timezone);

CREATE FUNCTION tsbucket.date_diff(start timestamptz, "end" timestamptz, unit text,
                                   timezone text DEFAULT 'UTC', start_of_week text DEFAULT 'sunday')
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN tsbucket._date_diff(start, "end", unit, timezone, start_of_week);

-- moving_avg: avg with an inverse transition, so sliding frames cost O(1) per row.
CREATE FUNCTION tsbucket._mavg_accum(internal, float8) RETURNS internal
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_mavg_accum';
CREATE FUNCTION tsbucket._mavg_inverse(internal, float8) RETURNS internal
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_mavg_inverse';
CREATE FUNCTION tsbucket._mavg_final(internal) RETURNS float8
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_mavg_final';
CREATE AGGREGATE tsbucket.moving_avg(float8) (
    sfunc = tsbucket._mavg_accum, stype = internal, finalfunc = tsbucket._mavg_final,
    msfunc = tsbucket._mavg_accum, minvfunc = tsbucket._mavg_inverse, mstype = internal,
    mfinalfunc = tsbucket._mavg_final
);

-- exp_moving_avg: MongoDB's $expMovingAvg (N or alpha).
CREATE FUNCTION tsbucket._ema_accum(internal, float8, int) RETURNS internal
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_ema_accum_n';
CREATE FUNCTION tsbucket._ema_accum(internal, float8, float8) RETURNS internal
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_ema_accum_alpha';
CREATE FUNCTION tsbucket._ema_final(internal) RETURNS float8
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_ema_final';
CREATE AGGREGATE tsbucket.exp_moving_avg(value float8, n int) (
    sfunc = tsbucket._ema_accum, stype = internal, finalfunc = tsbucket._ema_final);
CREATE AGGREGATE tsbucket.exp_moving_avg(value float8, alpha float8) (
    sfunc = tsbucket._ema_accum, stype = internal, finalfunc = tsbucket._ema_final);

-- derivative, integral, time_weighted_avg over the frame's (ts, value) points.
CREATE FUNCTION tsbucket._series_accum(internal, float8, timestamptz, text) RETURNS internal
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_series_accum_unit';
CREATE FUNCTION tsbucket._series_accum(internal, float8, timestamptz) RETURNS internal
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_series_accum';
CREATE FUNCTION tsbucket._derivative_final(internal) RETURNS float8
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_derivative_final';
CREATE FUNCTION tsbucket._integral_final(internal) RETURNS float8
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_integral_final';
CREATE FUNCTION tsbucket._twa_final(internal) RETURNS float8
    LANGUAGE c CALLED ON NULL INPUT PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_twa_final';
CREATE AGGREGATE tsbucket.derivative(value float8, ts timestamptz, unit text) (
    sfunc = tsbucket._series_accum, stype = internal, finalfunc = tsbucket._derivative_final);
CREATE AGGREGATE tsbucket.integral(value float8, ts timestamptz, unit text) (
    sfunc = tsbucket._series_accum, stype = internal, finalfunc = tsbucket._integral_final);
CREATE AGGREGATE tsbucket.time_weighted_avg(value float8, ts timestamptz) (
    sfunc = tsbucket._series_accum, stype = internal, finalfunc = tsbucket._twa_final);

-- locf: the last non-NULL value so far (with the default frame, up to the current row).
CREATE FUNCTION tsbucket._locf_step(state anyelement, value anyelement) RETURNS anyelement
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT coalesce(value, state) $$;
CREATE AGGREGATE tsbucket.locf(anyelement) (sfunc = tsbucket._locf_step, stype = anyelement);

-- linear_fill: a window function (it needs the next non-NULL row too).
CREATE FUNCTION tsbucket.linear_fill(value float8, ts timestamptz) RETURNS float8
    LANGUAGE c WINDOW IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'tsbucket_linear_fill';

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
