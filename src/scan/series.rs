//! Where series fall in meta order, for the ordered scans (`ordered`): the
//! positions of the series met so far (ties between rows of equal time), and
//! the series of a series-index walk as they come, with the tail's series
//! waiting to be placed among them.

use crate::catalog::config::Config;
use crate::store::bucket::StoredBucket;
use pgrx::pg_sys;
use std::cell::Cell;
use std::rc::Rc;

/// Positions of the series met so far in meta order (the series index's:
/// each type's default btree order, NULLs last), for ordering rows of equal
/// time by meta. Inserting a series shifts the positions after it, which
/// keeps every existing pair in order: keys already in a heap stay valid.
pub(super) struct SeriesRanks {
    pub(super) cmp: Vec<(pg_sys::FmgrInfo, pg_sys::Oid)>,
    pub(super) byval_len: Vec<(bool, i16)>,
    pub(super) descending: bool,
    pub(super) sorted: Vec<(Vec<Option<pg_sys::Datum>>, Rc<Cell<u32>>)>,
}

impl SeriesRanks {
    pub(super) unsafe fn new(rel: pg_sys::Relation, config: &Config, descending: bool) -> SeriesRanks {
        let mut cmp = Vec::new();
        let mut byval_len = Vec::new();
        for &attnum in &config.meta_attnums {
            // SAFETY: `rel` is the open table the ordered scan begins on and `attnum` one of its meta columns, so
            // `attnum - 1` is below the natts of its descriptor.
            let att = unsafe { &*crate::pg::relation::tuple_desc_attr((*rel).rd_att, attnum as usize - 1) };
            // SAFETY: in the scan's transaction; CurrentMemoryContext is the scan's, which outlives the ranks.
            let finfo = unsafe { crate::pg::fmgr::type_support(att.atttypid, crate::pg::fmgr::Support::Compare, pg_sys::CurrentMemoryContext) };
            cmp.push((finfo, att.attcollation));
            byval_len.push((att.attbyval, att.attlen));
        }
        SeriesRanks { cmp, byval_len, descending, sorted: Vec::new() }
    }

    pub(super) unsafe fn compare(cmp: &mut [(pg_sys::FmgrInfo, pg_sys::Oid)], a: &[Option<pg_sys::Datum>], b: &[Option<pg_sys::Datum>]) -> std::cmp::Ordering {
        use std::cmp::Ordering::{Equal, Greater, Less};
        for ((x, y), (finfo, collation)) in a.iter().zip(b).zip(cmp.iter_mut()) {
            let o = match (x, y) {
                (None, None) => Equal,
                (None, Some(_)) => Greater,
                (Some(_), None) => Less,
                // SAFETY: the type's btree comparison function on values of the type.
                (Some(x), Some(y)) => unsafe { (pg_sys::FunctionCall2Coll(finfo, *collation, *x, *y).value() as i32).cmp(&0) },
            };
            if o != Equal {
                return o;
            }
        }
        Equal
    }

    /// The tie-break of `stored`'s series, inserting the series if new
    /// (its values copied into `cxt`).
    pub(super) unsafe fn tie_of(&mut self, stored: &StoredBucket, cxt: pg_sys::MemoryContext) -> (Rc<Cell<u32>>, bool) {
        let metas: Vec<Option<pg_sys::Datum>> = (0..self.cmp.len()).map(|i| stored.meta_datum(i)).collect();
        let cmp = &mut self.cmp;
        // SAFETY: `cmp` holds each meta column's btree comparison (SeriesRanks::new); `sorted`'s values and `metas` are
        // values of those columns.
        let found = self.sorted.binary_search_by(|(v, _)| unsafe { Self::compare(cmp, v, &metas) });
        let cell = match found {
            Ok(i) => self.sorted[i].1.clone(),
            Err(i) => {
                for (_, c) in &self.sorted[i..] {
                    c.set(c.get() + 1);
                }
                // SAFETY: `cxt` is the scan's context, alive as long as the ranks that keep these copies; `metas` are the
                // bucket's meta values, of the types `byval_len` describes.
                let copies: Vec<Option<pg_sys::Datum>> = unsafe {
                    let old = pg_sys::MemoryContextSwitchTo(cxt);
                    let copies =
                        metas.iter().zip(&self.byval_len).map(|(m, &(byval, len))| m.map(|d| crate::pg::datum::copy_datum(d, byval, len))).collect();
                    pg_sys::MemoryContextSwitchTo(old);
                    copies
                };
                let cell = Rc::new(Cell::new(i as u32));
                self.sorted.insert(i, (copies, cell.clone()));
                cell
            }
        };
        (cell, self.descending)
    }
}

/// Numbers the series of a series-index walk as they come: headers of one
/// series (equal meta values by the index's equality) are adjacent.
pub(super) struct SeriesTracker {
    pub(super) eq: Vec<(pg_sys::FmgrInfo, pg_sys::Oid)>,
    /// Each meta column's btree comparison, to place the tail's series among the walk's.
    pub(super) cmp: Vec<(pg_sys::FmgrInfo, pg_sys::Oid)>,
    /// The current series' meta values (copied into the scan's context).
    pub(super) current: Option<Vec<Option<pg_sys::Datum>>>,
    pub(super) byval_len: Vec<(bool, i16)>,
    pub(super) rank: i64,
    /// Holds `current`'s copies; reset for each new series.
    pub(super) values_cxt: pg_sys::MemoryContext,
    /// The tail's groups not yet placed, in the walk's series order.
    pub(super) tail: std::collections::VecDeque<(StoredBucket, pg_sys::MemoryContext)>,
    /// Tail series placed since the walk's last new series (their ranks fall between).
    pub(super) placed_between: i64,
}


impl SeriesTracker {
    /// The rank of the series `stored` belongs to (a new one when its meta
    /// differs); `cxt` holds only the current series' values.
    pub(super) unsafe fn rank_of(&mut self, stored: &StoredBucket, cxt: pg_sys::MemoryContext) -> i64 {
        let metas: Vec<Option<pg_sys::Datum>> = (0..self.eq.len()).map(|i| stored.meta_datum(i)).collect();
        let same = self.current.as_ref().is_some_and(|cur| {
            cur.iter().zip(&metas).zip(self.eq.iter_mut()).all(|((a, b), (finfo, collation))| match (a, b) {
                (None, None) => true,
                // SAFETY: `finfo` is the meta column type's equality copied from the type cache (begin_series_order); `a`
                // and `b` are values of that column.
                (Some(a), Some(b)) => unsafe { pg_sys::FunctionCall2Coll(finfo, *collation, *a, *b) }.value() != 0,
                _ => false,
            })
        });
        if !same {
            self.rank += 1;
            // Only the current series' values are kept.
            // SAFETY: `cxt` is `values_cxt`, which holds only `self.current`'s copies, replaced just below; `metas` are the
            // bucket's meta values, of the types `byval_len` describes.
            let copies: Vec<Option<pg_sys::Datum>> = unsafe {
                pg_sys::MemoryContextReset(cxt);
                let old = pg_sys::MemoryContextSwitchTo(cxt);
                let copies =
                    metas.iter().zip(&self.byval_len).map(|(m, &(byval, len))| m.map(|d| crate::pg::datum::copy_datum(d, byval, len))).collect();
                pg_sys::MemoryContextSwitchTo(old);
                copies
            };
            self.current = Some(copies);
        }
        self.rank
    }
}
