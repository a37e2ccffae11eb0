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
    // SAFETY: `rte` is set_rel_pathlist's RangeTblEntry of `rel`, valid for this planning call (this function's contract).
    let (rtekind, relkind, relid) = unsafe { ((*rte).rtekind, (*rte).relkind, (*rte).relid) };
    if rtekind != pg_sys::RTEKind::RTE_RELATION
        || relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
        || !crate::catalog::config::is_tsbucket_table(relid)
        || config::lookup(relid).is_none()
    {
        return;
    }
    // One custom path per sequential scan path (parameterizations included),
    // cheaper than it: it decodes fewer columns, and reads only the buckets
    // its meta and time conditions reach (by the share of rows they select).
    // SAFETY: `root` and `rel` are set_rel_pathlist's PlannerInfo and base RelOptInfo, as this function's contract requires.
    let reached = unsafe { reached_fraction(root, rel, relid, true) }.clamp(1e-4, 1.0);
    // Every path is made before any is added: add_path frees the paths it
    // rejects or that a new one beats, seq scans and our own included.
    let mut paths: Vec<*mut pg_sys::CustomPath> = Vec::new();
    // SAFETY: `rel.pathlist` is the List of Paths the planner built for `rel` before calling the set_rel_pathlist hook.
    let pathlist = unsafe { list_ptrs((*rel).pathlist) };
    for p in pathlist {
        let seq = p as *mut pg_sys::Path;
        // SAFETY: `seq` is an element of `rel.pathlist`, a Path node in planner memory that add_path has not freed yet.
        let (pathtype, unparameterized) = unsafe { ((*seq).pathtype, (*seq).param_info.is_null()) };
        if pathtype != pg_sys::NodeTag::T_SeqScan {
            continue;
        }
        // SAFETY: palloc0 in the planner's CurrentMemoryContext gives a zeroed CustomPath that lives as long as the
        // planner's paths; `seq` is the SeqScan Path it copies, still in `rel.pathlist`.
        let cpath = unsafe {
            let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
            (*cpath).path = *seq;
            (*cpath).path.type_ = pg_sys::NodeTag::T_CustomPath;
            (*cpath).path.pathtype = pg_sys::NodeTag::T_CustomScan;
            (*cpath).path.total_cost = (*seq).startup_cost + ((*seq).total_cost - (*seq).startup_cost) * 0.5 * reached;
            (*cpath).flags = pg_sys::CUSTOMPATH_SUPPORT_BACKWARD_SCAN | pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
            (*cpath).methods = &path_methods().scan;
            cpath
        };
        paths.push(cpath);
        if unparameterized {
            // SAFETY: `root`/`rel` are the planner's (this function's contract); `cpath` is the unparameterized CustomPath
            // palloc'd just above, not yet given to add_path.
            let (by_time, by_series, parameterized) = unsafe {
                (time_order_path(root, rel, cpath), series_order_paths(root, rel, cpath), parameterized_paths(root, rel, cpath, relid, reached))
            };
            paths.extend(by_time);
            paths.extend(by_series);
            paths.extend(parameterized);
        }
    }
    // SAFETY: `root`, `rel`, `rte` are set_rel_pathlist's arguments; `paths` holds the CustomPaths palloc'd above for `rel`.
    let partial = unsafe { parallel_path(root, rel, rte, &paths, reached) };
    for cpath in paths {
        // SAFETY: add_path takes over `cpath`, a CustomPath of `rel` palloc'd in this planning call (it may pfree it).
        unsafe { pg_sys::add_path(rel, cpath as *mut pg_sys::Path) };
    }
    // Postgres's own partial paths would scan the user relation, which is empty.
    // SAFETY: `rel` is the RelOptInfo being planned; add_partial_path takes over `p`, the parallel CustomPath built for it.
    unsafe {
        (*rel).partial_pathlist = std::ptr::null_mut();
        if let Some(p) = partial {
            pg_sys::add_partial_path(rel, p as *mut pg_sys::Path);
        }
    }
}

/// A parallel-aware TsBucketScan for Gather: the participants share out the
/// store's heap blocks (and so its buckets); partial aggregates of each
/// combine above. Sharing out blocks, it reads every bucket's header (the
/// store's main fork) and the payloads (TOAST) of the `reached` share its
/// conditions keep; the plain scan reaches its buckets through an index and
/// reads that share of both. Workers as Postgres would give a heap scan of
/// the pages read (as for an index scan, by the pages it fetches), up to
/// max_parallel_workers_per_gather; the cost, the plain path's scaled by the
/// pages each reads, split among the participants.
unsafe fn parallel_path(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rte: *mut pg_sys::RangeTblEntry,
    paths: &[*mut pg_sys::CustomPath],
    reached: f64,
) -> Option<*mut pg_sys::CustomPath> {
    // SAFETY: `rel` is add_paths' RelOptInfo under planning; max_parallel_workers_per_gather is a GUC variable this
    // single-threaded backend alone writes, read by value.
    let (consider_parallel, reloptkind, max_workers) =
        unsafe { ((*rel).consider_parallel, (*rel).reloptkind, pg_sys::max_parallel_workers_per_gather) };
    if !consider_parallel || reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL || max_workers <= 0 {
        return None;
    }
    // SAFETY: each element of `paths` is a CustomPath add_paths palloc'd and filled during this planning call.
    let base = *paths.iter().find(|&&p| unsafe { (*p).path.param_info.is_null() && (*p).path.pathkeys.is_null() && (*p).custom_private.is_null() })?;
    // SAFETY: `rte` is add_paths' range-table entry of `rel`, valid while planning.
    let relid = unsafe { (*rte).relid };
    let config = config::lookup(relid)?;
    // SAFETY: the store `config.store_relid` is opened under AccessShareLock (kept until the transaction ends) and its
    // `rd_rel` pg_class row is read before table_close releases the relcache reference.
    let (headers, toast) = unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM) as f64;
        let toast = (*(*store).rd_rel).reltoastrelid;
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        (blocks, toast)
    };
    let payloads = if toast != pg_sys::InvalidOid {
        // SAFETY: `toast` is the store's TOAST relation (its reltoastrelid), open under AccessShareLock from
        // table_open to table_close while its main fork is measured.
        unsafe {
            let t = pg_sys::table_open(toast, pg_sys::AccessShareLock as i32);
            let n = pg_sys::RelationGetNumberOfBlocksInFork(t, pg_sys::ForkNumber::MAIN_FORKNUM) as f64;
            pg_sys::table_close(t, pg_sys::NoLock as i32);
            n
        }
    } else {
        0.0
    };
    let blocks = headers + payloads * reached;
    // How many more pages the block-sharing scan reads than the plain one (1 when the conditions keep every bucket).
    let read_ratio = if headers + payloads > 0.0 { blocks / ((headers + payloads) * reached) } else { 1.0 };
    // SAFETY: `rel.rel_parallel_workers` is the table's reloption copied by get_relation_info; min_parallel_table_scan_size
    // and max_parallel_workers_per_gather are this backend's GUC variables, read by value.
    let (rel_workers, min_scan_size, max_workers) =
        unsafe { ((*rel).rel_parallel_workers, pg_sys::min_parallel_table_scan_size, pg_sys::max_parallel_workers_per_gather) };
    // Relation options win, as for a heap (a parallel_workers set on the table).
    let workers = if rel_workers >= 0 {
        rel_workers
    } else {
        let threshold = (min_scan_size as f64).max(1.0);
        if blocks < threshold {
            0
        } else {
            1 + (blocks / threshold).log(3.0).floor() as i32
        }
    }
    .min(max_workers);
    if workers <= 0 {
        return None;
    }
    let _ = root;
    // SAFETY: palloc0 in the planner's CurrentMemoryContext makes the parallel CustomPath; `base` is the plain one of
    // add_paths it copies whole.
    let cpath = unsafe {
        let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
        *cpath = *base;
        cpath
    };
    // The leader helps less the more workers there are, as in costsize.c.
    // SAFETY: parallel_leader_participation is a boolean GUC of this backend, copied by value.
    let leader = if unsafe { pg_sys::parallel_leader_participation } { (1.0 - 0.3 * workers as f64).max(0.0) } else { 0.0 };
    let divisor = workers as f64 + leader;
    // SAFETY: `base` is add_paths' plain CustomPath, still alive: nothing is given to add_path before parallel_path returns.
    let (startup_cost, total_cost, rows) = unsafe { ((*base).path.startup_cost, (*base).path.total_cost, (*base).path.rows) };
    let run = (total_cost - startup_cost) * read_ratio;
    // SAFETY: `cpath` is the CustomPath palloc'd above, written only here before add_partial_path takes it.
    unsafe {
        (*cpath).path.parallel_aware = true;
        (*cpath).path.parallel_safe = true;
        (*cpath).path.parallel_workers = workers;
        (*cpath).path.rows = (rows / divisor).max(1.0);
        (*cpath).path.total_cost = startup_cost + run / divisor;
        (*cpath).path.pathkeys = std::ptr::null_mut();
        (*cpath).flags = pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
    }
    Some(cpath)
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
    // SAFETY: `em` is the EquivalenceMember generate_implied_equalities_for_column is offering; its em_expr is a planner
    // expression node, and strip follows only its RelabelType chain.
    let e = unsafe { strip((*em).em_expr as *mut pg_sys::Node) };
    // SAFETY: `arg` is parameterized_paths' `&mut arg`, an i16 on its stack that outlives the
    // generate_implied_equalities_for_column call running this callback.
    let attnum = unsafe { *(arg as *const i16) };
    // SAFETY: `e` is that member's expression node; `rel` is the RelOptInfo the callback was asked about.
    let (tag, relid) = unsafe { ((*e).type_, (*rel).relid) };
    if tag != pg_sys::NodeTag::T_Var {
        return false;
    }
    // SAFETY: the member expression `e` is tagged T_Var, so it is a Var node of the planner's tree.
    let v = unsafe { &*(e as *const pg_sys::Var) };
    v.varno as u32 == relid && v.varlevelsup == 0 && v.varattno == attnum
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
    let mut out = Vec::new();
    let Some(config) = config::lookup(relid) else { return out };
    // The series index serves the leading meta column.
    let Some(&attnum) = config.meta_attnums.first() else { return out };
    let mut arg = attnum;
    // SAFETY: `root`/`rel` are add_paths' planner state; is_meta_member reads `arg`, a local i16 that outlives this call,
    // and the new RestrictInfos are allocated in the planner's memory context.
    let clauses = unsafe {
        pg_sys::generate_implied_equalities_for_column(
            root,
            rel,
            Some(is_meta_member),
            &mut arg as *mut i16 as *mut std::ffi::c_void,
            (*rel).lateral_referencers,
        )
    };
    let mut done: Vec<pg_sys::Relids> = Vec::new();
    // SAFETY: `clauses` is the List of RestrictInfos generate_implied_equalities_for_column just built.
    let clauses = unsafe { list_ptrs(clauses) };
    for ri in clauses {
        let ri = ri as *mut pg_sys::RestrictInfo;
        // SAFETY: `ri` is one of those implied RestrictInfos; `rel.relids` is `rel`'s own Bitmapset; bms_difference
        // allocates the result in the planner's memory context.
        let outer = unsafe { pg_sys::bms_difference((*ri).clause_relids, (*rel).relids) };
        // SAFETY: `outer` and each entry of `done` are Bitmapsets bms_difference returned in this loop; bms_num_members
        // and bms_equal only read them.
        if unsafe { pg_sys::bms_num_members(outer) == 0 || done.iter().any(|&d| pg_sys::bms_equal(d, outer)) } {
            continue;
        }
        done.push(outer);
        // SAFETY: get_baserel_parampathinfo finds or makes, in planner memory, the ParamPathInfo of base rel `rel`
        // required by the outer relids `outer`.
        let ppi = unsafe { pg_sys::get_baserel_parampathinfo(root, rel, outer) };
        if ppi.is_null() {
            continue;
        }
        // SAFETY: `ppi` is non-null and owned by `rel.ppilist`; list_copy copies `rel.baserestrictinfo` first, so
        // list_concat appends the join clauses to the copy, never to the planner's own list.
        let fraction = unsafe {
            let mut reaching = pg_sys::list_copy((*rel).baserestrictinfo);
            reaching = pg_sys::list_concat(reaching, (*ppi).ppi_clauses);
            pg_sys::clauselist_selectivity(root, reaching, (*rel).relid as i32, pg_sys::JoinType::JOIN_INNER, std::ptr::null_mut())
        }
        .clamp(1e-6, 1.0);
        // SAFETY: palloc0 in the planner's CurrentMemoryContext makes the parameterized CustomPath, a copy of
        // `unparameterized` (add_paths' path, not yet added); `ppi` is the ParamPathInfo found above; random_page_cost is a
        // GUC read by value.
        let cpath = unsafe {
            let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
            *cpath = *unparameterized;
            (*cpath).path.param_info = ppi;
            (*cpath).path.rows = (*ppi).ppi_rows;
            (*cpath).path.pathkeys = std::ptr::null_mut();
            // Per loop: the index descent and the series' share of the buckets.
            let full = (*unparameterized).path.total_cost / reached;
            (*cpath).path.total_cost = (*cpath).path.startup_cost + 2.0 * pg_sys::random_page_cost + full * fraction;
            cpath
        };
        out.push(cpath);
    }
    out
}

/// The share of the table's rows that its meta and time conditions select
/// (what the store's indexes and bucket headers narrow a scan to), by the
/// planner's own selectivity estimates.
unsafe fn reached_fraction(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, relid: pg_sys::Oid, with_time: bool) -> f64 {
    let Some(config) = config::lookup(relid) else { return 1.0 };
    let mut reaching: *mut pg_sys::List = std::ptr::null_mut();
    // SAFETY: `rel.baserestrictinfo` is the planner's List of RestrictInfos of the base relation `rel` being planned.
    let restrictions = unsafe { list_ptrs((*rel).baserestrictinfo) };
    for ri in restrictions {
        // SAFETY: `ri` is a RestrictInfo of `rel.baserestrictinfo`; its clause is a node of the planner's expression tree.
        let (clause, tag) = unsafe {
            let clause = (*(ri as *mut pg_sys::RestrictInfo)).clause as *mut pg_sys::Node;
            (clause, (*clause).type_)
        };
        let args = match tag {
            // SAFETY: the restriction clause `clause` is tagged T_OpExpr, so it is an OpExpr with an argument List.
            pg_sys::NodeTag::T_OpExpr => unsafe { (*(clause as *mut pg_sys::OpExpr)).args },
            // SAFETY: the restriction clause `clause` is tagged T_ScalarArrayOpExpr, so that is its struct.
            pg_sys::NodeTag::T_ScalarArrayOpExpr => unsafe { (*(clause as *mut pg_sys::ScalarArrayOpExpr)).args },
            _ => continue,
        };
        // SAFETY: `args` is the argument List of `ri`'s operator clause, in planner memory.
        let args = unsafe { list_ptrs(args) };
        let column = |n: *mut pg_sys::Node| {
            // SAFETY: `n` is an argument node of `ri`'s clause; strip only walks its RelabelType chain.
            let n = unsafe { strip(n) };
            // SAFETY: `n` is that argument's stripped node; `rel` is reached_fraction's RelOptInfo under planning.
            let (tag, rel_index) = unsafe { ((*n).type_, (*rel).relid) };
            if tag != pg_sys::NodeTag::T_Var {
                return false;
            }
            // SAFETY: the clause argument `n` is tagged T_Var, so it points to a Var.
            let v = unsafe { &*(n as *const pg_sys::Var) };
            v.varno as u32 == rel_index
                && v.varlevelsup == 0
                && ((with_time && v.varattno == config.time_attnum) || config.meta_attnums.contains(&v.varattno))
        };
        if args.len() == 2 {
            let (a, b) = (args[0] as *mut pg_sys::Node, args[1] as *mut pg_sys::Node);
            // SAFETY: `a` and `b` are the two argument expressions of `ri`'s clause; is_pseudo_constant only walks them.
            let reaches = unsafe { (column(a) && is_pseudo_constant(b)) || (column(b) && is_pseudo_constant(a)) };
            if reaches {
                // SAFETY: lappend adds the RestrictInfo `ri` to `reaching`, a List this function grows in planner memory.
                reaching = unsafe { pg_sys::lappend(reaching, ri) };
            }
        }
    }
    if reaching.is_null() {
        return 1.0;
    }
    // SAFETY: `reaching` lists RestrictInfos of `rel` (built above); clauselist_selectivity reads them with `root`'s statistics.
    unsafe { pg_sys::clauselist_selectivity(root, reaching, (*rel).relid as i32, pg_sys::JoinType::JOIN_INNER, std::ptr::null_mut()) }
}

/// Whether a pathkey sorts descending.
unsafe fn pathkey_descending(pk: *mut pg_sys::PathKey) -> bool {
    #[cfg(feature = "pg15")]
    // SAFETY: `pk` is a canonical PathKey of the query's pathkeys (callers pass `root.query_pathkeys` elements).
    unsafe {
        (*pk).pk_strategy == pg_sys::BTGreaterStrategyNumber as i32
    }
    #[cfg(not(feature = "pg15"))]
    // SAFETY: `pk` is a canonical PathKey of the query's pathkeys; PG 18 keeps its direction in pk_cmptype.
    unsafe {
        (*pk).pk_cmptype == pg_sys::CompareType::COMPARE_GT
    }
}

/// When the query wants rows ordered by time (or by a time bucket, as
/// `GROUP BY date_trunc('minute', time) ORDER BY 1 DESC LIMIT 5` does),
/// a path that yields them in that order (`scan::ordered`), cheap to
/// start: a limit above it reads only the newest (or oldest) windows.
unsafe fn time_order_path(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, unordered: *mut pg_sys::CustomPath) -> Option<*mut pg_sys::CustomPath> {
    // SAFETY: `root.query_pathkeys` is the planner's List of PathKeys wanted for this query (add_paths' PlannerInfo).
    let &first = unsafe { list_ptrs((*root).query_pathkeys) }.first()?;
    let pk = first as *mut pg_sys::PathKey;
    // SAFETY: `rel.relid` is `rel`'s range-table index, and `root.simple_rte_array` has an entry for each index of this
    // query; `rte` is the table's own entry.
    let (rti, relid) = unsafe {
        let rte = *(*root).simple_rte_array.add((*rel).relid as usize);
        ((*rel).relid, (*rte).relid)
    };
    let config = config::lookup(relid)?;
    // SAFETY: `pk` is the query's first PathKey; its pk_eclass and that class's EquivalenceMembers are planner nodes
    // of this query.
    let (ec, members) = unsafe {
        let ec = (*pk).pk_eclass;
        let members: Vec<*mut pg_sys::Node> =
            list_ptrs((*ec).ec_members).iter().map(|m| (*(*m as *mut pg_sys::EquivalenceMember)).em_expr as *mut pg_sys::Node).collect();
        (ec, members)
    };
    // The time, or a function of it alone that never decreases as time grows:
    // rows in time order are also in its order.
    // SAFETY: each of `members` is an expression of `pk`'s equivalence class; monotone_in_time only reads the tree.
    let by_time = members.iter().any(|&e| unsafe { crate::scan::time_bucket::monotone_in_time(e, rti, config.time_attnum) });
    // SAFETY: `ec` is the EquivalenceClass of the first query pathkey, alive for the whole planning.
    if !by_time || unsafe { (*ec).ec_has_volatile } {
        return None;
    }
    // Only the built-in order of timestamps (not ORDER BY ... USING another operator).
    const DATETIME_BTREE_FAMILY: u32 = 434;
    // SAFETY: `pk` is the first of `root.query_pathkeys`; pathkey_descending reads the same PathKey.
    let (opfamily, descending) = unsafe { ((*pk).pk_opfamily, pathkey_descending(pk)) };
    if opfamily != pg_sys::Oid::from(DATETIME_BTREE_FAMILY) {
        return None;
    }
    // Then the meta columns, in the query's order for rows of equal time
    // (`ORDER BY time, host`): the merge breaks ties by meta order.
    // SAFETY: `root.query_pathkeys` is read again as above; lappend makes a new one-element List of `pk` in the
    // planner's CurrentMemoryContext.
    let (query_pathkeys, mut pathkeys) =
        unsafe { (list_ptrs((*root).query_pathkeys), pg_sys::lappend(std::ptr::null_mut(), pk as *mut std::ffi::c_void)) };
    let mut meta_ties = None;
    // Only after the time itself: rows merged by time break ties of equal
    // times, not of equal time buckets (date_trunc('minute', time), host).
    // SAFETY: `members` are `pk`'s equivalence-class expressions; strip and is_time_var only read those nodes.
    let bare_time = members.iter().any(|&e| unsafe { crate::scan::time_bucket::is_time_var(strip(e), rti, config.time_attnum) });
    if let Some(&second) = query_pathkeys.get(1).filter(|_| bare_time) {
        // SAFETY: `second` is the query's second PathKey, an element of `root.query_pathkeys`.
        let meta_descending = unsafe { pathkey_descending(second as *mut pg_sys::PathKey) };
        for (i, &attnum) in config.meta_attnums.iter().enumerate() {
            let Some(&wanted) = query_pathkeys.get(1 + i) else { break };
            // SAFETY: `root`/`rel` are add_paths' planner state; meta_pathkey opens `relid`, already locked by the
            // planner, to find the canonical PathKey of meta column `attnum`.
            match unsafe { meta_pathkey(root, rel, relid, attnum, meta_descending) } {
                Some(ours) if std::ptr::eq(ours, wanted as *mut pg_sys::PathKey) => {
                    // SAFETY: `wanted` is a canonical PathKey of the query; lappend appends it to `pathkeys`, the List
                    // this function made.
                    pathkeys = unsafe { pg_sys::lappend(pathkeys, wanted) };
                    meta_ties = Some(meta_descending);
                }
                _ => break,
            }
        }
    }
    // Starting costs one window of the table's history.
    // SAFETY: the store `config.store_relid` is open under AccessShareLock between table_open and table_close; window_count
    // reads its window index and `store.rd_rel` is its pg_class row while open.
    let (windows, store_buckets) = unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let windows = crate::scan::access::window_count(store, &config);
        let store_buckets = (*(*store).rd_rel).reltuples as f64;
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        (windows, store_buckets)
    };
    let windows = windows.unwrap_or(1.0).max(1.0);
    // The merge keeps about one window's buckets of the series the query
    // reads open; each row costs a heap step among them and a slot filled
    // from scratch.
    // SAFETY: `rel` is the RelOptInfo planned; its tuples and rows estimates were set before the set_rel_pathlist hook.
    let (rel_tuples, rel_rows) = unsafe { ((*rel).tuples, (*rel).rows) };
    let buckets = if store_buckets > 0.0 { store_buckets } else { rel_tuples / 500.0 };
    // SAFETY: `root`/`rel` are the planner's; reached_fraction reads only `rel.baserestrictinfo` and statistics.
    let series_share = unsafe { reached_fraction(root, rel, relid, false) }.clamp(1e-6, 1.0);
    let open = (buckets / windows * series_share).max(2.0);
    // SAFETY: cpu_tuple_cost and cpu_operator_cost are planner cost GUCs, copied by value for the time-order cost.
    let (tuple_cost, operator_cost) = unsafe { (pg_sys::cpu_tuple_cost, pg_sys::cpu_operator_cost) };
    let per_row = 2.0 * tuple_cost + 2.0 * operator_cost * open.log2();
    let arg = descending as i32 | meta_ties.map_or(0, |d| 2 | (d as i32) << 2);
    // SAFETY: palloc0 in the planner's CurrentMemoryContext makes the time-ordered CustomPath, a copy of `unordered`
    // (add_paths' plain path, not yet added); makeInteger and lappend build its custom_private in the same context.
    let cpath = unsafe {
        let cpath = pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
        *cpath = *unordered;
        let run = (*unordered).path.total_cost - (*unordered).path.startup_cost;
        (*cpath).path.startup_cost = (*unordered).path.startup_cost + run / windows;
        (*cpath).path.total_cost = (*unordered).path.startup_cost + run + rel_rows * per_row;
        (*cpath).path.pathkeys = pathkeys;
        (*cpath).flags = pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
        let mut private = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeInteger(MODE_TIME_ORDER) as *mut std::ffi::c_void);
        private = pg_sys::lappend(private, pg_sys::makeInteger(arg) as *mut std::ffi::c_void);
        (*cpath).custom_private = private;
        cpath
    };
    Some(cpath)
}

/// The pathkey ordering `rel`'s column `attnum` by its type's default btree
/// order (ascending NULLS LAST, or descending NULLS FIRST), if the query has
/// a use for it (an equivalence class exists).
unsafe fn meta_pathkey(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, relid: pg_sys::Oid, attnum: i16, descending: bool) -> Option<*mut pg_sys::PathKey> {
    // SAFETY: RelationIdGetRelation pins the relcache entry of `relid`, the table being planned (locked by the planner);
    // attribute `attnum` of its rd_att is copied by value before RelationClose unpins it.
    let att = unsafe {
        let r = pg_sys::RelationIdGetRelation(relid);
        let att = *crate::pg::relation::tuple_desc_attr((*r).rd_att, attnum as usize - 1);
        pg_sys::RelationClose(r);
        att
    };
    // SAFETY: lookup_type_cache returns the backend-lifetime type cache entry of `att.atttypid`, with lt/gt operators filled.
    let (lt_opr, gt_opr) = unsafe {
        let cache = pg_sys::lookup_type_cache(att.atttypid, (pg_sys::TYPECACHE_LT_OPR | pg_sys::TYPECACHE_GT_OPR) as i32);
        ((*cache).lt_opr, (*cache).gt_opr)
    };
    let opno = if descending { gt_opr } else { lt_opr };
    if opno == pg_sys::InvalidOid {
        return None;
    }
    // SAFETY: makeVar builds a Var of `rel` (its range-table index) in planner memory; build_expression_pathkey finds or
    // makes the canonical PathKey of that Var in `root`'s equivalence classes.
    let pk = unsafe {
        let var = pg_sys::makeVar((*rel).relid as i32, attnum, att.atttypid, att.atttypmod, att.attcollation, 0);
        #[cfg(feature = "pg15")]
        let pk = pg_sys::build_expression_pathkey(root, var as *mut pg_sys::Expr, std::ptr::null_mut(), opno, (*rel).relids, false);
        #[cfg(not(feature = "pg15"))]
        let pk = pg_sys::build_expression_pathkey(root, var as *mut pg_sys::Expr, opno, (*rel).relids, false);
        pk
    };
    // SAFETY: `pk` is the List build_expression_pathkey returned (NIL or one PathKey).
    unsafe { list_ptrs(pk) }.first().map(|&p| p as *mut pg_sys::PathKey)
}

/// Paths that yield rows in (meta..., time) order, ascending and descending,
/// for merge joins on the meta columns and `ORDER BY meta..., time`: a walk
/// of the series index merging each series' buckets in time order
/// (`OrderedScan::begin_series_order`). Their pathkeys are the longest
/// prefix of (meta..., time) the query has a use for; meta columns a
/// condition pins to a constant add nothing to the order and are left out.
unsafe fn series_order_paths(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, unordered: *mut pg_sys::CustomPath) -> Vec<*mut pg_sys::CustomPath> {
    // SAFETY: `root.simple_rte_array` holds the RangeTblEntry of every range-table index, `rel.relid` among them; the
    // entry's relid and inh flag are read by value.
    let (relid, inh) = unsafe {
        let rte = *(*root).simple_rte_array.add((*rel).relid as usize);
        ((*rte).relid, (*rte).inh)
    };
    let Some(config) = config::lookup(relid) else { return Vec::new() };
    if config.meta_attnums.is_empty() || inh {
        return Vec::new();
    }
    let mut out = Vec::new();
    for descending in [false, true] {
        let mut pathkeys: *mut pg_sys::List = std::ptr::null_mut();
        for (i, &attnum) in config.meta_attnums.iter().enumerate() {
            // No use for this column's order: the prefix so far is what counts.
            // SAFETY: `root`/`rel` are add_paths' planner state; meta_pathkey looks up the canonical PathKey of meta
            // column `attnum` of the planned table `relid`.
            let pk = unsafe { meta_pathkey(root, rel, relid, attnum, descending) };
            let Some(pk) = pk else { break };
            // A column pinned to a constant adds nothing to the order.
            // SAFETY: `pk` is that canonical PathKey; its pk_eclass is an EquivalenceClass of `root`.
            let pinned = unsafe { (*(*pk).pk_eclass).ec_has_const };
            if !pinned {
                // SAFETY: lappend appends the meta PathKey `pk` to `pathkeys`, this loop's List in planner memory.
                pathkeys = unsafe { pg_sys::lappend(pathkeys, pk as *mut std::ffi::c_void) };
            }
            if i + 1 == config.meta_attnums.len() {
                // SAFETY: as for the meta columns, meta_pathkey finds the PathKey of the time column `config.time_attnum`,
                // and lappend appends it to `pathkeys`; a time pinned to a constant adds nothing either (a pathkey
                // of a constant class is one Postgres never sorts by: a Merge Append over partitions could not).
                unsafe {
                    if let Some(tk) = meta_pathkey(root, rel, relid, config.time_attnum, descending) {
                        if !(*(*tk).pk_eclass).ec_has_const {
                            pathkeys = pg_sys::lappend(pathkeys, tk as *mut std::ffi::c_void);
                        }
                    }
                }
            }
        }
        if pathkeys.is_null() {
            continue;
        }
        // SAFETY: palloc0 in the planner's CurrentMemoryContext makes the series-ordered CustomPath, a copy of `unordered`
        // (add_paths' plain path); `rel.rows` and the cpu cost GUCs are read by value; makeInteger and lappend build its
        // custom_private in the same context.
        let cpath = unsafe {
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
            cpath
        };
        out.push(cpath);
    }
    out
}

/// Attribute numbers (1-based) the query reads, or None when it needs the whole row.
unsafe fn needed_attnums(rel: *mut pg_sys::RelOptInfo, clauses: *mut pg_sys::List) -> Option<Vec<i32>> {
    // SAFETY: `rel.reltarget` is the PathTarget of the planned relation and `clauses` the plan's qual List; referenced_attnums
    // only walks those expression trees.
    let used = unsafe { referenced_attnums(&[(*(*rel).reltarget).exprs as *mut pg_sys::Node, clauses as *mut pg_sys::Node], (*rel).relid) };
    if used.contains(&0) {
        return None;
    }
    Some(used.into_iter().filter(|&a| a > 0).collect())
}

#[pg_guard]
unsafe extern "C-unwind" fn plan_custom_path(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    best_path: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    clauses: *mut pg_sys::List,
    _custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    // SAFETY: `clauses` is the RestrictInfo List create_customscan_plan passes for `best_path`; extract_actual_clauses
    // copies their non-pseudoconstant clauses into a new List in planner memory.
    let quals = unsafe { pg_sys::extract_actual_clauses(clauses, false) };
    // SAFETY: `rel` is the RelOptInfo of `best_path`'s scan; `quals` was just built from its clauses.
    let needed = unsafe { needed_attnums(rel, quals) }.unwrap_or_else(|| vec![-1]);
    // SAFETY: `best_path.custom_private` is NIL or the List of Integer nodes time_order_path / series_order_paths made.
    let from_path: Vec<i32> = unsafe { list_ptrs((*best_path).custom_private).iter().map(|p| (*(*p as *mut pg_sys::Integer)).ival).collect() };
    let (mode, arg) = match from_path.as_slice() {
        [mode, arg] => (*mode, *arg),
        _ => (MODE_SCAN, 0),
    };
    // SAFETY: `root` plans the query that scans `rel.relid`.
    let doc_keys = unsafe { crate::scan::doc_keys::of_query(root, (*rel).relid) };
    // SAFETY: `rel.relid` is the scan's range-table index and `best_path.flags` its CustomPath's flags; private_list and
    // new_custom_scan palloc the plan node in the planner's CurrentMemoryContext.
    unsafe { new_custom_scan((*rel).relid, tlist, quals, (*best_path).flags, private_list(mode, arg, &needed, &doc_keys)) }
}

/// A TsBucketScan plan node over range-table entry `scanrelid`.
unsafe fn new_custom_scan(scanrelid: u32, tlist: *mut pg_sys::List, quals: *mut pg_sys::List, flags: u32, private: *mut pg_sys::List) -> *mut pg_sys::Plan {
    // SAFETY: palloc0 in the planner's CurrentMemoryContext returns a zeroed block the size of a CustomScan.
    let cscan = unsafe { pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan };
    // SAFETY: `cscan` is that fresh CustomScan, filled in before the planner sees it; `methods().plan` is a static table.
    unsafe {
        (*cscan).scan.plan.type_ = pg_sys::NodeTag::T_CustomScan;
        (*cscan).scan.plan.targetlist = tlist;
        (*cscan).scan.plan.qual = quals;
        (*cscan).scan.scanrelid = scanrelid;
        (*cscan).flags = flags;
        (*cscan).methods = &methods().plan;
        (*cscan).custom_private = private;
    }
    cscan as *mut pg_sys::Plan
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
    // SAFETY: `best_path` is a path last_point_path built: its custom_private holds one Integer, the table's range-table index.
    let rti = unsafe { (*(list_ptrs((*best_path).custom_private)[0] as *mut pg_sys::Integer)).ival as u32 };
    // SAFETY: `rti` is a range-table index of this query, and `root.simple_rel_array` holds its base RelOptInfo.
    let base = unsafe { *(*root).simple_rel_array.add(rti as usize) };
    // The path sits above the scan: it applies the table's conditions itself,
    // constant ones first, as the gating Result a scan would get (none is made
    // for it), then the others cheapest first.
    // SAFETY: `base.baserestrictinfo` is the RestrictInfo List of that base relation; cheapest_first and
    // extract_actual_clauses read it, and they and list_concat build new Lists in planner memory.
    let quals = unsafe {
        let ordered = cheapest_first(root, (*base).baserestrictinfo);
        pg_sys::list_concat(pg_sys::extract_actual_clauses(ordered, true), pg_sys::extract_actual_clauses(ordered, false))
    };
    // SAFETY: `tlist` (create_plan's target list) and `quals` are expression trees; referenced_attnums only walks them.
    let used = unsafe { referenced_attnums(&[tlist as *mut pg_sys::Node, quals as *mut pg_sys::Node], rti) };
    let needed: Vec<i32> = if used.contains(&0) { vec![-1] } else { used.into_iter().filter(|&a| a > 0).collect() };
    // SAFETY: `root` plans the query that scans `rti`.
    let doc_keys = unsafe { crate::scan::doc_keys::of_query(root, rti) };
    // SAFETY: private_list and new_custom_scan palloc the last-point plan node and its custom_private in the planner's context.
    unsafe { new_custom_scan(rti, tlist, quals, 0, private_list(MODE_LAST_POINT, 0, &needed, &doc_keys)) }
}

/// `restrictions` (a RestrictInfo List) in the order a scan of the table
/// would test them: by estimated cost per row, ties in the written order.
/// create_customscan_plan orders a scan's clauses (order_qual_clauses, which
/// is static); the last-point path above the scan takes the table's own, in
/// whatever order they came, and a node that deparses the query anew (a Citus
/// shard) may turn `a AND b` around: a heap scan would still test the cheap
/// `num IS NULL` before a cast that fails on rows it rejects.
/// No security-barrier levels to keep: last_point refuses tables under row security.
unsafe fn cheapest_first(root: *mut pg_sys::PlannerInfo, restrictions: *mut pg_sys::List) -> *mut pg_sys::List {
    // SAFETY: `restrictions` is NIL or a List of RestrictInfo nodes (this function's contract).
    let items = unsafe { list_ptrs(restrictions) };
    let mut costed: Vec<(f64, *mut std::ffi::c_void)> = items
        .iter()
        .map(|&ri| {
            let mut cost = pg_sys::QualCost::default();
            // SAFETY: `ri` is a RestrictInfo node of `root`'s query; cost_qual_eval_node caches its cost in it.
            unsafe { pg_sys::cost_qual_eval_node(&mut cost, ri as *mut pg_sys::Node, root) };
            (cost.per_tuple, ri)
        })
        .collect();
    // A stable sort: equal costs keep the order order_qual_clauses would keep.
    costed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: *mut pg_sys::List = std::ptr::null_mut();
    for (_, ri) in costed {
        // SAFETY: lappend appends the RestrictInfo pointer to a new List in the planner's CurrentMemoryContext.
        out = unsafe { pg_sys::lappend(out, ri) };
    }
    out
}

struct PathMethods {
    scan: pg_sys::CustomPathMethods,
    last_point: pg_sys::CustomPathMethods,
}
// SAFETY: backends are single-threaded; the tables are immutable once built.
unsafe impl Sync for PathMethods {}
// SAFETY: backends are single-threaded; the path methods are only read once built.
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
    // SAFETY: `output_rel` is create_upper_paths' DISTINCT relation (this function's contract); its pathlist holds Paths.
    let path_rows: Vec<f64> = unsafe { list_ptrs((*output_rel).pathlist).iter().map(|p| (*(*p as *mut pg_sys::Path)).rows).collect() };
    // SAFETY: `input_rel` is the stage's input RelOptInfo, valid as this function's contract requires.
    let input_rows = unsafe { (*input_rel).rows };
    let series = path_rows.into_iter().fold(f64::INFINITY, f64::min).clamp(1.0, input_rows.max(1.0));
    let rows_per_series = (input_rows / series).clamp(1.0, 1000.0);
    // SAFETY: random_page_cost, cpu_tuple_cost and cpu_operator_cost are cost GUCs, copied by value for the last-point cost.
    let (page_cost, tuple_cost, operator_cost) = unsafe { (pg_sys::random_page_cost, pg_sys::cpu_tuple_cost, pg_sys::cpu_operator_cost) };
    let per_series = 2.0 * page_cost + rows_per_series * (tuple_cost + operator_cost);
    // SAFETY: palloc0 in the planner's CurrentMemoryContext returns a zeroed CustomPath for the last-point path.
    let cpath = unsafe { pg_sys::palloc0(std::mem::size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath };
    // SAFETY: `cpath` is that fresh path; `input_rel.reltarget` and `root.sort_pathkeys` are planner data of this query
    // (the contract's relations); makeInteger and lappend allocate custom_private in the planner's context.
    unsafe {
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
    }
    cpath
}
