//! Command line: clap parsing, then validation into a [`Plan`] that the modes run.
//!
//! Parsing and validation do no I/O, so they are tested directly.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use memweight_proto::Size;

use crate::fill::Fill;
use crate::meter::Unit;

/// Memory workloads for the memweight lab; one JSON line per second on stdout.
#[derive(Debug, Parser)]
#[command(name = "memweight-workload", version, about, long_about = None)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub mode: Mode,
    /// Options every mode takes.
    #[command(flatten)]
    pub common: Common,
}

/// Options shared by all modes.
#[derive(Debug, Args)]
pub struct Common {
    /// Stop after this many seconds of work (0 = run until SIGTERM/SIGINT).
    #[arg(long, global = true, default_value_t = 0, value_name = "SECS")]
    pub duration: u64,
    /// Page content: `pattern` (compressible, not zero), `random` (incompressible), `zero`.
    #[arg(long, global = true, value_enum, default_value_t = Fill::Pattern)]
    pub fill: Fill,
    /// Wait this many seconds before allocating anything (reports 0 ops meanwhile).
    #[arg(long, global = true, default_value_t = 0, value_name = "SECS")]
    pub start_delay: u64,
    /// Seed of the page-picking PRNG (default: derived from the pid and the clock).
    #[arg(long, global = true)]
    pub seed: Option<u64>,
}

/// The workload modes.
#[derive(Debug, Subcommand)]
pub enum Mode {
    /// Map SIZE of anonymous memory, fault it in, then write a word to random pages (GUPS-like).
    ///
    /// Ops are page touches, the initial fault-in of each page included.
    RandomTouch {
        /// Working set size ("300M" = 300 MiB).
        #[arg(long, value_parser = parse_bytes)]
        size: u64,
        /// Threads touching disjoint slices of the working set.
        #[arg(long, default_value = "1")]
        threads: NonZeroUsize,
    },
    /// Sweep sequential writes over a BLOCK buffer until TOTAL bytes are written (sysbench-like).
    SeqWrite {
        /// Buffer swept by each pass.
        #[arg(long, value_parser = parse_bytes)]
        block: u64,
        /// Bytes to write in all (0 = keep sweeping).
        #[arg(long, value_parser = parse_bytes)]
        total: u64,
    },
    /// Allocate and touch SIZE, then sleep holding it; optionally grow in steps.
    Hog {
        /// Memory held from the start.
        #[arg(long, value_parser = parse_bytes)]
        size: u64,
        /// Exit this many seconds after the initial allocation (0 = hold until stopped).
        #[arg(long, default_value_t = 0, value_name = "SECS")]
        hold: u64,
        /// Grow by this much every --step-every seconds.
        #[arg(long, value_parser = parse_bytes, requires = "step_every", conflicts_with = "schedule")]
        step: Option<u64>,
        /// Seconds between growth steps.
        #[arg(long, value_name = "SECS", requires = "step")]
        step_every: Option<u64>,
        /// Never hold more than this (caps --step growth).
        #[arg(long, value_parser = parse_bytes)]
        max: Option<u64>,
        /// Held size over time, "SECS:SIZE,SECS:SIZE,..." (grows and shrinks; overrides --size
        /// from the first entry's time on).
        #[arg(long, value_parser = parse_schedule)]
        schedule: Option<Schedule>,
    },
    /// Stream writes through the page cache into a file, like dd.
    FileWrite {
        /// File to create (truncated if it exists).
        #[arg(long)]
        path: PathBuf,
        /// Bytes to write.
        #[arg(long, value_parser = parse_bytes)]
        size: u64,
        /// Size of each write(2).
        #[arg(long, value_parser = parse_bytes, default_value = "1M")]
        block: u64,
        /// After SIZE bytes, start again from offset 0 instead of exiting.
        #[arg(long)]
        repeat: bool,
    },
    /// Random reads/writes of a word per page, on a file-backed mmap (--file) or anonymous memory.
    ///
    /// With --passes (seed 001's benchmark): after the fill, N timed read passes then N timed
    /// write passes, each over --pass-pct % of the pages picked at random; one log line per
    /// pass (stderr), then exit.
    MmapRw {
        /// Mapped size.
        #[arg(long, value_parser = parse_bytes)]
        size: u64,
        /// File to create and map shared (default: anonymous memory).
        #[arg(long)]
        file: Option<PathBuf>,
        /// Percentage of operations that read (the rest write).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100), conflicts_with = "passes")]
        read_pct: u8,
        /// Timed passes of each kind (reads, then writes), then exit.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        passes: Option<u64>,
        /// Pages each pass touches, as a percentage of the mapping (picked with replacement).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=100), requires = "passes")]
        pass_pct: u8,
    },
    /// Open COUNT TCP connections to ADDR that never send a byte, and hold them until stopped
    /// (a hostile local user's connection flood; ops are connections opened).
    IdleConnections {
        /// Where to connect, e.g. 127.0.0.1:9750.
        #[arg(long)]
        addr: std::net::SocketAddr,
        /// Connections to open (the soft open-file limit is raised to the hard one).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=60_000))]
        count: u32,
    },
    /// A client of a Redis server: load KEYS values of VALUE_SIZE bytes, then send requests,
    /// PIPELINE per round trip, each a GET of a random key or (SET_PCT %) a SET; ops are
    /// requests answered (the load does not count). Waits up to 3 minutes for the server to
    /// accept connections.
    Redis {
        /// The server, e.g. 127.0.0.1:6379.
        #[arg(long)]
        addr: std::net::SocketAddr,
        /// Size of the dataset (keys = DATASET / VALUE_SIZE).
        #[arg(long, value_parser = parse_bytes)]
        dataset: u64,
        /// Bytes per value (4000 fits the server's allocator's 4 KiB size class with its header).
        #[arg(long, value_parser = parse_bytes, default_value = "4000")]
        value_size: u64,
        /// Percentage of requests that are SETs.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..=100))]
        set_pct: u8,
        /// Requests per round trip (1: one at a time). Under TCG a round trip costs far more
        /// than a swap-in, so without a pipeline the request rate hardly shows residency.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
        pipeline: u32,
    },
    /// The floor of sampling cost: every INTERVAL, read the ten files memweightd reads for
    /// each cgroup directly under DIR, with pread on descriptors kept open and no parsing
    /// (new cgroups are opened, vanished ones closed; ops are files read).
    Sampler {
        /// The parent cgroup whose children are read, e.g. /sys/fs/cgroup/lab.
        #[arg(long)]
        dir: PathBuf,
        /// Milliseconds between two passes.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
        interval_ms: u64,
        /// Open, read and close every file on every pass (what a reader that keeps no
        /// descriptors, and so no kernel buffers, pays) instead of pread on kept-open ones.
        #[arg(long)]
        reopen: bool,
    },
}

/// A hog's held size over time: (seconds since start, bytes), sorted by time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule(pub Vec<(u64, u64)>);

/// Parses "300M", "1G", "4096": the one size syntax of memweight ([`Size`]: binary units,
/// M = MiB), here for clap.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    text.parse::<Size>()
        .map(Size::bytes)
        .map_err(|err| err.to_string())
}

/// Parses "0:100M,30:200M,60:50M".
pub fn parse_schedule(text: &str) -> Result<Schedule, String> {
    let mut entries = Vec::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let (secs, size) = item
            .split_once(':')
            .ok_or_else(|| format!("schedule entry {item:?} is not SECS:SIZE"))?;
        let secs: u64 = secs
            .trim()
            .parse()
            .map_err(|_| format!("schedule entry {item:?}: {secs:?} is not whole seconds"))?;
        let size = parse_bytes(size).map_err(|err| format!("schedule entry {item:?}: {err}"))?;
        if let Some(&(previous, _)) = entries.last()
            && secs <= previous
        {
            return Err(format!(
                "schedule times must increase, but {secs} follows {previous}"
            ));
        }
        entries.push((secs, size));
    }
    if entries.is_empty() {
        return Err("schedule is empty (expected SECS:SIZE,...)".to_owned());
    }
    Ok(Schedule(entries))
}

/// A validated, ready-to-run workload; sizes are in bytes, already rounded to whole pages
/// where the mode maps memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The mode and its parameters.
    pub work: Work,
    /// Seconds of work before a clean exit (0 = forever).
    pub duration: u64,
    /// Seconds to wait before starting.
    pub start_delay: u64,
    /// Page content.
    pub fill: Fill,
    /// PRNG seed, if fixed on the command line.
    pub seed: Option<u64>,
}

/// One validated mode.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// See [`Mode::RandomTouch`].
    RandomTouch {
        /// Bytes, whole pages.
        size: usize,
        /// At least 1, at most the number of pages.
        threads: usize,
    },
    /// See [`Mode::SeqWrite`].
    SeqWrite {
        /// Bytes, whole pages.
        block: usize,
        /// 0 = forever.
        total: u64,
    },
    /// See [`Mode::Hog`].
    Hog(HogPlan),
    /// See [`Mode::FileWrite`].
    FileWrite {
        /// Destination file.
        path: PathBuf,
        /// Bytes per pass.
        size: u64,
        /// Bytes per write call.
        block: usize,
        /// Loop forever.
        repeat: bool,
    },
    /// See [`Mode::MmapRw`].
    MmapRw {
        /// Bytes, whole pages.
        size: usize,
        /// Backing file, or anonymous when `None`.
        file: Option<PathBuf>,
        /// 0..=100.
        read_pct: u8,
        /// Timed passes instead of running until stopped.
        passes: Option<Passes>,
    },
    /// See [`Mode::IdleConnections`].
    IdleConnections {
        /// Target.
        addr: std::net::SocketAddr,
        /// How many.
        count: u32,
    },
    /// See [`Mode::Redis`].
    Redis(crate::redis_client::RedisPlan),
    /// See [`Mode::Sampler`].
    Sampler {
        /// Parent cgroup.
        dir: PathBuf,
        /// Between passes.
        interval_ms: u64,
        /// Open/read/close each time instead of pread on kept-open descriptors.
        reopen: bool,
    },
}

impl Work {
    /// What this mode's operations count.
    pub fn unit(&self) -> Unit {
        match self {
            Work::SeqWrite { .. } | Work::FileWrite { .. } => Unit::Bytes,
            Work::RandomTouch { .. } | Work::Hog(_) | Work::MmapRw { .. } => Unit::Pages,
            Work::IdleConnections { .. } => Unit::Connections,
            Work::Sampler { .. } => Unit::Files,
            Work::Redis(_) => Unit::Requests,
        }
    }

    /// The mode's command-line name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Work::RandomTouch { .. } => "random-touch",
            Work::SeqWrite { .. } => "seq-write",
            Work::Hog(_) => "hog",
            Work::FileWrite { .. } => "file-write",
            Work::MmapRw { .. } => "mmap-rw",
            Work::IdleConnections { .. } => "idle-connections",
            Work::Sampler { .. } => "sampler",
            Work::Redis(_) => "redis",
        }
    }
}

/// mmap-rw's pass mode: `count` read passes, then `count` write passes, each of `touches`
/// random pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Passes {
    /// Passes of each kind (at least 1).
    pub count: u64,
    /// Pages touched per pass (at least 1).
    pub touches: u64,
}

impl Passes {
    /// `count` passes over `pct` % of `pages` (rounded up, at least one page).
    pub fn new(count: u64, pages: u64, pct: u8) -> Passes {
        Passes {
            count,
            touches: (pages.saturating_mul(u64::from(pct)).div_ceil(100)).max(1),
        }
    }
}

/// The hog's size over time (pure, so tested without allocating).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HogPlan {
    /// Bytes held from the start.
    pub base: u64,
    /// Seconds to hold after the initial allocation before exiting (0 = until stopped).
    pub hold: u64,
    /// (bytes, every seconds) growth.
    pub step: Option<(u64, u64)>,
    /// Cap on the held size.
    pub max: Option<u64>,
    /// Explicit (seconds, bytes) schedule.
    pub schedule: Vec<(u64, u64)>,
}

impl HogPlan {
    /// Bytes the hog should hold `secs` seconds after it started.
    pub fn target_at(&self, secs: u64) -> u64 {
        let mut target = self.base;
        if let Some((bytes, every)) = self.step
            && every > 0
        {
            target = target.saturating_add(bytes.saturating_mul(secs / every));
        }
        if let Some(&(_, bytes)) = self.schedule.iter().rev().find(|(at, _)| *at <= secs) {
            target = bytes;
        }
        self.max.map_or(target, |max| target.min(max))
    }
}

/// The error of a command line that parsed but makes no sense; exit code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(message: String) -> UsageError {
    UsageError(message)
}

/// Rounds `bytes` (named `what`) up to whole pages, as a usize, rejecting 0 and overflow.
fn whole_pages(what: &str, bytes: u64, page: usize) -> Result<usize, UsageError> {
    if bytes == 0 {
        return Err(usage(format!("--{what} must be larger than 0")));
    }
    let page64 = u64::try_from(page).map_err(|_| usage("page size does not fit u64".into()))?;
    let rounded = bytes
        .div_ceil(page64)
        .checked_mul(page64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| usage(format!("--{what} {bytes} is too large for this machine")))?;
    Ok(rounded)
}

impl Cli {
    /// Checks what clap cannot, rounds sizes to `page` bytes and returns the plan.
    pub fn validate(self, page: usize) -> Result<Plan, UsageError> {
        let work = match self.mode {
            Mode::RandomTouch { size, threads } => {
                let size = whole_pages("size", size, page)?;
                let pages = size / page;
                if threads.get() > pages {
                    return Err(usage(format!(
                        "--threads {threads} exceeds the {pages} pages of --size; use fewer threads or more memory"
                    )));
                }
                Work::RandomTouch {
                    size,
                    threads: threads.get(),
                }
            }
            Mode::SeqWrite { block, total } => Work::SeqWrite {
                block: whole_pages("block", block, page)?,
                total,
            },
            Mode::Hog {
                size,
                hold,
                step,
                step_every,
                max,
                schedule,
            } => {
                let step = match (step, step_every) {
                    (Some(_), Some(0)) => {
                        return Err(usage("--step-every must be at least 1 second".into()));
                    }
                    (Some(0), Some(_)) => {
                        return Err(usage("--step must be larger than 0".into()));
                    }
                    (Some(bytes), Some(every)) => Some((bytes, every)),
                    _ => None,
                };
                let plan = HogPlan {
                    base: size,
                    hold,
                    step,
                    max,
                    schedule: schedule.map(|s| s.0).unwrap_or_default(),
                };
                // Check the largest size the plan can reach fits the address space.
                let peak = plan
                    .schedule
                    .iter()
                    .map(|&(_, bytes)| bytes)
                    .chain([size, max.unwrap_or(0)])
                    .max()
                    .unwrap_or(size);
                if usize::try_from(peak).is_err() {
                    return Err(usage(format!("hog size {peak} is too large")));
                }
                Work::Hog(plan)
            }
            Mode::FileWrite {
                path,
                size,
                block,
                repeat,
            } => {
                if size == 0 {
                    return Err(usage("--size must be larger than 0".into()));
                }
                if block == 0 || block > 1 << 30 {
                    return Err(usage(format!(
                        "--block {block} must be between 1 byte and 1G"
                    )));
                }
                let block = usize::try_from(block)
                    .map_err(|_| usage(format!("--block {block} is too large")))?;
                Work::FileWrite {
                    path,
                    size,
                    block,
                    repeat,
                }
            }
            Mode::MmapRw {
                size,
                file,
                read_pct,
                passes,
                pass_pct,
            } => {
                let size = whole_pages("size", size, page)?;
                Work::MmapRw {
                    size,
                    file,
                    read_pct,
                    passes: passes.map(|n| Passes::new(n, (size / page) as u64, pass_pct)),
                }
            }
            Mode::IdleConnections { addr, count } => Work::IdleConnections { addr, count },
            Mode::Redis {
                addr,
                dataset,
                value_size,
                set_pct,
                pipeline,
            } => {
                if value_size == 0 || value_size > 512 << 20 {
                    return Err(usage(format!(
                        "--value-size {value_size} must be between 1 byte and 512M (Redis's limit)"
                    )));
                }
                let keys = dataset / value_size;
                if keys == 0 {
                    return Err(usage(format!(
                        "--dataset {dataset} holds no value of --value-size {value_size}"
                    )));
                }
                let value_size = usize::try_from(value_size)
                    .map_err(|_| usage(format!("--value-size {value_size} is too large")))?;
                Work::Redis(crate::redis_client::RedisPlan {
                    addr,
                    keys,
                    value_size,
                    set_pct,
                    pipeline,
                })
            }
            Mode::Sampler {
                dir,
                interval_ms,
                reopen,
            } => Work::Sampler {
                dir,
                interval_ms,
                reopen,
            },
        };
        Ok(Plan {
            work,
            duration: self.common.duration,
            start_delay: self.common.start_delay,
            fill: self.common.fill,
            seed: self.common.seed,
        })
    }
}

#[cfg(test)]
mod tests;
