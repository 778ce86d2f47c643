//! memweightd's own view, asked once a second on its control socket (`daemon.sample_status`)
//! by a thread of its own, so that a slow answer (a tick stuck in the kernel's reclaim) never
//! delays a sample; each sample takes the newest answer that is fresh enough.
//!
//! Not here: the protocol and its exchange (`memweight_proto::ctl`), the records' view types
//! (`lab_agent::record`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use lab_agent::record::{DAEMON_VIEW_STALE_S, DaemonCgroupView, DaemonPoolView};
use memweight_proto::ctl::{self, Command, Reply, Status};

use crate::host;

/// The newest `status` and when it came.
pub(super) type StatusSlot = Arc<Mutex<Option<(Instant, Status)>>>;

/// How long one answer may take before this second's is given up.
const ANSWER_TIMEOUT: Duration = Duration::from_millis(900);

/// Starts the thread that asks the daemon at `socket` once a second. With `unit` (the host
/// guest's memweightd service) it asks only while the service runs: a connection to its socket
/// would start it.
pub(super) fn spawn(socket: PathBuf, unit: bool) -> StatusSlot {
    let slot: StatusSlot = Arc::new(Mutex::new(None));
    let out = Arc::clone(&slot);
    thread::spawn(move || {
        loop {
            let asked = Instant::now();
            if (!unit || host::daemon_alive())
                && let Some(status) = ask(&socket)
                && let Ok(mut newest) = out.lock()
            {
                *newest = Some((Instant::now(), status));
            }
            thread::sleep(Duration::from_secs(1).saturating_sub(asked.elapsed()));
        }
    });
    slot
}

/// One `status` exchange; `None` when the daemon is not there or did not answer in time.
fn ask(socket: &Path) -> Option<Status> {
    match ctl::exchange(socket, Command::Status, ANSWER_TIMEOUT) {
        Ok(Ok(Reply::Status(status))) => Some(status),
        _ => None,
    }
}

/// The pool and, per directory of `dirs` (absolute, under `root`), the daemon's row for it,
/// from the newest answer in `slot` if it is fresh.
pub(super) fn views(
    slot: &StatusSlot,
    root: &Path,
    dirs: &[&Path],
) -> (Option<DaemonPoolView>, Vec<Option<DaemonCgroupView>>) {
    slot.lock()
        .ok()
        .and_then(|newest| {
            newest
                .as_ref()
                .filter(|(at, _)| at.elapsed() <= Duration::from_secs(DAEMON_VIEW_STALE_S))
                .map(|(_, status)| {
                    (
                        Some(DaemonPoolView::of(&status.pool)),
                        rows_for(status, root, dirs),
                    )
                })
        })
        .unwrap_or_else(|| (None, vec![None; dirs.len()]))
}

/// Per directory, the row of `status` whose cgroup path (relative to `root`) it is.
fn rows_for(status: &Status, root: &Path, dirs: &[&Path]) -> Vec<Option<DaemonCgroupView>> {
    dirs.iter()
        .map(|dir| {
            let rel = dir.strip_prefix(root).ok()?.to_str()?;
            status
                .cgroups
                .iter()
                .find(|row| row.cgroup == rel)
                .map(DaemonCgroupView::of)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memweight_proto::ctl::{CgroupStatus, Pool};

    /// A row as the daemon sends it (the fields this module does not read left empty).
    fn row(cgroup: &str, target: u64) -> CgroupStatus {
        serde_json::from_value(serde_json::json!({
            "cgroup": cgroup, "weight": 1, "overridden": false, "usage": 0, "expected": 0,
            "exceed": 0, "target": target, "entitlement": target, "floor": 0,
            "ceiling": target + 1, "trim": -3, "high": null, "low": null, "swap": null,
            "psi_some_avg10": null, "psi_full_avg10": null, "events_high": 0, "events_max": 0,
            "events_oom_kill": 0, "refaulted": 4096, "wrote_high": null, "wrote_low": null, "reclaim": null,
            "state": "ok", "reason": "",
        }))
        .expect("a status row")
    }

    #[test]
    fn each_workload_gets_the_row_of_its_own_cgroup() {
        let status = Status {
            pool: Pool {
                tick: 7,
                capacity: 300,
                enforcing: true,
                ..Pool::default()
            },
            cgroups: vec![row("lab/c2", 200), row("lab/c1", 100)],
        };
        let slot: StatusSlot = Arc::new(Mutex::new(Some((Instant::now(), status))));
        let root = Path::new("/sys/fs/cgroup");
        let dirs = [
            Path::new("/sys/fs/cgroup/lab/c1"),
            Path::new("/sys/fs/cgroup/lab/c3"),
            Path::new("/sys/fs/cgroup/lab/c2"),
        ];
        let (pool, rows) = views(&slot, root, &dirs);
        let pool = pool.expect("a fresh answer");
        assert_eq!((pool.tick, pool.capacity, pool.enforcing), (7, 300, true));
        assert_eq!(rows[0].map(|r| r.target), Some(100));
        assert_eq!(rows[1], None, "a cgroup the daemon does not list");
        assert_eq!(
            rows[2],
            Some(DaemonCgroupView {
                usage: 0,
                target: 200,
                entitlement: 200,
                ceiling: Some(201),
                trim: Some(-3),
                refaulted: Some(4096),
            })
        );
    }

    #[test]
    fn a_stale_or_missing_answer_is_not_recorded() {
        let dirs = [Path::new("/sys/fs/cgroup/lab/c1")];
        let root = Path::new("/sys/fs/cgroup");
        let empty: StatusSlot = Arc::new(Mutex::new(None));
        assert_eq!(views(&empty, root, &dirs), (None, vec![None]));
        let Some(old) = Instant::now().checked_sub(Duration::from_secs(DAEMON_VIEW_STALE_S + 1))
        else {
            return; // A clock this close to its origin cannot hold a stale answer.
        };
        let status = Status {
            pool: Pool::default(),
            cgroups: vec![row("lab/c1", 100)],
        };
        let stale: StatusSlot = Arc::new(Mutex::new(Some((old, status))));
        assert_eq!(views(&stale, root, &dirs), (None, vec![None]));
    }

    #[test]
    fn no_daemon_no_answer() {
        assert!(ask(Path::new("/nonexistent/memweightd.sock")).is_none());
    }
}
