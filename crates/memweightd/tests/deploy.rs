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

/// A YAML file of `deploy/kubernetes/`.
fn yaml(rel: &str) -> serde_yaml::Value {
    serde_yaml::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A string at `path` (keys) in `v`.
fn text<'a>(v: &'a serde_yaml::Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_str()
        .unwrap_or_else(|| panic!("no string at {path:?}"))
}

/// The volume `name` of the pod spec `spec`.
fn volume(spec: &serde_yaml::Value, name: &str) -> serde_yaml::Value {
    spec["volumes"]
        .as_sequence()
        .expect("volumes")
        .iter()
        .find(|v| v["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no volume {name}"))
        .clone()
}

/// Issue 22: the lab proves the DaemonSet's pod with `podman kube play` of pod.yaml (podman 4.3
/// plays no DaemonSet), so the two must be the same pod.
#[test]
fn the_daemonsets_pod_is_the_pod_podman_plays() {
    let ds = yaml("deploy/kubernetes/daemonset.yaml");
    let pod = yaml("deploy/kubernetes/pod.yaml");
    assert_eq!(text(&ds, &["kind"]), "DaemonSet");
    assert_eq!(text(&pod, &["kind"]), "Pod");
    assert_eq!(
        ds["spec"]["template"]["spec"], pod["spec"],
        "daemonset.yaml's spec.template.spec and pod.yaml's spec differ: change both"
    );
    assert_eq!(
        ds["spec"]["template"]["metadata"]["labels"],
        pod["metadata"]["labels"]
    );
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        ds["spec"]["template"]["metadata"]["labels"]
    );
}

/// The ConfigMap's file is config/memweight.toml with the host's cgroup tree where the pod
/// mounts it, and every path the daemon uses is on a volume of the pod.
#[test]
fn the_configmap_is_the_shipped_config_on_the_pods_volumes() {
    use memweightd::config::Config;
    let cm = yaml("deploy/kubernetes/configmap.yaml");
    let file = text(&cm, &["data", "memweight.toml"]);
    let (cfg, _) = Config::parse(file, Path::new("configmap.yaml")).expect("the daemon accepts it");
    let (shipped, _) = Config::parse(&read("config/memweight.toml"), Path::new("memweight.toml"))
        .expect("shipped config");
    assert_eq!(cfg.cgroup_root, Path::new("/host/sys/fs/cgroup"));
    assert_eq!(
        Config {
            cgroup_root: shipped.cgroup_root.clone(),
            ..cfg.clone()
        },
        shipped,
        "only cgroup_root differs from config/memweight.toml"
    );

    let pod = yaml("deploy/kubernetes/pod.yaml");
    let spec = &pod["spec"];
    let c = &spec["containers"][0];
    let mounts: Vec<(&str, &str)> = c["volumeMounts"]
        .as_sequence()
        .expect("volumeMounts")
        .iter()
        .map(|m| (text(m, &["name"]), text(m, &["mountPath"])))
        .collect();
    let volume = |name: &str| volume(spec, name);
    let mounted_at = |path: &Path| {
        mounts
            .iter()
            .find(|(_, at)| Path::new(at) == path)
            .map(|(name, _)| volume(name))
            .unwrap_or_else(|| panic!("{} is on no volume: {mounts:?}", path.display()))
    };
    assert_eq!(
        text(&mounted_at(&cfg.cgroup_root), &["hostPath", "path"]),
        "/sys/fs/cgroup"
    );
    assert_eq!(
        text(&mounted_at(&cfg.state_dir), &["hostPath", "path"]),
        "/var/lib/memweight"
    );
    let control_dir = cfg.control.socket.parent().expect("socket dir");
    assert_eq!(
        text(&mounted_at(control_dir), &["hostPath", "path"]),
        "/run/memweight"
    );
    let config_vol = mounted_at(Path::new("/etc/memweight"));
    assert_eq!(
        text(&config_vol, &["configMap", "name"]),
        text(&cm, &["metadata", "name"])
    );
    let args: Vec<&str> = c["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .filter_map(serde_yaml::Value::as_str)
        .collect();
    assert_eq!(args, ["--config", "/etc/memweight/memweight.toml"]);
    // The liveness probe asks the listener the config opens.
    let probe: Vec<&str> = c["livenessProbe"]["exec"]["command"]
        .as_sequence()
        .expect("an exec probe")
        .iter()
        .filter_map(serde_yaml::Value::as_str)
        .collect();
    assert_eq!(
        probe,
        [
            "/usr/bin/memweightctl",
            "health",
            "--address",
            cfg.metrics.listen.as_str()
        ]
    );
    assert!(cfg.metrics.enabled);
    // Unprivileged, with the one capability mlockall needs.
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"].as_bool(), Some(false));
    assert_eq!(sc["capabilities"]["drop"][0].as_str(), Some("ALL"));
    assert_eq!(sc["capabilities"]["add"][0].as_str(), Some("IPC_LOCK"));
    // Longer than the daemon's restore on SIGTERM may take (20 s).
    assert!(spec["terminationGracePeriodSeconds"].as_u64() > Some(20));
}

/// Issue 22: the restore pod (after a SIGKILL of the daemon's pod, podman 4.3's `kube down`
/// among them) runs the daemon's image once with `--restore`, sees the config, the cgroup tree
/// and the state where the daemon's pod does, and has less than it: no capability, no other
/// volume, no restart.
#[test]
fn the_restore_pod_sees_what_the_daemons_pod_sees_and_no_more() {
    let pod = yaml("deploy/kubernetes/pod.yaml");
    let restore = yaml("deploy/kubernetes/restore-pod.yaml");
    let (d, r) = (
        &pod["spec"]["containers"][0],
        &restore["spec"]["containers"][0],
    );
    assert_eq!(text(&restore, &["kind"]), "Pod");
    assert_eq!(text(&restore, &["spec", "restartPolicy"]), "Never");
    assert_eq!(text(r, &["image"]), text(d, &["image"]));
    let strings = |v: &serde_yaml::Value| -> Vec<String> {
        v.as_sequence()
            .expect("a list")
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let mut args = strings(&d["args"]);
    args.push("--restore".to_owned());
    assert_eq!(strings(&r["args"]), args, "the daemon's args and --restore");
    let mounts = restore["spec"]["containers"][0]["volumeMounts"]
        .as_sequence()
        .expect("volumeMounts");
    assert_eq!(mounts.len(), 3, "config, cgroup tree, state: {mounts:?}");
    for m in mounts {
        let name = text(m, &["name"]);
        let same = d["volumeMounts"]
            .as_sequence()
            .expect("volumeMounts")
            .iter()
            .find(|dm| dm["name"] == m["name"])
            .unwrap_or_else(|| panic!("the daemon's pod mounts no {name}"));
        assert_eq!(same["mountPath"], m["mountPath"], "{name}");
        let (dv, rv) = (volume(&pod["spec"], name), volume(&restore["spec"], name));
        assert_eq!(dv["configMap"], rv["configMap"], "{name}");
        assert_eq!(dv["hostPath"]["path"], rv["hostPath"]["path"], "{name}");
    }
    let sc = &r["securityContext"];
    assert_eq!(sc["privileged"].as_bool(), Some(false));
    assert_eq!(sc["capabilities"]["drop"][0].as_str(), Some("ALL"));
    assert!(sc["capabilities"]["add"].is_null(), "no capability added");
    assert!(restore["spec"]["hostNetwork"].is_null(), "no host network");
}

/// The shipped globs cover containers as podman (alone and in `kube play` pods) and Kubernetes
/// with the systemd cgroup driver (containerd, CRI-O; each QoS class) lay them out, and not
/// their conmon scopes' pods' slices.
#[test]
fn the_shipped_globs_cover_podman_pods_and_kubernetes_layouts() {
    use memweightd::config::Config;
    let (_, rules) = Config::parse(&read("config/memweight.toml"), Path::new("memweight.toml"))
        .expect("shipped config");
    let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let uid = "1a2b3c4d_5e6f_7a8b_9c0d_1e2f3a4b5c6d";
    for path in [
        format!("machine.slice/libpod-{id}.scope"),
        format!("machine.slice/machine-libpod_pod_{id}.slice/libpod-{id}.scope"),
        format!("system.slice/docker-{id}.scope"),
        format!(
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/cri-containerd-{id}.scope"
        ),
        format!(
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid}.slice/cri-containerd-{id}.scope"
        ),
        format!("kubepods.slice/kubepods-pod{uid}.slice/cri-containerd-{id}.scope"),
        format!(
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/crio-{id}.scope"
        ),
        format!(
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid}.slice/crio-{id}.scope"
        ),
        format!("kubepods.slice/kubepods-pod{uid}.slice/crio-{id}.scope"),
    ] {
        assert!(rules.rule_for(&path).is_some(), "no rule for {path}");
        assert_eq!(
            memweightd::containers::container_id(&path),
            Some(id),
            "{path}"
        );
    }
    for path in [
        format!("machine.slice/machine-libpod_pod_{id}.slice"),
        format!("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice"),
        "kubepods.slice/kubepods-burstable.slice".to_owned(),
        "kubepods.slice".to_owned(),
    ] {
        assert!(
            rules.rule_for(&path).is_none(),
            "{path} is a slice, not a container"
        );
    }
}
