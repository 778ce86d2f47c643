//! The processes the lab starts and stops: the workloads in their cgroups and their clients
//! beside them, memweightd (started, stopped, killed), the pressure hog and its steps, the
//! timed commands; a cgroup removed; the children polled for their exits.
//!
//! Not here: when each is done (the loop in `lab`), the sample (`sample`).

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lab_agent::kfiles;
use lab_agent::scenario::{Runtime, Size};

use super::{Lab, PendingCommand};
use crate::console::Emitter;
use crate::host;
use crate::sys::{describe, in_cgroup, read, run_quiet, start_logged};
use crate::{DAEMON_CONFIG, LAB_DAEMON_CGROUP, WORK_DIR};

impl Lab {
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

    pub(super) fn start_workload(
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
    pub(super) fn start_client(
        &mut self,
        index: usize,
        argv: &[String],
        em: &mut Emitter,
    ) -> Result<()> {
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

    pub(super) fn start_daemon(&mut self, em: &mut Emitter) -> Result<()> {
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

    pub(super) fn start_pressure(&mut self, argv: &[String], em: &mut Emitter) {
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
    pub(super) fn pressure_step(&mut self, size: Size, em: &mut Emitter) {
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

    pub(super) fn start_command(
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

    pub(super) fn stop_daemon(&mut self, em: &mut Emitter) {
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
    pub(super) fn kill_daemon(&mut self, em: &mut Emitter) {
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

    pub(super) fn remove_cgroup(&mut self, name: &str, em: &mut Emitter) {
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

    pub(super) fn poll_children(&mut self, em: &mut Emitter) {
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
                self.record_command(&done, &how, ok, t, em);
            } else {
                i += 1;
            }
        }
    }

    /// Kills the commands still running when the run ends and records each as failed, with
    /// what it printed: a step cut off by the end is what one debugs a slow run with.
    pub(super) fn end_commands(&mut self, em: &mut Emitter) {
        let t = self.now();
        for mut pending in std::mem::take(&mut self.commands) {
            let _ = pending.child.kill();
            let _ = pending.child.wait();
            let how = format!(
                "still running at the end of the run ({:.0} s after it started): killed",
                pending.started.elapsed().as_secs_f64()
            );
            self.record_command(&pending, &how, false, t, em);
        }
    }

    /// One finished command: its event (a failure carries the tail of its output) and its
    /// output file for the host.
    fn record_command(
        &mut self,
        done: &PendingCommand,
        how: &str,
        ok: bool,
        t: f64,
        em: &mut Emitter,
    ) {
        let output = read(&done.output).unwrap_or_default();
        let mut detail = format!("{} -> {how}", done.run);
        if !ok {
            // What it printed is what one debugs a failure with, and a CI log may be all one
            // has of it.
            detail.push_str(&output_tail(&output, FAILED_OUTPUT_LINES));
        }
        em.event(t, done.kind, detail, ok);
        let mut text = format!("$ {}\n# at t={:.1}s, {how}\n", done.run, done.at);
        text.push_str(&output);
        let name = format!("commands/{}.txt", done.file);
        let path = Path::new(WORK_DIR).join(format!("cmd-{}.out", done.file));
        if fs::write(&path, text).is_ok() {
            self.command_files.push((name, path));
        }
    }
}

/// Lines of a failed command's output carried in its event.
const FAILED_OUTPUT_LINES: usize = 30;

/// The last `lines` lines of `output`, each on a line of its own after `  | `, under a line
/// saying how many there were.
fn output_tail(output: &str, lines: usize) -> String {
    let all: Vec<&str> = output.lines().collect();
    let shown = &all[all.len().saturating_sub(lines)..];
    let mut text = format!(
        "\n  its output (last {} of {} lines):",
        shown.len(),
        all.len()
    );
    for line in shown {
        text.push_str("\n  | ");
        text.push_str(line);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stop 30's CI failed on host-hostile's flood step with only the script's tail in the log:
    /// which of its three assertions failed was in a file the CI clone took with it.
    #[test]
    fn regression_a_failed_commands_output_was_not_in_the_ci_log() {
        let output: String = (1..=40).map(|n| format!("line {n}\n")).collect();
        let tail = output_tail(&output, 30);
        assert!(
            tail.starts_with("\n  its output (last 30 of 40 lines):"),
            "{tail}"
        );
        assert!(
            tail.contains("\n  | line 11\n") && tail.ends_with("\n  | line 40"),
            "{tail}"
        );
        assert!(!tail.contains("line 10\n"), "{tail}");
        assert_eq!(output_tail("", 30), "\n  its output (last 0 of 0 lines):");
    }
}
