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
