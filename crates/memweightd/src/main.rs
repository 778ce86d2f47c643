//! memweightd: keeps each managed cgroup's memory in proportion to its weight under pressure.
//!
//! See `docs/configuration.md` for the config file and `docs/operations.md` for running it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use memweightd::commands;
use memweightd::config::Config;
use memweightd::controller::Controller;
use memweightd::metrics::{Metrics, Published};
use memweightd::server::{Call, Server};
use memweightd::systemd::{self, notify};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

/// Weighted memory reclamation daemon for cgroup v2 containers.
#[derive(Debug, Parser)]
#[command(name = "memweightd", version, about)]
struct Args {
    /// Configuration file.
    #[arg(
        long,
        short,
        default_value = "/etc/memweight/memweight.toml",
        env = "MEMWEIGHT_CONFIG"
    )]
    config: PathBuf,
    /// Validate FILE and exit (0 = valid, 2 = invalid).
    #[arg(long, value_name = "FILE")]
    check_config: Option<PathBuf>,
    /// Put back every original limit recorded in the state file and exit (0 = nothing left
    /// recorded, 1 = some could not be restored and stay recorded). Run by the unit's
    /// `ExecStopPost=` after a daemon that died without restoring (SIGKILL, SIGABRT, the
    /// watchdog); a no-op after a clean stop. Uses `--config` for the state directory and the
    /// cgroup root, and the built-in defaults if that file cannot be read.
    #[arg(long, conflicts_with = "check_config")]
    restore: bool,
    /// Print the man page (roff) and exit: `memweightd --man > memweightd.8` (the package build
    /// runs it).
    #[arg(long, hide = true)]
    man: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.man {
        return print_man();
    }
    if let Some(path) = &args.check_config {
        return match systemd::load_config(path) {
            Ok((cfg, rules)) => {
                println!(
                    "{}: ok ({} rule(s), root {}, tick {:?}, {})",
                    path.display(),
                    cfg.cgroup.len(),
                    cfg.cgroup_root.display(),
                    cfg.tick.0,
                    if cfg.enforce { "enforcing" } else { "dry-run" }
                );
                let _ = rules;
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("memweightd: {e}");
                ExitCode::from(2)
            }
        };
    }
    if args.restore {
        return restore_mode(&args.config);
    }
    let (cfg, rules) = match systemd::load_config(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("memweightd: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&cfg.log_level);
    raise_nofile();
    // Before the runtime starts its threads; MCL_FUTURE covers them anyway.
    let shed_later = match memweightd::resident::lock() {
        memweightd::resident::Locked::Yes(Ok(shed)) => {
            info!(
                program_kib = shed / 1024,
                "memory locked (mlockall), the program's pages dropped first: only what runs stays"
            );
            true
        }
        memweightd::resident::Locked::Yes(Err(why)) => {
            info!(reason = %why, "memory locked (mlockall), the whole program as mapped");
            false
        }
        memweightd::resident::Locked::No(why) => {
            warn!(reason = %why, "running with unlocked memory: the daemon may be swapped out under pressure");
            false
        }
    };
    // Before the runtime: a memory.high write the kernel would let reclaim in the writer for
    // as long as the cgroup refaults is interrupted after a bound.
    if let Err(e) = memweightd::interrupt::install() {
        warn!(error = %e, "memory.high writes are not bounded in time: a write below a \
            refaulting cgroup's usage may hold that cgroup's later writes");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(memweightd::pools::BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("memweightd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let startup = cfg.clone();
    let config_path = args.config.clone();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            if shed_later {
                tokio::spawn(shed_start_up());
            }
            run(args.config, cfg, rules).await
        })
    }));
    // Write jobs still blocked in the kernel are not waited for: whatever they write lands
    // before the restore below or is covered by the state file (ExecStopPost, next start).
    runtime.shutdown_timeout(Duration::from_secs(1));
    match outcome {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            error!("{e:#}");
            eprintln!("memweightd: {e:#}");
            ExitCode::FAILURE
        }
        Err(_) => {
            // The panic message is already on stderr (the default hook). Every limit written
            // has its original in the state file: put them all back before exiting.
            error!("memweightd panicked; restoring every recorded original before exiting");
            // The file as last reloaded names the state directory in use; the start-up
            // configuration if it cannot be read now.
            let cfg = systemd::load_config(&config_path).map_or(startup, |(c, _)| c);
            restore_all(cfg);
            ExitCode::from(101)
        }
    }
}

/// [`memweightd::resident::shed_again`], once, when start-up is long over.
async fn shed_start_up() {
    tokio::time::sleep(memweightd::resident::SHED_AGAIN_AFTER).await;
    match tokio::task::spawn_blocking(memweightd::resident::shed_again).await {
        Ok(Ok(shed)) => info!(
            program_kib = shed / 1024,
            "the program's pages dropped once more: what only start-up ran is no longer locked"
        ),
        Ok(Err(why)) => warn!(reason = %why, "cannot drop the start-up code's pages"),
        Err(e) => warn!("cannot drop the start-up code's pages: {e}"),
    }
}

/// `memweightd --man`: the man page, generated from the clap definitions like memweightctl's.
fn print_man() -> ExitCode {
    use clap::CommandFactory as _;
    use std::io::Write as _;
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(Args::command())
        .section("8")
        .render(&mut out)
    {
        eprintln!("memweightd: cannot render the man page: {e}");
        return ExitCode::FAILURE;
    }
    match std::io::stdout().write_all(&out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memweightd: cannot write the man page: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `memweightd --restore`.
fn restore_mode(config: &std::path::Path) -> ExitCode {
    let cfg = match systemd::load_config(config) {
        Ok((cfg, _)) => cfg,
        Err(e) => {
            eprintln!(
                "memweightd: {e}; restoring with the built-in defaults (state in \
                 /var/lib/memweight, cgroups under /sys/fs/cgroup)"
            );
            Config::default()
        }
    };
    init_logging(&cfg.log_level);
    let _lock = match memweightd::state::lock(&cfg.state_dir) {
        Ok(l) => Some(l),
        Err(e @ memweightd::state::LockError::Held(_)) => {
            error!("not restoring: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            warn!("{e}; restoring without the lock");
            None
        }
    };
    match restore_all(cfg) {
        Some(0) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// Restores every original in the state file `cfg` names; how many are left recorded, or
/// `None` when the state could not be read at all.
fn restore_all(cfg: Config) -> Option<usize> {
    let dir = cfg.state_dir.clone();
    match Controller::new(cfg, memweightd::config::Rules::none()) {
        Ok(mut ctl) => {
            let left = ctl.restore_only();
            if left == 0 {
                info!(state_dir = %dir.display(), "every recorded original is restored");
            } else {
                error!(left, state_dir = %dir.display(),
                    "some originals could not be restored; they stay recorded for the next start");
            }
            Some(left)
        }
        Err(e) => {
            error!(state_dir = %dir.display(), "cannot restore: {e}");
            None
        }
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard one: the loop's own files must never run out
/// because of clients (the listeners bound theirs). Under the shipped unit both are 4096
/// already and the syscall filter refuses `setrlimit`; that is fine.
fn raise_nofile() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    {
        tracing::debug!(soft, hard, error = %e, "cannot raise RLIMIT_NOFILE");
    }
}

fn init_logging(level: &str) {
    memweightd::logging::init(level);
}

async fn run(
    config_path: PathBuf,
    cfg: Config,
    rules: memweightd::config::Rules,
) -> anyhow::Result<()> {
    let mut tick = cfg.tick.0;
    let metrics_addr = match (cfg.metrics.enabled, cfg.metrics.address()) {
        (false, _) => None,
        (true, Err(e)) => anyhow::bail!("[metrics] listen: {e}"),
        (true, Ok(addr)) => Some(addr),
    };
    let _lock = match memweightd::state::lock(&cfg.state_dir) {
        Ok(l) => Some(l),
        Err(e @ memweightd::state::LockError::Held(_)) => anyhow::bail!("cannot start: {e}"),
        Err(e) => {
            warn!("{e}; running without the state directory's lock");
            None
        }
    };
    let mut ctl = Controller::new(cfg, rules).context("cannot start")?;
    ctl.start_containers();
    let server = Server::bind(&ctl.config().control).context("cannot open the control socket")?;
    let (snapshots, snapshot_rx) = watch::channel(None);
    // Socket → desk (answers `status` from the last report) → loop (everything else).
    let (desk_tx, desk_rx) = mpsc::channel::<Call>(64);
    let (calls_tx, mut calls) = mpsc::channel::<Call>(16);
    let server_task = tokio::spawn(server.serve(desk_tx));
    tokio::spawn(memweightd::desk::serve(
        desk_rx,
        calls_tx,
        snapshot_rx.clone(),
    ));
    let metrics = Metrics::default();
    if let Some(addr) = metrics_addr {
        tokio::spawn(memweightd::metrics::serve_addr(
            addr,
            snapshot_rx,
            metrics.clone(),
        ));
    }
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    // SIGTERM/SIGINT are taken on their own task: they cut a long tick short (the stop flag)
    // instead of waiting for it to end.
    let (stop_tx, mut stop_rx) = mpsc::channel::<&'static str>(1);
    let stop = ctl.stop_handle();
    tokio::spawn(async move {
        let which = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = stop_tx.send(which).await;
    });
    let mut hup = signal(SignalKind::hangup()).context("installing SIGHUP handler")?;
    let mut interval = new_interval(tick);
    // The passes between ticks (`reclaim_passes`): due at the k-th part of the tick from the
    // tick's own start, none in the last half part before the next tick (see `Passes`).
    let mut passes = Passes::default();
    let mut ready = false;
    let mut notifier = systemd::Notifier::new(systemd::watchdog_from_env());
    info!(config = %config_path.display(), ?tick, enforce = ctl.config().enforce, "memweightd started");
    // Control calls the loop may take before the next tick: a flood of requests delays a tick
    // (and the watchdog ping after it) by at most this many, or by about half a tick of their
    // work, whichever comes first; and a run of long ticks still serves waiting calls between
    // two of them. A `set` only hands its save to the state file's writer thread: its answer
    // waits for the fsync, the loop does not (`commands::Answers`).
    let mut calls_left = CALLS_PER_TICK;
    let mut calls_time = Duration::ZERO;
    // `set`/`unset` answers waiting for their save; the loop never waits for the disk.
    let mut answers = commands::Answers::default();
    loop {
        tokio::select! {
            // In this order: a stop first, then control calls while this tick's budget lasts,
            // then reloads, then the tick (after a long tick the interval is ready at once and
            // would otherwise be picked again before any waiting call).
            biased;
            Some(which) = stop_rx.recv() => {
                info!("{which}: restoring original limits");
                break;
            }
            // Not before the first tick: a request that socket activation started the daemon
            // for would otherwise find nothing managed yet (`set`: "no such cgroup"). It waits
            // in the channel, bounded by the socket's loop timeout.
            Some(call) = calls.recv(), if ready && calls_left > 0 && calls_time < tick / 2 => {
                calls_left -= 1;
                let started = Instant::now();
                // A call whose client stopped waiting is dropped, not carried out late.
                answers.answer(&mut ctl, call, &config_path);
                calls_time += started.elapsed();
                retime(ctl.config().tick.0, &mut tick, &mut interval);
            }
            // A save on its way: its answer goes out, and its override in force, as soon as it
            // is on disk (a few ms) rather than at the next tick.
            () = tokio::time::sleep(commands::SETTLE_POLL), if ctl.saving_overrides() => {
                answers.settle(&mut ctl);
            }
            _ = hup.recv() => {
                // Only root signals, and signals coalesce. A refused reload keeps the running configuration and logs why (WARN).
                let _ = commands::reload(&mut ctl, &config_path);
                retime(ctl.config().tick.0, &mut tick, &mut interval);
                notify(&["READY=1"]);
            }
            _ = interval.tick() => {
                // The watchdog watches the loop, not the host: a tick that failed (say, /proc
                // unreadable for a moment) still pings, so systemd does not abort a daemon
                // that is running and holding limits. Readiness means serving: after the first
                // tick, whatever became of it (`status` says "not ready" until one succeeds).
                let cpu_before = if ready { None } else { cpu_time() };
                passes = Passes::after_tick(tokio::time::Instant::now(), tick, ctl.config().reclaim_passes);
                let outcome = ctl.tick().await;
                let kind = outcome.as_ref().ok().map(|r| (r.cgroups.len(), r.pool.pressure));
                let ping = notifier.due(Instant::now(), kind);
                if ping && outcome.is_err() {
                    notify(&["WATCHDOG=1"]);
                }
                answers.settle(&mut ctl);
                calls_left = CALLS_PER_TICK;
                calls_time = Duration::ZERO;
                if !ready {
                    if let Ok(r) = &outcome {
                        // CPU beside wall time: on a busy host the wall time of a big first
                        // tick is mostly waiting for a CPU.
                        let cpu_ms = cpu_before
                            .zip(cpu_time())
                            .map(|(a, b)| b.saturating_sub(a).as_millis());
                        info!(cgroups = r.cgroups.len(), elapsed_ms = r.pool.duration_us / 1000,
                            cpu_ms, "first tick done");
                    }
                    notify(&["READY=1"]);
                    ready = true;
                }
                match outcome {
                    Ok(r) => {
                        metrics.observe(&r);
                        let status = format!(
                            "STATUS=managing {} cgroup(s), capacity {} MiB, usage {} MiB, {}",
                            r.cgroups.len(), r.pool.capacity >> 20, r.pool.total_usage >> 20,
                            if r.pool.pressure { "under pressure" } else { "no pressure" });
                        snapshots.send_replace(Some(Arc::new(Published {
                            report: r,
                            counters: ctl.counters().clone(),
                            at: Instant::now(),
                            interval: tick,
                        })));
                        if ping {
                            notify(&["WATCHDOG=1", &status]);
                        }
                    }
                    Err(memweightd::controller::ControlError::Stopping) => {}
                    Err(e) => warn!(error = %e, "tick failed"),
                }
            }
            // The passes between ticks (`reclaim_passes`; 1: none), last: a tick or a call
            // goes first. Each tick places its own, so a reload's new tick or passes count
            // from the next tick on.
            () = passes.wait(), if ready && passes.due.is_some() => {
                passes.next(tokio::time::Instant::now());
                ctl.reclaim_pass().await;
            }
        }
    }
    notify(&["STOPPING=1"]);
    server_task.abort();
    ctl.release_all().await;
    // Everything is on disk now (or given up): answer what still waits.
    answers.settle(&mut ctl);
    info!("memweightd stopped; original limits restored");
    Ok(())
}

/// When the next `memory.reclaim` pass between ticks is due
/// ([`memweightd::controller::Controller::reclaim_pass`]). They are placed from the tick's
/// start, not on a timer of their own: a tick waits up to half a tick for its write jobs, and a
/// free-running timer drifted until a pass ran just before a tick read the cgroups, which then
/// read a cgroup the pass had just taken down (`memory.reclaim` takes more than asked from a
/// toucher on 6.12) as bitten by the kernel, and the law let it go (seed 002 on 6.12, the 450M
/// step, 2026-11-30: the weight-1 toucher let go three times, +11.6 % over its share).
#[derive(Debug, Default)]
struct Passes {
    /// The next one (`None`: none before the next tick).
    due: Option<tokio::time::Instant>,
    /// Between two passes.
    period: Duration,
    /// The next tick: no pass in the last half period before it.
    until: Option<tokio::time::Instant>,
}

impl Passes {
    /// The passes of the tick that starts at `start`: `count - 1` of them, a `tick / count`
    /// apart after it.
    fn after_tick(start: tokio::time::Instant, tick: Duration, count: u32) -> Self {
        if count < 2 {
            return Self::default();
        }
        let period = tick / count;
        let mut p = Passes {
            due: Some(start),
            period,
            until: Some(start + tick - period / 2),
        };
        p.next(start);
        p
    }

    /// Moves on to the next pass: one period later, or none if that is too close to the next
    /// tick. A pass that could not run in time (a long tick, a flood of calls) is skipped.
    fn next(&mut self, now: tokio::time::Instant) {
        let mut due = self.due.map(|d| d + self.period);
        while let Some(d) = due
            && d < now
        {
            due = Some(d + self.period);
        }
        self.due = due.filter(|&d| self.until.is_some_and(|u| d < u));
    }

    /// Waits for the next pass (forever when there is none: the caller guards on `due`).
    async fn wait(&self) {
        match self.due {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    }
}

/// Control calls carried out between two ticks at most (see the loop in [`run`]).
const CALLS_PER_TICK: usize = 16;

/// Starts a new tick interval when a reload changed the tick.
fn retime(period: Duration, tick: &mut Duration, interval: &mut tokio::time::Interval) {
    if period != *tick {
        *tick = period;
        *interval = new_interval(period);
    }
}

fn new_interval(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

/// The process's CPU time so far (user + system, every thread); `None` if it cannot be read.
fn cpu_time() -> Option<Duration> {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let d = |t: nix::sys::time::TimeVal| {
        Duration::new(
            u64::try_from(t.tv_sec()).unwrap_or(0),
            u32::try_from(t.tv_usec()).unwrap_or(0).saturating_mul(1000),
        )
    };
    Some(d(u.user_time()) + d(u.system_time()))
}

#[cfg(test)]
mod tests {
    use super::Passes;
    use std::time::Duration;
    use tokio::time::Instant;

    /// Four passes a tick: the tick's own and three between, a quarter of a tick apart from the
    /// tick's start; none within half a quarter of the next tick; one a long tick made late
    /// runs once, and those whose time passed meanwhile are skipped, not run in a burst.
    #[test]
    fn passes_are_placed_from_the_ticks_start() {
        let start = Instant::now();
        let tick = Duration::from_secs(1);
        let ms = |n| start + Duration::from_millis(n);
        let mut p = Passes::after_tick(start, tick, 4);
        assert_eq!(p.due, Some(ms(250)));
        p.next(ms(250));
        assert_eq!(p.due, Some(ms(500)));
        p.next(ms(500));
        assert_eq!(p.due, Some(ms(750)));
        p.next(ms(750));
        assert_eq!(p.due, None, "the next tick's own comes next");
        // The tick took 600 ms: the pass due at 250 runs late, at 600; then 750.
        let mut p = Passes::after_tick(start, tick, 4);
        p.next(ms(600));
        assert_eq!(p.due, Some(ms(750)));
        // One pass a tick: none between ticks.
        assert_eq!(Passes::after_tick(start, tick, 1).due, None);
    }
}
