//! Real-kernel checks of the readers and writers, for the lab VM.
//!
//! Runs only when `MEMWEIGHT_TEST_CGROUP_ROOT` names a writable cgroup2 mount with the
//! memory controller available (as root, e.g. `/sys/fs/cgroup` inside the QEMU guest);
//! elsewhere it prints why it did nothing and passes, because the build host's cgroups
//! are v1. It creates and removes `memweight-cgroupfs-test*` cgroups under that root and
//! moves the test process into one of them for a moment, so never point it at a
//! production host.
//!
//! The lab builds it with the guest programs (xtask `guest::KERNEL_TEST`: `cargo test
//! --release --target x86_64-unknown-linux-gnu -p memweight-cgroupfs --test kernel --no-run`,
//! static) as `/bin/cgroupfs-kernel-test`, and `tests/lab/scenarios/ci-dry-run.toml`
//! runs it on both kernels: `MEMWEIGHT_TEST_CGROUP_ROOT=/sys/fs/cgroup cgroupfs-kernel-test
//! --test-threads=1`.

use std::fs;
use std::path::{Path, PathBuf};

use memweight_cgroupfs::{CgroupFs, Limit, ProcFs, Reclaimed, Written};

const CG: &str = "memweight-cgroupfs-test";

/// The root to test against, or `None` (with the reason printed) to skip.
fn kernel_root() -> Option<PathBuf> {
    let Some(root) = std::env::var_os("MEMWEIGHT_TEST_CGROUP_ROOT") else {
        eprintln!("skipped: MEMWEIGHT_TEST_CGROUP_ROOT is not set (run this in the lab VM)");
        return None;
    };
    Some(PathBuf::from(root))
}

/// Moves this whole process into the cgroup at `dir`.
fn enter(dir: &Path) {
    fs::write(dir.join("cgroup.procs"), "0").expect("move the test process into the cgroup");
}

#[test]
fn real_kernel_round_trip() {
    let Some(root) = kernel_root() else {
        return;
    };
    let cgroups = CgroupFs::new(&root).expect("root exists");
    cgroups.check_v2().expect("cgroup v2 with memory");
    fs::write(root.join("cgroup.subtree_control"), "+memory").expect("enable +memory");
    let dir = root.join(CG);
    let _ = fs::remove_dir(&dir); // leftover from an interrupted run
    fs::create_dir(&dir).expect("create test cgroup");

    assert!(cgroups.memory_enabled_for(CG).expect("readable"));
    assert!(cgroups.walk(1).expect("walk").contains(&CG.to_owned()));

    // Charge 64 MiB of anonymous memory to the cgroup.
    enter(&dir);
    let mut block = vec![0_u8; 64 << 20];
    for page in block.chunks_mut(4096) {
        page[0] = 1;
    }
    let sample = cgroups.sample(CG).expect("readable").expect("present");
    assert!(sample.current >= 60 << 20, "current = {}", sample.current);
    assert!(sample.stat.anon >= 60 << 20, "anon = {}", sample.stat.anon);
    assert_eq!(sample.high, Limit::Max);
    assert_eq!(sample.max, Limit::Max);
    assert!(
        sample.pressure.is_some(),
        "PSI is on by default in Debian kernels"
    );

    // memory.high / memory.low: written with O_TRUNC, read back exactly.
    for (value, text) in [(Limit::Bytes(512 << 20), "536870912"), (Limit::Max, "max")] {
        assert_eq!(cgroups.write_high(CG, value).ok(), Some(Written::Done));
        assert_eq!(
            fs::read_to_string(dir.join("memory.high"))
                .expect("read")
                .trim(),
            text
        );
        assert_eq!(cgroups.write_low(CG, value).ok(), Some(Written::Done));
        assert_eq!(
            fs::read_to_string(dir.join("memory.low"))
                .expect("read")
                .trim(),
            text
        );
    }
    assert_eq!(
        cgroups.write_low(CG, Limit::Bytes(0)).ok(),
        Some(Written::Done)
    );

    // Far more than the cgroup holds: the kernel gives up with EAGAIN.
    let reclaimed = cgroups.reclaim(CG, 1 << 40).expect("reclaim");
    assert!(
        matches!(reclaimed, Reclaimed::Partial | Reclaimed::Unsupported),
        "{reclaimed:?}"
    );
    std::hint::black_box(&mut block);
    drop(block);

    let host = ProcFs::new("/proc").host().expect("host memory");
    assert!(
        host.mem_total > 0 && host.mem_available <= host.mem_total,
        "{host:?}"
    );

    // Leave and remove the cgroup: everything reads as gone.
    enter(&root);
    fs::remove_dir(&dir).expect("remove test cgroup");
    assert_eq!(cgroups.sample(CG).ok(), Some(None));
    assert_eq!(cgroups.write_high(CG, Limit::Max).ok(), Some(Written::Gone));
    assert_eq!(cgroups.write_low(CG, Limit::Max).ok(), Some(Written::Gone));
    assert_eq!(cgroups.reclaim(CG, 4096).ok(), Some(Reclaimed::Gone));
}
