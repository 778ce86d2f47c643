//! What one tick saw and did, as published: the [`TickReport`].
//!
//! [`build`] is a pure function of the tick's [`Step`], the host sample and one [`Line`] per
//! managed cgroup (its sample, its resolved settings, what the ledger holds for it, the state
//! the controller found it in). It runs before any write job is spawned and does not depend on
//! them: `status`, `explain` and `/metrics` show what was decided, the counters what was done.

use memweight_cgroupfs::{CgroupSample, HostSample, Limit};
use memweight_proto::ctl::CgroupState;
use serde::Serialize;

use super::membership::Wanted;
use crate::ledger::Holding;
use crate::outside::Stall;
use crate::step::{CgroupStep, Step};

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

/// One managed cgroup's part in the report.
#[derive(Debug)]
pub(super) struct Line<'a> {
    /// Its row in the step (`plan.decisions`, `cgroups`).
    pub index: usize,
    /// Its path and settings, as resolved this tick.
    pub wanted: &'a Wanted,
    /// What was read this tick.
    pub sample: &'a CgroupSample,
    /// What the daemon may do with it this tick ([`cgroup_state`]).
    pub state: CgroupState,
    /// A runtime override applies.
    pub overridden: bool,
    /// Its originals.
    pub holding: &'a Holding,
    /// Bytes faulted back between its last two full samples.
    pub refaulted: u64,
}

/// What the daemon may do with a managed cgroup this tick: nothing while it does not write
/// at all (`idle`: a dry run, or the wait for the container engine), nothing before its
/// originals are on disk (`recorded`), nothing while its last write job runs (`busy`); a
/// cgroup without a full sample yet (`provisional`) is new.
pub(super) fn cgroup_state(
    idle: Option<CgroupState>,
    recorded: bool,
    busy: bool,
    provisional: bool,
) -> CgroupState {
    if let Some(idle) = idle {
        idle
    } else if !recorded {
        // The originals could not be saved: nothing is written until they are.
        CgroupState::Pending
    } else if busy {
        CgroupState::Busy
    } else if provisional {
        // Seen this tick for the first time, among many: pinned at its usage until a
        // full sample (a later tick) shows what it holds.
        CgroupState::New
    } else {
        CgroupState::Ok
    }
}

/// The report of tick number `tick`; its duration is the caller's to fill in.
pub(super) fn build(
    tick: u64,
    idle: Option<CgroupState>,
    step: &Step,
    host: &HostSample,
    outside: Option<&Stall>,
    lines: &[Line<'_>],
) -> TickReport {
    let cap = &step.capacity;
    let plan = &step.plan;
    let mut reports = Vec::with_capacity(lines.len());
    let mut label_clamps = Vec::new();
    for line in lines {
        let Line {
            index,
            wanted,
            sample: s,
            state,
            overridden,
            holding,
            refaulted,
        } = *line;
        let path = &wanted.path;
        let d = &plan.decisions[index];
        let CgroupStep {
            floor,
            ceiling,
            writes,
            trim,
            ..
        } = step.cgroups[index];
        let resolved = wanted.resolved.as_ref();
        if let Some(r) = resolved
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
            weight: wanted.settings.weight,
            overridden,
            container: resolved.and_then(|r| r.container.clone()),
            source: resolved.map(|r| r.source.clone()),
            usage: s.current,
            expected: d.expected,
            exceed: d.exceed,
            target: d.target,
            entitlement: d.entitlement,
            floor,
            ceiling,
            trim: (trim.bytes != 0).then_some(trim.bytes),
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
            original_high: Some(holding.originals().high.to_string()),
            original_low: Some(holding.originals().low.to_string()),
            operator: holding.operator().map(str::to_owned),
            next_weight: None,
        });
    }
    TickReport {
        pool: memweight_proto::ctl::Pool {
            tick,
            capacity: cap.bytes,
            shortfall: cap.shortfall,
            psi_cut: cap.psi_cut,
            reserve: cap.reserve,
            own_stall: step.own_stall,
            guards: step.guards,
            held: cap.held,
            reclaiming: cap.reclaiming,
            enforcing: step.enforcing,
            yielding: cap.yielding,
            outside_stall: outside.map(|s| s.pct),
            outside_stall_by: outside.and_then(|s| s.by.clone()),
            multi_gen_lru: Some(host.multi_gen_lru),
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
            enforce: idle.is_none(),
            engine_wait: idle == Some(CgroupState::EngineWait),
            duration_us: 0,
        },
        cgroups: reports,
        label_clamps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `status` must say why a cgroup is not written: a dry run or the engine wait first,
    /// then originals not on disk (`pending`), then a write still running, and only then that
    /// it is new.
    #[test]
    fn regression_pending_is_shown_before_busy_and_new() {
        use CgroupState::{Busy, DryRun, EngineWait, New, Ok, Pending};
        let cases = [
            ((Some(DryRun), true, true, true), DryRun),
            ((Some(EngineWait), false, true, true), EngineWait),
            ((None, false, true, true), Pending),
            ((None, true, true, true), Busy),
            ((None, true, false, true), New),
            ((None, true, false, false), Ok),
        ];
        for ((idle, recorded, busy, provisional), want) in cases {
            assert_eq!(
                cgroup_state(idle, recorded, busy, provisional),
                want,
                "{idle:?} {recorded} {busy} {provisional}"
            );
        }
    }
}
