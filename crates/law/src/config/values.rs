//! The value types a key may hold, as written in the file and parsed: [`Amount`] (bytes or a
//! percentage), [`Reserve`] (`"watermarks"` or an amount), [`Interval`] (a duration); with
//! [`parse_amount`] and [`parse_interval`]. Parsing never panics.
//!
//! Not here: which key holds which (`sections`), the range a key accepts (`validate`).

use std::fmt;
use std::time::Duration;

use memweight_proto::size::Size;
use serde::{Deserialize, Deserializer};

/// An amount that is either a byte size or a percentage of something (MemTotal, usage).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// Bytes.
    Bytes(u64),
    /// Percent, `0.0..=100.0`.
    Percent(f64),
}

impl Amount {
    /// Resolves against `whole` (for a percentage), rounding down.
    #[must_use]
    pub fn of(self, whole: u64) -> u64 {
        match self {
            Amount::Bytes(b) => b,
            Amount::Percent(p) => {
                // Percent is validated to 0..=100 and carried in hundredths of a percent, so
                // the product fits in u128 and the result is at most `whole`.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                // Rounded and clamped to 0..=10000 first, so the cast is exact.
                let basis_points = (p * 100.0).round().clamp(0.0, 10_000.0) as u128;
                u64::try_from(u128::from(whole) * basis_points / 10_000).unwrap_or(whole)
            }
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amount::Bytes(b) => write!(f, "{b}"),
            Amount::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// An amount as written: a number of bytes or a string (`"80%"`, `"512M"`, or a keyword).
#[derive(Deserialize)]
#[serde(untagged)]
enum RawAmount {
    Int(i64),
    Str(String),
}

impl RawAmount {
    fn amount(self) -> Result<Amount, String> {
        match self {
            RawAmount::Int(i) => u64::try_from(i)
                .map(Amount::Bytes)
                .map_err(|_| format!("size must not be negative, got {i}")),
            RawAmount::Str(s) => parse_amount(&s),
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawAmount::deserialize(d)?
            .amount()
            .map_err(serde::de::Error::custom)
    }
}

/// `capacity.reserve`: the MemAvailable the pool leaves free; below it the host is short.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reserve {
    /// `"watermarks"` (the default): the width of the kernel's own reclaim band, Σ (`high` −
    /// `min`) over every zone in `/proc/zoneinfo`, which `vm.watermark_scale_factor` and
    /// `vm.min_free_kbytes` set. MemAvailable already leaves out free memory up to the `high`
    /// watermarks; once it is within this band of zero, free memory is about to fall to `low`,
    /// where kswapd starts reclaiming. A shortage, as the kernel sees it.
    Watermarks,
    /// A fixed size, or a percentage of MemTotal.
    Amount(Amount),
}

impl fmt::Display for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reserve::Watermarks => f.write_str("watermarks"),
            Reserve::Amount(a) => a.fmt(f),
        }
    }
}

impl<'de> Deserialize<'de> for Reserve {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match RawAmount::deserialize(d)? {
            RawAmount::Str(s) if s.trim() == "watermarks" => Ok(Reserve::Watermarks),
            raw => raw.amount().map(Reserve::Amount).map_err(|e| {
                serde::de::Error::custom(format!("{e} (or \"watermarks\", the default)"))
            }),
        }
    }
}

/// Parses `"80%"`, `"512M"`, `"1.5G"` or `"4096"`.
pub fn parse_amount(s: &str) -> Result<Amount, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("expected a percentage like \"80%\", got {s:?}"))?;
        if !(0.0..=100.0).contains(&v) {
            return Err(format!("percentage must be between 0% and 100%, got {s:?}"));
        }
        return Ok(Amount::Percent(v));
    }
    t.parse::<Size>()
        .map(|sz| Amount::Bytes(sz.bytes()))
        .map_err(|e| e.to_string())
}

/// A duration written as `"1s"`, `"500ms"`, `"2m"` or a number of seconds.
///
/// Parsing never panics: NaN, infinities, negative values and values beyond what a
/// [`Duration`] holds are errors; the range a key accepts is checked by
/// [`Config::validate`](super::Config::validate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(pub Duration);

/// `value` seconds as a [`Duration`], or a message quoting `written`.
fn seconds(value: f64, written: &str) -> Result<Duration, String> {
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "expected a duration like \"1s\", \"500ms\" or \"2m\", got {written:?}"
        ));
    }
    Duration::try_from_secs_f64(value).map_err(|_| {
        format!("duration {written:?} is far too long; write something like \"1s\" or \"500ms\"")
    })
}

/// Parses `"1s"`, `"500ms"`, `"2m"` or `"1.5"` (seconds).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("expected a duration like \"1s\", \"500ms\" or \"2m\", got {s:?}"))?;
    seconds(v * scale, s)
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Float(f64),
            Str(String),
        }
        let dur = match Raw::deserialize(d)? {
            Raw::Int(i) => Ok(Duration::from_secs(i)),
            Raw::Float(f) => seconds(f, &f.to_string()),
            Raw::Str(s) => parse_interval(&s),
        };
        dur.map(Interval).map_err(serde::de::Error::custom)
    }
}
