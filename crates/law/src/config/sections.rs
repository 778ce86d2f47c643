//! The file's shape: [`Config`] (the keys outside any section) and its sections
//! ([`CapacityConfig`], [`ControlConfig`], [`MetricsConfig`], [`ContainersConfig`], the
//! `[[cgroup]]` [`CgroupRule`]s), each key documented and defaulted here, and the bounds
//! other rooms check against ([`MIN_TICK`], [`MAX_TICK`], [`DEFAULT_GUARD_PERCENT`]).
//!
//! Not here: how a value is written (`values`), what is checked beyond the types
//! (`validate`, `rules`).

use std::path::PathBuf;
use std::time::Duration;

use memweight_policy::DEFAULT_WEIGHT;
use memweight_proto::size::Size;
use serde::Deserialize;

use super::{Amount, Interval, Reserve};

/// Default [`Config::reclaim_passes`]: every quarter of a tick.
pub const DEFAULT_RECLAIM_PASSES: u32 = 4;
/// Most [`Config::reclaim_passes`]: a pass every 6 ms at the shortest tick (100 ms) reads one
/// file per held cgroup; more would be a busy loop.
pub const MAX_RECLAIM_PASSES: u32 = 16;
/// Default [`Config::guard`]: memory.high this many percent above the target.
pub const DEFAULT_GUARD_PERCENT: f64 = 8.0;
/// Shortest `tick` accepted.
pub const MIN_TICK: Duration = Duration::from_millis(100);
/// Longest `tick` accepted: a tick must fit three times into the unit's `WatchdogSec=30s`.
pub const MAX_TICK: Duration = Duration::from_secs(10);

/// How the pool capacity `C` is chosen, and with it how the split is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CapacityMode {
    /// Work-conserving, the default: the kernel decides how much the managed cgroups keep
    /// together, the daemon only how it is split, so they never keep less than the kernel
    /// alone would leave them (docs/configuration.md). The pool is what they hold now, plus
    /// MemAvailable (less the reserve where it is a size) while the kernel's global reclaim is idle
    /// (`/proc/vmstat` `pgscan_kswapd` + `pgscan_direct` did not move since the last tick).
    /// Nothing is protected or throttled while no managed cgroup reaches for memory (faults
    /// it back, [`crate::capacity::REFAULT_DEMAND`], or some while it stalls on it,
    /// [`crate::capacity::STALL_DEMAND_PCT`]): the kernel's reclaim weighs their pages against
    /// everyone's as it would without the daemon. A cgroup that reaches is protected by
    /// `memory.low` up to its weighted, water-filled share of the pool (never above what it
    /// holds); while the host is short (the kernel reclaimed within
    /// [`crate::capacity::SHORT_TICKS`] ticks) and such a cgroup is below its share, the
    /// cgroups above theirs are held with `memory.high` and `memory.reclaim` (the multi-gen LRU
    /// reclaims below `memory.low`). While the host is short and the cgroups beside the
    /// managed set stall on memory, nothing is protected
    /// ([`crate::capacity::OUTSIDE_STALL_PCT`]), so that the host's own services are not
    /// starved for the containers' sake. Written `mode = "kernel"`.
    #[default]
    Kernel,
    /// Defend a reserve: shrink the pool by the shortfall of MemAvailable below the reserve
    /// and under host PSI, and enforce it with `memory.reclaim` and `memory.high`: the managed
    /// cgroups pay for the whole shortage, and the host's free memory stays above the reserve
    /// (docs/configuration.md says when to choose it). `"auto"` is its earlier name (the
    /// default before `kernel`), so configs written for it keep their law.
    #[serde(alias = "auto")]
    Reserve,
    /// A fixed size or share of MemTotal, enforced like `reserve`.
    Fixed,
}

/// `[capacity]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CapacityConfig {
    /// `kernel` (work-conserving, the default), `reserve` (`auto` reads as it) or `fixed`.
    pub mode: CapacityMode,
    /// With `mode = "fixed"`: bytes or a percentage of MemTotal.
    pub fixed: Option<Amount>,
    /// With `mode = "reserve"`: MemAvailable to keep free: `"watermarks"` (the kernel's
    /// reclaim band), bytes, or % of MemTotal. With `mode = "kernel"`: MemAvailable above it is
    /// headroom the pool may grow into while the kernel is not reclaiming.
    pub reserve: Reserve,
    /// With `mode = "reserve"`: host memory PSI `some avg10` (%) above which the pool shrinks.
    /// `0` turns the PSI signal off.
    pub psi_threshold: f64,
    /// How much the pool shrinks per tick while PSI is above the threshold (% of MemTotal).
    pub psi_step: Amount,
    /// The most PSI may take off the pool (bytes or % of MemTotal).
    pub psi_max_cut: Amount,
    /// With `mode = "reserve"`: how far the pool's estimate (what the cgroups hold plus
    /// MemAvailable above the reserve) may move before the pool follows it (bytes or % of
    /// MemTotal; default half the reserve). `0` follows every tick.
    pub hysteresis: Option<Amount>,
}

impl Default for CapacityConfig {
    fn default() -> Self {
        CapacityConfig {
            mode: CapacityMode::Kernel,
            fixed: None,
            reserve: Reserve::Watermarks,
            psi_threshold: 40.0,
            psi_step: Amount::Percent(1.0),
            psi_max_cut: Amount::Percent(5.0),
            hysteresis: None,
        }
    }
}

/// `[control]`: the Unix socket `memweightctl` talks to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// Socket path (ignored when systemd passes a socket with `LISTEN_FDS`).
    pub socket: PathBuf,
    /// Group whose members may use the socket besides root (socket mode 0660, owned by it).
    pub group: Option<String>,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            socket: PathBuf::from(memweight_proto::ctl::DEFAULT_SOCKET),
            group: None,
        }
    }
}

/// `[metrics]`: the Prometheus endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve `/metrics` and `/healthz`.
    pub enabled: bool,
    /// Address and port, e.g. `127.0.0.1:9750` or `[::1]:9750`.
    pub listen: String,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            listen: "127.0.0.1:9750".to_owned(),
        }
    }
}

impl MetricsConfig {
    /// The listen address, parsed.
    pub fn address(&self) -> Result<std::net::SocketAddr, String> {
        self.listen.trim().parse().map_err(|_| {
            format!(
                "expected an address and port like \"127.0.0.1:9750\" or \"[::1]:9750\", got {:?}",
                self.listen
            )
        })
    }
}

/// `[containers]`: weights from container labels, read through the Docker-compatible API
/// that podman (`podman.socket`) and docker serve.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContainersConfig {
    /// Ask the container engine for names and labels.
    pub enabled: bool,
    /// The engine's API socket; `None` = the first of [`DEFAULT_ENGINE_SOCKETS`] that exists,
    /// looked up again at each refresh.
    pub socket: Option<PathBuf>,
    /// The shortest time between two requests for the list of running containers: it is
    /// fetched when the containers' cgroups change, and every 300 refreshes otherwise.
    pub refresh: Interval,
    /// Labels read are `<prefix>weight`, `<prefix>min` and `<prefix>max`.
    pub label_prefix: String,
}

/// Where the engine's API socket is looked for when `[containers] socket` is not set: podman
/// (`podman.socket`), then docker.
pub const DEFAULT_ENGINE_SOCKETS: [&str; 2] = ["/run/podman/podman.sock", "/var/run/docker.sock"];

impl Default for ContainersConfig {
    fn default() -> Self {
        ContainersConfig {
            enabled: true,
            socket: None,
            refresh: Interval(Duration::from_secs(2)),
            label_prefix: "memweight.".to_owned(),
        }
    }
}

/// One `[[cgroup]]` rule: an exact path or a glob, and what to give the cgroups it names.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupRule {
    /// Exact path relative to the cgroup root.
    pub path: Option<String>,
    /// Glob over paths relative to the root (`*` does not cross `/`).
    pub glob: Option<String>,
    /// Weight, [`memweight_policy::MIN_WEIGHT`]`..=`[`memweight_policy::MAX_WEIGHT`].
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Floor: memory.high never goes below this.
    pub min: Option<Size>,
    /// Ceiling for the target.
    pub max: Option<Size>,
    /// The largest weight a container's `<prefix>weight` label may ask for; more is clamped
    /// to it. Default: the rule's `weight` (a label may only lower it).
    pub label_weight_max: Option<u32>,
    /// The largest floor a container's `<prefix>min` label may ask for; more is clamped to it.
    /// Default: the rule's `min` (0 without one).
    pub label_min_max: Option<Size>,
    /// Whether a container's `<prefix>max` label may raise the rule's `max`. Default `false`:
    /// a label's max above the rule's is refused (the rule's applies); below it, or under a
    /// rule without a max, it applies.
    #[serde(default)]
    pub label_max_may_rise: bool,
}

fn default_weight() -> u32 {
    DEFAULT_WEIGHT
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Root of the cgroup v2 hierarchy.
    pub cgroup_root: PathBuf,
    /// Root of procfs (for `/proc/meminfo` and `/proc/pressure/memory`).
    pub proc_root: PathBuf,
    /// Root of sysfs (for `/sys/kernel/mm/lru_gen/enabled`: which LRU the kernel reclaims
    /// with).
    pub sys_root: PathBuf,
    /// How often the control loop runs.
    pub tick: Interval,
    /// Where the original limits and runtime overrides are kept.
    pub state_dir: PathBuf,
    /// `false` = dry run: compute and log, write nothing.
    pub enforce: bool,
    /// Move usage to the targets with `memory.reclaim` (where the kernel has it), keeping
    /// `memory.high` as a guard [`Config::guard`] above the target, so a cgroup at its share is
    /// not held in the kernel's throttling sleeps. `false`: `memory.high` at the target is the
    /// only brake.
    pub reclaim: bool,
    /// How far above its target `memory.high` is kept while `memory.reclaim` moves usage
    /// (bytes or % of the target). `"0%"`: memory.high at the target, memory.reclaim only for
    /// usage that outran it (the behaviour before issue 11).
    pub guard: Amount,
    /// `memory.reclaim` passes per tick on a cgroup held at a share (`1..=MAX_RECLAIM_PASSES`):
    /// the tick's own, and the rest evenly between ticks, each taking usage that regrew past
    /// the tick's mark back to it, so that a cgroup that refaults more in a tick than its guard
    /// does not reach its `memory.high` and reclaim its own pages in the kernel's throttle.
    /// `1`: only at the tick.
    pub reclaim_passes: u32,
    /// Idle memory tax, percent (`0..=99`, 0 = off): memory a cgroup holds but does not use
    /// (beyond the kernel's active LRU lists) weighs `100 / (100 − idle_tax)` times what
    /// active memory does when the pool is shared, so idle memory gives way first (VMware
    /// ESX's default is 75).
    pub idle_tax: u8,
    /// Drop of memory.high in one tick toward its ceiling: the larger of this (bytes or % of
    /// the cgroup's usage) and half the distance left.
    pub max_step: Amount,
    /// Absolute minimum added to every floor.
    pub min_floor: Size,
    /// Raise the `memory.low` of managed cgroups' ancestors to the sum of what the law
    /// protects below them (never lower than their own value), since the kernel caps a
    /// cgroup's protection by its ancestors'. The work-conserving law (`mode = "kernel"`)
    /// protects a cgroup that reaches for memory with `memory.low`, which protects nothing
    /// under a parent whose own is 0 (systemd's `machine.slice`, measured in docs/design.md):
    /// on by default, for that mode. Every value it raises is recorded and written back.
    pub protect_ancestors: bool,
    /// `error`, `warn`, `info`, `debug` or `trace` (overridden by `RUST_LOG`).
    pub log_level: String,
    /// `[capacity]`.
    pub capacity: CapacityConfig,
    /// `[control]`.
    pub control: ControlConfig,
    /// `[metrics]`.
    pub metrics: MetricsConfig,
    /// `[containers]`.
    pub containers: ContainersConfig,
    /// `[[cgroup]]` rules, first match wins; exact paths are matched before globs.
    pub cgroup: Vec<CgroupRule>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            tick: Interval(Duration::from_secs(1)),
            state_dir: PathBuf::from("/var/lib/memweight"),
            enforce: true,
            reclaim: true,
            guard: Amount::Percent(DEFAULT_GUARD_PERCENT),
            reclaim_passes: DEFAULT_RECLAIM_PASSES,
            idle_tax: 0,
            max_step: Amount::Percent(10.0),
            min_floor: Size(16 << 20),
            protect_ancestors: true,
            log_level: "info".to_owned(),
            capacity: CapacityConfig::default(),
            control: ControlConfig::default(),
            metrics: MetricsConfig::default(),
            containers: ContainersConfig::default(),
            cgroup: Vec::new(),
        }
    }
}
