//! Property tests for the water-fill and the plan built on it.

use proptest::prelude::*;

use super::reference::{exact_level, water_fill_naive};
use super::*;

const PAGE: u64 = 4096;

prop_compose! {
    fn cgroup(max_usage: u64)(
        usage in 0..=max_usage,
        weight in MIN_WEIGHT..=MAX_WEIGHT,
        floor_part in prop_oneof![Just(0u64), 0..=max_usage],
        max_part in proptest::option::of(0..=max_usage),
    ) -> (u64, u32, u64, Option<u64>) {
        (usage, weight, floor_part, max_part)
    }
}

prop_compose! {
    /// Up to 12 cgroups with unique names and a capacity from 0 to a bit above total demand.
    fn inputs(max_usage: u64)(
        raw in proptest::collection::vec(cgroup(max_usage), 0..12),
        cap_permille in 0u64..=1200,
    ) -> (u64, Vec<CgroupInput>) {
        let cgroups: Vec<CgroupInput> = raw
            .into_iter()
            .enumerate()
            .map(|(i, (usage, weight, floor, max))| CgroupInput {
                name: format!("cg{i:02}"),
                usage,
                weight,
                floor,
                max,
                demand: None,
                active: None,
            })
            .collect();
        let demand: u128 = cgroups.iter().map(|c| u128::from(c.hi())).sum();
        let capacity = u64::try_from(demand * u128::from(cap_permille) / 1000).unwrap_or(u64::MAX);
        (capacity, cgroups)
    }
}

fn slots_of(cgroups: &[CgroupInput]) -> Vec<Slot> {
    cgroups
        .iter()
        .map(|c| Slot::new(c.weight, c.lo(), c.hi()))
        .collect()
}

fn targets(p: &Plan) -> Vec<u64> {
    p.decisions.iter().map(|d| d.target).collect()
}

proptest! {
    #[test]
    fn targets_stay_in_bounds_and_fill_the_pool((capacity, cgs) in inputs(1 << 40)) {
        let p = plan(capacity, &cgs).expect("generated inputs are valid");
        let sum_lo: u128 = cgs.iter().map(|c| u128::from(c.lo())).sum();
        let sum_t: u128 = p.decisions.iter().map(|d| u128::from(d.target)).sum();
        prop_assert!(sum_t <= u128::from(capacity).max(sum_lo));
        if p.pressure && !p.overcommitted {
            prop_assert_eq!(sum_t, u128::from(capacity));
        }
        for (c, d) in cgs.iter().zip(&p.decisions) {
            prop_assert!(c.lo() <= d.target && d.target <= c.hi(), "{c:?} → {d:?}");
            prop_assert_eq!(d.reclaim, c.usage - d.target);
            prop_assert!(d.entitlement <= c.hi());
        }
    }

    #[test]
    fn more_weight_never_means_a_smaller_target(
        (capacity, cgs) in inputs(1 << 40),
        pick in any::<prop::sample::Index>(),
        extra in 1u32..=MAX_WEIGHT,
    ) {
        if cgs.is_empty() {
            return Ok(());
        }
        let i = pick.index(cgs.len());
        let before = plan(capacity, &cgs).expect("valid").decisions[i].target;
        let mut heavier = cgs.clone();
        heavier[i].weight = heavier[i].weight.saturating_add(extra).min(MAX_WEIGHT);
        let after = plan(capacity, &heavier).expect("valid").decisions[i].target;
        // One byte of slack: the spare rounding bytes may move.
        prop_assert!(after + 1 >= before, "{before} → {after}");
    }

    #[test]
    fn scaling_all_weights_changes_nothing((capacity, cgs) in inputs(1 << 40), k in 2u32..=50) {
        let small: Vec<CgroupInput> = cgs
            .iter()
            .map(|c| CgroupInput { weight: 1 + c.weight % (MAX_WEIGHT / k), ..c.clone() })
            .collect();
        let scaled: Vec<CgroupInput> = small
            .iter()
            .map(|c| CgroupInput { weight: c.weight * k, ..c.clone() })
            .collect();
        let a = targets(&plan(capacity, &small).expect("valid"));
        let b = targets(&plan(capacity, &scaled).expect("valid"));
        for (x, y) in a.iter().zip(&b) {
            prop_assert!(x.abs_diff(*y) <= 1, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn input_order_does_not_matter(
        (capacity, cgs) in inputs(1 << 40),
        seed in any::<u64>(),
    ) {
        let mut shuffled = cgs.clone();
        // Deterministic Fisher–Yates driven by the generated seed.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let j = usize::try_from(state % (i as u64 + 1)).unwrap_or(0);
            shuffled.swap(i, j);
        }
        let a = plan(capacity, &cgs).expect("valid");
        let b = plan(capacity, &shuffled).expect("valid");
        for d in &a.decisions {
            let e = b.decisions.iter().find(|e| e.name == d.name).expect("same names");
            prop_assert_eq!(d, e);
        }
    }

    #[test]
    fn entitlement_equals_target_without_floors((capacity, cgs) in inputs(1 << 40)) {
        let no_floors: Vec<CgroupInput> =
            cgs.iter().map(|c| CgroupInput { floor: 0, ..c.clone() }).collect();
        let p = plan(capacity, &no_floors).expect("valid");
        for d in &p.decisions {
            prop_assert_eq!(d.entitlement, d.target);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn agrees_with_naive_reference_bytewise((capacity, cgs) in inputs(3000)) {
        // With 1-byte trims every trimmed cgroup ends within one byte below the naive level
        // ℓ ≥ λ, and Σ W·(ℓ − λ) ≤ k trimmed cgroups: the naive result is within
        // 1 + k·W_i/ΣW bytes of the exact one, ours within 1.
        let slots = slots_of(&cgs);
        let fast = water_fill(capacity, &slots);
        let naive = water_fill_naive(capacity, &slots, 1);
        let total_weight: u64 = slots.iter().map(|s| u64::from(s.weight)).sum();
        let n = slots.len() as u64;
        for (s, (f, m)) in slots.iter().zip(fast.iter().zip(&naive)) {
            let tolerance = 2 + (n * u64::from(s.weight)).div_ceil(total_weight.max(1));
            prop_assert!(f.abs_diff(*m) <= tolerance, "fast {fast:?} naive {naive:?}");
        }
    }

    #[test]
    fn within_one_byte_of_the_exact_sorted_sweep((capacity, cgs) in inputs(1 << 40)) {
        let slots = slots_of(&cgs);
        let Some((num, den)) = exact_level(capacity, &slots) else {
            return Ok(());
        };
        let fill = water_fill_level(capacity, &slots);
        let same = matches!(fill.level, Level::Exact { num: a, den: b } if a * den == num * b);
        prop_assert!(same, "{:?} vs {num}/{den}", fill.level);
        for (s, &t) in slots.iter().zip(&fill.shares) {
            let exact = num * u128::from(s.weight);
            let (lo, hi) = (u128::from(s.lo.min(s.hi)), u128::from(s.hi));
            let floor = (exact / den).clamp(lo, hi);
            let ceil = exact.div_ceil(den).clamp(lo, hi);
            prop_assert!(floor <= u128::from(t) && u128::from(t) <= ceil, "{s:?}: {t} vs {num}/{den}");
        }
    }

    #[test]
    fn agrees_with_naive_page_steps((capacity, cgs) in inputs(64 << 20)) {
        // With page-sized trims the naive loop overshoots by up to a page on each cgroup it
        // trims last, and the others absorb it: the bound is one page per cgroup.
        let slots = slots_of(&cgs);
        let fast = water_fill(capacity, &slots);
        let naive = water_fill_naive(capacity, &slots, PAGE);
        let bound = PAGE * slots.len() as u64;
        for (f, n) in fast.iter().zip(&naive) {
            prop_assert!(f.abs_diff(*n) <= bound, "fast {fast:?} naive {naive:?}");
        }
    }
}

proptest! {
    /// The water-filling optimality condition, checked directly on u64-scale inputs: no byte
    /// can move from a cgroup above its floor to one below its cap and lower its normalised
    /// level. With rounding: (T_i − 1)/W_i ≤ (T_j + 1)/W_j.
    #[test]
    fn no_byte_can_move_to_a_lower_level((capacity, cgs) in inputs(1 << 40)) {
        let slots = slots_of(&cgs);
        let fill = water_fill_level(capacity, &slots);
        if !matches!(fill.level, Level::Exact { .. }) {
            return Ok(());
        }
        let t = &fill.shares;
        for (i, a) in slots.iter().enumerate() {
            if t[i] <= a.lo.min(a.hi) {
                continue;
            }
            for (j, b) in slots.iter().enumerate() {
                if i == j || t[j] >= b.hi {
                    continue;
                }
                let left = u128::from(t[i] - 1) * u128::from(b.weight);
                let right = u128::from(t[j] + 1) * u128::from(a.weight);
                prop_assert!(left <= right, "slot {i} {a:?}={} vs slot {j} {b:?}={}", t[i], t[j]);
            }
        }
    }
}

proptest! {
    /// The taxed plan keeps the plain plan's bounds and pool, equals it at 0 % or with all
    /// memory active, and never gives a cgroup with idle memory more than the plain plan does
    /// when every other cgroup is all active.
    #[test]
    fn idle_tax_keeps_bounds_and_pool(
        (capacity, cgs) in inputs(1 << 34),
        tax in 0u8..=99,
        idle_permille in proptest::collection::vec(0u64..=1000, 12),
    ) {
        let taxed: Vec<CgroupInput> = cgs
            .iter()
            .zip(&idle_permille)
            .map(|(c, &p)| CgroupInput { active: Some(c.usage - c.usage / 1000 * p), ..c.clone() })
            .collect();
        let p = plan_with_tax(capacity, &taxed, tax).expect("valid");
        let plain = plan(capacity, &cgs).expect("valid");
        prop_assert_eq!(p.pressure, plain.pressure);
        for (c, d) in taxed.iter().zip(&p.decisions) {
            prop_assert!(d.target >= c.lo() && d.target <= c.hi(), "{} outside [{}, {}]", d.target, c.lo(), c.hi());
        }
        let sum: u128 = p.decisions.iter().map(|d| u128::from(d.target)).sum();
        if plain.pressure && !plain.overcommitted {
            prop_assert_eq!(sum, u128::from(capacity));
        }
        if tax == 0 {
            prop_assert_eq!(targets(&p), targets(&plain));
        }
        let all_active: Vec<CgroupInput> = cgs.iter().map(|c| CgroupInput { active: Some(c.usage), ..c.clone() }).collect();
        prop_assert_eq!(targets(&plan_with_tax(capacity, &all_active, tax).expect("valid")), targets(&plain));
    }
}
