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
//!
//! The rooms:
//!
//! * here: what the loop publishes ([`Published`], [`PublishedRx`]) and the one metric that
//!   lives across scrapes ([`Metrics`]);
//! * `families`: every series the daemon exports, built from one snapshot into a registry
//!   ([`registry`]), and the build info ([`VERSION`], [`COMMIT`]); no text format, no HTTP;
//! * `format`: the text a scrape gets, OpenMetrics or classic ([`negotiate`], [`to_classic`],
//!   [`render`]); it does not know which series there are;
//! * `http`: the endpoint — `/metrics`, `/healthz` ([`health`]), the bounds on its clients
//!   ([`Limits`]), [`serve`] and [`serve_addr`]; it builds no series;
//! * `tests`: the rooms' tests, among them the generator of docs/operations.md's metrics table
//!   (`metrics::tests::docs_list_every_metric`).

mod families;
mod format;
mod http;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tokio::sync::watch;

use crate::controller::{Counters, TickReport};

pub use families::{COMMIT, VERSION, registry};
pub use format::{CLASSIC, Format, OPENMETRICS, negotiate, render, to_classic};
pub use http::{Limits, health, serve, serve_addr};

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
