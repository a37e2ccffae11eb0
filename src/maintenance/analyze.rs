//! Column statistics for time-series tables.
//!
//! Postgres's ANALYZE samples a table by blocks of its own relation, which is
//! empty here: the rows live in the bucket store. (PostgreSQL 17 and later
//! read those blocks through a read stream, so a table AM cannot map them onto
//! buckets either.) So tsbucket gathers the sample itself, rows from buckets
//! chosen at random over the whole store, and runs Postgres's own statistics
//! functions over it (each column type's typanalyze, std_typanalyze for most)
//! as ANALYZE would over a heap table's sample, writing their results to
//! pg_statistic, where the planner reads them. They run as the table's owner,
//! in a security-restricted operation, as ANALYZE runs them.
//!
//! No sample table is made: a temporary one would make the transaction one
//! that cannot be prepared (Citus prepares the transactions that ANALYZE a
//! distributed table's shards), a permanent one a catalog write per ANALYZE.

use crate::catalog::config;
use crate::catalog::shape::TableShape;
use crate::store::reader;
use crate::store::rows;
use crate::store::tuple;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Buckets sampled at most; rows are taken from each in equal shares.
const MAX_SAMPLED_BUCKETS: usize = 3000;

/// A small deterministic generator (xorshift64*): the same table gives the
/// same sample, which keeps plans reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `k` distinct indexes of `0..n`, ascending (all of them when k >= n).
fn choose(rng: &mut Rng, n: usize, k: usize) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    // Floyd's algorithm.
    let mut picked = std::collections::BTreeSet::new();
    for j in n - k..n {
        let t = rng.below(j + 1);
        if !picked.insert(t) {
            picked.insert(j);
        }
    }
    picked.into_iter().collect()
}

/// Recomputes the statistics of time-series table `relid`. The caller must own
/// it (membership in the owning role counts) or be a superuser; others are
/// skipped, as ANALYZE skips them.
pub fn analyze(relid: pg_sys::Oid) {
    let owner = crate::catalog::privileges::table_owner(relid);
    // SAFETY: GetUserId reads this backend's current user id and superuser() looks that role up in the syscache; the
    // transaction ANALYZE runs in keeps the catalog readable.
    let (user, superuser) = unsafe { (pg_sys::GetUserId(), pg_sys::superuser()) };
    // SAFETY: has_privs_of_role only compares role oids (`user` from GetUserId, `owner` the relowner of `relid`)
    // through the role membership cache of this transaction.
    if !superuser && !unsafe { pg_sys::has_privs_of_role(user, owner) } {
        return;
    }
    let Some(config) = config::lookup(relid) else { return };
    // SAFETY: `config` is `relid`'s configuration (config::lookup above), in the caller's transaction.
    let (rows, buckets) = unsafe { gather(relid, owner, &config) };
    debug1!("tsbucket: analyzed {}: {rows} sample rows from {buckets} buckets", crate::pg::relation::relation_name(relid));
}

/// One column's statistics under way: Postgres's own state for it, which
/// its type's typanalyze function set up (std_typanalyze for most types).
struct Column {
    attnum: i16,
    stats: *mut pg_sys::VacAttrStats,
}

/// Sets up the statistics of column `attnum` as ANALYZE's examine_attribute
/// does; None for a column ANALYZE skips (statistics target 0, or a type
/// whose typanalyze declines).
///
/// # Safety
/// In a transaction; `attr` is attribute `attnum` of the open relation `relid`;
/// `cxt` is a live memory context, current while this runs.
unsafe fn examine(relid: pg_sys::Oid, attr: pg_sys::Form_pg_attribute, attnum: i16, cxt: pg_sys::MemoryContext) -> Option<Column> {
    // SAFETY: `attr` is a live attribute of the open relation (this function's contract).
    let (dropped, typid, typmod, collation) = unsafe { ((*attr).attisdropped, (*attr).atttypid, (*attr).atttypmod, (*attr).attcollation) };
    // SAFETY: as above; `relid` and `attnum` name the same attribute.
    let target = unsafe { statistics_target(relid, attr, attnum) };
    if dropped || target == 0 {
        return None;
    }
    // SAFETY: palloc0 gives a zeroed VacAttrStats in `cxt` (current), as examine_attribute allocates one.
    let stats = unsafe { pg_sys::palloc0(std::mem::size_of::<pg_sys::VacAttrStats>()) as *mut pg_sys::VacAttrStats };
    // SAFETY: `stats` was just allocated; PostgreSQL 15's std_typanalyze reads (and may set) the target through a copy
    // of the attribute's fixed part (made in `cxt`), later versions through the field.
    unsafe {
        #[cfg(feature = "pg15")]
        {
            let copy = pg_sys::palloc(std::mem::size_of::<pg_sys::FormData_pg_attribute>()) as pg_sys::Form_pg_attribute;
            std::ptr::copy_nonoverlapping(attr, copy, 1);
            (*stats).attr = copy;
        }
        #[cfg(not(feature = "pg15"))]
        {
            (*stats).attstattarget = target;
        }
    }
    // SAFETY: SearchSysCacheCopy returns a palloc'd copy (in `cxt`) of the type's pg_type row, or NULL.
    let typtuple = unsafe {
        pg_sys::SearchSysCacheCopy(
            pg_sys::SysCacheIdentifier::TYPEOID as i32,
            pg_sys::Datum::from(typid),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        )
    };
    if typtuple.is_null() {
        error!("tsbucket ANALYZE: cache lookup failed for type {}", u32::from(typid));
    }
    // SAFETY: `stats` is the zeroed state allocated above and `typtuple` the type's row copied into `cxt`, both alive
    // as long as `cxt`; the fields set are those examine_attribute sets before calling the type's typanalyze.
    let typanalyze = unsafe {
        (*stats).attrtypid = typid;
        (*stats).attrtypmod = typmod;
        (*stats).attrcollid = collation;
        (*stats).attrtype = pg_sys::GETSTRUCT(typtuple) as pg_sys::Form_pg_type;
        (*stats).anl_context = cxt;
        (*stats).tupattnum = attnum as i32;
        let t = &*(*stats).attrtype;
        for i in 0..pg_sys::STATISTIC_NUM_SLOTS as usize {
            (*stats).statypid[i] = typid;
            (*stats).statyplen[i] = t.typlen;
            (*stats).statypbyval[i] = t.typbyval;
            (*stats).statypalign[i] = t.typalign;
        }
        t.typanalyze
    };
    let ok = if typanalyze != pg_sys::InvalidOid {
        // SAFETY: a typanalyze function takes the VacAttrStats pointer and returns bool (pg_type's contract), as
        // examine_attribute calls it.
        let d = unsafe { pg_sys::OidFunctionCall1Coll(typanalyze, pg_sys::InvalidOid, pg_sys::Datum::from(stats)) };
        d.value() & 0xff != 0
    } else {
        // SAFETY: std_typanalyze reads the state set up above.
        unsafe { pg_sys::std_typanalyze(stats) }
    };
    // SAFETY: `stats` is the state the typanalyze function just filled in.
    let usable = unsafe { (*stats).compute_stats.is_some() && (*stats).minrows > 0 };
    (ok && usable).then_some(Column { attnum, stats })
}

/// The column's statistics target (-1: the default), as ANALYZE reads it.
///
/// # Safety
/// `attr` is attribute `attnum` of the open relation `relid`.
#[cfg(feature = "pg15")]
unsafe fn statistics_target(_relid: pg_sys::Oid, attr: pg_sys::Form_pg_attribute, _attnum: i16) -> i32 {
    // SAFETY: `attr` is live (this function's contract); PostgreSQL 15 keeps the target in the fixed part.
    unsafe { (*attr).attstattarget }
}

/// The column's statistics target (-1: the default), as ANALYZE reads it:
/// PostgreSQL 17 moved it out of the fixed part of pg_attribute (NULL: the default).
///
/// # Safety
/// `attr` is attribute `attnum` of the open relation `relid`.
#[cfg(not(feature = "pg15"))]
unsafe fn statistics_target(relid: pg_sys::Oid, _attr: pg_sys::Form_pg_attribute, attnum: i16) -> i32 {
    // SAFETY: the ATTNUM cache is keyed by (attrelid, attnum); a hit stays pinned until ReleaseSysCache, and the
    // nullable attstattarget is read from it by SysCacheGetAttr before that.
    unsafe {
        let tuple = pg_sys::SearchSysCache2(pg_sys::SysCacheIdentifier::ATTNUM as i32, pg_sys::Datum::from(relid), pg_sys::Datum::from(attnum));
        if tuple.is_null() {
            return 0;
        }
        let mut isnull = false;
        let d = pg_sys::SysCacheGetAttr(pg_sys::SysCacheIdentifier::ATTNUM as i32, tuple, pg_sys::Anum_pg_attribute_attstattarget as i16, &mut isnull);
        pg_sys::ReleaseSysCache(tuple);
        if isnull { -1 } else { d.value() as i16 as i32 }
    }
}

/// The sample's values as the statistics functions read them: row `rownum`
/// of the column is at `exprvals[rownum * rowstride]` (each column's pointers
/// start at its own offset into the rows' shared arrays).
#[pg_guard]
unsafe extern "C-unwind" fn fetch(stats: *mut pg_sys::VacAttrStats, rownum: std::ffi::c_int, is_null: *mut bool) -> pg_sys::Datum {
    // SAFETY: the statistics functions call this with a row number below the sample size they were given, for a
    // `stats` whose exprvals/exprnulls gather() pointed into arrays of that many rows, `rowstride` apart.
    unsafe {
        let i = rownum as usize * (*stats).rowstride as usize;
        *is_null = *(*stats).exprnulls.add(i);
        *(*stats).exprvals.add(i)
    }
}

/// Samples the table and computes its statistics, as ANALYZE does for a
/// heap: rows from buckets chosen at random over the whole store (an equal
/// share from each) go to memory, each column's statistics function runs
/// over them as the table's owner in a security-restricted operation, and
/// the results replace the table's rows in pg_statistic. No sample table is
/// made (so ANALYZE works where a temporary one could not be: in a
/// transaction that Citus prepares, for one). Returns (sample rows, buckets
/// sampled).
///
/// # Safety
/// In a transaction; `config` is `relid`'s configuration and `owner` its owner.
unsafe fn gather(relid: pg_sys::Oid, owner: pg_sys::Oid, config: &config::Config) -> (usize, usize) {
    // SAFETY: `relid` and its store `config.store_relid` exist (this function's contract); AccessShareLock is held on
    // each until the transaction ends, so `rel` and its rd_att stay valid until the table_close at the end.
    let (rel, shape, store) = unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as i32);
        let shape = TableShape::new((*rel).rd_att, config);
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        (rel, shape, store)
    };
    // SAFETY: CurrentMemoryContext is the caller's live context; both contexts are made its children and deleted at
    // the end of this function: `anl` holds the statistics state and the sample, `cxt` one bucket at a time.
    let (anl, cxt) = unsafe {
        (
            pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket analyze".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024),
            pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket analyze bucket".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024),
        )
    };
    // SAFETY: `rel` is open; its descriptor has natts attributes, each read through TupleDescAttr's layout.
    let natts = unsafe { (*(*rel).rd_att).natts as usize };
    let snapshot = reader::current_snapshot();
    // SAFETY: `store` was opened just above and stays open until after scan.end(); `snapshot` is the statement's
    // (or transaction's) snapshot, alive for the whole of this call.
    let mut scan = unsafe { reader::StoreScan::begin(store, snapshot) };
    let (mut buckets, mut total_rows) = (0usize, 0f64);
    while let Some(tuple) = scan.next(true) {
        buckets += 1;
        // SAFETY: `tuple` was just returned by `scan` over `store` and stays valid until its next call; the header is
        // read in `cxt` (alive until its deletion below), and the previous context is current again before the reset.
        let header_rows = unsafe {
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            let header_rows = tuple::read_header(store, tuple).rows as f64;
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
            header_rows
        };
        total_rows += header_rows;
    }
    scan.rescan();
    // The table's size for the planner, as ANALYZE records a heap table's:
    // its rows now, against the store's pages now (the estimate scales by
    // the store's pages later on; see relation_estimate_size).
    // SAFETY: `store` is open under AccessShareLock (table_open above); `rel` is the open time-series table that
    // record_size's contract asks for.
    unsafe {
        let pages = pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM);
        record_size(rel, pages, total_rows);
    }
    // The column types' analyze functions run as the owner, in a security-restricted operation with a
    // GUC nest level of their own (and, from PostgreSQL 17, a safe search_path), as ANALYZE runs them.
    let (rows, sampled) = crate::pg::role::as_user(owner, true, || {
        // SAFETY: a GUC nest level of this transaction, closed by AtEOXact_GUC below (an ERROR closes it with the
        // transaction); `anl` is current while the columns' state is made in it, then the caller's context again.
        let nestlevel = unsafe {
            let nestlevel = pg_sys::NewGUCNestLevel();
            #[cfg(not(feature = "pg15"))]
            pg_sys::RestrictSearchPath();
            nestlevel
        };
        // SAFETY: `anl` is live and made current for the columns' state; the attributes are `rel`'s (i < natts),
        // open above.
        let columns: Vec<Column> = unsafe {
            let old = pg_sys::MemoryContextSwitchTo(anl);
            let columns = (0..natts)
                .filter_map(|i| examine(relid, crate::pg::relation::tuple_desc_attr((*rel).rd_att, i), (i + 1) as i16, anl))
                .collect();
            pg_sys::MemoryContextSwitchTo(old);
            columns
        };
        let mut result = (0, 0);
        if !columns.is_empty() {
            // SAFETY: as above; the columns' state lives in `anl` until it is deleted, after this.
            let target_rows = columns.iter().map(|c| unsafe { (*c.stats).minrows } as usize).max().unwrap_or(1);
            // SAFETY: the contracts of sample (rel, store, scan, contexts of this function) and compute.
            result = unsafe {
                let (values, nulls, rows, sampled) = sample(relid, config, rel, &shape, store, &mut scan, buckets, target_rows, natts, anl, cxt);
                compute(relid, &columns, values, nulls, rows, natts, total_rows, anl);
                (rows, sampled)
            };
        }
        // SAFETY: closes the nest level opened above.
        unsafe { pg_sys::AtEOXact_GUC(false, nestlevel) };
        result
    });
    scan.end();
    // SAFETY: the contexts and the relations `store` and `rel` were made or opened above, are no longer used, and are
    // released exactly once here; NoLock keeps the locks until the transaction ends.
    unsafe {
        pg_sys::MemoryContextDelete(cxt);
        pg_sys::MemoryContextDelete(anl);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
    (rows, sampled)
}

/// The sample: `target_rows` rows (about) from buckets chosen at random,
/// as `natts` values and nulls per row, in `anl`.
///
/// # Safety
/// `rel` is `relid`'s open relation with `natts` attributes and `shape` built
/// from it; `store` is its open store and `scan` a scan of it, rewound;
/// `buckets` is how many tuples the scan returns; `anl` and `cxt` are live
/// memory contexts.
#[allow(clippy::too_many_arguments)]
unsafe fn sample(
    relid: pg_sys::Oid,
    config: &config::Config,
    rel: pg_sys::Relation,
    shape: &TableShape,
    store: pg_sys::Relation,
    scan: &mut reader::StoreScan,
    buckets: usize,
    target_rows: usize,
    natts: usize,
    anl: pg_sys::MemoryContext,
    cxt: pg_sys::MemoryContext,
) -> (*mut pg_sys::Datum, *mut bool, usize, usize) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(u32::from(relid)));
    let chosen = choose(&mut rng, buckets, MAX_SAMPLED_BUCKETS);
    let per_bucket = target_rows.div_ceil(chosen.len().max(1));
    let capacity = chosen.len() * per_bucket;
    // SAFETY: `anl` is live (this function's contract); the arrays hold `capacity` rows of `natts` entries, and the
    // virtual slot takes `rel`'s descriptor, valid while `rel` is open.
    let (values, nulls, slot) = unsafe {
        (
            pg_sys::MemoryContextAllocHuge(anl, (capacity * natts).max(1) * std::mem::size_of::<pg_sys::Datum>()) as *mut pg_sys::Datum,
            pg_sys::MemoryContextAllocHuge(anl, (capacity * natts).max(1)) as *mut bool,
            pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, &pg_sys::TTSOpsVirtual),
        )
    };
    let (mut index, mut next, mut rows) = (0usize, 0usize, 0usize);
    while next < chosen.len() {
        let Some(tuple) = scan.next(true) else { break };
        index += 1;
        if index - 1 != chosen[next] {
            continue;
        }
        next += 1;
        // SAFETY: `tuple` is the chosen bucket's tuple, just returned by `scan` over `store`; its payload is detoasted
        // into `cxt`, current until the switch to `anl` below. `old` is the caller's context, current again at the
        // end of the iteration: `cxt` is deleted after sampling, and must not be left current.
        let (old, stored) = unsafe {
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            (old, tuple::read_bucket(store, tuple))
        };
        let bucket = rows::load(config, shape, &stored);
        // By-reference values are made in `anl`, where they must outlive this bucket.
        // SAFETY: `anl` is live.
        unsafe { pg_sys::MemoryContextSwitchTo(anl) };
        for row in choose(&mut rng, bucket.rows, per_bucket) {
            if rows == capacity {
                break;
            }
            // SAFETY: `slot` is the virtual slot of `rel`'s descriptor made above, and `shape` was built from that same
            // descriptor; `row` < bucket.rows, as choose() returns; row `rows` < capacity of the arrays gets natts entries.
            unsafe {
                rows::fill_slot(rel, shape, &bucket, None, row, slot);
                std::ptr::copy_nonoverlapping((*slot).tts_values, values.add(rows * natts), natts);
                std::ptr::copy_nonoverlapping((*slot).tts_isnull, nulls.add(rows * natts), natts);
            }
            rows += 1;
        }
        // SAFETY: `old` was current before the switch to `anl`; the reset frees this bucket's detoasted payload,
        // and `stored` and `bucket` are not read after it.
        unsafe {
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
        }
    }
    // SAFETY: `slot` was made above and is dropped once; the sampled values live in `anl`, not in the slot.
    unsafe { pg_sys::ExecDropSingleTupleTableSlot(slot) };
    (values, nulls, rows, chosen.len())
}

/// Runs each column's statistics function over the sample and replaces the
/// table's pg_statistic rows with the results, as ANALYZE's update_attstats.
///
/// # Safety
/// In a transaction, as the table's owner; `values` and `nulls` hold `rows`
/// rows of `natts` entries in `anl`, and `columns` was set up in `anl`.
#[allow(clippy::too_many_arguments)]
unsafe fn compute(
    relid: pg_sys::Oid,
    columns: &[Column],
    values: *mut pg_sys::Datum,
    nulls: *mut bool,
    rows: usize,
    natts: usize,
    total_rows: f64,
    anl: pg_sys::MemoryContext,
) {
    for c in columns {
        // SAFETY: the column's state is set up (examine); its values start at its own offset in the rows' arrays, a
        // row `natts` entries apart, which `fetch` reads; compute_stats runs in `anl`, an ERROR in it goes through
        // pg_guard_ffi_boundary.
        unsafe {
            let stats = c.stats;
            (*stats).exprvals = values.add(c.attnum as usize - 1);
            (*stats).exprnulls = nulls.add(c.attnum as usize - 1);
            (*stats).rowstride = natts as i32;
            let old = pg_sys::MemoryContextSwitchTo(anl);
            if rows > 0 {
                let compute_stats = (*stats).compute_stats.expect("checked by examine");
                pg_sys::ffi::pg_guard_ffi_boundary(|| compute_stats(stats, Some(fetch), rows as i32, total_rows));
            }
            pg_sys::MemoryContextSwitchTo(old);
        }
    }
    // SAFETY: `relid` exists (this function's contract); pg_statistic is opened RowExclusive until the table_close
    // below, so `statrel` and its descriptor stay valid while the rows are written.
    unsafe {
        pg_sys::RemoveStatistics(relid, 0);
        let statrel = pg_sys::table_open(pg_sys::StatisticRelationId, pg_sys::RowExclusiveLock as i32);
        for c in columns.iter().filter(|c| (*c.stats).stats_valid) {
            write_statistics(statrel, relid, c);
        }
        pg_sys::table_close(statrel, pg_sys::RowExclusiveLock as i32);
        pg_sys::CommandCounterIncrement();
    }
}

/// One pg_statistic row from a column's computed statistics.
///
/// # Safety
/// `statrel` is pg_statistic, open RowExclusive; the column's statistics are valid.
unsafe fn write_statistics(statrel: pg_sys::Relation, relid: pg_sys::Oid, c: &Column) {
    const SLOTS: usize = pg_sys::STATISTIC_NUM_SLOTS as usize;
    // SAFETY: `statrel` is open (this function's contract); its descriptor has pg_statistic's natts columns.
    let natts = unsafe { (*(*statrel).rd_att).natts as usize };
    let mut values = vec![pg_sys::Datum::from(0); natts];
    let mut nulls = vec![false; natts];
    // SAFETY: the column's statistics were computed (stats_valid); their arrays hold numnumbers/numvalues entries.
    let s = unsafe { &*c.stats };
    let at = |anum: u32| anum as usize - 1;
    values[at(pg_sys::Anum_pg_statistic_starelid)] = pg_sys::Datum::from(relid);
    values[at(pg_sys::Anum_pg_statistic_staattnum)] = pg_sys::Datum::from(c.attnum);
    values[at(pg_sys::Anum_pg_statistic_stainherit)] = pg_sys::Datum::from(false);
    values[at(pg_sys::Anum_pg_statistic_stanullfrac)] = pg_sys::Datum::from(s.stanullfrac.to_bits());
    values[at(pg_sys::Anum_pg_statistic_stawidth)] = pg_sys::Datum::from(s.stawidth);
    values[at(pg_sys::Anum_pg_statistic_stadistinct)] = pg_sys::Datum::from(s.stadistinct.to_bits());
    for k in 0..SLOTS {
        values[at(pg_sys::Anum_pg_statistic_stakind1) + k] = pg_sys::Datum::from(s.stakind[k]);
        values[at(pg_sys::Anum_pg_statistic_staop1) + k] = pg_sys::Datum::from(s.staop[k]);
        values[at(pg_sys::Anum_pg_statistic_stacoll1) + k] = pg_sys::Datum::from(s.stacoll[k]);
        let numbers = at(pg_sys::Anum_pg_statistic_stanumbers1) + k;
        if s.numnumbers[k] > 0 {
            let mut datums: Vec<pg_sys::Datum> =
                // SAFETY: stanumbers[k] holds numnumbers[k] floats (compute_stats' contract with ANALYZE).
                (0..s.numnumbers[k] as usize).map(|n| pg_sys::Datum::from(unsafe { *s.stanumbers[k].add(n) }.to_bits())).collect();
            // SAFETY: `datums` are float4 datums (by value, 4 bytes, int alignment), as pg_statistic's float4[] takes.
            values[numbers] = pg_sys::Datum::from(unsafe {
                pg_sys::construct_array(datums.as_mut_ptr(), datums.len() as i32, pg_sys::FLOAT4OID, 4, true, b'i' as std::ffi::c_char)
            });
        } else {
            nulls[numbers] = true;
        }
        let vals = at(pg_sys::Anum_pg_statistic_stavalues1) + k;
        if s.numvalues[k] > 0 {
            // SAFETY: stavalues[k] holds numvalues[k] datums of type statypid[k], whose layout the state records.
            values[vals] = pg_sys::Datum::from(unsafe {
                pg_sys::construct_array(s.stavalues[k], s.numvalues[k], s.statypid[k], s.statyplen[k] as i32, s.statypbyval[k], s.statypalign[k])
            });
        } else {
            nulls[vals] = true;
        }
    }
    // SAFETY: `values`/`nulls` hold one entry per pg_statistic column; the formed tuple is inserted with its indexes
    // and freed after.
    unsafe {
        let tuple = pg_sys::heap_form_tuple((*statrel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
        pg_sys::CatalogTupleInsert(statrel, tuple);
        pg_sys::heap_freetuple(tuple);
    }
}

/// Records the table's row count against the store's page count in its
/// pg_class row (relpages, reltuples), in place, as ANALYZE does for a heap.
///
/// # Safety
/// `rel` is open (and locked) by the caller.
unsafe fn record_size(rel: pg_sys::Relation, store_pages: pg_sys::BlockNumber, rows: f64) {
    let (mut frozen, mut multi) = (false, false);
    // SAFETY: `rel` is open and locked by the caller, as this function's contract requires; vac_update_relstats
    // writes its pg_class row in place and only writes back through `frozen` and `multi`, locals of this frame.
    unsafe {
        #[cfg(feature = "pg15")]
        pg_sys::vac_update_relstats(rel, store_pages, rows, 0, false, pg_sys::InvalidTransactionId, pg_sys::TransactionId::from(0u32) /* InvalidMultiXactId */, &mut frozen, &mut multi, true);
        #[cfg(not(feature = "pg15"))]
        pg_sys::vac_update_relstats(rel, store_pages, rows, 0, 0, false, pg_sys::InvalidTransactionId, pg_sys::TransactionId::from(0u32) /* InvalidMultiXactId */, &mut frozen, &mut multi, true);
    }
}
