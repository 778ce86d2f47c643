//! Reading and writing cgroup v2 control files under an injected root.
//!
//! The rooms:
//!
//! * here: the hierarchy — [`CgroupFs`] at its root, the checks that it is cgroup v2 with the
//!   memory controller, names joined safely onto the root ([`CgroupFs::resolve`]), listing
//!   ([`CgroupFs::walk`], [`CgroupFs::children`]), a cgroup's id; and the one place that
//!   decides what "gone" means (`is_gone`, `wrap`), which the other rooms use;
//! * `read`: a cgroup's memory state ([`CgroupFs::sample`], [`CgroupFs::sample_light`],
//!   [`CgroupFs::pressure`]) through one reused buffer per thread (`Reader`, which
//!   [`crate::ProcFs`] uses for the host's PSI too); parsing is [`crate::parse`]'s;
//! * `write`: `memory.high`, `memory.low` and `memory.reclaim`, with existing files only
//!   (`create(false)`); there is no writer of `memory.max`;
//! * `tests`: the rooms' tests against fake trees (`crate::testing`).

mod read;
#[cfg(test)]
mod tests;
mod write;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::Error;

pub(crate) use read::Reader;
pub use read::{CgroupSample, SAMPLE_FILES};
pub use write::{Reclaimed, Written};

/// A cgroup v2 hierarchy rooted at a path given by the caller.
///
/// The root is normally `/sys/fs/cgroup` (passed in by `main`), a delegated subtree, a
/// lab VM's cgroupfs, or a tempdir in tests. All cgroup names are relative to it and
/// pass through [`CgroupFs::resolve`], so they cannot escape it.
///
/// Cheap to clone; holds no open files, so it can be shared with blocking tasks (a
/// write to `memory.high` or `memory.reclaim` may block in kernel reclaim).
#[derive(Debug, Clone)]
pub struct CgroupFs {
    root: PathBuf,
}

/// The one place that decides whether an I/O error means "the cgroup was removed".
///
/// `ENOENT` comes from opening a file or directory that no longer exists, `ENODEV` from
/// reading or writing a file that was open when its cgroup was removed. Everything
/// else is a real failure.
fn is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT | libc::ENODEV))
}

/// Converts a read result into "present", "gone" (`None`) or an error with the path.
fn wrap<T>(result: io::Result<T>, path: &Path) -> Result<Option<T>, Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(err) if is_gone(&err) => Ok(None),
        Err(source) => Err(Error::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Whether the whitespace-separated controller list `text` names `memory`.
fn lists_memory(text: &str) -> bool {
    text.split_ascii_whitespace().any(|c| c == "memory")
}

impl CgroupFs {
    /// A hierarchy rooted at `root`, which must be an existing directory.
    ///
    /// This does not check that it is cgroup v2; call [`CgroupFs::check_v2`] for that.
    ///
    /// # Errors
    ///
    /// [`Error::Root`] if `root` does not exist, cannot be inspected, or is not a
    /// directory.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, Error> {
        let root = root.into();
        match fs::metadata(&root) {
            Ok(meta) if meta.is_dir() => Ok(CgroupFs { root }),
            Ok(_) => Err(Error::Root {
                root,
                source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            }),
            Err(source) => Err(Error::Root { root, source }),
        }
    }

    /// The hierarchy's root directory.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks that the root is a cgroup v2 hierarchy whose controllers include `memory`.
    ///
    /// # Errors
    ///
    /// [`Error::NotCgroupV2`] if the root has no `cgroup.controllers`,
    /// [`Error::NoMemoryController`] if that file does not list `memory`, [`Error::Io`]
    /// if it cannot be read.
    pub fn check_v2(&self) -> Result<(), Error> {
        let path = self.root.join("cgroup.controllers");
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Err(Error::NotCgroupV2 {
                    root: self.root.clone(),
                });
            }
            Err(source) => return Err(Error::Io { path, source }),
        };
        if lists_memory(&text) {
            Ok(())
        } else {
            Err(Error::NoMemoryController { path })
        }
    }

    /// The parent's `cgroup.subtree_control` for the cgroup `rel`.
    fn parent_subtree_control(&self, rel: &str) -> Result<PathBuf, Error> {
        self.resolve(rel)?; // validate the whole name before using a part of it
        let mut path = match rel.rsplit_once('/') {
            Some((parent, _)) => self.resolve(parent)?,
            None => self.root.clone(),
        };
        path.push("cgroup.subtree_control");
        Ok(path)
    }

    /// Whether the memory controller is enabled for the cgroup `rel`, i.e. its parent's
    /// `cgroup.subtree_control` lists `memory` (so `rel/memory.current` exists).
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Io`] if the parent's
    /// `cgroup.subtree_control` cannot be read (including when the parent does not exist).
    pub fn memory_enabled_for(&self, rel: &str) -> Result<bool, Error> {
        let path = self.parent_subtree_control(rel)?;
        match fs::read_to_string(&path) {
            Ok(text) => Ok(lists_memory(&text)),
            Err(source) => Err(Error::Io { path, source }),
        }
    }

    /// Like [`CgroupFs::memory_enabled_for`], but a disabled controller is an
    /// [`Error::NoMemoryController`] naming the file to fix.
    ///
    /// # Errors
    ///
    /// As [`CgroupFs::memory_enabled_for`], plus [`Error::NoMemoryController`].
    pub fn require_memory_for(&self, rel: &str) -> Result<(), Error> {
        if self.memory_enabled_for(rel)? {
            Ok(())
        } else {
            Err(Error::NoMemoryController {
                path: self.parent_subtree_control(rel)?,
            })
        }
    }

    /// Joins the cgroup name `rel` (`/`-separated, relative) onto the root.
    ///
    /// Refuses anything that could leave the root or name something else: an empty
    /// name, an absolute path, empty, `.` or `..` components (so no leading, trailing or
    /// doubled `/`), and NUL bytes. It does not check that the cgroup exists.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] naming the refused input.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, Error> {
        let escape = || Error::Escape {
            name: rel.to_owned(),
        };
        if rel.is_empty() || rel.contains('\0') {
            return Err(escape());
        }
        let mut path = self.root.clone();
        for part in rel.split('/') {
            if part.is_empty() || part == "." || part == ".." {
                return Err(escape());
            }
            path.push(part);
        }
        Ok(path)
    }

    /// Relative, `/`-separated paths of all cgroups below the root, at most `max_depth`
    /// levels deep (1 = the root's children; 0 = nothing), sorted bytewise.
    ///
    /// Directories removed while the walk runs are skipped. Names that are not UTF-8
    /// are skipped (they cannot be matched by the configuration's globs).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the root or a directory cannot be listed for a reason other
    /// than having been removed.
    pub fn walk(&self, max_depth: usize) -> Result<Vec<String>, Error> {
        let mut found = Vec::new();
        let mut pending: Vec<(String, usize)> = vec![(String::new(), 0)];
        while let Some((rel, depth)) = pending.pop() {
            if depth >= max_depth {
                continue;
            }
            let Some(children) = self.list(&rel)? else {
                continue; // removed since its parent was listed
            };
            for child in children {
                pending.push((child.clone(), depth + 1));
                found.push(child);
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// The child cgroups of `rel` (`""`: the root's), sorted, as paths relative to the root;
    /// `Ok(None)` if `rel` is gone. Names that are not UTF-8 are skipped.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Io`] if the directory cannot be listed for a
    /// reason other than having been removed.
    pub fn children(&self, rel: &str) -> Result<Option<Vec<String>>, Error> {
        let mut found = self.list(rel)?;
        if let Some(f) = &mut found {
            f.sort_unstable();
        }
        Ok(found)
    }

    /// The child directories of `rel` in listing order; `Ok(None)` if it was removed (the root
    /// vanishing is an error: that is not a container exiting).
    ///
    /// # Errors
    ///
    /// As [`CgroupFs::children`].
    fn list(&self, rel: &str) -> Result<Option<Vec<String>>, Error> {
        let dir = if rel.is_empty() {
            self.root.clone()
        } else {
            self.resolve(rel)?
        };
        let listing = fs::read_dir(&dir);
        let listing = if rel.is_empty() {
            listing.map(Some).map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })
        } else {
            wrap(listing, &dir)
        };
        let Some(entries) = listing? else {
            return Ok(None);
        };
        let mut found = Vec::new();
        for entry in entries {
            let Some(entry) = wrap(entry, &dir)? else {
                break;
            };
            let Some(file_type) = wrap(entry.file_type(), &entry.path())? else {
                continue;
            };
            if !file_type.is_dir() {
                continue;
            }
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                tracing::debug!(dir = %dir.display(), name = ?name, "skipping cgroup with a non-UTF-8 name");
                continue;
            };
            found.push(if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            });
        }
        Ok(Some(found))
    }

    /// The cgroup's id: the inode number of its directory, which on cgroupfs is the kernel's
    /// cgroup id (what `name_to_handle_at` and BPF report). A cgroup removed and created
    /// again under the same name gets a new id, so the id tells "the same cgroup" from "a
    /// new one with the old name". `Ok(None)` if the cgroup does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Io`] if the directory cannot be inspected
    /// for a reason other than having been removed.
    pub fn id(&self, rel: &str) -> Result<Option<u64>, Error> {
        use std::os::unix::fs::MetadataExt as _;
        let dir = self.resolve(rel)?;
        Ok(wrap(fs::metadata(&dir), &dir)?.map(|m| m.ino()))
    }
}
