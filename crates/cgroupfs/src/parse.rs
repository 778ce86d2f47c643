//! Pure parsers for the kernel's cgroup v2 and PSI file formats.
//!
//! One function per format, `&str` in, typed value out. None of them touches the
//! filesystem and none of them panics: every malformed input becomes a [`ParseError`]
//! that quotes the offending text. The readers in [`crate::CgroupFs`] and
//! [`crate::ProcFs`] add the path.
//!
//! | format                 | files                                   | parser          |
//! |------------------------|-----------------------------------------|-----------------|
//! | single value           | `memory.current`, `memory.swap.current` | [`single_u64`]  |
//! | single value or `max`  | `memory.high`, `memory.max`, `.low` ... | [`limit`]       |
//! | flat keyed             | `memory.stat`, `memory.events`          | [`flat_keyed`], [`MemoryStat::parse`], [`MemoryEvents::parse`] |
//! | nested keyed (PSI)     | `memory.pressure`, `/proc/pressure/memory` | [`psi`]      |
//! | zone blocks            | `/proc/zoneinfo`                        | [`watermarks`]  |
//! | hexadecimal flags      | `/sys/kernel/mm/lru_gen/enabled`        | [`lru_gen`]     |

use std::fmt;

/// Why a kernel file's text could not be parsed.
///
/// Messages quote the text they rejected, so a log line is enough to see whether the
/// kernel changed a format or the file is not what the caller thought it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The file held nothing but whitespace where a value was required.
    #[error("the file is empty, expected a value")]
    Empty,
    /// A token that must be a non-negative decimal integer was something else.
    #[error("expected a non-negative decimal integer, found {found:?}")]
    NotANumber {
        /// The rejected token (truncated to 64 bytes).
        found: String,
    },
    /// A single-value file held more than one token.
    #[error("expected a single value, found {found:?}")]
    TrailingData {
        /// The whole rejected text (truncated to 64 bytes).
        found: String,
    },
    /// A line of a keyed file did not have the expected shape.
    #[error("line {line} is not `{expected}`: {text:?}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// What the line should look like.
        expected: &'static str,
        /// The rejected line (truncated to 64 bytes).
        text: String,
    },
    /// A key the format requires was absent.
    #[error("required key `{key}` is missing")]
    MissingKey {
        /// The missing key.
        key: &'static str,
    },
    /// A key or record that must appear once appeared twice.
    #[error("`{key}` appears more than once")]
    Duplicate {
        /// The repeated key.
        key: String,
    },
}

/// Longest excerpt of rejected input quoted in a [`ParseError`].
const QUOTE_MAX: usize = 64;

/// Copies at most [`QUOTE_MAX`] bytes of `text`, cut on a character boundary.
fn quote(text: &str) -> String {
    if text.len() <= QUOTE_MAX {
        return text.to_owned();
    }
    let mut end = QUOTE_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// A cgroup limit: a byte count or the kernel's `max` (no limit).
///
/// `max` is a variant, never `u64::MAX` or `-1`. [`fmt::Display`] writes exactly what
/// the kernel accepts in `memory.high`, `memory.low`, `memory.min` and `memory.max`:
/// `max` or the decimal byte count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Limit {
    /// A limit of this many bytes.
    Bytes(u64),
    /// No limit (`max`). Orders above every byte count.
    Max,
}

impl Limit {
    /// The byte count, or `None` for [`Limit::Max`].
    #[must_use]
    pub fn bytes(self) -> Option<u64> {
        match self {
            Limit::Bytes(b) => Some(b),
            Limit::Max => None,
        }
    }

    /// The byte count, with [`Limit::Max`] read as `max_as`.
    ///
    /// Use this at the edge of byte arithmetic, e.g. `high.bytes_or(capacity)`.
    #[must_use]
    pub fn bytes_or(self, max_as: u64) -> u64 {
        self.bytes().unwrap_or(max_as)
    }
}

impl From<u64> for Limit {
    fn from(bytes: u64) -> Self {
        Limit::Bytes(bytes)
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Bytes(b) => write!(f, "{b}"),
            Limit::Max => f.write_str("max"),
        }
    }
}

/// The kernel's text, as [`limit`] reads it: `max` or a decimal byte count.
impl std::str::FromStr for Limit {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, ParseError> {
        limit(text)
    }
}

/// Parses one decimal token: ASCII digits only (no sign, no spaces), fits in `u64`.
fn number(token: &str) -> Result<u64, ParseError> {
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::NotANumber {
            found: quote(token),
        });
    }
    token.parse().map_err(|_| ParseError::NotANumber {
        found: quote(token),
    })
}

/// Returns the one whitespace-separated token of a single-value file.
fn single_token(text: &str) -> Result<&str, ParseError> {
    let mut tokens = text.split_ascii_whitespace();
    let first = tokens.next().ok_or(ParseError::Empty)?;
    if tokens.next().is_some() {
        return Err(ParseError::TrailingData {
            found: quote(text.trim()),
        });
    }
    Ok(first)
}

/// Parses a single-value file such as `memory.current`: one decimal integer, surrounding
/// whitespace (the kernel's trailing newline) allowed.
///
/// # Errors
///
/// [`ParseError::Empty`], [`ParseError::NotANumber`] (including `max`) or
/// [`ParseError::TrailingData`].
pub fn single_u64(text: &str) -> Result<u64, ParseError> {
    number(single_token(text)?)
}

/// Parses a single-value file that may hold `max`, such as `memory.high`.
///
/// # Errors
///
/// As [`single_u64`].
pub fn limit(text: &str) -> Result<Limit, ParseError> {
    match single_token(text)? {
        "max" => Ok(Limit::Max),
        token => number(token).map(Limit::Bytes),
    }
}

/// Parses a flat keyed file (`memory.stat`, `memory.events`): one `key value` pair per
/// line. Blank lines are skipped; keys borrow from `text`, in file order.
///
/// # Errors
///
/// [`ParseError::BadLine`] for a line that is not exactly two tokens,
/// [`ParseError::NotANumber`] for a value that is not a `u64`.
pub fn flat_keyed(text: &str) -> Result<Vec<(&str, u64)>, ParseError> {
    let mut pairs = Vec::with_capacity(64);
    for_each_flat_keyed(text, |key, value| pairs.push((key, value)))?;
    Ok(pairs)
}

/// Calls `each` for every pair of a flat keyed file without allocating.
fn for_each_flat_keyed<'a>(
    text: &'a str,
    mut each: impl FnMut(&'a str, u64),
) -> Result<(), ParseError> {
    for (index, line) in text.lines().enumerate() {
        let mut tokens = line.split_ascii_whitespace();
        let (Some(key), value, rest) = (tokens.next(), tokens.next(), tokens.next()) else {
            continue;
        };
        let (Some(value), None) = (value, rest) else {
            return Err(ParseError::BadLine {
                line: index + 1,
                expected: "key value",
                text: quote(line),
            });
        };
        each(key, number(value)?);
    }
    Ok(())
}

/// `usage_usec` of a cgroup's `cpu.stat`: the CPU time its tasks used since it was created,
/// in microseconds. The file exists in every cgroup v2 whether or not the `cpu` controller is
/// enabled (the lab measures the daemon's own CPU cost with it).
///
/// # Errors
///
/// As [`flat_keyed`]; [`ParseError::MissingKey`] when `usage_usec` is absent.
pub fn cpu_usage_usec(text: &str) -> Result<u64, ParseError> {
    let mut usage = None;
    for_each_flat_keyed(text, |key, value| {
        if key == "usage_usec" {
            usage = Some(value);
        }
    })?;
    usage.ok_or(ParseError::MissingKey { key: "usage_usec" })
}

/// Parses `/sys/kernel/mm/lru_gen/enabled`: whether the multi-gen LRU is on. The kernel writes
/// its component bits in hexadecimal (`0x0007`; `0x0000` when off); any bit set means the
/// kernel reclaims with the multi-gen LRU, whose reclaim passes over a cgroup under its
/// `memory.low` once and then takes it like any other (docs/lab.md).
///
/// # Errors
///
/// [`ParseError::Empty`], [`ParseError::TrailingData`], or [`ParseError::NotANumber`] for a
/// token that is not `0x` and hexadecimal digits.
pub fn lru_gen(text: &str) -> Result<bool, ParseError> {
    let token = single_token(text)?;
    token
        .strip_prefix("0x")
        .filter(|digits| !digits.is_empty())
        .and_then(|digits| u64::from_str_radix(digits, 16).ok())
        .map(|bits| bits != 0)
        .ok_or_else(|| ParseError::NotANumber {
            found: quote(token),
        })
}

/// Global reclaim counters from `/proc/vmstat`, in pages since boot. They count only the
/// kernel's own reclaim of the host — kswapd, direct reclaim of allocating tasks, khugepaged —
/// not reclaim inside a cgroup (`memory.reclaim`, `memory.high`, `memory.max`), which the
/// kernel counts only in that cgroup's `memory.stat` (`mm/vmscan.c`: `if (!cgroup_reclaim(sc))
/// __count_vm_events(...)`, classic and multi-gen LRU alike). So a rise here is the kernel
/// deciding that the host is short, never the daemon's own writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vmstat {
    /// `pgscan_kswapd`: pages kswapd scanned.
    pub pgscan_kswapd: u64,
    /// `pgscan_direct` (+ `pgscan_khugepaged` where the kernel splits it out): pages
    /// allocating tasks scanned in direct reclaim.
    pub pgscan_direct: u64,
    /// `pgsteal_kswapd`: pages kswapd reclaimed.
    pub pgsteal_kswapd: u64,
    /// `pgsteal_direct` (+ `pgsteal_khugepaged`): pages direct reclaim reclaimed.
    pub pgsteal_direct: u64,
    /// Σ `allocstall_*` (one per zone type): allocations that entered direct reclaim.
    pub allocstall: u64,
    /// `workingset_refault_anon` + `workingset_refault_file` (`workingset_refault` before
    /// 5.9): evicted pages faulted back in, host-wide.
    pub refault: u64,
}

impl Vmstat {
    /// Pages the kernel's global reclaim scanned (kswapd and direct).
    #[must_use]
    pub fn scanned(&self) -> u64 {
        self.pgscan_kswapd.saturating_add(self.pgscan_direct)
    }
}

/// Parses `/proc/vmstat` (flat keyed, one `key value` per line) into [`Vmstat`]; keys it
/// does not use are skipped, keys the running kernel lacks read as 0. Pure, never panics.
///
/// # Errors
///
/// As [`flat_keyed`]; [`ParseError::MissingKey`] when `pgscan_kswapd` is absent (not a
/// vmstat file).
pub fn vmstat(text: &str) -> Result<Vmstat, ParseError> {
    let mut v = Vmstat::default();
    let mut seen = false;
    for_each_flat_keyed(text, |key, value| {
        let slot = match key {
            "pgscan_kswapd" => {
                seen = true;
                &mut v.pgscan_kswapd
            }
            "pgscan_direct" | "pgscan_khugepaged" => &mut v.pgscan_direct,
            "pgsteal_kswapd" => &mut v.pgsteal_kswapd,
            "pgsteal_direct" | "pgsteal_khugepaged" => &mut v.pgsteal_direct,
            "workingset_refault" | "workingset_refault_anon" | "workingset_refault_file" => {
                &mut v.refault
            }
            k if k.starts_with("allocstall_") => &mut v.allocstall,
            _ => return,
        };
        *slot = slot.saturating_add(value);
    })?;
    if seen {
        Ok(v)
    } else {
        Err(ParseError::MissingKey {
            key: "pgscan_kswapd",
        })
    }
}

/// The fields of a cgroup's `memory.stat` that memweight uses, in bytes except the
/// event counters (`pgscan`, `pgsteal`, `pgmajfault`, `workingset_refault_*`, which count
/// pages or faults).
///
/// Keys the running kernel does not print read as 0 (e.g. `kernel` before 5.18);
/// keys not listed here are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStat {
    /// Anonymous memory (heap, stacks, anonymous mmap), including swap cache.
    pub anon: u64,
    /// Page cache: file-backed memory, including tmpfs and shmem.
    pub file: u64,
    /// All kernel memory charged to the cgroup (5.18+).
    pub kernel: u64,
    /// Shared memory and tmpfs pages (part of `file`; swap-backed, not dropped like cache).
    pub shmem: u64,
    /// Page cache mapped into processes with `mmap`.
    pub file_mapped: u64,
    /// Page cache modified but not yet written back.
    pub file_dirty: u64,
    /// Page cache being written back now.
    pub file_writeback: u64,
    /// Anonymous memory backed by transparent huge pages.
    pub anon_thp: u64,
    /// Anonymous memory on the inactive LRU (first to be swapped).
    pub inactive_anon: u64,
    /// Anonymous memory on the active LRU.
    pub active_anon: u64,
    /// Page cache on the inactive LRU (first to be reclaimed).
    pub inactive_file: u64,
    /// Page cache on the active LRU.
    pub active_file: u64,
    /// Kernel slab memory that can be reclaimed (dentries, inodes).
    pub slab_reclaimable: u64,
    /// Kernel slab memory that cannot be reclaimed.
    pub slab_unreclaimable: u64,
    /// Pages scanned by reclaim (a counter, in pages).
    pub pgscan: u64,
    /// Pages reclaimed (a counter, in pages).
    pub pgsteal: u64,
    /// Refaults of previously evicted anonymous pages (a counter): thrashing.
    pub workingset_refault_anon: u64,
    /// Refaults of previously evicted page cache (a counter): thrashing.
    pub workingset_refault_file: u64,
    /// Major faults (a counter): pages read back from swap or disk. Unlike the refault
    /// counters it counts every such fault: with the multi-gen LRU (6.1+, 6.12's default) a
    /// refault is counted only for a page evicted from the cgroup's oldest generation still
    /// live, so a cgroup whose generations turn over fast faults back far more than
    /// `workingset_refault_*` says.
    pub pgmajfault: u64,
}

impl MemoryStat {
    /// Parses the text of `memory.stat`.
    ///
    /// # Errors
    ///
    /// As [`flat_keyed`].
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut stat = MemoryStat::default();
        for_each_flat_keyed(text, |key, value| {
            let field = match key {
                "anon" => &mut stat.anon,
                "file" => &mut stat.file,
                "kernel" => &mut stat.kernel,
                "shmem" => &mut stat.shmem,
                "file_mapped" => &mut stat.file_mapped,
                "file_dirty" => &mut stat.file_dirty,
                "file_writeback" => &mut stat.file_writeback,
                "anon_thp" => &mut stat.anon_thp,
                "inactive_anon" => &mut stat.inactive_anon,
                "active_anon" => &mut stat.active_anon,
                "inactive_file" => &mut stat.inactive_file,
                "active_file" => &mut stat.active_file,
                "slab_reclaimable" => &mut stat.slab_reclaimable,
                "slab_unreclaimable" => &mut stat.slab_unreclaimable,
                "pgscan" => &mut stat.pgscan,
                "pgsteal" => &mut stat.pgsteal,
                "workingset_refault_anon" => &mut stat.workingset_refault_anon,
                "workingset_refault_file" => &mut stat.workingset_refault_file,
                "pgmajfault" => &mut stat.pgmajfault,
                _ => return,
            };
            *field = value;
        })?;
        Ok(stat)
    }
}

/// A cgroup's `memory.events` counters: how often each boundary was hit since the
/// cgroup was created (hierarchical: includes descendants).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryEvents {
    /// Times reclaim went below `memory.low` (the protection was overcommitted).
    pub low: u64,
    /// Times usage exceeded `memory.high` and the cgroup was throttled.
    pub high: u64,
    /// Times usage hit `memory.max`.
    pub max: u64,
    /// Times the cgroup reached its limit and the OOM path was entered.
    pub oom: u64,
    /// Processes killed by the OOM killer in this cgroup.
    pub oom_kill: u64,
}

impl MemoryEvents {
    /// Parses the text of `memory.events`; missing keys read as 0, unknown keys are
    /// ignored.
    ///
    /// # Errors
    ///
    /// As [`flat_keyed`].
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut events = MemoryEvents::default();
        for_each_flat_keyed(text, |key, value| {
            let field = match key {
                "low" => &mut events.low,
                "high" => &mut events.high,
                "max" => &mut events.max,
                "oom" => &mut events.oom,
                "oom_kill" => &mut events.oom_kill,
                _ => return,
            };
            *field = value;
        })?;
        Ok(events)
    }
}

/// One line of a PSI file: stall averages in percent and the total stall time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PsiLine {
    /// Percentage of the last 10 s in which tasks stalled.
    pub avg10: f64,
    /// Percentage of the last 60 s in which tasks stalled.
    pub avg60: f64,
    /// Percentage of the last 300 s in which tasks stalled.
    pub avg300: f64,
    /// Total stall time in microseconds since boot (or cgroup creation).
    pub total_us: u64,
}

/// Memory pressure stall information from `memory.pressure` or `/proc/pressure/memory`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Psi {
    /// Share of time in which at least one task stalled on memory.
    pub some: PsiLine,
    /// Share of time in which all non-idle tasks stalled on memory; `None` when the
    /// kernel did not print a `full` line.
    pub full: Option<PsiLine>,
}

/// Parses one `avgN=` value: a finite, non-negative decimal.
fn percent(token: &str) -> Result<f64, ParseError> {
    let bad = || ParseError::NotANumber {
        found: quote(token),
    };
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(bad());
    }
    token.parse::<f64>().map_err(|_| bad())
}

/// Parses the `key=value` tokens after `some`/`full` on one PSI line.
fn psi_line<'a>(
    tokens: impl Iterator<Item = &'a str>,
    line: usize,
    text: &str,
) -> Result<PsiLine, ParseError> {
    let (mut avg10, mut avg60, mut avg300, mut total) = (None, None, None, None);
    for token in tokens {
        let Some((key, value)) = token.split_once('=') else {
            return Err(ParseError::BadLine {
                line,
                expected: "some|full avg10=N avg60=N avg300=N total=N",
                text: quote(text),
            });
        };
        match key {
            "avg10" => avg10 = Some(percent(value)?),
            "avg60" => avg60 = Some(percent(value)?),
            "avg300" => avg300 = Some(percent(value)?),
            "total" => total = Some(number(value)?),
            _ => {} // a future kernel's extra key
        }
    }
    Ok(PsiLine {
        avg10: avg10.ok_or(ParseError::MissingKey { key: "avg10" })?,
        avg60: avg60.ok_or(ParseError::MissingKey { key: "avg60" })?,
        avg300: avg300.ok_or(ParseError::MissingKey { key: "avg300" })?,
        total_us: total.ok_or(ParseError::MissingKey { key: "total" })?,
    })
}

/// Parses a PSI file (nested keyed format):
///
/// ```text
/// some avg10=0.00 avg60=0.00 avg300=0.00 total=0
/// full avg10=0.00 avg60=0.00 avg300=0.00 total=0
/// ```
///
/// `some` is required, `full` optional; each appears at most once; unknown `key=value`
/// pairs are ignored, unknown line kinds are an error.
///
/// # Errors
///
/// [`ParseError::BadLine`], [`ParseError::MissingKey`], [`ParseError::NotANumber`] or
/// [`ParseError::Duplicate`].
pub fn psi(text: &str) -> Result<Psi, ParseError> {
    let (mut some, mut full) = (None, None);
    for (index, line) in text.lines().enumerate() {
        let mut tokens = line.split_ascii_whitespace();
        let Some(kind) = tokens.next() else {
            continue;
        };
        let slot = match kind {
            "some" => &mut some,
            "full" => &mut full,
            _ => {
                return Err(ParseError::BadLine {
                    line: index + 1,
                    expected: "some|full avg10=N avg60=N avg300=N total=N",
                    text: quote(line),
                });
            }
        };
        if slot.is_some() {
            return Err(ParseError::Duplicate {
                key: kind.to_owned(),
            });
        }
        *slot = Some(psi_line(tokens, index + 1, line)?);
    }
    Ok(Psi {
        some: some.ok_or(ParseError::MissingKey { key: "some" })?,
        full,
    })
}

/// The kernel's free-memory watermarks summed over every zone of every node, in pages
/// (`/proc/zoneinfo`). Below `low` kswapd reclaims until free memory is back at `high`;
/// below `min` allocations reclaim directly. The gaps between them are
/// `max(min/4, managed × vm.watermark_scale_factor / 10000)` per zone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watermarks {
    /// Σ `min`.
    pub min: u64,
    /// Σ `low`.
    pub low: u64,
    /// Σ `high`.
    pub high: u64,
    /// Σ `managed`: pages the buddy allocator manages.
    pub managed: u64,
}

/// Parses `/proc/zoneinfo`: every `Node N, zone NAME` block's `min`, `low`, `high` and
/// `managed` lines (pages), summed. Other lines (per-node statistics, `pages free`,
/// `protection: (…)`, per-cpu sets) are skipped.
///
/// # Errors
///
/// [`ParseError::MissingKey`] when no zone block has all four keys (not a zoneinfo file),
/// [`ParseError::NotANumber`] for a watermark that is not a `u64`,
/// [`ParseError::TrailingData`] for a watermark line with more than one value.
pub fn watermarks(text: &str) -> Result<Watermarks, ParseError> {
    let mut sum = Watermarks::default();
    let mut zone: Option<[Option<u64>; 4]> = None;
    let mut zones = 0usize;
    let mut close = |z: Option<[Option<u64>; 4]>, sum: &mut Watermarks| {
        if let Some([Some(min), Some(low), Some(high), Some(managed)]) = z {
            sum.min = sum.min.saturating_add(min);
            sum.low = sum.low.saturating_add(low);
            sum.high = sum.high.saturating_add(high);
            sum.managed = sum.managed.saturating_add(managed);
            zones += 1;
        }
    };
    for line in text.lines() {
        if line.starts_with("Node ") {
            close(zone.take(), &mut sum);
            zone = Some([None; 4]);
            continue;
        }
        let Some(z) = zone.as_mut() else {
            continue;
        };
        let mut tokens = line.split_ascii_whitespace();
        let slot = match tokens.next() {
            Some("min") => 0,
            Some("low") => 1,
            Some("high") => 2,
            Some("managed") => 3,
            _ => continue,
        };
        let value = number(tokens.next().ok_or(ParseError::Empty)?)?;
        if tokens.next().is_some() {
            return Err(ParseError::TrailingData { found: quote(line) });
        }
        z[slot] = Some(value);
    }
    close(zone, &mut sum);
    if zones == 0 {
        return Err(ParseError::MissingKey {
            key: "min/low/high/managed",
        });
    }
    Ok(sum)
}

#[cfg(test)]
mod tests;
