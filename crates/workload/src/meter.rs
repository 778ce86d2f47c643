//! Per-second accounting and the one-JSON-line-per-second report format.
//!
//! Pure: the caller passes the clock reading and the running operation total, so the
//! arithmetic is tested without sleeping.

use std::fmt::Write as _;

/// What one operation counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Page touches (one word written or read per page).
    Pages,
    /// Bytes written.
    Bytes,
    /// Connections opened.
    Connections,
    /// Files read.
    Files,
    /// Requests answered by a server.
    Requests,
}

impl Unit {
    /// The name used in the report's `unit` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Pages => "pages",
            Unit::Bytes => "bytes",
            Unit::Connections => "connections",
            Unit::Files => "files",
            Unit::Requests => "requests",
        }
    }
}

/// One report interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the program started, at the end of the interval.
    pub t: f64,
    /// Operations completed in the interval.
    pub ops: u64,
    /// `ops` divided by the interval's real length (0 for an empty interval).
    pub ops_per_s: f64,
}

/// Turns a running total of operations into per-interval counts and rates.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    last_t: f64,
    last_total: u64,
}

impl Meter {
    /// A meter whose first interval starts at t = 0 with a zero total.
    pub fn new() -> Meter {
        Meter::default()
    }

    /// Closes the interval ending at `t` seconds, where `total` operations were done so far.
    ///
    /// A total that went backwards counts as 0 operations; a clock that did not advance
    /// gives a rate of 0 rather than infinity or NaN.
    pub fn tick(&mut self, t: f64, total: u64) -> Sample {
        let ops = total.saturating_sub(self.last_total);
        let elapsed = t - self.last_t;
        let ops_per_s = if elapsed > 0.0 && elapsed.is_finite() {
            ops as f64 / elapsed
        } else {
            0.0
        };
        self.last_t = t.max(self.last_t);
        self.last_total = total.max(self.last_total);
        Sample { t, ops, ops_per_s }
    }

    /// Seconds since the program started at the end of the last closed interval.
    pub fn last_t(&self) -> f64 {
        self.last_t
    }
}

/// The report line (without newline): `{"t":..,"ops":..,"ops_per_s":..,"unit":..,"rss":..}`.
pub fn json_line(sample: &Sample, unit: Unit, rss: u64) -> String {
    let mut line = String::with_capacity(96);
    // Writing to a String cannot fail; f64 values are made finite so the JSON stays valid.
    let _ = write!(
        line,
        "{{\"t\":{:.3},\"ops\":{},\"ops_per_s\":{:.1},\"unit\":\"{}\",\"rss\":{}}}",
        finite(sample.t),
        sample.ops,
        finite(sample.ops_per_s),
        unit.as_str(),
        rss
    );
    line
}

fn finite(value: f64) -> f64 {
    if value.is_finite() { value } else { 0.0 }
}

/// Resident set size in bytes from the text of `/proc/self/statm` (second field, in pages).
pub fn rss_from_statm(statm: &str, page_size: u64) -> Option<u64> {
    let resident_pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
    resident_pages.checked_mul(page_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_reports_the_delta_and_its_rate() {
        let mut meter = Meter::new();
        let first = meter.tick(1.0, 500);
        assert_eq!(first.ops, 500);
        assert!((first.ops_per_s - 500.0).abs() < 1e-9);
        let second = meter.tick(2.5, 800);
        assert_eq!(second.ops, 300);
        assert!((second.ops_per_s - 200.0).abs() < 1e-9);
        assert!((meter.last_t() - 2.5).abs() < 1e-12);
    }

    #[test]
    fn idle_interval_reports_zero() {
        let mut meter = Meter::new();
        meter.tick(1.0, 10);
        let idle = meter.tick(2.0, 10);
        assert_eq!(idle.ops, 0);
        assert_eq!(idle.ops_per_s, 0.0);
    }

    #[test]
    fn zero_length_interval_gives_zero_rate_not_nan() {
        let mut meter = Meter::new();
        meter.tick(1.0, 10);
        let same = meter.tick(1.0, 20);
        assert_eq!(same.ops, 10);
        assert_eq!(same.ops_per_s, 0.0);
    }

    #[test]
    fn total_going_backwards_counts_as_zero() {
        let mut meter = Meter::new();
        meter.tick(1.0, 100);
        assert_eq!(meter.tick(2.0, 50).ops, 0);
        assert_eq!(meter.tick(3.0, 150).ops, 50);
    }

    #[test]
    fn json_line_has_the_documented_fields() {
        let sample = Sample {
            t: 1.0004,
            ops: 42,
            ops_per_s: 41.96,
        };
        assert_eq!(
            json_line(&sample, Unit::Pages, 8192),
            r#"{"t":1.000,"ops":42,"ops_per_s":42.0,"unit":"pages","rss":8192}"#
        );
        let bad = Sample {
            t: f64::NAN,
            ops: 0,
            ops_per_s: f64::INFINITY,
        };
        assert_eq!(
            json_line(&bad, Unit::Bytes, 0),
            r#"{"t":0.000,"ops":0,"ops_per_s":0.0,"unit":"bytes","rss":0}"#
        );
    }

    #[test]
    fn statm_parsing() {
        assert_eq!(
            rss_from_statm("1000 250 30 1 0 100 0\n", 4096),
            Some(1_024_000)
        );
        assert_eq!(rss_from_statm("1000", 4096), None);
        assert_eq!(rss_from_statm("", 4096), None);
        assert_eq!(rss_from_statm("1 x 2", 4096), None);
        assert_eq!(rss_from_statm("1 -5 2", 4096), None);
        assert_eq!(rss_from_statm("1 18446744073709551615", 4096), None);
    }
}
