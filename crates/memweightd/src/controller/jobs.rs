//! The writes: the tick's decisions carried out on tokio's blocking pool, one job per cgroup;
//! recorded originals put back (released cgroups, a dry run, shutdown, `memweightd
//! --restore`); the ancestors' `memory.low`.
//!
//! What may be written is the [`crate::ledger::Ledger`]'s to say: a cgroup's limits only once
//! its originals are on disk ([`crate::ledger::Ledger::may_write`]), an ancestor's only once
//! its original is ([`crate::ledger::Ledger::raise_ancestors`]). This room does the I/O and
//! the counting, and tells the ledger what became of each write.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memweight_cgroupfs::{CgroupFs, Limit, Reclaimed, Written};
use memweight_proto::ctl::CgroupState;
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

use super::Controller;
use super::sampling::Sampled;
use crate::decide::{Originals, Writes, reclaim_slack};
use crate::interrupt::{Deadline, HIGH_WRITE_BUDGET};
use crate::ledger::Restored;
use crate::step::{CgroupStep, Step, limit_above};

/// Shutdown restores at most this long, so the whole stop fits systemd's `TimeoutStopSec=30`
/// with the waits for write jobs; what is left stays in the state file for the next start.
const RESTORE_BUDGET: Duration = Duration::from_secs(20);
/// A `memory.reclaim` write that takes this long is said in the debug log: until it ends, a
/// tick finds its cgroup `busy` and writes nothing to it.
const SLOW_RECLAIM: Duration = Duration::from_millis(500);
/// Restores between two progress lines in the log.
const PROGRESS_EVERY: usize = 1000;

/// The outcome of one cgroup's write job.
#[derive(Debug)]
pub(super) struct JobResult {
    path: String,
    writes: Writes,
    gone: bool,
    reclaim_unsupported: bool,
    errors: Vec<String>,
}

impl Controller {
    /// Starts one write job for each row with writes decided that the daemon may write now:
    /// enforcing, its originals on disk, no job of its own still running. `states` is each
    /// row's [`CgroupState`] (`None`: not managed, left out).
    pub(super) fn spawn_jobs(
        &mut self,
        rows: &[&Sampled<'_>],
        step: &Step,
        states: &[Option<CgroupState>],
    ) {
        for (i, row) in rows.iter().enumerate() {
            let Some(state) = states[i] else {
                continue;
            };
            let (path, s) = (&row.wanted.path, &row.sample);
            let d = &step.plan.decisions[i];
            let CgroupStep {
                ceiling, writes, ..
            } = step.cgroups[i];
            if !writes.is_empty() {
                debug!(cgroup = %path, usage = s.current, target = d.target, ceiling = ?ceiling,
                    high = ?writes.high.map(|h| h.to_string()), low = ?writes.low.map(|l| l.to_string()),
                    reclaim = ?writes.reclaim, %state, "decided writes");
            }
            let busy = self.jobs.contains_key(path);
            let due = self.enforcing() && self.ledger.may_write(path) && !writes.is_empty();
            if due && !busy {
                self.spawn_job(path, writes);
            }
            // Busy: the writes wait for the first pass that finds the job done. Skipped
            // instead, a cgroup whose reclaim outlasts a pass's spacing was never written to
            // by a tick: each pass started the next reclaim before the tick came (ci-converge
            // on 6.1, 2026-12-01: the weight-2 toucher's memory.high unchanged for 12 s, 15 %
            // over its share).
            if let Some(m) = self.managed.get_mut(path.as_str()) {
                m.pending = (due && busy).then_some(writes);
            }
        }
    }

    /// Starts `writes` on `path` as its blocking job (the caller checked that it may write
    /// there and that no job of its own runs), and has the next tick take a full sample of it.
    fn spawn_job(&mut self, path: &str, writes: Writes) {
        let fs = Arc::clone(&self.fs);
        let stopping = Arc::clone(&self.stopping);
        let p = path.to_owned();
        self.jobs.insert(
            path.to_owned(),
            tokio::task::spawn_blocking(move || apply(&fs, &p, writes, &stopping)),
        );
        if let Some(m) = self.managed.get_mut(path) {
            m.refresh = true;
        }
    }

    /// A pass between two ticks: each held cgroup whose usage regrew past the mark its last
    /// tick's memory.reclaim took it to (by more than [`reclaim_slack`]) is taken back there,
    /// one blocking job per cgroup as at a tick (none while its last job still runs). Only
    /// `memory.current` is read ([`CgroupFs::current`]); the limits are the tick's to decide.
    ///
    /// Why: a held cgroup refaults between ticks, and one that regrows more in a tick than its
    /// guard reaches its `memory.high` before the next and reclaims its own pages in the
    /// kernel's throttle for the rest of the tick; passes between ticks do that reclaim in
    /// the daemon's context, as kswapd would.
    pub async fn reclaim_pass(&mut self) {
        self.collect_jobs(Duration::ZERO).await;
        if !self.enforcing() {
            return;
        }
        let mut due: Vec<(String, Writes)> = Vec::new();
        for (path, m) in &mut self.managed {
            if self.jobs.contains_key(path) || !self.ledger.may_write(path) {
                continue;
            }
            let pending = m.pending.take();
            let Some(mark) = m.mark.filter(|_| m.reclaim_supported) else {
                // A tick's writes that waited for a job: no memory.reclaim among them.
                if let Some(w) = pending {
                    due.push((path.clone(), w));
                }
                continue;
            };
            // Gone, or unreadable for a moment: the next tick sees to it.
            let Ok(Some(current)) = self.fs.current(path) else {
                continue;
            };
            let over = current.saturating_sub(mark);
            let reclaim = (over > reclaim_slack(current)).then_some(over);
            // A tick's writes that waited: its memory.reclaim is to the mark from the usage
            // now, not from the tick's (the job before took some of it).
            let writes = Writes {
                reclaim,
                ..pending.unwrap_or_default()
            };
            if !writes.is_empty() {
                due.push((path.clone(), writes));
            }
        }
        for (path, writes) in due {
            self.spawn_job(&path, writes);
        }
    }

    /// Takes in the jobs that finish within `wait` (all against one deadline); the others
    /// stay for a later tick.
    pub(super) async fn collect_jobs(&mut self, wait: Duration) {
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
            self.ledger.wrote(&r.path, r.writes.high, r.writes.low);
            if r.reclaim_unsupported {
                m.reclaim_supported = false;
                info!(cgroup = %r.path, "memory.reclaim not supported here; using memory.high alone");
            }
        }
        if r.gone {
            debug!(cgroup = %r.path, "cgroup vanished during a write");
        }
    }

    /// Puts back every recorded original whose cgroup the daemon does not hold (released,
    /// no longer named, left by an earlier run, or in a dry run), then the ledger forgets it.
    /// A restore that fails keeps the original, and is tried again at the next tick. Stops
    /// early (the rest stays recorded) once `deadline` has passed.
    pub(super) fn restore_recorded(&mut self, wanted: &BTreeSet<&str>, deadline: Option<Instant>) {
        let jobs = &self.jobs;
        let todo = self.ledger.restores_due(wanted, |p| jobs.contains_key(p));
        let total = todo.len();
        for (i, due) in todo.into_iter().enumerate() {
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
            let (path, orig) = (&due.path, due.originals);
            // Still holding its originals (never written, or written back): nothing to write.
            let outcome = if self.ledger.restore_is_noop(path) {
                Restored::Done
            } else {
                restore(&self.fs, path, &orig, due.id)
            };
            match &outcome {
                Restored::Done => {
                    debug!(cgroup = %path, high = %orig.high, low = %orig.low,
                        "original limits restored");
                    self.warned.remove(&format!("restore:{path}"));
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
                }
            }
            self.ledger.restored(&due, &outcome);
        }
        if total >= PROGRESS_EVERY {
            info!(total, "restoring original limits: done");
        }
        self.ledger.restores_done();
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
                let Some((o, id)) = self.ledger.take_released(&path) else {
                    continue;
                };
                match tokio::time::timeout_at(deadline, handle).await {
                    Ok(Ok(r)) if r.writes.high.is_none() && r.writes.low.is_none() => {}
                    Ok(Ok(_)) => {
                        if let Restored::Failed(e) = restore(&self.fs, &path, &o, id) {
                            error!(cgroup = %path, error = %e,
                                "could not restore after a late write; keeping the original \
                                 recorded");
                            self.ledger.keep(&path, o, id);
                        }
                    }
                    _ => {
                        // Still in the kernel: its write may land after this process is gone.
                        // Recorded, so the unit's ExecStopPost (or the next start) restores it.
                        error!(cgroup = %path,
                            "a write is still blocked in the kernel; keeping the original \
                             recorded for memweightd --restore");
                        self.ledger.keep(&path, o, id);
                    }
                }
            }
        }
        if !self.ledger.flush_durably() {
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
        if !self.ledger.flush_durably() {
            error!("could not record the restored state");
        }
        let (cgroups, ancestors) = self.ledger.recorded_counts();
        cgroups + ancestors
    }

    /// Lets go of every cgroup and restores every recorded original now.
    pub(super) fn release_all_now(&mut self) {
        let n = self.managed.len();
        let jobs = &self.jobs;
        self.ledger.release_all(|p| jobs.contains_key(p));
        self.managed.clear();
        self.counters.released += n as u64;
        let started = Instant::now();
        let total = self.ledger.recorded_counts().0;
        let in_flight: Vec<String> = self.jobs.keys().cloned().collect();
        // At shutdown a job still in the kernel has already set its value (the kernel sets
        // memory.high before it reclaims); restoring over it now is what we want.
        let jobs = std::mem::take(&mut self.jobs);
        self.restore_recorded(&BTreeSet::new(), Some(started + RESTORE_BUDGET));
        self.jobs = jobs;
        let left = self.ledger.recorded_counts().0;
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
    /// wanted get their original back (kept and retried if that fails). The ledger records
    /// the originals, in one save, before the first write.
    pub(super) fn protect_ancestors(&mut self, wanted: &BTreeMap<String, u64>) {
        for (a, low) in self.ledger.ancestors_to_restore(wanted) {
            match self.fs.write_low(&a, low) {
                Ok(_) => self.ledger.ancestor_restored(&a),
                Err(e) => {
                    self.counters.write_errors += 1;
                    warn!(cgroup = %a, error = %e,
                        "could not restore an ancestor's memory.low; trying again next tick");
                }
            }
        }
        let (fs, warned) = (&self.fs, &mut self.warned);
        let raise =
            self.ledger
                .raise_ancestors(wanted, |a| match read_limit(fs, a, "memory.low") {
                    Ok(found) => found,
                    Err(e) => {
                        if warned.insert(format!("anc:{a}")) {
                            warn!(cgroup = %a, error = %e, "cannot read an ancestor's memory.low");
                        }
                        None
                    }
                });
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

/// Writes one cgroup's limits, memory.reclaim before memory.high (see `decide`; after it where
/// the law says `high_first`, a step's descent) before memory.low; runs on the blocking pool.
fn apply(fs: &CgroupFs, path: &str, writes: Writes, stopping: &AtomicBool) -> JobResult {
    let mut r = JobResult {
        path: path.to_owned(),
        writes: Writes::default(),
        gone: false,
        reclaim_unsupported: false,
        errors: Vec::new(),
    };
    if writes.high_first {
        write_high(fs, path, writes.high, stopping, &mut r);
        reclaim(fs, path, writes.reclaim, stopping, &mut r);
    } else {
        reclaim(fs, path, writes.reclaim, stopping, &mut r);
        write_high(fs, path, writes.high, stopping, &mut r);
    }
    if let Some(l) = writes.low
        && !r.gone
        && !stopping.load(Ordering::SeqCst)
        && done(fs.write_low(path, l), &mut r)
    {
        r.writes.low = Some(l);
    }
    r
}

/// Whether a limit's write was made; a vanished cgroup or an error is noted in `r`.
fn done(res: Result<Written, memweight_cgroupfs::Error>, r: &mut JobResult) -> bool {
    match res {
        Ok(Written::Done) => true,
        Ok(Written::Gone) => {
            r.gone = true;
            false
        }
        Err(e) => {
            r.errors.push(e.to_string());
            false
        }
    }
}

/// [`apply`]'s `memory.reclaim` write, if any, unless the cgroup is gone or the daemon stops.
fn reclaim(
    fs: &CgroupFs,
    path: &str,
    bytes: Option<u64>,
    stopping: &AtomicBool,
    r: &mut JobResult,
) {
    let Some(bytes) = bytes else {
        return;
    };
    if r.gone || stopping.load(Ordering::SeqCst) {
        return;
    }
    let started = Instant::now();
    let outcome = fs.reclaim(path, bytes);
    if started.elapsed() >= SLOW_RECLAIM {
        debug!(cgroup = %path, bytes, ?outcome, elapsed_ms = started.elapsed().as_millis(),
            "memory.reclaim was slow: this cgroup's later writes wait for it");
    }
    match outcome {
        Ok(Reclaimed::Done | Reclaimed::Partial) => r.writes.reclaim = Some(bytes),
        Ok(Reclaimed::Gone) => r.gone = true,
        Ok(Reclaimed::Unsupported) => r.reclaim_unsupported = true,
        Err(e) => r.errors.push(e.to_string()),
    }
}

/// [`apply`]'s `memory.high` write, if any, unless the cgroup is gone or the daemon stops.
fn write_high(
    fs: &CgroupFs,
    path: &str,
    high: Option<Limit>,
    stopping: &AtomicBool,
    r: &mut JobResult,
) {
    let Some(h) = high else {
        return;
    };
    if r.gone || stopping.load(Ordering::SeqCst) {
        return;
    }
    // Bounded: below usage, the kernel reclaims in this thread until usage is under the
    // new limit (`crate::interrupt`); interrupted, the limit stays set.
    let started = Instant::now();
    let deadline = Deadline::arm(HIGH_WRITE_BUDGET);
    let written = fs.write_high(path, h);
    drop(deadline);
    if started.elapsed() >= HIGH_WRITE_BUDGET {
        debug!(cgroup = %path, high = %h, elapsed_ms = started.elapsed().as_millis(),
            "memory.high write reclaimed in the writer until its deadline");
    }
    if done(written, r) {
        r.writes.high = Some(h);
    }
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
