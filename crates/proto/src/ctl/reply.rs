//! What the daemon answers: a [`Response`] carries an [`Outcome`], a [`Reply`] or an error;
//! the replies' bodies: a cgroup's [`Setting`] (with its label values, clamps and the source
//! of its weight), `explain`'s [`Explanation`], [`Reloaded`] and [`Version`].
//!
//! Not here: `status`'s pool and rows (`status`), the errors (`error`), the parsing of a line
//! (`wire`).

use memweight_policy::human;
use serde::{Deserialize, Serialize};

use super::wire::to_line;
use super::{CgroupStatus, ErrorReply, PROTOCOL_VERSION, Pool, Status};

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    /// [`PROTOCOL_VERSION`] of the daemon.
    pub version: u32,
    /// The reply or the error.
    pub result: Outcome,
}

impl Response {
    /// A response of this protocol version.
    #[must_use]
    pub fn new(result: Outcome) -> Self {
        Response {
            version: PROTOCOL_VERSION,
            result,
        }
    }

    /// The response as one JSON line (with the trailing newline).
    #[must_use]
    pub fn to_line(&self) -> String {
        to_line(self)
    }
}

/// Success or failure of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The command succeeded.
    Ok(Reply),
    /// The command failed.
    Error(ErrorReply),
}

impl From<Result<Reply, ErrorReply>> for Outcome {
    fn from(r: Result<Reply, ErrorReply>) -> Self {
        match r {
            Ok(reply) => Outcome::Ok(reply),
            Err(e) => Outcome::Error(e),
        }
    }
}

/// A successful reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reply {
    /// `set`, `unset` and `get`: the cgroup's settings after the command (boxed: larger than
    /// the other replies since it names the container and the weight's source).
    Setting(Box<Setting>),
    /// `status`.
    Status(Status),
    /// `explain` (boxed: much larger than the other replies).
    Explain(Box<Explanation>),
    /// `reload`.
    Reloaded(Reloaded),
    /// `version`.
    Version(Version),
}

/// `version`: which build of the daemon answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// The program, `memweightd`.
    pub program: String,
    /// Its package version, e.g. `0.1.0`.
    pub version: String,
    /// The [`PROTOCOL_VERSION`] it speaks.
    pub protocol: u32,
}

/// Weight, floor and ceiling as configured, as overridden, and in effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    /// Cgroup path.
    pub cgroup: String,
    /// Whether the daemon manages the cgroup now (it exists and a rule names it).
    pub managed: bool,
    /// What the configuration file says.
    pub configured: Values,
    /// The runtime override (`memweightctl set`), if any.
    pub runtime_override: Option<Values>,
    /// What applies from the next tick on.
    pub effective: Values,
    /// The container whose cgroup this is, when the container engine names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// What the container's `memweight.*` labels set (absent fields: not set by a label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<LabelValues>,
    /// Where the effective weight comes from (`None` from a daemon that does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<WeightSource>,
    /// Labels that asked for more than their rule lets a label ask, and what applies instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label_clamps: Vec<LabelClamp>,
}

/// A container label that asked for more than its `[[cgroup]]` rule lets a label ask: a
/// weight above the rule's `label_weight_max` or a min above its `label_min_max` (clamped to
/// the bound), or a max above the rule's own max without `label_max_may_rise` (refused: the
/// rule's max applies).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelClamp {
    /// The label, e.g. `memweight.weight`.
    pub label: String,
    /// Which value it sets.
    pub field: LabelField,
    /// What the label asks: a weight, or bytes.
    pub asked: u64,
    /// What applies instead: a weight, or bytes.
    pub applied: u64,
}

/// The value a container label sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelField {
    /// The weight; bounded by the rule's `label_weight_max`.
    Weight,
    /// The floor; bounded by the rule's `label_min_max`.
    Min,
    /// The ceiling; may not rise above the rule's `max` unless `label_max_may_rise = true`.
    Max,
}

impl LabelField {
    /// The rule's key that bounds this field.
    #[must_use]
    pub fn bound_key(self) -> &'static str {
        match self {
            LabelField::Weight => "label_weight_max",
            LabelField::Min => "label_min_max",
            LabelField::Max => "label_max_may_rise",
        }
    }
}

impl std::fmt::Display for LabelClamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = human::bytes;
        let (label, key) = (&self.label, self.field.bound_key());
        match self.field {
            LabelField::Weight => write!(
                f,
                "label {label} asks weight {}, more than the rule's {key}: clamped to {}",
                self.asked, self.applied
            ),
            LabelField::Min => write!(
                f,
                "label {label} asks min {}, more than the rule's {key}: clamped to {}",
                b(self.asked),
                b(self.applied)
            ),
            LabelField::Max => write!(
                f,
                "label {label} asks max {}, above the rule's max: refused, {} applies ({key} \
                 = false)",
                b(self.asked),
                b(self.applied)
            ),
        }
    }
}

/// Weight, floor and ceiling as a container's labels set them; each may be absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelValues {
    /// `memweight.weight`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// `memweight.min`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    /// `memweight.max`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

/// Where a cgroup's effective weight comes from; later ones win: config rule < container
/// label < runtime override.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum WeightSource {
    /// A `[[cgroup]]` rule.
    Config {
        /// The rule's `path` or `glob`.
        rule: String,
    },
    /// A container label.
    Label {
        /// The label, e.g. `memweight.weight`.
        label: String,
        /// The container's name.
        container: String,
    },
    /// `memweightctl set`.
    Override,
}

impl std::fmt::Display for WeightSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WeightSource::Config { rule } => write!(f, "config rule {rule}"),
            WeightSource::Label { label, container } => {
                write!(f, "label {label} on container {container}")
            }
            WeightSource::Override => f.write_str("runtime override (memweightctl set)"),
        }
    }
}

/// Weight, floor and ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Values {
    /// Weight.
    pub weight: u32,
    /// Floor in bytes (`None`: none set).
    pub min: Option<u64>,
    /// Ceiling in bytes (`None`: none set).
    pub max: Option<u64>,
}

/// `explain`: one cgroup's numbers, settings and the pool they were computed against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The cgroup's row of the last tick.
    pub status: CgroupStatus,
    /// Its settings.
    pub setting: Setting,
    /// The pool.
    pub pool: Pool,
}

/// `reload`: what the new configuration holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reloaded {
    /// The file read.
    pub config: String,
    /// Number of `[[cgroup]]` rules.
    pub rules: usize,
    /// Runtime overrides kept.
    pub overrides_kept: usize,
}
