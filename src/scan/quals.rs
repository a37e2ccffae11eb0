//! Pruning conditions found in a scan's quals (time bounds, meta equalities,
//! measurement comparisons) and their values, evaluated when the scan starts
//! (parameters are known only then); and running the quals on a row.

use crate::catalog::config::Config;
use crate::pg::nodes::{is_pseudo_constant, list_ptrs, strip};
use crate::scan::prune::{Bound, BoundRange, Prune};
use pgrx::pg_sys;
use tsbucket_format::ColumnKind;

/// Built-in comparison operators of the time column's type, with their btree
/// strategies (1 <, 2 <=, 3 =, 4 >=, 5 >).
const TIMESTAMPTZ_OPS: [(u32, i32); 5] = [(1322, 1), (1323, 2), (1320, 3), (1325, 4), (1324, 5)];

const TIMESTAMP_OPS: [(u32, i32); 5] = [(2062, 1), (2063, 2), (2060, 3), (2065, 4), (2064, 5)];

/// `time <op> constant` (or `constant <op> time`) on `relid`'s time column: the
/// comparison as `time <strategy> value` (btree strategies 1 <, 2 <=, 3 =, 4 >=, 5 >).
pub(crate) unsafe fn time_bound(clause: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> Option<(i32, i64)> {
    // SAFETY: `clause` is a qual or restriction clause node (time_bound's callers pass expression trees), so its tag is readable.
    if unsafe { (*clause).type_ } != pg_sys::NodeTag::T_OpExpr {
        return None;
    }
    let e = clause as *mut pg_sys::OpExpr;
    // SAFETY: `clause` is tagged T_OpExpr, so `e` is an OpExpr; its argument List is part of the same tree.
    let args = unsafe { list_ptrs((*e).args) };
    if args.len() != 2 {
        return None;
    }
    // SAFETY: both elements of `args` are argument nodes of the OpExpr `e`; strip only follows their RelabelType chains.
    let (a, b) = unsafe { (strip(args[0] as *mut pg_sys::Node), strip(args[1] as *mut pg_sys::Node)) };
    let is_time = |n: *mut pg_sys::Node| {
        // SAFETY: `n` is a stripped argument of the time comparison `e`, a node with a readable tag.
        if unsafe { (*n).type_ } != pg_sys::NodeTag::T_Var {
            return false;
        }
        // SAFETY: this argument of `e` is tagged T_Var, so it points to a Var.
        let v = unsafe { &*(n as *const pg_sys::Var) };
        v.varno as u32 == relid && v.varlevelsup == 0 && v.varattno == time_attnum
    };
    let constant = |n: *mut pg_sys::Node| {
        // SAFETY: `n` is a stripped argument of `e`; it is read as a Const only when tagged T_Const.
        let c = unsafe { ((*n).type_ == pg_sys::NodeTag::T_Const).then(|| &*(n as *const pg_sys::Const)) };
        c.filter(|c| !c.constisnull).map(|c| c.constvalue.value() as i64)
    };
    // SAFETY: `e` is the OpExpr checked above; its operator OID is read by value.
    let opno = unsafe { (*e).opno };
    let strategy = TIMESTAMPTZ_OPS.iter().chain(TIMESTAMP_OPS.iter()).find(|(o, _)| pg_sys::Oid::from(*o) == opno)?.1;
    if is_time(a) {
        Some((strategy, constant(b)?))
    } else if is_time(b) {
        Some((6 - strategy, constant(a)?))
    } else {
        None
    }
}

/// A pruning condition found in the plan's quals, evaluated when the scan starts.
pub(super) struct Candidate {
    pub clause: *mut pg_sys::Node,
    pub target: Target,
    pub op: pg_sys::Oid,
    pub collation: pg_sys::Oid,
    pub var_first: bool,
    /// The pseudo-constant side, ready to evaluate.
    value: *mut pg_sys::ExprState,
    value_type: pg_sys::Oid,
    array: bool,
}

#[derive(Clone)]
pub(super) enum Target {
    /// The time column, with the operator's btree strategy.
    Time { strategy: i32 },
    Meta(usize),
    /// A measurement column with per-bucket min/max: attnum, the compared
    /// value's storage kind, btree strategy (1 <, 2 <=, 3 =, 4 >=, 5 >) and
    /// the value's typlen.
    Column { attnum: u16, kind: ColumnKind, strategy: i32, typlen: i16 },
    /// `(doc->>'key')::float8 <op> value` on a document column: buckets whose
    /// header statistics of the field (`FieldStats`) rule every row out are
    /// skipped. The qual still runs on the rows read (it is not decided: rows
    /// whose field is no number are cast by Postgres, with its errors).
    Field { attnum: u16, key: std::rc::Rc<[u8]>, strategy: i32 },
}

impl Target {
    /// Whether the pruning decides the qual for every row it lets through
    /// (with the row filters that check the same bounds on decoded columns),
    /// so that the row-by-row qual may be left out.
    pub fn decides(&self) -> bool {
        !matches!(self, Target::Field { .. })
    }
}

pub(super) unsafe fn find_candidates(node: *mut pg_sys::CustomScanState, config: &Config, scanrelid: u32, quals: *mut pg_sys::List) -> Vec<Candidate> {
    // SAFETY: `node` is the scan state begin is initializing, its scan relation open; `config.time_attnum` is a column
    // of that relation's descriptor.
    let (rel, time_type) = unsafe {
        let rel = (*node).ss.ss_currentRelation;
        (rel, (*crate::pg::relation::tuple_desc_attr((*rel).rd_att, config.time_attnum as usize - 1)).atttypid)
    };
    // SAFETY: check_enable_rls looks up the open scan relation `rel` by OID for the current user.
    let rls = unsafe { pg_sys::check_enable_rls((*rel).rd_id, pg_sys::InvalidOid, true) };
    let rls_active = rls == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32;
    let mut out = Vec::new();
    // SAFETY: `quals` is the plan's qual List begin hands over, alive with the plan.
    for q in unsafe { list_ptrs(quals) } {
        let clause = q as *mut pg_sys::Node;
        // SAFETY: `clause` is one of the plan's quals, an expression node whose tag is readable.
        let tag = unsafe { (*clause).type_ };
        // SAFETY: `clause` is one of the plan's quals; field_candidate reads it as an OpExpr only when tagged so.
        if let Some((target, other, var_first)) = unsafe { field_candidate(clause, scanrelid) }
            .filter(|(t, ..)| !matches!(t, Target::Field { attnum, .. } if config.meta_attnums.contains(&(*attnum as i16))))
        {
            // SAFETY: `other` is the qual's pseudo-constant side; ExecInitExpr compiles it for `node.ss.ps` in the query context.
            let value = unsafe { pg_sys::ExecInitExpr(other as *mut pg_sys::Expr, &mut (*node).ss.ps) };
            // SAFETY: `clause` is tagged T_OpExpr (field_candidate checked), so it is an OpExpr.
            let (op, collation) = unsafe { ((*(clause as *mut pg_sys::OpExpr)).opno, (*(clause as *mut pg_sys::OpExpr)).inputcollid) };
            out.push(Candidate { clause, target, op, collation, var_first, value, value_type: pg_sys::FLOAT8OID, array: false });
            continue;
        }
        let (args, op, collation, array) = match tag {
            pg_sys::NodeTag::T_OpExpr => {
                // SAFETY: this plan qual is tagged T_OpExpr, so `clause` is an OpExpr.
                let e = unsafe { &*(clause as *const pg_sys::OpExpr) };
                (e.args, e.opno, e.inputcollid, false)
            }
            pg_sys::NodeTag::T_ScalarArrayOpExpr => {
                // SAFETY: this plan qual is tagged T_ScalarArrayOpExpr, so `clause` is one.
                let e = unsafe { &*(clause as *const pg_sys::ScalarArrayOpExpr) };
                if !e.useOr {
                    continue;
                }
                (e.args, e.opno, e.inputcollid, true)
            }
            _ => continue,
        };
        // SAFETY: `args` is the argument List of that qual's operator expression.
        let args = unsafe { list_ptrs(args) };
        if args.len() != 2 {
            continue;
        }
        // SAFETY: the two elements of `args` are the qual's argument nodes; strip follows only RelabelTypes.
        let (a, b) = unsafe { (strip(args[0] as *mut pg_sys::Node), strip(args[1] as *mut pg_sys::Node)) };
        let is_our_var = |n: *mut pg_sys::Node| {
            // SAFETY: `n` is a stripped argument of this plan qual, a node with a readable tag.
            if unsafe { (*n).type_ } != pg_sys::NodeTag::T_Var {
                return false;
            }
            // SAFETY: the qual argument `n` is tagged T_Var, so it is a Var of the plan.
            let v = unsafe { &*(n as *const pg_sys::Var) };
            v.varno as u32 == scanrelid && v.varlevelsup == 0
        };
        // SAFETY: is_pseudo_constant only walks `n`, one of this qual's argument expressions.
        let constant = |n: *mut pg_sys::Node| unsafe { is_pseudo_constant(n) };
        let (var, other, var_first) = if is_our_var(a) && constant(b) {
            (a as *mut pg_sys::Var, args[1] as *mut pg_sys::Node, true)
        } else if !array && is_our_var(b) && constant(a) {
            (b as *mut pg_sys::Var, args[0] as *mut pg_sys::Node, false)
        } else {
            continue;
        };
        // SAFETY: `var` is the qual's Var of the scanned relation (is_our_var checked its tag); exprType reads the type of
        // the other side, `other`.
        let (attnum, value_type) = unsafe { ((*var).varattno, pg_sys::exprType(other)) };
        // SAFETY: column_target reads `node`'s open scan relation for the measurement column `attnum`.
        let measurement = || unsafe { column_target(node, attnum, op, value_type, array, var_first) };
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
            // SAFETY: `rel` is the open scan relation and `attnum` its meta column; lookup_type_cache returns the
            // backend-lifetime type cache entry of the column's type (or NULL).
            let family = unsafe {
                let meta_type = (*crate::pg::relation::tuple_desc_attr((*rel).rd_att, attnum as usize - 1)).atttypid;
                let cache = pg_sys::lookup_type_cache(meta_type, pg_sys::TYPECACHE_BTREE_OPFAMILY as i32);
                if cache.is_null() { pg_sys::InvalidOid } else { (*cache).btree_opf }
            };
            // SAFETY: get_op_opfamily_strategy reads the pg_amop syscache for operator `op` in the valid btree family `family`.
            let equality =
                family != pg_sys::InvalidOid && unsafe { pg_sys::get_op_opfamily_strategy(op, family) } == pg_sys::BTEqualStrategyNumber as i32;
            // SAFETY: get_opcode and get_func_leakproof are syscache lookups of the operator `op` and its function by OID.
            if !equality || (rls_active && !unsafe { pg_sys::get_func_leakproof(pg_sys::get_opcode(op)) }) {
                continue;
            }
            Target::Meta(m)
        } else if let Some(target) = measurement() {
            target
        } else {
            continue;
        };
        // SAFETY: `other` is the qual's pseudo-constant side; ExecInitExpr compiles it for `node.ss.ps` in the query context.
        let value = unsafe { pg_sys::ExecInitExpr(other as *mut pg_sys::Expr, &mut (*node).ss.ps) };
        out.push(Candidate { clause, target, op, collation, var_first, value, value_type, array });
    }
    out
}

/// `(doc->>'key')::float8 <op> value` (or `value <op> ...`), `op` one of
/// float8's btree comparisons and `value` a pseudo-constant float8: the
/// target, the value's expression, and whether the field comes first.
///
/// # Safety
/// `clause` is a qual of the scan's plan.
unsafe fn field_candidate(clause: *mut pg_sys::Node, scanrelid: u32) -> Option<(Target, *mut pg_sys::Node, bool)> {
    // SAFETY: `clause` is a plan qual (the contract), read as an OpExpr only when tagged so.
    let e = unsafe { ((*clause).type_ == pg_sys::NodeTag::T_OpExpr).then(|| &*(clause as *const pg_sys::OpExpr))? };
    // SAFETY: `e.args` is the operator's argument List, of the same qual.
    let args = unsafe { list_ptrs(e.args) };
    let [a, b] = args.as_slice() else { return None };
    let (a, b) = (*a as *mut pg_sys::Node, *b as *mut pg_sys::Node);
    // SAFETY: `a` and `b` are the qual's argument expressions.
    let ((attnum, key, cast), other, field_first) = unsafe { crate::scan::doc_keys::field_and_constant(a, b, scanrelid) }?;
    // SAFETY: exprType reads the constant side's type.
    if cast != crate::scan::doc_keys::FieldCast::Float8 || unsafe { pg_sys::exprType(other) } != pg_sys::FLOAT8OID {
        return None;
    }
    // SAFETY: comparison_of_type reads the operator's and float8's catalog entries.
    let (strategy, ..) = unsafe { crate::scan::vector_filter::comparison_of_type(pg_sys::FLOAT8OID, e.opno, pg_sys::FLOAT8OID, field_first) }?;
    // A Target keeps the operator's own strategy (evaluate turns it round by side).
    let strategy = if field_first { strategy } else { 6 - strategy };
    if attnum <= 0 {
        return None;
    }
    Some((Target::Field { attnum: attnum as u16, key: key.into(), strategy }, other, field_first))
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
    if array || attnum <= 0 {
        return None;
    }
    // SAFETY: `node` is the scan state find_candidates is filling; the executor opened its scan relation.
    let rel = unsafe { (*node).ss.ss_currentRelation };
    // The same comparisons the vector filters evaluate on the arrays. That
    // gives the strategy of `column <op> value`; a Target keeps the
    // operator's own (evaluate() turns it round by side).
    // SAFETY: `rel` is that open relation and `attnum - 1` a column index of it; comparison reads its descriptor and the
    // operator's catalog entries.
    let (strategy, kind, typlen) = unsafe { crate::scan::vector_filter::comparison(rel, attnum as usize - 1, op, value_type, var_first) }?;
    let strategy = if var_first { strategy } else { 6 - strategy };
    Some(Target::Column { attnum: attnum as u16, kind, strategy, typlen })
}

/// Evaluates the candidates' constant sides (parameters are known only now).
/// The flag says whether every value was usable (not NULL, nor a NaN bound),
/// so that pruning and the row filters decide their quals exactly.
/// `scan_cxt` holds the values for as long as the scan runs (they outlive the
/// per-tuple context, which the executor resets row by row).
pub(super) unsafe fn evaluate(node: *mut pg_sys::CustomScanState, candidates: &[Candidate], scan_cxt: pg_sys::MemoryContext) -> (Vec<Prune>, bool) {
    let mut exact = true;
    // SAFETY: `node` is the begun scan node starting a scan; ps_ExprContext is its ExprContext.
    let econtext = unsafe { (*node).ss.ps.ps_ExprContext };
    let mut time = BoundRange::default();
    let mut out = Vec::new();
    let mut columns: std::collections::BTreeMap<u16, BoundRange> = Default::default();
    let mut fields: std::collections::BTreeMap<(u16, std::rc::Rc<[u8]>), BoundRange> = Default::default();
    for c in candidates {
        let mut isnull = false;
        // SAFETY: `c.value` is the ExprState find_candidates compiled for this node, run in the node's `econtext`.
        let value = unsafe { pg_sys::ExecEvalExprSwitchContext(c.value, econtext, &mut isnull) };
        if isnull {
            // A field condition decides nothing row by row: its NULL leaves `exact` alone.
            exact &= !c.target.decides();
            continue;
        }
        match &c.target {
            &Target::Time { strategy } => {
                // Normalise `v <op> time` to `time <op'> v`.
                let strategy = if c.var_first { strategy } else { 6 - strategy };
                time.narrow(strategy, Bound::Int(value.value() as i64));
            }
            &Target::Column { attnum, kind, strategy, typlen } => {
                let v = crate::scan::prune::datum_bound(value, kind, typlen);
                // A NaN constant: leave it to the quals (NaN sorts above everything).
                if matches!(v, Bound::Float(f) if f.is_nan()) {
                    exact = false;
                    continue;
                }
                let strategy = if c.var_first { strategy } else { 6 - strategy };
                columns.entry(attnum).or_default().narrow(strategy, v);
            }
            Target::Field { attnum, key, strategy } => {
                // A field holds no NaN (JSON has none); a NaN constant says nothing about the buckets.
                let v = f64::from_bits(value.value() as u64);
                if !v.is_nan() {
                    let strategy = if c.var_first { *strategy } else { 6 - *strategy };
                    fields.entry((*attnum, key.clone())).or_default().narrow(strategy, Bound::Float(v));
                }
            }
            &Target::Meta(meta) => {
                // SAFETY: `scan_cxt` is the per-scan context (a child of the query context) the caller keeps until the scan
                // ends; `old` is switched back to below.
                let old = unsafe { pg_sys::MemoryContextSwitchTo(scan_cxt) };
                let values = if c.array {
                    // A copy in the query context: the evaluated array lives in the
                    // per-tuple context, which the executor resets row by row, and its
                    // elements are read for as long as the scan runs.
                    // SAFETY: `value` is the non-null array datum just evaluated; its detoasted copy is palloc'd in
                    // `scan_cxt`, now current, and array_elements reads that copy.
                    let elements = unsafe {
                        let array = pg_sys::pg_detoast_datum_copy(value.cast_mut_ptr()) as *mut pg_sys::ArrayType;
                        crate::pg::datum::array_elements(array)
                    };
                    elements.into_iter().flatten().collect()
                } else {
                    let (mut len, mut byval) = (0i16, false);
                    // SAFETY: get_typlenbyval reads the pg_type row of `c.value_type`; copy_datum copies the non-null
                    // `value` of that type into `scan_cxt`, now current.
                    let copy = unsafe {
                        pg_sys::get_typlenbyval(c.value_type, &mut len, &mut byval);
                        crate::pg::datum::copy_datum(value, byval, len)
                    };
                    vec![copy]
                };
                // SAFETY: `old` is the context that was current before the switch to `scan_cxt` above.
                unsafe { pg_sys::MemoryContextSwitchTo(old) };
                out.push(Prune::Meta { meta, op: c.op, collation: c.collation, meta_first: c.var_first, values });
            }
        }
    }
    if time != BoundRange::default() {
        out.push(Prune::Time(time));
    }
    out.extend(columns.into_iter().map(|(attnum, range)| Prune::Column { attnum, range }));
    // With conditions on two fields, the heap may meet one's failing cast on a
    // row the other's statistics rule out (quals of equal cost run in the
    // order written): buckets are pruned by a field only when it is the one.
    if fields.len() == 1 {
        out.extend(fields.into_iter().map(|((attnum, key), range)| Prune::Field { attnum, key, range }));
    }
    (out, exact)
}

