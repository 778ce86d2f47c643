//! The control loop's state and one tick: discover, sample, compute, enforce.
//!
//! [`Controller`] is the single owner of the daemon's state. `main` calls [`Controller::tick`]
//! on a timer and [`Controller::release_all`] on shutdown; everything else (the socket, the
//! metrics endpoint) reads the [`TickReport`] it publishes. Writes that may block in kernel
//! reclaim run on tokio's blocking pool, one job per cgroup, so a slow cgroup never stalls the
//! others: a cgroup whose previous job is still running is skipped until it finishes.
//!
//! The tick lives here; each of its jobs has a room of its own:
//!
//! * `membership`: which cgroups the rules name, each one's settings resolved once per tick
//!   (rule < container label < override), adoption, release, overrides of gone cgroups.
//! * `sampling`: the kernel's files read, cheaply for steady cgroups; the watermarks.
//! * [`crate::ledger`]: every original limit, on disk before any write (not a room of the
//!   controller: it does no I/O of its own and is tested alone).
//! * `jobs`: the writes — one blocking job per cgroup, restores of recorded originals,
//!   the ancestors' `memory.low`, the release at shutdown.
//! * `report`: the [`TickReport`], a pure function of the step and the samples.

mod jobs;
mod membership;
mod report;
mod sampling;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memweight_cgroupfs::{CgroupFs, CgroupSample, HostSample, ProcFs, Watermarks};
use memweight_proto::ctl::CgroupState;
use serde::Serialize;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::capacity::{Carry, REACH_HOLD};
use crate::config::{CapacityMode, Config, Rules, Settings};
use crate::containers::{self, Containers, Snapshot};
use crate::ledger::{Ledger, Saving, Ticket};
use crate::outside::Outside;
use crate::state::{Orphans, Override, StateStore};
use crate::state_writer::StateWriter;
use crate::step::{self, Law, Row, Step, Trim};

use jobs::JobResult;
pub use membership::{Found, Resolved};
use membership::{Wanted, forbidden_cgroups, no_memory_controller};
pub use report::{CgroupReport, ClampedLabel, TickReport};
use sampling::Sampled;

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

/// One managed cgroup, as far as membership and sampling go; its originals are the
/// [`Ledger`]'s.
#[derive(Debug, Clone)]
struct Managed {
    settings: Settings,
    reclaim_supported: bool,
    /// The last full sample (all ten files) and the tick it was taken at; reused, with
    /// `memory.current` read afresh, while the cgroup is steady ([`Controller::sample_cheap`]).
    last: Option<Box<CgroupSample>>,
    /// Bytes it faulted back (`workingset_refault_*`) between consecutive full samples, the
    /// newest first: `[0]` between its last two, kept while its sample is reused; the law
    /// judges whether it reaches for memory on all of them ([`Managed::refaulted_lately`]).
    refaults: [Refaults; REACH_HOLD],
    /// The next tick must take a full sample: the daemon wrote to the cgroup.
    refresh: bool,
    /// Its trim, carried from one tick's law to the next ([`step::CgroupStep::trim`]).
    trim: Trim,
    /// Where the last tick's memory.reclaim took its usage ([`crate::decide::Writes::mark`]):
    /// the passes between ticks take it back there ([`Controller::reclaim_pass`]).
    mark: Option<u64>,
    /// The last tick's writes, decided while the cgroup's previous job was still running:
    /// the first pass that finds it done starts them (their `memory.reclaim` taken from the
    /// usage then), and the next tick replaces them.
    pending: Option<crate::decide::Writes>,
}

impl Managed {
    /// Bytes it faulted back between its last two full samples.
    fn refaulted(&self) -> u64 {
        self.refaults[0].bytes
    }

    /// The most it faulted back between two consecutive full samples among its last
    /// [`REACH_HOLD`].
    fn refaulted_lately(&self) -> u64 {
        self.refaults.iter().map(|r| r.bytes).max().unwrap_or(0)
    }

    /// The most file pages (bytes) it faulted back between two consecutive full samples among
    /// its last [`REACH_HOLD`].
    fn refaulted_file_lately(&self) -> u64 {
        self.refaults.iter().map(|r| r.file).max().unwrap_or(0)
    }

    /// Records a full sample's refaults (`None`: its first full sample, nothing to compare).
    fn record_refaults(&mut self, refaults: Option<Refaults>) {
        match refaults {
            Some(r) => {
                self.refaults.rotate_right(1);
                self.refaults[0] = r;
            }
            None => self.refaults = [Refaults::default(); REACH_HOLD],
        }
    }
}

/// What a cgroup faulted back between two full samples (`workingset_refault_*`), bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Refaults {
    /// Both kinds.
    bytes: u64,
    /// Of them, file pages: what it lost of those is counted nowhere (anonymous memory it
    /// lost is in its swap).
    file: u64,
}

impl Drop for Controller {
    /// A controller dropped without [`Controller::release_all`] (a panic unwinding through the
    /// loop) tells its write jobs still in the kernel to make no further write, so that the
    /// restore that follows is not undone by them.
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
    }
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

/// How long the daemon holds nothing while the container engine has not answered once
/// ([`Controller::start_containers`]): podman's socket-activated API service took 23 s to
/// start on the host guest under a balloon (6.12, 2026-11-27).
pub const ENGINE_FIRST_ANSWER: Duration = Duration::from_secs(60);

/// The daemon's state and its control loop.
pub struct Controller {
    cfg: Config,
    rules: Rules,
    fs: Arc<CgroupFs>,
    /// How stalled the cgroups beside the managed set are (`kernel` capacity).
    outside: Outside,
    proc: ProcFs,
    /// Every original (managed cgroups and ancestors), the overrides, and their copy on disk.
    ledger: Ledger,
    /// The managed cgroups: the ledger holds an entry for each, by the same path.
    managed: BTreeMap<String, Managed>,
    jobs: BTreeMap<String, JoinHandle<JobResult>>,
    warned: BTreeSet<String>,
    /// The capacity's state from the last tick (PSI cut, held pool).
    carry: Carry,
    /// The kernel's watermarks (Σ over its zones, bytes) and the tick they were read at: read
    /// again every [`sampling::WATERMARKS_EVERY`] ticks (they move only with sysctls and
    /// hotplug).
    watermarks: Option<(Watermarks, u64)>,
    /// Whether the kernel reclaims with the multi-gen LRU and the tick it was read at (`kernel`
    /// mode; read again every [`sampling::WATERMARKS_EVERY`] ticks: it is a run-time switch).
    multi_gen_lru: Option<(bool, u64)>,
    stopping: Arc<AtomicBool>,
    ticks: u64,
    counters: Counters,
    last: Option<Arc<TickReport>>,
    containers: Option<Containers>,
    snap: Arc<Snapshot>,
    /// Until the container engine first answers (or this deadline passes), nothing is held:
    /// the weights in the containers' labels and annotations are not known yet.
    engine_wait: Option<Instant>,
    /// Why this tick writes nothing (a dry run, the wait for the engine's first answer), or
    /// `None`: it writes ([`Controller::enforcing`]).
    idle: Option<CgroupState>,
    /// A digest of the container ids among the cgroups the last tick wanted: when it changes,
    /// the container engine is asked for a fresh list ([`Containers::ask`]).
    container_ids: u64,
    /// Overrides of container cgroups that are gone, kept while the container may restart.
    orphans: Orphans,
    /// Cgroups no rule may make the daemon manage: its own cgroup and every ancestor of it
    /// (throttling them would throttle the daemon), and `init.scope` (PID 1).
    forbidden: BTreeSet<String>,
}

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
        let store = state_writer(&cfg.state_dir)?;
        let boot_id = std::fs::read_to_string(cfg.proc_root.join("sys/kernel/random/boot_id"))
            .ok()
            .map(|b| b.trim().to_owned());
        let ledger = Ledger::open(store, boot_id)?;
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
            ledger,
            managed: BTreeMap::new(),
            jobs: BTreeMap::new(),
            warned: BTreeSet::new(),
            carry: Carry::default(),
            watermarks: None,
            multi_gen_lru: None,
            stopping: Arc::new(AtomicBool::new(false)),
            ticks: 0,
            counters: Counters::default(),
            last: None,
            containers: None,
            snap: Arc::new(Snapshot::default()),
            engine_wait: None,
            idle: Some(CgroupState::DryRun),
            container_ids: 0,
            orphans: Orphans::default(),
            forbidden: BTreeSet::new(),
        }
        .with_forbidden())
    }

    /// Works out [`Controller::forbidden`] from `/proc/self/cgroup` (under `proc_root`); in a
    /// container with a cgroup namespace of its own, from the pid in the host's tree
    /// ([`crate::cgroupns`]).
    fn with_forbidden(mut self) -> Self {
        let own = std::fs::read_to_string(self.cfg.proc_root.join("self/cgroup")).ok();
        self.forbidden = forbidden_cgroups(own.as_deref(), &self.cfg.cgroup_root);
        if let Some(path) = own.as_deref().and_then(crate::outside::own_cgroup) {
            // The host's cgroup namespace, its tree mounted at another cgroup_root (a hostPath
            // at /host/sys/fs/cgroup): the path is the host's, relative to that root too.
            self.forbidden
                .extend(crate::cgroupns::with_ancestors(&path));
        } else if own
            .as_deref()
            .is_some_and(crate::cgroupns::at_namespace_root)
        {
            match crate::cgroupns::find_own(&self.cfg.cgroup_root, std::process::id()) {
                Some(rel) if !rel.is_empty() => {
                    info!(cgroup = %rel,
                        "running in a cgroup namespace; found the daemon's own cgroup in the \
                         host's tree: it and its ancestors are never managed");
                    self.forbidden.extend(crate::cgroupns::with_ancestors(&rel));
                }
                Some(_) => {}
                None => warn!(root = %self.cfg.cgroup_root.display(),
                    "running in a cgroup namespace and the daemon's own cgroup is not found \
                     under cgroup_root: a rule that matches its container's cgroup would throttle \
                     the daemon; mount the host's cgroup tree (hostPath /sys/fs/cgroup) at \
                     cgroup_root"),
            }
        }
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
    ///
    /// Until the engine first answers, at most [`ENGINE_FIRST_ANSWER`], the daemon holds
    /// nothing (as in a dry run): started again under pressure (host-kube, 6.12, 2026-11-27)
    /// it split the pool equally by the rules' weight while podman's API service took 23 s to
    /// start, and the weight-3 pod was held at a third of what it held.
    pub fn start_containers(&mut self) {
        let cfg = &self.cfg.containers;
        if cfg.enabled && !containers::engine_sockets(cfg).is_empty() {
            self.engine_wait = Some(Instant::now() + ENGINE_FIRST_ANSWER);
        }
        self.containers = Some(containers::spawn(cfg.clone()));
    }

    /// Whether the daemon still waits for the container engine's first answer; says once
    /// when the wait begins and when it ends.
    fn waiting_for_engine(&mut self) -> bool {
        let Some(until) = self.engine_wait else {
            return false;
        };
        if self.snap.socket.is_some() {
            info!("the container engine answered: holding by the weights of labels and rules");
            self.engine_wait = None;
            return false;
        }
        if Instant::now() >= until {
            warn!(
                waited_s = ENGINE_FIRST_ANSWER.as_secs(),
                "the container engine has not answered: holding by the rules' weights until it \
                 does (is its API socket up? `systemctl status podman.socket`)"
            );
            self.engine_wait = None;
            return false;
        }
        self.warn_once("engine-wait", || {
            info!(
                at_most_s = ENGINE_FIRST_ANSWER.as_secs(),
                "waiting for the container engine's first answer before holding anything: \
                 the weights in containers' labels and annotations are not known yet"
            );
        });
        true
    }

    /// Whether this tick writes: `enforce`, and not waiting for the engine's first answer.
    fn enforcing(&self) -> bool {
        self.idle.is_none()
    }

    /// The container snapshot the last tick used.
    #[must_use]
    pub fn container_snapshot(&self) -> &Snapshot {
        &self.snap
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
        self.ledger.overrides().get(path).copied()
    }

    /// All runtime overrides, by cgroup path.
    pub fn overrides(&self) -> impl Iterator<Item = (&str, &Override)> {
        self.ledger.overrides().iter().map(|(p, o)| (p.as_str(), o))
    }

    /// Whether `path` is managed now.
    #[must_use]
    pub fn is_managed(&self, path: &str) -> bool {
        self.managed.contains_key(path)
    }

    /// Sets a runtime override and hands its save in; it is in force from the first tick after
    /// it is on disk ([`Controller::settle_overrides`] says when).
    ///
    /// A save that fails changes nothing: the previous override (or none) stays in force.
    pub fn set_override(&mut self, path: &str, ov: Override) -> Result<Saving, ControlError> {
        Ok(self.ledger.set_override(path, ov, self.cfg.enforce)?)
    }

    /// Removes a runtime override and hands its save in; returns whether there was one.
    ///
    /// A save that fails changes nothing: the override stays in force.
    pub fn unset_override(&mut self, path: &str) -> Result<(bool, Saving), ControlError> {
        Ok(self.ledger.unset_override(path, self.cfg.enforce)?)
    }

    /// Whether a `set` or `unset` waits for its save.
    #[must_use]
    pub fn saving_overrides(&self) -> bool {
        self.ledger.saving()
    }

    /// The `set`s and `unset`s whose save ended since the last call, and how
    /// ([`Ledger::settle`](crate::ledger::Ledger::settle)).
    pub fn settle_overrides(&mut self) -> Vec<(Ticket, Result<(), String>)> {
        self.ledger.settle()
    }

    /// Replaces the configuration (reload). Cgroups that stay managed keep their originals;
    /// those no longer named are released at the next tick. Switching to `enforce = false`
    /// restores, at the next tick, every limit the daemon wrote.
    pub fn reload(&mut self, cfg: Config, rules: Rules) -> Result<(), ControlError> {
        let fs = CgroupFs::new(&cfg.cgroup_root)?;
        fs.check_v2()?;
        let moved = if cfg.state_dir == self.cfg.state_dir {
            None
        } else {
            Some(state_writer(&cfg.state_dir)?)
        };
        if cfg.cgroup_root != self.cfg.cgroup_root {
            // A new root makes the recorded paths meaningless: let go of everything first.
            self.release_all_now();
            self.fs = Arc::new(fs);
        }
        let own = std::fs::read_to_string(cfg.proc_root.join("self/cgroup")).ok();
        self.forbidden = forbidden_cgroups(own.as_deref(), &cfg.cgroup_root);
        self.proc = ProcFs::new(&cfg.proc_root);
        self.multi_gen_lru = None;
        if let Some(disk) = moved {
            // Everything recorded must be in the file the next start will read.
            self.ledger.move_to(disk);
        }
        self.cfg = cfg;
        self.rules = rules;
        if let Some(c) = &self.containers {
            c.reconfigure(&self.cfg.containers);
        }
        self.warned.clear();
        Ok(())
    }

    /// Asks the container engine for a fresh list when a container's cgroup appeared or went
    /// away since the last tick, or one is not in the list yet (the engine is not polled: see
    /// [`containers`]).
    fn ask_engine_on_change(&mut self, wanted: &[Wanted]) {
        let Some(c) = &self.containers else {
            return;
        };
        let mut digest = std::hash::DefaultHasher::new();
        let mut unknown = false;
        for id in wanted
            .iter()
            .filter_map(|w| containers::container_id(&w.path))
        {
            std::hash::Hash::hash(id, &mut digest);
            unknown |= !self.snap.containers.contains_key(id);
        }
        let ids = std::hash::Hasher::finish(&digest);
        if unknown || ids != self.container_ids {
            c.ask();
        }
        self.container_ids = ids;
    }

    fn warn_once(&mut self, key: &str, f: impl FnOnce()) {
        if self.warned.insert(key.to_owned()) {
            f();
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
        self.idle = if !self.cfg.enforce {
            Some(CgroupState::DryRun)
        } else if self.waiting_for_engine() {
            Some(CgroupState::EngineWait)
        } else {
            None
        };

        // Discover: release cgroups no longer named.
        let wanted = self.discover();
        self.ask_engine_on_change(&wanted);
        self.release_unwanted(&wanted);
        if !self.enforcing() {
            // A dry run holds nothing: what an enforcing run wrote is put back below.
            self.ledger.hold_nothing();
        }

        // Sample; adopt new cgroups; notice operators' changes.
        let rows = self.sample_wanted(&wanted)?;

        // Record: put back what is not held, save new originals before any write.
        let wanted_set: BTreeSet<&str> = wanted.iter().map(|w| w.path.as_str()).collect();
        self.restore_recorded(&wanted_set, None);
        self.drop_orphan_overrides();
        self.ledger.record(self.enforcing());

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

    /// The law on this tick's rows, the report of it, then the writes: one job per cgroup
    /// the ledger lets the daemon write, and the ancestors' `memory.low`.
    async fn compute_and_enforce(&mut self, rows: &[Sampled<'_>], host: &HostSample) -> TickReport {
        let watermarks = self.watermarks();
        let multi_gen_lru = self.multi_gen_lru();
        // Only the work-conserving law reads the cgroups beside the managed set.
        let outside = if self.cfg.capacity.mode == CapacityMode::Kernel {
            self.outside.sample(
                &self.fs,
                self.managed.keys().map(String::as_str),
                Instant::now(),
            )
        } else {
            None
        };
        // Every row is managed (sampling adopts what it finds); one that is not is left out.
        let (rows, law_rows): (Vec<&Sampled<'_>>, Vec<Row<'_>>) = rows
            .iter()
            .filter_map(|row| {
                let p = &row.wanted.path;
                let m = self.managed.get(p)?;
                let h = self.ledger.holding(p)?;
                let law_row = Row {
                    name: p.as_str(),
                    settings: row.wanted.settings,
                    sample: &row.sample,
                    originals: h.originals(),
                    reclaim_supported: m.reclaim_supported,
                    provisional: m.last.is_none(),
                    refaulted: m.refaulted(),
                    refaulted_lately: m.refaulted_lately(),
                    refaulted_file_lately: m.refaulted_file_lately(),
                    trim: m.trim,
                };
                Some((row, law_row))
            })
            .unzip();
        let law = Law {
            capacity: &self.cfg.capacity,
            min_floor: self.cfg.min_floor.bytes(),
            max_step: self.cfg.max_step,
            reclaim: self.cfg.reclaim,
            guard: self.cfg.guard,
            reclaim_passes: self.cfg.reclaim_passes,
            idle_tax: self.cfg.idle_tax,
        };
        let host = HostSample {
            multi_gen_lru,
            ..*host
        };
        let step: Step = step::step(
            &law,
            &law_rows,
            &host,
            watermarks,
            outside.as_ref().map(|s| s.pct),
            self.carry,
        );
        self.carry = step.next;
        for (row, c) in rows.iter().zip(&step.cgroups) {
            if let Some(m) = self.managed.get_mut(&row.wanted.path) {
                m.trim = c.trim;
                m.mark = c.writes.mark;
            }
        }
        if let Some(e) = &step.rejected {
            // Inputs are validated by the config and the protocol; this is a bug.
            error!(error = %e, "policy rejected its inputs; no writes this tick");
        }

        // The report, from the step and the samples, before any job is spawned.
        let states: Vec<Option<CgroupState>> = rows
            .iter()
            .map(|row| {
                let p = &row.wanted.path;
                let m = self.managed.get(p)?;
                let h = self.ledger.holding(p)?;
                Some(report::cgroup_state(
                    self.idle,
                    h.recorded(),
                    self.jobs.contains_key(p),
                    m.last.is_none(),
                ))
            })
            .collect();
        let lines: Vec<report::Line<'_>> = rows
            .iter()
            .zip(&states)
            .enumerate()
            .filter_map(|(index, (row, state))| {
                let p = &row.wanted.path;
                Some(report::Line {
                    index,
                    wanted: row.wanted,
                    sample: &row.sample,
                    state: (*state)?,
                    overridden: self.ledger.override_in_force(p).is_some(),
                    holding: self.ledger.holding(p)?,
                    refaulted: self.managed.get(p)?.refaulted(),
                })
            })
            .collect();
        let report = report::build(
            self.ticks,
            self.idle,
            &step,
            &host,
            outside.as_ref(),
            &lines,
        );
        drop(lines);

        self.spawn_jobs(&rows, &step, &states);
        // Give quick writes a chance to land within this tick; slow ones are picked up later.
        self.collect_jobs(self.cfg.tick.0 / 2).await;
        if self.enforcing() && self.cfg.protect_ancestors {
            self.protect_ancestors(&step.ancestors);
        } else if self.ledger.has_ancestors() {
            // Dry run, or protect_ancestors turned off by a reload: put the ancestors back.
            self.protect_ancestors(&BTreeMap::new());
        }
        report
    }
}

/// The state file in `dir`, written by its own thread ([`StateWriter`]).
fn state_writer(dir: &std::path::Path) -> Result<Box<dyn crate::ledger::Disk>, ControlError> {
    let store = StateStore::new(dir);
    let path = store.path();
    let writer = StateWriter::spawn(store)
        .map_err(|source| crate::state::StateError::Io { path, source })?;
    Ok(Box::new(writer))
}
