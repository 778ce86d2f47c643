//! The scenario's run: the cgroups and workloads set up ([`Lab::setup`]), the containers of
//! the host guest found, and the loop that runs the timed actions, polls the children and
//! samples once a second until the scenario's end.
//!
//! The rooms: `processes` (workloads, clients, the daemon, the pressure hog, timed commands:
//! started, stopped, polled), `sample` (the 1 Hz sample of the host and the cgroups), `status`
//! (the daemon's own view, asked on its socket),
//! `teardown` (the shutdown and the files sent back). Not here: the boot (`main.rs`), the
//! console (`console`).

mod processes;
mod sample;
mod status;
mod teardown;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lab_agent::record::Record;
use lab_agent::scenario::{
    Action, Guest, LAB_PARENT, PRESSURE_CGROUP, PressureStep, Runtime, Scenario,
};

use crate::console::Emitter;
use crate::host;
use crate::sys::{mkdir, read, slug, write_file};
use crate::{CGROUP_ROOT, COMMAND_TIMEOUT, DAEMON_CONFIG, WORK_DIR};
use sample::kswapd_tasks;

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

pub(crate) struct Lab {
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
    /// The daemon's newest `status` (`daemon.sample_status`).
    status: Option<status::StatusSlot>,
    commands: Vec<PendingCommand>,
    command_files: Vec<(String, PathBuf)>,
}

impl Lab {
    pub(crate) fn setup(scenario: &Scenario, em: &mut Emitter) -> Result<Lab> {
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
            // A daemon the lab does not start (host-kube's pod) has no unit whose socket a
            // connection would activate: it is asked whenever its socket answers.
            status: scenario.daemon.sample_status.then(|| {
                status::spawn(
                    PathBuf::from(scenario.daemon.socket()),
                    host && scenario.daemon.enabled,
                )
            }),
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

    /// The scenario's loop: every second, what falls due starts and one sample is taken.
    ///
    /// The timeline is the clock's. When the guest stalls (the host guest under the balloon
    /// thrashes its own file pages: host-podman on 6.1, 2026-11-29, stalled 16 and 28 s), the
    /// seconds missed are not replayed one sample each: their events start at once, in order,
    /// and one sample covers them. Replayed, the loop ran up to 45 s behind the clock for a
    /// minute, and the steps timed against the balloon (which the host drives by the clock)
    /// started after it had deflated.
    pub(crate) fn run_loop(&mut self, scenario: &Scenario, em: &mut Emitter) -> Result<()> {
        self.t0 = Instant::now();
        let mut steps = scenario.pressure.clone();
        steps.sort_by_key(|p| p.at);
        let last_event = scenario.last_event();
        let mut tick = 0;
        while tick <= scenario.duration {
            let due = self.t0 + Duration::from_secs(tick);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            let reached = self.t0.elapsed().as_secs().clamp(tick, scenario.duration);
            for second in tick..=reached {
                self.start_due(scenario, &steps, second, em)?;
            }
            tick = reached + 1;
            if self.host {
                self.resolve_containers(scenario, em);
            }
            self.poll_children(em);
            let sample = self.sample();
            em.progress(&sample.progress_line(&self.weights));
            em.record(&Record::Sample(sample));
            if scenario.end_when_done && reached >= last_event && self.commands.is_empty() {
                em.event(
                    self.now(),
                    "end",
                    format!(
                        "every command done at {reached} s (end_when_done; the limit is {} s)",
                        scenario.duration
                    ),
                    true,
                );
                break;
            }
        }
        Ok(())
    }

    /// Starts what the scenario has at second `tick`: workloads and their clients, the
    /// daemon, the pressure process and its steps, the timed commands and actions.
    fn start_due(
        &mut self,
        scenario: &Scenario,
        steps: &[PressureStep],
        tick: u64,
        em: &mut Emitter,
    ) -> Result<()> {
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
        Ok(())
    }
}
