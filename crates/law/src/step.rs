//! The control law as one pure function: this tick's samples in; the pool, the policy's plan
//! and every cgroup's floor, ceiling and writes out.
//!
//! [`step`] absorbs what one tick decides — the capacity (reserve, PSI cut, the stall the
//! daemon's own throttling explains), the floors, the hidden demand of throttled cgroups, the
//! policy's water-fill and the per-cgroup [`decide::decide`] — and touches no file, clock or
//! log. The daemon's `Controller` (memweightd) keeps what is not the law: membership, the
//! originals on disk, write jobs, and which decided writes may be made this tick (dry run,
//! originals not yet saved, a write still landing). Tests drive the law through here alone
//! (the proptests at the bottom check the safety rules over arbitrary ticks).

use std::collections::BTreeMap;

use memweight_cgroupfs::{CgroupSample, HostSample, Limit, Watermarks};
use memweight_policy::{CgroupInput, Decision, Level, Plan};

use crate::capacity::{self, Capacity, Carry, HostView};
use crate::config::{Amount, CapacityConfig, CapacityMode, Settings};
use crate::decide::{self, Knobs, Observed, Originals, Writes};

/// The settings of the law, from the config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Law<'a> {
    /// `[capacity]`.
    pub capacity: &'a CapacityConfig,
    /// `min_floor`, bytes.
    pub min_floor: u64,
    /// `max_step`.
    pub max_step: Amount,
    /// `reclaim`: memory.reclaim may be used.
    pub reclaim: bool,
    /// `guard`: memory.high above the target while memory.reclaim moves usage.
    pub guard: Amount,
    /// `reclaim_passes`: memory.reclaim passes per tick on a held cgroup (at least 1).
    pub reclaim_passes: u32,
    /// `idle_tax`, percent: idle memory gives way before active memory (0: off).
    pub idle_tax: u8,
}

/// One managed cgroup as the law sees it this tick.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// Its path (the policy's name for it).
    pub name: &'a str,
    /// Weight, `min`, `max`.
    pub settings: Settings,
    /// This tick's sample.
    pub sample: &'a CgroupSample,
    /// Its own limits: never exceeded (`high`) nor undercut (`low`).
    pub originals: Originals,
    /// memory.reclaim works for it.
    pub reclaim_supported: bool,
    /// The sample is a stand-in (a new cgroup among many, not sampled in full yet): it is held
    /// at its usage and written nothing.
    pub provisional: bool,
    /// Bytes it faulted back between its last two full samples (`workingset_refault_*`; the
    /// same while its sample is reused): memory reclaim took that it still uses.
    pub refaulted: u64,
    /// The most it faulted back between two consecutive full samples among its last
    /// [`capacity::REACH_HOLD`] (at least `refaulted`): whether it reaches for memory is
    /// judged on this, so that its protection does not flip with the bursts of its refaults.
    pub refaulted_lately: u64,
    /// The most file pages (bytes) it faulted back between two consecutive full samples among
    /// the same [`capacity::REACH_HOLD`]: what it lacks of its file pages while it thrashes on
    /// them (`reach_bound`; what it lacks of its anonymous memory is in its swap).
    pub refaulted_file_lately: u64,
    /// Its trim from the last tick ([`CgroupStep::trim`]; the default for a new cgroup).
    pub trim: Trim,
}

/// What the law decided for one cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupStep {
    /// memory.high is never set below this.
    pub floor: u64,
    /// Where the policy wants memory.high (`None`: back to the original).
    pub ceiling: Option<u64>,
    /// The memory.low protection the law wants for it: its entitlement, or in `kernel` mode
    /// what step.rs's `protect` rule leaves of it. Its ancestors' memory.low is the sum of
    /// these below them ([`Step::ancestors`]).
    pub protect: u64,
    /// The writes that would move the cgroup there.
    pub writes: Writes,
    /// `kernel`, enforcing: where its ceiling is to sit next tick against its share
    /// ([`Trim`]). Carried by the caller into the next tick's [`Row::trim`].
    pub trim: Trim,
}

/// A held cgroup's trim (`kernel`, while the split is enforced), carried by the caller from
/// one tick to the next: how far its ceiling sits above (or below) its share, and the share
/// it was learnt at (`step::trims`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trim {
    /// Bytes its ceiling sits above its share (below it when negative): the integral of its
    /// share's error among the cgroups held with it; 0 when it is not held.
    pub bytes: i64,
    /// The share it is learnt at (0: not held to a share last tick). A share that moved more
    /// than a quarter from there is a step's: the trim starts again from 0 at the new one.
    pub share: u64,
    /// Since its share moved there, its usage has come within a trim's bound of it: from then
    /// on its errors are the kernel's bias; before, they were the step's.
    pub settled: bool,
}

/// What the law decided this tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The pool.
    pub capacity: Capacity,
    /// Bytes of the pool kept for the guards above the targets (see [`Law::guard`]): the
    /// policy shared `capacity − guards`.
    pub guards: u64,
    /// The capacity's state to carry to the next tick (PSI cut, held pool).
    pub next: Carry,
    /// The part of host PSI the daemon's own throttling explains (%).
    pub own_stall: f64,
    /// The policy's plan (targets, entitlements, reasons), one decision per row.
    pub plan: Plan,
    /// `None` when the policy rejected its inputs (a bug: nothing is written).
    pub rejected: Option<String>,
    /// The split is enforced beyond memory.low this tick: always in `reserve` and `fixed`; in
    /// `kernel` from when the host is short and a cgroup reaching for memory is below its
    /// share, until the host is no longer short and no held cgroup presses at its memory.high.
    pub enforcing: bool,
    /// Per row, in order.
    pub cgroups: Vec<CgroupStep>,
    /// The memory.low each ancestor of the rows needs so that their protection reaches them
    /// (memory.low is recursive: a child's protection is capped by its parent's): the sum of
    /// the `protect` of the rows below it, each rounded up to the kernel's granule; the root
    /// itself is not listed. Written only where the operator enables `protect_ancestors`.
    pub ancestors: BTreeMap<String, u64>,
}

/// One tick of the control law. `watermarks` are the kernel's (bytes, summed over its zones)
/// when the reserve follows them; `outside_stall` how stalled the cgroups beside the managed set were
/// ([`HostView::outside_stall`]); `carry` the capacity's state from the last tick.
#[must_use]
pub fn step(
    law: &Law<'_>,
    rows: &[Row<'_>],
    host: &HostSample,
    watermarks: Option<Watermarks>,
    outside_stall: Option<f64>,
    carry: Carry,
) -> Step {
    let total_usage: u64 = rows.iter().map(|r| r.sample.current).sum();
    // A cgroup held at its memory.high, and one held there by the daemon (below its own).
    let at_high = |r: &Row<'_>| {
        held(
            r.sample.current,
            r.sample.high,
            guard_of(law, r.reclaim_supported),
        )
    };
    let daemon_held = |r: &Row<'_>| limit_above(r.originals.high, r.sample.high) && at_high(r);
    let own_stall = rows
        .iter()
        .filter(|r| daemon_held(r))
        .filter_map(|r| r.sample.pressure.as_ref().map(|p| p.some.avg10))
        .fold(0.0, f64::max);
    let (cap, next) = capacity::capacity(
        law.capacity,
        &HostView {
            mem_total: host.mem_total,
            mem_available: host.mem_available,
            psi_some_avg10: host.psi.as_ref().map(|p| p.some.avg10),
            total_usage,
            watermark_band: watermarks.map(|w| w.high.saturating_sub(w.min)),
            free_above_min: watermarks.map(|w| host.mem_free.saturating_sub(w.min)),
            free_above_low: watermarks.map(|w| host.mem_free.saturating_sub(w.low)),
            own_stall,
            cgroups: rows.len(),
            reclaim_scanned: host.vmstat.map(|v| v.scanned()),
            outside_stall,
            multi_gen_lru: host.multi_gen_lru,
        },
        carry,
    );

    // `kernel` (work-conserving): the kernel's reclaim decides the total, so the pool is not
    // shrunk for the guards either, a cgroup stalling on memory or faulting it back reaches
    // for more than it holds, and the split is carried by memory.low alone.
    let conserving = law.capacity.mode == CapacityMode::Kernel;
    let observed: Vec<Observed> = rows.iter().map(|r| observe(r.sample)).collect();
    let floors: Vec<u64> = rows
        .iter()
        .zip(&observed)
        .map(|(r, o)| decide::floor(r.settings.min, o, host.swap_free, law.min_floor))
        .collect();
    let inputs: Vec<CgroupInput> = rows
        .iter()
        .zip(&floors)
        .map(|(r, f)| CgroupInput {
            name: r.name.to_owned(),
            usage: r.sample.current,
            weight: r.settings.weight,
            floor: *f,
            max: r.settings.max,
            // Active memory, for the idle tax: what the kernel's LRU keeps on its active
            // lists. A provisional sample has no memory.stat: all of it counts active.
            active: (law.idle_tax > 0 && !r.provisional).then(|| {
                r.sample
                    .stat
                    .active_anon
                    .saturating_add(r.sample.stat.active_file)
            }),
            demand: hidden_demand(r, cap.bytes, at_high(r), conserving),
        })
        .collect();
    let plan_for = |bytes: u64| match memweight_policy::plan_with_tax(bytes, &inputs, law.idle_tax)
    {
        Ok(p) => (p, None),
        Err(e) => (empty_plan(bytes, &inputs), Some(e.to_string())),
    };
    let (mut plan, mut rejected) = plan_for(cap.bytes);
    // Under pressure, the guards above the targets of the cgroups being held back must fit in
    // the pool too: a cgroup refaults into its guard between ticks, and guards taken out of
    // the reserve would put the host in its reclaim band (kswapd, every process's stall) for
    // the sake of the managed cgroups. The pool is planned once more without them.
    let guards: u64 = if plan.level == Level::Unconstrained || conserving {
        0
    } else {
        // Held back: above its share, or held at its memory.high (its demand hidden).
        rows.iter()
            .zip(&plan.decisions)
            .zip(&inputs)
            .filter(|((_, d), i)| d.target < d.usage || i.demand.is_some())
            .map(|((r, d), _)| guard_of(law, r.reclaim_supported).of(d.target))
            .fold(0, u64::saturating_add)
    };
    if guards > 0 && rejected.is_none() {
        (plan, rejected) = plan_for(cap.bytes.saturating_sub(guards));
    }
    // `kernel`: memory.low carries the split, and the daemon goes beyond it only while the host
    // is short by the kernel's own measure and a cgroup that reaches for memory (faulting it
    // back, stalling, held at its memory.high) is below its share and was really denied some
    // ([`denied`], or held at its memory.high): the multi-gen LRU (6.12's
    // default) only moves a cgroup under its memory.low to the tail of its memcg LRU and
    // reclaims it all the same once every cgroup is there, so there memory.low alone left
    // Table-2's split where the kernel puts it (lab, 2026-11-25: 151 / 124 MiB for shares of
    // 91 / 183). Then the cgroups above their share are held a guard above it and reclaimed to
    // it, as in `reserve`; the pool stays what they hold, and what is reclaimed is at most the
    // excess above the shares, so it cannot ratchet below them.
    // Once started it lasts while the host stays short, so that the split does not flap as
    // the reaching cgroup reaches its share — and while a cgroup the daemon holds presses at
    // the memory.high it was given: the holds themselves can keep free memory above the
    // kernel's low watermark, kswapd asleep and the host no longer "short"; ending there
    // released every cgroup to regrow by its own speed, not its weight, until kswapd woke
    // again (host-kube on 6.1, 2026-11-29: the weight-1 pod +12–13 % over its share). Free
    // memory still reaches them by weight: on quiet ticks the pool takes MemAvailable in and
    // a held cgroup's memory.high rises with its share (`level` below).
    let pressing = rows.iter().any(daemon_held);
    let enforcing = !conserving
        || (carry.enforcing && (cap.short || pressing))
        || (cap.short
            && rows
                .iter()
                .zip(&plan.decisions)
                .zip(&inputs)
                .any(|((r, d), i)| {
                    i.demand.is_some()
                        && (denied(r) || at_high(r))
                        && r.sample
                            .current
                            .saturating_add(decide::reclaim_slack(d.entitlement))
                            < d.entitlement
                }));

    let levels: Vec<Option<u64>> = rows
        .iter()
        .zip(&plan.decisions)
        .map(|(r, d)| {
            let guard = guard_of(law, r.reclaim_supported);
            match plan.level {
                // Work-conserving: memory.low carries the split; memory.high only follows a
                // configured `max`, and the daemon reclaims nothing (see `ceiling` below).
                _ if !enforcing => None,
                // Enforcing in `kernel`: only a cgroup above its share is held. One below it
                // keeps its own memory.high: capping it at its share of a total the kernel is
                // shrinking turned each moment of the kernel's reclaim into a lasting ceiling
                // (Table-2 on 6.12: both held, 93 % of the kernel default's total). One the
                // daemon holds stays held until it is a guard below its share: released the
                // moment the sawtooth took it a page under, a throttled cgroup took 40 MiB
                // from its neighbour before the next tick, and the two took turns (Table-2 on
                // 6.12, 600M step: the weight-1 one +11–14 % over its share, one CI run in
                // three). While the kernel's reclaim is idle its share includes free memory:
                // it stays held and its memory.high rises with the share, so free memory
                // reaches the held cgroups by weight; let go instead, two pods regrew 10–11
                // MiB each by their own speed before the next tick held them again
                // (host-kube on 6.12, 2026-11-29, the 320M step). Bitten further below its
                // share while the kernel reclaims, it is loosened, not let go: memory.high a
                // whole guard above its share (its level half a guard above, see
                // [`loosened`]), so it regrows by its own speed up to there and nothing is
                // reclaimed from it; put back to `max`, a toucher regrew from 34 to 71 MiB
                // within a tick for a share of 38 and took six ticks of per-tick drops to come
                // back (host-seed002 on 6.12, 600M step, 2026-11-30: +13 % over its share).
                Level::Exact { .. } if conserving => d.level_share.and_then(|l| {
                    if l < r.sample.current {
                        Some(l)
                    } else if !limit_above(r.originals.high, r.sample.high) {
                        None
                    } else if !cap.reclaiming || r.sample.current.saturating_add(guard.of(l)) >= l {
                        Some(l)
                    } else {
                        Some(loosened(l, guard))
                    }
                }),
                Level::Exact { .. } => d.level_share,
                // The floors alone overfill the pool: everyone is held at its floor.
                Level::Floors => Some(0),
                Level::Unconstrained => None,
            }
        })
        .collect();
    let trimming = conserving && enforcing && matches!(plan.level, Level::Exact { .. });
    let (in_force, next_trims) = trims(rows, &plan.decisions, trimming);

    let cgroups = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let d = &plan.decisions[i];
            let guard = guard_of(law, r.reclaim_supported);
            // A held cgroup's ceiling is its share moved by its trim (carried from the last
            // tick, so one tick's samples decide one tick's writes; 0 where the share moved).
            let level = levels[i].map(|l| l.saturating_add_signed(in_force[i]));
            // In `kernel` mode the split is the kernel's reclaim shaped by memory.low: each
            // cgroup is protected up to its weighted share of what they hold, so the kernel
            // takes memory outside the managed set and above the shares first, and a cgroup
            // below its share that faults memory back gets it from those above theirs. Only
            // while `enforcing` are the cgroups above their share held (guard centred on the
            // share, see `Knobs::centre`): issue 11's `kernel` mode kept memory.high a whole
            // guard above the share (a held-back cgroup up to a guard over it, Table-2 ratio
            // 0.79) and centring it there without a gate ratcheted the pool (two Redis
            // containers from 280 to 159 MiB in 30 s); gated, the daemon reclaims at most the
            // excess above the shares, for a cgroup that faults it back.
            let ceiling = decide::ceiling(d, level, floors[i], r.settings.max);
            let knobs = Knobs {
                min_floor: law.min_floor,
                max_step: law.max_step.of(r.sample.current).max(decide::PAGE),
                reclaim: law.reclaim && r.reclaim_supported,
                guard,
                passes: law.reclaim_passes.max(1),
                centre: conserving,
                released: conserving && !enforcing,
            };
            // What memory.low protects. In `kernel` mode only a cgroup that reaches for memory
            // (faults it back, stalls, or is held at its memory.high) is protected, up to its
            // share and never above what it holds, and none while the law yields: protection
            // of everything the managed cgroups held, theirs and their ancestors', left the
            // kernel's reclaim nothing but the host's own services (host guest, 6.1, balloon
            // 420 of 1024 MiB, 2026-11-26: the guest stalled for tens of seconds at a time
            // where the kernel alone kept it responsive), and a share above what a cgroup
            // held reached its neighbours through the ancestors' recursive protection.
            let protect = if !conserving {
                d.entitlement
            } else if inputs[i].demand.is_some() && !cap.yielding {
                d.entitlement.min(r.sample.current)
            } else {
                0
            };
            let writes = if r.provisional || rejected.is_some() {
                Writes::default()
            } else {
                decide::decide(
                    &observed[i],
                    &r.originals,
                    ceiling,
                    protect,
                    floors[i],
                    &knobs,
                )
            };
            CgroupStep {
                floor: floors[i],
                ceiling,
                protect,
                writes,
                trim: next_trims[i],
            }
        })
        .collect();
    let ancestors = ancestor_lows(
        rows.iter()
            .zip(&cgroups)
            .map(|(r, c): (&Row<'_>, &CgroupStep)| (r.name, c.protect)),
    );
    Step {
        capacity: cap,
        guards,
        next: Carry {
            enforcing: conserving && enforcing,
            ..next
        },
        own_stall,
        plan,
        rejected,
        enforcing,
        cgroups,
        ancestors,
    }
}

/// Where a held cgroup bitten more than a guard below its share `l` is levelled while the
/// kernel reclaims (`kernel`, the split enforced): half a guard above its share, so that the
/// centred guard puts its memory.high a whole guard above the share and its memory.reclaim
/// mark at about the share (above it with more than one pass a tick): it regrows freely to
/// there, nothing is reclaimed from it below its share, and once it is back over its share it
/// is held at it again.
fn loosened(l: u64, guard: Amount) -> u64 {
    l.saturating_add(guard.of(l) / 2)
}

/// A held cgroup's trim moves each tick by this part of its share's error. An eighth: a trim
/// is learnt anew at each step, and at a sixteenth host-kube's weight-1 pod on 6.12 (kswapd
/// bit it by 40 MiB two or three times in each 20 s window at 320M) had earned +3–8 MiB of its
/// 11 MiB bound by the window's end: −7.5 to −10.7 % in three runs (2026-12-07).
const TRIM_GAIN: i64 = 8;
/// A trim is at most this part of the cgroup's share either way, and one tick's error counts
/// for at most as much. An error above the share once counted for half of that, to keep a
/// step's transient from unwinding a trim; a step's start now clears the trims
/// (`TRIM_SETTLE_PART`), and the half held a cgroup that refaulted into its guard above its
/// share twice as long (seed 002 on 6.12, 2026-11-29: the weight-1 toucher at 74-79 MiB for a
/// share of 70 at 450M).
const TRIM_PART: i64 = 8;
/// While one of the cgroups held to a share is more than this part of its share above it (a
/// step has begun), every trim is 0.
const TRIM_SETTLE_PART: i64 = 4;
/// A share that has moved more than this part of the share a trim was learnt at is a step's
/// ([`Trim`]). Not the trim's own bound (an eighth): the pool is what the cgroups hold, so each
/// bite of kswapd's moves every share with it, by a tenth to a sixth on the host guest, and a
/// trim dropped at each bite never learnt the bias it is there for (host-kube on 6.12,
/// 2026-12-07: the weight-2 pod bitten from 133 to 71 MiB every 10-15 s at 420M, its trim 0
/// throughout, −15.2 %; CI's run −10.4 %). A step moves them by a quarter or more: seed 002's
/// 450M step 576 → 412 MiB over four ticks, host-seed002's 600M step by two fifths.
const TRIM_MOVE_PART: u64 = 4;

/// The trims in force this tick and those for the next (`kernel`, while the split is
/// enforced): for each cgroup held to a share by the water level (`level_share`: it wants
/// more), the integral of how far below its share it sat beyond what those cgroups sat below
/// theirs together, so that its ceiling rises while it sits below and those of the others fall.
/// It counts while a bite has taken it so far below its share that it is loosened to regrow
/// ([`loosened`]), and its trim raises its ceiling then too. The kernel's reclaim does not
/// take from the held cgroups by weight: on the multi-gen LRU (6.12) kswapd takes a held
/// cgroup in bites of 40-57 MiB every 10-20 s, below its memory.low too, and mostly the same
/// ones; held at its share, the one it picks sat 4-15 % under it on average (host-kube,
/// host-hostile, 2026-11-29), the others over.
/// A cgroup under its share by more than it has in swap is left out: what it lacks was not
/// taken from it. The errors are measured against the common one, so the trims sum to zero:
/// what one gets the others give, and the pool stays what it is (no ratchet). Each is bounded to
/// `share / TRIM_PART`; all are 0 while the split is not enforced, fewer than two cgroups
/// are held to a share, or a step has begun (one of them far above its share).
///
/// A trim is learnt at one share ([`Trim`]): where the share moves more than a quarter
/// ([`TRIM_MOVE_PART`]) from there, a step has moved it, the trim is that step's and is 0 from
/// this tick, and the cgroup's errors count again once its usage has come within the trim's
/// bound of its new share.
fn trims(rows: &[Row<'_>], decisions: &[Decision], trimming: bool) -> (Vec<i64>, Vec<Trim>) {
    /// One cgroup held to a share.
    struct Held {
        row: usize,
        share: i64,
        /// Share − usage, clamped to what one tick may count.
        error: i64,
        /// More than a `TRIM_SETTLE_PART` of its share above it.
        far_above: bool,
    }
    let mut in_force = vec![0; rows.len()];
    let mut next = vec![Trim::default(); rows.len()];
    if !trimming {
        return (in_force, next);
    }
    let mut held = Vec::new();
    for (row, (r, d)) in rows.iter().zip(decisions).enumerate() {
        let Some(share) = d.level_share.filter(|&s| s > 0) else {
            continue;
        };
        let (Ok(signed), Ok(current)) = (i64::try_from(share), i64::try_from(r.sample.current))
        else {
            continue;
        };
        let bound = share / TRIM_PART.unsigned_abs();
        let error = signed - current;
        // The share it was learnt at moved by more than its bound (host-seed002 on 6.12, the
        // 600M step, 2026-12-06: kswapd bit the weight-2 container from 126 to 42 MiB in the
        // step's first 3 s while the others fell with the pool, none of them a quarter above
        // its share; that transient, integrated, held it 7-10 MiB above its share of 70 for
        // the phase, +10 %).
        let carried = r.trim;
        let moved =
            carried.share == 0 || share.abs_diff(carried.share) > carried.share / TRIM_MOVE_PART;
        let at = if moved { share } else { carried.share };
        let settled = (!moved && carried.settled) || error.unsigned_abs() <= bound;
        in_force[row] = if moved { 0 } else { carried.bytes };
        next[row] = Trim {
            bytes: 0,
            share: at,
            settled,
        };
        // One under its share by more than it has in swap is not in contention for it: a
        // reaching cgroup's share may be more than its working set (its demand what it
        // holds, its swap and the file pages it faulted back, `reach_bound`, and the whole
        // pool where swap is not accounted), and one sitting under such
        // a share with all it uses resident was not bitten. Counted, it wound its trim to
        // its bound and pushed the cgroups held beside it under their shares (seed 002 on
        // 6.12, 2026-11-29: the weight-3 toucher at its 250 MiB for a share of 283; the
        // touchers held 89-92 % of what the kernel alone left them, and at the next step
        // it sat 7 % above its own).
        let swapped = r
            .sample
            .swap_current
            .map_or(i64::MAX, |s| i64::try_from(s).unwrap_or(i64::MAX));
        if !settled || error > swapped {
            continue;
        }
        held.push(Held {
            row,
            share: signed,
            error: error.clamp(-signed / TRIM_PART, signed / TRIM_PART),
            far_above: -error > signed / TRIM_SETTLE_PART,
        });
    }
    if held.len() < 2 {
        return (in_force, next);
    }
    // While the daemon is still bringing one of them down from far above its share, a step
    // has begun: where each sits is the step's doing, not the kernel's bias, and the trims
    // learnt at the last step's shares are that step's. Integrated, the step's errors wound the
    // bitten cgroup's trim the wrong way (host-hostile on 6.12: −8.3 %); carried, the trim
    // kswapd's bites had earned one cgroup at the last step held it above its new share,
    // unwinding at a sixteenth of its error a tick while nothing bit it there (seed 002 on 6.12,
    // 2026-11-29: the weight-1 toucher +6 to +10 % at 450M in three runs, then the weight-2
    // +8 % at 600M). The trims start again from zero.
    if held.iter().any(|h| h.far_above) {
        return (in_force, next);
    }
    let shares: i128 = held.iter().map(|h| i128::from(h.share)).sum();
    let errors: i128 = held.iter().map(|h| i128::from(h.error)).sum();
    // Each one's error beyond its part of the common one, added to its trim.
    let mut sums: Vec<i128> = held
        .iter()
        .map(|h| {
            let common = i128::from(h.share) * errors / shares;
            i128::from(in_force[h.row]) + (i128::from(h.error) - common) / i128::from(TRIM_GAIN)
        })
        .collect();
    // Summing to zero (a cgroup that left the set, or whose share moved, took its trim with
    // it), then scaled as one into their bounds, so that they still sum to zero.
    let excess: i128 = sums.iter().sum();
    for (t, h) in sums.iter_mut().zip(&held) {
        *t -= i128::from(h.share) * excess / shares;
    }
    let bound = |h: &Held| i128::from(h.share / TRIM_PART);
    let (num, den) = sums
        .iter()
        .zip(&held)
        .map(|(t, h)| (bound(h), t.abs()))
        .filter(|&(b, t)| t > b)
        .min_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)))
        .unwrap_or((1, 1));
    for (t, h) in sums.iter().zip(&held) {
        let scaled = (t * num / den).clamp(-bound(h), bound(h));
        next[h.row].bytes = i64::try_from(scaled).unwrap_or(0);
    }
    (in_force, next)
}

/// Sum of descendants' protection per ancestor (the root itself excluded), each rounded up to
/// the `memory.low` granule.
fn ancestor_lows<'a>(lows: impl IntoIterator<Item = (&'a str, u64)>) -> BTreeMap<String, u64> {
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

/// A cgroup within this many bytes (or 1/32) of its memory.high counts as held by it.
const THROTTLE_SLACK: u64 = 4 << 20;

/// Whether a cgroup using `current` is held at its `memory.high`: within
/// `max(high/32, THROTTLE_SLACK)` of it, plus the `guard` memory.high is kept above the target
/// while memory.reclaim moves usage (`Amount::Bytes(0)` without it). Its usage is then where
/// the daemon or the kernel holds it, not where the workload would take it.
#[must_use]
pub fn held(current: u64, high: Limit, guard: Amount) -> bool {
    let Limit::Bytes(high) = high else {
        return false;
    };
    current
        .saturating_add((high / 32).max(THROTTLE_SLACK))
        .saturating_add(guard.of(high))
        >= high
}

/// The guard in force for a row: [`Law::guard`] where memory.reclaim moves usage, none where
/// memory.high alone is the brake.
fn guard_of(law: &Law<'_>, reclaim_supported: bool) -> Amount {
    effective_guard(law.reclaim, law.guard, reclaim_supported)
}

/// The guard a cgroup's memory.high keeps above its target: the configured one where the
/// daemon reclaims (`reclaim` on and the cgroup has memory.reclaim), else none.
#[must_use]
pub fn effective_guard(reclaim: bool, guard: Amount, reclaim_supported: bool) -> Amount {
    if reclaim && reclaim_supported {
        guard
    } else {
        Amount::Bytes(0)
    }
}

/// `a` is a higher limit than `b` (`max` above every size).
#[must_use]
pub fn limit_above(a: Limit, b: Limit) -> bool {
    a.bytes().unwrap_or(u64::MAX) > b.bytes().unwrap_or(u64::MAX)
}

/// Whether a cgroup reaches for more than it holds (`kernel` mode): reclaim takes memory it
/// still uses — it faulted back at least [`capacity::REFAULT_DEMAND`] between two consecutive
/// full samples among its last [`capacity::REACH_HOLD`], or faulted back some and its own
/// memory PSI is at least [`capacity::STALL_DEMAND_PCT`]. A stall alone is not enough: while
/// the host is short every cgroup's tasks stall in the kernel's direct reclaim, and a
/// container holding all it wants (host guest, 6.12, balloon 200 of 1024 MiB, 2026-11-26: 200
/// of its 200 MiB, nothing faulted back, PSI over 1 %) was then given the whole pool as its
/// demand, and the weight-1 container beside it was held down to its share where the kernel
/// alone left all three resident.
fn reaching(r: &Row<'_>) -> bool {
    let lately = r.refaulted_lately.max(r.refaulted);
    lately >= capacity::REFAULT_DEMAND
        || (lately > 0
            && r.sample
                .pressure
                .as_ref()
                .is_some_and(|p| p.some.avg10 >= capacity::STALL_DEMAND_PCT))
}

/// Whether the kernel has really taken memory from a cgroup (`kernel` mode): at least
/// 1/[`capacity::DENIED_PART`] of what it holds (and at least [`capacity::REFAULT_DEMAND`])
/// is in swap or was faulted back since its last sample. A cgroup reaching for memory starts
/// the enforcement of the split only so (or held at its memory.high): the few MiB the kernel
/// swaps as a shortage begins, and faults back at once, are not a denial worth holding a
/// neighbour for.
fn denied(r: &Row<'_>) -> bool {
    let taken = r.sample.swap_current.unwrap_or(0).max(r.refaulted);
    taken >= (r.sample.current / capacity::DENIED_PART).max(capacity::REFAULT_DEMAND)
}

/// What a cgroup reaching for memory can use at most, where that is known: what it holds plus
/// what it has in swap (anonymous memory the kernel took from it), plus the file pages it
/// faulted back lately (those it lost are counted nowhere, but while it thrashes on them it
/// lacks about what it reads back between two samples). The refaults of a cgroup using all it
/// has say only that the kernel's reclaim takes from it, not how much more it wants: seed
/// 002's weight-2 and weight-3 touchers, each fully resident at 250 MiB and faulting back
/// kswapd's bites, were given the whole pool as their demand, shares of 237 and 355 MiB, and
/// the weight-1 toucher beside them was held at 173–196 MiB where the kernel alone left it
/// 211–250 (150M step, 5 of 6 runs, 2026-11-29). The same for one faulting back file pages,
/// which had no bound: the weight-3 toucher read back 3–15 MiB of its program's pages after
/// each of kswapd's bites, its share rose to half the pool for three samples, and the
/// weight-1 toucher beside it was cut from 175 to 120 MiB and let regrow, three times in 15 s
/// (host-seed002 on 6.1, the 150M step, 2026-12-01: +11.5 % over its share).
/// `None` where the kernel does not account swap.
fn reach_bound(r: &Row<'_>) -> Option<u64> {
    let swap = r.sample.swap_current?;
    Some(
        r.sample
            .current
            .saturating_add(swap)
            .saturating_add(r.refaulted_file_lately),
    )
}

/// A cgroup held at its `memory.high` (`at_high`, [`held`] with its guard) uses no more than
/// the limit, so its usage hides what it wants. Such a cgroup is given a demand of the whole
/// pool (capped by its original limit and its memory.max), so that memory freed elsewhere
/// flows back to it by weight, and pressure is not declared over merely because the throttle
/// works. The same holds for one reaching for
/// more in `kernel` mode (`conserving`; [`reaching`]), capped by [`reach_bound`] too unless
/// it is held. `None` when neither.
fn hidden_demand(r: &Row<'_>, capacity: u64, at_high: bool, conserving: bool) -> Option<u64> {
    let s = r.sample;
    if !(at_high || conserving && reaching(r)) {
        return None;
    }
    let bound = if at_high { None } else { reach_bound(r) };
    let cap = r
        .originals
        .high
        .bytes()
        .unwrap_or(u64::MAX)
        .min(s.max.bytes().unwrap_or(u64::MAX))
        .min(bound.unwrap_or(u64::MAX));
    Some(capacity.max(s.current).min(cap).max(s.current))
}

fn observe(s: &CgroupSample) -> Observed {
    Observed {
        usage: s.current,
        swap_backed: s.stat.anon.saturating_add(s.stat.shmem),
        swap_current: s.swap_current,
        swap_max: s.swap_max,
        high: s.high,
        low: s.low,
    }
}

fn empty_plan(capacity: u64, inputs: &[CgroupInput]) -> Plan {
    Plan {
        capacity,
        total_usage: inputs.iter().map(|i| i.usage).sum(),
        total_weight: inputs.iter().map(|i| u64::from(i.weight)).sum(),
        pressure: false,
        overcommitted: false,
        decisions: inputs
            .iter()
            .map(|i| Decision {
                name: i.name.clone(),
                usage: i.usage,
                weight: i.weight,
                expected: i.usage,
                exceed: 0,
                target: i.usage,
                reclaim: 0,
                entitlement: 0,
                reason: memweight_policy::Reason::NoPressure,
                level_share: None,
            })
            .collect(),
        level: Level::Unconstrained,
    }
}

#[cfg(test)]
mod tests;
