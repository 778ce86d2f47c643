use super::*;

/// Debian 6.1, 1 GiB guest: DMA and DMA32 populated, Normal and Movable not.
const ZONEINFO: &str = "Node 0, zone      DMA
  per-node stats
      nr_inactive_anon 8
      nr_active_anon 7311
  pages free     3576
        boost    0
        min      90
        low      112
        high     134
        spanned  4095
        present  3998
        managed  3840
        cma      0
        protection: (0, 932, 932, 932)
      nr_free_pages 3576
  pagesets
    cpu: 0
              count: 0
              high:  0
              batch: 1
  vm stats threshold: 4
  node_unreclaimable:  0
  start_pfn:           1
Node 0, zone    DMA32
  pages free     170541
        boost    0
        min      5555
        low      6943
        high     8331
        spanned  258048
        present  258048
        managed  238560
        cma      0
        protection: (0, 0, 0, 0)
Node 0, zone   Normal
  pages free     0
        boost    0
        min      0
        low      0
        high     0
        spanned  0
        present  0
        managed  0
        cma      0
        protection: (0, 0, 0, 0)
";

#[test]
fn watermarks_sum_every_zone_and_skip_per_cpu_highs() {
    let w = watermarks(ZONEINFO).expect("parses");
    assert_eq!(
        w,
        Watermarks {
            min: 5645,
            low: 7055,
            high: 8465,
            managed: 242_400
        }
    );
}

#[test]
fn watermarks_reject_what_is_not_zoneinfo() {
    assert!(watermarks("").is_err());
    assert!(watermarks("MemTotal: 1 kB\n").is_err());
    assert!(watermarks("Node 0, zone DMA\n min x\n").is_err());
    assert!(watermarks("Node 0, zone DMA\n min 1 2\n").is_err());
    assert!(watermarks("Node 0, zone DMA\n min\n").is_err());
}

#[test]
fn single_u64_reads_value_with_newline() {
    assert_eq!(single_u64("1048576\n"), Ok(1_048_576));
    assert_eq!(single_u64("  0 "), Ok(0));
    assert_eq!(single_u64("18446744073709551615"), Ok(u64::MAX));
}

#[test]
fn single_u64_rejects_malformed() {
    assert_eq!(single_u64(""), Err(ParseError::Empty));
    assert_eq!(single_u64("\n"), Err(ParseError::Empty));
    assert!(matches!(
        single_u64("max"),
        Err(ParseError::NotANumber { .. })
    ));
    assert!(matches!(
        single_u64("-1"),
        Err(ParseError::NotANumber { .. })
    ));
    assert!(matches!(
        single_u64("+1"),
        Err(ParseError::NotANumber { .. })
    ));
    assert!(matches!(
        single_u64("12k"),
        Err(ParseError::NotANumber { .. })
    ));
    assert!(matches!(
        single_u64("18446744073709551616"),
        Err(ParseError::NotANumber { .. })
    ));
    assert!(matches!(
        single_u64("1 2"),
        Err(ParseError::TrailingData { .. })
    ));
    assert!(matches!(
        single_u64("é"),
        Err(ParseError::NotANumber { .. })
    ));
}

#[test]
fn limit_reads_max_and_bytes() {
    assert_eq!(limit("max\n"), Ok(Limit::Max));
    assert_eq!(limit("4096\n"), Ok(Limit::Bytes(4096)));
    assert!(matches!(limit("MAX"), Err(ParseError::NotANumber { .. })));
    assert!(matches!(
        limit("max max"),
        Err(ParseError::TrailingData { .. })
    ));
    assert_eq!(limit(""), Err(ParseError::Empty));
}

#[test]
fn limit_display_round_trips() {
    for value in [Limit::Max, Limit::Bytes(0), Limit::Bytes(123_456_789)] {
        assert_eq!(limit(&value.to_string()), Ok(value));
        assert_eq!(value.to_string().parse::<Limit>(), Ok(value));
    }
    assert_eq!(Limit::Max.to_string(), "max");
    assert!(Limit::Max > Limit::Bytes(u64::MAX));
    assert_eq!(Limit::Max.bytes_or(7), 7);
    assert_eq!(Limit::from(5).bytes(), Some(5));
}

#[test]
fn flat_keyed_keeps_order_and_skips_blank_lines() {
    let pairs = flat_keyed("anon 10\n\nfile 20\n").expect("valid input");
    assert_eq!(pairs, vec![("anon", 10), ("file", 20)]);
    assert_eq!(flat_keyed(""), Ok(vec![]));
}

#[test]
fn flat_keyed_rejects_malformed_lines() {
    assert!(matches!(
        flat_keyed("anon 10\nfile\n"),
        Err(ParseError::BadLine { line: 2, .. })
    ));
    assert!(matches!(
        flat_keyed("anon 10 20\n"),
        Err(ParseError::BadLine { line: 1, .. })
    ));
    assert!(matches!(
        flat_keyed("anon x\n"),
        Err(ParseError::NotANumber { .. })
    ));
}

#[test]
fn memory_stat_picks_known_keys_and_defaults_missing() {
    let text = "anon 100\nfile 200\nkernel 3\nsomething_new 9\npgscan 7\n\
                    workingset_refault_file 11\nslab_reclaimable 5\npgmajfault 13\n";
    let stat = MemoryStat::parse(text).expect("valid memory.stat");
    assert_eq!(stat.pgmajfault, 13);
    assert_eq!(stat.anon, 100);
    assert_eq!(stat.file, 200);
    assert_eq!(stat.kernel, 3);
    assert_eq!(stat.pgscan, 7);
    assert_eq!(stat.workingset_refault_file, 11);
    assert_eq!(stat.slab_reclaimable, 5);
    assert_eq!(stat.shmem, 0, "missing key reads as 0");
}

#[test]
fn memory_stat_rejects_bad_value() {
    assert!(MemoryStat::parse("anon max\n").is_err());
    assert!(MemoryStat::parse("anon\n").is_err());
}

#[test]
fn memory_events_parses_kernel_output() {
    let text = "low 1\nhigh 2\nmax 3\noom 4\noom_kill 5\noom_group_kill 6\n";
    let events = MemoryEvents::parse(text).expect("valid memory.events");
    assert_eq!(
        events,
        MemoryEvents {
            low: 1,
            high: 2,
            max: 3,
            oom: 4,
            oom_kill: 5
        }
    );
    assert!(MemoryEvents::parse("low -1\n").is_err());
}

#[test]
fn cpu_usage_usec_reads_the_kernels_cpu_stat() {
    // 6.1 without the cpu controller enabled: the three basic keys only.
    let basic = "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n";
    assert_eq!(cpu_usage_usec(basic), Ok(1_234_567));
    // With the controller: more keys after them.
    let full = format!("{basic}core_sched.force_idle_usec 0\nnr_periods 0\nnr_throttled 0\n");
    assert_eq!(cpu_usage_usec(&full), Ok(1_234_567));
    assert!(matches!(
        cpu_usage_usec("user_usec 1\n"),
        Err(ParseError::MissingKey { key: "usage_usec" })
    ));
    assert!(cpu_usage_usec("usage_usec x\n").is_err());
    assert!(cpu_usage_usec("").is_err());
}

#[test]
fn vmstat_sums_global_reclaim_counters() {
    // khugepaged's counters (split out since 6.6) count with direct reclaim.
    let text = "nr_free_pages 1000\npgscan_kswapd 500\npgscan_direct 20\n\
                    pgscan_khugepaged 3\npgsteal_kswapd 400\npgsteal_direct 10\n\
                    pgsteal_khugepaged 1\nallocstall_dma 1\nallocstall_dma32 2\n\
                    allocstall_normal 3\nallocstall_movable 4\n\
                    workingset_refault_anon 7\nworkingset_refault_file 8\n";
    let v = vmstat(text).expect("valid vmstat");
    assert_eq!(
        v,
        Vmstat {
            pgscan_kswapd: 500,
            pgscan_direct: 23,
            pgsteal_kswapd: 400,
            pgsteal_direct: 11,
            allocstall: 10,
            refault: 15,
        }
    );
    assert_eq!(v.scanned(), 523);
    // Kernels before 5.9 have one refault counter.
    let old = vmstat("pgscan_kswapd 1\nworkingset_refault 9\n").expect("old names");
    assert_eq!(old.refault, 9);
    assert!(matches!(
        vmstat("nr_free_pages 1\n"),
        Err(ParseError::MissingKey {
            key: "pgscan_kswapd"
        })
    ));
    assert!(vmstat("pgscan_kswapd x\n").is_err());
    assert!(vmstat("pgscan_kswapd 1 2\n").is_err());
    let huge = format!("pgscan_kswapd {}\npgscan_direct {}\n", u64::MAX, u64::MAX);
    assert_eq!(vmstat(&huge).expect("saturates").scanned(), u64::MAX);
}

#[test]
fn psi_parses_some_and_full() {
    let text = "some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\n\
                    full avg10=0.75 avg60=0.10 avg300=0.00 total=6543\n";
    let psi = psi(text).expect("valid PSI");
    assert!((psi.some.avg10 - 1.5).abs() < 1e-9);
    assert!((psi.some.avg60 - 0.25).abs() < 1e-9);
    assert_eq!(psi.some.total_us, 123_456);
    let full = psi.full.expect("full line present");
    assert!((full.avg10 - 0.75).abs() < 1e-9);
    assert_eq!(full.total_us, 6543);
}

#[test]
fn psi_full_is_optional_and_unknown_keys_ignored() {
    let psi = psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0 extra=1\n")
        .expect("valid PSI without full");
    assert_eq!(psi.full, None);
}

#[test]
fn psi_rejects_malformed() {
    assert_eq!(psi("some"), Err(ParseError::MissingKey { key: "avg10" }));
    assert_eq!(psi(""), Err(ParseError::MissingKey { key: "some" }));
    assert!(matches!(
        psi("full avg10=0 avg60=0 avg300=0 total=0\n"),
        Err(ParseError::MissingKey { key: "some" })
    ));
    assert!(matches!(
        psi("sum avg10=0 avg60=0 avg300=0 total=0\n"),
        Err(ParseError::BadLine { line: 1, .. })
    ));
    assert!(matches!(
        psi("some avg10=0 avg60=0 avg300=0\n"),
        Err(ParseError::MissingKey { key: "total" })
    ));
    assert!(matches!(
        psi("some avg10=nan avg60=0 avg300=0 total=0\n"),
        Err(ParseError::NotANumber { .. })
    ));
    assert!(matches!(
        psi("some avg10=-1 avg60=0 avg300=0 total=0\n"),
        Err(ParseError::NotANumber { .. })
    ));
    assert!(matches!(
        psi("some avg10=0 avg60 avg300=0 total=0\n"),
        Err(ParseError::BadLine { .. })
    ));
    let twice = "some avg10=0 avg60=0 avg300=0 total=0\n".repeat(2);
    assert!(matches!(psi(&twice), Err(ParseError::Duplicate { .. })));
}

/// procfs 0.18's `parse_pressure_record` slices `&line[5..]` after checking only the
/// prefix: a last line of just `some` (no newline) or `some` followed by a multi-byte
/// character panics there. Here they are ordinary errors.
#[test]
fn regression_procfs_psi_slicing_panic() {
    assert!(psi("someé avg10=0 avg60=0 avg300=0 total=0").is_err());
    assert!(psi("some avg10=0 avg60=0 avg300=0 total=0\nfull").is_err());
    assert!(psi("some avg10=0 avg60=0 avg300=0 total=0\nfullé").is_err());
}

#[test]
fn quote_cuts_long_text_on_char_boundary() {
    let long = "é".repeat(100);
    let quoted = quote(&long);
    assert!(quoted.len() <= QUOTE_MAX + 3);
    assert!(quoted.ends_with("..."));
}

#[test]
fn lru_gen_reads_the_kernels_component_bits() {
    assert_eq!(lru_gen("0x0007\n"), Ok(true));
    assert_eq!(lru_gen("0x0001"), Ok(true));
    assert_eq!(lru_gen("0x0000\n"), Ok(false));
    for bad in [
        "",
        "y",
        "7",
        "0x",
        "0xzz",
        "0x0007 0x0000",
        "0x10000000000000000",
    ] {
        assert!(lru_gen(bad).is_err(), "{bad:?}");
    }
}
