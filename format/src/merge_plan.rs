//! Which under-filled buckets of one series and window a background
//! compaction merges, and when it leaves them as they are.
//!
//! Merging every under-filled bucket of a window each round (what an explicit
//! `tsbucket.compact` does) rewrites a series' growing bucket once per drain:
//! a series receiving `r` rows per drain writes each row about
//! `max_count / (2 r)` times before its bucket fills, in WAL and in dead
//! store versions. A round instead leaves the open window's pieces to grow
//! size-tiered, as an LSM tree does: pieces of the same tier (rows in
//! `[K^t, K^(t+1))`) merge once `K` of them exist, so a row is rewritten
//! about `log_K(max_count)` times at most, and a window holds a bounded
//! number of pieces (at most `K - 1` per tier). Once the window's rows would
//! fill a bucket, or the window has ended, every piece merges (the layout a
//! COPY of the same rows leaves).

/// Pieces of one tier that merge into one.
pub const TIER_FANOUT: usize = 8;

/// One piece of a series-window: an under-filled bucket, or the rows a drain
/// brings (which are written either way: as a bucket of their own, or merged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub rows: usize,
    /// Rows from the tail, not yet in any bucket.
    pub new: bool,
}

fn tier(rows: usize) -> u32 {
    let mut t = 0;
    let mut x = rows.max(1);
    while x >= TIER_FANOUT {
        x /= TIER_FANOUT;
        t += 1;
    }
    t
}

/// The sets of `pieces` (indexes) to write, each as one merge: every set
/// with two or more pieces, or holding the new rows. Pieces in no set stay as
/// they are. `settle` (an explicit compaction, or a window that has ended)
/// merges everything; so does a window whose rows fill a bucket.
pub fn plan(pieces: &[Piece], max_count: usize, settle: bool) -> Vec<Vec<usize>> {
    let total: usize = pieces.iter().map(|p| p.rows).sum();
    let has_new = pieces.iter().any(|p| p.new);
    if settle || total >= max_count {
        let old = pieces.iter().filter(|p| !p.new).count();
        // Only worth it when it saves a bucket (or the new rows must go somewhere).
        if has_new || (old >= 2 && total.div_ceil(max_count.max(1)) < old) {
            return vec![(0..pieces.len()).collect()];
        }
        return Vec::new();
    }
    // Tiered: a set's size is the sum of its pieces'; sets of one tier merge
    // once TIER_FANOUT of them exist, smallest tier first, until none does.
    let mut sets: Vec<(usize, Vec<usize>)> = pieces.iter().enumerate().map(|(i, p)| (p.rows, vec![i])).collect();
    loop {
        let mut by_tier: std::collections::BTreeMap<u32, Vec<usize>> = std::collections::BTreeMap::new();
        for (s, (rows, _)) in sets.iter().enumerate() {
            by_tier.entry(tier(*rows)).or_default().push(s);
        }
        let Some(full) = by_tier.into_values().find(|v| v.len() >= TIER_FANOUT) else { break };
        let mut merged = (0, Vec::new());
        for &s in full.iter().rev() {
            let (rows, members) = sets.swap_remove(s);
            merged.0 += rows;
            merged.1.extend(members);
        }
        sets.push(merged);
    }
    sets.into_iter()
        .map(|(_, mut members)| {
            members.sort_unstable();
            members
        })
        .filter(|members| members.len() >= 2 || members.iter().any(|&i| pieces[i].new))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn old(rows: usize) -> Piece {
        Piece { rows, new: false }
    }
    fn new(rows: usize) -> Piece {
        Piece { rows, new: true }
    }

    #[test]
    fn new_rows_alone_become_a_bucket() {
        assert_eq!(plan(&[old(200), new(200)], 1000, false), vec![vec![1]]);
    }

    #[test]
    fn rows_that_fill_a_bucket_merge_everything() {
        assert_eq!(plan(&[old(400), old(400), new(200)], 1000, false), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn settling_merges_when_it_saves_buckets() {
        assert_eq!(plan(&[old(10), old(20)], 1000, true), vec![vec![0, 1]]);
        assert!(plan(&[old(600), old(600)], 1000, true).is_empty());
        assert!(plan(&[old(10)], 1000, true).is_empty());
    }

    #[test]
    fn a_full_tier_merges() {
        let mut pieces = vec![old(1); TIER_FANOUT - 1];
        pieces.push(new(1));
        assert_eq!(plan(&pieces, 1000, false), vec![(0..TIER_FANOUT).collect::<Vec<_>>()]);
        // One short of a tier: only the new rows are written.
        assert_eq!(plan(&pieces[1..], 1000, false), vec![vec![TIER_FANOUT - 2]]);
    }

    /// Simulated drains of `r` rows a round: rows written per row stored stays
    /// logarithmic, and a window never holds many pieces.
    fn simulate(r: usize, max_count: usize) -> (f64, usize) {
        let (mut pieces, mut written, mut total, mut most): (Vec<usize>, usize, usize, usize) = (Vec::new(), 0, 0, 0);
        while total < 50 * max_count {
            total += r;
            let mut all: Vec<Piece> = pieces.iter().map(|&p| old(p)).collect();
            all.push(new(r));
            let sets = plan(&all, max_count, false);
            let mut keep: Vec<bool> = vec![true; all.len()];
            let mut out = Vec::new();
            for set in &sets {
                let rows: usize = set.iter().map(|&i| all[i].rows).sum();
                written += rows;
                set.iter().for_each(|&i| keep[i] = false);
                let mut left = rows;
                while left >= max_count {
                    left -= max_count;
                }
                if left > 0 {
                    out.push(left);
                }
            }
            out.extend(all.iter().zip(&keep).filter(|(_, k)| **k).map(|(p, _)| p.rows));
            pieces = out;
            most = most.max(pieces.len());
        }
        (written as f64 / total as f64, most)
    }

    #[test]
    fn rewrites_stay_logarithmic() {
        for r in [1, 3, 10, 50, 100, 200, 400, 999] {
            let (amplification, most) = simulate(r, 1000);
            assert!(amplification <= 5.0, "{r} rows a drain: each row written {amplification:.2} times");
            assert!(most <= 4 * TIER_FANOUT, "{r} rows a drain: {most} pieces in one window");
        }
    }

    proptest! {
        #[test]
        fn sets_are_disjoint_and_cover_the_new_rows(rows in proptest::collection::vec(1usize..1200, 0..40), newcomer in 0usize..1200, settle: bool) {
            let mut pieces: Vec<Piece> = rows.iter().map(|&r| old(r)).collect();
            if newcomer > 0 {
                pieces.push(new(newcomer));
            }
            let sets = plan(&pieces, 1000, settle);
            let mut seen = vec![false; pieces.len()];
            for set in &sets {
                prop_assert!(!set.is_empty());
                for &i in set {
                    prop_assert!(!seen[i]);
                    seen[i] = true;
                }
            }
            for (i, p) in pieces.iter().enumerate() {
                if p.new {
                    prop_assert!(seen[i]);
                }
            }
        }
    }
}
