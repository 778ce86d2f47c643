//! One whole daemon tick (discover → sample → policy → decide → writes) on a fake cgroup tree
//! in tmpfs, at 1,000 and 10,000 glob-matched cgroups, beside a bare sampler that only reads
//! the same files the way `cgroups-rs` does (open, read everything, close, per file).
//!
//! The tree lives under `/dev/shm` (tmpfs; a tempdir elsewhere if it is missing): one cgroup in
//! ten is busy (1–2 GiB, above its share), the rest idle (a few MiB). Capacity is `auto`, with
//! a reserve of 40 GiB per 1,000 cgroups (about a quarter of what they hold), and MemAvailable
//! alternates between none and a quarter of the reserve each tick, so the pool is squeezed and
//! the water level moves every tick like on a host whose load changes: the busy cgroups above
//! the level get writes, the idle ones none.
//!
//! * `tick/n`: one steady-state tick of a `Controller` that has adopted all n cgroups.
//! * `bare_sampler/n`: the ten files of each of the n cgroups read with `std::fs::read`.
//! * `first_tick/n`: the first tick of a new `Controller`: adoption of n cgroups with one
//!   state save.
//! * `shutdown/n`: `release_all`, restoring every cgroup's original limits.
//!
//! tmpfs is not kernfs: the kernel's cost of generating `memory.stat` and of acting on a
//! write is not in these numbers; both sides of each comparison read the same files.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use memweight_cgroupfs::testing::{FakeCgroup, FakeMeminfo, FakeProc};
use memweightd::config::Config;
use memweightd::controller::Controller;

const MIB: u64 = 1 << 20;

struct Tree {
    dir: tempfile::TempDir,
    proc: FakeProc,
    cgroups: Vec<PathBuf>,
}

fn tree(n: usize) -> Tree {
    let base = Path::new("/dev/shm");
    let dir = if base.is_dir() {
        tempfile::tempdir_in(base)
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir");
    let proc = FakeProc::new(dir.path().join("proc"));
    let root = dir.path().join("cg");
    let cgroups = (0..n)
        .map(|i| {
            let c = FakeCgroup::new(&root, &format!("pods/c{i:05}"));
            let usage = if i % 10 == 0 {
                (1024 + (i as u64 * 37) % 1024) * MIB
            } else {
                (1 + (i as u64 % 7)) * MIB
            };
            c.set_current(usage);
            c.set_stat(usage - usage / 4, usage / 4);
            c.path().to_path_buf()
        })
        .collect();
    Tree { dir, proc, cgroups }
}

/// The reserve for n cgroups: about a quarter of what they hold.
fn reserve(n: usize) -> u64 {
    (40 << 30) * n as u64 / 1000
}

fn meminfo(t: &Tree, available: u64) {
    t.proc.set_meminfo(FakeMeminfo {
        mem_total: 16 << 40,
        mem_free: available,
        mem_available: available,
        ..FakeMeminfo::default()
    });
}

fn controller(t: &Tree) -> Controller {
    let text = format!(
        "cgroup_root = {:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {:?}\n\
         [capacity]\nreserve = {}\npsi_threshold = 0.0\n\
         [[cgroup]]\nglob = \"pods/*\"\n",
        t.dir.path().join("cg"),
        t.proc.path(),
        t.proc.sys_path(),
        t.dir.path().join("state"),
        reserve(t.cgroups.len()),
    );
    let (cfg, rules) = Config::parse(&text, Path::new("bench.toml")).expect("valid");
    Controller::new(cfg, rules).expect("controller")
}

/// The daemon's runtime (`main.rs`): two workers, writes on a bounded blocking pool.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(memweightd::pools::BLOCKING_THREADS)
        .enable_all()
        .build()
        .expect("runtime")
}

fn bare_sample(cgroups: &[PathBuf]) -> usize {
    let mut bytes = 0;
    let mut path = PathBuf::new();
    for dir in cgroups {
        for f in memweight_cgroupfs::SAMPLE_FILES {
            path.clone_from(dir);
            path.push(f);
            bytes += std::fs::read(&path).map_or(0, |b| b.len());
        }
    }
    bytes
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("tick");
    g.sample_size(10);
    for n in [1_000, 10_000] {
        let t = tree(n);
        // Short of the reserve: the busy cgroups are squeezed, by more or less each tick.
        let (a, b) = (0, reserve(n) / 4);
        meminfo(&t, a);
        let mut ctl = controller(&t);
        rt.block_on(ctl.tick()).expect("first tick");
        meminfo(&t, b);
        let r = rt.block_on(ctl.tick()).expect("second tick");
        let limited = r.cgroups.iter().filter(|c| c.wrote_high.is_some()).count();
        assert!(r.pool.pressure && limited > n / 20, "{limited} writes");
        eprintln!("n = {n}: {limited} memory.high writes per tick");
        let mut flip = false;
        g.bench_function(BenchmarkId::new("tick", n), |bch| {
            bch.iter(|| {
                flip = !flip;
                meminfo(&t, if flip { a } else { b });
                let r = rt.block_on(ctl.tick()).expect("tick");
                black_box(r.cgroups.len())
            });
        });
        g.bench_function(BenchmarkId::new("bare_sampler", n), |bch| {
            bch.iter(|| black_box(bare_sample(&t.cgroups)));
        });
        rt.block_on(ctl.release_all());
        drop(ctl);
        g.bench_function(BenchmarkId::new("first_tick", n), |bch| {
            bch.iter_batched(
                || {
                    let _ = std::fs::remove_file(t.dir.path().join("state/state.json"));
                    controller(&t)
                },
                |mut ctl| {
                    let r = rt.block_on(ctl.tick()).expect("tick");
                    black_box(r.cgroups.len());
                    ctl
                },
                BatchSize::PerIteration,
            );
        });
        g.bench_function(BenchmarkId::new("shutdown", n), |bch| {
            bch.iter_batched(
                || {
                    let _ = std::fs::remove_file(t.dir.path().join("state/state.json"));
                    let mut ctl = controller(&t);
                    rt.block_on(ctl.tick()).expect("tick");
                    ctl
                },
                |mut ctl| rt.block_on(ctl.release_all()),
                BatchSize::PerIteration,
            );
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
