//! memweightd: keeps each managed cgroup's memory in proportion to its weight under pressure.
//!
//! See `docs/configuration.md` for the config file and `docs/operations.md` for running it.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use memweightd::config::Config;
use memweightd::controller::Controller;
use memweightd::metrics::{Metrics, Snapshot};
use memweightd::server::{self, Call, Server};
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
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = &args.check_config {
        return match Config::load(path) {
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
    let (cfg, rules) = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("memweightd: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&cfg.log_level);
    // Before the runtime starts its threads; MCL_FUTURE covers them anyway.
    match memweightd::resident::lock() {
        memweightd::resident::Locked::Yes => info!("memory locked (mlockall)"),
        memweightd::resident::Locked::No(why) => {
            warn!(reason = %why, "running with unlocked memory: the daemon may be swapped out under pressure");
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("memweightd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args.config, cfg, rules)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            eprintln!("memweightd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_target(false)
        .init();
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
    let mut hup = signal(SignalKind::hangup()).context("installing SIGHUP handler")?;
    let mut interval = new_interval(tick);
    let mut ready = false;
    info!(config = %config_path.display(), ?tick, enforce = ctl.config().enforce, "memweightd started");
    loop {
        tokio::select! {
            _ = interval.tick() => {
                match ctl.tick().await {
                    Ok(r) => {
                        let r = r.clone();
                        metrics.observe(&r);
                        let status = format!(
                            "STATUS=managing {} cgroup(s), capacity {} MiB, usage {} MiB, {}",
                            r.cgroups.len(), r.pool.capacity >> 20, r.pool.total_usage >> 20,
                            if r.pool.pressure { "under pressure" } else { "no pressure" });
                        snapshots.send_replace(Some(Arc::new(Snapshot {
                            report: r,
                            counters: ctl.counters().clone(),
                            at: Instant::now(),
                            interval: tick,
                        })));
                        notify(&[&status, "WATCHDOG=1"]);
                        if !ready {
                            notify(&["READY=1"]);
                            ready = true;
                        }
                    }
                    Err(e) => warn!(error = %e, "tick failed"),
                }
            }
            Some(call) = calls.recv() => {
                // A call whose client stopped waiting is dropped, not carried out late.
                server::answer(&mut ctl, call, &config_path);
                if ctl.config().tick.0 != tick {
                    tick = ctl.config().tick.0;
                    interval = new_interval(tick);
                }
            }
            _ = term.recv() => { info!("SIGTERM: restoring original limits"); break; }
            _ = int.recv() => { info!("SIGINT: restoring original limits"); break; }
            _ = hup.recv() => {
                // A refused reload keeps the running configuration and logs why (WARN).
                let _ = server::reload(&mut ctl, &config_path);
                if ctl.config().tick.0 != tick {
                    tick = ctl.config().tick.0;
                    interval = new_interval(tick);
                }
                notify(&["READY=1"]);
            }
        }
    }
    notify(&["STOPPING=1"]);
    server_task.abort();
    ctl.release_all().await;
    info!("memweightd stopped; original limits restored");
    Ok(())
}

fn new_interval(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

fn notify(states: &[&str]) {
    let states: Vec<sd_notify::NotifyState<'_>> = states
        .iter()
        .map(|s| match *s {
            "READY=1" => sd_notify::NotifyState::Ready,
            "WATCHDOG=1" => sd_notify::NotifyState::Watchdog,
            "STOPPING=1" => sd_notify::NotifyState::Stopping,
            other => sd_notify::NotifyState::Status(other.trim_start_matches("STATUS=")),
        })
        .collect();
    // Not running under systemd (NOTIFY_SOCKET unset) is fine: notify is then a no-op.
    let _ = sd_notify::notify(&states);
}
