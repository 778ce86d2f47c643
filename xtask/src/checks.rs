//! Evaluates a scenario's `[[check]]` assertions against the run's results.

use lab_agent::record::{CgroupSample, Sample};
use lab_agent::scenario::{Check, Guest, Limit, Scenario, Size};

use crate::results::Results;
use crate::summary::Summary;

/// The verdict of one check.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// Short name with its parameters.
    pub check: String,
    /// Passed.
    pub pass: bool,
    /// Evidence.
    pub detail: String,
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // Rounded, clamped to ≥ 0.
fn second(s: &Sample) -> u64 {
    s.t.round().max(0.0) as u64
}

fn names<'a>(scenario: &'a Scenario, pattern: &'a str) -> Vec<(usize, &'a str)> {
    scenario
        .cgroups
        .iter()
        .enumerate()
        .filter(|(_, c)| pattern == "*" || c.name == pattern)
        .map(|(i, c)| (i, c.name.as_str()))
        .collect()
}

fn in_window(s: &Sample, from: u64, to: Option<u64>) -> bool {
    let t = second(s);
    t >= from && to.is_none_or(|to| t <= to)
}

fn cg(s: &Sample, i: usize) -> Option<&CgroupSample> {
    s.cgroups.get(i).filter(|c| c.present)
}

/// The cgroups matching `pattern` for which `seen` held in no sample.
fn never<'a>(
    scenario: &'a Scenario,
    results: &Results,
    pattern: &'a str,
    seen: impl Fn(&Sample, &CgroupSample) -> bool,
) -> Vec<&'a str> {
    names(scenario, pattern)
        .into_iter()
        .filter(|&(i, _)| {
            !results
                .samples
                .iter()
                .any(|s| cg(s, i).is_some_and(|c| seen(s, c)))
        })
        .map(|(_, name)| name)
        .collect()
}

/// `daemon-view`: the share of the samples from `from` on that carry the daemon's view of the
/// pool and of every cgroup present, and whether its ticks went forward.
fn daemon_view(results: &Results, from: u64, min_pct: f64) -> Outcome {
    let judged: Vec<&Sample> = results
        .samples
        .iter()
        .filter(|s| in_window(s, from, None))
        .collect();
    let viewed: Vec<u64> = judged
        .iter()
        .filter(|s| s.cgroups.iter().all(|c| !c.present || c.daemon.is_some()))
        .filter_map(|s| s.daemon_pool.as_ref().map(|p| p.tick))
        .collect();
    #[allow(clippy::cast_precision_loss)] // Sample counts.
    let pct = 100.0 * viewed.len() as f64 / judged.len().max(1) as f64;
    let forward = viewed.windows(2).all(|w| w[0] <= w[1])
        && viewed
            .first()
            .zip(viewed.last())
            .is_some_and(|(a, b)| a < b);
    Outcome {
        check: format!("daemon-view >= {min_pct}% from {from}s"),
        pass: !judged.is_empty() && pct >= min_pct && forward,
        detail: format!(
            "{} of {} samples carry the daemon's view ({pct:.0} %), ticks {}",
            viewed.len(),
            judged.len(),
            match (viewed.first(), viewed.last()) {
                (Some(a), Some(b)) if forward => format!("{a}..{b}"),
                (Some(a), Some(b)) => format!("{a}..{b}, not always forward"),
                _ => "none".to_owned(),
            }
        ),
    }
}

fn human_limit(l: Limit) -> String {
    match l {
        Limit::Max => "max".to_owned(),
        Limit::Bytes(b) => Size(b).to_string(),
    }
}

/// Every check of the scenario, in order. `baseline` gives the `summary.json` of a baseline
/// scenario's run on the same kernel (by file name), for `usage-vs-baseline`.
pub fn evaluate(
    scenario: &Scenario,
    results: &Results,
    summary: &Summary,
    baseline: &dyn Fn(&str) -> Option<serde_json::Value>,
) -> Vec<Outcome> {
    scenario
        .checks
        .iter()
        .map(|c| match c {
            Check::UsageVsBaseline {
                baseline: file,
                min_pct,
                from,
            } => usage_vs_baseline(&totals(summary), baseline(file), file, *min_pct, *from),
            _ => one(c, scenario, results, summary),
        })
        .collect()
}

/// Σ mean usage of the cgroups present in each phase, by phase index, of a summary as JSON.
fn phase_totals(summary: &serde_json::Value) -> Vec<(u64, u64, u64)> {
    summary["phases"]
        .as_array()
        .map(|phases| {
            phases
                .iter()
                .filter_map(|p| {
                    let total = p["cgroups"]
                        .as_array()?
                        .iter()
                        .filter_map(|c| c["mean_usage"].as_u64())
                        .fold(0u64, u64::saturating_add);
                    Some((p["index"].as_u64()?, p["start"].as_u64()?, total))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// [`phase_totals`] of this run's summary.
fn totals(summary: &Summary) -> Vec<(u64, u64, u64)> {
    serde_json::to_value(summary)
        .map(|v| phase_totals(&v))
        .unwrap_or_default()
}

/// `ours`: (phase index, start, Σ mean usage) of this run.
fn usage_vs_baseline(
    ours: &[(u64, u64, u64)],
    base: Option<serde_json::Value>,
    file: &str,
    min_pct: f64,
    from: u64,
) -> Outcome {
    let name = format!("usage-vs-baseline >= {min_pct}% of {file} (phases from {from}s)");
    let Some(base) = base else {
        return Outcome {
            check: name,
            pass: false,
            detail: format!(
                "no run of {file} on this kernel beside this one: `cargo xtask lab test` and \
                 `cargo xtask lab compare tests/lab/scenarios/{file} THIS.toml` run it first"
            ),
        };
    };
    let base = phase_totals(&base);
    let mut worst: Option<(u64, f64, u64, u64)> = None;
    for &(index, start, total) in ours {
        if start < from {
            continue;
        }
        let Some(&(_, _, b)) = base.iter().find(|(i, _, _)| *i == index) else {
            continue;
        };
        #[allow(clippy::cast_precision_loss)] // Bytes far below 2^52.
        let pct = if b == 0 {
            100.0
        } else {
            total as f64 / b as f64 * 100.0
        };
        if worst.is_none_or(|w| pct < w.1) {
            worst = Some((index, pct, total, b));
        }
    }
    match worst {
        Some((phase, pct, ours, theirs)) => Outcome {
            check: name,
            pass: pct >= min_pct,
            detail: format!(
                "lowest {pct:.1}% in phase {phase}: {} MiB held against {} MiB",
                ours >> 20,
                theirs >> 20
            ),
        },
        None => Outcome {
            check: name,
            pass: false,
            detail: "no phase to compare (different timelines?)".into(),
        },
    }
}

/// Whether a control file of the cgroups matching `pattern` kept its value in every sample
/// of the window `[from, to]`: `moved` says how it read (`memory.high = 300 MiB`) where it
/// did not. The verdict (some sample seen, none moved), and the first that moved or how many
/// samples were checked.
fn stays(
    scenario: &Scenario,
    results: &Results,
    pattern: &str,
    (from, to): (u64, Option<u64>),
    moved: impl Fn(&CgroupSample) -> Option<String>,
) -> (bool, String) {
    let mut seen = 0usize;
    let mut first_bad = None;
    for (i, name) in names(scenario, pattern) {
        for s in results.samples.iter().filter(|s| in_window(s, from, to)) {
            if let Some(c) = cg(s, i) {
                seen += 1;
                if first_bad.is_none()
                    && let Some(read) = moved(c)
                {
                    first_bad = Some(format!("{name} {read} at {:.0}s", s.t));
                }
            }
        }
    }
    (
        seen > 0 && first_bad.is_none(),
        first_bad.unwrap_or_else(|| format!("{seen} samples checked")),
    )
}

fn one(check: &Check, scenario: &Scenario, results: &Results, summary: &Summary) -> Outcome {
    let out = |check: String, pass: bool, detail: String| Outcome {
        check,
        pass,
        detail,
    };
    match check {
        Check::MaxErrorPct { max, from, until } => {
            let (unsettled, judged): (Vec<_>, Vec<_>) = summary
                .phases
                .iter()
                .filter(|p| p.start >= *from && until.is_none_or(|u| p.end <= u))
                .partition(|p| p.unsettled);
            let worst = judged
                .iter()
                .flat_map(|p| p.cgroups.iter().map(move |c| (p.index, c)))
                .filter_map(|(i, c)| c.error_pct.map(|e| (i, c.name.as_str(), e)))
                .max_by(|a, b| a.2.abs().total_cmp(&b.2.abs()));
            // A phase whose balloon or pressure came too late to settle is said, not judged.
            let skipped: String = unsettled
                .iter()
                .map(|p| {
                    let (what, at) = match (p.balloon_arrived_s, p.pressure_arrived_s) {
                        (Some(a), _) => ("the balloon arrived", a),
                        (None, Some(a)) => ("the pressure reached its size", a),
                        (None, None) => ("the step arrived", f64::NAN),
                    };
                    format!(
                        "; phase {} not judged: {what} {at:.0} s into its {} s",
                        p.index,
                        p.end - p.start
                    )
                })
                .collect();
            match worst {
                Some((phase, name, e)) => out(
                    format!("max-error-pct <= {max} (phases from {from}s)"),
                    e.abs() <= *max,
                    format!("worst {e:+.1}% ({name}, phase {phase}){skipped}"),
                ),
                None => out(
                    format!("max-error-pct <= {max}"),
                    false,
                    format!("no phase could be measured{skipped}"),
                ),
            }
        }
        Check::NoOomKill => out(
            "no-oom-kill".into(),
            summary.oom_kills == 0,
            format!("{} oom_kill events in managed cgroups", summary.oom_kills),
        ),
        Check::HighSet { cgroup, from } => {
            let bad = never(scenario, results, cgroup, |s, c| {
                second(s) >= *from && matches!(c.high, Some(Limit::Bytes(_)))
            });
            out(
                format!("high-set {cgroup} (from {from}s)"),
                bad.is_empty(),
                if bad.is_empty() {
                    "memory.high was written below max".into()
                } else {
                    format!("memory.high stayed max for {}", bad.join(", "))
                },
            )
        }
        Check::LowSet { cgroup } => {
            let bad = never(scenario, results, cgroup, |_, c| {
                c.low.is_some_and(|l| l > 0)
            });
            out(
                format!("low-set {cgroup}"),
                bad.is_empty(),
                if bad.is_empty() {
                    "memory.low was written above 0".into()
                } else {
                    format!("memory.low stayed 0 for {}", bad.join(", "))
                },
            )
        }
        Check::HighStays {
            cgroup,
            value,
            from,
            to,
        } => {
            let (pass, detail) = stays(scenario, results, cgroup, (*from, *to), |c| {
                (c.high != Some(*value)).then(|| {
                    let shown = c.high.map_or_else(|| "?".into(), human_limit);
                    format!("memory.high = {shown}")
                })
            });
            out(
                format!("high-stays {cgroup} == {}", human_limit(*value)),
                pass,
                detail,
            )
        }
        Check::LowStays {
            cgroup,
            value,
            from,
            to,
        } => {
            let (pass, detail) = stays(scenario, results, cgroup, (*from, *to), |c| {
                (c.low != Some(value.0)).then(|| {
                    let shown = c.low.map_or_else(|| "?".into(), |l| l.to_string());
                    format!("memory.low = {shown}")
                })
            });
            out(format!("low-stays {cgroup} == {value}"), pass, detail)
        }
        Check::DaemonAlive { from, until } => {
            let stop_at = scenario
                .commands
                .iter()
                .filter(|c| {
                    matches!(
                        c.action,
                        Some(
                            lab_agent::scenario::Action::StopDaemon
                                | lab_agent::scenario::Action::KillDaemon
                        )
                    )
                })
                .map(|c| c.at)
                .min();
            let until = until
                .or(stop_at.map(|s| s.saturating_sub(1)))
                .unwrap_or(u64::MAX);
            let start = from.unwrap_or(scenario.daemon.start);
            let dead = results
                .samples
                .iter()
                .filter(|s| second(s) >= start && second(s) <= until)
                .find(|s| s.daemon_alive != Some(true));
            out(
                "daemon-alive".into(),
                dead.is_none() && !results.samples.is_empty(),
                dead.map_or_else(
                    || "memweightd ran throughout".to_owned(),
                    |s| format!("memweightd not running at {:.0}s", s.t),
                ),
            )
        }
        Check::DaemonView { from, min_pct } => daemon_view(results, *from, *min_pct),
        Check::DaemonExitOk => {
            // The last exit: an earlier one may be a scenario's own `kill-daemon`.
            let exit = results
                .events
                .iter()
                .rev()
                .find(|e| e.kind == "daemon-exit");
            out(
                "daemon-exit-ok".into(),
                exit.is_some_and(|e| e.ok),
                exit.map_or_else(
                    || "no daemon exit recorded".to_owned(),
                    |e| format!("{} at {:.0}s", e.detail, e.t),
                ),
            )
        }
        Check::DaemonLogClean { expected } => {
            let log = results.files.get("daemon.log").map_or("", String::as_str);
            let bad = log.lines().find(|l| {
                (l.contains("ERROR") || l.contains("panicked"))
                    && !expected.iter().any(|e| l.contains(e.as_str()))
            });
            out(
                "daemon-log-clean".into(),
                bad.is_none(),
                bad.map_or_else(
                    || format!("{} log lines, no ERROR", log.lines().count()),
                    |l| format!("found: {}", l.chars().take(160).collect::<String>()),
                ),
            )
        }
        Check::UsageVsBaseline {
            baseline,
            min_pct,
            from,
        } => usage_vs_baseline(&totals(summary), None, baseline, *min_pct, *from),
        Check::AssertsOk => {
            let asserts: Vec<_> = results
                .events
                .iter()
                .filter(|e| e.kind == "assert")
                .collect();
            // The host guest's README install is an assertion too: counted, so that it cannot
            // stand in for a command that never finished.
            let install = usize::from(scenario.guest == Guest::Host && scenario.daemon.enabled);
            let expected = scenario.commands.iter().filter(|c| c.assert).count() + install;
            let bad = asserts.iter().find(|e| !e.ok);
            out(
                "asserts-ok".into(),
                bad.is_none() && asserts.len() >= expected,
                match bad {
                    Some(e) => format!("failed at {:.0}s: {}", e.t, e.detail),
                    None if asserts.len() < expected => format!(
                        "only {} of {expected} assertions ran (see events.txt)",
                        asserts.len()
                    ),
                    None => format!("{} assertions passed", asserts.len()),
                },
            )
        }
        Check::ActionsOk => {
            // Shell commands are informational (their output is saved); their exit status is not
            // an assertion.
            let kinds = [
                "stop-daemon",
                "kill-daemon",
                "start-daemon",
                "remove-cgroup",
                "pressure",
            ];
            let bad = results
                .events
                .iter()
                .find(|e| kinds.contains(&e.kind.as_str()) && !e.ok);
            out(
                "actions-ok".into(),
                bad.is_none(),
                bad.map_or_else(
                    || "every action and pressure step succeeded".to_owned(),
                    |e| format!("{} failed at {:.0}s: {}", e.kind, e.t, e.detail),
                ),
            )
        }
    }
}

/// Lints every `/metrics` scrape saved by a timed command (`commands/*.txt` holding
/// `# TYPE memweight_` lines) with `promtool check metrics`, one outcome per scrape.
///
/// Without promtool the check fails under CI (`CI` set) and is left out otherwise, with a note.
pub fn promtool_scrapes(dir: &std::path::Path) -> Vec<Outcome> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if !text.contains("# TYPE memweight_") {
            continue;
        }
        // The command file starts with `$ command` and `# at t=…` lines; the scrape follows.
        let body: String = text
            .lines()
            .skip_while(|l| !(l.starts_with("# HELP") || l.starts_with("# TYPE")))
            .map(|l| format!("{l}\n"))
            .collect();
        let name = file
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let check = format!("promtool-check-metrics {name}");
        let run = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                if let Some(mut stdin) = child.stdin.take() {
                    stdin.write_all(body.as_bytes())?;
                }
                child.wait_with_output()
            });
        match run {
            Ok(o) => {
                let said = format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
                out.push(Outcome {
                    check,
                    pass: o.status.success() && said.trim().is_empty(),
                    detail: if said.trim().is_empty() {
                        format!("{} lines accepted", body.lines().count())
                    } else {
                        said.trim().replace('\n', "; ")
                    },
                });
            }
            Err(e) if std::env::var_os("CI").is_some() => out.push(Outcome {
                check,
                pass: false,
                detail: format!("cannot run promtool ({e}); install Debian's prometheus package"),
            }),
            Err(e) => eprintln!("lab: skipping the promtool check of {name}: {e}"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::summarize;
    use lab_agent::record::{Event, HostSample};

    const SCENARIO: &str = r#"
duration = 4
[[cgroup]]
name = "c1"
[daemon]
enabled = true
[[command]]
at = 3
action = "stop-daemon"
[[check]]
check = "high-stays"
cgroup = "c1"
value = "max"
[[check]]
check = "low-set"
cgroup = "*"
[[check]]
check = "daemon-alive"
[[check]]
check = "daemon-exit-ok"
[[check]]
check = "daemon-log-clean"
[[check]]
check = "no-oom-kill"
"#;

    fn results(high: Limit, low: u64, alive_until: u64) -> Results {
        let mut r = Results::default();
        for t in 0..=4u32 {
            r.samples.push(Sample {
                t: f64::from(t),
                cgroups: vec![CgroupSample {
                    name: "c1".into(),
                    present: true,
                    current: Some(1),
                    high: Some(high),
                    low: Some(low),
                    events_oom_kill: Some(0),
                    ..CgroupSample::default()
                }],
                host: HostSample::default(),
                pressure_size: 0,
                pressure_current: None,
                daemon_alive: Some(u64::from(t) <= alive_until),
                daemon_cpu_usec: None,
                kswapd_cpu_usec: None,
                daemon_pool: None,
            });
        }
        r.events.push(Event {
            t: 3.2,
            kind: "daemon-exit".into(),
            detail: "exit 0".into(),
            ok: true,
        });
        r.files
            .insert("daemon.log".into(), "INFO adopted lab/c1\n".into());
        r
    }

    fn verdicts(r: &Results) -> Vec<bool> {
        let scenario = Scenario::parse(SCENARIO).expect("parses");
        let summary = summarize("x", "6.1", &scenario, r, 1.0);
        evaluate(&scenario, r, &summary, &|_| None)
            .into_iter()
            .map(|o| o.pass)
            .collect()
    }

    #[test]
    fn regression_host_install_stood_in_for_an_assertion_that_never_finished() {
        // host-package.toml: the README install's "assert" event was counted against the
        // scenario's asserting commands, so one that was still running at the end passed.
        let scenario = Scenario::parse(
            "duration = 4\nguest = \"host\"\n[daemon]\nenabled = true\n\
             [[command]]\nat = 1\nassert = true\nrun = \"true\"\n\
             [[command]]\nat = 2\nassert = true\nrun = \"sleep 99\"\n\
             [[check]]\ncheck = \"asserts-ok\"\n",
        )
        .expect("parses");
        let mut r = Results::default();
        for (t, detail) in [(0.5, "install"), (1.5, "true")] {
            r.events.push(Event {
                t,
                kind: "assert".into(),
                detail: detail.into(),
                ok: true,
            });
        }
        let summary = summarize("x", "6.1", &scenario, &r, 1.0);
        let verdict = &evaluate(&scenario, &r, &summary, &|_| None)[0];
        assert!(!verdict.pass, "{}", verdict.detail);
        assert!(verdict.detail.contains("only 2 of 3"), "{}", verdict.detail);
    }

    /// high-stays and low-stays share one loop: each names the first sample that moved, or
    /// counts the samples it checked.
    #[test]
    fn stays_checks_name_the_first_sample_that_moved() {
        let scenario = Scenario::parse(SCENARIO).expect("parses");
        let r = results(Limit::Bytes(300 << 20), 5, 2);
        let summary = summarize("x", "6.1", &scenario, &r, 1.0);
        let check = |c: Check| {
            let o = one(&c, &scenario, &r, &summary);
            (o.check, o.pass, o.detail)
        };
        assert_eq!(
            check(Check::HighStays {
                cgroup: "c1".into(),
                value: Limit::Max,
                from: 1,
                to: None,
            }),
            (
                "high-stays c1 == max".into(),
                false,
                "c1 memory.high = 300M at 1s".into()
            )
        );
        assert_eq!(
            check(Check::LowStays {
                cgroup: "c1".into(),
                value: Size(5),
                from: 1,
                to: Some(2),
            }),
            ("low-stays c1 == 5".into(), true, "2 samples checked".into())
        );
        assert_eq!(
            check(Check::LowStays {
                cgroup: "*".into(),
                value: Size(6),
                from: 0,
                to: None,
            }),
            (
                "low-stays * == 6".into(),
                false,
                "c1 memory.low = 5 at 0s".into()
            )
        );
    }

    #[test]
    fn good_run_passes_everything() {
        assert_eq!(verdicts(&results(Limit::Max, 5, 2)), vec![true; 6]);
    }

    #[test]
    fn each_failure_is_caught() {
        let v = verdicts(&results(Limit::Bytes(10), 0, 1));
        assert_eq!(v, vec![false, false, false, true, true, true]);
        let mut r = results(Limit::Max, 5, 2);
        r.files
            .insert("daemon.log".into(), "ERROR write failed\n".into());
        r.events.clear();
        let v = verdicts(&r);
        assert_eq!(v, vec![true, true, true, false, false, true]);
    }

    /// daemon-view: a sample counts when it carries the pool and a view of every cgroup
    /// present; too few, or ticks that do not go forward, fail.
    #[test]
    fn daemon_view_counts_the_samples_that_carry_the_daemons_answers() {
        use lab_agent::record::{DaemonCgroupView, DaemonPoolView};
        let view = DaemonCgroupView {
            usage: 1,
            target: 1,
            entitlement: 1,
            ceiling: None,
            trim: None,
            refaulted: None,
        };
        let with = |r: &mut Results, ticks: &[Option<u64>]| {
            for (s, tick) in r.samples.iter_mut().zip(ticks) {
                s.daemon_pool = tick.map(|tick| {
                    Box::new(DaemonPoolView {
                        tick,
                        capacity: 1,
                        ..DaemonPoolView::default()
                    })
                });
                s.cgroups[0].daemon = tick.map(|_| view);
            }
        };
        let verdict = |r: &Results, min_pct: f64| daemon_view(r, 1, min_pct);
        let mut r = results(Limit::Max, 5, 4);
        with(&mut r, &[None, Some(3), Some(4), Some(4), Some(6)]);
        let o = verdict(&r, 100.0);
        assert!(o.pass, "{}", o.detail);
        assert_eq!(
            o.detail,
            "4 of 4 samples carry the daemon's view (100 %), ticks 3..6"
        );
        with(&mut r, &[None, Some(3), None, Some(5), Some(6)]);
        assert!(!verdict(&r, 90.0).pass);
        assert!(verdict(&r, 75.0).pass);
        with(&mut r, &[None, Some(3), Some(3), Some(3), Some(3)]);
        assert!(!verdict(&r, 50.0).pass, "one answer kept is not live");
        with(&mut r, &[None, Some(3), Some(5), Some(4), Some(6)]);
        assert!(!verdict(&r, 50.0).pass, "ticks went back");
        // The pool without a cgroup's view does not count.
        with(&mut r, &[None, Some(3), Some(4), Some(5), Some(6)]);
        r.samples[4].cgroups[0].daemon = None;
        assert!(!verdict(&r, 100.0).pass);
    }

    /// host-podman provokes a refused reload on purpose: systemd logs "Reload failed" at
    /// error priority in the unit's journal, which the check must let through when the
    /// scenario names it, and only then.
    #[test]
    fn daemon_log_clean_lets_through_only_the_errors_a_scenario_provokes() {
        let mut r = results(Limit::Max, 5, 2);
        r.files.insert(
            "daemon.log".into(),
            "INFO adopted\nERROR Reload failed for memweightd.service\n".into(),
        );
        let scenario = Scenario::parse(SCENARIO).expect("parses");
        let summary = summarize("x", "6.1", &scenario, &r, 1.0);
        let check = |expected: Vec<String>| {
            one(&Check::DaemonLogClean { expected }, &scenario, &r, &summary).pass
        };
        assert!(!check(Vec::new()));
        assert!(check(vec!["Reload failed for memweightd.service".into()]));
        assert!(!check(vec!["something else".into()]));
        r.files.insert(
            "daemon.log".into(),
            "ERROR Reload failed for memweightd.service\nERROR write failed\n".into(),
        );
        let summary = summarize("x", "6.1", &scenario, &r, 1.0);
        assert!(
            !one(
                &Check::DaemonLogClean {
                    expected: vec!["Reload failed".into()]
                },
                &scenario,
                &r,
                &summary
            )
            .pass,
            "another error still fails"
        );
    }

    /// Issue 19: the daemon must not cost the containers memory the kernel alone leaves them.
    /// Each phase's Σ mean usage is compared with the baseline run's same phase; the lowest
    /// share decides, phases before `from` do not count, and a missing baseline fails.
    #[test]
    fn usage_vs_baseline_compares_each_phase_with_the_kernel_defaults() {
        const MIB: u64 = 1 << 20;
        let scenario = Scenario::parse(SCENARIO).expect("parses");
        let r = results(Limit::Max, 5, 2);
        let summary = summarize("x", "6.1", &scenario, &r, 1.0);
        assert!(
            !totals(&summary).is_empty(),
            "phases read back from the summary"
        );
        // Ours: 300 MiB in phase 0 (from 0 s), 200 MiB in phase 1 (from 30 s).
        let ours = [(0, 0, 300 * MIB), (1, 30, 200 * MIB)];
        let base = |p0: u64, p1: u64| {
            Some(serde_json::json!({"phases": [
                {"index": 0, "start": 0, "cgroups": [{"mean_usage": p0 * MIB / 2}, {"mean_usage": p0 * MIB / 2}]},
                {"index": 1, "start": 30, "cgroups": [{"mean_usage": p1 * MIB}]},
            ]}))
        };
        let check = |b, from| usage_vs_baseline(&ours, b, "b.toml", 90.0, from);
        assert!(check(base(300, 200), 0).pass);
        let ok = check(base(310, 210), 0);
        assert!(ok.pass, "95 % is enough: {}", ok.detail);
        let short = check(base(300, 250), 0);
        assert!(!short.pass, "{}", short.detail);
        assert!(
            short.detail.contains("80.0% in phase 1"),
            "{}",
            short.detail
        );
        assert!(check(base(400, 200), 30).pass, "phase 0 is before `from`");
        let late = check(base(300, 200), 1000);
        assert!(!late.pass, "no phase to compare: {}", late.detail);
        let missing = check(None, 0);
        assert!(
            !missing.pass && missing.detail.contains("lab compare"),
            "{}",
            missing.detail
        );
    }
}
