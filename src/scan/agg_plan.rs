//! What the in-scan aggregation computes, as found in a plan: aggregates the
//! kernels compute over a column of the table (count, sum, avg, min, max,
//! variance, stddev, first, last), and group keys (meta columns, the time
//! column, a time bucket).

use crate::catalog::config::Config;
use crate::pg::nodes::strip;
use crate::scan::doc_keys::{FieldCast, numeric_field};
use crate::scan::time_bucket::monotone_in_time;
use pgrx::pg_sys;
use tsbucket_kernels::AggKind;

/// What an aggregate reads.
#[derive(Clone, Copy, Debug)]
pub enum ArgSource {
    /// count(*).
    Rows,
    /// A decoded column, by attnum - 1.
    Column(usize),
    /// A meta column (count only), by position among the meta columns.
    Meta(usize),
    /// A top-level field of a jsonb column cast to a number
    /// (`(doc->>'k')::float8`): its index among the scan's document fields
    /// (`rows::DocFields`), its column (attnum - 1) and the cast.
    Field { field: usize, column: usize, cast: FieldCast },
}

/// An aggregate the scan computes, as found in an Aggref.
#[derive(Clone, Copy, Debug)]
pub struct AggPlan {
    pub kind: AggKind,
    pub arg: ArgSource,
    /// The argument's type (min/max return it); InvalidOid for count(*).
    pub arg_type: pg_sys::Oid,
    /// avg of float4/float8: its final function reads N and Sx of the
    /// float8_accum state, not Sxx (so a bucket header's sum answers it).
    pub avg: bool,
}

/// A group key the scan computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyPlan {
    Meta(usize),
    /// The time column itself.
    Time,
    /// A time bucket: an expression of the time column alone, never decreasing as time grows.
    TimeBucket,
}

const ANUM_AGGTRANSFN: i16 = 4;

const ANUM_AGGCOMBINEFN: i16 = 6;

/// OIDs below this are built into Postgres (FirstGenbkiObjectId).
const FIRST_NON_BUILTIN_OID: u32 = 10_000;

/// The aggregate `aggref` computes, if the kernels can compute its partial
/// state; `args` are its arguments as expressions over the scan's relation.
/// A document field it reads goes in `fields` (once, by column and key),
/// which its `ArgSource::Field` indexes.
///
/// # Safety
/// `aggref` must be a valid Aggref; `rel` the open table of `config`.
pub unsafe fn classify_aggref(
    aggref: *mut pg_sys::Aggref,
    args: &[*mut pg_sys::Node],
    config: &Config,
    rel: pg_sys::Relation,
    scanrelid: u32,
    fields: &mut Vec<(usize, Vec<u8>, FieldCast)>,
) -> Option<AggPlan> {
    // SAFETY: `aggref` is a valid Aggref, as this function's contract requires; it is only read.
    let a = unsafe { &*aggref };
    if !a.aggfilter.is_null()
        || !a.aggdistinct.is_null()
        || !a.aggorder.is_null()
        || a.aggkind != b'n' as std::ffi::c_char
        || a.agglevelsup != 0
        || a.aggvariadic
    {
        return None;
    }
    // SAFETY: SearchSysCache1 looks up the pg_aggregate row of `a.aggfnoid` and pins it (or returns NULL).
    let tuple = unsafe { pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::AGGFNOID as i32, pg_sys::Datum::from(a.aggfnoid)) };
    if tuple.is_null() {
        return None;
    }
    let mut isnull = false;
    // SAFETY: `tuple` is that pinned pg_aggregate row: its transition and combine functions are read by SysCacheGetAttr
    // before ReleaseSysCache unpins it.
    let (transfn, combinefn) = unsafe {
        let transfn = pg_sys::Oid::from(
            pg_sys::SysCacheGetAttr(pg_sys::SysCacheIdentifier::AGGFNOID as i32, tuple, ANUM_AGGTRANSFN, &mut isnull).value() as u32,
        );
        let combinefn = pg_sys::SysCacheGetAttr(pg_sys::SysCacheIdentifier::AGGFNOID as i32, tuple, ANUM_AGGCOMBINEFN, &mut isnull).value() as u32;
        pg_sys::ReleaseSysCache(tuple);
        (transfn, combinefn)
    };
    // SAFETY: first_or_last's contract holds: this runs in the planning or executor transaction, which can read the catalog.
    if let Some(kind) = unsafe { first_or_last(a.aggfnoid, transfn) } {
        // SAFETY: `args` are this Aggref's argument expressions and `rel` the open table of `config`, as this function's
        // contract gives them.
        return unsafe { classify_first_last(kind, args, config, rel, scanrelid, fields) };
    }
    let arg = match args {
        [] => None,
        [a] => Some(*a),
        _ => return None,
    };
    // Built-in aggregates only: Postgres calls combine functions only of
    // aggregates marked parallel safe, which built-in ones of this list are.
    if combinefn == 0 || u32::from(transfn) >= FIRST_NON_BUILTIN_OID || u32::from(a.aggfnoid) >= FIRST_NON_BUILTIN_OID {
        return None;
    }
    // SAFETY: get_func_name returns a palloc'd NUL-terminated copy of the transition function's name, or NULL.
    let name = unsafe { pg_sys::get_func_name(transfn) };
    if name.is_null() {
        return None;
    }
    // SAFETY: `name` is that non-null NUL-terminated string, palloc'd in CurrentMemoryContext and not freed here.
    let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
    let kind = AggKind::from_transition(&name)?;
    let Some(arg) = arg else {
        return (kind == AggKind::CountRows && a.aggstar).then_some(AggPlan { kind, arg: ArgSource::Rows, arg_type: pg_sys::InvalidOid, avg: false });
    };
    let e = arg;
    // SAFETY: `e` is the Aggref's single argument expression and `rel` the open table of `config`, as this function's
    // contract requires.
    if let Some(found) = unsafe { field_arg(e, config, rel, scanrelid) } {
        let (attnum, key, cast, stored, typid) = found?;
        if !kernel_reads(kind, stored, typid) {
            return None;
        }
        let column = attnum as usize - 1;
        let field = crate::scan::doc_keys::field_index(fields, column, &key, cast);
        let avg = u32::from(a.aggfnoid) == pg_sys::F_AVG_FLOAT8;
        return Some(AggPlan { kind, arg: ArgSource::Field { field, column, cast }, arg_type: typid, avg });
    }
    // SAFETY: `e` is the Aggref's single argument expression, valid as this function's contract requires of `args`.
    if unsafe { (*e).type_ } != pg_sys::NodeTag::T_Var {
        return None;
    }
    // SAFETY: the aggregate's argument `e` is tagged T_Var, so it points to a Var.
    let v = unsafe { &*(e as *const pg_sys::Var) };
    if v.varno as u32 != scanrelid || v.varlevelsup != 0 || v.varattno <= 0 {
        return None;
    }
    let attnum = v.varattno;
    // SAFETY: `rel` is the open table of `config` (this function's contract) and `attnum` a positive column of the scanned
    // relation, so within its descriptor.
    let att = unsafe { &*crate::pg::relation::tuple_desc_attr((*rel).rd_att, attnum as usize - 1) };
    // Not domains: their storage follows the type OID, not the base type's.
    // SAFETY: get_typtype reads the pg_type syscache row of the column type `att.atttypid`.
    if att.attisdropped || unsafe { pg_sys::get_typtype(att.atttypid) } != pg_sys::TYPTYPE_BASE as std::ffi::c_char {
        return None;
    }
    if let Some(m) = config.meta_attnums.iter().position(|&x| x == attnum) {
        return (kind == AggKind::CountValues).then_some(AggPlan { kind, arg: ArgSource::Meta(m), arg_type: att.atttypid, avg: false });
    }
    // The kernels read integers and floats as stored: the argument must be
    // the column itself, of a type stored that way.
    let stored = crate::pg::datum::kind_for_type(att.atttypid, att.attlen, att.attbyval);
    // SAFETY: exprType only reads the node tag and type fields of the argument Var `e`.
    if !kernel_reads(kind, stored, att.atttypid) || (kind.reads_values() && unsafe { pg_sys::exprType(e) } != att.atttypid) {
        return None;
    }
    let avg = matches!(u32::from(a.aggfnoid), pg_sys::F_AVG_FLOAT4 | pg_sys::F_AVG_FLOAT8);
    Some(AggPlan { kind, arg: ArgSource::Column(attnum as usize - 1), arg_type: att.atttypid, avg })
}

/// A document field's number cast (`(doc->>'k')::float8 | int | bigint`)
/// as an aggregate's argument: None when `e` is no such cast; Some(None)
/// when it is one the scan cannot read (of a dropped or meta column); else
/// its column's attnum, key and cast, and the kind and type of its values.
///
/// # Safety
/// `e` must be a valid expression; `rel` the open table of `config`.
#[allow(clippy::type_complexity, clippy::option_option)]
unsafe fn field_arg(
    e: *mut pg_sys::Node,
    config: &Config,
    rel: pg_sys::Relation,
    scanrelid: u32,
) -> Option<Option<(i16, Vec<u8>, FieldCast, tsbucket_format::ColumnKind, pg_sys::Oid)>> {
    // SAFETY: `e` is a valid expression (the contract); numeric_field only reads it.
    let (attnum, key, cast) = unsafe { numeric_field(e, scanrelid) }?;
    // SAFETY: `rel` is the open table of `config` and `attnum` a positive column of it, so within its descriptor.
    let att = unsafe { &*crate::pg::relation::tuple_desc_attr((*rel).rd_att, attnum as usize - 1) };
    // (numeric_field finds casts only.)
    let Some((typid, layout)) = crate::scan::doc_keys::cast_type(cast) else { return Some(None) };
    if att.attisdropped || config.meta_attnums.contains(&attnum) {
        return Some(None);
    }
    Some(Some((attnum, key, cast, layout.kind, typid)))
}

/// Whether the kernels compute aggregate `kind` over values of type `typid` stored as `stored`.
fn kernel_reads(kind: AggKind, stored: tsbucket_format::ColumnKind, typid: pg_sys::Oid) -> bool {
    use tsbucket_format::ColumnKind as K;
    let float = matches!(stored, K::Float64 | K::Float32);
    match kind {
        _ if !kind.reads_values() => true,
        AggKind::SumFloat8 | AggKind::AccumFloat => float,
        AggKind::SumInt | AggKind::AvgInt => stored == K::Int,
        // The float comparison for float storage, the integer one for integers.
        _ => float == matches!(typid, pg_sys::FLOAT4OID | pg_sys::FLOAT8OID) && (float || matches!(stored, K::Int | K::Timestamp)),
    }
}

/// First or Last, when `aggfnoid` is tsbucket.first / tsbucket.last (an
/// aggregate of the extension's schema with their name and transition
/// function: an aggregate a user made of the same transition function has
/// other support functions, or none).
///
/// # Safety
/// Reads the catalog: a transaction must be open.
unsafe fn first_or_last(aggfnoid: pg_sys::Oid, transfn: pg_sys::Oid) -> Option<AggKind> {
    // SAFETY: a transaction is open (this function's contract); the schema name is a static NUL-terminated literal.
    let schema = unsafe { pg_sys::get_namespace_oid(c"tsbucket".as_ptr(), true) };
    if schema == pg_sys::InvalidOid {
        return None;
    }
    let name_in_schema = |f: pg_sys::Oid| -> Option<Vec<u8>> {
        // SAFETY: get_func_namespace is a pg_proc syscache lookup of `f` in the open transaction.
        if unsafe { pg_sys::get_func_namespace(f) } != schema {
            return None;
        }
        // SAFETY: get_func_name returns a palloc'd NUL-terminated copy of `f`'s name (or NULL), copied out before use ends.
        let name = unsafe { pg_sys::get_func_name(f) };
        // SAFETY: `name` is checked non-null first; it is then that NUL-terminated string.
        (!name.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes().to_vec())
    };
    match (name_in_schema(aggfnoid)?.as_slice(), name_in_schema(transfn)?.as_slice()) {
        (b"first", b"_first_transition") => Some(AggKind::First),
        (b"last", b"_last_transition") => Some(AggKind::Last),
        _ => None,
    }
}

/// first(value, time) / last(value, time) over the table's time column, the
/// value any column of the table (its datum is what the row would hold) or a
/// document field's number cast (`(doc->>'k')::float8 | int | bigint`, read
/// from its sub-column as the other aggregates read it).
///
/// # Safety
/// `args` must be valid expressions; `rel` the open table of `config`.
unsafe fn classify_first_last(
    kind: AggKind,
    args: &[*mut pg_sys::Node],
    config: &Config,
    rel: pg_sys::Relation,
    scanrelid: u32,
    fields: &mut Vec<(usize, Vec<u8>, FieldCast)>,
) -> Option<AggPlan> {
    let [value, time] = args else { return None };
    let column = |e: *mut pg_sys::Node| -> Option<i16> {
        // SAFETY: `e` is one of first/last's argument expressions, valid as this function's contract requires.
        if unsafe { (*e).type_ } != pg_sys::NodeTag::T_Var {
            return None;
        }
        // SAFETY: this first/last argument is tagged T_Var, so `e` is a Var.
        let v = unsafe { &*(e as *const pg_sys::Var) };
        (v.varno as u32 == scanrelid && v.varlevelsup == 0 && v.varattno > 0).then_some(v.varattno)
    };
    if column(*time)? != config.time_attnum {
        return None;
    }
    // SAFETY: `value` is first/last's first argument expression and `rel` the open table of `config` (the contract).
    if let Some(found) = unsafe { field_arg(*value, config, rel, scanrelid) } {
        let (attnum, key, cast, _, typid) = found?;
        let column = attnum as usize - 1;
        let field = crate::scan::doc_keys::field_index(fields, column, &key, cast);
        return Some(AggPlan { kind, arg: ArgSource::Field { field, column, cast }, arg_type: typid, avg: false });
    }
    let attnum = column(*value)?;
    // SAFETY: `rel` is the open table of `config` (the contract); `attnum` is the positive attribute of the value Var,
    // inside `rel.rd_att`.
    let att = unsafe { &*crate::pg::relation::tuple_desc_attr((*rel).rd_att, attnum as usize - 1) };
    if att.attisdropped {
        return None;
    }
    let arg = match config.meta_attnums.iter().position(|&x| x == attnum) {
        Some(m) => ArgSource::Meta(m),
        None => ArgSource::Column(attnum as usize - 1),
    };
    Some(AggPlan { kind, arg, arg_type: att.atttypid, avg: false })
}

/// The group key `e` (an expression over the scan's relation) is.
///
/// # Safety
/// `e` must be a valid expression.
pub unsafe fn classify_key(e: *mut pg_sys::Node, config: &Config, scanrelid: u32) -> Option<KeyPlan> {
    // SAFETY: `e` is a valid group-key expression (this function's contract); strip only follows RelabelTypes.
    let s = unsafe { strip(e) };
    // SAFETY: `s` is the stripped group key, a node of the same valid expression.
    if unsafe { (*s).type_ } == pg_sys::NodeTag::T_Var {
        // SAFETY: the stripped key `s` is tagged T_Var, so it is a Var.
        let v = unsafe { &*(s as *const pg_sys::Var) };
        if v.varno as u32 != scanrelid || v.varlevelsup != 0 {
            return None;
        }
        if v.varattno == config.time_attnum {
            return Some(KeyPlan::Time);
        }
        return config.meta_attnums.iter().position(|&m| m == v.varattno).map(KeyPlan::Meta);
    }
    let (mut len, mut byval) = (0i16, false);
    // SAFETY: exprType reads the result type of the key `e`, and get_typlenbyval that type's pg_type row.
    unsafe { pg_sys::get_typlenbyval(pg_sys::exprType(e), &mut len, &mut byval) };
    // SAFETY: contain_volatile_functions and monotone_in_time only walk the valid key expression `e`.
    (byval && unsafe { !pg_sys::contain_volatile_functions(e) && monotone_in_time(e, scanrelid, config.time_attnum) }).then_some(KeyPlan::TimeBucket)
}
