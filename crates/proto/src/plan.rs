//! The plan file that `memweightctl plan` reads, and the JSON it prints.
//!
//! Input:
//!
//! ```json
//! {"capacity": "4500M",
//!  "cgroups": [{"name": "web", "usage": "2000M", "weight": 1, "min": "256M", "max": "3G"}]}
//! ```
//!
//! Sizes are [`Size`]s (integers or strings with binary units). `weight` defaults to
//! [`DEFAULT_WEIGHT`]; `min` (the floor) and `max` are optional. Unknown fields are errors.
//! Every error is one line that starts with the offending field, e.g.
//! `cgroups[2].weight: must be a whole number 1..=10000, got 0`.

use std::collections::HashMap;

use memweight_policy::{
    CgroupInput, DEFAULT_WEIGHT, MAX_WEIGHT, MIN_WEIGHT, Plan, WeightError, check_weight,
};
use serde::{Deserialize, Serialize};

use crate::Size;

/// A plan file: a pool capacity and the cgroups sharing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Pool capacity `C`.
    pub capacity: Size,
    /// The cgroups, in the order the output should list them.
    pub cgroups: Vec<PlanCgroup>,
    /// The daemon's settings the writes are computed with, as in its configuration file
    /// (`guard`, `max_step`, `min_floor`, `reclaim`, `idle_tax`, ...); absent: its defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One cgroup of a [`PlanFile`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanCgroup {
    /// Unique, non-empty name.
    pub name: String,
    /// Current usage.
    pub usage: Size,
    /// Weight, `1..=10000`; default 100. Read as `u64` so that out-of-range values get the
    /// range message rather than a type error.
    #[serde(default = "default_weight", deserialize_with = "weight")]
    pub weight: u64,
    /// Floor: the target never goes below `min(min, usage, max)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Size>,
    /// Ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Size>,
    /// Its memory.high now (absent: `max`); taken as the operator's own, never exceeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<Size>,
    /// Its memory.low now (absent: 0); taken as the operator's own, never undercut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<Size>,
    /// Bytes of its usage on the kernel's active LRU lists, for `idle_tax` (absent: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<Size>,
}

const fn default_weight() -> u64 {
    DEFAULT_WEIGHT as u64
}

/// A weight: an integer (or a whole-valued float such as `2.0`); range-checked by
/// [`PlanFile::validate`], which names the cgroup.
fn weight<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::de::Error;
    match serde_json::Number::deserialize(d)? {
        n if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or_default()),
        n if n.as_i64().is_some() => Err(D::Error::custom(WeightError::new(n))),
        n => match n.as_f64() {
            // Whole and in range: exactly representable, the cast is exact.
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked: whole and within 1..=10000"
            )]
            Some(f)
                if f.fract() == 0.0
                    && (f64::from(MIN_WEIGHT)..=f64::from(MAX_WEIGHT)).contains(&f) =>
            {
                Ok(f as u64)
            }
            _ => Err(D::Error::custom(WeightError::new(n))),
        },
    }
}

/// A plan file that cannot be used; displays as one line naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PlanFileError {
    /// Path of the offending field (`cgroups[2].weight`), or `.` for the document itself.
    pub field: String,
    /// What is wrong and, where it helps, what to write instead.
    pub message: String,
}

impl PlanFileError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl PlanFile {
    /// Parses and validates a plan file.
    ///
    /// # Errors
    ///
    /// [`PlanFileError`] for malformed JSON, unknown or missing fields, bad sizes, weights
    /// outside `1..=10000`, and empty or repeated names.
    pub fn from_json(text: &str) -> Result<Self, PlanFileError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let file: Self = serde_path_to_error::deserialize(de).map_err(|e| {
            // A syntax error has no path ("?"); report it against the document.
            let field = match e.path().to_string() {
                p if p == "?" => ".".to_owned(),
                p => p,
            };
            let inner = e.into_inner();
            // serde_json appends " at line L column C"; keep it, it locates the field.
            PlanFileError::new(field, inner.to_string())
        })?;
        file.validate()?;
        Ok(file)
    }

    /// Checks what the types cannot: weight range, empty and duplicate names.
    ///
    /// # Errors
    ///
    /// The first problem found, as a [`PlanFileError`].
    pub fn validate(&self) -> Result<(), PlanFileError> {
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(self.cgroups.len());
        for (i, c) in self.cgroups.iter().enumerate() {
            if c.name.is_empty() {
                return Err(PlanFileError::new(
                    format!("cgroups[{i}].name"),
                    "must not be empty",
                ));
            }
            if let Some(first) = seen.insert(c.name.as_str(), i) {
                return Err(PlanFileError::new(
                    format!("cgroups[{i}].name"),
                    format!("duplicate name {:?} (also cgroups[{first}])", c.name),
                ));
            }
            check_weight(c.weight)
                .map_err(|e| PlanFileError::new(format!("cgroups[{i}].weight"), e.to_string()))?;
        }
        Ok(())
    }

    /// The policy inputs, in file order. Call [`PlanFile::validate`] first (as
    /// [`PlanFile::from_json`] does); a weight that does not fit is clamped to the valid range
    /// here rather than wrapped.
    #[must_use]
    pub fn inputs(&self) -> Vec<CgroupInput> {
        self.cgroups
            .iter()
            .map(|c| CgroupInput {
                name: c.name.clone(),
                usage: c.usage.bytes(),
                weight: u32::try_from(c.weight)
                    .unwrap_or(MAX_WEIGHT)
                    .clamp(MIN_WEIGHT, MAX_WEIGHT),
                floor: c.min.map_or(0, Size::bytes),
                max: c.max.map(Size::bytes),
                demand: None,
                active: None,
            })
            .collect()
    }
}

/// The JSON `memweightctl plan --output json` prints. Sizes are integer bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOutput {
    /// Pool capacity `C`.
    pub capacity: u64,
    /// `TU = Σ usage` (saturating).
    pub total_usage: u64,
    /// `TW = Σ weight`.
    pub total_weight: u64,
    /// Whether anything must be reclaimed (`Σ min(usage, max) > C`).
    pub pressure: bool,
    /// Whether the floors alone exceed the capacity.
    pub overcommitted: bool,
    /// One entry per cgroup, in input order.
    pub cgroups: Vec<PlanOutputCgroup>,
    /// Bytes of the capacity the daemon would keep for the memory.high guards above the
    /// targets of cgroups it holds back (0 where no writes were computed).
    #[serde(default)]
    pub guards: u64,
}

/// One cgroup of a [`PlanOutput`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOutputCgroup {
    /// Name.
    pub name: String,
    /// Usage `U`.
    pub usage: u64,
    /// Weight `W`.
    pub weight: u32,
    /// Expected allocation `EA = TU × W / TW` (rounded down).
    pub expected: u64,
    /// Exceed `EX = U − EA`.
    pub exceed: i64,
    /// Water-filled target `T`.
    pub target: u64,
    /// `R = U − T`.
    pub reclaim: u64,
    /// Weighted share of the capacity ignoring floors (for `memory.low`).
    pub entitlement: u64,
    /// Human reason, e.g. `above weighted share by 312 MiB`.
    pub reason: String,
    /// Machine reason: `no_pressure`, `above_share`, `within_share`, `at_floor`,
    /// `capped_by_max`, `overcommitted`.
    pub reason_kind: String,
    /// What memweightd would write to this cgroup in one tick from the given state (`None`
    /// where not computed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<PlanWrites>,
}

/// The writes memweightd's control law makes for one cgroup in one tick; `None` leaves a
/// file alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanWrites {
    /// New memory.high: bytes, or `"max"`.
    pub memory_high: Option<String>,
    /// New memory.low: bytes, or `"max"`.
    pub memory_low: Option<String>,
    /// Bytes asked of memory.reclaim.
    pub memory_reclaim: Option<u64>,
}

impl From<&Plan> for PlanOutput {
    fn from(plan: &Plan) -> Self {
        Self {
            capacity: plan.capacity,
            total_usage: plan.total_usage,
            total_weight: plan.total_weight,
            pressure: plan.pressure,
            overcommitted: plan.overcommitted,
            cgroups: plan
                .decisions
                .iter()
                .map(|d| PlanOutputCgroup {
                    name: d.name.clone(),
                    usage: d.usage,
                    weight: d.weight,
                    expected: d.expected,
                    exceed: d.exceed,
                    target: d.target,
                    reclaim: d.reclaim,
                    entitlement: d.entitlement,
                    reason: d.reason.to_string(),
                    reason_kind: d.reason.kind().to_owned(),
                    writes: None,
                })
                .collect(),
            guards: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        PlanFile::from_json(text)
            .expect_err("input is invalid")
            .to_string()
    }

    #[test]
    fn parses_sizes_defaults_and_options() {
        let f = PlanFile::from_json(
            r#"{"capacity": "4500M", "cgroups": [
                {"name": "a", "usage": 1024, "weight": 3, "min": "1K", "max": "2G"},
                {"name": "b", "usage": "1.5G"},
                {"name": "c", "usage": 2.0, "weight": 7.0}]}"#,
        )
        .expect("valid");
        assert_eq!(f.capacity, Size(4500 << 20));
        let inputs = f.inputs();
        assert_eq!(inputs[0].floor, 1024);
        assert_eq!(inputs[0].max, Some(2 << 30));
        assert_eq!(inputs[0].weight, 3);
        assert_eq!(inputs[1].weight, DEFAULT_WEIGHT);
        assert_eq!(inputs[1].usage, 3 << 29);
        assert_eq!(inputs[1].max, None);
        assert_eq!((inputs[2].usage, inputs[2].weight), (2, 7));
    }

    #[test]
    fn errors_name_the_field() {
        let base = |cg: &str| {
            format!(r#"{{"capacity": 100, "cgroups": [{{"name": "a", "usage": 1}}, {cg}]}}"#)
        };
        assert_eq!(
            err(&base(r#"{"name": "b", "usage": 1, "weight": 0}"#)),
            "cgroups[1].weight: must be a whole number 1..=10000, got 0"
        );
        assert_eq!(
            err(&base(r#"{"name": "a", "usage": 1}"#)),
            "cgroups[1].name: duplicate name \"a\" (also cgroups[0])"
        );
        assert_eq!(
            err(&base(r#"{"name": "", "usage": 1}"#)),
            "cgroups[1].name: must not be empty"
        );
        assert!(
            err(&base(r#"{"name": "b", "usage": -3}"#))
                .starts_with("cgroups[1].usage: negative size -3")
        );
        assert!(
            err(&base(r#"{"name": "b", "usage": "x"}"#))
                .starts_with("cgroups[1].usage: invalid size")
        );
        assert!(
            err(&base(r#"{"name": "b", "usage": 1, "weigth": 2}"#))
                .starts_with("cgroups[1].weigth: unknown field `weigth`")
        );
        assert!(
            err(&base(r#"{"name": "b", "usage": 1, "weight": -1}"#))
                .starts_with("cgroups[1].weight: must be a whole number 1..=10000, got -1")
        );
        assert!(
            err(&base(r#"{"name": "b", "usage": 1, "weight": 2.5}"#))
                .starts_with("cgroups[1].weight: must be a whole number 1..=10000, got 2.5")
        );
        assert!(
            err(&base(r#"{"name": "b", "usage": 1, "weight": "3"}"#))
                .starts_with("cgroups[1].weight: invalid type")
        );
        assert!(
            err(r#"{"capacity": 1, "cgroups": [], "extra": 1}"#)
                .starts_with("extra: unknown field `extra`")
        );
        assert!(err(r#"{"cgroups": []}"#).contains("missing field `capacity`"));
        assert!(err("{").starts_with(".: EOF while parsing"));
        assert!(
            err(r#"{"capacity": 1, "cgroups": [{"name": "b"}]}"#)
                .starts_with("cgroups[0]: missing field `usage`")
        );
    }

    #[test]
    fn every_error_is_one_line() {
        for bad in ["", "[]", r#"{"capacity": "1Q", "cgroups": []}"#] {
            assert!(!err(bad).contains('\n'), "{bad}");
        }
    }

    #[test]
    fn output_carries_the_plan() {
        let f = PlanFile::from_json(
            r#"{"capacity": 4500, "cgroups": [
                {"name": "c1", "usage": 2000, "weight": 1},
                {"name": "c2", "usage": 2000, "weight": 2},
                {"name": "c3", "usage": 2000, "weight": 3}]}"#,
        )
        .expect("valid");
        let plan = memweight_policy::plan(f.capacity.bytes(), &f.inputs()).expect("valid");
        let out = PlanOutput::from(&plan);
        let json = serde_json::to_value(&out).expect("serialise");
        assert_eq!(json["total_usage"], 6000);
        assert_eq!(json["pressure"], true);
        assert_eq!(json["cgroups"][0]["target"], 833);
        assert_eq!(
            json["cgroups"][0]["reason"],
            "above weighted share by 1167 B"
        );
        assert_eq!(json["cgroups"][0]["reason_kind"], "above_share");
        assert_eq!(json["cgroups"][2]["exceed"], -1000);
    }
}
