//! The `[[cgroup]]` rules checked (weights, min against max, label bounds, exactly one of
//! `path` and `glob`, no two exact paths nesting) and compiled into [`Rules`]: what each
//! cgroup gets ([`Settings`]), what its containers' labels may ask ([`LabelBounds`]), and how
//! deep discovery walks.
//!
//! Not here: the rule as written (`sections`' [`super::CgroupRule`]), the other sections'
//! checks (`validate`).

use std::path::Path;

use globset::{Glob, GlobMatcher};
use memweight_policy::check_weight;
use memweight_proto::cgroup_path;
use memweight_proto::size::Size;

use super::{Config, ConfigError, invalid_in};

/// What a rule resolves to for one cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Weight.
    pub weight: u32,
    /// Configured floor in bytes (0 when none).
    pub min: u64,
    /// Configured ceiling in bytes.
    pub max: Option<u64>,
}

/// What a rule lets its containers' labels ask for: labels are requests, and the operator
/// bounds them per rule (`label_weight_max`, `label_min_max`, `label_max_may_rise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelBounds {
    /// The largest weight a label may ask for.
    pub weight: u32,
    /// The largest floor a label may ask for, in bytes.
    pub min: u64,
    /// A label's max may rise above the rule's max.
    pub max_may_rise: bool,
}

/// One validated rule: its `path` or `glob` as written (normalised), what it gives the cgroups
/// it names, and what their containers' labels may ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The rule's `path` or `glob`.
    pub name: String,
    /// Weight, floor and ceiling.
    pub settings: Settings,
    /// The bounds on container labels.
    pub labels: LabelBounds,
}

/// A validated config with compiled globs.
#[derive(Debug, Clone)]
pub struct Rules {
    exact: Vec<Rule>,
    globs: Vec<(GlobMatcher, Rule)>,
    depth: usize,
}

impl Rules {
    /// No rules: nothing is managed (`memweightd --restore`).
    #[must_use]
    pub fn none() -> Rules {
        Rules {
            exact: Vec::new(),
            globs: Vec::new(),
            depth: 0,
        }
    }
}

impl Rules {
    /// The settings for the cgroup at `rel`, if a rule names it.
    #[must_use]
    pub fn settings_for(&self, rel: &str) -> Option<Settings> {
        self.rule_for(rel).map(|r| r.settings)
    }

    /// The first rule that names `rel`.
    #[must_use]
    pub fn rule_for(&self, rel: &str) -> Option<&Rule> {
        if let Some(r) = self.exact.iter().find(|r| r.name == rel) {
            return Some(r);
        }
        self.globs
            .iter()
            .find(|(g, _)| g.is_match(rel))
            .map(|(_, r)| r)
    }

    /// How deep below the root discovery must look.
    #[must_use]
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The exact paths, in the order written.
    pub fn exact_paths(&self) -> impl Iterator<Item = &str> {
        self.exact.iter().map(|r| r.name.as_str())
    }
}

impl Config {
    /// The `[[cgroup]]` rules, checked and compiled.
    pub(super) fn rules(&self, path: &Path) -> Result<Rules, ConfigError> {
        let invalid = invalid_in(path);
        let mut exact: Vec<Rule> = Vec::new();
        let mut globs = Vec::new();
        let mut depth = 0;
        for (i, rule) in self.cgroup.iter().enumerate() {
            let field = |k: &str| format!("cgroup[{i}].{k}");
            check_weight(u64::from(rule.weight))
                .map_err(|e| invalid(field("weight"), e.to_string()))?;
            let settings = Settings {
                weight: rule.weight,
                min: rule.min.map_or(0, Size::bytes),
                max: rule.max.map(Size::bytes),
            };
            if let Some(max) = settings.max
                && max < settings.min
            {
                return Err(invalid(
                    field("max"),
                    format!("max ({max} bytes) is below min ({} bytes)", settings.min),
                ));
            }
            let labels = LabelBounds {
                weight: rule.label_weight_max.unwrap_or(rule.weight),
                min: rule.label_min_max.map_or(settings.min, Size::bytes),
                max_may_rise: rule.label_max_may_rise,
            };
            check_weight(u64::from(labels.weight))
                .map_err(|e| invalid(field("label_weight_max"), e.to_string()))?;
            if labels.weight < settings.weight {
                return Err(invalid(
                    field("label_weight_max"),
                    format!(
                        "{} is below the rule's weight ({}): a label may always ask for less \
                         than the rule gives; label_weight_max only raises what it may ask",
                        labels.weight, settings.weight
                    ),
                ));
            }
            if labels.min < settings.min {
                return Err(invalid(
                    field("label_min_max"),
                    format!(
                        "{} bytes is below the rule's min ({} bytes): label_min_max only raises \
                         what a label may ask",
                        labels.min, settings.min
                    ),
                ));
            }
            match (&rule.path, &rule.glob) {
                (Some(p), None) => {
                    let p = cgroup_path::normalize(p)
                        .map_err(|e| invalid(field("path"), e.to_string()))?;
                    if exact.iter().any(|r: &Rule| r.name == p) {
                        return Err(invalid(field("path"), format!("{p:?} is listed twice")));
                    }
                    if let Some(q) = exact
                        .iter()
                        .map(|r| r.name.as_str())
                        .find(|q| nests(q, &p) || nests(&p, q))
                    {
                        return Err(invalid(
                            field("path"),
                            format!(
                                "{p:?} and {q:?} nest; managed cgroups must not contain each other \
                                 (manage the leaves, or only the parent)"
                            ),
                        ));
                    }
                    depth = depth.max(p.split('/').count());
                    exact.push(Rule {
                        name: p,
                        settings,
                        labels,
                    });
                }
                (None, Some(g)) => {
                    let g = cgroup_path::normalize(g)
                        .map_err(|e| invalid(field("glob"), e.to_string()))?;
                    let matcher = globset::GlobBuilder::new(&g)
                        .literal_separator(true)
                        .build()
                        .map(|g: Glob| g.compile_matcher())
                        .map_err(|e| invalid(field("glob"), e.to_string()))?;
                    depth = depth.max(if g.contains("**") {
                        16
                    } else {
                        g.split('/').count()
                    });
                    globs.push((
                        matcher,
                        Rule {
                            name: g,
                            settings,
                            labels,
                        },
                    ));
                }
                _ => {
                    return Err(invalid(
                        format!("cgroup[{i}]"),
                        "give exactly one of `path` or `glob`".into(),
                    ));
                }
            }
        }
        Ok(Rules {
            exact,
            globs,
            depth,
        })
    }
}

/// `true` when `child` lies strictly below `parent`.
#[must_use]
pub fn nests(parent: &str, child: &str) -> bool {
    child.len() > parent.len()
        && child.starts_with(parent)
        && child.as_bytes()[parent.len()] == b'/'
}
