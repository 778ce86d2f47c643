//! `memweightctl health`: asks the daemon's `/healthz` (the metrics listener) whether the
//! control loop ticks, and exits 0 only on a 200.
//!
//! It exists for container probes: an image from scratch has no curl, and `podman kube play`
//! turns a Kubernetes `httpGet` liveness probe into a `curl` run inside the container, while a
//! kubelet's `httpGet` under `hostNetwork` would need the listener on the node's address
//! instead of loopback. An `exec` probe of `memweightctl health` works in both, against the
//! loopback listener the daemon ships with.
//!
//! One HTTP/1.0 request on TCP, every step within `--timeout`, at most [`MAX_ANSWER`] bytes
//! read; no DNS (the address is `IP:PORT`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use clap::Args;

use crate::Failure;
use crate::client::exit;

/// The most bytes of the answer read.
pub const MAX_ANSWER: u64 = 64 << 10;

/// `memweightctl health` options.
#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// The metrics listener (`[metrics] listen` of the daemon's config), `IP:PORT`.
    #[arg(long, value_name = "IP:PORT", default_value = "127.0.0.1:9750")]
    pub address: SocketAddr,
    /// Seconds allowed for connecting, sending and reading the answer, each.
    #[arg(long, value_name = "SECONDS", default_value = "5",
        value_parser = clap::value_parser!(u64).range(1..=300))]
    pub timeout: u64,
}

/// Runs the check: prints the daemon's answer and succeeds on a 200; exit 1 on any other
/// status, 3 when nothing answers.
pub(crate) fn run(args: &HealthArgs) -> Result<(), Failure> {
    let timeout = Duration::from_secs(args.timeout);
    let unreachable = |why: &dyn std::fmt::Display| Failure {
        code: exit::UNREACHABLE,
        message: format!(
            "no answer from {}/healthz: {why}; is memweightd running with [metrics] enabled \
             and listen = \"{}\"?",
            args.address, args.address
        ),
    };
    let mut stream =
        TcpStream::connect_timeout(&args.address, timeout).map_err(|e| unreachable(&e))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| unreachable(&e))?;
    stream
        .write_all(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n")
        .map_err(|e| unreachable(&e))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .map_err(|e| unreachable(&e))?;
    let (status, body) = parse_answer(&answer).map_err(|e| unreachable(&e))?;
    if status == 200 {
        crate::print(&format!("healthy: {body}\n"))
    } else {
        Err(Failure::other(format_args!(
            "{}/healthz answered {status}: {body}",
            args.address
        )))
    }
}

/// The status code and the body's first line of an HTTP/1.x answer.
fn parse_answer(answer: &[u8]) -> Result<(u16, String), String> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("the answer has no end of headers: not HTTP")?;
    let status = head
        .lines()
        .next()
        .filter(|l| l.starts_with("HTTP/1."))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or("the answer does not start with an HTTP/1.x status line")?;
    let first = body.lines().next().unwrap_or("").trim().to_owned();
    Ok((status, first))
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    #[test]
    fn answers_are_read_for_their_status_and_first_body_line() {
        assert_eq!(
            parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nok: tick 7\n"),
            Ok((200, "ok: tick 7".to_owned()))
        );
        assert_eq!(
            parse_answer(b"HTTP/1.0 503 Service Unavailable\r\n\r\nlast tick 3 was 40 s ago\n"),
            Ok((503, "last tick 3 was 40 s ago".to_owned()))
        );
        for bad in [
            &b""[..],
            b"SSH-2.0-OpenSSH\r\n",
            b"HTTP/1.1 abc\r\n\r\n",
            b"\xff\xfe\r\n\r\n",
        ] {
            assert!(parse_answer(bad).is_err(), "{bad:?}");
        }
    }

    /// A listener that answers one connection with `answer`.
    fn serve(answer: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                let mut buf = [0_u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(answer);
            }
        });
        addr
    }

    #[test]
    fn only_a_200_is_healthy_and_silence_is_unreachable() {
        let args = |address| HealthArgs {
            address,
            timeout: 2,
        };
        let ok = serve(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nok: tick 9\n");
        assert!(run(&args(ok)).is_ok());
        let stuck = serve(b"HTTP/1.1 503 Service Unavailable\r\n\r\nthe control loop is stuck\n");
        let e = run(&args(stuck)).expect_err("503");
        assert_eq!(e.code, 1);
        assert!(e.message.contains("stuck"), "{}", e.message);
        let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
        let gone = closed.local_addr().expect("addr");
        drop(closed);
        let e = run(&args(gone)).expect_err("nothing listens");
        assert_eq!(e.code, exit::UNREACHABLE);
        assert!(e.message.contains("[metrics]"), "{}", e.message);
    }
}
