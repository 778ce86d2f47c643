//! Water-fill benchmarks: the exact [`water_fill`] against the naive
//! trim-the-largest loop, at n = 10 … 100k cgroups.
//!
//! Inputs are deterministic (xorshift): usage 64 MiB … 8 GiB, weights 1 … 10000, a floor on
//! every fourth cgroup, a max on every seventh, capacity 70 % of the demand for `water_fill`.
//! The naive loop costs `O(n · excess / step)`, so it runs on a mild squeeze (excess of
//! 16 pages per cgroup, page-sized steps), next to the exact fill on the same squeeze, and
//! only up to n = 10 000 (one naive run there takes about a second; at 100k it would take
//! minutes).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memweight_policy::reference::water_fill_naive;
use memweight_policy::{Slot, water_fill};

const PAGE: u64 = 4096;

fn slots(n: usize) -> Vec<Slot> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|i| {
            let usage = (64 << 20) + next() % (8 << 30);
            let weight = u32::try_from(1 + next() % 10_000).unwrap_or(1);
            let lo = if i % 4 == 0 { usage / 3 } else { 0 };
            let hi = if i % 7 == 0 { usage / 2 } else { usage };
            Slot::new(weight, lo, hi)
        })
        .collect()
}

fn demand(slots: &[Slot]) -> u64 {
    slots.iter().map(|s| s.hi).sum()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("water_fill");
    for n in [10usize, 100, 1_000, 10_000, 100_000] {
        let input = slots(n);
        let capacity = demand(&input) / 10 * 7;
        group.bench_with_input(BenchmarkId::new("exact", n), &input, |b, s| {
            b.iter(|| water_fill(black_box(capacity), black_box(s)));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("mild_squeeze");
    group.sample_size(10);
    for n in [10usize, 100, 1_000, 10_000] {
        let input = slots(n);
        let squeeze = demand(&input) - 16 * PAGE * n as u64;
        group.bench_with_input(BenchmarkId::new("exact", n), &input, |b, s| {
            b.iter(|| water_fill(black_box(squeeze), black_box(s)));
        });
        group.bench_with_input(BenchmarkId::new("naive", n), &input, |b, s| {
            b.iter(|| water_fill_naive(black_box(squeeze), black_box(s), PAGE));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
