//! Container names and labels, from the Docker-compatible REST API that podman
//! (`podman.socket`) and docker serve on a Unix socket.
//!
//! A background task ([`spawn`]) asks `GET /containers/json` and publishes a [`Snapshot`]
//! (container id → name and labels) on a `tokio::sync::watch` channel. The control loop never
//! waits on it: each tick reads the latest snapshot. It asks when the control loop says the
//! containers changed ([`Containers::ask`]: a container's cgroup appeared or went away, or one
//! is not in the list), at most once per `[containers] refresh`; every [`RESYNC_REFRESHES`]
//! refreshes when nothing changed; and every refresh while the engine fails. Labels cannot
//! change while a container lives, so there is nothing to poll for in between — and a poll
//! every 2 s kept podman's socket-activated API service (which exits after 5 s idle) resident
//! for good: 24–30 MiB of the host's memory that the kernel alone would have left the
//! containers (lab, host guest: MemAvailable 90–93 MiB with the daemon where the kernel alone
//! had 125 MiB, issue 19).
//!
//! The task never fails: an absent socket, a refused connection, a slow answer (bounded by a timeout) or
//! an answer that is not the API's (not HTTP, larger than [`MAX_BODY`], not the expected JSON)
//! is logged once as a warning that says what to do, then at debug level while it persists,
//! and at info level when the engine answers again.
//!
//! Every failure expires the last good list, so label weights fall back to the configuration:
//! after [`STALE_AFTER`] failed refreshes in a row of an engine that is *gone* or garbled (no
//! socket, refused, not the API's answer), and after [`STALE_AFTER_SLOW`] of an engine that is
//! only *slow* (no answer within the timeout). The slow one is given longer because under
//! memory pressure podman's API service is itself being reclaimed and answers late, and that
//! is exactly when the weights matter (the lab's host guest lost them that way); but not
//! forever, so that an engine that hangs cannot keep labels nobody can check any more. A
//! container the engine no longer lists drops out at the next answer, and one whose cgroup is
//! gone is no longer managed whatever the list says.
//!
//! The answer is read as it arrives with hard bounds: [`HEAD_LIMIT`] bytes of HTTP head,
//! [`MAX_BODY`] of body (an answer announcing more is refused before it is read), all within
//! the timeout; and parsed straight into containers without building a JSON tree, keeping only
//! the labels with the configured prefix, so memory stays within a small multiple of
//! [`MAX_BODY`] whatever the engine sends.
//!
//! The pure parts are here too, tested without a socket: [`container_id`] takes the id out of a
//! cgroup path (`machine.slice/libpod-<id>.scope`, `system.slice/docker-<id>.scope`, a pod's
//! `machine.slice/machine-libpod_pod_<pod>.slice/libpod-<id>.scope`, Kubernetes'
//! `cri-containerd-<id>.scope` and `crio-<id>.scope`, optionally followed by podman's
//! `/container` sub-cgroup) and [`parse_list`] reads the API's answer (fuzzed:
//! `fuzz/fuzz_targets/engine_list.rs`). A pod's annotations, which the list does not carry, are
//! [`crate::annotations`].
//! What the labels ask for, and what a rule lets them have, is [`crate::labels`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::config::{ContainersConfig, DEFAULT_ENGINE_SOCKETS};

pub(crate) mod wire;

/// Failed refreshes in a row (the engine gone or its answer garbled) after which the last good
/// list is dropped.
pub const STALE_AFTER: u32 = 3;
/// Refreshes in a row without an answer in time (a slow or hung engine) after which the last
/// good list is dropped: 2 minutes at the default 2 s refresh (each waits 10 s).
pub const STALE_AFTER_SLOW: u32 = 10;
/// The longest an API request may take: five refresh intervals (10 s at the default 2 s),
/// within these bounds. It runs beside the tick, so a long wait delays only the next refresh;
/// it must be long enough for an engine under memory pressure.
pub const REQUEST_TIMEOUT: (Duration, Duration) =
    (Duration::from_millis(500), Duration::from_secs(30));
/// When nothing changed, the engine is asked anyway every this many `refresh` intervals (ten
/// minutes at the default 2 s): for renames, and to notice an engine that went away. Rarely,
/// because each request wakes podman's socket-activated API service: ~20 MiB of its own and
/// ~30 MiB of page cache for its binary, which a once-a-minute resync brought back into a
/// host short of memory (lab, host guest, 6.1, the balloon's 320M step: system.slice 61 MiB
/// with the daemon against 15 MiB without it, issue 19).
pub const RESYNC_REFRESHES: u32 = 300;
/// The largest answer body read (a few thousand containers with labels).
pub const MAX_BODY: usize = 16 << 20;
/// The largest HTTP head (status line and headers) read.
pub const HEAD_LIMIT: usize = 64 << 10;
// hyper refuses (panics on) a read buffer below 8 KiB.
const _: () = assert!(HEAD_LIMIT >= 8192);

/// One running container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Full id (64 hex digits for podman and docker).
    pub id: String,
    /// Name without the leading `/` (the id's first 12 digits when it has none).
    pub name: String,
    /// The labels with the configured prefix (the daemon reads no others).
    pub labels: BTreeMap<String, String>,
    /// The OCI annotations with [`crate::annotations::ANNOTATION_PREFIX`] (a kube pod's
    /// `metadata.annotations`), read only for a container without such labels; empty until
    /// read.
    pub annotations: BTreeMap<String, String>,
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

/// The container id in a cgroup path: the last component `libpod-<id>.scope` (podman, also in
/// a pod's `machine-libpod_pod_<pod>.slice`), `docker-<id>.scope`, or, under Kubernetes' systemd
/// cgroup driver, `cri-containerd-<id>.scope` and `crio-<id>.scope` (or the one before a
/// trailing `container`, where podman nests the container's own processes). The id must be 64
/// hex digits, so `libpod-conmon-<id>.scope`, `crio-conmon-<id>.scope` and other units are
/// not containers.
#[must_use]
pub fn container_id(cgroup: &str) -> Option<&str> {
    let mut parts = cgroup.trim_matches('/').rsplit('/');
    let mut last = parts.next()?;
    if last == "container" {
        last = parts.next()?;
    }
    let id = ["libpod-", "docker-", "cri-containerd-", "crio-"]
        .iter()
        .find_map(|p| last.strip_prefix(p))?
        .strip_suffix(".scope")?;
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// Reads the answer to `GET /containers/json`: an array of containers, parsed as it is read
/// (no JSON tree is built, so memory stays within a small multiple of `body`'s size). Entries
/// that are not containers (no string id) or not running are left out, as are labels whose
/// name does not start with `label_prefix` (the daemon reads no others) or whose value is not
/// a string; anything but one array is an error.
pub fn parse_list(body: &[u8], label_prefix: &str) -> Result<Vec<Container>, String> {
    use serde::de::DeserializeSeed as _;
    let mut de = serde_json::Deserializer::from_slice(body);
    let list = wire::List { label_prefix }
        .deserialize(&mut de)
        .and_then(|l| de.end().map(|()| l))
        .map_err(|e| format!("expected a JSON array of containers: {e}"))?;
    Ok(list)
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
    /// The answer was larger than the daemon reads.
    #[error("{path}: the answer is larger than {limit} bytes")]
    TooLarge {
        /// The socket.
        path: PathBuf,
        /// The limit ([`MAX_BODY`]).
        limit: usize,
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
    /// Failed refreshes in a row after which the last good list is dropped: [`STALE_AFTER`] for
    /// an engine that is gone or garbled, [`STALE_AFTER_SLOW`] for one that did not answer in
    /// time.
    #[must_use]
    pub fn stale_after(&self) -> u32 {
        match self {
            EngineError::Timeout { .. } => STALE_AFTER_SLOW,
            _ => STALE_AFTER,
        }
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
                 is reclaimed too); label weights keep their last values for 10 refreshes, then \
                 fall back to the configuration until it answers; check `systemctl status \
                 podman.socket` (or docker.service)"
            }
            EngineError::TooLarge { .. } => {
                "does the engine list that many containers? label weights fall back to the \
                 configuration; check `curl --unix-socket SOCKET http://d/containers/json | wc -c`"
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
    /// The annotations of its containers without labels (one inspection per id).
    annotations: crate::annotations::Cache,
}

/// Aborts the HTTP connection task when the request is done or abandoned.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Asks the engine at `socket` for its running containers, within `timeout`; keeps the labels
/// whose name starts with `label_prefix`.
pub async fn list(
    socket: &Path,
    timeout: Duration,
    label_prefix: &str,
) -> Result<Vec<Container>, EngineError> {
    list_within(socket, timeout, label_prefix, MAX_BODY).await
}

/// [`list`] with another body limit (tests).
pub async fn list_within(
    socket: &Path,
    timeout: Duration,
    label_prefix: &str,
    max_body: usize,
) -> Result<Vec<Container>, EngineError> {
    match tokio::time::timeout(timeout, list_unbounded(socket, label_prefix, max_body)).await {
        Ok(r) => r,
        Err(_) => Err(EngineError::Timeout {
            path: socket.to_owned(),
            timeout,
        }),
    }
}

async fn list_unbounded(
    socket: &Path,
    label_prefix: &str,
    max_body: usize,
) -> Result<Vec<Container>, EngineError> {
    let (_, body) = get(socket, "/containers/json", max_body, |status| {
        (200..300).contains(&status)
    })
    .await?;
    parse_list(&body, label_prefix).map_err(|message| EngineError::Body {
        path: socket.to_owned(),
        message,
    })
}

/// One GET of `path` on the engine's socket: the status and at most `max_body` bytes of body.
/// An answer whose status `wanted` refuses is [`EngineError::Status`], its body not read; one
/// that says it is larger than `max_body` is not read at all; one that grows larger as it
/// streams in is cut off there (never more than `max_body` bytes held). The list and
/// [`crate::annotations`]' inspections both go through it.
pub(crate) async fn get(
    socket: &Path,
    path: &str,
    max_body: usize,
    wanted: impl Fn(u16) -> bool,
) -> Result<(u16, Bytes), EngineError> {
    let http = |e: &dyn std::fmt::Display| EngineError::Http {
        path: socket.to_owned(),
        message: e.to_string(),
    };
    let too_large = || EngineError::TooLarge {
        path: socket.to_owned(),
        limit: max_body,
    };
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| EngineError::Connect {
            path: socket.to_owned(),
            source,
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(HEAD_LIMIT)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| http(&e))?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = conn.await {
            debug!(error = %e, "container engine connection ended");
        }
    }));
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, "localhost")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())
        .map_err(|e| http(&e))?;
    let response = sender.send_request(request).await.map_err(|e| http(&e))?;
    let status = response.status().as_u16();
    if !wanted(status) {
        return Err(EngineError::Status {
            path: socket.to_owned(),
            status,
        });
    }
    if usize::try_from(hyper::body::Body::size_hint(response.body()).lower())
        .map_or(true, |n| n > max_body)
    {
        return Err(too_large());
    }
    let body = Limited::new(response.into_body(), max_body)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<LengthLimitError>() {
                too_large()
            } else {
                http(&*e)
            }
        })?
        .to_bytes();
    Ok((status, body))
}

/// The running task: the latest snapshot, and the channel reloads send new settings on.
#[derive(Debug)]
pub struct Containers {
    snapshot: watch::Receiver<Arc<Snapshot>>,
    config: watch::Sender<ContainersConfig>,
    ask: Arc<Notify>,
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

    /// Asks for a fresh list soon: at once, or `refresh` after the last request. Cheap; call it
    /// whenever the containers may have changed (several calls before the request make one).
    pub fn ask(&self) {
        self.ask.notify_one();
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
    let ask = Arc::new(Notify::new());
    let task = tokio::spawn(refresh_loop(config_rx, snap_tx, Arc::clone(&ask)));
    Containers {
        snapshot,
        config,
        ask,
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
    ask: Arc<Notify>,
) {
    let mut health = Health::default();
    let mut engines: BTreeMap<PathBuf, Engine> = BTreeMap::new();
    let mut config_open = true;
    loop {
        let cfg = config.borrow_and_update().clone();
        let asked_at = tokio::time::Instant::now();
        // Some engine failed to answer: ask again after one refresh, not at the next resync.
        let mut failed = false;
        if cfg.enabled {
            let sockets = engine_sockets(&cfg);
            engines.retain(|k, _| sockets.contains(k));
            if sockets.is_empty() {
                failed = true;
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
                    match list(socket, timeout, &cfg.label_prefix).await {
                        Ok(mut l) => {
                            let prefix = &cfg.label_prefix;
                            engine
                                .annotations
                                .fill(socket, timeout, prefix, &mut l)
                                .await;
                            engine.failures = 0;
                            engine.last = Some(l);
                            answered.get_or_insert_with(|| socket.clone());
                        }
                        Err(e) => {
                            failed = true;
                            engine.failures = engine.failures.saturating_add(1);
                            // Every failure expires the last list; a slow engine's later.
                            if engine.failures >= e.stale_after() {
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
        let wait = match (cfg.enabled, failed) {
            (false, _) => Duration::from_secs(3600),
            (true, true) => cfg.refresh.0,
            (true, false) => cfg.refresh.0.saturating_mul(RESYNC_REFRESHES),
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = config.changed(), if config_open => config_open = changed.is_ok(),
            // Asked: no sooner than one refresh after the last request.
            () = ask.notified(), if cfg.enabled => {
                tokio::time::sleep_until(asked_at + cfg.refresh.0).await;
            }
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

/// Reads an HTTP request's head (to its blank line) from a fake engine's connection, for the
/// tests of the engine's clients; `None` when the client went away first.
#[cfg(test)]
pub(crate) async fn read_request_head(stream: &mut UnixStream) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt as _;
    let mut request = Vec::new();
    let mut buf = [0_u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    Some(request)
}

#[cfg(test)]
mod tests;
