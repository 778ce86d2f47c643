use super::*;
use crate::config::{CapacityMode, Reserve};
use memweight_cgroupfs::{MemoryEvents, MemoryStat, Psi, PsiLine};
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn psi(some: f64) -> Psi {
    Psi {
        some: PsiLine {
            avg10: some,
            avg60: some,
            avg300: some,
            total_us: 0,
        },
        full: None,
    }
}

fn limit() -> impl Strategy<Value = Limit> {
    prop_oneof![
        Just(Limit::Max),
        (1u64..4096).prop_map(|m| Limit::Bytes(m * MIB))
    ]
}

/// One cgroup: its sample, settings, originals and whether the sample is provisional.
#[derive(Debug, Clone)]
struct Cg {
    sample: CgroupSample,
    settings: Settings,
    originals: Originals,
    provisional: bool,
    refaulted: u64,
    refaulted_lately: u64,
    refaulted_file_lately: u64,
    trim: Trim,
}

prop_compose! {
    fn cgroup()(
        current in 0u64..4096,
        anon_pct in 0u64..=100,
        swap in 0u64..1024,
        swap_max in prop::option::of(limit()),
        high in limit(),
        low in limit(),
        orig_high in limit(),
        orig_low in prop_oneof![Just(Limit::Bytes(0)), limit()],
        weight in 1u32..10_000,
        min in prop_oneof![Just(0u64), 0u64..2048],
        max in prop::option::of(1u64..4096),
        some in 0.0f64..100.0,
        provisional in prop::bool::weighted(0.1),
        max_limit in limit(),
        refaulted in prop_oneof![Just(0u64), 0u64..(8 << 20)],
        earlier in prop_oneof![Just(0u64), 0u64..(8 << 20)],
        file in prop_oneof![Just(0u64), 0u64..(8 << 20)],
        trim in prop_oneof![Just(0i64), -(64i64 << 20)..(64 << 20)],
        trim_share in prop_oneof![Just(0u64), 0u64..4096],
        settled in any::<bool>(),
    ) -> Cg {
        let current = current * MIB;
        Cg {
            sample: CgroupSample {
                current,
                stat: MemoryStat {
                    anon: current / 100 * anon_pct,
                    file: current / 100 * (100 - anon_pct),
                    ..MemoryStat::default()
                },
                pressure: Some(psi(some)),
                events: MemoryEvents::default(),
                swap_current: Some(swap * MIB),
                swap_max,
                high,
                low,
                min: Limit::Bytes(0),
                max: max_limit,
            },
            settings: Settings { weight, min: min * MIB, max: max.map(|m| m * MIB) },
            originals: Originals { high: orig_high, low: orig_low },
            provisional,
            refaulted,
            refaulted_lately: refaulted.max(earlier),
            refaulted_file_lately: file.min(refaulted.max(earlier)),
            trim: Trim { bytes: trim, share: trim_share * MIB, settled },
        }
    }
}

prop_compose! {
    fn host()(
        total in 1024u64..65_536,
        avail_pct in 0u64..=100,
        free_pct in 0u64..=100,
        swap_free in 0u64..8192,
        some in prop::option::of(0.0f64..100.0),
        scanned in prop::option::of(0u64..4),
        multi_gen_lru in any::<bool>(),
    ) -> HostSample {
        HostSample {
            mem_total: total * MIB,
            mem_available: total * MIB / 100 * avail_pct,
            mem_free: total * MIB / 100 * free_pct,
            swap_total: swap_free * MIB,
            swap_free: swap_free * MIB,
            psi: some.map(psi),
            vmstat: scanned.map(|n| memweight_cgroupfs::Vmstat {
                pgscan_kswapd: n,
                ..Default::default()
            }),
            multi_gen_lru,
        }
    }
}

fn capacity_config() -> impl Strategy<Value = CapacityConfig> {
    (
        prop_oneof![
            Just(CapacityMode::Reserve),
            Just(CapacityMode::Kernel),
            Just(CapacityMode::Fixed)
        ],
        prop_oneof![
            Just(Reserve::Watermarks),
            (0u64..1024).prop_map(|m| Reserve::Amount(Amount::Bytes(m * MIB)))
        ],
        0u64..65_536,
        prop::option::of(0u64..512),
    )
        .prop_map(|(mode, reserve, fixed, hysteresis)| CapacityConfig {
            mode,
            fixed: Some(Amount::Bytes(fixed * MIB)),
            reserve,
            hysteresis: hysteresis.map(|h| Amount::Bytes(h * MIB)),
            ..CapacityConfig::default()
        })
}

fn names(cgs: &[Cg]) -> Vec<String> {
    (0..cgs.len()).map(|i| format!("c{i}")).collect()
}

fn rows<'a>(cgs: &'a [Cg], names: &'a [String]) -> Vec<Row<'a>> {
    cgs.iter()
        .zip(names)
        .map(|(c, n)| Row {
            name: n,
            settings: c.settings,
            sample: &c.sample,
            originals: c.originals,
            reclaim_supported: true,
            provisional: c.provisional,
            refaulted: c.refaulted,
            refaulted_lately: c.refaulted_lately,
            refaulted_file_lately: c.refaulted_file_lately,
            trim: c.trim,
        })
        .collect()
}

/// A cgroup of `current` bytes, all anonymous, at no limit of its own or the daemon's,
/// stalled `some` % and having faulted back `refaulted` bytes.
fn plain(current: u64, weight: u32, some: f64, refaulted: u64) -> Cg {
    Cg {
        sample: CgroupSample {
            current,
            stat: MemoryStat {
                anon: current,
                ..MemoryStat::default()
            },
            pressure: Some(psi(some)),
            events: MemoryEvents::default(),
            swap_current: Some(0),
            swap_max: Some(Limit::Max),
            high: Limit::Max,
            low: Limit::Bytes(0),
            min: Limit::Bytes(0),
            max: Limit::Max,
        },
        settings: Settings {
            weight,
            min: 0,
            max: None,
        },
        originals: Originals {
            high: Limit::Max,
            low: Limit::Bytes(0),
        },
        provisional: false,
        refaulted,
        refaulted_lately: refaulted,
        refaulted_file_lately: 0,
        trim: Trim::default(),
    }
}

/// [`plain`] with `swap` bytes of it in swap.
fn swapped(current: u64, weight: u32, some: f64, refaulted: u64, swap: u64) -> Cg {
    let mut c = plain(current, weight, some, refaulted);
    c.sample.swap_current = Some(swap);
    c
}

/// [`plain`] reaching for memory (20 MiB faulted back) and held by a memory.high `above`
/// bytes over what it holds.
fn held_at(current: u64, weight: u32, some: f64, above: u64) -> Cg {
    let mut c = plain(current, weight, some, 20 * MIB);
    c.sample.high = Limit::Bytes(current + above);
    c
}

/// [`held_at`] 2 MiB above what it holds, stalled 20 %, with 64 MiB in swap (what kswapd took
/// from it) and `trim` carried from the last tick, learnt at `share` and settled there.
fn bitten_with_trim(current: u64, weight: u32, trim: i64, share: u64) -> Cg {
    let mut c = held_at(current, weight, 20.0, 2 * MIB);
    c.trim = Trim {
        bytes: trim,
        share,
        settled: true,
    };
    c.sample.swap_current = Some(64 * MIB);
    c
}

/// What the last tick carries while `kernel` enforces the split, kswapd having scanned 100
/// pages ([`scanning`] with more: it still scans).
fn enforcing_carry() -> Carry {
    Carry {
        scanned: Some(100),
        enforcing: true,
        ..Carry::default()
    }
}

/// One tick of the shipped `kernel` law enforcing the split from `carry`, kswapd scanning and
/// the cgroups stalling 20 % of the time: the trim tests' host.
fn trim_tick(cgs: &[Cg], carry: Carry) -> Step {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let names = names(cgs);
    let short = scanning(150, Some(psi(20.0)));
    let out = step(&law, &rows(cgs, &names), &short, None, None, carry);
    assert!(out.enforcing);
    out
}

/// The law with the shipped config's settings (16M floor, 10 % steps, reclaim with an 8 %
/// guard, no idle tax) over `capacity`.
fn shipped_law(capacity: &CapacityConfig) -> Law<'_> {
    Law {
        capacity,
        min_floor: 16 * MIB,
        max_step: Amount::Percent(10.0),
        reclaim: true,
        guard: Amount::Percent(8.0),
        reclaim_passes: 1,
        idle_tax: 0,
    }
}

/// `[capacity] mode = "kernel"` with the defaults otherwise.
fn kernel_capacity() -> CapacityConfig {
    CapacityConfig {
        mode: CapacityMode::Kernel,
        ..CapacityConfig::default()
    }
}

/// The kernel's watermarks: `min`, and `high` a `band` above it (`low` halfway).
fn watermarks(min: u64, band: u64) -> Watermarks {
    Watermarks {
        min,
        low: min + band / 2,
        high: min + band,
        managed: 0,
    }
}

/// [`short_host`] whose kernel has scanned `scanned` pages in global reclaim since boot.
fn scanning(scanned: u64, psi: Option<Psi>) -> HostSample {
    HostSample {
        vmstat: Some(memweight_cgroupfs::Vmstat {
            pgscan_kswapd: scanned,
            ..Default::default()
        }),
        ..short_host(psi)
    }
}

/// A host the kernel's reclaim is working on (kswapd scanned since the carried count) with
/// PSI `some` %, and that carry.
fn reclaiming(some: f64) -> (HostSample, Carry) {
    let carry = Carry {
        scanned: Some(100),
        ..Carry::default()
    };
    (scanning(150, Some(psi(some))), carry)
}

/// A 1 GiB host with nothing available and 1 GiB of free swap.
fn short_host(psi: Option<Psi>) -> HostSample {
    HostSample {
        mem_total: 1 << 30,
        mem_available: 0,
        mem_free: 0,
        swap_total: 1 << 30,
        swap_free: 1 << 30,
        psi,
        vmstat: None,
        multi_gen_lru: true,
    }
}

/// Regression (issue 11, lab run 2026-11-24 16:05 UTC): with memory.high a guard above
/// each target and the pool shared as if there were no guards, the cgroups' refaults into
/// their guards took MemAvailable from the reserve to 0–7 MiB. The guards of the cgroups
/// held back now come out of the pool: targets plus guards fit in it.
#[test]
fn regression_guards_ate_the_reserve() {
    let cgs = [plain(300 * MIB, 1, 0.0, 0), plain(300 * MIB, 2, 0.0, 0)];
    let capacity = CapacityConfig {
        mode: CapacityMode::Fixed,
        fixed: Some(Amount::Bytes(400 * MIB)),
        ..CapacityConfig::default()
    };
    let host = short_host(None);
    let names = names(&cgs);
    let rows = rows(&cgs, &names);
    for (guard, reserved) in [(0.0, 0), (8.0, 32 * MIB)] {
        let law = Law {
            capacity: &capacity,
            min_floor: 16 * MIB,
            max_step: Amount::Percent(100.0),
            reclaim: true,
            guard: Amount::Percent(guard),
            reclaim_passes: 1,
            idle_tax: 0,
        };
        let out = step(&law, &rows, &host, None, None, Carry::default());
        assert!(
            out.guards.abs_diff(reserved) <= 1,
            "8 % of the first plan's 400 MiB of targets: {}",
            out.guards
        );
        let highs: u64 = out
            .cgroups
            .iter()
            .map(|c| match c.writes.high {
                Some(Limit::Bytes(h)) => h,
                other => panic!("memory.high not lowered: {other:?}"),
            })
            .sum();
        assert!(
            highs <= 400 * MIB + 2 * decide::PAGE,
            "guard {guard} %: Σ high {highs}"
        );
        assert!(
            highs + 8 * MIB >= 400 * MIB,
            "the pool is used: Σ high {highs}"
        );
    }
}

/// `kernel` (work-conserving) on Table-2 as the kernel default leaves it at the 500M step
/// (MemAvailable 0; weights 1:2 holding 150 / 211 MiB; the larger one swapping, stalled
/// 14 %): the pool stays the 361 MiB they hold, shared 120 / 240; the reaching one is
/// protected up to what it holds (211 MiB), the small one not at all (the kernel's LRU
/// weighs its pages against everyone's). While the kernel is not reclaiming memory.high
/// stays where it is and nothing is reclaimed; once it is (vmstat's counters moved), the
/// small one, above its share while the reaching one is below, is held a guard above its
/// share and reclaimed towards it. With no cgroup reaching, nobody is protected and
/// nothing is enforced: the kernel alone decides.
#[test]
fn auto_splits_by_memory_low_and_enforces_only_when_short() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let at = |scanned: u64| scanning(scanned, Some(psi(30.0)));
    let idle = Carry {
        scanned: Some(100),
        ..Carry::default()
    };
    let band = Some(watermarks(44 * MIB, 22 * MIB));

    // Stalled by PSI while faulting some back, or (a server answering one request at a
    // time) refaulting.
    let stalled = [
        plain(150 * MIB, 1, 0.5, 0),
        swapped(211 * MIB, 2, 14.0, MIB / 4, 40 * MIB),
    ];
    let refaulting = [
        plain(150 * MIB, 1, 0.5, 0),
        swapped(211 * MIB, 2, 0.3, 2 * MIB, 40 * MIB),
    ];
    let names = names(&stalled);
    for cgs in [&stalled, &refaulting] {
        let rows = rows(cgs, &names);
        let out = step(&law, &rows, &at(100), band, None, idle);
        assert_eq!(
            out.capacity.bytes,
            361 * MIB,
            "the kernel decides the total"
        );
        assert!(!out.capacity.short && !out.enforcing);
        assert_eq!(out.guards, 0);
        let ent: Vec<u64> = out
            .plan
            .decisions
            .iter()
            .map(|d| d.entitlement / MIB)
            .collect();
        assert_eq!(ent, [120, 240], "split 1:2 of what they hold");
        for c in &out.cgroups {
            assert_eq!(
                (c.ceiling, c.writes.high, c.writes.reclaim),
                (None, None, None)
            );
        }
        // Only the reaching one is protected, up to what it holds.
        assert_eq!(out.cgroups[0].protect, 0);
        assert_eq!(out.cgroups[0].writes.low, None);
        assert_eq!(out.cgroups[1].protect, 211 * MIB);
        assert_eq!(
            out.cgroups[1].writes.low,
            Some(Limit::Bytes(208 * MIB)),
            "in whole granules, never above what it holds"
        );

        // The kernel reclaimed since the last tick: the split is enforced.
        let out = step(&law, &rows, &at(150), band, None, idle);
        assert!(out.capacity.short && out.enforcing);
        assert_eq!(out.capacity.bytes, 361 * MIB, "still what they hold");
        assert_eq!(out.guards, 0, "the guards are not taken out of the pool");
        let small = &out.cgroups[0];
        assert_eq!(small.ceiling.map(|c| c / MIB), Some(120));
        assert!(
            matches!(small.writes.high, Some(Limit::Bytes(h)) if h < 150 * MIB),
            "the small one is taken down: {:?}",
            small.writes
        );
        assert!(small.writes.reclaim.is_some_and(|r| r > 0));
        assert!(
            !matches!(out.cgroups[1].writes.high, Some(Limit::Bytes(h)) if h < 211 * MIB),
            "the reaching one is not squeezed: {:?}",
            out.cgroups[1].writes
        );
        // ... and stays so for a few quiet ticks, then lets go.
        let mut carry = out.next;
        for tick in 1..=capacity::SHORT_TICKS {
            let out = step(&law, &rows, &at(150), band, None, carry);
            assert_eq!(out.enforcing, tick < capacity::SHORT_TICKS, "tick {tick}");
            carry = out.next;
        }
    }

    let calm = [
        plain(150 * MIB, 1, 0.5, 0),
        plain(211 * MIB, 2, 0.5, MIB / 2),
    ];
    let out = step(&law, &rows(&calm, &names), &at(150), band, None, idle);
    assert_eq!(out.plan.level, Level::Unconstrained);
    assert!(!out.enforcing, "short, but nobody reaches");
    assert!(out.cgroups.iter().all(|c| c.writes.high.is_none()));
    assert!(
        out.cgroups
            .iter()
            .all(|c| c.protect == 0 && c.writes.low.is_none()),
        "nobody reaches: nobody is protected, the kernel's LRU decides"
    );
}

/// `kernel` while the host is short: only the cgroup that reaches for memory is protected,
/// up to what it holds, and none while the cgroups beside the managed set stall (the law
/// yields: the kernel's reclaim weighs every page as it would alone); the split between
/// them is enforced either way — the weight-1 cgroup, above its share, is held and
/// reclaimed towards it.
#[test]
fn regression_protection_of_everything_they_held_starved_the_services_beside() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let at = |scanned: u64| scanning(scanned, None);
    let cgs = [
        plain(160 * MIB, 1, 0.0, 0),
        swapped(160 * MIB, 2, 14.0, MIB / 4, 40 * MIB),
    ];
    let names = names(&cgs);
    let rows = rows(&cgs, &names);
    let carry = Carry {
        scanned: Some(100),
        ..Carry::default()
    };
    let low = |c: &CgroupStep| match c.writes.low {
        None => 0,
        Some(l) => l.bytes().unwrap_or(u64::MAX) / MIB,
    };
    for (stall, yielding, protected) in [(Some(1.0), false, 160), (Some(5.0), true, 0)] {
        let out = step(&law, &rows, &at(150), None, stall, carry);
        assert_eq!(out.capacity.yielding, yielding, "outside stall {stall:?}");
        assert_eq!(out.capacity.bytes, 320 * MIB, "the pool is what they hold");
        assert!(out.enforcing);
        assert_eq!(
            (out.cgroups[0].protect, low(&out.cgroups[0])),
            (0, 0),
            "the calm one is not protected"
        );
        assert_eq!(
            (out.cgroups[1].protect / MIB, low(&out.cgroups[1])),
            (protected, protected),
            "the reaching one, up to what it holds"
        );
        let small = &out.cgroups[0];
        assert!(small.ceiling.is_some_and(|c| c < 160 * MIB));
        assert!(
            small.writes.reclaim.is_some_and(|r| r > 0),
            "{:?}",
            small.writes
        );
        let big = &out.cgroups[1];
        assert_eq!((big.writes.high, big.writes.reclaim), (None, None));
    }
}

/// `kernel` while the host is short: a cgroup that stalls but faults nothing back holds
/// what it wants (tasks stall in the kernel's direct reclaim wherever they run). It used
/// to count as reaching, with the whole pool as its demand: on the host guest under 6.12
/// (balloon 200 of 1024 MiB, 2026-11-26) the weight-2 container, all of its 200 MiB
/// resident, so held the weight-1 one down to its share, where the kernel alone left all
/// three resident. Nobody is protected or held; with refaults it reaches again.
#[test]
fn regression_a_stall_without_refaults_held_down_the_neighbour() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let (short, carry) = reclaiming(30.0);
    let resident = [plain(200 * MIB, 1, 2.0, 0), plain(200 * MIB, 2, 6.0, 0)];
    let names = names(&resident);
    let out = step(&law, &rows(&resident, &names), &short, None, None, carry);
    assert!(out.capacity.short);
    assert!(!out.enforcing, "stalls without refaults: nobody reaches");
    for c in &out.cgroups {
        assert_eq!((c.protect, c.ceiling), (0, None));
        assert!(c.writes.is_empty(), "{:?}", c.writes);
    }
    let refaulting = [
        plain(200 * MIB, 1, 2.0, 0),
        swapped(180 * MIB, 2, 6.0, MIB / 4, 20 * MIB),
    ];
    let out = step(&law, &rows(&refaulting, &names), &short, None, None, carry);
    assert!(out.enforcing, "a stall with refaults reaches");
    assert!(out.cgroups[0].ceiling.is_some_and(|c| c < 200 * MIB));
    assert_eq!(out.cgroups[1].protect, 180 * MIB);
}

/// Regression (the Redis pair, 6.12, the balloon's 500M step, 2026-11-28): a container's
/// refaults come in bursts, and judged on the last interval alone its protection flipped —
/// `memory.low` 96 MiB, 0, 96, 0 … tick after tick (5–15 flips in each run). It stays
/// reaching, protected at what it holds up to its share, while a burst of refaults lies
/// within its last [`capacity::REACH_HOLD`] samples; without one it is let go.
#[test]
fn regression_memory_low_flipped_each_tick_between_bursts_of_refaults() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let (short, carry) = reclaiming(30.0);
    let between_bursts = |lately: u64| {
        let mut reaching = swapped(96 * MIB, 1, 0.5, 0, 20 * MIB);
        reaching.refaulted_lately = lately;
        [reaching, plain(224 * MIB, 2, 0.5, 0)]
    };
    let burst = between_bursts(4 * MIB);
    let names = names(&burst);
    let out = step(&law, &rows(&burst, &names), &short, None, None, carry);
    assert_eq!(
        out.cgroups[0].protect,
        96 * MIB,
        "a burst within the hold: still reaching, protected at what it holds"
    );
    let quiet = between_bursts(0);
    let out = step(&law, &rows(&quiet, &names), &short, None, None, carry);
    assert_eq!(
        out.cgroups[0].protect, 0,
        "no burst within the hold: let go"
    );
}

/// Regression (CI, 2026-11-26: Table-2 on 6.12 at the 600M step, the weight-1 cgroup
/// +13 % over its share): in `kernel` while enforcing, the cgroup the daemon held was
/// released to its original memory.high the tick the kernel's sawtooth took it a little
/// under its share (86 MiB for 89); unthrottled, it took 40 MiB from its neighbour before
/// the next tick, which was then held in its turn. A held cgroup stays held within a guard
/// below its share (further below it is loosened:
/// `regression_a_bitten_cgroup_let_go_to_max_regrew_far_past_its_share_in_a_tick`).
#[test]
fn regression_a_held_cgroup_just_under_its_share_was_let_go_and_they_took_turns() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let short = scanning(150, Some(psi(30.0)));
    let carry = enforcing_carry();
    let cgs = [
        held_at(86 * MIB, 1, 30.0, 5 * MIB),
        plain(182 * MIB, 2, 11.0, 20 * MIB),
    ];
    let names = names(&cgs);
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    assert!(out.enforcing);
    let share = out.plan.decisions[0].target;
    assert!(share > 86 * MIB, "just under its share: {share}");
    assert!(
        out.cgroups[0].ceiling.is_some(),
        "still held: {:?}",
        out.cgroups[0]
    );
    assert_ne!(out.cgroups[0].writes.high, Some(Limit::Max), "not let go");
    assert!(
        out.cgroups[1].ceiling.is_some(),
        "the one above its share too"
    );
}

/// Regression (host-seed002 on 6.12, 600M step, 2026-11-30: the weight-1 toucher +13 % over
/// its share; seed 002 and host-cold on 6.12 +6–8 % and −8 % in one batch each): a held cgroup
/// kswapd bit more than a guard below its share was let go to its original memory.high
/// (`max`); it regrew from 34 to 71 MiB within the tick for a share of 38, and the per-tick
/// drop limit took six ticks to bring it back. Loosened instead: memory.high a guard above its
/// share, nothing reclaimed from it, and held at its share again once it is back.
#[test]
fn regression_a_bitten_cgroup_let_go_to_max_regrew_far_past_its_share_in_a_tick() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let short = scanning(150, Some(psi(30.0)));
    let carry = enforcing_carry();
    // A guard (8 %) and more below its share: loosened, not let go.
    let cgs = [
        held_at(70 * MIB, 1, 30.0, 5 * MIB),
        plain(182 * MIB, 2, 11.0, 20 * MIB),
    ];
    let names = names(&cgs);
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    assert!(out.enforcing);
    let share = out.plan.decisions[0].level_share.expect("held to a share");
    assert!(share > 70 * MIB + share * 8 / 100, "a guard below: {share}");
    let guard = share * 8 / 100;
    let c = &out.cgroups[0];
    assert_eq!(c.ceiling, Some(share + guard / 2), "{c:?}");
    let Some(Limit::Bytes(high)) = c.writes.high else {
        panic!("loosened, not let go: {c:?}")
    };
    assert!(
        high.abs_diff(share + guard) <= share / 100,
        "a guard above its share: {high} for {share}"
    );
    assert_eq!(c.writes.reclaim, None, "nothing reclaimed from it");
    assert!(
        c.writes.mark.is_some_and(|m| m + share / 100 >= share),
        "the passes leave it alone below its share: {c:?}"
    );

    // Back a little over its share: held at its share again.
    let cgs = [
        held_at(share + 2 * MIB, 1, 30.0, 5 * MIB),
        plain(182 * MIB, 2, 11.0, 20 * MIB),
    ];
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    let share = out.plan.decisions[0].level_share.expect("held to a share");
    assert_eq!(out.cgroups[0].ceiling, Some(share));

    // Never held by the daemon (its memory.high its own): it keeps it.
    let cgs = [
        plain(70 * MIB, 1, 30.0, 20 * MIB),
        plain(182 * MIB, 2, 11.0, 20 * MIB),
    ];
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    assert_eq!(out.cgroups[0].ceiling, None);
}

/// Regression (host guest, 6.12, balloon 200 of 1024 MiB, three batches, 2026-11-26/27): as
/// the step began the kernel swapped a few MiB of one container (the kernel alone: 0.2–1.5
/// MiB) and it faulted them back at once; reaching, below its share, while the host was
/// short, it started the enforcement, and the weight-1 container was held for 3–10 s where
/// the kernel alone kept all three resident. Reaching starts the enforcement only once the
/// kernel has taken a sixteenth of what it holds, or it is held at its memory.high.
#[test]
fn regression_the_few_mib_swapped_as_a_step_began_held_the_lightest_container() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let (short, carry) = reclaiming(10.0);
    let at_step = |swap: u64| {
        [
            plain(200 * MIB, 1, 0.5, 0),
            swapped(196 * MIB, 2, 2.0, 2 * MIB, swap),
            plain(200 * MIB, 3, 0.5, 0),
        ]
    };
    let few = at_step(4 * MIB);
    let names = names(&few);
    let out = step(&law, &rows(&few, &names), &short, None, None, carry);
    assert!(out.capacity.short);
    assert!(!out.enforcing, "4 MiB of 196 swapped: not denied");
    for c in &out.cgroups {
        assert_eq!(c.ceiling, None, "{c:?}");
        assert!(
            c.writes.high.is_none() && c.writes.reclaim.is_none(),
            "{c:?}"
        );
    }
    assert_eq!(
        out.cgroups[1].protect,
        196 * MIB,
        "still protected: it reaches"
    );

    // A sixteenth of it in swap: denied, the split is enforced.
    let many = at_step(196 * MIB / 16);
    let out = step(&law, &rows(&many, &names), &short, None, None, carry);
    assert!(out.enforcing);
    assert!(out.cgroups[0].ceiling.is_some_and(|c| c < 200 * MIB));

    // Held at its memory.high, with nothing swapped: enforced too.
    let mut held = at_step(0);
    held[1].sample.high = Limit::Bytes(198 * MIB);
    let out = step(&law, &rows(&held, &names), &short, None, None, carry);
    assert!(out.enforcing);
}

/// Regression (host-kube on 6.1, 2026-11-29, two runs in four: the weight-1 pod +12–13 % over
/// its share): the daemon's holds kept free memory above the kernel's low watermark, kswapd
/// idled for five ticks, the host no longer counted as short, the enforcement ended and all
/// three pods were released to `max`; they regrew by their own speed until kswapd woke. The
/// enforcement now lasts while a cgroup the daemon holds presses at its memory.high; free
/// memory still reaches them by weight (while the kernel's reclaim is idle the memory.high of
/// a held cgroup rises with its share), and once none presses at its limit it ends.
#[test]
fn regression_the_daemons_own_holds_ended_the_shortage_and_released_every_pod() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    // kswapd has not scanned for SHORT_TICKS ticks; 2 MiB available.
    let quiet = |available: u64| HostSample {
        mem_available: available,
        ..scanning(150, Some(psi(0.5)))
    };
    let carry = Carry {
        scanned: Some(150),
        short_for: 0,
        enforcing: true,
        ..Carry::default()
    };
    let held_at = |current: u64, weight: u32, high: u64| {
        let mut c = plain(current, weight, 0.5, 0);
        c.sample.high = Limit::Bytes(high);
        c
    };
    let pods = [
        held_at(95 * MIB, 1, 95 * MIB),
        held_at(163 * MIB, 2, 164 * MIB),
        plain(200 * MIB, 3, 0.5, 0),
    ];
    let names = names(&pods);
    let tick = |cgs: &[Cg], available: u64, carry: Carry| {
        step(
            &law,
            &rows(cgs, &names),
            &quiet(available),
            None,
            None,
            carry,
        )
    };
    let out = tick(&pods, 2 * MIB, carry);
    assert!(!out.capacity.short, "kswapd idle for SHORT_TICKS ticks");
    assert!(
        out.enforcing && out.next.enforcing,
        "held pods press at their memory.high"
    );
    for c in &out.cgroups[..2] {
        assert!(c.ceiling.is_some(), "still held: {c:?}");
        assert_ne!(c.writes.high, Some(Limit::Max), "not let go: {c:?}");
    }

    // The balloon deflates: 300 MiB available; the held pods' limits rise with their shares
    // (1:2 of what the weight-3 pod leaves: 186 and 372 MiB), not to max at once.
    let out = tick(&pods, 300 * MIB, carry);
    let highs: Vec<Option<u64>> = out.cgroups[..2]
        .iter()
        .map(|c| c.writes.high.and_then(Limit::bytes).map(|h| h / MIB))
        .collect();
    assert!(
        matches!(highs[..], [Some(a), Some(b)] if (180..200).contains(&a) && b > 360),
        "{highs:?}"
    );
    // The tick after, neither presses at its new limit: the enforcement ends, both let go.
    let raised: Vec<Cg> = pods
        .iter()
        .zip(&out.cgroups)
        .map(|(p, c)| {
            let mut p = p.clone();
            p.sample.high = c.writes.high.unwrap_or(p.sample.high);
            p
        })
        .collect();
    let out = tick(&raised, 300 * MIB, out.next);
    assert!(!out.enforcing, "nobody presses, the host not short");
    for c in &out.cgroups[..2] {
        // Let go: back to max, written once usage comes within reach of the old limit.
        assert_eq!(c.ceiling, None, "{c:?}");
        assert!(c.writes.high.is_none_or(|h| h == Limit::Max), "{c:?}");
    }
}

/// Regression (host-hostile on 6.12, CI of 2026-11-29: the weight-50 container −15.1 % in the
/// 420M step; host-kube on 6.12, 3 runs in 14 past −10 %): on the multi-gen LRU kswapd takes
/// one held cgroup in bites of 40–57 MiB every 10–20 s, below its memory.low too, and the
/// others hardly; held at its share, it sat 4–11 % under it on average while the others sat
/// over theirs. Each held cgroup's ceiling now moves by the integral of its error beyond the
/// common one: the bitten one's rises, the others' fall, what it gets they give, and each
/// trim stays within an eighth of its share.
#[test]
fn regression_the_kernels_bites_kept_one_held_container_under_its_share() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let short = scanning(150, Some(psi(20.0)));
    let carry = enforcing_carry();
    let held_at = |current: u64, weight: u32| held_at(current, weight, 20.0, 2 * MIB);
    // Weights 1:2:2 over 388 MiB: shares 77.6, 155.2, 155.2; the first bitten to 72 (what
    // kswapd took is in swap), within a guard of its share (still held).
    let mut cgs = vec![
        held_at(72 * MIB, 1),
        held_at(158 * MIB, 2),
        held_at(158 * MIB, 2),
    ];
    cgs[0].sample.swap_current = Some(40 * MIB);
    let names = names(&cgs);
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    assert!(out.enforcing);
    let shares: Vec<u64> = out
        .plan
        .decisions
        .iter()
        .map(|d| d.level_share.expect("held to a share"))
        .collect();
    assert_eq!(
        shares.iter().map(|s| s / MIB).collect::<Vec<_>>(),
        [77, 155, 155]
    );
    for (c, s) in out.cgroups.iter().zip(&shares) {
        assert_eq!(c.ceiling, Some(*s), "no trim carried yet: at the share");
    }
    let mut carry = out.next;
    for (c, o) in cgs.iter_mut().zip(&out.cgroups) {
        c.trim = o.trim;
    }
    // The same samples for 40 ticks: the trims grow and stop at their bounds.
    let mut out = out;
    for _ in 0..40 {
        out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
        carry = out.next;
        for (c, o) in cgs.iter_mut().zip(&out.cgroups) {
            c.trim = o.trim;
        }
    }
    let trims: Vec<i64> = out.cgroups.iter().map(|c| c.trim.bytes).collect();
    assert_eq!(
        trims[0],
        i64::try_from(shares[0] / 8).expect("small"),
        "the bitten one's: its bound"
    );
    assert!(trims[1] < 0 && trims[2] < 0, "{trims:?}");
    assert!(
        trims.iter().sum::<i64>().unsigned_abs() < MIB,
        "what it gets the others give: {trims:?}"
    );
    let ceiling = out.cgroups[0].ceiling.expect("held");
    assert!(
        ceiling > shares[0] + 9 * MIB,
        "its ceiling above its share: {ceiling}"
    );
    assert!(
        out.cgroups[1].ceiling.is_some_and(|c| c < shares[1]),
        "{:?}",
        out.cgroups[1]
    );

    // The host no longer short and nobody pressing: the enforcement ends, the trims with it.
    let quiet = HostSample {
        mem_available: 300 * MIB,
        ..scanning(100, Some(psi(0.0)))
    };
    let idle: Vec<Cg> = cgs
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.sample.high = Limit::Bytes(c.sample.current + 64 * MIB);
            c
        })
        .collect();
    let out = step(
        &law,
        &rows(&idle, &names),
        &quiet,
        None,
        None,
        Carry {
            short_for: 0,
            ..carry
        },
    );
    assert!(!out.enforcing);
    assert!(
        out.cgroups.iter().all(|c| c.trim.bytes == 0),
        "{:?}",
        out.cgroups
    );
}

/// Regression (seed 002 on 6.12, 2026-11-29: at the 300M step the weight-3 toucher sat at its
/// whole 250 MiB for a share of 283, its demand the whole pool because kswapd's bites made it
/// refault; that error wound its trim to its bound and the two held beside it under their
/// shares, the touchers held 89–92 % of what the kernel alone left them, and at the 450M step
/// it sat 7 % above its share). One under its share by more than it has in swap is left out
/// of the trims.
#[test]
fn regression_a_resident_cgroup_under_a_share_it_cannot_use_wound_the_trims() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let short = scanning(150, Some(psi(20.0)));
    let held_at = |current: u64, weight: u32| held_at(current, weight, 20.0, 2 * MIB);
    // As above, but the first is under its share with nothing in swap: all it uses is there.
    let mut cgs = vec![
        held_at(72 * MIB, 1),
        held_at(158 * MIB, 2),
        held_at(158 * MIB, 2),
    ];
    let names = names(&cgs);
    let mut carry = enforcing_carry();
    for _ in 0..40 {
        let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
        assert!(out.enforcing);
        carry = out.next;
        for (c, o) in cgs.iter_mut().zip(&out.cgroups) {
            c.trim = o.trim;
        }
    }
    let trims: Vec<i64> = cgs.iter().map(|c| c.trim.bytes).collect();
    assert!(
        trims.iter().all(|t| t.unsigned_abs() < MIB),
        "not bitten: no trim moves {trims:?}"
    );
    // Bitten: what it lacks (5.6 MiB) is in swap. It counts, and its trim moves by an
    // eighth of its error a tick (the common error is 0: Σ usage is Σ shares).
    cgs[0].sample.swap_current = Some(6 * MIB);
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    let first = out.cgroups[0].trim.bytes;
    assert!(
        first > 0 && first <= 6 * (1 << 20) / 8,
        "in contention again: {first}"
    );
}

/// Regression (seed 002, the 150M step, 2026-11-29: the weight-1 toucher held at 173–196 MiB
/// in 5 of 6 runs where the kernel alone left it 211–250): the weight-2 and weight-3 touchers,
/// fully resident at 250 MiB, faulted back kswapd's bites, reached, and were given the whole
/// pool as their demand (shares of 237 and 355 MiB for working sets of 250), so the weight-1
/// toucher's share fell below what it held. A cgroup faulting back anonymous memory wants at
/// most what it holds plus what it has in swap.
#[test]
fn regression_a_resident_reaching_cgroup_was_given_the_whole_pool() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    // Between two of kswapd's bursts, 40 MiB available: a pool of 700 MiB by 1:2:3. All three
    // work on 250 MiB; the first has 90 of it in swap, the others 2, faulting back 4 MiB a tick.
    let short = HostSample {
        mem_available: 40 * MIB,
        ..scanning(100, Some(psi(20.0)))
    };
    let carry = Carry {
        short_for: capacity::SHORT_TICKS,
        ..enforcing_carry()
    };
    let mut cgs = vec![
        swapped(160 * MIB, 1, 20.0, 20 * MIB, 90 * MIB),
        swapped(250 * MIB, 2, 5.0, 4 * MIB, 2 * MIB),
        swapped(250 * MIB, 3, 5.0, 4 * MIB, 2 * MIB),
    ];
    let names = names(&cgs);
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    assert!(out.enforcing);
    let demands: Vec<u64> = out.plan.decisions.iter().map(|d| d.entitlement).collect();
    assert!(
        demands[1] <= 252 * MIB && demands[2] <= 252 * MIB,
        "no more than they use: {demands:?}"
    );
    assert_eq!(out.capacity.bytes, 700 * MIB);
    assert!(
        demands[0] >= 190 * MIB,
        "the rest for the first: {demands:?}"
    );
    assert!(
        out.cgroups.iter().all(|c| c.ceiling.is_none()),
        "nobody held: {:?}",
        out.cgroups
    );

    // Faulting back file pages, they lack about what they read back: no more than that.
    for c in &mut cgs[1..] {
        c.refaulted_file_lately = c.refaulted_lately;
    }
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    let demands: Vec<u64> = out.plan.decisions.iter().map(|d| d.entitlement).collect();
    assert!(
        demands[1] <= 256 * MIB && demands[2] <= 256 * MIB,
        "what they hold, swap and file refaults: {demands:?}"
    );
    assert!(
        demands[0] >= 188 * MIB,
        "the rest for the first: {demands:?}"
    );
    // Without swap accounting there is no bound: the whole pool, by weight, and the first is
    // held to its share.
    for c in &mut cgs[1..] {
        c.sample.swap_current = None;
    }
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    let first = out.cgroups[0].ceiling.expect("held");
    assert!(first < 125 * MIB, "its share of 700 by 1:6: {first}");
}

/// Regression (host-seed002 on 6.1, the 150M step, 2026-12-01): a fully resident toucher
/// that read back a few MiB of its program's pages after kswapd's bite had no bound on what
/// it reached for: its share rose to half the pool and the weight-1 toucher beside it was cut
/// from 175 to 120 MiB, three times in 15 s. It wants what it holds, its swap and what it
/// read back.
#[test]
fn regression_a_resident_cgroup_reading_back_its_program_was_given_half_the_pool() {
    let capacity = kernel_capacity();
    let law = shipped_law(&capacity);
    let (short, carry) = reclaiming(20.0);
    let carry = Carry {
        short_for: capacity::SHORT_TICKS,
        enforcing: true,
        ..carry
    };
    let mut third = swapped(251 * MIB, 3, 0.5, 5 * MIB, 2 * MIB);
    third.refaulted_file_lately = 5 * MIB;
    let cgs = vec![
        swapped(163 * MIB, 1, 20.0, 60 * MIB, 90 * MIB),
        swapped(250 * MIB, 2, 5.0, 4 * MIB, 2 * MIB),
        third,
    ];
    let names = names(&cgs);
    let out = step(&law, &rows(&cgs, &names), &short, None, None, carry);
    let d = &out.plan.decisions;
    assert_eq!(
        d[2].entitlement,
        258 * MIB,
        "251 held + 2 swapped + 5 read back"
    );
    assert!(
        d[0].entitlement >= 150 * MIB,
        "the first keeps the rest of what they hold: {:?}",
        d.iter().map(|d| d.entitlement / MIB).collect::<Vec<_>>()
    );
}

/// Regression (host-hostile on 6.12, 2026-11-29, fourth session: −8.3 % for the weight-50
/// container in the 300M step): as the step began the daemon was bringing that container down
/// from far above its share while kswapd took the other two far below theirs; those errors
/// were the step's, and they wound its trim down to −7 MiB, so it sat under its share for the
/// rest of the phase. While a cgroup held to a share is a quarter above it, every trim is 0.
#[test]
fn regression_a_steps_start_wound_the_trims() {
    const M: i64 = 1 << 20;
    // Shares of 475 MiB by 1:2:2: 95, 190, 190. The first 146 MiB, half above its share.
    let cgs = [
        bitten_with_trim(146 * MIB, 1, M, 95 * MIB),
        bitten_with_trim(171 * MIB, 2, 0, 190 * MIB),
        bitten_with_trim(158 * MIB, 2, -M, 190 * MIB),
    ];
    let out = trim_tick(&cgs, enforcing_carry());
    let trims: Vec<i64> = out.cgroups.iter().map(|c| c.trim.bytes).collect();
    assert_eq!(trims, [0, 0, 0], "a step has begun: they start again");

    // Within a quarter of its share: they move again.
    let cgs = [
        bitten_with_trim(110 * MIB, 1, M, 95 * MIB),
        bitten_with_trim(190 * MIB, 2, 0, 190 * MIB),
        bitten_with_trim(175 * MIB, 2, -M, 190 * MIB),
    ];
    let out = trim_tick(&cgs, enforcing_carry());
    let trims: Vec<i64> = out.cgroups.iter().map(|c| c.trim.bytes).collect();
    assert!(trims[0] < M && trims[2] > -M, "{trims:?}");
}

/// Regression (seed 002 on 6.12, 2026-11-29, sixth session: the weight-1 toucher +6 to +10 %
/// at the 450M step in three runs, the weight-2 +8 % at 600M): the trim kswapd's bites had
/// earned a cgroup at one step was carried into the next, where nothing bit it, and held it
/// above its new share while it unwound at a sixteenth of its error a tick. A step's start
/// (a held cgroup a quarter above its share) clears the trims, and the tick after it every
/// ceiling is its share.
#[test]
fn regression_a_trim_carried_across_a_step_held_a_cgroup_above_its_new_share() {
    const M: i64 = 1 << 20;
    // The 450M step has begun: shares 70 / 140 / 210 of 420 MiB by 1:2:3; the first carries
    // +9 MiB from the last step, the second is still 60 MiB above its new share.
    let mut cgs = vec![
        bitten_with_trim(77 * MIB, 1, 9 * M, 93 * MIB),
        bitten_with_trim(200 * MIB, 2, -4 * M, 187 * MIB),
        bitten_with_trim(143 * MIB, 3, -5 * M, 280 * MIB),
    ];
    let out = trim_tick(&cgs, enforcing_carry());
    let trims: Vec<i64> = out.cgroups.iter().map(|c| c.trim.bytes).collect();
    assert_eq!(trims, [0, 0, 0], "a step has begun");
    // The next tick, settled: the first is held at its share, not 9 MiB above it.
    for (c, o) in cgs.iter_mut().zip(&out.cgroups) {
        c.trim = o.trim;
    }
    cgs[1].sample.current = 140 * MIB;
    cgs[1].sample.high = Limit::Bytes(142 * MIB);
    cgs[2].sample.current = 203 * MIB;
    cgs[2].sample.high = Limit::Bytes(205 * MIB);
    let out = trim_tick(&cgs, out.next);
    let share = out.plan.decisions[0].level_share.expect("held to a share");
    assert_eq!(out.cgroups[0].ceiling, Some(share), "{:?}", out.cgroups[0]);
}

/// Regression (host-seed002 on 6.12, the 600M step, 2026-12-06: the weight-2 container +10 %):
/// it came into the step with a trim of +4 MiB learnt at the last one, and kswapd bit it from
/// 126 to 42 MiB in the step's first 3 s while the others fell with the pool, none a quarter
/// above its new share. Its trim integrated that transient to its bound and held it 7-10 MiB
/// above its share of 70 for the phase. A share that moved more than a trim's bound from where
/// the trim was learnt drops the trim at once, and the cgroup's errors count again only once it
/// has come within the bound of its new share.
#[test]
fn regression_a_bite_at_a_steps_start_wound_a_trim_held_for_the_phase() {
    const M: i64 = 1 << 20;
    // Learnt at the 450M step (shares 70 / 140 / 210): the second +4 MiB. The 600M step: the
    // first and third at about their new shares, the second bitten far below its.
    let mut cgs = vec![
        bitten_with_trim(30 * MIB, 1, -M, 70 * MIB),
        bitten_with_trim(42 * MIB, 2, 4 * M, 140 * MIB),
        bitten_with_trim(90 * MIB, 3, -3 * M, 210 * MIB),
    ];
    let mut carry = enforcing_carry();
    // It regrows 3 MiB a tick; until it is within an eighth of its share its trim is 0.
    let mut ticks = 0;
    loop {
        let out = trim_tick(&cgs, carry);
        carry = out.next;
        let share = out.plan.decisions[1].level_share.expect("held to a share");
        let within = cgs[1].sample.current + share / 8 >= share;
        let trims: Vec<i64> = out.cgroups.iter().map(|c| c.trim.bytes).collect();
        if within {
            assert!(
                trims[1] != 0,
                "settled at its share, its errors count: {trims:?}"
            );
            break;
        }
        assert_eq!(
            trims[1], 0,
            "tick {ticks}: the step's bite is not the kernel's bias"
        );
        assert!(
            out.cgroups[1]
                .ceiling
                .is_some_and(|c| c <= share + share / 8),
            "tick {ticks}: no trim learnt at the last step in force: {:?} for a share of {share}",
            out.cgroups[1]
        );
        for (c, o) in cgs.iter_mut().zip(&out.cgroups) {
            c.trim = o.trim;
        }
        cgs[1].sample.current += 3 * MIB;
        cgs[1].sample.high = Limit::Bytes(cgs[1].sample.current + 2 * MIB);
        ticks += 1;
        assert!(ticks < 20, "it regrows to its share");
    }
    assert!(ticks >= 3, "it started far below its share: {ticks}");
}

/// Regression (host-kube on 6.12, 2026-12-07, CI −10.4 %, a run with the daemon's view −15.2 %):
/// within the 420M phase kswapd bit the weight-2 pod from 133 to 71 MiB every 10-15 s. The pool
/// is what the pods hold, so each bite moved every share by a sixth, past the trims' bound of an
/// eighth: a trim learnt at one share was dropped at every bite, and the pod the kernel bit
/// never earned one. A bite moves the shares less than a quarter: the trims stay in force, and
/// the bitten pod's grows.
#[test]
fn regression_a_bite_within_a_phase_moved_the_shares_and_dropped_the_trims() {
    const M: i64 = 1 << 20;
    // Learnt at shares 65 / 130 / 195 (the pool 390): the bitten pod +3 MiB, the others less.
    // Then the second bitten to 77 MiB: the pool 337 and the shares 56 / 112 / 168, the second's
    // moved by 18 MiB (more than an eighth of 130, less than a quarter).
    let cgs = [
        bitten_with_trim(62 * MIB, 1, -M, 65 * MIB),
        bitten_with_trim(77 * MIB, 2, 3 * M, 130 * MIB),
        bitten_with_trim(198 * MIB, 3, -2 * M, 195 * MIB),
    ];
    let out = trim_tick(&cgs, enforcing_carry());
    let share = out.plan.decisions[1].level_share.expect("held to a share");
    assert!(
        share.abs_diff(130 * MIB) > 130 * MIB / 8 && share.abs_diff(130 * MIB) < 130 * MIB / 4,
        "the bite moved its share by more than an eighth: {share}"
    );
    let trims: Vec<i64> = out.cgroups.iter().map(|c| c.trim.bytes).collect();
    assert!(
        trims[1] > 3 * M,
        "the bitten pod's trim carried and grown: {trims:?}"
    );
    assert!(trims.iter().sum::<i64>().abs() < M / 64, "{trims:?}");
    assert!(
        out.cgroups[1].ceiling.is_some_and(|c| c > share + 2 * MIB),
        "its trim in force: {:?} for a share of {share}",
        out.cgroups[1]
    );
}

/// Regression (seed 002 on 6.12, 2026-11-29: the weight-1 toucher at 74-79 MiB for a share of
/// 70 at the 450M step of one run): held at its memory.high, a guard above its
/// ceiling, it refaulted into the guard as fast as memory.reclaim took it out, and its trim
/// unwound that at half speed: an error above the share counted for at most a sixteenth of
/// the share, below it an eighth. Both count up to an eighth now.
#[test]
fn regression_an_error_above_the_share_counted_half_and_the_guard_held_it_over() {
    const M: i64 = 1 << 20;
    // Shares 70 / 140 / 210 of 420 MiB by 1:2:3; the first 7 MiB above its share (a tenth,
    // not a step's start), the others under theirs by as much together.
    let cgs = [
        bitten_with_trim(77 * MIB, 1, 0, 70 * MIB),
        bitten_with_trim(137 * MIB, 2, 0, 140 * MIB),
        bitten_with_trim(206 * MIB, 3, 0, 210 * MIB),
    ];
    let out = trim_tick(&cgs, enforcing_carry());
    let shares: Vec<_> = out.plan.decisions.iter().map(|d| d.level_share).collect();
    assert_eq!(
        shares,
        [Some(70 * MIB), Some(140 * MIB), Some(210 * MIB)],
        "held to their shares"
    );
    // Its whole error, an eighth of it a tick: 7/8 MiB off its ceiling (the common error
    // is 0), where the half-counted error took 4.4/8.
    let trims: Vec<i64> = out.cgroups.iter().map(|c| c.trim.bytes).collect();
    assert!(trims[0] <= -6 * M / 8, "{trims:?}");
    assert!(trims.iter().sum::<i64>().abs() < M / 64, "{trims:?}");
}

/// Work-conserving: a configured `max` is still enforced with memory.high (and reclaim),
/// and an operator's memory.high still caps, whatever the split.
#[test]
fn auto_still_enforces_a_configured_max() {
    let capacity = CapacityConfig {
        mode: CapacityMode::Kernel,
        ..CapacityConfig::default()
    };
    let law = shipped_law(&capacity);
    let host = short_host(None);
    let mut cgs = [plain(150 * MIB, 1, 0.0, 0), plain(211 * MIB, 2, 0.0, 0)];
    cgs[1].settings.max = Some(100 * MIB);
    let names = names(&cgs);
    let out = step(
        &law,
        &rows(&cgs, &names),
        &host,
        None,
        None,
        Carry::default(),
    );
    assert_eq!(out.cgroups[0].writes.high, None);
    assert_eq!(out.cgroups[1].ceiling, Some(100 * MIB));
    assert!(
        matches!(out.cgroups[1].writes.high, Some(Limit::Bytes(h)) if h < 211 * MIB),
        "{:?}",
        out.cgroups[1].writes
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The safety rules over arbitrary ticks: memory.high never above the original, never
    /// below the floor (unless the original itself is), never past the ceiling, dropping
    /// at most the larger of max_step and half the gap; memory.low never below the
    /// original; `max` written only to restore it; nothing written from a provisional
    /// sample; reclaim bounded by the step. (memory.max cannot be written at all:
    /// [`Writes`] has no field for it.)
    #[test]
    fn step_keeps_the_safety_rules(
        cgs in prop::collection::vec(cgroup(), 1..8),
        host in host(),
        capacity in capacity_config(),
        step_pct in 1u64..=100,
        marks in prop::option::of((0u64..256, 0u64..256)),
        cut in 0u64..512,
        held in prop::option::of((0u64..4096, 1usize..8)),
        guard_pct in 0u64..=25,
        idle_tax in prop_oneof![Just(0u8), 1u8..=99],
        enforcing in any::<bool>(),
    ) {
        let law = Law {
            capacity: &capacity,
            min_floor: 16 * MIB,
            max_step: Amount::Percent(step_pct as f64),
            reclaim: true,
            guard: Amount::Percent(guard_pct as f64),
            reclaim_passes: 1,
            idle_tax,
        };
        let names = names(&cgs);
        let rows = rows(&cgs, &names);
        let carry = Carry { cut: cut * MIB, held: held.map(|(pool, n)| (pool * MIB, n)), scanned: None, short_for: 0, enforcing };
        let marks = marks.map(|(min, band)| watermarks(min * MIB, band * MIB));
        let out = step(&law, &rows, &host, marks, None, carry);
        prop_assert_eq!(out.cgroups.len(), rows.len());
        prop_assert!(out.rejected.is_none(), "{:?}", out.rejected);
        for (c, (d, p)) in cgs.iter().zip(out.cgroups.iter().zip(&out.plan.decisions)) {
            // A trim only while `kernel` enforces, within an eighth of the share.
            if capacity.mode != CapacityMode::Kernel || !out.enforcing {
                prop_assert_eq!(d.trim, Trim::default());
            }
            let bound = p.level_share.unwrap_or(0) / 8;
            prop_assert!(d.trim.bytes.unsigned_abs() <= bound, "trim {} past {}", d.trim.bytes, bound);
            let w = d.writes;
            if c.provisional {
                prop_assert!(w.is_empty(), "provisional: {:?}", w);
                continue;
            }
            let orig_high = c.originals.high.bytes().unwrap_or(u64::MAX);
            match w.high {
                Some(Limit::Max) => prop_assert_eq!(c.originals.high, Limit::Max),
                Some(Limit::Bytes(h)) => {
                    prop_assert!(h <= orig_high, "above the original: {} > {}", h, orig_high);
                    prop_assert!(h >= d.floor.min(orig_high), "below the floor: {} < {}", h, d.floor);
                    prop_assert_eq!(h % decide::PAGE, 0);
                    let base = c.sample.high.bytes().unwrap_or(u64::MAX).min(c.sample.current);
                    if let Some(ceiling) = d.ceiling && h < base {
                        prop_assert!(h >= ceiling.min(orig_high), "past the ceiling: {} < {}", h, ceiling);
                        if orig_high >= base {
                            let step = law.max_step.of(c.sample.current).max(decide::PAGE)
                                .max(base.saturating_sub(ceiling) / 2);
                            prop_assert!(base - h <= step, "dropped {} > {}", base - h, step);
                        }
                    }
                }
                None => {}
            }
            if let Some(l) = w.low {
                let orig_low = c.originals.low.bytes().unwrap_or(u64::MAX);
                prop_assert!(l.bytes().unwrap_or(u64::MAX) >= orig_low, "low below the original");
            }
            if let Some(r) = w.reclaim {
                // Only toward a target the policy set, never below it or the floor, and
                // by at most the larger of max_step and half the distance.
                let Some(ceiling) = d.ceiling else {
                    return Err(TestCaseError::fail(format!("reclaim {r} without a ceiling")));
                };
                // `kernel` centres the guard on the target: up to half a guard below it.
                let below = if capacity.mode == CapacityMode::Kernel {
                    law.guard.of(ceiling.max(d.floor)) / 2
                } else {
                    0
                };
                let after = c.sample.current - r;
                prop_assert!(
                    after >= ceiling.max(d.floor).saturating_sub(below).max(d.floor),
                    "reclaim {} past the target", r
                );
                let base = c.sample.high.bytes().unwrap_or(u64::MAX).min(c.sample.current);
                let step = law.max_step.of(c.sample.current).max(decide::PAGE)
                    .max(base.saturating_sub(ceiling.max(d.floor)) / 2);
                prop_assert!(
                    base.saturating_sub(after) <= step + below,
                    "reclaim {} beyond the step", r
                );
            }
        }
    }

    /// Restore-ready: with room for everyone (a fixed pool above every usage and no
    /// configured max) the law puts memory.high back to the original, or — for a cgroup
    /// held at its limit, whose hidden demand is the whole pool — raises it first (it is
    /// back at the original once no longer held); it never reclaims.
    #[test]
    fn step_without_pressure_goes_back_to_the_originals(
        cgs in prop::collection::vec(cgroup(), 1..8),
        host in host(),
    ) {
        let capacity = CapacityConfig {
            mode: CapacityMode::Fixed,
            fixed: Some(Amount::Bytes(1 << 50)),
            ..CapacityConfig::default()
        };
        let law = shipped_law(&capacity);
        let cgs: Vec<Cg> = cgs
            .into_iter()
            .map(|c| Cg { settings: Settings { max: None, ..c.settings }, provisional: false, ..c })
            .collect();
        let names = names(&cgs);
        let rows = rows(&cgs, &names);
        let out = step(&law, &rows, &host, None, None, Carry::default());
        for (c, d) in cgs.iter().zip(&out.cgroups) {
            let now = c.sample.high.bytes().unwrap_or(u64::MAX);
            prop_assert!(
                d.writes.high.is_none_or(|h| h == c.originals.high
                    || h.bytes().unwrap_or(u64::MAX) >= now),
                "{:?} -> {:?}", c.sample.high, d.writes.high
            );
            prop_assert!(d.writes.reclaim.is_none(), "reclaim without a shortage: {:?}", d.writes);
        }
    }
}

#[test]
fn ancestors_get_the_sum_of_their_descendants() {
    let m = 4 << 20;
    let got = ancestor_lows([("a/b/c1", m), ("a/b/c2", 2 * m), ("a/x", m + 1), ("top", m)]);
    let want: BTreeMap<String, u64> = [("a".to_owned(), 5 * m), ("a/b".to_owned(), 3 * m)]
        .into_iter()
        .collect();
    assert_eq!(got, want);
}
