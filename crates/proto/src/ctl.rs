//! The control-socket protocol between `memweightctl` and `memweightd`.
//!
//! One JSON object per line in each direction over a Unix stream socket: the client writes one
//! [`Request`], the daemon answers with one [`Response`] and closes. Both carry
//! [`PROTOCOL_VERSION`]; a side that reads another version answers with
//! [`ErrorKind::VersionMismatch`] instead of guessing at fields it may not know.
//!
//! Everything here is pure: [`parse_request`] and [`parse_response`] take a line and return
//! typed values or a one-line error, so the daemon's request handling and the client's output
//! are tested without a socket. Cgroup paths are checked by [`normalize_cgroup`] (the rule of
//! [`crate::cgroup_path`]: no `..`, no empty components, nothing outside the cgroup root) and
//! weights by
//! [`memweight_policy::check_weight`].
//!
//! ```text
//! → {"version":1,"command":{"op":"set","cgroup":"lab/c1","weight":300}}
//! ← {"version":1,"result":{"ok":{"kind":"setting","cgroup":"lab/c1",...}}}
//! ← {"version":1,"result":{"error":{"kind":"not-managed","message":"..."}}}
//! ```

use memweight_policy::{WeightError, check_weight, human};
use serde::{Deserialize, Serialize};

use crate::cgroup_path::{self, PathError};

/// Version of the request and response layout; bumped on any incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;
/// Where the daemon listens unless configured otherwise.
pub const DEFAULT_SOCKET: &str = "/run/memweight/memweightd.sock";
/// Longest request line the daemon reads; anything longer is refused.
pub const MAX_LINE: usize = 64 * 1024;

/// One request: the protocol version and a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// [`PROTOCOL_VERSION`] of the sender.
    pub version: u32,
    /// What to do.
    pub command: Command,
}

impl Request {
    /// A request of this protocol version.
    #[must_use]
    pub fn new(command: Command) -> Self {
        Request {
            version: PROTOCOL_VERSION,
            command,
        }
    }

    /// The request as one JSON line (with the trailing newline).
    #[must_use]
    pub fn to_line(&self) -> String {
        to_line(self)
    }
}

/// What the client asks of the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Command {
    /// Set a runtime override of a managed cgroup's weight (and optionally floor and ceiling).
    Set {
        /// Cgroup path relative to the cgroup root.
        cgroup: String,
        /// Weight, `1..=10000`.
        weight: u32,
        /// Floor in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<u64>,
        /// Ceiling in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u64>,
    },
    /// Drop a runtime override: the configured values apply again.
    Unset {
        /// Cgroup path.
        cgroup: String,
    },
    /// The configured and effective settings of one cgroup.
    Get {
        /// Cgroup path.
        cgroup: String,
    },
    /// The pool and one row per managed cgroup, from the last tick.
    Status,
    /// The numbers and the reason behind one cgroup's target and writes.
    Explain {
        /// Cgroup path.
        cgroup: String,
    },
    /// Re-read the configuration file (like SIGHUP).
    Reload,
    /// The daemon's version. A daemon that predates this request refuses it as malformed
    /// (`unknown variant`): see [`ErrorReply::is_unknown_command`].
    Version,
}

impl Command {
    /// The cgroup the command names, if any.
    #[must_use]
    pub fn cgroup(&self) -> Option<&str> {
        match self {
            Command::Set { cgroup, .. }
            | Command::Unset { cgroup }
            | Command::Get { cgroup }
            | Command::Explain { cgroup } => Some(cgroup),
            Command::Status | Command::Reload | Command::Version => None,
        }
    }

    /// Checks what can be checked without the daemon's state: the weight, the floor against
    /// the ceiling, and the shape of the cgroup path.
    pub fn validate(&self) -> Result<(), ErrorReply> {
        if let Some(c) = self.cgroup() {
            // Without the root, an absolute path is only checked for its shape; the daemon
            // decides whether it lies below its root ([`normalize_cgroup`]).
            cgroup_path::normalize(c)?;
        }
        if let Command::Set {
            weight, min, max, ..
        } = self
        {
            check_weight(u64::from(*weight))?;
            if let (Some(lo), Some(hi)) = (min, max)
                && hi < lo
            {
                return Err(ErrorReply::new(
                    ErrorKind::BadRequest,
                    format!(
                        "--max ({}) is below --min ({}); the ceiling must be at least the floor",
                        human::bytes(*hi),
                        human::bytes(*lo)
                    ),
                ));
            }
        }
        Ok(())
    }
}

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

/// The pool and host, as of the last tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    /// Tick number since the daemon started.
    pub tick: u64,
    /// Whether writes are enforced (`false`: dry run).
    pub enforce: bool,
    /// Pool capacity C.
    pub capacity: u64,
    /// MemAvailable shortfall below the reserve that came off the pool.
    pub shortfall: u64,
    /// What host PSI took off the pool.
    pub psi_cut: u64,
    /// The MemAvailable reserve (auto capacity): below it the host is short.
    #[serde(default)]
    pub reserve: u64,
    /// The part of host PSI `some avg10` (%) that the daemon's own throttling explains (the
    /// highest of the managed cgroups held at a lowered `memory.high`); not counted towards
    /// the PSI cut.
    #[serde(default)]
    pub own_stall: f64,
    /// Bytes of the capacity kept for the guards above the targets of cgroups held back (with
    /// `reclaim`, memory.high sits a `guard` above the target): the policy shares
    /// `capacity − guards`.
    #[serde(default)]
    pub guards: u64,
    /// The capacity was kept at the last tick's: MemAvailable stayed within the `hysteresis`
    /// of where it was when the pool last moved (reserve capacity).
    #[serde(default)]
    pub held: bool,
    /// The kernel's global reclaim (kswapd or direct reclaim, `/proc/vmstat` `pgscan_*`) ran
    /// since the last tick: the host is short by the kernel's own measure.
    #[serde(default)]
    pub reclaiming: bool,
    /// The split is enforced beyond `memory.low` (`memory.high` and `memory.reclaim` on the
    /// cgroups above their share): always with `reserve` and `fixed` capacity; with `kernel`
    /// while the host is short and a cgroup reaching for memory is below its share.
    #[serde(default)]
    pub enforcing: bool,
    /// `kernel` capacity: the host is short and the cgroups beside the managed set stall on
    /// memory, so no managed cgroup is protected this tick (the kernel's reclaim weighs their
    /// pages against the services' as it would alone); the split is still enforced.
    #[serde(default)]
    pub yielding: bool,
    /// `kernel` capacity: the highest share (%) of the last tick a cgroup beside the managed
    /// set (and the daemon's own) had a task stalled on memory (`memory.pressure`).
    #[serde(default)]
    pub outside_stall: Option<f64>,
    /// TU: total usage of the managed cgroups.
    pub total_usage: u64,
    /// TW: total weight.
    pub total_weight: u64,
    /// Usage exceeds the pool.
    pub pressure: bool,
    /// Floors alone exceed the pool.
    pub overcommitted: bool,
    /// Host MemTotal.
    pub mem_total: u64,
    /// Host MemAvailable.
    pub mem_available: u64,
    /// Host SwapFree.
    pub swap_free: u64,
    /// Host memory PSI some avg10 (%).
    pub host_psi_some_avg10: Option<f64>,
    /// Host memory PSI full avg10 (%).
    pub host_psi_full_avg10: Option<f64>,
    /// How long the tick took, in microseconds.
    pub duration_us: u64,
}

/// What the daemon may do with a managed cgroup this tick (`status`'s STATE column); on the
/// wire the kebab-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CgroupState {
    /// Managed: the decided writes are made.
    Ok,
    /// A write is still landing; nothing more is written until it has.
    Busy,
    /// Its originals are not on disk yet, so nothing is written.
    Pending,
    /// Seen for the first time among many: pinned at its usage until a full sample.
    New,
    /// `enforce = false`: computed, never written.
    DryRun,
}

impl std::fmt::Display for CgroupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CgroupState::Ok => "ok",
            CgroupState::Busy => "busy",
            CgroupState::Pending => "pending",
            CgroupState::New => "new",
            CgroupState::DryRun => "dry-run",
        })
    }
}

/// One managed cgroup as of the last tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupStatus {
    /// Path relative to the cgroup root.
    pub cgroup: String,
    /// Effective weight.
    pub weight: u32,
    /// The weight comes from a runtime override.
    pub overridden: bool,
    /// The container whose cgroup this is, when the container engine names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Where the weight comes from (`None` from a daemon that does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<WeightSource>,
    /// memory.current.
    pub usage: u64,
    /// EA = TU × W / TW.
    pub expected: u64,
    /// EX = U − EA.
    pub exceed: i64,
    /// Water-filled target.
    pub target: u64,
    /// Entitlement (what memory.low protects).
    pub entitlement: u64,
    /// Floor the target never goes below.
    pub floor: u64,
    /// Ceiling the policy puts on memory.high (`None`: none).
    pub ceiling: Option<u64>,
    /// memory.high as read (`None`: max).
    pub high: Option<u64>,
    /// memory.low as read (`None`: max).
    pub low: Option<u64>,
    /// memory.swap.current (`None`: no swap accounting).
    pub swap: Option<u64>,
    /// memory.pressure some avg10 (%).
    pub psi_some_avg10: Option<f64>,
    /// memory.pressure full avg10 (%).
    pub psi_full_avg10: Option<f64>,
    /// Bytes it faulted back (`workingset_refault_*`) between its last two full samples: memory
    /// reclaim took that it still uses. With `capacity.mode = "kernel"`, 1 MiB or more (or
    /// its own PSI at 1 %) makes it reach for more than it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refaulted: Option<u64>,
    /// memory.events `high`.
    pub events_high: u64,
    /// memory.events `max`.
    pub events_max: u64,
    /// memory.events `oom_kill`.
    pub events_oom_kill: u64,
    /// memory.high written this tick (`None`: unchanged).
    pub wrote_high: Option<String>,
    /// memory.low written this tick (`None`: unchanged).
    pub wrote_low: Option<u64>,
    /// Bytes asked of memory.reclaim this tick.
    pub reclaim: Option<u64>,
    /// What the daemon may do with it this tick.
    pub state: CgroupState,
    /// The policy's reason, e.g. `above weighted share by 312 MiB`.
    pub reason: String,
    /// The cgroup's own memory.high, restored when the daemon lets go and never exceeded
    /// (`"max"` or bytes); absent from daemons that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_high: Option<String>,
    /// The cgroup's own memory.low, restored when the daemon lets go and never undercut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_low: Option<String>,
    /// The last change someone else made to memory.high or memory.low, which the daemon kept
    /// as the cgroup's original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
}

/// `status`: the pool and every managed cgroup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The pool and host.
    pub pool: Pool,
    /// One row per managed cgroup, sorted by path.
    pub cgroups: Vec<CgroupStatus>,
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

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// Malformed request, bad weight, bad path.
    BadRequest,
    /// No rule in the configuration names the cgroup.
    NotManaged,
    /// A rule names it but no such cgroup is managed now (it does not exist).
    UnknownCgroup,
    /// The peer is neither root nor in the configured group.
    PermissionDenied,
    /// Client and daemon speak different protocol versions.
    VersionMismatch,
    /// No tick has completed yet.
    NotReady,
    /// The configuration could not be (re)loaded.
    ConfigInvalid,
    /// Anything else on the daemon's side (state file not writable, …).
    Internal,
}

/// A failed request: what kind, and one line that says what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ErrorReply {
    /// The kind, for exit codes.
    pub kind: ErrorKind,
    /// One line for the user.
    pub message: String,
}

impl ErrorReply {
    /// An error of `kind`.
    #[must_use]
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ErrorReply {
            kind,
            message: message.into(),
        }
    }

    /// Whether this is how a daemon refuses a command it does not know (one older than the
    /// command): a malformed request naming an `unknown variant`.
    #[must_use]
    pub fn is_unknown_command(&self) -> bool {
        self.kind == ErrorKind::BadRequest && self.message.contains("unknown variant")
    }

    /// The answer before the daemon's first tick has completed.
    #[must_use]
    pub fn not_ready() -> Self {
        ErrorReply::new(
            ErrorKind::NotReady,
            "the daemon has not completed its first tick yet; try again in a moment",
        )
    }
}

/// A bad weight in a request: `weight must be a whole number 1..=10000, got 0`.
impl From<WeightError> for ErrorReply {
    fn from(e: WeightError) -> Self {
        ErrorReply::new(ErrorKind::BadRequest, format!("weight {e}"))
    }
}

/// Turns a user-given cgroup path into the daemon's form: relative to `root`, no leading or
/// trailing slash. An absolute path is accepted only when it lies below `root` (e.g.
/// `/sys/fs/cgroup/lab/c1` with root `/sys/fs/cgroup`). The rule is
/// [`cgroup_path::normalize_under`]; this gives its error as a reply.
pub fn normalize_cgroup(cgroup: &str, root: &str) -> Result<String, ErrorReply> {
    cgroup_path::normalize_under(cgroup, root).map_err(ErrorReply::from)
}

/// A refused cgroup path in a request.
impl From<PathError> for ErrorReply {
    fn from(e: PathError) -> Self {
        ErrorReply::new(ErrorKind::BadRequest, e.to_string())
    }
}

/// Reads the `version` field first so that a request from another protocol version gets a
/// clear mismatch error rather than a confusing field error.
fn check_version(value: &serde_json::Value, who: &str) -> Result<(), ErrorReply> {
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    match version {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => Ok(()),
        Some(v) => Err(ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!(
                "protocol version mismatch: the {who} speaks version {v}, this side speaks \
                 {PROTOCOL_VERSION}; use the memweightctl that came with this memweightd"
            ),
        )),
        None => Err(ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!(
                "the {who}'s message has no protocol version (expected {{\"version\": \
                 {PROTOCOL_VERSION}, ...}}); is this a memweightd socket?"
            ),
        )),
    }
}

/// Parses and validates one request line (the daemon's side).
pub fn parse_request(line: &str) -> Result<Command, ErrorReply> {
    if line.len() > MAX_LINE {
        return Err(ErrorReply::new(
            ErrorKind::BadRequest,
            format!("request longer than {MAX_LINE} bytes"),
        ));
    }
    let value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| ErrorReply::new(ErrorKind::BadRequest, format!("request is not JSON: {e}")))?;
    check_version(&value, "client")?;
    let req: Request = serde_json::from_value(value)
        .map_err(|e| ErrorReply::new(ErrorKind::BadRequest, format!("malformed request: {e}")))?;
    req.command.validate()?;
    Ok(req.command)
}

/// Parses one response line (the client's side). A daemon error comes back as `Ok(Err(..))`;
/// an unreadable or other-version response as `Err`.
pub fn parse_response(line: &str) -> Result<Result<Reply, ErrorReply>, ErrorReply> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!("the daemon's answer is not JSON ({e}); is this a memweightd socket?"),
        )
    })?;
    check_version(&value, "daemon")?;
    let resp: Response = serde_json::from_value(value).map_err(|e| {
        ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!("cannot read the daemon's answer: {e}"),
        )
    })?;
    Ok(match resp.result {
        Outcome::Ok(r) => Ok(r),
        Outcome::Error(e) => Err(e),
    })
}

fn to_line<T: Serialize>(value: &T) -> String {
    // These types hold only strings, integers, finite floats and options: encoding cannot fail.
    let mut s = serde_json::to_string(value).unwrap_or_else(|e| {
        format!(
            "{{\"version\":{PROTOCOL_VERSION},\"result\":{{\"error\":{{\"kind\":\"internal\",\
             \"message\":\"cannot encode: {}\"}}}}}}",
            e.to_string().replace('"', "'")
        )
    });
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `CgroupStatus.state` was a string; as an enum its wire form is the same words.
    #[test]
    fn cgroup_state_keeps_its_wire_words() {
        for (state, word) in [
            (CgroupState::Ok, "ok"),
            (CgroupState::Busy, "busy"),
            (CgroupState::Pending, "pending"),
            (CgroupState::New, "new"),
            (CgroupState::DryRun, "dry-run"),
        ] {
            let json = serde_json::to_string(&state).expect("serializes");
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(state.to_string(), word);
            let back: CgroupState = serde_json::from_str(&json).expect("parses");
            assert_eq!(back, state);
        }
    }

    fn set(weight: u32) -> Command {
        Command::Set {
            cgroup: "lab/c1".into(),
            weight,
            min: None,
            max: None,
        }
    }

    #[test]
    fn requests_round_trip() {
        for cmd in [
            set(300),
            Command::Set {
                cgroup: "a/b".into(),
                weight: 1,
                min: Some(1 << 20),
                max: Some(1 << 30),
            },
            Command::Unset {
                cgroup: "lab/c1".into(),
            },
            Command::Get { cgroup: "x".into() },
            Command::Status,
            Command::Explain { cgroup: "x".into() },
            Command::Reload,
            Command::Version,
        ] {
            let line = Request::new(cmd.clone()).to_line();
            assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
            assert_eq!(parse_request(&line), Ok(cmd));
        }
    }

    #[test]
    fn wire_form_is_stable() {
        let line = Request::new(set(300)).to_line();
        assert_eq!(
            line,
            "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"lab/c1\",\"weight\":300}}\n"
        );
        let line = Request::new(Command::Status).to_line();
        assert_eq!(line, "{\"version\":1,\"command\":{\"op\":\"status\"}}\n");
    }

    #[test]
    fn version_mismatch_is_named() {
        let e = parse_request("{\"version\":2,\"command\":{\"op\":\"frobnicate\"}}")
            .expect_err("other version");
        assert_eq!(e.kind, ErrorKind::VersionMismatch);
        assert!(e.message.contains("version 2"), "{}", e.message);
        let e = parse_request("{\"command\":{\"op\":\"status\"}}").expect_err("no version");
        assert_eq!(e.kind, ErrorKind::VersionMismatch);
        let e = parse_response("{\"version\":7,\"result\":{}}").expect_err("other version");
        assert_eq!(e.kind, ErrorKind::VersionMismatch);
        assert!(
            e.message.contains("daemon speaks version 7"),
            "{}",
            e.message
        );
    }

    #[test]
    fn bad_requests_get_one_line() {
        let cases = [
            ("not json", "not JSON"),
            ("{\"version\":1,\"command\":{\"op\":\"nope\"}}", "malformed"),
            (
                "{\"version\":1,\"command\":{\"op\":\"get\",\"cgroup\":\"a\",\"x\":1}}",
                "malformed",
            ),
            (
                "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"a\",\"weight\":0}}",
                "weight must be a whole number 1..=10000, got 0",
            ),
            (
                "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"a\",\"weight\":10001}}",
                "1..=10000",
            ),
            (
                "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"a\",\"weight\":-1}}",
                "malformed",
            ),
            (
                "{\"version\":1,\"command\":{\"op\":\"get\",\"cgroup\":\"../etc\"}}",
                "`..`",
            ),
            (
                "{\"version\":1,\"command\":{\"op\":\"get\",\"cgroup\":\"/\"}}",
                "root itself",
            ),
            (
                "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"a\",\"weight\":5,\"min\":10,\"max\":5}}",
                "below --min",
            ),
        ];
        for (line, want) in cases {
            let e = parse_request(line).expect_err(line);
            assert_eq!(e.kind, ErrorKind::BadRequest, "{line}");
            assert!(e.message.contains(want), "{line}: {:?}", e.message);
            assert!(!e.message.contains('\n'), "{line}: {:?}", e.message);
        }
        let huge = "x".repeat(MAX_LINE + 1);
        assert_eq!(
            parse_request(&huge).expect_err("huge").kind,
            ErrorKind::BadRequest
        );
    }

    #[test]
    fn weights_at_the_edges() {
        assert!(set(1).validate().is_ok());
        assert!(set(10_000).validate().is_ok());
        assert!(set(0).validate().is_err());
        assert!(set(10_001).validate().is_err());
    }

    #[test]
    fn cgroup_paths_are_normalized_or_refused() {
        let root = "/sys/fs/cgroup";
        assert_eq!(normalize_cgroup("lab/c1", root), Ok("lab/c1".into()));
        assert_eq!(normalize_cgroup("lab/c1/", root), Ok("lab/c1".into()));
        assert_eq!(
            normalize_cgroup("/sys/fs/cgroup/lab/c1", root),
            Ok("lab/c1".into())
        );
        assert_eq!(
            normalize_cgroup("/sys/fs/cgroup/lab/c1", "/sys/fs/cgroup/"),
            Ok("lab/c1".into())
        );
        for (bad, want) in [
            ("/etc/passwd", "outside the cgroup root"),
            ("/sys/fs/cgroupX/a", "outside the cgroup root"),
            ("/sys/fs/cgroup", "outside the cgroup root"),
            ("/sys/fs/cgroup/", "root itself"),
            ("lab/../../etc", "`..`"),
            ("/sys/fs/cgroup/../x", "`..`"),
            ("lab//c1", "empty"),
            ("lab/./c1", "empty"),
            ("", "root itself"),
        ] {
            let e = normalize_cgroup(bad, root).expect_err(bad);
            assert_eq!(e.kind, ErrorKind::BadRequest);
            assert!(e.message.contains(want), "{bad}: {}", e.message);
        }
    }

    fn sample_status() -> CgroupStatus {
        CgroupStatus {
            cgroup: "lab/c1".into(),
            weight: 1,
            overridden: true,
            container: None,
            source: None,
            usage: 2000 << 20,
            expected: 1000 << 20,
            exceed: 1000 << 20,
            target: 833 << 20,
            entitlement: 700 << 20,
            floor: 16 << 20,
            ceiling: Some(834 << 20),
            high: Some(834 << 20),
            low: Some(700 << 20),
            swap: Some(0),
            psi_some_avg10: Some(1.5),
            psi_full_avg10: None,
            refaulted: Some(0),
            events_high: 3,
            events_max: 0,
            events_oom_kill: 0,
            wrote_high: Some((834_u64 << 20).to_string()),
            wrote_low: None,
            reclaim: None,
            state: CgroupState::Ok,
            reason: "above weighted share by 1167 MiB".into(),
            original_high: None,
            original_low: None,
            operator: None,
        }
    }

    fn sample_pool() -> Pool {
        Pool {
            tick: 4,
            enforce: true,
            capacity: 4500 << 20,
            shortfall: 0,
            psi_cut: 0,
            reserve: 0,
            own_stall: 0.0,
            guards: 0,
            held: false,
            reclaiming: false,
            yielding: false,
            outside_stall: None,
            enforcing: false,
            total_usage: 6000 << 20,
            total_weight: 6,
            pressure: true,
            overcommitted: false,
            mem_total: 8 << 30,
            mem_available: 1 << 30,
            swap_free: 0,
            host_psi_some_avg10: Some(12.0),
            host_psi_full_avg10: Some(3.0),
            duration_us: 150,
        }
    }

    #[test]
    fn responses_round_trip() {
        let v = Values {
            weight: 5,
            min: None,
            max: Some(1 << 30),
        };
        let replies = [
            Reply::Setting(Box::new(Setting {
                cgroup: "lab/c1".into(),
                managed: true,
                configured: v,
                runtime_override: None,
                effective: v,
                container: Some("web".into()),
                labels: Some(LabelValues {
                    weight: Some(5),
                    min: None,
                    max: None,
                }),
                source: Some(WeightSource::Label {
                    label: "memweight.weight".into(),
                    container: "web".into(),
                }),
                label_clamps: vec![LabelClamp {
                    label: "memweight.min".into(),
                    field: LabelField::Min,
                    asked: 1 << 40,
                    applied: 0,
                }],
            })),
            Reply::Status(Status {
                pool: sample_pool(),
                cgroups: vec![sample_status()],
            }),
            Reply::Reloaded(Reloaded {
                config: "/etc/memweight/memweight.toml".into(),
                rules: 3,
                overrides_kept: 1,
            }),
            Reply::Version(Version {
                program: "memweightd".into(),
                version: "0.1.0".into(),
                protocol: PROTOCOL_VERSION,
            }),
        ];
        for r in replies {
            let line = Response::new(Outcome::Ok(r.clone())).to_line();
            assert_eq!(parse_response(&line), Ok(Ok(r)));
        }
        let err = ErrorReply::new(ErrorKind::NotManaged, "lab/x is not managed");
        let line = Response::new(Outcome::Error(err.clone())).to_line();
        assert!(line.contains("\"not-managed\""), "{line}");
        assert_eq!(parse_response(&line), Ok(Err(err)));
    }

    #[test]
    fn weight_sources_read_as_sentences() {
        let rule = WeightSource::Config {
            rule: "machine.slice/libpod-*.scope".into(),
        };
        assert_eq!(rule.to_string(), "config rule machine.slice/libpod-*.scope");
        assert_eq!(
            WeightSource::Override.to_string(),
            "runtime override (memweightctl set)"
        );
        assert_eq!(
            serde_json::to_string(&rule).expect("encodes"),
            "{\"from\":\"config\",\"rule\":\"machine.slice/libpod-*.scope\"}"
        );
    }

    /// A daemon from before container labels sends rows without `container` and `source`;
    /// this client must still read them, and an older client ignores the new fields.
    #[test]
    fn status_rows_without_container_fields_still_parse() {
        let mut row = serde_json::to_value(sample_status()).expect("encodes");
        let obj = row.as_object_mut().expect("an object");
        assert!(!obj.contains_key("container") && !obj.contains_key("source"));
        obj.remove("container");
        let back: CgroupStatus = serde_json::from_value(row).expect("old row parses");
        assert_eq!(back, sample_status());
        let mut with = sample_status();
        with.container = Some("web".into());
        with.source = Some(WeightSource::Override);
        let line = serde_json::to_string(&with).expect("encodes");
        assert!(
            line.contains("\"source\":{\"from\":\"override\"}"),
            "{line}"
        );
        let back: CgroupStatus = serde_json::from_str(&line).expect("new row parses");
        assert_eq!(back, with);
    }

    /// Replies from a daemon that predates the originals fields still parse, and rows without
    /// them serialise as before.
    #[test]
    fn status_rows_without_originals_are_compatible() {
        let row = sample_status();
        let json = serde_json::to_string(&row).expect("serialise");
        assert!(
            !json.contains("original_high") && !json.contains("operator"),
            "{json}"
        );
        let back: CgroupStatus = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, row);
    }

    /// `version` on the wire, and how a daemon from before it refuses it: the same
    /// `malformed request: unknown variant` this side's own parser gives, which the client
    /// recognises instead of reporting a bad request.
    #[test]
    fn version_request_and_an_old_daemons_refusal() {
        let line = Request::new(Command::Version).to_line();
        assert_eq!(line, "{\"version\":1,\"command\":{\"op\":\"version\"}}\n");
        let old = parse_request("{\"version\":1,\"command\":{\"op\":\"frobnicate\"}}")
            .expect_err("unknown op");
        assert!(old.is_unknown_command(), "{old:?}");
        assert!(!ErrorReply::new(ErrorKind::BadRequest, "weight must be ...").is_unknown_command());
        assert!(!ErrorReply::not_ready().is_unknown_command());
    }
}
