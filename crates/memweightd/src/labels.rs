//! What a container's `memweight.*` labels ask for, and what its rule lets them have.
//!
//! Labels are requests, not settings: whoever runs a container or builds its image (a
//! Dockerfile `LABEL` is inherited by every container of the image) sets them, so each
//! `[[cgroup]]` rule bounds them ([`LabelBounds`]). By default a label may ask for no more
//! than its rule gives: a weight up to the rule's `weight`, a min up to the rule's `min`, a max
//! that only lowers the rule's. More is clamped to the bound (weight, min) or refused (max),
//! and each such label is reported as a [`LabelClamp`] (`explain`, the log once, the
//! `memweight_label_clamped` metric).
//!
//! Both steps are pure, `&str` in, values out, and never panic ([`parse_labels`],
//! [`bound`]); `fuzz/fuzz_targets/labels.rs` drives them with arbitrary labels and checks
//! that the bounds hold.

use std::collections::BTreeMap;

use memweight_proto::ctl::{LabelClamp, LabelField, LabelValues};
use memweight_proto::size::Size;

use crate::config::{LabelBounds, Settings};

/// A label whose value was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelError {
    /// The full label name, e.g. `memweight.weight`.
    pub label: String,
    /// Its value as given.
    pub value: String,
    /// What is accepted instead.
    pub accepted: String,
}

/// Reads `<prefix>weight` (`1..=10000`), `<prefix>min` and `<prefix>max` (sizes like `"1G"`).
/// Invalid values are left out of the result and reported; a `max` below the `min` drops both.
#[must_use]
pub fn parse_labels(
    labels: &BTreeMap<String, String>,
    prefix: &str,
) -> (LabelValues, Vec<LabelError>) {
    let mut out = LabelValues::default();
    let mut errors = Vec::new();
    let size_form = "a size like \"256M\" or \"1G\" (K, M, G, T = KiB, MiB, GiB, TiB)";
    let mut bad = |key: &str, value: &str, accepted: &str| {
        errors.push(LabelError {
            label: format!("{prefix}{key}"),
            value: value.to_owned(),
            accepted: accepted.to_owned(),
        });
    };
    if let Some(v) = labels.get(&format!("{prefix}weight")) {
        match memweight_policy::parse_weight(v) {
            Ok(w) => out.weight = Some(w),
            Err(_) => bad(
                "weight",
                v,
                &format!(
                    "{}, e.g. {prefix}weight=200",
                    memweight_policy::accepted_weights()
                ),
            ),
        }
    }
    for (key, slot) in [("min", &mut out.min), ("max", &mut out.max)] {
        if let Some(v) = labels.get(&format!("{prefix}{key}")) {
            match v.parse::<Size>() {
                Ok(s) => *slot = Some(s.bytes()),
                Err(_) => bad(key, v, size_form),
            }
        }
    }
    if let (Some(lo), Some(hi)) = (out.min, out.max)
        && hi < lo
    {
        bad(
            "max",
            &labels
                .get(&format!("{prefix}max"))
                .cloned()
                .unwrap_or_default(),
            &format!("a ceiling at least {prefix}min ({lo} bytes); both are ignored"),
        );
        out.min = None;
        out.max = None;
    }
    (out, errors)
}

/// A rule's settings with its container's labels applied within the rule's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounded {
    /// What applies (before any runtime override).
    pub settings: Settings,
    /// The labels the bounds did not let through as asked, in the order weight, min, max.
    pub clamps: Vec<LabelClamp>,
}

/// Applies what the labels ask (`asked`, from [`parse_labels`]) to the rule's `settings`,
/// within `bounds`: a weight above `bounds.weight` and a min above `bounds.min` are clamped to
/// the bound; a max above the rule's max is refused (the rule's max stays) unless
/// `bounds.max_may_rise`. A weight, min or max below the bound always applies: asking for
/// less than the rule gives takes nothing from the other cgroups. `prefix` names the labels
/// in the clamps.
#[must_use]
pub fn bound(settings: Settings, bounds: LabelBounds, asked: LabelValues, prefix: &str) -> Bounded {
    let mut s = settings;
    let mut clamps = Vec::new();
    let mut clamp = |field: LabelField, key: &str, asked: u64, applied: u64| {
        clamps.push(LabelClamp {
            label: format!("{prefix}{key}"),
            field,
            asked,
            applied,
        });
    };
    if let Some(w) = asked.weight {
        s.weight = w.min(bounds.weight);
        if w > bounds.weight {
            clamp(
                LabelField::Weight,
                "weight",
                u64::from(w),
                u64::from(bounds.weight),
            );
        }
    }
    if let Some(m) = asked.min {
        s.min = m.min(bounds.min);
        if m > bounds.min {
            clamp(LabelField::Min, "min", m, bounds.min);
        }
    }
    if let Some(x) = asked.max {
        match settings.max {
            Some(rule_max) if x > rule_max && !bounds.max_may_rise => {
                clamp(LabelField::Max, "max", x, rule_max);
            }
            _ => s.max = Some(x),
        }
    }
    Bounded {
        settings: s,
        clamps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const GIB: u64 = 1 << 30;

    /// A rule with the default bounds: its own weight and min.
    fn rule(weight: u32, min: u64, max: Option<u64>) -> (Settings, LabelBounds) {
        (
            Settings { weight, min, max },
            LabelBounds {
                weight,
                min,
                max_may_rise: false,
            },
        )
    }

    fn ask(weight: Option<u32>, min: Option<u64>, max: Option<u64>) -> LabelValues {
        LabelValues { weight, min, max }
    }

    #[test]
    fn labels_parse_or_are_reported() {
        let (v, errs) = parse_labels(
            &labels(&[
                ("memweight.weight", " 250 "),
                ("memweight.min", "256M"),
                ("memweight.max", "1G"),
                ("other", "x"),
            ]),
            "memweight.",
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            v,
            LabelValues {
                weight: Some(250),
                min: Some(256 << 20),
                max: Some(1 << 30)
            }
        );
        let (v, errs) = parse_labels(
            &labels(&[
                ("memweight.weight", "0"),
                ("memweight.min", "lots"),
                ("memweight.max", "2G"),
            ]),
            "memweight.",
        );
        assert_eq!(
            v,
            LabelValues {
                weight: None,
                min: None,
                max: Some(2 << 30)
            }
        );
        let names: Vec<&str> = errs.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(names, ["memweight.weight", "memweight.min"]);
        assert!(errs[0].accepted.contains("1..=10000"), "{errs:?}");
        assert!(errs[1].accepted.contains("\"1G\""), "{errs:?}");
        for bad in ["10001", "-1", "1.5", "", "2e3", "99999999999"] {
            let (v, errs) = parse_labels(&labels(&[("memweight.weight", bad)]), "memweight.");
            assert_eq!((v.weight, errs.len()), (None, 1), "{bad:?}");
        }
        let (v, errs) = parse_labels(
            &labels(&[("memweight.min", "2G"), ("memweight.max", "1G")]),
            "memweight.",
        );
        assert_eq!((v.min, v.max, errs.len()), (None, None, 1));
        let (v, errs) = parse_labels(&labels(&[("mw/weight", "7")]), "mw/");
        assert_eq!((v.weight, errs.len()), (Some(7), 0));
    }

    /// The issue-23 reproduction: `--label memweight.weight=10000 --label memweight.min=1T`
    /// under the shipped rule kept its whole working set while its neighbours fell to 46 %.
    #[test]
    fn regression_hostile_labels_get_no_more_than_the_rule_gives() {
        let (s, b) = rule(100, 0, None);
        let out = bound(s, b, ask(Some(10_000), Some(1 << 40), None), "memweight.");
        assert_eq!(out.settings, s, "the rule's own values");
        assert_eq!(
            out.clamps,
            vec![
                LabelClamp {
                    label: "memweight.weight".into(),
                    field: LabelField::Weight,
                    asked: 10_000,
                    applied: 100,
                },
                LabelClamp {
                    label: "memweight.min".into(),
                    field: LabelField::Min,
                    asked: 1 << 40,
                    applied: 0,
                },
            ]
        );
    }

    #[test]
    fn weight_above_the_bound_is_clamped_below_it_applies() {
        let (s, mut b) = rule(100, 0, None);
        b.weight = 400;
        let out = bound(s, b, ask(Some(1000), None, None), "memweight.");
        assert_eq!(out.settings.weight, 400);
        assert_eq!(out.clamps.len(), 1);
        for w in [1, 99, 100, 400] {
            let out = bound(s, b, ask(Some(w), None, None), "memweight.");
            assert_eq!((out.settings.weight, out.clamps.len()), (w, 0), "{w}");
        }
    }

    #[test]
    fn min_above_the_bound_is_clamped_to_it() {
        let (s, b) = rule(100, GIB, None);
        let out = bound(s, b, ask(None, Some(2 * GIB), None), "mw/");
        assert_eq!(
            out.settings.min, GIB,
            "the rule's own min is the default bound"
        );
        assert_eq!(out.clamps[0].label, "mw/min");
        assert_eq!((out.clamps[0].asked, out.clamps[0].applied), (2 * GIB, GIB));
        let out = bound(s, b, ask(None, Some(GIB / 2), None), "mw/");
        assert_eq!(
            (out.settings.min, out.clamps.len()),
            (GIB / 2, 0),
            "lower is fine"
        );
        let raised = LabelBounds { min: 4 * GIB, ..b };
        let out = bound(s, raised, ask(None, Some(2 * GIB), None), "mw/");
        assert_eq!(
            (out.settings.min, out.clamps.len()),
            (2 * GIB, 0),
            "raised bound"
        );
    }

    #[test]
    fn max_may_only_lower_the_rules_unless_allowed_to_rise() {
        let (s, b) = rule(100, 0, Some(4 * GIB));
        let out = bound(s, b, ask(None, None, Some(8 * GIB)), "memweight.");
        assert_eq!(
            out.settings.max,
            Some(4 * GIB),
            "refused: the rule's max stays"
        );
        assert_eq!(
            out.clamps,
            vec![LabelClamp {
                label: "memweight.max".into(),
                field: LabelField::Max,
                asked: 8 * GIB,
                applied: 4 * GIB,
            }]
        );
        let out = bound(s, b, ask(None, None, Some(2 * GIB)), "memweight.");
        assert_eq!((out.settings.max, out.clamps.len()), (Some(2 * GIB), 0));
        let rising = LabelBounds {
            max_may_rise: true,
            ..b
        };
        let out = bound(s, rising, ask(None, None, Some(8 * GIB)), "memweight.");
        assert_eq!((out.settings.max, out.clamps.len()), (Some(8 * GIB), 0));
        // A rule without a max: any label max lowers the ceiling from none.
        let (s, b) = rule(100, 0, None);
        let out = bound(s, b, ask(None, None, Some(GIB)), "memweight.");
        assert_eq!((out.settings.max, out.clamps.len()), (Some(GIB), 0));
    }

    #[test]
    fn no_labels_leave_the_rule_as_it_is() {
        let (s, b) = rule(300, GIB, Some(2 * GIB));
        assert_eq!(
            bound(s, b, LabelValues::default(), "memweight."),
            Bounded {
                settings: s,
                clamps: Vec::new()
            }
        );
    }
}
