//! The records the guest sends to the host, and the human progress line made from a sample.

use serde::{Deserialize, Serialize};

use crate::scenario::{Limit, limit_text};

/// One framed record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// First record: who is talking.
    Hello(Hello),
    /// One per second.
    Sample(Sample),
    /// Something happened at a time (pressure step, command, action, daemon exit).
    Event(Event),
    /// A chunk of an output file; chunks of one file arrive in order.
    File(FileChunk),
    /// The agent could not do what the scenario asks; the run fails.
    Error {
        /// What failed.
        message: String,
    },
    /// Last record: how many records came before it.
    End {
        /// Number of records before this one.
        records: u64,
    },
}

/// Guest identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// `uname -r`.
    pub kernel: String,
    /// Guest `MemTotal` in bytes.
    pub mem_total: u64,
    /// Guest CPUs online.
    pub cpus: u64,
    /// Agent version.
    pub agent: String,
}

/// One second of observations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the start of the scenario.
    pub t: f64,
    /// One entry per scenario cgroup, in scenario order.
    pub cgroups: Vec<CgroupSample>,
    /// Guest-wide numbers.
    pub host: HostSample,
    /// Size the pressure process was asked to hold.
    pub pressure_size: u64,
    /// `memory.current` of the pressure cgroup.
    pub pressure_current: Option<u64>,
    /// Whether memweightd runs (`None` when the scenario has no daemon).
    pub daemon_alive: Option<bool>,
    /// CPU time memweightd used since it started, in microseconds: `usage_usec` of its
    /// cgroup's `cpu.stat` (`None` without a daemon, or when the file could not be read).
    #[serde(default)]
    pub daemon_cpu_usec: Option<u64>,
    /// CPU time the kernel's kswapd threads used since boot, in microseconds (Σ `utime` +
    /// `stime` of every `kswapd*` task's `/proc/PID/stat`): the global reclaim's own cost,
    /// beside the daemon's (`None` when none could be read).
    #[serde(default)]
    pub kswapd_cpu_usec: Option<u64>,
    /// memweightd's pool as its `status` reported it within the last
    /// [`DAEMON_VIEW_STALE_S`] seconds (`daemon.sample_status`; `None` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_pool: Option<Box<DaemonPoolView>>,
}

/// A daemon status older than this many seconds is not recorded with a sample.
pub const DAEMON_VIEW_STALE_S: u64 = 2;

/// memweightd's pool at one sample, from its `status` (`daemon.sample_status`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonPoolView {
    /// The daemon's tick number.
    pub tick: u64,
    /// Pool capacity.
    pub capacity: u64,
    /// The split is enforced beyond `memory.low` this tick.
    pub enforcing: bool,
    /// The kernel's global reclaim ran since the daemon's last tick.
    pub reclaiming: bool,
    /// `kernel` mode: nothing is protected this tick, as a cgroup beside the managed set
    /// stalls on memory.
    #[serde(default)]
    pub yielding: bool,
    /// `kernel` mode: the highest share (%) of the daemon's last tick a cgroup beside the
    /// managed set stalled on memory.
    #[serde(default)]
    pub outside_stall: Option<f64>,
    /// Which cgroup that was (`None` when none stalled).
    #[serde(default)]
    pub outside_stall_by: Option<String>,
}

/// memweightd's view of one cgroup at one sample, from its `status`
/// (`daemon.sample_status`): what it aims at, where it would put memory.high and by how much
/// it trims that, so that a run's timeline shows the decisions beside their effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonCgroupView {
    /// memory.current as the daemon sampled it at its tick (the lab's sample is taken at
    /// another moment of the second).
    #[serde(default)]
    pub usage: u64,
    /// The water-filled target.
    pub target: u64,
    /// The entitlement (its share; what memory.low protects at most).
    pub entitlement: u64,
    /// The ceiling it puts on memory.high (`None`: none).
    pub ceiling: Option<u64>,
    /// `kernel` mode: how far the ceiling sits above (+) or below its share (`None`: none).
    pub trim: Option<i64>,
    /// Bytes it faulted back between the daemon's last two samples of it (`None`: a daemon
    /// that does not say).
    #[serde(default)]
    pub refaulted: Option<u64>,
}

impl DaemonCgroupView {
    /// The view of one row of the daemon's `status`.
    #[must_use]
    pub fn of(row: &memweight_proto::ctl::CgroupStatus) -> Self {
        DaemonCgroupView {
            usage: row.usage,
            target: row.target,
            entitlement: row.entitlement,
            ceiling: row.ceiling,
            trim: row.trim,
            refaulted: row.refaulted,
        }
    }
}

impl DaemonPoolView {
    /// The view of the daemon's `status` pool.
    #[must_use]
    pub fn of(pool: &memweight_proto::ctl::Pool) -> Self {
        DaemonPoolView {
            tick: pool.tick,
            capacity: pool.capacity,
            enforcing: pool.enforcing,
            reclaiming: pool.reclaiming,
            yielding: pool.yielding,
            outside_stall: pool.outside_stall,
            outside_stall_by: pool.outside_stall_by.clone(),
        }
    }
}

/// One cgroup's files at one second; `None` where a file could not be read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CgroupSample {
    /// Scenario name.
    pub name: String,
    /// The cgroup directory exists.
    pub present: bool,
    /// `memory.current`.
    pub current: Option<u64>,
    /// `memory.high`.
    #[serde(default, with = "limit_text::option")]
    pub high: Option<Limit>,
    /// `memory.low`.
    pub low: Option<u64>,
    /// `memory.swap.current`.
    pub swap: Option<u64>,
    /// `memory.pressure` some avg10 (%).
    pub psi_some10: Option<f64>,
    /// `memory.pressure` full avg10 (%).
    pub psi_full10: Option<f64>,
    /// `memory.events` high.
    pub events_high: Option<u64>,
    /// `memory.events` max.
    pub events_max: Option<u64>,
    /// `memory.events` oom_kill.
    pub events_oom_kill: Option<u64>,
    /// `memory.stat` `workingset_refault_anon` + `workingset_refault_file` (pages, since the
    /// cgroup was made): what the kernel counts as faulted back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refaults: Option<u64>,
    /// `memory.stat` `pgmajfault` (since the cgroup was made): every page read back from swap
    /// or disk, which the multi-gen LRU's refault counter undercounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub majfaults: Option<u64>,
    /// Workload throughput reported in the last seconds (ops/s).
    pub ops_per_s: Option<f64>,
    /// memweightd's view of the cgroup (`daemon.sample_status`; `None` otherwise, or when
    /// its `status` did not list the cgroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonCgroupView>,
}

/// Guest-wide numbers at one second.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostSample {
    /// `MemAvailable` in bytes.
    pub mem_available: Option<u64>,
    /// `MemFree` in bytes: what the zone watermarks are compared with.
    #[serde(default)]
    pub mem_free: Option<u64>,
    /// `SwapTotal − SwapFree` in bytes.
    pub swap_used: Option<u64>,
    /// `/proc/pressure/memory` some avg10.
    pub psi_some10: Option<f64>,
    /// `/proc/pressure/memory` full avg10.
    pub psi_full10: Option<f64>,
}

/// Something that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the start.
    pub t: f64,
    /// `pressure`, `command`, `stop-daemon`, `remove-cgroup`, `daemon-start`, `daemon-exit`,
    /// `workload-exit`.
    pub kind: String,
    /// Free text.
    pub detail: String,
    /// Whether it did what it should.
    pub ok: bool,
}

/// A piece of an output file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileChunk {
    /// Relative path under the output directory (`daemon.log`, `commands/01-x.txt`).
    pub name: String,
    /// Text.
    pub data: String,
}

const MIB: f64 = 1_048_576.0;

#[allow(clippy::cast_precision_loss)] // Display only: MiB with one decimal.
fn mib(b: u64) -> f64 {
    b as f64 / MIB
}

impl Sample {
    /// The one-line progress view: time, per cgroup usage/high/weight/throughput, PSI,
    /// pressure. `weights` are the scenario weights, in cgroup order.
    pub fn progress_line(&self, weights: &[u32]) -> String {
        use std::fmt::Write as _;
        let mut s = format!("t={:>4.0}s", self.t);
        for (i, c) in self.cgroups.iter().enumerate() {
            let w = weights.get(i).copied().unwrap_or(0);
            if !c.present {
                let _ = write!(s, " | {} gone", c.name);
                continue;
            }
            let cur = c
                .current
                .map_or_else(|| "?".to_owned(), |b| format!("{:.0}", mib(b)));
            let high = match c.high {
                Some(Limit::Max) => "max".to_owned(),
                Some(Limit::Bytes(b)) => format!("{:.0}", mib(b)),
                None => "?".to_owned(),
            };
            let ops = c
                .ops_per_s
                .map_or_else(|| "-".to_owned(), |o| format!("{:.0}k", o / 1000.0));
            let _ = write!(s, " | {} w{} {}M/{} {}", c.name, w, cur, high, ops);
        }
        let _ = write!(
            s,
            " | avail {:.0}M psi {:.1}/{:.1} pressure {:.0}M",
            mib(self.host.mem_available.unwrap_or(0)),
            self.host.psi_some10.unwrap_or(0.0),
            self.host.psi_full10.unwrap_or(0.0),
            mib(self.pressure_size)
        );
        if let Some(alive) = self.daemon_alive {
            s.push_str(if alive {
                " | daemon up"
            } else {
                " | daemon down"
            });
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_names_everything() {
        let sample = Sample {
            t: 12.0,
            cgroups: vec![
                CgroupSample {
                    name: "c1".into(),
                    present: true,
                    current: Some(100 << 20),
                    high: Some(Limit::Bytes(150 << 20)),
                    ops_per_s: Some(25_000.0),
                    ..CgroupSample::default()
                },
                CgroupSample {
                    name: "c2".into(),
                    present: false,
                    ..CgroupSample::default()
                },
            ],
            host: HostSample {
                mem_available: Some(64 << 20),
                mem_free: Some(32 << 20),
                psi_some10: Some(12.5),
                ..HostSample::default()
            },
            pressure_size: 200 << 20,
            pressure_current: None,
            daemon_alive: Some(true),
            daemon_cpu_usec: Some(1_500_000),
            kswapd_cpu_usec: Some(700_000),
            daemon_pool: None,
        };
        let line = sample.progress_line(&[1, 2]);
        assert!(line.contains("c1 w1 100M/150 25k"), "{line}");
        assert!(line.contains("c2 gone"), "{line}");
        assert!(line.contains("psi 12.5/0.0"), "{line}");
        assert!(line.contains("pressure 200M"), "{line}");
        assert!(line.contains("daemon up"), "{line}");
    }

    #[test]
    fn records_round_trip_as_json() {
        let r = Record::Event(Event {
            t: 3.0,
            kind: "pressure".into(),
            detail: "200M".into(),
            ok: true,
        });
        let text = serde_json::to_string(&r).expect("serialises");
        assert_eq!(serde_json::from_str::<Record>(&text).expect("parses"), r);
        // memory.high travels as the kernel's text; an absent one as null.
        for (high, json) in [
            (Some(Limit::Bytes(150 << 20)), "\"high\":\"157286400\""),
            (Some(Limit::Max), "\"high\":\"max\""),
            (None, "\"high\":null"),
        ] {
            let c = CgroupSample {
                name: "c1".into(),
                high,
                ..CgroupSample::default()
            };
            let text = serde_json::to_string(&c).expect("serialises");
            assert!(text.contains(json), "{text}");
            assert_eq!(
                serde_json::from_str::<CgroupSample>(&text).expect("parses"),
                c
            );
        }
    }
}
