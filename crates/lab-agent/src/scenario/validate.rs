//! The rules a scenario file must keep, checked once when it is read ([`Scenario::parse`]):
//! sizes and times in range, names that are one path component and unique, the guest's and
//! runtime's combinations that work, and every check's parameters. Each refusal says what to
//! change.

use super::*;

impl Scenario {
    pub(super) fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |m: String| Err(ScenarioError::Invalid(m));
        if self.duration == 0 {
            return bad("duration must be at least 1 second".into());
        }
        if self.end_when_done {
            // The host deflates the balloon at `duration`; a run that ends before it must
            // have given the memory back itself, or collecting the results crawls.
            if let Some(last) = self.balloon.iter().max_by_key(|b| b.at)
                && last.size.0 != 0
            {
                return bad(format!(
                    "end_when_done needs the balloon's last step to give everything back \
                     (a [[balloon]] with size = \"0\"); its last, at {}s, holds {}",
                    last.at, last.size
                ));
            }
            if self.commands.is_empty() {
                return bad(
                    "end_when_done needs at least one [[command]]: the run ends when \
                            they are done"
                        .into(),
                );
            }
        }
        if self.cpus == 0 {
            return bad("cpus must be at least 1".into());
        }
        if self.ram.0 < (128 << 20) {
            return bad(format!("ram {} is below the 128M a guest needs", self.ram));
        }
        if let Some(p) = &self.prometheus {
            if self.guest != Guest::Host {
                return bad("[prometheus] needs guest = \"host\" (a network device)".into());
            }
            if p.guest_port == 0 {
                return bad("[prometheus] guest_port must not be 0".into());
            }
            for a in &p.alerts {
                if a.fires_from > a.fires_until || a.quiet_from > a.quiet_until {
                    return bad(format!(
                        "[[prometheus.alert]] {}: a window ends before it starts",
                        a.name
                    ));
                }
            }
        }
        if self.guest == Guest::Busybox {
            if !self.balloon.is_empty() {
                return bad(
                    "[[balloon]] needs guest = \"host\" (the busybox guest has no \
                            balloon device)"
                        .into(),
                );
            }
            if self.runtime != Runtime::Podman {
                return bad("runtime needs guest = \"host\"".into());
            }
            if self.install != Install::Manual {
                return bad("install needs guest = \"host\"".into());
            }
            if let Some(c) = self.cgroups.iter().find(|c| !c.labels.is_empty()) {
                return bad(format!(
                    "cgroup {:?}: labels need guest = \"host\" (they are container labels)",
                    c.name
                ));
            }
        }
        for c in &self.cgroups {
            if c.kube && (self.guest != Guest::Host || self.runtime != Runtime::Podman) {
                return bad(format!(
                    "cgroup {:?}: kube = true needs guest = \"host\" and runtime = \"podman\" \
                     (it runs `podman kube play`)",
                    c.name
                ));
            }
            if !c.kube && !c.annotations.is_empty() {
                return bad(format!(
                    "cgroup {:?}: annotations are a pod's: set kube = true",
                    c.name
                ));
            }
            if c.kube && (c.command.is_some() || c.client.is_some() || !c.labels.is_empty()) {
                return bad(format!(
                    "cgroup {:?}: a kube pod runs the workload program only (no command, \
                     client or labels; pod annotations instead)",
                    c.name
                ));
            }
        }
        if let Some(b) = self
            .balloon
            .iter()
            .find(|b| b.size.0 + (256 << 20) > self.ram.0)
        {
            return bad(format!(
                "balloon at {}s takes {} of {} RAM: leave the guest at least 256M",
                b.at, b.size, self.ram
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.cgroups {
            // A cgroup path (the shared rule) of one component, written as is.
            if memweight_proto::cgroup_path::check(&c.name).is_err()
                || c.name.contains('/')
                || c.name.chars().any(char::is_whitespace)
            {
                return bad(format!(
                    "cgroup name {:?} must be one path component without spaces",
                    c.name
                ));
            }
            if !seen.insert(c.name.as_str()) {
                return bad(format!("cgroup {:?} is listed twice", c.name));
            }
            if let Err(e) = memweight_policy::check_weight(u64::from(c.weight)) {
                return bad(format!("cgroup {:?}: weight {e}", c.name));
            }
            if c.workload.is_some() && c.command.is_some() {
                return bad(format!(
                    "cgroup {:?}: give either `workload` or `command`, not both",
                    c.name
                ));
            }
        }
        for name in self.static_low.keys() {
            if self.cgroup(name).is_none() {
                return bad(format!("static_low names unknown cgroup {name:?}"));
            }
        }
        for cmd in &self.commands {
            match (&cmd.run, cmd.action) {
                (Some(_), None) => {}
                (None, Some(_)) if cmd.assert => {
                    return bad(format!(
                        "command at {}s: `assert` goes with `run`, not with an action",
                        cmd.at
                    ));
                }
                (None, Some(Action::StopDaemon | Action::KillDaemon | Action::StartDaemon)) => {
                    if !self.daemon.enabled {
                        return bad(format!(
                            "command at {}s stops or starts the daemon, but [daemon] enabled is false",
                            cmd.at
                        ));
                    }
                    if self.daemon.sample_status {
                        return bad(format!(
                            "command at {}s stops or starts the daemon, but [daemon] \
                             sample_status asks it every second (on the host guest that \
                             starts it again through its socket): drop one of them",
                            cmd.at
                        ));
                    }
                }
                (None, Some(Action::RemoveCgroup)) => match &cmd.cgroup {
                    Some(name) if self.cgroup(name).is_some() => {}
                    other => {
                        return bad(format!(
                            "command at {}s: remove-cgroup needs `cgroup` naming a listed cgroup, got {other:?}",
                            cmd.at
                        ));
                    }
                },
                _ => {
                    return bad(format!(
                        "command at {}s needs exactly one of `run` or `action`",
                        cmd.at
                    ));
                }
            }
            if cmd.at > self.duration {
                return bad(format!(
                    "command at {}s is after the end ({}s)",
                    cmd.at, self.duration
                ));
            }
        }
        for check in &self.checks {
            let name = match check {
                Check::HighSet { cgroup, .. }
                | Check::LowSet { cgroup }
                | Check::HighStays { cgroup, .. }
                | Check::LowStays { cgroup, .. } => Some(cgroup),
                _ => None,
            };
            if let Some(n) = name
                && n != "*"
                && self.cgroup(n).is_none()
            {
                return bad(format!("check names unknown cgroup {n:?}"));
            }
            if let Check::DaemonView { min_pct, .. } = check {
                if !self.daemon.sample_status {
                    return bad(
                        "daemon-view judges what [daemon] sample_status records: set it to true"
                            .into(),
                    );
                }
                if !(min_pct.is_finite() && *min_pct > 0.0 && *min_pct <= 100.0) {
                    return bad(format!(
                        "daemon-view: min_pct {min_pct} must be above 0 and at most 100"
                    ));
                }
            }
            if let Check::UsageVsBaseline {
                baseline, min_pct, ..
            } = check
            {
                let file = std::path::Path::new(baseline);
                if file.components().count() != 1 || !baseline.ends_with(".toml") {
                    return bad(format!(
                        "usage-vs-baseline: baseline {baseline:?} must be a scenario file name \
                         in tests/lab/scenarios/, e.g. \"table2-default.toml\""
                    ));
                }
                if !(min_pct.is_finite() && *min_pct > 0.0 && *min_pct <= 100.0) {
                    return bad(format!(
                        "usage-vs-baseline: min_pct {min_pct} must be above 0 and at most 100"
                    ));
                }
            }
        }
        Ok(())
    }
}
