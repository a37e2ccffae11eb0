//! The scan side of in-scan aggregation (see `rewrite::partial_agg` for the plan):
//! bucket by bucket, the rows that pass the filters are split into groups
//! (the bucket's meta values, and runs of one time bucket), each aggregate's
//! partial state is computed over the decoded arrays, and one row per group
//! and bucket goes up to the Finalize Aggregate. No row becomes a tuple,
//! except to evaluate conditions the range filters do not decide.

use crate::catalog::config::Config;
use crate::pg::error::{SqlState, ts_error};
use crate::scan::agg_plan::{AggPlan, ArgSource, KeyPlan};
use crate::scan::doc_keys::FieldCast;
use crate::scan::plain::{NextBucket, ScanCounters, ScanOptions};
use crate::scan::prune::{BoundRange, Prune};
use crate::store::rows;
use pgrx::{IntoDatum, pg_sys};
use std::rc::Rc;
use tsbucket_kernels::{AggKind, Input, State, accumulate, first_last, initial, runs};

/// A group key as the executor computes it.
pub(super) struct Key {
    pub plan: KeyPlan,
    /// For a time bucket: its expression, evaluated on a row holding only the time.
    pub expr: *mut pg_sys::ExprState,
    /// For a time bucket that is plain arithmetic: computed without Postgres.
    pub fixed: Option<crate::scan::time_bucket::FixedBucket>,
}

/// The quals of the scan, split by who decides them.
pub(super) struct Quals {
    /// Every qual (when a pruning value is NULL or NaN, so that the range filters do not decide).
    pub all: *mut pg_sys::ExprState,
    /// The quals the range filters and bucket pruning do not decide.
    pub residual: *mut pg_sys::ExprState,
    /// The quals neither they nor the vector filter decide, compiled and as
    /// a List (None where the quals hold sub-plans): what runs on a bucket
    /// where the vector filter's mask decides every condition it holds.
    pub decided: Option<(*mut pg_sys::ExprState, *mut pg_sys::List)>,
}

struct PartialRow {
    keys: Vec<(pg_sys::Datum, bool)>,
    states: Vec<Partial>,
}

enum Partial {
    State(State),
    /// A serialized state (first / last: the chosen value is copied out of
    /// the bucket, which is gone when the row goes up).
    Serialized(Vec<u8>),
}

#[derive(Default, Clone, Copy)]
pub(super) struct AggCounters {
    pub rows_aggregated: u64,
    /// Rows the quals evaluated row by row removed.
    pub rows_removed_by_filter: u64,
    pub partial_rows: u64,
}

pub(super) struct AggregatingScan {
    rel: pg_sys::Relation,
    config: Rc<Config>,
    scan: pg_sys::TableScanDesc,
    keys: Rc<Vec<Key>>,
    aggs: Rc<Vec<AggPlan>>,
    /// Per aggregate: a field argument's expression, for the rows whose field holds no decimal (else NULL).
    field_exprs: Rc<Vec<*mut pg_sys::ExprState>>,
    /// The document fields the aggregates read (`ArgSource::Field` indexes them).
    fields: Rc<rows::DocFields>,
    /// The qual rows must pass beyond the range filters (NULL: none).
    residual: *mut pg_sys::ExprState,
    /// The qual for a bucket where the vector filter decided its conditions
    /// (`BucketRows::decided`); None where `residual` must run anyway.
    residual_decided: Option<*mut pg_sys::ExprState>,
    econtext: *mut pg_sys::ExprContext,
    /// A slot of the table's own row type, for quals and time-bucket keys.
    row_slot: *mut pg_sys::TupleTableSlot,
    pending: Vec<PartialRow>,
    next: usize,
    pub counters: AggCounters,
    /// When buckets may be answered from their headers alone: the time range
    /// a bucket must lie in (None: any).
    from_headers: Option<Option<BoundRange>>,
}

impl AggregatingScan {
    /// # Safety
    /// `rel` open; `econtext` the node's; `exact` whether every pruning value
    /// was known (not NULL or NaN), so that the range filters decide their quals.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn begin(
        rel: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        options: ScanOptions,
        keys: Rc<Vec<Key>>,
        aggs: Rc<Vec<AggPlan>>,
        field_exprs: Rc<Vec<*mut pg_sys::ExprState>>,
        quals: &Quals,
        exact: bool,
        econtext: *mut pg_sys::ExprContext,
    ) -> AggregatingScan {
        // SAFETY: `rel` is open (begin's contract), so its relcache entry's rd_id is readable.
        let config = crate::catalog::config::require(unsafe { (*rel).rd_id });
        let mut options_prune_summary = PruneSummary::of(&options.prune);
        let fields = options.doc_fields.clone();
        // Rows a vector filter removes are counted in no header.
        options_prune_summary.column_filters |= options.vector_filter.is_some();
        // SAFETY: `rel` is open and `snapshot` the node's; a plain scan with no keys or parallel state, which `end` ends.
        let scan = unsafe { crate::scan::plain::begin_with(rel, snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), 0, options) };
        // SAFETY: the slot is made for `(*rel).rd_att`, the open table's descriptor, in the node's context; `end` drops it.
        let row_slot = unsafe { pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, crate::store::slot::ops()) };
        let residual = if exact { quals.residual } else { quals.all };
        let residual_decided = if exact { quals.decided.map(|(q, _)| q) } else { None };
        // SAFETY: `rel` is open; headers_may_answer reads its rd_id (for row-level security) and its descriptor.
        let from_headers = unsafe { headers_may_answer(rel, &config, &options_prune_summary, &aggs, residual) };
        AggregatingScan {
            rel,
            config,
            scan,
            keys,
            aggs,
            field_exprs,
            fields,
            residual,
            residual_decided,
            econtext,
            row_slot,
            pending: Vec::new(),
            next: 0,
            counters: AggCounters::default(),
            from_headers,
        }
    }

    /// # Safety
    /// Ends the scan begun by `begin`.
    pub unsafe fn end(self) -> (ScanCounters, AggCounters) {
        // SAFETY: `self.scan` was begun by begin_with in `begin` and is ended once, here (end's contract), after its counters
        // are read; `row_slot` was made by `begin` and is not used after this.
        let counters = unsafe {
            let counters = crate::scan::plain::counters(self.scan);
            crate::scan::plain::end(self.scan);
            pg_sys::ExecDropSingleTupleTableSlot(self.row_slot);
            counters
        };
        (counters, self.counters)
    }

    /// # Safety
    /// The scan must be running.
    pub unsafe fn access_taken(&self) -> crate::scan::access::Access {
        // SAFETY: `self.scan` is the running plain scan begun by `begin` (access_taken's contract), not yet ended.
        unsafe { crate::scan::plain::access_taken(self.scan) }
    }

    /// Fills `slot` (of the scan's output: keys, then partial states) with the
    /// next partial row, or clears it at the end.
    ///
    /// # Safety
    /// `slot` must be the node's scan slot.
    pub unsafe fn next(&mut self, slot: *mut pg_sys::TupleTableSlot) {
        while self.next >= self.pending.len() {
            self.pending.clear();
            self.next = 0;
            // SAFETY: the plain scan `begin` started is still running: the node asks for rows only between begin and end.
            if !unsafe { self.aggregate_bucket() } {
                // SAFETY: `slot` is the node's scan slot (next's contract); cleared, it ends the scan.
                unsafe { pg_sys::ExecClearTuple(slot) };
                return;
            }
        }
        let row = &self.pending[self.next];
        self.next += 1;
        // SAFETY: `slot` is the node's scan slot (next's contract), a virtual slot with a column per key, then per aggregate.
        let (values, nulls) = unsafe {
            pg_sys::ExecClearTuple(slot);
            ((*slot).tts_values, (*slot).tts_isnull)
        };
        for (i, &(d, null)) in row.keys.iter().enumerate() {
            // SAFETY: the slot's first columns are the group keys, so key `i` is within its values and isnull arrays.
            unsafe {
                *values.add(i) = d;
                *nulls.add(i) = null;
            }
        }
        let nkeys = row.keys.len();
        // Arrays (avg's states) live in the per-tuple context: ExecScan resets it
        // before fetching the next row, after the Finalize Aggregate read this one.
        // SAFETY: `self.econtext` is the node's expression context (begin), alive while the node runs.
        let old = unsafe { pg_sys::MemoryContextSwitchTo((*self.econtext).ecxt_per_tuple_memory) };
        for (j, (state, agg)) in row.states.iter().zip(self.aggs.iter()).enumerate() {
            let (d, null) = match state {
                // SAFETY: `state` is a partial state of `agg`; its datum is built in the per-tuple context, current now.
                Partial::State(state) => unsafe { state_datum(state, agg) },
                Partial::Serialized(bytes) => (crate::pg::datum::bytea(bytes), false),
            };
            // SAFETY: the aggregates' columns follow the `nkeys` key columns, so `nkeys + j` is within the slot's arrays.
            unsafe {
                *values.add(nkeys + j) = d;
                *nulls.add(nkeys + j) = null;
            }
        }
        // SAFETY: back to `old`, the node's context, then the slot (cleared above, its arrays now full) becomes a virtual tuple.
        unsafe {
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::ExecStoreVirtualTuple(slot);
        }
        self.counters.partial_rows += 1;
    }

    /// The partial row of a bucket whose header answers every aggregate: it
    /// lies wholly in the query's time range, in one time bucket, and every
    /// aggregate is count(*), count of a meta column, min/max of a column
    /// whose header keeps them, or count/sum/avg of a column whose header
    /// keeps its NULL count and sum; a document field read as float8 alike.
    unsafe fn header_answer(&self, b: &crate::store::bucket::StoredBucket) -> Option<PartialRow> {
        let range = self.from_headers.as_ref()?;
        if range.as_ref().is_some_and(|r| !r.contains(b.min_time, b.max_time)) {
            return None;
        }
        let mut time_value = (pg_sys::Datum::from(0), true);
        for key in self.keys.iter() {
            match key.plan {
                KeyPlan::Meta(_) => {}
                KeyPlan::Time if b.min_time == b.max_time => time_value = (pg_sys::Datum::from(b.min_time), false),
                KeyPlan::Time => return None,
                KeyPlan::TimeBucket => {
                    // SAFETY: `key.expr` is the time bucket's expression, compiled for this node's `econtext`; `row_slot`
                    // is free while a header is checked (no bucket row is in it).
                    let (first, last) = unsafe { (self.time_bucket(key, b.min_time), self.time_bucket(key, b.max_time)) };
                    if first.0.value() != last.0.value() || first.1 != last.1 {
                        return None;
                    }
                    time_value = first;
                }
            }
        }
        let stats = if self.aggs.iter().any(|a| matches!(a.arg, ArgSource::Column(i) if i + 1 != self.config.time_attnum as usize)) {
            tsbucket_format::stats::decode_stats(b.stats()).ok()?
        } else {
            Vec::new()
        };
        let field_stats = if self.aggs.iter().any(|a| matches!(a.arg, ArgSource::Field { .. })) {
            tsbucket_format::stats::decode_field_stats(b.stats()).ok()?
        } else {
            Vec::new()
        };
        // The header statistics of an aggregate's argument: a column's, or a document field's read as float8.
        let found = |arg: ArgSource| match arg {
            ArgSource::Column(i) => stats.iter().find(|s| s.attnum as usize == i + 1),
            ArgSource::Field { field, cast: FieldCast::Float8, .. } => {
                let (column, key, _) = &self.fields[field];
                field_stats.iter().find(|f| f.stats.attnum as usize == column + 1 && f.key == *key).map(|f| &f.stats)
            }
            _ => None,
        };
        let mut states = Vec::with_capacity(self.aggs.len());
        let is_time = |i: usize| i + 1 == self.config.time_attnum as usize;
        for agg in self.aggs.iter() {
            use tsbucket_format::stats::Range;
            let max = agg.kind == AggKind::Max;
            states.push(Partial::State(match (agg.kind, agg.arg) {
                (AggKind::CountRows, _) => State::Count(b.rows as i64),
                // A meta column holds one value for the whole bucket.
                (AggKind::CountValues, ArgSource::Meta(m)) => State::Count(if b.meta_datum(m).is_some() { b.rows as i64 } else { 0 }),
                // The time column is never NULL.
                (AggKind::CountValues, ArgSource::Column(i)) if is_time(i) => State::Count(b.rows as i64),
                (AggKind::Min | AggKind::Max, ArgSource::Column(i)) if is_time(i) => State::Int(Some(if max { b.max_time } else { b.min_time })),
                // count, sum and avg (not variance: headers_may_answer) from the
                // column's NULL count and sum (headers since 0.5.0).
                (kind, ArgSource::Column(_) | ArgSource::Field { .. }) if !matches!(kind, AggKind::Min | AggKind::Max) => {
                    tsbucket_kernels::from_header(kind, b.rows as u32, found(agg.arg)?)?
                }
                (_, ArgSource::Column(_) | ArgSource::Field { .. }) => match found(agg.arg)?.range {
                    Range::Int { min, max: hi } => State::Int(Some(if max { hi } else { min })),
                    Range::Float { min, max: hi, has_nan } => {
                        // A zero's sign depends on which equal value came last: read the rows.
                        if min == 0.0 || hi == 0.0 {
                            return None;
                        }
                        let v = if max && has_nan { f64::NAN } else if max { hi } else { min };
                        if agg.arg_type == pg_sys::FLOAT4OID { State::Float4(Some(v as f32)) } else { State::Float8(Some(v)) }
                    }
                },
                _ => return None,
            }));
        }
        let keys = self
            .keys
            .iter()
            .map(|k| match k.plan {
                KeyPlan::Meta(m) => match b.meta_datum(m) {
                    Some(d) => (d, false),
                    None => (pg_sys::Datum::from(0), true),
                },
                _ => time_value,
            })
            .collect();
        Some(PartialRow { keys, states })
    }

    /// Aggregates the next bucket into `pending`; false at the end.
    unsafe fn aggregate_bucket(&mut self) -> bool {
        loop {
            let scan = self.scan;
            let mut answer = None;
            let mut answerable = |b: &crate::store::bucket::StoredBucket| {
                // SAFETY: `b` is the header of the bucket the scan just read; header_answer evaluates only this node's
                // time-bucket expressions, on `row_slot`, which holds no row between buckets.
                answer = unsafe { self.header_answer(b) };
                answer.is_some()
            };
            // SAFETY: `scan` was begun by begin_with in `begin` and is read only through next_bucket_or_header.
            let next = unsafe { crate::scan::plain::next_bucket_or_header(scan, &mut answerable) };
            let rows = match next {
                None => return false,
                Some(NextBucket::Header) => {
                    self.pending.push(answer.expect("answered"));
                    return true;
                }
                Some(NextBucket::Rows(rows)) => rows,
            };
            let mut selected = rows.selected;
            let qual = match self.residual_decided {
                Some(q) if rows.decided => q,
                _ => self.residual,
            };
            if !qual.is_null() && !selected.is_empty() {
                let before = selected.len();
                selected.retain(|&r| {
                    // SAFETY: `rows` is the bucket just read and `r` one of its rows; `qual` is compiled for the node's
                    // `econtext`, whose scan tuple put_row sets.
                    unsafe {
                        self.put_row((rows.bucket, rows.prepared, rows.shape), r as usize);
                        crate::pg::nodes::qual_passes(qual, self.econtext)
                    }
                });
                self.counters.rows_removed_by_filter += (before - selected.len()) as u64;
            }
            if selected.is_empty() {
                continue;
            }
            self.counters.rows_aggregated += selected.len() as u64;
            let bucket = rows.bucket;
            // Group runs: all rows, or runs of one time key over the rows in time order.
            let time_key = self.keys.iter().position(|k| !matches!(k.plan, KeyPlan::Meta(_)));
            let mut resorted = false;
            let groups: Vec<(std::ops::Range<usize>, (pg_sys::Datum, bool))> = match time_key {
                None => vec![(0..selected.len(), (pg_sys::Datum::from(0), true))],
                Some(k) => {
                    let times = rows::time_values(&self.config, bucket);
                    if !selected.windows(2).all(|w| times[w[0] as usize] <= times[w[1] as usize]) {
                        selected.sort_by_key(|&r| times[r as usize]);
                        resorted = true;
                    }
                    let ordered: Vec<i64> = selected.iter().map(|&r| times[r as usize]).collect();
                    let key = &self.keys[k];
                    let found = runs(&ordered, |t| -> Result<(usize, bool), ()> {
                        Ok(match key.plan {
                            KeyPlan::TimeBucket => {
                                // SAFETY: `key.expr` is compiled for this node's `econtext`; `row_slot` is free again once
                                // the residual qual has run on this bucket's rows.
                                let (d, null) = unsafe { self.time_bucket(key, t) };
                                (d.value(), null)
                            }
                            _ => (t as usize, false),
                        })
                    })
                    .expect("infallible");
                    found.into_iter().map(|(s, e, (d, null))| (s..e, (pg_sys::Datum::from(d), null))).collect()
                }
            };
            // SAFETY: `self.rel` is the open table the scan reads (begin's contract), so its descriptor is valid.
            let tupdesc = unsafe { (*self.rel).rd_att };
            // Columns the aggregates read, once per bucket (a column added after
            // the bucket was written: its default for every row).
            let columns: Vec<Option<std::borrow::Cow<tsbucket_format::Column>>> = self
                .aggs
                .iter()
                .enumerate()
                .map(|(j, agg)| match agg.arg {
                    // SAFETY: `tupdesc` is the user table's descriptor and `rows.shape.attrs[i]` one of its payload attributes.
                    ArgSource::Column(i) => Some(unsafe { rows::column_or_default(tupdesc, &rows.shape.attrs[i], bucket) }),
                    // SAFETY: `field_exprs[j]` is aggregate j's argument, compiled for this node; `rows` is the bucket
                    // read, `selected` its rows that passed every filter.
                    ArgSource::Field { field, column, cast } => Some(std::borrow::Cow::Owned(unsafe {
                        self.field_column((rows.bucket, rows.prepared, rows.shape), (field, column, cast), self.field_exprs[j], &selected)
                    })),
                    _ => None,
                })
                .collect();
            for (range, time_value) in groups {
                // Each group's rows in their stored order, as a row-by-row scan adds them.
                let group_rows: std::borrow::Cow<[u32]> = if resorted {
                    let mut rows = selected[range].to_vec();
                    rows.sort_unstable();
                    rows.into()
                } else {
                    (&selected[range]).into()
                };
                let group_rows = &group_rows[..];
                let keys = self
                    .keys
                    .iter()
                    .map(|k| match k.plan {
                        KeyPlan::Meta(m) => match rows.prepared.meta[m] {
                            Some(d) => (d, false),
                            None => (pg_sys::Datum::from(0), true),
                        },
                        _ => time_value,
                    })
                    .collect();
                let mut states = Vec::with_capacity(self.aggs.len());
                for (agg, column) in self.aggs.iter().zip(&columns) {
                    let float4 = agg.arg_type == pg_sys::FLOAT4OID;
                    let float = float4 || agg.arg_type == pg_sys::FLOAT8OID;
                    let mut state = initial(agg.kind, float4, float);
                    let result = match (agg.kind, agg.arg) {
                        (AggKind::First | AggKind::Last, _) => {
                            accumulate(agg.kind, &Input::Times(rows::time_values(&self.config, bucket)), group_rows, &mut state)
                        }
                        (_, ArgSource::Rows) => accumulate(agg.kind, &Input::Rows, group_rows, &mut state),
                        (_, ArgSource::Meta(m)) => accumulate(agg.kind, &Input::Constant { present: bucket.meta[m].is_some() }, group_rows, &mut state),
                        (_, ArgSource::Column(_) | ArgSource::Field { .. }) => {
                            accumulate(agg.kind, &Input::Column(column.as_ref().expect("read above")), group_rows, &mut state)
                        }
                    };
                    if result.is_err() {
                        ts_error(SqlState::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow", "");
                    }
                    states.push(match state {
                        State::Pick(Some((time, row))) => {
                            // SAFETY: `column` (read above for this bucket) and `rows.prepared` are of the bucket `row`, a
                            // row of this group, belongs to.
                            let chosen = unsafe { self.chosen_value(agg, rows.shape, rows.prepared, column.as_deref(), time, row as usize) };
                            Partial::Serialized(chosen)
                        }
                        state => Partial::State(state),
                    });
                }
                self.pending.push(PartialRow { keys, states });
            }
            return true;
        }
    }

    /// The serialized first / last state of row `row` (at `time`) of the
    /// bucket: the datum the row holds in the aggregate's argument column.
    ///
    /// # Safety
    /// `column` (the argument's column, for a column argument) and `prepared`
    /// must be of the bucket `row` is a row of.
    #[allow(clippy::too_many_arguments)]
    unsafe fn chosen_value(
        &self,
        agg: &AggPlan,
        shape: &crate::catalog::shape::TableShape,
        prepared: &rows::Prepared,
        column: Option<&tsbucket_format::Column>,
        time: i64,
        row: usize,
    ) -> Vec<u8> {
        let (value, attr) = match agg.arg {
            ArgSource::Meta(m) => (prepared.meta[m], shape.attrs.iter().find(|a| a.role == crate::catalog::shape::Role::Meta(m)).expect("a meta column")),
            ArgSource::Column(i) => {
                let col = column.expect("read above");
                let attr = &shape.attrs[i];
                // By-reference datums are allocated in the per-tuple context, serialized at once.
                // SAFETY: `row` is a row of the bucket `col` belongs to (chosen_value's contract), decoded for `attr`'s
                // type; `self.econtext` is the node's, its per-tuple memory kept until the state is serialized below.
                let value = unsafe {
                    let old = pg_sys::MemoryContextSwitchTo((*self.econtext).ecxt_per_tuple_memory);
                    let value = (!col.is_null(row)).then(|| crate::pg::datum::column_datum(col, row, attr.layout()));
                    pg_sys::MemoryContextSwitchTo(old);
                    value
                };
                (value, attr)
            }
            ArgSource::Field { cast, .. } => {
                // The field's values as the cast gives them (field_column): by-value datums of the cast's type.
                let col = column.expect("read above");
                let (_, layout) = crate::scan::doc_keys::cast_type(cast).expect("a field argument has a number cast");
                // SAFETY: `row` is a row of the bucket whose field column `col` is (the contract), of `layout`'s kind; a
                // by-value datum needs no memory context.
                let value = (!col.is_null(row)).then(|| unsafe { crate::pg::datum::column_datum(col, row, layout) });
                // SAFETY: `value` is a by-value datum of the cast's type, `layout` its layout.
                let bytes = value.as_ref().map(|v| unsafe { crate::pg::datum::datum_bytes(v, layout) });
                return first_last::encode(&first_last::Chosen { time, value: bytes, typlen: layout.typlen, typbyval: true });
            }
            ArgSource::Rows => unreachable!("first and last have a column argument"),
        };
        // SAFETY: `value` is row `row`'s datum of `attr`'s type (from `prepared` or `column`, of the same bucket); its bytes
        // are read before the per-tuple context is reset.
        let bytes = value.as_ref().map(|v| unsafe { crate::pg::datum::datum_bytes(v, attr.layout()) });
        first_last::encode(&first_last::Chosen { time, value: bytes, typlen: attr.typlen, typbyval: attr.typbyval })
    }

    /// Puts row `r` of a bucket in `row_slot`, as the node's scan tuple, its
    /// datums in the per-tuple memory, reset first (as ExecScan does per row).
    ///
    /// # Safety
    /// `bucket`, `prepared` and `shape` are those of the bucket just read, `r` one of its rows.
    #[allow(clippy::type_complexity)]
    unsafe fn put_row(&self, (bucket, prepared, shape): (&crate::store::bucket::LoadedBucket, &rows::Prepared, &crate::catalog::shape::TableShape), r: usize) {
        // SAFETY: `self.econtext` is the node's expression context (begin), alive while the node runs; its per-tuple memory
        // holds nothing of a previous row still in use; `row_slot` is a virtual slot of `self.rel`, filled with row `r` of
        // `bucket` (the contract).
        unsafe {
            let per_row = (*self.econtext).ecxt_per_tuple_memory;
            pg_sys::MemoryContextReset(per_row);
            let old = pg_sys::MemoryContextSwitchTo(per_row);
            rows::fill_slot(self.rel, shape, bucket, Some(prepared), r, self.row_slot);
            pg_sys::MemoryContextSwitchTo(old);
            (*self.econtext).ecxt_scantuple = self.row_slot;
        }
    }

    /// A field argument's values over the bucket's rows: its decimals as the
    /// cast reads their text; rows of `selected` whose field holds anything
    /// else (or whose documents were kept whole) evaluated by `expr`, the
    /// argument itself, on the row, so that they give heap's value or its
    /// error. Rows not selected are never evaluated.
    ///
    /// # Safety
    /// `expr` must be the aggregate's argument compiled for this node; `bucket`, `prepared` and `shape` those of the
    /// bucket just read.
    #[allow(clippy::type_complexity)]
    unsafe fn field_column(
        &self,
        (bucket, prepared, shape): (&crate::store::bucket::LoadedBucket, &rows::Prepared, &crate::catalog::shape::TableShape),
        (field, column, cast): (usize, usize, FieldCast),
        expr: *mut pg_sys::ExprState,
        selected: &[u32],
    ) -> tsbucket_format::Column {
        let n = bucket.rows;
        let fields = bucket.fields.get(field).and_then(|f| f.as_ref());
        let mut valid = vec![false; n];
        let mut floats = if cast == FieldCast::Float8 { vec![0.0; n] } else { Vec::new() };
        let mut ints = if cast == FieldCast::Float8 { Vec::new() } else { vec![0i64; n] };
        let mut evaluate = match fields {
            Some(fields) if fields.len() == n => fields.cast_into(cast, &mut floats, &mut ints, &mut valid),
            _ => (0..n).collect(),
        };
        if !evaluate.is_empty() {
            let mut chosen = vec![false; n];
            selected.iter().for_each(|&r| chosen[r as usize] = true);
            evaluate.retain(|&r| chosen[r]);
            // load_columns decodes the documents wherever a row is left to Postgres: cast on no document, it would
            // give NULL, a wrong answer.
            if !evaluate.is_empty() && bucket.skipped.as_ref().is_some_and(|s| s[column]) {
                panic!("bucket {}: a document field to cast was read without its documents", bucket.bucket_id);
            }
            for r in evaluate {
                let mut isnull = false;
                // SAFETY: `r` is a row of `bucket` (its documents decoded, as load_columns does where a field holds
                // more than decimals); `expr` is compiled for the node's `econtext`, whose scan tuple put_row sets.
                let d = unsafe {
                    self.put_row((bucket, prepared, shape), r);
                    pg_sys::ExecEvalExprSwitchContext(expr, self.econtext, &mut isnull)
                };
                if isnull {
                    continue;
                }
                valid[r] = true;
                // float8, int4 and int8 are passed by value.
                match cast {
                    FieldCast::Float8 => floats[r] = f64::from_bits(d.value() as u64),
                    FieldCast::Int4 => ints[r] = d.value() as i32 as i64,
                    FieldCast::Int8 => ints[r] = d.value() as i64,
                    FieldCast::AsIs => unreachable!("aggregates read fields through a cast"),
                }
            }
        }
        let (kind, values) = match cast {
            FieldCast::Float8 => (tsbucket_format::ColumnKind::Float64, tsbucket_format::Values::Float(floats)),
            _ => (tsbucket_format::ColumnKind::Int, tsbucket_format::Values::Int(ints)),
        };
        let validity = (!valid.iter().all(|&v| v)).then_some(valid);
        tsbucket_format::Column { attnum: 0, kind, validity, values }
    }

    /// The time bucket of time `t` (microseconds): plain arithmetic where it
    /// is that, else computed by Postgres.
    unsafe fn time_bucket(&self, key: &Key, t: i64) -> (pg_sys::Datum, bool) {
        if let Some(k) = key.fixed.and_then(|f| f.key(t)) {
            return (pg_sys::Datum::from(k), false);
        }
        let expr = key.expr;
        let slot = self.row_slot;
        let time = self.config.time_attnum as usize - 1;
        // SAFETY: `row_slot` is this scan's own virtual slot of `self.rel` (made by begin, not holding a row the caller still
        // needs); its values and isnull arrays have natts entries, the time column's among them.
        unsafe {
            pg_sys::ExecClearTuple(slot);
            let natts = (*(*self.rel).rd_att).natts as usize;
            std::slice::from_raw_parts_mut((*slot).tts_isnull, natts).fill(true);
            *(*slot).tts_values.add(time) = pg_sys::Datum::from(t);
            *(*slot).tts_isnull.add(time) = false;
            pg_sys::ExecStoreVirtualTuple(slot);
            (*self.econtext).ecxt_scantuple = slot;
        }
        let mut isnull = false;
        // SAFETY: `expr` is a time-bucket key's expression, compiled for this node, whose `econtext` now scans `slot`.
        let d = unsafe { pg_sys::ExecEvalExprSwitchContext(expr, self.econtext, &mut isnull) };
        (d, isnull)
    }
}

/// A partial state as the Datum of the aggregate's transition type.
unsafe fn state_datum(state: &State, agg: &AggPlan) -> (pg_sys::Datum, bool) {
    let some = |d: Option<pg_sys::Datum>| match d {
        Some(d) => (d, false),
        None => (pg_sys::Datum::from(0), true),
    };
    match *state {
        State::Count(c) => some(c.into_datum()),
        State::Float8(v) => some(v.and_then(|x| x.into_datum())),
        State::Float4(v) => some(v.and_then(|x| x.into_datum())),
        State::Int(v) => some(v.and_then(|x| match (agg.kind, agg.arg_type) {
            (AggKind::SumInt, _) => x.into_datum(),
            (_, pg_sys::INT2OID) => (x as i16).into_datum(),
            (_, pg_sys::INT4OID | pg_sys::DATEOID) => (x as i32).into_datum(),
            _ => x.into_datum(),
        })),
        State::Accum { n, sx, sxx } => {
            let mut elems = [n.into_datum().unwrap(), sx.into_datum().unwrap(), sxx.into_datum().unwrap()];
            // SAFETY: construct_array copies the three by-value float8 datums of the local `elems` into a new array in the
            // current memory context (the per-tuple context `next` switched to).
            let a = unsafe { pg_sys::construct_array(elems.as_mut_ptr(), 3, pg_sys::FLOAT8OID, 8, true, b'd' as std::ffi::c_char) };
            (pg_sys::Datum::from(a), false)
        }
        State::AvgInt { count, sum } => {
            let mut elems = [count.into_datum().unwrap(), sum.into_datum().unwrap()];
            // SAFETY: construct_array copies the two by-value int8 datums of the local `elems` (count, sum) into a new array,
            // palloc'd in the per-tuple context that is current.
            let a = unsafe { pg_sys::construct_array(elems.as_mut_ptr(), 2, pg_sys::INT8OID, 8, true, b'd' as std::ffi::c_char) };
            (pg_sys::Datum::from(a), false)
        }
        // first / last states go up serialized (Partial::Serialized); a group has rows.
        State::Pick(_) => unreachable!("first / last state of an empty group"),
    }
}

/// What the pruning conditions are, for deciding whether headers may answer.
struct PruneSummary {
    time: Option<BoundRange>,
    /// Conditions on measurement columns (range or vector filters).
    column_filters: bool,
}

impl PruneSummary {
    fn of(prune: &[Prune]) -> PruneSummary {
        PruneSummary {
            time: crate::scan::prune::time_range(prune).copied(),
            column_filters: prune.iter().any(|p| matches!(p, Prune::Column { .. })),
        }
    }
}

/// Whether some buckets may be answered from their headers: no condition is
/// left to check row by row, none on measurement columns (their NULLs are not
/// counted in headers), no row-level security, and every aggregate is
/// count(*), count of a meta column, or min/max of a column headers keep
/// them for (integer-like, timestamp and float kinds), or count, sum or avg of
/// a column (answered by the buckets whose headers keep its NULL count and
/// sum). Some(the time range a bucket must lie in).
unsafe fn headers_may_answer(
    rel: pg_sys::Relation,
    config: &Config,
    prune: &PruneSummary,
    aggs: &[AggPlan],
    residual: *mut pg_sys::ExprState,
) -> Option<Option<BoundRange>> {
    if !residual.is_null() || prune.column_filters {
        return None;
    }
    // SAFETY: `rel` is the open table the aggregating scan reads; check_enable_rls reads its pg_class entry for the current user.
    if unsafe { pg_sys::check_enable_rls((*rel).rd_id, pg_sys::InvalidOid, true) } == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32 {
        return None;
    }
    // SAFETY: `rel` is open (AggregatingScan::begin's contract), so its descriptor stays valid while the closure below reads it.
    let tupdesc = unsafe { (*rel).rd_att };
    let summarised = |i: usize| {
        // SAFETY: `i` is an aggregate argument's attnum - 1 (agg_plan found it as a Var of the table), below the natts of `tupdesc`.
        let att = unsafe { &*crate::pg::relation::tuple_desc_attr(tupdesc, i) };
        crate::pg::datum::kind_for_type(att.atttypid, att.attlen, att.attbyval).summarised()
    };
    let answerable = aggs.iter().all(|a| match (a.kind, a.arg) {
        (AggKind::CountRows, _) | (AggKind::CountValues, ArgSource::Meta(_)) => true,
        // From the column's NULL count and sum, kept for the kinds headers
        // hold min/max of (sum and avg take only those anyway).
        (AggKind::CountValues | AggKind::SumFloat8 | AggKind::SumInt | AggKind::AvgInt, ArgSource::Column(i)) => summarised(i),
        (AggKind::AccumFloat, ArgSource::Column(i)) => a.avg && summarised(i),
        (AggKind::Min | AggKind::Max, ArgSource::Column(i)) => i + 1 == config.time_attnum as usize || summarised(i),
        // Document fields read as float8, from the statistics buckets keep of fields whose values all are decimals.
        (AggKind::CountValues | AggKind::SumFloat8 | AggKind::Min | AggKind::Max, ArgSource::Field { cast: FieldCast::Float8, .. }) => true,
        (AggKind::AccumFloat, ArgSource::Field { cast: FieldCast::Float8, .. }) => a.avg,
        _ => false,
    });
    answerable.then_some(prune.time)
}
