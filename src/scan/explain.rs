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
    unsafe {
        let st = exec_state(node);
        let rel = (*node).ss.ss_currentRelation;
        if !st.vector_quals.is_empty() {
            let mut clauses: *mut pg_sys::List = std::ptr::null_mut();
            for (q, _) in &st.vector_quals {
                clauses = pg_sys::lappend(clauses, *q);
            }
            let context = pg_sys::set_deparse_context_plan((*es).deparse_cxt, (*node).ss.ps.plan, ancestors);
            let text = pg_sys::deparse_expression(pg_sys::make_ands_explicit(clauses) as *mut pg_sys::Node, context, (*es).verbose, false);
            pg_sys::ExplainPropertyText(c"Vectorized Filter".as_ptr(), text, es);
        }
        if let Some(pa) = &st.partial_agg {
            if !pa.qual_list.is_null() {
                let context = pg_sys::set_deparse_context_plan((*es).deparse_cxt, (*node).ss.ps.plan, ancestors);
                // As Postgres shows a scan's Filter: column names qualified only in VERBOSE.
                let text = pg_sys::deparse_expression(pg_sys::make_ands_explicit(pa.qual_list) as *mut pg_sys::Node, context, (*es).verbose, false);
                pg_sys::ExplainPropertyText(c"Filter".as_ptr(), text, es);
            }
            let what = format!("partial, per bucket and group ({} aggregate{}, {} group key{})", pa.aggs.len(), if pa.aggs.len() == 1 { "" } else { "s" }, pa.keys.len(), if pa.keys.len() == 1 { "" } else { "s" });
            let what = std::ffi::CString::new(what).expect("no NUL");
            pg_sys::ExplainPropertyText(c"Vectorized Aggregation".as_ptr(), what.as_ptr(), es);
        }
        let columns = match &st.needed {
            None => "all".to_string(),
            Some(mask) => {
                let names: Vec<String> = mask
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n)
                    .map(|(i, _)| crate::pg::relation::attr_name(rel, (i + 1) as i16))
                    .collect();
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            }
        };
        let columns = std::ffi::CString::new(columns).expect("no NUL in names");
        pg_sys::ExplainPropertyText(c"Decoded Columns".as_ptr(), columns.as_ptr(), es);
        if !st.candidates.is_empty() {
            let mut clauses: *mut pg_sys::List = std::ptr::null_mut();
            for c in &st.candidates {
                clauses = pg_sys::lappend(clauses, c.clause as *mut std::ffi::c_void);
            }
            let context = pg_sys::set_deparse_context_plan((*es).deparse_cxt, (*node).ss.ps.plan, ancestors);
            let text = pg_sys::deparse_expression(pg_sys::make_ands_explicit(clauses) as *mut pg_sys::Node, context, true, false);
            pg_sys::ExplainPropertyText(c"Bucket Filter".as_ptr(), text, es);
        }
        if (*es).analyze {
            finish_scan(node);
        }
        let access = if st.last_point_mode {
            "Last Point per Series (Series Index skip scan)".to_string()
        } else if let Some(descending) = st.series_order {
            let config = config::require((*rel).rd_id);
            let mut columns: Vec<String> = config.meta_attnums.iter().map(|&a| crate::pg::relation::attr_name(rel, a)).collect();
            columns.push("window_start".to_string());
            format!("Series Index ({}), rows merged in series and time order{}", columns.join(", "), if descending { " DESC" } else { "" })
        } else if let Some(descending) = st.time_order {
            let config = config::require((*rel).rd_id);
            let walks = match planned_access(node, st) {
                a if a.pins_every_series(&config) => describe_access(rel, &a) + " per series",
                _ => "Window Index (window_start)".to_string(),
            };
            let ties = match st.meta_ties {
                Some(d) => format!(", then {}{}", config.meta_attnums.iter().map(|&a| crate::pg::relation::attr_name(rel, a)).collect::<Vec<_>>().join(", "), if d { " DESC" } else { "" }),
                None => String::new(),
            };
            format!("{walks}, rows merged in time order{}{ties}", if descending { " DESC" } else { "" })
        } else {
            if (*(*node).ss.ps.plan).parallel_aware {
                // The store's heap blocks, shared out among the participants.
                "Parallel Seq Scan".to_string()
            } else {
                let access = match st.access.clone() {
                    Some(a) => a,
                    None => planned_access(node, st),
                };
                describe_access(rel, &access)
            }
        };
        let access = std::ffi::CString::new(access).expect("no NUL in names");
        pg_sys::ExplainPropertyText(c"Bucket Access".as_ptr(), access.as_ptr(), es);
        if (*es).analyze {
            pg_sys::ExplainPropertyInteger(c"Buckets Read".as_ptr(), std::ptr::null(), st.totals.buckets_read as i64, es);
            pg_sys::ExplainPropertyInteger(c"Buckets Skipped".as_ptr(), std::ptr::null(), st.totals.buckets_skipped as i64, es);
            pg_sys::ExplainPropertyInteger(c"Rows Removed by Bucket Filter".as_ptr(), std::ptr::null(), st.totals.rows_filtered as i64, es);
            pg_sys::ExplainPropertyInteger(c"Payload Bytes Read".as_ptr(), c"bytes".as_ptr(), st.totals.payload_bytes as i64, es);
            pg_sys::ExplainPropertyInteger(c"Bytes Decompressed".as_ptr(), c"bytes".as_ptr(), st.totals.decoded_bytes as i64, es);
            if st.partial_agg.is_some() {
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
    unsafe {
        let config = config::require((*(*node).ss.ss_currentRelation).rd_id);
        let metas: Vec<MetaCondition> = st
            .candidates
            .iter()
            .filter_map(|c| match c.target {
                Target::Meta(meta) => Some(MetaCondition { meta, op: c.op, collation: c.collation, meta_first: c.var_first }),
                _ => None,
            })
            .collect();
        let has_time = st.candidates.iter().any(|c| matches!(c.target, Target::Time { .. }));
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let access = crate::scan::access::choose(store, &config, &metas, has_time);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        access
    }
}

/// "Series Index (hostname, window_start)" and the like: which store index
/// (named by its role, not its OID-bearing name) and the columns its keys bound.
unsafe fn describe_access(rel: pg_sys::Relation, access: &Access) -> String {
    unsafe {
        match access {
            Access::Heap => "Seq Scan".to_string(),
            Access::Window { .. } => "Window Index (window_start)".to_string(),
            Access::Series { keys, window, .. } => {
                let config = config::require((*rel).rd_id);
                let mut columns: Vec<String> =
                    (0..keys.len()).map(|i| crate::pg::relation::attr_name(rel, config.meta_attnums[i])).collect();
                if *window {
                    columns.push("window_start".to_string());
                }
                format!("Series Index ({})", columns.join(", "))
            }
        }
    }
}
