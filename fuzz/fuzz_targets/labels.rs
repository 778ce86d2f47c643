//! Container labels: whoever runs a container or builds its image writes them. One label a
//! line (`name=value`, the value may hold anything but a newline); they are parsed, bounded by
//! rules from the most to the least permissive, and logged, and the bounds must hold.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use memweightd::config::{LabelBounds, Settings};
use memweightd::labels::{bound, parse_labels};
use memweightd::logging::{UNTRUSTED_MAX_CHARS, untrusted};

fuzz_target!(|text: &str| {
    let labels: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for prefix in ["memweight.", "mw/", ""] {
        let (asked, errors) = parse_labels(&labels, prefix);
        for e in &errors {
            let shown = untrusted(&e.value);
            assert!(!shown.chars().any(char::is_control), "{shown:?}");
            assert!(shown.len() <= UNTRUSTED_MAX_CHARS * 10 + 40, "{shown:?}");
        }
        for (settings, bounds) in rules() {
            let out = bound(settings, bounds, asked, prefix);
            let s = out.settings;
            assert!(s.weight <= bounds.weight.max(settings.weight), "{s:?}");
            assert!(s.min <= bounds.min.max(settings.min), "{s:?}");
            if let (Some(rule_max), false) = (settings.max, bounds.max_may_rise) {
                assert!(s.max.is_some_and(|m| m <= rule_max), "{s:?}");
            }
            assert!(out.clamps.iter().all(|c| c.asked > c.applied), "{out:?}");
            assert!(out.clamps.len() <= 3);
        }
    }
});

/// Rules at the edges: the smallest and largest weights, no floor and the largest, no
/// ceiling, a zero and the largest ceiling, with default and raised bounds.
fn rules() -> Vec<(Settings, LabelBounds)> {
    let mut out = Vec::new();
    for (weight, label_weight) in [(1, 1), (100, 100), (100, 10_000), (10_000, 10_000)] {
        for (min, label_min) in [(0, 0), (1 << 30, 1 << 30), (0, u64::MAX)] {
            for max in [None, Some(0), Some(4 << 30), Some(u64::MAX)] {
                for max_may_rise in [false, true] {
                    out.push((
                        Settings { weight, min, max },
                        LabelBounds {
                            weight: label_weight,
                            min: label_min,
                            max_may_rise,
                        },
                    ));
                }
            }
        }
    }
    out
}
