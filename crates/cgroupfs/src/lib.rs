//! cgroup v2 and procfs I/O for memweight: read samples, write limits, rooted at an
//! injected path.
//!
//! This crate is the daemon's only contact with the kernel's memory controller. It is
//! split the same way as the files it handles:
//!
//! - [`parse`]: one pure parser per kernel file format (single value, value or `max`,
//!   flat keyed, PSI). `&str` in, typed value out, never a panic.
//! - [`CgroupFs`]: a cgroup v2 hierarchy at a root given by the caller (normally
//!   `/sys/fs/cgroup`, which only `main` names). It checks the hierarchy
//!   ([`CgroupFs::check_v2`], [`CgroupFs::memory_enabled_for`]), lists cgroups
//!   ([`CgroupFs::walk`]), reads one cgroup's state ([`CgroupFs::sample`]) and writes
//!   `memory.high`, `memory.low` and `memory.reclaim`.
//! - [`ProcFs`]: host memory (`meminfo`, via the `procfs` crate) and host memory PSI.
//! - `testing` (cargo feature `testing`): fake cgroup and proc trees in a tempdir.
//!
//! # Removed cgroups
//!
//! Containers come and go between and during ticks. `ENOENT`/`ENODEV` on a cgroup is
//! decided in one place to mean "gone": [`CgroupFs::sample`] returns `Ok(None)`, the
//! writers return [`Written::Gone`] / [`Reclaimed::Gone`]. Every other failure is an
//! [`Error`] that names the path and says what to do.
//!
//! # What is never written
//!
//! There is deliberately no writer for `memory.max` (or `memory.min`): the daemon
//! throttles with `memory.high` and protects with `memory.low`, both of which the
//! kernel enforces without OOM kills. Hitting `memory.max` invokes the OOM killer, so
//! memweight must never set it; keeping the function out of this crate makes that a
//! compile-time fact. All writes open existing files only (`create(false)`).
//!
//! # Example
//!
//! ```no_run
//! use memweight_cgroupfs::{CgroupFs, Limit, Written};
//!
//! # fn main() -> Result<(), memweight_cgroupfs::Error> {
//! let cgroups = CgroupFs::new("/sys/fs/cgroup")?;
//! cgroups.check_v2()?;
//! for rel in cgroups.walk(2)? {
//!     let Some(sample) = cgroups.sample(&rel)? else { continue }; // removed meanwhile
//!     if sample.current > 1 << 30 {
//!         match cgroups.write_high(&rel, Limit::Bytes(1 << 30))? {
//!             Written::Done => {}
//!             Written::Gone => continue,
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```

mod cgroup;
mod error;
pub mod parse;
mod proc;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use cgroup::{CgroupFs, CgroupSample, Reclaimed, SAMPLE_FILES, Written};
pub use error::Error;
pub use parse::{Limit, MemoryEvents, MemoryStat, ParseError, Psi, PsiLine, Vmstat, Watermarks};
pub use proc::{HostSample, ProcFs, meminfo as parse_meminfo, multi_gen_lru};
