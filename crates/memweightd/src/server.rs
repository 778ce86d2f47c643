//! The control socket: `memweightctl` requests in, typed commands to the control loop, replies
//! out.
//!
//! The server never touches the [`Controller`](crate::controller::Controller). Each connection
//! takes a slot at `accept` ([`Gate`]: a bounded number per user, and some only root takes),
//! is checked with the credentials it connected with ([`crate::peer`]: `SO_PEERCRED`,
//! `SO_PEERGROUPS`; [`authorize`]: root, or a member of the configured group, the group
//! database asked on the [`crate::pools::credentials`] pool), its one request line is parsed
//! into a [`Command`] by [`memweight_proto::ctl::parse_request`] and sent to the loop as a
//! [`Call`] with a oneshot reply channel; the loop answers it with
//! [`crate::commands::Answers::answer`] on its own state between ticks. This module is the socket, the peer check and the framing only; parsing,
//! authorisation and the commands are plain functions, tested without a socket.
//!
//! Under systemd the socket may come from `memweightd.socket` (`LISTEN_FDS`); otherwise the
//! daemon binds `[control] socket` itself, mode 0660, owned by `[control] group` when set (and
//! root's, serving root only, with a warning, when the daemon may not chown it).

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::time::Duration;

use memweight_proto::ctl::{self, Command, ErrorKind, ErrorReply, Outcome, Response};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use crate::config::ControlConfig;

/// Bounds on control-socket clients, so that no client (a member of the group, or anyone
/// when the socket mode is loosened) can hold the daemon's fds, tasks or loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once, for everyone; further ones get a one-line "busy" error
    /// and are closed.
    pub max_connections: usize,
    /// Connections only root may take, once the shared ones are all held: no number of
    /// connections from others keeps root out.
    pub root_reserved: usize,
    /// Connections one user other than root may hold at once (of the shared ones), so that
    /// one group member cannot take every slot from the others.
    pub per_user: usize,
    /// Time a client has to send its request line (and the credential check has to finish).
    pub read_timeout: Duration,
    /// Time a client has to take its reply; one that does not read is dropped.
    pub write_timeout: Duration,
    /// Time a request may wait for the control loop (a tick stuck in the kernel). A request
    /// that timed out is dropped, never carried out later (see [`Call::is_stale`]).
    pub loop_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 16,
            root_reserved: 4,
            per_user: 4,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
            // Below memweightctl's own 40 s, so the daemon gives up first and says why.
            loop_timeout: Duration::from_secs(30),
        }
    }
}
/// Bytes read from a client at most: one request line and one byte to notice it is too long.
const LINE_LIMIT: u64 = 64 * 1024 + 1;
const _: () = assert!(LINE_LIMIT == ctl::MAX_LINE as u64 + 1);

/// Errors setting up the control socket.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding or preparing the socket failed.
    #[error("control socket {path}: {what}: {source}")]
    Io {
        /// The socket path.
        path: PathBuf,
        /// The step that failed and what to do.
        what: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Another process answers on the socket.
    #[error(
        "control socket {0} is in use by a running process (another memweightd?); stop it or \
         set [control] socket to another path"
    )]
    InUse(PathBuf),
    /// The configured group does not exist.
    #[error("[control] group {0:?} does not exist; create it (groupadd {0}) or remove the key")]
    NoSuchGroup(String),
}

/// One request for the control loop, with the channel its reply goes back on.
#[derive(Debug)]
pub struct Call {
    /// The parsed, validated command.
    pub command: Command,
    /// Where the loop sends its answer.
    pub reply: oneshot::Sender<Outcome>,
}

impl Call {
    /// `true` once nobody waits for the answer any more: the request timed out (the waiting
    /// side is dropped when `loop_timeout` fires) or its connection went away. Such a request
    /// must not be carried out: its client was told it failed.
    #[must_use]
    pub fn is_stale(&self) -> bool {
        self.reply.is_closed()
    }
}

/// A group as the group database lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEntry {
    /// Group id.
    pub gid: u32,
    /// Member names.
    pub members: Vec<String>,
}

/// How a group name is looked up; [`system_group`] unless a test injects another.
pub type GroupLookup = std::sync::Arc<dyn Fn(&str) -> Option<GroupEntry> + Send + Sync>;

/// Looks `name` up in the system's group database (NSS).
#[must_use]
pub fn system_group(name: &str) -> Option<GroupEntry> {
    nix::unistd::Group::from_name(name)
        .ok()
        .flatten()
        .map(|g| GroupEntry {
            gid: g.gid.as_raw(),
            members: g.mem,
        })
}

/// Who may use the socket besides root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Access {
    /// The configured group: name and gid.
    pub group: Option<(String, u32)>,
    /// Names of the group's members as listed in the group database.
    pub members: Vec<String>,
}

impl Access {
    /// Resolves `[control] group` with `lookup`; a group that does not exist is an error.
    pub fn from_config(cfg: &ControlConfig, lookup: &GroupLookup) -> Result<Self, ServerError> {
        let Some(name) = &cfg.group else {
            return Ok(Access::default());
        };
        match Access::resolve(Some(name), lookup) {
            a if a.group.is_some() => Ok(a),
            _ => Err(ServerError::NoSuchGroup(name.clone())),
        }
    }

    /// Resolves `group` now. The server does this for every connection, so a member added
    /// with `usermod -aG` (or removed) counts from the next request, without a restart. A
    /// group that no longer exists admits only root.
    #[must_use]
    pub fn resolve(group: Option<&str>, lookup: &GroupLookup) -> Self {
        let Some(name) = group else {
            return Access::default();
        };
        match lookup(name) {
            Some(g) => Access {
                group: Some((name.to_owned(), g.gid)),
                members: g.members,
            },
            None => {
                warn!(
                    group = name,
                    "[control] group no longer exists; only root is served"
                );
                Access::default()
            }
        }
    }
}

/// The credentials of a connected client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups when it connected (`SO_PEERGROUPS`), if they could be read.
    pub groups: Vec<u32>,
    /// User name, if the user database knows the uid.
    pub user: Option<String>,
}

/// Root may always connect; anyone else only as a member of the configured group.
pub fn authorize(access: &Access, peer: &Peer) -> Result<(), ErrorReply> {
    if peer.uid == 0 {
        return Ok(());
    }
    if let Some((_, gid)) = &access.group
        && (peer.gid == *gid
            || peer.groups.contains(gid)
            || peer
                .user
                .as_ref()
                .is_some_and(|u| access.members.iter().any(|m| m == u)))
    {
        return Ok(());
    }
    let hint = match &access.group {
        Some((name, _)) => format!("run as root or as a member of group {name:?}"),
        None => "run as root, or set [control] group in the daemon's config".to_owned(),
    };
    Err(ErrorReply::new(
        ErrorKind::PermissionDenied,
        format!(
            "permission denied: uid {} may not use the memweightd control socket; {hint}",
            peer.uid
        ),
    ))
}

/// The peer's credentials: user, primary and supplementary groups from the socket
/// ([`crate::peer`]); the user database is only asked for the name when `access` lists
/// members by name. Runs on the [`crate::pools::credentials`] pool (NSS may block); root never
/// comes here.
fn peer_of(cred: tokio::net::unix::UCred, groups: Vec<u32>, access: &Access) -> Peer {
    let user = if access.members.is_empty() {
        None
    } else {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(cred.uid()))
            .ok()
            .flatten()
            .map(|u| u.name)
    };
    Peer {
        uid: cred.uid(),
        gid: cred.gid(),
        groups,
        user,
    }
}

/// Who gets one of the control socket's connection slots.
///
/// A connection is counted from `accept` (its credentials come with it, `SO_PEERCRED`), before
/// it has sent anything: `max_connections` shared slots, of which one user other than root holds
/// at most `per_user`, then `root_reserved` slots that only root takes. So a group member
/// holding idle connections (each until the read timeout) can neither lock root out nor take
/// every slot from the other members.
#[derive(Debug)]
pub struct Gate {
    max: usize,
    shared: std::sync::Arc<tokio::sync::Semaphore>,
    root: std::sync::Arc<tokio::sync::Semaphore>,
    per_user: usize,
    users: Held,
}

/// Connections held per user other than root.
type Held = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u32, usize>>>;

/// Why the [`Gate`] turned a connection away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every slot this client may take is held.
    All {
        /// The shared slots.
        max: usize,
    },
    /// This user holds as many connections as one user may.
    User {
        /// The user.
        uid: u32,
        /// How many one user may hold.
        per_user: usize,
    },
}

/// A connection's slot; given back when dropped.
#[derive(Debug)]
pub struct Pass {
    _permit: tokio::sync::OwnedSemaphorePermit,
    user: Option<(u32, Held)>,
}

impl Drop for Pass {
    fn drop(&mut self) {
        if let Some((uid, users)) = &self.user {
            let mut users = users
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(n) = users.get_mut(uid) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    users.remove(uid);
                }
            }
        }
    }
}

impl Gate {
    /// A gate with `limits`' slots.
    #[must_use]
    pub fn new(limits: &Limits) -> Self {
        Gate {
            max: limits.max_connections,
            shared: std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections)),
            root: std::sync::Arc::new(tokio::sync::Semaphore::new(limits.root_reserved)),
            per_user: limits.per_user,
            users: std::sync::Arc::default(),
        }
    }

    /// A slot for a connection from `uid`, or why there is none.
    pub fn admit(&self, uid: u32) -> Result<Pass, Full> {
        let full = Full::All { max: self.max };
        if uid == 0 {
            let permit = std::sync::Arc::clone(&self.shared)
                .try_acquire_owned()
                .or_else(|_| std::sync::Arc::clone(&self.root).try_acquire_owned())
                .map_err(|_| full)?;
            return Ok(Pass {
                _permit: permit,
                user: None,
            });
        }
        let mut users = self
            .users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = users.get(&uid).copied().unwrap_or(0);
        if held >= self.per_user {
            return Err(Full::User {
                uid,
                per_user: self.per_user,
            });
        }
        let permit = std::sync::Arc::clone(&self.shared)
            .try_acquire_owned()
            .map_err(|_| full)?;
        users.insert(uid, held + 1);
        Ok(Pass {
            _permit: permit,
            user: Some((uid, std::sync::Arc::clone(&self.users))),
        })
    }
}

/// A bound control socket.
pub struct Server {
    listener: UnixListener,
    /// `[control] group`, resolved again for every connection.
    group: Option<String>,
    lookup: GroupLookup,
    limits: Limits,
    /// Removes the socket file when the server goes away (unless systemd owns it).
    cleanup: Cleanup,
}

impl Server {
    /// Takes the socket systemd passed (`LISTEN_FDS`), or binds `cfg.socket`.
    ///
    /// A stale socket file left by a killed daemon is replaced; a live one is an error.
    pub fn bind(cfg: &ControlConfig) -> Result<Self, ServerError> {
        Server::bind_with(cfg, std::sync::Arc::new(system_group))
    }

    /// [`Server::bind`] with another group database (tests).
    pub fn bind_with(cfg: &ControlConfig, lookup: GroupLookup) -> Result<Self, ServerError> {
        let access = Access::from_config(cfg, &lookup)?;
        let io_err = |what: &str| {
            let path = cfg.socket.clone();
            let what = what.to_owned();
            move |source| ServerError::Io { path, what, source }
        };
        let mut fds = listenfd::ListenFd::from_env();
        if let Ok(Some(std_listener)) = fds.take_unix_listener(0) {
            std_listener
                .set_nonblocking(true)
                .map_err(io_err("making the systemd socket non-blocking"))?;
            let listener = UnixListener::from_std(std_listener)
                .map_err(io_err("registering the systemd socket"))?;
            info!("control socket passed by systemd");
            return Ok(Server {
                listener,
                group: cfg.group.clone(),
                lookup: std::sync::Arc::clone(&lookup),
                limits: Limits::default(),
                cleanup: Cleanup(None),
            });
        }
        let path = &cfg.socket;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err("creating its directory"))?;
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(ServerError::InUse(path.clone()));
                }
                std::fs::remove_file(path).map_err(io_err("removing the stale socket"))?;
            }
            Ok(_) => {
                return Err(ServerError::Io {
                    path: path.clone(),
                    what: "a file that is not a socket is in the way; remove it".into(),
                    source: io::Error::from(io::ErrorKind::AlreadyExists),
                });
            }
            Err(_) => {}
        }
        let listener = UnixListener::bind(path).map_err(io_err("binding"))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
            .map_err(io_err("setting mode 0660"))?;
        let mut group = cfg.group.clone();
        if let Some((name, gid)) = &access.group {
            use std::os::unix::fs::MetadataExt;
            // Already right when the daemon runs with that group (systemd `Group=`).
            let current = std::fs::metadata(path).map(|m| m.gid()).ok();
            if current != Some(*gid)
                && let Err(e) = std::os::unix::fs::chown(path, None, Some(*gid))
            {
                // Not a reason to stop managing memory (under the shipped unit, which gives the
                // daemon no CAP_CHOWN, exiting here made the unit crash-loop): the socket
                // stays root's, and only root is served.
                warn!(socket = %path.display(), group = %name, error = %e,
                    "cannot give the control socket to [control] group (the daemon has no \
                     CAP_CHOWN, as under the shipped unit); only root is served. Let systemd \
                     create the socket with the group: systemctl enable --now memweightd.socket, \
                     then systemctl restart memweightd");
                group = None;
            }
        }
        info!(socket = %path.display(), group = ?group, "control socket listening");
        Ok(Server {
            listener,
            group,
            lookup,
            limits: Limits::default(),
            cleanup: Cleanup(Some(path.clone())),
        })
    }

    /// The same server with other client limits (tests use short timeouts).
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Accepts connections until the process ends; each is served on its own task. Who gets a
    /// slot is the [`Gate`]'s: `limits.max_connections` shared ones (at most
    /// `limits.per_user` for one user other than root), then `limits.root_reserved` for root.
    pub async fn serve(self, calls: mpsc::Sender<Call>) {
        let _cleanup = self.cleanup;
        let shared = std::sync::Arc::new(Shared {
            group: self.group,
            lookup: self.lookup,
            limits: self.limits,
        });
        let gate = Gate::new(&self.limits);
        let mut refused: u64 = 0;
        loop {
            match self.listener.accept().await {
                Ok((stream, _)) => {
                    // SO_PEERCRED: one getsockopt, the credentials the client connected with.
                    let cred = match stream.peer_cred() {
                        Ok(c) => c,
                        Err(e) => {
                            debug!(error = %e, "control connection without credentials: closed");
                            continue;
                        }
                    };
                    let pass = match gate.admit(cred.uid()) {
                        Ok(pass) => pass,
                        Err(full) => {
                            refused += 1;
                            busy(&stream, &full, refused);
                            continue;
                        }
                    };
                    let calls = calls.clone();
                    let shared = std::sync::Arc::clone(&shared);
                    tokio::spawn(async move {
                        let _pass = pass;
                        if let Err(e) = connection(stream, cred, &shared, &calls).await {
                            debug!(error = %e, "control connection ended early");
                        }
                    });
                }
                Err(e) => {
                    warn!(error = %e, "control socket accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listener", &self.listener)
            .field("group", &self.group)
            .field("limits", &self.limits)
            .field("cleanup", &self.cleanup)
            .finish_non_exhaustive()
    }
}

/// Removes the socket file we created when the server goes away.
#[derive(Debug)]
struct Cleanup(Option<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What every connection task needs.
struct Shared {
    group: Option<String>,
    lookup: GroupLookup,
    limits: Limits,
}

/// Tells a client past the connection limit why it is turned away, without waiting for it.
/// Logged at the 1st, 2nd, 4th, 8th, … refusal, so a flood cannot flood the journal.
fn busy(stream: &UnixStream, full: &Full, refused: u64) {
    let why = match full {
        Full::All { max } => format!("{max} control connections are open already"),
        Full::User { uid, per_user } => format!(
            "uid {uid} has {per_user} control connections open already (the most one user may)"
        ),
    };
    let line = Response::new(Outcome::Error(ErrorReply::new(
        ErrorKind::Internal,
        format!("memweightd is busy: {why}; try again in a few seconds"),
    )))
    .to_line();
    // Best effort: a fresh socket's buffer takes one line; the stream is closed on return.
    let _ = stream.try_write(line.as_bytes());
    if refused.is_power_of_two() {
        match full {
            Full::All { max } => warn!(
                max,
                refused, "control connection refused: too many open connections"
            ),
            Full::User { uid, per_user } => warn!(
                uid,
                per_user,
                refused,
                "control connection refused: too many open connections from one user"
            ),
        }
    }
}

/// Writes `outcome` as one line and closes the writing side, within `limit`; a client that
/// does not take its reply is dropped (`TimedOut`).
pub async fn reply<W: tokio::io::AsyncWrite + Unpin>(
    mut write: W,
    outcome: Outcome,
    limit: Duration,
) -> io::Result<()> {
    let line = Response::new(outcome).to_line();
    let send = async {
        write.write_all(line.as_bytes()).await?;
        write.shutdown().await
    };
    tokio::time::timeout(limit, send).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("client did not read its reply within {limit:?}"),
        )
    })?
}

/// Serves one connection: one request line, one response line.
async fn connection(
    stream: UnixStream,
    cred: tokio::net::unix::UCred,
    shared: &std::sync::Arc<Shared>,
    calls: &mpsc::Sender<Call>,
) -> io::Result<()> {
    let limits = shared.limits;
    let (access, peer) = if cred.uid() == 0 {
        // Root is always served: no group database, no queue.
        let root = Peer {
            uid: 0,
            gid: cred.gid(),
            groups: Vec::new(),
            user: None,
        };
        (Access::default(), root)
    } else {
        // From the socket: the groups the client connected with, not /proc/<pid>/status (its
        // PID may be another process's by now).
        let groups = crate::peer::supplementary_groups(&stream).unwrap_or_else(|e| {
            debug!(error = %e, uid = cred.uid(), "cannot read the peer's groups (SO_PEERGROUPS)");
            Vec::new()
        });
        // The group database (NSS: files, LDAP, …) may block: on its own bounded pool.
        let shared = std::sync::Arc::clone(shared);
        let check = crate::pools::credentials().spawn(move || {
            let access = Access::resolve(shared.group.as_deref(), &shared.lookup);
            let peer = peer_of(cred, groups, &access);
            (access, peer)
        });
        match tokio::time::timeout(limits.read_timeout, check).await {
            Ok(Ok(checked)) => checked,
            Ok(Err(e)) => return Err(io::Error::other(e)),
            Err(_) => {
                let (_, write) = stream.into_split();
                let e = ErrorReply::new(
                    ErrorKind::Internal,
                    "checking your credentials took too long (is the group database slow?); \
                     try again, or as root",
                );
                return reply(write, Outcome::Error(e), limits.write_timeout).await;
            }
        }
    };
    let (read, write) = stream.into_split();
    let outcome = match authorize(&access, &peer) {
        Err(e) => {
            warn!(
                uid = peer.uid,
                gid = peer.gid,
                "control request refused: permission denied"
            );
            Outcome::Error(e)
        }
        Ok(()) => {
            let mut line = String::new();
            let mut reader = BufReader::new(read.take(LINE_LIMIT));
            match tokio::time::timeout(limits.read_timeout, reader.read_line(&mut line)).await {
                Err(_) => Outcome::Error(ErrorReply::new(
                    ErrorKind::BadRequest,
                    format!("no request line within {:?}", limits.read_timeout),
                )),
                Ok(Err(e)) if e.kind() == io::ErrorKind::InvalidData => Outcome::Error(
                    ErrorReply::new(ErrorKind::BadRequest, "request is not UTF-8 text"),
                ),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(_)) => match ctl::parse_request(line.trim_end()) {
                    Err(e) => Outcome::Error(e),
                    Ok(command) => {
                        debug!(uid = peer.uid, ?command, "control request");
                        call(calls, command, limits.loop_timeout).await
                    }
                },
            }
        }
    };
    reply(write, outcome, limits.write_timeout).await
}

/// Sends `command` to the control loop and waits for its answer, `limit` in all (queueing
/// included). When the limit passes, the waiting side is dropped, which makes the queued
/// [`Call`] stale: the loop then drops it instead of carrying it out.
pub async fn call(calls: &mpsc::Sender<Call>, command: Command, limit: Duration) -> Outcome {
    let (tx, rx) = oneshot::channel();
    let gone = || {
        Outcome::Error(ErrorReply::new(
            ErrorKind::Internal,
            "the daemon is shutting down; try again once it is back",
        ))
    };
    let exchange = async {
        if calls.send(Call { command, reply: tx }).await.is_err() {
            return gone();
        }
        rx.await.unwrap_or_else(|_| gone())
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Error(ErrorReply::new(
            ErrorKind::Internal,
            format!(
                "the control loop did not answer within {limit:?} (a tick may be stuck); the \
                 request was not carried out; see the daemon's log"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32, groups: &[u32], user: Option<&str>) -> Peer {
        Peer {
            uid,
            gid,
            groups: groups.to_vec(),
            user: user.map(str::to_owned),
        }
    }

    fn group(gid: u32, members: &[&str]) -> Access {
        Access {
            group: Some(("memweight".into(), gid)),
            members: members.iter().map(|m| (*m).to_owned()).collect(),
        }
    }

    #[test]
    fn root_is_always_allowed() {
        assert!(authorize(&Access::default(), &peer(0, 0, &[], None)).is_ok());
        assert!(authorize(&group(990, &[]), &peer(0, 5, &[], None)).is_ok());
    }

    #[test]
    fn group_members_are_allowed_by_gid_supplementary_or_listing() {
        let access = group(990, &["alice"]);
        assert!(authorize(&access, &peer(1000, 990, &[], None)).is_ok());
        assert!(authorize(&access, &peer(1000, 100, &[4, 990], None)).is_ok());
        assert!(authorize(&access, &peer(1000, 100, &[], Some("alice"))).is_ok());
    }

    #[test]
    fn others_get_permission_denied_with_a_hint() {
        let e = authorize(
            &group(990, &["alice"]),
            &peer(65534, 65534, &[65534], Some("nobody")),
        )
        .expect_err("nobody is not in the group");
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert!(e.message.starts_with("permission denied"), "{}", e.message);
        assert!(e.message.contains("\"memweight\""), "{}", e.message);
        let e = authorize(&Access::default(), &peer(1000, 1000, &[], None))
            .expect_err("no group configured");
        assert!(e.message.contains("[control] group"), "{}", e.message);
    }

    /// Issue 23: 16 idle connections from one member of the `[control] group` held every slot
    /// (until their read timeout), root's included.
    #[test]
    fn regression_sixteen_connections_from_a_member_do_not_lock_root_out() {
        let limits = Limits::default();
        let gate = Gate::new(&limits);
        let tries: Vec<Result<Pass, Full>> = (0..16).map(|_| gate.admit(1000)).collect();
        let (member, refused): (Vec<_>, Vec<_>) = tries.into_iter().partition(Result::is_ok);
        assert_eq!(member.len(), limits.per_user);
        assert!(refused.iter().all(|r| matches!(
            r,
            Err(Full::User {
                uid: 1000,
                per_user: 4
            })
        )));
        // Other members share the rest.
        let others: Vec<Pass> = (1001..1004)
            .flat_map(|uid| std::iter::repeat_n(uid, 4))
            .map(|uid| gate.admit(uid).expect("a shared slot"))
            .collect();
        assert_eq!(gate.admit(1004).err(), Some(Full::All { max: 16 }));
        // Root always gets through, on its reserved slots.
        let root: Vec<Pass> = (0..limits.root_reserved)
            .map(|_| gate.admit(0).expect("root's reserved slot"))
            .collect();
        assert!(gate.admit(0).is_err(), "the reserve is bounded too");
        // Slots come back when connections end.
        drop(member);
        assert!(gate.admit(1000).is_ok());
        drop((others, root));
        assert!(gate.admit(0).is_ok());
    }
}
