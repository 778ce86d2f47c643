//! The 1 Hz sample: the host (meminfo, PSI, the pressure cgroup, the daemon's CPU time,
//! kswapd's CPU time) and every workload cgroup's memory files, with the workloads' ops/s and,
//! with `daemon.sample_status`, the daemon's view of each.
//!
//! Not here: the parsers of the files (`lab_agent::kfiles`), framing (`console`).

use std::fs;
use std::path::{Path, PathBuf};

use lab_agent::kfiles;
use lab_agent::record::{CgroupSample, HostSample, Sample};

use super::{Lab, status};
use crate::host;
use crate::sys::read;
use crate::{CGROUP_ROOT, LAB_DAEMON_CGROUP, OPS_STALE};

impl Lab {
    pub(super) fn sample(&self) -> Sample {
        let ops = self.ops.lock().map(|m| m.clone()).unwrap_or_default();
        let dirs: Vec<&Path> = self.workloads.iter().map(|w| w.dir.as_path()).collect();
        let (daemon_pool, mut views) = self.status.as_ref().map_or_else(
            || (None, vec![None; dirs.len()]),
            |slot| status::views(slot, Path::new(CGROUP_ROOT), &dirs),
        );
        let cgroups = self
            .workloads
            .iter()
            .zip(views.iter_mut())
            .map(|(w, view)| {
                let mut s = sample_cgroup(&w.dir);
                s.name = w.name.clone();
                s.ops_per_s = ops.get(&w.name).map(|(v, at)| {
                    if at.elapsed() > OPS_STALE || w.removed {
                        0.0
                    } else {
                        *v
                    }
                });
                s.daemon = view.take();
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
            daemon_pool: daemon_pool.map(Box::new),
        }
    }
}

/// `/proc/PID` of every task named `kswapd*` (one per NUMA node).
pub(super) fn kswapd_tasks() -> Vec<PathBuf> {
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

fn sample_cgroup(dir: &Path) -> CgroupSample {
    let file = |name: &str| read(&dir.join(name));
    let (psi_some10, psi_full10) =
        file("memory.pressure").map_or((None, None), |t| kfiles::psi_avg10(&t));
    let events = file("memory.events").and_then(|t| kfiles::events(&t));
    let stat = file("memory.stat").and_then(|t| kfiles::memory_stat(&t));
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
        refaults: stat.map(|s| {
            s.workingset_refault_anon
                .saturating_add(s.workingset_refault_file)
        }),
        majfaults: stat.map(|s| s.pgmajfault),
        ops_per_s: None,
        daemon: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_of_missing_cgroup_is_absent() {
        let s = sample_cgroup(Path::new("/nonexistent/lab/c9"));
        assert!(!s.present);
        assert_eq!(s.current, None);
    }
}
