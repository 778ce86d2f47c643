//! The Prometheus endpoint: `/metrics` and `/healthz` over HTTP/1.
//!
//! The control loop publishes what it saw ([`Published`]: the last [`TickReport`] and the
//! [`Counters`]) on a `tokio::sync::watch` channel after every tick; a scrape builds a fresh
//! `prometheus-client` registry from the latest snapshot, so the series of a cgroup that
//! vanished are simply not there any more. Only the tick-duration histogram lives across
//! scrapes ([`Metrics`]), observed by the loop.
//!
//! The format follows the `Accept` header ([`negotiate`]): OpenMetrics 1.0 when the scraper
//! asks for `application/openmetrics-text` (Prometheus does), else the classic text format
//! 0.0.4, which is what `promtool check metrics` and `curl` read. prometheus-client writes
//! OpenMetrics only; [`to_classic`] turns it into 0.0.4 (counter descriptors named with their
//! `_total` sample, no `# UNIT` or `# EOF` lines).

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::controller::{Counters, TickReport};

/// Content type of the classic text format.
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the control loop publishes after each tick.
#[derive(Debug, Clone)]
pub struct Published {
    /// The tick's report (shared with the controller).
    pub report: Arc<TickReport>,
    /// Counters since start.
    pub counters: Counters,
    /// When it was published.
    pub at: Instant,
    /// The tick interval in force (for `/healthz`).
    pub interval: Duration,
}

/// The receiving side of the channel [`Published`] goes out on.
pub type PublishedRx = watch::Receiver<Option<Arc<Published>>>;

/// Metrics that accumulate across ticks: the tick-duration histogram.
#[derive(Debug, Clone)]
pub struct Metrics {
    tick_duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            // 0.5 ms … 8 s.
            tick_duration: Histogram::new(exponential_buckets(0.0005, 2.0, 15)),
        }
    }
}

impl Metrics {
    /// Records one tick's duration.
    pub fn observe(&self, report: &TickReport) {
        #[allow(clippy::cast_precision_loss)]
        // Microseconds of one tick stay far below 2^52; the histogram is in seconds anyway.
        self.tick_duration
            .observe(report.pool.duration_us as f64 / 1e6);
    }
}

/// The encoding a scraper gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text 0.0.4.
    Classic,
    /// OpenMetrics 1.0 text.
    OpenMetrics,
}

/// Picks the format from an `Accept` header: OpenMetrics when it is listed (with a non-zero
/// `q`), classic otherwise, including when the header is missing.
#[must_use]
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Classic;
    };
    let wants_om = accept.split(',').any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let zero_q = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f64>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        media.eq_ignore_ascii_case("application/openmetrics-text") && !zero_q
    });
    if wants_om {
        Format::OpenMetrics
    } else {
        Format::Classic
    }
}

/// Rewrites prometheus-client's OpenMetrics text as the classic 0.0.4 text format.
#[must_use]
pub fn to_classic(openmetrics: &str) -> String {
    let counters: BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rewritten = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(name) && !name.ends_with("_total") {
                Some(format!("{prefix}{name}_total {tail}"))
            } else if *prefix == "# TYPE " && tail == "unknown" {
                Some(format!("{prefix}{name} untyped"))
            } else {
                None
            }
        });
        out.push_str(rewritten.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

type Labels = Vec<(String, String)>;

/// prometheus-client ends every help text with a period; ours are written as sentences.
fn trim(help: &str) -> &str {
    help.trim_end_matches('.')
}

struct Builder {
    registry: Registry,
}

impl Builder {
    fn gauge(&mut self, name: &str, help: &str, value: i64) {
        let g = Gauge::<i64>::default();
        g.set(value);
        self.registry.register(name, trim(help), g);
    }

    fn gauge_f(&mut self, name: &str, help: &str, value: f64) {
        let g = Gauge::<f64, AtomicU64>::default();
        g.set(value);
        self.registry.register(name, trim(help), g);
    }

    fn counter(&mut self, name: &str, help: &str, by: &str, values: &[(&str, u64)]) {
        let f = Family::<Labels, Counter>::default();
        for (label, v) in values {
            f.get_or_create(&vec![(by.to_owned(), (*label).to_owned())])
                .inc_by(*v);
        }
        self.registry.register(name, trim(help), f);
    }

    fn per_cgroup(&mut self, name: &str, help: &str, rows: &[(Labels, i64)]) {
        let f = Family::<Labels, Gauge>::default();
        for (labels, v) in rows {
            f.get_or_create(labels).set(*v);
        }
        self.registry.register(name, trim(help), f);
    }

    fn per_cgroup_f(&mut self, name: &str, help: &str, rows: &[(Labels, f64)]) {
        let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for (labels, v) in rows {
            f.get_or_create(labels).set(*v);
        }
        self.registry.register(name, trim(help), f);
    }
}

/// A cgroup's labels: `cgroup`, and `container` (its name) when the engine lists one.
fn cgroup_labels(c: &crate::controller::CgroupReport) -> Labels {
    let mut labels = vec![("cgroup".to_owned(), c.cgroup.clone())];
    if let Some(name) = &c.container {
        labels.push(("container".to_owned(), name.clone()));
    }
    labels
}

/// The daemon's version, and the git commit it was built from (`unknown` outside a git
/// checkout; `MEMWEIGHT_GIT_COMMIT` at build time overrides it, see `build.rs`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// See [`VERSION`].
pub const COMMIT: &str = env!("MEMWEIGHT_GIT_COMMIT");

/// Builds the registry for one scrape.
#[must_use]
pub fn registry(snapshot: Option<&Published>, metrics: &Metrics) -> Registry {
    let mut b = Builder {
        registry: Registry::with_prefix("memweight"),
    };
    let info = Family::<Labels, Gauge>::default();
    info.get_or_create(&vec![
        ("version".to_owned(), VERSION.to_owned()),
        ("commit".to_owned(), COMMIT.to_owned()),
    ])
    .set(1);
    b.registry.register(
        "build_info",
        trim("Always 1; the labels say which memweightd runs (version, git commit)."),
        info,
    );
    b.registry.register(
        "tick_duration_seconds",
        "Duration of one control-loop tick (sample, compute, enforce)",
        metrics.tick_duration.clone(),
    );
    let Some(s) = snapshot else {
        b.gauge("up", "1 once the daemon has completed a tick.", 0);
        return b.registry;
    };
    let r = &s.report;
    let c = &s.counters;
    b.gauge("up", "1 once the daemon has completed a tick.", 1);
    b.gauge(
        "managed_cgroups",
        "Cgroups managed at the last tick.",
        i64::try_from(r.cgroups.len()).unwrap_or(i64::MAX),
    );
    b.gauge(
        "enforce",
        "1 when limits are written, 0 in dry-run mode.",
        i64::from(r.pool.enforce),
    );
    b.gauge(
        "pool_capacity_bytes",
        "Pool capacity C shared by the managed cgroups.",
        saturating_i64(r.pool.capacity),
    );
    b.gauge(
        "pool_usage_bytes",
        "TU: total memory usage of the managed cgroups.",
        saturating_i64(r.pool.total_usage),
    );
    b.gauge(
        "pool_weight",
        "TW: total weight of the managed cgroups.",
        saturating_i64(r.pool.total_weight),
    );
    b.gauge(
        "pool_pressure",
        "1 when usage exceeds the pool and memory is water-filled by weight.",
        i64::from(r.pool.pressure),
    );
    b.gauge(
        "pool_overcommitted",
        "1 when the floors alone exceed the pool.",
        i64::from(r.pool.overcommitted),
    );
    b.gauge(
        "pool_psi_cut_bytes",
        "What host memory pressure took off the pool.",
        saturating_i64(r.pool.psi_cut),
    );
    b.gauge(
        "pool_reserve_bytes",
        "MemAvailable the pool leaves free; below it the host is short.",
        saturating_i64(r.pool.reserve),
    );
    b.gauge(
        "pool_guard_bytes",
        "Part of the capacity kept for the memory.high guards above held-back cgroups' targets.",
        saturating_i64(r.pool.guards),
    );
    b.gauge(
        "pool_held",
        "1 when the pool was kept at the last tick's: MemAvailable stayed within the hysteresis.",
        i64::from(r.pool.held),
    );
    b.gauge(
        "host_reclaiming",
        "1 when the kernel's global reclaim (kswapd, direct reclaim) ran since the last tick.",
        i64::from(r.pool.reclaiming),
    );
    b.gauge(
        "pool_enforcing",
        "1 when the split is enforced beyond memory.low (memory.high, memory.reclaim) this tick.",
        i64::from(r.pool.enforcing),
    );
    b.gauge(
        "pool_yielding",
        "kernel capacity: 1 when no managed cgroup is protected this tick, because the host is short and the cgroups beside the managed set stall on memory.",
        i64::from(r.pool.yielding),
    );
    b.gauge_f(
        "outside_stall_percent",
        "kernel capacity: highest share of the last tick a cgroup beside the managed set stalled on memory.",
        r.pool.outside_stall.unwrap_or(0.0),
    );
    b.gauge_f(
        "pool_own_stall_percent",
        "Host memory PSI some avg10 explained by the daemon's own throttling (not counted).",
        r.pool.own_stall,
    );
    b.gauge(
        "host_memory_total_bytes",
        "Host MemTotal.",
        saturating_i64(r.pool.mem_total),
    );
    b.gauge(
        "host_memory_available_bytes",
        "Host MemAvailable.",
        saturating_i64(r.pool.mem_available),
    );
    b.gauge(
        "host_swap_free_bytes",
        "Host SwapFree.",
        saturating_i64(r.pool.swap_free),
    );
    if let Some(v) = r.pool.host_psi_some_avg10 {
        b.gauge_f(
            "host_psi_some_avg10_percent",
            "Host memory pressure (/proc/pressure/memory some avg10), percent.",
            v,
        );
    }
    if let Some(v) = r.pool.host_psi_full_avg10 {
        b.gauge_f(
            "host_psi_full_avg10_percent",
            "Host memory pressure (/proc/pressure/memory full avg10), percent.",
            v,
        );
    }
    b.counter(
        "writes",
        "Control-file writes done, by file.",
        "kind",
        &[
            ("high", c.writes_high),
            ("low", c.writes_low),
            ("reclaim", c.writes_reclaim),
        ],
    );
    b.counter(
        "errors",
        "Errors reading cgroup files, writing limits, and writing original limits back (restore), by kind.",
        "kind",
        &[
            ("read", c.read_errors),
            ("write", c.write_errors),
            ("restore", c.restore_errors),
        ],
    );
    b.counter(
        "reclaim_requested_bytes",
        "Bytes asked of memory.reclaim since start.",
        "kind",
        &[("proactive", c.reclaim_bytes)],
    );
    b.counter(
        "cgroup_lifecycle",
        "Cgroups adopted and released since start.",
        "event",
        &[("adopted", c.adopted), ("released", c.released)],
    );

    let rows = |f: &dyn Fn(&crate::controller::CgroupReport) -> Option<i64>| -> Vec<(Labels, i64)> {
        r.cgroups
            .iter()
            .filter_map(|c| f(c).map(|v| (cgroup_labels(c), v)))
            .collect()
    };
    let rows_f =
        |f: &dyn Fn(&crate::controller::CgroupReport) -> Option<f64>| -> Vec<(Labels, f64)> {
            r.cgroups
                .iter()
                .filter_map(|c| f(c).map(|v| (cgroup_labels(c), v)))
                .collect()
        };
    b.per_cgroup(
        "cgroup_usage_bytes",
        "memory.current.",
        &rows(&|c| Some(saturating_i64(c.usage))),
    );
    b.per_cgroup(
        "cgroup_weight",
        "Effective weight.",
        &rows(&|c| Some(i64::from(c.weight))),
    );
    b.per_cgroup(
        "cgroup_weight_overridden",
        "1 when the weight comes from a runtime override (memweightctl set).",
        &rows(&|c| Some(i64::from(c.overridden))),
    );
    b.per_cgroup(
        "cgroup_expected_bytes",
        "EA = TU x W / TW: the weighted share of the total usage.",
        &rows(&|c| Some(saturating_i64(c.expected))),
    );
    b.per_cgroup(
        "cgroup_exceed_bytes",
        "EX = U - EA: usage above (positive) or below (negative) the weighted share.",
        &rows(&|c| Some(c.exceed)),
    );
    b.per_cgroup(
        "cgroup_target_bytes",
        "Water-filled target.",
        &rows(&|c| Some(saturating_i64(c.target))),
    );
    b.per_cgroup(
        "cgroup_floor_bytes",
        "Floor: memory.high never goes below it (configured min, swap-backed memory swap cannot take, min_floor).",
        &rows(&|c| Some(saturating_i64(c.floor))),
    );
    b.per_cgroup(
        "cgroup_entitlement_bytes",
        "Entitlement: the weighted share of the pool that memory.low protects.",
        &rows(&|c| Some(saturating_i64(c.entitlement))),
    );
    b.per_cgroup(
        "cgroup_memory_high_bytes",
        "memory.high in force; no series while it is max.",
        &rows(&|c| c.high.map(saturating_i64)),
    );
    b.per_cgroup(
        "cgroup_memory_low_bytes",
        "memory.low in force; no series while it is max.",
        &rows(&|c| c.low.map(saturating_i64)),
    );
    b.per_cgroup(
        "cgroup_reclaim_requested_bytes",
        "Bytes asked of memory.reclaim at the last tick.",
        &rows(&|c| Some(saturating_i64(c.reclaim.unwrap_or(0)))),
    );
    b.per_cgroup(
        "cgroup_swap_bytes",
        "memory.swap.current.",
        &rows(&|c| c.swap.map(saturating_i64)),
    );
    b.per_cgroup_f(
        "cgroup_psi_some_avg10_percent",
        "memory.pressure some avg10, percent.",
        &rows_f(&|c| c.psi_some_avg10),
    );
    b.per_cgroup_f(
        "cgroup_psi_full_avg10_percent",
        "memory.pressure full avg10, percent.",
        &rows_f(&|c| c.psi_full_avg10),
    );
    b.per_cgroup(
        "label_clamped",
        "1 for each container label that asks for more than its rule lets labels ask (weight or min clamped, max refused).",
        &r.label_clamps
            .iter()
            .map(|c| {
                let labels = vec![
                    ("cgroup".to_owned(), c.cgroup.clone()),
                    ("container".to_owned(), c.container.clone()),
                    ("label".to_owned(), c.label.clone()),
                ];
                (labels, 1)
            })
            .collect::<Vec<_>>(),
    );
    let events = Family::<Labels, Counter>::default();
    for c in &r.cgroups {
        for (event, v) in [
            ("high", c.events_high),
            ("max", c.events_max),
            ("oom_kill", c.events_oom_kill),
        ] {
            let mut labels = cgroup_labels(c);
            labels.push(("event".to_owned(), event.to_owned()));
            events.get_or_create(&labels).inc_by(v);
        }
    }
    b.registry.register(
        "cgroup_memory_events",
        "memory.events counters (high, max, oom_kill) as the kernel reports them",
        events,
    );
    b.registry
}

/// One scrape's body in `format`.
#[must_use]
pub fn render(snapshot: Option<&Published>, metrics: &Metrics, format: Format) -> String {
    let reg = registry(snapshot, metrics);
    let mut text = String::new();
    if let Err(e) = encode(&mut text, &reg) {
        // Writing into a String only fails if a metric's own encoder does; say so in-band.
        warn!(error = %e, "encoding metrics failed");
        return format!("# encoding metrics failed: {e}\n");
    }
    match format {
        Format::OpenMetrics => text,
        Format::Classic => to_classic(&text),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{CgroupReport, ClampedLabel};

    fn report(paths: &[&str]) -> TickReport {
        TickReport {
            pool: memweight_proto::ctl::Pool {
                tick: 7,
                capacity: 4500 << 20,
                shortfall: 0,
                psi_cut: 0,
                reserve: 0,
                own_stall: 0.0,
                guards: 0,
                held: false,
                reclaiming: false,
                yielding: false,
                outside_stall: None,
                enforcing: false,
                total_usage: 6000 << 20,
                total_weight: 6,
                pressure: true,
                overcommitted: false,
                mem_total: 8 << 30,
                mem_available: 1 << 30,
                swap_free: 0,
                host_psi_some_avg10: Some(12.5),
                host_psi_full_avg10: None,
                enforce: true,
                duration_us: 1500,
            },
            cgroups: paths
                .iter()
                .map(|p| CgroupReport {
                    cgroup: (*p).to_owned(),
                    weight: 2,
                    overridden: false,
                    container: None,
                    source: None,
                    usage: 2000 << 20,
                    expected: 2000 << 20,
                    exceed: -5,
                    target: 1500 << 20,
                    entitlement: 1000 << 20,
                    floor: 16 << 20,
                    ceiling: None,
                    high: None,
                    low: Some(0),
                    swap: Some(4096),
                    psi_some_avg10: Some(1.0),
                    psi_full_avg10: Some(0.5),
                    refaulted: None,
                    events_high: 3,
                    events_max: 0,
                    events_oom_kill: 1,
                    wrote_high: None,
                    wrote_low: None,
                    reclaim: Some(4096),
                    state: memweight_proto::ctl::CgroupState::Ok,
                    reason: "at floor".into(),
                    original_high: None,
                    original_low: None,
                    operator: None,
                })
                .collect(),
            label_clamps: Vec::new(),
        }
    }

    fn snapshot(paths: &[&str]) -> Published {
        Published {
            report: Arc::new(report(paths)),
            counters: Counters {
                writes_high: 4,
                ..Counters::default()
            },
            at: Instant::now(),
            interval: Duration::from_secs(1),
        }
    }

    /// A snapshot in which every series exists: both host PSI values, a `memory.high`, a
    /// container name.
    fn full_snapshot() -> Published {
        let mut r = report(&["machine.slice/libpod-0123.scope"]);
        r.pool.host_psi_full_avg10 = Some(1.5);
        for c in &mut r.cgroups {
            c.high = Some(1 << 30);
            c.container = Some("web".to_owned());
        }
        r.label_clamps.push(ClampedLabel {
            cgroup: "machine.slice/libpod-0123.scope".to_owned(),
            container: "web".to_owned(),
            label: "memweight.weight".to_owned(),
        });
        Published {
            report: Arc::new(r),
            counters: Counters::default(),
            at: Instant::now(),
            interval: Duration::from_secs(1),
        }
    }

    /// The metric table of docs/operations.md as the registry renders it: one row per
    /// family, with its labels (the values of the enumerated ones), type and help text.
    fn doc_table(classic: &str) -> String {
        struct Family {
            kind: String,
            help: String,
            labels: Vec<(String, BTreeSet<String>)>,
        }
        let mut order: Vec<String> = Vec::new();
        let mut families: std::collections::BTreeMap<String, Family> = Default::default();
        for line in classic.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                order.push(name.to_owned());
                families.insert(
                    name.to_owned(),
                    Family {
                        kind: String::new(),
                        help: help.to_owned(),
                        labels: Vec::new(),
                    },
                );
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
                if let Some(f) = families.get_mut(name) {
                    f.kind = kind.to_owned();
                }
            } else if let Some((series, _)) = line.split_once('{') {
                let name = order.last().cloned().unwrap_or_default();
                if series != name {
                    continue; // _bucket, _sum, _count of a histogram
                }
                let Some(f) = families.get_mut(&name) else {
                    continue;
                };
                let body = line.split_once('{').map_or("", |x| x.1);
                let body = body.rsplit_once('}').map_or("", |x| x.0);
                for pair in body.split("\",") {
                    let Some((k, v)) = pair.split_once("=\"") else {
                        continue;
                    };
                    let v = v.trim_end_matches('"').to_owned();
                    match f.labels.iter_mut().find(|(n, _)| n == k) {
                        Some((_, vals)) => {
                            vals.insert(v);
                        }
                        None => f.labels.push((k.to_owned(), BTreeSet::from([v]))),
                    }
                }
            }
        }
        let mut out = String::from("| series | type | meaning |\n| --- | --- | --- |\n");
        for name in &order {
            let f = &families[name];
            let labels: Vec<String> = f
                .labels
                .iter()
                .map(|(k, vals)| match k.as_str() {
                    "cgroup" | "container" | "label" | "version" | "commit" => k.clone(),
                    _ => format!(
                        "{k}=\"{}\"",
                        vals.iter().cloned().collect::<Vec<_>>().join("\\|")
                    ),
                })
                .collect();
            let series = if labels.is_empty() {
                name.clone()
            } else {
                format!("{name}{{{}}}", labels.join(","))
            };
            let _ = std::fmt::Write::write_fmt(
                &mut out,
                format_args!(
                    "| `{series}` | {} | {} |\n",
                    f.kind,
                    f.help.replace('|', "\\|")
                ),
            );
        }
        out
    }

    const TABLE_BEGIN: &str =
        "<!-- metrics table: generated by metrics::tests::docs_list_every_metric -->\n";
    const TABLE_END: &str = "<!-- end of the metrics table -->\n";

    #[test]
    fn docs_list_every_metric() {
        let text = render(Some(&full_snapshot()), &Metrics::default(), Format::Classic);
        let table = doc_table(&text);
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md");
        let doc = std::fs::read_to_string(&path).expect("docs/operations.md");
        let (Some(b), Some(e)) = (doc.find(TABLE_BEGIN), doc.find(TABLE_END)) else {
            panic!("docs/operations.md has no generated metrics table (markers {TABLE_BEGIN:?})");
        };
        let current = &doc[b + TABLE_BEGIN.len()..e];
        if current != table {
            if std::env::var_os("MEMWEIGHT_BLESS").is_some() {
                let new = format!("{}{table}{}", &doc[..b + TABLE_BEGIN.len()], &doc[e..]);
                std::fs::write(&path, new).expect("write docs/operations.md");
                return;
            }
            panic!(
                "docs/operations.md's metrics table is not what /metrics serves; rerun with \
                 MEMWEIGHT_BLESS=1 to write it. Expected:\n{table}"
            );
        }
    }

    #[test]
    fn doc_table_has_a_row_per_family_with_its_labels() {
        let text = render(Some(&full_snapshot()), &Metrics::default(), Format::Classic);
        let table = doc_table(&text);
        for row in [
            "| `memweight_build_info{version,commit}` | gauge | Always 1; the labels say which memweightd runs (version, git commit). |",
            "| `memweight_writes_total{kind=\"high\\|low\\|reclaim\"}` | counter |",
            "| `memweight_tick_duration_seconds` | histogram |",
            "| `memweight_cgroup_usage_bytes{cgroup,container}` | gauge | memory.current. |",
            "| `memweight_cgroup_memory_events_total{cgroup,container,event=\"high\\|max\\|oom_kill\"}` | counter |",
            "| `memweight_pool_reserve_bytes` | gauge |",
        ] {
            assert!(table.contains(row), "missing {row:?} in\n{table}");
        }
        let families = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        assert_eq!(table.lines().count(), families + 2, "{table}");
    }

    #[test]
    fn build_info_and_container_names_are_labels() {
        let text = render(Some(&full_snapshot()), &Metrics::default(), Format::Classic);
        assert!(
            text.contains(&format!(
                "memweight_build_info{{version=\"{VERSION}\",commit=\"{COMMIT}\"}} 1"
            )),
            "{text}"
        );
        assert!(!COMMIT.is_empty());
        assert!(
            text.contains(
                "memweight_cgroup_target_bytes{cgroup=\"machine.slice/libpod-0123.scope\",container=\"web\"} "
            ),
            "{text}"
        );
        // Without a container name there is no container label.
        let plain = render(
            Some(&snapshot(&["lab/a"])),
            &Metrics::default(),
            Format::Classic,
        );
        assert!(
            plain.contains("memweight_cgroup_target_bytes{cgroup=\"lab/a\"} "),
            "{plain}"
        );
        // Before the first tick the build is known too.
        let none = render(None, &Metrics::default(), Format::Classic);
        assert!(none.contains("memweight_build_info{"), "{none}");
    }

    #[test]
    fn a_clamped_label_is_flagged_per_container_and_label() {
        let text = render(Some(&full_snapshot()), &Metrics::default(), Format::Classic);
        assert!(
            text.contains(
                "memweight_label_clamped{cgroup=\"machine.slice/libpod-0123.scope\",\
                 container=\"web\",label=\"memweight.weight\"} 1"
            ),
            "{text}"
        );
        let none = render(
            Some(&snapshot(&["lab/a"])),
            &Metrics::default(),
            Format::Classic,
        );
        assert!(
            !none.contains("memweight_label_clamped{"),
            "no clamp, no series: {none}"
        );
    }

    #[test]
    fn accept_header_picks_the_format() {
        assert_eq!(negotiate(None), Format::Classic);
        assert_eq!(negotiate(Some("text/plain")), Format::Classic);
        assert_eq!(negotiate(Some("*/*")), Format::Classic);
        assert_eq!(
            negotiate(Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            )),
            Format::OpenMetrics
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0, text/plain")),
            Format::Classic
        );
    }

    #[test]
    fn classic_names_counters_by_their_samples() {
        let om = "# HELP x_writes Writes.\n# TYPE x_writes counter\nx_writes_total{kind=\"high\"} 4\n\
                  # HELP x_up Up.\n# TYPE x_up gauge\n# UNIT x_up bytes\nx_up 1\n# EOF\n";
        let classic = to_classic(om);
        assert_eq!(
            classic,
            "# HELP x_writes_total Writes.\n# TYPE x_writes_total counter\n\
             x_writes_total{kind=\"high\"} 4\n# HELP x_up Up.\n# TYPE x_up gauge\nx_up 1\n"
        );
    }

    #[test]
    fn every_series_is_there_and_vanished_cgroups_are_not() {
        let m = Metrics::default();
        let two = snapshot(&["lab/a", "lab/b"]);
        m.observe(&two.report);
        let text = render(Some(&two), &m, Format::Classic);
        for series in [
            "memweight_cgroup_usage_bytes{cgroup=\"lab/a\"} 2097152000",
            "memweight_cgroup_weight{cgroup=\"lab/b\"} 2",
            "memweight_cgroup_expected_bytes{",
            "memweight_cgroup_exceed_bytes{cgroup=\"lab/a\"} -5",
            "memweight_cgroup_target_bytes{",
            "memweight_cgroup_entitlement_bytes{",
            "memweight_cgroup_memory_low_bytes{cgroup=\"lab/a\"} 0",
            "# HELP memweight_writes_total Control-file writes done, by file.\n",
            "memweight_cgroup_reclaim_requested_bytes{cgroup=\"lab/a\"} 4096",
            "memweight_cgroup_psi_some_avg10_percent{",
            "memweight_cgroup_psi_full_avg10_percent{",
            "memweight_cgroup_swap_bytes{",
            "memweight_cgroup_memory_events_total{cgroup=\"lab/a\",event=\"oom_kill\"} 1",
            "memweight_pool_capacity_bytes 4718592000",
            "memweight_pool_usage_bytes ",
            "memweight_pool_weight 6",
            "memweight_host_memory_available_bytes ",
            "memweight_host_psi_some_avg10_percent 12.5",
            "memweight_tick_duration_seconds_bucket{le=\"0.002\"} 1",
            "memweight_tick_duration_seconds_count 1",
            "memweight_writes_total{kind=\"high\"} 4",
            "memweight_errors_total{kind=\"write\"} 0",
            "# TYPE memweight_writes_total counter",
        ] {
            assert!(text.contains(series), "missing {series:?} in\n{text}");
        }
        assert!(!text.contains("# EOF"));
        assert!(
            !text.contains(".."),
            "doubled periods in help texts:\n{text}"
        );
        assert!(
            !text.contains("memweight_cgroup_memory_high_bytes{"),
            "memory.high is max: no series"
        );
        let one = snapshot(&["lab/a"]);
        let text = render(Some(&one), &m, Format::OpenMetrics);
        assert!(text.ends_with("# EOF\n"));
        assert!(text.contains("cgroup=\"lab/a\""));
        assert!(!text.contains("lab/b"), "vanished cgroup still exported");
    }

    #[test]
    fn before_the_first_tick_only_up_and_the_histogram() {
        let text = render(None, &Metrics::default(), Format::Classic);
        assert!(text.contains("memweight_up 0"), "{text}");
        assert!(!text.contains("cgroup_usage"), "{text}");
    }

    #[test]
    fn health_follows_the_ticks() {
        let start = Instant::now();
        assert_eq!(health(None, start, start).0, StatusCode::OK);
        let late = start + Duration::from_secs(31);
        assert_eq!(health(None, late, start).0, StatusCode::SERVICE_UNAVAILABLE);
        let s = snapshot(&["a"]);
        assert_eq!(
            health(Some(&s), s.at + Duration::from_secs(2), start).0,
            StatusCode::OK
        );
        let (code, body) = health(Some(&s), s.at + Duration::from_secs(60), start);
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("stuck"), "{body}");
    }
}
