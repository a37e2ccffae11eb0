//! `SELECT DISTINCT ON (meta...) ... ORDER BY meta..., time DESC`: recognised
//! at the DISTINCT stage, answered by a last-point TsBucketScan path.

use crate::catalog::config;
use crate::pg::nodes::{list_ptrs, strip};
use pgrx::pg_sys;

/// `SELECT DISTINCT ON (m1, ..., mn) ... FROM t [WHERE ...] ORDER BY m1, ...,
/// mn, time DESC` over one time-series table whose meta columns are exactly
/// m1..mn: offers a path that reads only each series' newest buckets
/// (`am::lastpoint`) and yields its rows already distinct and in that order.
/// The meta columns must sort by their type's default btree order (ascending,
/// NULLs last, the column's collation), as the store's series index does.
/// Not under row-level security (its quals would have to run first).
pub unsafe fn add_last_point_path(root: *mut pg_sys::PlannerInfo, input_rel: *mut pg_sys::RelOptInfo, output_rel: *mut pg_sys::RelOptInfo) {
    unsafe {
        let parse = (*root).parse;
        if !(*parse).hasDistinctOn
            || !(*parse).groupClause.is_null()
            || !(*parse).groupingSets.is_null()
            || (*parse).hasAggs
            || (*parse).hasWindowFuncs
            || (*parse).hasTargetSRFs
            || !(*parse).rowMarks.is_null()
            || (*input_rel).reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL
            || !(*input_rel).lateral_relids.is_null()
        {
            return;
        }
        let rti = (*input_rel).relid;
        let rte = *(*root).simple_rte_array.add(rti as usize);
        // (Not with inheritance children: their rows are not in this store.)
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
            || (*rte).relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
            || (*rte).inh
            || !crate::catalog::config::is_tsbucket_table((*rte).relid)
        {
            return;
        }
        let Some(config) = config::lookup((*rte).relid) else { return };
        let nmeta = config.meta_attnums.len();
        if nmeta == 0 {
            return;
        }
        if list_ptrs((*input_rel).baserestrictinfo).iter().any(|ri| (*(*ri as *mut pg_sys::RestrictInfo)).security_level > 0) {
            return;
        }
        let sort = list_ptrs((*parse).sortClause);
        if sort.len() != nmeta + 1 {
            return;
        }
        let mut families = Vec::with_capacity(nmeta);
        for (i, sc) in sort.iter().enumerate() {
            let sc = *sc as *mut pg_sys::SortGroupClause;
            let tle = pg_sys::get_sortgroupclause_tle(sc, (*parse).targetList);
            let expr = strip((*tle).expr as *mut pg_sys::Node);
            if (*expr).type_ != pg_sys::NodeTag::T_Var {
                return;
            }
            let var = expr as *mut pg_sys::Var;
            let attnum = if i < nmeta { config.meta_attnums[i] } else { config.time_attnum };
            if (*var).varno as u32 != rti || (*var).varlevelsup != 0 || (*var).varattno != attnum {
                return;
            }
            if i == nmeta {
                let gt = if (*var).vartype == pg_sys::TIMESTAMPTZOID { 1324 } else { 2064 };
                if (*sc).sortop != pg_sys::Oid::from(gt) {
                    return;
                }
                continue;
            }
            let cache = pg_sys::lookup_type_cache((*var).vartype, pg_sys::TYPECACHE_BTREE_OPFAMILY as i32);
            let family = if cache.is_null() { pg_sys::InvalidOid } else { (*cache).btree_opf };
            let lt = pg_sys::get_opfamily_member(family, (*var).vartype, (*var).vartype, pg_sys::BTLessStrategyNumber as i16);
            // A bare column (a Var carries its column's collation); no COLLATE on it.
            let column_collation = (*var).varcollid;
            if family == pg_sys::InvalidOid
                || (*sc).sortop != lt
                || (*sc).nulls_first
                || pg_sys::exprCollation((*tle).expr as *mut pg_sys::Node) != column_collation
            {
                return;
            }
            families.push((family, column_collation));
        }
        // DISTINCT ON exactly the meta columns.
        let meta_refs: std::collections::BTreeSet<u32> =
            sort[..nmeta].iter().map(|sc| (*(*sc as *mut pg_sys::SortGroupClause)).tleSortGroupRef).collect();
        let distinct_refs: std::collections::BTreeSet<u32> =
            list_ptrs((*parse).distinctClause).iter().map(|sc| (*(*sc as *mut pg_sys::SortGroupClause)).tleSortGroupRef).collect();
        if meta_refs != distinct_refs {
            return;
        }
        // The store's series index must order as the query does.
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let index = crate::scan::access::series_index(store, &config);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        let Some(index) = index else { return };
        let index_rel = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
        let same_order = (0..nmeta).all(|i| {
            *(*index_rel).rd_opfamily.add(i) == families[i].0 && *(*index_rel).rd_indcollation.add(i) == families[i].1
        });
        pg_sys::index_close(index_rel, pg_sys::AccessShareLock as i32);
        if !same_order {
            return;
        }
        let cpath = crate::scan::path::last_point_path(root, input_rel, output_rel, rti);
        pg_sys::add_path(output_rel, cpath as *mut pg_sys::Path);
    }
}
