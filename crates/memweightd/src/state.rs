//! What must survive a restart: each managed cgroup's original `memory.high`/`memory.low`
//! (tied to the cgroup's id, so a cgroup recreated under the same name is not given another
//! one's original), and runtime weight overrides — also those of a container whose cgroup is
//! gone for a while, so that the container's own restart keeps them ([`Orphans`]).
//!
//! The file is JSON, replaced atomically (write to a temporary file in the same directory,
//! fsync, rename, fsync the directory), so a crash or `kill -9` leaves either the old or the new
//! state, never a torn one.
//!
//! **Two generations.** Before each replacement the file in place, if it is good (it loaded,
//! or this process wrote it), is kept as `state.json.prev` (a hard link moved into place by a
//! rename: there is always a complete `state.json`). A file found truncated or garbled at start
//! (a full disk, a filesystem that lost data, a hand edit) is then not fatal: [`StateStore::load`]
//! warns and uses the previous generation, with every whole entry that can still be read of the
//! corrupt file on top ([`salvage`]), so an original recorded in either is kept; the corrupt
//! file is never rotated over the good one. The previous generation lacks at most the last
//! change; a cgroup whose original is in neither is adopted afresh with what it holds. A
//! missing `state.json` is an empty state even when a `.prev` is there (moving the file aside
//! is how an operator starts fresh).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memweight_proto::cgroup_path;
use serde::{Deserialize, Serialize};
use tracing::warn;

/// File name inside the state directory.
pub const STATE_FILE: &str = "state.json";
/// The previous good generation of [`STATE_FILE`], in the same directory.
pub const PREV_FILE: &str = "state.json.prev";
/// Version of the file's layout. Version 2 added [`Original::id`]; version 1 files (no ids)
/// are read, and written back as version 2.
pub const STATE_VERSION: u32 = 2;

/// Errors reading or writing the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// I/O on the state file or directory.
    #[error("state file {path}: {source} (check that the state directory exists and is writable)")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file was written by a newer memweightd whose layout this one does not know.
    #[error(
        "state file {path} was written by a newer memweightd (version {found}); this one \
         understands {understood}: upgrade memweightd, or move the file away (the original \
         limits it recorded are then lost)"
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u64,
        /// [`STATE_VERSION`].
        understood: u32,
    },
    /// The writer thread's last write of the file failed ([`crate::state_writer`]): it tries
    /// again by itself.
    #[error(
        "state file {path} cannot be saved now ({message}); memweightd keeps trying: free space \
         in the state directory or fix its permissions"
    )]
    Unsaved {
        /// The file.
        path: PathBuf,
        /// Why the last write failed.
        message: String,
    },
    /// The file is not valid state JSON (nor is its previous generation, if there is one).
    #[error(
        "state file {path} is corrupt ({message}); move it aside to start fresh — the original limits it recorded are then lost"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
}

/// Why a state file's text was refused ([`parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// A layout version newer than [`STATE_VERSION`].
    Newer(u64),
    /// Anything else: not JSON, wrong shape, a path or a value the daemon must not use.
    Invalid(String),
}

impl ParseError {
    fn into_state_error(self, path: PathBuf) -> StateError {
        match self {
            ParseError::Newer(found) => StateError::Newer {
                path,
                found,
                understood: STATE_VERSION,
            },
            ParseError::Invalid(message) => StateError::Corrupt { path, message },
        }
    }
}

/// Parses a state file's text. Pure: no I/O, never panics, whatever the input.
///
/// The version is checked before the layout, so a newer file is named as such rather than as
/// corrupt. Every cgroup path must be a plain relative path below the root (no `..`, no `.`,
/// no empty component, not absolute) and every recorded limit must be `max` or a byte count:
/// a foreign or tampered file cannot steer the daemon's writes outside the cgroup tree or
/// make it write arbitrary text into a control file.
pub fn parse(text: &str) -> Result<State, ParseError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ParseError::Invalid(e.to_string()))?;
    match value.get("version") {
        None => {}
        Some(v) => match v.as_u64() {
            Some(found) if found > u64::from(STATE_VERSION) => {
                return Err(ParseError::Newer(found));
            }
            Some(_) => {}
            None => {
                return Err(ParseError::Invalid(format!(
                    "\"version\" must be a whole number, got {v}"
                )));
            }
        },
    }
    let state: State =
        serde_json::from_value(value).map_err(|e| ParseError::Invalid(e.to_string()))?;
    let paths = state
        .originals
        .keys()
        .chain(state.overrides.keys())
        .chain(state.ancestors.keys());
    for p in paths {
        cgroup_path::check(p).map_err(|e| ParseError::Invalid(e.to_string()))?;
    }
    let limits = state
        .originals
        .iter()
        .flat_map(|(p, o)| [(p, &o.high), (p, &o.low)])
        .chain(state.ancestors.iter());
    for (p, v) in limits {
        if memweight_cgroupfs::parse::limit(v).is_err() {
            return Err(ParseError::Invalid(format!(
                "recorded limit {v:?} of {p:?} is neither \"max\" nor a byte count"
            )));
        }
    }
    Ok(state)
}

/// What can still be read of a state file cut short (a lost tail): the longest prefix that
/// ends with a whole entry or map, as [`StateStore::save`] lays them out (an entry's `}` at
/// four spaces, a map's at two), closed with braces, that [`parse`] accepts. Only the last 32
/// such places are tried, so a large file costs a few parses. `None` for a file garbled
/// otherwise, or written by hand in another layout. Never panics.
#[must_use]
pub fn salvage(text: &str) -> Option<State> {
    let ends = text
        .match_indices('}')
        .map(|(i, _)| i)
        .filter(|&i| text[..i].ends_with("\n    ") || text[..i].ends_with("\n  "))
        .rev()
        .take(32);
    for i in ends {
        for closers in ["}", "}}", "}}}"] {
            let candidate = format!("{}{closers}", &text[..=i]);
            if let Ok(state) = parse(&candidate) {
                return Some(state);
            }
        }
    }
    None
}

/// A limit as the kernel prints it: a byte count or `max`, kept as the kernel's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Original {
    /// `memory.high` when the daemon adopted the cgroup (`"max"` or bytes).
    pub high: String,
    /// `memory.low` when the daemon adopted the cgroup.
    pub low: String,
    /// The cgroup's id (its directory's inode number on cgroupfs) when the original was
    /// recorded. `None` in files written before version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
}

/// A runtime override set with `memweightctl set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    /// Weight.
    pub weight: u32,
    /// Floor in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    /// Ceiling in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

/// The persisted state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// Layout version.
    #[serde(default)]
    pub version: u32,
    /// Original limits by cgroup path (relative to the root).
    #[serde(default)]
    pub originals: BTreeMap<String, Original>,
    /// Runtime overrides by cgroup path.
    #[serde(default)]
    pub overrides: BTreeMap<String, Override>,
    /// Original `memory.low` of ancestors of managed cgroups that the daemon raised so their
    /// descendants' protection takes effect.
    #[serde(default)]
    pub ancestors: BTreeMap<String, String>,
    /// The boot the cgroup ids in [`State::originals`] belong to
    /// (`/proc/sys/kernel/random/boot_id`): after a reboot every cgroup is new, ids start
    /// again, and no cgroup holds a limit the daemon wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// The state directory's lock (`flock` on `DIR/lock`), held by the daemon for its whole run
/// and by `memweightd --restore`: two processes never write the state file at once, and a
/// restore never takes originals away from a daemon that is still holding limits.
#[derive(Debug)]
pub struct StateLock {
    _file: nix::fcntl::Flock<fs::File>,
}

/// Why [`lock`] did not take the lock.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it: a daemon is running on this state directory.
    Held(PathBuf),
    /// The lock file cannot be created or locked (read-only, permissions, no flock).
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held(p) => write!(
                f,
                "{} is locked by another process: a memweightd is running on this state \
                 directory (stop it first: systemctl stop memweightd)",
                p.display()
            ),
            LockError::Io(p, e) => write!(f, "cannot lock {}: {e}", p.display()),
        }
    }
}

/// Takes the lock of state directory `dir` (created if missing) without waiting.
///
/// # Errors
///
/// [`LockError::Held`] when another process holds it, [`LockError::Io`] otherwise.
pub fn lock(dir: &Path) -> Result<StateLock, LockError> {
    use nix::fcntl::{Flock, FlockArg};
    let path = dir.join("lock");
    let io = |e| LockError::Io(path.clone(), e);
    fs::create_dir_all(dir).map_err(io)?;
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(file) => Ok(StateLock { _file: file }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(LockError::Held(path)),
        Err((_, e)) => Err(LockError::Io(path.clone(), e.into())),
    }
}

/// Reads and writes the state file in one directory, keeping its previous good generation.
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    /// The `state.json` in place is good (it loaded, or this store wrote it): the next save
    /// keeps it as [`PREV_FILE`]. A corrupt one is replaced without being kept, so that it
    /// never takes the place of the good previous generation.
    current_good: AtomicBool,
}

impl Clone for StateStore {
    fn clone(&self) -> Self {
        StateStore {
            dir: self.dir.clone(),
            current_good: AtomicBool::new(self.current_good.load(Ordering::SeqCst)),
        }
    }
}

impl StateStore {
    /// A store in `dir` (created on first save).
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateStore {
            dir: dir.into(),
            current_good: AtomicBool::new(true),
        }
    }

    /// The state file's path.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// The previous generation's path.
    #[must_use]
    pub fn prev_path(&self) -> PathBuf {
        self.dir.join(PREV_FILE)
    }

    /// Loads the state; a missing file is an empty state. A corrupt file (not JSON, truncated,
    /// a refused path or value) falls back to the previous generation, with a warning.
    ///
    /// # Errors
    ///
    /// The file cannot be read, is from a newer memweightd, or is corrupt and so is (or there
    /// is no) previous generation.
    pub fn load(&self) -> Result<State, StateError> {
        let path = self.path();
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::default()),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                // Not UTF-8: garbled like any other corrupt file.
                return self.fall_back(path, e.to_string(), None);
            }
            Err(source) => return Err(StateError::Io { path, source }),
        };
        match parse(&text) {
            Ok(state) => {
                self.current_good.store(true, Ordering::SeqCst);
                Ok(state)
            }
            Err(ParseError::Invalid(message)) => self.fall_back(path, message, Some(&text)),
            Err(e) => Err(e.into_state_error(path)),
        }
    }

    /// `state.json` is corrupt (`message`; `text`, if it is text): the previous generation,
    /// if it is good, with every entry that can still be read of the corrupt file on top
    /// ([`salvage`]: the newer of the two wherever both have one), so that an original
    /// recorded in either is kept.
    fn fall_back(
        &self,
        path: PathBuf,
        message: String,
        text: Option<&str>,
    ) -> Result<State, StateError> {
        self.current_good.store(false, Ordering::SeqCst);
        let salvaged = text.and_then(salvage);
        let prev = self.prev_path();
        let previous = match fs::read_to_string(&prev) {
            Ok(t) => parse(&t).map_err(|e| match e {
                ParseError::Newer(found) => format!(
                    "its previous generation {} is from a newer memweightd (version {found})",
                    prev.display()
                ),
                ParseError::Invalid(m) => format!(
                    "its previous generation {} is corrupt too ({m})",
                    prev.display()
                ),
            }),
            Err(e) => Err(format!(
                "no previous generation to use: {}: {e}",
                prev.display()
            )),
        };
        let read = salvaged.as_ref().map_or(0, |s| s.originals.len());
        match (previous, salvaged) {
            (Ok(mut state), salvaged) => {
                if let Some(s) = salvaged {
                    state.originals.extend(s.originals);
                    state.overrides.extend(s.overrides);
                    state.ancestors.extend(s.ancestors);
                }
                warn!(
                    file = %path.display(),
                    error = %message,
                    previous = %prev.display(),
                    originals = state.originals.len(),
                    read_from_the_corrupt_file = read,
                    "the state file is corrupt; using its previous generation, with what could \
                     still be read of it (a cgroup whose original is in neither is adopted \
                     afresh). The corrupt file is replaced at the next save; copy it away now \
                     to inspect it"
                );
                Ok(state)
            }
            (Err(why), Some(state)) => {
                warn!(
                    file = %path.display(),
                    error = %message,
                    previous = %why,
                    originals = state.originals.len(),
                    "the state file is corrupt and there is no good previous generation; using \
                     what could still be read of it (a cgroup whose original was cut off is \
                     adopted afresh)"
                );
                Ok(state)
            }
            (Err(why), None) => Err(StateError::Corrupt {
                path,
                message: format!("{message}; {why}"),
            }),
        }
    }

    /// Replaces the state file atomically, keeping the one in place (if good) as the previous
    /// generation.
    ///
    /// # Errors
    ///
    /// The directory, the new file or the rename failed; the file in place is then the
    /// previous one.
    pub fn save(&self, state: &State) -> Result<(), StateError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StateError::Io { path, source }
        };
        fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let path = self.path();
        let tmp = self.dir.join(format!(".{STATE_FILE}.tmp"));
        let mut body = serde_json::to_vec_pretty(&State {
            version: STATE_VERSION,
            ..state.clone()
        })
        .map_err(|e| StateError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        body.push(b'\n');
        {
            let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
            f.write_all(&body).map_err(io(&tmp))?;
            f.sync_all().map_err(io(&tmp))?;
        }
        if self.current_good.load(Ordering::SeqCst) {
            self.keep_previous(&path);
        }
        fs::rename(&tmp, &path).map_err(io(&path))?;
        self.current_good.store(true, Ordering::SeqCst);
        if let Ok(d) = fs::File::open(&self.dir) {
            // Persist the renames themselves; a failure here only weakens durability.
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Makes the file in place `state.json.prev`: a hard link under a temporary name renamed
    /// over the old `.prev`, so both names always hold a complete file. Best effort: without
    /// it the previous generation is only older.
    fn keep_previous(&self, path: &Path) {
        let link = self.dir.join(format!(".{PREV_FILE}.tmp"));
        let _ = fs::remove_file(&link);
        match fs::hard_link(path, &link) {
            Ok(()) => {
                if let Err(e) = fs::rename(&link, self.prev_path()) {
                    let _ = fs::remove_file(&link);
                    warn!(error = %e, dir = %self.dir.display(),
                        "cannot keep the previous generation of the state file");
                }
            }
            // Nothing in place yet: nothing to keep.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warn!(error = %e, dir = %self.dir.display(),
                "cannot keep the previous generation of the state file (hard link refused)"),
        }
    }
}

/// How long the runtime override of a container's cgroup outlives the cgroup. `podman
/// restart`, `docker restart` and a restart policy (`--restart=always` after an OOM kill) keep
/// the container's id, so its scope (`libpod-<id>.scope`, `docker-<id>.scope`) comes back
/// under the same path, after a few seconds or, with docker's growing restart delay, up to a
/// minute or so.
pub const OVERRIDE_GRACE: Duration = Duration::from_secs(600);
/// The most overrides of gone container cgroups kept at once; beyond it the longest gone go.
pub const ORPHANS_KEPT: usize = 256;

/// Runtime overrides of container cgroups that are gone, and since when: kept for
/// [`OVERRIDE_GRACE`] (at most [`ORPHANS_KEPT`] of them) so that a restarted container finds
/// its override again. A container id is never reused, so an override kept by a path with the
/// id in it can only apply to the same container. Pure: the caller says what is gone and when.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Orphans {
    since: BTreeMap<String, Instant>,
}

/// What [`Orphans::update`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrphanChanges {
    /// Gone since this update: kept for now.
    pub kept: Vec<String>,
    /// Gone before and back now: their override applies again.
    pub back: Vec<String>,
    /// Gone for [`OVERRIDE_GRACE`] or more, or beyond [`ORPHANS_KEPT`]: drop their override.
    pub expired: Vec<String>,
}

impl Orphans {
    /// Records that the cgroups in `gone` (paths of overrides whose cgroup does not exist) are
    /// gone at `now`, and says which came back, which are new and which expired (forgotten
    /// here).
    pub fn update(&mut self, gone: &BTreeSet<String>, now: Instant) -> OrphanChanges {
        let mut changes = OrphanChanges::default();
        self.since.retain(|p, _| {
            let still = gone.contains(p);
            if !still {
                changes.back.push(p.clone());
            }
            still
        });
        for p in gone {
            self.since.entry(p.clone()).or_insert_with(|| {
                changes.kept.push(p.clone());
                now
            });
        }
        let mut by_age: Vec<(Instant, &String)> = self.since.iter().map(|(p, t)| (*t, p)).collect();
        by_age.sort();
        let over = by_age.len().saturating_sub(ORPHANS_KEPT);
        changes.expired = by_age
            .iter()
            .enumerate()
            .filter(|(i, (t, _))| *i < over || now.saturating_duration_since(*t) >= OVERRIDE_GRACE)
            .map(|(_, (_, p))| (*p).clone())
            .collect();
        for p in &changes.expired {
            self.since.remove(p);
        }
        changes
    }

    /// How many are kept now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.since.len()
    }

    /// Whether none is kept.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.since.is_empty()
    }
}

/// A state holding one original, `max`/`0` for `path` with cgroup id `id` (tests).
#[cfg(test)]
pub(crate) fn one_original(path: &str, id: u64) -> State {
    let mut st = State::default();
    st.originals.insert(
        path.into(),
        Original {
            high: "max".into(),
            low: "0".into(),
            id: Some(id),
        },
    );
    st
}

#[cfg(test)]
mod tests;
