//! The daemon's TOML configuration: parsing, defaults and validation.
//!
//! Every key is documented in `docs/configuration.md`. Parsing is pure (`&str` in, [`Config`]
//! out) so `memweightd --check-config` and the tests use the same code as the daemon.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobMatcher};
use memweight_policy::{DEFAULT_WEIGHT, check_weight};
use memweight_proto::cgroup_path;
use memweight_proto::size::Size;
use serde::{Deserialize, Deserializer};

/// Errors found while loading or validating a configuration file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TOML did not parse or had a wrong key or value.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// What the TOML parser said, with line and column.
        message: String,
    },
    /// A value parsed but makes no sense.
    #[error("{path}: {field}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Which key, e.g. `cgroup[2].weight`.
        field: String,
        /// What is wrong and what is accepted.
        message: String,
    },
}

/// An amount that is either a byte size or a percentage of something (MemTotal, usage).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// Bytes.
    Bytes(u64),
    /// Percent, `0.0..=100.0`.
    Percent(f64),
}

impl Amount {
    /// Resolves against `whole` (for a percentage), rounding down.
    #[must_use]
    pub fn of(self, whole: u64) -> u64 {
        match self {
            Amount::Bytes(b) => b,
            Amount::Percent(p) => {
                // Percent is validated to 0..=100 and carried in hundredths of a percent, so
                // the product fits in u128 and the result is at most `whole`.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                // Rounded and clamped to 0..=10000 first, so the cast is exact.
                let basis_points = (p * 100.0).round().clamp(0.0, 10_000.0) as u128;
                u64::try_from(u128::from(whole) * basis_points / 10_000).unwrap_or(whole)
            }
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amount::Bytes(b) => write!(f, "{b}"),
            Amount::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// An amount as written: a number of bytes or a string (`"80%"`, `"512M"`, or a keyword).
#[derive(Deserialize)]
#[serde(untagged)]
enum RawAmount {
    Int(i64),
    Str(String),
}

impl RawAmount {
    fn amount(self) -> Result<Amount, String> {
        match self {
            RawAmount::Int(i) => u64::try_from(i)
                .map(Amount::Bytes)
                .map_err(|_| format!("size must not be negative, got {i}")),
            RawAmount::Str(s) => parse_amount(&s),
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawAmount::deserialize(d)?
            .amount()
            .map_err(serde::de::Error::custom)
    }
}

/// `capacity.reserve`: the MemAvailable the pool leaves free; below it the host is short.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reserve {
    /// `"watermarks"` (the default): the width of the kernel's own reclaim band, Σ (`high` −
    /// `min`) over every zone in `/proc/zoneinfo`, which `vm.watermark_scale_factor` and
    /// `vm.min_free_kbytes` set. MemAvailable already leaves out free memory up to the `high`
    /// watermarks; once it is within this band of zero, free memory is about to fall to `low`,
    /// where kswapd starts reclaiming. A shortage, as the kernel sees it.
    Watermarks,
    /// A fixed size, or a percentage of MemTotal.
    Amount(Amount),
}

impl fmt::Display for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reserve::Watermarks => f.write_str("watermarks"),
            Reserve::Amount(a) => a.fmt(f),
        }
    }
}

impl<'de> Deserialize<'de> for Reserve {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match RawAmount::deserialize(d)? {
            RawAmount::Str(s) if s.trim() == "watermarks" => Ok(Reserve::Watermarks),
            raw => raw.amount().map(Reserve::Amount).map_err(|e| {
                serde::de::Error::custom(format!("{e} (or \"watermarks\", the default)"))
            }),
        }
    }
}

/// Parses `"80%"`, `"512M"`, `"1.5G"` or `"4096"`.
pub fn parse_amount(s: &str) -> Result<Amount, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("expected a percentage like \"80%\", got {s:?}"))?;
        if !(0.0..=100.0).contains(&v) {
            return Err(format!("percentage must be between 0% and 100%, got {s:?}"));
        }
        return Ok(Amount::Percent(v));
    }
    t.parse::<Size>()
        .map(|sz| Amount::Bytes(sz.bytes()))
        .map_err(|e| e.to_string())
}

/// Default [`Config::guard`]: memory.high this many percent above the target.
pub const DEFAULT_GUARD_PERCENT: f64 = 8.0;
/// Shortest `tick` accepted.
pub const MIN_TICK: Duration = Duration::from_millis(100);
/// Longest `tick` accepted: a tick must fit three times into the unit's `WatchdogSec=30s`.
pub const MAX_TICK: Duration = Duration::from_secs(10);
/// Largest configuration file read; anything longer is not a memweight config.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A duration written as `"1s"`, `"500ms"`, `"2m"` or a number of seconds.
///
/// Parsing never panics: NaN, infinities, negative values and values beyond what a
/// [`Duration`] holds are errors; the range a key accepts is checked by [`Config::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(pub Duration);

/// `value` seconds as a [`Duration`], or a message quoting `written`.
fn seconds(value: f64, written: &str) -> Result<Duration, String> {
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "expected a duration like \"1s\", \"500ms\" or \"2m\", got {written:?}"
        ));
    }
    Duration::try_from_secs_f64(value).map_err(|_| {
        format!("duration {written:?} is far too long; write something like \"1s\" or \"500ms\"")
    })
}

/// Parses `"1s"`, `"500ms"`, `"2m"` or `"1.5"` (seconds).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("expected a duration like \"1s\", \"500ms\" or \"2m\", got {s:?}"))?;
    seconds(v * scale, s)
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Float(f64),
            Str(String),
        }
        let dur = match Raw::deserialize(d)? {
            Raw::Int(i) => Ok(Duration::from_secs(i)),
            Raw::Float(f) => seconds(f, &f.to_string()),
            Raw::Str(s) => parse_interval(&s),
        };
        dur.map(Interval).map_err(serde::de::Error::custom)
    }
}

/// How the pool capacity `C` is chosen, and with it how the split is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CapacityMode {
    /// Work-conserving (opt-in until it passes the host guest on both kernels, see
    /// docs/configuration.md): the kernel decides how much the managed cgroups keep
    /// together, the daemon only how it is split. The pool is what they hold now, plus
    /// MemAvailable above the reserve while the kernel's global reclaim is idle
    /// (`/proc/vmstat` `pgscan_kswapd` + `pgscan_direct` did not move since the last tick).
    /// Nothing is protected or throttled while no managed cgroup reaches for memory (faults
    /// it back, [`crate::capacity::REFAULT_DEMAND`], or stalls on it,
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
    Kernel,
    /// Defend a reserve: shrink the pool by the shortfall of MemAvailable below the reserve
    /// and under host PSI, and enforce it with `memory.reclaim` and `memory.high`: the managed
    /// cgroups pay for the whole shortage, and the host's free memory stays above the reserve
    /// (docs/configuration.md says when to choose it). The default; `"auto"` is its earlier
    /// name, so configs written for it keep their law.
    #[default]
    #[serde(alias = "auto")]
    Reserve,
    /// A fixed size or share of MemTotal, enforced like `reserve`.
    Fixed,
}

/// `[capacity]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CapacityConfig {
    /// `reserve` (the default; `auto` reads as it), `kernel` (work-conserving) or `fixed`.
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
            mode: CapacityMode::Reserve,
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
    /// fetched when the containers' cgroups change, and every 30 refreshes otherwise.
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
    /// turn it on with that mode. Every value it raises is recorded and written back.
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
            tick: Interval(Duration::from_secs(1)),
            state_dir: PathBuf::from("/var/lib/memweight"),
            enforce: true,
            reclaim: true,
            guard: Amount::Percent(DEFAULT_GUARD_PERCENT),
            idle_tax: 0,
            max_step: Amount::Percent(10.0),
            min_floor: Size(16 << 20),
            protect_ancestors: false,
            log_level: "info".to_owned(),
            capacity: CapacityConfig::default(),
            control: ControlConfig::default(),
            metrics: MetricsConfig::default(),
            containers: ContainersConfig::default(),
            cgroup: Vec::new(),
        }
    }
}

/// What a rule resolves to for one cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Weight.
    pub weight: u32,
    /// Configured floor in bytes (0 when none).
    pub min: u64,
    /// Configured ceiling in bytes.
    pub max: Option<u64>,
}

/// What a rule lets its containers' labels ask for: labels are requests, and the operator
/// bounds them per rule (`label_weight_max`, `label_min_max`, `label_max_may_rise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelBounds {
    /// The largest weight a label may ask for.
    pub weight: u32,
    /// The largest floor a label may ask for, in bytes.
    pub min: u64,
    /// A label's max may rise above the rule's max.
    pub max_may_rise: bool,
}

/// One validated rule: its `path` or `glob` as written (normalised), what it gives the cgroups
/// it names, and what their containers' labels may ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The rule's `path` or `glob`.
    pub name: String,
    /// Weight, floor and ceiling.
    pub settings: Settings,
    /// The bounds on container labels.
    pub labels: LabelBounds,
}

/// A validated config with compiled globs.
#[derive(Debug, Clone)]
pub struct Rules {
    exact: Vec<Rule>,
    globs: Vec<(GlobMatcher, Rule)>,
    depth: usize,
}

impl Rules {
    /// No rules: nothing is managed (`memweightd --restore`).
    #[must_use]
    pub fn none() -> Rules {
        Rules {
            exact: Vec::new(),
            globs: Vec::new(),
            depth: 0,
        }
    }
}

impl Rules {
    /// The settings for the cgroup at `rel`, if a rule names it.
    #[must_use]
    pub fn settings_for(&self, rel: &str) -> Option<Settings> {
        self.rule_for(rel).map(|r| r.settings)
    }

    /// The first rule that names `rel`.
    #[must_use]
    pub fn rule_for(&self, rel: &str) -> Option<&Rule> {
        if let Some(r) = self.exact.iter().find(|r| r.name == rel) {
            return Some(r);
        }
        self.globs
            .iter()
            .find(|(g, _)| g.is_match(rel))
            .map(|(_, r)| r)
    }

    /// How deep below the root discovery must look.
    #[must_use]
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The exact paths, in the order written.
    pub fn exact_paths(&self) -> impl Iterator<Item = &str> {
        self.exact.iter().map(|r| r.name.as_str())
    }
}

impl Config {
    /// Reads `path` (at most [`MAX_CONFIG_BYTES`]) and validates it like [`Config::parse`].
    pub fn load(path: &Path) -> Result<(Config, Rules), ConfigError> {
        use std::io::Read as _;
        let read_err = |source| ConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .map_err(read_err)?
            .take(MAX_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(read_err)?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                field: "(file)".into(),
                message: format!("longer than {MAX_CONFIG_BYTES} bytes; is this the right file?"),
            });
        }
        Config::parse(&text, path)
    }

    /// Parses and validates `text`; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<(Config, Rules), ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        let rules = cfg.validate(path)?;
        Ok((cfg, rules))
    }

    /// Checks values the types cannot and compiles the rules, section by section; the first
    /// mistake found is the one reported.
    pub fn validate(&self, path: &Path) -> Result<Rules, ConfigError> {
        let invalid = invalid_in(path);
        let invalid = |(field, message): Problem| invalid(field.into(), message);
        self.check_top_level().map_err(invalid)?;
        self.check_capacity().map_err(invalid)?;
        self.check_control().map_err(invalid)?;
        self.check_metrics().map_err(invalid)?;
        self.check_containers().map_err(invalid)?;
        self.rules(path)
    }

    /// The keys outside any section: `tick`, `idle_tax`, `max_step`, the roots, `log_level`.
    fn check_top_level(&self) -> Result<(), Problem> {
        if !(MIN_TICK..=MAX_TICK).contains(&self.tick.0) {
            return Err((
                "tick",
                format!(
                    "must be between {MIN_TICK:?} and {MAX_TICK:?}, got {:?}",
                    self.tick.0
                ),
            ));
        }
        if self.idle_tax > memweight_policy::MAX_IDLE_TAX {
            return Err((
                "idle_tax",
                format!(
                    "must be 0..={} (percent; 75 is VMware ESX's default), got {}",
                    memweight_policy::MAX_IDLE_TAX,
                    self.idle_tax
                ),
            ));
        }
        if self.max_step.of(1 << 30) == 0 {
            return Err((
                "max_step",
                format!(
                    "{} would never lower memory.high; use e.g. \"10%\" or \"64M\"",
                    self.max_step
                ),
            ));
        }
        if !self.cgroup_root.is_absolute() {
            return Err(("cgroup_root", "must be an absolute path".into()));
        }
        if !self.state_dir.is_absolute() {
            return Err(("state_dir", "must be an absolute path".into()));
        }
        if !["error", "warn", "info", "debug", "trace"].contains(&self.log_level.as_str()) {
            return Err((
                "log_level",
                format!(
                    "must be error, warn, info, debug or trace, got {:?}",
                    self.log_level
                ),
            ));
        }
        Ok(())
    }

    /// `[capacity]`.
    fn check_capacity(&self) -> Result<(), Problem> {
        let c = &self.capacity;
        if c.mode == CapacityMode::Fixed && c.fixed.is_none() {
            return Err((
                "capacity.fixed",
                "mode = \"fixed\" needs a size, e.g. fixed = \"12G\" or \"80%\"".into(),
            ));
        }
        if !(0.0..=100.0).contains(&c.psi_threshold) {
            return Err((
                "capacity.psi_threshold",
                format!("must be 0..=100 (percent), got {}", c.psi_threshold),
            ));
        }
        Ok(())
    }

    /// `[control]`.
    fn check_control(&self) -> Result<(), Problem> {
        if !self.control.socket.is_absolute() {
            return Err((
                "control.socket",
                format!(
                    "must be an absolute path, got {:?}",
                    self.control.socket.display().to_string()
                ),
            ));
        }
        if let Some(g) = &self.control.group
            && (g.trim().is_empty() || g.contains(['/', ':', '\n', '\0']))
        {
            return Err((
                "control.group",
                format!("must be a group name like \"memweight\", got {g:?}"),
            ));
        }
        Ok(())
    }

    /// `[metrics]`: the listen address, when the endpoint is on.
    fn check_metrics(&self) -> Result<(), Problem> {
        if self.metrics.enabled {
            self.metrics.address().map_err(|m| ("metrics.listen", m))?;
        }
        Ok(())
    }

    /// `[containers]`.
    fn check_containers(&self) -> Result<(), Problem> {
        let c = &self.containers;
        if c.refresh.0 < Duration::from_millis(100) || c.refresh.0 > Duration::from_secs(3600) {
            return Err((
                "containers.refresh",
                format!("must be between 100ms and 1h, got {:?}", c.refresh.0),
            ));
        }
        if let Some(sock) = &c.socket
            && !sock.is_absolute()
        {
            return Err((
                "containers.socket",
                format!(
                    "must be an absolute path like \"/run/podman/podman.sock\", got {:?}",
                    sock.display().to_string()
                ),
            ));
        }
        if c.label_prefix.is_empty()
            || c.label_prefix.len() > 200
            || c.label_prefix
                .chars()
                .any(|ch| ch.is_whitespace() || ch == '=')
        {
            return Err((
                "containers.label_prefix",
                format!(
                    "must be a non-empty label prefix without spaces or `=`, like \"memweight.\", \
                     got {:?}",
                    c.label_prefix
                ),
            ));
        }
        Ok(())
    }

    /// The `[[cgroup]]` rules, checked and compiled.
    fn rules(&self, path: &Path) -> Result<Rules, ConfigError> {
        let invalid = invalid_in(path);
        let mut exact: Vec<Rule> = Vec::new();
        let mut globs = Vec::new();
        let mut depth = 0;
        for (i, rule) in self.cgroup.iter().enumerate() {
            let field = |k: &str| format!("cgroup[{i}].{k}");
            check_weight(u64::from(rule.weight))
                .map_err(|e| invalid(field("weight"), e.to_string()))?;
            let settings = Settings {
                weight: rule.weight,
                min: rule.min.map_or(0, Size::bytes),
                max: rule.max.map(Size::bytes),
            };
            if let Some(max) = settings.max
                && max < settings.min
            {
                return Err(invalid(
                    field("max"),
                    format!("max ({max} bytes) is below min ({} bytes)", settings.min),
                ));
            }
            let labels = LabelBounds {
                weight: rule.label_weight_max.unwrap_or(rule.weight),
                min: rule.label_min_max.map_or(settings.min, Size::bytes),
                max_may_rise: rule.label_max_may_rise,
            };
            check_weight(u64::from(labels.weight))
                .map_err(|e| invalid(field("label_weight_max"), e.to_string()))?;
            if labels.weight < settings.weight {
                return Err(invalid(
                    field("label_weight_max"),
                    format!(
                        "{} is below the rule's weight ({}): a label may always ask for less \
                         than the rule gives; label_weight_max only raises what it may ask",
                        labels.weight, settings.weight
                    ),
                ));
            }
            if labels.min < settings.min {
                return Err(invalid(
                    field("label_min_max"),
                    format!(
                        "{} bytes is below the rule's min ({} bytes): label_min_max only raises \
                         what a label may ask",
                        labels.min, settings.min
                    ),
                ));
            }
            match (&rule.path, &rule.glob) {
                (Some(p), None) => {
                    let p = cgroup_path::normalize(p)
                        .map_err(|e| invalid(field("path"), e.to_string()))?;
                    if exact.iter().any(|r: &Rule| r.name == p) {
                        return Err(invalid(field("path"), format!("{p:?} is listed twice")));
                    }
                    if let Some(q) = exact
                        .iter()
                        .map(|r| r.name.as_str())
                        .find(|q| nests(q, &p) || nests(&p, q))
                    {
                        return Err(invalid(
                            field("path"),
                            format!(
                                "{p:?} and {q:?} nest; managed cgroups must not contain each other \
                                 (manage the leaves, or only the parent)"
                            ),
                        ));
                    }
                    depth = depth.max(p.split('/').count());
                    exact.push(Rule {
                        name: p,
                        settings,
                        labels,
                    });
                }
                (None, Some(g)) => {
                    let g = cgroup_path::normalize(g)
                        .map_err(|e| invalid(field("glob"), e.to_string()))?;
                    let matcher = globset::GlobBuilder::new(&g)
                        .literal_separator(true)
                        .build()
                        .map(|g: Glob| g.compile_matcher())
                        .map_err(|e| invalid(field("glob"), e.to_string()))?;
                    depth = depth.max(if g.contains("**") {
                        16
                    } else {
                        g.split('/').count()
                    });
                    globs.push((
                        matcher,
                        Rule {
                            name: g,
                            settings,
                            labels,
                        },
                    ));
                }
                _ => {
                    return Err(invalid(
                        format!("cgroup[{i}]"),
                        "give exactly one of `path` or `glob`".into(),
                    ));
                }
            }
        }
        Ok(Rules {
            exact,
            globs,
            depth,
        })
    }
}

/// A key that failed a check and why: `("tick", "must be between …")`.
type Problem = (&'static str, String);

/// Builds the [`ConfigError::Invalid`] of the file at `path`.
fn invalid_in(path: &Path) -> impl Fn(String, String) -> ConfigError + '_ {
    move |field, message| ConfigError::Invalid {
        path: path.to_owned(),
        field,
        message,
    }
}

/// `true` when `child` lies strictly below `parent`.
#[must_use]
pub fn nests(parent: &str, child: &str) -> bool {
    child.len() > parent.len()
        && child.starts_with(parent)
        && child.as_bytes()[parent.len()] == b'/'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(Config, Rules), ConfigError> {
        Config::parse(text, Path::new("test.toml"))
    }

    #[test]
    fn defaults_are_sane() {
        let (cfg, rules) = parse("").expect("empty config is valid");
        assert_eq!(cfg.cgroup_root, PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(cfg.tick.0, Duration::from_secs(1));
        assert!(cfg.enforce);
        assert_eq!(cfg.capacity.mode, CapacityMode::Reserve);
        assert!(!cfg.protect_ancestors);
        let (kernel, _) = parse("[capacity]\nmode = \"kernel\"").expect("work-conserving");
        assert_eq!(kernel.capacity.mode, CapacityMode::Kernel);
        let (auto, _) = parse("[capacity]\nmode = \"auto\"").expect("the earlier name");
        assert_eq!(
            auto.capacity.mode,
            CapacityMode::Reserve,
            "old configs keep their law"
        );
        assert_eq!(cfg.capacity.hysteresis, None, "half the reserve");
        assert_eq!(rules.depth(), 0);
        for (text, want) in [
            ("\"0\"", Amount::Bytes(0)),
            ("\"16M\"", Amount::Bytes(16 << 20)),
            ("\"1%\"", Amount::Percent(1.0)),
        ] {
            let (cfg, _) = parse(&format!("[capacity]\nhysteresis = {text}")).expect("valid");
            assert_eq!(cfg.capacity.hysteresis, Some(want), "{text}");
        }
    }

    #[test]
    fn full_config_parses() {
        let (cfg, rules) = parse(
            r#"
            cgroup_root = "/tmp/cg"
            tick = "500ms"
            enforce = false
            [capacity]
            mode = "fixed"
            fixed = "80%"
            [[cgroup]]
            path = "lab/c1"
            weight = 3
            min = "32M"
            max = "1G"
            [[cgroup]]
            glob = "machine.slice/libpod-*.scope"
            "#,
        )
        .expect("valid");
        assert_eq!(cfg.tick.0, Duration::from_millis(500));
        assert_eq!(cfg.capacity.fixed, Some(Amount::Percent(80.0)));
        let s = rules.settings_for("lab/c1").expect("exact rule");
        assert_eq!((s.weight, s.min, s.max), (3, 32 << 20, Some(1 << 30)));
        let g = rules
            .settings_for("machine.slice/libpod-abc.scope")
            .expect("glob rule");
        assert_eq!(g.weight, DEFAULT_WEIGHT);
        assert_eq!(
            rules
                .rule_for("machine.slice/libpod-abc.scope")
                .map(|r| r.name.as_str()),
            Some("machine.slice/libpod-*.scope")
        );
        assert_eq!(
            rules.rule_for("lab/c1").map(|r| r.name.as_str()),
            Some("lab/c1")
        );
        assert!(
            rules
                .settings_for("machine.slice/x/libpod-abc.scope")
                .is_none()
        );
        assert!(rules.settings_for("lab").is_none());
        assert_eq!(rules.depth(), 2);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("[[cgroup]]\npath = \"a\"\nweight = 0", "cgroup[0].weight"),
            (
                "[[cgroup]]\npath = \"a\"\nweight = 10001",
                "cgroup[0].weight",
            ),
            ("[[cgroup]]\npath = \"../etc\"", "cgroup[0].path"),
            // The control protocol always refused a newline; a rule now does too.
            ("[[cgroup]]\npath = \"lab/a\\nb\"", "cgroup[0].path"),
            ("[[cgroup]]\nglob = \"lab/*\\nx\"", "cgroup[0].glob"),
            ("[[cgroup]]\nweight = 3", "cgroup[0]"),
            ("[[cgroup]]\npath = \"a\"\nglob = \"b\"", "cgroup[0]"),
            (
                "[[cgroup]]\npath = \"a\"\n[[cgroup]]\npath = \"a/b\"",
                "nest",
            ),
            (
                "[[cgroup]]\npath = \"a\"\nmin = \"2G\"\nmax = \"1G\"",
                "cgroup[0].max",
            ),
            (
                "[[cgroup]]\npath = \"a\"\nweight = 200\nlabel_weight_max = 100",
                "cgroup[0].label_weight_max",
            ),
            (
                "[[cgroup]]\npath = \"a\"\nlabel_weight_max = 10001",
                "cgroup[0].label_weight_max",
            ),
            (
                "[[cgroup]]\npath = \"a\"\nlabel_weight_max = 0",
                "cgroup[0].label_weight_max",
            ),
            (
                "[[cgroup]]\npath = \"a\"\nmin = \"1G\"\nlabel_min_max = \"512M\"",
                "cgroup[0].label_min_max",
            ),
            (
                "[[cgroup]]\npath = \"a\"\nlabel_max_may_rise = \"yes\"",
                "label_max_may_rise",
            ),
            ("tick = \"0s\"", "tick"),
            ("tick = \"soon\"", "duration"),
            ("[capacity]\nmode = \"fixed\"", "capacity.fixed"),
            ("[capacity]\nreserve = \"-5M\"", "reserve"),
            ("[capacity]\nreserve = \"120%\"", "between 0% and 100%"),
            ("bogus = 1", "bogus"),
            ("log_level = \"loud\"", "log_level"),
            ("cgroup_root = \"rel\"", "cgroup_root"),
            ("[control]\nsocket = \"rel.sock\"", "control.socket"),
            ("[control]\ngroup = \"\"", "control.group"),
            ("[control]\nsock = \"/x\"", "sock"),
            ("[metrics]\nlisten = \"localhost\"", "metrics.listen"),
            ("[metrics]\nlisten = \"1.2.3.4:99999\"", "metrics.listen"),
            ("[metrics]\nenabled = \"yes\"", "enabled"),
            ("[containers]\nrefresh = \"10ms\"", "containers.refresh"),
            ("[containers]\nrefresh = \"later\"", "duration"),
            (
                "[containers]\nsocket = \"podman.sock\"",
                "containers.socket",
            ),
            (
                "[containers]\nlabel_prefix = \"\"",
                "containers.label_prefix",
            ),
            (
                "[containers]\nlabel_prefix = \"a b\"",
                "containers.label_prefix",
            ),
            ("[containers]\nenabled = 1", "enabled"),
            ("[containers]\nsockt = \"/x\"", "sockt"),
        ];
        for (text, want) in cases {
            let err = parse(text).expect_err(text).to_string();
            assert!(
                err.contains(want),
                "{text:?}: {err:?} does not mention {want:?}"
            );
        }
    }

    /// Every check of `validate`, its message in full: the split into sections changed none.
    #[test]
    fn validation_messages_are_unchanged() {
        let cases = [
            "tick = \"0s\"",
            "idle_tax = 100",
            "max_step = \"0%\"",
            "cgroup_root = \"rel\"",
            "state_dir = \"rel\"",
            "log_level = \"loud\"",
            "[capacity]\nmode = \"fixed\"",
            "[capacity]\npsi_threshold = 101",
            "[control]\nsocket = \"rel.sock\"",
            "[control]\ngroup = \"a/b\"",
            "[metrics]\nlisten = \"localhost\"",
            "[containers]\nrefresh = \"10ms\"",
            "[containers]\nsocket = \"podman.sock\"",
            "[containers]\nlabel_prefix = \"a b\"",
            // Two mistakes: the first check's is reported.
            "log_level = \"loud\"\n[capacity]\nmode = \"fixed\"",
        ];
        let got: Vec<String> = cases
            .iter()
            .map(|text| parse(text).expect_err(text).to_string())
            .collect();
        let want = [
            "test.toml: tick: must be between 100ms and 10s, got 0ns",
            "test.toml: idle_tax: must be 0..=99 (percent; 75 is VMware ESX's default), got 100",
            "test.toml: max_step: 0% would never lower memory.high; use e.g. \"10%\" or \"64M\"",
            "test.toml: cgroup_root: must be an absolute path",
            "test.toml: state_dir: must be an absolute path",
            "test.toml: log_level: must be error, warn, info, debug or trace, got \"loud\"",
            "test.toml: capacity.fixed: mode = \"fixed\" needs a size, e.g. fixed = \"12G\" or \"80%\"",
            "test.toml: capacity.psi_threshold: must be 0..=100 (percent), got 101",
            "test.toml: control.socket: must be an absolute path, got \"rel.sock\"",
            "test.toml: control.group: must be a group name like \"memweight\", got \"a/b\"",
            "test.toml: metrics.listen: expected an address and port like \"127.0.0.1:9750\" or \"[::1]:9750\", got \"localhost\"",
            "test.toml: containers.refresh: must be between 100ms and 1h, got 10ms",
            "test.toml: containers.socket: must be an absolute path like \"/run/podman/podman.sock\", got \"podman.sock\"",
            "test.toml: containers.label_prefix: must be a non-empty label prefix without spaces or `=`, like \"memweight.\", got \"a b\"",
            "test.toml: log_level: must be error, warn, info, debug or trace, got \"loud\"",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn label_bounds_default_to_the_rules_own_values() {
        let (_, rules) = parse(
            r#"
            [[cgroup]]
            path = "lab/plain"
            [[cgroup]]
            path = "lab/floor"
            weight = 300
            min = "256M"
            max = "4G"
            [[cgroup]]
            glob = "machine.slice/libpod-*.scope"
            weight = 100
            label_weight_max = 1000
            label_min_max = "2G"
            label_max_may_rise = true
            "#,
        )
        .expect("valid");
        let bounds = |p: &str| rules.rule_for(p).expect("a rule").labels;
        assert_eq!(
            bounds("lab/plain"),
            LabelBounds {
                weight: DEFAULT_WEIGHT,
                min: 0,
                max_may_rise: false
            },
            "a label may ask for no more than the rule gives"
        );
        assert_eq!(
            bounds("lab/floor"),
            LabelBounds {
                weight: 300,
                min: 256 << 20,
                max_may_rise: false
            }
        );
        assert_eq!(
            bounds("machine.slice/libpod-abc.scope"),
            LabelBounds {
                weight: 1000,
                min: 2 << 30,
                max_may_rise: true
            },
            "the operator raises them per rule"
        );
        // Equal to the rule's own values is the default written out.
        assert!(
            parse("[[cgroup]]\npath = \"a\"\nweight = 5\nlabel_weight_max = 5\nmin = \"1G\"\nlabel_min_max = \"1G\"")
                .is_ok()
        );
    }

    #[test]
    fn control_and_metrics_sections() {
        let (cfg, _) = parse("").expect("defaults");
        assert_eq!(
            cfg.control.socket,
            PathBuf::from("/run/memweight/memweightd.sock")
        );
        assert_eq!(cfg.control.group, None);
        assert!(cfg.metrics.enabled);
        assert_eq!(
            cfg.metrics.address(),
            Ok("127.0.0.1:9750".parse().expect("addr"))
        );
        let (cfg, _) = parse(
            "[control]\nsocket = \"/tmp/m.sock\"\ngroup = \"memweight\"\n\
             [metrics]\nlisten = \"[::1]:9100\"",
        )
        .expect("valid");
        assert_eq!(cfg.control.group.as_deref(), Some("memweight"));
        assert_eq!(cfg.metrics.address().map(|a| a.port()), Ok(9100));
        // A disabled endpoint's address is not checked.
        let (cfg, _) = parse("[metrics]\nenabled = false\nlisten = \"nowhere\"").expect("disabled");
        assert!(!cfg.metrics.enabled);
    }

    #[test]
    fn containers_section() {
        let (cfg, _) = parse("").expect("defaults");
        assert!(cfg.containers.enabled);
        assert_eq!(cfg.containers.socket, None);
        assert_eq!(cfg.containers.refresh.0, Duration::from_secs(2));
        assert_eq!(cfg.containers.label_prefix, "memweight.");
        let (cfg, _) = parse(
            "[containers]\nenabled = false\nsocket = \"/var/run/docker.sock\"\n\
             refresh = \"500ms\"\nlabel_prefix = \"io.example.mw/\"",
        )
        .expect("valid");
        assert!(!cfg.containers.enabled);
        assert_eq!(
            cfg.containers.socket,
            Some(PathBuf::from("/var/run/docker.sock"))
        );
        assert_eq!(cfg.containers.refresh.0, Duration::from_millis(500));
        assert_eq!(cfg.containers.label_prefix, "io.example.mw/");
    }

    #[test]
    fn amount_percent_rounds_down() {
        assert_eq!(Amount::Percent(50.0).of(1001), 500);
        assert_eq!(Amount::Percent(100.0).of(u64::MAX), u64::MAX);
        assert_eq!(Amount::Bytes(7).of(1), 7);
        assert_eq!(parse_amount("512M"), Ok(Amount::Bytes(512 << 20)));
    }

    #[test]
    fn regression_tick_1e300_does_not_panic() {
        for text in [
            "tick = 1e300",
            "tick = \"1e300\"",
            "tick = \"1e300s\"",
            "tick = \"3e17m\"",
            "tick = \"1e300ms\"",
            "tick = 18446744073709551615",
            "tick = 1.8446744073709552e19",
            "tick = -1",
            "tick = -0.5",
            "tick = \"-1s\"",
            "tick = nan",
            "tick = inf",
            "tick = -inf",
            "tick = \"NaN\"",
            "tick = \"inf\"",
            "tick = 0",
            "tick = \"0ms\"",
            "tick = \"99ms\"",
            "tick = \"11s\"",
            "tick = \"1h\"",
        ] {
            let err = parse(text).expect_err(text).to_string();
            assert!(
                err.contains("tick") || err.contains("duration"),
                "{text:?}: {err:?} does not name the key"
            );
        }
        assert_eq!(parse("tick = \"10s\"").expect("10s").0.tick.0, MAX_TICK);
        assert_eq!(parse("tick = 0.1").expect("100ms").0.tick.0, MIN_TICK);
    }

    #[test]
    fn regression_absurd_sizes_and_percentages_are_errors() {
        for text in [
            "min_floor = \"3e17m\"",
            "min_floor = \"99999999999E\"",
            "min_floor = -1",
            "min_floor = 1e300",
            "min_floor = nan",
            "max_step = \"nan%\"",
            "max_step = \"inf%\"",
            "max_step = \"-1%\"",
            "max_step = \"1e300%\"",
            "max_step = \"0%\"",
            "max_step = 0",
            "max_step = 1e300",
            "[capacity]\nreserve = \"101%\"",
            "[capacity]\npsi_threshold = nan",
            "[capacity]\npsi_threshold = inf",
            "[capacity]\npsi_threshold = -1.0",
            "[capacity]\npsi_step = \"1e400%\"",
            "[capacity]\nmode = \"fixed\"\nfixed = \"20000000000000000000\"",
            "[[cgroup]]\npath = \"a\"\nweight = -1",
            "[[cgroup]]\npath = \"a\"\nweight = 1e300",
            "[[cgroup]]\npath = \"a\"\nmin = \"1e300G\"",
            "[[cgroup]]\npath = \"a\"\nmax = -4096",
        ] {
            assert!(parse(text).is_err(), "{text:?} was accepted");
        }
    }

    #[test]
    fn oversized_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big.toml");
        let mut text = String::from("# padding\n");
        while (text.len() as u64) <= MAX_CONFIG_BYTES {
            text.push_str("# ................................................................\n");
        }
        std::fs::write(&path, text).expect("write");
        let err = Config::load(&path).expect_err("too big").to_string();
        assert!(err.contains("longer than"), "{err}");
    }

    mod props {
        use super::parse;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            /// Any text at all: an error or a config, never a panic.
            #[test]
            fn arbitrary_text_never_panics(text in ".{0,200}") {
                let _ = parse(&text);
            }

            /// Every key with any TOML scalar: an error or a config, never a panic.
            #[test]
            fn arbitrary_values_never_panic(
                key in prop::sample::select(vec![
                    "tick", "min_floor", "max_step", "cgroup_root", "state_dir", "enforce",
                    "log_level", "[capacity]\nreserve", "[capacity]\nfixed",
                    "[capacity]\npsi_threshold", "[capacity]\npsi_step", "[capacity]\npsi_max_cut",
                    "[metrics]\nlisten", "[control]\ngroup", "[[cgroup]]\npath = \"a\"\nweight",
                    "[[cgroup]]\npath = \"a\"\nmin", "[[cgroup]]\npath = \"a\"\nmax",
                    "[[cgroup]]\npath = \"a\"\nlabel_weight_max",
                    "[[cgroup]]\npath = \"a\"\nlabel_min_max",
                    "[[cgroup]]\npath = \"a\"\nlabel_max_may_rise",
                    "[[cgroup]]\nglob",
                ]),
                value in prop_oneof![
                    prop::num::f64::ANY.prop_map(|f| format!("{f:?}")),
                    prop::num::i64::ANY.prop_map(|i| i.to_string()),
                    prop::num::f64::ANY.prop_map(|f| format!("\"{f}\"")),
                    prop::num::f64::ANY.prop_map(|f| format!("\"{f:e}m\"")),
                    prop::num::f64::ANY.prop_map(|f| format!("\"{f}%\"")),
                    prop::num::u64::ANY.prop_map(|u| format!("\"{u}G\"")),
                    "\"[a-zA-Z0-9.%*/ -]{0,12}\"",
                    Just("nan".to_owned()),
                    Just("-inf".to_owned()),
                ],
            ) {
                let _ = parse(&format!("{key} = {value}"));
            }
        }
    }

    #[test]
    fn nesting() {
        assert!(nests("a", "a/b"));
        assert!(!nests("a", "ab"));
        assert!(!nests("a/b", "a"));
        assert!(!nests("a", "a"));
    }
}
