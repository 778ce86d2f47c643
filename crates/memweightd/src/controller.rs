//! The control loop's state and one tick: discover, sample, compute, enforce.
//!
//! [`Controller`] is the single owner of the daemon's state. `main` calls [`Controller::tick`]
//! on a timer and [`Controller::release_all`] on shutdown; everything else (the socket, the
//! metrics endpoint) reads the [`TickReport`] it publishes. Writes that may block in kernel
//! reclaim run on tokio's blocking pool, one job per cgroup, so a slow cgroup never stalls the
//! others: a cgroup whose previous job is still running is skipped until it finishes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memweight_cgroupfs::{
    CgroupFs, CgroupSample, HostSample, Limit, MemoryEvents, MemoryStat, ProcFs, Reclaimed, Written,
};
use memweight_proto::ctl::{CgroupState, LabelClamp, LabelField, LabelValues, WeightSource};
use serde::Serialize;
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

use crate::capacity::Carry;
use crate::config::{CapacityMode, Config, Rules, Settings};
use crate::containers::{self, Containers, Snapshot};
use crate::decide::{self, Originals, Writes};
use crate::labels::{self, LabelError};
use crate::logging::untrusted;
use crate::outside::Outside;
use crate::state::{Original, Orphans, Override, State, StateStore};
use crate::step::{self, CgroupStep, Law, Row, Step, effective_guard, held, limit_above};

/// Errors that stop the daemon from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The cgroup file system refused (not v2, no memory controller, I/O).
    #[error(transparent)]
    Cgroup(#[from] memweight_cgroupfs::Error),
    /// The state file could not be read or written.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// A stop was requested ([`Controller::stop_handle`]): the tick ended early.
    #[error("stopping: the tick was cut short")]
    Stopping,
    /// A configured cgroup exists but cannot be managed.
    #[error("{path}: {message}")]
    Unmanageable {
        /// The cgroup.
        path: String,
        /// Why, and what to do.
        message: String,
    },
}

/// One managed cgroup.
#[derive(Debug, Clone)]
struct Managed {
    settings: Settings,
    /// The cgroup's own limits: memory.high never above `originals.high`, memory.low never
    /// below `originals.low`, both restored when the daemon lets go.
    originals: Originals,
    /// The cgroup's id (directory inode) when adopted; `None` if it could not be read.
    id: Option<u64>,
    /// The originals are in the state file on disk: only then may the daemon write.
    recorded: bool,
    /// What the daemon believes memory.high and memory.low hold: its own last write, or what
    /// it read at adoption. Anything else found there was written by someone else.
    known: Originals,
    reclaim_supported: bool,
    /// The last change made outside the daemon and adopted as the new original (`explain`).
    operator: Option<String>,
    /// The last full sample (all ten files) and the tick it was taken at; reused, with
    /// `memory.current` read afresh, while the cgroup is steady ([`Controller::sample_cheap`]).
    last: Option<Box<CgroupSample>>,
    /// Bytes it faulted back (`workingset_refault_*`) between its last two full samples; 0
    /// while its sample is reused.
    refaulted: u64,
    /// The next tick must take a full sample: the daemon wrote to the cgroup.
    refresh: bool,
}

/// How one cgroup's settings were put together: config rule < container label < override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What applies.
    pub settings: Settings,
    /// What the rule alone says.
    pub configured: Settings,
    /// The rule's `path` or `glob`.
    pub rule: String,
    /// The container's name, when the engine knows the cgroup.
    pub container: Option<String>,
    /// What the container's labels set (`None`: no `memweight.*` label, or no container).
    pub labels: Option<LabelValues>,
    /// Labels whose values were not accepted (their rule values apply).
    pub label_errors: Vec<LabelError>,
    /// Labels that asked for more than the rule lets a label ask (clamped or refused).
    pub label_clamps: Vec<LabelClamp>,
    /// Where the weight comes from.
    pub source: WeightSource,
}

/// What `memweightctl set <name>` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A managed cgroup belongs to the container: its path.
    Managed(String),
    /// The container runs, but no managed cgroup is its (no rule matches its scope).
    Unmanaged {
        /// Its name.
        name: String,
        /// Its id.
        id: String,
    },
    /// Several containers match an id prefix.
    Ambiguous(Vec<String>),
    /// No running container by that name or id.
    None,
}

/// The outcome of one cgroup's write job.
#[derive(Debug)]
struct JobResult {
    path: String,
    writes: Writes,
    gone: bool,
    reclaim_unsupported: bool,
    errors: Vec<String>,
}

impl Drop for Controller {
    /// A controller dropped without [`Controller::release_all`] (a panic unwinding through the
    /// loop) tells its write jobs still in the kernel to make no further write, so that the
    /// restore that follows is not undone by them.
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
    }
}

/// Per-cgroup line of a [`TickReport`]: the protocol's status row, so `status` sends it as is.
pub type CgroupReport = memweight_proto::ctl::CgroupStatus;

/// What one tick saw and did; published for status, explain and metrics.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TickReport {
    /// The pool and the host (the protocol's form, so `status` sends it as is).
    pub pool: memweight_proto::ctl::Pool,
    /// One line per managed cgroup, sorted by path.
    pub cgroups: Vec<CgroupReport>,
    /// Container labels that asked for more than their rule lets a label ask (clamped or
    /// refused), by cgroup.
    pub label_clamps: Vec<ClampedLabel>,
}

/// A container label held to its rule's bounds at a tick (the `memweight_label_clamped`
/// metric).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ClampedLabel {
    /// The cgroup.
    pub cgroup: String,
    /// Its container's name.
    pub container: String,
    /// The label, e.g. `memweight.weight`.
    pub label: String,
}

/// Counters since start, for metrics.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    /// memory.high writes done.
    pub writes_high: u64,
    /// memory.low writes done.
    pub writes_low: u64,
    /// memory.reclaim writes done.
    pub writes_reclaim: u64,
    /// Bytes asked of memory.reclaim.
    pub reclaim_bytes: u64,
    /// Write errors.
    pub write_errors: u64,
    /// Read errors.
    pub read_errors: u64,
    /// Original limits that could not be written back (retried every tick).
    pub restore_errors: u64,
    /// Cgroups adopted.
    pub adopted: u64,
    /// Cgroups released (restored) or vanished.
    pub released: u64,
}

/// The daemon's state and its control loop.
pub struct Controller {
    cfg: Config,
    rules: Rules,
    fs: Arc<CgroupFs>,
    /// How stalled the cgroups beside the managed set are (`kernel` capacity).
    outside: Outside,
    proc: ProcFs,
    store: StateStore,
    state: State,
    /// `state` differs from the state file: saved once, at the end of the bookkeeping step.
    dirty: bool,
    managed: BTreeMap<String, Managed>,
    jobs: BTreeMap<String, JoinHandle<JobResult>>,
    warned: BTreeSet<String>,
    /// The capacity's state from the last tick (PSI cut, held pool).
    carry: Carry,
    /// The kernel's reclaim band (Σ `high` − `min` watermarks) and the tick it was read at:
    /// read again every [`WATERMARKS_EVERY`] ticks (it moves only with sysctls and hotplug).
    watermarks: Option<(u64, u64)>,
    stopping: Arc<AtomicBool>,
    ticks: u64,
    counters: Counters,
    last: Option<Arc<TickReport>>,
    /// At shutdown: each released cgroup's originals and id, for jobs that write late.
    last_originals: BTreeMap<String, (Originals, Option<u64>)>,
    /// Released cgroups whose files still hold their originals as far as the daemon knows
    /// (it never wrote them, or wrote them back): their restore is a no-op and is skipped, so
    /// a stop with 10,000 idle cgroups writes only to the few it throttled.
    unchanged: BTreeSet<String>,
    containers: Option<Containers>,
    snap: Arc<Snapshot>,
    /// Overrides of container cgroups that are gone, kept while the container may restart.
    orphans: Orphans,
    /// Cgroups no rule may make the daemon manage: its own cgroup and every ancestor of it
    /// (throttling them would throttle the daemon), and `init.scope` (PID 1).
    forbidden: BTreeSet<String>,
}

/// What became of one attempt to put a recorded original back.
#[derive(Debug)]
enum Restored {
    /// Written.
    Done,
    /// The cgroup is gone: nothing to restore.
    Gone,
    /// A different cgroup (another id) has the name now: the original is not its own.
    Replaced,
    /// The write or the id check failed; the original is kept and tried again.
    Failed(String),
}

/// Shutdown restores at most this long, so the whole stop fits systemd's `TimeoutStopSec=30`
/// with the waits for write jobs; what is left stays in the state file for the next start.
const RESTORE_BUDGET: Duration = Duration::from_secs(20);
/// Restores between two progress lines in the log.
const PROGRESS_EVERY: usize = 1000;
/// A steady cgroup gets a full sample at least every this many ticks (staggered by id).
const FULL_SAMPLE_EVERY: u64 = 10;
/// A cgroup whose `memory.current` moved less than this (or 1/64 of it) since its last full
/// sample is steady.
const STEADY_BYTES: u64 = 1 << 20;
/// Adoptions in one tick above which they are summarised in the log instead of listed.
const ADOPTIONS_LISTED: usize = 50;
/// First full samples of small cgroups per tick; beyond it a small cgroup seen for the first
/// time is pinned at its usage until a later tick samples it in full
/// ([`Controller::sample_cheap`]), so adopting 10,000 cgroups costs three reads each.
const FIRST_FULL_PER_TICK: usize = 1000;
/// A cgroup using at least this much is always sampled in full when first seen.
const PROVISIONAL_BELOW: u64 = 32 << 20;
/// `/proc/zoneinfo` is read again after this many ticks.
const WATERMARKS_EVERY: u64 = 60;

impl Controller {
    /// Checks the cgroup root and the configured cgroups and loads the persisted state.
    ///
    /// Refuses to start when the root is not cgroup v2, the memory controller is off, or a
    /// configured cgroup that exists has no memory controller.
    pub fn new(cfg: Config, rules: Rules) -> Result<Self, ControlError> {
        let fs = CgroupFs::new(&cfg.cgroup_root)?;
        fs.check_v2()?;
        for path in rules.exact_paths() {
            if fs.resolve(path)?.is_dir() && !fs.memory_enabled_for(path)? {
                return Err(ControlError::Unmanageable {
                    path: path.to_owned(),
                    message: no_memory_controller(path),
                });
            }
        }
        let proc = ProcFs::new(&cfg.proc_root);
        let store = StateStore::new(&cfg.state_dir);
        let mut state = store.load()?;
        let boot_id = std::fs::read_to_string(cfg.proc_root.join("sys/kernel/random/boot_id"))
            .ok()
            .map(|b| b.trim().to_owned());
        let mut dirty = false;
        if let (Some(was), Some(now)) = (&state.boot_id, &boot_id)
            && was != now
            && !(state.originals.is_empty() && state.ancestors.is_empty())
        {
            info!(
                originals = state.originals.len(),
                ancestors = state.ancestors.len(),
                "the state file's originals are from an earlier boot: every cgroup is new since,                  so none is restored (dropped)"
            );
            state.originals.clear();
            state.ancestors.clear();
            dirty = true;
        }
        // Saved with the next change; a dry run with nothing recorded writes no file for it.
        state.boot_id = boot_id.or(state.boot_id);
        if !cfg.protect_ancestors {
            info!(
                "protect_ancestors = false: the kernel caps the memory.low of managed cgroups \
                 by their ancestors' memory.low, so set the parents' memory.low yourself"
            );
        }
        Ok(Controller {
            cfg,
            rules,
            fs: Arc::new(fs),
            outside: Outside::new(
                std::fs::read_to_string("/proc/self/cgroup")
                    .ok()
                    .and_then(|t| crate::outside::own_cgroup(&t)),
            ),
            proc,
            store,
            state,
            dirty,
            managed: BTreeMap::new(),
            jobs: BTreeMap::new(),
            warned: BTreeSet::new(),
            carry: Carry::default(),
            watermarks: None,
            stopping: Arc::new(AtomicBool::new(false)),
            ticks: 0,
            counters: Counters::default(),
            last: None,
            last_originals: BTreeMap::new(),
            unchanged: BTreeSet::new(),
            containers: None,
            snap: Arc::new(Snapshot::default()),
            orphans: Orphans::default(),
            forbidden: BTreeSet::new(),
        }
        .with_forbidden())
    }

    /// Works out [`Controller::forbidden`] from `/proc/self/cgroup` (under `proc_root`).
    fn with_forbidden(mut self) -> Self {
        let own = std::fs::read_to_string(self.cfg.proc_root.join("self/cgroup")).ok();
        self.forbidden = forbidden_cgroups(own.as_deref(), &self.cfg.cgroup_root);
        self
    }

    /// The stop flag: set it (on SIGTERM) and a running tick ends before its next cgroup,
    /// and write jobs make no further write, so that [`Controller::release_all`] follows at
    /// once however many cgroups the tick had left.
    #[must_use]
    pub fn stop_handle(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stopping)
    }

    /// Starts reading container names and labels (`[containers]`); without it, or with
    /// `enabled = false`, the rules and overrides alone apply. Needs a tokio runtime.
    pub fn start_containers(&mut self) {
        self.containers = Some(containers::spawn(self.cfg.containers.clone()));
    }

    /// The container snapshot the last tick used.
    #[must_use]
    pub fn container_snapshot(&self) -> &Snapshot {
        &self.snap
    }

    /// Finds the managed cgroup of the running container named (or with id or id prefix)
    /// `what`, in the latest snapshot.
    #[must_use]
    pub fn find_container(&self, what: &str) -> Found {
        let latest = self
            .containers
            .as_ref()
            .map_or_else(|| Arc::clone(&self.snap), Containers::snapshot);
        match latest.find(what) {
            Err(containers::Ambiguous(names)) => Found::Ambiguous(names),
            Ok(None) => Found::None,
            Ok(Some(c)) => self
                .managed
                .keys()
                .find(|p| containers::container_id(p) == Some(c.id.as_str()))
                .map_or_else(
                    || Found::Unmanaged {
                        name: c.name.clone(),
                        id: c.id.clone(),
                    },
                    |p| Found::Managed(p.clone()),
                ),
        }
    }

    /// The configuration in force.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The last tick's report.
    #[must_use]
    pub fn last_report(&self) -> Option<&TickReport> {
        self.last.as_deref()
    }

    /// Counters since start.
    #[must_use]
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Paths managed now.
    pub fn managed_paths(&self) -> impl Iterator<Item = &str> {
        self.managed.keys().map(String::as_str)
    }

    /// The settings a rule gives `path` (before runtime overrides), if a rule names it.
    #[must_use]
    pub fn configured(&self, path: &str) -> Option<Settings> {
        self.rules.settings_for(path)
    }

    /// Runtime override for `path`.
    #[must_use]
    pub fn override_for(&self, path: &str) -> Option<Override> {
        self.state.overrides.get(path).copied()
    }

    /// All runtime overrides, by cgroup path.
    pub fn overrides(&self) -> impl Iterator<Item = (&str, &Override)> {
        self.state.overrides.iter().map(|(p, o)| (p.as_str(), o))
    }

    /// Whether `path` is managed now.
    #[must_use]
    pub fn is_managed(&self, path: &str) -> bool {
        self.managed.contains_key(path)
    }

    /// Sets a runtime override; it takes effect at the next tick and is persisted.
    ///
    /// A save that fails changes nothing: the previous override (or none) stays in force.
    pub fn set_override(&mut self, path: &str, ov: Override) -> Result<(), ControlError> {
        let before = self.state.overrides.insert(path.to_owned(), ov);
        self.persist().inspect_err(|_| {
            match before {
                Some(b) => self.state.overrides.insert(path.to_owned(), b),
                None => self.state.overrides.remove(path),
            };
        })
    }

    /// Removes a runtime override; returns whether there was one.
    ///
    /// A save that fails changes nothing: the override stays in force.
    pub fn unset_override(&mut self, path: &str) -> Result<bool, ControlError> {
        let Some(before) = self.state.overrides.remove(path) else {
            return Ok(false);
        };
        if let Err(e) = self.persist() {
            self.state.overrides.insert(path.to_owned(), before);
            return Err(e);
        }
        Ok(true)
    }

    /// Replaces the configuration (reload). Cgroups that stay managed keep their originals;
    /// those no longer named are released at the next tick. Switching to `enforce = false`
    /// restores, at the next tick, every limit the daemon wrote.
    pub fn reload(&mut self, cfg: Config, rules: Rules) -> Result<(), ControlError> {
        let fs = CgroupFs::new(&cfg.cgroup_root)?;
        fs.check_v2()?;
        if cfg.cgroup_root != self.cfg.cgroup_root {
            // A new root makes the recorded paths meaningless: let go of everything first.
            self.release_all_now();
            self.fs = Arc::new(fs);
        }
        let own = std::fs::read_to_string(cfg.proc_root.join("self/cgroup")).ok();
        self.forbidden = forbidden_cgroups(own.as_deref(), &cfg.cgroup_root);
        self.proc = ProcFs::new(&cfg.proc_root);
        if cfg.state_dir != self.cfg.state_dir {
            // Everything recorded must be in the file the next start will read.
            self.store = StateStore::new(&cfg.state_dir);
            self.dirty = true;
        }
        self.cfg = cfg;
        self.rules = rules;
        if let Some(c) = &self.containers {
            c.reconfigure(&self.cfg.containers);
        }
        self.warned.clear();
        Ok(())
    }

    /// The settings for `path` and where they come from, if a rule names it: the rule, then
    /// the labels of the container whose cgroup it is (as of the last tick), then the runtime
    /// override.
    #[must_use]
    pub fn resolve(&self, path: &str) -> Option<Resolved> {
        let rule = self.rules.rule_for(path)?;
        let configured = rule.settings;
        let mut s = configured;
        let mut source = WeightSource::Config {
            rule: rule.name.clone(),
        };
        let container = self.snap.for_cgroup(path);
        let prefix = &self.cfg.containers.label_prefix;
        let (labels, label_errors) = container.map_or_else(
            || (None, Vec::new()),
            |c| {
                let (v, errors) = labels::parse_labels(&c.labels, prefix);
                (Some(v), errors)
            },
        );
        let mut label_clamps = Vec::new();
        if let (Some(l), Some(c)) = (labels, container) {
            let bounded = labels::bound(configured, rule.labels, l, prefix);
            s = bounded.settings;
            label_clamps = bounded.clamps;
            if l.weight.is_some() {
                source = WeightSource::Label {
                    label: format!("{prefix}weight"),
                    container: c.name.clone(),
                };
            }
        }
        if let Some(ov) = self.state.overrides.get(path) {
            s.weight = ov.weight;
            source = WeightSource::Override;
            if let Some(m) = ov.min {
                s.min = m;
            }
            if ov.max.is_some() {
                s.max = ov.max;
            }
            // What the override replaces is no longer the label's to ask.
            label_clamps.retain(|c| match c.field {
                LabelField::Weight => false,
                LabelField::Min => ov.min.is_none(),
                LabelField::Max => ov.max.is_none(),
            });
        }
        Some(Resolved {
            settings: s,
            configured,
            rule: rule.name.clone(),
            container: container.map(|c| c.name.clone()),
            labels: labels.filter(|l| *l != LabelValues::default()),
            label_errors,
            label_clamps,
            source,
        })
    }

    fn settings(&self, path: &str) -> Option<Settings> {
        self.resolve(path).map(|r| r.settings)
    }

    /// Resolves `path` and warns once per container and label that is invalid or asks for
    /// more than the rule lets it ask.
    fn settings_warning_labels(&mut self, path: &str) -> Option<Settings> {
        let r = self.resolve(path)?;
        if let (Some(name), Some(id)) = (&r.container, containers::container_id(path)) {
            for e in &r.label_errors {
                // A running container's labels cannot change: one warning per id and label.
                self.warn_once(&format!("label:{id}:{}", e.label), || {
                    warn!(container = %name, cgroup = %path, label = %e.label,
                        value = %untrusted(&e.value), accepted = %e.accepted,
                        "ignoring an invalid container label; the configured value applies");
                });
            }
            for c in &r.label_clamps {
                self.warn_once(&format!("clamp:{id}:{}", c.label), || {
                    warn!(container = %name, cgroup = %path, label = %c.label, rule = %r.rule,
                        asked = c.asked, applied = c.applied, bound = c.field.bound_key(),
                        "a container label asks for more than its rule lets labels ask: weight \
                         and min are clamped to the bound, a max above the rule's is refused; \
                         the operator raises the bound in the [[cgroup]] rule");
                });
            }
        }
        Some(r.settings)
    }

    /// Saves the state now (overrides); a dry run keeps no state of its own.
    fn persist(&mut self) -> Result<(), ControlError> {
        if self.cfg.enforce {
            self.store.save(&self.state)?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Saves the state if it changed; returns whether the file now matches it.
    fn flush(&mut self) -> bool {
        if !self.dirty {
            return true;
        }
        match self.store.save(&self.state) {
            Ok(()) => {
                self.dirty = false;
                true
            }
            Err(e) => {
                error!(error = %e, "cannot save the state file; trying again next tick");
                false
            }
        }
    }

    fn warn_once(&mut self, key: &str, f: impl FnOnce()) {
        if self.warned.insert(key.to_owned()) {
            f();
        }
    }

    /// The cgroups the rules name now, with nested ones left out (and reported once).
    ///
    /// `O(n log n)` in the number of cgroups: paths come sorted, so an outer cgroup is always
    /// accepted before anything inside it, and each path looks up only its own ancestors.
    fn discover(&mut self) -> Vec<(String, Settings)> {
        let mut found: BTreeSet<String> = self.rules.exact_paths().map(str::to_owned).collect();
        if self.rules.depth() > 0 {
            match self.fs.walk(self.rules.depth()) {
                Ok(all) => found.extend(
                    all.into_iter()
                        .filter(|p| self.rules.settings_for(p).is_some()),
                ),
                Err(e) => {
                    self.counters.read_errors += 1;
                    warn!(error = %e, "cgroup discovery failed; keeping the managed set as it was");
                    return self
                        .managed
                        .iter()
                        .map(|(p, m)| (p.clone(), self.settings(p).unwrap_or(m.settings)))
                        .collect();
                }
            }
        }
        let mut accepted: BTreeSet<&str> = BTreeSet::new();
        let mut out: Vec<(String, Settings)> = Vec::with_capacity(found.len());
        for path in &found {
            if self.forbidden.contains(path) {
                self.warn_once(&format!("forbidden:{path}"), || {
                    error!(cgroup = %path,
                        "not managing the daemon's own cgroup, an ancestor of it, or init.scope: \
                         throttling it would throttle memweightd or PID 1; change the rule");
                });
                continue;
            }
            let outer = path
                .match_indices('/')
                .map(|(i, _)| &path[..i])
                .find(|a| accepted.contains(a));
            if let Some(outer) = outer {
                self.warn_once(&format!("nest:{path}"), || {
                    error!(cgroup = %path, inside = %outer,
                        "not managing a cgroup nested inside another managed cgroup; \
                         make the rules name only one level");
                });
                continue;
            }
            if let Some(s) = self.settings_warning_labels(path) {
                accepted.insert(path);
                out.push((path.clone(), s));
            }
        }
        // Warnings about cgroups that are gone may be given again if they come back; those
        // about a container's labels are kept while the engine lists the container, so that
        // their number stays bounded by the containers running.
        let listed = &self.snap.containers;
        self.warned.retain(|k| match k.split_once(':') {
            Some(("anc" | "restore" | "forbidden", _)) | None => true,
            Some(("label" | "clamp", rest)) => rest
                .split_once(':')
                .is_some_and(|(id, _)| listed.contains_key(id)),
            Some((_, p)) => found.contains(p),
        });
        out
    }

    /// Starts managing a cgroup seen for the first time (this run).
    ///
    /// An original recorded for this path by an earlier run is used only if it belongs to the
    /// same cgroup (same id): one recorded for a cgroup that was removed and created again
    /// under the same name is dropped. The cgroup is not written to until its originals are in
    /// the state file ([`Controller::record_originals`]).
    fn adopt(&mut self, path: &str, settings: Settings, s: &CgroupSample) {
        let id = match self.fs.id(path) {
            Ok(id) => id,
            Err(e) => {
                warn!(cgroup = %path, error = %e, "cannot read the cgroup's id");
                None
            }
        };
        let sampled = Originals {
            high: s.high,
            low: s.low,
        };
        let mut resumed = None;
        if let Some(o) = self.state.originals.get_mut(path) {
            match (o.id, id) {
                (Some(was), Some(now)) if was != now => {
                    info!(cgroup = %path, recorded_id = was, id = now,
                        "dropping the original recorded for an earlier cgroup of this name: it \
                         was removed and created again while memweightd was not managing it");
                    self.state.originals.remove(path);
                    self.dirty = true;
                }
                _ => {
                    if o.id.is_none() && id.is_some() {
                        // A version 1 entry: tie it to the cgroup from now on.
                        o.id = id;
                        self.dirty = true;
                    }
                    resumed = Some(parse_original(o));
                }
            }
        }
        let mut operator = None;
        let (originals, recorded) = match resumed {
            // Adopted before a restart: what the files say now is presumably our own write,
            // except a memory.high above the original, which the daemon never writes.
            Some(mut o) => {
                if limit_above(s.high, o.high) {
                    operator = Some(self.operator_note("memory.high", s.high));
                    warn!(cgroup = %path, high = %s.high, was = %o.high,
                        "memory.high was raised outside memweightd while it was not running; \
                         keeping it as the cgroup's original and ceiling");
                    o.high = s.high;
                    self.record_entry(path, o, id);
                }
                (o, self.cfg.enforce)
            }
            None => (sampled, false),
        };
        self.unchanged.remove(path);
        debug!(cgroup = %path, weight = settings.weight, original_high = %originals.high,
            original_low = %originals.low, resumed = recorded, "adopted cgroup");
        self.counters.adopted += 1;
        self.managed.insert(
            path.to_owned(),
            Managed {
                settings,
                originals,
                id,
                recorded,
                known: sampled,
                reclaim_supported: true,
                operator,
                last: None,
                refaulted: 0,
                refresh: true,
            },
        );
    }

    fn operator_note(&self, file: &str, value: Limit) -> String {
        format!(
            "{file} set to {value} outside memweightd (seen at tick {}); kept as the cgroup's \
             original",
            self.ticks
        )
    }

    /// Writes `o` as the recorded original of `path` in the state (saved at the tick's end).
    fn record_entry(&mut self, path: &str, o: Originals, id: Option<u64>) {
        self.state.originals.insert(
            path.to_owned(),
            Original {
                high: o.high.to_string(),
                low: o.low.to_string(),
                id,
            },
        );
        self.dirty = true;
    }

    /// Checks a managed cgroup's files against what the daemon last wrote there: a difference
    /// is an operator's change (or the cgroup was created again under the same name).
    fn reconcile(&mut self, path: &str, settings: Settings, s: &CgroupSample) {
        let busy = self.jobs.contains_key(path);
        let Some(m) = self.managed.get_mut(path) else {
            self.adopt(path, settings, s);
            return;
        };
        m.settings = settings;
        if busy {
            // A write of ours may be landing now; look again when it is done.
            return;
        }
        let high_changed = !same_pages(s.high, m.known.high);
        let low_changed = !same_pages(s.low, m.known.low);
        if !high_changed && !low_changed {
            return;
        }
        let was = m.id;
        let now = self.fs.id(path).ok().flatten();
        if was.is_some() && now.is_some() && was != now {
            info!(cgroup = %path, "cgroup was removed and created again; adopting it afresh");
            self.managed.remove(path);
            if self.state.originals.remove(path).is_some() {
                self.dirty = true;
            }
            self.adopt(path, settings, s);
            return;
        }
        let high_note = high_changed.then(|| self.operator_note("memory.high", s.high));
        let low_note = low_changed.then(|| self.operator_note("memory.low", s.low));
        let Some(m) = self.managed.get_mut(path) else {
            return;
        };
        if high_changed {
            warn!(cgroup = %path, high = %s.high, wrote = %m.known.high,
                "memory.high was changed outside memweightd; keeping it as the cgroup's \
                 original and ceiling");
            m.originals.high = s.high;
            m.known.high = s.high;
        }
        if low_changed {
            warn!(cgroup = %path, low = %s.low, wrote = %m.known.low,
                "memory.low was changed outside memweightd; keeping it as the cgroup's original");
            m.originals.low = s.low;
            m.known.low = s.low;
        }
        m.operator = high_note.or(low_note);
        let (recorded, originals, id) = (m.recorded, m.originals, m.id);
        if recorded {
            self.record_entry(path, originals, id);
        }
    }

    /// Records the originals of cgroups adopted this tick (enforcing only), with every other
    /// state change, in one save. Cgroups whose originals could not be saved are not written
    /// to: they are recorded again next tick.
    fn record_originals(&mut self) {
        let mut pending = Vec::new();
        if self.cfg.enforce {
            for (p, m) in &self.managed {
                if !m.recorded {
                    pending.push((p.clone(), m.originals, m.id));
                }
            }
            for (p, o, id) in &pending {
                self.record_entry(p, *o, *id);
            }
        }
        if self.flush() {
            for (p, _, _) in &pending {
                if let Some(m) = self.managed.get_mut(p) {
                    m.recorded = true;
                }
            }
        } else if !pending.is_empty() {
            warn!(
                cgroups = pending.len(),
                "their original limits are not on disk; not writing to them until the state \
                 file can be saved"
            );
            // Not on disk, so not in the state either: a restart reads them afresh.
            for (p, _, _) in &pending {
                self.state.originals.remove(p);
            }
        }
    }

    /// Puts back every recorded original whose cgroup the daemon does not hold (released,
    /// no longer named, left by an earlier run, or in a dry run), then forgets it. A restore
    /// that fails keeps the original, and is tried again at the next tick. Stops early (the
    /// rest stays recorded) once `deadline` has passed.
    fn restore_recorded(&mut self, wanted: &BTreeSet<&str>, deadline: Option<Instant>) {
        let todo: Vec<(String, Original)> = self
            .state
            .originals
            .iter()
            .filter(|(p, _)| {
                !self.managed.get(*p).is_some_and(|m| m.recorded)
                    && !self.jobs.contains_key(*p)
                    && (self.managed.contains_key(*p) || !wanted.contains(p.as_str()))
            })
            .map(|(p, o)| (p.clone(), o.clone()))
            .collect();
        let total = todo.len();
        for (i, (path, o)) in todo.into_iter().enumerate() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                error!(
                    left = total - i,
                    "out of time restoring original limits; the rest stay in the state file \
                     and are restored at the next start"
                );
                break;
            }
            if total >= PROGRESS_EVERY && i > 0 && i % PROGRESS_EVERY == 0 {
                info!(done = i, total, "restoring original limits");
            }
            let orig = parse_original(&o);
            // Still holding its originals (never written, or written back): nothing to write.
            let outcome = if self.unchanged.remove(&path) {
                Restored::Done
            } else {
                restore(&self.fs, &path, &orig, o.id)
            };
            match outcome {
                Restored::Done => {
                    debug!(cgroup = %path, high = %orig.high, low = %orig.low,
                        "original limits restored");
                    self.warned.remove(&format!("restore:{path}"));
                    if let Some(m) = self.managed.get_mut(&path) {
                        m.known = orig;
                    }
                }
                Restored::Gone => debug!(cgroup = %path, "cgroup gone; nothing to restore"),
                Restored::Replaced => info!(cgroup = %path,
                    "not restoring: the cgroup was removed and created again, so the recorded \
                     original is not its own; dropped"),
                Restored::Failed(e) => {
                    self.counters.restore_errors += 1;
                    self.warn_once(&format!("restore:{path}"), || {
                        error!(cgroup = %path, error = %e,
                            "could not restore the original limits; keeping them recorded and \
                             trying again every tick");
                    });
                    continue;
                }
            }
            self.state.originals.remove(&path);
            self.dirty = true;
        }
        if total >= PROGRESS_EVERY {
            info!(total, "restoring original limits: done");
        }
        let originals = &self.state.originals;
        self.unchanged.retain(|p| originals.contains_key(p));
    }

    /// Stops managing a cgroup: its originals, if recorded, are restored by
    /// [`Controller::restore_recorded`].
    fn release(&mut self, path: &str) {
        if let Some(m) = self.managed.remove(path) {
            self.note_unchanged(path, &m);
            info!(cgroup = %path, "released cgroup");
            self.counters.released += 1;
        }
    }

    /// Notes a cgroup being released whose files hold its originals as far as the daemon
    /// knows (its last write, or what it read at adoption, equals the original) and has no
    /// write in flight: restoring it would write what is there.
    fn note_unchanged(&mut self, path: &str, m: &Managed) {
        if same_pages(m.known.high, m.originals.high)
            && same_pages(m.known.low, m.originals.low)
            && !self.jobs.contains_key(path)
        {
            self.unchanged.insert(path.to_owned());
        }
    }

    /// Forgets a cgroup that no longer exists.
    fn forget(&mut self, path: &str) {
        self.unchanged.remove(path);
        if self.managed.remove(path).is_some() {
            info!(cgroup = %path, "cgroup vanished; dropped");
            self.counters.released += 1;
        }
        if self.state.originals.remove(path).is_some() {
            self.dirty = true;
        }
        // A container's override waits for the container to come back
        // ([`Controller::drop_orphan_overrides`]); any other goes with its cgroup.
        if containers::container_id(path).is_none() && self.state.overrides.remove(path).is_some() {
            info!(cgroup = %path, "runtime override of a vanished cgroup removed");
            self.dirty = true;
        }
        self.last_originals.remove(path);
        for kind in ["read", "nomem", "nest", "restore"] {
            self.warned.remove(&format!("{kind}:{path}"));
        }
    }

    /// Samples one cgroup: all ten files, or — for a managed cgroup that is steady (its
    /// `memory.current` within [`STEADY_BYTES`] or 1/64 of its last full sample, not held at
    /// its `memory.high`, nothing written to it since, not due for its periodic full sample)
    /// — `memory.current`,
    /// `memory.high` and `memory.low` afresh with the rest (`memory.stat`, events, PSI, swap,
    /// `memory.min`/`memory.max`) reused (`true`). Idle cgroups so cost three reads a tick,
    /// not ten, and the limits an operator may change are still read every tick.
    ///
    /// A cgroup without a full sample yet (new) is sampled in full while `first_full` lasts
    /// (counted down) or if it uses [`PROVISIONAL_BELOW`] or more; otherwise it gets a
    /// provisional sample from the three files ([`provisional`]: pinned at its usage) and
    /// stays without a full sample, so a later tick takes one.
    fn sample_cheap(
        &self,
        path: &str,
        first_full: &mut usize,
    ) -> Result<Option<(CgroupSample, bool)>, memweight_cgroupfs::Error> {
        if self.managed.get(path).is_none_or(|m| m.last.is_none()) {
            if *first_full > 0 {
                *first_full -= 1;
            } else {
                match self.fs.sample_light(path)? {
                    None => return Ok(None),
                    Some((now, high, low)) if now < PROVISIONAL_BELOW => {
                        return Ok(Some((provisional(now, high, low), true)));
                    }
                    Some(_) => {}
                }
            }
        }
        if let Some(m) = self.managed.get(path)
            && let Some(last) = &m.last
            && !m.refresh
            && !self.jobs.contains_key(path)
            && !self
                .ticks
                .wrapping_add(m.id.unwrap_or(0))
                .is_multiple_of(FULL_SAMPLE_EVERY)
        {
            match self.fs.sample_light(path)? {
                None => return Ok(None),
                // Held at its memory.high, usage stays flat while what sets its floor (anon
                // vs cache, swap) moves: such a cgroup is always sampled in full.
                Some((now, high, low))
                    if now.abs_diff(last.current) <= STEADY_BYTES.max(last.current / 64)
                        && !held(
                            now,
                            high,
                            effective_guard(self.cfg.reclaim, self.cfg.guard, m.reclaim_supported),
                        ) =>
                {
                    let mut s = (**last).clone();
                    s.current = now;
                    s.high = high;
                    s.low = low;
                    return Ok(Some((s, true)));
                }
                Some(_) => {}
            }
        }
        Ok(self.fs.sample(path)?.map(|s| (s, false)))
    }

    /// Drops runtime overrides whose cgroup no longer exists and is not managed: a cgroup
    /// removed while the daemon was down, or after it was released, leaves no override that
    /// would apply to a later cgroup of the same name. A container's cgroup (its id in the
    /// path) is the exception: `podman restart` and restart policies bring the same container
    /// back under the same path, so its override is kept for
    /// [`crate::state::OVERRIDE_GRACE`] ([`Orphans`]). One `stat` per such override per tick.
    fn drop_orphan_overrides(&mut self) {
        let gone: Vec<String> = self
            .state
            .overrides
            .keys()
            .filter(|p| !self.managed.contains_key(*p))
            .filter(|p| matches!(self.fs.id(p), Ok(None)))
            .cloned()
            .collect();
        let (of_containers, others): (BTreeSet<String>, BTreeSet<String>) = gone
            .into_iter()
            .partition(|p| containers::container_id(p).is_some());
        for p in others {
            info!(cgroup = %p, "runtime override of a cgroup that no longer exists removed");
            self.state.overrides.remove(&p);
            self.dirty = true;
        }
        let changes = self.orphans.update(&of_containers, Instant::now());
        for p in &changes.kept {
            info!(cgroup = %p, grace_s = crate::state::OVERRIDE_GRACE.as_secs(),
                "a container's cgroup is gone; its runtime override is kept in case it restarts \
                 (podman restart and restart policies keep the container id)");
        }
        for p in &changes.back {
            if self.state.overrides.contains_key(p) {
                info!(cgroup = %p, "the container's cgroup is back; its runtime override applies");
            }
        }
        for p in changes.expired {
            info!(cgroup = %p, grace_s = crate::state::OVERRIDE_GRACE.as_secs(),
                "runtime override removed: its container did not come back");
            self.state.overrides.remove(&p);
            self.dirty = true;
        }
    }

    async fn collect_jobs(&mut self, wait: Duration) {
        {
            let deadline = tokio::time::Instant::now() + wait;
            let paths: Vec<String> = self.jobs.keys().cloned().collect();
            for path in paths {
                let Some(handle) = self.jobs.get_mut(&path) else {
                    continue;
                };
                let res = if handle.is_finished() {
                    handle.await
                } else {
                    match tokio::time::timeout_at(deadline, &mut *handle).await {
                        Ok(r) => r,
                        Err(_) => continue,
                    }
                };
                self.jobs.remove(&path);
                match res {
                    Ok(r) => self.absorb(r),
                    Err(e) => {
                        self.counters.write_errors += 1;
                        error!(cgroup = %path, error = %e, "write job failed");
                    }
                }
            }
        }
    }

    fn absorb(&mut self, r: JobResult) {
        if r.writes.high.is_some() {
            self.counters.writes_high += 1;
        }
        if r.writes.low.is_some() {
            self.counters.writes_low += 1;
        }
        if let Some(b) = r.writes.reclaim {
            self.counters.writes_reclaim += 1;
            self.counters.reclaim_bytes += b;
        }
        self.counters.write_errors += r.errors.len() as u64;
        for e in &r.errors {
            warn!(cgroup = %r.path, error = %e, "write failed");
        }
        if let Some(m) = self.managed.get_mut(&r.path) {
            if let Some(h) = r.writes.high {
                m.known.high = h;
            }
            if let Some(l) = r.writes.low {
                m.known.low = l;
            }
            if r.reclaim_unsupported {
                m.reclaim_supported = false;
                info!(cgroup = %r.path, "memory.reclaim not supported here; using memory.high alone");
            }
        }
        if r.gone {
            debug!(cgroup = %r.path, "cgroup vanished during a write");
        }
    }

    /// Runs one tick. Errors on single cgroups are logged and counted, never fatal: one
    /// cgroup that cannot be read, recorded or written never stops the others.
    /// The report is shared (`Arc`) with whoever publishes it: no copy of its rows per tick.
    pub async fn tick(&mut self) -> Result<Arc<TickReport>, ControlError> {
        let started = Instant::now();
        self.ticks += 1;
        self.collect_jobs(Duration::ZERO).await;
        if let Some(c) = &self.containers {
            self.snap = c.snapshot();
        }

        // Discover: release cgroups no longer named.
        let wanted = self.discover();
        let leaving: Vec<String> = {
            let wanted_set: BTreeSet<&str> = wanted.iter().map(|(p, _)| p.as_str()).collect();
            self.managed
                .keys()
                .filter(|p| !wanted_set.contains(p.as_str()))
                .cloned()
                .collect()
        };
        for p in leaving {
            // A glob no longer matches a container that exited: gone, not released.
            if matches!(self.fs.id(&p), Ok(None)) && !self.jobs.contains_key(&p) {
                self.forget(&p);
            } else {
                self.release(&p);
            }
        }
        if !self.cfg.enforce {
            // A dry run holds nothing: what an enforcing run wrote is put back below.
            for m in self.managed.values_mut() {
                m.recorded = false;
            }
        }

        // Sample; adopt new cgroups; notice operators' changes.
        let mut rows: Vec<(String, Settings, CgroupSample)> = Vec::with_capacity(wanted.len());
        let mut vanished = Vec::new();
        let mut adopted: Vec<String> = Vec::new();
        let mut first_full = FIRST_FULL_PER_TICK;
        for (path, settings) in &wanted {
            if self.stopping.load(Ordering::Relaxed) {
                return Err(ControlError::Stopping);
            }
            match self.sample_cheap(path, &mut first_full) {
                Ok(Some((s, reused))) => {
                    if !self.managed.contains_key(path) {
                        adopted.push(path.clone());
                    }
                    self.reconcile(path, *settings, &s);
                    if let Some(m) = self.managed.get_mut(path) {
                        m.refaulted = 0;
                        if !reused {
                            if let Some(last) = &m.last {
                                m.refaulted = refaulted_bytes(&last.stat, &s.stat);
                            }
                            // Taken while a write job runs, it may be mid-reclaim: sample
                            // again.
                            m.last = Some(Box::new(s.clone()));
                            m.refresh = self.jobs.contains_key(path);
                        }
                    }
                    rows.push((path.clone(), *settings, s));
                }
                Ok(None) => {
                    vanished.push(path.clone());
                    // Not there yet (an exact path), or there without the memory controller.
                    let exists = self.fs.resolve(path).is_ok_and(|d| d.is_dir());
                    if exists && !self.fs.memory_enabled_for(path).unwrap_or(true) {
                        self.warn_once(&format!("nomem:{path}"), || {
                            error!(cgroup = %path, "{}", no_memory_controller(path));
                        });
                    }
                }
                Err(e) => {
                    self.counters.read_errors += 1;
                    self.warn_once(&format!("read:{path}"), || {
                        warn!(cgroup = %path, error = %e, "cannot sample cgroup; skipping it");
                    });
                }
            }
        }
        for path in vanished {
            if !self.jobs.contains_key(&path) {
                self.forget(&path);
            }
        }
        if adopted.len() > ADOPTIONS_LISTED {
            info!(
                cgroups = adopted.len(),
                "adopted cgroups (each one is logged at debug level)"
            );
        } else {
            for p in &adopted {
                if let Some(m) = self.managed.get(p) {
                    info!(cgroup = %p, weight = m.settings.weight, original_high = %m.originals.high,
                        original_low = %m.originals.low, "adopted cgroup");
                }
            }
        }
        let wanted_set: BTreeSet<&str> = wanted.iter().map(|(p, _)| p.as_str()).collect();
        self.restore_recorded(&wanted_set, None);
        self.drop_orphan_overrides();
        self.record_originals();

        let host = match self.proc.host() {
            Ok(h) => h,
            Err(e) => {
                self.counters.read_errors += 1;
                warn!(error = %e, "cannot read host memory state; skipping this tick");
                return Err(e.into());
            }
        };

        let mut report = self.compute_and_enforce(&rows, &host).await;
        report.pool.duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let report = Arc::new(report);
        self.last = Some(Arc::clone(&report));
        Ok(report)
    }

    /// The kernel's reclaim band, from `/proc/zoneinfo` read at most every
    /// [`WATERMARKS_EVERY`] ticks; `None` (warned once) when it cannot be read.
    fn watermark_band(&mut self) -> Option<u64> {
        if !matches!(
            self.cfg.capacity.reserve,
            crate::config::Reserve::Watermarks
        ) {
            return None;
        }
        if let Some((band, at)) = self.watermarks
            && self.ticks.saturating_sub(at) < WATERMARKS_EVERY
        {
            return Some(band);
        }
        match self.proc.watermarks() {
            Ok(w) => {
                let band = w.high.saturating_sub(w.min);
                if self.watermarks.is_none_or(|(was, _)| was != band) {
                    info!(
                        min = w.min,
                        low = w.low,
                        high = w.high,
                        reserve = band,
                        "kernel watermarks read: the reserve is their high - min band"
                    );
                }
                self.watermarks = Some((band, self.ticks));
                self.warned.remove("zoneinfo");
                Some(band)
            }
            Err(e) => {
                self.warn_once("zoneinfo", || {
                    warn!(error = %e, "cannot read the kernel's watermarks; the reserve is 1% of \
                        MemTotal until they can be read (or set capacity.reserve to a size)");
                });
                self.watermarks = None;
                None
            }
        }
    }

    async fn compute_and_enforce(
        &mut self,
        rows: &[(String, Settings, CgroupSample)],
        host: &HostSample,
    ) -> TickReport {
        let watermark_band = self.watermark_band();
        // Only the work-conserving law reads the cgroups beside the managed set.
        let outside_stall = if self.cfg.capacity.mode == CapacityMode::Auto {
            self.outside.sample(
                &self.fs,
                self.managed.keys().map(String::as_str),
                Instant::now(),
            )
        } else {
            None
        };
        // Every row is managed (sampling adopts what it finds); one that is not is left out.
        let (rows, law_rows): (Vec<&(String, Settings, CgroupSample)>, Vec<Row<'_>>) = rows
            .iter()
            .filter_map(|row| {
                let (p, st, s) = row;
                self.managed.get(p).map(|m| {
                    let law_row = Row {
                        name: p.as_str(),
                        settings: *st,
                        sample: s,
                        originals: m.originals,
                        reclaim_supported: m.reclaim_supported,
                        provisional: m.last.is_none(),
                        refaulted: m.refaulted,
                    };
                    (row, law_row)
                })
            })
            .unzip();
        let law = Law {
            capacity: &self.cfg.capacity,
            min_floor: self.cfg.min_floor.bytes(),
            max_step: self.cfg.max_step,
            reclaim: self.cfg.reclaim,
            guard: self.cfg.guard,
            idle_tax: self.cfg.idle_tax,
        };
        let Step {
            capacity: cap,
            guards,
            next,
            own_stall,
            plan,
            rejected,
            enforcing,
            cgroups: decided,
        } = step::step(
            &law,
            &law_rows,
            host,
            watermark_band,
            outside_stall,
            self.carry,
        );
        self.carry = next;
        if let Some(e) = &rejected {
            // Inputs are validated by the config and the protocol; this is a bug.
            error!(error = %e, "policy rejected its inputs; no writes this tick");
        }

        let mut reports = Vec::with_capacity(rows.len());
        let mut label_clamps = Vec::new();
        let mut refresh: Vec<String> = Vec::new();
        for (i, (path, st, s)) in rows.iter().enumerate() {
            let d = &plan.decisions[i];
            let CgroupStep {
                floor,
                ceiling,
                writes,
            } = decided[i];
            let Some(m) = self.managed.get(path) else {
                continue;
            };
            let busy = self.jobs.contains_key(path);
            let state = if !self.cfg.enforce {
                CgroupState::DryRun
            } else if !m.recorded {
                // The originals could not be saved: nothing is written until they are.
                CgroupState::Pending
            } else if busy {
                CgroupState::Busy
            } else if m.last.is_none() {
                // Seen this tick for the first time, among many: pinned at its usage until a
                // full sample (a later tick) shows what it holds.
                CgroupState::New
            } else {
                CgroupState::Ok
            };
            if !writes.is_empty() {
                debug!(cgroup = %path, usage = s.current, target = d.target, ceiling = ?ceiling,
                    high = ?writes.high.map(|h| h.to_string()), low = ?writes.low.map(|l| l.to_string()),
                    reclaim = ?writes.reclaim, %state, "decided writes");
            }
            let (original_high, original_low, operator, refaulted) = (
                Some(m.originals.high.to_string()),
                Some(m.originals.low.to_string()),
                m.operator.clone(),
                m.refaulted,
            );
            if self.cfg.enforce && m.recorded && !busy && !writes.is_empty() {
                refresh.push(path.clone());
                let fs = Arc::clone(&self.fs);
                let stopping = Arc::clone(&self.stopping);
                let p = path.clone();
                self.jobs.insert(
                    path.clone(),
                    crate::pools::kernel_writes().spawn(move || apply(&fs, &p, writes, &stopping)),
                );
            }
            let resolved = self.resolve(path);
            if let Some(r) = &resolved
                && let Some(container) = &r.container
            {
                label_clamps.extend(r.label_clamps.iter().map(|c| ClampedLabel {
                    cgroup: path.clone(),
                    container: container.clone(),
                    label: c.label.clone(),
                }));
            }
            reports.push(CgroupReport {
                cgroup: path.clone(),
                weight: st.weight,
                overridden: self.state.overrides.contains_key(path),
                container: resolved.as_ref().and_then(|r| r.container.clone()),
                source: resolved.map(|r| r.source),
                usage: s.current,
                expected: d.expected,
                exceed: d.exceed,
                target: d.target,
                entitlement: d.entitlement,
                floor,
                ceiling,
                high: s.high.bytes(),
                low: s.low.bytes(),
                swap: s.swap_current,
                psi_some_avg10: s.pressure.as_ref().map(|p| p.some.avg10),
                psi_full_avg10: s
                    .pressure
                    .as_ref()
                    .and_then(|p| p.full.as_ref())
                    .map(|f| f.avg10),
                refaulted: Some(refaulted),
                events_high: s.events.high,
                events_max: s.events.max,
                events_oom_kill: s.events.oom_kill,
                wrote_high: writes.high.map(|h| h.to_string()),
                wrote_low: writes.low.and_then(Limit::bytes),
                reclaim: writes.reclaim,
                state,
                reason: d.reason.to_string(),
                original_high,
                original_low,
                operator,
            });
        }
        for p in refresh {
            if let Some(m) = self.managed.get_mut(&p) {
                m.refresh = true;
            }
        }
        // Give quick writes a chance to land within this tick; slow ones are picked up later.
        self.collect_jobs(self.cfg.tick.0 / 2).await;
        if self.cfg.enforce && self.cfg.protect_ancestors {
            let lows: Vec<(&str, u64)> = reports
                .iter()
                .map(|r| (r.cgroup.as_str(), r.entitlement))
                .collect();
            self.protect_ancestors(&ancestor_lows(&lows));
        } else if !self.state.ancestors.is_empty() {
            // Dry run, or protect_ancestors turned off by a reload: put the ancestors back.
            self.protect_ancestors(&BTreeMap::new());
        }

        TickReport {
            pool: memweight_proto::ctl::Pool {
                tick: self.ticks,
                capacity: cap.bytes,
                shortfall: cap.shortfall,
                psi_cut: cap.psi_cut,
                reserve: cap.reserve,
                own_stall,
                guards,
                held: cap.held,
                reclaiming: cap.reclaiming,
                enforcing,
                give: cap.give,
                outside_stall,
                total_usage: plan.total_usage,
                total_weight: plan.total_weight,
                pressure: plan.pressure,
                overcommitted: plan.overcommitted,
                mem_total: host.mem_total,
                mem_available: host.mem_available,
                swap_free: host.swap_free,
                host_psi_some_avg10: host.psi.as_ref().map(|p| p.some.avg10),
                host_psi_full_avg10: host
                    .psi
                    .as_ref()
                    .and_then(|p| p.full.as_ref())
                    .map(|f| f.avg10),
                enforce: self.cfg.enforce,
                duration_us: 0,
            },
            cgroups: reports,
            label_clamps,
        }
    }

    /// Restores every recorded original (shutdown), with progress in the log and within
    /// 20 seconds.
    ///
    /// Write jobs still in the kernel are told to stop before their next write and waited for
    /// (bounded, all against one deadline); a job that lands a write after the restore is
    /// followed by a second restore of that cgroup.
    pub async fn release_all(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.collect_jobs(Duration::from_secs(2)).await;
        self.release_all_now();
        if !self.jobs.is_empty() {
            warn!(
                cgroups = self.jobs.len(),
                "write jobs still blocked in the kernel; waiting up to 5s"
            );
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            let late: Vec<(String, JoinHandle<JobResult>)> =
                std::mem::take(&mut self.jobs).into_iter().collect();
            for (path, handle) in late {
                let Some((o, id)) = self.last_originals.remove(&path) else {
                    continue;
                };
                match tokio::time::timeout_at(deadline, handle).await {
                    Ok(Ok(r)) if r.writes.high.is_none() && r.writes.low.is_none() => {}
                    Ok(Ok(_)) => {
                        if let Restored::Failed(e) = restore(&self.fs, &path, &o, id) {
                            error!(cgroup = %path, error = %e,
                                "could not restore after a late write; keeping the original \
                                 recorded");
                            self.record_entry(&path, o, id);
                        }
                    }
                    _ => {
                        // Still in the kernel: its write may land after this process is gone.
                        // Recorded, so the unit's ExecStopPost (or the next start) restores it.
                        error!(cgroup = %path,
                            "a write is still blocked in the kernel; keeping the original \
                             recorded for memweightd --restore");
                        self.record_entry(&path, o, id);
                    }
                }
            }
        }
        if !self.flush() {
            error!("could not record the released state");
        }
    }

    /// Restores every original recorded in the state file and saves what is left; no ticks,
    /// no sockets, no runtime. This is `memweightd --restore`: the unit's `ExecStopPost=`
    /// after the main process died without restoring (SIGKILL, SIGABRT, the watchdog, a
    /// panic), and the daemon's own panic path. Returns how many originals are still recorded
    /// (not restored; kept for the next start).
    pub fn restore_only(&mut self) -> usize {
        self.release_all_now();
        if !self.flush() {
            error!("could not record the restored state");
        }
        self.state.originals.len() + self.state.ancestors.len()
    }

    /// Lets go of every cgroup and restores every recorded original now.
    fn release_all_now(&mut self) {
        let n = self.managed.len();
        self.last_originals.clear();
        for (p, m) in std::mem::take(&mut self.managed) {
            self.note_unchanged(&p, &m);
            self.last_originals.insert(p, (m.originals, m.id));
        }
        self.counters.released += n as u64;
        let started = Instant::now();
        let total = self.state.originals.len();
        let in_flight: Vec<String> = self.jobs.keys().cloned().collect();
        // At shutdown a job still in the kernel has already set its value (the kernel sets
        // memory.high before it reclaims); restoring over it now is what we want.
        let jobs = std::mem::take(&mut self.jobs);
        self.restore_recorded(&BTreeSet::new(), Some(started + RESTORE_BUDGET));
        self.jobs = jobs;
        let left = self.state.originals.len();
        info!(
            cgroups = n,
            restored = total - left,
            left,
            in_flight = in_flight.len(),
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "released every cgroup"
        );
        self.protect_ancestors(&BTreeMap::new());
    }

    /// Sets each ancestor's `memory.low` to `max(its original, wanted)`; ancestors no longer
    /// wanted get their original back (kept and retried if that fails). Originals are
    /// recorded, in one save, before the first write.
    fn protect_ancestors(&mut self, wanted: &BTreeMap<String, u64>) {
        let stale: Vec<(String, String)> = self
            .state
            .ancestors
            .iter()
            .filter(|(a, _)| !wanted.contains_key(*a))
            .map(|(a, o)| (a.clone(), o.clone()))
            .collect();
        for (a, orig) in stale {
            let low = memweight_cgroupfs::parse::limit(&orig).unwrap_or(Limit::Bytes(0));
            match self.fs.write_low(&a, low) {
                Ok(_) => {
                    self.state.ancestors.remove(&a);
                    self.dirty = true;
                }
                Err(e) => {
                    self.counters.write_errors += 1;
                    warn!(cgroup = %a, error = %e,
                        "could not restore an ancestor's memory.low; trying again next tick");
                }
            }
        }
        let mut raise: Vec<(String, Limit)> = Vec::new();
        let mut new: Vec<String> = Vec::new();
        for (a, &sum) in wanted {
            let current = match read_limit(&self.fs, a, "memory.low") {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(e) => {
                    self.warn_once(&format!("anc:{a}"), || {
                        warn!(cgroup = %a, error = %e, "cannot read an ancestor's memory.low");
                    });
                    continue;
                }
            };
            let orig = match self.state.ancestors.get(a) {
                Some(o) => memweight_cgroupfs::parse::limit(o).unwrap_or(Limit::Bytes(0)),
                None => current,
            };
            let want = match orig {
                Limit::Max => Limit::Max,
                Limit::Bytes(o) => Limit::Bytes(o.max(sum)),
            };
            if want == current {
                continue;
            }
            if !self.state.ancestors.contains_key(a) {
                self.state.ancestors.insert(a.clone(), current.to_string());
                self.dirty = true;
                new.push(a.clone());
            }
            raise.push((a.clone(), want));
        }
        if !self.flush() && !new.is_empty() {
            warn!("cannot record ancestors' memory.low; not raising them");
            for a in &new {
                self.state.ancestors.remove(a);
            }
            raise.retain(|(a, _)| !new.contains(a));
        }
        for (a, want) in raise {
            match self.fs.write_low(&a, want) {
                Ok(_) => self.counters.writes_low += 1,
                Err(e) => {
                    self.counters.write_errors += 1;
                    warn!(cgroup = %a, error = %e, "could not raise an ancestor's memory.low");
                }
            }
        }
    }
}

/// Sum of descendants' protection per ancestor (the root itself excluded), rounded up to the
/// `memory.low` granule.
/// The cgroups the daemon must never manage, as paths under `root`: `init.scope`, and the
/// daemon's own cgroup (from the `0::/…` line of `/proc/self/cgroup`, `own`) with every
/// ancestor of it that lies under `root`. Paths in `/proc/self/cgroup` are relative to the
/// cgroup2 mount, taken to be `/sys/fs/cgroup`; under another root (tests) only `init.scope`
/// is forbidden.
fn forbidden_cgroups(own: Option<&str>, root: &std::path::Path) -> BTreeSet<String> {
    let mut out = BTreeSet::from(["init.scope".to_owned()]);
    let Some(own) = own.and_then(|t| t.lines().find_map(|l| l.strip_prefix("0::"))) else {
        return out;
    };
    let abs = std::path::Path::new("/sys/fs/cgroup").join(own.trim().trim_start_matches('/'));
    let Ok(rel) = abs.strip_prefix(root) else {
        return out;
    };
    let rel = rel.to_string_lossy();
    let mut prefix = String::new();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        out.insert(prefix.clone());
    }
    out
}

fn ancestor_lows(lows: &[(&str, u64)]) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for (path, low) in lows {
        let low = low
            .div_ceil(decide::LOW_GRANULE)
            .saturating_mul(decide::LOW_GRANULE);
        for a in memweight_proto::cgroup_path::ancestors(path) {
            let e = out.entry(a.to_owned()).or_default();
            *e = e.saturating_add(low);
        }
    }
    out
}

fn read_limit(
    fs: &CgroupFs,
    rel: &str,
    file: &str,
) -> Result<Option<Limit>, memweight_cgroupfs::Error> {
    let path = fs.resolve(rel)?.join(file);
    match std::fs::read_to_string(&path) {
        Ok(t) => memweight_cgroupfs::parse::limit(&t).map(Some).map_err(|e| {
            memweight_cgroupfs::Error::Parse {
                path,
                what: e.to_string(),
            }
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(memweight_cgroupfs::Error::Io { path, source }),
    }
}

fn parse_original(o: &Original) -> Originals {
    Originals {
        high: memweight_cgroupfs::parse::limit(&o.high).unwrap_or(Limit::Max),
        low: memweight_cgroupfs::parse::limit(&o.low).unwrap_or(Limit::Bytes(0)),
    }
}

fn no_memory_controller(path: &str) -> String {
    let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
    format!(
        "the memory controller is not enabled for this cgroup; enable it in its parent with \
         `echo +memory > <cgroup root>/{parent}/cgroup.subtree_control`"
    )
}

/// A stand-in for the full sample of a small cgroup seen for the first time, from its
/// `memory.current`, `memory.high` and `memory.low`: everything it holds counts as anonymous
/// memory with no swap room, so its floor is its usage and the policy leaves it as it is
/// until a full sample shows what it holds. No PSI, no events, no swap (shown as unknown).
/// Bytes faulted back between two `memory.stat` readings (`workingset_refault_anon` +
/// `workingset_refault_file`, pages); 0 if the counters went backwards.
fn refaulted_bytes(before: &MemoryStat, now: &MemoryStat) -> u64 {
    let pages = |s: &MemoryStat| {
        s.workingset_refault_anon
            .saturating_add(s.workingset_refault_file)
    };
    pages(now)
        .saturating_sub(pages(before))
        .saturating_mul(decide::PAGE)
}

fn provisional(current: u64, high: Limit, low: Limit) -> CgroupSample {
    CgroupSample {
        current,
        stat: MemoryStat {
            anon: current,
            ..MemoryStat::default()
        },
        pressure: None,
        events: MemoryEvents::default(),
        swap_current: None,
        swap_max: Some(Limit::Bytes(0)),
        high,
        low,
        min: Limit::Bytes(0),
        max: Limit::Max,
    }
}

/// Writes one cgroup's limits, high before low before reclaim; runs on the blocking pool.
fn apply(fs: &CgroupFs, path: &str, writes: Writes, stopping: &AtomicBool) -> JobResult {
    let mut r = JobResult {
        path: path.to_owned(),
        writes: Writes::default(),
        gone: false,
        reclaim_unsupported: false,
        errors: Vec::new(),
    };
    let done = |res: Result<Written, memweight_cgroupfs::Error>, r: &mut JobResult| match res {
        Ok(Written::Done) => true,
        Ok(Written::Gone) => {
            r.gone = true;
            false
        }
        Err(e) => {
            r.errors.push(e.to_string());
            false
        }
    };
    if let Some(h) = writes.high {
        if stopping.load(Ordering::SeqCst) {
            return r;
        }
        if done(fs.write_high(path, h), &mut r) {
            r.writes.high = Some(h);
        }
    }
    if let Some(l) = writes.low
        && !r.gone
    {
        if stopping.load(Ordering::SeqCst) {
            return r;
        }
        if done(fs.write_low(path, l), &mut r) {
            r.writes.low = Some(l);
        }
    }
    if let Some(bytes) = writes.reclaim
        && !r.gone
        && !stopping.load(Ordering::SeqCst)
    {
        match fs.reclaim(path, bytes) {
            Ok(Reclaimed::Done | Reclaimed::Partial) => r.writes.reclaim = Some(bytes),
            Ok(Reclaimed::Gone) => r.gone = true,
            Ok(Reclaimed::Unsupported) => r.reclaim_unsupported = true,
            Err(e) => r.errors.push(e.to_string()),
        }
    }
    r
}

/// Writes a cgroup's original memory.high and memory.low back, if the cgroup at `path` is
/// still the one they were recorded for (`id`; `None`: recorded before ids were kept).
fn restore(fs: &CgroupFs, path: &str, o: &Originals, id: Option<u64>) -> Restored {
    match fs.id(path) {
        Ok(None) => return Restored::Gone,
        Ok(Some(now)) if id.is_some_and(|was| was != now) => return Restored::Replaced,
        Ok(Some(_)) => {}
        Err(e) => return Restored::Failed(e.to_string()),
    }
    // A memory.high raised above the original since it was recorded (by an operator, say
    // while the daemon was down) is the operator's and stays; the daemon only ever lowers it.
    let high = match read_limit(fs, path, "memory.high") {
        Ok(Some(now)) if limit_above(now, o.high) => None,
        _ => Some(fs.write_high(path, o.high)),
    };
    for res in [high, Some(fs.write_low(path, o.low))]
        .into_iter()
        .flatten()
    {
        match res {
            Ok(Written::Done) => {}
            Ok(Written::Gone) => return Restored::Gone,
            Err(e) => return Restored::Failed(e.to_string()),
        }
    }
    Restored::Done
}

/// Whether two limits are the same to the kernel, which keeps them in whole pages (a value
/// written is read back rounded down to a page).
fn same_pages(a: Limit, b: Limit) -> bool {
    match (a, b) {
        (Limit::Bytes(x), Limit::Bytes(y)) => x / decide::PAGE == y / decide::PAGE,
        (x, y) => x == y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_own_cgroup_its_ancestors_and_init_scope_are_forbidden() {
        let root = std::path::Path::new("/sys/fs/cgroup");
        let got = forbidden_cgroups(Some("0::/system.slice/memweightd.service\n"), root);
        let want: BTreeSet<String> = [
            "init.scope",
            "system.slice",
            "system.slice/memweightd.service",
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(got, want);
        // The root cgroup itself is never a managed path; cgroup v1 lines are ignored.
        let got = forbidden_cgroups(Some("1:name=systemd:/x\n0::/\n"), root);
        assert_eq!(got, BTreeSet::from(["init.scope".to_owned()]));
        // Another root (a test tree): only init.scope.
        let got = forbidden_cgroups(Some("0::/lab/a\n"), std::path::Path::new("/tmp/t"));
        assert_eq!(got, BTreeSet::from(["init.scope".to_owned()]));
        // A root below the mount: paths relative to it.
        let got = forbidden_cgroups(
            Some("0::/lab/daemon\n"),
            std::path::Path::new("/sys/fs/cgroup/lab"),
        );
        assert!(got.contains("daemon") && !got.contains("lab"), "{got:?}");
        assert_eq!(forbidden_cgroups(None, root).len(), 1);
    }

    #[test]
    fn refaults_are_counted_in_bytes_of_both_kinds() {
        let before = MemoryStat {
            workingset_refault_anon: 100,
            workingset_refault_file: 20,
            ..MemoryStat::default()
        };
        let now = MemoryStat {
            workingset_refault_anon: 356,
            workingset_refault_file: 20,
            ..MemoryStat::default()
        };
        assert_eq!(refaulted_bytes(&before, &now), 1 << 20, "256 pages");
        assert_eq!(refaulted_bytes(&now, &before), 0, "counters reset: nothing");
    }

    #[test]
    fn ancestors_get_the_sum_of_their_descendants() {
        let m = 4 << 20;
        let got = ancestor_lows(&[("a/b/c1", m), ("a/b/c2", 2 * m), ("a/x", m + 1), ("top", m)]);
        let want: BTreeMap<String, u64> = [("a".to_owned(), 5 * m), ("a/b".to_owned(), 3 * m)]
            .into_iter()
            .collect();
        assert_eq!(got, want);
    }
}
