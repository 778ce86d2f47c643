//! The control law on a plan file: what `memweightctl plan` shows beside the policy's targets.
//!
//! A plan file (`memweight_proto::plan`) describes cgroups by usage, weight, floor, ceiling
//! and, optionally, their memory.high / memory.low now and their active memory. [`plan`] runs
//! the policy on it as before and then one tick of the daemon's own law ([`crate::step`]) with
//! the file's capacity as a fixed pool, so the output also says which `memory.high`,
//! `memory.low` and `memory.reclaim` memweightd would write from that state — its steps, the
//! guard above each target, the guards kept out of the pool, floors with `min_floor` — and not
//! only where the targets are. The daemon settings come from the file's `daemon` table (the
//! configuration file's keys) or the daemon's defaults.

use std::path::Path;

use memweight_cgroupfs::{CgroupSample, HostSample, Limit, MemoryEvents, MemoryStat};
use memweight_proto::plan::{PlanFile, PlanOutput, PlanWrites};

use crate::capacity::Carry;
use crate::config::{Amount, CapacityConfig, CapacityMode, Config, Settings};
use crate::decide::Originals;
use crate::step::{self, Law, Row, Trim};

/// The policy's plan for `file`, with the writes of one tick of the daemon's law.
///
/// # Errors
///
/// A one-line message when the policy rejects the inputs or the `daemon` table is not a valid
/// daemon configuration (it names the field).
pub fn plan(file: &PlanFile) -> Result<PlanOutput, String> {
    let inputs = file.inputs();
    let capacity = file.capacity.bytes();
    let policy = memweight_policy::plan(capacity, &inputs).map_err(|e| e.to_string())?;
    let cfg = daemon_config(file)?;
    let fixed = CapacityConfig {
        mode: CapacityMode::Fixed,
        fixed: Some(Amount::Bytes(capacity)),
        ..cfg.capacity.clone()
    };
    let law = Law {
        capacity: &fixed,
        min_floor: cfg.min_floor.bytes(),
        max_step: cfg.max_step,
        reclaim: cfg.reclaim,
        guard: cfg.guard,
        reclaim_passes: cfg.reclaim_passes,
        idle_tax: cfg.idle_tax,
    };
    let samples: Vec<CgroupSample> = file
        .cgroups
        .iter()
        .map(|c| {
            let usage = c.usage.bytes();
            CgroupSample {
                current: usage,
                // Nothing is known of anon vs cache: all of it counts reclaimable, so the
                // floor is `min` (and `min_floor`).
                stat: MemoryStat {
                    file: usage,
                    active_file: c.active.map_or(usage, |a| a.bytes().min(usage)),
                    ..MemoryStat::default()
                },
                pressure: None,
                events: MemoryEvents::default(),
                swap_current: None,
                swap_max: None,
                high: limit(c.high),
                low: Limit::Bytes(c.low.map_or(0, |l| l.bytes())),
                min: Limit::Bytes(0),
                max: Limit::Max,
            }
        })
        .collect();
    let rows: Vec<Row<'_>> = inputs
        .iter()
        .zip(&samples)
        .map(|(i, s)| Row {
            name: &i.name,
            settings: Settings {
                weight: i.weight,
                min: i.floor,
                max: i.max,
            },
            sample: s,
            originals: Originals {
                high: s.high,
                low: s.low,
            },
            reclaim_supported: true,
            provisional: false,
            // One reading, no history: nothing counts as faulted back.
            refaulted: 0,
            refaulted_lately: 0,
            refaulted_file_lately: 0,
            trim: Trim::default(),
        })
        .collect();
    let host = HostSample {
        mem_total: capacity,
        mem_available: 0,
        mem_free: 0,
        swap_total: u64::MAX / 2,
        swap_free: u64::MAX / 2,
        psi: None,
        vmstat: None,
        multi_gen_lru: true,
    };
    let tick = step::step(&law, &rows, &host, None, None, Carry::default());
    if let Some(e) = tick.rejected {
        return Err(e);
    }
    let mut out = PlanOutput::from(&policy);
    out.guards = tick.guards;
    for (c, d) in out.cgroups.iter_mut().zip(&tick.cgroups) {
        c.writes = Some(PlanWrites {
            memory_high: d.writes.high.map(|l| l.to_string()),
            memory_low: d.writes.low.map(|l| l.to_string()),
            memory_reclaim: d.writes.reclaim,
        });
    }
    Ok(out)
}

fn limit(size: Option<memweight_proto::Size>) -> Limit {
    size.map_or(Limit::Max, |s| Limit::Bytes(s.bytes()))
}

/// The file's `daemon` table as a daemon configuration, validated like the configuration file.
fn daemon_config(file: &PlanFile) -> Result<Config, String> {
    let Some(table) = &file.daemon else {
        return Ok(Config::default());
    };
    let cfg: Config = serde_json::from_value(serde_json::Value::Object(table.clone()))
        .map_err(|e| format!("daemon: {e}"))?;
    cfg.validate(Path::new("plan file"))
        .map_err(|e| format!("daemon: {e}"))?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn file(text: &str) -> PlanFile {
        PlanFile::from_json(text).expect("valid plan file")
    }

    #[test]
    fn writes_follow_the_daemons_law() {
        let f = file(
            r#"{"capacity": "3000M", "cgroups": [
                {"name": "c1", "usage": "2000M", "weight": 1},
                {"name": "c2", "usage": "2000M", "weight": 2},
                {"name": "c3", "usage": "2000M", "weight": 3}]}"#,
        );
        let out = plan(&f).expect("plans");
        // The policy's targets are unchanged: 3000 MiB split 1:2:3.
        assert_eq!(out.cgroups[0].target, 500 * MIB);
        // The law keeps 8 % of the targets for the guards out of the pool, then steps half
        // the gap and puts memory.high a guard above: c1 goes to 460 MiB, this tick to 1230.
        assert_eq!(out.guards, 240 * MIB);
        let w = out.cgroups[0].writes.clone().expect("writes computed");
        let high: u64 = w
            .memory_high
            .expect("memory.high lowered")
            .parse()
            .expect("bytes");
        let target = 2760 * MIB / 6;
        let expect =
            (2000 * MIB - (2000 * MIB - target) / 2 + target * 8 / 100).div_ceil(4096) * 4096;
        assert!(high.abs_diff(expect) <= 4096, "{high} vs {expect}");
        // memory.reclaim takes usage to this tick's step first (2000 MiB less half the gap),
        // so that memory.high comes down above usage.
        let reclaim = w.memory_reclaim.expect("memory.reclaim before memory.high");
        let step = (2000 * MIB - target) / 2;
        assert!(reclaim.abs_diff(step) <= 4096, "{reclaim} vs {step}");
        assert!(w.memory_low.is_some(), "the entitlement protects");
    }

    #[test]
    fn daemon_settings_and_current_values_are_used() {
        // Weights equal, 900 MiB: a share of 450 each. With no guard and max_step 100 % both
        // memory.high come down to it at once; a's own 500M (the operator's) is respected as
        // the ceiling, not raised to `max`.
        let f = file(
            r#"{"capacity": "900M", "daemon": {"guard": "0%", "max_step": "100%"},
                "cgroups": [
                {"name": "a", "usage": "600M", "high": "500M", "low": "100M"},
                {"name": "b", "usage": "500M"}]}"#,
        );
        let out = plan(&f).expect("plans");
        assert_eq!(out.guards, 0);
        let a = out.cgroups[0].writes.clone().expect("writes");
        assert_eq!(a.memory_high, Some((450 * MIB).to_string()));
        assert_eq!(
            a.memory_reclaim,
            Some(150 * MIB),
            "memory.reclaim takes usage to the share before memory.high comes down"
        );
        let b = out.cgroups[1].writes.clone().expect("writes");
        assert_eq!(b.memory_high, Some((450 * MIB).to_string()));
        // The defaults: 8 % guards out of the pool (414 MiB each), a steps to 507 MiB with
        // memory.high 33 MiB above it, and memory.reclaim takes it from 600 MiB to 507.
        let f = file(
            r#"{"capacity": "900M", "cgroups": [
                {"name": "a", "usage": "600M"}, {"name": "b", "usage": "500M"}]}"#,
        );
        let out = plan(&f).expect("plans");
        assert_eq!(out.guards, 72 * MIB);
        let a = out.cgroups[0].writes.clone().expect("writes");
        let reclaim = a.memory_reclaim.expect("reclaims to the step");
        assert!(reclaim.abs_diff(600 * MIB - 507 * MIB) <= MIB, "{reclaim}");
        let err = plan(&file(
            r#"{"capacity": 1, "daemon": {"guard": "x"}, "cgroups": []}"#,
        ))
        .expect_err("bad daemon table");
        assert!(err.starts_with("daemon: "), "{err}");
        let err = plan(&file(
            r#"{"capacity": 1, "daemon": {"idle_tax": 100}, "cgroups": []}"#,
        ))
        .expect_err("bad daemon table");
        assert!(err.contains("idle_tax"), "{err}");
    }
}
