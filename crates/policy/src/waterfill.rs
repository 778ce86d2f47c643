//! Exact weighted water-filling over integer byte counts.
//!
//! Given a capacity `C` and slots `(W_i, lo_i, hi_i)`, find the level `λ` with
//! `Σ clamp(λ·W_i, lo_i, hi_i) = C` and return `T_i = clamp(λ·W_i, lo_i, hi_i)` rounded to whole
//! bytes so that `Σ T_i = C` exactly.
//!
//! # Algorithm
//!
//! `f(λ) = Σ clamp(λ·W_i, lo_i, hi_i)` is continuous, non-decreasing and piecewise linear; its
//! breakpoints are the `2n` rationals `lo_i/W_i` (slot `i` starts to grow) and `hi_i/W_i` (slot
//! `i` is full). Nothing sorts them (that would be `O(n log n)`).
//!
//! **Fast path** (`fill_fast`): an approximate level `λ̃` in `f64`, then one exact pass.
//!
//! 1. The bounds and weights are copied into three `f64` arrays, so that an evaluation of `f`
//!    is a loop the compiler turns into packed SIMD instructions (about 0.3 ns per slot, a
//!    sixth of a loop over structs or one that also sums the slope).
//! 2. Safeguarded Newton steps (bracketed, bisecting when a step leaves the bracket) first
//!    solve `f = C` on every 32nd slot, scaled up, for a starting level, then on all slots.
//!    `f` is concave wherever no floor binds, and Newton from below then creeps up on `λ`, so
//!    each pass also evaluates a probe beyond the Newton iterate that closes the bracket
//!    from the other side, and the next step uses the chord between the two. On the
//!    benchmark inputs (10 000 slots) that is one evaluation and 2–4 passes of two.
//! 3. If no slot is within 10⁻⁹ (relative) of one of its bounds at `λ̃`, every slot is
//!    classified at `λ̃` (at `lo`, at `hi`, growing) in one branch-free pass that also writes
//!    the shares of the slots at a bound and lists the growing ones for the rounding. The
//!    exact level follows from the classification alone, `λ = (C − Σ fixed) / Σ growing
//!    weight`, in integers; if it agrees with `λ̃` to a quarter of the margin, every class
//!    holds at it, so `f(λ) = C` exactly and `λ` is the level.
//!
//! **Exact search** (`find_level`), when the fast path gives up (a breakpoint within
//! rounding distance of `λ`, a flat `f`, no convergence): keep an interval `(left, right]` that
//! contains `λ` and the list of "open" slots whose state inside it is not yet known. Each
//! round:
//!
//! 1. takes the breakpoints of about `√open` (at least 64) evenly spaced open slots,
//!    estimates `f` at each of them from those slots alone (in `f64`, with the sampling
//!    error), and picks two pivots `p ≤ q` one standard error either side of the estimated
//!    crossing `f = C`;
//! 2. evaluates `f(p)` and `f(q)` exactly in one pass and moves the interval to
//!    `(left, p]`, `(p, q]` or `(q, right]`;
//! 3. folds every slot whose state is now constant on the interval (at `lo`, at `hi`, or
//!    growing throughout) into running sums and drops it from the open list.
//!
//! If a round settles less than a quarter of the open slots, the next one uses the exact
//! median of all remaining breakpoints (`select_nth_unstable`) as its pivot, which halves
//! them, so the search is `O(n)`. When no breakpoint is left inside, `f` is linear on the
//! interval: `λ = (C − fixed) / active_weight`. The passes over the open slots are
//! branch-free (compare results are used as 0/1 multipliers), because comparisons against a
//! pivot are coin flips that a branch predictor would lose.
//!
//! Every decision is integer arithmetic in `u128` (`f64` only proposes levels, classes and
//! pivots, and seeds divisions; each is then confirmed or corrected exactly): breakpoint
//! numerators are `u64`, denominators `u32` weights, so no product exceeds `2^127` for fewer
//! than `2^31` slots.
//!
//! Where `f` is flat at `C` (no slot strictly inside its bounds anywhere on an interval of
//! levels, so every level of it gives the same shares), the fast path finds no growing slot
//! and the exact search reports the smallest such level. When `λ` sits exactly on a
//! breakpoint, a slot at `λ·W = hi` counts as growing and one at `λ·W = lo` as at its floor,
//! which fixes the terms `num/den` of [`Level::Exact`].
//!
//! # Rounding
//!
//! Each slot first gets `clamp(⌊p·W_i/q⌋, lo_i, hi_i)`. The bytes still missing (`C − Σ`, fewer
//! than the number of growing slots) go one each to the growing slots whose exact share has a
//! fractional part, largest fractional part first, then larger weight, then lower index. The
//! result is within one byte of the exact real-valued solution for every slot. The last
//! tie-break is the slot's position, so callers that want results independent of input order
//! pass slots in a canonical order ([`crate::plan`] sorts them by name).

use std::cmp::Ordering;

mod exact;
mod fast;

use exact::find_level;
use fast::fill_fast;

/// One participant of a water-fill: a weight and the bounds its share is clamped to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot {
    /// Weight; a slot with weight 0 only receives what the weighted slots cannot hold.
    pub weight: u32,
    /// Lower bound in bytes (the floor). Treated as `min(lo, hi)`.
    pub lo: u64,
    /// Upper bound in bytes (usage or max).
    pub hi: u64,
}

impl Slot {
    /// A slot with the given weight and bounds.
    #[must_use]
    pub const fn new(weight: u32, lo: u64, hi: u64) -> Self {
        Self { weight, lo, hi }
    }

    /// `lo` clamped to `hi`, so a floor above the upper bound never raises the share.
    const fn low(&self) -> u64 {
        if self.lo < self.hi { self.lo } else { self.hi }
    }
}

/// The outcome of a water-fill, with the level it settled at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fill {
    /// One share per slot, in the slots' order.
    pub shares: Vec<u64>,
    /// How the fill ended.
    pub level: Level,
}

/// Where the water level ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `Σ hi ≤ C`: every slot got its upper bound; there is no pressure.
    Unconstrained,
    /// `Σ lo ≥ C`: every slot sits at its lower bound (which may exceed `C` in total).
    Floors,
    /// `λ = num / den` bytes per unit of weight, `Σ shares = C`.
    Exact {
        /// Numerator (bytes).
        num: u128,
        /// Denominator (weight), never 0.
        den: u128,
    },
}

impl Level {
    /// Compares the unclamped share `λ·weight` with `bytes`; `None` unless the level is
    /// [`Level::Exact`].
    #[must_use]
    pub fn share_cmp(&self, weight: u32, bytes: u64) -> Option<Ordering> {
        match *self {
            Self::Exact { num, den } => {
                Some((num * u128::from(weight)).cmp(&(u128::from(bytes) * den)))
            }
            Self::Unconstrained | Self::Floors => None,
        }
    }

    /// The unclamped share `λ·weight` in bytes (rounded down, saturating); `None` unless the
    /// level is [`Level::Exact`].
    #[must_use]
    pub fn share(&self, weight: u32) -> Option<u64> {
        match *self {
            Self::Exact { num, den } => {
                let v = num.saturating_mul(u128::from(weight)) / den.max(1);
                Some(u64::try_from(v).unwrap_or(u64::MAX))
            }
            Self::Unconstrained | Self::Floors => None,
        }
    }
}

/// Water-fill `capacity` over `slots`; see the [module documentation](self).
///
/// Returns one share per slot, in order. `Σ shares = capacity` whenever
/// `Σ lo < capacity < Σ hi`; otherwise every slot gets `hi` (enough room) or `lo` (floors
/// overcommitted).
#[must_use]
pub fn water_fill(capacity: u64, slots: &[Slot]) -> Vec<u64> {
    water_fill_level(capacity, slots).shares
}

/// Like [`water_fill`], but also reports the level the fill settled at.
#[must_use]
pub fn water_fill_level(capacity: u64, slots: &[Slot]) -> Fill {
    let cap = u128::from(capacity);
    let totals = Totals::of(slots);
    let (sum_hi, sum_lo, full_weighted) = (totals.hi, totals.lo, totals.full_weighted);
    if sum_hi <= cap {
        return Fill {
            shares: slots.iter().map(|s| s.hi).collect(),
            level: Level::Unconstrained,
        };
    }
    if sum_lo >= cap {
        return Fill {
            shares: slots.iter().map(Slot::low).collect(),
            level: Level::Floors,
        };
    }
    // If the weighted slots full still leave room, the unweighted slots share the rest
    // equally among themselves.
    if full_weighted < cap {
        return fill_unweighted(capacity, slots);
    }
    // num ≤ C, and den is a sum of weights: both fit a u64 below 2^32 slots.
    let narrow = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
    let (num, den, classified) = fill_fast(cap, slots, &totals).unwrap_or_else(|| {
        let (num, den) = find_level(cap, slots);
        (num, den, classify_exact(slots, narrow(num), narrow(den)))
    });
    Fill {
        shares: round_shares(cap, slots, classified, narrow(num), narrow(den)),
        level: Level::Exact { num, den },
    }
}

/// Where each slot's share stands once the level is known: `shares` holds `lo` or `hi` for
/// the slots at a bound and 0 for the others, whose indices are in `inside` (their exact
/// share `λW` is strictly between their bounds).
#[derive(Debug)]
struct Classified {
    shares: Vec<u64>,
    inside: Vec<u32>,
}

/// Sums and extremes over all slots, in one pass of integer arithmetic.
#[derive(Debug, Clone, Copy)]
struct Totals {
    /// `Σ hi`.
    hi: u128,
    /// `Σ lo`.
    lo: u128,
    /// `Σ hi` over the weighted slots plus `Σ lo` over the others.
    full_weighted: u128,
    /// `Σ W`.
    weight: u64,
    /// The largest `hi` of a weighted slot.
    max_hi: u64,
    /// The smallest nonzero weight (`u32::MAX` if there is none).
    min_weight: u32,
}

impl Totals {
    fn of(slots: &[Slot]) -> Self {
        let mut t = Self {
            hi: 0,
            lo: 0,
            full_weighted: 0,
            weight: 0,
            max_hi: 0,
            min_weight: u32::MAX,
        };
        for s in slots {
            let (lo, hi) = (s.low(), s.hi);
            let weighted = s.weight > 0;
            t.hi += u128::from(hi);
            t.lo += u128::from(lo);
            t.full_weighted += u128::from(if weighted { hi } else { lo });
            t.weight += u64::from(s.weight);
            t.max_hi = t.max_hi.max(hi * u64::from(weighted));
            t.min_weight = t.min_weight.min(if weighted { s.weight } else { u32::MAX });
        }
        t
    }
}

/// The first pass of the rounding at an exact level `num/den`, found by [`find_level`]:
/// classifies every slot exactly, branch-free (whether a share is inside its bounds is a coin
/// flip on real inputs, so a branch would be mispredicted half the time).
///
/// `num ≤ C < 2^64`, and `den` is a sum of weights, below `2^63` for fewer than `2^31` slots;
/// so every product below is one `u64 × u64` multiply.
fn classify_exact(slots: &[Slot], num: u64, den: u64) -> Classified {
    let mut classified = Classified {
        shares: Vec::with_capacity(slots.len()),
        inside: vec![0; slots.len()],
    };
    let mut listed = 0;
    let (num, den) = (u128::from(num), u128::from(den));
    for (i, s) in slots.iter().enumerate() {
        let exact = num * u128::from(s.weight);
        let at_lo = exact <= u128::from(s.low()) * den;
        let at_hi = (exact >= u128::from(s.hi) * den) & !at_lo;
        // Multiplications by 0 or 1: see fill_fast.
        classified
            .shares
            .push(s.low() * u64::from(at_lo) + s.hi * u64::from(at_hi));
        // Written for every slot, kept by advancing `listed`.
        if let Some(slot) = classified.inside.get_mut(listed) {
            *slot = u32::try_from(i).unwrap_or(u32::MAX);
        }
        listed += usize::from(!(at_lo | at_hi));
    }
    classified.inside.truncate(listed);
    classified
}

/// Floors the exact share of every slot inside its bounds and hands the missing bytes out as
/// the module documentation says. `num` and `den` as for [`classify_exact`].
fn round_shares(cap: u128, slots: &[Slot], classified: Classified, num: u64, den: u64) -> Vec<u64> {
    let Classified { mut shares, inside } = classified;
    // Slots whose exact share is strictly inside (lo, hi) and not a whole number of bytes,
    // as one sort key each: ascending order = larger remainder, then larger weight, then
    // lower index. The remainder is below den < 2^63 and the index below 2^31 (the
    // documented limit), so both fit their fields.
    let mut fractional: Vec<u128> = Vec::with_capacity(inside.len());
    #[expect(
        clippy::cast_precision_loss,
        reason = "only a starting estimate for div_rem, which corrects it exactly"
    )]
    let level = num as f64 / den as f64;
    for &index in &inside {
        let i = usize::try_from(index).unwrap_or(usize::MAX);
        let (Some(s), Some(share)) = (slots.get(i), shares.get_mut(i)) else {
            continue;
        };
        // lo < λW < hi: ⌊λW⌋ < hi fits a u64, and a fraction earns a spare-byte ticket.
        let exact = u128::from(num) * u128::from(s.weight);
        let (quotient, rem) = div_rem(exact, den, level * f64::from(s.weight));
        *share = u64::try_from(quotient).unwrap_or(s.hi);
        let rem = u64::try_from(rem).unwrap_or(u64::MAX);
        if rem != 0 {
            fractional
                .push((u128::from(!rem) << 64) | (u128::from(!s.weight) << 32) | u128::from(index));
        }
    }
    let total: u128 = shares.iter().map(|&s| u128::from(s)).sum();
    let missing = usize::try_from(cap.saturating_sub(total))
        .unwrap_or(usize::MAX)
        .min(fractional.len());
    if missing > 0 {
        if missing < fractional.len() {
            fractional.select_nth_unstable(missing - 1);
        }
        for &key in &fractional[..missing] {
            // The low 32 bits are the index.
            let index = usize::try_from(key & u128::from(u32::MAX)).unwrap_or(usize::MAX);
            if let Some(share) = shares.get_mut(index) {
                *share += 1;
            }
        }
    }
    shares
}

/// `(⌊a/b⌋, a mod b)` for `b > 0`, starting from a floating-point `estimate` of `a/b` and
/// correcting it exactly. `u128` division is a slow library call; with byte counts below
/// 2^52 the estimate is off by at most one and no division runs at all.
fn div_rem(a: u128, b: u64, estimate: f64) -> (u128, u128) {
    // Through i64, whose conversion is one instruction plus fix-ups (u64's needs more); a
    // negative guess (from a negative or NaN estimate) becomes 0.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "float-to-int `as` saturates (NaN → 0); the result is only a guess, checked below"
    )]
    let guess = u64::try_from(estimate as i64).unwrap_or(0);
    // The product of two u64 cannot overflow a u128: one multiplication.
    let (product, guess, b) = (
        u128::from(guess) * u128::from(b),
        u128::from(guess),
        u128::from(b),
    );
    if product <= a {
        let rem = a - product;
        if rem < b {
            return (guess, rem);
        }
        if rem < 2 * b {
            return (guess + 1, rem - b);
        }
    } else if product - a <= b {
        return (guess - 1, b - (product - a));
    }
    (a / b, a % b)
}

/// Weighted slots are full; the unweighted ones split the rest as if they had weight 1 each.
fn fill_unweighted(capacity: u64, slots: &[Slot]) -> Fill {
    let weighted_full: u64 = slots
        .iter()
        .filter(|s| s.weight > 0)
        .fold(0u64, |acc, s| acc.saturating_add(s.hi));
    let rest = capacity.saturating_sub(weighted_full);
    let zero: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].weight == 0).collect();
    let sub: Vec<Slot> = zero
        .iter()
        .map(|&i| Slot::new(1, slots[i].lo, slots[i].hi))
        .collect();
    let filled = water_fill(rest, &sub);
    let mut shares: Vec<u64> = slots.iter().map(|s| s.hi).collect();
    for (&i, share) in zero.iter().zip(filled) {
        shares[i] = share;
    }
    Fill {
        shares,
        level: Level::Unconstrained,
    }
}

#[cfg(test)]
mod tests;
