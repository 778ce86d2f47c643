//! The HTTP/1 endpoint: `/metrics` and `/healthz`, with bounds on its clients so that no
//! local user can take the daemon's file descriptors or starve the loop.
//!
//! Holds [`health`], the routing, [`Limits`], [`serve`] and [`serve_addr`]. It builds no
//! series (`families`) and writes no text format (`format`): a scrape renders the latest
//! published snapshot.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use super::format::{CLASSIC, Format, OPENMETRICS, negotiate, render};
use super::{Metrics, Published, PublishedRx};

/// `/healthz`: healthy while ticks keep coming (within 3 intervals, at least 10 s), and for
/// the first 30 s before the first tick.
#[must_use]
pub fn health(
    snapshot: Option<&Published>,
    now: Instant,
    started: Instant,
) -> (StatusCode, String) {
    match snapshot {
        None if now.duration_since(started) < Duration::from_secs(30) => {
            (StatusCode::OK, "starting\n".into())
        }
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "no tick completed since start; see the daemon's log\n".into(),
        ),
        Some(s) => {
            let age = now.duration_since(s.at);
            let limit = (s.interval * 3).max(Duration::from_secs(10));
            if age <= limit {
                (StatusCode::OK, format!("ok: tick {}\n", s.report.pool.tick))
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "last tick {} was {:.0} s ago; the control loop is stuck\n",
                        s.report.pool.tick,
                        age.as_secs_f64()
                    ),
                )
            }
        }
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn route(
    req: &Request<Incoming>,
    snapshots: &PublishedRx,
    metrics: &Metrics,
    started: Instant,
) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "only GET and HEAD\n".into(),
        );
    }
    let snap = snapshots.borrow().clone();
    match req.uri().path() {
        "/metrics" => {
            let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
            let format = negotiate(accept);
            let body = render(snap.as_deref(), metrics, format);
            let ct = match format {
                Format::Classic => CLASSIC,
                Format::OpenMetrics => OPENMETRICS,
            };
            respond(StatusCode::OK, ct, body)
        }
        "/healthz" => {
            let (status, body) = health(snap.as_deref(), Instant::now(), started);
            respond(status, "text/plain; charset=utf-8", body)
        }
        _ => respond(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found; try /metrics or /healthz\n".into(),
        ),
    }
}

/// Bounds on the endpoint's clients, so that no number of idle or slow connections (any local
/// user can open them) can exhaust the daemon's file descriptors or starve the control loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; further ones are accepted and closed at once.
    pub max_connections: usize,
    /// Time a client has to send a complete request header (each request on a kept-alive
    /// connection included).
    pub header_timeout: Duration,
    /// Total lifetime of one connection, however busy.
    pub connection_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            header_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(30),
        }
    }
}

/// Binds `addr` and serves on it until the process ends. A failed bind (port in use, or an
/// address that is not up yet, like 127.0.0.1 before `lo` is up in a bare initramfs) is logged
/// once as a warning and retried every 5 s: metrics never stop the daemon from managing memory.
pub async fn serve_addr(addr: std::net::SocketAddr, snapshots: PublishedRx, metrics: Metrics) {
    let mut warned = false;
    let listener = loop {
        match TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(e) => {
                if !warned {
                    warn!(listen = %addr, error = %e,
                        "cannot open the metrics endpoint; retrying every 5 s (set [metrics] \
                         listen to a free address, or enabled = false)");
                    warned = true;
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    };
    tracing::info!(listen = %addr, "metrics endpoint listening on /metrics and /healthz");
    serve(listener, snapshots, metrics, Limits::default()).await;
}

/// Serves `/metrics` and `/healthz` on `listener` until the process ends, within `limits`.
pub async fn serve(
    listener: TcpListener,
    snapshots: PublishedRx,
    metrics: Metrics,
    limits: Limits,
) {
    let started = Instant::now();
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut refused: u64 = 0;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE/ENFILE: the pending connection stays in the backlog; wait for fds.
                warn!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Closing at once keeps the fd count bounded; the client sees a reset.
            drop(stream);
            refused += 1;
            if refused.is_power_of_two() {
                warn!(%peer, refused, max = limits.max_connections,
                    "metrics endpoint busy: connection refused (too many open connections)");
            }
            continue;
        };
        let snapshots = snapshots.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let svc = service_fn(move |req: Request<Incoming>| {
                let resp = route(&req, &snapshots, &metrics, started);
                async move { Ok::<_, Infallible>(resp) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(64 * 1024)
                .serve_connection(TokioIo::new(stream), svc);
            match tokio::time::timeout(limits.connection_timeout, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => debug!(%peer, error = %e, "metrics connection ended with an error"),
                Err(_) => debug!(%peer, "metrics connection closed: time limit reached"),
            }
        });
    }
}
