//! Bucket ids: drawn from the table's sequence, cycling through the 36-bit
//! space, reused only once no store version carries them.

use crate::catalog::config::Config;
use crate::pg::error::ts_error;
use super::tid;
use super::bucket::COL_BUCKET_ID;
use super::moves::forget_moves;
use super::tuple::id_in_use;
use pgrx::pg_sys;

/// A new bucket id. Ids come from the table's sequence, which cycles through
/// the 36-bit id space (see tid.rs) and which only this code may advance (it
/// has no grants: nextval runs as the sequence's owner). After a
/// wrap-around an id is taken only when no store tuple version carries it
/// any more, dead ones included: VACUUM of the store frees ids for reuse.
///
/// # Safety
/// `store` must be `config`'s open bucket store.
pub unsafe fn allocate_id(store: pg_sys::Relation, config: &Config) -> i64 {
    let mut jumps = 0;
    loop {
        let id = crate::pg::role::as_user(config.id_owner, false, || {
            // SAFETY: nextval_oid takes one non-NULL oid argument, the table's id sequence from `config`, and
            // returns a non-NULL int8; as_user runs it as the sequence's owner.
            unsafe { pgrx::direct_function_call::<i64>(pg_sys::nextval_oid, &[pgrx::IntoDatum::into_datum(config.id_sequence)]) }
                .expect("nextval returns a value")
        });
        if !tid::is_usable_id(id) {
            if id > tid::MAX_BUCKET_ID {
                // A sequence made before tails (MAXVALUE 2^37 - 1) wraps at 2^36 now.
                // SAFETY: setval_oid takes the id sequence's oid and a non-NULL int8, run as its owner by as_user.
                crate::pg::role::as_user(config.id_owner, false, || unsafe {
                    pgrx::direct_function_call::<i64>(
                        pg_sys::setval_oid,
                        &[pgrx::IntoDatum::into_datum(config.id_sequence), pgrx::IntoDatum::into_datum(1i64)],
                    )
                });
            }
            continue;
        }
        // SAFETY: `store` is `config`'s open bucket store (allocate_id's contract) and config.id_index its
        // index on bucket_id, as id_in_use requires.
        let in_use = unsafe { id_in_use(store, config.id_index, id) };
        if !in_use {
            // A reused id must not lead DML that still follows its old self astray.
            // SAFETY: `config`'s moves table exists beside its store; no store version carries `id` any more.
            unsafe { forget_moves(config, id) };
            return id;
        }
        // After a wrap-around: skip the whole run of ids still in use at once.
        jumps += 1;
        if jumps > 64 {
            ts_error(
                crate::pg::error::NOT_IN_PREREQUISITE_STATE,
                "no free bucket id found for this table",
                "A table holds at most 2^36 bucket versions; VACUUM frees the ids of deleted ones.",
            );
        }
        // SAFETY: the same open `store` and bucket_id index of `config` that id_in_use was given above.
        let free = unsafe { first_free_id_from(store, config.id_index, id) };
        // SAFETY: setval_oid takes the id sequence's oid and a non-NULL int8, run as the sequence's owner by as_user.
        crate::pg::role::as_user(config.id_owner, false, || unsafe {
            pgrx::direct_function_call::<i64>(
                pg_sys::setval_oid,
                &[pgrx::IntoDatum::into_datum(config.id_sequence), pgrx::IntoDatum::into_datum((free - 1).max(1))],
            )
        });
    }
}

/// The first id at or after `id` that no store tuple version carries (the
/// index is walked in order, so a run of live ids costs one scan).
///
/// # Safety
/// `store` must be an open bucket store and `id_index` its index on bucket_id.
unsafe fn first_free_id_from(store: pg_sys::Relation, id_index: pg_sys::Oid, id: i64) -> i64 {
    // SAFETY: `id_index` is the store's bucket_id index (first_free_id_from's contract), held
    // AccessShareLock until the index_close below.
    let index = unsafe { pg_sys::index_open(id_index, pg_sys::AccessShareLock as i32) };
    let mut key = pg_sys::ScanKeyData::default();
    // SAFETY: `key` is a local btree key (int8ge on bucket_id) the scan copies; `store` is open and `index`
    // opened above; SnapshotAny shows every version, dead ones included, until systable_endscan_ordered.
    let scan = unsafe {
        pg_sys::ScanKeyInit(&mut key, 1, pg_sys::BTGreaterEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_INT8GE), pg_sys::Datum::from(id));
        pg_sys::systable_beginscan_ordered(store, index, &raw mut pg_sys::SnapshotAnyData, 1, &mut key)
    };
    let mut next = id;
    loop {
        // SAFETY: `scan` is the ordered bucket_id scan from `id` on, begun above and not yet ended.
        let tuple = unsafe { pg_sys::systable_getnext_ordered(scan, pg_sys::ScanDirection::ForwardScanDirection) };
        if tuple.is_null() {
            break;
        }
        let mut isnull = false;
        // SAFETY: `tuple` is a store tuple just returned by `scan`, valid until its next call, and rd_att of
        // the open `store` describes it.
        let found = unsafe { pg_sys::heap_getattr(tuple, (COL_BUCKET_ID + 1) as i32, (*store).rd_att, &mut isnull) }.value() as i64;
        if found > next {
            break;
        }
        next = next.max(found + 1);
    }
    // SAFETY: ends the ordered scan begun above, then closes `index` with the AccessShareLock it was opened with.
    unsafe {
        pg_sys::systable_endscan_ordered(scan);
        pg_sys::index_close(index, pg_sys::AccessShareLock as i32);
    }
    if next > tid::MAX_BUCKET_ID { 1 } else { next }
}
