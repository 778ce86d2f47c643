//! A cgroup's memory state: [`CgroupFs::sample`] (the ten files of [`SAMPLE_FILES`]),
//! [`CgroupFs::sample_light`] (the three that change in a steady cgroup) and
//! [`CgroupFs::pressure`], read through a `Reader` whose buffer each thread reuses.
//!
//! Not here: parsing the files' formats ([`crate::parse`]), what "gone" means (the parent
//! room's `wrap`), writes (`write`).

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::{CgroupFs, wrap};
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

    /// Reads cgroup `rel`'s `memory.current` alone: `Ok(None)` if the cgroup is gone.
    ///
    /// # Errors
    ///
    /// [`Error::Escape`] for a bad name, [`Error::Io`] or [`Error::Parse`] if the file cannot
    /// be read or parsed.
    pub fn current(&self, rel: &str) -> Result<Option<u64>, Error> {
        Reader::new(self.resolve(rel)?).read("memory.current", parse::single_u64)
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
}
