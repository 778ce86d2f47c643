//! Runs the real binary briefly: output format, exit codes, signals.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn workload() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memweight-workload"))
}

fn run(args: &[&str]) -> Output {
    workload()
        .args(args)
        .output()
        .expect("the workload binary runs")
}

/// Parses stdout into JSON objects, asserting every line is one with the documented fields.
fn lines(output: &Output, unit: &str) -> Vec<Value> {
    let stdout = String::from_utf8(output.stdout.clone()).expect("utf-8 stdout");
    stdout
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).expect("each stdout line is JSON");
            let object = value.as_object().expect("a JSON object");
            assert_eq!(object.len(), 5, "exactly five fields: {line}");
            assert!(value["t"].is_f64() || value["t"].is_u64(), "{line}");
            assert!(value["ops"].is_u64(), "{line}");
            assert!(value["ops_per_s"].is_number(), "{line}");
            assert_eq!(value["unit"], unit, "{line}");
            assert!(value["rss"].is_u64(), "{line}");
            value
        })
        .collect()
}

fn ops(line: &Value) -> u64 {
    line["ops"].as_u64().expect("ops is u64")
}

#[test]
fn random_touch_for_two_seconds_prints_two_lines() {
    let output = run(&[
        "random-touch",
        "--size",
        "8M",
        "--duration",
        "2",
        "--seed",
        "1",
    ]);
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output, "pages");
    assert_eq!(lines.len(), 2, "{lines:?}");
    let t: Vec<f64> = lines.iter().map(|l| l["t"].as_f64().expect("t")).collect();
    assert!(
        (0.9..1.5).contains(&t[0]) && (1.9..2.5).contains(&t[1]),
        "{t:?}"
    );
    assert!(
        ops(&lines[0]) >= 2048,
        "at least the fault-in of 2048 pages: {lines:?}"
    );
    assert!(
        ops(&lines[1]) > 0,
        "still touching in the second second: {lines:?}"
    );
    let rss = lines[1]["rss"].as_u64().expect("rss");
    assert!(rss >= 8 << 20, "the working set is resident: {rss}");
}

#[test]
fn start_delay_reports_idle_seconds_first() {
    let output = run(&[
        "hog",
        "--size",
        "1M",
        "--start-delay",
        "2",
        "--duration",
        "1",
    ]);
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output, "pages");
    // A whole idle second before the delay ends (2 s, so a loaded machine cannot push the
    // first report past it: with a 1 s delay CI saw the first line race the allocation).
    assert!(lines.len() >= 2, "{lines:?}");
    assert_eq!(ops(&lines[0]), 0, "{lines:?}");
    assert_eq!(
        lines.iter().map(ops).sum::<u64>(),
        256,
        "1 MiB of 4 KiB pages faulted in after the delay: {lines:?}"
    );
}

#[test]
fn seq_write_ends_after_total_and_lines_add_up() {
    let output = run(&["seq-write", "--block", "1M", "--total", "16M"]);
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output, "bytes");
    assert!(!lines.is_empty());
    assert_eq!(lines.iter().map(ops).sum::<u64>(), 16 << 20);
}

#[test]
fn file_write_streams_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dd.out");
    let path_arg = path.to_str().expect("utf-8 path");
    let output = run(&[
        "file-write",
        "--path",
        path_arg,
        "--size",
        "3M",
        "--block",
        "64K",
    ]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), 3 << 20);
    assert_eq!(
        lines(&output, "bytes").iter().map(ops).sum::<u64>(),
        3 << 20
    );
}

#[test]
fn bad_arguments_give_one_line_and_exit_2() {
    for args in [
        &["random-touch", "--size", "lots"][..],
        &["random-touch"],
        &["hog", "--size", "1M", "--step", "1M", "--step-every", "0"],
        &["bogus-mode"],
        &[],
    ] {
        let output = run(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn sigterm_exits_cleanly() {
    let mut child = workload()
        .args(["mmap-rw", "--size", "4M"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    reader.read_line(&mut first).expect("first report line");
    let value: Value = serde_json::from_str(&first).expect("JSON");
    assert!(ops(&value) > 0, "{first}");
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(sent.elapsed() < Duration::from_secs(2), "stopped promptly");
}
