//! What the kernel's files say this tick: each wanted cgroup sampled (cheaply while it is
//! steady), new ones adopted and the others reconciled with the ledger on the way, vanished
//! ones forgotten; and the kernel's watermarks, read once a minute.

use std::sync::atomic::Ordering;

use memweight_cgroupfs::{CgroupSample, Limit, MemoryEvents, MemoryStat, Watermarks};
use tracing::{error, info, warn};

use super::membership::Wanted;
use super::{ControlError, Controller, Refaults, no_memory_controller};
use crate::decide;
use crate::step::{effective_guard, held};

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
pub(super) const WATERMARKS_EVERY: u64 = 60;

/// One wanted cgroup as sampled this tick.
#[derive(Debug)]
pub(super) struct Sampled<'w> {
    /// The cgroup and its settings.
    pub wanted: &'w Wanted,
    /// What its files say.
    pub sample: CgroupSample,
}

impl Controller {
    /// Samples every wanted cgroup; adopts new ones and reconciles the others with the
    /// ledger (operators' changes); forgets those that vanished. Ends early, with
    /// [`ControlError::Stopping`], when a stop is asked for.
    pub(super) fn sample_wanted<'w>(
        &mut self,
        wanted: &'w [Wanted],
    ) -> Result<Vec<Sampled<'w>>, ControlError> {
        let mut rows: Vec<Sampled<'w>> = Vec::with_capacity(wanted.len());
        let mut vanished = Vec::new();
        let mut adopted: Vec<String> = Vec::new();
        let mut first_full = FIRST_FULL_PER_TICK;
        for w in wanted {
            let path = &w.path;
            if self.stopping.load(Ordering::Relaxed) {
                return Err(ControlError::Stopping);
            }
            match self.sample_cheap(path, &mut first_full) {
                Ok(Some((s, reused))) => {
                    if !self.managed.contains_key(path) {
                        adopted.push(path.clone());
                    }
                    self.reconcile(path, w.settings, &s);
                    if let Some(m) = self.managed.get_mut(path) {
                        // Reused: the refaults between the last two full samples stand.
                        if !reused {
                            let refaulted =
                                m.last.as_ref().map(|last| refaults(&last.stat, &s.stat));
                            m.record_refaults(refaulted);
                            // Taken while a write job runs, it may be mid-reclaim: sample
                            // again.
                            m.last = Some(Box::new(s.clone()));
                            m.refresh = self.jobs.contains_key(path);
                        }
                    }
                    rows.push(Sampled {
                        wanted: w,
                        sample: s,
                    });
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
                if let (Some(m), Some(h)) = (self.managed.get(p), self.ledger.holding(p)) {
                    let o = h.originals();
                    info!(cgroup = %p, weight = m.settings.weight, original_high = %o.high,
                        original_low = %o.low, "adopted cgroup");
                }
            }
        }
        Ok(rows)
    }

    /// Samples one cgroup: all ten files, or — for a managed cgroup that is steady (its
    /// `memory.current` within [`STEADY_BYTES`] or 1/64 of its last full sample, not held at
    /// its `memory.high`, nothing written to it since, nothing faulted back in its last
    /// [`REACH_HOLD`](crate::capacity::REACH_HOLD) full samples, not due for its periodic full
    /// sample) — `memory.current`,
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
            // Faulted memory back lately: sampled in full every tick, so that the law's
            // hold on it ends REACH_HOLD ticks after its last burst, not REACH_HOLD periodic
            // samples (up to 30 s) later (issue 19, host-kube on 6.1).
            && m.refaulted_lately() == 0
            && !self.jobs.contains_key(path)
            && !self
                .ticks
                .wrapping_add(self.ledger.holding(path).and_then(|h| h.id()).unwrap_or(0))
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

    /// Whether the kernel reclaims with the multi-gen LRU (`kernel` mode: the law's headroom
    /// while the kernel reclaims depends on it), read at most every [`WATERMARKS_EVERY`]
    /// ticks; `true` (warned once) when the switch cannot be read, as if it were on: the
    /// headroom is then what it is there.
    pub(super) fn multi_gen_lru(&mut self) -> bool {
        if self.cfg.capacity.mode != crate::config::CapacityMode::Kernel {
            return true;
        }
        if let Some((on, at)) = self.multi_gen_lru
            && self.ticks.saturating_sub(at) < WATERMARKS_EVERY
        {
            return on;
        }
        let on = match memweight_cgroupfs::multi_gen_lru(&self.cfg.sys_root) {
            Ok(on) => {
                if self.multi_gen_lru.is_none_or(|(was, _)| was != on) {
                    info!(
                        multi_gen_lru = on,
                        "read which LRU the kernel reclaims with"
                    );
                }
                self.warned.remove("lru_gen");
                on
            }
            Err(e) => {
                self.warn_once("lru_gen", || {
                    warn!(error = %e, "cannot read whether the kernel reclaims with the \
                        multi-gen LRU; taken as on (free memory counts only while the kernel's \
                        reclaim is idle) until it can be read");
                });
                true
            }
        };
        self.multi_gen_lru = Some((on, self.ticks));
        on
    }

    /// The kernel's watermarks, from `/proc/zoneinfo` read at most every [`WATERMARKS_EVERY`]
    /// ticks, when the reserve follows them; `None` (warned once) when they cannot be read.
    pub(super) fn watermarks(&mut self) -> Option<Watermarks> {
        if !matches!(
            self.cfg.capacity.reserve,
            crate::config::Reserve::Watermarks
        ) {
            return None;
        }
        if let Some((w, at)) = self.watermarks
            && self.ticks.saturating_sub(at) < WATERMARKS_EVERY
        {
            return Some(w);
        }
        match self.proc.watermarks() {
            Ok(w) => {
                if self
                    .watermarks
                    .is_none_or(|(was, _)| (was.min, was.high) != (w.min, w.high))
                {
                    info!(
                        min = w.min,
                        low = w.low,
                        high = w.high,
                        reserve = w.high.saturating_sub(w.min),
                        "kernel watermarks read: the reserve is their high - min band"
                    );
                }
                self.watermarks = Some((w, self.ticks));
                self.warned.remove("zoneinfo");
                Some(w)
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
}

/// What was faulted back between two `memory.stat` readings (`workingset_refault_anon` and
/// `workingset_refault_file`, pages, in bytes); 0 of a kind whose counter went backwards.
fn refaults(before: &MemoryStat, now: &MemoryStat) -> Refaults {
    let bytes = |pages: fn(&MemoryStat) -> u64| {
        pages(now)
            .saturating_sub(pages(before))
            .saturating_mul(decide::PAGE)
    };
    let anon = bytes(|s| s.workingset_refault_anon);
    let file = bytes(|s| s.workingset_refault_file);
    Refaults {
        bytes: anon.saturating_add(file),
        file,
    }
}

/// A stand-in for the full sample of a small cgroup seen for the first time, from its
/// `memory.current`, `memory.high` and `memory.low`: everything it holds counts as anonymous
/// memory with no swap room, so its floor is its usage and the policy leaves it as it is
/// until a full sample shows what it holds. No PSI, no events, no swap (shown as unknown).
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

#[cfg(test)]
mod tests {
    use super::super::{Managed, Trim};
    use super::*;
    use crate::capacity::REACH_HOLD;
    use crate::config::Settings;

    #[test]
    fn refaults_are_counted_in_bytes_of_both_kinds() {
        let before = MemoryStat {
            workingset_refault_anon: 100,
            workingset_refault_file: 20,
            ..MemoryStat::default()
        };
        let now = MemoryStat {
            workingset_refault_anon: 356,
            workingset_refault_file: 276,
            ..MemoryStat::default()
        };
        let want = Refaults {
            bytes: 2 << 20,
            file: 1 << 20,
        };
        assert_eq!(refaults(&before, &now), want, "256 pages of each kind");
        assert_eq!(
            refaults(&now, &before),
            Refaults::default(),
            "counters reset: nothing"
        );
    }

    /// The law judges whether a cgroup reaches on the refaults of its last
    /// [`REACH_HOLD`] full samples: a burst stays counted that long, then drops out.
    #[test]
    fn a_burst_of_refaults_is_held_for_reach_hold_samples() {
        let mut m = Managed {
            settings: Settings {
                weight: 1,
                min: 0,
                max: None,
            },
            reclaim_supported: true,
            last: None,
            refaults: [Refaults::default(); REACH_HOLD],
            refresh: false,
            trim: Trim::default(),
            mark: None,
            pending: None,
        };
        m.record_refaults(Some(Refaults {
            bytes: 4 << 20,
            file: 1 << 20,
        }));
        assert_eq!((m.refaulted(), m.refaulted_lately()), (4 << 20, 4 << 20));
        assert_eq!(m.refaulted_file_lately(), 1 << 20);
        for later in 1..REACH_HOLD {
            m.record_refaults(Some(Refaults::default()));
            assert_eq!(
                (m.refaulted(), m.refaulted_lately()),
                (0, 4 << 20),
                "{later} samples later"
            );
        }
        m.record_refaults(Some(Refaults::default()));
        assert_eq!(
            (m.refaulted_lately(), m.refaulted_file_lately()),
            (0, 0),
            "{REACH_HOLD} samples later: gone"
        );
        m.record_refaults(Some(Refaults {
            bytes: 1 << 20,
            file: 0,
        }));
        m.record_refaults(None);
        assert_eq!(m.refaulted_lately(), 0, "a first full sample starts afresh");
    }
}
