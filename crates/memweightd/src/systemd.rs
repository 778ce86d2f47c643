//! What the daemon owes systemd: readiness, status and watchdog pings ([`notify`], paced by
//! [`Notifier`]), and a `tick` that fits the service's watchdog ([`check_watchdog`], applied by
//! [`load_config`]).

use std::path::Path;
use std::time::{Duration, Instant};

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

/// The longest the status `systemctl status` shows may lag the daemon's, and without a watchdog
/// the longest between two messages.
pub const STATUS_EVERY: Duration = Duration::from_secs(10);

/// What a status line says in kind: how many cgroups are managed, and whether the host is short.
/// A change of kind is told at once; a changed number of MiB waits for the next ping.
pub type StatusKind = (usize, bool);

/// When to tell systemd, after a tick, that the loop is alive (`WATCHDOG=1`) and what it is
/// doing (`STATUS=`). Every message wakes PID 1, and a changed status has it announce the change
/// on the system bus: sent after every tick, the two messages a second kept systemd's own pages
/// resident — 4 MiB in `init.scope` at the lab's deepest balloon step, where the kernel alone
/// reclaims all of it (docs/lab.md), memory the containers would otherwise have had. So the
/// ping goes every sixth of `WatchdogSec` (at most [`STATUS_EVERY`]) with the status in the
/// same message, and earlier only when the status changes in kind ([`StatusKind`]). With
/// `tick` ≤ `WatchdogSec` / 3 ([`check_watchdog`]) a ping is then at most a sixth, one tick and
/// one slow tick after the last: within five sixths of the interval.
#[derive(Debug, Clone)]
pub struct Notifier {
    every: Duration,
    last: Option<Instant>,
    told: Option<StatusKind>,
}

impl Notifier {
    /// Pings paced for `watchdog` (`WATCHDOG_USEC`; `None`: not watched).
    #[must_use]
    pub fn new(watchdog: Option<Duration>) -> Self {
        Self {
            every: watchdog.map_or(STATUS_EVERY, |w| (w / 6).min(STATUS_EVERY)),
            last: None,
            told: None,
        }
    }

    /// Whether to send the ping (with the status, when the tick has one) after a tick that ended
    /// at `now` with a status of `kind` (`None`: the tick failed). `true` counts as sent.
    pub fn due(&mut self, now: Instant, kind: Option<StatusKind>) -> bool {
        let changed = kind.is_some() && kind != self.told;
        let late = self
            .last
            .is_none_or(|t| now.saturating_duration_since(t) >= self.every);
        if !(changed || late) {
            return false;
        }
        self.last = Some(now);
        if kind.is_some() {
            self.told = kind;
        }
        true
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

    /// Regression (lab, 2026-11-27): a ping and a status after every tick woke PID 1 twice a
    /// second and kept 4 MiB of systemd's pages resident under the balloon.
    #[test]
    fn regression_pid1_woken_every_tick() {
        let start = Instant::now();
        let mut n = Notifier::new(Some(Duration::from_secs(30)));
        let same = Some((3, true));
        let sent: Vec<u64> = (0..60u64)
            .filter(|&s| n.due(start + Duration::from_secs(s), same))
            .collect();
        assert_eq!(sent, [0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55]);
    }

    #[test]
    fn a_change_of_kind_is_told_at_once_and_a_failed_tick_only_pings_when_due() {
        let t0 = Instant::now();
        let s = |x: u64| t0 + Duration::from_secs(x);
        let mut n = Notifier::new(Some(Duration::from_secs(30)));
        assert!(n.due(s(0), Some((3, false))));
        assert!(!n.due(s(1), Some((3, false))));
        assert!(n.due(s(2), Some((3, true))), "pressure came");
        assert!(n.due(s(3), Some((4, true))), "a cgroup came");
        assert!(!n.due(s(4), None), "failed, not due");
        assert!(n.due(s(8), None), "failed, due");
        assert!(!n.due(s(9), Some((4, true))), "kind as last told");
    }

    #[test]
    fn pings_stay_inside_the_watchdog_with_the_longest_tick() {
        // The longest tick check_watchdog allows, every tick late by one more: the gap
        // between two pings stays under WatchdogSec.
        let w = Duration::from_secs(30);
        let tick = w / 3;
        let t0 = Instant::now();
        let mut n = Notifier::new(Some(w));
        let mut last = t0;
        for k in 0..50u32 {
            let now = t0 + tick * k * 2;
            if n.due(now, Some((1, false))) {
                assert!(now - last < w, "gap {:?}", now - last);
                last = now;
            }
        }
        let mut idle = Notifier::new(None);
        assert!(idle.due(t0, None));
        assert!(!idle.due(t0 + STATUS_EVERY / 2, None));
        assert!(idle.due(t0 + STATUS_EVERY, None));
    }
}
