//! A deliberately naive water-fill, used only to cross-check [`crate::water_fill`] in tests
//! and as the baseline in the benches.
//!
//! Start every slot at `hi`; while the total is above the capacity, find the slot with the
//! largest normalised share `T_i / W_i` (that is still above its floor) by a linear scan and
//! trim it by at most `step` bytes. Cost: `O(n · (Σhi − C) / step)`, hopeless for big inputs,
//! which is the point. The result is within about `step` bytes of the exact fill per slot.
//! Unweighted slots count as having an infinite normalised share, so they are trimmed first,
//! matching [`crate::water_fill`].
//!
//! [`exact_level`] is the textbook exact algorithm instead: sort the `2n` breakpoints and sweep
//! (`O(n log n)`), an independent check of the level [`crate::water_fill`] finds.

use std::cmp::Ordering;

use crate::Slot;

/// Naive water-fill by repeated trimming; see the [module documentation](self).
///
/// `step` is clamped to at least one byte.
#[must_use]
pub fn water_fill_naive(capacity: u64, slots: &[Slot], step: u64) -> Vec<u64> {
    let lows: Vec<u64> = slots.iter().map(|s| s.lo.min(s.hi)).collect();
    let mut shares: Vec<u64> = slots.iter().map(|s| s.hi).collect();
    let total: u128 = shares.iter().map(|&s| u128::from(s)).sum();
    let floors: u128 = lows.iter().map(|&s| u128::from(s)).sum();
    if total <= u128::from(capacity) {
        return shares;
    }
    if floors >= u128::from(capacity) {
        return lows;
    }
    let mut excess = total - u128::from(capacity);
    let step = u128::from(step.max(1));
    while excess > 0 {
        let mut top: Option<usize> = None;
        for i in 0..slots.len() {
            if shares[i] <= lows[i] {
                continue;
            }
            top = match top {
                None => Some(i),
                Some(j)
                    if normalised_cmp(shares[i], slots[i].weight, shares[j], slots[j].weight)
                        == Ordering::Greater =>
                {
                    Some(i)
                }
                keep => keep,
            };
        }
        let Some(i) = top else { break };
        let room = u128::from(shares[i] - lows[i]);
        let cut = excess.min(room).min(step);
        // cut ≤ room, which came from a u64.
        shares[i] -= u64::try_from(cut).unwrap_or(0);
        excess -= cut;
    }
    shares
}

/// The exact level `λ = num / den` of a fill with `Σ lo < C < Σ hi` (weighted slots only), by
/// sorting the breakpoints and sweeping; `None` when there is no pressure, the floors fill
/// the pool, or an unweighted slot is involved.
#[must_use]
pub fn exact_level(capacity: u64, slots: &[Slot]) -> Option<(u128, u128)> {
    if slots.iter().any(|s| s.weight == 0) {
        return None;
    }
    let cap = u128::from(capacity);
    let lo = |s: &Slot| s.lo.min(s.hi);
    let sum_hi: u128 = slots.iter().map(|s| u128::from(s.hi)).sum();
    let mut fixed: u128 = slots.iter().map(|s| u128::from(lo(s))).sum();
    if sum_hi <= cap || fixed >= cap {
        return None;
    }
    // (bytes, weight, is_end): starts before ends at equal ratios so that sums never dip.
    let mut events: Vec<(u64, u32, bool)> = slots
        .iter()
        .flat_map(|s| [(lo(s), s.weight, false), (s.hi, s.weight, true)])
        .collect();
    events.sort_by(|a, b| {
        (u128::from(a.0) * u128::from(b.1))
            .cmp(&(u128::from(b.0) * u128::from(a.1)))
            .then(a.2.cmp(&b.2))
    });
    let mut active: u128 = 0;
    for (bytes, weight, is_end) in events {
        let (v, w) = (u128::from(bytes), u128::from(weight));
        // f(v) = fixed + v·active ≥ C ?
        if fixed * w + v * active >= cap * w && active > 0 {
            return Some((cap - fixed, active));
        }
        if is_end {
            fixed += v;
            active -= w;
        } else {
            fixed -= v;
            active += w;
        }
    }
    None
}

/// Compares `a / wa` with `b / wb`, where weight 0 means +∞.
fn normalised_cmp(a: u64, wa: u32, b: u64, wb: u32) -> Ordering {
    match (wa, wb) {
        (0, 0) => Ordering::Equal,
        (0, _) => Ordering::Greater,
        (_, 0) => Ordering::Less,
        _ => (u128::from(a) * u128::from(wb)).cmp(&(u128::from(b) * u128::from(wa))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naive_matches_seed_rows() {
        let slots = [
            Slot::new(1, 0, 2000),
            Slot::new(2, 0, 2000),
            Slot::new(3, 0, 2000),
        ];
        assert_eq!(water_fill_naive(5000, &slots, 1), vec![1000, 2000, 2000]);
        assert_eq!(water_fill_naive(3000, &slots, 1), vec![500, 1000, 1500]);
    }

    #[test]
    fn exact_level_of_seed_rows() {
        let slots = [
            Slot::new(1, 0, 2000),
            Slot::new(2, 0, 2000),
            Slot::new(3, 0, 2000),
        ];
        assert_eq!(exact_level(3000, &slots), Some((3000, 6)));
        assert_eq!(exact_level(4500, &slots), Some((2500, 3)));
        assert_eq!(exact_level(6000, &slots), None);
    }

    #[test]
    fn naive_respects_floors() {
        let slots = [Slot::new(1, 400, 1000), Slot::new(1, 0, 1000)];
        assert_eq!(water_fill_naive(600, &slots, 7), vec![400, 200]);
        assert_eq!(water_fill_naive(300, &slots, 7), vec![400, 0]);
    }
}
