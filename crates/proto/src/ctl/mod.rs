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
//!
//! The rooms:
//!
//! * here: the protocol's constants ([`PROTOCOL_VERSION`], [`DEFAULT_SOCKET`], [`MAX_LINE`]);
//! * `request`: what the client asks ([`Request`], [`Command`]) and what can be checked of it
//!   without the daemon ([`Command::validate`], [`normalize_cgroup`]);
//! * `reply`: what the daemon answers ([`Response`], [`Outcome`], [`Reply`]) and the replies'
//!   bodies but `status`'s rows (settings, label clamps, weight sources, `explain`, `reload`,
//!   `version`);
//! * `status`: the pool and the per-cgroup rows of the last tick ([`Status`], [`Pool`],
//!   [`CgroupStatus`], [`CgroupState`]), which the daemon's tick report is made of;
//! * `error`: why a request failed ([`ErrorReply`], [`ErrorKind`]);
//! * `wire`: one JSON line each way — the version checked first, [`parse_request`],
//!   [`parse_response`], and the encoding of a line;
//! * `client`: the one room that does I/O — a client's blocking [`exchange`] on the socket,
//!   shared by `memweightctl` and the lab's status sampler;
//! * `tests`: round trips, the stable wire form, old peers.
//!
//! The other rooms do no I/O: the daemon's side of the socket is the daemon's.

mod client;
mod error;
mod reply;
mod request;
mod status;
#[cfg(test)]
mod tests;
mod wire;

pub use client::{Missed, exchange};
pub use error::{ErrorKind, ErrorReply};
pub use reply::{
    Explanation, LabelClamp, LabelField, LabelValues, Outcome, Reloaded, Reply, Response, Setting,
    Values, Version, WeightSource,
};
pub use request::{Command, Request, normalize_cgroup};
pub use status::{CgroupState, CgroupStatus, Pool, Status};
pub use wire::{parse_request, parse_response};

/// Version of the request and response layout; bumped on any incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;
/// Where the daemon listens unless configured otherwise.
pub const DEFAULT_SOCKET: &str = "/run/memweight/memweightd.sock";
/// Longest request line the daemon reads; anything longer is refused.
pub const MAX_LINE: usize = 64 * 1024;
