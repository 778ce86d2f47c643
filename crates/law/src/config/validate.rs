//! What the types cannot check, section by section ([`Config::validate`]): the tick's range,
//! the roots, `[capacity]`, `[control]`, `[metrics]`, `[containers]`; then the rules
//! (`rules`). The first mistake found is the one reported, naming its key.
//!
//! Not here: parsing (`values`, serde), the rules' own checks (`rules`).

use std::path::Path;
use std::time::Duration;

use super::{
    CapacityMode, Config, ConfigError, MAX_RECLAIM_PASSES, MAX_TICK, MIN_TICK, Problem, Rules,
    invalid_in,
};

impl Config {
    /// Checks values the types cannot and compiles the rules, section by section; the first
    /// mistake found is the one reported.
    pub fn validate(&self, path: &Path) -> Result<Rules, ConfigError> {
        let invalid = invalid_in(path);
        let invalid = |(field, message): Problem| invalid(field.into(), message);
        self.check_top_level().map_err(invalid)?;
        self.check_capacity().map_err(invalid)?;
        self.check_control().map_err(invalid)?;
        self.check_metrics().map_err(invalid)?;
        self.check_containers().map_err(invalid)?;
        self.rules(path)
    }

    /// The keys outside any section: `tick`, `reclaim_passes`, `idle_tax`, `max_step`, the
    /// roots, `log_level`.
    fn check_top_level(&self) -> Result<(), Problem> {
        if !(MIN_TICK..=MAX_TICK).contains(&self.tick.0) {
            return Err((
                "tick",
                format!(
                    "must be between {MIN_TICK:?} and {MAX_TICK:?}, got {:?}",
                    self.tick.0
                ),
            ));
        }
        if !(1..=MAX_RECLAIM_PASSES).contains(&self.reclaim_passes) {
            return Err((
                "reclaim_passes",
                format!(
                    "must be 1..={MAX_RECLAIM_PASSES} (memory.reclaim passes per tick; 1: only at \
                     the tick), got {}",
                    self.reclaim_passes
                ),
            ));
        }
        if self.idle_tax > memweight_policy::MAX_IDLE_TAX {
            return Err((
                "idle_tax",
                format!(
                    "must be 0..={} (percent; 75 is VMware ESX's default), got {}",
                    memweight_policy::MAX_IDLE_TAX,
                    self.idle_tax
                ),
            ));
        }
        if self.max_step.of(1 << 30) == 0 {
            return Err((
                "max_step",
                format!(
                    "{} would never lower memory.high; use e.g. \"10%\" or \"64M\"",
                    self.max_step
                ),
            ));
        }
        if !self.cgroup_root.is_absolute() {
            return Err(("cgroup_root", "must be an absolute path".into()));
        }
        if !self.state_dir.is_absolute() {
            return Err(("state_dir", "must be an absolute path".into()));
        }
        if !["error", "warn", "info", "debug", "trace"].contains(&self.log_level.as_str()) {
            return Err((
                "log_level",
                format!(
                    "must be error, warn, info, debug or trace, got {:?}",
                    self.log_level
                ),
            ));
        }
        Ok(())
    }

    /// `[capacity]`.
    fn check_capacity(&self) -> Result<(), Problem> {
        let c = &self.capacity;
        if c.mode == CapacityMode::Fixed && c.fixed.is_none() {
            return Err((
                "capacity.fixed",
                "mode = \"fixed\" needs a size, e.g. fixed = \"12G\" or \"80%\"".into(),
            ));
        }
        if !(0.0..=100.0).contains(&c.psi_threshold) {
            return Err((
                "capacity.psi_threshold",
                format!("must be 0..=100 (percent), got {}", c.psi_threshold),
            ));
        }
        Ok(())
    }

    /// `[control]`.
    fn check_control(&self) -> Result<(), Problem> {
        if !self.control.socket.is_absolute() {
            return Err((
                "control.socket",
                format!(
                    "must be an absolute path, got {:?}",
                    self.control.socket.display().to_string()
                ),
            ));
        }
        if let Some(g) = &self.control.group
            && (g.trim().is_empty() || g.contains(['/', ':', '\n', '\0']))
        {
            return Err((
                "control.group",
                format!("must be a group name like \"memweight\", got {g:?}"),
            ));
        }
        Ok(())
    }

    /// `[metrics]`: the listen address, when the endpoint is on.
    fn check_metrics(&self) -> Result<(), Problem> {
        if self.metrics.enabled {
            self.metrics.address().map_err(|m| ("metrics.listen", m))?;
        }
        Ok(())
    }

    /// `[containers]`.
    fn check_containers(&self) -> Result<(), Problem> {
        let c = &self.containers;
        if c.refresh.0 < Duration::from_millis(100) || c.refresh.0 > Duration::from_secs(3600) {
            return Err((
                "containers.refresh",
                format!("must be between 100ms and 1h, got {:?}", c.refresh.0),
            ));
        }
        if let Some(sock) = &c.socket
            && !sock.is_absolute()
        {
            return Err((
                "containers.socket",
                format!(
                    "must be an absolute path like \"/run/podman/podman.sock\", got {:?}",
                    sock.display().to_string()
                ),
            ));
        }
        if c.label_prefix.is_empty()
            || c.label_prefix.len() > 200
            || c.label_prefix
                .chars()
                .any(|ch| ch.is_whitespace() || ch == '=')
        {
            return Err((
                "containers.label_prefix",
                format!(
                    "must be a non-empty label prefix without spaces or `=`, like \"memweight.\", \
                     got {:?}",
                    c.label_prefix
                ),
            ));
        }
        Ok(())
    }
}
