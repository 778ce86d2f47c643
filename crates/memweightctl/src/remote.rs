//! The subcommands that talk to a running memweightd: `set`, `unset`, `get`, `status`,
//! `explain`, `reload`.
//!
//! Each builds a [`Command`], sends it with [`client::request`] and prints the reply as a
//! kubectl-style table or as JSON (sizes in bytes). Rendering is pure and tested here.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use memweight_policy::human;
use memweight_proto::Size;
use memweight_proto::ctl::{
    self, CgroupStatus, Command, Explanation, Pool, Reloaded, Reply, Setting, Status, Values,
    WeightSource,
};

use crate::client::{self, exit};
use crate::table::Table;
use crate::{Failure, OutputFormat, print};

/// Options every daemon subcommand takes.
#[derive(Debug, Args)]
pub(crate) struct Common {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", env = "MEMWEIGHT_SOCKET", default_value = ctl::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Output format [default: table on a terminal, json otherwise].
    #[arg(short, long, value_enum)]
    output: Option<OutputFormat>,
}

/// `set <cgroup> <weight> [--min SIZE] [--max SIZE]`.
#[derive(Debug, Args)]
pub(crate) struct SetArgs {
    /// Cgroup path relative to the cgroup root (e.g. `system.slice/db.service`), or the name,
    /// id or id prefix (12+ digits) of a running podman or docker container.
    cgroup: String,
    /// Weight, 1..=10000.
    #[arg(allow_hyphen_values = true)]
    weight: String,
    /// Floor: memory.high never goes below this (e.g. `512M`).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    min: Option<String>,
    /// Ceiling of the cgroup's share (e.g. `4G`).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    max: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// Subcommands that name one cgroup.
#[derive(Debug, Args)]
pub(crate) struct CgroupArgs {
    /// Cgroup path relative to the cgroup root, or a running container's name or id.
    cgroup: String,
    #[command(flatten)]
    common: Common,
}

/// Subcommands without arguments.
#[derive(Debug, Args)]
pub(crate) struct PlainArgs {
    #[command(flatten)]
    common: Common,
}

/// Which daemon subcommand to run.
#[derive(Debug)]
pub(crate) enum Remote {
    /// `set`.
    Set(SetArgs),
    /// `unset`.
    Unset(CgroupArgs),
    /// `get`.
    Get(CgroupArgs),
    /// `status`.
    Status(PlainArgs),
    /// `explain`.
    Explain(CgroupArgs),
    /// `reload`.
    Reload(PlainArgs),
}

fn parse_weight(text: &str) -> Result<u32, Failure> {
    memweight_policy::parse_weight(text).map_err(|e| Failure::bad_input("weight", e))
}

fn parse_size(flag: &str, text: Option<&String>) -> Result<Option<u64>, Failure> {
    text.map(|t| {
        t.parse::<Size>()
            .map(Size::bytes)
            .map_err(|e| Failure::bad_input(flag, e))
    })
    .transpose()
}

/// Runs a daemon subcommand.
pub(crate) fn run(remote: Remote) -> Result<(), Failure> {
    let (command, common) = match remote {
        Remote::Set(a) => (
            Command::Set {
                weight: parse_weight(&a.weight)?,
                min: parse_size("--min", a.min.as_ref())?,
                max: parse_size("--max", a.max.as_ref())?,
                cgroup: a.cgroup,
            },
            a.common,
        ),
        Remote::Unset(a) => (Command::Unset { cgroup: a.cgroup }, a.common),
        Remote::Get(a) => (Command::Get { cgroup: a.cgroup }, a.common),
        Remote::Status(a) => (Command::Status, a.common),
        Remote::Explain(a) => (Command::Explain { cgroup: a.cgroup }, a.common),
        Remote::Reload(a) => (Command::Reload, a.common),
    };
    let reply = client::request(&common.socket, command)?;
    let format = common.output.unwrap_or(if std::io::stdout().is_terminal() {
        OutputFormat::Table
    } else {
        OutputFormat::Json
    });
    let text = match format {
        OutputFormat::Json => json(&reply)?,
        OutputFormat::Table => table(&reply),
    };
    print(&text)
}

fn json(reply: &Reply) -> Result<String, Failure> {
    let value = match reply {
        Reply::Setting(s) => serde_json::to_value(s),
        Reply::Status(s) => serde_json::to_value(s),
        Reply::Explain(e) => serde_json::to_value(e).map(|mut v| {
            if let Some(obj) = v.as_object_mut() {
                obj.insert("narrative".into(), e.narrative().into());
            }
            v
        }),
        Reply::Reloaded(r) => serde_json::to_value(r),
    };
    let mut text = value
        .and_then(|v| serde_json::to_string_pretty(&v))
        .map_err(|e| Failure {
            code: exit::DAEMON,
            message: format!("encoding the reply as JSON: {e}"),
        })?;
    text.push('\n');
    Ok(text)
}

/// The reply as a table (or a short text for `explain` and `reload`).
pub(crate) fn table(reply: &Reply) -> String {
    match reply {
        Reply::Setting(s) => setting_table(s),
        Reply::Status(s) => status_table(s),
        Reply::Explain(e) => explain_text(e),
        Reply::Reloaded(r) => reloaded_text(r),
    }
}

fn opt_bytes(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), |b| human::bytes(b).to_string())
}

fn limit(v: Option<u64>) -> String {
    v.map_or_else(|| "max".to_owned(), |b| human::bytes(b).to_string())
}

fn signed(v: i64) -> String {
    let m = human::bytes(v.unsigned_abs());
    if v < 0 {
        format!("-{m}")
    } else {
        m.to_string()
    }
}

fn psi(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |p| format!("{p:.2}"))
}

fn values_cells(v: &Values) -> [String; 3] {
    [v.weight.to_string(), opt_bytes(v.min), opt_bytes(v.max)]
}

fn setting_table(s: &Setting) -> String {
    let mut header = vec!["CGROUP"];
    if s.container.is_some() {
        header.push("CONTAINER");
    }
    header.extend(["MANAGED", "SOURCE", "WEIGHT", "MIN", "MAX", "CONFIGURED"]);
    let mut t = Table::new(&header);
    let [w, min, max] = values_cells(&s.effective);
    let [cw, cmin, cmax] = values_cells(&s.configured);
    let source = match (&s.source, s.runtime_override.is_some()) {
        (Some(WeightSource::Override), _) | (None, true) => "override",
        (Some(WeightSource::Label { .. }), _) => "label",
        (Some(WeightSource::Config { .. }), _) | (None, false) => "config",
    };
    let mut row = vec![s.cgroup.clone()];
    if let Some(c) = &s.container {
        row.push(c.clone());
    }
    row.extend([
        if s.managed { "yes" } else { "no" }.into(),
        source.into(),
        w,
        min,
        max,
        format!("weight {cw}, min {cmin}, max {cmax}"),
    ]);
    t.row(row);
    let mut out = t.render();
    if let Some(src) = &s.source {
        out.push_str(&format!("weight from {src}\n"));
    }
    out
}

fn pool_line(p: &Pool) -> String {
    let state = match (p.pressure, p.overcommitted) {
        (false, _) => "no pressure",
        (true, false) => "under pressure",
        (true, true) => "under pressure, floors overcommitted",
    };
    format!(
        "pool: capacity {}, TU {}, TW {}, {state}{}\nhost: MemAvailable {} of {}, SwapFree {}, \
         PSI some {} full {}\ntick {} took {} µs\n",
        human::bytes(p.capacity),
        human::bytes(p.total_usage),
        p.total_weight,
        if p.enforce { "" } else { " (dry run)" },
        human::bytes(p.mem_available),
        human::bytes(p.mem_total),
        human::bytes(p.swap_free),
        psi(p.host_psi_some_avg10),
        psi(p.host_psi_full_avg10),
        p.tick,
        p.duration_us
    )
}

fn status_table(s: &Status) -> String {
    let containers = s.cgroups.iter().any(|c| c.container.is_some());
    let mut header = vec!["CGROUP"];
    if containers {
        header.push("CONTAINER");
    }
    header.extend([
        "WEIGHT",
        "USAGE",
        "EA",
        "EX",
        "TARGET",
        "ENTITLEMENT",
        "HIGH",
        "LOW",
        "PSI-SOME",
        "PSI-FULL",
        "SWAP",
        "STATE",
    ]);
    let mut t = Table::new(&header);
    let mut any_override = false;
    let mut any_label = false;
    for c in &s.cgroups {
        any_override |= c.overridden;
        any_label |= matches!(c.source, Some(WeightSource::Label { .. }));
        let mut cells = row(c);
        if containers {
            cells.insert(1, c.container.clone().unwrap_or_else(|| "-".to_owned()));
        }
        t.row(cells);
    }
    let mut out = pool_line(&s.pool);
    out.push('\n');
    if s.cgroups.is_empty() {
        out.push_str("no cgroups are managed (no [[cgroup]] rule matches an existing cgroup)\n");
    } else {
        out.push_str(&t.render());
    }
    if any_override {
        out.push_str("* weight set at runtime (memweightctl set); `unset` returns to the config\n");
    }
    if any_label {
        out.push_str("+ weight from the container's memweight.weight label\n");
    }
    out
}

fn row(c: &CgroupStatus) -> Vec<String> {
    vec![
        c.cgroup.clone(),
        if c.overridden {
            format!("{}*", c.weight)
        } else if matches!(c.source, Some(WeightSource::Label { .. })) {
            format!("{}+", c.weight)
        } else {
            c.weight.to_string()
        },
        human::bytes(c.usage).to_string(),
        human::bytes(c.expected).to_string(),
        signed(c.exceed),
        human::bytes(c.target).to_string(),
        human::bytes(c.entitlement).to_string(),
        limit(c.high),
        limit(c.low),
        psi(c.psi_some_avg10),
        psi(c.psi_full_avg10),
        opt_bytes(c.swap),
        c.state.clone(),
    ]
}

fn explain_text(e: &Explanation) -> String {
    let c = &e.status;
    let mut t = Table::new(&["FIELD", "VALUE"]);
    let mut kv = |k: &str, v: String| t.row(vec![k.to_owned(), v]);
    kv("cgroup", c.cgroup.clone());
    if let Some(name) = &c.container {
        kv("container", name.clone());
    }
    let weight = match (&c.source, c.overridden) {
        (Some(src), _) => format!("{}, from {src}", c.weight),
        (None, true) => format!("{} (runtime override)", c.weight),
        (None, false) => format!("{} (config)", c.weight),
    };
    kv("weight", weight);
    kv("usage (U)", human::bytes(c.usage).to_string());
    kv("expected (EA)", human::bytes(c.expected).to_string());
    kv("exceed (EX)", signed(c.exceed));
    kv("floor", human::bytes(c.floor).to_string());
    kv("ceiling", opt_bytes(c.ceiling));
    kv("target", human::bytes(c.target).to_string());
    kv("entitlement", human::bytes(c.entitlement).to_string());
    kv("memory.high", limit(c.high));
    kv("memory.low", limit(c.low));
    if let Some(r) = c.refaulted {
        kv(
            "faulted back",
            format!("{} since its last full sample", human::bytes(r)),
        );
    }
    kv("reason", c.reason.clone());
    kv("state", c.state.clone());
    let mut out = t.render();
    out.push_str("\nwhy:\n");
    for line in e.narrative() {
        out.push_str("  ");
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn reloaded_text(r: &Reloaded) -> String {
    format!(
        "reloaded {}: {} rule(s), {} runtime override(s) kept\n",
        r.config, r.rules, r.overrides_kept
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_row(cgroup: &str, overridden: bool) -> CgroupStatus {
        CgroupStatus {
            cgroup: cgroup.into(),
            weight: 3,
            overridden,
            container: None,
            source: None,
            usage: 2000 << 20,
            expected: 1000 << 20,
            exceed: -(10 << 20),
            target: 1500 << 20,
            entitlement: 900 << 20,
            floor: 16 << 20,
            ceiling: None,
            high: None,
            low: Some(900 << 20),
            swap: None,
            psi_some_avg10: Some(1.25),
            psi_full_avg10: None,
            refaulted: Some(3 << 20),
            events_high: 0,
            events_max: 0,
            events_oom_kill: 0,
            wrote_high: None,
            wrote_low: None,
            reclaim: None,
            state: "ok".into(),
            reason: "no pressure".into(),
            original_high: None,
            original_low: None,
            operator: None,
        }
    }

    fn pool() -> Pool {
        Pool {
            tick: 3,
            enforce: true,
            capacity: 4 << 30,
            shortfall: 0,
            psi_cut: 0,
            reserve: 0,
            own_stall: 0.0,
            guards: 0,
            held: false,
            reclaiming: false,
            enforcing: false,
            total_usage: 4000 << 20,
            total_weight: 6,
            pressure: false,
            overcommitted: false,
            mem_total: 8 << 30,
            mem_available: 3 << 30,
            swap_free: 0,
            host_psi_some_avg10: Some(0.0),
            host_psi_full_avg10: Some(0.0),
            duration_us: 120,
        }
    }

    #[test]
    fn status_is_aligned_and_marks_overrides() {
        let text = table(&Reply::Status(Status {
            pool: pool(),
            cgroups: vec![
                status_row("lab/c1", true),
                status_row("lab/long-name", false),
            ],
        }));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("pool: capacity 4096 MiB, TU 4000 MiB, TW 6"),
            "{text}"
        );
        let header = lines[4];
        assert!(
            header.starts_with("CGROUP          WEIGHT   USAGE"),
            "{text}"
        );
        let col = header.find("USAGE").expect("USAGE column");
        assert_eq!(&lines[5][col..col + 8], "2000 MiB", "{text}");
        assert!(lines[5].contains(" 3* "), "{text}");
        assert!(lines[6].contains(" 3 "), "{text}");
        assert!(lines[5].contains("-10 MiB"), "{text}");
        assert!(lines[5].contains("max"), "{text}");
        assert!(text.contains("* weight set at runtime"), "{text}");
    }

    #[test]
    fn status_names_containers_and_marks_label_weights() {
        let mut web = status_row("machine.slice/libpod-0123.scope", false);
        web.container = Some("web".into());
        web.source = Some(WeightSource::Label {
            label: "memweight.weight".into(),
            container: "web".into(),
        });
        let text = table(&Reply::Status(Status {
            pool: pool(),
            cgroups: vec![web, status_row("lab/c1", false)],
        }));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[4].starts_with("CGROUP"), "{text}");
        assert!(lines[4].contains(" CONTAINER "), "{text}");
        assert!(
            lines[5].contains(" web ") && lines[5].contains(" 3+ "),
            "{text}"
        );
        assert!(
            lines[6].contains(" - ") && lines[6].contains(" 3 "),
            "{text}"
        );
        assert!(text.contains("+ weight from the container's"), "{text}");
    }

    #[test]
    fn setting_says_where_the_weight_comes_from() {
        let v = Values {
            weight: 2,
            min: None,
            max: None,
        };
        let text = table(&Reply::Setting(Box::new(Setting {
            cgroup: "machine.slice/libpod-0123.scope".into(),
            managed: true,
            configured: Values { weight: 100, ..v },
            runtime_override: None,
            effective: v,
            container: Some("web".into()),
            labels: None,
            source: Some(WeightSource::Label {
                label: "memweight.weight".into(),
                container: "web".into(),
            }),
        })));
        assert!(text.contains(" web ") && text.contains(" label "), "{text}");
        let mut row = status_row("machine.slice/libpod-0123.scope", false);
        row.container = Some("web".into());
        row.source = Some(WeightSource::Label {
            label: "memweight.weight".into(),
            container: "web".into(),
        });
        let setting = Setting {
            cgroup: row.cgroup.clone(),
            managed: true,
            configured: v,
            runtime_override: None,
            effective: v,
            container: Some("web".into()),
            labels: None,
            source: row.source.clone(),
        };
        let explained = table(&Reply::Explain(Box::new(Explanation {
            status: row,
            setting,
            pool: pool(),
        })));
        assert!(explained.contains("container       web\n"), "{explained}");
        assert!(
            explained.contains("weight          3, from label memweight.weight on container web\n"),
            "{explained}"
        );
        assert!(
            text.contains("weight from label memweight.weight on container web"),
            "{text}"
        );
    }

    #[test]
    fn setting_shows_source_and_config() {
        let v = Values {
            weight: 100,
            min: None,
            max: Some(1 << 30),
        };
        let text = table(&Reply::Setting(Box::new(Setting {
            cgroup: "lab/c1".into(),
            managed: true,
            configured: v,
            runtime_override: Some(Values { weight: 7, ..v }),
            effective: Values { weight: 7, ..v },
            container: None,
            labels: None,
            source: None,
        })));
        let row = text.lines().nth(1).expect("row");
        assert!(
            row.starts_with("lab/c1   yes       override   7 "),
            "{text}"
        );
        assert!(row.ends_with("weight 100, min -, max 1024 MiB"), "{text}");
    }

    #[test]
    fn explain_has_numbers_and_why() {
        let c = status_row("lab/c1", false);
        let v = Values {
            weight: 3,
            min: None,
            max: None,
        };
        let text = table(&Reply::Explain(Box::new(Explanation {
            status: c,
            setting: Setting {
                cgroup: "lab/c1".into(),
                managed: true,
                configured: v,
                runtime_override: None,
                effective: v,
                container: None,
                labels: None,
                source: None,
            },
            pool: pool(),
        })));
        assert!(text.contains("exceed (EX)     -10 MiB"), "{text}");
        assert!(
            text.contains("faulted back    3072 KiB since its last full sample"),
            "{text}"
        );
        assert!(text.contains("weight          3 (config)\n"), "{text}");
        assert!(
            text.contains("why:\n  weight 3 (from the configuration)"),
            "{text}"
        );
    }

    #[test]
    fn bad_weights_and_sizes_are_one_line() {
        for (w, want) in [
            ("0", "weight: must be a whole number 1..=10000, got 0"),
            ("10001", "1..=10000, got 10001"),
            ("abc", "1..=10000, got \"abc\""),
        ] {
            let f = parse_weight(w).expect_err(w);
            assert_eq!(f.code, exit::BAD_INPUT);
            assert!(f.message.contains(want), "{w}: {}", f.message);
        }
        assert_eq!(parse_weight(" 300 ").ok(), Some(300));
        let f = parse_size("--min", Some(&"-5M".to_owned())).expect_err("negative");
        assert!(
            f.message.starts_with("--min: negative size"),
            "{}",
            f.message
        );
        assert_eq!(
            parse_size("--max", Some(&"1G".to_owned())).ok(),
            Some(Some(1 << 30))
        );
    }
}
