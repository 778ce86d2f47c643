//! The daemon's client: one request line out, one response line back, over the Unix socket.
//!
//! Every way this can fail maps to one exit code (see [`exit`]) and one line for the user:
//! the socket missing or refusing (daemon not running), the socket's permissions, a daemon of
//! another protocol version, or the daemon's own error reply.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use memweight_proto::ctl::{self, Command, ErrorKind, ErrorReply, Missed, Reply};

use crate::Failure;

/// Exit codes, as documented in `memweightctl --help` and docs/operations.md.
pub(crate) mod exit {
    /// The daemon answered with an error of its own (not ready, reload refused, state file).
    pub const DAEMON: u8 = 1;
    /// Bad input: arguments, an unknown or unmanaged cgroup, a bad path or weight.
    pub const BAD_INPUT: u8 = 2;
    /// The daemon is not running (no socket, or nobody listening on it).
    pub const UNREACHABLE: u8 = 3;
    /// Permission denied by the socket's mode or by the daemon's peer check.
    pub const PERMISSION: u8 = 4;
    /// Client and daemon speak different protocol versions.
    pub const PROTOCOL: u8 = 5;
}

/// How long the daemon may take to answer (a reload or a tick stuck in kernel reclaim).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(40);

/// The exit code for an error the daemon (or the protocol layer) reported.
pub(crate) fn code_for(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::BadRequest | ErrorKind::NotManaged | ErrorKind::UnknownCgroup => exit::BAD_INPUT,
        ErrorKind::PermissionDenied => exit::PERMISSION,
        ErrorKind::VersionMismatch => exit::PROTOCOL,
        ErrorKind::NotReady | ErrorKind::ConfigInvalid | ErrorKind::Internal => exit::DAEMON,
    }
}

/// A [`Failure`] for an error reply.
pub(crate) fn failure(e: &ErrorReply) -> Failure {
    Failure {
        code: code_for(e.kind),
        message: e.message.clone(),
    }
}

/// The failure for an error connecting to `socket`.
pub(crate) fn connect_failure(socket: &Path, e: &io::Error) -> Failure {
    let shown = socket.display();
    match e.kind() {
        io::ErrorKind::NotFound => Failure {
            code: exit::UNREACHABLE,
            message: format!(
                "memweightd is not running: no socket at {shown} (start it with `systemctl start \
                 memweightd`, or point --socket / MEMWEIGHT_SOCKET at its [control] socket)"
            ),
        },
        io::ErrorKind::ConnectionRefused => Failure {
            code: exit::UNREACHABLE,
            message: format!(
                "memweightd is not running: nothing listens on {shown} (a stale socket; start \
                 the daemon)"
            ),
        },
        io::ErrorKind::PermissionDenied => Failure {
            code: exit::PERMISSION,
            message: format!(
                "permission denied opening {shown}: run as root or as a member of the daemon's \
                 [control] group"
            ),
        },
        _ => Failure {
            code: exit::UNREACHABLE,
            message: format!("cannot connect to memweightd at {shown}: {e}"),
        },
    }
}

/// Sends `command` and returns the daemon's reply; an error reply is a [`Failure`].
#[cfg(test)]
pub(crate) fn request(socket: &Path, command: Command) -> Result<Reply, Failure> {
    match exchange(socket, command)? {
        Ok(reply) => Ok(reply),
        Err(e) => Err(failure(&e)),
    }
}

/// How long, and how often, to ask again while the daemon has not completed its first tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wait {
    /// Give up after this long (`--wait`); zero asks once.
    pub limit: Duration,
    /// Ask again this often.
    pub every: Duration,
}

impl Wait {
    /// `--wait` seconds, asking again every quarter second.
    pub fn up_to(limit: Duration) -> Self {
        Wait {
            limit,
            every: Duration::from_millis(250),
        }
    }
}

/// Whether a pause ran its course or was cut short (Ctrl-C while watching).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pause {
    /// The time passed.
    Slept,
    /// A signal asked to stop.
    Interrupted,
}

/// How a wait sleeps: [`Pause::Slept`] after `d`, or [`Pause::Interrupted`] sooner.
pub(crate) type Pauser<'a> = dyn FnMut(Duration) -> Pause + 'a;

/// Sends `command` and returns the daemon's reply (an error reply as a [`Failure`]); a daemon
/// that answers "not ready" (socket activation has just started it and its first tick has not
/// completed) is asked again every `wait.every` until `wait.limit` has passed. `say` gets one
/// line for stderr when the waiting starts; `pause` sleeps (and may be cut short: then the
/// last "not ready" is returned as it is).
pub(crate) fn request_waiting(
    socket: &Path,
    command: &Command,
    wait: Wait,
    say: &mut dyn FnMut(&str),
    pause: &mut Pauser<'_>,
) -> Result<Reply, Failure> {
    let started = Instant::now();
    let mut told = false;
    loop {
        let e = match exchange(socket, command.clone())? {
            Ok(reply) => return Ok(reply),
            Err(e) if e.kind == ErrorKind::NotReady => e,
            Err(e) => return Err(failure(&e)),
        };
        let waited = started.elapsed();
        if waited >= wait.limit {
            if wait.limit.is_zero() {
                return Err(failure(&e));
            }
            return Err(Failure {
                code: exit::DAEMON,
                message: format!(
                    "memweightd has not completed its first tick within {} s of waiting; see \
                     `journalctl -u memweightd` (a first tick adopting thousands of cgroups takes \
                     longer: raise --wait)",
                    wait.limit.as_secs_f64()
                ),
            });
        }
        if !told {
            say(&format!(
                "memweightd has not completed its first tick yet (socket activation may just \
                 have started it); waiting up to {} s",
                wait.limit.as_secs_f64()
            ));
            told = true;
        }
        if pause(wait.every.min(wait.limit - waited)) == Pause::Interrupted {
            return Err(failure(&e));
        }
    }
}

/// One request and its answer ([`ctl::exchange`]): `Ok(Err(..))` is the daemon's (or the
/// protocol's) error reply, `Err` a failure to reach it.
pub(crate) fn exchange(
    socket: &Path,
    command: Command,
) -> Result<Result<Reply, ErrorReply>, Failure> {
    ctl::exchange(socket, command, ANSWER_TIMEOUT).map_err(|missed| match missed {
        Missed::Connect(e) => connect_failure(socket, &e),
        Missed::Lost(e) => Failure {
            code: exit::UNREACHABLE,
            message: format!(
                "lost the connection to memweightd at {}: {e}",
                socket.display()
            ),
        },
        Missed::Closed => Failure {
            code: exit::UNREACHABLE,
            message: format!(
                "memweightd at {} closed the connection without answering; see its log",
                socket.display()
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};

    use super::*;

    #[test]
    fn each_error_kind_has_its_exit_code() {
        assert_eq!(code_for(ErrorKind::NotManaged), 2);
        assert_eq!(code_for(ErrorKind::UnknownCgroup), 2);
        assert_eq!(code_for(ErrorKind::BadRequest), 2);
        assert_eq!(code_for(ErrorKind::PermissionDenied), 4);
        assert_eq!(code_for(ErrorKind::VersionMismatch), 5);
        assert_eq!(code_for(ErrorKind::NotReady), 1);
        assert_eq!(code_for(ErrorKind::Internal), 1);
    }

    #[test]
    fn missing_socket_means_not_running() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = request(&dir.path().join("none.sock"), Command::Status).expect_err("no daemon");
        assert_eq!(f.code, exit::UNREACHABLE);
        assert!(f.message.contains("not running"), "{}", f.message);
    }

    #[test]
    fn bad_input_is_caught_before_connecting() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = request(
            &dir.path().join("none.sock"),
            Command::Set {
                cgroup: "../x".into(),
                weight: 5,
                min: None,
                max: None,
            },
        )
        .expect_err("bad path");
        assert_eq!(f.code, exit::BAD_INPUT);
        assert!(f.message.contains("`..`"), "{}", f.message);
    }

    #[test]
    fn a_daemon_of_another_version_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).expect("read");
            s.write_all(b"{\"version\":0,\"result\":{\"ok\":{}}}\n")
                .expect("write");
        });
        let f = request(&path, Command::Status).expect_err("old daemon");
        server.join().expect("server thread");
        assert_eq!(f.code, exit::PROTOCOL);
        assert!(f.message.contains("version 0"), "{}", f.message);
    }

    /// A scripted daemon: answers the connections in order with `answers`, one each.
    fn scripted(
        dir: &Path,
        answers: Vec<String>,
    ) -> (std::path::PathBuf, std::thread::JoinHandle<()>) {
        let path = dir.join("scripted.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let server = std::thread::spawn(move || {
            for answer in answers {
                let (mut s, _) = listener.accept().expect("accept");
                let mut line = String::new();
                BufReader::new(&s).read_line(&mut line).expect("read");
                s.write_all(answer.as_bytes()).expect("write");
            }
        });
        (path, server)
    }

    fn not_ready() -> String {
        ctl::Response::new(ctl::Outcome::Error(ErrorReply::not_ready())).to_line()
    }

    fn reloaded() -> String {
        ctl::Response::new(ctl::Outcome::Ok(Reply::Reloaded(ctl::Reloaded {
            config: "/etc/memweight/memweight.toml".into(),
            rules: 1,
            overrides_kept: 0,
        })))
        .to_line()
    }

    #[test]
    fn not_ready_is_asked_again_and_said_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, server) = scripted(dir.path(), vec![not_ready(), not_ready(), reloaded()]);
        let mut said = Vec::new();
        let mut pauses = Vec::new();
        let reply = request_waiting(
            &path,
            &Command::Reload,
            Wait::up_to(Duration::from_secs(30)),
            &mut |s| said.push(s.to_owned()),
            &mut |d| {
                pauses.push(d);
                Pause::Slept
            },
        )
        .expect("answered after two not-ready");
        server.join().expect("server");
        assert!(matches!(reply, Reply::Reloaded(_)));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("waiting up to 30 s"), "{said:?}");
        assert_eq!(pauses, vec![Duration::from_millis(250); 2]);
    }

    #[test]
    fn the_wait_is_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, server) = scripted(dir.path(), vec![not_ready(); 100]);
        let wait = Wait {
            limit: Duration::from_millis(200),
            every: Duration::from_millis(80),
        };
        let f = request_waiting(&path, &Command::Status, wait, &mut |_| {}, &mut |d| {
            std::thread::sleep(d);
            Pause::Slept
        })
        .expect_err("never ready");
        // Not joined: how many times it was asked depends on the clock.
        drop(server);
        assert_eq!(f.code, exit::DAEMON);
        assert!(
            f.message.contains("first tick within 0.2 s") && f.message.contains("--wait"),
            "{}",
            f.message
        );
    }

    #[test]
    fn no_wait_and_an_interrupted_wait_give_the_daemons_answer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, server) = scripted(dir.path(), vec![not_ready(), not_ready()]);
        let mut said = 0;
        let f = request_waiting(
            &path,
            &Command::Status,
            Wait::up_to(Duration::ZERO),
            &mut |_| said += 1,
            &mut |_| Pause::Slept,
        )
        .expect_err("no waiting");
        assert_eq!(f.code, exit::DAEMON);
        assert!(f.message.contains("first tick yet"), "{}", f.message);
        assert_eq!(said, 0);
        let f = request_waiting(
            &path,
            &Command::Status,
            Wait::up_to(Duration::from_secs(30)),
            &mut |_| {},
            &mut |_| Pause::Interrupted,
        )
        .expect_err("interrupted");
        server.join().expect("server");
        assert!(f.message.contains("first tick yet"), "{}", f.message);
    }

    #[test]
    fn other_errors_are_not_waited_for() {
        let dir = tempfile::tempdir().expect("tempdir");
        let refused = ctl::Response::new(ctl::Outcome::Error(ErrorReply::new(
            ErrorKind::ConfigInvalid,
            "reload refused, the old configuration stays: bad tick",
        )))
        .to_line();
        let (path, server) = scripted(dir.path(), vec![refused]);
        let f = request_waiting(
            &path,
            &Command::Reload,
            Wait::up_to(Duration::from_secs(30)),
            &mut |_| panic!("nothing to wait for"),
            &mut |_| panic!("no pause"),
        )
        .expect_err("refused");
        server.join().expect("server");
        assert_eq!(f.code, exit::DAEMON);
        assert!(f.message.starts_with("reload refused"), "{}", f.message);
    }
}
