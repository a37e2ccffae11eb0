//! TsBucketScan paths: one per sequential scan path of a time-series table
//! (cheaper: it decodes fewer columns and reads only the buckets its
//! conditions reach), ordered ones (time, series and time), parameterized
//! ones for joins on the meta column, a parallel one, the last-point path;
//! their costs; and the plan nodes they become.

use crate::catalog::config;
use crate::pg::nodes::{is_pseudo_constant, list_ptrs, referenced_attnums, strip};
use crate::scan::exec::methods;
use crate::scan::plan::{MODE_LAST_POINT, MODE_SCAN, MODE_SERIES_ORDER, MODE_TIME_ORDER, private_list};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// The TsBucketScan paths of a relation (set_rel_pathlist): one per
/// sequential scan path, plus ordered, parameterized and parallel ones.
///
/// # Safety
/// The planner's own arguments of set_rel_pathlist, during planning.
pub unsafe fn add_paths(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, rte: *mut pg_sys::RangeTblEntry) {
    unsafe {
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
            || (*rte).relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
            || !crate::catalog::config::is_tsbucket_table((*rte).relid)
            || config::lookup((*rte).relid).is_none()
        {
            return;
        }
        // One custom path per sequential scan path (parameterizations included),
        // cheaper than it: it decodes fewer columns, and reads only the buckets
        // its meta and time conditions reach (by the share of rows they select).
        let reached = reached_fraction(root, rel, (*rte).relid, true).clamp(1e-4, 1.0);
        // Every path is made before any is added: add_path frees the paths it
        // rejects or that a new one beats, seq scans and our own included.
        let mut paths: Vec<*mut pg_sys::CustomPath> = Vec::new();
        for p in list_ptrs((*rel).pathlist) {
            let seq = p as *mut pg_sys::Path;
            if (*seq).pathtype != pg_sys::NodeTag::T_SeqScan {
                continue;
            }
            let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
            (*cpath).path = *seq;
            (*cpath).path.type_ = pg_sys::NodeTag::T_CustomPath;
            (*cpath).path.pathtype = pg_sys::NodeTag::T_CustomScan;
            (*cpath).path.total_cost = (*seq).startup_cost + ((*seq).total_cost - (*seq).startup_cost) * 0.5 * reached;
            (*cpath).flags = pg_sys::CUSTOMPATH_SUPPORT_BACKWARD_SCAN | pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
            (*cpath).methods = &path_methods().scan;
            paths.push(cpath);
            if (*seq).param_info.is_null() {
                paths.extend(time_order_path(root, rel, cpath));
                paths.extend(series_order_paths(root, rel, cpath));
                paths.extend(parameterized_paths(root, rel, cpath, (*rte).relid, reached));
            }
        }
        let partial = parallel_path(root, rel, rte, &paths);
        for cpath in paths {
            pg_sys::add_path(rel, cpath as *mut pg_sys::Path);
        }
        // Postgres's own partial paths would scan the user relation, which is empty.
        (*rel).partial_pathlist = std::ptr::null_mut();
        if let Some(p) = partial {
            pg_sys::add_partial_path(rel, p as *mut pg_sys::Path);
        }
    }
}

/// A parallel-aware TsBucketScan for Gather: the participants share out the
/// store's heap blocks (and so its buckets); partial aggregates of each
/// combine above. Workers as Postgres would give a heap of the store's size
/// (its main fork and TOAST, where payloads live), up to
/// max_parallel_workers_per_gather.
unsafe fn parallel_path(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rte: *mut pg_sys::RangeTblEntry,
    paths: &[*mut pg_sys::CustomPath],
) -> Option<*mut pg_sys::CustomPath> {
    unsafe {
        if !(*rel).consider_parallel || (*rel).reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL || pg_sys::max_parallel_workers_per_gather <= 0 {
            return None;
        }
        let base = *paths.iter().find(|&&p| (*p).path.param_info.is_null() && (*p).path.pathkeys.is_null() && (*p).custom_private.is_null())?;
        let config = config::lookup((*rte).relid)?;
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let mut blocks = pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM) as f64;
        let toast = (*(*store).rd_rel).reltoastrelid;
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        if toast != pg_sys::InvalidOid {
            let t = pg_sys::table_open(toast, pg_sys::AccessShareLock as i32);
            blocks += pg_sys::RelationGetNumberOfBlocksInFork(t, pg_sys::ForkNumber::MAIN_FORKNUM) as f64;
            pg_sys::table_close(t, pg_sys::NoLock as i32);
        }
        // Relation options win, as for a heap (a parallel_workers set on the table).
        let workers = if (*rel).rel_parallel_workers >= 0 {
            (*rel).rel_parallel_workers
        } else {
            let threshold = (pg_sys::min_parallel_table_scan_size as f64).max(1.0);
            if blocks < threshold {
                0
            } else {
                1 + (blocks / threshold).log(3.0).floor() as i32
            }
        }
        .min(pg_sys::max_parallel_workers_per_gather);
        if workers <= 0 {
            return None;
        }
        let _ = root;
        let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
        *cpath = *base;
        // The leader helps less the more workers there are, as in costsize.c.
        let leader = if pg_sys::parallel_leader_participation { (1.0 - 0.3 * workers as f64).max(0.0) } else { 0.0 };
        let divisor = workers as f64 + leader;
        let run = (*base).path.total_cost - (*base).path.startup_cost;
        (*cpath).path.parallel_aware = true;
        (*cpath).path.parallel_safe = true;
        (*cpath).path.parallel_workers = workers;
        (*cpath).path.rows = ((*base).path.rows / divisor).max(1.0);
        (*cpath).path.total_cost = (*base).path.startup_cost + run / divisor;
        (*cpath).path.pathkeys = std::ptr::null_mut();
        (*cpath).flags = pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
        Some(cpath)
    }
}

/// Matches the equivalence-class member that is meta column `*arg` of `rel`.
#[pg_guard]
unsafe extern "C-unwind" fn is_meta_member(
    _root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    _ec: *mut pg_sys::EquivalenceClass,
    em: *mut pg_sys::EquivalenceMember,
    arg: *mut std::ffi::c_void,
) -> bool {
    unsafe {
        let e = strip((*em).em_expr as *mut pg_sys::Node);
        let attnum = *(arg as *const i16);
        (*e).type_ == pg_sys::NodeTag::T_Var && {
            let v = e as *mut pg_sys::Var;
            (*v).varno as u32 == (*rel).relid && (*v).varlevelsup == 0 && (*v).varattno == attnum
        }
    }
}

/// For joins on a meta column (`t.meta = o.x`), paths parameterized by the
/// other side: a nested loop then reads, per outer row, only that series'
/// buckets through the series index (the join clause becomes a parameter the
/// scan evaluates at each rescan).
unsafe fn parameterized_paths(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    unparameterized: *mut pg_sys::CustomPath,
    relid: pg_sys::Oid,
    reached: f64,
) -> Vec<*mut pg_sys::CustomPath> {
    unsafe {
        let mut out = Vec::new();
        let Some(config) = config::lookup(relid) else { return out };
        // The series index serves the leading meta column.
        let Some(&attnum) = config.meta_attnums.first() else { return out };
        let mut arg = attnum;
        let clauses = pg_sys::generate_implied_equalities_for_column(
            root,
            rel,
            Some(is_meta_member),
            &mut arg as *mut i16 as *mut std::ffi::c_void,
            (*rel).lateral_referencers,
        );
        let mut done: Vec<pg_sys::Relids> = Vec::new();
        for ri in list_ptrs(clauses) {
            let ri = ri as *mut pg_sys::RestrictInfo;
            let outer = pg_sys::bms_difference((*ri).clause_relids, (*rel).relids);
            if pg_sys::bms_num_members(outer) == 0 || done.iter().any(|&d| pg_sys::bms_equal(d, outer)) {
                continue;
            }
            done.push(outer);
            let ppi = pg_sys::get_baserel_parampathinfo(root, rel, outer);
            if ppi.is_null() {
                continue;
            }
            let mut reaching = pg_sys::list_copy((*rel).baserestrictinfo);
            reaching = pg_sys::list_concat(reaching, (*ppi).ppi_clauses);
            let fraction = pg_sys::clauselist_selectivity(root, reaching, (*rel).relid as i32, pg_sys::JoinType::JOIN_INNER, std::ptr::null_mut())
                .clamp(1e-6, 1.0);
            let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
            *cpath = *unparameterized;
            (*cpath).path.param_info = ppi;
            (*cpath).path.rows = (*ppi).ppi_rows;
            (*cpath).path.pathkeys = std::ptr::null_mut();
            // Per loop: the index descent and the series' share of the buckets.
            let full = (*unparameterized).path.total_cost / reached;
            (*cpath).path.total_cost = (*cpath).path.startup_cost + 2.0 * pg_sys::random_page_cost + full * fraction;
            out.push(cpath);
        }
        out
    }
}

/// The share of the table's rows that its meta and time conditions select
/// (what the store's indexes and bucket headers narrow a scan to), by the
/// planner's own selectivity estimates.
unsafe fn reached_fraction(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, relid: pg_sys::Oid, with_time: bool) -> f64 {
    unsafe {
        let Some(config) = config::lookup(relid) else { return 1.0 };
        let mut reaching: *mut pg_sys::List = std::ptr::null_mut();
        for ri in list_ptrs((*rel).baserestrictinfo) {
            let clause = (*(ri as *mut pg_sys::RestrictInfo)).clause as *mut pg_sys::Node;
            let args = match (*clause).type_ {
                pg_sys::NodeTag::T_OpExpr => (*(clause as *mut pg_sys::OpExpr)).args,
                pg_sys::NodeTag::T_ScalarArrayOpExpr => (*(clause as *mut pg_sys::ScalarArrayOpExpr)).args,
                _ => continue,
            };
            let args = list_ptrs(args);
            let column = |n: *mut pg_sys::Node| {
                let n = strip(n);
                if (*n).type_ != pg_sys::NodeTag::T_Var {
                    return false;
                }
                let v = n as *mut pg_sys::Var;
                (*v).varno as u32 == (*rel).relid
                    && (*v).varlevelsup == 0
                    && ((with_time && (*v).varattno == config.time_attnum) || config.meta_attnums.contains(&(*v).varattno))
            };
            if args.len() == 2 {
                let (a, b) = (args[0] as *mut pg_sys::Node, args[1] as *mut pg_sys::Node);
                if (column(a) && is_pseudo_constant(b)) || (column(b) && is_pseudo_constant(a)) {
                    reaching = pg_sys::lappend(reaching, ri);
                }
            }
        }
        if reaching.is_null() {
            return 1.0;
        }
        pg_sys::clauselist_selectivity(root, reaching, (*rel).relid as i32, pg_sys::JoinType::JOIN_INNER, std::ptr::null_mut())
    }
}

/// Whether a pathkey sorts descending.
unsafe fn pathkey_descending(pk: *mut pg_sys::PathKey) -> bool {
    #[cfg(feature = "pg15")]
    unsafe {
        (*pk).pk_strategy == pg_sys::BTGreaterStrategyNumber as i32
    }
    #[cfg(not(feature = "pg15"))]
    unsafe {
        (*pk).pk_cmptype == pg_sys::CompareType::COMPARE_GT
    }
}

/// When the query wants rows ordered by time (or by a time bucket, as
/// `GROUP BY date_trunc('minute', time) ORDER BY 1 DESC LIMIT 5` does),
/// a path that yields them in that order (`am::ordered`), cheap to
/// start: a limit above it reads only the newest (or oldest) windows.
unsafe fn time_order_path(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, unordered: *mut pg_sys::CustomPath) -> Option<*mut pg_sys::CustomPath> {
    unsafe {
        let &first = list_ptrs((*root).query_pathkeys).first()?;
        let pk = first as *mut pg_sys::PathKey;
        let rte = *(*root).simple_rte_array.add((*rel).relid as usize);
        let config = config::lookup((*rte).relid)?;
        let ec = (*pk).pk_eclass;
        let members: Vec<*mut pg_sys::Node> =
            list_ptrs((*ec).ec_members).iter().map(|m| (*(*m as *mut pg_sys::EquivalenceMember)).em_expr as *mut pg_sys::Node).collect();
        // The time, or a function of it alone that never decreases as time grows:
        // rows in time order are also in its order.
        let by_time = members.iter().any(|&e| crate::scan::time_bucket::monotone_in_time(e, (*rel).relid, config.time_attnum));
        if !by_time || (*ec).ec_has_volatile {
            return None;
        }
        // Only the built-in order of timestamps (not ORDER BY ... USING another operator).
        const DATETIME_BTREE_FAMILY: u32 = 434;
        if (*pk).pk_opfamily != pg_sys::Oid::from(DATETIME_BTREE_FAMILY) {
            return None;
        }
        let descending = pathkey_descending(pk);
        // Then the meta columns, in the query's order for rows of equal time
        // (`ORDER BY time, host`): the merge breaks ties by meta order.
        let query_pathkeys = list_ptrs((*root).query_pathkeys);
        let mut pathkeys = pg_sys::lappend(std::ptr::null_mut(), pk as *mut std::ffi::c_void);
        let mut meta_ties = None;
        // Only after the time itself: rows merged by time break ties of equal
        // times, not of equal time buckets (date_trunc('minute', time), host).
        let bare_time = members.iter().any(|&e| crate::scan::time_bucket::is_time_var(strip(e), (*rel).relid, config.time_attnum));
        if let Some(&second) = query_pathkeys.get(1).filter(|_| bare_time) {
            let meta_descending = pathkey_descending(second as *mut pg_sys::PathKey);
            for (i, &attnum) in config.meta_attnums.iter().enumerate() {
                let Some(&wanted) = query_pathkeys.get(1 + i) else { break };
                match meta_pathkey(root, rel, (*rte).relid, attnum, meta_descending) {
                    Some(ours) if std::ptr::eq(ours, wanted as *mut pg_sys::PathKey) => {
                        pathkeys = pg_sys::lappend(pathkeys, wanted);
                        meta_ties = Some(meta_descending);
                    }
                    _ => break,
                }
            }
        }
        // Starting costs one window of the table's history.
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let windows = crate::scan::access::window_count(store, &config).unwrap_or(1.0).max(1.0);
        let store_buckets = (*(*store).rd_rel).reltuples as f64;
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        // The merge keeps about one window's buckets of the series the query
        // reads open; each row costs a heap step among them and a slot filled
        // from scratch.
        let buckets = if store_buckets > 0.0 { store_buckets } else { (*rel).tuples / 500.0 };
        let series_share = reached_fraction(root, rel, (*rte).relid, false).clamp(1e-6, 1.0);
        let open = (buckets / windows * series_share).max(2.0);
        let per_row = 2.0 * pg_sys::cpu_tuple_cost + 2.0 * pg_sys::cpu_operator_cost * open.log2();
        let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
        *cpath = *unordered;
        let run = (*unordered).path.total_cost - (*unordered).path.startup_cost;
        (*cpath).path.startup_cost = (*unordered).path.startup_cost + run / windows;
        (*cpath).path.total_cost = (*unordered).path.startup_cost + run + (*rel).rows * per_row;
        (*cpath).path.pathkeys = pathkeys;
        (*cpath).flags = pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
        let mut private = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeInteger(MODE_TIME_ORDER) as *mut std::ffi::c_void);
        let arg = descending as i32 | meta_ties.map_or(0, |d| 2 | (d as i32) << 2);
        private = pg_sys::lappend(private, pg_sys::makeInteger(arg) as *mut std::ffi::c_void);
        (*cpath).custom_private = private;
        Some(cpath)
    }
}

/// The pathkey ordering `rel`'s column `attnum` by its type's default btree
/// order (ascending NULLS LAST, or descending NULLS FIRST), if the query has
/// a use for it (an equivalence class exists).
unsafe fn meta_pathkey(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, relid: pg_sys::Oid, attnum: i16, descending: bool) -> Option<*mut pg_sys::PathKey> {
    unsafe {
        let r = pg_sys::RelationIdGetRelation(relid);
        let att = *crate::pg::relation::tuple_desc_attr((*r).rd_att, attnum as usize - 1);
        pg_sys::RelationClose(r);
        let cache = pg_sys::lookup_type_cache(att.atttypid, (pg_sys::TYPECACHE_LT_OPR | pg_sys::TYPECACHE_GT_OPR) as i32);
        let opno = if descending { (*cache).gt_opr } else { (*cache).lt_opr };
        if opno == pg_sys::InvalidOid {
            return None;
        }
        let var = pg_sys::makeVar((*rel).relid as i32, attnum, att.atttypid, att.atttypmod, att.attcollation, 0);
        #[cfg(feature = "pg15")]
        let pk = pg_sys::build_expression_pathkey(root, var as *mut pg_sys::Expr, std::ptr::null_mut(), opno, (*rel).relids, false);
        #[cfg(not(feature = "pg15"))]
        let pk = pg_sys::build_expression_pathkey(root, var as *mut pg_sys::Expr, opno, (*rel).relids, false);
        list_ptrs(pk).first().map(|&p| p as *mut pg_sys::PathKey)
    }
}

/// Paths that yield rows in (meta..., time) order, ascending and descending,
/// for merge joins on the meta columns and `ORDER BY meta..., time`: a walk
/// of the series index merging each series' buckets in time order
/// (`OrderedScan::begin_series_order`). Their pathkeys are the longest
/// prefix of (meta..., time) the query has a use for; meta columns a
/// condition pins to a constant add nothing to the order and are left out.
unsafe fn series_order_paths(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, unordered: *mut pg_sys::CustomPath) -> Vec<*mut pg_sys::CustomPath> {
    unsafe {
        let rte = *(*root).simple_rte_array.add((*rel).relid as usize);
        let Some(config) = config::lookup((*rte).relid) else { return Vec::new() };
        if config.meta_attnums.is_empty() || (*rte).inh {
            return Vec::new();
        }
        let mut out = Vec::new();
        for descending in [false, true] {
            let mut pathkeys: *mut pg_sys::List = std::ptr::null_mut();
            for (i, &attnum) in config.meta_attnums.iter().enumerate() {
                // No use for this column's order: the prefix so far is what counts.
                let Some(pk) = meta_pathkey(root, rel, (*rte).relid, attnum, descending) else { break };
                // A column pinned to a constant adds nothing to the order.
                if !(*(*pk).pk_eclass).ec_has_const {
                    pathkeys = pg_sys::lappend(pathkeys, pk as *mut std::ffi::c_void);
                }
                if i + 1 == config.meta_attnums.len() {
                    if let Some(tk) = meta_pathkey(root, rel, (*rte).relid, config.time_attnum, descending) {
                        pathkeys = pg_sys::lappend(pathkeys, tk as *mut std::ffi::c_void);
                    }
                }
            }
            if pathkeys.is_null() {
                continue;
            }
            let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
            *cpath = *unordered;
            // Every header of the store is read; each row costs a heap step among
            // the few open buckets of its series.
            let per_row = 2.0 * pg_sys::cpu_tuple_cost + 4.0 * pg_sys::cpu_operator_cost;
            (*cpath).path.total_cost = (*unordered).path.total_cost + (*rel).rows * per_row;
            (*cpath).path.pathkeys = pathkeys;
            (*cpath).flags = pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
            let mut private = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeInteger(MODE_SERIES_ORDER) as *mut std::ffi::c_void);
            private = pg_sys::lappend(private, pg_sys::makeInteger(descending as i32) as *mut std::ffi::c_void);
            (*cpath).custom_private = private;
            out.push(cpath);
        }
        out
    }
}

/// Attribute numbers (1-based) the query reads, or None when it needs the whole row.
unsafe fn needed_attnums(rel: *mut pg_sys::RelOptInfo, clauses: *mut pg_sys::List) -> Option<Vec<i32>> {
    let used = unsafe { referenced_attnums(&[(*(*rel).reltarget).exprs as *mut pg_sys::Node, clauses as *mut pg_sys::Node], (*rel).relid) };
    if used.contains(&0) {
        return None;
    }
    Some(used.into_iter().filter(|&a| a > 0).collect())
}

#[pg_guard]
unsafe extern "C-unwind" fn plan_custom_path(
    _root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    best_path: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    clauses: *mut pg_sys::List,
    _custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    unsafe {
        let quals = pg_sys::extract_actual_clauses(clauses, false);
        let needed = needed_attnums(rel, quals).unwrap_or_else(|| vec![-1]);
        let from_path: Vec<i32> = list_ptrs((*best_path).custom_private).iter().map(|p| (*(*p as *mut pg_sys::Integer)).ival).collect();
        let (mode, arg) = match from_path.as_slice() {
            [mode, arg] => (*mode, *arg),
            _ => (MODE_SCAN, 0),
        };
        new_custom_scan((*rel).relid, tlist, quals, (*best_path).flags, private_list(mode, arg, &needed))
    }
}

/// A TsBucketScan plan node over range-table entry `scanrelid`.
unsafe fn new_custom_scan(scanrelid: u32, tlist: *mut pg_sys::List, quals: *mut pg_sys::List, flags: u32, private: *mut pg_sys::List) -> *mut pg_sys::Plan {
    unsafe {
        let cscan = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
        (*cscan).scan.plan.type_ = pg_sys::NodeTag::T_CustomScan;
        (*cscan).scan.plan.targetlist = tlist;
        (*cscan).scan.plan.qual = quals;
        (*cscan).scan.scanrelid = scanrelid;
        (*cscan).flags = flags;
        (*cscan).methods = &methods().plan;
        (*cscan).custom_private = private;
        cscan as *mut pg_sys::Plan
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn plan_last_point_path(
    root: *mut pg_sys::PlannerInfo,
    _rel: *mut pg_sys::RelOptInfo,
    best_path: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    _clauses: *mut pg_sys::List,
    _custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    unsafe {
        let rti = (*(list_ptrs((*best_path).custom_private)[0] as *mut pg_sys::Integer)).ival as u32;
        let base = *(*root).simple_rel_array.add(rti as usize);
        // The path sits above the scan: it applies the table's conditions itself,
        // constant ones included (no gating Result is made for it).
        let quals = pg_sys::list_concat(
            pg_sys::extract_actual_clauses((*base).baserestrictinfo, false),
            pg_sys::extract_actual_clauses((*base).baserestrictinfo, true),
        );
        let used = referenced_attnums(&[tlist as *mut pg_sys::Node, quals as *mut pg_sys::Node], rti);
        let needed: Vec<i32> = if used.contains(&0) { vec![-1] } else { used.into_iter().filter(|&a| a > 0).collect() };
        new_custom_scan(rti, tlist, quals, 0, private_list(MODE_LAST_POINT, 0, &needed))
    }
}

struct PathMethods {
    scan: pg_sys::CustomPathMethods,
    last_point: pg_sys::CustomPathMethods,
}
// SAFETY: backends are single-threaded; the tables are immutable once built.
unsafe impl Sync for PathMethods {}
// SAFETY: as above.
unsafe impl Send for PathMethods {}
static PATH_METHODS: std::sync::OnceLock<PathMethods> = std::sync::OnceLock::new();

fn path_methods() -> &'static PathMethods {
    PATH_METHODS.get_or_init(|| PathMethods {
        scan: pg_sys::CustomPathMethods { CustomName: c"TsBucketScan".as_ptr(), PlanCustomPath: Some(plan_custom_path), ..Default::default() },
        last_point: pg_sys::CustomPathMethods {
            CustomName: c"TsBucketScan".as_ptr(),
            PlanCustomPath: Some(plan_last_point_path),
            ..Default::default()
        },
    })
}

/// A last-point path of range-table entry `rti` for the DISTINCT stage
/// (`rewrite::last_point` decided it answers the query): as many rows as the
/// planner expects distinct series, each an index descent and the decoding
/// of (at most) one bucket.
///
/// # Safety
/// The planner's relations of create_upper_paths, during planning.
pub unsafe fn last_point_path(
    root: *mut pg_sys::PlannerInfo,
    input_rel: *mut pg_sys::RelOptInfo,
    output_rel: *mut pg_sys::RelOptInfo,
    rti: u32,
) -> *mut pg_sys::CustomPath {
    unsafe {
        let series = list_ptrs((*output_rel).pathlist)
            .iter()
            .map(|p| (*(*p as *mut pg_sys::Path)).rows)
            .fold(f64::INFINITY, f64::min)
            .clamp(1.0, (*input_rel).rows.max(1.0));
        let rows_per_series = ((*input_rel).rows / series).clamp(1.0, 1000.0);
        let per_series = 2.0 * pg_sys::random_page_cost + rows_per_series * (pg_sys::cpu_tuple_cost + pg_sys::cpu_operator_cost);
        let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
        (*cpath).path.type_ = pg_sys::NodeTag::T_CustomPath;
        (*cpath).path.pathtype = pg_sys::NodeTag::T_CustomScan;
        (*cpath).path.parent = output_rel;
        (*cpath).path.pathtarget = (*input_rel).reltarget;
        (*cpath).path.rows = series;
        (*cpath).path.startup_cost = per_series;
        (*cpath).path.total_cost = per_series * series;
        (*cpath).path.pathkeys = (*root).sort_pathkeys;
        (*cpath).flags = pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
        (*cpath).custom_private = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeInteger(rti as i32) as *mut std::ffi::c_void);
        (*cpath).methods = &path_methods().last_point;
        cpath
    }
}
