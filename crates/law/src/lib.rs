//! memweight's control law, shared by the daemon and `memweightctl plan`.
//!
//! Everything here is pure: samples and settings in, decisions out, no file system (but
//! [`config::Config::load`], which reads the one file it is given), no clock, no tokio. The
//! daemon (`memweightd`) samples the kernel, runs [`step::step`] once a tick and makes the
//! writes; `memweightctl plan` runs the same law on a plan file ([`plan_file::plan`]), so the
//! CLI needs this crate and not the daemon.
//!
//! * [`config`]: the daemon's TOML configuration, parsed and validated.
//! * [`capacity`]: the pool size from host MemAvailable, reclaim and PSI.
//! * [`decide`]: from the policy's plan to control-file values under the safety rules.
//! * [`step`]: the whole control law of one tick as one function (capacity, floors, hidden
//!   demand, the policy, [`decide`]); what the tests and proptests drive.
//! * [`plan_file`]: a plan file run through the policy and one tick of [`step`].

pub mod capacity;
pub mod config;
pub mod decide;
pub mod plan_file;
pub mod step;
