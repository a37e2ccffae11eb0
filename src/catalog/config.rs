//! Per-table configuration, read from `tsbucket.catalog` and cached per backend.
//! The cache is dropped on any relcache invalidation of the table, which
//! `create_timeseries` and `alter_timeseries` send.

use crate::pg::error::{NOT_IN_PREREQUISITE_STATE, ts_error};
use crate::pg::relation::relation_name;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub relid: pg_sys::Oid,
    pub store_relid: pg_sys::Oid,
    /// The store's index on bucket_id, for fetching a row by TID.
    pub id_index: pg_sys::Oid,
    /// Sequence that numbers buckets (and so row TIDs), and its owner.
    pub id_sequence: pg_sys::Oid,
    pub id_owner: pg_sys::Oid,
    /// Where rows of rewritten buckets went, and its index on the old id
    /// (None for tables made before it existed).
    pub moves: Option<(pg_sys::Oid, pg_sys::Oid)>,
    pub time_attnum: i16,
    pub meta_attnums: Vec<i16>,
    pub span_micros: i64,
    /// Where rows wait that transactions left in under-filled buckets (None:
    /// a catalog row from before tails, as during an update).
    pub tail: Option<TailConfig>,
}

/// A table's tail (src/store/tail.rs): its three segments, the sequence whose
/// value names the segment new rows go to, and the table of drained segments
/// with its primary key (shared by every table).
#[derive(Clone, Debug, PartialEq)]
pub struct TailConfig {
    pub segments: [pg_sys::Oid; 3],
    pub current: pg_sys::Oid,
    pub drained: pg_sys::Oid,
    pub drained_index: pg_sys::Oid,
}

thread_local! {
    static CACHE: RefCell<HashMap<pg_sys::Oid, Rc<Config>>> = RefCell::new(HashMap::new());
}

/// The configuration of `relid`, or None if `create_timeseries` was never called for it.
pub fn lookup(relid: pg_sys::Oid) -> Option<Rc<Config>> {
    if let Some(c) = CACHE.with(|c| c.borrow().get(&relid).cloned()) {
        return Some(c);
    }
    let config = load(relid)?;
    let config = Rc::new(config);
    // Not kept while an update script runs: after it, the version check must
    // run again (the script may stop at another version than the library's).
    if !running_own_script() {
        CACHE.with(|c| c.borrow_mut().insert(relid, config.clone()));
    }
    Some(config)
}

/// Whether tsbucket's own extension script (CREATE or ALTER EXTENSION) is running.
fn running_own_script() -> bool {
    // SAFETY: creating_extension and CurrentExtensionObject are globals this backend sets around an extension script
    // and only reads here; get_extension_oid gets a static NUL-terminated name and, with missing_ok, returns InvalidOid.
    unsafe { pg_sys::creating_extension && pg_sys::CurrentExtensionObject == pg_sys::get_extension_oid(c"tsbucket".as_ptr(), true) }
}

/// Like `lookup`, but a table that was never configured is an error.
pub fn require(relid: pg_sys::Oid) -> Rc<Config> {
    lookup(relid).unwrap_or_else(|| {
        // ALTER TABLE rewrites copy rows into a transient table named pg_temp_<oid>.
        let name = relation_name(relid);
        let rewritten = name.strip_prefix("pg_temp_").and_then(|oid| oid.parse::<u32>().ok()).map(pg_sys::Oid::from);
        if let Some(original) = rewritten.filter(|oid| lookup(*oid).is_some()) {
            ts_error(
                crate::pg::error::FEATURE_NOT_SUPPORTED,
                &format!("ALTER TABLE would rewrite time-series table \"{}\", which is not supported", relation_name(original)),
                "Add columns without a volatile default (a constant default needs no rewrite).",
            );
        }
        ts_error(
            NOT_IN_PREREQUISITE_STATE,
            &format!("table \"{}\" is not configured as a time-series table", relation_name(relid)),
            "Call tsbucket.create_timeseries() on it before inserting rows.",
        )
    })
}

thread_local! {
    static SQL_VERSION_CHECKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The library refuses, clearly, to work on a database whose extension SQL is
/// of another version (its catalog may differ): README "Upgrades".
fn check_sql_version() {
    if SQL_VERSION_CHECKED.with(|c| c.get()) {
        return;
    }
    // tsbucket's own update scripts run at each intermediate version of a
    // chain (0.3.0 -> 0.4.0 -> ...), written for the library that ends it.
    if running_own_script() {
        return;
    }
    let installed = installed_version();
    let library = env!("CARGO_PKG_VERSION");
    if let Some(v) = installed.filter(|v| v != library) {
        ts_error(
            NOT_IN_PREREQUISITE_STATE,
            &format!("the tsbucket library is version {library}, but this database has the extension's SQL at version {v}"),
            "Bring the database to the library's version as the README's \"Upgrades\" section describes.",
        );
    }
    SQL_VERSION_CHECKED.with(|c| c.set(true));
}

const LOAD: &str = "SELECT c.store_relid, c.time_attnum, c.meta_attnums, c.span_micros, c.id_index, c.id_sequence, s.relowner, c.moves_relid, c.moves_index,
        c.tail_segments, c.tail_current, 'tsbucket.tail_drained'::regclass::oid, 'tsbucket.tail_drained_pkey'::regclass::oid
   FROM tsbucket.catalog c JOIN pg_catalog.pg_class s ON s.oid = c.id_sequence WHERE c.relid = $1";
const LOAD_WITHOUT_TAIL: &str = "SELECT c.store_relid, c.time_attnum, c.meta_attnums, c.span_micros, c.id_index, c.id_sequence, s.relowner, c.moves_relid, c.moves_index,
        NULL::oid[], NULL::oid, 0::oid, 0::oid
   FROM tsbucket.catalog c JOIN pg_catalog.pg_class s ON s.oid = c.id_sequence WHERE c.relid = $1";

/// Whether the catalog has the tail columns and the drained marks (0.6.0 on).
fn catalog_has_tails() -> bool {
    Spi::get_one::<bool>(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                         WHERE attrelid = pg_catalog.to_regclass('tsbucket.catalog') AND attname = 'tail_segments')
            AND pg_catalog.to_regclass('tsbucket.tail_drained_pkey') IS NOT NULL",
    )
    .ok()
    .flatten()
    .unwrap_or(false)
}

fn load(relid: pg_sys::Oid) -> Option<Config> {
    // pg_upgrade re-creates the schema before it carries the catalog's and the
    // stores' files over: no table is configured (nor needs to be) until then.
    // SAFETY: IsBinaryUpgrade is a bool global set from the -b option when this backend starts, read-only afterwards.
    if unsafe { pg_sys::IsBinaryUpgrade } {
        return None;
    }
    check_sql_version();
    // The catalog may not exist yet while the extension script itself runs,
    // and the scripts of a chained update before 0.6.0 (their DDL reaches this
    // library) see a catalog without tails: those tables have none yet.
    let query = if running_own_script() && !catalog_has_tails() { LOAD_WITHOUT_TAIL } else { LOAD };
    let row = Spi::connect(|client| {
        let table = client.select(query, Some(1), &[relid.into()]).ok()?;
        let row = table.first();
        let store: pg_sys::Oid = row.get(1).ok()??;
        let time: i16 = row.get(2).ok()??;
        let metas: Vec<i16> = row.get::<Vec<i16>>(3).ok()?.unwrap_or_default();
        let span: i64 = row.get(4).ok()??;
        let id_index: pg_sys::Oid = row.get(5).ok()??;
        let id_sequence: pg_sys::Oid = row.get(6).ok()??;
        let id_owner: pg_sys::Oid = row.get(7).ok()??;
        let moves = row.get::<pg_sys::Oid>(8).ok()?.zip(row.get::<pg_sys::Oid>(9).ok()?);
        let segments: Option<Vec<pg_sys::Oid>> = row.get(10).ok()?;
        let current: Option<pg_sys::Oid> = row.get(11).ok()?;
        let drained: pg_sys::Oid = row.get(12).ok()??;
        let drained_index: pg_sys::Oid = row.get(13).ok()??;
        let tail = match (segments, current) {
            (Some(s), Some(current)) if s.len() == 3 => Some(TailConfig { segments: [s[0], s[1], s[2]], current, drained, drained_index }),
            _ => None,
        };
        Some(Config {
            relid,
            store_relid: store,
            id_index,
            id_sequence,
            id_owner,
            moves,
            time_attnum: time,
            meta_attnums: metas,
            span_micros: span,
            tail,
        })
    })?;
    Some(row)
}

pub fn invalidate(relid: pg_sys::Oid) {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if relid == pg_sys::InvalidOid {
            c.clear();
        } else {
            c.remove(&relid);
        }
    });
}

thread_local! {
    static RELCACHE_GENERATION: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A count of the relcache invalidations this backend has taken in, of any
/// relation: a value remembered from before a lock and unchanged after it
/// says no transaction that invalidated a relation committed in between
/// (taking a lock takes in every invalidation committed before it).
pub fn relcache_generation() -> u64 {
    RELCACHE_GENERATION.with(|g| g.get())
}

#[pg_guard]
unsafe extern "C-unwind" fn relcache_callback(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    RELCACHE_GENERATION.with(|g| g.set(g.get().wrapping_add(1)));
    invalidate(relid);
}

pub fn init() {
    // SAFETY: called once from _PG_init; relcache_callback is a guarded extern "C-unwind" function with the signature of
    // a relcache callback, and the callback list keeps it for the life of the process, as the library stays loaded.
    unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(relcache_callback), pg_sys::Datum::from(0)) };
    // SAFETY: as above, for a syscache callback on pg_am (CREATE or DROP of an access method: the extension's
    // own, when it is created or dropped), with the signature of a syscache callback.
    unsafe { pg_sys::CacheRegisterSyscacheCallback(pg_sys::SysCacheIdentifier::AMNAME as i32, Some(am_callback), pg_sys::Datum::from(0)) };
}

/// Runs `f` as the extension's owner: the bucket stores belong to it, so that
/// users reach buckets only through their own table.
pub fn as_extension_owner<R>(f: impl FnOnce() -> R) -> R {
    // A read-only query: SPI's other path needs a transaction id.
    let owner = Spi::connect(|c| {
        c.select("SELECT extowner FROM pg_catalog.pg_extension WHERE extname = 'tsbucket'", Some(1), &[])?.first().get_one::<pg_sys::Oid>()
    })
    .ok()
    .flatten()
    // SAFETY: GetUserId returns the current user id this backend keeps (no extension row: the caller's rights stay).
    .unwrap_or_else(|| unsafe { pg_sys::GetUserId() });
    crate::pg::role::as_user(owner, false, f)
}

/// Whether this database has the extension, at this library's version (else
/// tsbucket leaves it alone outside its own functions).
pub fn extension_installed() -> bool {
    installed_version().is_some_and(|v| v == env!("CARGO_PKG_VERSION"))
}

/// The version of tsbucket's SQL in this database (None: not installed). A
/// read-only query: it runs while planning, on hot standbys too.
pub fn installed_version() -> Option<String> {
    Spi::connect(|c| {
        c.select("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'tsbucket'", Some(1), &[])?.first().get_one::<String>()
    })
    .ok()
    .flatten()
}

/// Every time-series table of this database.
pub fn all_tables() -> Vec<pg_sys::Oid> {
    Spi::connect(|c| {
        c.select("SELECT relid FROM tsbucket.catalog ORDER BY relid", None, &[])
            .map(|rows| rows.filter_map(|r| r.get::<pg_sys::Oid>(1).ok().flatten()).collect())
            .unwrap_or_default()
    })
}

/// Whether `relid` is a table of the tsbucket access method (configured or not).
pub fn is_tsbucket_table(relid: pg_sys::Oid) -> bool {
    // SAFETY: RelationIdGetRelation looks `relid` up in the relcache (NULL when no such relation), taking a reference
    // that the RelationClose below gives back.
    let rel = unsafe { pg_sys::RelationIdGetRelation(relid) };
    if rel.is_null() {
        return false;
    }
    // SAFETY: `rel` is the non-NULL relcache entry just returned; its rd_rel is read while our reference pins it, and the
    // reference is released once.
    let relam = unsafe {
        let relam = (*(*rel).rd_rel).relam;
        pg_sys::RelationClose(rel);
        relam
    };
    relam != pg_sys::InvalidOid && relam == tsbucket_am()
}

thread_local! {
    /// The tsbucket access method's oid, once looked up (None: not yet, or pg_am changed since).
    static AM_OID: std::cell::Cell<Option<pg_sys::Oid>> = const { std::cell::Cell::new(None) };
}

/// The oid of the tsbucket access method (InvalidOid when the extension is not
/// in this database), looked up once and again after pg_am changes.
fn tsbucket_am() -> pg_sys::Oid {
    AM_OID.with(|a| {
        a.get().unwrap_or_else(|| {
            // SAFETY: get_am_oid gets a static NUL-terminated name and, with missing_ok, returns InvalidOid rather than erroring.
            let oid = unsafe { pg_sys::get_am_oid(c"tsbucket".as_ptr(), true) };
            a.set(Some(oid));
            oid
        })
    })
}

#[pg_guard]
unsafe extern "C-unwind" fn am_callback(_arg: pg_sys::Datum, _cacheid: i32, _hash: u32) {
    AM_OID.with(|a| a.set(None));
}
