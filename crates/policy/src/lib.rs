//! The memweight policy: a pure calculator from per-cgroup usage and weights to memory targets.
//!
//! Nothing in this crate touches the file system, a clock or an async runtime. The daemon
//! samples the kernel and calls [`plan`]; `memweightctl plan` calls the same function on a JSON
//! file, so an operator can see offline exactly what the daemon would decide.
//!
//! The model (seed 002, "Possible Solution Design"):
//!
//! * `TU = Σ U_i`, `TW = Σ W_i`, expected allocation `EA_i = TU × W_i / TW`, exceed
//!   `EX_i = U_i − EA_i` — reported for every cgroup.
//! * Targets by weighted water-filling over the pool capacity `C`:
//!   `T_i = clamp(λ·W_i, lo_i, hi_i)` with `Σ T_i = C`, `hi_i = min(U_i, max_i)`,
//!   `lo_i = min(floor_i, hi_i)`. If `Σ hi ≤ C` there is no pressure and `T = hi`; if
//!   `Σ lo ≥ C` every cgroup sits at its floor and the plan says guarantees are overcommitted.
//! * Entitlement (for `memory.low`): the weighted share of `C`, water-filled so that what a
//!   small cgroup does not use flows to the others.
//!
//! All byte arithmetic is integer (`u64`/`u128`), and the result does not depend on the order
//! of the input. `docs/policy.md` in the repository walks through the model, the algorithm and
//! the seed table.
//!
//! ```
//! use memweight_policy::{plan, CgroupInput};
//!
//! let cg = |name: &str, weight| CgroupInput {
//!     name: name.into(),
//!     usage: 2000,
//!     weight,
//!     floor: 0,
//!     max: None,
//!     demand: None,
//!     active: None,
//! };
//! let p = plan(4500, &[cg("c1", 1), cg("c2", 2), cg("c3", 3)])?;
//! let targets: Vec<u64> = p.decisions.iter().map(|d| d.target).collect();
//! assert_eq!(targets, [833, 1667, 2000]);
//! # Ok::<(), memweight_policy::PolicyError>(())
//! ```

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;

pub mod human;
#[doc(hidden)]
pub mod reference;
pub mod waterfill;

pub use waterfill::{Fill, Level, Slot, water_fill, water_fill_level};

/// Smallest allowed weight.
pub const MIN_WEIGHT: u32 = 1;
/// Largest allowed weight.
pub const MAX_WEIGHT: u32 = 10_000;
/// Weight of a cgroup whose configuration does not name one.
pub const DEFAULT_WEIGHT: u32 = 100;

/// A weight outside [`MIN_WEIGHT`]`..=`[`MAX_WEIGHT`], or not a whole number.
///
/// The one message for a bad weight wherever one is given (config rule, container label,
/// control request, plan file, lab scenario); each caller puts in front of it what was wrong
/// (`cgroup[2].weight: `, the label, the cgroup).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be {}, got {got}", accepted_weights())]
pub struct WeightError {
    /// The value as given (a number, or the text quoted when it is not one).
    pub got: String,
}

impl WeightError {
    /// A weight given as `got` (anything displayable: a number, a JSON value, quoted text).
    #[must_use]
    pub fn new(got: impl fmt::Display) -> Self {
        Self {
            got: got.to_string(),
        }
    }
}

/// What a weight may be, for messages: `a whole number 1..=10000`.
#[must_use]
pub fn accepted_weights() -> String {
    format!("a whole number {MIN_WEIGHT}..={MAX_WEIGHT}")
}

/// Checks that `weight` is within [`MIN_WEIGHT`]`..=`[`MAX_WEIGHT`]: the one range check for
/// every weight the daemon, the CLI and the lab take.
///
/// # Errors
///
/// [`WeightError`] naming the value and the accepted range.
pub fn check_weight(weight: u64) -> Result<u32, WeightError> {
    u32::try_from(weight)
        .ok()
        .filter(|w| (MIN_WEIGHT..=MAX_WEIGHT).contains(w))
        .ok_or_else(|| WeightError::new(weight))
}

/// Reads a weight written as text (a command-line argument, a container label): a whole
/// number, surrounding whitespace allowed, then [`check_weight`].
///
/// # Errors
///
/// [`WeightError`] with the text quoted when it is not a whole number, else as
/// [`check_weight`].
pub fn parse_weight(text: &str) -> Result<u32, WeightError> {
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| WeightError::new(format_args!("{text:?}")))?;
    check_weight(n)
}

/// One managed cgroup as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupInput {
    /// Name (the cgroup path relative to the root); unique within a plan; ties are broken by it.
    pub name: String,
    /// Current usage `U` in bytes.
    pub usage: u64,
    /// Weight `W`, `1..=10000`.
    pub weight: u32,
    /// Floor in bytes: the target never goes below `min(floor, hi)`.
    pub floor: u64,
    /// Optional ceiling in bytes.
    pub max: Option<u64>,
    /// What the cgroup would hold if nothing limited it; `None` means its usage.
    ///
    /// A cgroup held at its `memory.high` uses no more than the limit, so its usage hides its
    /// demand; the daemon passes a larger demand for it so that memory freed elsewhere flows
    /// back to it by weight instead of being mistaken for the end of pressure.
    pub demand: Option<u64>,
    /// Bytes of its usage in active use (the kernel's active LRU lists); `None` counts all of
    /// it active. Only [`plan_with_tax`] looks at it: the rest is idle and taxed.
    pub active: Option<u64>,
}

impl CgroupInput {
    /// The upper bound of the target: `min(demand, max)`, where demand defaults to usage.
    #[must_use]
    pub fn hi(&self) -> u64 {
        let demand = self.demand.unwrap_or(self.usage);
        self.max.map_or(demand, |m| m.min(demand))
    }

    /// The lower bound of the target: `min(floor, hi)`.
    #[must_use]
    pub fn lo(&self) -> u64 {
        self.floor.min(self.hi())
    }
}

/// Why a cgroup got the target it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// The pool holds everything: target = usage (or max).
    NoPressure,
    /// Reclaimed down to its weighted share; `by` bytes above it before.
    AboveShare {
        /// Bytes reclaimed (usage − target).
        by: u64,
    },
    /// Uses less than its weighted share: keeps all it uses.
    WithinShare,
    /// Held at its floor.
    AtFloor,
    /// Capped by the configured `max`.
    CappedByMax,
    /// The floors alone exceed the capacity: everyone sits at the floor.
    Overcommitted,
}

/// The decision for one cgroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// Name, as given.
    pub name: String,
    /// Usage `U`.
    pub usage: u64,
    /// Weight `W`.
    pub weight: u32,
    /// Expected allocation `EA = TU × W / TW` (rounded down).
    pub expected: u64,
    /// Exceed `EX = U − EA` (negative when below its share).
    pub exceed: i64,
    /// Water-filled target `T`.
    pub target: u64,
    /// `R = U − T` (0 when the target is not below usage).
    pub reclaim: u64,
    /// Weighted, water-filled share of the capacity, for `memory.low`.
    pub entitlement: u64,
    /// Why.
    pub reason: Reason,
    /// The cgroup's unclamped share at the water level (`λ·W`, less what the idle tax takes
    /// from its idle memory); `None` unless the level is [`Level::Exact`]. The daemon puts
    /// memory.high here rather than at the target, so a cgroup below its share can grow.
    pub level_share: Option<u64>,
}

/// A whole plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Pool capacity `C`.
    pub capacity: u64,
    /// `TU`.
    pub total_usage: u64,
    /// `TW`.
    pub total_weight: u64,
    /// `Σ hi > C`: something must be reclaimed.
    pub pressure: bool,
    /// `Σ lo ≥ C` with pressure: floors alone use the pool.
    pub overcommitted: bool,
    /// One decision per input, in the input's order.
    pub decisions: Vec<Decision>,
    /// The water level `λ` the targets were cut at.
    #[serde(skip)]
    pub level: Level,
}

impl Reason {
    /// A stable machine-readable name (`no_pressure`, `above_share`, ...).
    #[must_use]
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::NoPressure => "no_pressure",
            Self::AboveShare { .. } => "above_share",
            Self::WithinShare => "within_share",
            Self::AtFloor => "at_floor",
            Self::CappedByMax => "capped_by_max",
            Self::Overcommitted => "overcommitted",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoPressure => f.write_str("no pressure"),
            Self::AboveShare { by } => {
                write!(f, "above weighted share by {}", human::bytes(*by))
            }
            Self::WithinShare => f.write_str("within weighted share"),
            Self::AtFloor => f.write_str("at floor"),
            Self::CappedByMax => f.write_str("capped by max"),
            Self::Overcommitted => f.write_str("floors overcommitted"),
        }
    }
}

/// Largest idle memory tax rate, in percent: at 100 % idle memory would weigh nothing.
pub const MAX_IDLE_TAX: u8 = 99;

/// Why a set of inputs cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A weight outside `1..=10000`.
    #[error("cgroup {name:?}: weight {error}")]
    InvalidWeight {
        /// The cgroup.
        name: String,
        /// What is wrong with it (part of this message, not a separate cause).
        error: WeightError,
    },
    /// Two inputs with the same name.
    #[error("cgroup {name:?} is listed twice; names must be unique")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// An idle tax rate above [`MAX_IDLE_TAX`].
    #[error("idle tax must be 0..={MAX_IDLE_TAX} %, got {tax}")]
    InvalidTax {
        /// The rate given.
        tax: u8,
    },
    /// An input with an empty name.
    #[error("cgroup #{index} has an empty name; give every cgroup a name")]
    EmptyName {
        /// Position in the input (0-based).
        index: usize,
    },
}

/// Validates `cgroups` and computes the plan for pool capacity `capacity` (bytes).
///
/// Decisions come back in input order. The result depends only on the set of inputs, not on
/// their order: ties are broken by name (see [`water_fill`] for the rounding rule).
///
/// * `TU = Σ U` and every `EA_i = TU × W_i / TW` are computed in `u128` and rounded down;
///   `total_usage` and `expected` saturate at `u64::MAX`, `exceed` at the `i64` range.
/// * Targets: [`water_fill`] of `capacity` over `(W_i, lo_i, hi_i)`.
/// * Entitlement: [`water_fill`] of `capacity` over `(W_i, 0, hi_i)`: the weighted share with
///   floors ignored, so it equals the target unless a floor holds some cgroup above its share.
///
/// # Errors
///
/// [`PolicyError`] when a name is empty or repeated or a weight is outside `1..=10000`.
pub fn plan(capacity: u64, cgroups: &[CgroupInput]) -> Result<Plan, PolicyError> {
    plan_with_tax(capacity, cgroups, 0)
}

/// [`plan`] with an idle memory tax of `tax` percent (`0..=99`; VMware ESX's default is 75).
///
/// Idle memory (usage beyond [`CgroupInput::active`]) costs `k = 100 / (100 − tax)` times
/// what active memory costs: the level `λ` is found so that every cgroup holds
/// `min(λ·W, a) + max(0, λ·W − a) / k` (clamped to its bounds as before), where `a` is its
/// active memory. A cgroup whose memory is all active gets its plain weighted share; an idle
/// one gives its idle memory up first, down to a share `1/k` of its weighted one, so memory
/// flows to where it is used while weights still decide between active cgroups. At `tax = 0`
/// this is [`plan`].
///
/// The taxed fill is the plain one over two slots per cgroup: its active memory `(100·W, lo,
/// a)` and its idle memory `((100 − tax)·W, o, o + idle)` offset by `o = a·(100 − tax)/100`
/// (the capacity grows by `Σ o`): `clamp(λ'(100 − tax)W, o, o + idle) − o` is the idle part
/// above, so [`water_fill`]'s exactness carries over.
///
/// # Errors
///
/// As [`plan`], and [`PolicyError::InvalidTax`] above [`MAX_IDLE_TAX`].
pub fn plan_with_tax(capacity: u64, cgroups: &[CgroupInput], tax: u8) -> Result<Plan, PolicyError> {
    validate(cgroups)?;
    if tax > MAX_IDLE_TAX {
        return Err(PolicyError::InvalidTax { tax });
    }
    // Canonical order (by name) so rounding tie-breaks do not depend on the input order.
    let mut order: Vec<usize> = (0..cgroups.len()).collect();
    order.sort_unstable_by(|&a, &b| cgroups[a].name.cmp(&cgroups[b].name));

    let taxed = tax > 0 && cgroups.iter().any(|c| c.active.is_some());
    let (fill, entitled, level_shares) = if taxed {
        fill_taxed(capacity, cgroups, &order, tax)
    } else {
        let slots: Vec<Slot> = order
            .iter()
            .map(|&i| Slot::new(cgroups[i].weight, cgroups[i].lo(), cgroups[i].hi()))
            .collect();
        let fill = water_fill_level(capacity, &slots);
        let open: Vec<Slot> = slots.iter().map(|s| Slot::new(s.weight, 0, s.hi)).collect();
        let entitled = water_fill(capacity, &open);
        let shares = order
            .iter()
            .map(|&i| fill.level.share(cgroups[i].weight))
            .collect();
        (fill, entitled, shares)
    };

    let mut targets = vec![0; cgroups.len()];
    let mut entitlements = vec![0; cgroups.len()];
    let mut level_share = vec![None; cgroups.len()];
    for (k, &i) in order.iter().enumerate() {
        targets[i] = fill.shares[k];
        entitlements[i] = entitled[k];
        level_share[i] = level_shares[k];
    }
    let total_usage: u128 = cgroups.iter().map(|c| u128::from(c.usage)).sum();
    let total_weight: u64 = cgroups.iter().map(|c| u64::from(c.weight)).sum();
    let pressure = fill.level != Level::Unconstrained;
    let overcommitted = fill.level == Level::Floors;

    let decisions = cgroups
        .iter()
        .zip(targets.iter().zip(&entitlements))
        .zip(level_share)
        .map(|((c, (&target, &entitlement)), level_share)| {
            let expected = expected_allocation(total_usage, c.weight, total_weight);
            Decision {
                name: c.name.clone(),
                usage: c.usage,
                weight: c.weight,
                expected: saturate_u64(expected),
                exceed: exceed(c.usage, expected),
                target,
                reclaim: c.usage.saturating_sub(target),
                entitlement,
                reason: reason(c, target, &fill.level, level_share),
                level_share,
            }
        })
        .collect();
    Ok(Plan {
        capacity,
        total_usage: saturate_u64(total_usage),
        total_weight,
        pressure,
        overcommitted,
        decisions,
        level: fill.level,
    })
}

/// The taxed fill of [`plan_with_tax`]: one `Fill` over the cgroups (in `order`) with the
/// offsets taken back out, the entitlements, and each cgroup's unclamped taxed share.
fn fill_taxed(
    capacity: u64,
    cgroups: &[CgroupInput],
    order: &[usize],
    tax: u8,
) -> (Fill, Vec<u64>, Vec<Option<u64>>) {
    let keep = u64::from(100 - tax);
    let parts: Vec<(u64, u64, u64, u64)> = order
        .iter()
        .map(|&i| {
            let c = &cgroups[i];
            let hi = c.hi();
            // Demand beyond usage (a cgroup held at its limit) is memory it is reaching for:
            // active.
            let reaching = hi.saturating_sub(c.usage);
            let active = c
                .active
                .map_or(hi, |a| a.min(c.usage).saturating_add(reaching))
                .min(hi);
            let offset = mul_div(active, keep, 100);
            (hi, c.lo(), active, offset)
        })
        .collect();
    let extra: u64 = parts.iter().map(|p| p.3).fold(0, u64::saturating_add);
    let capacity2 = capacity.saturating_add(extra);
    let slots = |with_floor: bool| -> Vec<Slot> {
        order
            .iter()
            .zip(&parts)
            .flat_map(|(&i, &(hi, lo, active, offset))| {
                let w = cgroups[i].weight;
                let lo = if with_floor { lo } else { 0 };
                [
                    Slot::new(w * 100, lo.min(active), active),
                    Slot::new(
                        w * u32::from(100 - tax),
                        offset.saturating_add(lo.saturating_sub(active)),
                        offset.saturating_add(hi - active),
                    ),
                ]
            })
            .collect()
    };
    let join = |shares: &[u64]| -> Vec<u64> {
        parts
            .iter()
            .enumerate()
            .map(|(k, p)| {
                shares[2 * k]
                    .saturating_add(shares[2 * k + 1])
                    .saturating_sub(p.3)
            })
            .collect()
    };
    let fill = water_fill_level(capacity2, &slots(true));
    let entitled = join(&water_fill(capacity2, &slots(false)));
    let level_shares = order
        .iter()
        .zip(&parts)
        .map(|(&i, &(_, _, active, _))| {
            let w = cgroups[i].weight;
            let full = fill.level.share(w * 100)?;
            let idle = fill.level.share(w * u32::from(100 - tax))?;
            Some(
                full.min(active)
                    .saturating_add(idle.saturating_sub(mul_div(active, keep, 100))),
            )
        })
        .collect();
    let level = match fill.level {
        // The level is per unit of the scaled weight (×100): the same `λ` per unit of weight.
        Level::Exact { num, den } => Level::Exact {
            num: num * 100,
            den,
        },
        other => other,
    };
    (
        Fill {
            shares: join(&fill.shares),
            level,
        },
        entitled,
        level_shares,
    )
}

fn mul_div(v: u64, num: u64, den: u64) -> u64 {
    saturate_u64(u128::from(v) * u128::from(num) / u128::from(den.max(1)))
}

fn validate(cgroups: &[CgroupInput]) -> Result<(), PolicyError> {
    let mut seen = HashSet::with_capacity(cgroups.len());
    for (index, c) in cgroups.iter().enumerate() {
        if c.name.is_empty() {
            return Err(PolicyError::EmptyName { index });
        }
        check_weight(u64::from(c.weight)).map_err(|error| PolicyError::InvalidWeight {
            name: c.name.clone(),
            error,
        })?;
        if !seen.insert(c.name.as_str()) {
            return Err(PolicyError::DuplicateName {
                name: c.name.clone(),
            });
        }
    }
    Ok(())
}

/// `EA = TU × W / TW`, rounded down; 0 when there are no weights.
fn expected_allocation(total_usage: u128, weight: u32, total_weight: u64) -> u128 {
    if total_weight == 0 {
        return 0;
    }
    total_usage * u128::from(weight) / u128::from(total_weight)
}

/// `EX = U − EA`, saturated to the `i64` range.
fn exceed(usage: u64, expected: u128) -> i64 {
    let usage = i128::from(usage);
    let expected = i128::try_from(expected).unwrap_or(i128::MAX);
    let ex = usage.saturating_sub(expected);
    i64::try_from(ex).unwrap_or(if ex < 0 { i64::MIN } else { i64::MAX })
}

fn saturate_u64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

fn reason(c: &CgroupInput, target: u64, level: &Level, level_share: Option<u64>) -> Reason {
    let capped = c.max.is_some_and(|m| m < c.usage);
    match level {
        Level::Floors => Reason::Overcommitted,
        Level::Unconstrained if capped => Reason::CappedByMax,
        Level::Unconstrained => Reason::NoPressure,
        Level::Exact { .. } => {
            let lo = c.lo();
            if target == lo && level_share.is_some_and(|s| s < lo) {
                Reason::AtFloor
            } else if capped && target == c.hi() {
                Reason::CappedByMax
            } else if target < c.usage {
                Reason::AboveShare {
                    by: c.usage - target,
                }
            } else {
                Reason::WithinShare
            }
        }
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
