//! The state file: format, generations, salvage, orphaned overrides.

use super::*;

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|p| (*p).to_owned()).collect()
}

#[test]
fn orphaned_overrides_are_kept_for_the_grace_then_dropped() {
    let t0 = Instant::now();
    let mut o = Orphans::default();
    let c = o.update(&set(&["a", "b"]), t0);
    assert_eq!((c.kept.len(), c.back.len(), c.expired.len()), (2, 0, 0));
    // "a" comes back; "b" stays gone, not reported again.
    let c = o.update(&set(&["b"]), t0 + Duration::from_secs(5));
    assert_eq!(c.back, ["a"]);
    assert!(c.kept.is_empty() && c.expired.is_empty(), "{c:?}");
    let almost = t0 + OVERRIDE_GRACE - Duration::from_millis(1);
    assert!(o.update(&set(&["b"]), almost).expired.is_empty());
    let c = o.update(&set(&["b"]), t0 + OVERRIDE_GRACE);
    assert_eq!(c.expired, ["b"]);
    assert!(o.is_empty());
    // Gone again later: a new grace.
    let later = t0 + 3 * OVERRIDE_GRACE;
    assert_eq!(o.update(&set(&["a"]), later).kept, ["a"]);
    assert!(
        o.update(&set(&["a"]), later + OVERRIDE_GRACE / 2)
            .expired
            .is_empty()
    );
}

#[test]
fn at_most_orphans_kept_the_longest_gone_go_first() {
    let t0 = Instant::now();
    let mut o = Orphans::default();
    let names: Vec<String> = (0..ORPHANS_KEPT + 3).map(|i| format!("c{i:04}")).collect();
    // One more gone each second.
    let mut gone = BTreeSet::new();
    let mut expired = Vec::new();
    for (i, n) in names.iter().enumerate() {
        gone.insert(n.clone());
        let at = t0 + Duration::from_secs(u64::try_from(i).expect("small"));
        expired.extend(o.update(&gone, at).expired);
        gone.retain(|p| !expired.contains(p));
    }
    assert_eq!(o.len(), ORPHANS_KEPT);
    assert_eq!(expired, names[..3], "the three gone longest");
}

#[test]
fn round_trip_and_missing_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = StateStore::new(dir.path().join("sub"));
    assert_eq!(store.load().expect("missing is empty"), State::default());
    let mut st = State::default();
    st.originals.insert(
        "lab/c1".into(),
        Original {
            high: "max".into(),
            low: "0".into(),
            id: Some(4711),
        },
    );
    st.overrides.insert(
        "lab/c1".into(),
        Override {
            weight: 7,
            min: None,
            max: Some(1 << 30),
        },
    );
    store.save(&st).expect("save");
    let back = store.load().expect("load");
    assert_eq!(back.originals, st.originals);
    assert_eq!(back.overrides, st.overrides);
    assert_eq!(back.version, STATE_VERSION);
    assert!(!dir.path().join("sub").join(".state.json.tmp").exists());
}

#[test]
fn regression_newer_state_file_is_not_called_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(
        dir.path().join(STATE_FILE),
        r#"{"version": 7, "originals": {}, "something_new": [1, 2]}"#,
    )
    .expect("write");
    let err = StateStore::new(dir.path())
        .load()
        .expect_err("newer")
        .to_string();
    assert!(
        err.contains("written by a newer memweightd (version 7); this one understands 2"),
        "{err}"
    );
    assert!(err.contains("upgrade"), "{err}");
    assert!(!err.contains("corrupt"), "{err}");
    assert_eq!(parse(r#"{"version": 3}"#), Err(ParseError::Newer(3)));
    assert!(parse(r#"{"version": 2}"#).is_ok());
    assert!(parse(r#"{"version": 1}"#).is_ok());
    assert!(parse(r#"{}"#).is_ok(), "files before versioning");
    assert!(matches!(
        parse(r#"{"version": -1}"#),
        Err(ParseError::Invalid(_))
    ));
    assert!(matches!(
        parse(r#"{"version": 1.5}"#),
        Err(ParseError::Invalid(_))
    ));
}

#[test]
fn regression_foreign_paths_and_values_are_refused() {
    for text in [
        r#"{"version":1,"originals":{"../../etc":{"high":"max","low":"0"}}}"#,
        r#"{"version":1,"originals":{"/abs":{"high":"max","low":"0"}}}"#,
        r#"{"version":1,"originals":{"a//b":{"high":"max","low":"0"}}}"#,
        r#"{"version":1,"originals":{"":{"high":"max","low":"0"}}}"#,
        r#"{"version":1,"originals":{"a/./b":{"high":"max","low":"0"}}}"#,
        r#"{"version":1,"overrides":{"..":{"weight":1}}}"#,
        r#"{"version":1,"ancestors":{"a/..":"0"}}"#,
        r#"{"version":1,"originals":{"a":{"high":"1G; rm -rf /","low":"0"}}}"#,
        r#"{"version":1,"originals":{"a":{"high":"max","low":"-1"}}}"#,
        r#"{"version":1,"ancestors":{"a":""}}"#,
    ] {
        assert!(
            matches!(parse(text), Err(ParseError::Invalid(_))),
            "{text} was accepted"
        );
    }
    let ok = parse(
        r#"{"version":1,"originals":{"lab/c1":{"high":"max","low":"1048576"}},"ancestors":{"lab":"0"}}"#,
    )
    .expect("valid");
    assert_eq!(ok.originals["lab/c1"].low, "1048576");
}

/// The state file's path rule is the one cgroupfs joins by: nothing it records can be
/// refused at the write, and nothing cgroupfs would refuse gets recorded.
#[test]
fn state_paths_are_what_cgroupfs_joins() {
    let root = tempfile::tempdir().expect("tempdir");
    let cgroups = memweight_cgroupfs::CgroupFs::new(root.path()).expect("root exists");
    for p in [
        "a",
        "a/b.scope",
        " a",
        "a\nb",
        "",
        "/",
        "/etc",
        "a/",
        "a//b",
        "./a",
        ".",
        "..",
        "a/..",
        "../a",
        "a\0b",
    ] {
        assert_eq!(
            cgroup_path::check(p).is_ok(),
            cgroups.resolve(p).is_ok(),
            "{p:?}"
        );
    }
}

#[test]
fn version_1_files_are_read_and_written_back_as_version_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v1 = r#"{
  "version": 1,
  "originals": { "lab/c1": { "high": "1048576000", "low": "0" } },
  "overrides": { "lab/c1": { "weight": 3 } },
  "ancestors": { "lab": "0" }
}"#;
    fs::write(dir.path().join(STATE_FILE), v1).expect("write");
    let store = StateStore::new(dir.path());
    let st = store.load().expect("a version 1 file loads");
    assert_eq!(st.version, 1);
    assert_eq!(
        st.originals.get("lab/c1"),
        Some(&Original {
            high: "1048576000".into(),
            low: "0".into(),
            id: None,
        })
    );
    assert_eq!(st.overrides.get("lab/c1").map(|o| o.weight), Some(3));
    store.save(&st).expect("save");
    let text = fs::read_to_string(store.path()).expect("read");
    assert!(text.contains("\"version\": 2"), "{text}");
    assert!(!text.contains("\"id\""), "no id invented: {text}");
    assert_eq!(store.load().expect("reload").originals, st.originals);
}

#[test]
fn corrupt_file_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join(STATE_FILE), "{not json").expect("write");
    let err = StateStore::new(dir.path())
        .load()
        .expect_err("corrupt")
        .to_string();
    assert!(err.contains("corrupt"), "{err}");
}

#[test]
fn each_save_keeps_the_one_before_as_the_previous_generation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = StateStore::new(dir.path());
    let first = one_original("lab/c1", 1);
    store.save(&first).expect("save");
    assert!(!store.prev_path().exists(), "nothing before the first save");
    let mut second = first.clone();
    second.originals.extend(one_original("lab/c2", 2).originals);
    store.save(&second).expect("save");
    let prev = parse(&fs::read_to_string(store.prev_path()).expect("prev")).expect("good");
    assert_eq!(prev.originals, first.originals);
    assert_eq!(store.load().expect("load").originals, second.originals);
    assert!(!dir.path().join(".state.json.prev.tmp").exists());
}

#[test]
fn truncated_state_file_falls_back_to_the_previous_generation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = StateStore::new(dir.path());
    let first = one_original("lab/c1", 1);
    store.save(&first).expect("save");
    let mut second = first.clone();
    second.originals.extend(one_original("lab/c2", 2).originals);
    store.save(&second).expect("save");
    // Cut the file in the middle, as a full disk or a lost write leaves it.
    let text = fs::read_to_string(store.path()).expect("read");
    fs::write(store.path(), &text[..text.len() / 2]).expect("truncate");
    let fresh = StateStore::new(dir.path());
    let loaded = fresh.load().expect("the previous generation");
    // Every original of the previous generation, and only originals of the two.
    for (p, o) in &first.originals {
        assert_eq!(loaded.originals.get(p), Some(o), "{p}");
    }
    for (p, o) in &loaded.originals {
        assert_eq!(second.originals.get(p), Some(o), "{p}");
    }
    // The next save replaces the corrupt file and does not rotate it over the good one.
    fresh.save(&first).expect("save");
    assert!(parse(&fs::read_to_string(store.prev_path()).expect("prev")).is_ok());
    assert_eq!(fresh.load().expect("load").originals, first.originals);
}

#[test]
fn garbled_state_file_falls_back_and_a_garbled_previous_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join(STATE_FILE), b"\xff\xfe\0garbage").expect("write");
    fs::write(
        dir.path().join(PREV_FILE),
        r#"{"version":2,"originals":{"a":{"high":"max","low":"0","id":3}}}"#,
    )
    .expect("write");
    let st = StateStore::new(dir.path()).load().expect("previous");
    assert_eq!(st.originals["a"].id, Some(3));
    fs::write(dir.path().join(PREV_FILE), "{\"version\":2,\"origi").expect("write");
    let err = StateStore::new(dir.path())
        .load()
        .expect_err("both corrupt")
        .to_string();
    assert!(err.contains("corrupt too"), "{err}");
    assert!(err.contains("move it aside"), "{err}");
}

#[test]
fn missing_state_file_is_empty_even_with_a_previous_generation() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(
        dir.path().join(PREV_FILE),
        r#"{"version":2,"originals":{"a":{"high":"max","low":"0"}}}"#,
    )
    .expect("write");
    assert_eq!(
        StateStore::new(dir.path()).load().expect("empty"),
        State::default(),
        "moving state.json aside starts fresh"
    );
}

#[test]
fn newer_state_file_does_not_fall_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join(STATE_FILE), r#"{"version": 9}"#).expect("write");
    fs::write(dir.path().join(PREV_FILE), r#"{"version": 2}"#).expect("write");
    let err = StateStore::new(dir.path()).load().expect_err("newer");
    assert!(matches!(err, StateError::Newer { .. }), "{err}");
}

fn three() -> State {
    let mut st = State::default();
    for (n, id) in [("lab/c1", 1), ("lab/c2", 2), ("lab/c3", 3)] {
        st.originals.extend(one_original(n, id).originals);
    }
    st.overrides.insert(
        "lab/c2".into(),
        Override {
            weight: 7,
            min: None,
            max: None,
        },
    );
    st.ancestors.insert("lab".into(), "0".into());
    st.boot_id = Some("b".into());
    st
}

#[test]
fn salvage_of_a_file_cut_anywhere_reads_only_whole_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = StateStore::new(dir.path());
    let full = three();
    store.save(&full).expect("save");
    let text = fs::read_to_string(store.path()).expect("read");
    let mut most = 0;
    for n in 0..text.len() {
        let Some(got) = salvage(&text[..n]) else {
            continue;
        };
        for (p, o) in &got.originals {
            assert_eq!(full.originals.get(p), Some(o), "cut at {n}: {p}");
        }
        for (p, o) in &got.overrides {
            assert_eq!(full.overrides.get(p), Some(o), "cut at {n}: {p}");
        }
        for (p, o) in &got.ancestors {
            assert_eq!(full.ancestors.get(p), Some(o), "cut at {n}: {p}");
        }
        most = most.max(got.originals.len());
    }
    assert_eq!(most, 3, "a cut after the originals keeps all of them");
    assert!(salvage("").is_none());
    assert!(salvage("}}}}").is_none());
    assert!(salvage("\n  }\n    }").is_none());
}

/// The previous generation lacks what the last save added; the part of the corrupt file
/// that can still be read has it: both are kept.
#[test]
fn regression_an_original_recorded_only_in_the_truncated_file_is_not_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = StateStore::new(dir.path());
    let first = one_original("lab/c9", 9);
    store.save(&first).expect("save");
    store.save(&three()).expect("save");
    let text = fs::read_to_string(store.path()).expect("read");
    // Cut just after lab/c2's entry: lab/c1 and lab/c2 are whole, lab/c3 is not.
    let at = text.find("\"lab/c3\"").expect("c3");
    fs::write(store.path(), &text[..at]).expect("truncate");
    let st = StateStore::new(dir.path()).load().expect("falls back");
    let paths: Vec<&String> = st.originals.keys().collect();
    assert_eq!(
        paths,
        ["lab/c1", "lab/c2", "lab/c9"],
        "c9 from .prev, c1 and c2 read"
    );
    // No previous generation: what can be read is still used.
    fs::remove_file(store.prev_path()).expect("rm");
    let st = StateStore::new(dir.path())
        .load()
        .expect("what can be read");
    assert_eq!(st.originals.len(), 2);
}
