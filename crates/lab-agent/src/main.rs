//! `lab-agent SCENARIO.toml`: the guest side of the memweight lab.
//!
//! Runs as root from the initramfs `/init` of the lab VM. It loads the zram modules, sets up
//! zram swap and the cgroup v2 tree, starts one workload per managed cgroup, the external
//! pressure process and (optionally) memweightd, runs the timed commands, samples every second
//! and writes framed records (see `lab_agent::frame`) on the console. It refuses to run unless
//! the kernel command line carries `memweight_lab=1`, so it cannot rearrange a real machine's
//! cgroups by accident.
//!
//! The rooms: this file holds the boot (the guard, the zram modules and swap, the host guest's
//! wait for systemd) and the paths every room uses; `console` frames the records; `lab` runs the
//! scenario (`lab/`: setup and the loop, the processes it starts and stops, the 1 Hz sample,
//! the shutdown and the files sent back); `host` is the host guest's tools; `sys` holds small
//! file and process helpers.

use std::fs;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lab_agent::kfiles;
use lab_agent::record::{Hello, Record};
use lab_agent::scenario::{Guest, Scenario, Size};

mod console;
mod host;
mod lab;
mod sys;

use console::Emitter;
use lab::Lab;
use sys::{read, run_quiet, write_file};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
const WORK_DIR: &str = "/tmp/lab";
const DAEMON_CONFIG: &str = "/etc/memweight.toml";
/// The busybox guest's cgroup for memweightd (the host guest's is systemd's unit cgroup).
const LAB_DAEMON_CGROUP: &str = "/sys/fs/cgroup/memweightd";
const MODULE_DIR: &str = "/modules";
/// A timed shell command is killed after this long (unless its `timeout` says otherwise).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);
/// A throughput older than this counts as a stalled workload (0 ops/s).
const OPS_STALE: Duration = Duration::from_secs(3);

fn main() -> ExitCode {
    let mut em = Emitter::default();
    let result = run(&mut em);
    let code = match &result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            em.record(&Record::Error {
                message: format!("{e:#}"),
            });
            ExitCode::FAILURE
        }
    };
    em.end();
    if Path::new(host::PAYLOAD).join("scenario.toml").is_file() {
        // The host guest: power off now rather than wait for systemd to stop whatever the
        // scenario left behind (commands' children, containers). The disk is a throw-away
        // snapshot; give the serial port a moment to drain the last records first.
        thread::sleep(Duration::from_secs(2));
        let _ = Command::new("systemctl")
            .args(["--force", "--force", "poweroff"])
            .status();
    }
    code
}

fn run(em: &mut Emitter) -> Result<()> {
    let path = std::env::args()
        .nth(1)
        .context("usage: lab-agent SCENARIO.toml (run by the lab VM's /init)")?;
    let cmdline = fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if !cmdline.split_whitespace().any(|w| w == "memweight_lab=1") {
        bail!(
            "refusing to run: /proc/cmdline lacks memweight_lab=1, so this is not the lab VM \
             (the agent rearranges cgroups and swap; use `cargo xtask lab run`)"
        );
    }
    let text = fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let scenario = Scenario::parse(&text).with_context(|| format!("scenario {path}"))?;
    fs::create_dir_all(WORK_DIR).with_context(|| format!("cannot create {WORK_DIR}"))?;

    let meminfo = read(Path::new("/proc/meminfo")).unwrap_or_default();
    em.record(&Record::Hello(Hello {
        kernel: read(Path::new("/proc/sys/kernel/osrelease"))
            .unwrap_or_default()
            .trim()
            .to_owned(),
        mem_total: kfiles::meminfo(&meminfo).map_or(0, |m| m.mem_total),
        cpus: thread::available_parallelism().map_or(1, |n| n.get() as u64),
        agent: env!("CARGO_PKG_VERSION").to_owned(),
    }));

    if scenario.guest == Guest::Host {
        // systemd set up the guest: the console (ttyS1) is not ours, records go to ttyS0.
        let state = host::wait_system_running(Duration::from_secs(180))?;
        em.event(0.0, "system", format!("systemd: {state}"), true);
        if scenario.zram.0 > 0 {
            host::wait_zram_swap(Duration::from_secs(30))?;
        }
        let runtime = host::prepare_runtime(scenario.runtime)?;
        em.event(0.0, "system", runtime, true);
    } else {
        // Keep kernel messages off the console so they cannot split a record line.
        let _ = write_file(Path::new("/proc/sys/kernel/printk"), "1");
        load_modules()?;
        if scenario.zram.0 > 0 {
            setup_zram(scenario.zram)?;
        }
    }
    let mut lab = Lab::setup(&scenario, em)?;
    let outcome = lab.run_loop(&scenario, em);
    lab.shutdown(em);
    lab.emit_files(em);
    outcome
}

fn load_modules() -> Result<()> {
    let order = Path::new(MODULE_DIR).join("order");
    let Some(list) = read(&order) else {
        return Ok(());
    };
    for name in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let ko = Path::new(MODULE_DIR).join(name);
        let out = Command::new("insmod")
            .arg(&ko)
            .output()
            .context("cannot run insmod (busybox)")?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && !stderr.contains("File exists") {
            bail!(
                "insmod {} failed: {} — the initramfs module list does not match this kernel",
                ko.display(),
                stderr.trim()
            );
        }
    }
    Ok(())
}

fn wait_for(path: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !path.exists() {
        if Instant::now() > deadline {
            bail!("{} did not appear within 5 s", path.display());
        }
        thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn setup_zram(size: Size) -> Result<()> {
    let sys = Path::new("/sys/block/zram0");
    wait_for(sys).context("zram module loaded but no zram0 device")?;
    write_file(&sys.join("disksize"), &size.0.to_string())?;
    let dev = Path::new("/dev/zram0");
    wait_for(dev).context("is devtmpfs mounted on /dev?")?;
    run_quiet("mkswap", &["/dev/zram0"])?;
    run_quiet("swapon", &["/dev/zram0"])?;
    Ok(())
}
