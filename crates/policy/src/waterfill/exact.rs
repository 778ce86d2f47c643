//! The exact search of the water-fill, when the fast path gives up: an interval of levels
//! narrowed by sampled pivots and exact passes, `O(n)` (the module docs of [`super`]).

use std::cmp::Ordering;

use super::Slot;

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
pub(super) fn find_level(cap: u128, slots: &[Slot]) -> (u128, u128) {
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
