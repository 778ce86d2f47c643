//! `memweightctl plan FILE|-`: the daemon's policy and control law, offline.
//!
//! Reads a plan file (see `memweight_proto::plan`), runs `memweight_policy::plan` on it for the
//! targets and one tick of the daemon's own law (`memweight_law::plan_file`) for the writes it
//! would make from the state the file gives, and prints a table or the `PlanOutput` JSON.
//! A table unless `--output json` (the global `-o`), whether stdout is a terminal or not.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use memweight_law::plan_file;
use memweight_policy::human;
use memweight_proto::plan::{PlanFile, PlanOutput};

use crate::table::Table;
use crate::{Failure, OutputFormat, print};

/// Arguments of `memweightctl plan`.
#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// Plan file (JSON), or `-` for stdin.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// Runs the subcommand.
pub(crate) fn run(args: &PlanArgs, format: OutputFormat) -> Result<(), Failure> {
    let (label, text) = read_input(&args.file)?;
    let file = PlanFile::from_json(&text).map_err(|e| Failure::bad_input(&label, e))?;
    let output = plan_file::plan(&file).map_err(|e| Failure::bad_input(&label, e))?;
    let text = match format {
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(&output)
                .map_err(|e| Failure::other(format_args!("encoding the plan as JSON: {e}")))?;
            s.push('\n');
            s
        }
        OutputFormat::Table | OutputFormat::Wide => render_table(&output),
    };
    print(&text)
}

fn read_input(path: &PathBuf) -> Result<(String, String), Failure> {
    if path.as_os_str() == "-" {
        let label = "<stdin>".to_owned();
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::bad_input(&label, format_args!("cannot read: {e}")))?;
        Ok((label, text))
    } else {
        let label = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::bad_input(&label, format_args!("cannot read: {e}")))?;
        Ok((label, text))
    }
}

fn signed(bytes: i64) -> String {
    let magnitude = human::bytes(bytes.unsigned_abs());
    if bytes < 0 {
        format!("-{magnitude}")
    } else {
        magnitude.to_string()
    }
}

/// A summary line, then one row per cgroup with human sizes.
fn render_table(out: &PlanOutput) -> String {
    let mut table = Table::new(&[
        "NAME",
        "WEIGHT",
        "USAGE",
        "EXPECTED",
        "EXCEED",
        "TARGET",
        "RECLAIM",
        "ENTITLEMENT",
        "WRITE HIGH",
        "WRITE LOW",
        "RECLAIM NOW",
        "REASON",
    ]);
    for c in &out.cgroups {
        table.row(vec![
            c.name.clone(),
            c.weight.to_string(),
            human::bytes(c.usage).to_string(),
            human::bytes(c.expected).to_string(),
            signed(c.exceed),
            human::bytes(c.target).to_string(),
            human::bytes(c.reclaim).to_string(),
            human::bytes(c.entitlement).to_string(),
            write(c.writes.as_ref().and_then(|w| w.memory_high.as_deref())),
            write(c.writes.as_ref().and_then(|w| w.memory_low.as_deref())),
            c.writes
                .as_ref()
                .and_then(|w| w.memory_reclaim)
                .map_or_else(|| "-".to_owned(), |b| human::bytes(b).to_string()),
            c.reason.clone(),
        ]);
    }
    let state = match (out.pressure, out.overcommitted) {
        (false, _) => "no pressure",
        (true, false) => "under pressure",
        (true, true) => "under pressure, floors overcommitted",
    };
    let guards = if out.guards > 0 {
        format!(
            "; the daemon keeps {} of it for memory.high guards",
            human::bytes(out.guards)
        )
    } else {
        String::new()
    };
    format!(
        "capacity {}, total usage {}, total weight {}: {state}{guards}\n\n{}",
        human::bytes(out.capacity),
        human::bytes(out.total_usage),
        out.total_weight,
        table.render()
    )
}

/// A control-file value from the writes (`"max"` or bytes) in human form; `-` when not written.
fn write(value: Option<&str>) -> String {
    match value {
        None => "-".to_owned(),
        Some(v) => v
            .parse::<u64>()
            .map_or_else(|_| v.to_owned(), |b| human::bytes(b).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_human_sizes_and_reasons() {
        let file = PlanFile::from_json(
            r#"{"capacity": "3000M", "cgroups": [
                {"name": "c1", "usage": "2000M", "weight": 1},
                {"name": "c3", "usage": "2000M", "weight": 3}]}"#,
        )
        .expect("valid");
        let text = render_table(&plan_file::plan(&file).expect("valid"));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("under pressure"), "{text}");
        assert!(lines[2].starts_with("NAME   WEIGHT   USAGE"), "{text}");
        assert!(
            lines[3].ends_with("above weighted share by 1000 MiB"),
            "{text}"
        );
        assert!(lines[4].ends_with("within weighted share"), "{text}");
        assert!(lines[4].contains("-1000 MiB"), "{text}");
    }
}
