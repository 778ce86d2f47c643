//! Types shared by `memweightd`, `memweightctl` and the lab.
//!
//! * [`size`]: byte sizes as users write them (`4096`, `"512M"`, `"1.5G"`; binary units).
//! * [`cgroup_path`]: the one rule for cgroup paths users and files give (no `..`, nothing
//!   outside the root).
//! * [`plan`]: the offline plan file read by `memweightctl plan` and the JSON it prints.
//! * [`ctl`]: the control-socket protocol (versioned JSON lines), so that the client and the
//!   daemon can only disagree at compile time, and the client's one exchange on the socket.

pub mod cgroup_path;
pub mod ctl;
pub mod plan;
pub mod size;

pub use size::Size;
