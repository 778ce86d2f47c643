use std::collections::BTreeSet;

use hyper::StatusCode;

use super::*;
use crate::controller::{CgroupReport, ClampedLabel};

fn report(paths: &[&str]) -> TickReport {
    TickReport {
        pool: memweight_proto::ctl::Pool {
            tick: 7,
            capacity: 4500 << 20,
            total_usage: 6000 << 20,
            total_weight: 6,
            pressure: true,
            mem_total: 8 << 30,
            mem_available: 1 << 30,
            host_psi_some_avg10: Some(12.5),
            enforce: true,
            duration_us: 1500,
            ..memweight_proto::ctl::Pool::default()
        },
        cgroups: paths
            .iter()
            .map(|p| CgroupReport {
                cgroup: (*p).to_owned(),
                weight: 2,
                overridden: false,
                container: None,
                source: None,
                usage: 2000 << 20,
                expected: 2000 << 20,
                exceed: -5,
                target: 1500 << 20,
                entitlement: 1000 << 20,
                floor: 16 << 20,
                ceiling: None,
                trim: None,
                high: None,
                low: Some(0),
                swap: Some(4096),
                psi_some_avg10: Some(1.0),
                psi_full_avg10: Some(0.5),
                refaulted: None,
                events_high: 3,
                events_max: 0,
                events_oom_kill: 1,
                wrote_high: None,
                wrote_low: None,
                reclaim: Some(4096),
                state: memweight_proto::ctl::CgroupState::Ok,
                reason: "at floor".into(),
                original_high: None,
                original_low: None,
                operator: None,
                next_weight: None,
            })
            .collect(),
        label_clamps: Vec::new(),
    }
}

fn snapshot(paths: &[&str]) -> Published {
    Published {
        report: Arc::new(report(paths)),
        counters: Counters {
            writes_high: 4,
            ..Counters::default()
        },
        at: Instant::now(),
        interval: Duration::from_secs(1),
    }
}

/// A snapshot in which every series exists: both host PSI values, a `memory.high`, a
/// container name.
fn full_snapshot() -> Published {
    let mut r = report(&["machine.slice/libpod-0123.scope"]);
    r.pool.host_psi_full_avg10 = Some(1.5);
    for c in &mut r.cgroups {
        c.high = Some(1 << 30);
        c.container = Some("web".to_owned());
    }
    r.label_clamps.push(ClampedLabel {
        cgroup: "machine.slice/libpod-0123.scope".to_owned(),
        container: "web".to_owned(),
        label: "memweight.weight".to_owned(),
    });
    Published {
        report: Arc::new(r),
        counters: Counters::default(),
        at: Instant::now(),
        interval: Duration::from_secs(1),
    }
}

/// The metric table of docs/operations.md as the registry renders it: one row per
/// family, with its labels (the values of the enumerated ones), type and help text.
fn doc_table(classic: &str) -> String {
    struct Family {
        kind: String,
        help: String,
        labels: Vec<(String, BTreeSet<String>)>,
    }
    let mut order: Vec<String> = Vec::new();
    let mut families: std::collections::BTreeMap<String, Family> = Default::default();
    for line in classic.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            order.push(name.to_owned());
            families.insert(
                name.to_owned(),
                Family {
                    kind: String::new(),
                    help: help.to_owned(),
                    labels: Vec::new(),
                },
            );
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(f) = families.get_mut(name) {
                f.kind = kind.to_owned();
            }
        } else if let Some((series, _)) = line.split_once('{') {
            let name = order.last().cloned().unwrap_or_default();
            if series != name {
                continue; // _bucket, _sum, _count of a histogram
            }
            let Some(f) = families.get_mut(&name) else {
                continue;
            };
            let body = line.split_once('{').map_or("", |x| x.1);
            let body = body.rsplit_once('}').map_or("", |x| x.0);
            for pair in body.split("\",") {
                let Some((k, v)) = pair.split_once("=\"") else {
                    continue;
                };
                let v = v.trim_end_matches('"').to_owned();
                match f.labels.iter_mut().find(|(n, _)| n == k) {
                    Some((_, vals)) => {
                        vals.insert(v);
                    }
                    None => f.labels.push((k.to_owned(), BTreeSet::from([v]))),
                }
            }
        }
    }
    let mut out = String::from("| series | type | meaning |\n| --- | --- | --- |\n");
    for name in &order {
        let f = &families[name];
        let labels: Vec<String> = f
            .labels
            .iter()
            .map(|(k, vals)| match k.as_str() {
                "cgroup" | "container" | "label" | "version" | "commit" => k.clone(),
                _ => format!(
                    "{k}=\"{}\"",
                    vals.iter().cloned().collect::<Vec<_>>().join("\\|")
                ),
            })
            .collect();
        let series = if labels.is_empty() {
            name.clone()
        } else {
            format!("{name}{{{}}}", labels.join(","))
        };
        let _ = std::fmt::Write::write_fmt(
            &mut out,
            format_args!(
                "| `{series}` | {} | {} |\n",
                f.kind,
                f.help.replace('|', "\\|")
            ),
        );
    }
    out
}

const TABLE_BEGIN: &str =
    "<!-- metrics table: generated by metrics::tests::docs_list_every_metric -->\n";
const TABLE_END: &str = "<!-- end of the metrics table -->\n";

#[test]
fn docs_list_every_metric() {
    let text = render(Some(&full_snapshot()), &Metrics::default(), Format::Classic);
    let table = doc_table(&text);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md");
    let doc = std::fs::read_to_string(&path).expect("docs/operations.md");
    let (Some(b), Some(e)) = (doc.find(TABLE_BEGIN), doc.find(TABLE_END)) else {
        panic!("docs/operations.md has no generated metrics table (markers {TABLE_BEGIN:?})");
    };
    let current = &doc[b + TABLE_BEGIN.len()..e];
    if current != table {
        if std::env::var_os("MEMWEIGHT_BLESS").is_some() {
            let new = format!("{}{table}{}", &doc[..b + TABLE_BEGIN.len()], &doc[e..]);
            std::fs::write(&path, new).expect("write docs/operations.md");
            return;
        }
        panic!(
            "docs/operations.md's metrics table is not what /metrics serves; rerun with \
             MEMWEIGHT_BLESS=1 to write it. Expected:\n{table}"
        );
    }
}

#[test]
fn doc_table_has_a_row_per_family_with_its_labels() {
    let text = render(Some(&full_snapshot()), &Metrics::default(), Format::Classic);
    let table = doc_table(&text);
    for row in [
        "| `memweight_build_info{version,commit}` | gauge | Always 1; the labels say which memweightd runs (version, git commit). |",
        "| `memweight_writes_total{kind=\"high\\|low\\|reclaim\"}` | counter |",
        "| `memweight_tick_duration_seconds` | histogram |",
        "| `memweight_cgroup_usage_bytes{cgroup,container}` | gauge | memory.current. |",
        "| `memweight_cgroup_memory_events_total{cgroup,container,event=\"high\\|max\\|oom_kill\"}` | counter |",
        "| `memweight_pool_reserve_bytes` | gauge |",
    ] {
        assert!(table.contains(row), "missing {row:?} in\n{table}");
    }
    let families = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!(table.lines().count(), families + 2, "{table}");
}

#[test]
fn build_info_and_container_names_are_labels() {
    let text = render(Some(&full_snapshot()), &Metrics::default(), Format::Classic);
    assert!(
        text.contains(&format!(
            "memweight_build_info{{version=\"{VERSION}\",commit=\"{COMMIT}\"}} 1"
        )),
        "{text}"
    );
    assert!(!COMMIT.is_empty());
    assert!(
        text.contains(
            "memweight_cgroup_target_bytes{cgroup=\"machine.slice/libpod-0123.scope\",container=\"web\"} "
        ),
        "{text}"
    );
    // Without a container name there is no container label.
    let plain = render(
        Some(&snapshot(&["lab/a"])),
        &Metrics::default(),
        Format::Classic,
    );
    assert!(
        plain.contains("memweight_cgroup_target_bytes{cgroup=\"lab/a\"} "),
        "{plain}"
    );
    // Before the first tick the build is known too.
    let none = render(None, &Metrics::default(), Format::Classic);
    assert!(none.contains("memweight_build_info{"), "{none}");
}

#[test]
fn a_clamped_label_is_flagged_per_container_and_label() {
    let text = render(Some(&full_snapshot()), &Metrics::default(), Format::Classic);
    assert!(
        text.contains(
            "memweight_label_clamped{cgroup=\"machine.slice/libpod-0123.scope\",\
             container=\"web\",label=\"memweight.weight\"} 1"
        ),
        "{text}"
    );
    let none = render(
        Some(&snapshot(&["lab/a"])),
        &Metrics::default(),
        Format::Classic,
    );
    assert!(
        !none.contains("memweight_label_clamped{"),
        "no clamp, no series: {none}"
    );
}

#[test]
fn accept_header_picks_the_format() {
    assert_eq!(negotiate(None), Format::Classic);
    assert_eq!(negotiate(Some("text/plain")), Format::Classic);
    assert_eq!(negotiate(Some("*/*")), Format::Classic);
    assert_eq!(
        negotiate(Some(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )),
        Format::OpenMetrics
    );
    assert_eq!(
        negotiate(Some("application/openmetrics-text;q=0, text/plain")),
        Format::Classic
    );
}

#[test]
fn classic_names_counters_by_their_samples() {
    let om = "# HELP x_writes Writes.\n# TYPE x_writes counter\nx_writes_total{kind=\"high\"} 4\n\
              # HELP x_up Up.\n# TYPE x_up gauge\n# UNIT x_up bytes\nx_up 1\n# EOF\n";
    let classic = to_classic(om);
    assert_eq!(
        classic,
        "# HELP x_writes_total Writes.\n# TYPE x_writes_total counter\n\
         x_writes_total{kind=\"high\"} 4\n# HELP x_up Up.\n# TYPE x_up gauge\nx_up 1\n"
    );
}

#[test]
fn every_series_is_there_and_vanished_cgroups_are_not() {
    let m = Metrics::default();
    let two = snapshot(&["lab/a", "lab/b"]);
    m.observe(&two.report);
    let text = render(Some(&two), &m, Format::Classic);
    for series in [
        "memweight_cgroup_usage_bytes{cgroup=\"lab/a\"} 2097152000",
        "memweight_cgroup_weight{cgroup=\"lab/b\"} 2",
        "memweight_cgroup_expected_bytes{",
        "memweight_cgroup_exceed_bytes{cgroup=\"lab/a\"} -5",
        "memweight_cgroup_target_bytes{",
        "memweight_cgroup_entitlement_bytes{",
        "memweight_cgroup_memory_low_bytes{cgroup=\"lab/a\"} 0",
        "# HELP memweight_writes_total Control-file writes done, by file.\n",
        "memweight_cgroup_reclaim_requested_bytes{cgroup=\"lab/a\"} 4096",
        "memweight_cgroup_psi_some_avg10_percent{",
        "memweight_cgroup_psi_full_avg10_percent{",
        "memweight_cgroup_swap_bytes{",
        "memweight_cgroup_memory_events_total{cgroup=\"lab/a\",event=\"oom_kill\"} 1",
        "memweight_pool_capacity_bytes 4718592000",
        "memweight_pool_usage_bytes ",
        "memweight_pool_weight 6",
        "memweight_host_memory_available_bytes ",
        "memweight_host_psi_some_avg10_percent 12.5",
        "memweight_tick_duration_seconds_bucket{le=\"0.002\"} 1",
        "memweight_tick_duration_seconds_count 1",
        "memweight_writes_total{kind=\"high\"} 4",
        "memweight_errors_total{kind=\"write\"} 0",
        "# TYPE memweight_writes_total counter",
    ] {
        assert!(text.contains(series), "missing {series:?} in\n{text}");
    }
    assert!(!text.contains("# EOF"));
    assert!(
        !text.contains(".."),
        "doubled periods in help texts:\n{text}"
    );
    assert!(
        !text.contains("memweight_cgroup_memory_high_bytes{"),
        "memory.high is max: no series"
    );
    let one = snapshot(&["lab/a"]);
    let text = render(Some(&one), &m, Format::OpenMetrics);
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains("cgroup=\"lab/a\""));
    assert!(!text.contains("lab/b"), "vanished cgroup still exported");
}

#[test]
fn before_the_first_tick_only_up_and_the_histogram() {
    let text = render(None, &Metrics::default(), Format::Classic);
    assert!(text.contains("memweight_up 0"), "{text}");
    assert!(!text.contains("cgroup_usage"), "{text}");
}

#[test]
fn health_follows_the_ticks() {
    let start = Instant::now();
    assert_eq!(health(None, start, start).0, StatusCode::OK);
    let late = start + Duration::from_secs(31);
    assert_eq!(health(None, late, start).0, StatusCode::SERVICE_UNAVAILABLE);
    let s = snapshot(&["a"]);
    assert_eq!(
        health(Some(&s), s.at + Duration::from_secs(2), start).0,
        StatusCode::OK
    );
    let (code, body) = health(Some(&s), s.at + Duration::from_secs(60), start);
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("stuck"), "{body}");
}
