use super::*;
use proptest::prelude::*;

prop_compose! {
    fn slots_and_capacity()(
        raw in proptest::collection::vec(
            (1u32..=10_000, 0u64..=1 << 36, 0u64..=1 << 36, any::<bool>()),
            1..40,
        ),
        permille in 0u128..=1000,
    ) -> (u64, Vec<Slot>) {
        let slots: Vec<Slot> = raw
            .into_iter()
            .map(|(w, a, b, floored)| Slot::new(w, if floored { a.min(b) } else { 0 }, a.max(b)))
            .collect();
        let lo: u128 = slots.iter().map(|s| u128::from(s.low())).sum();
        let hi: u128 = slots.iter().map(|s| u128::from(s.hi)).sum();
        let cap = lo + (hi - lo) * permille / 1000;
        (u64::try_from(cap).unwrap_or(u64::MAX), slots)
    }
}

proptest! {
    /// Both searches — the f64 fast path (when it answers) and the exact selection it
    /// falls back to — find the level of the textbook sort-and-sweep.
    #[test]
    fn both_searches_find_the_swept_level((capacity, slots) in slots_and_capacity()) {
        let Some((num, den)) = crate::reference::exact_level(capacity, &slots) else {
            return Ok(());
        };
        let cap = u128::from(capacity);
        let (a, b) = find_level(cap, &slots);
        prop_assert_eq!(a * den, num * b, "exact search");
        if let Some((a, b, _)) = fill_fast(cap, &slots, &Totals::of(&slots)) {
            prop_assert_eq!(a * den, num * b, "fast path");
        }
    }
}

#[test]
fn empty_input_gives_empty_output() {
    assert!(water_fill(100, &[]).is_empty());
    assert!(water_fill(0, &[]).is_empty());
}

#[test]
fn enough_room_gives_everyone_hi() {
    let slots = [Slot::new(1, 0, 10), Slot::new(5, 3, 20)];
    assert_eq!(water_fill(30, &slots), vec![10, 20]);
    assert_eq!(water_fill_level(30, &slots).level, Level::Unconstrained);
}

#[test]
fn floors_above_capacity_give_everyone_lo() {
    let slots = [Slot::new(1, 10, 100), Slot::new(1, 20, 100)];
    let fill = water_fill_level(25, &slots);
    assert_eq!(fill.shares, vec![10, 20]);
    assert_eq!(fill.level, Level::Floors);
}

#[test]
fn floor_above_hi_is_clamped_to_hi() {
    let slots = [Slot::new(1, 500, 100), Slot::new(1, 0, 100)];
    assert_eq!(water_fill(150, &slots), vec![100, 50]);
}

#[test]
fn zero_capacity_gives_floors() {
    let slots = [Slot::new(1, 0, 100), Slot::new(3, 7, 100)];
    assert_eq!(water_fill(0, &slots), vec![0, 7]);
}

#[test]
fn shares_follow_weights_and_caps() {
    // Seed 002, t4: weights 1,2,3, 2000 each, capacity 4500 → 833⅓, 1666⅔, 2000.
    let slots = [
        Slot::new(1, 0, 2000),
        Slot::new(2, 0, 2000),
        Slot::new(3, 0, 2000),
    ];
    assert_eq!(water_fill(4500, &slots), vec![833, 1667, 2000]);
}

#[test]
fn leftover_bytes_go_to_the_largest_fraction() {
    let slots = [
        Slot::new(1, 0, 100),
        Slot::new(1, 0, 100),
        Slot::new(1, 0, 100),
    ];
    let shares = water_fill(100, &slots);
    assert_eq!(shares.iter().sum::<u64>(), 100);
    // Equal remainders and weights: lower index first.
    assert_eq!(shares, vec![34, 33, 33]);
}

#[test]
fn floor_binds_and_others_share_the_rest() {
    let slots = [Slot::new(1, 400, 1000), Slot::new(1, 0, 1000)];
    assert_eq!(water_fill(600, &slots), vec![400, 200]);
}

#[test]
fn unweighted_slots_only_get_what_is_left() {
    let slots = [Slot::new(0, 0, 100), Slot::new(1, 0, 100)];
    assert_eq!(water_fill(120, &slots), vec![20, 100]);
    assert_eq!(water_fill(80, &slots), vec![0, 80]);
}

#[test]
fn huge_values_do_not_overflow() {
    let slots = [
        Slot::new(10_000, 0, u64::MAX),
        Slot::new(1, 0, u64::MAX),
        Slot::new(u32::MAX, u64::MAX - 1, u64::MAX),
    ];
    let shares = water_fill(u64::MAX, &slots);
    assert_eq!(shares[2], u64::MAX - 1);
    assert_eq!(
        shares.iter().map(|&s| u128::from(s)).sum::<u128>(),
        u128::from(u64::MAX)
    );
}

#[test]
fn many_ties_agree_with_the_naive_loop() {
    // Few distinct weights and sizes: many equal breakpoints, which stalls sampled pivots
    // and exercises the exact-median fallback.
    let slots: Vec<Slot> = (0u32..300)
        .map(|i| Slot::new(1 + i % 3, u64::from(i % 5), 10 + u64::from(i % 7)))
        .collect();
    let demand: u64 = slots.iter().map(|s| s.hi).sum();
    for capacity in [0, 700, demand / 2, demand - 1, demand] {
        let fast = water_fill(capacity, &slots);
        let naive = crate::reference::water_fill_naive(capacity, &slots, 1);
        for (i, (f, n)) in fast.iter().zip(&naive).enumerate() {
            assert!(
                f.abs_diff(*n) <= 1,
                "capacity {capacity}, slot {i}: {f} vs {n}"
            );
        }
    }
    let identical = vec![Slot::new(7, 0, 1000); 1000];
    let shares = water_fill(500_000, &identical);
    assert!(shares.iter().all(|&s| s == 500));
}

#[test]
fn div_rem_corrects_any_estimate() {
    for (a, b) in [
        (0u128, 1u64),
        (7, 3),
        (1 << 100, 12_345),
        (u128::MAX, 1),
        (99, 100),
    ] {
        for estimate in [0.0, -1.0, f64::NAN, 1e40, (a as f64) / (b as f64)] {
            let wide = u128::from(b);
            assert_eq!(
                div_rem(a, b, estimate),
                (a / wide, a % wide),
                "{a}/{b} ≈ {estimate}"
            );
        }
    }
}

#[test]
fn fast_path_accepts_unweighted_slots() {
    // An unweighted slot sits at its floor at every level; it must not count as "near a
    // bound" (0 = 0·λ) and push every input that has one onto the exact search.
    let slots = [
        Slot::new(0, 0, 500),
        Slot::new(1, 0, 2000),
        Slot::new(2, 0, 2000),
    ];
    let fast = fill_fast(1500, &slots, &Totals::of(&slots));
    let Some((num, den, _)) = fast else {
        panic!("fast path gave up on {slots:?}");
    };
    assert_eq!(num * 3, 1500 * den, "λ = 500");
    assert_eq!(water_fill(1500, &slots), vec![0, 500, 1000]);
}

#[test]
fn flat_fill_reports_the_smallest_level() {
    // f(λ) = 14 for every λ in [1/3, 1/2]: slot 0 is full from 1/3 on, slot 2 leaves its
    // floor only after 1/2. Every level there gives the same shares; the smallest is
    // reported.
    let slots = [
        Slot::new(3, 0, 1),
        Slot::new(0, 6, 9),
        Slot::new(2, 1, 9),
        Slot::new(2, 4, 2),
        Slot::new(2, 5, 4),
    ];
    let fill = water_fill_level(14, &slots);
    assert_eq!(fill.shares, vec![1, 6, 1, 2, 4]);
    assert!(
        matches!(fill.level, Level::Exact { num, den } if num * 3 == den),
        "{:?}",
        fill.level
    );
}

#[test]
fn level_reports_exact_lambda() {
    let slots = [
        Slot::new(1, 0, 2000),
        Slot::new(2, 0, 2000),
        Slot::new(3, 0, 2000),
    ];
    let fill = water_fill_level(3000, &slots);
    assert_eq!(fill.level, Level::Exact { num: 3000, den: 6 });
    assert_eq!(fill.shares, vec![500, 1000, 1500]);
}
