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
//! **Fast path** (`find_level_fast`): safeguarded Newton steps on `f` in `f64` (bracketed,
//! bisecting when a step leaves the bracket; 5–12 passes on the benchmark inputs) give an
//! approximate level `λ̃`. Every slot is classified at `λ̃` (at `lo`, at `hi`, growing); the
//! exact level follows from the classification alone, `λ = (C − Σ fixed) / Σ growing weight`,
//! in integers. The classification is accepted if every slot is more than 10⁻⁹ (relative)
//! from its bounds at `λ̃` and `λ` agrees with `λ̃` to a quarter of that, or else if every
//! slot's class is checked to hold at `λ` exactly. An accepted classification means
//! `f(λ) = C` exactly, so `λ` is the level.
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
//! pivots, and seeds divisions; each is then confirmed or corrected exactly): breakpoint numerators are `u64`,
//! denominators `u32` weights, so no product exceeds `2^127` for fewer than `2^31` slots.
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
    let sum_hi: u128 = slots.iter().map(|s| u128::from(s.hi)).sum();
    if sum_hi <= cap {
        return Fill {
            shares: slots.iter().map(|s| s.hi).collect(),
            level: Level::Unconstrained,
        };
    }
    let sum_lo: u128 = slots.iter().map(|s| u128::from(s.low())).sum();
    if sum_lo >= cap {
        return Fill {
            shares: slots.iter().map(Slot::low).collect(),
            level: Level::Floors,
        };
    }
    // Weighted slots full, unweighted ones at their floor: if that still leaves room, the
    // unweighted slots share the rest equally among themselves.
    let full_weighted: u128 = slots
        .iter()
        .map(|s| u128::from(if s.weight > 0 { s.hi } else { s.low() }))
        .sum();
    if full_weighted < cap {
        return fill_unweighted(capacity, slots);
    }
    let (num, den) = find_level_fast(cap, slots).unwrap_or_else(|| find_level(cap, slots));
    Fill {
        shares: round_shares(cap, slots, num, den),
        level: Level::Exact { num, den },
    }
}

/// The fast path: find `λ` in `f64` by safeguarded Newton steps on `f`, classify every slot
/// (at `lo`, at `hi`, growing) at that approximate level, then derive the exact level from the
/// classification, `λ = (C − Σ fixed) / Σ growing weight`, and verify exactly that every slot's
/// class holds at it. A verified classification means `f(λ) = C` exactly, so `λ` is the level
/// (or one with the same shares). `None` — floating-point trouble near a breakpoint, or a flat
/// `f` — sends the caller to the exact search, [`find_level`].
fn find_level_fast(cap: u128, slots: &[Slot]) -> Option<(u128, u128)> {
    #[expect(
        clippy::cast_precision_loss,
        reason = "approximations; the exact verification below decides"
    )]
    let points: Vec<(f64, f64, f64)> = slots
        .iter()
        .map(|s| (s.low() as f64, s.hi as f64, f64::from(s.weight)))
        .collect();
    #[expect(
        clippy::cast_precision_loss,
        reason = "approximations; the exact verification below decides"
    )]
    let cap_f = cap as f64;
    // f and its slope at λ, in f64, branch-free, over LANES independent accumulators so the
    // compiler can keep them in one vector register (float sums cannot be reordered
    // otherwise).
    const LANES: usize = 4;
    let eval = |level: f64| {
        let mut f = [0.0_f64; LANES];
        let mut g = [0.0_f64; LANES];
        let term = |&(lo, hi, w): &(f64, f64, f64)| {
            let x = level * w;
            let inside = if (x > lo) & (x < hi) { w } else { 0.0 };
            // Selects (maxsd/minsd), not clamp/max/min with their NaN handling: lo ≤ hi and
            // nothing here is NaN.
            let raised = if x < lo { lo } else { x };
            (if raised > hi { hi } else { raised }, inside)
        };
        let chunks = points.chunks_exact(LANES);
        let tail = chunks.remainder();
        for chunk in chunks {
            for lane in 0..LANES {
                let (c, d) = term(&chunk[lane]);
                f[lane] += c;
                g[lane] += d;
            }
        }
        for p in tail {
            let (c, d) = term(p);
            f[0] += c;
            g[0] += d;
        }
        (f.iter().sum::<f64>(), g.iter().sum::<f64>())
    };
    // Bracket: f(0) = Σ lo < C ≤ f(∞); the largest hi/W is as good as ∞.
    let (mut below, mut above) = (
        0.0_f64,
        points
            .iter()
            .filter(|p| p.2 > 0.0)
            .map(|&(_, hi, w)| hi / w)
            .fold(0.0, f64::max),
    );
    let total_weight: f64 = points.iter().map(|p| p.2).sum();
    let mut level = if total_weight > 0.0 {
        cap_f / total_weight
    } else {
        0.0
    };
    let mut converged = false;
    for _ in 0..64 {
        let (f, g) = eval(level);
        // Close enough to classify: the exact check below has the last word.
        if (f - cap_f).abs() <= cap_f * 1e-12 {
            converged = true;
            break;
        }
        if f < cap_f {
            below = level;
        } else {
            above = level;
        }
        let newton = if g > 0.0 {
            level + (cap_f - f) / g
        } else {
            f64::NAN
        };
        let next = if newton > below && newton < above {
            newton
        } else {
            0.5 * (below + above)
        };
        if (next - level).abs() <= level.abs() * 1e-15 {
            level = next;
            converged = true;
            break;
        }
        level = next;
    }
    if !converged || !level.is_finite() {
        return None;
    }
    // Classify at the approximate level and sum exactly. A class is "clear" when λ̃W is more
    // than MARGIN (relative) away from the slot's bounds.
    const MARGIN: f64 = 1e-9;
    let class = |&(lo, hi, w): &(f64, f64, f64)| {
        let x = level * w;
        let at_lo = x <= lo;
        (at_lo, (x >= hi) & !at_lo)
    };
    let (mut fixed, mut weight) = (0u128, 0u128);
    let mut clear = true;
    for (s, p) in slots.iter().zip(&points) {
        let (at_lo, at_hi) = class(p);
        let (lo, hi, w) = *p;
        let x = level * w;
        clear &= (x <= lo * (1.0 - MARGIN))
            | (x >= hi * (1.0 + MARGIN))
            | ((x >= lo * (1.0 + MARGIN)) & (x <= hi * (1.0 - MARGIN)));
        fixed += u128::from(s.low()) * u128::from(at_lo) + u128::from(s.hi) * u128::from(at_hi);
        weight += u128::from(s.weight) * u128::from(!(at_lo | at_hi));
    }
    if weight == 0 || fixed > cap {
        return None;
    }
    let (num, den) = (cap - fixed, weight);
    // If every class is clear and the exact level is within a quarter margin of λ̃, every
    // class holds at the exact level: the rounding errors involved (about 2^-50 relative)
    // are far below the margin. Otherwise check every slot exactly.
    #[expect(
        clippy::cast_precision_loss,
        reason = "compared with a margin far above the rounding error"
    )]
    let exact_f = num as f64 / den as f64;
    if clear && (exact_f - level).abs() <= level * MARGIN / 4.0 {
        return Some((num, den));
    }
    // Verify: at lo ⇒ λW ≤ lo; at hi ⇒ λW ≥ hi; growing ⇒ lo ≤ λW ≤ hi.
    let mut valid = true;
    for (s, p) in slots.iter().zip(&points) {
        let (at_lo, at_hi) = class(p);
        let share = num * u128::from(s.weight);
        let (lo, hi) = (u128::from(s.low()) * den, u128::from(s.hi) * den);
        let fits_lo = share <= lo;
        let fits_hi = share >= hi;
        let fits_inside = (lo <= share) & (share <= hi);
        valid &= (at_lo & fits_lo) | (at_hi & fits_hi) | (!(at_lo | at_hi) & fits_inside);
    }
    valid.then_some((num, den))
}

/// A non-negative rational `num/den`; `den == 0` stands for +∞.
#[derive(Debug, Clone, Copy)]
struct Ratio {
    num: u64,
    den: u32,
}

impl Ratio {
    const INFINITY: Self = Self {
        num: u64::MAX,
        den: 0,
    };

    fn cmp(self, other: Self) -> Ordering {
        (u128::from(self.num) * u128::from(other.den))
            .cmp(&(u128::from(other.num) * u128::from(self.den)))
    }
}

/// `a/wa ≤ b/wb`, without branches (`wa` or `wb` may be 0 for +∞ as in [`Ratio`]).
#[inline]
fn le(a: u64, wa: u32, b: u64, wb: u32) -> bool {
    u128::from(a) * u128::from(wb) <= u128::from(b) * u128::from(wa)
}

/// An open slot in the search: weight and bounds (`lo ≤ hi` applied).
#[derive(Debug, Clone, Copy)]
struct Open {
    lo: u64,
    hi: u64,
    weight: u32,
}

/// How many open slots the pivots are estimated from each round, at least.
const SAMPLE: usize = 64;

/// Sample size for `open` open slots: about `√open`, within `SAMPLE..=512`, so that the
/// estimate's error shrinks as inputs grow while it stays a small part of a pass.
fn sample_size(open: usize) -> usize {
    open.isqrt().clamp(SAMPLE, 512)
}

/// Finds `λ = num/den` for `Σ lo < C ≤ f(∞)`; see the module documentation.
///
/// The loops over the open slots are written without data-dependent branches: comparisons
/// against a pivot are coin flips on real inputs, and mispredicted branches, not arithmetic,
/// would dominate the run time.
fn find_level(cap: u128, slots: &[Slot]) -> (u128, u128) {
    let mut fixed: u128 = 0;
    let mut active_weight: u128 = 0;
    let mut open: Vec<Open> = Vec::with_capacity(slots.len());
    for s in slots {
        if s.weight == 0 {
            fixed += u128::from(s.low());
        } else {
            open.push(Open {
                lo: s.low(),
                hi: s.hi,
                weight: s.weight,
            });
        }
    }
    let mut left = Ratio { num: 0, den: 1 };
    let mut right = Ratio::INFINITY;
    let mut candidates: Vec<Ratio> = Vec::with_capacity(2 * sample_size(open.len()) + 2);
    let mut previous_open = usize::MAX;
    let mut first = true;
    loop {
        // Settle every open slot whose state is constant on (left, right]: full (hi ≤ left),
        // at its floor (lo ≥ right) or growing throughout (lo ≤ left, hi ≥ right). The three
        // cases exclude each other because lo ≤ hi and left < right. Nothing settles on the
        // first interval, (0, ∞), that would not be harmless to keep open.
        if !first {
            let bounded = right.den != 0;
            let mut kept = 0;
            for j in 0..open.len() {
                let s = open[j];
                let full = le(s.hi, s.weight, left.num, left.den);
                let floored = le(right.num, right.den, s.lo, s.weight) & bounded;
                let growing = le(s.lo, s.weight, left.num, left.den)
                    & le(right.num, right.den, s.hi, s.weight)
                    & bounded;
                fixed +=
                    u128::from(s.hi) * u128::from(full) + u128::from(s.lo) * u128::from(floored);
                active_weight += u128::from(s.weight) * u128::from(growing);
                open[kept] = s;
                kept += usize::from(!(full | floored | growing));
            }
            open.truncate(kept);
        }
        first = false;
        if open.is_empty() {
            break;
        }
        // Every open slot has at least one breakpoint inside the interval, so the candidates
        // are never empty, and each round moves a bound onto a candidate: it ends.
        let stalled = open.len().saturating_mul(4) > previous_open.saturating_mul(3);
        previous_open = open.len();
        let stride = if stalled {
            1
        } else {
            open.len().div_ceil(sample_size(open.len()))
        };
        candidates.clear();
        for s in open.iter().step_by(stride) {
            for num in [s.lo, s.hi] {
                let b = Ratio { num, den: s.weight };
                if b.cmp(left) == Ordering::Greater && b.cmp(right) == Ordering::Less {
                    candidates.push(b);
                }
            }
        }
        if candidates.is_empty() {
            // Unreachable by the invariant above; stop rather than loop or panic.
            break;
        }
        let (p, q) = if stalled {
            // The estimate did not work out (or the input is adversarial): the exact median
            // of all breakpoints halves them.
            let mid = candidates.len() / 2;
            let (_, &mut m, _) = candidates.select_nth_unstable_by(mid, |a, b| a.cmp(*b));
            (m, m)
        } else {
            estimate_bracket(cap, fixed, active_weight, &open, stride, &mut candidates)
        };
        // f at both pivots in one pass, exactly.
        let (mut at_p, mut at_q) = (fixed, fixed);
        let (mut grow_p, mut grow_q) = (active_weight, active_weight);
        for s in &open {
            let (lo, hi, w) = (u128::from(s.lo), u128::from(s.hi), u128::from(s.weight));
            let p_lo = le(p.num, p.den, s.lo, s.weight);
            let p_hi = le(s.hi, s.weight, p.num, p.den) & !p_lo;
            let q_lo = le(q.num, q.den, s.lo, s.weight);
            let q_hi = le(s.hi, s.weight, q.num, q.den) & !q_lo;
            at_p += lo * u128::from(p_lo) + hi * u128::from(p_hi);
            grow_p += w * u128::from(!(p_lo | p_hi));
            at_q += lo * u128::from(q_lo) + hi * u128::from(q_hi);
            grow_q += w * u128::from(!(q_lo | q_hi));
        }
        let reaches = |at: u128, grow: u128, m: Ratio| {
            let (num, den) = (u128::from(m.num), u128::from(m.den));
            at * den + num * grow >= cap * den
        };
        if reaches(at_p, grow_p, p) {
            right = p;
        } else if reaches(at_q, grow_q, q) {
            left = p;
            right = q;
        } else {
            left = q;
        }
    }
    // Every slot is settled; f is linear on (left, right]. The caller guarantees
    // f(left) < C ≤ f(right), so the slope is positive; guard anyway instead of dividing by 0.
    if active_weight == 0 {
        return (u128::from(left.num), u128::from(left.den.max(1)));
    }
    (cap.saturating_sub(fixed), active_weight)
}

/// An `f64` ordered by `total_cmp`, as a sort key.
#[derive(Debug, Clone, Copy, PartialEq)]
struct F64Key(f64);

impl Eq for F64Key {}

impl PartialOrd for F64Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for F64Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// How many standard errors of the sampled estimate the pivots keep from the crossing.
const CONFIDENCE: f64 = 1.0;

/// Picks two pivots `p ≤ q` among `candidates` (breakpoints of every `stride`-th open slot)
/// that probably bracket `λ` closely. `f` is estimated at a candidate from the sampled slots
/// alone (mean contribution × open slots, plus the settled sums), with the sampling standard
/// error of that estimate; `p` is the last candidate whose estimate stays [`CONFIDENCE`]
/// errors below `C`, `q` the first that is as far above. Only the choice of pivots is
/// approximate (`f64`); the caller evaluates `f` at them exactly.
fn estimate_bracket(
    cap: u128,
    fixed: u128,
    active_weight: u128,
    open: &[Open],
    stride: usize,
    candidates: &mut [Ratio],
) -> (Ratio, Ratio) {
    #[expect(
        clippy::cast_precision_loss,
        reason = "an estimate that only chooses pivots; correctness never depends on it"
    )]
    let approx = |r: &Ratio| r.num as f64 / f64::from(r.den);
    // Sorting by the approximation is enough to choose pivots; p ≤ q is restored exactly
    // below.
    candidates.sort_by_cached_key(|r| F64Key(approx(r)));
    #[expect(
        clippy::cast_precision_loss,
        reason = "an estimate that only chooses pivots; correctness never depends on it"
    )]
    let (population, sampled, fixed_f, active_f, cap_f) = (
        open.len() as f64,
        open.len().div_ceil(stride) as f64,
        fixed as f64,
        active_weight as f64,
        cap as f64,
    );
    // Finite-population correction: a sample of everything has no error.
    let correction = (1.0 - sampled / population).max(0.0);
    // (estimate, standard error) of f at a candidate.
    #[expect(
        clippy::cast_precision_loss,
        reason = "an estimate that only chooses pivots; correctness never depends on it"
    )]
    let estimate = |b: &Ratio| {
        let level = approx(b);
        let (sum, squares) = open
            .iter()
            .step_by(stride)
            .fold((0.0, 0.0), |(s, q), slot| {
                let c = (level * f64::from(slot.weight)).clamp(slot.lo as f64, slot.hi as f64);
                (s + c, q + c * c)
            });
        let mean = sum / sampled;
        let variance = (squares / sampled - mean * mean).max(0.0);
        let error = population * (variance * correction / sampled).sqrt();
        (fixed_f + active_f * level + population * mean, error)
    };
    // First candidate for which `reaches(estimate, error)` holds (it is monotone enough).
    let first = |candidates: &[Ratio], reaches: &dyn Fn(f64, f64) -> bool| {
        let (mut lo, mut hi) = (0, candidates.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (f, e) = estimate(&candidates[mid]);
            if reaches(f, e) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    };
    let last = candidates.len().saturating_sub(1);
    let below = first(candidates, &|f, e| f + CONFIDENCE * e >= cap_f);
    let above = first(candidates, &|f, e| f - CONFIDENCE * e >= cap_f);
    let p = candidates[below.saturating_sub(1).min(last)];
    let q = candidates[above.min(last)];
    if p.cmp(q) == Ordering::Greater {
        (q, p)
    } else {
        (p, q)
    }
}

/// Floors each exact share and hands the missing bytes out as the module documentation says.
fn round_shares(cap: u128, slots: &[Slot], num: u128, den: u128) -> Vec<u64> {
    let mut shares = Vec::with_capacity(slots.len());
    // Slots whose exact share is strictly inside (lo, hi) and not a whole number of bytes,
    // as one sort key each: ascending order = larger remainder, then larger weight, then
    // lower index. The remainder is below den = Σ weights < 2^63 and the index below 2^31
    // (the documented limit), so both fit their fields.
    let mut fractional: Vec<u128> = Vec::new();
    // Pass 1, branch-free: slots at lo or hi get that share; the others (λW strictly
    // inside) are listed for pass 2, which needs a division each.
    let mut inside = vec![0u32; slots.len()];
    let mut listed = 0;
    for (i, s) in slots.iter().enumerate() {
        let exact = num * u128::from(s.weight);
        let at_lo = exact <= u128::from(s.low()) * den;
        let at_hi = (exact >= u128::from(s.hi) * den) & !at_lo;
        shares.push(s.low() * u64::from(at_lo) + s.hi * u64::from(at_hi));
        if let Some(slot) = inside.get_mut(listed) {
            *slot = u32::try_from(i).unwrap_or(u32::MAX);
        }
        listed += usize::from(!(at_lo | at_hi));
    }
    inside.truncate(listed);
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
        let (quotient, rem) = div_rem(num * u128::from(s.weight), den, level * f64::from(s.weight));
        *share = u64::try_from(quotient).unwrap_or(s.hi);
        if rem != 0 {
            let rem = u64::try_from(rem).unwrap_or(u64::MAX);
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
fn div_rem(a: u128, b: u128, estimate: f64) -> (u128, u128) {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float-to-int `as` saturates (NaN → 0); the result is only a guess, checked below"
    )]
    let guess = estimate as u64;
    // With b < 2^64 the product of two u64 cannot overflow a u128: one multiplication.
    if let Ok(b64) = u64::try_from(b) {
        let product = u128::from(guess) * u128::from(b64);
        let guess = u128::from(guess);
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    prop_compose! {
        fn slots_and_capacity()(
            raw in proptest::collection::vec(
                (1u32..=10_000, 0u64..=1 << 36, 0u64..=1 << 36, any::<bool>()),
                1..40,
            ),
            permille in 0u128..=1000,
        ) -> (u64, Vec<Slot>) {
            let slots: Vec<Slot> = raw
                .into_iter()
                .map(|(w, a, b, floored)| Slot::new(w, if floored { a.min(b) } else { 0 }, a.max(b)))
                .collect();
            let lo: u128 = slots.iter().map(|s| u128::from(s.low())).sum();
            let hi: u128 = slots.iter().map(|s| u128::from(s.hi)).sum();
            let cap = lo + (hi - lo) * permille / 1000;
            (u64::try_from(cap).unwrap_or(u64::MAX), slots)
        }
    }

    proptest! {
        /// Both searches — the f64 fast path (when it answers) and the exact selection it
        /// falls back to — find the level of the textbook sort-and-sweep.
        #[test]
        fn both_searches_find_the_swept_level((capacity, slots) in slots_and_capacity()) {
            let Some((num, den)) = crate::reference::exact_level(capacity, &slots) else {
                return Ok(());
            };
            let cap = u128::from(capacity);
            let (a, b) = find_level(cap, &slots);
            prop_assert_eq!(a * den, num * b, "exact search");
            if let Some((a, b)) = find_level_fast(cap, &slots) {
                prop_assert_eq!(a * den, num * b, "fast path");
            }
        }
    }

    #[test]
    fn empty_input_gives_empty_output() {
        assert!(water_fill(100, &[]).is_empty());
        assert!(water_fill(0, &[]).is_empty());
    }

    #[test]
    fn enough_room_gives_everyone_hi() {
        let slots = [Slot::new(1, 0, 10), Slot::new(5, 3, 20)];
        assert_eq!(water_fill(30, &slots), vec![10, 20]);
        assert_eq!(water_fill_level(30, &slots).level, Level::Unconstrained);
    }

    #[test]
    fn floors_above_capacity_give_everyone_lo() {
        let slots = [Slot::new(1, 10, 100), Slot::new(1, 20, 100)];
        let fill = water_fill_level(25, &slots);
        assert_eq!(fill.shares, vec![10, 20]);
        assert_eq!(fill.level, Level::Floors);
    }

    #[test]
    fn floor_above_hi_is_clamped_to_hi() {
        let slots = [Slot::new(1, 500, 100), Slot::new(1, 0, 100)];
        assert_eq!(water_fill(150, &slots), vec![100, 50]);
    }

    #[test]
    fn zero_capacity_gives_floors() {
        let slots = [Slot::new(1, 0, 100), Slot::new(3, 7, 100)];
        assert_eq!(water_fill(0, &slots), vec![0, 7]);
    }

    #[test]
    fn shares_follow_weights_and_caps() {
        // Seed 002, t4: weights 1,2,3, 2000 each, capacity 4500 → 833⅓, 1666⅔, 2000.
        let slots = [
            Slot::new(1, 0, 2000),
            Slot::new(2, 0, 2000),
            Slot::new(3, 0, 2000),
        ];
        assert_eq!(water_fill(4500, &slots), vec![833, 1667, 2000]);
    }

    #[test]
    fn leftover_bytes_go_to_the_largest_fraction() {
        let slots = [
            Slot::new(1, 0, 100),
            Slot::new(1, 0, 100),
            Slot::new(1, 0, 100),
        ];
        let shares = water_fill(100, &slots);
        assert_eq!(shares.iter().sum::<u64>(), 100);
        // Equal remainders and weights: lower index first.
        assert_eq!(shares, vec![34, 33, 33]);
    }

    #[test]
    fn floor_binds_and_others_share_the_rest() {
        let slots = [Slot::new(1, 400, 1000), Slot::new(1, 0, 1000)];
        assert_eq!(water_fill(600, &slots), vec![400, 200]);
    }

    #[test]
    fn unweighted_slots_only_get_what_is_left() {
        let slots = [Slot::new(0, 0, 100), Slot::new(1, 0, 100)];
        assert_eq!(water_fill(120, &slots), vec![20, 100]);
        assert_eq!(water_fill(80, &slots), vec![0, 80]);
    }

    #[test]
    fn huge_values_do_not_overflow() {
        let slots = [
            Slot::new(10_000, 0, u64::MAX),
            Slot::new(1, 0, u64::MAX),
            Slot::new(u32::MAX, u64::MAX - 1, u64::MAX),
        ];
        let shares = water_fill(u64::MAX, &slots);
        assert_eq!(shares[2], u64::MAX - 1);
        assert_eq!(
            shares.iter().map(|&s| u128::from(s)).sum::<u128>(),
            u128::from(u64::MAX)
        );
    }

    #[test]
    fn many_ties_agree_with_the_naive_loop() {
        // Few distinct weights and sizes: many equal breakpoints, which stalls sampled pivots
        // and exercises the exact-median fallback.
        let slots: Vec<Slot> = (0u32..300)
            .map(|i| Slot::new(1 + i % 3, u64::from(i % 5), 10 + u64::from(i % 7)))
            .collect();
        let demand: u64 = slots.iter().map(|s| s.hi).sum();
        for capacity in [0, 700, demand / 2, demand - 1, demand] {
            let fast = water_fill(capacity, &slots);
            let naive = crate::reference::water_fill_naive(capacity, &slots, 1);
            for (i, (f, n)) in fast.iter().zip(&naive).enumerate() {
                assert!(
                    f.abs_diff(*n) <= 1,
                    "capacity {capacity}, slot {i}: {f} vs {n}"
                );
            }
        }
        let identical = vec![Slot::new(7, 0, 1000); 1000];
        let shares = water_fill(500_000, &identical);
        assert!(shares.iter().all(|&s| s == 500));
    }

    #[test]
    fn div_rem_corrects_any_estimate() {
        for (a, b) in [
            (0u128, 1u128),
            (7, 3),
            (1 << 100, 12_345),
            (u128::MAX, 1),
            (99, 100),
        ] {
            for estimate in [0.0, -1.0, f64::NAN, 1e40, (a as f64) / (b as f64)] {
                assert_eq!(
                    div_rem(a, b, estimate),
                    (a / b, a % b),
                    "{a}/{b} ≈ {estimate}"
                );
            }
        }
    }

    #[test]
    fn level_reports_exact_lambda() {
        let slots = [
            Slot::new(1, 0, 2000),
            Slot::new(2, 0, 2000),
            Slot::new(3, 0, 2000),
        ];
        let fill = water_fill_level(3000, &slots);
        assert_eq!(fill.level, Level::Exact { num: 3000, den: 6 });
        assert_eq!(fill.shares, vec![500, 1000, 1500]);
    }
}
