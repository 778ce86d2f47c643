//! Container labels end to end: a fake Docker-compatible engine (a small HTTP/1.1 responder on
//! a real Unix socket, as podman's `podman.socket` and docker serve it) in front of a fake
//! cgroupfs tree with podman's `machine.slice/libpod-<id>.scope` cgroups, the real controller
//! with its refresh task, and the real control socket.
//!
//! Each test runs on one thread, so the log lines the daemon writes (captured with a
//! thread-local tracing subscriber) are those of this test only.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memweight_cgroupfs::testing::{FakeCgroup, FakeProc};
use memweight_proto::ctl::{
    self, CgroupState, Command, ErrorKind, ErrorReply, Reply, Request, WeightSource,
};
use memweightd::commands;
use memweightd::config::Config;
use memweightd::controller::{Controller, TickReport};
use memweightd::server::{Call, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::sync::mpsc;

mod common;

use common::MIB;

const WEB: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const DB: &str = "2222222222222222222222222222222222222222222222222222222222222222";
const PLAIN: &str = "3333333333333333333333333333333333333333333333333333333333333333";

/// How the fake engine answers.
#[derive(Debug, Clone)]
enum Answer {
    /// 200 with this JSON body.
    Json(String),
    /// Accepts the connection and never answers.
    Hang,
}

/// A Docker-compatible API on a Unix socket that answers `GET /containers/json`, and, given
/// libpod inspect answers ([`FakeEngine::start_podman`]), `GET /v4.0.0/libpod/containers/{id}/json`
/// as podman does (404 "no such container" for other ids); without them every other path is
/// docker's 404 "page not found".
struct FakeEngine {
    path: PathBuf,
    answer: Arc<Mutex<Answer>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeEngine {
    fn start(path: &Path, answer: Answer) -> Self {
        Self::start_podman(path, answer, std::collections::BTreeMap::new())
    }

    fn start_podman(
        path: &Path,
        answer: Answer,
        inspects: std::collections::BTreeMap<String, String>,
    ) -> Self {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).expect("bind the fake engine socket");
        let answer = Arc::new(Mutex::new(answer));
        let shared = Arc::clone(&answer);
        let inspects = Arc::new(inspects);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    continue;
                };
                let answer = shared.lock().expect("answer lock").clone();
                let inspects = Arc::clone(&inspects);
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0_u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&request);
                    let inspect = head
                        .strip_prefix("GET /v4.0.0/libpod/containers/")
                        .and_then(|rest| rest.split_once("/json "))
                        .map(|(id, _)| id.to_owned());
                    if let (Some(id), false) = (inspect, inspects.is_empty()) {
                        let (status, body) = match inspects.get(&id) {
                            Some(b) => ("200 OK", b.clone()),
                            None => (
                                "404 Not Found",
                                r#"{"cause":"no such container","message":"no such container","response":404}"#
                                    .to_owned(),
                            ),
                        };
                        let reply = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = stream.write_all(reply.as_bytes()).await;
                        let _ = stream.shutdown().await;
                        return;
                    }
                    let body = match answer {
                        Answer::Hang => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            return;
                        }
                        Answer::Json(_) if !head.starts_with("GET /containers/json ") => {
                            "{\"message\":\"page not found\"}".to_owned()
                        }
                        Answer::Json(b) => b,
                    };
                    let status = if head.starts_with("GET /containers/json ") {
                        "200 OK"
                    } else {
                        "404 Not Found"
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        FakeEngine {
            path: path.to_owned(),
            answer,
            task,
        }
    }

    fn answer(&self, a: Answer) {
        *self.answer.lock().expect("answer lock") = a;
    }
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One container in the engine's list; podman's compat API sometimes leaves out the `/`.
fn container(id: &str, name: &str, labels: &[(&str, &str)]) -> String {
    let labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .collect();
    serde_json::json!({
        "Id": id,
        "Names": [name],
        "Image": "localhost/test:latest",
        "Labels": labels,
        "State": "running",
        "Status": "Up 2 minutes",
    })
    .to_string()
}

fn list(items: &[String]) -> Answer {
    Answer::Json(format!("[{}]", items.join(",")))
}

fn scope(id: &str) -> String {
    format!("machine.slice/libpod-{id}.scope")
}

struct Host {
    dir: tempfile::TempDir,
    proc: FakeProc,
    _cgroups: Vec<FakeCgroup>,
}

impl Host {
    /// Three podman containers' cgroups, 2000 MiB each, and `lab/c1` (not a container).
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (proc, mut cgroups) = common::seed_cgroups(dir.path());
        for id in [WEB, DB, PLAIN] {
            let c = FakeCgroup::new(dir.path().join("cg"), &scope(id));
            c.set_current(2000 * MIB);
            c.set_stat(1900 * MIB, 100 * MIB);
            cgroups.push(c);
        }
        Host {
            dir,
            proc,
            _cgroups: cgroups,
        }
    }

    fn engine_socket(&self) -> PathBuf {
        self.dir.path().join("engine.sock")
    }

    fn control_socket(&self) -> PathBuf {
        self.dir.path().join("run").join("memweightd.sock")
    }

    fn controller(&self) -> Controller {
        self.controller_with(
            "[[cgroup]]\nglob = \"machine.slice/libpod-*.scope\"\nweight = 100\n\
             [[cgroup]]\npath = \"lab/c1\"\nweight = 7\n",
        )
    }

    fn controller_with(&self, rules: &str) -> Controller {
        let text = format!(
            "cgroup_root = {:?}\nproc_root = {:?}\nsys_root = {:?}\nstate_dir = {:?}\ntick = \"100ms\"\n\
             max_step = \"100%\"\n[capacity]\nmode = \"fixed\"\nfixed = \"6000M\"\n\
             [control]\nsocket = {:?}\n[metrics]\nenabled = false\n\
             [containers]\nsocket = {:?}\nrefresh = \"100ms\"\n{rules}",
            self.dir.path().join("cg"),
            self.proc.path(),
            self.proc.sys_path(),
            self.dir.path().join("state"),
            self.control_socket(),
            self.engine_socket(),
        );
        let (cfg, rules) = Config::parse(&text, Path::new("test.toml")).expect("valid config");
        let mut ctl = Controller::new(cfg, rules).expect("controller starts on the fake tree");
        ctl.start_containers();
        ctl
    }
}

/// Log lines written on this thread, for checking warnings.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let log = Log::default();
        let sink = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("memweightd=debug"))
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        (log, guard)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log lock")).into_owned()
    }

    /// Lines at `level` (e.g. ` WARN `) that contain `what`.
    fn count(&self, level: &str, what: &str) -> usize {
        self.text()
            .lines()
            .filter(|l| l.contains(level) && l.contains(what))
            .count()
    }
}

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn row<'a>(r: &'a TickReport, cgroup: &str) -> &'a ctl::CgroupStatus {
    r.cgroups
        .iter()
        .find(|c| c.cgroup == cgroup)
        .unwrap_or_else(|| panic!("{cgroup} is managed: {r:#?}"))
}

/// Ticks (letting the refresh task run in between) until `pred` holds; at most 5 s.
async fn tick_until(ctl: &mut Controller, what: &str, pred: impl Fn(&TickReport) -> bool) {
    for _ in 0..100 {
        let report = ctl.tick().await.expect("tick").clone();
        if pred(&report) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = ctl.tick().await.expect("tick").clone();
    panic!("{what}: not reached within 5 s; last report {report:#?}");
}

fn label(container: &str) -> Option<WeightSource> {
    Some(WeightSource::Label {
        label: "memweight.weight".into(),
        container: container.into(),
    })
}

fn config_rule(rule: &str) -> Option<WeightSource> {
    Some(WeightSource::Config { rule: rule.into() })
}

#[tokio::test]
async fn label_weights_apply_and_follow_relabel_and_stop() {
    let host = Host::new();
    let engine = FakeEngine::start(
        &host.engine_socket(),
        list(&[
            container(
                WEB,
                "/web",
                &[("memweight.weight", "2"), ("memweight.min", "256M")],
            ),
            // podman's compat API may give names without the leading slash.
            container(DB, "db", &[("memweight.weight", "300")]),
            container(PLAIN, "/plain", &[("unrelated", "x")]),
        ]),
    );
    // The operator lets labels ask for more than the rule gives.
    let mut ctl = host.controller_with(
        "[[cgroup]]\nglob = \"machine.slice/libpod-*.scope\"\nweight = 100\n\
         label_weight_max = 1000\nlabel_min_max = \"1G\"\n\
         [[cgroup]]\npath = \"lab/c1\"\nweight = 7\n",
    );
    tick_until(&mut ctl, "label weights applied", |r| {
        row(r, &scope(WEB)).weight == 2 && row(r, &scope(DB)).weight == 300
    })
    .await;
    let r = ctl.tick().await.expect("tick").clone();
    let web = row(&r, &scope(WEB));
    assert_eq!(web.container.as_deref(), Some("web"));
    assert_eq!(web.source, label("web"));
    let resolved = ctl.resolve(&scope(WEB)).expect("a rule names it");
    assert_eq!(
        resolved.settings.min,
        256 * MIB,
        "memweight.min is the floor"
    );
    assert_eq!(resolved.configured.min, 0);
    assert_eq!(row(&r, &scope(DB)).container.as_deref(), Some("db"));
    let plain = row(&r, &scope(PLAIN));
    assert_eq!(
        (plain.weight, plain.container.as_deref()),
        (100, Some("plain"))
    );
    assert_eq!(plain.source, config_rule("machine.slice/libpod-*.scope"));
    let lab = row(&r, "lab/c1");
    assert_eq!((lab.weight, lab.container.as_deref()), (7, None));
    assert_eq!(lab.source, config_rule("lab/c1"));
    assert_eq!(r.pool.total_weight, 2 + 300 + 100 + 7);

    // Relabelled (podman cannot relabel a running container, but a recreated one with the
    // same id in a test can): picked up within a refresh or two.
    engine.answer(list(&[
        container(WEB, "/web", &[("memweight.weight", "5")]),
        container(PLAIN, "/plain", &[]),
    ]));
    tick_until(&mut ctl, "new label and db gone from the engine", |r| {
        row(r, &scope(WEB)).weight == 5 && row(r, &scope(DB)).weight == 100
    })
    .await;
    let r = ctl.tick().await.expect("tick").clone();
    let db = row(&r, &scope(DB));
    assert_eq!(db.container, None, "db is no longer listed");
    assert_eq!(db.source, config_rule("machine.slice/libpod-*.scope"));
    let resolved = ctl.resolve(&scope(WEB)).expect("a rule names it");
    assert_eq!(
        resolved.settings.min, 0,
        "the min label went away with the relabel"
    );
}

#[tokio::test]
async fn invalid_label_falls_back_to_the_rule_with_one_warning() {
    let (log, _guard) = Log::capture();
    let host = Host::new();
    let _engine = FakeEngine::start(
        &host.engine_socket(),
        list(&[
            container(WEB, "/web", &[("memweight.weight", "heavy")]),
            container(DB, "/db", &[("memweight.weight", "20000")]),
            container(PLAIN, "/plain", &[("memweight.max", "1G")]),
        ]),
    );
    let mut ctl = host.controller();
    tick_until(&mut ctl, "containers named", |r| {
        row(r, &scope(WEB)).container.is_some()
    })
    .await;
    for _ in 0..5 {
        ctl.tick().await.expect("tick");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = ctl.tick().await.expect("tick").clone();
    for id in [WEB, DB] {
        let c = row(&r, &scope(id));
        assert_eq!(c.weight, 100, "the rule's weight applies: {c:?}");
        assert_eq!(c.source, config_rule("machine.slice/libpod-*.scope"));
    }
    let plain = row(&r, &scope(PLAIN));
    assert_eq!(plain.ceiling, Some(1 << 30), "a valid max label applies");
    let warning = "ignoring an invalid container label";
    assert_eq!(log.count(" WARN ", warning), 2, "{}", log.text());
    let text = log.text();
    let web = text
        .lines()
        .find(|l| l.contains(warning) && l.contains("container=web"))
        .unwrap_or_else(|| panic!("a warning names the container: {text}"));
    assert!(web.contains("label=memweight.weight"), "{web}");
    assert!(web.contains("value=heavy"), "{web}");
    assert!(web.contains("1..=10000"), "the accepted form: {web}");
    assert_eq!(log.count(" ERROR ", ""), 0, "{text}");
}

/// The issue-23 reproduction: under the shipped rule (weight 100, no bounds written), a
/// container started with `--label memweight.weight=10000 --label memweight.min=1T` kept its
/// whole working set while its neighbours fell to 46 %. Now labels get no more than the rule
/// gives, and `explain`, the log (once) and the metric say so.
#[tokio::test]
async fn regression_hostile_labels_are_clamped_explained_logged_once_and_flagged() {
    let (log, _guard) = Log::capture();
    let host = Host::new();
    let _engine = FakeEngine::start(
        &host.engine_socket(),
        list(&[
            container(
                WEB,
                "/web",
                &[("memweight.weight", "10000"), ("memweight.min", "1T")],
            ),
            container(DB, "/db", &[("memweight.max", "8G")]),
            container(PLAIN, "/plain", &[("memweight.weight", "50")]),
        ]),
    );
    let mut ctl = host.controller_with(
        "[[cgroup]]\nglob = \"machine.slice/libpod-*.scope\"\nweight = 100\nmax = \"4G\"\n",
    );
    tick_until(&mut ctl, "labels read", |r| {
        row(r, &scope(PLAIN)).weight == 50
    })
    .await;
    for _ in 0..5 {
        ctl.tick().await.expect("tick");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = ctl.tick().await.expect("tick").clone();

    let web = ctl.resolve(&scope(WEB)).expect("a rule names it");
    assert_eq!(
        (web.settings.weight, web.settings.min),
        (100, 0),
        "clamped to the rule's own weight and min"
    );
    assert_eq!(row(&r, &scope(WEB)).source, label("web"));
    let db = ctl.resolve(&scope(DB)).expect("a rule names it");
    assert_eq!(
        db.settings.max,
        Some(4 << 30),
        "a max above the rule's is refused"
    );
    let plain = ctl.resolve(&scope(PLAIN)).expect("a rule names it");
    assert!(plain.label_clamps.is_empty(), "asking for less is fine");
    assert_eq!(r.pool.total_weight, 100 + 100 + 50);

    // explain says so, by container name.
    let out = commands::handle(
        &mut ctl,
        Command::Explain {
            cgroup: "web".into(),
        },
        Path::new("test.toml"),
    );
    let ctl::Outcome::Ok(Reply::Explain(e)) = out else {
        panic!("explain web: {out:?}");
    };
    // (memweightctl writes the sentences from these: crates/memweightctl/src/narrative.rs.)
    let clamps: Vec<(String, ctl::LabelField, u64, u64)> = e
        .setting
        .label_clamps
        .iter()
        .map(|c| (c.label.clone(), c.field, c.asked, c.applied))
        .collect();
    assert!(
        clamps.contains(&(
            "memweight.weight".into(),
            ctl::LabelField::Weight,
            10_000,
            100
        )),
        "{clamps:?}"
    );
    assert!(
        clamps
            .iter()
            .any(|c| c.0 == "memweight.min" && c.1 == ctl::LabelField::Min && c.2 == 1 << 40),
        "{clamps:?}"
    );
    let out = commands::handle(
        &mut ctl,
        Command::Get {
            cgroup: "db".into(),
        },
        Path::new("t"),
    );
    let ctl::Outcome::Ok(Reply::Setting(s)) = out else {
        panic!("get db: {out:?}");
    };
    assert_eq!(s.label_clamps.len(), 1);
    assert_eq!(s.label_clamps[0].field, ctl::LabelField::Max);
    assert_eq!(s.effective.max, Some(4 << 30));

    // The log: once per container and label, however many ticks.
    let warning = "asks for more than its rule lets labels ask";
    assert_eq!(log.count(" WARN ", warning), 3, "{}", log.text());
    let text = log.text();
    let line = text
        .lines()
        .find(|l| l.contains(warning) && l.contains("label=memweight.min"))
        .unwrap_or_else(|| panic!("a warning names the label: {text}"));
    assert!(
        line.contains("container=web") && line.contains("bound=\"label_min_max\""),
        "{line}"
    );

    // The metric: one series per clamped label.
    let mut clamped: Vec<(String, String)> = r
        .label_clamps
        .iter()
        .map(|c| (c.container.clone(), c.label.clone()))
        .collect();
    clamped.sort();
    let want = |c: &str, l: &str| (c.to_owned(), l.to_owned());
    assert_eq!(
        clamped,
        [
            want("db", "memweight.max"),
            want("web", "memweight.min"),
            want("web", "memweight.weight"),
        ]
    );
    let snapshot = memweightd::metrics::Published {
        report: r,
        counters: ctl.counters().clone(),
        at: std::time::Instant::now(),
        interval: Duration::from_secs(1),
    };
    let metrics = memweightd::metrics::render(
        Some(&snapshot),
        &memweightd::metrics::Metrics::default(),
        memweightd::metrics::Format::Classic,
    );
    assert!(
        metrics.contains(&format!(
            "memweight_label_clamped{{cgroup=\"{}\",container=\"web\",label=\"memweight.weight\"}} 1",
            scope(WEB)
        )),
        "{metrics}"
    );
    assert_eq!(log.count(" ERROR ", ""), 0, "{text}");
}

/// A label warning is remembered while its container runs, not for the daemon's lifetime:
/// the set of warned keys stays bounded by the containers listed now.
#[tokio::test]
async fn label_warnings_are_forgotten_with_their_container() {
    let (log, _guard) = Log::capture();
    let host = Host::new();
    let bad = || {
        list(&[container(
            WEB,
            "/web",
            &[("memweight.weight", "heavy\nERROR forged")],
        )])
    };
    let engine = FakeEngine::start(&host.engine_socket(), bad());
    let mut ctl = host.controller();
    tick_until(&mut ctl, "containers named", |r| {
        row(r, &scope(WEB)).container.is_some()
    })
    .await;
    for _ in 0..3 {
        ctl.tick().await.expect("tick");
    }
    let warning = "ignoring an invalid container label";
    assert_eq!(log.count(" WARN ", warning), 1, "{}", log.text());
    let text = log.text();
    let line = text.lines().find(|l| l.contains(warning)).expect("warned");
    assert!(
        line.contains(r#"value="heavy\nERROR forged""#),
        "an untrusted value is quoted and escaped: {line}"
    );
    engine.answer(list(&[]));
    tick_until(&mut ctl, "container no longer listed", |r| {
        row(r, &scope(WEB)).container.is_none()
    })
    .await;
    engine.answer(bad());
    tick_until(&mut ctl, "listed again", |r| {
        row(r, &scope(WEB)).container.is_some()
    })
    .await;
    assert_eq!(
        log.count(" WARN ", warning),
        2,
        "its key was dropped with the container: {}",
        log.text()
    );
}

#[tokio::test]
async fn no_engine_socket_means_config_weights_and_ticks_go_on() {
    let (log, _guard) = Log::capture();
    let host = Host::new();
    let mut ctl = host.controller();
    // Several refreshes without a socket: the rules' weights, ticks keep coming.
    for _ in 0..8 {
        let r = ctl
            .tick()
            .await
            .expect("ticks go on without an engine")
            .clone();
        let web = row(&r, &scope(WEB));
        assert_eq!((web.weight, web.container.as_deref()), (100, None));
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let hint = "systemctl enable --now podman.socket";
    assert_eq!(
        log.count(" WARN ", "cannot list containers"),
        1,
        "{}",
        log.text()
    );
    assert!(log.text().contains(hint), "{}", log.text());
    assert!(
        log.count(" DEBUG ", "still unavailable") >= 1,
        "{}",
        log.text()
    );
    assert_eq!(log.count(" ERROR ", ""), 0, "{}", log.text());

    // The engine comes up: one INFO, and the labels apply.
    let _engine = FakeEngine::start(
        &host.engine_socket(),
        list(&[container(WEB, "/web", &[("memweight.weight", "3")])]),
    );
    tick_until(&mut ctl, "labels once the engine is up", |r| {
        row(r, &scope(WEB)).weight == 3
    })
    .await;
    assert_eq!(log.count(" INFO ", "answers again"), 1, "{}", log.text());
}

#[tokio::test]
async fn hanging_or_garbled_engine_never_stalls_ticks_and_garbage_expires_labels() {
    let (log, _guard) = Log::capture();
    let host = Host::new();
    let engine = FakeEngine::start(
        &host.engine_socket(),
        list(&[container(WEB, "/web", &[("memweight.weight", "4")])]),
    );
    let mut ctl = host.controller();
    tick_until(&mut ctl, "label applied", |r| {
        row(r, &scope(WEB)).weight == 4
    })
    .await;

    engine.answer(Answer::Hang);
    let started = std::time::Instant::now();
    for _ in 0..5 {
        ctl.tick().await.expect("tick");
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "ticks do not wait on the engine: {:?}",
        started.elapsed()
    );
    // A slow engine keeps the labels for a while (regression: under memory pressure podman's
    // API answered late and the weights fell back to the config exactly when they mattered),
    // though not for ever: STALE_AFTER_SLOW refreshes (src/containers.rs tests).
    for _ in 0..10 {
        ctl.tick().await.expect("tick");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = ctl.tick().await.expect("tick");
    assert_eq!(
        row(&report, &scope(WEB)).weight,
        4,
        "a hanging engine keeps labels"
    );

    // An answer that is not the API's is an engine that is gone: after a few, labels expire.
    engine.answer(Answer::Json("{\"not\": \"a list\"".to_owned()));
    tick_until(&mut ctl, "label expired after garbage answers", |r| {
        row(r, &scope(WEB)).weight == 100
    })
    .await;
    engine.answer(list(&[container(WEB, "web", &[("memweight.weight", "6")])]));
    tick_until(&mut ctl, "labels back", |r| row(r, &scope(WEB)).weight == 6).await;
    assert_eq!(log.count(" ERROR ", ""), 0, "{}", log.text());
}

/// Regression (host-kube on 6.12, 2026-11-27): started again under pressure, the daemon split
/// the pool by the rules' weight while podman's API service took 23 s to answer, and held the
/// weight-3 pod at a third of what it held. Until the engine first answers it holds nothing;
/// once it has, the labels' weights are held.
#[tokio::test]
async fn regression_before_the_engine_answered_the_rules_weights_held_the_pods() {
    let (log, _guard) = Log::capture();
    let host = Host::new();
    let engine = FakeEngine::start(&host.engine_socket(), Answer::Hang);
    let mut ctl = host.controller();
    let highs = || -> Vec<String> { host._cgroups.iter().map(FakeCgroup::read_high).collect() };
    for _ in 0..8 {
        let report = ctl.tick().await.expect("tick");
        assert_eq!(row(&report, &scope(WEB)).weight, 100, "the rule's weight");
        // `status` says why nothing is held (it looked like a dry run).
        assert!(report.pool.engine_wait && !report.pool.enforce);
        assert_eq!(row(&report, &scope(WEB)).state, CgroupState::EngineWait);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        highs().iter().all(|h| h == "max"),
        "8000 MiB in a 6000 MiB pool, but nothing held before the engine answered: {:?}",
        highs()
    );
    assert_eq!(log.count(" INFO ", "waiting for the container engine"), 1);

    engine.answer(list(&[container(
        WEB,
        "/web",
        &[("memweight.weight", "4")],
    )]));
    tick_until(&mut ctl, "the label's weight, held", |r| {
        row(r, &scope(WEB)).weight == 4 && host._cgroups.iter().any(|c| c.read_high() != "max")
    })
    .await;
    assert_eq!(log.count(" INFO ", "the container engine answered"), 1);
    let report = ctl.tick().await.expect("tick");
    assert!(report.pool.enforce && !report.pool.engine_wait);
}

/// The daemon's loop in miniature, as `main` runs it: ticks and control calls.
fn spawn_loop(
    mut ctl: Controller,
    mut calls: mpsc::Receiver<Call>,
) -> tokio::task::JoinHandle<Controller> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(100));
        let mut answers = commands::Answers::default();
        loop {
            tokio::select! {
                () = tokio::time::sleep(commands::SETTLE_POLL), if ctl.saving_overrides() => {
                    answers.settle(&mut ctl);
                }
                _ = interval.tick() => { let _ = ctl.tick().await; }
                call = calls.recv() => {
                    let Some(call) = call else { break };
                    answers.answer(&mut ctl, call, Path::new("test.toml"));
                }
            }
        }
        ctl
    })
}

async fn ask(socket: &Path, command: Command) -> Result<Reply, ErrorReply> {
    use tokio::io::AsyncBufReadExt;
    let mut s = tokio::net::UnixStream::connect(socket)
        .await
        .expect("connect to the control socket");
    s.write_all(Request::new(command).to_line().as_bytes())
        .await
        .expect("send");
    let mut answer = String::new();
    tokio::io::BufReader::new(s)
        .read_line(&mut answer)
        .await
        .expect("read answer");
    ctl::parse_response(answer.trim_end()).expect("a well-formed answer")
}

fn set(cgroup: &str, weight: u32) -> Command {
    Command::Set {
        cgroup: cgroup.into(),
        weight,
        min: None,
        max: None,
    }
}

async fn status_until(socket: &Path, what: &str, pred: impl Fn(&ctl::Status) -> bool) {
    for _ in 0..50 {
        if let Ok(Reply::Status(s)) = ask(socket, Command::Status).await
            && pred(&s)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not reached within 5 s");
}

fn weight(s: &ctl::Status, cgroup: &str) -> Option<(u32, Option<WeightSource>)> {
    s.cgroups
        .iter()
        .find(|c| c.cgroup == cgroup)
        .map(|c| (c.weight, c.source.clone()))
}

#[tokio::test]
async fn set_by_container_name_beats_the_label_through_the_control_socket() {
    let host = Host::new();
    let _engine = FakeEngine::start(
        &host.engine_socket(),
        list(&[
            container(WEB, "/web", &[("memweight.weight", "2")]),
            container(DB, "db", &[]),
            container(
                "4444444444444444444444444444444444444444444444444444444444444444",
                "/unmanaged",
                &[],
            ),
        ]),
    );
    let ctl = host.controller();
    let server = Server::bind(&ctl.config().control).expect("bind the control socket");
    let (calls_tx, calls) = mpsc::channel(16);
    let server_task = tokio::spawn(server.serve(calls_tx));
    let looper = spawn_loop(ctl, calls);
    let socket = host.control_socket();
    status_until(&socket, "label weight", |s| {
        weight(s, &scope(WEB)) == Some((2, label("web")))
    })
    .await;

    // By name: the override wins over the label, and is stored by cgroup path.
    match ask(&socket, set("web", 300)).await {
        Ok(Reply::Setting(s)) => {
            assert_eq!(s.cgroup, scope(WEB));
            assert_eq!(s.container.as_deref(), Some("web"));
            assert_eq!(s.effective.weight, 300);
            assert_eq!(s.labels.and_then(|l| l.weight), Some(2));
            assert_eq!(s.source, Some(WeightSource::Override));
        }
        other => panic!("set web: {other:?}"),
    }
    status_until(&socket, "override beats label", |s| {
        weight(s, &scope(WEB)) == Some((300, Some(WeightSource::Override)))
    })
    .await;
    let state = std::fs::read_to_string(host.dir.path().join("state").join("state.json"))
        .expect("state file");
    assert!(
        state.contains(&format!("\"{}\"", scope(WEB))),
        "stored by path: {state}"
    );

    // explain by name says where the weight comes from.
    match ask(
        &socket,
        Command::Explain {
            cgroup: "web".into(),
        },
    )
    .await
    {
        Ok(Reply::Explain(e)) => {
            assert_eq!(e.status.container.as_deref(), Some("web"));
            assert_eq!(e.status.weight, 300);
            assert_eq!(e.status.source, Some(WeightSource::Override));
        }
        other => panic!("explain web: {other:?}"),
    }
    // By id prefix (12+) and full id; unset returns to the label.
    match ask(
        &socket,
        Command::Get {
            cgroup: DB[..12].into(),
        },
    )
    .await
    {
        Ok(Reply::Setting(s)) => assert_eq!(s.cgroup, scope(DB)),
        other => panic!("get by id prefix: {other:?}"),
    }
    match ask(&socket, Command::Unset { cgroup: WEB.into() }).await {
        Ok(Reply::Setting(s)) => {
            assert_eq!(s.effective.weight, 2);
            assert_eq!(s.source, label("web"));
        }
        other => panic!("unset by id: {other:?}"),
    }
    match ask(
        &socket,
        Command::Explain {
            cgroup: "web".into(),
        },
    )
    .await
    {
        Ok(Reply::Explain(_)) => {}
        other => panic!("explain web after unset: {other:?}"),
    }
    status_until(&socket, "label again", |s| {
        weight(s, &scope(WEB)) == Some((2, label("web")))
    })
    .await;

    // Names nobody knows, and containers no rule manages, say what to do.
    let e = ask(&socket, set("nope", 5))
        .await
        .expect_err("unknown name");
    assert_eq!(e.kind, ErrorKind::NotManaged);
    assert!(
        e.message
            .contains("no managed cgroup or running container named nope; see memweightctl status"),
        "{}",
        e.message
    );
    // A running container whose scope is not in the tree (yet): the podman glob would name it.
    let e = ask(&socket, set("unmanaged", 5))
        .await
        .expect_err("not adopted");
    assert_eq!(e.kind, ErrorKind::UnknownCgroup);
    assert!(
        e.message.contains("container unmanaged (444444444444)")
            && e.message.contains("not managed yet"),
        "{}",
        e.message
    );
    // Paths still work as before.
    assert!(ask(&socket, set("lab/c1", 9)).await.is_ok());

    server_task.abort();
    looper.abort();
}

/// Regression (issue 23): a runtime override was forgotten as soon as its container's scope was
/// gone for one tick, as it is during `podman restart` or a restart policy after an OOM kill.
/// The container comes back with the same id, so under the same cgroup path, and finds its
/// override again; a cgroup that is not a container's still takes its override with it.
#[tokio::test]
async fn regression_override_survives_its_containers_restart() {
    let (log, _guard) = Log::capture();
    let host = Host::new();
    let running = || list(&[container(WEB, "/web", &[]), container(DB, "/db", &[])]);
    let engine = FakeEngine::start(&host.engine_socket(), running());
    let mut ctl = host.controller();
    tick_until(&mut ctl, "web named", |r| {
        row(r, &scope(WEB)).container.is_some()
    })
    .await;
    let config = Path::new("test.toml");
    for (name, weight) in [("web", 300), ("lab/c1", 9)] {
        let out = commands::handle(&mut ctl, set(name, weight), config);
        assert!(matches!(out, ctl::Outcome::Ok(_)), "set {name}: {out:?}");
    }
    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(row(&r, &scope(WEB)).weight, 300);

    // `podman restart web`: the scope goes and the engine lists the container as stopped.
    let cgroup = |rel: &str| {
        host._cgroups
            .iter()
            .find(|c| c.rel() == rel)
            .unwrap_or_else(|| panic!("{rel} is in the fake tree"))
    };
    cgroup(&scope(WEB)).remove();
    cgroup("lab/c1").remove();
    engine.answer(list(&[container(DB, "/db", &[])]));
    for _ in 0..5 {
        let r = ctl.tick().await.expect("tick").clone();
        assert!(
            !r.cgroups.iter().any(|c| c.cgroup == scope(WEB)),
            "gone while it restarts"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        ctl.override_for(&scope(WEB)).map(|o| o.weight),
        Some(300),
        "kept while the container may come back"
    );
    let state = std::fs::read_to_string(host.dir.path().join("state").join("state.json"))
        .expect("state file");
    assert!(
        state.contains(&scope(WEB)),
        "kept on disk too, for a daemon restart meanwhile: {state}"
    );
    assert_eq!(
        ctl.override_for("lab/c1"),
        None,
        "not a container: the override went with its cgroup"
    );

    // The container is back with the same id: same scope, same override.
    let back = FakeCgroup::new(host.dir.path().join("cg"), &scope(WEB));
    back.set_current(2000 * MIB);
    back.set_stat(1900 * MIB, 100 * MIB);
    engine.answer(running());
    tick_until(&mut ctl, "web back with its override", |r| {
        r.cgroups.iter().any(|c| {
            c.cgroup == scope(WEB)
                && c.weight == 300
                && c.source == Some(WeightSource::Override)
                && c.container.as_deref() == Some("web")
        })
    })
    .await;
    assert_eq!(
        log.count(" INFO ", "its runtime override is kept in case it restarts"),
        1,
        "{}",
        log.text()
    );
    assert_eq!(
        log.count(" INFO ", "its runtime override applies"),
        1,
        "{}",
        log.text()
    );
}

#[tokio::test]
async fn set_by_name_of_a_container_no_rule_manages_says_to_add_a_glob() {
    let host = Host::new();
    let _engine = FakeEngine::start(
        &host.engine_socket(),
        list(&[container(WEB, "/web", &[("memweight.weight", "2")])]),
    );
    let mut ctl = host.controller_with("[[cgroup]]\npath = \"lab/c1\"\nweight = 7\n");
    for _ in 0..100 {
        ctl.tick().await.expect("tick");
        if ctl.container_snapshot().containers.contains_key(WEB) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ctl.container_snapshot().containers.contains_key(WEB));
    assert!(
        !ctl.is_managed(&scope(WEB)),
        "no rule names podman's scopes"
    );
    let out = commands::handle(&mut ctl, set("web", 5), Path::new("test.toml"));
    let ctl::Outcome::Error(e) = out else {
        panic!("refused: {out:?}");
    };
    assert_eq!(e.kind, ErrorKind::NotManaged);
    assert!(
        e.message
            .contains("container web (111111111111) is running")
            && e.message.contains("machine.slice/libpod-*.scope"),
        "{}",
        e.message
    );
}

/// A container of a `podman kube play` pod, as podman 4.3's libpod inspect shows it: the pod's
/// `metadata.annotations` are the container's `Config.Annotations`.
fn pod_inspect(id: &str, annotations: &[(&str, &str)]) -> String {
    let annotations: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .chain([(
            "io.kubernetes.cri-o.SandboxID".to_owned(),
            serde_json::Value::from("ff"),
        )])
        .collect();
    serde_json::json!({
        "Id": id,
        "State": {"Status": "running", "Pid": 4242},
        "Config": {"Hostname": "app", "Labels": {"app": "x"}, "Annotations": annotations},
        "HostConfig": {"Binds": []},
    })
    .to_string()
}

/// Issue 22: pods started with `podman kube play` are weighted by their `memweight.io/*`
/// annotations, which only the libpod inspect shows; bounded by the rule like labels; a
/// container's `memweight.*` labels win over its annotations.
#[tokio::test]
async fn pod_annotations_weigh_pods_bounded_like_labels_and_labels_win() {
    const POD: &str = "9999999999999999999999999999999999999999999999999999999999999999";
    const HOSTILE: &str = "4444444444444444444444444444444444444444444444444444444444444444";
    let host = Host::new();
    let pod_scope =
        |id: &str| format!("machine.slice/machine-libpod_pod_{POD}.slice/libpod-{id}.scope");
    let mut cgroups = Vec::new();
    for id in [WEB, DB, PLAIN, HOSTILE] {
        let c = FakeCgroup::new(host.dir.path().join("cg"), &pod_scope(id));
        c.set_current(1000 * MIB);
        c.set_stat(900 * MIB, 100 * MIB);
        cgroups.push(c);
    }
    let w = |n: &'static str| ("memweight.io/weight", n);
    let _engine = FakeEngine::start_podman(
        &host.engine_socket(),
        list(&[
            container(WEB, "app1-work", &[("app", "app1")]),
            container(DB, "app2-work", &[]),
            // Both: the label wins, the annotation is not even read.
            container(PLAIN, "app3-work", &[("memweight.weight", "3")]),
            container(HOSTILE, "greedy-work", &[]),
        ]),
        [
            (
                WEB.to_owned(),
                pod_inspect(WEB, &[w("1"), ("memweight.io/max", "2G")]),
            ),
            (DB.to_owned(), pod_inspect(DB, &[w("2")])),
            (PLAIN.to_owned(), pod_inspect(PLAIN, &[w("300")])),
            (
                HOSTILE.to_owned(),
                pod_inspect(HOSTILE, &[w("10000"), ("memweight.io/min", "1T")]),
            ),
        ]
        .into_iter()
        .collect(),
    );
    let mut ctl = host.controller_with(
        "[[cgroup]]\nglob = \"machine.slice/machine-libpod_pod_*.slice/libpod-*.scope\"\n\
         weight = 100\nlabel_weight_max = 400\n",
    );
    tick_until(&mut ctl, "annotation weights applied", |r| {
        row(r, &pod_scope(WEB)).weight == 1 && row(r, &pod_scope(DB)).weight == 2
    })
    .await;
    let r = ctl.tick().await.expect("tick").clone();
    assert_eq!(
        row(&r, &pod_scope(WEB)).source,
        Some(WeightSource::Label {
            label: "memweight.io/weight".into(),
            container: "app1-work".into(),
        })
    );
    let web = ctl.resolve(&pod_scope(WEB)).expect("a rule names it");
    assert_eq!(web.settings.max, Some(2 << 30), "memweight.io/max applies");
    assert_eq!(row(&r, &pod_scope(PLAIN)).weight, 3, "the label wins");
    assert_eq!(row(&r, &pod_scope(PLAIN)).source, label("app3-work"));
    let greedy = ctl.resolve(&pod_scope(HOSTILE)).expect("a rule names it");
    assert_eq!(
        (greedy.settings.weight, greedy.settings.min),
        (400, 0),
        "clamped to the rule's bounds like a label"
    );
    let clamped: Vec<&str> = greedy
        .label_clamps
        .iter()
        .map(|c| c.label.as_str())
        .collect();
    assert_eq!(clamped, ["memweight.io/weight", "memweight.io/min"]);
    assert_eq!(r.pool.total_weight, 1 + 2 + 3 + 400);
}
