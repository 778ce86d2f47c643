//! Why a request failed: an [`ErrorKind`] (for exit codes) and one line that says what to do
//! ([`ErrorReply`]); bad weights and refused paths become replies here.
//!
//! Not here: the checks themselves (`request`, [`crate::cgroup_path`],
//! `memweight_policy::check_weight`).

use memweight_policy::WeightError;
use serde::{Deserialize, Serialize};

use crate::cgroup_path::PathError;

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
/// A refused cgroup path in a request.
impl From<PathError> for ErrorReply {
    fn from(e: PathError) -> Self {
        ErrorReply::new(ErrorKind::BadRequest, e.to_string())
    }
}
