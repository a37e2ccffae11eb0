//! The TsBucketScan custom scan. It replaces the sequential scan of a
//! tsbucket table and knows what a table AM scan cannot: which columns the
//! query reads (only those are decoded) and which conditions on the time and
//! meta columns rule whole buckets out (checked against each bucket's
//! min/max time and meta values before its payload is even read). EXPLAIN
//! shows both, and with ANALYZE how many buckets were read and skipped.

use crate::am::access::{self, Access, MetaCondition};
use crate::am::aggscan::{self, AggCounters, AggregatingScan};
use crate::am::lastpoint::LastPointScan;
use crate::am::ordered::OrderedScan;
use crate::am::scan::{self, Bound, BoundRange, Prune, ScanOptions};
use tsbucket_format::ColumnKind;
use crate::catalog::config;
use crate::catalog::config::Config;
use crate::pg::nodes::{is_pseudo_constant, list_ptrs, referenced_attnums, strip};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::rc::Rc;
use std::sync::OnceLock;

struct Methods {
    path: pg_sys::CustomPathMethods,
    last_point_path: pg_sys::CustomPathMethods,
    plan: pg_sys::CustomScanMethods,
    exec: pg_sys::CustomExecMethods,
}
// Backends are single-threaded; the tables are immutable once built.
unsafe impl Sync for Methods {}
unsafe impl Send for Methods {}
static METHODS: OnceLock<Methods> = OnceLock::new();

fn methods() -> &'static Methods {
    METHODS.get_or_init(|| Methods {
        path: pg_sys::CustomPathMethods {
            CustomName: c"TsBucketScan".as_ptr(),
            PlanCustomPath: Some(plan_custom_path),
            ..Default::default()
        },
        last_point_path: pg_sys::CustomPathMethods {
            CustomName: c"TsBucketScan".as_ptr(),
            PlanCustomPath: Some(plan_last_point_path),
            ..Default::default()
        },
        plan: pg_sys::CustomScanMethods { CustomName: c"TsBucketScan".as_ptr(), CreateCustomScanState: Some(create_state) },
        exec: pg_sys::CustomExecMethods {
            CustomName: c"TsBucketScan".as_ptr(),
            BeginCustomScan: Some(begin),
            ExecCustomScan: Some(exec),
            EndCustomScan: Some(end),
            ReScanCustomScan: Some(rescan),
            ExplainCustomScan: Some(explain),
            EstimateDSMCustomScan: Some(estimate_dsm),
            InitializeDSMCustomScan: Some(initialize_dsm),
            ReInitializeDSMCustomScan: Some(reinitialize_dsm),
            InitializeWorkerCustomScan: Some(initialize_worker),
            ShutdownCustomScan: Some(shutdown),
            ..Default::default()
        },
    })
}

static mut PREV_SET_REL_PATHLIST: pg_sys::set_rel_pathlist_hook_type = None;
static mut PREV_CREATE_UPPER_PATHS: pg_sys::create_upper_paths_hook_type = None;
static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

unsafe extern "C-unwind" {
    /// optimizer/planner.c, called without pgrx's error trap so that planning
    /// errors reach the client with every field (see hooks.rs).
    #[link_name = "standard_planner"]
    fn standard_planner_raw(
        parse: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: i32,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
}

// No #[pg_guard]: nothing here needs dropping when planning raises an error;
// the Rust that runs after it is guarded.
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: i32,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the arguments are the planner's, passed on unchanged.
    unsafe {
        let stmt = match PREV_PLANNER {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => standard_planner_raw(parse, query_string, cursor_options, bound_params),
        };
        rewrite_plan(stmt);
        stmt
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rewrite_plan(stmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: a plan just made by the planner.
    unsafe { crate::partial_agg::rewrite(stmt) }
}

/// What a TsBucketScan plan does (the first element of custom_private).
const MODE_SCAN: i32 = 0;
/// The last row of each series (DISTINCT ON (meta...) ORDER BY meta..., time DESC).
const MODE_LAST_POINT: i32 = 1;
/// Rows in time order across buckets (the second element: 1 = descending).
const MODE_TIME_ORDER: i32 = 2;
/// Partial aggregates per bucket and group (`partial_agg`); the second
/// element is the number of group keys leading custom_scan_tlist, the
/// aggregates follow; the quals are in custom_exprs.
pub const MODE_PARTIAL_AGG: i32 = 3;
/// Rows in (meta..., time) order (the second element: 1 = all descending).
const MODE_SERIES_ORDER: i32 = 4;

/// Whether `cscan` is a TsBucketScan.
pub fn is_ours(cscan: *mut pg_sys::CustomScan) -> bool {
    // SAFETY: the caller passes a CustomScan node.
    unsafe { std::ptr::eq((*cscan).methods, &methods().plan) }
}

pub fn init() {
    unsafe {
        pg_sys::RegisterCustomScanMethods(&methods().plan);
        PREV_SET_REL_PATHLIST = pg_sys::set_rel_pathlist_hook;
        pg_sys::set_rel_pathlist_hook = Some(set_rel_pathlist);
        PREV_CREATE_UPPER_PATHS = pg_sys::create_upper_paths_hook;
        pg_sys::create_upper_paths_hook = Some(create_upper_paths);
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
    }
}

/// Built-in comparison operators of the time column's type, with their btree
/// strategies (1 <, 2 <=, 3 =, 4 >=, 5 >).
const TIMESTAMPTZ_OPS: [(u32, i32); 5] = [(1322, 1), (1323, 2), (1320, 3), (1325, 4), (1324, 5)];
const TIMESTAMP_OPS: [(u32, i32); 5] = [(2062, 1), (2063, 2), (2060, 3), (2065, 4), (2064, 5)];

#[pg_guard]
unsafe extern "C-unwind" fn set_rel_pathlist(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rti: pg_sys::Index,
    rte: *mut pg_sys::RangeTblEntry,
) {
    unsafe {
        if let Some(prev) = PREV_SET_REL_PATHLIST {
            prev(root, rel, rti, rte);
        }
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
            (*cpath).methods = &methods().path;
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

/// `time <op> constant` (or `constant <op> time`) on `relid`'s time column: the
/// comparison as `time <strategy> value` (btree strategies 1 <, 2 <=, 3 =, 4 >=, 5 >).
pub(crate) unsafe fn time_bound(clause: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> Option<(i32, i64)> {
    unsafe {
        if (*clause).type_ != pg_sys::NodeTag::T_OpExpr {
            return None;
        }
        let e = clause as *mut pg_sys::OpExpr;
        let args = list_ptrs((*e).args);
        if args.len() != 2 {
            return None;
        }
        let (a, b) = (strip(args[0] as *mut pg_sys::Node), strip(args[1] as *mut pg_sys::Node));
        let is_time = |n: *mut pg_sys::Node| {
            (*n).type_ == pg_sys::NodeTag::T_Var && {
                let v = n as *mut pg_sys::Var;
                (*v).varno as u32 == relid && (*v).varlevelsup == 0 && (*v).varattno == time_attnum
            }
        };
        let constant = |n: *mut pg_sys::Node| {
            ((*n).type_ == pg_sys::NodeTag::T_Const && !(*(n as *mut pg_sys::Const)).constisnull)
                .then(|| (*(n as *mut pg_sys::Const)).constvalue.value() as i64)
        };
        let strategy = TIMESTAMPTZ_OPS.iter().chain(TIMESTAMP_OPS.iter()).find(|(o, _)| pg_sys::Oid::from(*o) == (*e).opno)?.1;
        if is_time(a) {
            Some((strategy, constant(b)?))
        } else if is_time(b) {
            Some((6 - strategy, constant(a)?))
        } else {
            None
        }
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
        let by_time = members.iter().any(|&e| crate::partial_agg::monotone_in_time(e, (*rel).relid, config.time_attnum));
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
        let bare_time = members.iter().any(|&e| crate::partial_agg::is_time_var(strip(e), (*rel).relid, config.time_attnum));
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
        let windows = access::window_count(store, &config).unwrap_or(1.0).max(1.0);
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

/// custom_private: the mode, its argument, then the attnums to decode ([-1] = all).
unsafe fn private_list(mode: i32, arg: i32, needed: &[i32]) -> *mut pg_sys::List {
    unsafe {
        let mut private = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeInteger(mode) as *mut std::ffi::c_void);
        private = pg_sys::lappend(private, pg_sys::makeInteger(arg) as *mut std::ffi::c_void);
        for &a in needed {
            private = pg_sys::lappend(private, pg_sys::makeInteger(a) as *mut std::ffi::c_void);
        }
        private
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn create_upper_paths(
    root: *mut pg_sys::PlannerInfo,
    stage: pg_sys::UpperRelationKind::Type,
    input_rel: *mut pg_sys::RelOptInfo,
    output_rel: *mut pg_sys::RelOptInfo,
    extra: *mut std::ffi::c_void,
) {
    unsafe {
        if let Some(prev) = PREV_CREATE_UPPER_PATHS {
            prev(root, stage, input_rel, output_rel, extra);
        }
        if stage == pg_sys::UpperRelationKind::UPPERREL_DISTINCT {
            add_last_point_path(root, input_rel, output_rel);
        }
        if stage == pg_sys::UpperRelationKind::UPPERREL_GROUP_AGG {
            crate::grouping::add_time_bucket_hashagg(root, input_rel, output_rel, extra as *mut pg_sys::GroupPathExtraData);
        }
    }
}

/// `SELECT DISTINCT ON (m1, ..., mn) ... FROM t [WHERE ...] ORDER BY m1, ...,
/// mn, time DESC` over one time-series table whose meta columns are exactly
/// m1..mn: offers a path that reads only each series' newest buckets
/// (`am::lastpoint`) and yields its rows already distinct and in that order.
/// The meta columns must sort by their type's default btree order (ascending,
/// NULLs last, the column's collation), as the store's series index does.
/// Not under row-level security (its quals would have to run first).
unsafe fn add_last_point_path(root: *mut pg_sys::PlannerInfo, input_rel: *mut pg_sys::RelOptInfo, output_rel: *mut pg_sys::RelOptInfo) {
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
        let index = access::series_index(store, &config);
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
        // As many rows as the planner expects distinct series; each costs an
        // index descent and the decoding of (at most) one bucket.
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
        (*cpath).methods = &methods().last_point_path;
        pg_sys::add_path(output_rel, cpath as *mut pg_sys::Path);
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

/// A pruning condition found in the plan's quals, evaluated when the scan starts.
struct Candidate {
    clause: *mut pg_sys::Node,
    target: Target,
    op: pg_sys::Oid,
    collation: pg_sys::Oid,
    var_first: bool,
    /// The pseudo-constant side, ready to evaluate.
    value: *mut pg_sys::ExprState,
    value_type: pg_sys::Oid,
    array: bool,
}

#[derive(Clone, Copy)]
enum Target {
    /// The time column, with the operator's btree strategy.
    Time { strategy: i32 },
    Meta(usize),
    /// A measurement column with per-bucket min/max: attnum, the compared
    /// value's storage kind, btree strategy (1 <, 2 <=, 3 =, 4 >=, 5 >) and
    /// the value's typlen.
    Column { attnum: u16, kind: ColumnKind, strategy: i32, typlen: i16 },
}

#[repr(C)]
struct TsBucketScanState {
    css: pg_sys::CustomScanState,
    /// In the executor's query context: freed with it on ERROR.
    state: *mut crate::pg::memory::Owned<ExecState>,
}

struct ExecState {
    needed: Option<Vec<bool>>,
    candidates: Vec<Candidate>,
    scan: pg_sys::TableScanDesc,
    totals: scan::ScanCounters,
    /// How the last scan reached the store (EXPLAIN ANALYZE).
    access: Option<Access>,
    /// MODE_LAST_POINT: one row per series, from `last_point` (begun lazily).
    last_point_mode: bool,
    last_point: Option<LastPointScan>,
    /// MODE_TIME_ORDER: Some(descending); rows from `ordered` (begun lazily).
    time_order: Option<bool>,
    /// MODE_TIME_ORDER with rows of equal time in meta order: Some(meta descending).
    meta_ties: Option<bool>,
    /// MODE_SERIES_ORDER: Some(descending); rows from `ordered` too.
    series_order: Option<bool>,
    ordered: Option<OrderedScan>,
    /// MODE_PARTIAL_AGG: what to compute; partial rows from `aggregating`.
    partial_agg: Option<PartialAggExec>,
    aggregating: Option<AggregatingScan>,
    agg_totals: AggCounters,
    /// A parallel scan's shared state (set when the Gather's DSM is made, or
    /// in a worker): the counters every participant adds to, and the store's
    /// parallel heap scan. None: this participant reads every bucket.
    shared: Option<*mut SharedScan>,
    /// This participant's share of a parallel scan was read (until a rescan).
    parallel_done: bool,
    /// Quals evaluated on the decoded arrays (`am::vector_filter`), and their clauses.
    vector_quals: Vec<(*mut std::ffi::c_void, crate::am::vector_filter::VectorPlan)>,
    /// What one scan (until a rescan) allocates: evaluated conditions, the
    /// scans' own state. Reset when the scan finishes, so that rescans (a
    /// nested loop's inner side) do not accumulate it in the query's context.
    scan_cxt: pg_sys::MemoryContext,
    /// Plain and ordered scans of a read-only statement: the quals pruning and
    /// the row filters do not decide (`residual`), run by ExecScan instead of
    /// every qual (`all`) when every pruning value is known.
    scan_quals: Option<aggscan::Quals>,
}

struct PartialAggExec {
    keys: Rc<Vec<aggscan::Key>>,
    aggs: Rc<Vec<crate::partial_agg::AggPlan>>,
    quals: aggscan::Quals,
    /// The quals, for EXPLAIN.
    qual_list: *mut pg_sys::List,
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    unsafe {
        let node = pg_sys::palloc0(std::mem::size_of::<TsBucketScanState>()) as *mut TsBucketScanState;
        (*node).css.ss.ps.type_ = pg_sys::NodeTag::T_CustomScanState;
        (*node).css.flags = (*cscan).flags;
        (*node).css.methods = &methods().exec;
        // Rows of the table carry their bucket version (system columns).
        #[cfg(not(feature = "pg15"))]
        {
            (*node).css.slotOps = crate::store::slot::ops();
        }
        node as *mut pg_sys::Node
    }
}

impl ExecState {
    /// A finished scan's counters: into the shared ones when the scan is
    /// parallel (the leader collects them at shutdown), else its own.
    fn add_counters(&mut self, scan: scan::ScanCounters, agg: AggCounters) {
        match self.shared {
            // SAFETY: the DSM segment outlives every participant's scan.
            Some(shared) => unsafe { (*shared).add(scan, agg) },
            None => {
                self.totals += scan;
                self.agg_totals.rows_aggregated += agg.rows_aggregated;
                self.agg_totals.partial_rows += agg.partial_rows;
                self.agg_totals.rows_removed_by_filter += agg.rows_removed_by_filter;
            }
        }
    }
}

/// The shared memory of a parallel TsBucketScan: counters, then (aligned)
/// the store's ParallelTableScanDesc.
#[repr(C)]
struct SharedScan {
    counters: [std::sync::atomic::AtomicU64; 9],
}

impl SharedScan {
    const HEADER: usize = (std::mem::size_of::<SharedScan>() + 15) & !15;

    unsafe fn store_scan(shared: *mut SharedScan) -> pg_sys::ParallelTableScanDesc {
        unsafe { (shared as *mut u8).add(Self::HEADER) as pg_sys::ParallelTableScanDesc }
    }

    fn add(&self, scan: scan::ScanCounters, agg: AggCounters) {
        use std::sync::atomic::Ordering::Relaxed;
        let values = [
            scan.buckets_read,
            scan.buckets_skipped,
            scan.rows_filtered,
            scan.buckets_from_headers,
            scan.payload_bytes,
            agg.rows_aggregated,
            agg.partial_rows,
            agg.rows_removed_by_filter,
            scan.decoded_bytes,
        ];
        for (c, v) in self.counters.iter().zip(values) {
            c.fetch_add(v, Relaxed);
        }
    }

    fn take(&self) -> (scan::ScanCounters, AggCounters) {
        use std::sync::atomic::Ordering::Relaxed;
        let v: Vec<u64> = self.counters.iter().map(|c| c.swap(0, Relaxed)).collect();
        let scan = scan::ScanCounters { buckets_read: v[0], buckets_skipped: v[1], rows_filtered: v[2], buckets_from_headers: v[3], payload_bytes: v[4], decoded_bytes: v[8] };
        let agg = AggCounters { rows_aggregated: v[5], partial_rows: v[6], rows_removed_by_filter: v[7] };
        (scan, agg)
    }
}

/// The store relation of the scan's table (opened and closed again: the
/// scan itself holds a lock on it while it runs).
unsafe fn with_store<R>(node: *mut pg_sys::CustomScanState, f: impl FnOnce(pg_sys::Relation) -> R) -> R {
    unsafe {
        let config = config::require((*(*node).ss.ss_currentRelation).rd_id);
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let r = f(store);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        r
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn estimate_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext) -> pg_sys::Size {
    unsafe {
        let snapshot = (*(*node).ss.ps.state).es_snapshot;
        SharedScan::HEADER + with_store(node, |store| pg_sys::table_parallelscan_estimate(store, snapshot))
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn initialize_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext, coordinate: *mut std::ffi::c_void) {
    unsafe {
        let shared = coordinate as *mut SharedScan;
        std::ptr::write_bytes(shared as *mut u8, 0, SharedScan::HEADER);
        let snapshot = (*(*node).ss.ps.state).es_snapshot;
        with_store(node, |store| pg_sys::table_parallelscan_initialize(store, SharedScan::store_scan(shared), snapshot));
        exec_state(node).shared = Some(shared);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn reinitialize_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext, coordinate: *mut std::ffi::c_void) {
    unsafe {
        let shared = coordinate as *mut SharedScan;
        with_store(node, |store| pg_sys::table_parallelscan_reinitialize(store, SharedScan::store_scan(shared)));
        exec_state(node).shared = Some(shared);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn initialize_worker(node: *mut pg_sys::CustomScanState, _toc: *mut pg_sys::shm_toc, coordinate: *mut std::ffi::c_void) {
    unsafe { exec_state(node).shared = Some(coordinate as *mut SharedScan) }
}

/// Before the parallel query's shared memory goes: the leader collects every
/// participant's counters. A worker adds its own when its share runs out; when
/// a LIMIT shuts the plan down early, workers still scanning are not counted.
#[pg_guard]
unsafe extern "C-unwind" fn shutdown(node: *mut pg_sys::CustomScanState) {
    unsafe {
        if pg_sys::ParallelWorkerNumber >= 0 {
            // A worker's counters reach the shared ones when its scan ends.
            return;
        }
        if let Some(shared) = exec_state(node).shared {
            // The leader's own scan, if still open, counts into them too.
            finish_scan(node);
            let st = exec_state(node);
            st.shared = None;
            let (scan, agg) = (*shared).take();
            st.add_counters(scan, agg);
        }
    }
}

unsafe fn exec_state<'a>(node: *mut pg_sys::CustomScanState) -> &'a mut ExecState {
    unsafe { crate::pg::memory::owned_mut((*(node as *mut TsBucketScanState)).state) }
}

unsafe fn find_candidates(node: *mut pg_sys::CustomScanState, config: &Config, scanrelid: u32, quals: *mut pg_sys::List) -> Vec<Candidate> {
    unsafe {
        let time_type = {
            let rel = (*node).ss.ss_currentRelation;
            (*crate::pg::relation::tuple_desc_attr((*rel).rd_att, config.time_attnum as usize - 1)).atttypid
        };
        let rls_active = pg_sys::check_enable_rls((*(*node).ss.ss_currentRelation).rd_id, pg_sys::InvalidOid, true)
            == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32;
        let mut out = Vec::new();
        for q in list_ptrs(quals) {
            let clause = q as *mut pg_sys::Node;
            let (args, op, collation, array) = match (*clause).type_ {
                pg_sys::NodeTag::T_OpExpr => {
                    let e = clause as *mut pg_sys::OpExpr;
                    ((*e).args, (*e).opno, (*e).inputcollid, false)
                }
                pg_sys::NodeTag::T_ScalarArrayOpExpr => {
                    let e = clause as *mut pg_sys::ScalarArrayOpExpr;
                    if !(*e).useOr {
                        continue;
                    }
                    ((*e).args, (*e).opno, (*e).inputcollid, true)
                }
                _ => continue,
            };
            let args = list_ptrs(args);
            if args.len() != 2 {
                continue;
            }
            let (a, b) = (strip(args[0] as *mut pg_sys::Node), strip(args[1] as *mut pg_sys::Node));
            let is_our_var = |n: *mut pg_sys::Node| {
                (*n).type_ == pg_sys::NodeTag::T_Var && {
                    let v = n as *mut pg_sys::Var;
                    (*v).varno as u32 == scanrelid && (*v).varlevelsup == 0
                }
            };
            let (var, other, var_first) = if is_our_var(a) && is_pseudo_constant(b) {
                (a as *mut pg_sys::Var, args[1] as *mut pg_sys::Node, true)
            } else if !array && is_our_var(b) && is_pseudo_constant(a) {
                (b as *mut pg_sys::Var, args[0] as *mut pg_sys::Node, false)
            } else {
                continue;
            };
            let attnum = (*var).varattno;
            let value_type = pg_sys::exprType(other);
            let target = if attnum == config.time_attnum {
                let ops: &[(u32, i32)] = if time_type == pg_sys::TIMESTAMPTZOID { &TIMESTAMPTZ_OPS } else { &TIMESTAMP_OPS };
                let strategy = ops.iter().find(|(o, _)| pg_sys::Oid::from(*o) == op).map(|(_, s)| *s);
                match strategy {
                    Some(strategy) if !array && value_type == time_type => Target::Time { strategy },
                    _ => continue,
                }
            } else if let Some(m) = config.meta_attnums.iter().position(|&m| m == attnum) {
                // Only the equality of the meta type's default btree family (what the
                // store's index orders by), and, where row-level security applies, only
                // a leakproof one: pruning sees every bucket's meta value before the
                // policies filter rows.
                let rel = (*node).ss.ss_currentRelation;
                let meta_type = (*crate::pg::relation::tuple_desc_attr((*rel).rd_att, attnum as usize - 1)).atttypid;
                let cache = pg_sys::lookup_type_cache(meta_type, pg_sys::TYPECACHE_BTREE_OPFAMILY as i32);
                let family = if cache.is_null() { pg_sys::InvalidOid } else { (*cache).btree_opf };
                if family == pg_sys::InvalidOid
                    || pg_sys::get_op_opfamily_strategy(op, family) != pg_sys::BTEqualStrategyNumber as i32
                    || (rls_active && !pg_sys::get_func_leakproof(pg_sys::get_opcode(op)))
                {
                    continue;
                }
                Target::Meta(m)
            } else if let Some(target) = column_target(node, attnum, op, value_type, array, var_first) {
                target
            } else {
                continue;
            };
            let value = pg_sys::ExecInitExpr(other as *mut pg_sys::Expr, &mut (*node).ss.ps);
            out.push(Candidate { clause, target, op, collation, var_first, value, value_type, array });
        }
        out
    }
}

/// A comparison of a measurement column whose buckets keep min/max statistics:
/// an integer-like or float column compared with a value of its own type by an
/// operator of its type's default btree family.
unsafe fn column_target(
    node: *mut pg_sys::CustomScanState,
    attnum: i16,
    op: pg_sys::Oid,
    value_type: pg_sys::Oid,
    array: bool,
    var_first: bool,
) -> Option<Target> {
    unsafe {
        if array || attnum <= 0 {
            return None;
        }
        let rel = (*node).ss.ss_currentRelation;
        // The same comparisons the vector filters evaluate on the arrays. That
        // gives the strategy of `column <op> value`; a Target keeps the
        // operator's own (evaluate() turns it round by side).
        let (strategy, kind, typlen) = crate::am::vector_filter::comparison(rel, attnum as usize - 1, op, value_type, var_first)?;
        let strategy = if var_first { strategy } else { 6 - strategy };
        Some(Target::Column { attnum: attnum as u16, kind, strategy, typlen })
    }
}

/// Evaluates the candidates' constant sides (parameters are known only now).
/// The flag says whether every value was usable (not NULL, nor a NaN bound),
/// so that pruning and the row filters decide their quals exactly.
unsafe fn evaluate(node: *mut pg_sys::CustomScanState, candidates: &[Candidate]) -> (Vec<Prune>, bool) {
    unsafe {
        let mut exact = true;
        let econtext = (*node).ss.ps.ps_ExprContext;
        let mut time = BoundRange::default();
        let mut out = Vec::new();
        let mut columns: std::collections::BTreeMap<u16, BoundRange> = Default::default();
        // The scan's context: the values outlive the per-tuple context, which
        // the executor resets row by row, for as long as the scan runs.
        let scan_cxt = exec_state(node).scan_cxt;
        for c in candidates {
            let mut isnull = false;
            let value = pg_sys::ExecEvalExprSwitchContext(c.value, econtext, &mut isnull);
            if isnull {
                exact = false;
                continue;
            }
            match c.target {
                Target::Time { strategy } => {
                    // Normalise `v <op> time` to `time <op'> v`.
                    let strategy = if c.var_first { strategy } else { 6 - strategy };
                    time.narrow(strategy, Bound::Int(value.value() as i64));
                }
                Target::Column { attnum, kind, strategy, typlen } => {
                    let v = scan::datum_bound(value, kind, typlen);
                    // A NaN constant: leave it to the quals (NaN sorts above everything).
                    if matches!(v, Bound::Float(f) if f.is_nan()) {
                        exact = false;
                        continue;
                    }
                    let strategy = if c.var_first { strategy } else { 6 - strategy };
                    columns.entry(attnum).or_default().narrow(strategy, v);
                }
                Target::Meta(meta) => {
                    let old = pg_sys::MemoryContextSwitchTo(scan_cxt);
                    let values = if c.array {
                        // A copy in the query context: the evaluated array lives in the
                        // per-tuple context, which the executor resets row by row, and its
                        // elements are read for as long as the scan runs.
                        let array = pg_sys::pg_detoast_datum_copy(value.cast_mut_ptr()) as *mut pg_sys::ArrayType;
                        crate::pg::datum::array_elements(array).into_iter().flatten().collect()
                    } else {
                        let (mut len, mut byval) = (0i16, false);
                        pg_sys::get_typlenbyval(c.value_type, &mut len, &mut byval);
                        vec![crate::pg::datum::copy_datum(value, byval, len)]
                    };
                    pg_sys::MemoryContextSwitchTo(old);
                    out.push(Prune::Meta { meta, op: c.op, collation: c.collation, meta_first: c.var_first, values });
                }
            }
        }
        if time != BoundRange::default() {
            out.push(Prune::Time(time));
        }
        out.extend(columns.into_iter().map(|(attnum, range)| Prune::Column { attnum, range }));
        (out, exact)
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, eflags: i32) {
    unsafe {
        let rel = (*node).ss.ss_currentRelation;
        // PostgreSQL 15 gives every custom scan a virtual scan slot (16 on take
        // css.slotOps): ours is a virtual slot that also knows its row's bucket
        // version, so the plan's expressions, compiled for a virtual slot, read
        // it alike, and system columns from it.
        #[cfg(feature = "pg15")]
        if (*((*node).ss.ps.plan as *mut pg_sys::CustomScan)).custom_scan_tlist.is_null() {
            let tupdesc = (*(*node).ss.ss_ScanTupleSlot).tts_tupleDescriptor;
            (*node).ss.ss_ScanTupleSlot = pg_sys::ExecAllocTableSlot(&mut (*estate).es_tupleTable, tupdesc, crate::store::slot::ops());
        }
        #[cfg(not(feature = "pg15"))]
        let _ = estate;
        let config = config::require((*rel).rd_id);
        let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
        let natts = (*(*rel).rd_att).natts as usize;
        let private: Vec<i32> = list_ptrs((*cscan).custom_private).iter().map(|p| (*(*p as *mut pg_sys::Integer)).ival).collect();
        let [mode, arg, attnums @ ..] = private.as_slice() else { panic!("custom_private starts with the mode and its argument") };
        let last_point_mode = *mode == MODE_LAST_POINT;
        let time_order = (*mode == MODE_TIME_ORDER).then_some(*arg & 1 == 1);
        let meta_ties = (*mode == MODE_TIME_ORDER && *arg & 2 != 0).then_some(*arg & 4 != 0);
        let series_order = (*mode == MODE_SERIES_ORDER).then_some(*arg == 1);
        let needed = if attnums.contains(&-1) {
            None
        } else {
            let mut mask = vec![false; natts];
            attnums.iter().filter(|&&a| a >= 1 && (a as usize) <= natts).for_each(|&a| mask[a as usize - 1] = true);
            if last_point_mode || time_order.is_some() || series_order.is_some() {
                // Rows are ranked by time even when the query does not read it.
                mask[config.time_attnum as usize - 1] = true;
            }
            Some(mask)
        };
        let quals = if *mode == MODE_PARTIAL_AGG { (*cscan).custom_exprs } else { (*(*node).ss.ps.plan).qual };
        let candidates = find_candidates(node, &config, (*cscan).scan.scanrelid, quals);
        // Other quals the scan can evaluate on the decoded arrays (plain scans and
        // aggregation; ordered and last-point scans leave them to the executor).
        let vector_quals: Vec<(*mut std::ffi::c_void, crate::am::vector_filter::VectorPlan)> = if matches!(*mode, MODE_SCAN | MODE_PARTIAL_AGG) {
            list_ptrs(quals)
                .into_iter()
                .filter(|q| !candidates.iter().any(|c| std::ptr::eq(c.clause as *mut std::ffi::c_void, *q)))
                .filter_map(|q| {
                    let plan = crate::am::vector_filter::plan(q as *mut pg_sys::Node, rel, (*cscan).scan.scanrelid, &config.meta_attnums, &mut (*node).ss.ps)?;
                    Some((q, plan))
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut decided: Vec<*mut std::ffi::c_void> = candidates.iter().map(|c| c.clause as *mut std::ffi::c_void).collect();
        decided.extend(vector_quals.iter().map(|(q, _)| *q));
        let needed = match needed {
            // The filters' columns are decoded even when the query reads them nowhere else.
            Some(mut mask) => {
                for (_, v) in &vector_quals {
                    v.attrs().into_iter().for_each(|a| mask[a] = true);
                }
                Some(mask)
            }
            None => None,
        };
        let partial_agg = (*mode == MODE_PARTIAL_AGG).then(|| partial_agg_exec(node, &config, cscan, *arg as usize, &decided));
        // Not where a row may be rechecked after a concurrent update (EvalPlanQual
        // re-runs the quals on the new version, which pruning never saw).
        let command = (*(*(*node).ss.ps.state).es_plannedstmt).commandType;
        let read_only = matches!(command, pg_sys::CmdType::CMD_SELECT | pg_sys::CmdType::CMD_INSERT);
        let scan_quals = (read_only
            && matches!(*mode, MODE_SCAN | MODE_TIME_ORDER | MODE_SERIES_ORDER)
            && !decided.is_empty()
            && !pg_sys::contain_subplans(quals as *mut pg_sys::Node))
            .then(|| aggscan::Quals { all: (*node).ss.ps.qual, residual: residual_qual(node, quals, &decided) });
        let state = ExecState {
            needed,
            candidates,
            scan: std::ptr::null_mut(),
            totals: Default::default(),
            access: None,
            last_point_mode,
            last_point: None,
            time_order,
            meta_ties,
            series_order,
            ordered: None,
            partial_agg,
            aggregating: None,
            agg_totals: AggCounters::default(),
            shared: None,
            parallel_done: false,
            vector_quals,
            scan_cxt: pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"TsBucketScan per scan".as_ptr(), 0, 1024, 8 * 1024),
            scan_quals,
        };
        // A parallel plan's workers read the store as the leader wrote it: rows
        // this transaction buffered go there before they start (and before the
        // executor enters parallel mode, which forbids writes).
        if (*(*(*node).ss.ps.state).es_plannedstmt).parallelModeNeeded && eflags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as i32 == 0 {
            scan::write_buffered_rows(rel, (*(*node).ss.ps.state).es_snapshot);
        }
        (*(node as *mut TsBucketScanState)).state = crate::pg::memory::own_in_context(pg_sys::CurrentMemoryContext, state);
    }
}

/// What the in-scan aggregation computes, from the plan `partial_agg` rewrote.
unsafe fn partial_agg_exec(node: *mut pg_sys::CustomScanState, config: &Config, cscan: *mut pg_sys::CustomScan, nkeys: usize, decided: &[*mut std::ffi::c_void]) -> PartialAggExec {
    unsafe {
        let rel = (*node).ss.ss_currentRelation;
        let scanrelid = (*cscan).scan.scanrelid;
        let ps = &mut (*node).ss.ps as *mut pg_sys::PlanState;
        let mut keys = Vec::new();
        let mut aggs = Vec::new();
        for (i, te) in list_ptrs((*cscan).custom_scan_tlist).into_iter().enumerate() {
            let e = (*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
            let broken = || -> ! { panic!("TsBucketScan: a partial aggregation plan this build cannot run (column {})", i + 1) };
            if i < nkeys {
                let plan = crate::partial_agg::classify_key(e, config, scanrelid).unwrap_or_else(|| broken());
                let expr = if plan == crate::partial_agg::KeyPlan::TimeBucket { pg_sys::ExecInitExpr(e as *mut pg_sys::Expr, ps) } else { std::ptr::null_mut() };
                keys.push(aggscan::Key { plan, expr });
            } else {
                let aggref = e as *mut pg_sys::Aggref;
                let args: Vec<*mut pg_sys::Node> = list_ptrs((*aggref).args).into_iter().map(|te| strip((*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node)).collect();
                aggs.push(crate::partial_agg::classify_aggref(aggref, &args, config, rel, scanrelid).unwrap_or_else(|| broken()));
            }
        }
        let qual_list = (*cscan).custom_exprs;
        let quals = if pg_sys::contain_subplans(qual_list as *mut pg_sys::Node) {
            // Compiled once (a SubPlan registers with the node when compiled): every qual per row.
            let all = pg_sys::ExecInitQual(qual_list, ps);
            aggscan::Quals { all, residual: all }
        } else {
            aggscan::Quals { all: pg_sys::ExecInitQual(qual_list, ps), residual: residual_qual(node, qual_list, decided) }
        };
        PartialAggExec { keys: Rc::new(keys), aggs: Rc::new(aggs), quals, qual_list }
    }
}

/// The quals the candidates do not decide (those they decide, when their
/// values are known, need no row-by-row check), ready to run.
unsafe fn residual_qual(node: *mut pg_sys::CustomScanState, quals: *mut pg_sys::List, decided: &[*mut std::ffi::c_void]) -> *mut pg_sys::ExprState {
    unsafe {
        let mut residual: *mut pg_sys::List = std::ptr::null_mut();
        for q in list_ptrs(quals) {
            if !decided.iter().any(|d| std::ptr::eq(*d, q)) {
                residual = pg_sys::lappend(residual, q);
            }
        }
        pg_sys::ExecInitQual(residual, &mut (*node).ss.ps)
    }
}

unsafe fn start_scan(node: *mut pg_sys::CustomScanState) {
    unsafe {
        let old = pg_sys::MemoryContextSwitchTo(exec_state(node).scan_cxt);
        start_scan_in_context(node);
        pg_sys::MemoryContextSwitchTo(old);
    }
}

unsafe fn start_scan_in_context(node: *mut pg_sys::CustomScanState) {
    unsafe {
        let st = exec_state(node);
        let rel = (*node).ss.ss_currentRelation;
        let (prune, exact) = evaluate(node, &st.candidates);
        let estate = (*node).ss.ps.state;
        let vector_filter = (!st.vector_quals.is_empty()).then(|| {
            let econtext = (*node).ss.ps.ps_ExprContext;
            let tupdesc = (*rel).rd_att;
            let bound: Vec<_> = st.vector_quals.iter().map(|(_, p)| p.bind(econtext, tupdesc)).collect();
            std::rc::Rc::new(crate::am::vector_filter::VectorFilter::all(bound))
        });
        if let Some(q) = &st.scan_quals {
            (*node).ss.ps.qual = if exact { q.residual } else { q.all };
        }
        if let Some(pa) = &st.partial_agg {
            let options = ScanOptions { needed: st.needed.clone(), prune, store_parallel: st.shared.map(|s| SharedScan::store_scan(s)), vector_filter };
            let econtext = (*node).ss.ps.ps_ExprContext;
            st.aggregating = Some(AggregatingScan::begin(rel, (*estate).es_snapshot, options, pa.keys.clone(), pa.aggs.clone(), &pa.quals, exact, econtext));
            return;
        }
        if st.last_point_mode {
            let config = config::require((*rel).rd_id);
            let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
            let index = access::require_series_index(store, &config);
            pg_sys::table_close(store, pg_sys::NoLock as i32);
            st.last_point = Some(LastPointScan::begin(rel, (*estate).es_snapshot, index, st.needed.clone(), prune));
            return;
        }
        if let Some(descending) = st.time_order {
            st.ordered = Some(OrderedScan::begin(rel, (*estate).es_snapshot, descending, st.meta_ties, st.needed.clone(), prune));
            return;
        }
        if let Some(descending) = st.series_order {
            st.ordered = Some(OrderedScan::begin_series_order(rel, (*estate).es_snapshot, descending, st.needed.clone(), prune));
            return;
        }
        let options = ScanOptions { needed: st.needed.clone(), prune, store_parallel: st.shared.map(|s| SharedScan::store_scan(s)), vector_filter };
        st.scan = scan::begin_with(rel, (*estate).es_snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), 0, options);
    }
}

unsafe fn finish_scan(node: *mut pg_sys::CustomScanState) {
    unsafe {
        let st = exec_state(node);
        // ExecScan reads the qual before fetching the first row of a new scan,
        // which is when the residual one may replace it again (start_scan).
        if let Some(q) = &st.scan_quals {
            (*node).ss.ps.qual = q.all;
        }
        if let Some(lp) = st.last_point.take() {
            st.totals += lp.counters;
            lp.end();
        }
        if let Some(o) = st.ordered.take() {
            st.totals += o.counters;
            o.end();
        }
        if let Some(a) = st.aggregating.take() {
            st.access = Some(a.access_taken());
            let (scan, agg) = a.end();
            st.add_counters(scan, agg);
        }
        if !st.scan.is_null() {
            st.add_counters(scan::counters(st.scan), AggCounters::default());
            st.access = Some(scan::access_taken(st.scan));
            scan::end(st.scan);
            st.scan = std::ptr::null_mut();
        }
        // Every scan above is ended: what they and the conditions allocated goes.
        pg_sys::MemoryContextReset(st.scan_cxt);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    unsafe {
        let node = ss as *mut pg_sys::CustomScanState;
        let st = exec_state(node);
        let slot = (*ss).ss_ScanTupleSlot;
        if st.parallel_done {
            pg_sys::ExecClearTuple(slot);
            return slot;
        }
        if st.scan.is_null() && st.last_point.is_none() && st.ordered.is_none() && st.aggregating.is_none() {
            start_scan(node);
        }
        if let Some(a) = exec_state(node).aggregating.as_mut() {
            a.next(slot);
            parallel_scan_ended(node, slot);
            return slot;
        }
        if let Some(o) = exec_state(node).ordered.as_mut() {
            o.next(slot);
            return slot;
        }
        if let Some(lp) = exec_state(node).last_point.as_mut() {
            lp.next(slot, (*ss).ps.qual, (*ss).ps.ps_ExprContext);
            return slot;
        }
        let direction = (*(*ss).ps.state).es_direction;
        scan::getnextslot(exec_state(node).scan, direction, slot);
        parallel_scan_ended(node, slot);
        slot
    }
}

/// A parallel participant whose share ran out adds its counters to the
/// shared ones now: the leader collects them when the plan shuts down, which
/// may be before this worker's executor ends.
unsafe fn parallel_scan_ended(node: *mut pg_sys::CustomScanState, slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let empty = (*slot).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0;
        if empty && exec_state(node).shared.is_some() {
            finish_scan(node);
            exec_state(node).parallel_done = true;
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn recheck(_ss: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    true
}

unsafe extern "C-unwind" {
    /// executor/execScan.c, called directly rather than through pgrx's wrapper:
    /// an error raised while evaluating the query's quals or projection (a
    /// division by zero, a PL/pgSQL function's error with its CONTEXT) then
    /// reaches the client with every field, as from a heap scan; pgrx's
    /// wrapper re-raises it with only some of them.
    #[link_name = "ExecScan"]
    fn exec_scan(node: *mut pg_sys::ScanState, access: pg_sys::ExecScanAccessMtd, recheck: pg_sys::ExecScanRecheckMtd) -> *mut pg_sys::TupleTableSlot;
}

// No #[pg_guard]: this frame holds nothing to drop, so an error may pass
// through it as it passes through Postgres's own executor nodes (`next`, the
// Rust that runs inside, is guarded).
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: node is our CustomScanState, begun by `begin`.
    unsafe { exec_scan(&mut (*node).ss, Some(next), Some(recheck)) }
}

#[pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    unsafe {
        finish_scan(node);
        drop(crate::pg::memory::take_owned((*(node as *mut TsBucketScanState)).state));
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    // Parameters may have changed: start over, re-evaluating the conditions.
    unsafe {
        finish_scan(node);
        exec_state(node).parallel_done = false;
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn explain(node: *mut pg_sys::CustomScanState, ancestors: *mut pg_sys::List, es: *mut pg_sys::ExplainState) {
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
        let access = access::choose(store, &config, &metas, has_time);
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

