//! The writes: `memory.high` ([`CgroupFs::write_high`], without blocking where the kernel
//! allows), `memory.low` ([`CgroupFs::write_low`]) and `memory.reclaim`
//! ([`CgroupFs::reclaim`]), each opening an existing file only; what their errors mean
//! ([`Written`], [`Reclaimed`]).
//!
//! Not here, on purpose: any writer of `memory.max` or `memory.min`.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use super::{CgroupFs, is_gone, wrap};
use crate::Error;
use crate::parse::Limit;

/// Outcome of a successful control-file write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The kernel accepted the value.
    Done,
    /// The cgroup was removed (`ENOENT`/`ENODEV`); nothing to do.
    Gone,
}

/// Outcome of a `memory.reclaim` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaimed {
    /// The kernel reclaimed at least the requested amount.
    Done,
    /// `EAGAIN`: the kernel could not reclaim it all; usage is still above the goal.
    Partial,
    /// The cgroup was removed (`ENOENT`/`ENODEV`).
    Gone,
    /// The kernel has no `memory.reclaim` (before 5.19) or refused the request with
    /// `EINVAL`; fall back to `memory.high`.
    Unsupported,
}

/// Opens an existing control file and writes `data` in one go.
///
/// `create(false)`: a control file that does not exist means the cgroup is gone or the
/// kernel lacks it; creating a regular file in its place would hide that. `truncate`
/// matches what a shell's `>` does, which kernfs accepts and ignores.
fn write_control(path: &Path, data: &str) -> io::Result<()> {
    write_control_flags(path, data, 0)
}

/// [`write_control`] with extra `open(2)` flags.
fn write_control_flags(path: &Path, data: &str, flags: i32) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = OpenOptions::new()
        .write(true)
        .create(false)
        .truncate(true)
        .custom_flags(flags)
        .open(path)?;
    file.write_all(data.as_bytes())
}

/// What a `memory.reclaim` write error means, if it is not a failure; `ENOENT` is
/// left to the caller, which must look at the cgroup directory to tell an old kernel
/// from a removed cgroup.
pub(super) fn reclaim_outcome(err: &io::Error) -> Option<Reclaimed> {
    match err.raw_os_error()? {
        libc::EAGAIN => Some(Reclaimed::Partial),
        libc::EINVAL => Some(Reclaimed::Unsupported),
        libc::ENODEV => Some(Reclaimed::Gone),
        _ => None,
    }
}

impl CgroupFs {
    /// Writes `data` to the control file `name` of cgroup `rel`.
    fn write(&self, rel: &str, name: &str, data: &str) -> Result<Written, Error> {
        self.write_flags(rel, name, data, 0)
    }

    /// [`CgroupFs::write`] with extra `open(2)` flags.
    fn write_flags(&self, rel: &str, name: &str, data: &str, flags: i32) -> Result<Written, Error> {
        let mut path = self.resolve(rel)?;
        path.push(name);
        match write_control_flags(&path, data, flags) {
            Ok(()) => Ok(Written::Done),
            Err(err) if is_gone(&err) => Ok(Written::Gone),
            Err(source) => Err(Error::Write {
                path,
                data: data.to_owned(),
                source,
            }),
        }
    }

    /// Sets `memory.high` of cgroup `rel`.
    ///
    /// May block while the kernel reclaims down to the new value; call it off the
    /// control loop's thread.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Write`] if the kernel refuses.
    pub fn write_high(&self, rel: &str, value: Limit) -> Result<Written, Error> {
        // O_NONBLOCK: kernels with the 2025 patch "memcg: introduce non-blocking limit
        // setting option" set the limit without reclaiming down to it in the writer, so the
        // write never blocks (the cgroup's own allocations still meet the limit, and the
        // daemon reclaims with memory.reclaim); kernels without it ignore the flag on cgroup
        // files and reclaim in the write as before (docs/design.md, "Writes never stall").
        self.write_flags(rel, "memory.high", &value.to_string(), libc::O_NONBLOCK)
    }

    /// Sets `memory.low` of cgroup `rel`.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Write`] if the kernel refuses.
    pub fn write_low(&self, rel: &str, value: Limit) -> Result<Written, Error> {
        self.write(rel, "memory.low", &value.to_string())
    }

    /// Asks the kernel to reclaim `bytes` from cgroup `rel` now (`memory.reclaim`,
    /// Linux 5.19+). Blocks for as long as the reclaim takes.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Write`] for failures other than
    /// `EAGAIN` (partial), `EINVAL` (unsupported) and removal.
    pub fn reclaim(&self, rel: &str, bytes: u64) -> Result<Reclaimed, Error> {
        let dir = self.resolve(rel)?;
        let path = dir.join("memory.reclaim");
        let data = bytes.to_string();
        let Err(err) = write_control(&path, &data) else {
            return Ok(Reclaimed::Done);
        };
        if let Some(outcome) = reclaim_outcome(&err) {
            return Ok(outcome);
        }
        if err.raw_os_error() == Some(libc::ENOENT) {
            // No memory.reclaim: an old kernel if the cgroup itself is still there.
            let current = dir.join("memory.current");
            return match wrap(fs::symlink_metadata(&current), &current)? {
                Some(_) => Ok(Reclaimed::Unsupported),
                None => Ok(Reclaimed::Gone),
            };
        }
        Err(Error::Write {
            path,
            data,
            source: err,
        })
    }
}
