//! The daemon's client: one request line out, one response line back, over the Unix socket.
//!
//! Every way this can fail maps to one exit code (see [`exit`]) and one line for the user:
//! the socket missing or refusing (daemon not running), the socket's permissions, a daemon of
//! another protocol version, or the daemon's own error reply.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use memweight_proto::ctl::{self, Command, ErrorKind, ErrorReply, Reply, Request};

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

/// Sends `command` and returns the daemon's reply.
pub(crate) fn request(socket: &Path, command: Command) -> Result<Reply, Failure> {
    command.validate().map_err(|e| failure(&e))?;
    let mut stream = UnixStream::connect(socket).map_err(|e| connect_failure(socket, &e))?;
    let lost = |e: io::Error| Failure {
        code: exit::UNREACHABLE,
        message: format!(
            "lost the connection to memweightd at {}: {e}",
            socket.display()
        ),
    };
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .map_err(lost)?;
    // The daemon may refuse (permission denied) and close before reading: its answer counts,
    // not the failed write.
    let sent = stream.write_all(Request::new(command).to_line().as_bytes());
    let mut line = String::new();
    let read = BufReader::new(&stream).read_line(&mut line);
    match (read, sent) {
        (Ok(n), _) if n > 0 => {}
        (Ok(_), Err(e)) | (Err(e), _) => return Err(lost(e)),
        (Ok(_), Ok(())) => {
            return Err(Failure {
                code: exit::UNREACHABLE,
                message: format!(
                    "memweightd at {} closed the connection without answering; see its log",
                    socket.display()
                ),
            });
        }
    }
    match ctl::parse_response(line.trim_end()) {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(e)) | Err(e) => Err(failure(&e)),
    }
}

#[cfg(test)]
mod tests {
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
}
