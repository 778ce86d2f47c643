//! `lab-agent SCENARIO.toml`: the guest side of the memweight lab.
//!
//! Runs as root from the initramfs `/init` of the lab VM. It loads the zram modules, sets up
//! zram swap and the cgroup v2 tree, starts one workload per managed cgroup, the external
//! pressure process and (optionally) memweightd, runs the timed commands, samples every second
//! and writes framed records (see `lab_agent::frame`) on the console. It refuses to run unless
//! the kernel command line carries `memweight_lab=1`, so it cannot rearrange a real machine's
//! cgroups by accident.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lab_agent::frame;
use lab_agent::kfiles;
use lab_agent::record::{CgroupSample, Event, FileChunk, Hello, HostSample, Record, Sample};
use lab_agent::scenario::{Action, Guest, LAB_PARENT, PRESSURE_CGROUP, Runtime, Scenario, Size};

mod host;

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
/// File records are cut into pieces of at most this many bytes.
const CHUNK: usize = 8 * 1024;

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

/// Writes framed records and progress lines to stdout (the console).
#[derive(Default)]
struct Emitter {
    seq: u64,
}

impl Emitter {
    fn record(&mut self, record: &Record) {
        let line = match frame::encode(self.seq, record) {
            Ok(line) => line,
            Err(e) => {
                // Every record type serialises; this only guards against a future change.
                eprintln!("lab-agent: cannot serialise a record: {e}");
                return;
            }
        };
        self.seq += 1;
        write_line(&line);
    }

    fn progress(&mut self, text: &str) {
        write_line(&format!("{}{text}", frame::PROGRESS_PREFIX));
    }

    fn event(&mut self, t: f64, kind: &str, detail: impl Into<String>, ok: bool) {
        self.record(&Record::Event(Event {
            t,
            kind: kind.to_owned(),
            detail: detail.into(),
            ok,
        }));
    }

    fn file(&mut self, name: &str, text: &str) {
        for piece in chunks(text, CHUNK) {
            self.record(&Record::File(FileChunk {
                name: name.to_owned(),
                data: piece.to_owned(),
            }));
        }
    }

    fn end(&mut self) {
        let records = self.seq;
        self.record(&Record::End { records });
    }
}

/// Cuts `text` into pieces of about `max` bytes; a character is never split, so a piece may
/// run up to three bytes over.
fn chunks(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max.max(1));
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (head, tail) = rest.split_at(cut);
        out.push(head);
        rest = tail;
    }
    out
}

fn write_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // The console is the only channel; if it fails there is nobody left to tell.
    let _ = out.write_all(line.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// A command that runs `program` inside the cgroup `dir`: a shell moves itself into the
/// cgroup, then execs, so nothing is allocated outside it and the pid stays the program's.
/// `NO_COLOR`: its output goes to a file, not a terminal.
fn in_cgroup(dir: &Path, program: &str, args: &[String]) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("echo 0 > \"$0\" && exec \"$@\"")
        .arg(dir.join("cgroup.procs"))
        .arg(program)
        .args(args)
        .env("NO_COLOR", "1");
    c
}

/// Writes an existing kernel control file (never creates one).
fn write_file(path: &Path, data: &str) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {} to write {data:?}", path.display()))?;
    f.write_all(data.as_bytes())
        .with_context(|| format!("writing {data:?} to {} failed", path.display()))
}

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

fn run_quiet(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
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

type OpsMap = Arc<Mutex<HashMap<String, (f64, Instant)>>>;

struct Workload {
    name: String,
    dir: PathBuf,
    child: Option<Child>,
    /// A client run beside it, outside the cgroup (`client` in the scenario).
    client: Option<Child>,
    removed: bool,
    /// Host guest: where podman writes the container id, until the cgroup is known.
    cidfile: Option<PathBuf>,
    /// Host guest, `kube = true`: the pod's annotations (started with `podman kube play`).
    kube: Option<std::collections::BTreeMap<String, String>>,
}

impl Workload {
    /// Kills everything in its cgroup (`cgroup.kill` takes the workload's children too) and
    /// reaps the workload and its client.
    fn kill(&mut self) {
        let _ = write_file(&self.dir.join("cgroup.kill"), "1");
        for mut child in [self.child.take(), self.client.take()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

struct PendingCommand {
    /// File name under `commands/` (without `.txt`).
    file: String,
    /// Event kind: `command`, `assert`, `install`, `stop-daemon`, `remove-cgroup`.
    kind: &'static str,
    run: String,
    started: Instant,
    at: f64,
    child: Child,
    output: PathBuf,
    timeout: Duration,
}

struct Lab {
    host: bool,
    runtime: Runtime,
    t0: Instant,
    lab_dir: PathBuf,
    pressure_dir: PathBuf,
    workloads: Vec<Workload>,
    weights: Vec<u32>,
    ops: OpsMap,
    hog: Option<Child>,
    pressure_size: u64,
    daemon: Option<Child>,
    daemon_enabled: bool,
    daemon_stopping: bool,
    /// `/proc/PID` of every kswapd thread, found once (kernel threads do not come and go).
    kswapd: Vec<PathBuf>,
    commands: Vec<PendingCommand>,
    command_files: Vec<(String, PathBuf)>,
}

impl Lab {
    fn setup(scenario: &Scenario, em: &mut Emitter) -> Result<Lab> {
        if scenario.guest == Guest::Host {
            return Ok(Lab::setup_host(scenario));
        }
        let root = Path::new(CGROUP_ROOT);
        write_file(&root.join("cgroup.subtree_control"), "+memory")
            .context("is cgroup2 mounted on /sys/fs/cgroup?")?;
        let lab_dir = root.join(LAB_PARENT);
        mkdir(&lab_dir)?;
        write_file(&lab_dir.join("cgroup.subtree_control"), "+memory")?;
        if let Some(low) = scenario.effective_lab_low() {
            write_file(&lab_dir.join("memory.low"), &low.to_string())?;
        }
        let pressure_dir = root.join(PRESSURE_CGROUP);
        mkdir(&pressure_dir)?;
        // The pressure process must hold real memory: no swapping it out to zram.
        if let Err(e) = write_file(&pressure_dir.join("memory.swap.max"), "0") {
            em.event(0.0, "setup", format!("{e:#}"), false);
        }
        let mut workloads = Vec::new();
        for c in &scenario.cgroups {
            let dir = lab_dir.join(&c.name);
            mkdir(&dir)?;
            if let Some(high) = c.initial_high {
                write_file(&dir.join("memory.high"), &high.to_string())?;
            }
            if let Some(low) = c.initial_low {
                write_file(&dir.join("memory.low"), &low.0.to_string())?;
            }
            if let Some(low) = scenario.static_low.get(&c.name) {
                write_file(&dir.join("memory.low"), &low.0.to_string())?;
            }
            workloads.push(Workload {
                name: c.name.clone(),
                dir,
                child: None,
                client: None,
                removed: false,
                cidfile: None,
                kube: None,
            });
        }
        if scenario.daemon.enabled {
            let config = toml::to_string(&scenario.daemon.config)
                .context("cannot serialise [daemon.config]")?;
            fs::create_dir_all("/etc").context("cannot create /etc")?;
            fs::write(DAEMON_CONFIG, config)
                .with_context(|| format!("cannot write {DAEMON_CONFIG}"))?;
            fs::create_dir_all("/var/lib/memweight").context("cannot create the state dir")?;
        }
        Ok(Lab::new(scenario, false, lab_dir, pressure_dir, workloads))
    }

    fn new(
        scenario: &Scenario,
        host: bool,
        lab_dir: PathBuf,
        pressure_dir: PathBuf,
        workloads: Vec<Workload>,
    ) -> Lab {
        Lab {
            host,
            runtime: scenario.runtime,
            t0: Instant::now(),
            lab_dir,
            pressure_dir,
            workloads,
            weights: scenario.cgroups.iter().map(|c| c.weight).collect(),
            ops: Arc::new(Mutex::new(HashMap::new())),
            hog: None,
            pressure_size: 0,
            daemon: None,
            daemon_enabled: scenario.daemon.enabled,
            kswapd: kswapd_tasks(),
            daemon_stopping: false,
            commands: Vec::new(),
            command_files: Vec::new(),
        }
    }

    /// The host guest: containers are made by podman when they start, the daemon by the
    /// README's install steps; nothing to create up front.
    fn setup_host(scenario: &Scenario) -> Lab {
        let workloads = scenario
            .cgroups
            .iter()
            .map(|c| Workload {
                name: c.name.clone(),
                // Unknown until podman names the container; sampled as absent until then.
                dir: PathBuf::from(format!("/sys/fs/cgroup/machine.slice/pending-{}", c.name)),
                child: None,
                client: None,
                removed: false,
                cidfile: Some(Path::new(WORK_DIR).join(format!("{}.cid", c.name))),
                kube: c.kube.then(|| c.annotations.clone()),
            })
            .collect();
        Lab::new(
            scenario,
            true,
            PathBuf::from("/sys/fs/cgroup/machine.slice"),
            PathBuf::from(host::PRESSURE_SCOPE),
            workloads,
        )
    }

    /// Host guest: finds the cgroups of containers whose id podman has written, and applies
    /// the scenario's initial limits (and `static_low`) to them once. The parent's
    /// (`machine.slice`) memory.low is the scenario's to set, with a command.
    fn resolve_containers(&mut self, scenario: &Scenario, em: &mut Emitter) {
        let t = self.now();
        for (w, spec) in self.workloads.iter_mut().zip(&scenario.cgroups) {
            let Some(cidfile) = &w.cidfile else { continue };
            let Some(text) = read(cidfile) else { continue };
            let Some(cid) = host::parse_cid(&text) else {
                continue;
            };
            let Some(dir) = host::find_container_cgroup(scenario.runtime, cid) else {
                continue;
            };
            let mut problems = Vec::new();
            if let Some(high) = spec.initial_high
                && let Err(e) = write_file(&dir.join("memory.high"), &high.to_string())
            {
                problems.push(format!("{e:#}"));
            }
            if let Some(low) = spec
                .initial_low
                .or(scenario.static_low.get(&spec.name).copied())
                && let Err(e) = write_file(&dir.join("memory.low"), &low.0.to_string())
            {
                problems.push(format!("{e:#}"));
            }
            em.event(
                t,
                "container",
                format!("{}: {cid} {}{}", w.name, dir.display(), problems.join("; ")),
                problems.is_empty(),
            );
            w.dir = dir;
            w.cidfile = None;
        }
    }

    fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn run_loop(&mut self, scenario: &Scenario, em: &mut Emitter) -> Result<()> {
        self.t0 = Instant::now();
        let mut steps = scenario.pressure.clone();
        steps.sort_by_key(|p| p.at);
        for tick in 0..=scenario.duration {
            let due = self.t0 + Duration::from_secs(tick);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            for (i, c) in scenario.cgroups.iter().enumerate() {
                if c.start == tick {
                    self.start_workload(i, &c.argv(), Some(&c.labels), em)?;
                    self.start_client(i, &c.client_argv(), em)?;
                }
            }
            if scenario.daemon.enabled && scenario.daemon.start == tick {
                self.start_daemon(em)?;
            }
            if tick == 0
                && let Some(argv) = scenario.pressure_argv()
            {
                self.start_pressure(&argv, em);
            }
            for step in steps.iter().filter(|p| p.at == tick) {
                self.pressure_step(step.size, em);
            }
            for (index, cmd) in scenario.commands.iter().enumerate() {
                if cmd.at != tick {
                    continue;
                }
                match (&cmd.run, cmd.action) {
                    (Some(line), _) => {
                        let kind = if cmd.assert { "assert" } else { "command" };
                        let file = format!("{index:02}-{}", slug(line));
                        let timeout = cmd.timeout.map_or(COMMAND_TIMEOUT, Duration::from_secs);
                        self.start_command(file, kind, line, timeout, em);
                    }
                    (None, Some(Action::StopDaemon)) => self.stop_daemon(em),
                    (None, Some(Action::KillDaemon)) => self.kill_daemon(em),
                    (None, Some(Action::StartDaemon)) => {
                        self.daemon_stopping = false;
                        if let Err(e) = self.start_daemon(em) {
                            em.event(self.now(), "start-daemon", format!("{e:#}"), false);
                        }
                    }
                    (None, Some(Action::RemoveCgroup)) => {
                        if let Some(name) = &cmd.cgroup {
                            self.remove_cgroup(name, em);
                        }
                    }
                    (None, None) => {}
                }
            }
            if self.host {
                self.resolve_containers(scenario, em);
            }
            self.poll_children(em);
            let sample = self.sample();
            em.progress(&sample.progress_line(&self.weights));
            em.record(&Record::Sample(sample));
        }
        Ok(())
    }

    fn start_in_cgroup(&self, dir: &Path, argv: &[String], log: &Path) -> Result<Child> {
        let Some((program, args)) = argv.split_first() else {
            bail!("empty argv for {}", dir.display());
        };
        let stderr =
            File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        in_cgroup(dir, program, args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {program} in {}", dir.display()))
    }

    fn start_workload(
        &mut self,
        index: usize,
        argv: &[String],
        labels: Option<&std::collections::BTreeMap<String, String>>,
        em: &mut Emitter,
    ) -> Result<()> {
        let Some(w) = self.workloads.get_mut(index) else {
            return Ok(());
        };
        if argv.is_empty() {
            return Ok(());
        }
        let log = Path::new(WORK_DIR).join(format!("workload-{}.stderr", w.name));
        let dir = w.dir.clone();
        let name = w.name.clone();
        let mut child = match (&w.cidfile, &w.kube) {
            (Some(cidfile), Some(annotations)) => {
                let pod_file = Path::new(WORK_DIR).join(format!("{name}.pod.json"));
                fs::write(&pod_file, host::kube_pod(&name, annotations, argv))
                    .with_context(|| format!("cannot write {}", pod_file.display()))?;
                let context = host::kube_image_context()?;
                let script = host::kube_script(&name, &context, &pod_file, cidfile);
                start_logged(&["sh".to_owned(), "-c".to_owned(), script], &log)?
            }
            (Some(cidfile), None) => {
                let labels = labels.cloned().unwrap_or_default();
                let argv = host::run_argv(self.runtime, &name, &labels, argv, cidfile);
                start_logged(&argv, &log)?
            }
            (None, _) => self.start_in_cgroup(&dir, argv, &log)?,
        };
        self.read_ops(&name, &mut child);
        let t = self.now();
        if let Some(w) = self.workloads.get_mut(index) {
            w.child = Some(child);
        }
        em.event(
            t,
            "workload-start",
            format!("{name}: {}", argv.join(" ")),
            true,
        );
        Ok(())
    }

    /// Records the JSON lines on `child`'s stdout as `name`'s ops/s.
    fn read_ops(&self, name: &str, child: &mut Child) {
        if let Some(stdout) = child.stdout.take() {
            let ops = Arc::clone(&self.ops);
            let name = name.to_owned();
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(v) = kfiles::workload_ops_per_s(&line)
                        && let Ok(mut map) = ops.lock()
                    {
                        map.insert(name.clone(), (v, Instant::now()));
                    }
                }
            });
        }
    }

    /// Starts the cgroup's client (`client` in the scenario), outside every managed cgroup.
    fn start_client(&mut self, index: usize, argv: &[String], em: &mut Emitter) -> Result<()> {
        let Some(w) = self.workloads.get(index) else {
            return Ok(());
        };
        if argv.is_empty() {
            return Ok(());
        }
        let name = w.name.clone();
        let log = Path::new(WORK_DIR).join(format!("client-{name}.stderr"));
        let mut child = start_logged(argv, &log)?;
        self.read_ops(&name, &mut child);
        let t = self.now();
        if let Some(w) = self.workloads.get_mut(index) {
            w.client = Some(child);
        }
        em.event(
            t,
            "client-start",
            format!("{name}: {}", argv.join(" ")),
            true,
        );
        Ok(())
    }

    fn start_daemon(&mut self, em: &mut Emitter) -> Result<()> {
        if self.host {
            // Exactly the README's install steps (extracted by the host), run as a shell
            // script in a copy of the repository's layout; they end in `systemctl enable --now`.
            let line = format!(
                "cd {} && sh -ex {}",
                host::repo_dir().display(),
                host::install_script().display()
            );
            self.start_command(
                "install".into(),
                "assert",
                &line,
                Duration::from_secs(120),
                em,
            );
            return Ok(());
        }
        let log_path = Path::new(WORK_DIR).join("daemon.log");
        // Appended to: a daemon started again (`start-daemon`) keeps the first one's log.
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let log2 = log
            .try_clone()
            .context("cannot duplicate the daemon log handle")?;
        // In a cgroup of its own, as systemd would run it, so that its CPU time can be read.
        let cgroup = Path::new(LAB_DAEMON_CGROUP);
        fs::create_dir_all(cgroup)
            .with_context(|| format!("cannot create {}", cgroup.display()))?;
        let child = in_cgroup(
            cgroup,
            "memweightd",
            &["--config".into(), DAEMON_CONFIG.into()],
        )
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .context("cannot start memweightd (is it in the initramfs?)")?;
        em.event(
            self.now(),
            "daemon-start",
            format!("pid {}", child.id()),
            true,
        );
        self.daemon = Some(child);
        Ok(())
    }

    fn start_pressure(&mut self, argv: &[String], em: &mut Emitter) {
        let log = Path::new(WORK_DIR).join("pressure.stderr");
        let t = self.now();
        let started = if self.host {
            start_logged(&host::pressure_argv(argv), &log)
        } else {
            self.start_in_cgroup(&self.pressure_dir, argv, &log)
        };
        match started {
            Ok(mut child) => {
                // The hog's per-second lines are not needed; drain them so it never blocks.
                if let Some(stdout) = child.stdout.take() {
                    thread::spawn(move || {
                        for line in BufReader::new(stdout).lines() {
                            if line.is_err() {
                                break;
                            }
                        }
                    });
                }
                self.hog = Some(child);
                em.event(t, "pressure-start", argv.join(" "), true);
            }
            Err(e) => em.event(t, "pressure", format!("{e:#}"), false),
        }
    }

    /// The hog follows its schedule by itself; this records the step and checks it still runs.
    fn pressure_step(&mut self, size: Size, em: &mut Emitter) {
        self.pressure_size = size.0;
        let t = self.now();
        let alive = self
            .hog
            .as_mut()
            .is_some_and(|h| matches!(h.try_wait(), Ok(None)));
        let detail = if alive {
            size.to_string()
        } else {
            format!("{size}: the pressure process is not running (see workloads/pressure.stderr)")
        };
        em.event(t, "pressure", detail, alive);
    }

    fn start_command(
        &mut self,
        file: String,
        kind: &'static str,
        line: &str,
        timeout: Duration,
        em: &mut Emitter,
    ) {
        let output = Path::new(WORK_DIR).join(format!("cmd-{file}.txt"));
        let t = self.now();
        let spawned = File::create(&output).and_then(|f| {
            let f2 = f.try_clone()?;
            let mut cmd = Command::new("sh");
            cmd.arg("-c")
                .arg(line)
                .env("LAB_CGROUP", &self.lab_dir)
                .stdin(Stdio::null())
                .stdout(f)
                .stderr(f2);
            for w in &self.workloads {
                cmd.env(host::cgroup_env_name(&w.name), &w.dir);
            }
            if let Some(d) = &self.daemon {
                cmd.env("MEMWEIGHTD_PID", d.id().to_string());
            }
            cmd.spawn()
        });
        match spawned {
            Ok(child) => self.commands.push(PendingCommand {
                file,
                kind,
                run: line.to_owned(),
                started: Instant::now(),
                at: t,
                child,
                output,
                timeout,
            }),
            Err(e) => em.event(t, kind, format!("{line}: cannot start: {e}"), false),
        }
    }

    fn stop_daemon(&mut self, em: &mut Emitter) {
        if self.host {
            self.daemon_stopping = true;
            self.start_command(
                "stop-daemon".into(),
                "stop-daemon",
                "systemctl stop memweightd.service",
                Duration::from_secs(60),
                em,
            );
            return;
        }
        let t = self.now();
        let Some(d) = &self.daemon else {
            em.event(t, "stop-daemon", "memweightd is not running", false);
            return;
        };
        let pid = d.id().to_string();
        match run_quiet("kill", &["-TERM", &pid]) {
            Ok(()) => {
                self.daemon_stopping = true;
                em.event(t, "stop-daemon", format!("SIGTERM to pid {pid}"), true);
            }
            Err(e) => em.event(t, "stop-daemon", format!("{e:#}"), false),
        }
    }

    /// SIGKILL: the daemon dies without restoring anything; its exit is expected.
    fn kill_daemon(&mut self, em: &mut Emitter) {
        let t = self.now();
        if self.host {
            self.start_command(
                "kill-daemon".into(),
                "kill-daemon",
                "systemctl kill -s KILL --kill-who=main memweightd.service",
                Duration::from_secs(20),
                em,
            );
            return;
        }
        let Some(d) = &mut self.daemon else {
            em.event(t, "kill-daemon", "memweightd is not running", false);
            return;
        };
        let pid = d.id();
        match d.kill().and_then(|()| d.wait()) {
            Ok(status) => {
                em.event(
                    t,
                    "kill-daemon",
                    format!("SIGKILL to pid {pid}: {}", describe(status)),
                    true,
                );
                self.daemon = None;
            }
            Err(e) => em.event(
                t,
                "kill-daemon",
                format!("SIGKILL to pid {pid}: {e}"),
                false,
            ),
        }
    }

    fn remove_cgroup(&mut self, name: &str, em: &mut Emitter) {
        let t = self.now();
        let Some(w) = self.workloads.iter_mut().find(|w| w.name == name) else {
            return;
        };
        w.removed = true;
        if self.host {
            // The operator's way: the engine stops the container and systemd removes its scope.
            let line = match self.runtime {
                Runtime::Podman => format!("podman rm -f -t 2 {name}"),
                Runtime::Docker => format!("docker rm -f {name}"),
            };
            self.start_command(
                format!("remove-{name}"),
                "remove-cgroup",
                &line,
                Duration::from_secs(60),
                em,
            );
            return;
        }
        w.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        let result = loop {
            match fs::remove_dir(&w.dir) {
                Ok(()) => break Ok(()),
                Err(e) if Instant::now() > deadline => break Err(e),
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        };
        match result {
            Ok(()) => em.event(t, "remove-cgroup", name, true),
            Err(e) => em.event(
                t,
                "remove-cgroup",
                format!("rmdir {} failed: {e}", w.dir.display()),
                false,
            ),
        }
    }

    fn poll_children(&mut self, em: &mut Emitter) {
        let t = self.now();
        if let Some(d) = &mut self.daemon
            && let Ok(Some(status)) = d.try_wait()
        {
            let stopping = self.daemon_stopping;
            em.event(
                t,
                "daemon-exit",
                describe(status),
                stopping && status.success(),
            );
            self.daemon = None;
        }
        for w in &mut self.workloads {
            if let Some(child) = &mut w.child
                && let Ok(Some(status)) = child.try_wait()
            {
                em.event(
                    t,
                    "workload-exit",
                    format!("{}: {}", w.name, describe(status)),
                    status.success(),
                );
                w.child = None;
            }
            if let Some(client) = &mut w.client
                && let Ok(Some(status)) = client.try_wait()
            {
                em.event(
                    t,
                    "client-exit",
                    format!("{}: {}", w.name, describe(status)),
                    status.success(),
                );
                w.client = None;
            }
        }
        let mut i = 0;
        while i < self.commands.len() {
            let pending = &mut self.commands[i];
            let finished = match pending.child.try_wait() {
                Ok(Some(status)) => Some((describe(status), status.success())),
                Ok(None) if pending.started.elapsed() > pending.timeout => {
                    let _ = pending.child.kill();
                    let _ = pending.child.wait();
                    Some((
                        format!("killed after {} s", pending.timeout.as_secs()),
                        false,
                    ))
                }
                Ok(None) => None,
                Err(e) => Some((format!("cannot wait: {e}"), false)),
            };
            if let Some((how, ok)) = finished {
                let done = self.commands.swap_remove(i);
                em.event(t, done.kind, format!("{} -> {how}", done.run), ok);
                let mut text = format!("$ {}\n# at t={:.1}s, {how}\n", done.run, done.at);
                text.push_str(&read(&done.output).unwrap_or_default());
                let name = format!("commands/{}.txt", done.file);
                let path = Path::new(WORK_DIR).join(format!("cmd-{}.out", done.file));
                if fs::write(&path, text).is_ok() {
                    self.command_files.push((name, path));
                }
            } else {
                i += 1;
            }
        }
    }

    fn sample(&self) -> Sample {
        let ops = self.ops.lock().map(|m| m.clone()).unwrap_or_default();
        let cgroups = self
            .workloads
            .iter()
            .map(|w| {
                let mut s = sample_cgroup(&w.dir);
                s.name = w.name.clone();
                s.ops_per_s = ops.get(&w.name).map(|(v, at)| {
                    if at.elapsed() > OPS_STALE || w.removed {
                        0.0
                    } else {
                        *v
                    }
                });
                s
            })
            .collect();
        let meminfo = read(Path::new("/proc/meminfo")).unwrap_or_default();
        let (psi_some10, psi_full10) =
            kfiles::psi_avg10(&read(Path::new("/proc/pressure/memory")).unwrap_or_default());
        let meminfo = kfiles::meminfo(&meminfo);
        let swap_used = meminfo.map(|m| m.swap_total.saturating_sub(m.swap_free));
        Sample {
            t: self.now(),
            cgroups,
            host: HostSample {
                mem_available: meminfo.map(|m| m.mem_available),
                mem_free: meminfo.map(|m| m.mem_free),
                swap_used,
                psi_some10,
                psi_full10,
            },
            pressure_size: self.pressure_size,
            pressure_current: read(&self.pressure_dir.join("memory.current"))
                .and_then(|s| kfiles::single_u64(&s)),
            daemon_alive: self.daemon_enabled.then(|| {
                if self.host {
                    host::daemon_alive()
                } else {
                    self.daemon.is_some()
                }
            }),
            daemon_cpu_usec: if self.daemon_enabled {
                let dir = if self.host {
                    host::DAEMON_CGROUP
                } else {
                    LAB_DAEMON_CGROUP
                };
                read(&Path::new(dir).join("cpu.stat")).and_then(|s| kfiles::cpu_usage_usec(&s))
            } else {
                None
            },
            kswapd_cpu_usec: kswapd_cpu_usec(&self.kswapd),
        }
    }

    fn shutdown(&mut self, em: &mut Emitter) {
        if self.host {
            // The workloads first (cgroup.kill ends a container at once), so that collecting
            // the results does not crawl under the pressure they make.
            for w in &mut self.workloads {
                let _ = write_file(&w.dir.join("cgroup.kill"), "1");
            }
            if self.daemon_enabled && host::daemon_alive() {
                let out = host::output_within(
                    Duration::from_secs(60),
                    "systemctl",
                    &["stop", "memweightd.service"],
                );
                em.event(
                    self.now(),
                    "daemon-exit",
                    format!("at the end: systemctl stop {}", out.trim()),
                    true,
                );
            }
        }
        if let Some(mut d) = self.daemon.take() {
            let pid = d.id().to_string();
            let _ = run_quiet("kill", &["-TERM", &pid]);
            // As long as the unit's TimeoutStopSec: a daemon restoring 10,000 cgroups under
            // TCG needs more than a few seconds.
            let deadline = Instant::now() + Duration::from_secs(30);
            let status = loop {
                match d.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if Instant::now() < deadline => {
                        thread::sleep(Duration::from_millis(100));
                    }
                    _ => {
                        let _ = d.kill();
                        let _ = d.wait();
                        break None;
                    }
                }
            };
            let t = self.now();
            match status {
                Some(s) => em.event(
                    t,
                    "daemon-exit",
                    format!("at the end: {}", describe(s)),
                    s.success(),
                ),
                None => em.event(t, "daemon-exit", "ignored SIGTERM for 30 s; killed", false),
            }
        }
        for w in &mut self.workloads {
            w.kill();
        }
        if let Some(mut hog) = self.hog.take() {
            let _ = hog.kill();
            let _ = hog.wait();
        }
        for mut pending in self.commands.drain(..) {
            let _ = pending.child.kill();
            let _ = pending.child.wait();
        }
    }

    fn emit_files(&self, em: &mut Emitter) {
        let work = Path::new(WORK_DIR);
        if self.host {
            let journal = host::journal();
            em.file("journal.txt", &journal);
            if self.daemon_enabled {
                em.file("daemon.log", &journal);
                em.file(
                    "daemon.toml",
                    &read(Path::new("/etc/memweight/memweight.toml")).unwrap_or_default(),
                );
            }
            let mut containers = host::output_within(
                Duration::from_secs(60),
                match self.runtime {
                    Runtime::Podman => "podman",
                    Runtime::Docker => "docker",
                },
                &["ps", "-a", "--format", "{{.ID}} {{.Names}} {{.Labels}}"],
            );
            for w in &self.workloads {
                containers.push_str(&format!("{} {}\n", w.name, w.dir.display()));
            }
            em.file("containers.txt", &containers);
        } else if self.daemon_enabled {
            em.file(
                "daemon.log",
                &read(&work.join("daemon.log")).unwrap_or_default(),
            );
            em.file(
                "daemon.toml",
                &read(Path::new(DAEMON_CONFIG)).unwrap_or_default(),
            );
        }
        for (name, path) in &self.command_files {
            em.file(name, &read(path).unwrap_or_default());
        }
        for w in &self.workloads {
            let text = read(&work.join(format!("workload-{}.stderr", w.name))).unwrap_or_default();
            em.file(&format!("workloads/{}.stderr", w.name), &text);
            if let Ok(text) = fs::read_to_string(work.join(format!("client-{}.stderr", w.name))) {
                em.file(&format!("workloads/client-{}.stderr", w.name), &text);
            }
        }
        em.file(
            "workloads/pressure.stderr",
            &read(&work.join("pressure.stderr")).unwrap_or_default(),
        );
    }
}

/// Starts `argv` with stdout piped and stderr to `log` (host guest: podman, systemd-run).
fn start_logged(argv: &[String], log: &Path) -> Result<Child> {
    let Some((program, args)) = argv.split_first() else {
        bail!("empty argv");
    };
    let stderr = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    Command::new(program)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {program}"))
}

/// `/proc/PID` of every task named `kswapd*` (one per NUMA node).
fn kswapd_tasks() -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|p| read(&p.join("comm")).is_some_and(|c| c.starts_with("kswapd")))
        .collect();
    found.sort();
    found
}

/// Σ CPU time of the kswapd threads since boot, in microseconds.
fn kswapd_cpu_usec(tasks: &[PathBuf]) -> Option<u64> {
    if tasks.is_empty() {
        return None;
    }
    let per_s = procfs::ticks_per_second().max(1);
    tasks
        .iter()
        .map(|t| read(&t.join("stat")).and_then(|s| kfiles::task_cpu_ticks(&s)))
        .sum::<Option<u64>>()
        .map(|ticks| ticks.saturating_mul(1_000_000) / per_s)
}

fn mkdir(dir: &Path) -> Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot create cgroup {}", dir.display())),
    }
}

fn sample_cgroup(dir: &Path) -> CgroupSample {
    let file = |name: &str| read(&dir.join(name));
    let (psi_some10, psi_full10) =
        file("memory.pressure").map_or((None, None), |t| kfiles::psi_avg10(&t));
    let events = file("memory.events").and_then(|t| kfiles::events(&t));
    CgroupSample {
        name: String::new(),
        present: dir.is_dir(),
        current: file("memory.current").and_then(|t| kfiles::single_u64(&t)),
        high: file("memory.high").and_then(|t| kfiles::limit(&t)),
        low: file("memory.low").and_then(|t| kfiles::single_u64(&t)),
        swap: file("memory.swap.current").and_then(|t| kfiles::single_u64(&t)),
        psi_some10,
        psi_full10,
        events_high: events.map(|e| e.high),
        events_max: events.map(|e| e.max),
        events_oom_kill: events.map(|e| e.oom_kill),
        ops_per_s: None,
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "unknown status".to_owned(),
    }
}

fn slug(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    s.trim_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_size_and_characters() {
        assert!(chunks("", 4).is_empty());
        assert_eq!(chunks("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        let text = "aé€😀b";
        let pieces = chunks(text, 2);
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| !p.is_empty()));
        assert_eq!(chunks("x", 0), vec!["x"]);
    }

    #[test]
    fn slug_is_file_safe() {
        assert_eq!(
            slug("memweightctl status --json"),
            "memweightctl-status---json"
        );
        assert_eq!(slug("../../x"), "x");
    }

    #[test]
    fn sample_of_missing_cgroup_is_absent() {
        let s = sample_cgroup(Path::new("/nonexistent/lab/c9"));
        assert!(!s.present);
        assert_eq!(s.current, None);
    }
}
