//! Daemon-level tests: ticks against a fake cgroupfs tree, checking what was written.
//!
//! The kernel's reaction to these writes is proven in the lab (`cargo xtask lab test`); here
//! the fake tree stands still and only the daemon's decisions and bookkeeping are checked.

use memweight_proto::ctl::CgroupState;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memweight_cgroupfs::Limit;
use memweight_cgroupfs::testing::{FakeCgroup, FakeMeminfo, FakeProc};
use memweightd::config::Config;
use memweightd::controller::Controller;

mod common;

use common::MIB;

struct Tree {
    dir: tempfile::TempDir,
    proc: FakeProc,
    cgroups: Vec<FakeCgroup>,
}

impl Tree {
    fn cg(&self, i: usize) -> &FakeCgroup {
        &self.cgroups[i]
    }
    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("cg")
    }
    fn config(&self, extra: &str) -> String {
        format!(
            "cgroup_root = {:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {:?}\ntick = \"100ms\"\n\
             control = {{ socket = {:?} }}\nmetrics = {{ enabled = false }}\n{extra}\n",
            self.root(),
            self.proc.path(),
            self.proc.sys_path(),
            self.dir.path().join("state"),
            self.dir.path().join("memweightd.sock"),
        )
    }
}

/// Three cgroups `lab/c1..c3` with weights 1, 2, 3 and 2000 MiB each (the seed's example).
fn seed_tree() -> Tree {
    let dir = tempfile::tempdir().expect("tempdir");
    let (proc, cgroups) = common::seed_cgroups(dir.path());
    Tree { dir, proc, cgroups }
}

const SEED_RULES: &str = r#"
[[cgroup]]
path = "lab/c1"
weight = 1
[[cgroup]]
path = "lab/c2"
weight = 2
[[cgroup]]
path = "lab/c3"
weight = 3
"#;

fn controller(tree: &Tree, extra: &str) -> Controller {
    let text = tree.config(&format!("{extra}\n{SEED_RULES}"));
    let (cfg, rules) = Config::parse(&text, Path::new("test.toml")).expect("valid test config");
    Controller::new(cfg, rules).expect("controller starts on the fake tree")
}

fn high_bytes(c: &FakeCgroup) -> u64 {
    c.read_high().trim().parse().unwrap_or(u64::MAX)
}

#[tokio::test]
async fn pressure_writes_weighted_targets_and_entitlements() {
    let tree = seed_tree();
    // guard = "0%": memory.high at the target (the law where memory.reclaim is missing).
    let mut ctl = controller(
        &tree,
        "max_step = \"100%\"\nguard = \"0%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"4500M\"",
    );
    let report = ctl.tick().await.expect("tick").clone();
    assert!(report.pool.pressure);
    assert_eq!(report.pool.capacity, 4500 * MIB);
    assert_eq!(report.pool.total_usage, 6000 * MIB);
    // Water-filling 4500 over demands 2000 each, weights 1:2:3: c3 keeps 2000, 2500 splits 1:2.
    let targets: Vec<u64> = report.cgroups.iter().map(|c| c.target).collect();
    assert!(targets[0].abs_diff(2500 * MIB / 3) <= 4096, "{targets:?}");
    assert!(targets[1].abs_diff(5000 * MIB / 3) <= 4096, "{targets:?}");
    assert_eq!(targets[2], 2000 * MIB);
    // memory.high: the water level λ·W, page-aligned, never below the target.
    let h1 = high_bytes(tree.cg(0));
    let h2 = high_bytes(tree.cg(1));
    let h3 = high_bytes(tree.cg(2));
    assert!(h1 >= targets[0] && h1 - targets[0] < 8192, "c1 high {h1}");
    assert!(h2 >= targets[1] && h2 - targets[1] < 8192, "c2 high {h2}");
    assert!(
        h3 >= 2000 * MIB,
        "c3 is below its level and may grow to it: {h3}"
    );
    assert_eq!(h1 % 4096, 0);
    // memory.low: entitlements ordered by weight, never above memory.high.
    let low: Vec<u64> = tree
        .cgroups
        .iter()
        .map(|c| c.read_low().trim().parse().expect("numeric low"))
        .collect();
    assert!(low[0] < low[1] && low[1] <= low[2], "{low:?}");
    assert!(low[0] <= h1 && low[1] <= h2);
    for c in &tree.cgroups {
        assert_eq!(c.read_max().trim(), "max", "memory.max is never written");
    }
}

/// The integration tests' configs set `proc_root` and `cgroup_root` to fakes but not
/// `sys_root`, so the law read this machine's own `/sys/kernel/mm/lru_gen/enabled`: how it
/// counts free memory while holding depended on the machine the tests ran on.
#[tokio::test]
async fn regression_integration_tests_read_the_machines_own_lru() {
    let tree = seed_tree();
    let report = controller(&tree, "").tick().await.expect("tick").clone();
    assert_eq!(
        report.pool.multi_gen_lru,
        Some(false),
        "the fake's classic LRU"
    );
    tree.proc.set_multi_gen_lru(true);
    let report = controller(&tree, "").tick().await.expect("tick").clone();
    assert_eq!(
        report.pool.multi_gen_lru,
        Some(true),
        "the fake's multi-gen LRU"
    );
}

#[tokio::test]
async fn high_drops_by_half_the_gap_or_max_step_per_tick() {
    let tree = seed_tree();
    let mut ctl = controller(
        &tree,
        "max_step = \"10%\"\nguard = \"0%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    // c1's level is 500 MiB: half of the 1500 MiB gap (more than 10 % of usage).
    ctl.tick().await.expect("tick");
    assert_eq!(high_bytes(tree.cg(0)), 1250 * MIB, "2000 MiB minus 750");
    // The kernel would pull usage down; the fake does it by hand.
    tree.cg(0).set_current(1250 * MIB);
    ctl.tick().await.expect("tick");
    assert_eq!(high_bytes(tree.cg(0)), 875 * MIB);
    // Near the level 10 % of usage is more than half the gap: at the level within a few
    // ticks, never below it.
    let mut ticks = 2;
    while high_bytes(tree.cg(0)) > 500 * MIB {
        tree.cg(0).set_current(high_bytes(tree.cg(0)));
        ctl.tick().await.expect("tick");
        assert!(high_bytes(tree.cg(0)) >= 500 * MIB);
        ticks += 1;
        assert!(
            ticks <= 8,
            "still at {} after {ticks} ticks",
            high_bytes(tree.cg(0))
        );
    }
}

/// Reclaim before throttling (issue 11): with the default guard, memory.high comes down a guard
/// (8 % of the target) above where usage goes, memory.reclaim takes usage the rest of the way,
/// and at the target the cgroup's regrowth into the guard is reclaimed each tick while
/// memory.high stays put.
#[tokio::test]
async fn reclaim_moves_usage_and_high_stays_a_guard_above_the_target() {
    let tree = seed_tree();
    let mut ctl = controller(
        &tree,
        "max_step = \"10%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    let r = ctl.tick().await.expect("tick").clone();
    // The guards of the three held-back cgroups (8 % of their targets 500, 1000 and 1500 MiB)
    // come out of the pool first: 2760 MiB is shared 1:2:3.
    assert_eq!(r.pool.guards, 240 * MIB);
    let target = r.cgroups[0].target;
    assert!(target.abs_diff(460 * MIB) < MIB, "{target}");
    let guard = target * 8 / 100;
    let page = |v: u64| v.div_ceil(4096) * 4096;
    // Half of the gap (more than 10 % of usage), plus the guard.
    let step = (2000 * MIB - target) / 2;
    let first = page(2000 * MIB - step + guard);
    assert_eq!(high_bytes(tree.cg(0)), first);
    assert_eq!(
        tree.cg(0).take_reclaim(),
        Some(step),
        "memory.reclaim takes the step before memory.high comes down above it"
    );
    // The kernel would take usage down by what memory.reclaim asked and to memory.high; the
    // fake does it by hand.
    let mut usage = 2000 * MIB - step;
    let mut ticks = 1;
    loop {
        tree.cg(0).set_current(usage);
        ctl.tick().await.expect("tick");
        ticks += 1;
        usage = usage
            .saturating_sub(tree.cg(0).take_reclaim().unwrap_or(0))
            .min(high_bytes(tree.cg(0)));
        if high_bytes(tree.cg(0)) == page(target + guard) {
            break;
        }
        assert!(
            ticks <= 6,
            "still at {} after {ticks} ticks",
            high_bytes(tree.cg(0))
        );
    }
    assert_eq!(usage, target, "down to the target, not just to memory.high");
    // At the target: the workload refaults into the guard; memory.reclaim takes it back and
    // memory.high is not rewritten.
    tree.cg(0).set_current(target + guard);
    let before = high_bytes(tree.cg(0));
    ctl.tick().await.expect("tick");
    assert_eq!(high_bytes(tree.cg(0)), before);
    assert_eq!(tree.cg(0).take_reclaim(), Some(guard));
    // Within the slack of the target nothing is asked.
    tree.cg(0).set_current(target + MIB);
    ctl.tick().await.expect("tick");
    assert_eq!(tree.cg(0).take_reclaim(), None);
}

/// What a pass between ticks asked of `c`'s memory.reclaim: its job runs on the blocking pool,
/// so this waits for it (up to 2 s).
async fn pass_reclaim(ctl: &mut Controller, c: &FakeCgroup) -> Option<u64> {
    ctl.reclaim_pass().await;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if let Some(b) = c.take_reclaim() {
            return Some(b);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The passes between ticks take a held cgroup's regrowth back to the mark its tick's
/// memory.reclaim left it at, so that a cgroup regrowing faster than its guard in a tick does
/// not reach its memory.high and reclaim its own pages in the kernel's throttle (the weight-1
/// Redis server at 580M on 6.12: `memory.events` high 7-11 a second, PSI 3-5 %). They write
/// nothing else, nothing within the slack, nothing to a cgroup not held, and nothing in a dry run.
#[tokio::test]
async fn reclaim_passes_take_regrowth_back_to_the_ticks_mark() {
    let tree = seed_tree();
    let mut ctl = controller(
        &tree,
        "max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    // Down to the target in a few ticks (the fake moves usage as the kernel would).
    let mut usage = 2000 * MIB;
    for _ in 0..8 {
        tree.cg(0).set_current(usage);
        ctl.tick().await.expect("tick");
        usage = usage
            .saturating_sub(tree.cg(0).take_reclaim().unwrap_or(0))
            .min(high_bytes(tree.cg(0)));
    }
    let mark = usage;
    let high = high_bytes(tree.cg(0));
    assert!(
        high > mark,
        "memory.high {high} a guard above the mark {mark}"
    );
    // Regrown by 20 MiB since the tick: the pass takes it back, and only that.
    tree.cg(0).set_current(mark + 20 * MIB);
    assert_eq!(pass_reclaim(&mut ctl, tree.cg(0)).await, Some(20 * MIB));
    assert_eq!(
        high_bytes(tree.cg(0)),
        high,
        "the pass writes no memory.high"
    );
    // Within the slack (2 % of usage): nothing.
    tree.cg(0).set_current(mark + MIB);
    assert_eq!(pass_reclaim(&mut ctl, tree.cg(0)).await, None);
    // Gone between the tick and the pass: skipped without an error.
    tree.cg(1).remove();
    ctl.reclaim_pass().await;
    assert_eq!(ctl.counters().write_errors, 0);
    ctl.release_all().await;

    // A cgroup the law does not hold (no pressure) gets no pass.
    let tree = seed_tree();
    let mut ctl = controller(&tree, "[capacity]\nmode = \"fixed\"\nfixed = \"9000M\"");
    ctl.tick().await.expect("tick");
    tree.cg(0).set_current(2100 * MIB);
    assert_eq!(pass_reclaim(&mut ctl, tree.cg(0)).await, None);

    // A dry run writes nothing between ticks either.
    let tree = seed_tree();
    let mut ctl = controller(
        &tree,
        "enforce = false\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    ctl.tick().await.expect("tick");
    tree.cg(0).set_current(2100 * MIB);
    assert_eq!(pass_reclaim(&mut ctl, tree.cg(0)).await, None);
}

#[tokio::test]
async fn no_pressure_leaves_high_alone() {
    let tree = seed_tree();
    let mut ctl = controller(&tree, "[capacity]\nmode = \"fixed\"\nfixed = \"8G\"");
    let r = ctl.tick().await.expect("tick").clone();
    assert!(!r.pool.pressure);
    for c in &tree.cgroups {
        assert_eq!(c.read_high().trim(), "max");
    }
    assert!(
        r.cgroups.iter().all(|c| c.reason == "no pressure"),
        "{:?}",
        r.cgroups
    );
}

#[tokio::test]
async fn reserve_capacity_follows_mem_available() {
    let tree = seed_tree();
    tree.proc.set_meminfo(FakeMeminfo {
        mem_total: 8192 * MIB,
        mem_available: 0,
        mem_free: 0,
        swap_total: 8192 * MIB,
        swap_free: 8192 * MIB,
    });
    let mut ctl = controller(
        &tree,
        "max_step = \"100%\"\n[capacity]\nmode = \"reserve\"\nreserve = \"600M\"\npsi_threshold = 0.0",
    );
    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(
        r.pool.capacity,
        5400 * MIB,
        "6000 held, 600 short of the reserve"
    );
    assert!(r.pool.pressure);
    assert!(high_bytes(tree.cg(0)) < high_bytes(tree.cg(1)));
}

#[tokio::test]
async fn dry_run_writes_nothing() {
    let tree = seed_tree();
    let mut ctl = controller(
        &tree,
        "enforce = false\n[capacity]\nmode = \"fixed\"\nfixed = \"1G\"",
    );
    let r = ctl.tick().await.expect("tick").clone();
    assert!(r.pool.pressure);
    assert!(r.cgroups.iter().all(|c| c.state == CgroupState::DryRun));
    assert!(
        r.cgroups.iter().any(|c| c.wrote_high.is_some()),
        "decisions are still shown"
    );
    for c in &tree.cgroups {
        assert_eq!(c.read_high().trim(), "max");
        assert_eq!(c.read_low().trim(), "0");
        assert_eq!(c.take_reclaim(), None);
    }
    ctl.release_all().await;
    assert!(
        !tree.dir.path().join("state").exists(),
        "dry run writes no state file"
    );
}

#[tokio::test]
async fn release_restores_originals() {
    let tree = seed_tree();
    tree.cg(0).set_high(Limit::Bytes(1900 * MIB));
    tree.cg(0).set_low(Limit::Bytes(10 * MIB));
    let mut ctl = controller(
        &tree,
        "max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    ctl.tick().await.expect("tick");
    assert!(high_bytes(tree.cg(0)) < 1900 * MIB);
    ctl.release_all().await;
    assert_eq!(high_bytes(tree.cg(0)), 1900 * MIB);
    assert_eq!(tree.cg(0).read_low().trim(), (10 * MIB).to_string());
    assert_eq!(tree.cg(1).read_high().trim(), "max");
    assert_eq!(tree.cg(1).read_low().trim(), "0");
    let state = std::fs::read_to_string(tree.dir.path().join("state/state.json")).expect("state");
    assert!(
        !state.contains("lab/c1"),
        "released cgroups leave the state: {state}"
    );
}

#[tokio::test]
async fn restart_after_kill_keeps_recorded_originals() {
    let tree = seed_tree();
    tree.cg(0).set_high(Limit::Bytes(1950 * MIB));
    {
        let mut ctl = controller(
            &tree,
            "max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
        );
        ctl.tick().await.expect("tick");
        // Dropped without release_all: what kill -9 leaves behind.
    }
    let written = high_bytes(tree.cg(0));
    assert!(written < 1950 * MIB);
    let mut ctl = controller(&tree, "[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"");
    ctl.tick().await.expect("tick");
    ctl.release_all().await;
    assert_eq!(
        high_bytes(tree.cg(0)),
        1950 * MIB,
        "the original, not the value we wrote"
    );
}

/// Issue 23: a truncated `state.json` made the daemon and `memweightd --restore` refuse to
/// start, leaving the cgroups it had throttled as they were. The previous generation holds
/// the originals: the next start uses it and gives them back.
#[tokio::test]
async fn truncated_state_file_falls_back_to_the_previous_generation() {
    let tree = seed_tree();
    tree.cg(0).set_high(Limit::Bytes(1950 * MIB));
    let fixed = "max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"";
    {
        let mut ctl = controller(&tree, fixed);
        ctl.tick().await.expect("tick");
        // A second generation: state.json.prev is the first, with every original.
        let set = memweight_proto::ctl::Command::Set {
            cgroup: "lab/c2".into(),
            weight: 4,
            min: None,
            max: None,
        };
        let answer = memweightd::commands::handle(&mut ctl, set, std::path::Path::new("x.toml"));
        assert!(
            matches!(answer, memweight_proto::ctl::Outcome::Ok(_)),
            "{answer:?}"
        );
        // Dropped without release_all: what kill -9 leaves behind.
    }
    assert!(high_bytes(tree.cg(0)) < 1950 * MIB, "throttled");
    let state = tree.dir.path().join("state/state.json");
    let text = std::fs::read_to_string(&state).expect("state");
    std::fs::write(&state, &text[..text.len() / 3]).expect("truncate");
    // `memweightd --restore` (ExecStopPost) and the next start both get past it.
    let text = tree.config(SEED_RULES);
    let (cfg, _) = Config::parse(&text, Path::new("t.toml")).expect("valid");
    let mut restore = Controller::new(cfg, memweightd::config::Rules::none()).expect("restore");
    assert_eq!(restore.restore_only(), 0, "every original restored");
    assert_eq!(high_bytes(tree.cg(0)), 1950 * MIB, "the original is back");
    drop(restore);
    let mut ctl = controller(&tree, fixed);
    ctl.tick().await.expect("tick");
    ctl.release_all().await;
    assert_eq!(high_bytes(tree.cg(0)), 1950 * MIB);
}

#[tokio::test]
async fn restart_with_cgroup_no_longer_configured_restores_it() {
    let tree = seed_tree();
    {
        let mut ctl = controller(
            &tree,
            "max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
        );
        ctl.tick().await.expect("tick");
    }
    assert_ne!(tree.cg(0).read_high().trim(), "max");
    let text = tree.config("[[cgroup]]\npath = \"lab/c3\"\nweight = 3");
    let (cfg, rules) = Config::parse(&text, Path::new("t.toml")).expect("valid");
    let mut ctl = Controller::new(cfg, rules).expect("start");
    ctl.tick().await.expect("tick");
    assert_eq!(
        tree.cg(0).read_high().trim(),
        "max",
        "stale original restored"
    );
    assert_eq!(tree.cg(1).read_high().trim(), "max");
}

#[tokio::test]
async fn vanished_cgroup_is_dropped_quietly() {
    let tree = seed_tree();
    let mut ctl = controller(&tree, "[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"");
    ctl.tick().await.expect("tick");
    tree.cg(1).remove();
    let r = ctl
        .tick()
        .await
        .expect("tick survives a removed cgroup")
        .clone();
    assert_eq!(r.cgroups.len(), 2);
    assert!(r.cgroups.iter().all(|c| c.cgroup != "lab/c2"));
    assert_eq!(ctl.counters().write_errors, 0);
    ctl.release_all().await;
}

#[tokio::test]
async fn floor_holds_when_there_is_no_swap() {
    let tree = seed_tree();
    tree.proc.set_meminfo(FakeMeminfo {
        swap_total: 0,
        swap_free: 0,
        ..FakeMeminfo::default()
    });
    let mut ctl = controller(
        &tree,
        "max_step = \"100%\"\nmin_floor = \"16M\"\n[capacity]\nmode = \"fixed\"\nfixed = \"1G\"",
    );
    ctl.tick().await.expect("tick");
    for c in &tree.cgroups {
        assert!(
            high_bytes(c) >= 1916 * MIB,
            "anon without swap is never squeezed: {}",
            c.read_high()
        );
    }
}

#[tokio::test]
async fn globs_adopt_new_cgroups_and_skip_nested_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let proc = FakeProc::new(dir.path().join("proc"));
    let root = dir.path().join("cg");
    let a = FakeCgroup::new(&root, "machine.slice/libpod-a.scope");
    a.set_current(100 * MIB);
    let text = format!(
        "cgroup_root = {root:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {:?}\n\
         [[cgroup]]\nglob = \"machine.slice/*\"\nweight = 5\n\
         [[cgroup]]\nglob = \"machine.slice/*/*\"\n",
        proc.path(),
        proc.sys_path(),
        dir.path().join("state")
    );
    let (cfg, rules) = Config::parse(&text, Path::new("t.toml")).expect("valid");
    let mut ctl = Controller::new(cfg, rules).expect("start");
    assert_eq!(ctl.tick().await.expect("tick").cgroups.len(), 1);
    let b = FakeCgroup::new(&root, "machine.slice/libpod-b.scope");
    b.set_current(100 * MIB);
    let _nested = FakeCgroup::new(&root, "machine.slice/libpod-b.scope/inner");
    let r = ctl.tick().await.expect("tick").clone();
    let paths: Vec<&str> = r.cgroups.iter().map(|c| c.cgroup.as_str()).collect();
    assert_eq!(
        paths,
        [
            "machine.slice/libpod-a.scope",
            "machine.slice/libpod-b.scope"
        ]
    );
    assert!(r.cgroups.iter().all(|c| c.weight == 5));
}

#[test]
fn refuses_a_root_that_is_not_cgroup_v2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "cgroup_root = {:?}\nstate_dir = {:?}\n",
        dir.path(),
        dir.path().join("s")
    );
    let (cfg, rules) = Config::parse(&text, Path::new("t.toml")).expect("valid");
    let err = Controller::new(cfg, rules)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("cgroup"), "{err}");
}

/// Writes a config that squeezes the seed tree (a fixed 3000M pool, lowered in one step) and
/// returns its path.
fn squeeze_config(tree: &Tree) -> std::path::PathBuf {
    let cfg = tree.dir.path().join("memweight.toml");
    std::fs::write(
        &cfg,
        tree.config(&format!(
            "max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"\n{SEED_RULES}"
        )),
    )
    .expect("write config");
    cfg
}

/// The binary: SIGTERM restores the originals and exits 0.
#[test]
fn sigterm_restores_originals() {
    let tree = seed_tree();
    tree.cg(2).set_low(Limit::Bytes(7 * MIB));
    let cfg = squeeze_config(&tree);
    let child = Command::new(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--config")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memweightd");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tree.cg(0).read_high().trim() == "max" {
        assert!(Instant::now() < deadline, "daemon never wrote memory.high");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {log}", out.status);
    for c in &tree.cgroups {
        assert_eq!(c.read_high().trim(), "max", "{log}");
    }
    assert_eq!(tree.cg(2).read_low().trim(), (7 * MIB).to_string());
    assert_eq!(tree.cg(0).read_low().trim(), "0");
}

/// The binary: a daemon killed with SIGKILL (or SIGABRT: the watchdog) restores nothing;
/// `memweightd --restore` with the same config, what the unit's `ExecStopPost=` runs, puts
/// every original back and exits 0.
#[test]
fn restore_after_sigkill_puts_every_original_back() {
    let tree = seed_tree();
    tree.cg(0).set_high(Limit::Bytes(1950 * MIB));
    tree.cg(2).set_low(Limit::Bytes(7 * MIB));
    let cfg = squeeze_config(&tree);
    let mut child = Command::new(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--config")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn memweightd");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tree.cg(1).read_high().trim() == "max" || high_bytes(tree.cg(0)) >= 1950 * MIB {
        assert!(Instant::now() < deadline, "daemon never wrote memory.high");
        std::thread::sleep(Duration::from_millis(50));
    }
    // While the daemon runs, --restore refuses (the state directory is locked) and changes
    // nothing: it must not take originals away from a daemon that holds limits.
    let busy = Command::new(env!("CARGO_BIN_EXE_memweightd"))
        .args(["--restore", "--config"])
        .arg(&cfg)
        .output()
        .expect("run memweightd --restore");
    assert!(!busy.status.success(), "--restore beside a running daemon");
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("locked by another process"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    assert_ne!(tree.cg(1).read_high().trim(), "max", "left alone");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert_ne!(
        tree.cg(1).read_high().trim(),
        "max",
        "a killed daemon restores nothing"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_memweightd"))
        .args(["--restore", "--config"])
        .arg(&cfg)
        .output()
        .expect("run memweightd --restore");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {log}", out.status);
    assert_eq!(high_bytes(tree.cg(0)), 1950 * MIB, "{log}");
    assert_eq!(tree.cg(1).read_high().trim(), "max", "{log}");
    assert_eq!(tree.cg(2).read_high().trim(), "max", "{log}");
    assert_eq!(tree.cg(2).read_low().trim(), (7 * MIB).to_string());
    assert_eq!(tree.cg(0).read_low().trim(), "0");
}

/// Regression (issue 10): READY=1 and WATCHDOG=1 were sent only after a tick that succeeded,
/// so a host file that could not be read (EMFILE, say) meant no ping and a SIGABRT from
/// systemd, and at start never ready. Both now follow every tick; `status` says "not ready"
/// until one succeeds.
#[test]
fn regression_watchdog_pings_although_ticks_fail() {
    use std::os::unix::net::UnixDatagram;
    let tree = seed_tree();
    // Ticks fail: the host's memory figures cannot be read.
    std::fs::remove_file(tree.proc.path().join("meminfo")).expect("remove meminfo");
    let cfg = tree.dir.path().join("memweight.toml");
    std::fs::write(&cfg, tree.config(SEED_RULES)).expect("write config");
    let sock_path = tree.dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).expect("bind notify socket");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut child = Command::new(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--config")
        .arg(&cfg)
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "30000000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn memweightd");
    let (mut ready, mut pings) = (false, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while (!ready || pings < 3) && Instant::now() < deadline {
        let Ok(n) = sock.recv(&mut buf) else { break };
        let msg = String::from_utf8_lossy(&buf[..n]);
        ready |= msg.lines().any(|l| l == "READY=1");
        pings += msg.lines().filter(|l| *l == "WATCHDOG=1").count();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "READY=1 although every tick failed");
    assert!(pings >= 3, "only {pings} WATCHDOG=1 while ticks failed");
}

#[test]
fn check_config_reports_bad_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[cgroup]]\npath = \"a\"\nweight = 0\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--check-config")
        .arg(&bad)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cgroup[0].weight"), "{err}");
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/memweight.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--check-config")
        .arg(&good)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Regression: a cgroup held at its memory.high hides its demand. Before the fix the daemon saw
/// Σ usage ≤ C once the throttle worked, declared the pressure over, restored `max`, and the
/// cgroups ballooned again every few seconds (lab run ci-converge, 2026-11-21).
#[tokio::test]
async fn regression_throttled_cgroups_stay_at_their_level() {
    let tree = seed_tree();
    let mut ctl = controller(
        &tree,
        "max_step = \"100%\"\nguard = \"0%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    ctl.tick().await.expect("tick");
    let levels: Vec<u64> = tree.cgroups.iter().map(high_bytes).collect();
    assert!(levels[0] < levels[1] && levels[1] < levels[2], "{levels:?}");
    // The kernel pulls each cgroup down to its memory.high.
    for (c, h) in tree.cgroups.iter().zip(&levels) {
        c.set_current(*h);
    }
    let r = ctl.tick().await.expect("tick").clone();
    assert!(
        r.pool.pressure,
        "throttled cgroups still want more than the pool"
    );
    let again: Vec<u64> = tree.cgroups.iter().map(high_bytes).collect();
    assert_eq!(again, levels);
    // One container exits: its share flows to the others by weight, not back to `max`.
    tree.cg(2).remove();
    ctl.tick().await.expect("tick");
    let h1 = high_bytes(tree.cg(0));
    let h2 = high_bytes(tree.cg(1));
    assert!(h1 > levels[0] && h2 > levels[1], "{h1} {h2} vs {levels:?}");
    assert!(
        h2.abs_diff(2 * h1) <= 2 * 4096,
        "weights 1:2 split the pool: {h1} {h2}"
    );
    assert_ne!(tree.cg(0).read_high().trim(), "max");
}

/// The kernel caps a cgroup's memory.low by its ancestors': the parent `lab` is raised to the
/// sum of its children's entitlements, and gets its own value back on exit.
#[tokio::test]
async fn ancestors_are_protected_and_restored() {
    let tree = seed_tree();
    let parent = tree.root().join("lab/memory.low");
    std::fs::write(&parent, "0\n").expect("parent memory.low");
    let mut ctl = controller(
        &tree,
        "protect_ancestors = true\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    let r = ctl.tick().await.expect("tick").clone();
    let sum: u64 = r.cgroups.iter().map(|c| c.entitlement).sum();
    let raised: u64 = std::fs::read_to_string(&parent)
        .expect("read")
        .trim()
        .parse()
        .expect("bytes");
    assert!(
        raised >= sum && raised - sum <= 3 * (4 << 20),
        "{raised} vs {sum}"
    );
    ctl.release_all().await;
    assert_eq!(std::fs::read_to_string(&parent).expect("read").trim(), "0");
}

#[tokio::test]
async fn ancestors_are_left_alone_with_protect_ancestors_off() {
    let tree = seed_tree();
    let parent = tree.root().join("lab/memory.low");
    std::fs::write(&parent, "0\n").expect("parent memory.low");
    let mut ctl = controller(
        &tree,
        "protect_ancestors = false\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    ctl.tick().await.expect("tick");
    assert_eq!(std::fs::read_to_string(&parent).expect("read").trim(), "0");
}

/// On a failed assertion, opens the FIFO at its path for reading, so that a job blocked opening
/// it for writing goes on (and fails on the closed pipe): the test then fails instead of
/// hanging, as the runtime waits at shutdown for its blocking jobs.
struct Unblock(std::path::PathBuf);

impl Drop for Unblock {
    fn drop(&mut self) {
        if std::thread::panicking() {
            use std::os::unix::fs::OpenOptionsExt as _;
            let _ = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
                .open(&self.0);
        }
    }
}

/// Regression (ci-converge on 6.1, 2026-12-01: the weight-2 toucher's memory.high unchanged
/// for 12 s, 15 % over its share): a tick that found the cgroup's job still running skipped
/// its writes, and each pass started the next reclaim before the next tick came, so no tick
/// ever wrote to it. Now the skipped tick's writes wait, and the first pass that finds the job
/// done starts them, its memory.reclaim taken to the tick's mark from the usage then.
#[tokio::test]
async fn regression_passes_kept_a_busy_cgroups_tick_writes_out() {
    let tree = seed_tree();
    let mut ctl = controller(
        &tree,
        "max_step = \"10%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"",
    );
    // c1's memory.reclaim a FIFO: its first job blocks in open(2) until a reader comes.
    let reclaim = tree.cg(0).path().join("memory.reclaim");
    std::fs::remove_file(&reclaim).expect("remove memory.reclaim");
    nix::unistd::mkfifo(&reclaim, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let _unblock = Unblock(reclaim.clone());
    ctl.tick().await.expect("tick");
    // A step's descent (2000 MiB held, the share 460): memory.high first (`high_first`), then
    // the job blocks in memory.reclaim.
    let deadline = Instant::now() + Duration::from_secs(2);
    while high_bytes(tree.cg(0)) == u64::MAX {
        assert!(Instant::now() < deadline, "memory.high never written");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first_high = high_bytes(tree.cg(0));
    // The next tick finds it busy: nothing written, the writes kept.
    tree.cg(0).set_current(1800 * MIB);
    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(r.cgroups[0].state, CgroupState::Busy, "{:?}", r.cgroups[0]);
    assert_eq!(high_bytes(tree.cg(0)), first_high);
    // The job ends (a reader takes its request); memory.reclaim a plain file again.
    let reader = std::thread::spawn({
        let reclaim = reclaim.clone();
        move || std::fs::read_to_string(reclaim).expect("read the FIFO")
    });
    let first = reader.join().expect("reader");
    assert!(
        first.trim().parse::<u64>().is_ok(),
        "a reclaim request: {first:?}"
    );
    std::fs::remove_file(&reclaim).expect("remove the FIFO");
    std::fs::write(&reclaim, "").expect("memory.reclaim");
    // The first pass that finds the job done starts the waiting writes: memory.high as the
    // second tick decided (from 1800 MiB, lower), memory.reclaim to its mark from the usage
    // now.
    tree.cg(0).set_current(1700 * MIB);
    while high_bytes(tree.cg(0)) == first_high {
        ctl.reclaim_pass().await;
        assert!(
            Instant::now() < deadline,
            "the waiting writes never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let high = high_bytes(tree.cg(0));
    assert!(
        high < first_high,
        "the second tick's memory.high: {high} (first {first_high})"
    );
    let asked = tree
        .cg(0)
        .take_reclaim()
        .expect("a memory.reclaim with the writes");
    // To the second tick's mark (memory.high less its guard, under 64 MiB here) from 1700 MiB;
    // from the tick's 1800 it would be 100 MiB more.
    let above_high = asked - (1700 * MIB - high);
    assert!(
        above_high > 0 && above_high < 64 * MIB,
        "asked {asked}, memory.high {high}"
    );
}
