use super::*;

/// `CgroupStatus.state` was a string; as an enum its wire form is the same words.
#[test]
fn cgroup_state_keeps_its_wire_words() {
    for (state, word) in [
        (CgroupState::Ok, "ok"),
        (CgroupState::Busy, "busy"),
        (CgroupState::Pending, "pending"),
        (CgroupState::New, "new"),
        (CgroupState::DryRun, "dry-run"),
        (CgroupState::EngineWait, "engine-wait"),
    ] {
        let json = serde_json::to_string(&state).expect("serializes");
        assert_eq!(json, format!("\"{word}\""));
        assert_eq!(state.to_string(), word);
        let back: CgroupState = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, state);
    }
}

/// A newer daemon's state word must not make `status` fail to parse the whole reply.
#[test]
fn an_unknown_cgroup_state_parses_as_unknown() {
    let back: CgroupState = serde_json::from_str("\"thawing\"").expect("parses");
    assert_eq!(back, CgroupState::Unknown);
    assert_eq!(back.to_string(), "unknown");
}

fn set(weight: u32) -> Command {
    Command::Set {
        cgroup: "lab/c1".into(),
        weight,
        min: None,
        max: None,
    }
}

#[test]
fn requests_round_trip() {
    for cmd in [
        set(300),
        Command::Set {
            cgroup: "a/b".into(),
            weight: 1,
            min: Some(1 << 20),
            max: Some(1 << 30),
        },
        Command::Unset {
            cgroup: "lab/c1".into(),
        },
        Command::Get { cgroup: "x".into() },
        Command::Status,
        Command::Explain { cgroup: "x".into() },
        Command::Reload,
        Command::Version,
    ] {
        let line = Request::new(cmd.clone()).to_line();
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
        assert_eq!(parse_request(&line), Ok(cmd));
    }
}

#[test]
fn wire_form_is_stable() {
    let line = Request::new(set(300)).to_line();
    assert_eq!(
        line,
        "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"lab/c1\",\"weight\":300}}\n"
    );
    let line = Request::new(Command::Status).to_line();
    assert_eq!(line, "{\"version\":1,\"command\":{\"op\":\"status\"}}\n");
}

#[test]
fn version_mismatch_is_named() {
    let e = parse_request("{\"version\":2,\"command\":{\"op\":\"frobnicate\"}}")
        .expect_err("other version");
    assert_eq!(e.kind, ErrorKind::VersionMismatch);
    assert!(e.message.contains("version 2"), "{}", e.message);
    let e = parse_request("{\"command\":{\"op\":\"status\"}}").expect_err("no version");
    assert_eq!(e.kind, ErrorKind::VersionMismatch);
    let e = parse_response("{\"version\":7,\"result\":{}}").expect_err("other version");
    assert_eq!(e.kind, ErrorKind::VersionMismatch);
    assert!(
        e.message.contains("daemon speaks version 7"),
        "{}",
        e.message
    );
}

#[test]
fn bad_requests_get_one_line() {
    let cases = [
        ("not json", "not JSON"),
        ("{\"version\":1,\"command\":{\"op\":\"nope\"}}", "malformed"),
        (
            "{\"version\":1,\"command\":{\"op\":\"get\",\"cgroup\":\"a\",\"x\":1}}",
            "malformed",
        ),
        (
            "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"a\",\"weight\":0}}",
            "weight must be a whole number 1..=10000, got 0",
        ),
        (
            "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"a\",\"weight\":10001}}",
            "1..=10000",
        ),
        (
            "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"a\",\"weight\":-1}}",
            "malformed",
        ),
        (
            "{\"version\":1,\"command\":{\"op\":\"get\",\"cgroup\":\"../etc\"}}",
            "`..`",
        ),
        (
            "{\"version\":1,\"command\":{\"op\":\"get\",\"cgroup\":\"/\"}}",
            "root itself",
        ),
        (
            "{\"version\":1,\"command\":{\"op\":\"set\",\"cgroup\":\"a\",\"weight\":5,\"min\":10,\"max\":5}}",
            "below --min",
        ),
    ];
    for (line, want) in cases {
        let e = parse_request(line).expect_err(line);
        assert_eq!(e.kind, ErrorKind::BadRequest, "{line}");
        assert!(e.message.contains(want), "{line}: {:?}", e.message);
        assert!(!e.message.contains('\n'), "{line}: {:?}", e.message);
    }
    let huge = "x".repeat(MAX_LINE + 1);
    assert_eq!(
        parse_request(&huge).expect_err("huge").kind,
        ErrorKind::BadRequest
    );
}

#[test]
fn weights_at_the_edges() {
    assert!(set(1).validate().is_ok());
    assert!(set(10_000).validate().is_ok());
    assert!(set(0).validate().is_err());
    assert!(set(10_001).validate().is_err());
}

#[test]
fn cgroup_paths_are_normalized_or_refused() {
    let root = "/sys/fs/cgroup";
    assert_eq!(normalize_cgroup("lab/c1", root), Ok("lab/c1".into()));
    assert_eq!(normalize_cgroup("lab/c1/", root), Ok("lab/c1".into()));
    assert_eq!(
        normalize_cgroup("/sys/fs/cgroup/lab/c1", root),
        Ok("lab/c1".into())
    );
    assert_eq!(
        normalize_cgroup("/sys/fs/cgroup/lab/c1", "/sys/fs/cgroup/"),
        Ok("lab/c1".into())
    );
    for (bad, want) in [
        ("/etc/passwd", "outside the cgroup root"),
        ("/sys/fs/cgroupX/a", "outside the cgroup root"),
        ("/sys/fs/cgroup", "outside the cgroup root"),
        ("/sys/fs/cgroup/", "root itself"),
        ("lab/../../etc", "`..`"),
        ("/sys/fs/cgroup/../x", "`..`"),
        ("lab//c1", "empty"),
        ("lab/./c1", "empty"),
        ("", "root itself"),
    ] {
        let e = normalize_cgroup(bad, root).expect_err(bad);
        assert_eq!(e.kind, ErrorKind::BadRequest);
        assert!(e.message.contains(want), "{bad}: {}", e.message);
    }
}

fn sample_status() -> CgroupStatus {
    CgroupStatus {
        cgroup: "lab/c1".into(),
        weight: 1,
        overridden: true,
        container: None,
        source: None,
        usage: 2000 << 20,
        expected: 1000 << 20,
        exceed: 1000 << 20,
        target: 833 << 20,
        entitlement: 700 << 20,
        floor: 16 << 20,
        ceiling: Some(834 << 20),
        trim: Some(-(3 << 20)),
        high: Some(834 << 20),
        low: Some(700 << 20),
        swap: Some(0),
        psi_some_avg10: Some(1.5),
        psi_full_avg10: None,
        refaulted: Some(0),
        events_high: 3,
        events_max: 0,
        events_oom_kill: 0,
        wrote_high: Some((834_u64 << 20).to_string()),
        wrote_low: None,
        reclaim: None,
        state: CgroupState::Ok,
        reason: "above weighted share by 1167 MiB".into(),
        original_high: None,
        original_low: None,
        operator: None,
        next_weight: None,
    }
}

fn sample_pool() -> Pool {
    Pool {
        tick: 4,
        enforce: true,
        capacity: 4500 << 20,
        total_usage: 6000 << 20,
        total_weight: 6,
        pressure: true,
        mem_total: 8 << 30,
        mem_available: 1 << 30,
        host_psi_some_avg10: Some(12.0),
        host_psi_full_avg10: Some(3.0),
        duration_us: 150,
        ..Pool::default()
    }
}

#[test]
fn responses_round_trip() {
    let v = Values {
        weight: 5,
        min: None,
        max: Some(1 << 30),
    };
    let replies = [
        Reply::Setting(Box::new(Setting {
            cgroup: "lab/c1".into(),
            managed: true,
            configured: v,
            runtime_override: None,
            effective: v,
            container: Some("web".into()),
            labels: Some(LabelValues {
                weight: Some(5),
                min: None,
                max: None,
            }),
            source: Some(WeightSource::Label {
                label: "memweight.weight".into(),
                container: "web".into(),
            }),
            label_clamps: vec![LabelClamp {
                label: "memweight.min".into(),
                field: LabelField::Min,
                asked: 1 << 40,
                applied: 0,
            }],
        })),
        Reply::Status(Status {
            pool: sample_pool(),
            cgroups: vec![sample_status()],
        }),
        Reply::Reloaded(Reloaded {
            config: "/etc/memweight/memweight.toml".into(),
            rules: 3,
            overrides_kept: 1,
        }),
        Reply::Version(Version {
            program: "memweightd".into(),
            version: "0.1.0".into(),
            protocol: PROTOCOL_VERSION,
        }),
    ];
    for r in replies {
        let line = Response::new(Outcome::Ok(r.clone())).to_line();
        assert_eq!(parse_response(&line), Ok(Ok(r)));
    }
    let err = ErrorReply::new(ErrorKind::NotManaged, "lab/x is not managed");
    let line = Response::new(Outcome::Error(err.clone())).to_line();
    assert!(line.contains("\"not-managed\""), "{line}");
    assert_eq!(parse_response(&line), Ok(Err(err)));
}

#[test]
fn weight_sources_read_as_sentences() {
    let rule = WeightSource::Config {
        rule: "machine.slice/libpod-*.scope".into(),
    };
    assert_eq!(rule.to_string(), "config rule machine.slice/libpod-*.scope");
    assert_eq!(
        WeightSource::Override.to_string(),
        "runtime override (memweightctl set)"
    );
    assert_eq!(
        serde_json::to_string(&rule).expect("encodes"),
        "{\"from\":\"config\",\"rule\":\"machine.slice/libpod-*.scope\"}"
    );
}

/// A daemon from before container labels sends rows without `container` and `source`;
/// this client must still read them, and an older client ignores the new fields.
#[test]
fn status_rows_without_container_fields_still_parse() {
    let mut row = serde_json::to_value(sample_status()).expect("encodes");
    let obj = row.as_object_mut().expect("an object");
    assert!(!obj.contains_key("container") && !obj.contains_key("source"));
    obj.remove("container");
    let back: CgroupStatus = serde_json::from_value(row).expect("old row parses");
    assert_eq!(back, sample_status());
    let mut with = sample_status();
    with.container = Some("web".into());
    with.source = Some(WeightSource::Override);
    let line = serde_json::to_string(&with).expect("encodes");
    assert!(
        line.contains("\"source\":{\"from\":\"override\"}"),
        "{line}"
    );
    let back: CgroupStatus = serde_json::from_str(&line).expect("new row parses");
    assert_eq!(back, with);
}

/// Replies from a daemon that predates the originals fields still parse, and rows without
/// them serialise as before.
#[test]
fn status_rows_without_originals_are_compatible() {
    let row = sample_status();
    let json = serde_json::to_string(&row).expect("serialise");
    assert!(
        !json.contains("original_high") && !json.contains("operator"),
        "{json}"
    );
    let back: CgroupStatus = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, row);
}

/// `version` on the wire, and how a daemon from before it refuses it: the same
/// `malformed request: unknown variant` this side's own parser gives, which the client
/// recognises instead of reporting a bad request.
#[test]
fn version_request_and_an_old_daemons_refusal() {
    let line = Request::new(Command::Version).to_line();
    assert_eq!(line, "{\"version\":1,\"command\":{\"op\":\"version\"}}\n");
    let old = parse_request("{\"version\":1,\"command\":{\"op\":\"frobnicate\"}}")
        .expect_err("unknown op");
    assert!(old.is_unknown_command(), "{old:?}");
    assert!(!ErrorReply::new(ErrorKind::BadRequest, "weight must be ...").is_unknown_command());
    assert!(!ErrorReply::not_ready().is_unknown_command());
}
