//! How much the cgroups beside the managed set stall on memory: the signal that tells
//! `mode = "kernel"` its `memory.low` protects too much.
//!
//! The work-conserving law protects what the managed cgroups hold, so that the kernel's
//! global reclaim takes cold memory outside them first. Once what is left outside is memory
//! its owners use (journald, sshd, the container runtime), the kernel keeps reclaiming it and
//! they stall: that stall, read from `memory.pressure` `some total` of the cgroups *beside*
//! the managed ones, is when the managed cgroups must give (capacity.rs,
//! `OUTSIDE_STALL_PCT`).
//!
//! "Beside" is the frontier of the managed set: the children of every proper ancestor of a
//! managed cgroup (the root included) that are neither managed nor such an ancestor. The
//! daemon's own cgroup counts as inside: its `memory.reclaim` writes stall it by design, and
//! that must not read as the host's services starving. At most [`MAX_FRONTIER`] cgroups are
//! read per tick.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use memweight_cgroupfs::CgroupFs;

/// At most this many cgroups beside the managed set are read per tick (the first, sorted).
pub const MAX_FRONTIER: usize = 64;

/// How much the cgroups beside the managed set stalled over the last interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Stall {
    /// The highest share (%) of the interval that one of them had a task stalled on memory.
    pub pct: f64,
    /// The one that stalled the most (the first by path among equals); `None` when none
    /// stalled at all.
    pub by: Option<String>,
}

/// The PSI totals of the frontier as last read.
#[derive(Debug, Default)]
pub struct Outside {
    /// The daemon's own cgroup, relative to the cgroup root (`None`: the root or unknown).
    own: Option<String>,
    /// `some total` (µs) per frontier cgroup at the last read.
    last: BTreeMap<String, u64>,
    /// When the last read was.
    at: Option<Instant>,
}

impl Outside {
    /// Reads the frontier of the daemon whose own cgroup is `own` (as in `/proc/self/cgroup`).
    #[must_use]
    pub fn new(own: Option<String>) -> Outside {
        Outside {
            own,
            ..Outside::default()
        }
    }

    /// The highest share (%) of the time since the last call that a frontier cgroup of
    /// `managed` had a task stalled on memory, and which one. `None` on the first call,
    /// without PSI, or with no cgroup beside the managed set; a cgroup that could not be read
    /// is left out.
    pub fn sample<'a>(
        &mut self,
        fs: &CgroupFs,
        managed: impl Iterator<Item = &'a str>,
        now: Instant,
    ) -> Option<Stall> {
        let mut inside: Vec<&str> = managed.collect();
        if let Some(own) = &self.own {
            inside.push(own);
        }
        let cgroups = frontier(&inside, |rel| fs.children(rel).ok().flatten());
        let mut totals = BTreeMap::new();
        for c in cgroups {
            if let Ok(Some(psi)) = fs.pressure(&c) {
                totals.insert(c, psi.some.total_us);
            }
        }
        let elapsed = self.at.map(|at| now.saturating_duration_since(at));
        self.at = Some(now);
        let last = std::mem::replace(&mut self.last, totals);
        let elapsed_us = elapsed?.as_micros();
        if elapsed_us == 0 {
            return None;
        }
        let mut most: Option<Stall> = None;
        for (c, &total) in &self.last {
            let Some(&was) = last.get(c) else { continue };
            let stalled = total.saturating_sub(was);
            let pct = (u128::from(stalled) * 10_000 / elapsed_us) as f64 / 100.0;
            if most.as_ref().is_none_or(|m| pct > m.pct) {
                most = Some(Stall {
                    pct,
                    by: (stalled > 0).then(|| c.clone()),
                });
            }
        }
        most
    }
}

/// The cgroups beside `inside`: children (listed by `children`) of every proper ancestor of an
/// inside path, the root (`""`) included, that are neither inside nor such an ancestor —
/// sorted, at most [`MAX_FRONTIER`].
pub fn frontier(
    inside: &[&str],
    mut children: impl FnMut(&str) -> Option<Vec<String>>,
) -> Vec<String> {
    let inside_set: BTreeSet<&str> = inside.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut ancestors: BTreeSet<&str> = BTreeSet::new();
    for p in &inside_set {
        ancestors.insert("");
        ancestors.extend(memweight_proto::cgroup_path::ancestors(p));
    }
    let mut out = BTreeSet::new();
    for a in &ancestors {
        for c in children(a).unwrap_or_default() {
            if !inside_set.contains(c.as_str()) && !ancestors.contains(c.as_str()) {
                out.insert(c);
            }
        }
    }
    out.into_iter().take(MAX_FRONTIER).collect()
}

/// The cgroup v2 path in `/proc/self/cgroup`'s text (`0::/system.slice/memweightd.service`),
/// relative to the root; `None` for the root itself or a file without a v2 line.
#[must_use]
pub fn own_cgroup(proc_self_cgroup: &str) -> Option<String> {
    proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::/"))
        .map(str::trim_end)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host's tree: system.slice (journald, the daemon), user.slice, machine.slice with two
    /// managed containers and the runtime's conmon scope.
    fn host(rel: &str) -> Option<Vec<String>> {
        let names: &[&str] = match rel {
            "" => &["init.scope", "machine.slice", "system.slice", "user.slice"],
            "machine.slice" => &["conmon-a.scope", "libpod-a.scope", "libpod-b.scope"],
            "system.slice" => &["memweightd.service", "systemd-journald.service"],
            _ => &[],
        };
        Some(
            names
                .iter()
                .map(|n| {
                    if rel.is_empty() {
                        (*n).to_owned()
                    } else {
                        format!("{rel}/{n}")
                    }
                })
                .collect(),
        )
    }

    #[test]
    fn the_frontier_is_what_sits_beside_the_managed_cgroups_and_the_daemon() {
        let got = frontier(
            &[
                "machine.slice/libpod-a.scope",
                "machine.slice/libpod-b.scope",
                "system.slice/memweightd.service",
            ],
            host,
        );
        assert_eq!(
            got,
            [
                "init.scope",
                "machine.slice/conmon-a.scope",
                "system.slice/systemd-journald.service",
                "user.slice",
            ]
        );
        // Without the daemon's own cgroup, system.slice is read whole.
        let got = frontier(&["machine.slice/libpod-a.scope"], host);
        assert_eq!(
            got,
            [
                "init.scope",
                "machine.slice/conmon-a.scope",
                "machine.slice/libpod-b.scope",
                "system.slice",
                "user.slice",
            ]
        );
        assert!(frontier(&[], host).is_empty());
    }

    #[test]
    fn own_cgroup_reads_the_v2_line() {
        assert_eq!(
            own_cgroup("0::/system.slice/memweightd.service\n").as_deref(),
            Some("system.slice/memweightd.service")
        );
        assert_eq!(own_cgroup("0::/\n"), None);
        assert_eq!(own_cgroup("1:memory:/x\n"), None);
    }

    #[test]
    fn stall_is_the_highest_share_of_the_interval_beside_the_managed_set() {
        let dir = tempfile::tempdir().expect("tempdir");
        let psi = |total: u64| {
            format!(
                "some avg10=0.00 avg60=0.00 avg300=0.00 total={total}\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            )
        };
        for (c, total) in [("managed", 0), ("svc", 1_000), ("other", 5_000)] {
            std::fs::create_dir(dir.path().join(c)).expect("mkdir");
            std::fs::write(dir.path().join(c).join("memory.pressure"), psi(total)).expect("w");
        }
        let fs = CgroupFs::new(dir.path()).expect("root");
        let mut o = Outside::new(None);
        let t0 = Instant::now();
        assert_eq!(
            o.sample(&fs, ["managed"].into_iter(), t0),
            None,
            "first read"
        );
        std::fs::write(dir.path().join("svc/memory.pressure"), psi(51_000)).expect("w");
        std::fs::write(dir.path().join("other/memory.pressure"), psi(15_000)).expect("w");
        // The managed cgroup's own stall is not counted.
        std::fs::write(dir.path().join("managed/memory.pressure"), psi(900_000)).expect("w");
        let t1 = t0 + std::time::Duration::from_secs(1);
        assert_eq!(
            o.sample(&fs, ["managed"].into_iter(), t1),
            Some(Stall {
                pct: 5.0,
                by: Some("svc".to_owned())
            })
        );
        // A cgroup gone since: left out, no error; nothing stalled, no one named.
        std::fs::remove_dir_all(dir.path().join("svc")).expect("rm");
        let t2 = t1 + std::time::Duration::from_secs(2);
        assert_eq!(
            o.sample(&fs, ["managed"].into_iter(), t2),
            Some(Stall { pct: 0.0, by: None })
        );
    }
}
