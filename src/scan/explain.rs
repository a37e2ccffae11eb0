//! What EXPLAIN shows of a TsBucketScan: decoded columns, bucket filter,
//! vectorized filter and aggregation, bucket access, and with ANALYZE the
//! counters.

use crate::catalog::config;
use crate::scan::access::{Access, MetaCondition};
use crate::scan::quals::Target;
use crate::scan::state::{ExecState, exec_state, finish_scan};
use pgrx::pg_sys;
use pgrx::prelude::*;

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn explain(node: *mut pg_sys::CustomScanState, ancestors: *mut pg_sys::List, es: *mut pg_sys::ExplainState) {
    // SAFETY: ExplainCustomScan passes this begun `node` (its ExecState in the query context) with its open scan relation.
    let (st, rel) = unsafe { (exec_state(node), (*node).ss.ss_currentRelation) };
    if !st.vector_quals.is_empty() {
        let mut clauses: *mut pg_sys::List = std::ptr::null_mut();
        for (q, _) in &st.vector_quals {
            // SAFETY: lappend collects the vector-filter clause `q`, a plan qual, in a new List in the EXPLAIN's
            // CurrentMemoryContext.
            clauses = unsafe { pg_sys::lappend(clauses, *q) };
        }
        // SAFETY: `es.deparse_cxt` is this ExplainState's deparse context, set here for the node's plan and `ancestors`;
        // ExplainPropertyText copies the deparsed vector-filter text into `es`.
        unsafe {
            let context = pg_sys::set_deparse_context_plan((*es).deparse_cxt, (*node).ss.ps.plan, ancestors);
            let text = pg_sys::deparse_expression(pg_sys::make_ands_explicit(clauses) as *mut pg_sys::Node, context, (*es).verbose, false);
            pg_sys::ExplainPropertyText(c"Vectorized Filter".as_ptr(), text, es);
        }
    }
    if let Some(pa) = &st.partial_agg {
        if !pa.qual_list.is_null() {
            // SAFETY: `pa.qual_list` is the partial-aggregation plan's custom_exprs; it is deparsed in `es.deparse_cxt`, set
            // for the node's plan, and ExplainPropertyText copies the text into `es`.
            unsafe {
                let context = pg_sys::set_deparse_context_plan((*es).deparse_cxt, (*node).ss.ps.plan, ancestors);
                // As Postgres shows a scan's Filter: column names qualified only in VERBOSE.
                let text = pg_sys::deparse_expression(pg_sys::make_ands_explicit(pa.qual_list) as *mut pg_sys::Node, context, (*es).verbose, false);
                pg_sys::ExplainPropertyText(c"Filter".as_ptr(), text, es);
            }
        }
        let what = format!("partial, per bucket and group ({} aggregate{}, {} group key{})", pa.aggs.len(), if pa.aggs.len() == 1 { "" } else { "s" }, pa.keys.len(), if pa.keys.len() == 1 { "" } else { "s" });
        let what = std::ffi::CString::new(what).expect("no NUL");
        // SAFETY: `what` is a NUL-terminated CString alive across the call; ExplainPropertyText copies it into `es`.
        unsafe { pg_sys::ExplainPropertyText(c"Vectorized Aggregation".as_ptr(), what.as_ptr(), es) };
    }
    // Bytes: a document's keys are the server encoding's, shown as they are.
    let columns: Vec<u8> = match &st.needed {
        None => b"all".to_vec(),
        Some(mask) => {
            // Fields the filters and aggregates read as numbers, by column.
            let fields = |i: usize| -> Vec<&[u8]> {
                st.doc_fields.iter().filter(|(c, ..)| *c == i).map(|(_, k, _)| &k[..]).fold(Vec::new(), |mut v, k| {
                    if !v.contains(&k) {
                        v.push(k);
                    }
                    v
                })
            };
            let names: Vec<Vec<u8>> = mask
                .iter()
                .enumerate()
                .filter(|(i, n)| **n || !fields(*i).is_empty())
                // SAFETY: `rel` is the explained scan's open relation and the mask is one entry per column of it.
                .map(|(i, n)| (i, *n, unsafe { crate::pg::relation::attr_name(rel, (i + 1) as i16) }.into_bytes()))
                // A document read through key accessors: the keys decoded; fields read from their sub-columns (as
                // numbers, or whether they are there): those.
                .map(|(i, whole, mut name)| {
                    let mut parts: Vec<Vec<u8>> = Vec::new();
                    if let Some((_, keys)) = st.doc_keys.iter().find(|(a, _)| *a == i).filter(|_| whole) {
                        parts.push([&b"keys: "[..], &if keys.is_empty() { b"none".to_vec() } else { keys.join(&b", "[..]) }].concat());
                    }
                    let fields = fields(i);
                    if !fields.is_empty() {
                        parts.push([&b"fields: "[..], &fields.join(&b", "[..])].concat());
                    }
                    if !parts.is_empty() {
                        name.extend_from_slice(b" (");
                        name.extend_from_slice(&parts.join(&b"; "[..]));
                        name.push(b')');
                    }
                    name
                })
                .collect();
            if names.is_empty() { b"none".to_vec() } else { names.join(&b", "[..]) }
        }
    };
    let columns = std::ffi::CString::new(columns).expect("no NUL in names");
    // SAFETY: `columns` is a CString that outlives the call; ExplainPropertyText copies the decoded column names into `es`.
    unsafe { pg_sys::ExplainPropertyText(c"Decoded Columns".as_ptr(), columns.as_ptr(), es) };
    if !st.candidates.is_empty() || st.meta_qual.is_some() {
        let mut clauses: *mut pg_sys::List = std::ptr::null_mut();
        for c in &st.candidates {
            // SAFETY: lappend collects the pruning clause `c.clause`, a plan qual, in a new List in CurrentMemoryContext.
            clauses = unsafe { pg_sys::lappend(clauses, c.clause as *mut std::ffi::c_void) };
        }
        if let Some((_, _, meta_quals, _)) = st.meta_qual {
            // SAFETY: `meta_quals` is the List of plan quals begin kept; list_concat copies its cells into `clauses`.
            clauses = unsafe { pg_sys::list_concat(clauses, meta_quals) };
        }
        // SAFETY: the bucket-filter clauses are deparsed in `es.deparse_cxt`, set for the node's plan and `ancestors`, and
        // ExplainPropertyText copies the text into `es`.
        unsafe {
            let context = pg_sys::set_deparse_context_plan((*es).deparse_cxt, (*node).ss.ps.plan, ancestors);
            let text = pg_sys::deparse_expression(pg_sys::make_ands_explicit(clauses) as *mut pg_sys::Node, context, true, false);
            pg_sys::ExplainPropertyText(c"Bucket Filter".as_ptr(), text, es);
        }
    }
    // SAFETY: `es` is the ExplainState ExplainNode passes, alive for this call; its analyze flag is read by value.
    let analyze = unsafe { (*es).analyze };
    if analyze {
        // SAFETY: `node` is begun; finish_scan ends its running scan so that the counters shown below are complete.
        unsafe { finish_scan(node) };
    }
    // SAFETY: `rel` is the node's scan relation, open until EndCustomScan.
    let relid = unsafe { (*rel).rd_id };
    let access = if st.last_point_mode {
        "Last Point per Series (Series Index skip scan)".to_string()
    } else if let Some(descending) = st.series_order {
        let config = config::require(relid);
        // SAFETY: the configured meta columns are columns of `rel`, the series-ordered scan's open relation.
        let mut columns: Vec<String> = config.meta_attnums.iter().map(|&a| unsafe { crate::pg::relation::attr_name(rel, a) }).collect();
        columns.push("window_start".to_string());
        format!("Series Index ({}), rows merged in series and time order{}", columns.join(", "), if descending { " DESC" } else { "" })
    } else if let Some(descending) = st.time_order {
        let config = config::require(relid);
        // SAFETY: planned_access opens the store of the begun `node` to choose the access its conditions allow.
        let walks = match unsafe { planned_access(node, st) } {
            a if a.pins_every_series(&config) => {
                // SAFETY: describe_access reads the column names of `rel`, the open scan relation, for the time-order walk.
                let described = unsafe { describe_access(rel, &a) };
                described + " per series"
            }
            _ => "Window Index (window_start)".to_string(),
        };
        let ties = match st.meta_ties {
            Some(d) => {
                // SAFETY: the meta columns that break ties are columns of `rel`, the time-ordered scan's open relation.
                let names: Vec<String> = config.meta_attnums.iter().map(|&a| unsafe { crate::pg::relation::attr_name(rel, a) }).collect();
                format!(", then {}{}", names.join(", "), if d { " DESC" } else { "" })
            }
            None => String::new(),
        };
        format!("{walks}, rows merged in time order{}{ties}", if descending { " DESC" } else { "" })
    } else {
        // SAFETY: `node.ss.ps.plan` is the node's plan, alive with the executor state; parallel_aware is read by value.
        if unsafe { (*(*node).ss.ps.plan).parallel_aware } {
            // The store's heap blocks, shared out among the participants.
            "Parallel Seq Scan".to_string()
        } else {
            let access = match st.access.clone() {
                Some(a) => a,
                // SAFETY: no scan has run yet: planned_access opens the store of the begun `node` to choose its access.
                None => unsafe { planned_access(node, st) },
            };
            // SAFETY: describe_access reads the column names of `rel`, the node's open scan relation.
            unsafe { describe_access(rel, &access) }
        }
    };
    let access = std::ffi::CString::new(access).expect("no NUL in names");
    // SAFETY: `access` is a CString alive across the call; ExplainPropertyText copies the bucket access text into `es`.
    unsafe { pg_sys::ExplainPropertyText(c"Bucket Access".as_ptr(), access.as_ptr(), es) };
    if analyze {
        // SAFETY: `es` is the ExplainState of this EXPLAIN ANALYZE; the labels and units are static C strings and
        // ExplainPropertyInteger copies them with the scan counters.
        unsafe {
            pg_sys::ExplainPropertyInteger(c"Buckets Read".as_ptr(), std::ptr::null(), st.totals.buckets_read as i64, es);
            pg_sys::ExplainPropertyInteger(c"Buckets Skipped".as_ptr(), std::ptr::null(), st.totals.buckets_skipped as i64, es);
            pg_sys::ExplainPropertyInteger(c"Rows Removed by Bucket Filter".as_ptr(), std::ptr::null(), st.totals.rows_filtered as i64, es);
            pg_sys::ExplainPropertyInteger(c"Payload Bytes Read".as_ptr(), c"bytes".as_ptr(), st.totals.payload_bytes as i64, es);
            pg_sys::ExplainPropertyInteger(c"Bytes Decompressed".as_ptr(), c"bytes".as_ptr(), st.totals.decoded_bytes as i64, es);
        }
        if st.totals.tail_rows > 0 {
            // SAFETY: as for the scan counters: this EXPLAIN ANALYZE's `es` and a static label; the rows read from the
            // table's tail (not yet in buckets) are shown when there were any.
            unsafe { pg_sys::ExplainPropertyInteger(c"Tail Rows Read".as_ptr(), std::ptr::null(), st.totals.tail_rows as i64, es) };
        }
        if st.partial_agg.is_some() {
            // SAFETY: as for the scan counters, `es` is this EXPLAIN ANALYZE's state and the labels static C strings; the
            // values are the aggregation counters.
            unsafe {
                pg_sys::ExplainPropertyInteger(c"Rows Removed by Filter".as_ptr(), std::ptr::null(), st.agg_totals.rows_removed_by_filter as i64, es);
                pg_sys::ExplainPropertyInteger(c"Rows Aggregated".as_ptr(), std::ptr::null(), st.agg_totals.rows_aggregated as i64, es);
                pg_sys::ExplainPropertyInteger(c"Partial Rows".as_ptr(), std::ptr::null(), st.agg_totals.partial_rows as i64, es);
                pg_sys::ExplainPropertyInteger(c"Buckets Answered from Headers".as_ptr(), std::ptr::null(), st.totals.buckets_from_headers as i64, es);
            }
        }
    }
}

/// The access a scan with these conditions takes (values assumed not NULL).
unsafe fn planned_access(node: *mut pg_sys::CustomScanState, st: &ExecState) -> Access {
    // SAFETY: `node` is the begun scan node being explained; its scan relation is open.
    let config = config::require(unsafe { (*(*node).ss.ss_currentRelation).rd_id });
    let metas: Vec<MetaCondition> = st
        .candidates
        .iter()
        .filter_map(|c| match c.target {
            Target::Meta(meta) => Some(MetaCondition { meta, op: c.op, collation: c.collation, meta_first: c.var_first }),
            _ => None,
        })
        .collect();
    let has_time = st.candidates.iter().any(|c| matches!(c.target, Target::Time { .. }));
    // SAFETY: the store `config.store_relid` is open under AccessShareLock while access::choose reads its indexes, then
    // closed with the lock kept to the end of the transaction.
    unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let access = crate::scan::access::choose(store, &config, &metas, has_time);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        access
    }
}

/// "Series Index (hostname, window_start)" and the like: which store index
/// (named by its role, not its OID-bearing name) and the columns its keys bound.
unsafe fn describe_access(rel: pg_sys::Relation, access: &Access) -> String {
    match access {
        Access::Heap => "Seq Scan".to_string(),
        Access::Window { .. } => "Window Index (window_start)".to_string(),
        Access::Series { keys, window, .. } => {
            // SAFETY: `rel` is the explained node's open scan relation (the relation both callers pass).
            let config = config::require(unsafe { (*rel).rd_id });
            // SAFETY: the leading meta columns the index keys bound are columns of `rel`, open while EXPLAIN runs.
            let mut columns: Vec<String> = (0..keys.len()).map(|i| unsafe { crate::pg::relation::attr_name(rel, config.meta_attnums[i]) }).collect();
            if *window {
                columns.push("window_start".to_string());
            }
            format!("Series Index ({})", columns.join(", "))
        }
    }
}
