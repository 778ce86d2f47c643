//! The control plane end to end against a fake cgroupfs tree: the socket server and the
//! control loop (set/get/unset/status/explain/reload, bad inputs, a peer that is not allowed),
//! persistence across a restart of the real binary, and `/metrics` over real HTTP checked by
//! `promtool` when it is installed.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use memweight_cgroupfs::testing::{FakeCgroup, FakeProc};
use memweight_proto::ctl::{
    self, Command, ErrorKind, ErrorReply, PROTOCOL_VERSION, Reply, Request, Setting,
};
use memweightd::commands;
use memweightd::config::Config;
use memweightd::controller::Controller;
use memweightd::metrics::{Metrics, Published};
use memweightd::server::{self, Call, Server};
use tokio::sync::{mpsc, watch};

mod common;

use common::MIB;

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
[[cgroup]]
path = "lab/absent"
weight = 5
"#;

struct Tree {
    dir: tempfile::TempDir,
    proc: FakeProc,
    cgroups: Vec<FakeCgroup>,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (proc, cgroups) = common::seed_cgroups(dir.path());
        Tree { dir, proc, cgroups }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("run").join("memweightd.sock")
    }

    fn config_text(&self, metrics: &str, rules: &str) -> String {
        format!(
            "cgroup_root = {:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {:?}\ntick = \"100ms\"\n\
             max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"4500M\"\n\
             [control]\nsocket = {:?}\n[metrics]\n{metrics}\n{rules}",
            self.dir.path().join("cg"),
            self.proc.path(),
            self.proc.sys_path(),
            self.dir.path().join("state"),
            self.socket(),
        )
    }

    fn write_config(&self, rules: &str) -> PathBuf {
        let path = self.dir.path().join("memweight.toml");
        std::fs::write(&path, self.config_text("enabled = false", rules)).expect("write config");
        path
    }

    fn controller(&self) -> Controller {
        let path = self.write_config(RULES);
        let (cfg, rules) = Config::load(&path).expect("valid test config");
        Controller::new(cfg, rules).expect("controller starts on the fake tree")
    }
}

/// The daemon's loop in miniature: ticks every 100 ms, answers calls in between, publishes
/// snapshots; the same calls `main` makes.
fn spawn_loop(
    mut ctl: Controller,
    config: PathBuf,
    mut calls: mpsc::Receiver<Call>,
    snapshots: watch::Sender<Option<std::sync::Arc<Published>>>,
    metrics: Metrics,
) -> tokio::task::JoinHandle<Controller> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(100));
        let mut answers = commands::Answers::default();
        loop {
            tokio::select! {
                () = tokio::time::sleep(commands::SETTLE_POLL), if ctl.saving_overrides() => {
                    answers.settle(&mut ctl);
                }
                _ = interval.tick() => {
                    if let Ok(r) = ctl.tick().await {
                        let r = r.clone();
                        metrics.observe(&r);
                        snapshots.send_replace(Some(std::sync::Arc::new(Published {
                            report: r,
                            counters: ctl.counters().clone(),
                            at: Instant::now(),
                            interval: Duration::from_millis(100),
                        })));
                    }
                }
                call = calls.recv() => {
                    let Some(call) = call else { break };
                    answers.answer(&mut ctl, call, &config);
                }
            }
        }
        ctl
    })
}

async fn raw(socket: &Path, line: &str) -> String {
    raw_bytes(socket, line.as_bytes()).await
}

async fn raw_bytes(socket: &Path, bytes: &[u8]) -> String {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(socket)
        .await
        .expect("connect to the control socket");
    s.write_all(bytes).await.expect("send");
    let mut answer = String::new();
    tokio::io::BufReader::new(s)
        .read_line(&mut answer)
        .await
        .expect("read answer");
    answer
}

async fn ask(socket: &Path, command: Command) -> Result<Reply, ErrorReply> {
    let line = raw(socket, &Request::new(command).to_line()).await;
    ctl::parse_response(line.trim_end()).expect("a well-formed answer of this version")
}

fn set(cgroup: &str, weight: u32) -> Command {
    Command::Set {
        cgroup: cgroup.into(),
        weight,
        min: None,
        max: None,
    }
}

fn setting(r: Result<Reply, ErrorReply>) -> Setting {
    match r {
        Ok(Reply::Setting(s)) => *s,
        other => panic!("expected a setting, got {other:?}"),
    }
}

async fn status_until(socket: &Path, what: &str, ok: impl Fn(&ctl::Status) -> bool) -> ctl::Status {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Reply::Status(s)) = ask(socket, Command::Status).await
            && ok(&s)
        {
            return s;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn weight_of(s: &ctl::Status, cgroup: &str) -> Option<(u32, bool)> {
    s.cgroups
        .iter()
        .find(|c| c.cgroup == cgroup)
        .map(|c| (c.weight, c.overridden))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_get_unset_status_explain_round_trip() {
    let tree = Tree::new();
    let ctl = tree.controller();
    let config = tree.dir.path().join("memweight.toml");
    let server = Server::bind(&ctl.config().control).expect("bind the control socket");
    let socket = tree.socket();
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&socket)
            .expect("socket exists")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o660, "socket mode");
    let (tx, rx) = mpsc::channel(8);
    let serving = tokio::spawn(server.serve(tx));
    let (snap_tx, _snap_rx) = watch::channel(None);
    let looping = spawn_loop(ctl, config, rx, snap_tx, Metrics::default());

    let s = status_until(&socket, "first tick", |s| s.cgroups.len() == 3).await;
    assert!(s.pool.pressure);
    assert_eq!(s.pool.total_weight, 6);
    assert_eq!(weight_of(&s, "lab/c1"), Some((1, false)));

    let got = setting(
        ask(
            &socket,
            Command::Get {
                cgroup: "lab/c1".into(),
            },
        )
        .await,
    );
    assert_eq!((got.configured.weight, got.effective.weight), (1, 1));
    assert!(got.managed && got.runtime_override.is_none());

    // set: answered at once, applied at the next tick.
    let after = setting(
        ask(
            &socket,
            Command::Set {
                cgroup: "lab/c1/".into(),
                weight: 300,
                min: Some(32 * MIB),
                max: None,
            },
        )
        .await,
    );
    assert_eq!(after.cgroup, "lab/c1");
    assert_eq!(after.effective.weight, 300);
    assert_eq!(after.effective.min, Some(32 * MIB));
    assert_eq!(after.configured.weight, 1);
    let s = status_until(&socket, "override in status", |s| {
        weight_of(s, "lab/c1") == Some((300, true))
    })
    .await;
    assert_eq!(s.pool.total_weight, 305);
    // c1 now has by far the largest weight: it keeps all its memory (and, held at the
    // memory.high written for its old weight, may grow past it: its demand is hidden).
    let c1 = s.cgroups.iter().find(|c| c.cgroup == "lab/c1").expect("c1");
    assert!(c1.target >= 2000 * MIB, "{c1:?}");
    assert!(c1.usage <= c1.target, "{c1:?}");

    // An absolute path below the root names the same cgroup.
    let abs = tree.dir.path().join("cg").join("lab").join("c1");
    let got = setting(
        ask(
            &socket,
            Command::Get {
                cgroup: abs.display().to_string(),
            },
        )
        .await,
    );
    assert_eq!(got.runtime_override.map(|v| v.weight), Some(300));

    match ask(
        &socket,
        Command::Explain {
            cgroup: "lab/c1".into(),
        },
    )
    .await
    {
        Ok(Reply::Explain(e)) => {
            assert_eq!(e.status.weight, 300);
            assert_eq!(e.setting.effective.weight, 300);
            assert!(e.status.overridden, "{e:?}");
            assert_eq!(e.pool.total_weight, 305);
        }
        other => panic!("explain: {other:?}"),
    }

    let back = setting(
        ask(
            &socket,
            Command::Unset {
                cgroup: "lab/c1".into(),
            },
        )
        .await,
    );
    assert!(back.runtime_override.is_none());
    assert_eq!(back.effective.weight, 1);
    status_until(&socket, "config weight back", |s| {
        weight_of(s, "lab/c1") == Some((1, false))
    })
    .await;

    // Bad inputs: one line each, the right kind.
    let cases: Vec<(Command, ErrorKind, &str)> = vec![
        (set("lab/nope", 5), ErrorKind::NotManaged, "not managed"),
        (
            set("lab/absent", 5),
            ErrorKind::UnknownCgroup,
            "no such cgroup",
        ),
        (set("../etc", 5), ErrorKind::BadRequest, "`..`"),
        (
            set("/etc/passwd", 5),
            ErrorKind::BadRequest,
            "outside the cgroup root",
        ),
        (set("lab/c1", 0), ErrorKind::BadRequest, "1..=10000"),
        (set("lab/c1", 10_001), ErrorKind::BadRequest, "1..=10000"),
        (
            Command::Explain {
                cgroup: "lab/nope".into(),
            },
            ErrorKind::NotManaged,
            "no [[cgroup]] rule",
        ),
        (
            Command::Unset {
                cgroup: "other/x".into(),
            },
            ErrorKind::NotManaged,
            "not managed",
        ),
    ];
    for (cmd, kind, want) in cases {
        let e = ask(&socket, cmd.clone()).await.expect_err("refused");
        assert_eq!(e.kind, kind, "{cmd:?}: {e:?}");
        assert!(e.message.contains(want), "{cmd:?}: {}", e.message);
        assert!(!e.message.contains('\n'));
    }
    // Another protocol version, and garbage.
    let answer = raw(
        &socket,
        "{\"version\":99,\"command\":{\"op\":\"status\"}}\n",
    )
    .await;
    let e = ctl::parse_response(answer.trim_end())
        .expect("answer of this version")
        .expect_err("mismatch");
    assert_eq!(e.kind, ErrorKind::VersionMismatch);
    assert!(e.message.contains("version 99"), "{}", e.message);
    let answer = raw_bytes(&socket, b"\xff\xfe\n").await;
    assert!(answer.contains("not UTF-8"), "{answer}");
    let answer = raw(&socket, "hello\n").await;
    assert!(answer.contains(&format!("\"version\":{PROTOCOL_VERSION}")));
    assert!(answer.contains("bad-request"), "{answer}");

    serving.abort();
    let _ = serving.await;
    assert!(
        !socket.exists(),
        "the socket file is removed when the server stops"
    );
    looping.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_keeps_overrides_and_does_not_restore_managed_cgroups() {
    let tree = Tree::new();
    let mut ctl = tree.controller();
    let config = tree.dir.path().join("memweight.toml");
    ctl.tick().await.expect("tick");
    let high_before = tree.cgroups[0].read_high();
    assert_ne!(
        high_before.trim(),
        "max",
        "the daemon lowered c1's memory.high"
    );
    let out = commands::handle(&mut ctl, set("lab/c1", 7), &config);
    assert!(matches!(out, ctl::Outcome::Ok(_)), "{out:?}");

    // New config: c2's weight changes, c3 is no longer named.
    tree.write_config(
        "[[cgroup]]\npath = \"lab/c1\"\nweight = 1\n[[cgroup]]\npath = \"lab/c2\"\nweight = 9\n",
    );
    match commands::handle(&mut ctl, Command::Reload, &config) {
        ctl::Outcome::Ok(Reply::Reloaded(r)) => {
            assert_eq!((r.rules, r.overrides_kept), (2, 1));
        }
        other => panic!("reload: {other:?}"),
    }
    assert_eq!(ctl.override_for("lab/c1").map(|o| o.weight), Some(7));
    assert_eq!(
        tree.cgroups[0].read_high(),
        high_before,
        "reload must not restore a cgroup that stays managed"
    );
    let r = ctl.tick().await.expect("tick").clone();
    let weights: Vec<(String, u32, bool)> = r
        .cgroups
        .iter()
        .map(|c| (c.cgroup.clone(), c.weight, c.overridden))
        .collect();
    assert_eq!(
        weights,
        vec![("lab/c1".into(), 7, true), ("lab/c2".into(), 9, false)]
    );
    assert_eq!(
        tree.cgroups[2].read_high().trim(),
        "max",
        "c3 released and restored"
    );

    // A broken file is refused and the old configuration stays.
    std::fs::write(&config, "tick = \"never\"").expect("write");
    match commands::handle(&mut ctl, Command::Reload, &config) {
        ctl::Outcome::Error(e) => {
            assert_eq!(e.kind, ErrorKind::ConfigInvalid);
            assert!(
                e.message.contains("old configuration stays"),
                "{}",
                e.message
            );
        }
        other => panic!("broken reload accepted: {other:?}"),
    }
    assert!(ctl.configured("lab/c2").is_some());
}

/// `status` right after `set` showed the old weight alone until the next tick; its row now
/// carries the weight the next tick plans with, and drops it once a tick planned with it.
#[tokio::test]
async fn regression_status_right_after_set_showed_the_old_weight_alone() {
    let tree = Tree::new();
    let mut ctl = tree.controller();
    let config = tree.dir.path().join("memweight.toml");
    ctl.tick().await.expect("tick");
    let row = |ctl: &mut Controller, command: Command| {
        let s = match commands::handle(ctl, command, &config) {
            ctl::Outcome::Ok(Reply::Status(s)) => s.cgroups,
            ctl::Outcome::Ok(Reply::Explain(e)) => vec![e.status],
            other => panic!("status: {other:?}"),
        };
        let c1 = s.into_iter().find(|c| c.cgroup == "lab/c1").expect("c1");
        (c1.weight, c1.next_weight)
    };
    let explain = || Command::Explain {
        cgroup: "lab/c1".into(),
    };
    assert_eq!(row(&mut ctl, Command::Status), (1, None));
    let out = commands::handle(&mut ctl, set("lab/c1", 7), &config);
    assert!(matches!(out, ctl::Outcome::Ok(_)), "{out:?}");
    assert_eq!(row(&mut ctl, Command::Status), (1, Some(7)));
    assert_eq!(row(&mut ctl, explain()), (1, Some(7)));
    ctl.tick().await.expect("tick");
    assert_eq!(row(&mut ctl, Command::Status), (7, None));
    let unset = Command::Unset {
        cgroup: "lab/c1".into(),
    };
    let out = commands::handle(&mut ctl, unset, &config);
    assert!(matches!(out, ctl::Outcome::Ok(_)), "{out:?}");
    assert_eq!(row(&mut ctl, Command::Status), (7, Some(1)));
}

#[tokio::test]
async fn status_before_the_first_tick_says_not_ready() {
    let tree = Tree::new();
    let mut ctl = tree.controller();
    let config = tree.dir.path().join("memweight.toml");
    match commands::handle(&mut ctl, Command::Status, &config) {
        ctl::Outcome::Error(e) => assert_eq!(e.kind, ErrorKind::NotReady),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_outside_root_and_the_group_is_refused() {
    let tree = Tree::new();
    let ctl = tree.controller();
    let server = Server::bind(&ctl.config().control).expect("bind");
    let socket = tree.socket();
    // Let everyone reach the socket file, so only the daemon's SO_PEERCRED check stands in
    // the way.
    use std::os::unix::fs::PermissionsExt;
    for p in [tree.dir.path().to_owned(), tree.dir.path().join("run")] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let (tx, rx) = mpsc::channel(8);
    let serving = tokio::spawn(server.serve(tx));
    let (snap_tx, _r) = watch::channel(None);
    let looping = spawn_loop(
        ctl,
        tree.dir.path().join("memweight.toml"),
        rx,
        snap_tx,
        Metrics::default(),
    );
    if !nix_is_root() || which("setpriv").is_none() {
        eprintln!("skipping the real-connection part: needs root and setpriv");
    } else {
        // This test binary again, as nobody, running only `client_helper`.
        let e = status_as_nobody(&socket)
            .await
            .expect_err("nobody is refused");
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert!(
            e.message.starts_with("permission denied: uid 65534"),
            "{}",
            e.message
        );
    }
    // Root on the same socket is served.
    assert!(
        status_or_not_ready(&socket).await,
        "root must be served on the same socket"
    );
    serving.abort();
    looping.abort();
}

async fn status_or_not_ready(socket: &Path) -> bool {
    match ask(socket, Command::Status).await {
        Ok(_) => true,
        Err(e) => e.kind == ErrorKind::NotReady,
    }
}

/// Run by `a_peer_outside_root_and_the_group_is_refused` as another user; does nothing in a
/// normal test run.
#[test]
fn client_helper() {
    let Some(socket) = std::env::var_os("MEMWEIGHT_TEST_CLIENT_SOCKET") else {
        return;
    };
    let mut s = std::os::unix::net::UnixStream::connect(&socket).expect("connect as nobody");
    let _ = s.write_all(Request::new(Command::Status).to_line().as_bytes());
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).expect("read");
    println!("ANSWER {}", line.trim_end());
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|r| r.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn http_get(addr: &str, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let (head, body) = text.split_once("\r\n\r\n").expect("HTTP response");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (code, content_type, body.to_owned())
}

/// `promtool check metrics` on `text`: `Some(result)` when promtool runs, `None` when it is
/// not installed here (a failure under CI=true).
fn promtool(text: &str) -> Option<Result<(), String>> {
    if which("promtool").is_none() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "promtool is not installed; CI must install Debian's `prometheus` package"
        );
        eprintln!("promtool not installed (apt-get install prometheus); skipping the lint");
        return None;
    }
    let mut child = Process::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool finishes");
    Some(if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    })
}

fn ctl_line(socket: &Path, command: Command) -> Result<Reply, ErrorReply> {
    let mut s = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    s.write_all(Request::new(command).to_line().as_bytes())
        .expect("send");
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).expect("read");
    ctl::parse_response(line.trim_end()).expect("answer of this version")
}

/// Serves `ctl` on the tree's socket with `[control] group = "memweight-test"` resolved by
/// `lookup`, the socket and its directories open to every user so that the daemon's own check
/// decides who gets in: the socket, the server's task and the loop's.
fn serve_for_group(
    tree: &Tree,
    ctl: Controller,
    lookup: server::GroupLookup,
) -> (
    PathBuf,
    tokio::task::JoinHandle<impl Sized>,
    tokio::task::JoinHandle<Controller>,
) {
    use std::os::unix::fs::PermissionsExt;
    let mut cfg = ctl.config().control.clone();
    cfg.group = Some("memweight-test".into());
    let server = Server::bind_with(&cfg, lookup).expect("bind");
    let socket = tree.socket();
    for p in [tree.dir.path().to_owned(), tree.dir.path().join("run")] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let (tx, rx) = mpsc::channel(8);
    let serving = tokio::spawn(server.serve(tx));
    let (snap_tx, _r) = watch::channel(None);
    let looping = spawn_loop(
        ctl,
        tree.dir.path().join("memweight.toml"),
        rx,
        snap_tx,
        Metrics::default(),
    );
    (socket, serving, looping)
}

/// The daemon's tick count from a `status` over `socket`; `None` while it does not answer.
fn tick_of(socket: &Path) -> Option<u64> {
    match ctl_line(socket, Command::Status) {
        Ok(Reply::Status(st)) => Some(st.pool.tick),
        _ => None,
    }
}

/// Starts memweightd on `config` (stderr piped, for [`stop`]'s log) and waits for its first
/// tick: the child and its control socket.
fn start_daemon(tree: &Tree, config: &Path) -> (std::process::Child, PathBuf) {
    let child = Process::new(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--config")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memweightd");
    let socket = tree.socket();
    wait_for("the first tick", || {
        socket.exists() && tick_of(&socket).is_some()
    });
    (child, socket)
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stop(child: std::process::Child) -> String {
    let status = Process::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "exit {:?}: {log}", out.status);
    log
}

/// The real binary: socket and metrics wired into its loop; an override survives a restart;
/// the scrape passes promtool; a vanished cgroup's series disappear.
#[test]
fn daemon_binary_serves_socket_and_metrics_and_keeps_overrides_across_restart() {
    let tree = Tree::new();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let config = tree.dir.path().join("memweight.toml");
    std::fs::write(
        &config,
        tree.config_text(&format!("listen = \"{addr}\""), RULES),
    )
    .expect("write config");
    let start = || {
        Process::new(env!("CARGO_BIN_EXE_memweightd"))
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn memweightd")
    };
    let socket = tree.socket();
    let child = start();
    wait_for("the first tick", || {
        socket.exists() && matches!(ctl_line(&socket, Command::Status), Ok(Reply::Status(_)))
    });
    let s = setting(ctl_line(&socket, set("lab/c2", 42)));
    assert_eq!(s.effective.weight, 42);
    wait_for("the override in /metrics", || {
        http_get(&addr, "/metrics", None)
            .2
            .contains("memweight_cgroup_weight{cgroup=\"lab/c2\"} 42")
    });

    let (code, content_type, body) = http_get(&addr, "/metrics", Some("text/plain"));
    assert_eq!(code, 200);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    for series in [
        "memweight_cgroup_usage_bytes{cgroup=\"lab/c1\"} 2097152000",
        "memweight_pool_capacity_bytes 4718592000",
        "memweight_tick_duration_seconds_count",
        "memweight_writes_total{kind=\"high\"}",
        "memweight_cgroup_weight_overridden{cgroup=\"lab/c2\"} 1",
    ] {
        assert!(body.contains(series), "missing {series}:\n{body}");
    }
    if let Some(lint) = promtool(&body) {
        lint.unwrap_or_else(|e| panic!("promtool check metrics failed:\n{e}\n{body}"));
    }
    let (code, content_type, om) = http_get(
        &addr,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    );
    assert_eq!(code, 200);
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(om.ends_with("# EOF\n"), "{om}");
    let (code, _, health) = http_get(&addr, "/healthz", None);
    assert_eq!((code, health.starts_with("ok")), (200, true), "{health}");
    assert_eq!(http_get(&addr, "/nope", None).0, 404);

    // A vanished cgroup's series disappear.
    tree.cgroups[2].remove();
    wait_for("lab/c3 gone from /metrics", || {
        let b = http_get(&addr, "/metrics", None).2;
        b.contains("cgroup=\"lab/c1\"") && !b.contains("cgroup=\"lab/c3\"")
    });

    let log = stop(child);
    assert!(!socket.exists(), "socket removed on exit: {log}");

    // Restart: the override is still there and applies.
    let child = start();
    wait_for("the restarted daemon", || {
        socket.exists()
            && matches!(ctl_line(&socket, Command::Status), Ok(Reply::Status(s))
                if weight_of(&s, "lab/c2") == Some((42, true)))
    });
    let s = setting(ctl_line(
        &socket,
        Command::Get {
            cgroup: "lab/c2".into(),
        },
    ));
    assert_eq!(s.runtime_override.map(|v| v.weight), Some(42));
    stop(child);
}

/// Issue 10: `tick = 1e300` followed by SIGHUP panicked the daemon (exit 101) and left every
/// cgroup throttled. Now the reload is refused, the reply and the log say why, and the daemon
/// keeps ticking with its old configuration.
#[test]
fn regression_reload_with_tick_1e300_keeps_the_daemon_and_its_config() {
    let tree = Tree::new();
    let config = tree.write_config(RULES);
    let (child, socket) = start_daemon(&tree, &config);

    let good = std::fs::read_to_string(&config).expect("read config");
    std::fs::write(&config, good.replace("tick = \"100ms\"", "tick = 1e300")).expect("write");
    let status = Process::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
    match ctl_line(&socket, Command::Reload) {
        Err(e) => {
            assert_eq!(e.kind, ErrorKind::ConfigInvalid);
            assert!(
                e.message.contains("tick") && e.message.contains("old configuration stays"),
                "{}",
                e.message
            );
        }
        other => panic!("reload with tick = 1e300 accepted: {other:?}"),
    }
    let before = tick_of(&socket).expect("status after the refused reloads");
    wait_for("ticks at the old 100 ms pace", || {
        tick_of(&socket).is_some_and(|t| t >= before + 3)
    });
    let log = stop(child);
    assert!(log.contains("reload refused"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// Issue 10: a request whose client had timed out (the loop stuck in a tick) was still carried
/// out when the loop came back. Now the queued call is stale and dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_request_that_timed_out_is_not_carried_out_later() {
    let tree = Tree::new();
    let mut ctl = tree.controller();
    let config = tree.dir.path().join("memweight.toml");
    ctl.tick().await.expect("tick");
    let server = Server::bind(&ctl.config().control)
        .expect("bind")
        .with_limits(server::Limits {
            loop_timeout: Duration::from_millis(300),
            ..server::Limits::default()
        });
    let (tx, mut rx) = mpsc::channel(8);
    let serving = tokio::spawn(server.serve(tx));
    // The loop is stuck: nobody takes the call before the client's time is up.
    let e = ask(&tree.socket(), set("lab/c1", 7))
        .await
        .expect_err("the loop did not answer");
    assert!(e.message.contains("not carried out"), "{}", e.message);
    // The loop comes back and finds the call: it is dropped, not carried out.
    let stale = rx.recv().await.expect("the queued call");
    assert!(stale.is_stale());
    let mut answers = commands::Answers::default();
    assert!(!answers.answer(&mut ctl, stale, &config));
    assert_eq!(ctl.override_for("lab/c1"), None);
    // A call whose client still waits is carried out.
    let (reply, answer) = tokio::sync::oneshot::channel();
    let live = Call {
        command: set("lab/c1", 7),
        reply,
    };
    assert!(answers.answer(&mut ctl, live, &config));
    // Answered once the override is on disk, never by the call itself.
    while answers.waiting() {
        tokio::time::sleep(commands::SETTLE_POLL).await;
        answers.settle(&mut ctl);
    }
    assert!(matches!(answer.await, Ok(ctl::Outcome::Ok(_))));
    assert_eq!(ctl.override_for("lab/c1").map(|o| o.weight), Some(7));
    serving.abort();
}

/// Runs `client_helper` (a `status` request) as nobody (uid/gid 65534); its answer.
async fn status_as_nobody(socket: &Path) -> Result<Reply, ErrorReply> {
    status_as(socket, 65534, "--clear-groups").await
}

/// Runs `client_helper` as `uid` (and its gid) with `groups` (a `setpriv` option:
/// `--clear-groups`, `--groups=4242`); its answer.
async fn status_as(socket: &Path, uid: u32, groups: &'static str) -> Result<Reply, ErrorReply> {
    let exe = std::env::current_exe().expect("test binary");
    let sock = socket.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Process::new("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .args([groups, "--"])
            .arg(exe)
            .args([
                "--exact",
                "client_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MEMWEIGHT_TEST_CLIENT_SOCKET", &sock)
            .output()
            .expect("run the helper as another user")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("ANSWER ").map(|(_, a)| a.to_owned()))
        .unwrap_or_else(|| {
            panic!(
                "helper printed no answer: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    ctl::parse_response(&line).expect("answer of this version")
}

/// Issue 10: the group's member list was read once at start, so `usermod -aG` needed a
/// restart (and a removal was not noticed). Now the group is resolved for every connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_group_membership_is_read_per_request() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    if !nix_is_root() || which("setpriv").is_none() {
        eprintln!("skipping: needs root and setpriv");
        return;
    }
    let tree = Tree::new();
    let ctl = tree.controller();
    let gid = Arc::new(AtomicU32::new(4242));
    let lookup: server::GroupLookup = {
        let gid = Arc::clone(&gid);
        Arc::new(move |name: &str| {
            (name == "memweight-test").then(|| server::GroupEntry {
                gid: gid.load(Ordering::SeqCst),
                members: Vec::new(),
            })
        })
    };
    let (socket, serving, looping) = serve_for_group(&tree, ctl, lookup);

    let e = status_as_nobody(&socket)
        .await
        .expect_err("not in the group");
    assert_eq!(e.kind, ErrorKind::PermissionDenied);
    // nobody's primary group becomes the configured group: served from the next request.
    gid.store(65534, Ordering::SeqCst);
    match status_as_nobody(&socket).await {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind, ErrorKind::NotReady, "{}", e.message),
    }
    // And back out again.
    gid.store(4242, Ordering::SeqCst);
    let e = status_as_nobody(&socket).await.expect_err("removed");
    assert_eq!(e.kind, ErrorKind::PermissionDenied);
    // Issue 23: a supplementary group counts, read from the socket (SO_PEERGROUPS) and not
    // from /proc/<pid>/status, which may be another process's once the client's PID is reused.
    match status_as(&socket, 65534, "--groups=4242").await {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind, ErrorKind::NotReady, "{}", e.message),
    }
    serving.abort();
    looping.abort();
}

/// Issue 10: the daemon's RSS was swapped out under the pressure it manages. It now locks its
/// memory (mlockall) when that is safe, and otherwise says why and runs on.
#[test]
fn daemon_locks_its_memory_or_says_why_not() {
    let tree = Tree::new();
    let config = tree.write_config(RULES);
    let child = Process::new(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memweightd");
    let socket = tree.socket();
    wait_for("the first tick", || {
        socket.exists() && matches!(ctl_line(&socket, Command::Status), Ok(Reply::Status(_)))
    });
    let locked_kb = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmLck:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let log = stop(child);
    if log.contains("memory locked") {
        assert!(locked_kb > 0, "said locked, VmLck {locked_kb} kB: {log}");
    } else {
        assert!(log.contains("running with unlocked memory"), "{log}");
        assert_eq!(locked_kb, 0);
    }
}

/// Issue 10, end to end: 1,100 idle connections to the real daemon's metrics port. Its fds stay
/// bounded, ticks keep coming, `status` answers, and SIGTERM still restores and exits 0.
#[test]
fn regression_1100_idle_metrics_connections_do_not_stop_the_daemon() {
    let tree = Tree::new();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let config = tree.dir.path().join("memweight.toml");
    std::fs::write(
        &config,
        tree.config_text(&format!("listen = \"{addr}\""), RULES),
    )
    .expect("write config");
    let (child, socket) = start_daemon(&tree, &config);
    wait_for("the metrics endpoint", || {
        std::net::TcpStream::connect(&addr).is_ok()
    });
    let fds = || std::fs::read_dir(format!("/proc/{}/fd", child.id())).map_or(0, Iterator::count);
    let baseline = fds();
    let idle: Vec<std::net::TcpStream> = (0..1100)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    assert!(idle.len() > 1000, "only {} connections", idle.len());
    std::thread::sleep(Duration::from_millis(300));
    let during = fds();
    assert!(
        during <= baseline + 64 + 8,
        "daemon fds went from {baseline} to {during} with {} idle clients",
        idle.len()
    );
    let before = tick_of(&socket).expect("status answers under the flood");
    wait_for("ticks to keep coming", || {
        tick_of(&socket).is_some_and(|t| t >= before + 3)
    });
    drop(idle);
    let log = stop(child);
    assert!(log.contains("original limits restored"), "{log}");
}

/// Issue 23: the loop took control calls before the tick (`biased`), each `set` saving the state
/// file with fsync, so a steady stream of requests from the group could hold the tick, and the
/// watchdog ping after it, back for as long as it lasted. Now at most a bounded number of calls
/// come between two ticks.
#[test]
fn regression_a_flood_of_set_requests_does_not_starve_the_tick() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let tree = Tree::new();
    let config = tree.write_config(RULES);
    let (child, socket) = start_daemon(&tree, &config);
    let flooding = Arc::new(AtomicBool::new(true));
    let done = Arc::new(AtomicU64::new(0));
    let flood: Vec<_> = (0..8_u32)
        .map(|i| {
            let (socket, flooding, done) =
                (socket.clone(), Arc::clone(&flooding), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut w = 2 + i;
                while flooding.load(Ordering::Relaxed) {
                    if ctl_line(&socket, set("lab/c1", w)).is_ok() {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    w = w % 9000 + 8;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let before = tick_of(&socket).expect("status answers during the flood");
    std::thread::sleep(Duration::from_secs(3));
    let after = tick_of(&socket).expect("status answers during the flood");
    flooding.store(false, Ordering::Relaxed);
    for t in flood {
        t.join().expect("flood thread");
    }
    // 30 ticks of 100 ms; a busy test machine may lose some, a starved loop loses them all.
    assert!(
        after >= before + 10,
        "ticks went from {before} to {after} in 3 s under {} set requests",
        done.load(Ordering::Relaxed)
    );
    assert!(
        done.load(Ordering::Relaxed) > 30,
        "the flood was served too"
    );
    let log = stop(child);
    assert!(log.contains("original limits restored"), "{log}");
}

/// Issue 23: with `[control] group` set and no `memweightd.socket`, the daemon could not give
/// its socket to the group (the shipped unit grants no CAP_CHOWN and filters chown) and exited,
/// so the unit crash-looped and nothing was managed. Now it warns once, serves root only, and
/// keeps managing.
#[test]
fn regression_control_group_without_cap_chown_keeps_managing_and_serves_root() {
    use std::os::unix::fs::MetadataExt;
    if !nix_is_root() || which("setpriv").is_none() {
        eprintln!("skipping: needs root and setpriv");
        return;
    }
    let Ok(Some(group)) = nix::unistd::Group::from_name("nogroup") else {
        eprintln!("skipping: no group named nogroup");
        return;
    };
    let tree = Tree::new();
    let config = tree.dir.path().join("memweight.toml");
    let text = tree
        .config_text("enabled = false", RULES)
        .replace("[metrics]\n", "group = \"nogroup\"\n[metrics]\n");
    std::fs::write(&config, text).expect("write config");
    // Root without CAP_CHOWN, as under the shipped unit (CapabilityBoundingSet=CAP_DAC_OVERRIDE).
    let child = Process::new("setpriv")
        .args(["--bounding-set=-chown", "--"])
        .arg(env!("CARGO_BIN_EXE_memweightd"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memweightd without CAP_CHOWN");
    let socket = tree.socket();
    wait_for("root served on the socket", || {
        socket.exists() && tick_of(&socket).is_some()
    });
    let meta = std::fs::metadata(&socket).expect("socket");
    assert_ne!(meta.gid(), group.gid.as_raw(), "chown cannot have worked");
    assert_eq!(meta.mode() & 0o777, 0o660);
    let before = tick_of(&socket).expect("status");
    wait_for("ticks to keep coming", || {
        tick_of(&socket).is_some_and(|t| t >= before + 3)
    });
    assert!(
        matches!(ctl_line(&socket, set("lab/c1", 9)), Ok(Reply::Setting(_))),
        "root can still change weights"
    );
    let log = stop(child);
    assert_eq!(
        log.matches("cannot give the control socket to [control] group")
            .count(),
        1,
        "{log}"
    );
    assert!(log.contains("memweightd.socket"), "{log}");
    assert!(log.contains("original limits restored"), "{log}");
}

/// Run by `regression_a_member_holding_sixteen_connections_does_not_lock_root_out` as another
/// user: opens 16 connections, prints how many were refused at once, holds the rest for 3 s.
#[test]
fn hold_helper() {
    let Some(socket) = std::env::var_os("MEMWEIGHT_TEST_HOLD_SOCKET") else {
        return;
    };
    let held: Vec<std::os::unix::net::UnixStream> = (0..16)
        .filter_map(|_| std::os::unix::net::UnixStream::connect(&socket).ok())
        .collect();
    let mut refused = 0;
    for s in &held {
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let mut line = String::new();
        if BufReader::new(s).read_line(&mut line).is_ok() && line.contains("busy") {
            refused += 1;
        }
    }
    println!("REFUSED {refused}");
    std::io::stdout().flush().expect("flush");
    std::thread::sleep(Duration::from_secs(3));
}

/// Issue 23, through a real socket: a member of the `[control] group` holding 16 idle
/// connections took every slot until their read timeout, root's included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_member_holding_sixteen_connections_does_not_lock_root_out() {
    if !nix_is_root() || which("setpriv").is_none() {
        eprintln!("skipping: needs root and setpriv");
        return;
    }
    let tree = Tree::new();
    let ctl = tree.controller();
    let lookup: server::GroupLookup = std::sync::Arc::new(|name: &str| {
        (name == "memweight-test").then(|| server::GroupEntry {
            gid: 65534,
            members: Vec::new(),
        })
    });
    let (socket, serving, looping) = serve_for_group(&tree, ctl, lookup);
    let exe = std::env::current_exe().expect("test binary");
    let mut holder = Process::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(exe)
        .args(["--exact", "hold_helper", "--nocapture", "--test-threads=1"])
        .env("MEMWEIGHT_TEST_HOLD_SOCKET", &socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run the holder as nobody");
    let stdout = holder.stdout.take().expect("stdout");
    let refused = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| {
                l.split_once("REFUSED ")
                    .and_then(|(_, n)| n.trim().parse::<usize>().ok())
            })
    })
    .await
    .expect("join")
    .expect("the holder reports");
    assert_eq!(refused, 16 - server::Limits::default().per_user);
    // While nobody holds its connections: root is served, and another user gets a slot (and
    // is refused for not being in the group, not for a full socket).
    assert!(status_or_not_ready(&socket).await, "root must be served");
    let out = match status_as(&socket, 65533, "--clear-groups").await {
        Ok(r) => format!("{r:?}"),
        Err(e) => e.message,
    };
    assert!(
        out.contains("permission denied: uid 65533") && !out.contains("busy"),
        "{out}"
    );
    let _ = holder.kill();
    let _ = holder.wait();
    serving.abort();
    looping.abort();
}
