//! The workload loops. Each runs on worker threads and only bumps a shared counter and
//! checks a stop flag every [`BATCH`] operations: no clock reads or syscalls per operation,
//! because the lab guest runs under TCG where every instruction counts.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::cli::{HogPlan, Passes, Work};
use crate::fill::{Fill, XorShift, read_word, write_word};
use crate::sys::Region;

/// Operations between two updates of the shared counter / checks of the stop flag.
pub const BATCH: u64 = 256;

/// Bytes between two counter updates in the byte-counting modes.
const BYTE_CHUNK: usize = 64 << 10;

/// Hog memory is held in chunks of at most this size, so it can shrink without remapping all.
const HOG_CHUNK: usize = 16 << 20;

/// State the reporting thread and the workers share.
#[derive(Debug, Default)]
pub struct Shared {
    /// Operations done so far (pages or bytes).
    pub ops: AtomicU64,
    /// Set by the reporter to ask the workers to return.
    pub stop: AtomicBool,
}

impl Shared {
    /// Whether the reporter asked the workers to return.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Counts `ops` more operations done.
    pub fn add(&self, ops: u64) {
        self.ops.fetch_add(ops, Ordering::Relaxed);
    }

    /// Sleeps up to `total`, waking early (returning false) when asked to stop.
    pub fn sleep_unless_stopped(&self, total: Duration) -> bool {
        let until = Instant::now() + total;
        loop {
            if self.stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(50)));
        }
    }
}

/// Parameters every loop needs.
#[derive(Debug, Clone, Copy)]
pub struct Env {
    /// The kernel page size.
    pub page: usize,
    /// Page content.
    pub fill: Fill,
    /// PRNG seed.
    pub seed: u64,
}

/// Runs `work` until it finishes or `shared.stop` is set.
pub fn run(work: &Work, env: Env, shared: &Shared) -> Result<()> {
    match work {
        Work::RandomTouch { size, threads } => random_touch(*size, *threads, env, shared),
        Work::SeqWrite { block, total } => seq_write(*block, *total, env, shared),
        Work::Hog(plan) => hog(plan, env, shared),
        Work::FileWrite {
            path,
            size,
            block,
            repeat,
        } => file_write(path, *size, *block, *repeat, env, shared),
        Work::MmapRw {
            size,
            file,
            read_pct,
            passes,
        } => mmap_rw(*size, file.as_deref(), *read_pct, *passes, env, shared),
        Work::IdleConnections { addr, count } => idle_connections(*addr, *count, shared),
        Work::Redis(plan) => crate::redis_client::run(plan, env, shared),
        Work::Sampler {
            dir,
            interval_ms,
            reopen,
        } => sampler(dir, Duration::from_millis(*interval_ms), *reopen, shared),
    }
}

/// Opens `count` connections to `addr` once, as `nc` in a loop would, and holds them, silent,
/// until stopped. A refused connection is counted, not an error: that is what a server
/// defending itself does.
fn idle_connections(addr: std::net::SocketAddr, count: u32, shared: &Shared) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
            .context("raising the open-file limit failed")?;
    }
    let mut held = Vec::with_capacity(count as usize);
    let mut refused = 0u64;
    for _ in 0..count {
        if shared.stopped() {
            break;
        }
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(s) => {
                held.push(s);
                shared.add(1);
            }
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                anyhow::bail!("out of file descriptors after {} connections", held.len())
            }
            Err(_) => refused += 1,
        }
    }
    tracing::info!(
        opened = held.len(),
        refused,
        "idle connections open; holding them"
    );
    while shared.sleep_unless_stopped(Duration::from_secs(1)) {}
    Ok(())
}

/// The bare sampler: what reading the daemon's files costs at the least. Every `interval`,
/// lists `dir`'s child cgroups (as the daemon's discovery does), opens the files of new ones
/// and drops vanished ones, then preads every kept-open file into one buffer; with `reopen`,
/// opens, reads and closes every file on every pass instead (no descriptors, and so no
/// kernel buffers, kept).
fn sampler(dir: &std::path::Path, interval: Duration, reopen: bool, shared: &Shared) -> Result<()> {
    use std::collections::{BTreeMap, BTreeSet};
    use std::os::unix::fs::FileExt as _;

    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    // Ten descriptors per cgroup: as many as root may have.
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(1 << 20);
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let want = nr_open.max(hard);
        if setrlimit(Resource::RLIMIT_NOFILE, want, want).is_err() && soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
    let mut open: BTreeMap<std::ffi::OsString, Vec<File>> = BTreeMap::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut next = Instant::now();
    while !shared.stopped() {
        let mut seen = BTreeSet::new();
        for entry in std::fs::read_dir(dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .flatten()
        {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                seen.insert(entry.file_name());
            }
        }
        open.retain(|name, _| seen.contains(name));
        for name in seen {
            if reopen {
                open.entry(name).or_default();
                continue;
            }
            open.entry(name).or_insert_with_key(|name| {
                let cg = dir.join(name);
                memweight_cgroupfs::SAMPLE_FILES
                    .iter()
                    .filter_map(|f| File::open(cg.join(f)).ok())
                    .collect()
            });
        }
        let mut read = 0u64;
        if reopen {
            // No descriptors kept: open, read, close, as `std::fs::read` does.
            for name in open.keys() {
                let cg = dir.join(name);
                for f in memweight_cgroupfs::SAMPLE_FILES {
                    if let Ok(mut file) = File::open(cg.join(f)) {
                        let _ = std::io::Read::read(&mut file, &mut buf);
                        read += 1;
                    }
                }
            }
            shared.add(read);
            next += interval;
            let now = Instant::now();
            if next > now && !shared.sleep_unless_stopped(next - now) {
                break;
            }
            continue;
        }
        open.retain(|_, files| {
            for f in files.iter() {
                if f.read_at(&mut buf, 0).is_err() {
                    return false; // removed since it was listed: reopened if it comes back
                }
                read += 1;
            }
            true
        });
        shared.add(read);
        next += interval;
        let now = Instant::now();
        if next > now && !shared.sleep_unless_stopped(next - now) {
            break;
        }
    }
    Ok(())
}

fn map_anonymous(size: usize) -> Result<Region> {
    Region::anonymous(size).with_context(|| {
        format!("mapping {size} bytes of anonymous memory failed; ask for a smaller --size")
    })
}

/// Faults in every page of `buf` (counting one op per page); false if stopped meanwhile.
fn fault_in(
    buf: &mut [u8],
    first_index: u64,
    env: Env,
    rng: &mut XorShift,
    shared: &Shared,
) -> bool {
    let mut pending = 0;
    for (page, index) in buf.chunks_mut(env.page).zip(first_index..) {
        env.fill.init_fresh_page(page, index, rng);
        pending += 1;
        if pending == BATCH {
            shared.add(pending);
            pending = 0;
            if shared.stopped() {
                return false;
            }
        }
    }
    shared.add(pending);
    true
}

/// A page index in `0..pages` from a random word.
#[inline]
// Justification: the value is < `pages`, which came from a usize, so it always fits.
#[allow(clippy::cast_possible_truncation)]
fn pick(r: u64, pages: u64) -> usize {
    XorShift::scale(r, pages) as usize
}

fn random_touch(size: usize, threads: usize, env: Env, shared: &Shared) -> Result<()> {
    let mut region = map_anonymous(size)?;
    let total_pages = size / env.page;
    let pages_per_thread = total_pages.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        for (n, slice) in region.chunks_mut(pages_per_thread * env.page).enumerate() {
            let seed = env.seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let first = (n * pages_per_thread) as u64;
            scope.spawn(move || {
                let mut rng = XorShift::new(seed);
                if fault_in(slice, first, env, &mut rng, shared) {
                    touch_random_pages(slice, env, &mut rng, shared);
                }
            });
        }
    });
    Ok(())
}

/// The hot loop: one word written at the start of a random page per op.
fn touch_random_pages(buf: &mut [u8], env: Env, rng: &mut XorShift, shared: &Shared) {
    let pages = (buf.len() / env.page) as u64;
    if pages == 0 {
        return;
    }
    let mut seq = 0u64;
    while !shared.stopped() {
        for _ in 0..BATCH {
            let r = rng.next_u64();
            let offset = pick(r, pages) * env.page;
            let word = env.fill.touch_word(rng, seq);
            if let Some(page) = buf.get_mut(offset..) {
                write_word(page, word);
            }
            seq = seq.wrapping_add(1);
        }
        shared.add(BATCH);
    }
}

fn seq_write(block: usize, total: u64, env: Env, shared: &Shared) -> Result<()> {
    let mut region = map_anonymous(block)?;
    let mut rng = XorShift::new(env.seed);
    let mut written = 0u64;
    let mut index = 0u64;
    loop {
        for chunk in region.chunks_mut(BYTE_CHUNK) {
            for page in chunk.chunks_mut(env.page) {
                env.fill.write_page(page, index, &mut rng);
                index = index.wrapping_add(1);
            }
            let len = chunk.len() as u64;
            shared.add(len);
            written = written.saturating_add(len);
            if shared.stopped() || (total > 0 && written >= total) {
                return Ok(());
            }
        }
    }
}

fn hog(plan: &HogPlan, env: Env, shared: &Shared) -> Result<()> {
    let start = Instant::now();
    let mut rng = XorShift::new(env.seed);
    let mut chunks: Vec<Region> = Vec::new();
    let mut held = 0usize;
    let mut hold_from: Option<Instant> = None;
    loop {
        let secs = start.elapsed().as_secs();
        let target = usize::try_from(plan.target_at(secs)).unwrap_or(usize::MAX);
        let target = target.div_ceil(env.page) * env.page;
        // Shrink: drop whole chunks, then re-create a smaller last one if needed.
        while held > target {
            let Some(last) = chunks.pop() else { break };
            held -= last.len();
            drop(last);
        }
        // Grow in chunks, faulting each in.
        while held < target {
            let len = (target - held).min(HOG_CHUNK);
            let mut chunk = map_anonymous(len)?;
            let first = (held / env.page) as u64;
            if !fault_in(&mut chunk, first, env, &mut rng, shared) {
                return Ok(());
            }
            held += len;
            chunks.push(chunk);
        }
        let since = *hold_from.get_or_insert_with(Instant::now);
        if plan.hold > 0 && since.elapsed() >= Duration::from_secs(plan.hold) {
            return Ok(());
        }
        // Sleep to the next whole second of the plan; the memory is not touched again.
        let next = Duration::from_secs(secs + 1).saturating_sub(start.elapsed());
        if !shared.sleep_unless_stopped(next.max(Duration::from_millis(10))) {
            return Ok(());
        }
    }
}

fn file_write(
    path: &Path,
    size: u64,
    block: usize,
    repeat: bool,
    env: Env,
    shared: &Shared,
) -> Result<()> {
    let mut file = File::create(path)
        .with_context(|| format!("creating {} failed; pass a writable --path", path.display()))?;
    let mut rng = XorShift::new(env.seed);
    let mut buf = vec![0u8; block];
    for (index, page) in buf.chunks_mut(env.page).enumerate() {
        env.fill.write_page(page, index as u64, &mut rng);
    }
    loop {
        let mut written = 0u64;
        while written < size {
            if shared.stopped() {
                return Ok(());
            }
            let len = usize::try_from(size - written).map_or(block, |left| left.min(block));
            let data = buf.get(..len).unwrap_or(&buf);
            file.write_all(data).with_context(|| {
                format!(
                    "writing to {} failed after {written} bytes; check free space",
                    path.display()
                )
            })?;
            written += data.len() as u64;
            shared.add(data.len() as u64);
        }
        if !repeat {
            return Ok(());
        }
        file.seek(SeekFrom::Start(0))
            .with_context(|| format!("rewinding {} failed", path.display()))?;
    }
}

fn mmap_rw(
    size: usize,
    file: Option<&Path>,
    read_pct: u8,
    passes: Option<Passes>,
    env: Env,
    shared: &Shared,
) -> Result<()> {
    let mut region = match file {
        None => map_anonymous(size)?,
        Some(path) => {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .with_context(|| {
                    format!("opening {} failed; pass a writable --file", path.display())
                })?;
            file.set_len(size as u64).with_context(|| {
                format!(
                    "sizing {} to {size} bytes failed; check free space",
                    path.display()
                )
            })?;
            Region::shared_file(&file, size)
                .with_context(|| format!("mapping {} ({size} bytes) failed", path.display()))?
        }
    };
    let mut rng = XorShift::new(env.seed);
    let filling = Instant::now();
    if !fault_in(&mut region, 0, env, &mut rng, shared) {
        return Ok(());
    }
    let pages = (size / env.page) as u64;
    tracing::info!(
        pages,
        secs = filling.elapsed().as_secs_f64(),
        "mapping filled"
    );
    if let Some(passes) = passes {
        timed_passes(&mut region, passes, env, &mut rng, shared);
        return Ok(());
    }
    let read_below = u64::from(read_pct);
    let mut sink = 0u64;
    let mut seq = 0u64;
    while !shared.stopped() {
        for _ in 0..BATCH {
            let r = rng.next_u64();
            let offset = pick(r, pages) * env.page;
            // The low 32 bits choose read or write; the high bits chose the page.
            let is_read = ((r & 0xffff_ffff) * 100) >> 32 < read_below;
            if let Some(page) = region.get_mut(offset..) {
                if is_read {
                    sink = sink.wrapping_add(read_word(page));
                } else {
                    write_word(page, env.fill.touch_word(&mut rng, seq));
                }
            }
            seq = seq.wrapping_add(1);
        }
        shared.add(BATCH);
    }
    std::hint::black_box(sink);
    Ok(())
}

/// What a pass does to each page it picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// Reads the page's first word.
    Read,
    /// Writes the page's first word.
    Write,
}

/// Seed 001's benchmark on a filled mapping: `passes.count` read passes, then as many write
/// passes, each touching `passes.touches` pages picked at random (with replacement), each
/// timed and logged. Stops early, without logging the unfinished pass, when asked to.
fn timed_passes(buf: &mut [u8], passes: Passes, env: Env, rng: &mut XorShift, shared: &Shared) {
    let mut seq = 0u64;
    for kind in [PassKind::Read, PassKind::Write] {
        for n in 1..=passes.count {
            let started = Instant::now();
            let Some(sink) = one_pass(buf, passes.touches, kind, env, rng, &mut seq, shared) else {
                return;
            };
            std::hint::black_box(sink);
            let secs = started.elapsed().as_secs_f64();
            // Justification: a rate for a log line; f64's rounding of huge counts is fine.
            #[allow(clippy::cast_precision_loss)]
            let per_s = passes.touches as f64 / secs.max(1e-9);
            tracing::info!(
                kind = ?kind,
                pass = n,
                touches = passes.touches,
                secs,
                touches_per_s = per_s,
                "pass done"
            );
        }
    }
}

/// One pass of `touches` random pages; the sum of the words read, or `None` if stopped.
fn one_pass(
    buf: &mut [u8],
    touches: u64,
    kind: PassKind,
    env: Env,
    rng: &mut XorShift,
    seq: &mut u64,
    shared: &Shared,
) -> Option<u64> {
    let pages = (buf.len() / env.page) as u64;
    if pages == 0 {
        return Some(0);
    }
    let mut sink = 0u64;
    let mut left = touches;
    while left > 0 {
        if shared.stopped() {
            return None;
        }
        let batch = left.min(BATCH);
        for _ in 0..batch {
            let offset = pick(rng.next_u64(), pages) * env.page;
            if let Some(page) = buf.get_mut(offset..) {
                match kind {
                    PassKind::Read => sink = sink.wrapping_add(read_word(page)),
                    PassKind::Write => write_word(page, env.fill.touch_word(rng, *seq)),
                }
            }
            *seq = seq.wrapping_add(1);
        }
        shared.add(batch);
        left -= batch;
    }
    Some(sink)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::page_size;

    fn env(fill: Fill) -> Env {
        Env {
            page: page_size(),
            fill,
            seed: 7,
        }
    }

    /// Runs `work` on a thread, stops it after `ms`, returns the op count.
    fn run_for(work: &Work, fill: Fill, ms: u64) -> u64 {
        let shared = Shared::default();
        std::thread::scope(|scope| {
            let handle = scope.spawn(|| run(work, env(fill), &shared));
            std::thread::sleep(Duration::from_millis(ms));
            shared.stop.store(true, Ordering::Relaxed);
            handle
                .join()
                .expect("worker panicked")
                .expect("worker failed");
        });
        shared.ops.load(Ordering::Relaxed)
    }

    #[test]
    fn random_touch_faults_in_and_keeps_touching() {
        let page = page_size();
        let work = Work::RandomTouch {
            size: 64 * page,
            threads: 2,
        };
        let ops = run_for(&work, Fill::Pattern, 100);
        assert!(ops > 64, "only {ops} touches in 100 ms");
    }

    #[test]
    fn seq_write_stops_at_total() {
        let page = page_size();
        let shared = Shared::default();
        let total = (BYTE_CHUNK * 3) as u64;
        run(
            &Work::SeqWrite {
                block: 32 * page,
                total,
            },
            env(Fill::Random),
            &shared,
        )
        .expect("seq-write");
        let done = shared.ops.load(Ordering::Relaxed);
        assert!(done >= total && done < total + BYTE_CHUNK as u64, "{done}");
    }

    #[test]
    fn hog_holds_then_exits() {
        let page = page_size();
        let shared = Shared::default();
        let plan = HogPlan {
            base: 10 * page as u64,
            hold: 1,
            step: None,
            max: None,
            schedule: Vec::new(),
        };
        let started = Instant::now();
        run(&Work::Hog(plan), env(Fill::Pattern), &shared).expect("hog");
        assert_eq!(shared.ops.load(Ordering::Relaxed), 10);
        assert!(started.elapsed() >= Duration::from_secs(1));
    }

    #[test]
    fn file_write_writes_exactly_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out");
        let shared = Shared::default();
        run(
            &Work::FileWrite {
                path: path.clone(),
                size: 100_000,
                block: 4096,
                repeat: false,
            },
            env(Fill::Pattern),
            &shared,
        )
        .expect("file-write");
        assert_eq!(shared.ops.load(Ordering::Relaxed), 100_000);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), 100_000);
    }

    #[test]
    fn file_write_to_a_missing_directory_says_which_path() {
        let shared = Shared::default();
        let err = run(
            &Work::FileWrite {
                path: "/nonexistent-dir/x".into(),
                size: 1,
                block: 1,
                repeat: false,
            },
            env(Fill::Zero),
            &shared,
        )
        .expect_err("must fail");
        assert!(format!("{err:#}").contains("/nonexistent-dir/x"), "{err:#}");
    }

    #[test]
    fn mmap_rw_on_a_file_writes_the_pattern_into_it() {
        let page = page_size();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("map");
        let work = Work::MmapRw {
            size: 16 * page,
            file: Some(path.clone()),
            read_pct: 0,
            passes: None,
        };
        let ops = run_for(&work, Fill::Pattern, 50);
        assert!(ops >= 16);
        let bytes = std::fs::read(&path).expect("read back");
        assert_eq!(bytes.len(), 16 * page);
        for page_bytes in bytes.chunks(page) {
            assert_ne!(read_word(page_bytes), 0, "every page has a nonzero header");
        }
    }

    #[test]
    fn mmap_rw_reads_only_leave_anonymous_memory_alone() {
        let page = page_size();
        let work = Work::MmapRw {
            size: 8 * page,
            file: None,
            read_pct: 100,
            passes: None,
        };
        assert!(run_for(&work, Fill::Zero, 50) >= 8);
    }

    #[test]
    fn mmap_rw_passes_fill_then_touch_and_exit() {
        let page = page_size();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("map");
        for file in [None, Some(path)] {
            let shared = Shared::default();
            let passes = Passes {
                count: 3,
                touches: 5,
            };
            run(
                &Work::MmapRw {
                    size: 50 * page,
                    file,
                    read_pct: 50,
                    passes: Some(passes),
                },
                env(Fill::Pattern),
                &shared,
            )
            .expect("mmap-rw passes");
            // The fill (one op per page), then 3 read and 3 write passes of 5 touches.
            assert_eq!(shared.ops.load(Ordering::Relaxed), 50 + 2 * 3 * 5);
        }
    }

    #[test]
    fn a_write_pass_writes_and_a_read_pass_reads_it_back() {
        let page = page_size();
        let mut buf = vec![0u8; 4 * page];
        let mut rng = XorShift::new(3);
        let shared = Shared::default();
        let mut seq = 0;
        let env = env(Fill::Pattern);
        let mut pass = |kind| one_pass(&mut buf, 64, kind, env, &mut rng, &mut seq, &shared);
        assert_eq!(pass(PassKind::Read), Some(0), "nothing written yet");
        pass(PassKind::Write);
        assert_ne!(
            pass(PassKind::Read),
            Some(0),
            "the written words are read back"
        );
        assert_eq!(shared.ops.load(Ordering::Relaxed), 3 * 64);
        shared.stop.store(true, Ordering::Relaxed);
        assert_eq!(pass(PassKind::Read), None, "a stopped pass is not finished");
    }
}
