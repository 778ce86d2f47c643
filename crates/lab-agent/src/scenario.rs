//! The scenario file: what the guest runs, shared by the host harness (`cargo xtask lab`) and
//! the guest agent so that both read the same TOML the same way.
//!
//! [`Scenario::parse`] deserialises and validates; nothing here touches the file system. The
//! format is documented key by key in `docs/lab.md`. A file may name another it is
//! [`BASED_ON`]: [`overlay`] lays it over that one (the kernel-default baseline of a scenario is
//! the scenario with `[daemon] enabled = false`, not a copy that can drift from it); the host
//! harness reads the files and hands the guest the result.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

pub use memweight_cgroupfs::Limit;
pub use memweight_proto::Size;
use serde::{Deserialize, Serialize};

mod validate;

/// Where the agent creates the managed cgroups, relative to the cgroup2 mount.
pub const LAB_PARENT: &str = "lab";
/// The cgroup (relative to the cgroup2 mount) that holds the external pressure process.
pub const PRESSURE_CGROUP: &str = "lab-pressure";

/// A problem with a scenario file.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The TOML did not deserialise.
    #[error("scenario is not valid TOML for the lab format (see docs/lab.md): {0}")]
    Toml(#[from] toml::de::Error),
    /// The TOML parsed but says something impossible.
    #[error("scenario is inconsistent: {0}")]
    Invalid(String),
}

/// Serde for a [`Limit`] as scenarios and records write it: `"max"`, or a [`Size`] (`"900M"`,
/// `4096`); written as the kernel's text (`"max"`, `"943718400"`). Use with
/// `#[serde(with = "limit_text")]`, or `limit_text::option` for an `Option<Limit>`.
pub mod limit_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::{Limit, Size};

    #[derive(Deserialize)]
    #[serde(untagged)]
    pub(super) enum Repr {
        Int(u64),
        Text(String),
    }

    impl TryFrom<Repr> for Limit {
        type Error = String;
        fn try_from(value: Repr) -> Result<Self, Self::Error> {
            match value {
                Repr::Int(n) => Ok(Limit::Bytes(n)),
                Repr::Text(s) if s.trim() == "max" => Ok(Limit::Max),
                Repr::Text(s) => s
                    .parse::<Size>()
                    .map(|b| Limit::Bytes(b.0))
                    .map_err(|e| format!("expected \"max\" or a size: {e}")),
            }
        }
    }

    /// Writes `"max"` or the byte count as a string.
    pub fn serialize<S: Serializer>(limit: &Limit, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(limit)
    }

    /// Reads `"max"`, a size string or an integer.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Limit, D::Error> {
        Limit::try_from(Repr::deserialize(d)?).map_err(serde::de::Error::custom)
    }

    /// The same for an optional limit (`null` or absent: `None`).
    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};

        use super::{Limit, Repr};

        /// `null`, or as [`super::serialize`].
        pub fn serialize<S: Serializer>(limit: &Option<Limit>, s: S) -> Result<S::Ok, S::Error> {
            match limit {
                Some(l) => s.serialize_some(&l.to_string()),
                None => s.serialize_none(),
            }
        }

        /// `null`, or as [`super::deserialize`].
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Limit>, D::Error> {
            Option::<Repr>::deserialize(d)?
                .map(Limit::try_from)
                .transpose()
                .map_err(serde::de::Error::custom)
        }
    }
}

/// The Debian kernel a scenario boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, Hash)]
pub enum Kernel {
    /// Debian 12's default 6.1 kernel (`linux-image-amd64`).
    #[default]
    #[serde(rename = "6.1")]
    V6_1,
    /// Debian 12's backported 6.12 kernel (`linux-image-6.12-amd64`).
    #[serde(rename = "6.12")]
    V6_12,
}

impl Kernel {
    /// Both kernels, in the order CI runs them.
    pub const ALL: [Kernel; 2] = [Kernel::V6_1, Kernel::V6_12];

    /// `6.1` or `6.12`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kernel::V6_1 => "6.1",
            Kernel::V6_12 => "6.12",
        }
    }
}

impl FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "6.1" => Ok(Kernel::V6_1),
            "6.12" => Ok(Kernel::V6_12),
            other => Err(format!("unknown kernel {other:?}: use 6.1 or 6.12")),
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn default_ram() -> Size {
    Size(1 << 30)
}
fn default_zram() -> Size {
    Size(1 << 30)
}
fn default_cpus() -> u32 {
    2
}
fn default_weight() -> u32 {
    memweight_policy::DEFAULT_WEIGHT
}

/// Which guest a scenario boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guest {
    /// A busybox initramfs: the agent is PID 1's child, makes the cgroups itself under
    /// `/sys/fs/cgroup/lab/` and starts memweightd as its own child.
    #[default]
    Busybox,
    /// A Debian container host on an ext4 disk: systemd as PID 1, podman containers in
    /// `machine.slice/libpod-<id>.scope`, memweightd installed by the README's steps and run
    /// by its systemd unit, pressure from the guest and from QEMU's virtio-balloon.
    Host,
}

/// The container engine of the host guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// podman with its systemd cgroup manager: `machine.slice/libpod-<id>.scope`.
    #[default]
    Podman,
    /// docker (Debian's docker.io) with the systemd cgroup driver:
    /// `system.slice/docker-<id>.scope`. Its units are off in the image; the agent starts
    /// `docker.service` and imports the container root as an image before the clock starts.
    Docker,
}

/// How the host guest installs memweightd: one of the README's two `## Install` blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Install {
    /// The Debian package: `apt install ./target/debian/memweight_*.deb` (the first block).
    Package,
    /// The manual lines: binaries to `/usr/local/bin`, the shipped units to
    /// `/etc/systemd/system` (the second block). The default: it takes a few seconds of guest
    /// time where the package takes 45-60 s (more beside busy workloads), and the host
    /// scenarios' timelines were made for it.
    #[default]
    Manual,
}

/// A whole scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free text shown in the summary.
    #[serde(default)]
    pub description: String,
    /// Guest RAM (`-m`).
    #[serde(default = "default_ram")]
    pub ram: Size,
    /// zram swap size; `0` boots without swap.
    #[serde(default = "default_zram")]
    pub zram: Size,
    /// Guest CPUs (`-smp`).
    #[serde(default = "default_cpus")]
    pub cpus: u32,
    /// Kernel booted unless `--kernel` overrides it.
    #[serde(default)]
    pub kernel: Kernel,
    /// The guest: `busybox` (default) or `host` (systemd + podman on a disk).
    #[serde(default)]
    pub guest: Guest,
    /// The host guest's container engine: `podman` (default) or `docker`.
    #[serde(default)]
    pub runtime: Runtime,
    /// Host guest: how memweightd is installed (the README's package or manual lines).
    #[serde(default)]
    pub install: Install,
    /// The kernels `cargo xtask lab test` runs the scenario on; empty (the default): every
    /// kernel. `lab run --kernel` is not limited by it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ci_kernels: Vec<Kernel>,
    /// Seconds the scenario runs once the workloads are started.
    pub duration: u64,
    /// `duration` is a limit, not the length: the run ends at the first second at which every
    /// timed event (workload, daemon, pressure and balloon step, command) is past and no
    /// command still runs. For scenarios whose last part is a chain of steps that each wait for
    /// the one before: TCG's pace decides how long they take, so a fixed end either cuts
    /// them off on a slow day or idles on a fast one. The results are judged on what ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end_when_done: bool,
    /// Managed cgroups, created under `/sys/fs/cgroup/lab/`.
    #[serde(default, rename = "cgroup")]
    pub cgroups: Vec<CgroupSpec>,
    /// External pressure steps.
    #[serde(default, rename = "pressure")]
    pub pressure: Vec<PressureStep>,
    /// virtio-balloon steps (host guest only): from `at` on, the balloon holds `size` of the
    /// guest's RAM (the host drives QEMU over QMP).
    #[serde(default, rename = "balloon")]
    pub balloon: Vec<PressureStep>,
    /// memweightd on/off and its configuration.
    #[serde(default)]
    pub daemon: DaemonSpec,
    /// Static `memory.low` per cgroup name, written once at setup (seed 002's "SL" knob).
    #[serde(default)]
    pub static_low: BTreeMap<String, Size>,
    /// `memory.low` of the parent `lab` cgroup. A child's protection is capped by its
    /// parent's, so without this the children's `memory.low` protects nothing. Default: the
    /// sum of `static_low` when that is set, else left at 0.
    #[serde(default, with = "limit_text::option")]
    pub lab_low: Option<Limit>,
    /// Timed commands.
    #[serde(default, rename = "command")]
    pub commands: Vec<CommandSpec>,
    /// Assertions evaluated by the host on the results.
    #[serde(default, rename = "check")]
    pub checks: Vec<Check>,
    /// A Prometheus server on the lab host that scrapes the host guest's daemon during the
    /// run (host guest only; see docs/lab.md, "Prometheus on the lab host").
    #[serde(default)]
    pub prometheus: Option<PrometheusSpec>,
}

/// `[prometheus]`: QEMU forwards a port on the host's loopback to `guest_port` in the guest
/// (user-mode networking, `restrict=on`: the guest reaches nothing); a Prometheus on the host
/// scrapes it every 2 s and evaluates `rules`; after the run every query of `dashboard` and
/// every rule must return data, and each `[[prometheus.alert]]` must fire when it says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrometheusSpec {
    /// The guest port the scrapes arrive at; a scenario command exposes the daemon's
    /// loopback-only `/metrics` there.
    pub guest_port: u16,
    /// Alert rules file, relative to the repository.
    pub rules: String,
    /// Grafana dashboard JSON, relative to the repository.
    pub dashboard: String,
    /// Alerts that must fire (and stay quiet) in given windows.
    #[serde(default, rename = "alert")]
    pub alerts: Vec<AlertSpec>,
}

/// An alert that must be firing at some time in `[fires_from, fires_until]` (scenario
/// seconds) and at no time in `[quiet_from, quiet_until]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertSpec {
    /// `alertname`.
    pub name: String,
    /// Window in which it must fire.
    pub fires_from: u64,
    /// See `fires_from`.
    pub fires_until: u64,
    /// Window in which it must not fire.
    pub quiet_from: u64,
    /// See `quiet_from`.
    pub quiet_until: u64,
}

/// One managed cgroup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupSpec {
    /// Name, a single path component; the cgroup is `/sys/fs/cgroup/lab/<name>`.
    pub name: String,
    /// Weight (as in the daemon config; used for the water-filled targets).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Floor (`lo` of the water-fill).
    #[serde(default)]
    pub min: Option<Size>,
    /// Ceiling of the cgroup's share (caps `hi` of the water-fill); not written to the kernel.
    #[serde(default)]
    pub max: Option<Size>,
    /// What the cgroup wants without pressure; default: the workload's `--size`.
    #[serde(default)]
    pub demand: Option<Size>,
    /// argv of `memweight-workload` (without the program name).
    #[serde(default)]
    pub workload: Option<Vec<String>>,
    /// A raw argv run instead of the workload program (e.g. busybox tools, `redis-server`).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// argv of a `memweight-workload` run beside the cgroup, outside it (host guest: outside
    /// the container), started with it: a client of the server the cgroup runs. Its ops/s are
    /// the cgroup's in the results.
    #[serde(default)]
    pub client: Option<Vec<String>>,
    /// Seconds after the start at which the workload starts.
    #[serde(default)]
    pub start: u64,
    /// `memory.high` written before anything starts (to test restore on SIGTERM).
    #[serde(default, with = "limit_text::option")]
    pub initial_high: Option<Limit>,
    /// `memory.low` written before anything starts.
    #[serde(default)]
    pub initial_low: Option<Size>,
    /// Container labels (host guest: `podman run --label KEY=VALUE`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Host guest, podman: run the workload as a pod with `podman kube play` (a Pod named
    /// after the cgroup, one container `work`, host network, from a scratch image of the
    /// workload program) instead of `podman run`; its cgroup is the container's scope in the
    /// pod's `machine-libpod_pod_<id>.slice`.
    #[serde(default)]
    pub kube: bool,
    /// The pod's `metadata.annotations` (`kube = true` only).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl CgroupSpec {
    /// The argv the guest executes for this cgroup, program first.
    pub fn argv(&self) -> Vec<String> {
        match (&self.command, &self.workload) {
            (Some(cmd), _) => cmd.clone(),
            (None, Some(args)) => workload_argv(args),
            (None, None) => Vec::new(),
        }
    }

    /// The client's argv, program first (empty without a client).
    pub fn client_argv(&self) -> Vec<String> {
        self.client.as_deref().map_or_else(Vec::new, workload_argv)
    }

    /// The demand (`hi` of the water-fill before `max`): `demand`, or the workload's `--size`.
    pub fn declared_demand(&self) -> Option<u64> {
        if let Some(d) = self.demand {
            return Some(d.0);
        }
        let args = self.workload.as_ref()?;
        let pos = args.iter().position(|a| a == "--size")?;
        args.get(pos + 1)?.parse::<Size>().ok().map(|s| s.0)
    }
}

/// `memweight-workload` with `args`.
fn workload_argv(args: &[String]) -> Vec<String> {
    std::iter::once("memweight-workload".to_owned())
        .chain(args.iter().cloned())
        .collect()
}

/// One external pressure step: from `at` on, the pressure process holds `size`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PressureStep {
    /// Seconds since the start.
    pub at: u64,
    /// Bytes held from then on (`0` stops the pressure process).
    pub size: Size,
}

/// The daemon section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonSpec {
    /// Start memweightd.
    #[serde(default)]
    pub enabled: bool,
    /// Seconds after the workloads start at which the daemon starts.
    #[serde(default)]
    pub start: u64,
    /// memweightd's TOML configuration, written verbatim to `/etc/memweight.toml`.
    #[serde(default)]
    pub config: toml::Table,
    /// Ask memweightd for its `status` on its control socket once a second while it runs and
    /// record its view (pool capacity, enforcing, per cgroup target, entitlement, ceiling and
    /// trim) with each sample. Off by default: each answer costs the daemon some CPU, which
    /// the runs' `d-cpu` would count. Refused beside an action that stops or starts the
    /// daemon. Without `enabled` it asks a daemon the scenario runs itself (host-kube's pod,
    /// its socket on the host's path) whenever that socket answers.
    #[serde(default)]
    pub sample_status: bool,
}

impl DaemonSpec {
    /// The control socket memweightd listens on: `[control] socket` of its configuration, or
    /// the default.
    #[must_use]
    pub fn socket(&self) -> &str {
        self.config
            .get("control")
            .and_then(|c| c.get("socket"))
            .and_then(toml::Value::as_str)
            .unwrap_or(memweight_proto::ctl::DEFAULT_SOCKET)
    }
}

/// A built-in action of a timed command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// SIGTERM to memweightd; its exit status is recorded.
    StopDaemon,
    /// Kill the cgroup's workload, then `rmdir` the cgroup.
    RemoveCgroup,
    /// SIGKILL to memweightd (a crash: nothing is restored); its death is expected.
    KillDaemon,
    /// Start memweightd again with the same config (after `kill-daemon` or `stop-daemon`).
    StartDaemon,
}

/// A timed command: a shell line (`run`) or a built-in `action`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// Seconds since the start.
    pub at: u64,
    /// Shell line run with `sh -c`; its output is saved to `commands/`.
    #[serde(default)]
    pub run: Option<String>,
    /// Built-in action.
    #[serde(default)]
    pub action: Option<Action>,
    /// Cgroup name the action applies to.
    #[serde(default)]
    pub cgroup: Option<String>,
    /// The shell line is an assertion: it must exit 0 (judged by the `asserts-ok` check).
    #[serde(default)]
    pub assert: bool,
    /// Seconds before the shell line is killed (default 20).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Only in a run with the daemon: a scenario parsed with `[daemon] enabled = false` (the
    /// kernel-default baseline [`BASED_ON`] it) drops this command.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub with_daemon: bool,
}

/// An assertion on the results, evaluated by the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Check {
    /// `summary.max_error_pct <= max` (phases that start at or after `from`, default all).
    MaxErrorPct {
        /// Bound in percent.
        max: f64,
        /// Only phases that start at or after this second.
        #[serde(default)]
        from: u64,
        /// Only phases that end at or before this second (default: all).
        #[serde(default)]
        until: Option<u64>,
    },
    /// No `oom_kill` in any managed cgroup's `memory.events`.
    NoOomKill,
    /// The cgroup's `memory.high` was below `max` in some sample at or after `from`.
    HighSet {
        /// Cgroup name, or `*` for every cgroup.
        cgroup: String,
        /// From this second on.
        #[serde(default)]
        from: u64,
    },
    /// The cgroup's `memory.low` was above 0 in some sample.
    LowSet {
        /// Cgroup name, or `*`.
        cgroup: String,
    },
    /// The cgroup's `memory.high` equals `value` in every sample in `[from, to]`.
    HighStays {
        /// Cgroup name, or `*`.
        cgroup: String,
        /// Expected value.
        #[serde(with = "limit_text")]
        value: Limit,
        /// Window start (seconds).
        #[serde(default)]
        from: u64,
        /// Window end (seconds; default: the end).
        #[serde(default)]
        to: Option<u64>,
    },
    /// The cgroup's `memory.low` equals `value` in every sample in `[from, to]`.
    LowStays {
        /// Cgroup name, or `*`.
        cgroup: String,
        /// Expected value.
        value: Size,
        /// Window start (seconds).
        #[serde(default)]
        from: u64,
        /// Window end (seconds; default: the end).
        #[serde(default)]
        to: Option<u64>,
    },
    /// The daemon was running in every sample until `until` (default: until a stop action, or
    /// the end).
    DaemonAlive {
        /// First second at which it must run (default: the daemon's `start`).
        #[serde(default)]
        from: Option<u64>,
        /// Last second at which it must still run.
        #[serde(default)]
        until: Option<u64>,
    },
    /// With `daemon.sample_status`: in at least `min_pct` % of the samples from `from` on, the
    /// daemon's `status` was recorded and listed every cgroup present, and the ticks it
    /// reported went forward (live answers, not one kept; a daemon restarted counts its ticks
    /// anew, so this is for a scenario where it runs throughout).
    DaemonView {
        /// First second judged.
        #[serde(default)]
        from: u64,
        /// Share of the samples that must carry the view, in percent.
        min_pct: f64,
    },
    /// The daemon exited with status 0 after SIGTERM.
    DaemonExitOk,
    /// `daemon.log` has no ERROR line and no panic, but for lines containing one of
    /// `expected` (an error the scenario provokes on purpose, e.g. systemd's "Reload failed"
    /// for a refused config).
    DaemonLogClean {
        /// Substrings of the ERROR lines the scenario provokes.
        #[serde(default)]
        expected: Vec<String>,
    },
    /// Every built-in action and pressure step succeeded (shell commands are not judged).
    ActionsOk,
    /// Every `assert = true` command ran and exited 0 (host guest: the README install too).
    AssertsOk,
    /// In every phase that starts at or after `from`, the managed cgroups held together (Σ of
    /// their mean usage) at least `min_pct` % of what they held in the same phase of the
    /// `baseline` scenario's run on the same kernel (its `summary.json` beside this run's
    /// output: `lab test` and `lab compare` run it first). Issue 19: the daemon must not cost
    /// the containers memory the kernel alone would have left them.
    UsageVsBaseline {
        /// File name of the baseline scenario, e.g. `table2-default.toml`.
        baseline: String,
        /// Least share of the baseline's total, in percent.
        min_pct: f64,
        /// Only phases that start at or after this second.
        #[serde(default)]
        from: u64,
    },
}

impl Check {
    /// The baseline scenario this check compares against, if any.
    #[must_use]
    pub fn baseline(&self) -> Option<&str> {
        match self {
            Check::UsageVsBaseline { baseline, .. } => Some(baseline),
            _ => None,
        }
    }
}

/// The key by which a scenario file names the file it is based on (a path relative to its own
/// directory).
pub const BASED_ON: &str = "based_on";

/// `derived` laid over `base`, the scenario a file [`BASED_ON`] another stands for: each key
/// of `derived` replaces the base's, but a table in both (`[daemon]`, `[daemon.config]`) is
/// laid over the base's key by key. An array, `[[cgroup]]` or `[[command]]` among them, is
/// replaced whole. `derived`'s own `based_on` is not carried over.
#[must_use]
pub fn overlay(mut base: toml::Table, derived: toml::Table) -> toml::Table {
    for (key, value) in derived {
        if key == BASED_ON {
            continue;
        }
        let merged = match (base.remove(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(d)) => {
                toml::Value::Table(overlay(b, d))
            }
            (_, d) => d,
        };
        base.insert(key, merged);
    }
    base
}

fn step_at(steps: &[PressureStep], t: u64) -> u64 {
    steps
        .iter()
        .filter(|p| p.at <= t)
        .max_by_key(|p| p.at)
        .map_or(0, |p| p.size.0)
}

impl Scenario {
    /// Parses and validates a scenario. Without the daemon, the commands marked `with_daemon`
    /// are dropped.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let mut scenario: Scenario = toml::from_str(text)?;
        if !scenario.daemon.enabled {
            scenario.commands.retain(|c| !c.with_daemon);
        }
        scenario.validate()?;
        Ok(scenario)
    }

    /// Serialises back to TOML (what the guest receives).
    pub fn to_toml(&self) -> Result<String, ScenarioError> {
        toml::to_string(self).map_err(|e| ScenarioError::Invalid(format!("cannot serialise: {e}")))
    }

    /// The cgroup spec of that name.
    pub fn cgroup(&self, name: &str) -> Option<&CgroupSpec> {
        self.cgroups.iter().find(|c| c.name == name)
    }

    /// Pressure phases as `(start, end)` seconds: `[0, first step)`, then one per step (of
    /// the in-guest pressure or the balloon).
    pub fn phases(&self) -> Vec<(u64, u64)> {
        let mut bounds: Vec<u64> = self
            .pressure
            .iter()
            .chain(&self.balloon)
            .map(|p| p.at)
            .filter(|&a| a > 0 && a < self.duration)
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut phases = Vec::with_capacity(bounds.len() + 1);
        let mut start = 0;
        for b in bounds {
            phases.push((start, b));
            start = b;
        }
        phases.push((start, self.duration));
        phases
    }

    /// The second of the last timed event: a workload's or the daemon's start, a pressure or
    /// balloon step, a command. With `end_when_done` the run may end once this is past.
    pub fn last_event(&self) -> u64 {
        let daemon = self.daemon.enabled.then_some(self.daemon.start);
        self.cgroups
            .iter()
            .map(|c| c.start)
            .chain(daemon)
            .chain(self.pressure.iter().chain(&self.balloon).map(|p| p.at))
            .chain(self.commands.iter().map(|c| c.at))
            .max()
            .unwrap_or(0)
    }

    /// The scenario as it ran when its last sample was at second `last`: with
    /// `end_when_done`, `duration` becomes the second it ended at (phases, plots and checks
    /// judge what ran); otherwise unchanged.
    pub fn as_ran(&self, last: Option<u64>) -> Scenario {
        let mut ran = self.clone();
        if let (true, Some(last)) = (self.end_when_done, last) {
            ran.duration = last.clamp(1, self.duration);
        }
        ran
    }

    /// What the agent writes to `lab/memory.low`, if anything.
    pub fn effective_lab_low(&self) -> Option<Limit> {
        self.lab_low.or_else(|| {
            (!self.static_low.is_empty())
                .then(|| Limit::Bytes(self.static_low.values().map(|s| s.0).sum()))
        })
    }

    /// The pressure size in force at second `t`.
    pub fn pressure_at(&self, t: u64) -> u64 {
        step_at(&self.pressure, t)
    }

    /// The balloon size in force at second `t`.
    pub fn balloon_at(&self, t: u64) -> u64 {
        step_at(&self.balloon, t)
    }

    /// argv of the one pressure process that follows every step (`hog --schedule`), started
    /// at second 0 so a step never drops the pressure by restarting it; `None` without steps.
    pub fn pressure_argv(&self) -> Option<Vec<String>> {
        if self.pressure.is_empty() {
            return None;
        }
        let initial = self.pressure_at(0);
        let mut steps: Vec<&PressureStep> = self.pressure.iter().filter(|p| p.at > 0).collect();
        steps.sort_by_key(|p| p.at);
        steps.dedup_by_key(|p| p.at);
        // One page rather than nothing, in case the hog refuses an empty start.
        let mut argv: Vec<String> = vec![
            "memweight-workload".into(),
            "hog".into(),
            "--size".into(),
            Size(initial.max(4096)).to_string(),
        ];
        if !steps.is_empty() {
            let schedule: Vec<String> = steps
                .iter()
                .map(|p| format!("{}:{}", p.at, p.size))
                .collect();
            argv.push("--schedule".into());
            argv.push(schedule.join(","));
        }
        Some(argv)
    }
}

#[cfg(test)]
mod tests;
