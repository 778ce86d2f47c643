//! Hostile local input against the daemon's two listeners (issue 10): idle connections by the
//! thousand on the metrics endpoint and on the control socket must not exhaust the daemon's
//! file descriptors, hang its replies or starve its answers.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use memweightd::metrics::{self, Limits, Metrics};
use tokio::sync::watch;

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
