use super::*;

const PAGE: usize = 4096;

fn plan(args: &[&str]) -> Result<Plan, String> {
    let cli =
        Cli::try_parse_from(std::iter::once("memweight-workload").chain(args.iter().copied()))
            .map_err(|err| err.to_string())?;
    cli.validate(PAGE).map_err(|err| err.to_string())
}

#[test]
fn sizes_are_binary_units() {
    assert_eq!(parse_bytes("300M"), Ok(300 << 20));
    assert_eq!(parse_bytes("1G"), Ok(1 << 30));
    assert_eq!(parse_bytes("4096"), Ok(4096));
    assert_eq!(parse_bytes("2KiB"), Ok(2048));
    assert!(parse_bytes("-1M").is_err());
    assert!(parse_bytes("lots").is_err());
    assert!(parse_bytes("").is_err());
}

#[test]
fn random_touch_with_common_options_after_the_mode() {
    let plan = plan(&[
        "random-touch",
        "--size",
        "300M",
        "--threads",
        "2",
        "--duration",
        "5",
        "--fill",
        "random",
        "--start-delay",
        "3",
    ])
    .expect("valid");
    assert_eq!(
        plan.work,
        Work::RandomTouch {
            size: 300 << 20,
            threads: 2
        }
    );
    assert_eq!(plan.duration, 5);
    assert_eq!(plan.start_delay, 3);
    assert_eq!(plan.fill, Fill::Random);
    assert_eq!(plan.work.unit(), Unit::Pages);
}

#[test]
fn defaults() {
    let plan = plan(&["random-touch", "--size", "1M"]).expect("valid");
    assert_eq!(plan.duration, 0);
    assert_eq!(plan.start_delay, 0);
    assert_eq!(plan.fill, Fill::Pattern);
    assert_eq!(plan.seed, None);
    assert!(matches!(plan.work, Work::RandomTouch { threads: 1, .. }));
}

#[test]
fn sizes_round_up_to_whole_pages() {
    let plan = plan(&["mmap-rw", "--size", "5000"]).expect("valid");
    assert!(matches!(
        plan.work,
        Work::MmapRw {
            size: 8192,
            read_pct: 50,
            file: None,
            passes: None
        }
    ));
}

#[test]
fn bad_arguments_are_rejected() {
    for args in [
        &["random-touch"][..],
        &["random-touch", "--size", "0"],
        &["random-touch", "--size", "4K", "--threads", "2"],
        &["random-touch", "--size", "1M", "--threads", "0"],
        &["random-touch", "--size", "abc"],
        &["seq-write", "--block", "0", "--total", "1G"],
        &["hog", "--size", "1M", "--step", "1M"],
        &["hog", "--size", "1M", "--step", "1M", "--step-every", "0"],
        &["hog", "--size", "1M", "--schedule", "10:1M,5:2M"],
        &["hog", "--size", "1M", "--schedule", "x"],
        &["file-write", "--path", "/tmp/x", "--size", "0"],
        &[
            "file-write",
            "--path",
            "/tmp/x",
            "--size",
            "1M",
            "--block",
            "2G",
        ],
        &["mmap-rw", "--size", "1M", "--read-pct", "101"],
        &["mmap-rw", "--size", "1M", "--passes", "0"],
        &["mmap-rw", "--size", "1M", "--pass-pct", "10"],
        &[
            "mmap-rw",
            "--size",
            "1M",
            "--passes",
            "1",
            "--pass-pct",
            "0",
        ],
        &[
            "mmap-rw",
            "--size",
            "1M",
            "--passes",
            "1",
            "--read-pct",
            "10",
        ],
        &["random-touch", "--size", "1M", "--fill", "ones"],
        &["teleport"],
        &[],
    ] {
        assert!(plan(args).is_err(), "accepted {args:?}");
    }
}

#[test]
fn the_other_modes_parse() {
    let seq = plan(&["seq-write", "--block", "1G", "--total", "20G"]).expect("valid");
    assert_eq!(
        seq.work,
        Work::SeqWrite {
            block: 1 << 30,
            total: 20 << 30
        }
    );
    assert_eq!(seq.work.unit(), Unit::Bytes);
    let file = plan(&[
        "file-write",
        "--path",
        "/tmp/f",
        "--size",
        "1G",
        "--block",
        "1M",
    ])
    .expect("valid");
    assert_eq!(
        file.work,
        Work::FileWrite {
            path: "/tmp/f".into(),
            size: 1 << 30,
            block: 1 << 20,
            repeat: false
        }
    );
    let mmap = plan(&[
        "mmap-rw",
        "--size",
        "64M",
        "--file",
        "/tmp/m",
        "--read-pct",
        "90",
    ])
    .expect("valid");
    assert_eq!(
        mmap.work,
        Work::MmapRw {
            size: 64 << 20,
            file: Some("/tmp/m".into()),
            read_pct: 90,
            passes: None
        }
    );
}

#[test]
fn mmap_rw_passes_touch_a_tenth_of_the_pages_by_default() {
    let tenth = plan(&["mmap-rw", "--size", "40M", "--passes", "3"]).expect("valid");
    let Work::MmapRw { passes, .. } = tenth.work else {
        panic!("not mmap-rw: {:?}", tenth.work);
    };
    assert_eq!(
        passes,
        Some(Passes {
            count: 3,
            touches: 1024
        })
    );
    let all = plan(&[
        "mmap-rw",
        "--size",
        "4M",
        "--passes",
        "1",
        "--pass-pct",
        "100",
    ])
    .expect("valid");
    assert!(matches!(
        all.work,
        Work::MmapRw {
            passes: Some(Passes {
                count: 1,
                touches: 1024
            }),
            ..
        }
    ));
}

#[test]
fn pass_touches_round_up_to_one_page() {
    assert_eq!(Passes::new(1, 1, 10).touches, 1);
    assert_eq!(Passes::new(1, 11, 10).touches, 2);
    assert_eq!(Passes::new(1, 100, 10).touches, 10);
    assert_eq!(
        Passes::new(1, u64::MAX, 100).touches,
        u64::MAX.div_ceil(100)
    );
}

#[test]
fn hog_steps_grow_until_the_cap() {
    let plan = plan(&[
        "hog",
        "--size",
        "100M",
        "--step",
        "50M",
        "--step-every",
        "10",
        "--max",
        "180M",
    ])
    .expect("valid");
    let Work::Hog(hog) = plan.work else {
        panic!("not a hog: {:?}", plan.work);
    };
    assert_eq!(hog.target_at(0), 100 << 20);
    assert_eq!(hog.target_at(9), 100 << 20);
    assert_eq!(hog.target_at(10), 150 << 20);
    assert_eq!(hog.target_at(20), 180 << 20);
    assert_eq!(hog.target_at(u64::MAX), 180 << 20);
}

#[test]
fn hog_schedule_grows_and_shrinks() {
    let plan = plan(&[
        "hog",
        "--size",
        "10M",
        "--schedule",
        "30:200M, 60:400M,90:0",
    ])
    .expect("valid");
    let Work::Hog(hog) = plan.work else {
        panic!("not a hog: {:?}", plan.work);
    };
    assert_eq!(hog.target_at(0), 10 << 20);
    assert_eq!(hog.target_at(30), 200 << 20);
    assert_eq!(hog.target_at(75), 400 << 20);
    assert_eq!(hog.target_at(1000), 0);
}

#[test]
fn hog_step_without_every_overflows_safely() {
    let hog = HogPlan {
        base: u64::MAX - 1,
        hold: 0,
        step: Some((u64::MAX, 1)),
        max: None,
        schedule: Vec::new(),
    };
    assert_eq!(hog.target_at(5), u64::MAX);
}
