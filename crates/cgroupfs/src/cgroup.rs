//! Reading and writing cgroup v2 control files under an injected root.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::Error;
use crate::parse::{self, Limit, MemoryEvents, MemoryStat, ParseError, Psi};

/// The files [`CgroupFs::sample`] reads for one cgroup, in the order it reads them (the lab's
/// bare sampler and the tick benchmark read the same ones).
pub const SAMPLE_FILES: [&str; 10] = [
    "memory.current",
    "memory.stat",
    "memory.events",
    "memory.pressure",
    "memory.swap.current",
    "memory.swap.max",
    "memory.high",
    "memory.low",
    "memory.min",
    "memory.max",
];

/// Bytes reserved up front for a file's text; `memory.stat` is the largest (~1.5 KiB).
const READ_BUFFER: usize = 4096;

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

/// One cgroup's memory state, read in one [`CgroupFs::sample`] call.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupSample {
    /// `memory.current`: bytes charged to the cgroup and its descendants.
    pub current: u64,
    /// `memory.stat`.
    pub stat: MemoryStat,
    /// `memory.pressure`; `None` when PSI is absent or disabled (`psi=0`).
    pub pressure: Option<Psi>,
    /// `memory.events`.
    pub events: MemoryEvents,
    /// `memory.swap.current`; `None` when the kernel has no swap accounting.
    pub swap_current: Option<u64>,
    /// `memory.swap.max`; `None` when the kernel has no swap accounting.
    pub swap_max: Option<Limit>,
    /// `memory.high`: the throttling limit memweightd adjusts.
    pub high: Limit,
    /// `memory.low`: best-effort protection (the kernel accepts `max` here too).
    pub low: Limit,
    /// `memory.min`: hard protection (the kernel accepts `max` here too).
    pub min: Limit,
    /// `memory.max`: the hard limit. Read only; memweightd never writes it.
    pub max: Limit,
}

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
fn reclaim_outcome(err: &io::Error) -> Option<Reclaimed> {
    match err.raw_os_error()? {
        libc::EAGAIN => Some(Reclaimed::Partial),
        libc::EINVAL => Some(Reclaimed::Unsupported),
        libc::ENODEV => Some(Reclaimed::Gone),
        _ => None,
    }
}

/// Whether the whitespace-separated controller list `text` names `memory`.
fn lists_memory(text: &str) -> bool {
    text.split_ascii_whitespace().any(|c| c == "memory")
}

/// Reads one cgroup's files into one reused buffer.
pub(crate) struct Reader {
    /// The cgroup directory; a file name is pushed and popped around each read.
    path: PathBuf,
    /// Zero-filled scratch space; only the length [`read_file`] returns is meaningful. Taken
    /// from the thread's [`SCRATCH`] and given back on drop, so that sampling thousands of
    /// cgroups a tick allocates and zeroes it once per thread, not once per cgroup.
    buf: Vec<u8>,
}

thread_local! {
    /// The scratch buffer [`Reader`]s of this thread share (one at a time; a second one
    /// alive at once gets a fresh buffer).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Reader {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        SCRATCH.with(|s| {
            if let Ok(mut s) = s.try_borrow_mut()
                && s.len() < buf.len()
            {
                *s = buf;
            }
        });
    }
}

/// Reads the whole file at `path` into `buf`, growing it if needed; returns the length.
///
/// Unlike `fs::read_to_string`, this does not ask for the file size first (an `fstat`
/// and an `lseek` per file, useless on kernfs where sizes are 0 or 4096), so a file
/// costs `open`, two `read`s and `close`.
fn read_file(path: &Path, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut file = fs::File::open(path)?;
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            buf.resize(buf.len().max(READ_BUFFER) * 2, 0);
        }
        match file.read(&mut buf[filled..]) {
            Ok(0) => return Ok(filled),
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
}

impl Reader {
    pub(crate) fn new(dir: PathBuf) -> Self {
        let mut buf = SCRATCH
            .with(|s| s.try_borrow_mut().map(|mut s| std::mem::take(&mut *s)))
            .unwrap_or_default();
        if buf.len() < READ_BUFFER {
            buf = vec![0; READ_BUFFER];
        }
        Reader { path: dir, buf }
    }

    /// Reads `name` and parses it; `Ok(None)` if it (or the cgroup) is absent.
    pub(crate) fn read<T>(
        &mut self,
        name: &str,
        parse: fn(&str) -> Result<T, ParseError>,
    ) -> Result<Option<T>, Error> {
        let dir_len = self.path.as_os_str().len();
        self.path.push(name);
        let result = self.read_parse(parse);
        // Back to the directory without `PathBuf::pop`, which parses the components again
        // (a twentieth of a tick over 1,000 idle cgroups, by callgrind): the moves below do
        // not allocate.
        use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
        debug_assert!(self.path.as_os_str().as_bytes().len() > dir_len);
        let mut bytes = std::mem::take(&mut self.path).into_os_string().into_vec();
        bytes.truncate(dir_len);
        self.path = PathBuf::from(std::ffi::OsString::from_vec(bytes));
        result
    }

    fn read_parse<T>(
        &mut self,
        parse: fn(&str) -> Result<T, ParseError>,
    ) -> Result<Option<T>, Error> {
        let Some(len) = wrap(read_file(&self.path, &mut self.buf), &self.path)? else {
            return Ok(None);
        };
        let text = std::str::from_utf8(&self.buf[..len]).map_err(|err| Error::Parse {
            path: self.path.clone(),
            what: format!("the content is not UTF-8 ({err})"),
        })?;
        parse(text).map(Some).map_err(|err| Error::Parse {
            path: self.path.clone(),
            what: err.to_string(),
        })
    }

    /// Like [`Reader::read`], but PSI turned off at boot (`EOPNOTSUPP`) also reads as
    /// absent.
    pub(crate) fn read_psi(&mut self, name: &str) -> Result<Option<Psi>, Error> {
        match self.read(name, parse::psi) {
            Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                Ok(None)
            }
            other => other,
        }
    }
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

    /// Reads cgroup `rel`'s `memory.pressure`: `Ok(None)` if the cgroup is gone or the kernel
    /// has no PSI.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Io`] or [`Error::Parse`] if the file cannot
    /// be read or parsed.
    pub fn pressure(&self, rel: &str) -> Result<Option<Psi>, Error> {
        Reader::new(self.resolve(rel)?).read_psi("memory.pressure")
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

    /// Reads the memory state of cgroup `rel`; `Ok(None)` if it does not exist or was
    /// removed while being read.
    ///
    /// Optional files (`memory.pressure`, `memory.swap.*`) are read before the last
    /// required ones, so a cgroup removed in between is still reported as gone rather
    /// than as a sample with missing parts.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Io`] for a read failure other than
    /// removal, [`Error::Parse`] for a file with unexpected content.
    pub fn sample(&self, rel: &str) -> Result<Option<CgroupSample>, Error> {
        let mut reader = Reader::new(self.resolve(rel)?);
        let Some(current) = reader.read("memory.current", parse::single_u64)? else {
            return Ok(None);
        };
        let Some(stat) = reader.read("memory.stat", MemoryStat::parse)? else {
            return Ok(None);
        };
        let Some(events) = reader.read("memory.events", MemoryEvents::parse)? else {
            return Ok(None);
        };
        let pressure = reader.read_psi("memory.pressure")?;
        let swap_current = reader.read("memory.swap.current", parse::single_u64)?;
        let swap_max = reader.read("memory.swap.max", parse::limit)?;
        let Some(high) = reader.read("memory.high", parse::limit)? else {
            return Ok(None);
        };
        let Some(low) = reader.read("memory.low", parse::limit)? else {
            return Ok(None);
        };
        let Some(min) = reader.read("memory.min", parse::limit)? else {
            return Ok(None);
        };
        let Some(max) = reader.read("memory.max", parse::limit)? else {
            return Ok(None);
        };
        Ok(Some(CgroupSample {
            current,
            stat,
            pressure,
            events,
            swap_current,
            swap_max,
            high,
            low,
            min,
            max,
        }))
    }

    /// Reads `memory.current`, `memory.high` and `memory.low` of cgroup `rel` (what changes
    /// from tick to tick in a steady cgroup): `Ok(None)` if the cgroup is gone.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Io`] or [`Error::Parse`] if a file cannot
    /// be read or parsed.
    pub fn sample_light(&self, rel: &str) -> Result<Option<(u64, Limit, Limit)>, Error> {
        let mut reader = Reader::new(self.resolve(rel)?);
        let Some(current) = reader.read("memory.current", parse::single_u64)? else {
            return Ok(None);
        };
        let Some(high) = reader.read("memory.high", parse::limit)? else {
            return Ok(None);
        };
        let Some(low) = reader.read("memory.low", parse::limit)? else {
            return Ok(None);
        };
        Ok(Some((current, high, low)))
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeCgroup;
    use tempfile::TempDir;

    const WEB: &str = "machine.slice/web.scope";

    fn tree() -> (TempDir, CgroupFs, FakeCgroup) {
        let dir = tempfile::tempdir().expect("tempdir");
        let web = FakeCgroup::new(dir.path(), WEB);
        let cgroups = CgroupFs::new(dir.path()).expect("root exists");
        (dir, cgroups, web)
    }

    #[test]
    fn new_refuses_missing_root_and_plain_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope");
        assert!(matches!(CgroupFs::new(&missing), Err(Error::Root { .. })));
        let file = dir.path().join("file");
        fs::write(&file, "").expect("write file");
        let err = CgroupFs::new(&file).expect_err("a file is not a root");
        assert!(err.to_string().contains("file"), "names the path: {err}");
    }

    #[test]
    fn check_v2_accepts_memory_and_explains_failures() {
        let (dir, cgroups, _web) = tree();
        assert!(cgroups.check_v2().is_ok());
        assert_eq!(cgroups.root(), dir.path());

        fs::write(dir.path().join("cgroup.controllers"), "cpu io pids\n").expect("write");
        let err = cgroups.check_v2().expect_err("memory missing");
        assert!(matches!(err, Error::NoMemoryController { .. }));
        assert!(
            err.to_string().contains("+memory"),
            "says what to do: {err}"
        );

        fs::remove_file(dir.path().join("cgroup.controllers")).expect("remove");
        let err = cgroups.check_v2().expect_err("not v2");
        assert!(matches!(err, Error::NotCgroupV2 { .. }));
        assert!(
            err.to_string().contains("mount -t cgroup2"),
            "says what to do: {err}"
        );
    }

    #[test]
    fn memory_enabled_for_reads_the_parents_subtree_control() {
        let (dir, cgroups, _web) = tree();
        assert_eq!(cgroups.memory_enabled_for(WEB).ok(), Some(true));
        assert_eq!(cgroups.memory_enabled_for("machine.slice").ok(), Some(true));

        let parent = dir.path().join("machine.slice/cgroup.subtree_control");
        fs::write(&parent, "cpu\n").expect("write");
        assert_eq!(cgroups.memory_enabled_for(WEB).ok(), Some(false));
        match cgroups.require_memory_for(WEB) {
            Err(Error::NoMemoryController { path }) => assert_eq!(path, parent),
            other => panic!("expected NoMemoryController, got {other:?}"),
        }
        assert!(cgroups.require_memory_for("machine.slice").is_ok());
        assert!(matches!(
            cgroups.memory_enabled_for("missing/child"),
            Err(Error::Io { .. })
        ));
        assert!(matches!(
            cgroups.memory_enabled_for("../x"),
            Err(Error::Escape { .. })
        ));
    }

    #[test]
    fn resolve_stays_inside_the_root() {
        let (dir, cgroups, _web) = tree();
        assert_eq!(
            cgroups.resolve("a/b.scope").ok(),
            Some(dir.path().join("a").join("b.scope"))
        );
        for bad in [
            "",
            "/",
            "/etc",
            "..",
            ".",
            "a/..",
            "../a",
            "a/../../b",
            "a//b",
            "a/",
            "./a",
            "a\0b",
        ] {
            assert!(
                matches!(cgroups.resolve(bad), Err(Error::Escape { ref name }) if name == bad),
                "{bad:?} must be refused"
            );
        }
    }

    #[test]
    fn id_changes_when_a_cgroup_is_recreated() {
        let (dir, cgroups, web) = tree();
        let first = cgroups.id(WEB).expect("readable").expect("exists");
        assert_eq!(cgroups.id(WEB).expect("readable"), Some(first), "stable");
        // The old directory is moved aside before the new one is made, so that a file
        // system that reuses inode numbers (ext4; kernfs never does) cannot hand it back.
        let aside = dir.path().join("machine.slice/old");
        fs::rename(web.path(), &aside).expect("move aside");
        assert_eq!(cgroups.id(WEB).expect("gone is not an error"), None);
        let _again = FakeCgroup::new(dir.path(), WEB);
        let second = cgroups.id(WEB).expect("readable").expect("exists");
        assert_ne!(first, second);
        fs::remove_dir_all(aside).expect("remove");
        assert!(cgroups.id("../x").is_err());
    }

    #[test]
    fn walk_lists_cgroup_dirs_sorted_to_depth() {
        let (dir, cgroups, _web) = tree();
        FakeCgroup::new(dir.path(), "machine.slice/db.scope/inner");
        FakeCgroup::new(dir.path(), "system.slice");
        assert_eq!(cgroups.walk(0).ok(), Some(vec![]));
        assert_eq!(
            cgroups.walk(1).ok(),
            Some(vec!["machine.slice".to_owned(), "system.slice".to_owned()])
        );
        assert_eq!(
            cgroups.walk(2).ok(),
            Some(vec![
                "machine.slice".to_owned(),
                "machine.slice/db.scope".to_owned(),
                "machine.slice/web.scope".to_owned(),
                "system.slice".to_owned(),
            ])
        );
        let deep = cgroups.walk(10).expect("walk");
        assert!(deep.contains(&"machine.slice/db.scope/inner".to_owned()));
        assert!(
            !deep.iter().any(|p| p.contains("memory.")),
            "files are not cgroups"
        );
    }

    #[test]
    fn walk_reports_a_vanished_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("cg");
        fs::create_dir(&root).expect("mkdir");
        let cgroups = CgroupFs::new(&root).expect("root exists");
        fs::remove_dir(&root).expect("rmdir");
        assert!(matches!(cgroups.walk(1), Err(Error::Io { .. })));
    }

    #[test]
    fn sample_reads_every_file() {
        let (_dir, cgroups, web) = tree();
        web.set_current(300 << 20);
        web.set_stat(200 << 20, 90 << 20);
        web.set_pressure(12.5, 3.25);
        web.set_events(MemoryEvents {
            high: 7,
            oom_kill: 1,
            ..MemoryEvents::default()
        });
        web.set_swap_current(5 << 20);
        web.set_swap_max(Limit::Bytes(1 << 30));
        web.set_high(Limit::Bytes(400 << 20));
        web.set_low(Limit::Bytes(100 << 20));
        web.set_min(Limit::Max);
        web.set_max(Limit::Bytes(512 << 20));

        let sample = cgroups.sample(WEB).expect("readable").expect("present");
        assert_eq!(sample.current, 300 << 20);
        assert_eq!(sample.stat.anon, 200 << 20);
        assert_eq!(sample.stat.file, 90 << 20);
        let psi = sample.pressure.expect("pressure present");
        assert!((psi.some.avg10 - 12.5).abs() < 1e-9);
        assert!((psi.full.expect("full line").avg10 - 3.25).abs() < 1e-9);
        assert_eq!(sample.events.high, 7);
        assert_eq!(sample.events.oom_kill, 1);
        assert_eq!(sample.swap_current, Some(5 << 20));
        assert_eq!(sample.swap_max, Some(Limit::Bytes(1 << 30)));
        assert_eq!(sample.high, Limit::Bytes(400 << 20));
        assert_eq!(sample.low, Limit::Bytes(100 << 20));
        assert_eq!(sample.min, Limit::Max);
        assert_eq!(sample.max, Limit::Bytes(512 << 20));
    }

    #[test]
    fn sample_of_fresh_cgroup_reads_max_limits() {
        let (_dir, cgroups, _web) = tree();
        let sample = cgroups.sample(WEB).expect("readable").expect("present");
        assert_eq!(sample.high, Limit::Max);
        assert_eq!(sample.max, Limit::Max);
        assert_eq!(sample.swap_max, Some(Limit::Max));
        assert_eq!(sample.low, Limit::Bytes(0));
    }

    #[test]
    fn sample_treats_optional_files_as_optional() {
        let (_dir, cgroups, web) = tree();
        for name in ["memory.pressure", "memory.swap.current", "memory.swap.max"] {
            web.remove_file(name);
        }
        let sample = cgroups.sample(WEB).expect("readable").expect("present");
        assert_eq!(sample.pressure, None);
        assert_eq!(sample.swap_current, None);
        assert_eq!(sample.swap_max, None);
    }

    #[test]
    fn sample_of_removed_or_unknown_cgroup_is_none() {
        let (_dir, cgroups, web) = tree();
        web.remove();
        assert_eq!(cgroups.sample(WEB).ok(), Some(None));
        assert_eq!(cgroups.sample("never/was").ok(), Some(None));
    }

    #[test]
    fn sample_with_required_file_missing_is_gone() {
        // Removal racing the read: the directory is half torn down.
        let (_dir, cgroups, web) = tree();
        web.remove_file("memory.max");
        assert_eq!(cgroups.sample(WEB).ok(), Some(None));
    }

    #[test]
    fn sample_names_the_malformed_file() {
        for (name, text) in [
            ("memory.current", "max\n"),
            ("memory.stat", "anon\n"),
            ("memory.events", "oom x\n"),
            ("memory.pressure", "some avg10=1\n"),
            ("memory.swap.current", "-1\n"),
            ("memory.high", "\n"),
            ("memory.low", "1 2\n"),
        ] {
            let (_dir, cgroups, web) = tree();
            web.write_file(name, text);
            match cgroups.sample(WEB) {
                Err(Error::Parse { path, .. }) => assert!(path.ends_with(name), "{path:?}"),
                other => panic!("{name} = {text:?}: expected a parse error, got {other:?}"),
            }
        }
    }

    #[test]
    fn sample_reports_io_errors_other_than_removal() {
        let (_dir, cgroups, web) = tree();
        web.remove_file("memory.stat");
        fs::create_dir(web.path().join("memory.stat")).expect("mkdir");
        match cgroups.sample(WEB) {
            Err(err @ Error::Io { .. }) => assert!(err.to_string().contains("memory.stat")),
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }

    #[test]
    fn write_high_and_low_write_the_value() {
        let (_dir, cgroups, web) = tree();
        assert!(matches!(
            cgroups.write_high(WEB, Limit::Bytes(123_456)),
            Ok(Written::Done)
        ));
        assert_eq!(web.read_high(), "123456");
        // A shorter value replaces a longer one entirely.
        assert!(matches!(
            cgroups.write_high(WEB, Limit::Max),
            Ok(Written::Done)
        ));
        assert_eq!(web.read_high(), "max");
        assert!(matches!(
            cgroups.write_low(WEB, Limit::Bytes(1 << 20)),
            Ok(Written::Done)
        ));
        assert_eq!(web.read_low(), "1048576");
        assert!(matches!(
            cgroups.write_low(WEB, Limit::Max),
            Ok(Written::Done)
        ));
        assert_eq!(web.read_low(), "max");
        assert_eq!(web.read_max(), "max", "memory.max is never touched");
    }

    #[test]
    fn write_into_removed_cgroup_is_gone() {
        let (_dir, cgroups, web) = tree();
        web.remove();
        assert!(matches!(
            cgroups.write_high(WEB, Limit::Max),
            Ok(Written::Gone)
        ));
        assert!(matches!(
            cgroups.write_low(WEB, Limit::Bytes(0)),
            Ok(Written::Gone)
        ));
        assert!(!web.path().exists(), "nothing was created");
    }

    #[test]
    fn write_never_creates_a_missing_control_file() {
        let (_dir, cgroups, web) = tree();
        web.remove_file("memory.high");
        assert!(matches!(
            cgroups.write_high(WEB, Limit::Max),
            Ok(Written::Gone)
        ));
        assert!(!web.path().join("memory.high").exists());
    }

    #[test]
    fn write_error_keeps_path_and_data() {
        let (_dir, cgroups, web) = tree();
        web.remove_file("memory.high");
        fs::create_dir(web.path().join("memory.high")).expect("mkdir");
        match cgroups.write_high(WEB, Limit::Bytes(4096)) {
            Err(Error::Write { path, data, .. }) => {
                assert!(path.ends_with("memory.high"));
                assert_eq!(data, "4096");
            }
            other => panic!("expected a write error, got {other:?}"),
        }
        assert!(matches!(
            cgroups.write_high("../etc", Limit::Max),
            Err(Error::Escape { .. })
        ));
    }

    #[test]
    fn reclaim_writes_the_request() {
        let (_dir, cgroups, web) = tree();
        assert_eq!(cgroups.reclaim(WEB, 50 << 20).ok(), Some(Reclaimed::Done));
        assert_eq!(web.take_reclaim(), Some(50 << 20));
        assert_eq!(web.take_reclaim(), None);
    }

    #[test]
    fn reclaim_distinguishes_old_kernel_from_removed_cgroup() {
        let (_dir, cgroups, web) = tree();
        web.remove_file("memory.reclaim");
        assert_eq!(cgroups.reclaim(WEB, 1).ok(), Some(Reclaimed::Unsupported));
        assert!(!web.path().join("memory.reclaim").exists());
        web.remove();
        assert_eq!(cgroups.reclaim(WEB, 1).ok(), Some(Reclaimed::Gone));
    }

    #[test]
    fn reclaim_error_keeps_path_and_data() {
        let (_dir, cgroups, web) = tree();
        web.remove_file("memory.reclaim");
        fs::create_dir(web.path().join("memory.reclaim")).expect("mkdir");
        match cgroups.reclaim(WEB, 77) {
            Err(Error::Write { path, data, .. }) => {
                assert!(path.ends_with("memory.reclaim"));
                assert_eq!(data, "77");
            }
            other => panic!("expected a write error, got {other:?}"),
        }
    }

    #[test]
    fn reclaim_outcome_maps_kernel_errnos() {
        let errno = io::Error::from_raw_os_error;
        assert_eq!(
            reclaim_outcome(&errno(libc::EAGAIN)),
            Some(Reclaimed::Partial)
        );
        assert_eq!(
            reclaim_outcome(&errno(libc::EINVAL)),
            Some(Reclaimed::Unsupported)
        );
        assert_eq!(reclaim_outcome(&errno(libc::ENODEV)), Some(Reclaimed::Gone));
        assert_eq!(reclaim_outcome(&errno(libc::EACCES)), None);
        assert_eq!(
            reclaim_outcome(&errno(libc::ENOENT)),
            None,
            "needs a look at the dir"
        );
    }

    #[test]
    fn sample_reads_files_larger_than_the_buffer() {
        let (_dir, cgroups, web) = tree();
        let padding: String = (0..2000).map(|i| format!("future_key_{i} {i}\n")).collect();
        web.write_file("memory.stat", &format!("{padding}anon 42\n"));
        let sample = cgroups.sample(WEB).expect("readable").expect("present");
        assert_eq!(sample.stat.anon, 42);
    }

    #[test]
    fn sample_rejects_non_utf8() {
        let (_dir, cgroups, web) = tree();
        fs::write(web.path().join("memory.current"), b"\xff\n").expect("write");
        assert!(matches!(cgroups.sample(WEB), Err(Error::Parse { .. })));
    }

    #[test]
    fn gone_means_enoent_or_enodev_only() {
        let errno = io::Error::from_raw_os_error;
        assert!(is_gone(&errno(libc::ENOENT)));
        assert!(is_gone(&errno(libc::ENODEV)));
        assert!(!is_gone(&errno(libc::EACCES)));
        assert!(!is_gone(&errno(libc::EBUSY)));
        assert!(!is_gone(&io::Error::other("no errno")));
    }
}
