//! The subcommands that talk to a running memweightd: `set`, `unset`, `get`, `status`,
//! `explain`, `reload`, `version`.
//!
//! Each builds a [`Command`], sends it with [`client::request_waiting`] (which waits, bounded
//! by `--wait`, for a daemon that socket activation has just started) and prints the reply as
//! a kubectl-style table or as JSON (sizes in bytes), as the user chose with `-o`. `status`
//! keeps the cgroups its filters name ([`Filter`]) and fits its default table into
//! [`STATUS_WIDTH`] columns; `-o wide` has every column. Rendering is pure and tested here.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use clap::Args;
use globset::{GlobBuilder, GlobMatcher};
use memweight_policy::human;
use memweight_proto::Size;
use memweight_proto::ctl::{
    self, CgroupStatus, Command, Explanation, Pool, Reloaded, Reply, Setting, Status, Values,
    WeightSource,
};

use crate::client::{self, Pause, Pauser, Wait, exit};
use crate::narrative::narrative;
use crate::table::Table;
use crate::{Failure, Global, OutputFormat, print};

/// The default `status` table fits a terminal this wide.
pub(crate) const STATUS_WIDTH: usize = 120;
/// The NAME column of `status` is cut (in the middle) to this many characters.
const NAME_WIDTH: usize = 20;

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
}

/// Subcommands that name one cgroup.
#[derive(Debug, Args)]
pub(crate) struct CgroupArgs {
    /// Cgroup path relative to the cgroup root, or a running container's name or id.
    cgroup: String,
}

/// `status [NAME|GLOB|PATH]... [-w [-n SECONDS] [--count N]]`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Show only these cgroups: a container name or a cgroup's last path component (`web`,
    /// `db.service`), a glob of those (`web-*`), or, with a `/`, a cgroup path or path glob
    /// (`machine.slice/*`, `/sys/fs/cgroup/system.slice/db.service`).
    #[arg(value_name = "NAME|GLOB|PATH")]
    pub filters: Vec<String>,
    /// Redraw every --interval until Ctrl-C (or --count, or the reader of a pipe leaves).
    #[arg(short, long)]
    pub watch: bool,
    /// Time between redraws with --watch: seconds (`2`, `0.5`) or `500ms`; 0.2 to 3600.
    #[arg(short = 'n', long, value_name = "SECONDS", default_value = "2",
        value_parser = crate::watch::parse_interval, requires = "watch")]
    pub interval: Duration,
    /// Stop after N redraws with --watch.
    #[arg(long, value_name = "N", requires = "watch",
        value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
}

/// Which daemon subcommand to run (`status` and `version` have their own functions).
#[derive(Debug)]
pub(crate) enum Remote {
    /// `set`.
    Set(SetArgs),
    /// `unset`.
    Unset(CgroupArgs),
    /// `get`.
    Get(CgroupArgs),
    /// `explain`.
    Explain(CgroupArgs),
    /// `reload`.
    Reload,
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

/// Sends `command`, waiting up to `--wait` for a daemon that is not ready yet (saying so on
/// stderr), with `pause` between the tries; with `--timing`, says on stderr how long that took.
fn ask(g: &Global, command: &Command, pause: &mut Pauser<'_>) -> Result<Reply, Failure> {
    let started = Instant::now();
    let answer = client::request_waiting(
        &g.socket,
        command,
        Wait::up_to(g.wait),
        &mut |line| eprintln!("memweightctl: {line}"),
        pause,
    );
    if g.timing {
        eprintln!("memweightctl: {}", timing_line(started.elapsed()));
    }
    answer
}

/// `--timing`'s line: milliseconds first, so that a script can take the number.
fn timing_line(took: Duration) -> String {
    format!(
        "answered in {} ms (from connecting to the reply)",
        took.as_millis()
    )
}

fn sleep(d: Duration) -> Pause {
    std::thread::sleep(d);
    Pause::Slept
}

/// Runs a daemon subcommand.
pub(crate) fn run(remote: Remote, g: &Global) -> Result<(), Failure> {
    let command = match remote {
        Remote::Set(a) => Command::Set {
            weight: parse_weight(&a.weight)?,
            min: parse_size("--min", a.min.as_ref())?,
            max: parse_size("--max", a.max.as_ref())?,
            cgroup: a.cgroup,
        },
        Remote::Unset(a) => Command::Unset { cgroup: a.cgroup },
        Remote::Get(a) => Command::Get { cgroup: a.cgroup },
        Remote::Explain(a) => Command::Explain { cgroup: a.cgroup },
        Remote::Reload => Command::Reload,
    };
    let reply = ask(g, &command, &mut sleep)?;
    print(&render(&reply, g.output)?)
}

/// `status`: once, or again and again with `--watch`.
pub(crate) fn status(args: &StatusArgs, g: &Global) -> Result<(), Failure> {
    let filter = Filter::new(&args.filters)?;
    let mut draw = |pause: &mut Pauser<'_>| match ask(g, &Command::Status, pause)? {
        Reply::Status(mut s) => {
            s.cgroups.retain(|c| filter.matches(c));
            status_text(&s, g.output, &args.filters)
        }
        other => render(&other, g.output),
    };
    if !args.watch {
        return print(&draw(&mut sleep)?);
    }
    crate::watch::run(
        args.interval,
        args.count,
        std::io::stdout().is_terminal(),
        g.output == OutputFormat::Json,
        &mut draw,
    )
}

/// `version`: this client's, then the daemon's (asked over the socket). A daemon that
/// predates the request is named as older, not as an error; an unreachable one is an error
/// after the client's line.
pub(crate) fn version(g: &Global) -> Result<(), Failure> {
    let client = ctl::Version {
        program: "memweightctl".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        protocol: ctl::PROTOCOL_VERSION,
    };
    let (daemon, failure) = match client::exchange(&g.socket, Command::Version) {
        Ok(Ok(Reply::Version(v))) => (Daemon::Known(v), None),
        Ok(Ok(_)) => (
            Daemon::Unknown,
            Some(Failure {
                code: exit::PROTOCOL,
                message: "the daemon answered `version` with another kind of reply; is this a \
                          memweightd socket?"
                    .into(),
            }),
        ),
        Ok(Err(e)) if e.is_unknown_command() => (Daemon::Older, None),
        Ok(Err(e)) => (Daemon::Unknown, Some(client::failure(&e))),
        Err(f) => (Daemon::Unknown, Some(f)),
    };
    let text = match g.output {
        OutputFormat::Json => to_json(&version_json(&client, &daemon))?,
        OutputFormat::Table | OutputFormat::Wide => version_text(&client, &daemon, g),
    };
    print(&text)?;
    failure.map_or(Ok(()), Err)
}

/// What `version` learnt of the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Daemon {
    /// It answered.
    Known(ctl::Version),
    /// It refused the request as unknown: a memweightd from before `version`.
    Older,
    /// Not reachable, or it failed (the error follows on stderr).
    Unknown,
}

const OLDER: &str = "older than this memweightctl: it does not answer `version`; install \
                     memweightd and memweightctl from the same build";

fn version_text(client: &ctl::Version, daemon: &Daemon, g: &Global) -> String {
    let line = |v: &ctl::Version| {
        format!(
            "{} {} (control protocol {})",
            v.program, v.version, v.protocol
        )
    };
    let mut out = format!(
        "client: {}
",
        line(client)
    );
    match daemon {
        Daemon::Known(v) => {
            out.push_str(&format!(
                "daemon: {} at {}
",
                line(v),
                g.socket.display()
            ));
            if v.version != client.version {
                out.push_str(
                    "note: the versions differ; install memweightd and memweightctl from the \
                     same build\n",
                );
            }
        }
        Daemon::Older => out.push_str(&format!("daemon: memweightd {OLDER}\n")),
        Daemon::Unknown => out.push_str("daemon: unknown (see the error below)\n"),
    }
    out
}

fn version_json(client: &ctl::Version, daemon: &Daemon) -> serde_json::Value {
    let (daemon, note) = match daemon {
        Daemon::Known(v) => (serde_json::to_value(v).ok(), None),
        Daemon::Older => (None, Some(format!("memweightd {OLDER}"))),
        Daemon::Unknown => (None, None),
    };
    let mut v = serde_json::json!({ "client": client, "daemon": daemon });
    if let (Some(note), Some(obj)) = (note, v.as_object_mut()) {
        obj.insert("daemon_note".into(), note.into());
    }
    v
}

/// The reply in the chosen format.
fn render(reply: &Reply, format: OutputFormat) -> Result<String, Failure> {
    Ok(match format {
        OutputFormat::Json => json(reply)?,
        OutputFormat::Table => table(reply),
        OutputFormat::Wide => match reply {
            Reply::Status(s) => status_wide(s, NOTHING_MANAGED),
            other => table(other),
        },
    })
}

/// `status`'s filters: which cgroups to show. Empty: all.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    /// Globs over the shown name or the last path component.
    names: Vec<GlobMatcher>,
    /// Globs over the cgroup path (relative to the root).
    paths: Vec<GlobMatcher>,
}

impl Filter {
    /// Compiles the filters; a pattern with a `/` is a path (an absolute one under
    /// `/sys/fs/cgroup` is taken relative to it), any other a name. `*` never crosses `/`.
    pub fn new(patterns: &[String]) -> Result<Self, Failure> {
        let mut f = Filter::default();
        for p in patterns {
            let trimmed = p.trim();
            let is_path = trimmed.contains('/');
            let text = if is_path {
                let rel = trimmed.strip_prefix("/sys/fs/cgroup/").unwrap_or(trimmed);
                rel.trim_matches('/')
            } else {
                trimmed
            };
            if text.is_empty() {
                return Err(Failure::bad_input(
                    &format!("filter {p:?}"),
                    "empty: give a name, a glob or a cgroup path",
                ));
            }
            let glob = GlobBuilder::new(text)
                .literal_separator(true)
                .build()
                .map_err(|e| Failure::bad_input(&format!("filter {p:?}"), e.kind()))?
                .compile_matcher();
            if is_path {
                f.paths.push(glob);
            } else {
                f.names.push(glob);
            }
        }
        Ok(f)
    }

    /// Whether `c` is shown.
    pub fn matches(&self, c: &CgroupStatus) -> bool {
        if self.names.is_empty() && self.paths.is_empty() {
            return true;
        }
        let last = c.cgroup.rsplit('/').next().unwrap_or(&c.cgroup);
        let shown = display_name(c);
        self.paths.iter().any(|g| g.is_match(&c.cgroup))
            || self.names.iter().any(|g| {
                g.is_match(last)
                    || g.is_match(&shown)
                    || c.container.as_deref().is_some_and(|n| g.is_match(n))
            })
    }
}

fn json(reply: &Reply) -> Result<String, Failure> {
    let value = match reply {
        Reply::Setting(s) => serde_json::to_value(s),
        Reply::Status(s) => serde_json::to_value(s),
        Reply::Explain(e) => serde_json::to_value(e).map(|mut v| {
            if let Some(obj) = v.as_object_mut() {
                obj.insert("narrative".into(), narrative(e).into());
            }
            v
        }),
        Reply::Reloaded(r) => serde_json::to_value(r),
        Reply::Version(v) => serde_json::to_value(v),
    };
    to_json(&value.map_err(|e| Failure {
        code: exit::DAEMON,
        message: format!("encoding the reply as JSON: {e}"),
    })?)
}

fn to_json(value: &serde_json::Value) -> Result<String, Failure> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| Failure {
        code: exit::DAEMON,
        message: format!("encoding the reply as JSON: {e}"),
    })?;
    text.push('\n');
    Ok(text)
}

/// The reply as a table (or a short text for `explain`, `reload` and `version`).
pub(crate) fn table(reply: &Reply) -> String {
    match reply {
        Reply::Setting(s) => setting_table(s),
        Reply::Status(s) => status_table(s, STATUS_WIDTH, NOTHING_MANAGED),
        Reply::Explain(e) => explain_text(e),
        Reply::Reloaded(r) => reloaded_text(r),
        Reply::Version(v) => format!(
            "daemon: {} {} (control protocol {})\n",
            v.program, v.version, v.protocol
        ),
    }
}

/// What the table says when there is no row to show.
const NOTHING_MANAGED: &str =
    "no cgroups are managed (no [[cgroup]] rule matches an existing cgroup)";

/// `status` in the chosen format; `filters` as given, for the line shown when none matches.
fn status_text(s: &Status, format: OutputFormat, filters: &[String]) -> Result<String, Failure> {
    let no_match;
    let empty = if filters.is_empty() {
        NOTHING_MANAGED
    } else {
        no_match = format!(
            "no managed cgroup matches {} (see memweightctl status)",
            filters.join(" ")
        );
        &no_match
    };
    Ok(match format {
        OutputFormat::Json => json(&Reply::Status(s.clone()))?,
        OutputFormat::Table => status_table(s, STATUS_WIDTH, empty),
        OutputFormat::Wide => status_wide(s, empty),
    })
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

/// A byte count in at most six characters for the narrow table: binary units with a short
/// suffix, one decimal below 10 (`512Ki`, `833Mi`, `1.5Gi`; 2000 MiB is `2.0Gi`).
fn short_bytes(n: u64) -> String {
    const UNITS: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    let Some(&(unit, shift)) = UNITS.iter().find(|&&(_, shift)| n >> shift > 0) else {
        return format!("{n}B");
    };
    let size = 1_u128 << shift;
    // Tenths, rounded to nearest, in u128 so that no value can overflow.
    let tenths = (u128::from(n) * 10 + size / 2) / size;
    if tenths < 100 {
        format!("{}.{}{unit}", tenths / 10, tenths % 10)
    } else {
        format!("{}{unit}", (tenths + 5) / 10)
    }
}

fn short_signed(v: i64) -> String {
    let m = short_bytes(v.unsigned_abs());
    if v < 0 { format!("-{m}") } else { m }
}

fn short_limit(v: Option<u64>) -> String {
    v.map_or_else(|| "max".to_owned(), short_bytes)
}

/// Container ids (32 or more hex digits in a row) cut to their first 12, as `podman ps`
/// shows them.
fn shorten_ids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() >= 32 {
            out.push_str(&run[..12]);
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for ch in text.chars() {
        if ch.is_ascii_hexdigit() {
            run.push(ch);
        } else {
            flush(&mut run, &mut out);
            out.push(ch);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// `text` cut to `max` characters by an ellipsis in the middle (both ends say the most).
fn elide(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let tail = (max - 1) / 2;
    let head = max - 1 - tail;
    let mut out: String = text.chars().take(head).collect();
    out.push('…');
    out.extend(text.chars().skip(n - tail));
    out
}

/// A cgroup path cut to `max` characters: container ids shortened, then leading components
/// dropped (`…/libpod-0123456789ab.scope`: the end names the cgroup), then the middle elided.
fn fit_path(path: &str, max: usize) -> String {
    let short = shorten_ids(path);
    if short.chars().count() <= max {
        return short;
    }
    let mut rest = short.as_str();
    while let Some((_, tail)) = rest.split_once('/') {
        rest = tail;
        if rest.chars().count() + 2 <= max {
            return format!("…/{rest}");
        }
    }
    elide(&short, max)
}

/// What the NAME column shows: the container's name; else, for a container's scope
/// (`libpod-<64 hex digits>.scope`) whose name the engine has not told (yet), the id's first
/// 12 digits as `podman ps` shows them; else the last path component.
fn display_name(c: &CgroupStatus) -> String {
    if let Some(name) = &c.container {
        return name.clone();
    }
    let last = c.cgroup.rsplit('/').next().unwrap_or(&c.cgroup);
    last.split(|ch: char| !ch.is_ascii_hexdigit())
        .find(|run| run.len() >= 32)
        .and_then(|id| id.get(..12))
        .map_or_else(|| last.to_owned(), str::to_owned)
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
    for c in &s.label_clamps {
        out.push_str(&format!("{c}\n"));
    }
    out
}

/// Why the daemon writes nothing this tick, for the pool line ("" while it writes).
fn idle_note(p: &Pool) -> &'static str {
    if p.enforce {
        ""
    } else if p.engine_wait {
        " (nothing held yet: waiting for the container engine's first answer)"
    } else {
        " (dry run)"
    }
}

fn pool_line(p: &Pool) -> String {
    let state = match (p.pressure, p.overcommitted) {
        (false, _) => "no pressure",
        (true, false) => "under pressure",
        (true, true) => "under pressure, floors overcommitted",
    };
    let lru = match p.multi_gen_lru {
        Some(true) => ", multi-gen LRU",
        Some(false) => ", classic LRU",
        None => "",
    };
    format!(
        "pool: capacity {}, TU {}, TW {}, {state}{}\nhost: MemAvailable {} of {}, SwapFree {}, \
         PSI some {} full {}{lru}\n{}tick {} took {} µs\n",
        human::bytes(p.capacity),
        human::bytes(p.total_usage),
        p.total_weight,
        idle_note(p),
        human::bytes(p.mem_available),
        human::bytes(p.mem_total),
        human::bytes(p.swap_free),
        psi(p.host_psi_some_avg10),
        psi(p.host_psi_full_avg10),
        reclaim_line(p),
        p.tick,
        p.duration_us
    )
}

/// `kernel` capacity while the kernel's global reclaim runs: whether the split is enforced,
/// and whether the law yields, for which cgroup beside the managed set ("" otherwise).
fn reclaim_line(p: &Pool) -> String {
    if !p.reclaiming && !p.yielding {
        return String::new();
    }
    let beside = match (p.outside_stall, &p.outside_stall_by) {
        (Some(pct), Some(by)) => format!("{by} beside the managed set stalled {pct:.1} %"),
        (Some(_), None) => "nothing beside the managed set stalled".to_owned(),
        (None, _) => "the cgroups beside the managed set are not read yet".to_owned(),
    };
    if p.yielding {
        format!(
            "kernel reclaim: yielding, {beside} of the last tick: no managed cgroup is \
             protected, the split is still enforced\n"
        )
    } else {
        format!(
            "kernel reclaim: {}; {beside} of the last tick\n",
            if p.enforcing {
                "the split is enforced with memory.high"
            } else {
                "memory.low protects the managed cgroups' shares"
            }
        )
    }
}

/// The weight with its mark: `*` runtime override, `+` a container label.
fn weight_cell(c: &CgroupStatus) -> String {
    let cell = if c.overridden {
        format!("{}*", c.weight)
    } else if matches!(c.source, Some(WeightSource::Label { .. })) {
        format!("{}+", c.weight)
    } else {
        c.weight.to_string()
    };
    match c.next_weight {
        Some(next) => format!("{cell}->{next}"),
        None => cell,
    }
}

/// The pool, the rows (or `empty` when there are none) and the footnotes for the marks.
fn status_page(s: &Status, rows: &str, empty: &str) -> String {
    let mut out = pool_line(&s.pool);
    out.push('\n');
    if s.cgroups.is_empty() {
        out.push_str(empty);
        out.push('\n');
    } else {
        out.push_str(rows);
    }
    if s.cgroups.iter().any(|c| c.overridden) {
        out.push_str("* weight set at runtime (memweightctl set); `unset` returns to the config\n");
    }
    if s.cgroups
        .iter()
        .any(|c| !c.overridden && matches!(c.source, Some(WeightSource::Label { .. })))
    {
        out.push_str("+ weight from the container's memweight.weight label\n");
    }
    if s.cgroups.iter().any(|c| c.next_weight.is_some()) {
        out.push_str(
            "-> weight changed since this tick (set/unset); the next tick plans with it\n",
        );
    }
    out
}

/// The default `status` table: the name first, short sizes, and the cgroup path last, cut to
/// what is left of `width` columns (container ids shortened first, then the middle elided).
fn status_table(s: &Status, width: usize, empty: &str) -> String {
    const HEADER: [&str; 10] = [
        "NAME", "WEIGHT", "USAGE", "EA", "EX", "TARGET", "HIGH", "LOW", "PSI", "STATE",
    ];
    let rows: Vec<Vec<String>> = s
        .cgroups
        .iter()
        .map(|c| {
            vec![
                elide(&display_name(c), NAME_WIDTH),
                weight_cell(c),
                short_bytes(c.usage),
                short_bytes(c.expected),
                short_signed(c.exceed),
                short_bytes(c.target),
                short_limit(c.high),
                short_limit(c.low),
                c.psi_some_avg10
                    .map_or_else(|| "-".to_owned(), |p| format!("{p:.1}")),
                c.state.to_string(),
            ]
        })
        .collect();
    let mut t = Table::new(&HEADER);
    for r in &rows {
        t.row(r.clone());
    }
    // What is left for the path after the other columns and the gap before it; never less
    // than a recognisable stub.
    let room = width.saturating_sub(t.width() + Table::GAP).max(12);
    let mut t = Table::new(&[&HEADER[..], &["CGROUP"]].concat());
    for (mut r, c) in rows.into_iter().zip(&s.cgroups) {
        r.push(fit_path(&c.cgroup, room));
        t.row(r);
    }
    status_page(s, &t.render(), empty)
}

/// The columns of `status -o wide`.
const WIDE_COLUMNS: [&str; 18] = [
    "NAME",
    "CGROUP",
    "CONTAINER",
    "WEIGHT",
    "USAGE",
    "EA",
    "EX",
    "TARGET",
    "ENTITLEMENT",
    "FLOOR",
    "CEILING",
    "HIGH",
    "LOW",
    "PSI-SOME",
    "PSI-FULL",
    "SWAP",
    "STATE",
    "REASON",
];

/// `status -o wide`: every column, full paths and human sizes.
fn status_wide(s: &Status, empty: &str) -> String {
    let mut t = Table::new(&WIDE_COLUMNS);
    for c in &s.cgroups {
        t.row(vec![
            display_name(c),
            c.cgroup.clone(),
            c.container.clone().unwrap_or_else(|| "-".to_owned()),
            weight_cell(c),
            human::bytes(c.usage).to_string(),
            human::bytes(c.expected).to_string(),
            signed(c.exceed),
            human::bytes(c.target).to_string(),
            human::bytes(c.entitlement).to_string(),
            human::bytes(c.floor).to_string(),
            opt_bytes(c.ceiling),
            limit(c.high),
            limit(c.low),
            psi(c.psi_some_avg10),
            psi(c.psi_full_avg10),
            opt_bytes(c.swap),
            c.state.to_string(),
            c.reason.clone(),
        ]);
    }
    status_page(s, &t.render(), empty)
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
    if let Some(next) = c.next_weight {
        kv(
            "next weight",
            format!("{next}, set since this tick; the next tick plans with it"),
        );
    }
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
    kv("state", c.state.to_string());
    let mut out = t.render();
    out.push_str("\nwhy:\n");
    for line in narrative(e) {
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
pub(crate) mod tests;
