//! The text a scrape gets: OpenMetrics 1.0 or the classic 0.0.4 format, picked from the
//! `Accept` header, and one scrape's body rendered in it.
//!
//! Holds the content types, [`negotiate`], [`to_classic`] and [`render`]. Which series there
//! are is `families`' business; serving them over HTTP is `http`'s.

use std::collections::BTreeSet;

use prometheus_client::encoding::text::encode;
use tracing::warn;

use super::families::registry;
use super::{Metrics, Published};

/// Content type of the classic text format.
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
