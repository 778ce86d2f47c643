use super::*;
use memweight_proto::ctl::{LabelClamp, LabelField};

pub(crate) fn status_row(cgroup: &str, overridden: bool) -> CgroupStatus {
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
        trim: None,
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
        state: memweight_proto::ctl::CgroupState::Ok,
        reason: "no pressure".into(),
        original_high: None,
        original_low: None,
        operator: None,
        next_weight: None,
    }
}

pub(crate) fn pool() -> Pool {
    Pool {
        tick: 3,
        enforce: true,
        capacity: 4 << 30,
        total_usage: 4000 << 20,
        total_weight: 6,
        mem_total: 8 << 30,
        mem_available: 3 << 30,
        host_psi_some_avg10: Some(0.0),
        host_psi_full_avg10: Some(0.0),
        duration_us: 120,
        ..Pool::default()
    }
}

/// A managed cgroup's setting with `weight` configured and in force, no bounds, no override.
fn plain_setting(cgroup: &str, weight: u32) -> Setting {
    let v = Values {
        weight,
        min: None,
        max: None,
    };
    Setting {
        cgroup: cgroup.into(),
        managed: true,
        configured: v,
        runtime_override: None,
        effective: v,
        container: None,
        labels: None,
        source: None,
        label_clamps: Vec::new(),
    }
}

fn status_of(cgroups: Vec<CgroupStatus>) -> Status {
    Status {
        pool: pool(),
        cgroups,
    }
}

#[test]
fn status_is_aligned_and_marks_overrides() {
    let text = table(&Reply::Status(status_of(vec![
        status_row("lab/c1", true),
        status_row("lab/long-name", false),
    ])));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("pool: capacity 4096 MiB, TU 4000 MiB, TW 6"),
        "{text}"
    );
    let header = lines[4];
    assert!(
        header.starts_with("NAME        WEIGHT   USAGE   EA       EX      TARGET"),
        "{text}"
    );
    assert!(header.ends_with("STATE   CGROUP"), "{text}");
    let col = header.find("USAGE").expect("USAGE column");
    assert_eq!(&lines[5][col..col + 6], "2.0Gi ", "{text}");
    assert!(lines[5].starts_with("c1          3*  "), "{text}");
    assert!(lines[6].starts_with("long-name   3   "), "{text}");
    assert!(lines[5].contains("-10Mi"), "{text}");
    assert!(lines[5].contains(" max "), "{text}");
    assert!(lines[5].ends_with(" ok      lab/c1"), "{text}");
    assert!(text.contains("* weight set at runtime"), "{text}");
}

/// `status` right after `set` showed the old weight alone until the next tick: the row is the
/// last tick's, and the weight the next tick plans with now stands beside it.
#[test]
fn regression_status_right_after_set_showed_the_old_weight_alone() {
    let mut changed = status_row("lab/c1", true);
    changed.next_weight = Some(5);
    let text = table(&Reply::Status(status_of(vec![
        changed.clone(),
        status_row("lab/c2", false),
    ])));
    let lines: Vec<&str> = text.lines().collect();
    let weight = |line: &str| line.split_whitespace().nth(1).map(str::to_owned);
    assert_eq!(weight(lines[5]).as_deref(), Some("3*->5"), "{text}");
    assert_eq!(weight(lines[6]).as_deref(), Some("3"), "{text}");
    assert!(
        text.contains("-> weight changed since this tick (set/unset)"),
        "{text}"
    );
    let mut setting = plain_setting("lab/c1", 5);
    setting.runtime_override = Some(setting.effective);
    let explained = table(&Reply::Explain(Box::new(Explanation {
        status: changed,
        setting,
        pool: pool(),
    })));
    assert!(explained.contains("next weight"), "{explained}");
    let unchanged = table(&Reply::Status(status_of(vec![status_row("lab/c2", false)])));
    assert!(!unchanged.contains("->"), "{unchanged}");
}

/// A podman host: 64-digit ids in every path, long names, the widest numbers. Every line
/// of the default table fits 120 columns; `-o wide` keeps everything.
#[test]
fn status_fits_120_columns_and_wide_has_everything() {
    let id = "0123456789abcdef".repeat(4);
    let mut rows = Vec::new();
    for (i, name) in ["web", "a-container-name-much-longer-than-twenty", "db"]
        .iter()
        .enumerate()
    {
        let mut r = status_row(&format!("machine.slice/libpod-{id}{i}.scope"), i == 2);
        r.container = Some((*name).to_owned());
        r.source = Some(WeightSource::Label {
            label: "memweight.weight".into(),
            container: (*name).to_owned(),
        });
        r.weight = 10_000;
        r.usage = (1023 << 20) | 0xf_ffff;
        r.exceed = -((1023 << 20) | 0xf_ffff);
        r.psi_some_avg10 = Some(100.0);
        r.state = memweight_proto::ctl::CgroupState::Pending;
        rows.push(r);
    }
    let mut plain = status_row(
        "system.slice/a-service-with-a-very-long-unit-name-indeed.service",
        false,
    );
    plain.high = Some(9_999 << 30);
    rows.push(plain);
    let status = status_of(rows);
    let text = table(&Reply::Status(status.clone()));
    for line in text.lines() {
        let n = line.chars().count();
        assert!(n <= STATUS_WIDTH, "{n} > 120: {line}\n{text}");
    }
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[5].starts_with("web   ") && lines[5].contains(" 10000+ "),
        "{text}"
    );
    assert!(lines[6].starts_with("a-containe…an-twenty "), "{text}");
    assert!(lines[7].contains(" 10000* "), "{text}");
    assert!(lines[8].starts_with("a-service-…d.service "), "{text}");
    assert!(lines[8].ends_with(".service"), "{text}");
    assert!(text.contains("+ weight from the container's"), "{text}");

    let wide = status_wide(&status, NOTHING_MANAGED);
    let header = wide.lines().nth(4).expect("header");
    for col in WIDE_COLUMNS {
        assert!(header.contains(col), "{col}: {wide}");
    }
    assert!(
        wide.contains(&format!("machine.slice/libpod-{id}1.scope")),
        "{wide}"
    );
    assert!(
        wide.contains("a-container-name-much-longer-than-twenty"),
        "{wide}"
    );
    assert!(wide.contains("1024 MiB"), "{wide}");
}

/// With short numbers and a few containers, the path has room to be shown whole (ids
/// shortened).
#[test]
fn status_shows_a_short_path_whole() {
    let id = "ab".repeat(32);
    let mut web = status_row(&format!("machine.slice/libpod-{id}.scope"), false);
    web.container = Some("web".into());
    let unnamed = status_row(
        &format!("machine.slice/libpod-{}.scope", "cd".repeat(32)),
        false,
    );
    let text = table(&Reply::Status(status_of(vec![web.clone()])));
    assert!(
        text.lines()
            .nth(5)
            .is_some_and(|l| l.starts_with("web ")
                && l.ends_with(" machine.slice/libpod-abababababab.scope")),
        "{text}"
    );
    let text = table(&Reply::Status(status_of(vec![web, unnamed])));
    assert!(
        text.lines().nth(6).is_some_and(
            |l| l.starts_with("cdcdcdcdcdcd ") && l.ends_with("/libpod-cdcdcdcdcdcd.scope")
        ),
        "a container the engine has not named yet shows its id: {text}"
    );
}

#[test]
fn short_sizes_stay_within_six_characters() {
    for (n, want) in [
        (0, "0B"),
        (1023, "1023B"),
        (1024, "1.0Ki"),
        (512 << 10, "512Ki"),
        (833 << 20, "833Mi"),
        (1536 << 20, "1.5Gi"),
        (2000 << 20, "2.0Gi"),
        ((10 << 30) - 1, "10Gi"),
        ((1 << 30) - 1, "1024Mi"),
        (u64::MAX, "16Ei"),
    ] {
        assert_eq!(short_bytes(n), want, "{n}");
    }
    for shift in 0..64 {
        let p = 1_u64 << shift;
        for n in [p, p - 1, p | (p / 2)] {
            assert!(short_bytes(n).len() <= 6, "{n}: {}", short_bytes(n));
        }
    }
    assert_eq!(short_signed(-(10 << 20)), "-10Mi");
}

#[test]
fn ids_are_shortened_and_long_text_elided_in_the_middle() {
    let id = "f".repeat(64);
    assert_eq!(
        shorten_ids(&format!("machine.slice/libpod-{id}.scope")),
        "machine.slice/libpod-ffffffffffff.scope"
    );
    assert_eq!(
        shorten_ids("system.slice/db.service"),
        "system.slice/db.service"
    );
    assert_eq!(fit_path("lab/c1", 12), "lab/c1");
    assert_eq!(
        fit_path(&format!("machine.slice/libpod-{id}.scope"), 30),
        "…/libpod-ffffffffffff.scope"
    );
    assert_eq!(fit_path("a/b/c/d/eeeeee", 9), "…/eeeeee");
    assert_eq!(fit_path("a/b/c/d/eeeeeeeeee", 9), "a/b/…eeee");
    assert_eq!(elide("abcdefghij", 10), "abcdefghij");
    assert_eq!(elide("abcdefghij", 5), "ab…ij");
    assert_eq!(elide("abcdefghij", 1), "…");
    assert_eq!(elide("abcdefghij", 0), "");
    assert_eq!(elide("äöüäöüäöü", 4), "äö…ü");
}

fn named(path: &str, container: Option<&str>) -> CgroupStatus {
    let mut r = status_row(path, false);
    r.container = container.map(str::to_owned);
    r
}

#[test]
fn filters_by_name_glob_or_path() {
    let id = "ab".repeat(32);
    let web = named(&format!("machine.slice/libpod-{id}.scope"), Some("web"));
    let web2 = named("machine.slice/libpod-cd.scope", Some("web-2"));
    let db = named("system.slice/db.service", None);
    let rows = [&web, &web2, &db];
    let shown = |patterns: &[&str]| -> Vec<String> {
        let given: Vec<String> = patterns.iter().map(|p| (*p).to_owned()).collect();
        let f = Filter::new(&given).expect("valid filter");
        rows.iter()
            .filter(|c| f.matches(c))
            .map(|c| display_name(c))
            .collect()
    };
    assert_eq!(shown(&[]), ["web", "web-2", "db.service"]);
    assert_eq!(shown(&["web"]), ["web"]);
    assert_eq!(shown(&["web*"]), ["web", "web-2"]);
    assert_eq!(shown(&["db.service"]), ["db.service"]);
    assert_eq!(shown(&["*.service", "web-2"]), ["web-2", "db.service"]);
    assert_eq!(shown(&["machine.slice/*"]), ["web", "web-2"]);
    assert_eq!(
        shown(&["/sys/fs/cgroup/system.slice/db.service"]),
        ["db.service"]
    );
    assert_eq!(shown(&["system.slice/db.service/"]), ["db.service"]);
    assert_eq!(shown(&[&format!("libpod-{id}.scope")]), ["web"]);
    let unnamed = named(
        &format!("machine.slice/libpod-{}.scope", "ef".repeat(32)),
        None,
    );
    let f = Filter::new(&["efefefefefef".to_owned()]).expect("valid");
    assert!(
        f.matches(&unnamed),
        "the short id shown as its name matches"
    );
    assert_eq!(shown(&["*/db.service"]), ["db.service"]);
    assert!(shown(&["machine.slice"]).is_empty(), "a name is not a path");
    assert!(shown(&["*"]).len() == 3);
    assert!(shown(&["nothing"]).is_empty());
    assert!(shown(&["/sys/fs/cgroupX/system.slice/db.service"]).is_empty());
    for bad in ["[", "", "/", "/sys/fs/cgroup/"] {
        let f = Filter::new(&[bad.to_owned()]).expect_err(bad);
        assert_eq!(f.code, exit::BAD_INPUT, "{bad}");
        assert!(
            f.message.starts_with(&format!("filter {bad:?}")),
            "{}",
            f.message
        );
    }
}

#[test]
fn an_empty_filtered_status_says_so() {
    let s = status_of(Vec::new());
    let text = status_text(&s, OutputFormat::Table, &["web*".to_owned()]).expect("renders");
    assert!(text.contains("no managed cgroup matches web*"), "{text}");
    let text = status_text(&s, OutputFormat::Wide, &[]).expect("renders");
    assert!(text.contains("no cgroups are managed"), "{text}");
    let text = status_text(&s, OutputFormat::Json, &["web*".to_owned()]).expect("renders");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["cgroups"], serde_json::json!([]));
}

/// While the daemon waits for the container engine's first answer, `status` said
/// nothing of it: the pool line looked like a dry run's.
#[test]
fn regression_the_engine_wait_looked_like_a_dry_run() {
    let mut row = status_row("lab/c1", false);
    row.state = memweight_proto::ctl::CgroupState::EngineWait;
    let mut s = status_of(vec![row]);
    s.pool.enforce = false;
    s.pool.engine_wait = true;
    let text = status_text(&s, OutputFormat::Table, &[]).expect("renders");
    assert!(
        text.contains("(nothing held yet: waiting for the container engine's first answer)"),
        "{text}"
    );
    assert!(!text.contains("dry run"), "{text}");
    assert!(text.contains("engine-wait"), "{text}");
    s.pool.engine_wait = false;
    let text = status_text(&s, OutputFormat::Table, &[]).expect("renders");
    assert!(text.contains("(dry run)"), "{text}");
}

/// Why the work-conserving law protects nothing (it yields to a stalled service beside the
/// set) was only in the JSON's `yielding` and a bare percentage: the table names the cgroup.
#[test]
fn status_says_which_cgroup_beside_the_set_the_law_yields_to() {
    let mut s = status_of(vec![status_row("lab/c1", false)]);
    let text = status_text(&s, OutputFormat::Table, &[]).expect("renders");
    assert!(!text.contains("kernel reclaim"), "not reclaiming: {text}");
    s.pool.multi_gen_lru = Some(false);
    s.pool.reclaiming = true;
    s.pool.enforcing = true;
    s.pool.outside_stall = Some(1.25);
    s.pool.outside_stall_by = Some("system.slice/journald.service".into());
    let text = status_text(&s, OutputFormat::Table, &[]).expect("renders");
    assert!(
        text.contains("PSI some 0.00 full 0.00, classic LRU\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "kernel reclaim: the split is enforced with memory.high; \
             system.slice/journald.service beside the managed set stalled 1.2 % of the last tick\n"
        ),
        "{text}"
    );
    s.pool.yielding = true;
    s.pool.outside_stall = Some(12.5);
    let text = status_text(&s, OutputFormat::Table, &[]).expect("renders");
    assert!(
        text.contains(
            "kernel reclaim: yielding, system.slice/journald.service beside the managed set \
             stalled 12.5 % of the last tick: no managed cgroup is protected"
        ),
        "{text}"
    );
    s.pool.outside_stall_by = None;
    s.pool.outside_stall = Some(0.0);
    s.pool.yielding = false;
    let text = status_text(&s, OutputFormat::Table, &[]).expect("renders");
    assert!(
        text.contains("nothing beside the managed set stalled"),
        "{text}"
    );
}

#[test]
fn version_lines_name_both_sides() {
    let client = ctl::Version {
        program: "memweightctl".into(),
        version: "0.2.0".into(),
        protocol: 1,
    };
    let g = Global {
        output: OutputFormat::Table,
        socket: "/run/memweight/memweightd.sock".into(),
        wait: Duration::ZERO,
        timing: false,
    };
    let daemon = ctl::Version {
        program: "memweightd".into(),
        version: "0.1.0".into(),
        protocol: 1,
    };
    let text = version_text(&client, &Daemon::Known(daemon.clone()), &g);
    assert_eq!(
        text,
        "client: memweightctl 0.2.0 (control protocol 1)\n\
             daemon: memweightd 0.1.0 (control protocol 1) at /run/memweight/memweightd.sock\n\
             note: the versions differ; install memweightd and memweightctl from the same build\n"
    );
    let text = version_text(&client, &Daemon::Older, &g);
    assert!(
        text.contains("daemon: memweightd older than this memweightctl"),
        "{text}"
    );
    let v = version_json(&client, &Daemon::Known(daemon));
    assert_eq!(v["client"]["version"], "0.2.0");
    assert_eq!(v["daemon"]["version"], "0.1.0");
    let v = version_json(&client, &Daemon::Older);
    assert!(v["daemon"].is_null());
    assert!(
        v["daemon_note"]
            .as_str()
            .is_some_and(|n| n.contains("older")),
        "{v}"
    );
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
        label_clamps: vec![LabelClamp {
            label: "memweight.weight".into(),
            field: LabelField::Weight,
            asked: 10_000,
            applied: 100,
        }],
    })));
    assert!(text.contains(" web ") && text.contains(" label "), "{text}");
    assert!(
        text.contains(
            "label memweight.weight asks weight 10000, more than the rule's \
                 label_weight_max: clamped to 100\n"
        ),
        "{text}"
    );
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
        label_clamps: vec![LabelClamp {
            label: "memweight.min".into(),
            field: LabelField::Min,
            asked: 1 << 40,
            applied: 0,
        }],
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
        explained.contains(
            "  label memweight.min asks min 1024 GiB, more than the rule's label_min_max: \
                 clamped to 0 B\n"
        ),
        "explain says the label was clamped: {explained}"
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
        label_clamps: Vec::new(),
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
    let text = table(&Reply::Explain(Box::new(Explanation {
        status: c,
        setting: plain_setting("lab/c1", 3),
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

/// The lab's scripts take the number after "answered in".
#[test]
fn the_timing_line_starts_with_the_milliseconds() {
    let line = timing_line(Duration::from_micros(12_345_678));
    assert!(line.starts_with("answered in 12345 ms"), "{line}");
}
