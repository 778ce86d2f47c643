use std::path::{Path, PathBuf};
use std::time::Duration;

use memweight_policy::DEFAULT_WEIGHT;

use super::*;

fn parse(text: &str) -> Result<(Config, Rules), ConfigError> {
    Config::parse(text, Path::new("test.toml"))
}

#[test]
fn defaults_are_sane() {
    let (cfg, rules) = parse("").expect("empty config is valid");
    assert_eq!(cfg.cgroup_root, PathBuf::from("/sys/fs/cgroup"));
    assert_eq!(cfg.tick.0, Duration::from_secs(1));
    assert!(cfg.enforce);
    assert_eq!(cfg.capacity.mode, CapacityMode::Kernel, "work-conserving");
    assert!(
        cfg.protect_ancestors,
        "memory.low protects through the slices"
    );
    let (reserve, _) = parse("[capacity]\nmode = \"reserve\"").expect("the reserve law");
    assert_eq!(reserve.capacity.mode, CapacityMode::Reserve);
    let (auto, _) = parse("[capacity]\nmode = \"auto\"").expect("the earlier name");
    assert_eq!(
        auto.capacity.mode,
        CapacityMode::Reserve,
        "old configs keep their law"
    );
    assert_eq!(cfg.capacity.hysteresis, None, "half the reserve");
    assert_eq!(rules.depth(), 0);
    for (text, want) in [
        ("\"0\"", Amount::Bytes(0)),
        ("\"16M\"", Amount::Bytes(16 << 20)),
        ("\"1%\"", Amount::Percent(1.0)),
    ] {
        let (cfg, _) = parse(&format!("[capacity]\nhysteresis = {text}")).expect("valid");
        assert_eq!(cfg.capacity.hysteresis, Some(want), "{text}");
    }
}

#[test]
fn full_config_parses() {
    let (cfg, rules) = parse(
        r#"
        cgroup_root = "/tmp/cg"
        tick = "500ms"
        enforce = false
        [capacity]
        mode = "fixed"
        fixed = "80%"
        [[cgroup]]
        path = "lab/c1"
        weight = 3
        min = "32M"
        max = "1G"
        [[cgroup]]
        glob = "machine.slice/libpod-*.scope"
        "#,
    )
    .expect("valid");
    assert_eq!(cfg.tick.0, Duration::from_millis(500));
    assert_eq!(cfg.capacity.fixed, Some(Amount::Percent(80.0)));
    let s = rules.settings_for("lab/c1").expect("exact rule");
    assert_eq!((s.weight, s.min, s.max), (3, 32 << 20, Some(1 << 30)));
    let g = rules
        .settings_for("machine.slice/libpod-abc.scope")
        .expect("glob rule");
    assert_eq!(g.weight, DEFAULT_WEIGHT);
    assert_eq!(
        rules
            .rule_for("machine.slice/libpod-abc.scope")
            .map(|r| r.name.as_str()),
        Some("machine.slice/libpod-*.scope")
    );
    assert_eq!(
        rules.rule_for("lab/c1").map(|r| r.name.as_str()),
        Some("lab/c1")
    );
    assert!(
        rules
            .settings_for("machine.slice/x/libpod-abc.scope")
            .is_none()
    );
    assert!(rules.settings_for("lab").is_none());
    assert_eq!(rules.depth(), 2);
}

#[test]
fn errors_name_the_field() {
    let cases = [
        ("[[cgroup]]\npath = \"a\"\nweight = 0", "cgroup[0].weight"),
        (
            "[[cgroup]]\npath = \"a\"\nweight = 10001",
            "cgroup[0].weight",
        ),
        ("[[cgroup]]\npath = \"../etc\"", "cgroup[0].path"),
        // The control protocol always refused a newline; a rule now does too.
        ("[[cgroup]]\npath = \"lab/a\\nb\"", "cgroup[0].path"),
        ("[[cgroup]]\nglob = \"lab/*\\nx\"", "cgroup[0].glob"),
        ("[[cgroup]]\nweight = 3", "cgroup[0]"),
        ("[[cgroup]]\npath = \"a\"\nglob = \"b\"", "cgroup[0]"),
        (
            "[[cgroup]]\npath = \"a\"\n[[cgroup]]\npath = \"a/b\"",
            "nest",
        ),
        (
            "[[cgroup]]\npath = \"a\"\nmin = \"2G\"\nmax = \"1G\"",
            "cgroup[0].max",
        ),
        (
            "[[cgroup]]\npath = \"a\"\nweight = 200\nlabel_weight_max = 100",
            "cgroup[0].label_weight_max",
        ),
        (
            "[[cgroup]]\npath = \"a\"\nlabel_weight_max = 10001",
            "cgroup[0].label_weight_max",
        ),
        (
            "[[cgroup]]\npath = \"a\"\nlabel_weight_max = 0",
            "cgroup[0].label_weight_max",
        ),
        (
            "[[cgroup]]\npath = \"a\"\nmin = \"1G\"\nlabel_min_max = \"512M\"",
            "cgroup[0].label_min_max",
        ),
        (
            "[[cgroup]]\npath = \"a\"\nlabel_max_may_rise = \"yes\"",
            "label_max_may_rise",
        ),
        ("tick = \"0s\"", "tick"),
        ("tick = \"soon\"", "duration"),
        ("[capacity]\nmode = \"fixed\"", "capacity.fixed"),
        ("[capacity]\nreserve = \"-5M\"", "reserve"),
        ("[capacity]\nreserve = \"120%\"", "between 0% and 100%"),
        ("bogus = 1", "bogus"),
        ("log_level = \"loud\"", "log_level"),
        ("cgroup_root = \"rel\"", "cgroup_root"),
        ("[control]\nsocket = \"rel.sock\"", "control.socket"),
        ("[control]\ngroup = \"\"", "control.group"),
        ("[control]\nsock = \"/x\"", "sock"),
        ("[metrics]\nlisten = \"localhost\"", "metrics.listen"),
        ("[metrics]\nlisten = \"1.2.3.4:99999\"", "metrics.listen"),
        ("[metrics]\nenabled = \"yes\"", "enabled"),
        ("[containers]\nrefresh = \"10ms\"", "containers.refresh"),
        ("[containers]\nrefresh = \"later\"", "duration"),
        (
            "[containers]\nsocket = \"podman.sock\"",
            "containers.socket",
        ),
        (
            "[containers]\nlabel_prefix = \"\"",
            "containers.label_prefix",
        ),
        (
            "[containers]\nlabel_prefix = \"a b\"",
            "containers.label_prefix",
        ),
        ("[containers]\nenabled = 1", "enabled"),
        ("[containers]\nsockt = \"/x\"", "sockt"),
    ];
    for (text, want) in cases {
        let err = parse(text).expect_err(text).to_string();
        assert!(
            err.contains(want),
            "{text:?}: {err:?} does not mention {want:?}"
        );
    }
}

/// Every check of `validate`, its message in full: the split into sections changed none.
#[test]
fn validation_messages_are_unchanged() {
    let cases = [
        "tick = \"0s\"",
        "reclaim_passes = 0",
        "reclaim_passes = 17",
        "idle_tax = 100",
        "max_step = \"0%\"",
        "cgroup_root = \"rel\"",
        "state_dir = \"rel\"",
        "log_level = \"loud\"",
        "[capacity]\nmode = \"fixed\"",
        "[capacity]\npsi_threshold = 101",
        "[control]\nsocket = \"rel.sock\"",
        "[control]\ngroup = \"a/b\"",
        "[metrics]\nlisten = \"localhost\"",
        "[containers]\nrefresh = \"10ms\"",
        "[containers]\nsocket = \"podman.sock\"",
        "[containers]\nlabel_prefix = \"a b\"",
        // Two mistakes: the first check's is reported.
        "log_level = \"loud\"\n[capacity]\nmode = \"fixed\"",
    ];
    let got: Vec<String> = cases
        .iter()
        .map(|text| parse(text).expect_err(text).to_string())
        .collect();
    let want = [
        "test.toml: tick: must be between 100ms and 10s, got 0ns",
        "test.toml: reclaim_passes: must be 1..=16 (memory.reclaim passes per tick; 1: only at the tick), got 0",
        "test.toml: reclaim_passes: must be 1..=16 (memory.reclaim passes per tick; 1: only at the tick), got 17",
        "test.toml: idle_tax: must be 0..=99 (percent; 75 is VMware ESX's default), got 100",
        "test.toml: max_step: 0% would never lower memory.high; use e.g. \"10%\" or \"64M\"",
        "test.toml: cgroup_root: must be an absolute path",
        "test.toml: state_dir: must be an absolute path",
        "test.toml: log_level: must be error, warn, info, debug or trace, got \"loud\"",
        "test.toml: capacity.fixed: mode = \"fixed\" needs a size, e.g. fixed = \"12G\" or \"80%\"",
        "test.toml: capacity.psi_threshold: must be 0..=100 (percent), got 101",
        "test.toml: control.socket: must be an absolute path, got \"rel.sock\"",
        "test.toml: control.group: must be a group name like \"memweight\", got \"a/b\"",
        "test.toml: metrics.listen: expected an address and port like \"127.0.0.1:9750\" or \"[::1]:9750\", got \"localhost\"",
        "test.toml: containers.refresh: must be between 100ms and 1h, got 10ms",
        "test.toml: containers.socket: must be an absolute path like \"/run/podman/podman.sock\", got \"podman.sock\"",
        "test.toml: containers.label_prefix: must be a non-empty label prefix without spaces or `=`, like \"memweight.\", got \"a b\"",
        "test.toml: log_level: must be error, warn, info, debug or trace, got \"loud\"",
    ];
    assert_eq!(got, want);
}

#[test]
fn label_bounds_default_to_the_rules_own_values() {
    let (_, rules) = parse(
        r#"
        [[cgroup]]
        path = "lab/plain"
        [[cgroup]]
        path = "lab/floor"
        weight = 300
        min = "256M"
        max = "4G"
        [[cgroup]]
        glob = "machine.slice/libpod-*.scope"
        weight = 100
        label_weight_max = 1000
        label_min_max = "2G"
        label_max_may_rise = true
        "#,
    )
    .expect("valid");
    let bounds = |p: &str| rules.rule_for(p).expect("a rule").labels;
    assert_eq!(
        bounds("lab/plain"),
        LabelBounds {
            weight: DEFAULT_WEIGHT,
            min: 0,
            max_may_rise: false
        },
        "a label may ask for no more than the rule gives"
    );
    assert_eq!(
        bounds("lab/floor"),
        LabelBounds {
            weight: 300,
            min: 256 << 20,
            max_may_rise: false
        }
    );
    assert_eq!(
        bounds("machine.slice/libpod-abc.scope"),
        LabelBounds {
            weight: 1000,
            min: 2 << 30,
            max_may_rise: true
        },
        "the operator raises them per rule"
    );
    // Equal to the rule's own values is the default written out.
    assert!(
        parse("[[cgroup]]\npath = \"a\"\nweight = 5\nlabel_weight_max = 5\nmin = \"1G\"\nlabel_min_max = \"1G\"")
            .is_ok()
    );
}

#[test]
fn control_and_metrics_sections() {
    let (cfg, _) = parse("").expect("defaults");
    assert_eq!(
        cfg.control.socket,
        PathBuf::from("/run/memweight/memweightd.sock")
    );
    assert_eq!(cfg.control.group, None);
    assert!(cfg.metrics.enabled);
    assert_eq!(
        cfg.metrics.address(),
        Ok("127.0.0.1:9750".parse().expect("addr"))
    );
    let (cfg, _) = parse(
        "[control]\nsocket = \"/tmp/m.sock\"\ngroup = \"memweight\"\n\
         [metrics]\nlisten = \"[::1]:9100\"",
    )
    .expect("valid");
    assert_eq!(cfg.control.group.as_deref(), Some("memweight"));
    assert_eq!(cfg.metrics.address().map(|a| a.port()), Ok(9100));
    // A disabled endpoint's address is not checked.
    let (cfg, _) = parse("[metrics]\nenabled = false\nlisten = \"nowhere\"").expect("disabled");
    assert!(!cfg.metrics.enabled);
}

#[test]
fn containers_section() {
    let (cfg, _) = parse("").expect("defaults");
    assert!(cfg.containers.enabled);
    assert_eq!(cfg.containers.socket, None);
    assert_eq!(cfg.containers.refresh.0, Duration::from_secs(2));
    assert_eq!(cfg.containers.label_prefix, "memweight.");
    let (cfg, _) = parse(
        "[containers]\nenabled = false\nsocket = \"/var/run/docker.sock\"\n\
         refresh = \"500ms\"\nlabel_prefix = \"io.example.mw/\"",
    )
    .expect("valid");
    assert!(!cfg.containers.enabled);
    assert_eq!(
        cfg.containers.socket,
        Some(PathBuf::from("/var/run/docker.sock"))
    );
    assert_eq!(cfg.containers.refresh.0, Duration::from_millis(500));
    assert_eq!(cfg.containers.label_prefix, "io.example.mw/");
}

#[test]
fn amount_percent_rounds_down() {
    assert_eq!(Amount::Percent(50.0).of(1001), 500);
    assert_eq!(Amount::Percent(100.0).of(u64::MAX), u64::MAX);
    assert_eq!(Amount::Bytes(7).of(1), 7);
    assert_eq!(parse_amount("512M"), Ok(Amount::Bytes(512 << 20)));
}

#[test]
fn regression_tick_1e300_does_not_panic() {
    for text in [
        "tick = 1e300",
        "tick = \"1e300\"",
        "tick = \"1e300s\"",
        "tick = \"3e17m\"",
        "tick = \"1e300ms\"",
        "tick = 18446744073709551615",
        "tick = 1.8446744073709552e19",
        "tick = -1",
        "tick = -0.5",
        "tick = \"-1s\"",
        "tick = nan",
        "tick = inf",
        "tick = -inf",
        "tick = \"NaN\"",
        "tick = \"inf\"",
        "tick = 0",
        "tick = \"0ms\"",
        "tick = \"99ms\"",
        "tick = \"11s\"",
        "tick = \"1h\"",
    ] {
        let err = parse(text).expect_err(text).to_string();
        assert!(
            err.contains("tick") || err.contains("duration"),
            "{text:?}: {err:?} does not name the key"
        );
    }
    assert_eq!(parse("tick = \"10s\"").expect("10s").0.tick.0, MAX_TICK);
    assert_eq!(parse("tick = 0.1").expect("100ms").0.tick.0, MIN_TICK);
}

#[test]
fn regression_absurd_sizes_and_percentages_are_errors() {
    for text in [
        "min_floor = \"3e17m\"",
        "min_floor = \"99999999999E\"",
        "min_floor = -1",
        "min_floor = 1e300",
        "min_floor = nan",
        "max_step = \"nan%\"",
        "max_step = \"inf%\"",
        "max_step = \"-1%\"",
        "max_step = \"1e300%\"",
        "max_step = \"0%\"",
        "max_step = 0",
        "max_step = 1e300",
        "[capacity]\nreserve = \"101%\"",
        "[capacity]\npsi_threshold = nan",
        "[capacity]\npsi_threshold = inf",
        "[capacity]\npsi_threshold = -1.0",
        "[capacity]\npsi_step = \"1e400%\"",
        "[capacity]\nmode = \"fixed\"\nfixed = \"20000000000000000000\"",
        "[[cgroup]]\npath = \"a\"\nweight = -1",
        "[[cgroup]]\npath = \"a\"\nweight = 1e300",
        "[[cgroup]]\npath = \"a\"\nmin = \"1e300G\"",
        "[[cgroup]]\npath = \"a\"\nmax = -4096",
    ] {
        assert!(parse(text).is_err(), "{text:?} was accepted");
    }
}

#[test]
fn oversized_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.toml");
    let mut text = String::from("# padding\n");
    while (text.len() as u64) <= MAX_CONFIG_BYTES {
        text.push_str("# ................................................................\n");
    }
    std::fs::write(&path, text).expect("write");
    let err = Config::load(&path).expect_err("too big").to_string();
    assert!(err.contains("longer than"), "{err}");
}

mod props {
    use super::parse;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any text at all: an error or a config, never a panic.
        #[test]
        fn arbitrary_text_never_panics(text in ".{0,200}") {
            let _ = parse(&text);
        }

        /// Every key with any TOML scalar: an error or a config, never a panic.
        #[test]
        fn arbitrary_values_never_panic(
            key in prop::sample::select(vec![
                "tick", "min_floor", "max_step", "cgroup_root", "state_dir", "enforce",
                "log_level", "[capacity]\nreserve", "[capacity]\nfixed",
                "[capacity]\npsi_threshold", "[capacity]\npsi_step", "[capacity]\npsi_max_cut",
                "[metrics]\nlisten", "[control]\ngroup", "[[cgroup]]\npath = \"a\"\nweight",
                "[[cgroup]]\npath = \"a\"\nmin", "[[cgroup]]\npath = \"a\"\nmax",
                "[[cgroup]]\npath = \"a\"\nlabel_weight_max",
                "[[cgroup]]\npath = \"a\"\nlabel_min_max",
                "[[cgroup]]\npath = \"a\"\nlabel_max_may_rise",
                "[[cgroup]]\nglob",
            ]),
            value in prop_oneof![
                prop::num::f64::ANY.prop_map(|f| format!("{f:?}")),
                prop::num::i64::ANY.prop_map(|i| i.to_string()),
                prop::num::f64::ANY.prop_map(|f| format!("\"{f}\"")),
                prop::num::f64::ANY.prop_map(|f| format!("\"{f:e}m\"")),
                prop::num::f64::ANY.prop_map(|f| format!("\"{f}%\"")),
                prop::num::u64::ANY.prop_map(|u| format!("\"{u}G\"")),
                "\"[a-zA-Z0-9.%*/ -]{0,12}\"",
                Just("nan".to_owned()),
                Just("-inf".to_owned()),
            ],
        ) {
            let _ = parse(&format!("{key} = {value}"));
        }
    }
}

#[test]
fn nesting() {
    assert!(nests("a", "a/b"));
    assert!(!nests("a", "ab"));
    assert!(!nests("a/b", "a"));
    assert!(!nests("a", "a"));
}
