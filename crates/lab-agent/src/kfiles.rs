//! Pure parsers for the kernel files the agent samples: `&str` in, typed value out, `None` on
//! anything malformed (a sample then shows the field as missing rather than crashing the run).

use crate::scenario::Limit;

/// A single-number file such as `memory.current`.
pub fn single_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A limit file such as `memory.high`: a number or `max`.
pub fn limit(text: &str) -> Option<Limit> {
    match text.trim() {
        "max" => Some(Limit::Max),
        other => other.parse().ok().map(Limit::Bytes),
    }
}

/// `avg10` of the `some` and `full` lines of a PSI file (`memory.pressure`,
/// `/proc/pressure/memory`).
pub fn psi_avg10(text: &str) -> (Option<f64>, Option<f64>) {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let slot = match words.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            _ => continue,
        };
        *slot = words
            .filter_map(|w| w.strip_prefix("avg10="))
            .find_map(|v| v.parse::<f64>().ok());
    }
    (some, full)
}

/// One key of a flat keyed file such as `memory.events` (`key value` per line).
pub fn flat_keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some(key))
            .then(|| words.next())
            .flatten()
            .and_then(|v| v.parse().ok())
    })
}

/// One field of `/proc/meminfo`, in bytes (`MemAvailable:  1234 kB`).
pub fn meminfo(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        let mut words = rest.split_whitespace();
        let n: u64 = words.next()?.parse().ok()?;
        match words.next() {
            Some("kB") => n.checked_mul(1024),
            None => Some(n),
            Some(_) => None,
        }
    })
}

/// `ops_per_s` of one line of the workload's JSON output.
pub fn workload_ops_per_s(line: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    v.get("ops_per_s")?.as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_limit() {
        assert_eq!(single_u64("4096\n"), Some(4096));
        assert_eq!(single_u64("max\n"), None);
        assert_eq!(single_u64(""), None);
        assert_eq!(limit("max\n"), Some(Limit::Max));
        assert_eq!(limit("1048576\n"), Some(Limit::Bytes(1 << 20)));
        assert_eq!(limit("-1"), None);
    }

    #[test]
    fn psi() {
        let text = "some avg10=12.50 avg60=3.00 avg300=1.00 total=5\n\
                    full avg10=2.25 avg60=0.00 avg300=0.00 total=1\n";
        assert_eq!(psi_avg10(text), (Some(12.5), Some(2.25)));
        assert_eq!(psi_avg10("some avg10=x\n"), (None, None));
        assert_eq!(psi_avg10(""), (None, None));
    }

    #[test]
    fn events_and_meminfo() {
        let ev = "low 0\nhigh 17\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(flat_keyed(ev, "high"), Some(17));
        assert_eq!(flat_keyed(ev, "oom_kill"), Some(1));
        assert_eq!(flat_keyed(ev, "absent"), None);
        assert_eq!(flat_keyed("high\n", "high"), None);
        let mi = "MemTotal:  1000 kB\nMemAvailable:     512 kB\nHugePages_Total:  0\n";
        assert_eq!(meminfo(mi, "MemAvailable"), Some(512 * 1024));
        assert_eq!(meminfo(mi, "HugePages_Total"), Some(0));
        assert_eq!(meminfo(mi, "Mem"), None);
    }

    #[test]
    fn workload_line() {
        let line = r#"{"t":1.0,"ops":10,"ops_per_s":1500.5,"unit":"pages","rss":1}"#;
        assert_eq!(workload_ops_per_s(line), Some(1500.5));
        assert_eq!(workload_ops_per_s("not json"), None);
        assert_eq!(workload_ops_per_s("{}"), None);
    }
}
