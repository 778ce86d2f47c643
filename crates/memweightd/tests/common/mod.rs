//! The fake cgroupfs tree both daemon-level test files start from.

use std::path::Path;

use memweight_cgroupfs::testing::{FakeCgroup, FakeProc};

/// One mebibyte.
pub const MIB: u64 = 1 << 20;

/// A fake procfs under `dir/proc` and the seed-002 example under `dir/cg`: cgroups
/// `lab/c1..c3`, 2000 MiB each (1900 MiB anon, 100 MiB file).
pub fn seed_cgroups(dir: &Path) -> (FakeProc, Vec<FakeCgroup>) {
    let proc = FakeProc::new(dir.join("proc"));
    let cgroups = (1..=3)
        .map(|i| {
            let c = FakeCgroup::new(dir.join("cg"), &format!("lab/c{i}"));
            c.set_current(2000 * MIB);
            c.set_stat(1900 * MIB, 100 * MIB);
            c
        })
        .collect();
    (proc, cgroups)
}
