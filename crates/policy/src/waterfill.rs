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

/// The slots' bounds and weights as `f64`, one array each, for the approximate search: loops
/// over separate arrays compile to packed (SIMD) instructions, which a loop over structs
/// does not.
///
/// The three arrays share one allocation (`lo`, then `hi`, then `weight`): besides saving two
/// calls to the allocator, one block larger than glibc's mmap threshold (128 KiB, that is
/// above about 5 500 slots) makes it raise its heap trim threshold, where three smaller
/// blocks would be handed back to the kernel on every call and fault in again on the next
/// (measured: 56 page faults per call at 10 000 slots).
#[derive(Debug, Default)]
struct Approx {
    values: Vec<f64>,
}

/// Lanes of the evaluation loops: independent accumulators, because float sums cannot be
/// reordered otherwise, and the compiler packs them into vector registers.
const LANES: usize = 8;

impl Approx {
    #[expect(
        clippy::cast_precision_loss,
        reason = "approximations; the exact sums and margins decide"
    )]
    fn new(slots: &[Slot]) -> Self {
        let mut values = Vec::with_capacity(3 * slots.len());
        values.extend(slots.iter().map(|s| s.low() as f64));
        values.extend(slots.iter().map(|s| s.hi as f64));
        values.extend(slots.iter().map(|s| f64::from(s.weight)));
        Self { values }
    }

    /// The arrays `(lo, hi, weight)`.
    fn columns(&self) -> (&[f64], &[f64], &[f64]) {
        let n = self.values.len() / 3;
        let (lo, rest) = self.values.split_at(n.min(self.values.len()));
        let (hi, weight) = rest.split_at(n.min(rest.len()));
        (lo, hi, weight)
    }

    /// The number of slots.
    fn len(&self) -> usize {
        self.values.len() / 3
    }

    /// Every `stride`-th slot.
    fn sample(&self, stride: usize) -> Self {
        let (lo, hi, weight) = self.columns();
        let stride = stride.max(1);
        let values = lo.iter().step_by(stride);
        let values = values.chain(hi.iter().step_by(stride));
        let values = values.chain(weight.iter().step_by(stride));
        Self {
            values: values.copied().collect(),
        }
    }

    /// `Σ term(λ·W_i, lo_i, hi_i, W_i)` over all slots, in [`LANES`] independent partial sums
    /// so that the loop compiles to packed SIMD; `term` must be branch-free (selects only).
    #[inline(always)]
    fn lane_sum(&self, level: f64, term: impl Fn(f64, f64, f64, f64) -> f64) -> f64 {
        let (lo_all, hi_all, weight_all) = self.columns();
        let mut sum = [0.0_f64; LANES];
        let lanes = lo_all
            .chunks_exact(LANES)
            .zip(hi_all.chunks_exact(LANES))
            .zip(weight_all.chunks_exact(LANES));
        for ((lo, hi), weight) in lanes {
            for k in 0..LANES {
                sum[k] += term(level * weight[k], lo[k], hi[k], weight[k]);
            }
        }
        let tail = lo_all.len() / LANES * LANES;
        for j in tail..lo_all.len() {
            sum[0] += term(level * weight_all[j], lo_all[j], hi_all[j], weight_all[j]);
        }
        sum.iter().sum()
    }

    /// `f(λ) = Σ clamp(λW, lo, hi)`, branch-free.
    fn f(&self, level: f64) -> f64 {
        self.lane_sum(level, |x, lo, hi, _| {
            // Selects (maxpd/minpd), not clamp/max/min with their NaN handling: lo ≤ hi and
            // nothing here is NaN.
            let raised = if x < lo { lo } else { x };
            if raised > hi { hi } else { raised }
        })
    }

    /// The slope of `f` at `λ`: the weight of the slots strictly inside their bounds.
    fn slope(&self, level: f64) -> f64 {
        self.lane_sum(
            level,
            |x, lo, hi, weight| {
                if (x > lo) & (x < hi) { weight } else { 0.0 }
            },
        )
    }

    /// How many weighted slots have `λW` within [`MARGIN`] (relative) of one of their
    /// bounds, where an `f64` comparison cannot decide their class. (An unweighted slot is
    /// at its floor at every level: `0 ≤ lo` holds exactly.)
    fn unclear(&self, level: f64) -> f64 {
        self.lane_sum(level, |x, lo, hi, weight| {
            let near_lo = (x >= lo * (1.0 - MARGIN)) & (x <= lo * (1.0 + MARGIN));
            let near_hi = (x >= hi * (1.0 - MARGIN)) & (x <= hi * (1.0 + MARGIN));
            if (near_lo | near_hi) & (weight > 0.0) {
                1.0
            } else {
                0.0
            }
        })
    }
}

/// The fast path first solves on every `SAMPLE_STRIDE`-th slot for a starting level.
const SAMPLE_STRIDE: usize = 32;

/// Relative distance from a bound beyond which an `f64` comparison decides a slot's class
/// (the rounding errors involved are about 2^-50 relative, far below it).
const MARGIN: f64 = 1e-9;

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

/// The fast path: an approximate level `λ̃` in `f64` (see [`approximate_level`]), every slot
/// classified at it (at `lo`, at `hi`, growing), and the exact level derived from the
/// classification, `λ = (C − Σ fixed) / Σ growing weight`. Accepted if every slot is more
/// than [`MARGIN`] (relative) from its bounds at `λ̃` and `λ` agrees with `λ̃` to a quarter of
/// that: then every class holds at `λ`, so `f(λ) = C` exactly and `λ` is the level. `None` —
/// a breakpoint within rounding distance of `λ`, a flat `f`, no convergence — sends the
/// caller to the exact search, [`find_level`].
///
/// The classification is the first pass of the rounding, too: it returns the shares of the
/// slots at a bound and the list of the others.
fn fill_fast(cap: u128, slots: &[Slot], totals: &Totals) -> Option<(u128, u128, Classified)> {
    if totals.weight == 0 {
        return None;
    }
    let approx = Approx::new(slots);
    #[expect(
        clippy::cast_precision_loss,
        reason = "approximations; the exact classification decides"
    )]
    let (top, total_weight) = (
        totals.max_hi as f64 / f64::from(totals.min_weight),
        totals.weight as f64,
    );
    #[expect(
        clippy::cast_precision_loss,
        reason = "approximations; the exact classification decides"
    )]
    let cap_f = cap as f64;
    // Start from the level of a sample of the slots (every SAMPLE_STRIDE-th, whose f scaled
    // up estimates the whole f), which costs little and saves passes over all of them; or
    // from C/ΣW, where no slot is clamped, when the sample does not converge.
    let start = cap_f / total_weight;
    let start = if slots.len() >= 4 * SAMPLE_STRIDE {
        let sample = approx.sample(SAMPLE_STRIDE);
        #[expect(
            clippy::cast_precision_loss,
            reason = "approximations; the exact classification decides"
        )]
        let scale = sample.len() as f64 / approx.len() as f64;
        approximate_level(cap_f * scale, &sample, top, start)
            .filter(|l| *l > 0.0 && *l < top)
            .unwrap_or(start)
    } else {
        start
    };
    let level = approximate_level(cap_f, &approx, top, start)?;
    if approx.unclear(level) > 0.0 {
        return None;
    }
    let (mut fixed, mut weight) = (0u128, 0u64);
    let mut inside = vec![0u32; slots.len()];
    let mut listed = 0;
    let (lo_all, hi_all, weight_all) = approx.columns();
    let points = lo_all.iter().zip(hi_all).zip(weight_all);
    let mut index = 0u32;
    let shares = slots
        .iter()
        .zip(points)
        .map(|(s, ((&lo, &hi), &w))| {
            let x = level * w;
            let at_lo = x <= lo;
            let at_hi = (x >= hi) & !at_lo;
            // Multiplications by 0 or 1, not `if`: the compiler turns selects of loaded
            // values into branches, mispredicted half the time here.
            let share = s.low() * u64::from(at_lo) + s.hi * u64::from(at_hi);
            fixed += u128::from(share);
            let growing = !(at_lo | at_hi);
            weight += u64::from(s.weight) * u64::from(growing);
            // Written for every slot, kept by advancing `listed`: no data-dependent branch.
            if let Some(slot) = inside.get_mut(listed) {
                *slot = index;
            }
            listed += usize::from(growing);
            // Below 2^31 slots (the documented limit), the index fits.
            index = index.wrapping_add(1);
            share
        })
        .collect();
    inside.truncate(listed);
    let classified = Classified { shares, inside };
    if weight == 0 || fixed > cap {
        return None;
    }
    let (num, den) = (cap - fixed, u128::from(weight));
    // If every class is clear and the exact level is within a quarter margin of λ̃, every
    // class holds at the exact level: the rounding errors involved (about 2^-50 relative)
    // are far below the margin.
    #[expect(
        clippy::cast_precision_loss,
        reason = "compared with a margin far above the rounding error"
    )]
    let exact_f = num as f64 / den as f64;
    ((exact_f - level).abs() <= level * MARGIN / 4.0).then_some((num, den, classified))
}

/// How far beyond the Newton iterate, in Newton steps, the probe goes at first (tuned on
/// the benchmark inputs: the error left after a step is usually well below the step).
const REACH: f64 = 0.25;

/// `λ̃` with `f(λ̃) ≈ C` in `f64` (`None` if the search does not converge).
///
/// Safeguarded Newton steps inside a bracket `[below, above]` around `λ`, bisecting when a
/// step leaves it. `f` is concave wherever no floor binds, and Newton from below then creeps
/// up on `λ` one undershooting step at a time; so each pass also evaluates a probe beyond the
/// Newton iterate ([`REACH`] steps further, 16 times further each time it fails to cross `λ`),
/// which closes the bracket from the other side, and carries on from whichever of the two is
/// closer to `C`, with the slope of the chord between them.
fn approximate_level(cap_f: f64, approx: &Approx, top: f64, start: f64) -> Option<f64> {
    let (mut below, mut above) = (0.0_f64, top);
    let mut level = start;
    let (mut f, mut slope) = (approx.f(level), approx.slope(level));
    let mut reach = REACH;
    for _ in 0..64 {
        // Close enough to classify: the exact check has the last word.
        if (f - cap_f).abs() <= cap_f * 1e-12 {
            return level.is_finite().then_some(level);
        }
        if f < cap_f {
            below = below.max(level);
        } else {
            above = above.min(level);
        }
        let newton = if slope > 0.0 {
            level + (cap_f - f) / slope
        } else {
            f64::NAN
        };
        let next = if newton > below && newton < above {
            newton
        } else {
            0.5 * (below + above)
        };
        let step = next - level;
        if step.abs() <= level.abs() * 1e-15 {
            return next.is_finite().then_some(next);
        }
        // The probe, strictly inside the bracket (halfway to its end if the step would leave).
        let far = next + reach * step;
        let probe = if far > below && far < above {
            far
        } else if step > 0.0 {
            0.5 * (next + above)
        } else {
            0.5 * (next + below)
        };
        let (f_next, f_probe) = (approx.f(next), approx.f(probe));
        let crossed = (f_next < cap_f) != (f_probe < cap_f);
        reach = if crossed { REACH } else { reach * 16.0 };
        slope = (f_probe - f_next) / (probe - next);
        // Carry on from whichever point is closer to C; the other narrows the bracket.
        let (other, f_other) = if (f_probe - cap_f).abs() < (f_next - cap_f).abs() {
            (level, f) = (probe, f_probe);
            (next, f_next)
        } else {
            (level, f) = (next, f_next);
            (probe, f_probe)
        };
        if f_other < cap_f {
            below = below.max(other);
        } else {
            above = above.min(other);
        }
    }
    None
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
            if let Some((a, b, _)) = fill_fast(cap, &slots, &Totals::of(&slots)) {
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
            (0u128, 1u64),
            (7, 3),
            (1 << 100, 12_345),
            (u128::MAX, 1),
            (99, 100),
        ] {
            for estimate in [0.0, -1.0, f64::NAN, 1e40, (a as f64) / (b as f64)] {
                let wide = u128::from(b);
                assert_eq!(
                    div_rem(a, b, estimate),
                    (a / wide, a % wide),
                    "{a}/{b} ≈ {estimate}"
                );
            }
        }
    }

    #[test]
    fn fast_path_accepts_unweighted_slots() {
        // An unweighted slot sits at its floor at every level; it must not count as "near a
        // bound" (0 = 0·λ) and push every input that has one onto the exact search.
        let slots = [
            Slot::new(0, 0, 500),
            Slot::new(1, 0, 2000),
            Slot::new(2, 0, 2000),
        ];
        let fast = fill_fast(1500, &slots, &Totals::of(&slots));
        let Some((num, den, _)) = fast else {
            panic!("fast path gave up on {slots:?}");
        };
        assert_eq!(num * 3, 1500 * den, "λ = 500");
        assert_eq!(water_fill(1500, &slots), vec![0, 500, 1000]);
    }

    #[test]
    fn flat_fill_reports_the_smallest_level() {
        // f(λ) = 14 for every λ in [1/3, 1/2]: slot 0 is full from 1/3 on, slot 2 leaves its
        // floor only after 1/2. Every level there gives the same shares; the smallest is
        // reported.
        let slots = [
            Slot::new(3, 0, 1),
            Slot::new(0, 6, 9),
            Slot::new(2, 1, 9),
            Slot::new(2, 4, 2),
            Slot::new(2, 5, 4),
        ];
        let fill = water_fill_level(14, &slots);
        assert_eq!(fill.shares, vec![1, 6, 1, 2, 4]);
        assert!(
            matches!(fill.level, Level::Exact { num, den } if num * 3 == den),
            "{:?}",
            fill.level
        );
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
