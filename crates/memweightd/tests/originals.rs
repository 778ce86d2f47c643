//! Recorded originals that cannot be lost or misapplied, and operators' own changes: ticks
//! against a fake cgroupfs tree, with the failures of issue 9 provoked one by one.
//!
//! "kill -9" is a `Controller` dropped without `release_all`; a restart is a new `Controller`
//! on the same state directory.

use memweight_proto::ctl::{CgroupState, Command, Outcome};
use std::path::{Path, PathBuf};
use std::time::Duration;

use memweight_cgroupfs::Limit;
use memweight_cgroupfs::testing::{FakeCgroup, FakeProc};
use memweightd::commands;
use memweightd::config::Config;
use memweightd::controller::Controller;

mod common;

use common::MIB;

struct Tree {
    dir: tempfile::TempDir,
    _proc: FakeProc,
    cgroups: Vec<FakeCgroup>,
}

/// The state file's text once `ok` holds for it, or after 5 s (the last text read): what a
/// tick drops (originals after their restore, overrides of gone cgroups) is handed to the state
/// writer without waiting, and lands a moment after the tick.
fn settled(read: impl Fn() -> String, ok: impl Fn(&str) -> bool) -> String {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let text = read();
        if ok(&text) || std::time::Instant::now() >= until {
            return text;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `memweightctl set` (`unset` when `weight` is `None`) as the daemon's loop carries it out:
/// answered once the change is on disk.
fn set(ctl: &mut Controller, path: &str, weight: Option<u32>) -> Outcome {
    let command = match weight {
        Some(weight) => Command::Set {
            cgroup: path.into(),
            weight,
            min: None,
            max: None,
        },
        None => Command::Unset {
            cgroup: path.into(),
        },
    };
    commands::handle(ctl, command, Path::new("memweight.toml"))
}

const RULES: &str = r#"
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

/// Pressure: 6000 MiB held, a pool of 3000 MiB, lowering in one step.
const SQUEEZE: &str = "max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"3000M\"";
/// No pressure.
const ROOMY: &str = "max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"8G\"";

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (proc, cgroups) = common::seed_cgroups(dir.path());
        Tree {
            dir,
            _proc: proc,
            cgroups,
        }
    }
    fn cg(&self, i: usize) -> &FakeCgroup {
        &self.cgroups[i]
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("cg")
    }
    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    fn state_text(&self) -> String {
        std::fs::read_to_string(self.state_dir().join("state.json")).unwrap_or_default()
    }
    fn parse(&self, extra: &str, rules: &str) -> (Config, memweightd::config::Rules) {
        let text = format!(
            "cgroup_root = {:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {:?}\ntick = \"100ms\"\n\
             control = {{ socket = {:?} }}\nmetrics = {{ enabled = false }}\n{extra}\n{rules}\n",
            self.root(),
            self.dir.path().join("proc"),
            self.dir.path().join("proc/sysfs"),
            self.state_dir(),
            self.dir.path().join("memweightd.sock"),
        );
        Config::parse(&text, Path::new("test.toml")).expect("valid test config")
    }
    fn controller(&self, extra: &str) -> Controller {
        let (cfg, rules) = self.parse(extra, RULES);
        Controller::new(cfg, rules).expect("controller starts on the fake tree")
    }
    /// Removes cgroup `i` and creates a new one under the same name. The old directory is
    /// moved aside first, so that ext4 cannot give the new one the old inode number (kernfs
    /// never reuses cgroup ids).
    fn recreate(&mut self, i: usize) {
        let old = self.cg(i).clone();
        let aside = self.root().join("aside");
        std::fs::rename(old.path(), &aside).expect("move aside");
        let new = FakeCgroup::new(self.root(), old.rel());
        new.set_current(2000 * MIB);
        new.set_stat(1900 * MIB, 100 * MIB);
        std::fs::remove_dir_all(&aside).expect("remove the old cgroup");
        self.cgroups[i] = new;
    }
}

/// A fake host for the `glob = "pods/*"` tests: a procfs and an empty cgroup root in a fresh
/// directory.
struct Pods {
    dir: tempfile::TempDir,
    _proc: FakeProc,
}

impl Pods {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let proc = FakeProc::new(dir.path().join("proc"));
        Pods { dir, _proc: proc }
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("cg")
    }
    /// A cgroup `pods/<name>` holding 3000 MiB (2900 MiB anon).
    fn busy(&self, name: &str) -> FakeCgroup {
        let c = FakeCgroup::new(self.root(), &format!("pods/{name}"));
        c.set_current(3000 * MIB);
        c.set_stat(2900 * MIB, 100 * MIB);
        c
    }
    fn state(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state/state.json")).expect("state")
    }
    /// The config for every `pods/*` cgroup, a fixed pool of `fixed` and `extra` keys.
    fn config(&self, fixed: &str, extra: &str) -> (Config, memweightd::config::Rules) {
        let text = format!(
            "cgroup_root = {:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {:?}\n{extra}\n\
             [capacity]\nmode = \"fixed\"\nfixed = \"{fixed}\"\n[[cgroup]]\nglob = \"pods/*\"\n",
            self.root(),
            self.dir.path().join("proc"),
            self.dir.path().join("proc/sysfs"),
            self.dir.path().join("state")
        );
        Config::parse(&text, Path::new("t.toml")).expect("valid")
    }
    /// A controller on [`Pods::config`] with `max_step = "100%"`.
    fn controller(&self, fixed: &str) -> Controller {
        let (cfg, rules) = self.config(fixed, "max_step = \"100%\"");
        Controller::new(cfg, rules).expect("start")
    }
}

fn high(c: &FakeCgroup) -> u64 {
    c.read_high().parse().unwrap_or(u64::MAX)
}

/// Regression (issue 9): a failed state save during adoption used to leave the original in
/// memory only; the next tick took it for "adopted before a restart" and wrote limits with no
/// original on disk, so after kill -9 the daemon's own throttled value became the original.
#[tokio::test]
async fn regression_failed_state_save_writes_no_limits_and_kill_9_loses_nothing() {
    let tree = Tree::new();
    tree.cg(0).set_high(Limit::Bytes(1950 * MIB));
    // The temporary file the save writes first is a directory: EISDIR.
    let blocker = tree.state_dir().join(".state.json.tmp");
    std::fs::create_dir_all(&blocker).expect("blocker");
    {
        let mut ctl = tree.controller(SQUEEZE);
        for _ in 0..3 {
            let r = ctl
                .tick()
                .await
                .expect("a failed save does not fail the tick");
            assert!(r.pool.pressure);
            assert!(
                r.cgroups.iter().all(|c| c.state == CgroupState::Pending),
                "{r:?}"
            );
            assert!(r.cgroups.iter().any(|c| c.wrote_high.is_some()));
        }
        assert_eq!(high(tree.cg(0)), 1950 * MIB, "nothing written");
        assert_eq!(tree.cg(1).read_high(), "max");
        assert_eq!(tree.cg(1).read_low(), "0");
        // kill -9
    }
    std::fs::remove_dir(&blocker).expect("unblock");
    let mut ctl = tree.controller(SQUEEZE);
    ctl.tick().await.expect("tick");
    assert!(
        high(tree.cg(0)) < 1950 * MIB,
        "writes once the originals are saved"
    );
    assert!(
        tree.state_text().contains(&(1950 * MIB).to_string()),
        "{}",
        tree.state_text()
    );
    drop(ctl); // kill -9 again, this time with limits written
    let mut ctl = tree.controller(ROOMY);
    ctl.tick().await.expect("tick");
    ctl.release_all().await;
    assert_eq!(high(tree.cg(0)), 1950 * MIB);
    assert_eq!(tree.cg(1).read_high(), "max");
}

/// Regression (issue 9): a failed restore used to drop the recorded original.
#[tokio::test]
async fn regression_failed_restore_keeps_the_original_and_retries() {
    let tree = Tree::new();
    tree.cg(0).set_low(Limit::Bytes(8 * MIB));
    let mut ctl = tree.controller(SQUEEZE);
    ctl.tick().await.expect("tick");
    assert_ne!(tree.cg(0).read_high(), "max");
    // memory.low cannot be written (a directory stands in for it): the restore fails.
    let low = tree.cg(0).path().join("memory.low");
    std::fs::remove_file(&low).expect("remove");
    std::fs::create_dir(&low).expect("mkdir");
    // c1 is no longer named: it is released and restored at the next tick.
    let (cfg, rules) = tree.parse(SQUEEZE, "[[cgroup]]\npath = \"lab/c2\"\nweight = 2");
    ctl.reload(cfg, rules).expect("reload");
    ctl.tick().await.expect("tick");
    ctl.tick().await.expect("tick");
    assert!(
        tree.state_text().contains("lab/c1"),
        "the original stays recorded: {}",
        tree.state_text()
    );
    assert!(ctl.counters().restore_errors >= 2, "{:?}", ctl.counters());
    std::fs::remove_dir(&low).expect("rmdir");
    tree.cg(0).set_low(Limit::Bytes(0));
    ctl.tick().await.expect("tick");
    assert_eq!(tree.cg(0).read_high(), "max");
    assert_eq!(tree.cg(0).read_low(), (8 * MIB).to_string());
    // Dropping a restored original is handed to the state writer without waiting: it lands
    // within a moment.
    let text = settled(|| tree.state_text(), |t| !t.contains("lab/c1"));
    assert!(!text.contains("lab/c1"), "{text}");

    // At shutdown, too: a failed restore stays in the state file for the next start.
    ctl.tick().await.expect("tick");
    let c2 = tree.cg(1).path().join("memory.low");
    std::fs::remove_file(&c2).expect("remove");
    std::fs::create_dir(&c2).expect("mkdir");
    ctl.release_all().await;
    assert!(
        tree.state_text().contains("lab/c2"),
        "{}",
        tree.state_text()
    );
    std::fs::remove_dir(&c2).expect("rmdir");
    tree.cg(1).set_low(Limit::Bytes(0));
    let (cfg, rules) = tree.parse(SQUEEZE, "");
    let mut ctl = Controller::new(cfg, rules).expect("restart");
    ctl.tick().await.expect("tick");
    assert_eq!(tree.cg(1).read_high(), "max");
    let text = settled(|| tree.state_text(), |t| !t.contains("lab/c2"));
    assert!(!text.contains("lab/c2"), "{text}");
}

/// Regression (issue 9): originals were keyed by path only, so a cgroup recreated under the
/// same name while the daemon was down was given the old cgroup's original.
#[tokio::test]
async fn regression_recreated_cgroup_gets_no_stale_original() {
    let mut tree = Tree::new();
    tree.cg(0).set_high(Limit::Bytes(1900 * MIB));
    tree.cg(1).set_high(Limit::Bytes(1900 * MIB));
    {
        let mut ctl = tree.controller(SQUEEZE);
        ctl.tick().await.expect("tick");
        // kill -9
    }
    // c1 comes back under the same name, configured; c2 comes back, no longer configured.
    tree.recreate(0);
    tree.recreate(1);
    assert_eq!(tree.cg(0).read_high(), "max");
    let (cfg, rules) = tree.parse(
        ROOMY,
        "[[cgroup]]\npath = \"lab/c1\"\nweight = 1\n[[cgroup]]\npath = \"lab/c3\"\nweight = 3",
    );
    let mut ctl = Controller::new(cfg, rules).expect("restart");
    let r = ctl.tick().await.expect("tick").clone();
    let c1 = r.cgroups.iter().find(|c| c.cgroup == "lab/c1").expect("c1");
    assert_eq!(c1.original_high.as_deref(), Some("max"), "adopted afresh");
    assert_eq!(tree.cg(1).read_high(), "max", "no stale original written");
    ctl.release_all().await;
    assert_eq!(tree.cg(0).read_high(), "max");
    assert_eq!(tree.cg(1).read_high(), "max");
    assert_eq!(tree.cg(2).read_high(), "max");
    assert!(
        !tree.state_text().contains("lab/c"),
        "{}",
        tree.state_text()
    );
}

/// Regression (issue 9): `enforce = false` by reload left every cgroup, and the ancestors, at
/// the last throttled values.
#[tokio::test]
async fn regression_enforce_then_dry_run_restores_what_was_written() {
    let tree = Tree::new();
    tree.cg(2).set_low(Limit::Bytes(4 * MIB));
    let parent = tree.root().join("lab/memory.low");
    std::fs::write(&parent, "0\n").expect("parent");
    let mut ctl = tree.controller(&format!("protect_ancestors = true\n{SQUEEZE}"));
    ctl.tick().await.expect("tick");
    assert!(tree.cgroups.iter().all(|c| c.read_high() != "max"));
    assert_ne!(std::fs::read_to_string(&parent).expect("read").trim(), "0");
    let (cfg, rules) = tree.parse(
        &format!("enforce = false\nprotect_ancestors = true\n{SQUEEZE}"),
        RULES,
    );
    ctl.reload(cfg, rules).expect("reload");
    let r = ctl.tick().await.expect("tick").clone();
    assert!(r.cgroups.iter().all(|c| c.state == CgroupState::DryRun));
    for c in &tree.cgroups {
        assert_eq!(c.read_high(), "max", "{}", c.rel());
    }
    assert_eq!(tree.cg(2).read_low(), (4 * MIB).to_string());
    assert_eq!(tree.cg(0).read_low(), "0");
    assert_eq!(std::fs::read_to_string(&parent).expect("read").trim(), "0");
    ctl.tick().await.expect("tick");
    ctl.release_all().await; // SIGTERM
    for c in &tree.cgroups {
        assert_eq!(c.read_high(), "max", "{}", c.rel());
    }
    assert!(
        !tree.state_text().contains("lab/c"),
        "{}",
        tree.state_text()
    );
}

/// Regression (issue 9): a restart with `enforce = false` after kill -9 left the limits the
/// enforcing run had written.
#[tokio::test]
async fn regression_dry_run_start_restores_what_a_killed_run_wrote() {
    let tree = Tree::new();
    tree.cg(0).set_high(Limit::Bytes(1990 * MIB));
    {
        let mut ctl = tree.controller(SQUEEZE);
        ctl.tick().await.expect("tick");
    }
    assert!(high(tree.cg(0)) < 1990 * MIB);
    let mut ctl = tree.controller(&format!("enforce = false\n{SQUEEZE}"));
    ctl.tick().await.expect("tick");
    assert_eq!(high(tree.cg(0)), 1990 * MIB);
    assert_eq!(tree.cg(1).read_high(), "max");
    ctl.tick().await.expect("tick");
    assert_eq!(high(tree.cg(0)), 1990 * MIB, "and nothing written after");
}

/// Regression (issue 9): an operator's `echo 700M > memory.high` was overwritten within a
/// tick, and `max` (the value at adoption) would have been restored on exit.
#[tokio::test]
async fn regression_operator_change_mid_run_wins() {
    let tree = Tree::new();
    let mut ctl = tree.controller(SQUEEZE);
    ctl.tick().await.expect("tick");
    let ours = high(tree.cg(2));
    assert!(ours < 2000 * MIB);
    tree.cg(2).set_high(Limit::Bytes(700 * MIB));
    let r = ctl.tick().await.expect("tick").clone();
    let c3 = r.cgroups.iter().find(|c| c.cgroup == "lab/c3").expect("c3");
    assert_eq!(c3.original_high.as_deref(), Some("734003200"));
    let note = c3.operator.as_deref().expect("shown in explain");
    assert!(note.contains("memory.high set to 734003200"), "{note}");
    assert!(tree.state_text().contains("734003200"), "recorded");
    // The pressure ends: the daemon lifts its limits, but not above the operator's.
    let (cfg, rules) = tree.parse(ROOMY, RULES);
    ctl.reload(cfg, rules).expect("reload");
    for _ in 0..3 {
        ctl.tick().await.expect("tick");
        assert!(high(tree.cg(2)) <= 700 * MIB, "{}", tree.cg(2).read_high());
    }
    // And the pressure comes back: still never above it.
    let (cfg, rules) = tree.parse(SQUEEZE, RULES);
    ctl.reload(cfg, rules).expect("reload");
    ctl.tick().await.expect("tick");
    assert!(high(tree.cg(2)) <= 700 * MIB);
    ctl.release_all().await;
    assert_eq!(high(tree.cg(2)), 700 * MIB, "the operator's value, not max");
    assert_eq!(tree.cg(0).read_high(), "max");
}

/// An operator's memory.low is kept as a floor of the protection and restored on exit.
#[tokio::test]
async fn operator_low_is_kept_and_restored() {
    let tree = Tree::new();
    let mut ctl = tree.controller(SQUEEZE);
    ctl.tick().await.expect("tick");
    tree.cg(0).set_low(Limit::Bytes(256 * MIB));
    ctl.tick().await.expect("tick");
    let low: u64 = tree.cg(0).read_low().parse().expect("bytes");
    assert!(low >= 256 * MIB, "{low}");
    ctl.release_all().await;
    assert_eq!(tree.cg(0).read_low(), (256 * MIB).to_string());
    assert_eq!(tree.cg(0).read_high(), "max");
}

/// Cost that grows with what changed: 1,000 cgroups (999 idle) are adopted in one tick with
/// one state save, and a level that moves with the pool writes nothing to the idle ones.
#[tokio::test]
async fn idle_cgroups_are_adopted_at_once_and_cost_no_writes() {
    let pods = Pods::new();
    let busy = pods.busy("busy");
    let idle: Vec<FakeCgroup> = (0..999)
        .map(|i| FakeCgroup::new(pods.root(), &format!("pods/idle{i:04}")))
        .collect();
    let config = |fixed: &str| pods.config(fixed, "max_step = \"100%\"");
    let mut ctl = pods.controller("2000M");
    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(r.cgroups.len(), 1000);
    assert!(
        r.cgroups.iter().all(|c| c.state == CgroupState::Ok),
        "all recorded"
    );
    let state = pods.state();
    assert_eq!(state.matches("\"high\": \"max\"").count(), 1000);
    assert_ne!(busy.read_high(), "max");
    let written = ctl.counters().writes_high;
    // The pool moves: the busy cgroup's level changes, the idle ones' levels too.
    for fixed in ["2200M", "1800M", "2500M"] {
        let (cfg, rules) = config(fixed);
        ctl.reload(cfg, rules).expect("reload");
        ctl.tick().await.expect("tick");
    }
    let more = ctl.counters().writes_high - written;
    assert!(more <= 3, "only the busy cgroup is written: {more}");
    assert!(idle.iter().all(|c| c.read_high() == "max"));
    ctl.release_all().await;
    assert_eq!(busy.read_high(), "max");
}

/// Regression (issue 9): the first tick read all ten files of every cgroup it adopted, 12–15 s
/// for 10,000 cgroups in the lab guest. Beyond the first 1,000 full samples, a small cgroup
/// seen for the first time is adopted from three files and pinned at its usage ("new": never
/// squeezed, never written) until a later tick samples it in full; a big one is always sampled
/// in full and controlled from the first tick.
#[tokio::test]
async fn regression_first_tick_read_every_file_of_every_new_cgroup() {
    let pods = Pods::new();
    let idle: Vec<FakeCgroup> = (0..1300)
        .map(|i| FakeCgroup::new(pods.root(), &format!("pods/idle{i:04}")))
        .collect();
    for c in &idle {
        c.set_current(4 * MIB);
        c.set_stat(4 * MIB, 0);
    }
    // Sorted last, so the budget is spent before it is seen: big, so sampled in full anyway.
    let busy = pods.busy("zbusy");
    let mut ctl = pods.controller("2000M");

    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(r.cgroups.len(), 1301, "all adopted in the first tick");
    let new = |r: &memweightd::controller::TickReport| {
        r.cgroups
            .iter()
            .filter(|c| c.state == CgroupState::New)
            .count()
    };
    assert_eq!(new(&r), 300, "1,000 sampled in full, the rest provisional");
    let b = r
        .cgroups
        .iter()
        .find(|c| c.cgroup == "pods/zbusy")
        .expect("busy row");
    assert_eq!(b.state, CgroupState::Ok);
    assert!(
        high(&busy) < 2000 * MIB,
        "the busy cgroup is squeezed at once"
    );
    for c in r.cgroups.iter().filter(|c| c.state == CgroupState::New) {
        assert_eq!(c.floor, c.usage + 16 * MIB, "pinned at its usage: {c:?}");
        assert!(c.target >= c.usage, "never squeezed: {c:?}");
        assert!(
            c.wrote_high.is_none() && c.wrote_low.is_none(),
            "never written: {c:?}"
        );
    }
    let state = pods.state();
    assert_eq!(
        state.matches("\"high\": \"max\"").count(),
        1301,
        "every original recorded in the first tick"
    );

    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(
        new(&r),
        0,
        "every cgroup sampled in full by the second tick"
    );
    ctl.release_all().await;
    assert_eq!(busy.read_high(), "max");
    assert!(idle.iter().all(|c| c.read_high() == "max"));
}

/// Regression (issue 9, lab scale-10k under pressure): SIGTERM wrote both originals back to
/// every one of 10,000 recorded cgroups, idle ones included, ran out of its 20 s and left the
/// busy cgroups — last in path order — throttled. A cgroup whose files still hold its
/// originals as far as the daemon knows is not written at the stop (an operator's value set
/// there since stays), and the throttled ones are restored.
#[tokio::test]
async fn regression_sigterm_rewrote_every_idle_cgroup_and_ran_out_of_time() {
    let pods = Pods::new();
    let busy = pods.busy("busy");
    let idle = FakeCgroup::new(pods.root(), "pods/idle");
    let mut ctl = pods.controller("2000M");
    ctl.tick().await.expect("tick");
    ctl.tick().await.expect("tick");
    assert_ne!(busy.read_high(), "max", "the busy cgroup is throttled");
    assert_eq!(idle.read_high(), "max", "the idle one is never written");
    // Between the last tick and the stop an operator limits the idle cgroup.
    idle.set_high(Limit::Bytes(500 * MIB));
    ctl.release_all().await;
    assert_eq!(busy.read_high(), "max", "the throttled cgroup is restored");
    assert_eq!(
        idle.read_high(),
        (500 * MIB).to_string(),
        "the untouched cgroup is not written: the operator's value stays"
    );
    let state = pods.state();
    assert!(!state.contains("pods/"), "nothing left recorded: {state}");
}

/// After a reboot cgroup ids start again, so an id match would prove nothing: originals from
/// an earlier boot are dropped, never applied to the cgroups of this one.
#[tokio::test]
async fn originals_from_an_earlier_boot_are_dropped() {
    let tree = Tree::new();
    let boot_id = tree.dir.path().join("proc/sys/kernel/random/boot_id");
    std::fs::create_dir_all(boot_id.parent().expect("parent")).expect("mkdir");
    std::fs::write(&boot_id, "aaaa\n").expect("boot id");
    tree.cg(0).set_high(Limit::Bytes(1990 * MIB));
    {
        let mut ctl = tree.controller(SQUEEZE);
        ctl.tick().await.expect("tick");
    }
    assert!(tree.state_text().contains("\"boot_id\": \"aaaa\""));
    let ours = high(tree.cg(0));
    // "Reboot": the fake tree keeps its values, as a new boot's cgroups could by chance.
    std::fs::write(&boot_id, "bbbb\n").expect("boot id");
    let mut ctl = tree.controller(ROOMY);
    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(
        r.cgroups[0].original_high.as_deref(),
        Some(ours.to_string().as_str()),
        "adopted afresh"
    );
    assert!(!tree.state_text().contains(&(1990 * MIB).to_string()));
    assert!(tree.state_text().contains("bbbb"));
    ctl.release_all().await;
    assert_eq!(high(tree.cg(0)), ours);
}

/// Churn: containers that exit leave nothing behind, neither in the managed set and the
/// report nor in the state file (originals, runtime overrides).
#[tokio::test]
async fn exited_containers_leave_no_state_behind() {
    let host = Pods::new();
    let pods: Vec<FakeCgroup> = (0..20)
        .map(|i| {
            let c = FakeCgroup::new(host.root(), &format!("pods/p{i:02}"));
            c.set_current(500 * MIB);
            c.set_stat(400 * MIB, 100 * MIB);
            c
        })
        .collect();
    let (cfg, rules) = host.config("5000M", "");
    let mut ctl = Controller::new(cfg, rules).expect("start");
    ctl.tick().await.expect("tick");
    assert!(matches!(set(&mut ctl, "pods/p03", Some(9)), Outcome::Ok(_)));
    for p in pods.iter().step_by(2).skip(1) {
        p.remove();
    }
    pods[0].remove();
    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(
        r.cgroups.len(),
        10,
        "{:?}",
        ctl.managed_paths().collect::<Vec<_>>()
    );
    let state = settled(
        || host.state(),
        |t| pods.iter().step_by(2).all(|p| !t.contains(p.rel())),
    );
    for (i, p) in pods.iter().enumerate() {
        assert_eq!(state.contains(p.rel()), i % 2 == 1, "{}: {state}", p.rel());
    }
    assert!(
        ctl.override_for("pods/p03").is_some(),
        "a live container keeps it"
    );
    pods[3].remove();
    ctl.tick().await.expect("tick");
    assert!(
        ctl.override_for("pods/p03").is_none(),
        "removed with its container"
    );
    assert_eq!(ctl.managed_paths().count(), 9);
    ctl.release_all().await;
}

/// The binary: SIGTERM with 2,000 managed cgroups restores them all, quickly, and says how far
/// it got on the way.
#[test]
fn sigterm_restores_many_cgroups_with_progress() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().expect("tempdir");
    let proc = FakeProc::new(dir.path().join("proc"));
    let root = dir.path().join("cg");
    let busy = FakeCgroup::new(&root, "pods/busy");
    busy.set_current(3000 * MIB);
    busy.set_stat(2900 * MIB, 100 * MIB);
    let idle: Vec<FakeCgroup> = (0..2000)
        .map(|i| {
            let c = FakeCgroup::new(&root, &format!("pods/idle{i:04}"));
            c.set_low(Limit::Bytes(u64::try_from(i).expect("small") * 4096));
            c
        })
        .collect();
    let cfg = dir.path().join("memweight.toml");
    std::fs::write(
        &cfg,
        format!(
            "cgroup_root = {root:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {:?}\ntick = \"200ms\"\n\
             control = {{ socket = {:?} }}\nmetrics = {{ enabled = false }}\n\
             max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"2000M\"\n\
             [[cgroup]]\nglob = \"pods/*\"\n",
            proc.path(),
            proc.sys_path(),
            dir.path().join("state"),
            dir.path().join("memweightd.sock"),
        ),
    )
    .expect("config");
    let child = Command::new(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--config")
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memweightd");
    let deadline = Instant::now() + Duration::from_secs(60);
    while busy.read_high() == "max" {
        assert!(Instant::now() < deadline, "daemon never wrote memory.high");
        std::thread::sleep(Duration::from_millis(50));
    }
    let asked = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    let took = asked.elapsed();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {log}", out.status);
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(log.contains("restoring original limits"), "{log}");
    assert!(log.contains("done=1000"), "{log}");
    assert_eq!(busy.read_high(), "max");
    for (i, c) in idle.iter().enumerate() {
        assert_eq!(c.read_high(), "max");
        assert_eq!(c.read_low(), (i * 4096).to_string());
    }
}

/// A reload that moves the state directory writes the recorded originals into the new one,
/// which is the one the next start reads.
#[tokio::test]
async fn reload_to_a_new_state_dir_carries_the_originals() {
    let tree = Tree::new();
    tree.cg(0).set_high(Limit::Bytes(1990 * MIB));
    let mut ctl = tree.controller(SQUEEZE);
    ctl.tick().await.expect("tick");
    let moved = tree.dir.path().join("state2");
    let text = format!(
        "cgroup_root = {:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {moved:?}\n\
         control = {{ socket = {:?} }}\nmetrics = {{ enabled = false }}\n{SQUEEZE}\n{RULES}\n",
        tree.root(),
        tree.dir.path().join("proc"),
        tree.dir.path().join("proc/sysfs"),
        tree.dir.path().join("memweightd.sock"),
    );
    let (cfg, rules) = Config::parse(&text, Path::new("t.toml")).expect("valid");
    ctl.reload(cfg, rules).expect("reload");
    ctl.tick().await.expect("tick");
    let state = std::fs::read_to_string(moved.join("state.json")).expect("new state file");
    assert!(state.contains(&(1990 * MIB).to_string()), "{state}");
    drop(ctl); // kill -9
    let (cfg, rules) = Config::parse(&text, Path::new("t.toml")).expect("valid");
    let mut ctl = Controller::new(cfg, rules).expect("restart");
    ctl.tick().await.expect("tick");
    ctl.release_all().await;
    assert_eq!(high(tree.cg(0)), 1990 * MIB);
}

/// Regression (issue 10): a daemon that died without restoring (SIGABRT from the watchdog,
/// SIGKILL, a crash) left every cgroup at its throttled value for good. `memweightd
/// --restore` (the unit's ExecStopPost) is `Controller::restore_only` on the state file.
#[tokio::test]
async fn regression_sigabrt_left_cgroups_throttled_restore_only_puts_them_back() {
    let tree = Tree::new();
    tree.cg(0).set_high(Limit::Bytes(1950 * MIB));
    tree.cg(1).set_low(Limit::Bytes(8 * MIB));
    {
        let mut ctl = tree.controller(SQUEEZE);
        ctl.tick().await.expect("tick");
        assert!(high(tree.cg(0)) < 1950 * MIB, "throttled");
        assert_ne!(tree.cg(1).read_high(), "max", "throttled");
        // SIGABRT: no release_all.
    }
    assert_ne!(
        tree.cg(1).read_high(),
        "max",
        "a dead daemon restores nothing"
    );
    // ExecStopPost: no rules are needed, only the state file.
    let (cfg, _) = tree.parse(SQUEEZE, RULES);
    let mut post = Controller::new(cfg, memweightd::config::Rules::none()).expect("restore");
    assert_eq!(post.restore_only(), 0, "nothing left recorded");
    assert_eq!(high(tree.cg(0)), 1950 * MIB);
    assert_eq!(tree.cg(1).read_high(), "max");
    assert_eq!(tree.cg(1).read_low(), (8 * MIB).to_string());
    assert_eq!(tree.cg(2).read_high(), "max");
    assert!(
        !tree.state_text().contains("lab/c"),
        "{}",
        tree.state_text()
    );
    // After a clean stop (or a second run) it finds nothing and changes nothing.
    let (cfg, _) = tree.parse(SQUEEZE, RULES);
    let mut again = Controller::new(cfg, memweightd::config::Rules::none()).expect("restore");
    assert_eq!(again.restore_only(), 0);
    assert_eq!(high(tree.cg(0)), 1950 * MIB);
}

/// Regression (issue 10): `set` changed the running daemon's weights even when the override
/// could not be saved, so a restart silently went back to the old weight.
#[tokio::test]
async fn regression_set_with_a_failed_save_changes_nothing() {
    use memweightd::state::Override;
    let tree = Tree::new();
    let mut ctl = tree.controller(SQUEEZE);
    ctl.tick().await.expect("tick");
    let ov = |weight| Override {
        weight,
        min: None,
        max: None,
    };
    let refused = |o: Outcome| match o {
        Outcome::Error(e) => e.message,
        Outcome::Ok(r) => panic!("answered {r:?} though the save failed"),
    };
    assert!(matches!(set(&mut ctl, "lab/c1", Some(5)), Outcome::Ok(_)));
    let blocker = tree.state_dir().join(".state.json.tmp");
    std::fs::create_dir_all(&blocker).expect("blocker");
    let why = refused(set(&mut ctl, "lab/c1", Some(7)));
    assert!(
        why.contains("cannot record the override for lab/c1"),
        "{why}"
    );
    assert_eq!(
        ctl.override_for("lab/c1"),
        Some(ov(5)),
        "the old override stays"
    );
    refused(set(&mut ctl, "lab/c2", Some(9)));
    assert_eq!(
        ctl.override_for("lab/c2"),
        None,
        "no override without a save"
    );
    refused(set(&mut ctl, "lab/c1", None));
    assert_eq!(ctl.override_for("lab/c1"), Some(ov(5)), "still in force");
    let r = ctl.tick().await.expect("tick").clone();
    let c1 = r.cgroups.iter().find(|c| c.cgroup == "lab/c1").expect("c1");
    assert_eq!(c1.weight, 5, "the tick used the override on disk");
    std::fs::remove_dir(&blocker).expect("unblock");
    assert!(matches!(set(&mut ctl, "lab/c1", None), Outcome::Ok(_)));
    assert_eq!(ctl.override_for("lab/c1"), None);
}

/// Regression (issue 9): an override was dropped only when its managed cgroup vanished, so
/// one for a container removed while the daemon was down stayed in the state file for good
/// and applied to any later cgroup of that name.
#[tokio::test]
async fn regression_override_of_a_cgroup_removed_while_down_is_dropped() {
    let tree = Tree::new();
    {
        let mut ctl = tree.controller(ROOMY);
        ctl.tick().await.expect("tick");
        assert!(matches!(set(&mut ctl, "lab/c3", Some(9)), Outcome::Ok(_)));
        // kill -9
    }
    assert!(
        tree.state_text().contains("\"weight\": 9") || tree.state_text().contains("\"weight\":9")
    );
    std::fs::remove_dir_all(tree.cg(2).path()).expect("container removed");
    let mut ctl = tree.controller(ROOMY);
    ctl.tick().await.expect("tick");
    assert_eq!(ctl.override_for("lab/c3"), None);
    let text = settled(|| tree.state_text(), |t| !t.contains("lab/c3"));
    assert!(!text.contains("lab/c3"), "{text}");
}

/// Full samples of cgroup `i` in `ticks` ticks: its memory.stat is made unreadable (a
/// directory), so each full sample of it counts one read error; light samples do not read it.
/// The file is put back before returning.
async fn full_samples(tree: &Tree, ctl: &mut Controller, i: usize, ticks: u32) -> u64 {
    let stat = tree.cg(i).path().join("memory.stat");
    let text = std::fs::read_to_string(&stat).expect("memory.stat");
    std::fs::remove_file(&stat).expect("remove");
    std::fs::create_dir(&stat).expect("mkdir");
    let before = ctl.counters().read_errors;
    for _ in 0..ticks {
        ctl.tick().await.expect("tick");
    }
    let failed = ctl.counters().read_errors - before;
    std::fs::remove_dir(&stat).expect("rmdir");
    std::fs::write(&stat, text).expect("memory.stat back");
    failed
}

/// Issue 9 (cost with change): a steady cgroup costs three reads a tick (`memory.current`,
/// `memory.high`, `memory.low`), its other seven files being read only every tenth tick or
/// when it moves — and an operator's change to its limits is seen at once.
#[tokio::test]
async fn steady_cgroups_cost_one_read_and_never_hide_an_operator_change() {
    let tree = Tree::new();
    let mut ctl = tree.controller(ROOMY);
    // Adoption writes memory.low (the entitlement); the tick after it samples in full again.
    for _ in 0..3 {
        ctl.tick().await.expect("tick");
    }
    let failed = full_samples(&tree, &mut ctl, 1, 20).await;
    assert!(
        (1..=3).contains(&failed),
        "{failed} full samples of a steady cgroup in 20 ticks (want 2: every tenth tick)"
    );
    tree.cg(1).set_stat(1900 * MIB, 100 * MIB);

    // An operator lowers c1's memory.high; then pressure makes the daemon write.
    tree.cg(0).set_high(Limit::Bytes(1500 * MIB));
    let (cfg, rules) = tree.parse(SQUEEZE, RULES);
    ctl.reload(cfg, rules).expect("reload");
    ctl.tick().await.expect("tick");
    assert!(high(tree.cg(0)) <= 1500 * MIB, "{}", tree.cg(0).read_high());
    assert!(
        tree.state_text().contains(&(1500 * MIB).to_string()),
        "the operator's value is the new original: {}",
        tree.state_text()
    );
    ctl.release_all().await;
    assert_eq!(
        high(tree.cg(0)),
        1500 * MIB,
        "the operator's value comes back"
    );
}

/// Regression (issue 19, host-kube on 6.1): a cgroup's refaults are held for `REACH_HOLD` of
/// its full samples, and a steady cgroup got one every tenth tick, so a burst it had long
/// faulted back kept it "reaching" (its demand the whole pool) for up to 30 s and the split's
/// enforcement did not restart. A cgroup that faulted memory back in its last full samples is
/// now sampled in full every tick, so the hold lasts `REACH_HOLD` ticks.
#[tokio::test]
async fn regression_a_refault_burst_kept_a_steady_cgroup_reaching_for_thirty_ticks() {
    let tree = Tree::new();
    let mut ctl = tree.controller(ROOMY);
    for _ in 0..3 {
        ctl.tick().await.expect("tick");
    }
    let refaulted = |r: &memweightd::controller::TickReport| {
        r.cgroups
            .iter()
            .find(|c| c.cgroup == "lab/c2")
            .expect("c2")
            .refaulted
            .unwrap_or(u64::MAX)
    };
    // 8 MiB faulted back, usage unchanged: seen at c2's next full sample.
    let stat = tree.cg(1).read_file("memory.stat");
    tree.cg(1).write_file(
        "memory.stat",
        &stat.replace("workingset_refault_anon 0", "workingset_refault_anon 2048"),
    );
    let mut seen = Vec::new();
    for _ in 0..12 {
        seen.push(refaulted(&ctl.tick().await.expect("tick")));
    }
    let at = seen
        .iter()
        .position(|&b| b == 8 * MIB)
        .unwrap_or_else(|| panic!("the burst was never seen: {seen:?}"));
    assert_eq!(
        seen.get(at + 1),
        Some(&0),
        "the tick after the burst was not a full sample: {seen:?}"
    );
    // Its hold over (REACH_HOLD = 3 full samples without refaults), it is steady again.
    for _ in 0..3 {
        ctl.tick().await.expect("tick");
    }
    let failed = full_samples(&tree, &mut ctl, 1, 20).await;
    assert!(
        (1..=3).contains(&failed),
        "{failed} full samples in 20 ticks once its hold ended (want 2: every tenth tick)"
    );
}

/// Regression (issue 11 review): the steady-sampling check counted the reclaim guard even with
/// `reclaim = false`, where memory.high has no guard above the target: a cgroup at 92 % of an
/// operator's memory.high counted as held and was sampled in full every tick.
#[tokio::test]
async fn regression_steady_check_counted_the_guard_with_reclaim_off() {
    let tree = Tree::new();
    tree.cg(0).set_high(Limit::Bytes(1000 * MIB));
    tree.cg(0).set_current(920 * MIB);
    let mut ctl = tree.controller(&format!("reclaim = false\n{ROOMY}"));
    for _ in 0..3 {
        ctl.tick().await.expect("tick");
    }
    let failed = full_samples(&tree, &mut ctl, 0, 20).await;
    assert!(
        (1..=3).contains(&failed),
        "{failed} full samples in 20 ticks of a steady cgroup 80 MiB under its memory.high \
         (want 2: every tenth tick)"
    );
}

/// Regression (issue 9, found in the lab at 10,000 cgroups): SIGTERM was taken only between
/// ticks, so a stop waited for a long first tick (36 s under TCG). The stop flag now ends a
/// tick before its next cgroup.
#[tokio::test]
async fn regression_sigterm_waited_for_a_long_tick() {
    let tree = Tree::new();
    let mut ctl = tree.controller(SQUEEZE);
    ctl.tick().await.expect("tick");
    assert!(high(tree.cg(0)) < 2000 * MIB, "throttled");
    ctl.stop_handle()
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(matches!(
        ctl.tick().await,
        Err(memweightd::controller::ControlError::Stopping)
    ));
    ctl.release_all().await;
    for c in [tree.cg(0), tree.cg(1), tree.cg(2)] {
        assert_eq!(c.read_high(), "max");
    }
}

/// A cgroup held at its memory.high has flat usage because the kernel holds it there, while
/// what sets its floor (anon against cache, swap) keeps moving: it is never sampled light, so
/// its floor is never stale (found in review of the steady sampling).
#[tokio::test]
async fn cgroups_held_at_their_high_are_always_sampled_in_full() {
    let tree = Tree::new();
    let mut ctl = tree.controller(SQUEEZE);
    ctl.tick().await.expect("tick");
    let h = high(tree.cg(0));
    assert!(h < 2000 * MIB, "throttled to {h}");
    tree.cg(0).set_current(h); // the kernel holds it at its memory.high
    for _ in 0..3 {
        ctl.tick().await.expect("tick");
    }
    assert_eq!(
        full_samples(&tree, &mut ctl, 0, 5).await,
        5,
        "a held cgroup was sampled light"
    );
}
