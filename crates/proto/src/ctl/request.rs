//! What the client asks: a [`Request`] carries one [`Command`]; what can be checked of it
//! without the daemon's state (the weight, floor against ceiling, the path's shape) is checked
//! here, and [`normalize_cgroup`] puts a user-given path in the daemon's form.
//!
//! Not here: the answers (`reply`, `status`), the parsing of a line (`wire`).

use memweight_policy::{check_weight, human};
use serde::{Deserialize, Serialize};

use super::wire::to_line;
use super::{ErrorKind, ErrorReply, PROTOCOL_VERSION};
use crate::cgroup_path;

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

/// Turns a user-given cgroup path into the daemon's form: relative to `root`, no leading or
/// trailing slash. An absolute path is accepted only when it lies below `root` (e.g.
/// `/sys/fs/cgroup/lab/c1` with root `/sys/fs/cgroup`). The rule is
/// [`cgroup_path::normalize_under`]; this gives its error as a reply.
pub fn normalize_cgroup(cgroup: &str, root: &str) -> Result<String, ErrorReply> {
    cgroup_path::normalize_under(cgroup, root).map_err(ErrorReply::from)
}
