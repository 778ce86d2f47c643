//! The daemon subcommands end to end: the built binary against a scripted fake daemon on a
//! Unix socket, checking output, one-line errors and exit codes. (The real daemon's side is
//! tested in crates/memweightd/tests/control.rs and in the lab.)

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread::JoinHandle;

use memweight_proto::ctl::{
    self, CgroupStatus, ErrorKind, ErrorReply, Outcome, Pool, Reply, Response, Status,
};

fn ctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memweightctl"))
        .args(args)
        .env_remove("MEMWEIGHT_SOCKET")
        .output()
        .expect("memweightctl runs")
}

fn stderr_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        err.lines().count(),
        1,
        "exactly one line on stderr: {err:?}"
    );
    err
}

/// A daemon that answers one connection with `answer` and returns the request line it got.
fn fake_daemon(dir: &Path, answer: String) -> (PathBuf, JoinHandle<String>) {
    let path = dir.join("fake.sock");
    let listener = UnixListener::bind(&path).expect("bind fake socket");
    let handle =
        std::thread::spawn(move || serve(&listener, vec![answer]).pop().expect("one request"));
    (path, handle)
}

/// Accepts one connection per answer, reads its request line and writes the answer; returns
/// the requests in order.
fn serve(listener: &UnixListener, answers: Vec<String>) -> Vec<String> {
    let mut requests = Vec::new();
    for answer in answers {
        let (mut s, _) = listener.accept().expect("accept");
        let mut line = String::new();
        BufReader::new(&s)
            .read_line(&mut line)
            .expect("read request");
        s.write_all(answer.as_bytes()).expect("answer");
        requests.push(line);
    }
    requests
}

fn status_reply() -> Reply {
    Reply::Status(Status {
        pool: Pool {
            tick: 12,
            enforce: true,
            capacity: 4500 << 20,
            total_usage: 6000 << 20,
            total_weight: 6,
            pressure: true,
            mem_total: 8 << 30,
            mem_available: 1 << 30,
            host_psi_some_avg10: Some(12.0),
            host_psi_full_avg10: Some(2.0),
            duration_us: 300,
            ..Pool::default()
        },
        cgroups: vec![CgroupStatus {
            cgroup: "lab/c1".into(),
            weight: 1,
            overridden: false,
            container: None,
            source: None,
            usage: 2000 << 20,
            expected: 1000 << 20,
            exceed: 1000 << 20,
            target: 833 << 20,
            entitlement: 750 << 20,
            floor: 16 << 20,
            ceiling: Some(834 << 20),
            trim: None,
            high: Some(834 << 20),
            low: Some(750 << 20),
            swap: Some(0),
            psi_some_avg10: Some(3.5),
            psi_full_avg10: Some(1.0),
            refaulted: None,
            events_high: 1,
            events_max: 0,
            events_oom_kill: 0,
            wrote_high: None,
            wrote_low: None,
            reclaim: None,
            state: memweight_proto::ctl::CgroupState::Ok,
            reason: "above weighted share by 1167 MiB".into(),
            original_high: None,
            original_low: None,
            operator: None,
            next_weight: None,
        }],
    })
}

#[test]
fn status_table_and_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sock, daemon) = fake_daemon(
        dir.path(),
        Response::new(Outcome::Ok(status_reply())).to_line(),
    );
    let s = sock.to_str().expect("utf-8 path");
    let out = ctl(&["status", "--socket", s, "--output", "table"]);
    assert!(out.status.success(), "{out:?}");
    let request = daemon.join().expect("daemon thread");
    assert_eq!(request, "{\"version\":1,\"command\":{\"op\":\"status\"}}\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("pool: capacity 4500 MiB, TU 6000 MiB, TW 6, under pressure"),
        "{text}"
    );
    let header = text
        .lines()
        .find(|l| l.starts_with("NAME"))
        .expect("table header");
    for col in [
        "WEIGHT", "USAGE", "EA", "EX", "TARGET", "HIGH", "LOW", "PSI", "STATE", "CGROUP",
    ] {
        assert!(header.contains(col), "missing {col}: {header}");
    }
    assert!(text.contains("c1     1        2.0Gi"), "{text}");

    std::fs::remove_file(&sock).expect("rm socket");
    let (sock, daemon) = fake_daemon(
        dir.path(),
        Response::new(Outcome::Ok(status_reply())).to_line(),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_memweightctl"))
        .args(["status", "-o", "json"])
        .env("MEMWEIGHT_SOCKET", &sock)
        .output()
        .expect("runs");
    daemon.join().expect("daemon thread");
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(v["pool"]["capacity"], 4500_u64 << 20);
    assert_eq!(v["cgroups"][0]["cgroup"], "lab/c1");
}

#[test]
fn set_sends_the_typed_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = ErrorReply::new(
        ErrorKind::NotManaged,
        "lab/x is not managed: no [[cgroup]] rule",
    );
    let (sock, daemon) = fake_daemon(dir.path(), Response::new(Outcome::Error(err)).to_line());
    let out = ctl(&[
        "set",
        "lab/x",
        "300",
        "--min",
        "512M",
        "--socket",
        sock.to_str().expect("utf-8"),
    ]);
    let request = daemon.join().expect("daemon thread");
    assert_eq!(
        ctl::parse_request(request.trim_end()),
        Ok(ctl::Command::Set {
            cgroup: "lab/x".into(),
            weight: 300,
            min: Some(512 << 20),
            max: None
        })
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        stderr_line(&out),
        "memweightctl: lab/x is not managed: no [[cgroup]] rule\n"
    );
}

#[test]
fn exit_codes_for_each_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("none.sock");
    let m = missing.to_str().expect("utf-8");
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["status", "--socket", m], 3, "not running"),
        (
            vec!["set", "lab/c1", "0", "--socket", m],
            2,
            "weight: must be a whole number 1..=10000, got 0",
        ),
        (
            vec!["set", "lab/c1", "10001", "--socket", m],
            2,
            "1..=10000",
        ),
        (
            vec!["set", "lab/c1", "heavy", "--socket", m],
            2,
            "got \"heavy\"",
        ),
        (vec!["set", "lab/c1", "-5", "--socket", m], 2, "got \"-5\""),
        (vec!["set", "../etc", "5", "--socket", m], 2, "`..`"),
        (
            vec!["set", "lab/c1", "5", "--min", "-1G", "--socket", m],
            2,
            "negative size",
        ),
        (
            vec![
                "set", "lab/c1", "5", "--min", "2G", "--max", "1G", "--socket", m,
            ],
            2,
            "below --min",
        ),
        (vec!["explain", "lab//c1", "--socket", m], 2, "empty"),
    ];
    for (args, code, want) in cases {
        let out = ctl(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
        let line = stderr_line(&out);
        assert!(line.contains(want), "{args:?}: {line}");
    }
    for (kind, code) in [
        (ErrorKind::PermissionDenied, 4),
        (ErrorKind::NotReady, 1),
        (ErrorKind::UnknownCgroup, 2),
    ] {
        let (sock, daemon) = fake_daemon(
            dir.path(),
            Response::new(Outcome::Error(ErrorReply::new(kind, "nope"))).to_line(),
        );
        // `--wait 0`: "not ready" is an answer at once.
        let out = ctl(&[
            "get",
            "lab/c1",
            "--wait",
            "0",
            "--socket",
            sock.to_str().expect("utf-8"),
        ]);
        daemon.join().expect("daemon thread");
        std::fs::remove_file(&sock).expect("rm");
        assert_eq!(out.status.code(), Some(code), "{kind:?}: {out:?}");
    }
    let (sock, daemon) = fake_daemon(
        dir.path(),
        "{\"version\":2,\"result\":{\"ok\":{\"kind\":\"new\"}}}\n".into(),
    );
    let out = ctl(&["reload", "--socket", sock.to_str().expect("utf-8")]);
    daemon.join().expect("daemon thread");
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(stderr_line(&out).contains("protocol version mismatch"));
}

#[test]
fn help_completions_and_man_page() {
    let help = ctl(&["--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("Exit codes: 0 success"), "{text}");
    for sub in [
        "set",
        "unset",
        "get",
        "status",
        "explain",
        "reload",
        "version",
        "plan",
        "completions",
        "man",
    ] {
        assert!(text.contains(sub), "{sub} missing from --help");
    }
    assert!(
        text.contains("piping or redirecting the output does not change it"),
        "{text}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = ctl(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("explain"),
            "{shell} completion lacks subcommands"
        );
    }
    let man = ctl(&["man"]);
    let page = String::from_utf8_lossy(&man.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH memweightctl"),
        "{page}"
    );
    assert!(page.contains("Exit codes"), "man page lacks exit codes");
    assert_eq!(ctl(&["completions", "tcsh"]).status.code(), Some(2));
}

/// A daemon that answers the connections in order with `answers`, then stops listening.
fn scripted_daemon(dir: &Path, answers: Vec<String>) -> (PathBuf, JoinHandle<Vec<String>>) {
    let path = dir.join("scripted.sock");
    let listener = UnixListener::bind(&path).expect("bind fake socket");
    let handle = std::thread::spawn(move || serve(&listener, answers));
    (path, handle)
}

/// A daemon that answers every connection with `answer` for as long as the test runs.
fn steady_daemon(dir: &Path, answer: String) -> PathBuf {
    let path = dir.join("steady.sock");
    let listener = UnixListener::bind(&path).expect("bind fake socket");
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let mut line = String::new();
            if BufReader::new(&s).read_line(&mut line).is_ok() {
                let _ = s.write_all(answer.as_bytes());
            }
        }
    });
    path
}

fn not_ready() -> String {
    Response::new(Outcome::Error(ErrorReply::not_ready())).to_line()
}

/// Regression (host-podman on 6.12, `cargo xtask test`): `memweightctl status` right after
/// `systemctl stop memweightd` made socket activation start the daemon, which answered "the
/// daemon has not completed its first tick yet", and memweightctl exited with an error. It
/// now says on stderr that it waits, and prints the status once the first tick is done.
#[test]
fn regression_status_right_after_socket_activation_waits_for_the_first_tick() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ok = Response::new(Outcome::Ok(status_reply())).to_line();
    let (sock, daemon) = scripted_daemon(dir.path(), vec![not_ready(), not_ready(), ok]);
    let out = ctl(&["status", "--socket", sock.to_str().expect("utf-8")]);
    let requests = daemon.join().expect("daemon thread");
    assert_eq!(requests.len(), 3, "asked again until ready");
    assert!(out.status.success(), "{out:?}");
    let err = stderr_line(&out);
    assert!(
        err.starts_with("memweightctl: memweightd has not completed its first tick yet")
            && err.contains("waiting up to 30 s"),
        "{err}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("pool: capacity 4500 MiB"), "{text}");
}

/// The wait is bounded: a daemon that never gets ready fails with exit 1 after `--wait`.
#[test]
fn the_first_tick_wait_is_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = steady_daemon(dir.path(), not_ready());
    let started = std::time::Instant::now();
    let out = ctl(&[
        "status",
        "--wait",
        "1",
        "--socket",
        sock.to_str().expect("utf-8"),
    ]);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 2, "the wait, then the failure: {err}");
    assert!(
        err.contains("has not completed its first tick within 1 s of waiting"),
        "{err}"
    );
}

/// Global options go before the subcommand, and a pipe keeps the format chosen (or the
/// table): Command::output always pipes stdout.
#[test]
fn global_options_before_the_subcommand_and_pipes_keep_the_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ok = Response::new(Outcome::Ok(status_reply())).to_line();
    let sock = steady_daemon(dir.path(), ok);
    let s = sock.to_str().expect("utf-8");
    let out = ctl(&["-o", "json", "--socket", s, "status"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(v["cgroups"][0]["cgroup"], "lab/c1");
    let out = ctl(&["--socket", s, "status"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("pool: ") && text.contains("\nNAME "),
        "a pipe gets the table: {text}"
    );
    let out = ctl(&["--socket", s, "status", "-o", "wide", "c1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ENTITLEMENT") && text.contains(" lab/c1 "),
        "{text}"
    );
    let out = ctl(&["--socket", s, "status", "nope*"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("no managed cgroup matches nope*"), "{text}");
}

fn version_answer() -> String {
    Response::new(Outcome::Ok(Reply::Version(ctl::Version {
        program: "memweightd".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        protocol: ctl::PROTOCOL_VERSION,
    })))
    .to_line()
}

#[test]
fn version_names_client_and_daemon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sock, daemon) = scripted_daemon(dir.path(), vec![version_answer(), version_answer()]);
    let s = sock.to_str().expect("utf-8");
    let out = ctl(&["version", "--socket", s]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let v = env!("CARGO_PKG_VERSION");
    assert!(
        text.starts_with(&format!(
            "client: memweightctl {v} (control protocol 1)\ndaemon: memweightd {v} (control \
             protocol 1) at {s}\n"
        )),
        "{text}"
    );
    let out = ctl(&["-o", "json", "version", "--socket", s]);
    let requests = daemon.join().expect("daemon thread");
    assert_eq!(
        requests[0],
        "{\"version\":1,\"command\":{\"op\":\"version\"}}\n"
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(j["client"]["version"], v);
    assert_eq!(j["daemon"]["version"], v);
}

/// A daemon from before `version` refuses it as an unknown command: named as older, exit 0.
/// An unreachable daemon: the client's line, then the error, exit 3.
#[test]
fn version_with_an_old_or_no_daemon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = Response::new(Outcome::Error(ErrorReply::new(
        ErrorKind::BadRequest,
        "malformed request: unknown variant `version`, expected one of `set`, `unset`, `get`, \
         `status`, `explain`, `reload`",
    )))
    .to_line();
    let (sock, daemon) = fake_daemon(dir.path(), old);
    let out = ctl(&["version", "--socket", sock.to_str().expect("utf-8")]);
    daemon.join().expect("daemon thread");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("daemon: memweightd older than this memweightctl: it does not answer"),
        "{text}"
    );
    let missing = dir.path().join("none.sock");
    let out = ctl(&["version", "--socket", missing.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("client: memweightctl "), "{text}");
    assert!(stderr_line(&out).contains("not running"));
}

fn watch(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_memweightctl"))
        .args(args)
        .env_remove("MEMWEIGHT_SOCKET")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("memweightctl runs")
}

fn stderr_of(child: &mut std::process::Child) -> String {
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("piped"), &mut err)
        .expect("read stderr");
    err
}

#[test]
fn watch_redraws_and_stops_after_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = steady_daemon(
        dir.path(),
        Response::new(Outcome::Ok(status_reply())).to_line(),
    );
    let s = sock.to_str().expect("utf-8");
    let out = ctl(&["status", "-w", "-n", "0.2", "--count", "3", "--socket", s]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("pool: capacity").count(), 3, "{text}");
    assert_eq!(text.matches("\n\npool: capacity").count(), 2, "{text}");
    let out = ctl(&["status", "-n", "1", "--socket", s]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--interval needs --watch: {out:?}"
    );
}

/// Starts `status -w -n INTERVAL` against a daemon answering every status the same, and
/// reads its first frame; returns the watch and the rest of its stdout.
fn first_frame_of_a_watch(
    interval: &str,
) -> (
    tempfile::TempDir,
    std::process::Child,
    BufReader<std::process::ChildStdout>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = steady_daemon(
        dir.path(),
        Response::new(Outcome::Ok(status_reply())).to_line(),
    );
    let mut child = watch(&[
        "status",
        "-w",
        "-n",
        interval,
        "--socket",
        sock.to_str().expect("utf-8"),
    ]);
    let mut first = String::new();
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    out.read_line(&mut first).expect("first frame");
    assert!(first.starts_with("pool: "), "{first}");
    (dir, child, out)
}

/// The watch ended with exit 0 and nothing on stderr.
fn ended_cleanly(mut child: std::process::Child) {
    let err = stderr_of(&mut child);
    let status = child.wait().expect("exits");
    assert_eq!(status.code(), Some(0), "{status:?} {err}");
    assert_eq!(err, "");
}

/// Ctrl-C ends a watch cleanly: exit 0, nothing on stderr.
#[test]
fn watch_exits_cleanly_on_ctrl_c() {
    let (_dir, child, _out) = first_frame_of_a_watch("5");
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    ended_cleanly(child);
}

/// A reader that goes away (`| head`) ends a watch cleanly too.
#[test]
fn watch_exits_cleanly_on_a_closed_pipe() {
    let (_dir, child, out) = first_frame_of_a_watch("0.2");
    drop(out);
    ended_cleanly(child);
}
