//! `memweight-workload`: the memory workloads the memweight lab runs inside its guest.
//!
//! One binary, one mode per run (`random-touch`, `seq-write`, `hog`, `file-write`,
//! `mmap-rw`, `idle-connections`, `sampler`, `redis`; see `--help`). Whatever the mode, stdout carries exactly one JSON line per
//! second, flushed, and nothing else:
//!
//! ```text
//! {"t":1.000,"ops":1523456,"ops_per_s":1523301.2,"unit":"pages","rss":314572800}
//! ```
//!
//! `t` is seconds since the program started (a `--start-delay` shows as lines with 0 ops),
//! `ops` what was done in that second (pages touched or bytes written, as `unit` says), `rss`
//! the resident set from `/proc/self/statm`. When the work ends early (SIGTERM/SIGINT, or a
//! mode that finishes, like `seq-write --total`) a last, shorter interval may be printed.
//! Diagnostics go to stderr. Exit codes: 0 done or stopped by a signal, 1 the work failed,
//! 2 bad arguments (one line on stderr).
//!
//! Layout: [`cli`] parses and validates (no I/O), [`modes`] holds the loops ([`redis_client`] the Redis client's), [`meter`] the
//! per-second accounting, [`fill`] page contents and the PRNG, [`sys`] the only unsafe code.

mod cli;
mod fill;
mod meter;
mod modes;
mod redis_client;
mod sys;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use clap::Parser;
use clap::error::ErrorKind;
use tracing::info;

use crate::cli::{Cli, Plan};
use crate::meter::{Meter, json_line, rss_from_statm};
use crate::modes::{Env, Shared};

/// How often the reporter looks at the stop signal and the worker between ticks.
const POLL: Duration = Duration::from_millis(50);

/// Shortest final interval worth a line of its own.
const MIN_LAST_INTERVAL_SECS: f64 = 0.05;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            // Help and version were asked for: print them on stdout and succeed.
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!(
                "memweight-workload: no mode given; use one of random-touch, seq-write, hog, idle-connections, sampler, \
                 file-write, mmap-rw (see --help)"
            );
            return ExitCode::from(2);
        }
        Err(err) => {
            eprintln!("memweight-workload: {}", one_line(&err.to_string()));
            return ExitCode::from(2);
        }
    };
    let plan = match cli.validate(sys::page_size()) {
        Ok(plan) => plan,
        Err(err) => {
            eprintln!("memweight-workload: {err}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(&plan) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("memweight-workload: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Folds clap's multi-line error into one line: the message and its details, no usage.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .take_while(|line| !line.starts_with("Usage:") && !line.starts_with("For more information"))
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .trim_start_matches("error: ")
        .to_owned()
}

/// A seed that differs between runs and between processes started together.
fn default_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()) ^ d.as_secs());
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

fn run(plan: &Plan) -> Result<()> {
    sys::install_stop_handlers().context("installing the SIGTERM/SIGINT handlers failed")?;
    let start = Instant::now();
    let env = Env {
        page: sys::page_size(),
        fill: plan.fill,
        seed: plan.seed.unwrap_or_else(default_seed),
    };
    info!(
        mode = plan.work.name(),
        fill = ?plan.fill,
        seed = env.seed,
        duration_s = plan.duration,
        start_delay_s = plan.start_delay,
        work = ?plan.work,
        "workload starting"
    );
    let shared = Shared::default();
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("workload".to_owned())
            .spawn_scoped(scope, || {
                if shared.sleep_unless_stopped(Duration::from_secs(plan.start_delay)) {
                    modes::run(&plan.work, env, &shared)
                } else {
                    Ok(())
                }
            })
            .context("spawning the worker thread failed")?;
        let reported = report(plan, start, env.page, &shared, || worker.is_finished());
        shared.stop.store(true, Ordering::Relaxed);
        let worked = worker
            .join()
            .map_err(|_| anyhow!("the worker thread panicked"))?;
        info!(
            ops = shared.ops.load(Ordering::Relaxed),
            elapsed_s = start.elapsed().as_secs_f64(),
            "workload stopped"
        );
        worked.and(reported)
    })
}

/// Why the reporter woke up.
enum Wake {
    Tick,
    Stop,
}

fn wait_until(deadline: Instant, finished: &impl Fn() -> bool) -> Wake {
    loop {
        if sys::stop_requested() || finished() {
            return Wake::Stop;
        }
        let now = Instant::now();
        if now >= deadline {
            return Wake::Tick;
        }
        std::thread::sleep((deadline - now).min(POLL));
    }
}

/// Prints a line at each whole second since `start` until the duration is over, a signal
/// arrives or the worker finishes.
fn report(
    plan: &Plan,
    start: Instant,
    page: usize,
    shared: &Shared,
    finished: impl Fn() -> bool,
) -> Result<()> {
    let unit = plan.work.unit();
    let end = (plan.duration > 0).then(|| plan.start_delay.saturating_add(plan.duration));
    let page = u64::try_from(page).unwrap_or(4096);
    let mut meter = Meter::new();
    let mut out = std::io::stdout().lock();
    let mut tick = 1u64;
    loop {
        let wake = wait_until(start + Duration::from_secs(tick), &finished);
        let previous = meter.last_t();
        let t = start.elapsed().as_secs_f64();
        let sample = meter.tick(t, shared.ops.load(Ordering::Relaxed));
        match wake {
            Wake::Tick => {
                emit(&mut out, &json_line(&sample, unit, rss(page)))?;
                if end.is_some_and(|end| tick >= end) {
                    return Ok(());
                }
                // After an oversleep (a stalled guest), skip the missed seconds, no burst.
                tick = (tick + 1).max(start.elapsed().as_secs() + 1);
            }
            Wake::Stop => {
                // A last partial interval is printed when it did work (so the lines add up
                // to the total) or is long enough for its rate to mean something.
                if sample.ops > 0 || t - previous >= MIN_LAST_INTERVAL_SECS {
                    emit(&mut out, &json_line(&sample, unit, rss(page)))?;
                }
                return Ok(());
            }
        }
    }
}

fn emit(out: &mut impl Write, line: &str) -> Result<()> {
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .context("writing the report to stdout failed (was the reader closed?)")
}

fn rss(page: u64) -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| rss_from_statm(&statm, page))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_fold_into_one_line() {
        let err = Cli::try_parse_from(["memweight-workload", "random-touch"])
            .expect_err("missing --size");
        let line = one_line(&err.to_string());
        assert!(!line.contains('\n'));
        assert!(line.contains("--size"), "{line}");
        assert!(!line.starts_with("error:"), "{line}");
        assert!(!line.contains("Usage"), "{line}");
    }

    #[test]
    fn seeds_differ_across_calls_or_processes() {
        // Not a strict guarantee within one process, but the pid term is always present.
        assert_ne!(default_seed() & 0xffff_ffff_0000_0000, 0);
    }

    #[test]
    fn emit_writes_one_line() {
        let mut buf = Vec::new();
        emit(&mut buf, "{}").expect("write to Vec");
        assert_eq!(buf, b"{}\n");
    }

    #[test]
    fn own_rss_is_visible() {
        assert!(rss(u64::try_from(sys::page_size()).expect("fits")) > 0);
    }

    #[test]
    fn unit_is_per_mode() {
        assert_eq!(crate::meter::Unit::Pages.as_str(), "pages");
    }
}
