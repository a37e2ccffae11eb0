//! `SELECT DISTINCT ON (meta...) ... ORDER BY meta..., time DESC`: recognised
//! at the DISTINCT stage, answered by a last-point TsBucketScan path.

use crate::catalog::config;
use crate::pg::nodes::{list_ptrs, strip};
use pgrx::pg_sys;

/// `SELECT DISTINCT ON (m1, ..., mn) ... FROM t [WHERE ...] ORDER BY m1, ...,
/// mn, time DESC` over one time-series table whose meta columns are exactly
/// m1..mn: offers a path that reads only each series' newest buckets
/// (`scan::last_point`) and yields its rows already distinct and in that order.
/// The meta columns must sort by their type's default btree order (ascending,
/// NULLs last, the column's collation), as the store's series index does.
/// Not under row-level security (its quals would have to run first).
///
/// # Safety
/// The planner's arguments of create_upper_paths at UPPERREL_DISTINCT, during planning.
pub unsafe fn add_last_point_path(root: *mut pg_sys::PlannerInfo, input_rel: *mut pg_sys::RelOptInfo, output_rel: *mut pg_sys::RelOptInfo) {
    // SAFETY: `root` is the PlannerInfo of the query being planned (this function's contract); `parse` is its Query.
    let parse = unsafe { (*root).parse };
    // SAFETY: `parse` and `input_rel` (the rel under DISTINCT) are planner data alive for the whole planning.
    let other_query_shape = unsafe {
        !(*parse).hasDistinctOn
            || !(*parse).groupClause.is_null()
            || !(*parse).groupingSets.is_null()
            || (*parse).hasAggs
            || (*parse).hasWindowFuncs
            || (*parse).hasTargetSRFs
            || !(*parse).rowMarks.is_null()
            || (*input_rel).reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL
            || !(*input_rel).lateral_relids.is_null()
    };
    if other_query_shape {
        return;
    }
    // SAFETY: `input_rel` is a base rel, so `relid` is its range-table index and simple_rte_array holds its entry there.
    let (rti, rte) = unsafe {
        let rti = (*input_rel).relid;
        (rti, *(*root).simple_rte_array.add(rti as usize))
    };
    // (Not with inheritance children: their rows are not in this store.)
    // SAFETY: `rte` is the RangeTblEntry of `input_rel`, part of the query's range table.
    let (rtekind, relkind, inh, relid) = unsafe { ((*rte).rtekind, (*rte).relkind, (*rte).inh, (*rte).relid) };
    if rtekind != pg_sys::RTEKind::RTE_RELATION
        || relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
        || inh
        || !crate::catalog::config::is_tsbucket_table(relid)
    {
        return;
    }
    let Some(config) = config::lookup(relid) else { return };
    let nmeta = config.meta_attnums.len();
    if nmeta == 0 {
        return;
    }
    // SAFETY: `input_rel.baserestrictinfo` is NIL or its List of RestrictInfo nodes, each read in place.
    let under_rls = unsafe { list_ptrs((*input_rel).baserestrictinfo).iter().any(|ri| (*(*ri as *mut pg_sys::RestrictInfo)).security_level > 0) };
    if under_rls {
        return;
    }
    // SAFETY: `parse.sortClause` is NIL or the query's List of SortGroupClause nodes.
    let sort = unsafe { list_ptrs((*parse).sortClause) };
    if sort.len() != nmeta + 1 {
        return;
    }
    let mut families = Vec::with_capacity(nmeta);
    for (i, sc) in sort.iter().enumerate() {
        let sc = *sc as *mut pg_sys::SortGroupClause;
        // SAFETY: `sc` is a SortGroupClause of the query's ORDER BY, so get_sortgroupclause_tle finds its TargetEntry in
        // `parse.targetList`; strip follows only RelabelType nodes of that entry's expression.
        let (tle, expr) = unsafe {
            let tle = pg_sys::get_sortgroupclause_tle(sc, (*parse).targetList);
            (tle, strip((*tle).expr as *mut pg_sys::Node))
        };
        // SAFETY: `expr` is the (stripped) sort expression, a valid node whose NodeTag comes first.
        if unsafe { (*expr).type_ } != pg_sys::NodeTag::T_Var {
            return;
        }
        let var = expr as *mut pg_sys::Var;
        let attnum = if i < nmeta { config.meta_attnums[i] } else { config.time_attnum };
        // SAFETY: `var` is the sort key's Var (tagged T_Var above) and `sc` its SortGroupClause, both read in place.
        let (varno, varlevelsup, varattno, vartype, varcollid, sortop, nulls_first) =
            unsafe { ((*var).varno, (*var).varlevelsup, (*var).varattno, (*var).vartype, (*var).varcollid, (*sc).sortop, (*sc).nulls_first) };
        if varno as u32 != rti || varlevelsup != 0 || varattno != attnum {
            return;
        }
        if i == nmeta {
            let gt = if vartype == pg_sys::TIMESTAMPTZOID { 1324 } else { 2064 };
            if sortop != pg_sys::Oid::from(gt) {
                return;
            }
            continue;
        }
        // SAFETY: lookup_type_cache returns the backend-lifetime type cache entry of `vartype` (or null, checked before its
        // btree_opf is read); get_opfamily_member is a syscache lookup by oids.
        let (family, lt) = unsafe {
            let cache = pg_sys::lookup_type_cache(vartype, pg_sys::TYPECACHE_BTREE_OPFAMILY as i32);
            let family = if cache.is_null() { pg_sys::InvalidOid } else { (*cache).btree_opf };
            (family, pg_sys::get_opfamily_member(family, vartype, vartype, pg_sys::BTLessStrategyNumber as i16))
        };
        // A bare column (a Var carries its column's collation); no COLLATE on it.
        let column_collation = varcollid;
        if family == pg_sys::InvalidOid || sortop != lt || nulls_first {
            return;
        }
        // SAFETY: `tle` is the sort key's TargetEntry; exprCollation only reads its expression tree.
        if unsafe { pg_sys::exprCollation((*tle).expr as *mut pg_sys::Node) } != column_collation {
            return;
        }
        families.push((family, column_collation));
    }
    // DISTINCT ON exactly the meta columns.
    // SAFETY: the first `nmeta` entries of `sort` are SortGroupClause nodes of the query's ORDER BY.
    let meta_refs: std::collections::BTreeSet<u32> =
        unsafe { sort[..nmeta].iter().map(|sc| (*(*sc as *mut pg_sys::SortGroupClause)).tleSortGroupRef).collect() };
    // SAFETY: `parse.distinctClause` is NIL or the query's List of DISTINCT ON SortGroupClause nodes.
    let distinct_refs: std::collections::BTreeSet<u32> =
        unsafe { list_ptrs((*parse).distinctClause).iter().map(|sc| (*(*sc as *mut pg_sys::SortGroupClause)).tleSortGroupRef).collect() };
    if meta_refs != distinct_refs {
        return;
    }
    // The store's series index must order as the query does.
    // SAFETY: the store is open and AccessShare-locked from table_open to table_close, around series_index, which wants it open.
    let index = unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let index = crate::scan::access::series_index(store, &config);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        index
    };
    let Some(index) = index else { return };
    // SAFETY: index_open locks the series index AccessShare until index_close; its rd_opfamily and rd_indcollation arrays
    // have an entry per key column, and the series index has nmeta + 1 of them.
    let same_order = unsafe {
        let index_rel = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
        let same_order = (0..nmeta).all(|i| {
            *(*index_rel).rd_opfamily.add(i) == families[i].0 && *(*index_rel).rd_indcollation.add(i) == families[i].1
        });
        pg_sys::index_close(index_rel, pg_sys::AccessShareLock as i32);
        same_order
    };
    if !same_order {
        return;
    }
    // SAFETY: `root`, `input_rel` and `output_rel` are create_upper_paths' own at UPPERREL_DISTINCT (last_point_path's
    // contract); add_path takes the new CustomPath into `output_rel`'s pathlist, in the planner's memory context.
    unsafe {
        let cpath = crate::scan::path::last_point_path(root, input_rel, output_rel, rti);
        pg_sys::add_path(output_rel, cpath as *mut pg_sys::Path);
    }
}
