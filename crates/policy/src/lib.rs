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
//! of the input.

use serde::Serialize;

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
}
