//! Every series `/metrics` exports, built afresh from one published snapshot: the pool,
//! the host, the counters, one row per managed cgroup, the clamped labels, the build info, and
//! the tick-duration histogram that lives across scrapes.
//!
//! Holds [`registry`] and its helpers (a series' labels, help texts, saturating casts). It
//! does not encode text (`format`) nor serve it (`http`).

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Metrics, Published};

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

type Labels = Vec<(String, String)>;

/// prometheus-client ends every help text with a period; ours are written as sentences.
fn trim(help: &str) -> &str {
    help.trim_end_matches('.')
}

struct Builder {
    registry: Registry,
}

impl Builder {
    fn gauge(&mut self, name: &str, help: &str, value: i64) {
        let g = Gauge::<i64>::default();
        g.set(value);
        self.registry.register(name, trim(help), g);
    }

    fn gauge_f(&mut self, name: &str, help: &str, value: f64) {
        let g = Gauge::<f64, AtomicU64>::default();
        g.set(value);
        self.registry.register(name, trim(help), g);
    }

    fn counter(&mut self, name: &str, help: &str, by: &str, values: &[(&str, u64)]) {
        let f = Family::<Labels, Counter>::default();
        for (label, v) in values {
            f.get_or_create(&vec![(by.to_owned(), (*label).to_owned())])
                .inc_by(*v);
        }
        self.registry.register(name, trim(help), f);
    }

    fn per_cgroup(&mut self, name: &str, help: &str, rows: &[(Labels, i64)]) {
        let f = Family::<Labels, Gauge>::default();
        for (labels, v) in rows {
            f.get_or_create(labels).set(*v);
        }
        self.registry.register(name, trim(help), f);
    }

    fn per_cgroup_f(&mut self, name: &str, help: &str, rows: &[(Labels, f64)]) {
        let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for (labels, v) in rows {
            f.get_or_create(labels).set(*v);
        }
        self.registry.register(name, trim(help), f);
    }
}

/// A cgroup's labels: `cgroup`, and `container` (its name) when the engine lists one.
fn cgroup_labels(c: &crate::controller::CgroupReport) -> Labels {
    let mut labels = vec![("cgroup".to_owned(), c.cgroup.clone())];
    if let Some(name) = &c.container {
        labels.push(("container".to_owned(), name.clone()));
    }
    labels
}

/// The daemon's version, and the git commit it was built from (`unknown` outside a git
/// checkout; `MEMWEIGHT_GIT_COMMIT` at build time overrides it, see `build.rs`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// See [`VERSION`].
pub const COMMIT: &str = env!("MEMWEIGHT_GIT_COMMIT");

/// Builds the registry for one scrape.
#[must_use]
pub fn registry(snapshot: Option<&Published>, metrics: &Metrics) -> Registry {
    let mut b = Builder {
        registry: Registry::with_prefix("memweight"),
    };
    let info = Family::<Labels, Gauge>::default();
    info.get_or_create(&vec![
        ("version".to_owned(), VERSION.to_owned()),
        ("commit".to_owned(), COMMIT.to_owned()),
    ])
    .set(1);
    b.registry.register(
        "build_info",
        trim("Always 1; the labels say which memweightd runs (version, git commit)."),
        info,
    );
    b.registry.register(
        "tick_duration_seconds",
        "Duration of one control-loop tick (sample, compute, enforce)",
        metrics.tick_duration.clone(),
    );
    let Some(s) = snapshot else {
        b.gauge("up", "1 once the daemon has completed a tick.", 0);
        return b.registry;
    };
    let r = &s.report;
    let c = &s.counters;
    b.gauge("up", "1 once the daemon has completed a tick.", 1);
    b.gauge(
        "managed_cgroups",
        "Cgroups managed at the last tick.",
        i64::try_from(r.cgroups.len()).unwrap_or(i64::MAX),
    );
    b.gauge(
        "enforce",
        "1 when limits are written, 0 in dry-run mode.",
        i64::from(r.pool.enforce),
    );
    b.gauge(
        "pool_capacity_bytes",
        "Pool capacity C shared by the managed cgroups.",
        saturating_i64(r.pool.capacity),
    );
    b.gauge(
        "pool_usage_bytes",
        "TU: total memory usage of the managed cgroups.",
        saturating_i64(r.pool.total_usage),
    );
    b.gauge(
        "pool_weight",
        "TW: total weight of the managed cgroups.",
        saturating_i64(r.pool.total_weight),
    );
    b.gauge(
        "pool_pressure",
        "1 when usage exceeds the pool and memory is water-filled by weight.",
        i64::from(r.pool.pressure),
    );
    b.gauge(
        "pool_overcommitted",
        "1 when the floors alone exceed the pool.",
        i64::from(r.pool.overcommitted),
    );
    b.gauge(
        "pool_psi_cut_bytes",
        "What host memory pressure took off the pool.",
        saturating_i64(r.pool.psi_cut),
    );
    b.gauge(
        "pool_reserve_bytes",
        "MemAvailable the pool leaves free; below it the host is short.",
        saturating_i64(r.pool.reserve),
    );
    b.gauge(
        "pool_guard_bytes",
        "Part of the capacity kept for the memory.high guards above held-back cgroups' targets.",
        saturating_i64(r.pool.guards),
    );
    b.gauge(
        "pool_held",
        "1 when the pool was kept at the last tick's: MemAvailable stayed within the hysteresis.",
        i64::from(r.pool.held),
    );
    b.gauge(
        "host_reclaiming",
        "1 when the kernel's global reclaim (kswapd, direct reclaim) ran since the last tick.",
        i64::from(r.pool.reclaiming),
    );
    b.gauge(
        "host_multi_gen_lru",
        "1 when the kernel reclaims with the multi-gen LRU (/sys/kernel/mm/lru_gen/enabled), where memory.low protects held cgroups less; kernel capacity then counts no free memory while the kernel reclaims, and only that above the low watermarks while it is idle.",
        i64::from(r.pool.multi_gen_lru == Some(true)),
    );
    b.gauge(
        "pool_enforcing",
        "1 when the split is enforced beyond memory.low (memory.high, memory.reclaim) this tick.",
        i64::from(r.pool.enforcing),
    );
    b.gauge(
        "pool_yielding",
        "kernel capacity: 1 when no managed cgroup is protected this tick, because the host is short and the cgroups beside the managed set stall on memory.",
        i64::from(r.pool.yielding),
    );
    b.gauge_f(
        "outside_stall_percent",
        "kernel capacity: highest share of the last tick a cgroup beside the managed set stalled on memory.",
        r.pool.outside_stall.unwrap_or(0.0),
    );
    b.gauge_f(
        "pool_own_stall_percent",
        "Host memory PSI some avg10 explained by the daemon's own throttling (not counted).",
        r.pool.own_stall,
    );
    b.gauge(
        "host_memory_total_bytes",
        "Host MemTotal.",
        saturating_i64(r.pool.mem_total),
    );
    b.gauge(
        "host_memory_available_bytes",
        "Host MemAvailable.",
        saturating_i64(r.pool.mem_available),
    );
    b.gauge(
        "host_swap_free_bytes",
        "Host SwapFree.",
        saturating_i64(r.pool.swap_free),
    );
    if let Some(v) = r.pool.host_psi_some_avg10 {
        b.gauge_f(
            "host_psi_some_avg10_percent",
            "Host memory pressure (/proc/pressure/memory some avg10), percent.",
            v,
        );
    }
    if let Some(v) = r.pool.host_psi_full_avg10 {
        b.gauge_f(
            "host_psi_full_avg10_percent",
            "Host memory pressure (/proc/pressure/memory full avg10), percent.",
            v,
        );
    }
    b.counter(
        "writes",
        "Control-file writes done, by file.",
        "kind",
        &[
            ("high", c.writes_high),
            ("low", c.writes_low),
            ("reclaim", c.writes_reclaim),
        ],
    );
    b.counter(
        "errors",
        "Errors reading cgroup files, writing limits, and writing original limits back (restore), by kind.",
        "kind",
        &[
            ("read", c.read_errors),
            ("write", c.write_errors),
            ("restore", c.restore_errors),
        ],
    );
    b.counter(
        "reclaim_requested_bytes",
        "Bytes asked of memory.reclaim since start.",
        "kind",
        &[("proactive", c.reclaim_bytes)],
    );
    b.counter(
        "cgroup_lifecycle",
        "Cgroups adopted and released since start.",
        "event",
        &[("adopted", c.adopted), ("released", c.released)],
    );

    let rows = |f: &dyn Fn(&crate::controller::CgroupReport) -> Option<i64>| -> Vec<(Labels, i64)> {
        r.cgroups
            .iter()
            .filter_map(|c| f(c).map(|v| (cgroup_labels(c), v)))
            .collect()
    };
    let rows_f =
        |f: &dyn Fn(&crate::controller::CgroupReport) -> Option<f64>| -> Vec<(Labels, f64)> {
            r.cgroups
                .iter()
                .filter_map(|c| f(c).map(|v| (cgroup_labels(c), v)))
                .collect()
        };
    b.per_cgroup(
        "cgroup_usage_bytes",
        "memory.current.",
        &rows(&|c| Some(saturating_i64(c.usage))),
    );
    b.per_cgroup(
        "cgroup_weight",
        "Effective weight.",
        &rows(&|c| Some(i64::from(c.weight))),
    );
    b.per_cgroup(
        "cgroup_weight_overridden",
        "1 when the weight comes from a runtime override (memweightctl set).",
        &rows(&|c| Some(i64::from(c.overridden))),
    );
    b.per_cgroup(
        "cgroup_expected_bytes",
        "EA = TU x W / TW: the weighted share of the total usage.",
        &rows(&|c| Some(saturating_i64(c.expected))),
    );
    b.per_cgroup(
        "cgroup_exceed_bytes",
        "EX = U - EA: usage above (positive) or below (negative) the weighted share.",
        &rows(&|c| Some(c.exceed)),
    );
    b.per_cgroup(
        "cgroup_target_bytes",
        "Water-filled target.",
        &rows(&|c| Some(saturating_i64(c.target))),
    );
    b.per_cgroup(
        "cgroup_floor_bytes",
        "Floor: memory.high never goes below it (configured min, swap-backed memory swap cannot take, min_floor).",
        &rows(&|c| Some(saturating_i64(c.floor))),
    );
    b.per_cgroup(
        "cgroup_trim_bytes",
        "kernel mode, while the split is enforced: bytes the memory.high ceiling sits above (positive) or below the share, so that a cgroup the kernel's reclaim takes more often than the others holds its share on average.",
        &rows(&|c| Some(c.trim.unwrap_or(0))),
    );
    b.per_cgroup(
        "cgroup_entitlement_bytes",
        "Entitlement: the weighted share of the pool that memory.low protects.",
        &rows(&|c| Some(saturating_i64(c.entitlement))),
    );
    b.per_cgroup(
        "cgroup_memory_high_bytes",
        "memory.high in force; no series while it is max.",
        &rows(&|c| c.high.map(saturating_i64)),
    );
    b.per_cgroup(
        "cgroup_memory_low_bytes",
        "memory.low in force; no series while it is max.",
        &rows(&|c| c.low.map(saturating_i64)),
    );
    b.per_cgroup(
        "cgroup_reclaim_requested_bytes",
        "Bytes asked of memory.reclaim at the last tick.",
        &rows(&|c| Some(saturating_i64(c.reclaim.unwrap_or(0)))),
    );
    b.per_cgroup(
        "cgroup_swap_bytes",
        "memory.swap.current.",
        &rows(&|c| c.swap.map(saturating_i64)),
    );
    b.per_cgroup_f(
        "cgroup_psi_some_avg10_percent",
        "memory.pressure some avg10, percent.",
        &rows_f(&|c| c.psi_some_avg10),
    );
    b.per_cgroup_f(
        "cgroup_psi_full_avg10_percent",
        "memory.pressure full avg10, percent.",
        &rows_f(&|c| c.psi_full_avg10),
    );
    b.per_cgroup(
        "label_clamped",
        "1 for each container label that asks for more than its rule lets labels ask (weight or min clamped, max refused).",
        &r.label_clamps
            .iter()
            .map(|c| {
                let labels = vec![
                    ("cgroup".to_owned(), c.cgroup.clone()),
                    ("container".to_owned(), c.container.clone()),
                    ("label".to_owned(), c.label.clone()),
                ];
                (labels, 1)
            })
            .collect::<Vec<_>>(),
    );
    let events = Family::<Labels, Counter>::default();
    for c in &r.cgroups {
        for (event, v) in [
            ("high", c.events_high),
            ("max", c.events_max),
            ("oom_kill", c.events_oom_kill),
        ] {
            let mut labels = cgroup_labels(c);
            labels.push(("event".to_owned(), event.to_owned()));
            events.get_or_create(&labels).inc_by(v);
        }
    }
    b.registry.register(
        "cgroup_memory_events",
        "memory.events counters (high, max, oom_kill) as the kernel reports them",
        events,
    );
    b.registry
}
