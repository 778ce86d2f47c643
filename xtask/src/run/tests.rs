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
