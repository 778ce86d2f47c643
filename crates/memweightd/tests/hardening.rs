//! Hostile local input against the daemon's two listeners (issue 10): idle connections by the
//! thousand on the metrics endpoint and on the control socket must not exhaust the daemon's
//! file descriptors, hang its replies or starve its answers.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use memweightd::metrics::{self, Limits, Metrics};
use tokio::sync::watch;

/// Tests that count this process's fds run one at a time (the harness runs tests in threads).
static FD_COUNTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Open file descriptors of this process.
fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// One `GET path` with a short timeout; `None` when the server closed or refused it.
fn try_get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_1100_idle_metrics_connections_do_not_exhaust_fds() {
    let _serial = FD_COUNTING.lock().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (_snapshots, rx) = watch::channel(None);
    let limits = Limits {
        max_connections: 64,
        header_timeout: Duration::from_secs(1),
        connection_timeout: Duration::from_secs(3),
    };
    let server = tokio::spawn(metrics::serve(listener, rx, Metrics::default(), limits));
    let before = fd_count();

    let mut idle = Vec::new();
    for _ in 0..1100 {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => idle.push(s),
            // The backlog may be full while the server sheds connections: that is the point.
            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
    assert!(idle.len() > 1000, "only {} connections opened", idle.len());
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Our own client ends hold idle.len() fds; the server's side may hold max_connections.
    let server_fds = fd_count().saturating_sub(before + idle.len());
    assert!(
        server_fds <= limits.max_connections + 8,
        "the server holds {server_fds} fds for {} idle clients",
        idle.len()
    );

    let deadline = Instant::now() + Duration::from_secs(15);
    let answer = loop {
        let got = tokio::task::spawn_blocking(move || try_get(addr, "/metrics"))
            .await
            .expect("join");
        if let Some(a) = got {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics never answered with 1100 idle clients"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(answer.0, 200);
    assert!(answer.1.contains("memweight_up 0"), "{}", answer.1);

    // The idle clients were closed by the server, not left hanging.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let still_open = idle
        .iter()
        .filter(|s| {
            let mut buf = [0u8; 1];
            matches!(s.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        })
        .count();
    assert_eq!(still_open, 0, "idle connections the server never closed");
    let server_fds = fd_count().saturating_sub(before + idle.len());
    assert!(
        server_fds <= 8,
        "{server_fds} server fds still open after the timeouts"
    );
    server.abort();
}

mod control_socket {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use memweight_proto::ctl::{self, ErrorKind, ErrorReply, Outcome};
    use memweightd::config::ControlConfig;
    use memweightd::server::{self, Limits, Server};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::UnixStream;
    use tokio::sync::mpsc;

    fn limits() -> Limits {
        Limits {
            max_connections: 4,
            root_reserved: 1,
            per_user: 4,
            read_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_millis(500),
            loop_timeout: Duration::from_secs(2),
        }
    }

    /// A server on a temporary socket whose "loop" answers every call with NotReady.
    fn start(dir: &Path) -> std::path::PathBuf {
        let socket = dir.join("ctl.sock");
        let cfg = ControlConfig {
            socket: socket.clone(),
            group: None,
        };
        let server = Server::bind(&cfg).expect("bind").with_limits(limits());
        let (tx, mut rx) = mpsc::channel::<server::Call>(16);
        tokio::spawn(server.serve(tx));
        tokio::spawn(async move {
            while let Some(call) = rx.recv().await {
                let _ = call.reply.send(Outcome::Error(ErrorReply::new(
                    ErrorKind::NotReady,
                    "fake loop",
                )));
            }
        });
        socket
    }

    async fn read_line(s: UnixStream) -> String {
        let mut line = String::new();
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            BufReader::new(s).read_line(&mut line),
        )
        .await;
        line
    }

    async fn status(socket: &Path) -> String {
        let mut s = UnixStream::connect(socket).await.expect("connect");
        s.write_all(ctl::Request::new(ctl::Command::Status).to_line().as_bytes())
            .await
            .expect("send");
        read_line(s).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn control_reply_to_a_client_that_never_reads_is_dropped() {
        // A 16-byte pipe nobody reads from: the reply cannot be written.
        let (ours, _theirs) = tokio::io::duplex(16);
        let started = Instant::now();
        let long = Outcome::Error(ErrorReply::new(ErrorKind::Internal, "x".repeat(4096)));
        let err = server::reply(ours, long, Duration::from_millis(200))
            .await
            .expect_err("nobody reads");
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn control_connections_are_limited_and_idle_ones_time_out() {
        let _serial = super::FD_COUNTING.lock().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = start(dir.path());
        let mut idle = Vec::new();
        // The tests run as root: four shared slots and root's reserved one.
        for _ in 0..5 {
            idle.push(UnixStream::connect(&socket).await.expect("connect"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The sixth is told why and closed at once.
        let busy = read_line(UnixStream::connect(&socket).await.expect("connect")).await;
        let e = ctl::parse_response(busy.trim_end())
            .expect("a response line")
            .expect_err("busy");
        assert!(e.message.contains("busy"), "{}", e.message);
        // The idle ones are answered after the read timeout and closed, freeing their slots.
        for s in idle {
            let line = read_line(s).await;
            assert!(line.contains("no request line within"), "{line:?}");
        }
        let answer = status(&socket).await;
        assert!(answer.contains("fake loop"), "{answer:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn control_socket_fds_stay_bounded_under_1100_idle_clients() {
        let _serial = super::FD_COUNTING.lock().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = start(dir.path());
        let before = super::fd_count();
        let mut idle = Vec::new();
        for _ in 0..1100 {
            match UnixStream::connect(&socket).await {
                Ok(s) => idle.push(s),
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let server_fds = super::fd_count().saturating_sub(before + idle.len());
        assert!(server_fds <= 4 + 1 + 8, "server holds {server_fds} fds");
        drop(idle);
        tokio::time::sleep(Duration::from_millis(700)).await;
        let answer = status(&socket).await;
        assert!(answer.contains("fake loop"), "{answer:?}");
    }
}
