//! A real Prometheus server (Debian's `prometheus` package) on the lab host, scraping the host
//! guest's daemon through a QEMU user-net forward on 127.0.0.1, with the shipped alert rules
//! loaded; after the run every dashboard query and every rule is evaluated over its HTTP API
//! and the scenario's alerts must have fired when it says (docs/lab.md, "Prometheus on the
//! lab host"). Everything listens on and talks to 127.0.0.1 only.

use std::fmt::Write as _;
use std::fs;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use lab_agent::scenario::PrometheusSpec;
use serde_json::Value;

use crate::checks::Outcome;
use crate::deps;

/// Scrape and rule evaluation interval.
const INTERVAL_S: u64 = 2;

/// A running Prometheus, killed when dropped.
pub struct Server {
    child: Child,
    api: u16,
    scrape: u16,
    guest: u16,
    started: f64,
}

/// A free TCP port on 127.0.0.1 (bound and released: another process could take it in
/// between, which fails the run loudly rather than scraping the wrong thing).
fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("cannot bind 127.0.0.1:0")?;
    Ok(l.local_addr().context("local address")?.port())
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The configuration: one job named `memweight` (as the rules expect) scraping `target`.
fn config(target: u16, rules: &Path) -> String {
    format!(
        "global:\n  scrape_interval: {INTERVAL_S}s\n  scrape_timeout: {INTERVAL_S}s\n  \
         evaluation_interval: {INTERVAL_S}s\nrule_files:\n  - {}\nscrape_configs:\n  - \
         job_name: memweight\n    static_configs:\n      - targets: [\"127.0.0.1:{target}\"]\n",
        rules.display()
    )
}

impl Server {
    /// Starts Prometheus with its data and log in `dir`; returns once it is ready.
    pub fn start(ws: &Path, spec: &PrometheusSpec, dir: &Path) -> Result<Server> {
        deps::ensure_packages(&[("prometheus", "prometheus")])?;
        let rules = ws.join(&spec.rules);
        if !rules.is_file() {
            bail!("[prometheus] rules {} not found", rules.display());
        }
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let (api, scrape) = (free_port()?, free_port()?);
        let conf = dir.join("prometheus.yml");
        fs::write(&conf, config(scrape, &rules))
            .with_context(|| format!("cannot write {}", conf.display()))?;
        let log = fs::File::create(dir.join("prometheus.log")).context("prometheus.log")?;
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{api}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("prometheus.log")?)
            .stderr(log)
            .spawn()
            .context("cannot start prometheus")?;
        let server = Server {
            child,
            api,
            scrape,
            guest: spec.guest_port,
            started: now(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if get(api, "/-/ready").is_ok_and(|(code, _)| code == 200) {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "prometheus did not get ready in 60 s; see {}",
                    dir.join("prometheus.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        eprintln!(
            "lab: prometheus on 127.0.0.1:{api} scrapes 127.0.0.1:{scrape} (guest port {})",
            spec.guest_port
        );
        Ok(server)
    }

    /// The host port QEMU forwards to the guest.
    pub fn scrape_port(&self) -> u16 {
        self.scrape
    }

    /// The guest port.
    pub fn guest_port(&self) -> u16 {
        self.guest
    }

    fn range(&self, expr: &str, end: f64) -> Result<Vec<Value>> {
        let path = format!(
            "/api/v1/query_range?query={}&start={:.3}&end={end:.3}&step={INTERVAL_S}",
            encode(expr),
            self.started
        );
        let (code, body) = get(self.api, &path)?;
        let v: Value = serde_json::from_str(&body)
            .with_context(|| format!("prometheus answered {code}: {body}"))?;
        if v["status"] != "success" {
            bail!("{}: {}", v["errorType"], v["error"]);
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    /// Evaluates the dashboard's queries and the loaded rules over the whole run, and the
    /// scenario's alerts; `offset` is the host's Unix time at scenario second 0. Writes
    /// what each query returned to `dir/queries.txt`.
    pub fn judge(
        &self,
        ws: &Path,
        spec: &PrometheusSpec,
        offset: Option<f64>,
        dir: &Path,
    ) -> Vec<Outcome> {
        let end = now();
        let mut log = String::new();
        let mut out = Vec::new();
        // The dashboard: every panel's every query returns at least one series.
        let dashboard = dashboard_queries(&ws.join(&spec.dashboard));
        out.push(match dashboard {
            Err(e) => fail("prometheus-dashboard", format!("{e:#}")),
            Ok(queries) => {
                let mut empty = Vec::new();
                for (title, expr) in &queries {
                    let r = self.range(expr, end);
                    let _ = writeln!(log, "dashboard {title:?}: {expr}\n  -> {}", show(&r));
                    if !r.as_ref().is_ok_and(|s| !s.is_empty()) {
                        empty.push(format!("{title}: {expr} ({})", show(&r)));
                    }
                }
                Outcome {
                    check: "prometheus-dashboard".into(),
                    pass: empty.is_empty() && !queries.is_empty(),
                    detail: if empty.is_empty() {
                        format!("{} queries, each returned data", queries.len())
                    } else {
                        format!("no data: {}", empty.join("; "))
                    },
                }
            }
        });
        // The rules as Prometheus loaded them: each evaluates without error, and every
        // series it reads has data.
        out.push(match self.rules() {
            Err(e) => fail("prometheus-rules", format!("{e:#}")),
            Ok(rules) => {
                let mut bad = Vec::new();
                for (name, expr, health) in &rules {
                    if health != "ok" {
                        bad.push(format!("{name}: rule health {health}"));
                    }
                    let r = self.range(expr, end);
                    let _ = writeln!(log, "rule {name}: {expr}\n  -> {}", show(&r));
                    if let Err(e) = r {
                        bad.push(format!("{name}: {e:#}"));
                    }
                    for series in series_read(expr) {
                        let q = format!("count({series})");
                        let r = self.range(&q, end);
                        let _ = writeln!(log, "  reads {q} -> {}", show(&r));
                        if !r.as_ref().is_ok_and(|s| !s.is_empty()) {
                            bad.push(format!("{name}: {series} has no data"));
                        }
                    }
                }
                Outcome {
                    check: "prometheus-rules".into(),
                    pass: bad.is_empty() && !rules.is_empty(),
                    detail: if bad.is_empty() {
                        format!(
                            "{} rules loaded and evaluated; every series they read has data",
                            rules.len()
                        )
                    } else {
                        bad.join("; ")
                    },
                }
            }
        });
        for a in &spec.alerts {
            let check = format!("prometheus-alert {}", a.name);
            let Some(offset) = offset else {
                out.push(fail(&check, "no sample from the guest: no clock".into()));
                continue;
            };
            let q = format!("ALERTS{{alertname=\"{}\",alertstate=\"firing\"}}", a.name);
            let r = self.range(&q, end);
            let _ = writeln!(log, "alert {}: {q}\n  -> {}", a.name, show(&r));
            out.push(match r {
                Err(e) => fail(&check, format!("{e:#}")),
                Ok(series) => {
                    let firing: Vec<f64> = timestamps(&series)
                        .into_iter()
                        .map(|ts| ts - offset)
                        .collect();
                    judge_alert(&check, a, &firing)
                }
            });
        }
        let _ = fs::write(dir.join("queries.txt"), log);
        out
    }

    /// `(alert name, expression, health)` of every alerting rule loaded.
    fn rules(&self) -> Result<Vec<(String, String, String)>> {
        let (code, body) = get(self.api, "/api/v1/rules?type=alert")?;
        let v: Value = serde_json::from_str(&body)
            .with_context(|| format!("prometheus answered {code}: {body}"))?;
        let mut rules = Vec::new();
        for g in v["data"]["groups"].as_array().into_iter().flatten() {
            for r in g["rules"].as_array().into_iter().flatten() {
                rules.push((
                    r["name"].as_str().unwrap_or_default().to_owned(),
                    r["query"].as_str().unwrap_or_default().to_owned(),
                    r["health"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
        Ok(rules)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fail(check: &str, detail: String) -> Outcome {
    Outcome {
        check: check.to_owned(),
        pass: false,
        detail,
    }
}

/// Whether the alert fired in its window and never in its quiet one (`firing`: scenario
/// seconds of the samples where it was firing).
fn judge_alert(check: &str, a: &lab_agent::scenario::AlertSpec, firing: &[f64]) -> Outcome {
    #[allow(clippy::cast_precision_loss)] // Seconds.
    let within = |t: f64, from: u64, until: u64| t >= from as f64 && t <= until as f64;
    let first = firing
        .iter()
        .copied()
        .find(|&t| within(t, a.fires_from, a.fires_until));
    let noisy = firing
        .iter()
        .copied()
        .find(|&t| within(t, a.quiet_from, a.quiet_until));
    Outcome {
        check: check.to_owned(),
        pass: first.is_some() && noisy.is_none(),
        detail: match (first, noisy) {
            (_, Some(t)) => format!(
                "fired at {t:.0}s, inside {}-{}s where it must stay quiet",
                a.quiet_from, a.quiet_until
            ),
            (Some(t), None) => format!(
                "firing from {t:.0}s (window {}-{}s); quiet {}-{}s",
                a.fires_from, a.fires_until, a.quiet_from, a.quiet_until
            ),
            (None, None) => format!(
                "never fired in {}-{}s ({} firing samples in the whole run)",
                a.fires_from,
                a.fires_until,
                firing.len()
            ),
        },
    }
}

/// Every sample timestamp of a range query's result.
fn timestamps(series: &[Value]) -> Vec<f64> {
    series
        .iter()
        .flat_map(|s| s["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.get(0).and_then(Value::as_f64))
        .collect()
}

fn show(r: &Result<Vec<Value>>) -> String {
    match r {
        Ok(s) => format!(
            "{} series, {} samples",
            s.len(),
            s.iter()
                .map(|x| x["values"].as_array().map_or(0, Vec::len))
                .sum::<usize>()
        ),
        Err(e) => format!("error: {e:#}"),
    }
}

/// `(panel title, expression)` of every query in a Grafana dashboard, with its variables
/// given the values of a single-host view: `$instance` all hosts, `$__rate_interval` 30 s.
pub fn dashboard_queries(path: &Path) -> Result<Vec<(String, String)>> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let mut out = Vec::new();
    for p in v["panels"].as_array().into_iter().flatten() {
        let title = p["title"].as_str().unwrap_or("?");
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = t["expr"].as_str() {
                let expr = expr
                    .replace("$instance", ".*")
                    .replace("$__rate_interval", "30s");
                out.push((title.to_owned(), expr));
            }
        }
    }
    Ok(out)
}

/// The metric names an expression reads (`up` and every `memweight_*`).
fn series_read(expr: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut start = None;
    for (i, c) in expr
        .char_indices()
        .chain(std::iter::once((expr.len(), ' ')))
    {
        match (start, ident(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                let word = &expr[s..i];
                let before = expr[..s].chars().next_back();
                // A label name inside {…} or by (…) is followed by = or , or ) — only
                // metric names are followed by `{`, whitespace, an operator or the end.
                let is_metric = word.starts_with("memweight_") || word == "up";
                if is_metric && before != Some('.') && !names.iter().any(|n| n == word) {
                    names.push(word.to_owned());
                }
                start = None;
            }
            _ => {}
        }
    }
    names
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `GET path` on 127.0.0.1:`port` (HTTP/1.0, the whole answer): status code and body.
fn get(port: u16, path: &str) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .with_context(|| format!("cannot connect to 127.0.0.1:{port}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .context("set_read_timeout")?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").context("send")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).context("read")?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_owned()))
}

/// Where a scenario's Prometheus keeps its data and log.
pub fn dir(out: &Path) -> PathBuf {
    out.join("prometheus")
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_agent::scenario::AlertSpec;

    #[test]
    fn config_scrapes_only_the_forward_on_loopback() {
        let c = config(
            40123,
            Path::new("/repo/deploy/prometheus/memweight.rules.yml"),
        );
        assert!(c.contains("targets: [\"127.0.0.1:40123\"]"), "{c}");
        assert!(c.contains("job_name: memweight"), "{c}");
        assert!(
            c.contains("  - /repo/deploy/prometheus/memweight.rules.yml\n"),
            "{c}"
        );
        assert!(c.contains("evaluation_interval: 2s"), "{c}");
    }

    #[test]
    fn series_read_finds_metric_names_not_labels() {
        assert_eq!(
            series_read("up{job=\"memweight\"} == 0 or memweight_up == 0"),
            ["up", "memweight_up"]
        );
        assert_eq!(
            series_read(
                "(memweight_cgroup_usage_bytes - memweight_cgroup_target_bytes) > (0.1 * \
                 memweight_cgroup_target_bytes + 33554432) and on (instance, job) \
                 memweight_pool_pressure == 1"
            ),
            [
                "memweight_cgroup_usage_bytes",
                "memweight_cgroup_target_bytes",
                "memweight_pool_pressure"
            ]
        );
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(encode("up{job=\"a b\"}"), "up%7Bjob%3D%22a%20b%22%7D");
    }

    #[test]
    fn shipped_dashboard_queries_have_no_variables_left() {
        let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let q = dashboard_queries(&ws.join("deploy/grafana/memweight.json")).expect("dashboard");
        assert!(q.len() >= 18, "{q:?}");
        for (title, expr) in &q {
            assert!(!expr.contains('$'), "{title}: {expr}");
        }
    }

    #[test]
    fn an_alert_must_fire_in_its_window_and_not_in_its_quiet_one() {
        let a = AlertSpec {
            name: "MemweightDown".into(),
            fires_from: 212,
            fires_until: 290,
            quiet_from: 75,
            quiet_until: 200,
        };
        assert!(judge_alert("x", &a, &[10.0, 280.0, 282.0]).pass);
        assert!(!judge_alert("x", &a, &[]).pass, "never fired");
        assert!(
            !judge_alert("x", &a, &[150.0, 280.0]).pass,
            "fired while up"
        );
        assert!(!judge_alert("x", &a, &[300.0]).pass, "too late");
    }
}
