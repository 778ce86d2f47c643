//! Unit tests for [`crate::plan`], including the seed 002 table.

use super::*;

const MIB: u64 = 1 << 20;

fn cg(name: &str, usage: u64, weight: u32) -> CgroupInput {
    CgroupInput {
        name: name.to_owned(),
        usage,
        weight,
        floor: 0,
        max: None,
        demand: None,
        active: None,
    }
}

fn seed_cgroups() -> Vec<CgroupInput> {
    vec![
        cg("c1", 2000 * MIB, 1),
        cg("c2", 2000 * MIB, 2),
        cg("c3", 2000 * MIB, 3),
    ]
}

fn targets_mib(p: &Plan) -> Vec<u64> {
    // Nearest MiB, the precision of the seed table.
    p.decisions
        .iter()
        .map(|d| (d.target + MIB / 2) / MIB)
        .collect()
}

/// Seed 002, "Variation of usage over time": (t, capacity, c1, c2, c3) in MB as printed,
/// except t5's "1338", a typo for 1333 (666 + 1338 + 2000 ≠ 4000).
const SEED_TABLE: [(u32, u64, [u64; 3]); 8] = [
    (1, 6000, [2000, 2000, 2000]),
    (2, 5500, [1500, 2000, 2000]),
    (3, 5000, [1000, 2000, 2000]),
    (4, 4500, [833, 1667, 2000]),
    (5, 4000, [666, 1333, 2000]),
    (6, 3500, [500, 1167, 1833]),
    (7, 3000, [500, 1000, 1500]),
    (8, 2500, [417, 833, 1250]),
];

#[test]
fn seed_table_rows_match_except_t6() {
    for (t, capacity, seed) in SEED_TABLE {
        let p = plan(capacity * MIB, &seed_cgroups()).expect("seed input is valid");
        let ours = targets_mib(&p);
        assert_eq!(
            ours.iter().sum::<u64>(),
            capacity,
            "t{t}: targets must fill the pool"
        );
        let close = ours.iter().zip(seed).all(|(&o, s)| o.abs_diff(s) <= 1);
        if t == 6 {
            // Water-filling keeps the 1:2:3 ratio once nobody is capped.
            assert_eq!(ours, vec![583, 1167, 1750], "t6");
            assert!(!close, "t6: the seed's row is not a water-fill");
        } else {
            assert!(close, "t{t}: ours {ours:?} vs seed {seed:?}");
        }
    }
}

#[test]
fn seed_t6_row_breaks_the_weight_ratio_the_seed_keeps_at_t5_and_t7() {
    // At t5 c1:c2 = 1:2 (666:1333); at t7 all three are 1:2:3. The seed's t6 (500, 1167, 1833)
    // has c1 below its share while c3 stays above its own: 500/1 < 1167/2 < 1833/3 is false.
    let seed_t6 = [500u64, 1167, 1833];
    assert!(seed_t6[0] * 3 < seed_t6[2]);
    let p = plan(3500 * MIB, &seed_cgroups()).expect("valid");
    let t: Vec<u64> = p.decisions.iter().map(|d| d.target).collect();
    // Exactly proportional to the weights, up to one byte of rounding.
    assert!((t[0] * 2).abs_diff(t[1]) <= 2 && (t[0] * 3).abs_diff(t[2]) <= 3);
}

#[test]
fn seed_exceed_demonstration() {
    // "Demonstration of exceed value computation": EA 1000/2000/3000, EX 1000/0/−1000.
    let p = plan(
        6000,
        &[cg("c1", 2000, 1), cg("c2", 2000, 2), cg("c3", 2000, 3)],
    )
    .expect("valid");
    assert_eq!(p.total_usage, 6000);
    assert_eq!(p.total_weight, 6);
    let ea: Vec<u64> = p.decisions.iter().map(|d| d.expected).collect();
    let ex: Vec<i64> = p.decisions.iter().map(|d| d.exceed).collect();
    assert_eq!(ea, [1000, 2000, 3000]);
    assert_eq!(ex, [1000, 0, -1000]);
    assert!(!p.pressure);
    assert!(p.decisions.iter().all(|d| d.reason == Reason::NoPressure));
}

#[test]
fn reasons_under_pressure() {
    let p = plan(4500 * MIB, &seed_cgroups()).expect("valid");
    assert!(p.pressure);
    assert!(!p.overcommitted);
    let d = &p.decisions;
    assert_eq!(d[0].reason, Reason::AboveShare { by: d[0].reclaim });
    assert_eq!(d[0].reclaim, 2000 * MIB - d[0].target);
    assert_eq!(d[2].reason, Reason::WithinShare);
    assert_eq!(d[2].reclaim, 0);
    assert_eq!(
        d[0].reason.to_string(),
        format!("above weighted share by {}", human::bytes(d[0].reclaim))
    );
}

#[test]
fn floor_holds_a_cgroup_above_its_share() {
    let mut cgs = seed_cgroups();
    cgs[0].floor = 1000 * MIB;
    let p = plan(3000 * MIB, &cgs).expect("valid");
    let d = &p.decisions;
    assert_eq!(d[0].target, 1000 * MIB);
    assert_eq!(d[0].reason, Reason::AtFloor);
    assert_eq!(d[0].reason.to_string(), "at floor");
    // The rest (2000 MiB) is split 2:3 between c2 and c3.
    assert_eq!(d[1].target, 800 * MIB);
    assert_eq!(d[2].target, 1200 * MIB);
    // Entitlement ignores floors: the plain 1:2:3 split.
    assert_eq!(d[0].entitlement, 500 * MIB);
    assert_eq!(d[1].entitlement, 1000 * MIB);
    assert_eq!(d[2].entitlement, 1500 * MIB);
}

#[test]
fn floor_exactly_at_share_is_not_at_floor() {
    let mut cgs = seed_cgroups();
    cgs[0].floor = 500 * MIB;
    let p = plan(3000 * MIB, &cgs).expect("valid");
    assert_eq!(p.decisions[0].target, 500 * MIB);
    assert!(matches!(p.decisions[0].reason, Reason::AboveShare { .. }));
}

#[test]
fn max_caps_with_and_without_pressure() {
    let mut cgs = seed_cgroups();
    cgs[2].max = Some(1000 * MIB);
    let calm = plan(6000 * MIB, &cgs).expect("valid");
    assert!(!calm.pressure);
    assert_eq!(calm.decisions[2].target, 1000 * MIB);
    assert_eq!(calm.decisions[2].reason, Reason::CappedByMax);
    assert_eq!(calm.decisions[2].reason.to_string(), "capped by max");
    assert_eq!(calm.decisions[0].reason.to_string(), "no pressure");

    let tight = plan(3000 * MIB, &cgs).expect("valid");
    assert!(tight.pressure);
    assert_eq!(tight.decisions[2].target, 1000 * MIB);
    assert_eq!(tight.decisions[2].reason, Reason::CappedByMax);
    // c1 and c2 share the remaining 2000 MiB 1:2, capped at 2000 each.
    assert_eq!(
        tight.decisions[0].target + tight.decisions[1].target,
        2000 * MIB
    );
}

#[test]
fn overcommitted_floors() {
    let mut cgs = seed_cgroups();
    for c in &mut cgs {
        c.floor = 1500 * MIB;
    }
    let p = plan(4000 * MIB, &cgs).expect("valid");
    assert!(p.pressure && p.overcommitted);
    for d in &p.decisions {
        assert_eq!(d.target, 1500 * MIB);
        assert_eq!(d.reason, Reason::Overcommitted);
    }
}

#[test]
fn empty_zero_and_idle_inputs() {
    let p = plan(1 << 30, &[]).expect("empty is valid");
    assert!(p.decisions.is_empty() && !p.pressure && p.total_weight == 0);

    let p = plan(0, &seed_cgroups()).expect("valid");
    assert!(p.pressure);
    assert!(
        p.decisions
            .iter()
            .all(|d| d.target == 0 && d.reclaim == d.usage)
    );

    let idle = [cg("a", 0, 1), cg("b", 0, 5)];
    let p = plan(0, &idle).expect("valid");
    assert!(!p.pressure);
    assert!(p.decisions.iter().all(|d| d.target == 0 && d.exceed == 0));
}

#[test]
fn u64_sized_values_saturate_instead_of_overflowing() {
    let big = [cg("a", u64::MAX, 1), cg("b", u64::MAX, 10_000)];
    let p = plan(u64::MAX, &big).expect("valid");
    assert_eq!(p.total_usage, u64::MAX);
    assert_eq!(p.decisions[1].expected, u64::MAX);
    assert!(p.decisions[0].exceed > 0);
    let sum: u128 = p.decisions.iter().map(|d| u128::from(d.target)).sum();
    assert_eq!(sum, u128::from(u64::MAX));
}

#[test]
fn bad_inputs_are_named() {
    let err = plan(1, &[cg("a", 1, 0)]).expect_err("weight 0");
    assert_eq!(
        err,
        PolicyError::InvalidWeight {
            name: "a".into(),
            error: WeightError::new(0)
        }
    );
    assert_eq!(
        err.to_string(),
        "cgroup \"a\": weight must be a whole number 1..=10000, got 0"
    );
    let err = plan(1, &[cg("a", 1, 10_001)]).expect_err("weight too big");
    assert!(matches!(
        err,
        PolicyError::InvalidWeight { ref error, .. } if error.got == "10001"
    ));
    let err = plan(1, &[cg("a", 1, 1), cg("a", 2, 2)]).expect_err("duplicate");
    assert_eq!(err, PolicyError::DuplicateName { name: "a".into() });
    let err = plan(1, &[cg("", 1, 1)]).expect_err("empty name");
    assert_eq!(err, PolicyError::EmptyName { index: 0 });
}

#[test]
fn weights_are_checked_in_one_place() {
    assert_eq!(check_weight(1), Ok(1));
    assert_eq!(check_weight(10_000), Ok(10_000));
    assert_eq!(check_weight(0), Err(WeightError::new(0)));
    assert_eq!(check_weight(10_001), Err(WeightError::new(10_001)));
    assert_eq!(
        check_weight(u64::from(u32::MAX) + 1),
        Err(WeightError::new(4_294_967_296_u64))
    );
    assert_eq!(parse_weight(" 300 "), Ok(300));
    assert_eq!(
        parse_weight("abc").map_err(|e| e.to_string()),
        Err("must be a whole number 1..=10000, got \"abc\"".to_owned())
    );
    for bad in ["0", "10001", "-1", "1.5", "", "2e3", "99999999999"] {
        assert!(parse_weight(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn decisions_keep_input_order() {
    let cgs = [cg("z", 100, 1), cg("a", 100, 1), cg("m", 100, 1)];
    let p = plan(100, &cgs).expect("valid");
    let names: Vec<&str> = p.decisions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["z", "a", "m"]);
    // 100/3: the spare byte goes to the first name, "a", wherever it sits.
    let t: Vec<u64> = p.decisions.iter().map(|d| d.target).collect();
    assert_eq!(t, [33, 34, 33]);
}

#[test]
fn reason_kinds_are_stable() {
    assert_eq!(Reason::AboveShare { by: 1 }.kind(), "above_share");
    assert_eq!(Reason::Overcommitted.to_string(), "floors overcommitted");
    assert_eq!(Reason::WithinShare.to_string(), "within weighted share");
}

/// The idle tax (issue 11): an idle cgroup gives its memory up before active ones; with all
/// memory active, or at 0 %, it is the plain plan.
#[test]
fn idle_tax_takes_idle_memory_first() {
    let with = |name: &str, usage: u64, active: u64| CgroupInput {
        active: Some(active * MIB),
        ..cg(name, usage * MIB, 1)
    };
    let cgs = [
        with("idle", 250, 0),
        with("a", 250, 250),
        with("b", 250, 250),
    ];
    let plain = plan(600 * MIB, &cgs).expect("valid");
    assert_eq!(
        targets_mib(&plain),
        [200, 200, 200],
        "weights alone: equal shares"
    );
    let taxed = plan_with_tax(600 * MIB, &cgs, 75).expect("valid");
    // λ = 400 MiB: a and b hold their 250 active, the idle one a quarter of its share.
    assert_eq!(targets_mib(&taxed), [100, 250, 250]);
    assert_eq!(
        taxed.decisions.iter().map(|d| d.target).sum::<u64>(),
        600 * MIB
    );
    assert_eq!(taxed.decisions[0].level_share, Some(100 * MIB));
    // a: all 250 active, then a quarter of the 150 above it: 287.5 MiB.
    assert_eq!(taxed.decisions[1].level_share, Some(575 * MIB / 2));
    assert_eq!(plan_with_tax(600 * MIB, &cgs, 0).expect("valid"), plain);
    // All active: the tax changes nothing.
    let active: Vec<CgroupInput> = cgs
        .iter()
        .map(|c| CgroupInput {
            active: Some(c.usage),
            ..c.clone()
        })
        .collect();
    assert_eq!(
        targets_mib(&plan_with_tax(600 * MIB, &active, 75).expect("valid")),
        targets_mib(&plan(600 * MIB, &active).expect("valid"))
    );
    // Half idle: the active half is kept first, the idle half taxed.
    let half = [with("x", 400, 200), with("y", 400, 400)];
    let p = plan_with_tax(600 * MIB, &half, 75).expect("valid");
    // x: 200 + (λ − 200)/4, y: min(λ, 400): λ = 360 → x 240, y 360.
    assert_eq!(targets_mib(&p), [240, 360]);
    assert_eq!(
        plan_with_tax(1, &half, 100),
        Err(PolicyError::InvalidTax { tax: 100 })
    );
}
