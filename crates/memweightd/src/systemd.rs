//! What the daemon owes systemd: readiness, status and watchdog pings ([`notify`]), and a
//! `tick` that fits the service's watchdog ([`check_watchdog`], applied by [`load_config`]).

use std::path::Path;
use std::time::Duration;

use crate::config::{Config, ConfigError, Rules};

/// Reads and validates the configuration at `path` as the daemon takes it: [`Config::load`],
/// then `tick` checked against systemd's watchdog when the daemon runs under one
/// (`WATCHDOG_USEC`, see [`check_watchdog`]).
pub fn load_config(path: &Path) -> Result<(Config, Rules), ConfigError> {
    let (cfg, rules) = Config::load(path)?;
    check_watchdog(cfg.tick.0, watchdog_from_env()).map_err(|message| ConfigError::Invalid {
        path: path.to_owned(),
        field: "tick".into(),
        message,
    })?;
    Ok((cfg, rules))
}

/// The watchdog interval systemd expects pings within (`WATCHDOG_USEC`), when it is meant for
/// this process (`WATCHDOG_PID` unset or ours).
#[must_use]
pub fn watchdog_from_env() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.trim() != std::process::id().to_string()
    {
        return None;
    }
    usec.trim()
        .parse::<u64>()
        .ok()
        .filter(|u| *u > 0)
        .map(Duration::from_micros)
}

/// The rule tying `tick` to systemd's watchdog: `tick` ≤ `WatchdogSec` / 3, so that one slow
/// tick and one missed ping still leave a ping within the interval.
pub fn check_watchdog(tick: Duration, watchdog: Option<Duration>) -> Result<(), String> {
    match watchdog {
        Some(w) if tick > w / 3 => Err(format!(
            "{tick:?} is longer than a third of the service's WatchdogSec ({w:?}); systemd would \
             kill the daemon between two ticks. Use tick <= {:?} or raise WatchdogSec",
            w / 3
        )),
        _ => Ok(()),
    }
}

/// Sends `states` (`READY=1`, `WATCHDOG=1`, `STOPPING=1`, `STATUS=…`) to systemd.
pub fn notify(states: &[&str]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MAX_TICK;

    #[test]
    fn tick_must_fit_three_times_in_the_watchdog() {
        let w = Some(Duration::from_secs(30));
        assert!(check_watchdog(Duration::from_secs(10), w).is_ok());
        let err = check_watchdog(Duration::from_millis(10_001), w).expect_err("too long");
        assert!(err.contains("WatchdogSec"), "{err}");
        assert!(check_watchdog(Duration::from_secs(2), Some(Duration::from_secs(3))).is_err());
        assert!(check_watchdog(MAX_TICK, None).is_ok());
    }
}
