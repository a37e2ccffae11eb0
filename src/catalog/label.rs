//! The security label provider `tsbucket`: how a time-series table's
//! configuration travels through pg_dump and pg_restore with no extra steps.
//!
//! tsbucket keeps a table's configuration (time and meta columns by name,
//! bucket span, expiry, per-series retention) as its security label of
//! provider `tsbucket` (`tsbucket._label_of` makes the text). pg_dump writes a
//! table's labels right after its CREATE TABLE and before its rows, in every
//! format, with `-t` and in pg_dumpall. On restore, `SECURITY LABEL FOR
//! tsbucket ON TABLE t IS '...'` reaches `check_relabel`, which configures the
//! still empty table, so the COPY of its rows that follows fills buckets.
//! CREATE TABLE ... USING tsbucket loads this library first, so the provider
//! is registered even without shared_preload_libraries.

use crate::catalog::config;
use crate::pg::error::{FEATURE_NOT_SUPPORTED, ts_error};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{CStr, CString};

const PROVIDER: &CStr = c"tsbucket";

pub fn init() {
    // SAFETY: called once from _PG_init; PROVIDER is a 'static NUL-terminated name, and check_relabel a guarded
    // extern "C-unwind" hook of the signature register_label_provider expects, both kept for the process's life.
    unsafe { pg_sys::register_label_provider(PROVIDER.as_ptr(), Some(check_relabel)) };
}

#[pg_guard]
unsafe extern "C-unwind" fn check_relabel(object: *const pg_sys::ObjectAddress, label: *const std::ffi::c_char) {
    // SAFETY: for SECURITY LABEL, Postgres passes in `object` the address of the labelled object, valid during this
    // hook call, and in `label` NULL or a NUL-terminated string; both are copied into Rust values here.
    let (object, label) = unsafe { (*object, (!label.is_null()).then(|| CStr::from_ptr(label).to_string_lossy().into_owned())) };
    relabel(object, label);
}

fn relabel(object: pg_sys::ObjectAddress, label: Option<String>) {
    let relid = object.objectId;
    // SAFETY: get_rel_relkind reads the syscache entry of `relid` (0 when there is none); it has no other effect.
    let relkind = unsafe { pg_sys::get_rel_relkind(relid) } as u8;
    if object.classId == pg_sys::RelationRelationId && object.objectSubId == 0 && relkind == pg_sys::RELKIND_PARTITIONED_TABLE {
        return relabel_partitioned(relid, label);
    }
    if object.classId != pg_sys::RelationRelationId || object.objectSubId != 0 || !config::is_tsbucket_table(relid) {
        ts_error(
            FEATURE_NOT_SUPPORTED,
            "security labels of provider tsbucket apply only to tables created USING tsbucket",
            "tsbucket writes these labels itself; they hold a time-series table's configuration for pg_dump. \
             A time-series table cannot change its access method (Citus's alter_table_set_access_method copies \
             the label): create a table of the other kind and copy the rows (INSERT ... SELECT).",
        );
    }
    let Some(label) = label else {
        ts_error(
            FEATURE_NOT_SUPPORTED,
            &format!("cannot remove the tsbucket label of table \"{}\"", crate::pg::relation::relation_name(relid)),
            "The label holds the table's time-series configuration, which pg_dump needs.",
        );
    };
    // pg_upgrade restores the schema, labels included, and then carries the
    // catalog's and the stores' files over: the configuration arrives with them.
    // SAFETY: IsBinaryUpgrade is only set at startup of a pg_upgrade (-b) server; a copy of it is read here.
    if unsafe { pg_sys::IsBinaryUpgrade } {
        return;
    }
    if config::lookup(relid).is_some() {
        if current_label(relid).as_deref() != Some(label.as_str()) && !take_label(relid, &label) {
            ts_error(
                FEATURE_NOT_SUPPORTED,
                &format!("table \"{}\" is already a time-series table; its tsbucket label is kept by tsbucket", crate::pg::relation::relation_name(relid)),
                "Change the configuration with tsbucket.alter_timeseries() or tsbucket.set_series_retention().",
            );
        }
        return;
    }
    // SECURITY LABEL checked that the caller owns the table. The store and the
    // catalog rows belong to the extension owner, as create_timeseries makes them.
    config::as_extension_owner(|| {
        Spi::run_with_args("SELECT tsbucket._configure_from_label($1, $2)", &[relid.into(), label.as_str().into()])
            .unwrap_or_else(|e| ts_error(FEATURE_NOT_SUPPORTED, &e.to_string(), "Check the table's definition against the label."))
    });
}

/// A new label on a configured table: its settings taken from tsbucket's
/// own relabelling of a Citus table's shards, or from Citus carrying a
/// shell's new label (tsbucket._take_label); refused otherwise. As the caller,
/// whom SECURITY LABEL found owning the table.
fn take_label(relid: pg_sys::Oid, label: &str) -> bool {
    Spi::get_one_with_args::<bool>("SELECT tsbucket._take_label($1, $2)", &[relid.into(), label.into()])
        .unwrap_or_else(|e| ts_error(FEATURE_NOT_SUPPORTED, &e.to_string(), "Check the table's definition against the label."))
        .unwrap_or(false)
}

/// A partitioned table's label is its configuration (it holds no rows, and
/// has no store): its partitions take it, those there now here, later ones
/// as they are created or attached (tsbucket._partition_guard).
fn relabel_partitioned(relid: pg_sys::Oid, label: Option<String>) {
    let name = crate::pg::relation::relation_name(relid);
    let Some(label) = label else {
        ts_error(
            FEATURE_NOT_SUPPORTED,
            &format!("cannot remove the tsbucket label of table \"{name}\""),
            "The label holds the time-series configuration its partitions take, which pg_dump needs.",
        );
    };
    // SAFETY: IsBinaryUpgrade is only set at startup of a pg_upgrade (-b) server; a copy of it is read here.
    if unsafe { pg_sys::IsBinaryUpgrade } {
        return;
    }
    match stored_label(relid) {
        Some(current) if current == label => {}
        Some(_) => ts_error(
            FEATURE_NOT_SUPPORTED,
            &format!("table \"{name}\" is already a time-series table; its tsbucket label is kept by tsbucket"),
            "Its time and meta columns and bucket span are fixed at creation.",
        ),
        // As the caller: each partition's own SECURITY LABEL checks that the caller owns it.
        None => Spi::run_with_args("SELECT tsbucket._label_partitioned($1, $2)", &[relid.into(), label.as_str().into()])
            .unwrap_or_else(|e| ts_error(FEATURE_NOT_SUPPORTED, &e.to_string(), "Check the partitions' definitions against the label.")),
    }
}

/// The label the catalog says the table should have. Read as the extension
/// owner: the retention overrides in it are not readable by every role.
fn current_label(relid: pg_sys::Oid) -> Option<String> {
    config::as_extension_owner(|| Spi::get_one_with_args::<String>("SELECT tsbucket._label_of($1)", &[relid.into()]).ok().flatten())
}

/// Writes the table's label from its current configuration (or removes it
/// when the table is not a time-series table): only ever what the catalog says.
pub fn sync_label(relid: pg_sys::Oid) {
    let label = current_label(relid);
    if stored_label(relid) != label {
        write_label(relid, label.as_deref());
    }
}

/// The tsbucket label stored on table `relid`, if any.
fn stored_label(relid: pg_sys::Oid) -> Option<String> {
    let address = pg_sys::ObjectAddress { classId: pg_sys::RelationRelationId, objectId: relid, objectSubId: 0 };
    // SAFETY: `address` is a local ObjectAddress of table `relid` and PROVIDER a static NUL-terminated name;
    // GetSecurityLabel returns NULL or a NUL-terminated label palloc'd in the current memory context, copied here.
    unsafe {
        let stored = pg_sys::GetSecurityLabel(&address, PROVIDER.as_ptr());
        (!stored.is_null()).then(|| CStr::from_ptr(stored).to_string_lossy().into_owned())
    }
}

/// Stores `label` (None: none) as table `relid`'s tsbucket label, without the
/// provider's hook: SetSecurityLabel does not call it, so this does not recurse.
fn write_label(relid: pg_sys::Oid, label: Option<&str>) {
    let label = label.map(|l| CString::new(l).expect("jsonb text has no NUL"));
    let address = pg_sys::ObjectAddress { classId: pg_sys::RelationRelationId, objectId: relid, objectSubId: 0 };
    // SAFETY: `address` is a local ObjectAddress of table `relid` and PROVIDER a static NUL-terminated name; the label
    // is NULL or `label`'s NUL-terminated CString, alive until the end of this function.
    unsafe { pg_sys::SetSecurityLabel(&address, PROVIDER.as_ptr(), label.as_ref().map_or(std::ptr::null(), |l| l.as_ptr())) };
}

/// Replaces the label of partitioned time-series table `relid` (the caller
/// checked ownership).
pub fn set_partitioned_label(relid: pg_sys::Oid, label: &str) {
    // SAFETY: get_rel_relkind reads the syscache entry of `relid`; it has no other effect.
    if unsafe { pg_sys::get_rel_relkind(relid) } as u8 != pg_sys::RELKIND_PARTITIONED_TABLE || stored_label(relid).is_none() {
        ts_error(FEATURE_NOT_SUPPORTED, "the table is not a partitioned time-series table", "Call tsbucket.create_timeseries() on it first.");
    }
    write_label(relid, Some(label));
}

/// Whether partitioned table `relid` is a time-series table (has a tsbucket label).
pub fn is_partitioned_timeseries(relid: pg_sys::Oid) -> bool {
    stored_label(relid).is_some()
}
