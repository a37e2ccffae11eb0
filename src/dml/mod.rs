//! DELETE and UPDATE. The executor hands us one row at a time. Each touched
//! bucket's store row is locked at once, as heap locks the rows it changes,
//! so that maintenance skips it and a second writer waits; the rows to change
//! are noted, and at the end of the statement each touched bucket is
//! rewritten once: dropped when all its rows go, re-labelled (payload
//! untouched) when its whole series moves, otherwise re-encoded without the
//! deleted rows. Every rewrite records where each surviving row went
//! (`store::moves::record_moves`), so a statement that waited for the rewriter
//! follows its rows there: `tuple_delete`/`tuple_update` report TM_Updated and
//! the executor's EvalPlanQual re-checks the row at its new place through
//! `lock_row` (tuple_lock), exactly as for a heap update chain.
//!
//! `pending` holds what statements recorded, `record` takes rows from the
//! executor, `apply` rewrites buckets at the end of a statement.

pub mod apply;
pub mod pending;
pub mod record;
