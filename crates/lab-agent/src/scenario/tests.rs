use super::*;

const EXAMPLE: &str = r#"
ram = "1G"
zram = "1G"
duration = 120
[[cgroup]]
name = "c1"
weight = 1
workload = ["random-touch", "--size", "300M"]
[[cgroup]]
name = "c2"
weight = 2
min = "32M"
initial_high = "900M"
workload = ["random-touch", "--size", "300M"]
[[pressure]]
at = 30
size = "200M"
[[pressure]]
at = 60
size = "400M"
[daemon]
enabled = true
[daemon.config]
tick = "1s"
[[daemon.config.cgroup]]
glob = "lab/*"
weight = 100
[[command]]
at = 40
run = "memweightctl status"
[[command]]
at = 50
action = "remove-cgroup"
cgroup = "c2"
[[check]]
check = "max-error-pct"
max = 15.0
[[check]]
check = "high-stays"
cgroup = "*"
value = "max"
"#;

#[test]
fn parses_example_with_defaults() {
    let s = Scenario::parse(EXAMPLE).expect("example parses");
    assert_eq!(s.ram, Size(1 << 30));
    assert_eq!(s.cpus, 2);
    assert_eq!(s.kernel, Kernel::V6_1);
    assert_eq!(s.cgroups.len(), 2);
    assert_eq!(s.cgroups[1].initial_high, Some(Limit::Bytes(900 << 20)));
    assert_eq!(s.cgroups[0].declared_demand(), Some(300 << 20));
    assert_eq!(s.phases(), vec![(0, 30), (30, 60), (60, 120)]);
    assert_eq!(s.pressure_at(29), 0);
    assert_eq!(s.pressure_at(45), 200 << 20);
    assert_eq!(s.checks.len(), 2);
    assert_eq!(
        s.pressure_argv().expect("has steps"),
        vec![
            "memweight-workload",
            "hog",
            "--size",
            "4096",
            "--schedule",
            "30:200M,60:400M"
        ]
    );
    assert!(s.daemon.config.contains_key("tick"));
    assert_eq!(s.effective_lab_low(), None);
    let with_low = Scenario::parse(
        "duration = 5\n[[cgroup]]\nname = \"a\"\n[[cgroup]]\nname = \"b\"\n\
             [static_low]\na = \"100M\"\nb = \"200M\"\n",
    )
    .expect("parses");
    assert_eq!(with_low.effective_lab_low(), Some(Limit::Bytes(300 << 20)));
}

#[test]
fn a_server_runs_in_the_cgroup_and_its_client_beside_it() {
    let s = Scenario::parse(
        "duration = 5\n[[cgroup]]\nname = \"r\"\ndemand = \"10M\"\n\
             command = [\"redis-server\", \"--port\", \"6381\"]\n\
             client = [\"redis\", \"--addr\", \"127.0.0.1:6381\", \"--dataset\", \"8M\"]\n\
             [[cgroup]]\nname = \"t\"\nworkload = [\"random-touch\", \"--size\", \"1M\"]\n",
    )
    .expect("parses");
    assert_eq!(s.cgroups[0].argv(), ["redis-server", "--port", "6381"]);
    assert_eq!(
        s.cgroups[0].client_argv(),
        [
            "memweight-workload",
            "redis",
            "--addr",
            "127.0.0.1:6381",
            "--dataset",
            "8M"
        ]
    );
    assert_eq!(
        s.cgroups[1].argv(),
        ["memweight-workload", "random-touch", "--size", "1M"]
    );
    assert!(s.cgroups[1].client_argv().is_empty());
}

#[test]
fn install_and_ci_kernels_default_to_the_manual_lines_on_every_kernel() {
    let s = Scenario::parse(EXAMPLE).expect("example parses");
    assert_eq!(s.install, Install::Manual);
    assert!(s.ci_kernels.is_empty());
    let host = "duration = 5\nguest = \"host\"\ninstall = \"package\"\nci_kernels = [\"6.12\"]\n";
    let s = Scenario::parse(host).expect("parses");
    assert_eq!(s.install, Install::Package);
    assert_eq!(s.ci_kernels, [Kernel::V6_12]);
    let again = Scenario::parse(&s.to_toml().expect("serialises")).expect("reparses");
    assert_eq!(s, again);
    // The busybox guest has no README install to choose.
    assert!(Scenario::parse("duration = 5\ninstall = \"package\"\n").is_err());
    assert!(Scenario::parse("duration = 5\nci_kernels = [\"5.10\"]\n").is_err());
}

#[test]
fn round_trips_through_toml() {
    let s = Scenario::parse(EXAMPLE).expect("example parses");
    let again = Scenario::parse(&s.to_toml().expect("serialises")).expect("reparses");
    assert_eq!(s, again);
}

#[test]
fn rejects_bad_names_and_commands() {
    let dup = "duration = 5\n[[cgroup]]\nname = \"a\"\n[[cgroup]]\nname = \"a\"\n";
    assert!(matches!(
        Scenario::parse(dup),
        Err(ScenarioError::Invalid(_))
    ));
    let escape = "duration = 5\n[[cgroup]]\nname = \"../x\"\n";
    assert!(Scenario::parse(escape).is_err());
    let both = "duration = 5\n[[command]]\nat = 1\nrun = \"x\"\naction = \"stop-daemon\"\n";
    assert!(Scenario::parse(both).is_err());
    let stop_without_daemon = "duration = 5\n[[command]]\nat = 1\naction = \"stop-daemon\"\n";
    assert!(Scenario::parse(stop_without_daemon).is_err());
    let unknown_key = "duration = 5\nram_size = 3\n";
    assert!(matches!(
        Scenario::parse(unknown_key),
        Err(ScenarioError::Toml(_))
    ));
}

#[test]
fn sizes_and_limits_parse() {
    assert_eq!("300M".parse::<Size>(), Ok(Size(300 << 20)));
    assert_eq!("1G".parse::<Size>(), Ok(Size(1 << 30)));
    assert!("lots".parse::<Size>().is_err());
    assert_eq!("max".parse::<Limit>(), Ok(Limit::Max));
    assert_eq!("4096".parse::<Limit>(), Ok(Limit::Bytes(4096)));
    assert_eq!(Size(300 << 20).to_string(), "300M");
    // Scenario limits take sizes with units, as the daemon's config does.
    let with_limits = "duration = 5\nlab_low = \"300M\"\n\
            [[cgroup]]\nname = \"c1\"\ninitial_high = \"max\"\n\
            [[check]]\ncheck = \"high-stays\"\ncgroup = \"c1\"\nvalue = 4096\n";
    let s = Scenario::parse(with_limits).expect("valid");
    assert_eq!(s.lab_low, Some(Limit::Bytes(300 << 20)));
    assert_eq!(s.cgroups[0].initial_high, Some(Limit::Max));
    assert!(matches!(
        s.checks[0],
        Check::HighStays {
            value: Limit::Bytes(4096),
            ..
        }
    ));
    assert!(Scenario::parse("duration = 5\nlab_low = \"lots\"\n").is_err());
}

/// `EXAMPLE` as a TOML table, the base of the `based_on` tests.
fn example_table() -> toml::Table {
    toml::from_str(EXAMPLE).expect("example is TOML")
}

#[test]
fn a_based_on_file_changes_only_what_it_names() {
    let derived: toml::Table = toml::from_str(
        "based_on = \"example.toml\"\ndescription = \"without the daemon\"\n\
         [daemon]\nenabled = false\n",
    )
    .expect("TOML");
    let merged = overlay(example_table(), derived);
    assert!(
        !merged.contains_key(BASED_ON),
        "based_on is not carried over"
    );
    let text = toml::to_string(&merged).expect("serialises");
    let s = Scenario::parse(&text).expect("the overlay parses");
    let base = Scenario::parse(EXAMPLE).expect("example parses");
    assert_eq!(s.description, "without the daemon");
    assert!(!s.daemon.enabled);
    // A table in both is laid over key by key: the daemon's config is the base's.
    assert_eq!(s.daemon.config, base.daemon.config);
    assert_eq!(s.cgroups, base.cgroups);
    assert_eq!(s.pressure, base.pressure);
    assert_eq!(s.duration, base.duration);
    assert_eq!(s.checks, base.checks);
}

#[test]
fn an_array_in_a_based_on_file_replaces_the_base_s_whole() {
    let derived: toml::Table = toml::from_str(
        "[[cgroup]]\nname = \"solo\"\nweight = 3\nworkload = [\"random-touch\", \"--size\", \"10M\"]\n\
         [daemon.config]\ntick = \"2s\"\n",
    )
    .expect("TOML");
    let merged = overlay(example_table(), derived);
    let names: Vec<&str> = merged["cgroup"]
        .as_array()
        .expect("cgroups")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["solo"], "[[cgroup]] replaced, not appended");
    let config = merged["daemon"]["config"].as_table().expect("config");
    assert_eq!(config["tick"].as_str(), Some("2s"), "the derived key wins");
    assert!(config.contains_key("cgroup"), "the base's other keys stay");
    // The commands, not named by the derived file, are the base's.
    assert_eq!(merged["command"], example_table()["command"]);
}

#[test]
fn without_the_daemon_the_commands_marked_with_daemon_are_dropped() {
    let scenario = |daemon: bool| {
        Scenario::parse(&format!(
            "duration = 60\n[[cgroup]]\nname = \"a\"\n[daemon]\nenabled = {daemon}\n\
             [[command]]\nat = 10\nwith_daemon = true\nrun = \"memweightctl status\"\n\
             [[command]]\nat = 10\nrun = \"cat /proc/meminfo\"\n"
        ))
        .expect("parses")
    };
    let with = scenario(true);
    assert_eq!(with.commands.len(), 2);
    assert!(with.commands[0].with_daemon);
    let without = scenario(false);
    let runs: Vec<_> = without.commands.iter().map(|c| c.run.as_deref()).collect();
    assert_eq!(runs, [Some("cat /proc/meminfo")]);
    // What the guest receives keeps the mark, so that it drops the same commands.
    let again = Scenario::parse(&without.to_toml().expect("serialises")).expect("parses");
    assert_eq!(again.commands, without.commands);
}

#[test]
fn end_when_done_judges_the_seconds_that_ran_and_needs_commands_and_an_empty_balloon() {
    let s = Scenario::parse(EXAMPLE).expect("example parses");
    // The example's last timed event is the pressure step at 60 s (its commands are at 40, 50).
    assert_eq!(s.last_event(), 60);
    // Without end_when_done a run is judged on its whole duration, however far it got.
    assert_eq!(s.as_ran(Some(70)).duration, 120);
    let mut early = s.clone();
    early.end_when_done = true;
    let ran = early.as_ran(Some(70));
    assert_eq!(ran.duration, 70);
    assert_eq!(ran.phases(), vec![(0, 30), (30, 60), (60, 70)]);
    // Never past the limit, never zero, unchanged when no sample arrived.
    assert_eq!(early.as_ran(Some(500)).duration, 120);
    assert_eq!(early.as_ran(Some(0)).duration, 1);
    assert_eq!(early.as_ran(None).duration, 120);
    let text = early.to_toml().expect("serialises");
    assert_eq!(Scenario::parse(&text).expect("reparses"), early);

    let no_commands = "duration = 5\nend_when_done = true\n";
    let err = Scenario::parse(no_commands).expect_err("nothing to wait for");
    assert!(
        err.to_string().contains("at least one [[command]]"),
        "{err}"
    );
    let held = "duration = 50\nend_when_done = true\nguest = \"host\"\n\
                [[balloon]]\nat = 5\nsize = \"100M\"\n[[command]]\nat = 1\nrun = \"true\"\n";
    let err = Scenario::parse(held).expect_err("the balloon still holds memory");
    assert!(err.to_string().contains("size = \"0\""), "{err}");
    let given_back = format!("{held}[[balloon]]\nat = 9\nsize = \"0\"\n");
    assert!(Scenario::parse(&given_back).is_ok());
}

#[test]
fn sample_status_asks_the_configured_socket_and_never_beside_a_stop() {
    let asking = "duration = 5\n[daemon]\nenabled = true\nsample_status = true\n";
    let s = Scenario::parse(asking).expect("parses");
    assert!(s.daemon.sample_status);
    assert_eq!(s.daemon.socket(), memweight_proto::ctl::DEFAULT_SOCKET);
    let elsewhere = format!("{asking}[daemon.config.control]\nsocket = \"/run/x.sock\"\n");
    let s = Scenario::parse(&elsewhere).expect("parses");
    assert_eq!(s.daemon.socket(), "/run/x.sock");
    for action in ["stop-daemon", "kill-daemon", "start-daemon"] {
        let stopping = format!("{asking}[[command]]\nat = 2\naction = \"{action}\"\n");
        match Scenario::parse(&stopping) {
            Err(ScenarioError::Invalid(m)) => assert!(m.contains("sample_status"), "{m}"),
            other => panic!("{action}: {other:?}"),
        }
    }
}
