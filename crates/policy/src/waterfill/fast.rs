//! The fast path of the water-fill: an approximate level in `f64` (safeguarded Newton over
//! SIMD-friendly arrays), confirmed by one exact pass (the module docs of [`super`]).

use super::{Classified, Slot, Totals};

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
pub(super) fn fill_fast(
    cap: u128,
    slots: &[Slot],
    totals: &Totals,
) -> Option<(u128, u128, Classified)> {
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
