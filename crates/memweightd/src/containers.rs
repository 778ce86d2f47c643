//! Container names and labels, from the Docker-compatible REST API that podman
//! (`podman.socket`) and docker serve on a Unix socket.
//!
//! A background task ([`spawn`]) asks `GET /containers/json` every `[containers] refresh` and
//! publishes a [`Snapshot`] (container id → name and labels) on a `tokio::sync::watch`
//! channel. The control loop never waits on it: each tick reads the latest snapshot. The task
//! never fails: an absent socket, a refused connection, a slow answer (bounded by a timeout) or
//! a body that is not the expected JSON is logged once as a warning that says what to do, then
//! at debug level while it persists, and at info level when the engine answers again. After
//! [`STALE_AFTER`] failed refreshes in a row of an engine that is *gone* (no socket, refused,
//! an answer that is not the API's) the last good list is dropped, so label weights fall back
//! to the configuration. An engine that is only *slow* keeps its last list: under memory
//! pressure podman's API service is itself being reclaimed and answers late, and that is exactly
//! when the weights matter (the lab's host guest lost them that way). A container the engine
//! no longer lists drops out at the next answer, and one whose cgroup is gone is no longer
//! managed whatever the list says.
//!
//! The pure parts are here too, tested without a socket: [`container_id`] takes the id out of a
//! cgroup path (`machine.slice/libpod-<id>.scope`, `system.slice/docker-<id>.scope`, optionally
//! followed by podman's `/container` sub-cgroup) and [`parse_list`] reads the API's answer.
//! What the labels ask for, and what a rule lets them have, is [`crate::labels`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::config::{ContainersConfig, DEFAULT_ENGINE_SOCKETS};

/// Failed refreshes in a row after which the last good list is dropped.
pub const STALE_AFTER: u32 = 3;
/// The longest an API request may take: five refresh intervals (10 s at the default 2 s),
/// within these bounds. It runs beside the tick, so a long wait delays only the next refresh;
/// it must be long enough for an engine under memory pressure.
pub const REQUEST_TIMEOUT: (Duration, Duration) =
    (Duration::from_millis(500), Duration::from_secs(30));
/// The largest answer read (a few thousand containers with labels).
pub const MAX_BODY: usize = 16 << 20;

/// One running container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Full id (64 hex digits for podman and docker).
    pub id: String,
    /// Name without the leading `/` (the id's first 12 digits when it has none).
    pub name: String,
    /// All labels.
    pub labels: BTreeMap<String, String>,
}

/// What the engine said at the last good refresh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Running containers by id.
    pub containers: BTreeMap<String, Container>,
    /// The socket the list came from (`None`: no list, e.g. no engine or disabled).
    pub socket: Option<PathBuf>,
}

/// A name or id matched more than one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ambiguous(pub Vec<String>);

impl Snapshot {
    /// The container whose cgroup is `cgroup` (a path relative to the cgroup root), if any.
    #[must_use]
    pub fn for_cgroup(&self, cgroup: &str) -> Option<&Container> {
        container_id(cgroup).and_then(|id| self.containers.get(id))
    }

    /// The container named `what`, or whose id is `what`, or whose id starts with `what` (at
    /// least 12 characters). Names win over ids.
    pub fn find(&self, what: &str) -> Result<Option<&Container>, Ambiguous> {
        let what = what.trim().trim_start_matches('/');
        if what.is_empty() {
            return Ok(None);
        }
        if let Some(c) = self.containers.values().find(|c| c.name == what) {
            return Ok(Some(c));
        }
        if let Some(c) = self.containers.get(what) {
            return Ok(Some(c));
        }
        if what.len() < 12 {
            return Ok(None);
        }
        let mut hits = self.containers.values().filter(|c| c.id.starts_with(what));
        match (hits.next(), hits.next()) {
            (Some(c), None) => Ok(Some(c)),
            (None, _) => Ok(None),
            (Some(a), Some(b)) => {
                let mut names = vec![a.name.clone(), b.name.clone()];
                names.extend(hits.map(|c| c.name.clone()));
                Err(Ambiguous(names))
            }
        }
    }
}

/// The container id in a cgroup path: the last component `libpod-<id>.scope` or
/// `docker-<id>.scope` (or the one before a trailing `container`, where podman nests the
/// container's own processes). The id must be 64 hex digits, so `libpod-conmon-<id>.scope`
/// and other units are not containers.
#[must_use]
pub fn container_id(cgroup: &str) -> Option<&str> {
    let mut parts = cgroup.trim_matches('/').rsplit('/');
    let mut last = parts.next()?;
    if last == "container" {
        last = parts.next()?;
    }
    let id = last
        .strip_prefix("libpod-")
        .or_else(|| last.strip_prefix("docker-"))?
        .strip_suffix(".scope")?;
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// One element of the API's `GET /containers/json` answer; only what is needed.
#[derive(Debug, Deserialize)]
struct RawContainer {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "Names", default)]
    names: Option<Vec<String>>,
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(rename = "State", default)]
    state: Option<serde_json::Value>,
}

/// Reads the answer to `GET /containers/json`: an array of containers. Entries that are not
/// containers (no id, wrong types) or not running are left out; anything but an array is an
/// error.
pub fn parse_list(body: &[u8]) -> Result<Vec<Container>, String> {
    let items: Vec<serde_json::Value> = serde_json::from_slice(body)
        .map_err(|e| format!("expected a JSON array of containers: {e}"))?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Ok(raw) = serde_json::from_value::<RawContainer>(item) else {
            continue;
        };
        let id = raw.id.trim().to_owned();
        if id.is_empty() {
            continue;
        }
        // Docker's list has `State: "running"`; older podman has an object or nothing.
        if let Some(serde_json::Value::String(s)) = &raw.state
            && !s.eq_ignore_ascii_case("running")
        {
            continue;
        }
        let name = raw
            .names
            .unwrap_or_default()
            .iter()
            .map(|n| n.trim().trim_start_matches('/'))
            .find(|n| !n.is_empty())
            .map_or_else(|| id.chars().take(12).collect(), str::to_owned);
        out.push(Container {
            id,
            name,
            labels: raw.labels.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// Why a refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No socket configured and none of the default ones exists.
    #[error("no container engine socket found (looked for {})", DEFAULT_ENGINE_SOCKETS.join(", "))]
    NoSocket,
    /// Connecting failed (missing, refused, permission).
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed.
    #[error("{path}: HTTP: {message}")]
    Http {
        /// The socket.
        path: PathBuf,
        /// What hyper said.
        message: String,
    },
    /// The engine answered with an error status.
    #[error("{path}: GET /containers/json answered {status}")]
    Status {
        /// The socket.
        path: PathBuf,
        /// The HTTP status.
        status: u16,
    },
    /// The engine did not answer in time.
    #[error("{path}: no answer within {timeout:?}")]
    Timeout {
        /// The socket.
        path: PathBuf,
        /// The limit.
        timeout: Duration,
    },
    /// The answer was not the expected JSON.
    #[error("{path}: unexpected answer: {message}")]
    Body {
        /// The socket.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
}

impl EngineError {
    /// Whether the engine is gone (no socket, refused, not the API) rather than slow: only then
    /// are the last known labels dropped.
    #[must_use]
    pub fn engine_gone(&self) -> bool {
        !matches!(self, EngineError::Timeout { .. } | EngineError::Http { .. })
    }

    /// What the operator can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            EngineError::NoSocket | EngineError::Connect { .. } => {
                "for podman enable its API socket: systemctl enable --now podman.socket; for \
                 docker start docker.service; or set [containers] socket, or enabled = false \
                 to stop asking"
            }
            EngineError::Timeout { .. } => {
                "the container engine is slow or stuck (under memory pressure its API service \
                 is reclaimed too); label weights keep their last values until it answers"
            }
            EngineError::Http { .. } | EngineError::Status { .. } | EngineError::Body { .. } => {
                "is [containers] socket a podman or docker API socket? check `curl --unix-socket \
                 SOCKET http://d/containers/json`"
            }
        }
    }
}

/// The socket to ask: the configured one, else the first default that exists now.
#[must_use]
pub fn engine_socket(cfg: &ContainersConfig) -> Option<PathBuf> {
    engine_sockets(cfg).into_iter().next()
}

/// Every engine socket asked at a refresh: the configured one, or each default one that
/// exists — a host may run podman and docker side by side (Debian enables `podman.socket`
/// when podman is installed), and each engine knows only its own containers.
pub fn engine_sockets(cfg: &ContainersConfig) -> Vec<PathBuf> {
    match &cfg.socket {
        Some(s) => vec![s.clone()],
        None => DEFAULT_ENGINE_SOCKETS
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect(),
    }
}

/// One engine's last good list and its failures in a row.
#[derive(Debug, Default)]
struct Engine {
    last: Option<Vec<Container>>,
    failures: u32,
}

/// Aborts the HTTP connection task when the request is done or abandoned.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Asks the engine at `socket` for its running containers, within `timeout`.
pub async fn list(socket: &Path, timeout: Duration) -> Result<Vec<Container>, EngineError> {
    match tokio::time::timeout(timeout, list_unbounded(socket)).await {
        Ok(r) => r,
        Err(_) => Err(EngineError::Timeout {
            path: socket.to_owned(),
            timeout,
        }),
    }
}

async fn list_unbounded(socket: &Path) -> Result<Vec<Container>, EngineError> {
    let http = |e: &dyn std::fmt::Display| EngineError::Http {
        path: socket.to_owned(),
        message: e.to_string(),
    };
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| EngineError::Connect {
            path: socket.to_owned(),
            source,
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| http(&e))?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = conn.await {
            debug!(error = %e, "container engine connection ended");
        }
    }));
    let request = hyper::Request::get("/containers/json")
        .header(hyper::header::HOST, "localhost")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())
        .map_err(|e| http(&e))?;
    let response = sender.send_request(request).await.map_err(|e| http(&e))?;
    if !response.status().is_success() {
        return Err(EngineError::Status {
            path: socket.to_owned(),
            status: response.status().as_u16(),
        });
    }
    let body = Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| http(&*e))?
        .to_bytes();
    parse_list(&body).map_err(|message| EngineError::Body {
        path: socket.to_owned(),
        message,
    })
}

/// The running task: the latest snapshot, and the channel reloads send new settings on.
#[derive(Debug)]
pub struct Containers {
    snapshot: watch::Receiver<Arc<Snapshot>>,
    config: watch::Sender<ContainersConfig>,
    task: JoinHandle<()>,
}

impl Containers {
    /// The latest snapshot (cheap: an `Arc`).
    #[must_use]
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.snapshot.borrow())
    }

    /// A receiver that sees every new snapshot (for tests and metrics).
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshot.clone()
    }

    /// Applies a reloaded `[containers]` section from the next refresh on (at once when it
    /// changed).
    pub fn reconfigure(&self, cfg: &ContainersConfig) {
        self.config.send_if_modified(|c| {
            if c == cfg {
                false
            } else {
                c.clone_from(cfg);
                true
            }
        });
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the refresh task on the current tokio runtime.
#[must_use]
pub fn spawn(cfg: ContainersConfig) -> Containers {
    let (snap_tx, snapshot) = watch::channel(Arc::new(Snapshot::default()));
    let (config, config_rx) = watch::channel(cfg);
    let task = tokio::spawn(refresh_loop(config_rx, snap_tx));
    Containers {
        snapshot,
        config,
        task,
    }
}

/// Whether the engine answered last time, for logging transitions once.
#[derive(Debug, Default)]
struct Health {
    failures: u32,
    warned: bool,
    source: Option<PathBuf>,
}

impl Health {
    fn ok(&mut self, socket: &Path, n: usize) {
        if self.warned {
            info!(socket = %socket.display(), containers = n,
                "container engine answers again; container labels apply");
        } else if self.source.as_deref() != Some(socket) {
            info!(socket = %socket.display(), containers = n, "reading container labels");
        }
        self.failures = 0;
        self.warned = false;
        self.source = Some(socket.to_owned());
    }

    fn failed(&mut self, e: &EngineError) {
        self.failures = self.failures.saturating_add(1);
        if self.warned {
            debug!(error = %e, "container engine still unavailable");
        } else {
            warn!(error = %e, hint = e.hint(),
                "cannot list containers; container label weights do not apply until it answers");
            self.warned = true;
        }
    }
}

async fn refresh_loop(
    mut config: watch::Receiver<ContainersConfig>,
    snapshots: watch::Sender<Arc<Snapshot>>,
) {
    let mut health = Health::default();
    let mut engines: BTreeMap<PathBuf, Engine> = BTreeMap::new();
    let mut config_open = true;
    loop {
        let cfg = config.borrow_and_update().clone();
        if cfg.enabled {
            let sockets = engine_sockets(&cfg);
            engines.retain(|k, _| sockets.contains(k));
            if sockets.is_empty() {
                health.failed(&EngineError::NoSocket);
                if health.failures >= STALE_AFTER {
                    clear(&snapshots);
                }
            } else {
                let timeout = (cfg.refresh.0 * 5).clamp(REQUEST_TIMEOUT.0, REQUEST_TIMEOUT.1);
                let mut answered: Option<PathBuf> = None;
                let mut first_error = None;
                let mut containers = BTreeMap::new();
                for socket in &sockets {
                    let engine = engines.entry(socket.clone()).or_default();
                    match list(socket, timeout).await {
                        Ok(l) => {
                            engine.failures = 0;
                            engine.last = Some(l);
                            answered.get_or_insert_with(|| socket.clone());
                        }
                        Err(e) => {
                            engine.failures = engine.failures.saturating_add(1);
                            // A slow engine keeps its last list; a gone one loses it.
                            if engine.failures >= STALE_AFTER && e.engine_gone() {
                                engine.last = None;
                            }
                            first_error.get_or_insert(e);
                        }
                    }
                    for c in engine.last.iter().flatten() {
                        containers.insert(c.id.clone(), c.clone());
                    }
                }
                match (&answered, first_error) {
                    (Some(socket), _) => health.ok(socket, containers.len()),
                    (None, Some(e)) => health.failed(&e),
                    (None, None) => {}
                }
                let snap = Snapshot {
                    socket: answered.or_else(|| {
                        engines
                            .iter()
                            .find(|(_, e)| e.last.is_some())
                            .map(|(s, _)| s.clone())
                    }),
                    containers,
                };
                snapshots.send_if_modified(|old| {
                    log_changes(&old.containers, &snap.containers);
                    let changed = **old != snap;
                    if changed {
                        *old = Arc::new(snap);
                    }
                    changed
                });
            }
        } else {
            health = Health::default();
            engines.clear();
            clear(&snapshots);
        }
        let wait = if cfg.enabled {
            cfg.refresh.0
        } else {
            Duration::from_secs(3600)
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = config.changed(), if config_open => config_open = changed.is_ok(),
        }
    }
}

/// A container that appeared in, or left, the engine's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing<'a> {
    /// Newly listed (started, or first seen).
    Listed(&'a Container),
    /// No longer listed (stopped, removed).
    Gone(&'a Container),
}

/// What changed between two lists, by id: each container once, gone ones first.
#[must_use]
pub fn listing_changes<'a>(
    old: &'a BTreeMap<String, Container>,
    new: &'a BTreeMap<String, Container>,
) -> Vec<Listing<'a>> {
    let gone = old
        .iter()
        .filter(|(id, _)| !new.contains_key(*id))
        .map(|(_, c)| Listing::Gone(c));
    let listed = new
        .iter()
        .filter(|(id, _)| !old.contains_key(*id))
        .map(|(_, c)| Listing::Listed(c));
    gone.chain(listed).collect()
}

/// One INFO entry per container that comes or goes, with `container` (the name: the journal's
/// `CONTAINER=` field) and its short `id`.
fn log_changes(old: &BTreeMap<String, Container>, new: &BTreeMap<String, Container>) {
    for change in listing_changes(old, new) {
        match change {
            Listing::Listed(c) => info!(container = %c.name, id = short_id(&c.id),
                labels = c.labels.len(), "container listed by the engine"),
            Listing::Gone(c) => info!(container = %c.name, id = short_id(&c.id),
                "container no longer listed by the engine"),
        }
    }
}

fn short_id(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

fn clear(snapshots: &watch::Sender<Arc<Snapshot>>) {
    snapshots.send_if_modified(|old| {
        let changed = !old.containers.is_empty() || old.socket.is_some();
        if changed {
            *old = Arc::new(Snapshot::default());
        }
        changed
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_changes_name_each_container_that_came_or_went() {
        let c = |id: &str, name: &str| Container {
            id: id.to_owned(),
            name: name.to_owned(),
            labels: BTreeMap::new(),
        };
        let list = |cs: &[Container]| -> BTreeMap<String, Container> {
            cs.iter().map(|c| (c.id.clone(), c.clone())).collect()
        };
        let (a, b, d) = (c("aa", "db"), c("bb", "web"), c("dd", "cache"));
        let old = list(&[a.clone(), b.clone()]);
        let new = list(&[b.clone(), d.clone()]);
        assert_eq!(
            listing_changes(&old, &new),
            vec![Listing::Gone(&a), Listing::Listed(&d)]
        );
        assert!(listing_changes(&new, &new).is_empty());
        assert_eq!(short_id(ID), "0123456789ab");
        assert_eq!(short_id("abc"), "abc");
    }

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn ids_come_from_podman_and_docker_scopes() {
        assert_eq!(
            container_id(&format!("machine.slice/libpod-{ID}.scope")),
            Some(ID)
        );
        assert_eq!(
            container_id(&format!("system.slice/docker-{ID}.scope")),
            Some(ID)
        );
        assert_eq!(
            container_id(&format!("machine.slice/libpod-{ID}.scope/container")),
            Some(ID)
        );
        assert_eq!(container_id(&format!("/libpod-{ID}.scope/")), Some(ID));
        for not in [
            format!("machine.slice/libpod-{}.scope", &ID[..12]),
            format!("machine.slice/libpod-{ID}x.scope"),
            format!("machine.slice/libpod-{ID}.service"),
            format!("machine.slice/crio-{ID}.scope"),
            format!("machine.slice/libpod-{ID}.scope/other"),
            "container".to_owned(),
            "/".to_owned(),
            String::new(),
            "libpod-.scope".to_owned(),
            format!("libpod-{}é.scope", &ID[..62]),
        ] {
            assert_eq!(container_id(&not), None, "{not}");
        }
    }

    /// podman puts each container's conmon in `libpod-conmon-<id>.scope` beside the container's
    /// own scope; a `libpod-*` glob matches both, and only the latter is the container.
    #[test]
    fn regression_conmon_scope_is_not_the_container() {
        assert_eq!(
            container_id(&format!("machine.slice/libpod-conmon-{ID}.scope")),
            None
        );
    }

    /// podman's compat API answers `"Names": ["web"]` where docker says `["/web"]`.
    #[test]
    fn regression_podman_names_without_leading_slash() {
        let body = format!(
            r#"[{{"Id":"{ID}","Names":["web"]}},{{"Id":"{}","Names":["/db"]}}]"#,
            ID.replace('0', "9")
        );
        let list = parse_list(body.as_bytes()).expect("an array");
        let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["web", "db"]);
    }

    #[test]
    fn list_reads_names_with_or_without_slash_and_skips_junk() {
        let body = format!(
            r#"[
              {{"Id":"{ID}","Names":["/web"],"Labels":{{"memweight.weight":"2"}},"State":"running"}},
              {{"Id":"{}","Names":["db"],"Labels":null,"State":"running"}},
              {{"Id":"{}","Names":null}},
              {{"Id":"exited1","Names":["/old"],"State":"exited"}},
              {{"Names":["/noid"]}},
              {{"Id":"","Names":["/empty"]}},
              {{"Id":7}},
              "text",
              {{"Id":"podman3","Names":["p3"],"State":{{"Running":true}},"Labels":{{"a":"b"}}}}
            ]"#,
            ID.replace('0', "1"),
            ID.replace('0', "2"),
        );
        let list = parse_list(body.as_bytes()).expect("an array");
        let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["web", "db", "2123456789ab", "p3"]);
        assert_eq!(
            list[0].labels.get("memweight.weight").map(String::as_str),
            Some("2")
        );
        assert!(list[1].labels.is_empty());
        for bad in [
            "",
            "{}",
            "null",
            "[",
            "{\"message\":\"page not found\"}",
            "\u{0}",
        ] {
            assert!(parse_list(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert_eq!(parse_list(b"[]"), Ok(Vec::new()));
    }

    #[test]
    fn find_by_name_id_and_prefix() {
        let mut snap = Snapshot::default();
        let other = ID.replace("0123", "0124");
        for (id, name) in [(ID, "web"), (other.as_str(), "db")] {
            snap.containers.insert(
                id.to_owned(),
                Container {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    labels: BTreeMap::new(),
                },
            );
        }
        let name = |r: Result<Option<&Container>, Ambiguous>| r.map(|c| c.map(|c| c.name.clone()));
        assert_eq!(name(snap.find("web")), Ok(Some("web".into())));
        assert_eq!(name(snap.find("/db")), Ok(Some("db".into())));
        assert_eq!(name(snap.find(ID)), Ok(Some("web".into())));
        assert_eq!(name(snap.find(&ID[..12])), Ok(Some("web".into())));
        assert_eq!(name(snap.find(&ID[..11])), Ok(None));
        assert_eq!(name(snap.find("nope")), Ok(None));
        assert_eq!(name(snap.find("")), Ok(None));
        assert!(snap.find(&ID[..3]).is_ok());
        let shared = "0123456789ab";
        assert_eq!(name(snap.find(shared)), Ok(Some("web".into())));
        snap.containers.insert(
            format!("{shared}ffff"),
            Container {
                id: format!("{shared}ffff"),
                name: "twin".into(),
                labels: BTreeMap::new(),
            },
        );
        assert!(snap.find(shared).is_err());
        assert_eq!(
            snap.for_cgroup(&format!("machine.slice/libpod-{ID}.scope"))
                .map(|c| c.name.as_str()),
            Some("web")
        );
    }
}
