//! The client's one exchange: a request line out, the daemon's line back, over the Unix
//! socket, blocking, with a timeout on each. `memweightctl` turns a [`Missed`] into its
//! message and exit code; the lab's status sampler just skips that second.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::{Command, ErrorReply, Reply, Request, parse_response};

/// Why an exchange brought no answer line.
#[derive(Debug)]
pub enum Missed {
    /// The socket could not be connected to (not there, refused, permission).
    Connect(io::Error),
    /// The connection failed while asking or waiting (including the timeout).
    Lost(io::Error),
    /// The daemon closed the connection without a line.
    Closed,
}

/// Sends `command` to the daemon at `socket` and reads its answer, waiting up to `timeout` for
/// each of the write and the read. A command that fails [`Command::validate`] is not sent: its
/// error comes back as the daemon's would. `Ok(Err(..))` is an error reply (the daemon's, or an
/// answer of another protocol version or no JSON at all); `Err` is no answer.
pub fn exchange(
    socket: &Path,
    command: Command,
    timeout: Duration,
) -> Result<Result<Reply, ErrorReply>, Missed> {
    if let Err(e) = command.validate() {
        return Ok(Err(e));
    }
    let mut stream = UnixStream::connect(socket).map_err(Missed::Connect)?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(Missed::Lost)?;
    // The daemon may refuse (permission denied) and close before reading: its answer counts,
    // not the failed write.
    let sent = stream.write_all(Request::new(command).to_line().as_bytes());
    let mut line = String::new();
    // No cap on the answer: `status` of thousands of cgroups is far longer than a request.
    let read = BufReader::new(&stream).read_line(&mut line);
    match (read, sent) {
        (Ok(n), _) if n > 0 => {}
        (Ok(_), Err(e)) | (Err(e), _) => return Err(Missed::Lost(e)),
        (Ok(_), Ok(())) => return Err(Missed::Closed),
    }
    Ok(parse_response(line.trim_end()).unwrap_or_else(Err))
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;
    use std::thread;

    use super::*;
    use crate::ctl::{ErrorKind, Outcome, Response};

    /// A one-shot daemon at a fresh socket that reads a line and answers `answer` (nothing
    /// when `None`); returns the socket's directory and the path.
    fn daemon(answer: Option<String>) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("d.sock");
        let listener = UnixListener::bind(&path).expect("bind");
        thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).expect("read");
            if let Some(a) = answer {
                s.write_all(a.as_bytes()).expect("write");
            }
        });
        (dir, path)
    }

    const WAIT: Duration = Duration::from_secs(5);

    #[test]
    fn an_answer_comes_back_typed() {
        let reply = Response::new(Outcome::Error(ErrorReply::new(ErrorKind::NotReady, "wait")));
        let (_dir, path) = daemon(Some(reply.to_line()));
        let got = exchange(&path, Command::Status, WAIT).expect("an answer");
        assert_eq!(got.expect_err("an error reply").kind, ErrorKind::NotReady);
    }

    #[test]
    fn no_socket_no_line_and_a_bad_command_are_told_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let none = exchange(&dir.path().join("none.sock"), Command::Status, WAIT);
        assert!(matches!(none, Err(Missed::Connect(_))), "{none:?}");

        let (_d, path) = daemon(None);
        let closed = exchange(&path, Command::Status, WAIT);
        assert!(matches!(closed, Err(Missed::Closed)), "{closed:?}");

        let bad = Command::Set {
            cgroup: "../x".into(),
            weight: 5,
            min: None,
            max: None,
        };
        let refused = exchange(&dir.path().join("none.sock"), bad, WAIT).expect("not sent");
        assert_eq!(refused.expect_err("invalid").kind, ErrorKind::BadRequest);
    }

    #[test]
    fn an_answer_that_is_not_ours_is_an_error_reply() {
        let (_dir, path) = daemon(Some("HTTP/1.1 400 Bad Request\n".into()));
        let got = exchange(&path, Command::Status, WAIT).expect("a line");
        assert_eq!(got.expect_err("not JSON").kind, ErrorKind::VersionMismatch);
    }
}
