//! The end of a run: the daemon stopped (SIGTERM, or the unit stopped in the host guest) and
//! its exit recorded, the workloads, the hog and pending commands killed (each command recorded
//! as failed, with its output); then the files the host wants (the daemon's log and config, the
//! containers, the commands' output) sent as records.
//!
//! Not here: the loop (`lab`), the processes' start (`processes`).

use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use lab_agent::scenario::Runtime;

use super::Lab;
use crate::console::Emitter;
use crate::host;
use crate::sys::{describe, read, run_quiet, write_file};
use crate::{DAEMON_CONFIG, WORK_DIR};

impl Lab {
    pub(crate) fn shutdown(&mut self, em: &mut Emitter) {
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
        self.end_commands(em);
    }

    pub(crate) fn emit_files(&self, em: &mut Emitter) {
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
