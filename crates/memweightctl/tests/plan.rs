//! `memweightctl plan` end to end: the built binary on files and stdin.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const MIB: u64 = 1 << 20;

fn ctl(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memweightctl"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memweightctl starts");
    let written = child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes());
    // A usage error exits before reading stdin; the broken pipe that leaves is not a failure.
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    child.wait_with_output().expect("memweightctl finishes")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn seed_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/examples/seed002.json")
}

#[test]
fn seed_example_gives_the_seed_row() {
    let path = seed_file();
    let out = ctl(
        &[
            "plan",
            path.to_str().expect("utf-8 path"),
            "--output",
            "json",
        ],
        "",
    );
    let v = json_of(&out);
    assert_eq!(v["capacity"], 4500 * MIB);
    assert_eq!(v["total_usage"], 6000 * MIB);
    assert_eq!(v["total_weight"], 6);
    assert_eq!(v["pressure"], true);
    let targets: Vec<u64> = v["cgroups"]
        .as_array()
        .expect("cgroups array")
        .iter()
        .map(|c| c["target"].as_u64().expect("target is bytes"))
        .collect();
    // Seed t4: 833, 1667, 2000 (MB).
    assert_eq!(targets.iter().sum::<u64>(), 4500 * MIB);
    assert_eq!((targets[0] + MIB / 2) / MIB, 833);
    assert_eq!((targets[1] + MIB / 2) / MIB, 1667);
    assert_eq!(targets[2], 2000 * MIB);
    for key in [
        "name",
        "usage",
        "weight",
        "expected",
        "exceed",
        "target",
        "reclaim",
        "entitlement",
        "reason",
    ] {
        assert!(v["cgroups"][0].get(key).is_some(), "missing {key}");
    }
    assert_eq!(
        v["cgroups"][2]["exceed"],
        -1000 * i64::try_from(MIB).expect("small")
    );
    // The daemon's writes from that state (all at `max`, 2000 MiB each): container1 and 2 are
    // held back, so their guards come out of the pool and memory.high comes down one step.
    assert!(v["guards"].as_u64().expect("guards") > 0);
    for i in 0..2 {
        let high: u64 = v["cgroups"][i]["writes"]["memory_high"]
            .as_str()
            .expect("memory.high is written")
            .parse()
            .expect("bytes");
        assert!(high < 2000 * MIB && high > targets[i], "{i}: {high}");
    }
}

#[test]
fn stdin_and_table_output() {
    let input = r#"{"capacity": "3000M", "cgroups": [
        {"name": "small", "usage": "2000M", "weight": 1},
        {"name": "big", "usage": "2000M", "weight": 3, "min": "100M"}]}"#;
    let out = ctl(&["plan", "-", "--output", "table"], input);
    assert!(out.status.success(), "stderr: {}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let header = text
        .lines()
        .find(|l| l.starts_with("NAME"))
        .expect("header row");
    for col in [
        "NAME",
        "WEIGHT",
        "USAGE",
        "EXPECTED",
        "EXCEED",
        "TARGET",
        "RECLAIM",
        "ENTITLEMENT",
        "REASON",
    ] {
        assert!(header.contains(col), "{header}");
    }
    // Columns line up: every row has TARGET's cell starting where the header's does.
    let at = header.find("TARGET").expect("TARGET column");
    let small = text
        .lines()
        .find(|l| l.starts_with("small"))
        .expect("small row");
    assert!(small[at..].starts_with("1000 MiB"), "{text}");
    assert!(
        small.ends_with("above weighted share by 1000 MiB"),
        "{text}"
    );
}

/// A pipe keeps the table (no silent switch to JSON); `-o json` before the subcommand works.
#[test]
fn piped_output_stays_a_table_and_global_o_json_works() {
    let input = r#"{"capacity": 10, "cgroups": [{"name": "a", "usage": 4}]}"#;
    let out = ctl(&["plan", "-"], input);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        serde_json::from_str::<Value>(&text).is_err() && text.contains("NAME"),
        "{text}"
    );
    let v = json_of(&ctl(&["-o", "json", "plan", "-"], input));
    assert_eq!(v["pressure"], false);
    assert_eq!(v["cgroups"][0]["reason"], "no pressure");
    assert_eq!(v["cgroups"][0]["weight"], 100);
}

#[test]
fn bad_input_is_one_line_naming_the_field_with_exit_code_2() {
    let cases = [
        (
            r#"{"capacity": 10, "cgroups": [{"name": "a", "usage": 1, "weight": 0}]}"#,
            "cgroups[0].weight: must be a whole number 1..=10000, got 0",
        ),
        (
            r#"{"capacity": 10, "cgroups": [{"name": "a", "usage": 1}, {"name": "a", "usage": 2}]}"#,
            "cgroups[1].name: duplicate name",
        ),
        (
            r#"{"capacity": 10, "cgroups": [{"name": "a", "usage": -1}]}"#,
            "cgroups[0].usage: negative size",
        ),
        (
            r#"{"capacity": "ten", "cgroups": []}"#,
            "capacity: invalid size",
        ),
        (
            r#"{"capacity": 10, "cgroups": [{"name": "a", "usage": 1, "color": "red"}]}"#,
            "cgroups[0].color: unknown field `color`",
        ),
    ];
    for (input, expected) in cases {
        let out = ctl(&["plan", "-", "--output", "json"], input);
        assert_eq!(out.status.code(), Some(2), "{input}");
        assert!(out.stdout.is_empty(), "{input}");
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("memweightctl: <stdin>: {expected}")),
            "{err}"
        );
    }
}

#[test]
fn missing_file_is_bad_input() {
    let out = ctl(&["plan", "/nonexistent/plan.json"], "");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(
        err.starts_with("memweightctl: /nonexistent/plan.json: cannot read:"),
        "{err}"
    );
}

#[test]
fn unknown_output_format_is_a_usage_error() {
    let out = ctl(&["plan", "-", "--output", "yaml"], "{}");
    assert_eq!(out.status.code(), Some(2));
}
