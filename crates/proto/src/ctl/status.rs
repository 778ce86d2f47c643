//! `status`: the pool and host ([`Pool`]) and one row per managed cgroup ([`CgroupStatus`],
//! with its [`CgroupState`]) as of the last tick. The daemon's tick report is made of these
//! rows, so `status` sends it as it is.
//!
//! Not here: the other replies (`reply`).

use serde::{Deserialize, Serialize};

use super::WeightSource;

/// The pool and host, as of the last tick. `Pool::default()` is an empty pool on an unknown
/// host (every figure 0, nothing known), for a report's fields to be filled in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    /// Tick number since the daemon started.
    pub tick: u64,
    /// Whether writes are enforced this tick (`false`: a dry run, or [`Pool::engine_wait`]).
    pub enforce: bool,
    /// Nothing is held yet: the daemon waits for the container engine's first answer (at
    /// most a minute after it starts), as the weights in containers' labels are not known.
    #[serde(default)]
    pub engine_wait: bool,
    /// Pool capacity C.
    pub capacity: u64,
    /// MemAvailable shortfall below the reserve that came off the pool.
    pub shortfall: u64,
    /// What host PSI took off the pool.
    pub psi_cut: u64,
    /// The MemAvailable reserve (auto capacity): below it the host is short.
    #[serde(default)]
    pub reserve: u64,
    /// The part of host PSI `some avg10` (%) that the daemon's own throttling explains (the
    /// highest of the managed cgroups held at a lowered `memory.high`); not counted towards
    /// the PSI cut.
    #[serde(default)]
    pub own_stall: f64,
    /// Bytes of the capacity kept for the guards above the targets of cgroups held back (with
    /// `reclaim`, memory.high sits a `guard` above the target): the policy shares
    /// `capacity − guards`.
    #[serde(default)]
    pub guards: u64,
    /// The capacity was kept at the last tick's: MemAvailable stayed within the `hysteresis`
    /// of where it was when the pool last moved (reserve capacity).
    #[serde(default)]
    pub held: bool,
    /// The kernel's global reclaim (kswapd or direct reclaim, `/proc/vmstat` `pgscan_*`) ran
    /// since the last tick: the host is short by the kernel's own measure.
    #[serde(default)]
    pub reclaiming: bool,
    /// The split is enforced beyond `memory.low` (`memory.high` and `memory.reclaim` on the
    /// cgroups above their share): always with `reserve` and `fixed` capacity; with `kernel`
    /// while the host is short and a cgroup reaching for memory is below its share.
    #[serde(default)]
    pub enforcing: bool,
    /// `kernel` capacity: the host is short and the cgroups beside the managed set stall on
    /// memory, so no managed cgroup is protected this tick (the kernel's reclaim weighs their
    /// pages against the services' as it would alone); the split is still enforced.
    #[serde(default)]
    pub yielding: bool,
    /// `kernel` capacity: the highest share (%) of the last tick a cgroup beside the managed
    /// set (and the daemon's own) had a task stalled on memory (`memory.pressure`).
    #[serde(default)]
    pub outside_stall: Option<f64>,
    /// `kernel` capacity: the cgroup beside the managed set that stalled the most (that share)
    /// over the last tick; `None` when none stalled (or from a daemon that does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_stall_by: Option<String>,
    /// The kernel reclaims with the multi-gen LRU (`/sys/kernel/mm/lru_gen/enabled`), where
    /// `memory.low` protects held cgroups less (`None` from a daemon that does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_gen_lru: Option<bool>,
    /// TU: total usage of the managed cgroups.
    pub total_usage: u64,
    /// TW: total weight.
    pub total_weight: u64,
    /// Usage exceeds the pool.
    pub pressure: bool,
    /// Floors alone exceed the pool.
    pub overcommitted: bool,
    /// Host MemTotal.
    pub mem_total: u64,
    /// Host MemAvailable.
    pub mem_available: u64,
    /// Host SwapFree.
    pub swap_free: u64,
    /// Host memory PSI some avg10 (%).
    pub host_psi_some_avg10: Option<f64>,
    /// Host memory PSI full avg10 (%).
    pub host_psi_full_avg10: Option<f64>,
    /// How long the tick took, in microseconds.
    pub duration_us: u64,
}

/// What the daemon may do with a managed cgroup this tick (`status`'s STATE column); on the
/// wire the kebab-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CgroupState {
    /// Managed: the decided writes are made.
    Ok,
    /// A write is still landing; nothing more is written until it has.
    Busy,
    /// Its originals are not on disk yet, so nothing is written.
    Pending,
    /// Seen for the first time among many: pinned at its usage until a full sample.
    New,
    /// `enforce = false`: computed, never written.
    DryRun,
    /// Computed, not written yet: the daemon waits for the container engine's first answer.
    EngineWait,
    /// A state this build does not know (from a newer daemon).
    #[serde(other)]
    Unknown,
}

impl std::fmt::Display for CgroupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CgroupState::Ok => "ok",
            CgroupState::Busy => "busy",
            CgroupState::Pending => "pending",
            CgroupState::New => "new",
            CgroupState::DryRun => "dry-run",
            CgroupState::EngineWait => "engine-wait",
            CgroupState::Unknown => "unknown",
        })
    }
}

/// One managed cgroup as of the last tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupStatus {
    /// Path relative to the cgroup root.
    pub cgroup: String,
    /// Effective weight.
    pub weight: u32,
    /// The weight comes from a runtime override.
    pub overridden: bool,
    /// The container whose cgroup this is, when the container engine names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Where the weight comes from (`None` from a daemon that does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<WeightSource>,
    /// memory.current.
    pub usage: u64,
    /// EA = TU × W / TW.
    pub expected: u64,
    /// EX = U − EA.
    pub exceed: i64,
    /// Water-filled target.
    pub target: u64,
    /// Entitlement (what memory.low protects).
    pub entitlement: u64,
    /// Floor the target never goes below.
    pub floor: u64,
    /// Ceiling the policy puts on memory.high (`None`: none).
    pub ceiling: Option<u64>,
    /// `kernel` mode, while the split is enforced: bytes the ceiling sits above (positive) or
    /// below its water-level share, so that the cgroup holds its share on average where the
    /// kernel's reclaim takes some held cgroups more often than others (`None`: none, or a
    /// daemon that predates it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim: Option<i64>,
    /// memory.high as read (`None`: max).
    pub high: Option<u64>,
    /// memory.low as read (`None`: max).
    pub low: Option<u64>,
    /// memory.swap.current (`None`: no swap accounting).
    pub swap: Option<u64>,
    /// memory.pressure some avg10 (%).
    pub psi_some_avg10: Option<f64>,
    /// memory.pressure full avg10 (%).
    pub psi_full_avg10: Option<f64>,
    /// Bytes it faulted back (`workingset_refault_*`) between its last two full samples: memory
    /// reclaim took that it still uses. With `capacity.mode = "kernel"`, 1 MiB or more (or
    /// its own PSI at 1 %) makes it reach for more than it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refaulted: Option<u64>,
    /// memory.events `high`.
    pub events_high: u64,
    /// memory.events `max`.
    pub events_max: u64,
    /// memory.events `oom_kill`.
    pub events_oom_kill: u64,
    /// memory.high written this tick (`None`: unchanged).
    pub wrote_high: Option<String>,
    /// memory.low written this tick (`None`: unchanged).
    pub wrote_low: Option<u64>,
    /// Bytes asked of memory.reclaim this tick.
    pub reclaim: Option<u64>,
    /// What the daemon may do with it this tick.
    pub state: CgroupState,
    /// The policy's reason, e.g. `above weighted share by 312 MiB`.
    pub reason: String,
    /// The cgroup's own memory.high, restored when the daemon lets go and never exceeded
    /// (`"max"` or bytes); absent from daemons that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_high: Option<String>,
    /// The cgroup's own memory.low, restored when the daemon lets go and never undercut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_low: Option<String>,
    /// The last change someone else made to memory.high or memory.low, which the daemon kept
    /// as the cgroup's original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// The weight the next tick plans with, where a `set` or `unset` since this row's tick
    /// changed it (`None`: unchanged, or a daemon that predates it). The rest of the row is
    /// the last tick's, planned with `weight`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_weight: Option<u32>,
}

/// `status`: the pool and every managed cgroup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The pool and host.
    pub pool: Pool,
    /// One row per managed cgroup, sorted by path.
    pub cgroups: Vec<CgroupStatus>,
}
