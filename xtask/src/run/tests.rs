use super::*;

#[test]
fn ci_kernels_limit_lab_test_to_the_named_kernels() {
    let both = Scenario::parse("duration = 5\n").expect("parses");
    let one = Scenario::parse("duration = 5\nci_kernels = [\"6.12\"]\n").expect("parses");
    for k in Kernel::ALL {
        assert!(runs_in_ci_on(&both, k));
    }
    assert!(runs_in_ci_on(&one, Kernel::V6_12));
    assert!(!runs_in_ci_on(&one, Kernel::V6_1));
    // The repository's lifecycle scenario runs once, on 6.12.
    let ws = workspace();
    let text = fs::read_to_string(ws.join("tests/lab/scenarios/host-package.toml"))
        .expect("host-package.toml");
    let package = Scenario::parse(&text).expect("parses");
    assert_eq!(
        Kernel::ALL
            .iter()
            .filter(|&&k| runs_in_ci_on(&package, k))
            .count(),
        1
    );
}

#[test]
fn regression_boot_panic_failed_ci_instead_of_booting_again() {
    let outcome = |panicked| vm::Outcome {
        timed_out: false,
        panicked,
        exit: "exit status: 0".into(),
        tail: Vec::new(),
        wall: Duration::ZERO,
    };
    let fresh = Decoder::default();
    let mut started = Decoder::default();
    let hello = lab_agent::record::Record::Hello(lab_agent::record::Hello {
        kernel: "6.12".into(),
        mem_total: 1,
        cpus: 2,
        agent: "0".into(),
    });
    started.feed(&lab_agent::frame::encode(0, &hello).expect("encodes"));
    // Panic while booting: boot again.
    assert!(boot_panic_before_agent(&outcome(true), &fresh));
    // A panic once the agent runs is a result of the run: never retried.
    assert!(!boot_panic_before_agent(&outcome(true), &started));
    assert!(!boot_panic_before_agent(&outcome(false), &fresh));
}

#[test]
fn guest_file_names_cannot_escape() {
    assert!(safe_relative("commands/01-x.txt").is_some());
    assert!(safe_relative("../etc/passwd").is_none());
    assert!(safe_relative("/etc/passwd").is_none());
    assert!(safe_relative("a/../../b").is_none());
}

#[test]
fn ci_scenarios_parse() {
    let dir = workspace().join("tests/lab/scenarios");
    let mut n = 0;
    for e in fs::read_dir(&dir).expect("scenario dir exists") {
        let path = e.expect("entry").path();
        if path.extension().is_some_and(|x| x == "toml") {
            load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            n += 1;
        }
    }
    assert!(n > 0, "no scenarios in {}", dir.display());
}

/// Writes `files` (name, text) into a fresh directory.
fn scenario_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        fs::write(dir.path().join(name), text).expect("write");
    }
    dir
}

#[test]
fn a_baseline_based_on_its_scenario_runs_the_same_experiment_without_the_daemon() {
    let dir = scenario_dir(&[
        (
            "x.toml",
            "description = \"x\"\nguest = \"host\"\nduration = 60\n[[cgroup]]\nname = \"a\"\n\
             [[balloon]]\nat = 30\nsize = \"100M\"\n[daemon]\nenabled = true\nstart = 5\n\
             [[command]]\nat = 10\nassert = true\nwith_daemon = true\n\
             run = \"systemctl is-active memweightd.service\"\n",
        ),
        (
            "x-default.toml",
            "based_on = \"x.toml\"\ndescription = \"x, no daemon\"\n[daemon]\nenabled = false\n",
        ),
    ]);
    let (name, text, baseline) = load(&dir.path().join("x-default.toml")).expect("loads");
    let (_, _, scenario) = load(&dir.path().join("x.toml")).expect("loads");
    assert_eq!(name, "x-default");
    assert!(
        !text.contains(BASED_ON),
        "the guest gets the resolved file: {text}"
    );
    assert_eq!(baseline.description, "x, no daemon");
    assert!(!baseline.daemon.enabled);
    assert_eq!(baseline.cgroups, scenario.cgroups);
    assert_eq!(baseline.balloon, scenario.balloon);
    assert!(
        baseline.commands.is_empty(),
        "the daemon's assertion is left out"
    );
    assert_eq!(scenario.commands.len(), 1);
}

#[test]
fn a_based_on_chain_that_goes_round_or_names_no_file_says_which() {
    let dir = scenario_dir(&[
        ("a.toml", "based_on = \"b.toml\"\n"),
        ("b.toml", "based_on = \"a.toml\"\n"),
        ("c.toml", "based_on = \"gone.toml\"\n"),
        ("d.toml", "based_on = 3\n"),
    ]);
    let err = |f: &str| format!("{:#}", load(&dir.path().join(f)).expect_err(f));
    let round = err("a.toml");
    assert!(round.contains("circle"), "{round}");
    assert!(
        round.contains("a.toml -> ") && round.contains("b.toml"),
        "{round}"
    );
    let gone = err("c.toml");
    assert!(gone.contains("gone.toml"), "{gone}");
    assert!(err("d.toml").contains("must be a file name"));
}

#[test]
fn a_based_on_chain_longer_than_the_limit_is_refused() {
    let files: Vec<(String, String)> = (0..=MAX_BASED_ON)
        .map(|i| {
            let text = if i == MAX_BASED_ON {
                "duration = 5\n".to_owned()
            } else {
                format!("based_on = \"s{}.toml\"\n", i + 1)
            };
            (format!("s{i}.toml"), text)
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let dir = scenario_dir(&refs);
    let long = format!(
        "{:#}",
        load(&dir.path().join("s0.toml")).expect_err("too long")
    );
    assert!(long.contains("chains more than"), "{long}");
    // One file fewer loads.
    load(&dir.path().join("s1.toml")).expect("within the limit");
}

#[test]
fn timeseries_records_the_daemons_view_beside_each_sample() {
    use lab_agent::record::{CgroupSample, DaemonCgroupView, DaemonPoolView, Sample};
    let scenario = Scenario::parse(
        "duration = 5\n[[cgroup]]\nname = \"c1\"\nweight = 1\nworkload = [\"sleep\"]\n\
         [[cgroup]]\nname = \"c2\"\nweight = 2\nworkload = [\"sleep\"]\n\
         [daemon]\nenabled = true\nsample_status = true\n",
    )
    .expect("scenario");
    let cgroup = |name: &str, daemon| CgroupSample {
        name: name.into(),
        present: true,
        current: Some(100),
        refaults: Some(7),
        majfaults: Some(11),
        daemon,
        ..CgroupSample::default()
    };
    let sample = |t, pool: Option<DaemonPoolView>, views: [Option<DaemonCgroupView>; 2]| Sample {
        t,
        cgroups: vec![cgroup("c1", views[0]), cgroup("c2", views[1])],
        host: lab_agent::record::HostSample::default(),
        pressure_size: 0,
        pressure_current: None,
        daemon_alive: Some(true),
        daemon_cpu_usec: None,
        kswapd_cpu_usec: None,
        daemon_pool: pool.map(Box::new),
    };
    let held = DaemonCgroupView {
        usage: 99,
        target: 90,
        entitlement: 95,
        ceiling: Some(97),
        trim: Some(-2),
        refaulted: Some(5),
    };
    let free = DaemonCgroupView {
        ceiling: None,
        trim: None,
        refaulted: None,
        ..held
    };
    let pool = DaemonPoolView {
        tick: 3,
        capacity: 300,
        enforcing: true,
        reclaiming: false,
        yielding: true,
        outside_stall: Some(7.5),
        outside_stall_by: Some("system.slice/a,\"b\".service".into()),
    };
    let results = Results {
        samples: vec![
            sample(1.0, None, [None, None]),
            sample(2.0, Some(pool.clone()), [Some(held), Some(free)]),
        ],
        ..Results::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("timeseries.csv");
    write_timeseries(&path, &scenario, &results, None).expect("written");
    let text = fs::read_to_string(&path).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with(
            ",d_usage,d_target,d_entitlement,d_ceiling,d_trim,d_refaulted,d_capacity,d_enforcing,\
             d_reclaiming,refaults,majfaults,d_yielding,d_outside_stall,d_outside_stall_by"
        ),
        "{}",
        lines[0]
    );
    // Fields, with the commas inside a quoted one not counted.
    let fields = |l: &str| {
        l.chars()
            .fold((1, false), |(n, quoted), ch| match ch {
                '"' => (n, !quoted),
                ',' if !quoted => (n + 1, quoted),
                _ => (n, quoted),
            })
            .0
    };
    let columns = fields(lines[0]);
    assert!(lines.iter().all(|l| fields(l) == columns), "{text}");
    assert!(
        lines[1].ends_with(",,,,,,,,,7,11,,,"),
        "no view, empty: {}",
        lines[1]
    );
    assert!(
        lines[3].ends_with(
            ",99,90,95,97,-2,5,300,true,false,7,11,true,7.5,\"system.slice/a,\"\"b\"\".service\""
        ),
        "{}",
        lines[3]
    );
    assert!(
        lines[4].ends_with(
            ",99,90,95,max,,,300,true,false,7,11,true,7.5,\"system.slice/a,\"\"b\"\".service\""
        ),
        "{}",
        lines[4]
    );
}
