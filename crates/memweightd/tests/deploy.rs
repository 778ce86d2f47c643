//! The monitoring we ship (`deploy/`): the Prometheus rules pass `promtool check rules` and
//! their unit tests (`promtool test rules`), and the rules and the Grafana dashboard name only
//! series the daemon serves (the metric table of docs/operations.md, itself generated from
//! the registry by `metrics::tests::docs_list_every_metric`). Without promtool the promtool
//! parts are skipped here and fail under CI=true.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `promtool ARGS` in `dir`: `None` when promtool is not installed (outside CI).
fn promtool(dir: &Path, args: &[&str]) -> Option<(bool, String)> {
    match Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(out) => Some((
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )),
        Err(e) => {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "cannot run promtool ({e}); CI must install Debian's `prometheus` package"
            );
            eprintln!("promtool not installed (apt-get install prometheus); skipping");
            None
        }
    }
}

/// Every `memweight_*` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("memweight_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The series docs/operations.md lists (and the registry serves), with a histogram's
/// `_bucket`, `_sum` and `_count`.
fn served() -> BTreeSet<String> {
    let doc = read("docs/operations.md");
    let mut names = BTreeSet::new();
    for line in doc.lines().filter(|l| l.starts_with("| `memweight_")) {
        let name = line
            .trim_start_matches("| `")
            .split(['{', '`'])
            .next()
            .unwrap_or_default()
            .to_owned();
        if line.contains("| histogram |") {
            for s in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{s}"));
            }
        }
        names.insert(name);
    }
    assert!(names.len() > 30, "no metric table in docs/operations.md");
    names
}

#[test]
fn rules_pass_promtool_check_and_their_unit_tests() {
    let dir = repo().join("deploy/prometheus");
    let Some((ok, out)) = promtool(&dir, &["check", "rules", "memweight.rules.yml"]) else {
        return;
    };
    assert!(ok, "promtool check rules:\n{out}");
    assert!(out.contains("SUCCESS: 8 rules found"), "{out}");
    let (ok, out) = promtool(&dir, &["test", "rules", "memweight.rules.test.yml"])
        .expect("promtool ran a moment ago");
    assert!(ok, "promtool test rules:\n{out}");
}

#[test]
fn rules_and_dashboard_name_only_served_series() {
    let served = served();
    let rules = read("deploy/prometheus/memweight.rules.yml");
    let dashboard = read("deploy/grafana/memweight.json");
    for (file, text) in [("rules", &rules), ("dashboard", &dashboard)] {
        let used = metric_names(text);
        assert!(used.len() > 5, "{file}: {used:?}");
        let unknown: Vec<&String> = used.difference(&served).collect();
        assert!(
            unknown.is_empty(),
            "{file} names series the daemon does not serve: {unknown:?}"
        );
    }
}

#[test]
fn every_dashboard_panel_queries_prometheus() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/memweight.json")).expect("dashboard JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10);
    let mut ids = BTreeSet::new();
    for p in panels {
        assert!(
            ids.insert(p["id"].as_u64().expect("id")),
            "duplicate panel id"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{}", p["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            assert!(expr.contains("memweight_"), "{expr}");
            assert!(
                expr.contains("instance=~\"$instance\""),
                "not filtered by host: {expr}"
            );
        }
    }
    let vars: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(vars, ["datasource", "instance"]);
}

#[test]
fn metric_names_are_found_in_expressions() {
    let names = metric_names("sum(rate(memweight_writes_total{a=\"b\"}[1m])) / memweight_up");
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["memweight_up", "memweight_writes_total"]
    );
}
