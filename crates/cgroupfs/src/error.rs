//! The crate's one error type.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong reading or writing cgroupfs and procfs.
///
/// Every I/O variant carries the path it failed on, and every message ends with what
/// the operator can do about it. A cgroup that vanished is *not* an error: readers
/// return `Ok(None)` and writers [`crate::Written::Gone`] /
/// [`crate::Reclaimed::Gone`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configured cgroup root does not exist or is not a directory.
    #[error(
        "cgroup root {root} is not a usable directory: {source}; \
         set the cgroup root in the configuration to the cgroup2 mount point (normally /sys/fs/cgroup)"
    )]
    Root {
        /// The configured root.
        root: PathBuf,
        /// Why it could not be used.
        #[source]
        source: io::Error,
    },
    /// Reading a file or listing a directory failed for a reason other than the cgroup
    /// having been removed.
    #[error(
        "cannot read {path}: {source}; check that it exists and that memweightd runs as root \
         with read access to it (systemd: ReadWritePaths=)"
    )]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A kernel file did not have the expected format.
    #[error(
        "cannot parse {path}: {what}; is this a cgroup v2 / procfs file? \
         if the kernel changed the format, please report it with the file's content"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong with its content.
        what: String,
    },
    /// Writing a control file failed for a reason other than the cgroup having been
    /// removed.
    #[error(
        "cannot write {data:?} to {path}: {source}; check that memweightd runs as root with \
         write access to the cgroup tree (systemd: ReadWritePaths=) and that the kernel accepts the value"
    )]
    Write {
        /// The control file.
        path: PathBuf,
        /// What was being written.
        data: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A cgroup name would leave the cgroup root or is not a plain relative path.
    #[error(
        "cgroup name {name:?} is not a relative path inside the cgroup root \
         (absolute paths, `..`, `.`, empty components and NUL bytes are refused); \
         fix the name in the configuration or request"
    )]
    Escape {
        /// The refused name.
        name: String,
    },
    /// The root has no `cgroup.controllers`: it is not a cgroup v2 hierarchy.
    #[error(
        "{root} is not a cgroup v2 hierarchy (it has no cgroup.controllers); mount cgroup2 there \
         (`mount -t cgroup2 none {root}`) or boot with systemd.unified_cgroup_hierarchy=1 \
         so that the unified hierarchy is used"
    )]
    NotCgroupV2 {
        /// The configured root.
        root: PathBuf,
    },
    /// The memory controller is not available or not enabled where it is needed.
    #[error(
        "`memory` is not listed in {path}; enable the memory controller from the hierarchy root \
         down with `echo +memory > DIR/cgroup.subtree_control` for each ancestor DIR of the \
         managed cgroups, and check that the kernel does not keep memory on cgroup v1 \
         (cgroup_no_v1=memory)"
    )]
    NoMemoryController {
        /// The `cgroup.controllers` or `cgroup.subtree_control` file that lacks `memory`.
        path: PathBuf,
    },
}
