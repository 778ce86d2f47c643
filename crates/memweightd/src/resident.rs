//! Keeping the daemon itself resident: the process that relieves memory pressure must not be
//! swapped out by it (in the lab its RSS went down to 580 kB under pressure, issue 10).
//!
//! At start the daemon calls `mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)`: what it has
//! mapped and everything it maps later stays in RAM once touched. `MCL_ONFAULT` keeps reserved
//! but untouched memory (thread stacks, malloc arenas) from being faulted in up front, so the
//! RSS stays what the daemon uses.
//!
//! Before locking it turns transparent huge pages off for itself (`PR_SET_THP_DISABLE`): with
//! THP on, the first touch of a thread stack or malloc arena can fault a whole 2 MiB page in,
//! and locked it stays — in the lab one such page was a quarter of the daemon's RSS (8.1 MiB,
//! docs/lab.md), memory the containers it protects would otherwise have had.
//!
//! And it drops its own program from RAM first ([`shed_program`]): with `MCL_ONFAULT` a page is
//! locked once it is mapped, and the kernel maps a faulting page's neighbours too when they are
//! in the page cache (fault-around) and reads ahead of it when they are not, so nearly the whole
//! text (3.3 MB) ended up locked, of which a tick runs a fraction. The executable mappings of
//! its program get `MADV_RANDOM` (no read-ahead) and `MADV_PAGEOUT` (their pages leave the page
//! cache): from then on only the pages it runs come back, one at a time, and only those stay
//! locked. A code path first taken later (an error, the shutdown) reads its pages from disk
//! then — once. Only the text: a read-only mapping of the program can hold anonymous pages (the
//! relocated data `mprotect`ed read-only after start-up), which `MADV_PAGEOUT` would swap out
//! (32 kB of `VmSwap` in the lab's ci-hardening when the read-only data was advised too). A
//! program on tmpfs (the busybox guest's initramfs) is shmem, which the advice does not drop:
//! there the whole text stays locked.
//!
//! Start-up runs code no tick runs again (parsing the configuration and the state file,
//! building the runtime, the container engine's first answer), and that code too faulted in
//! after the lock and stayed locked. So [`SHED_AGAIN_AFTER`] after start the daemon unlocks,
//! drops its text once more and locks again ([`shed_again`]): what stays is what it has run
//! since.
//!
//! `MCL_FUTURE` makes every later `mmap` count against `RLIMIT_MEMLOCK`, and a mapping past
//! the limit fails: an allocation or a thread the runtime needs would then fail. So the daemon
//! only locks when nothing can run out: `RLIMIT_MEMLOCK` is unlimited (the unit's
//! `LimitMEMLOCK=infinity`) or it holds `CAP_IPC_LOCK`. Otherwise, and when the kernel refuses,
//! it logs a WARN with what to change and runs unlocked.

use std::time::Duration;

/// `CAP_IPC_LOCK`'s bit in the capability sets.
const CAP_IPC_LOCK: u32 = 14;

/// How long after start [`shed_again`] runs: start-up is over by then (the container engine's
/// first answer comes within seconds, bounded by a 30 s timeout), and the control loop has
/// taken its usual paths many times.
pub const SHED_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// What `mlockall` is called with: present and future mappings, each page once it is touched.
fn lock_flags() -> nix::sys::mman::MlockAllFlags {
    use nix::sys::mman::MlockAllFlags;
    MlockAllFlags::MCL_CURRENT
        | MlockAllFlags::MCL_FUTURE
        | MlockAllFlags::from_bits_retain(libc::MCL_ONFAULT)
}

/// What [`lock`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locked {
    /// All present and future memory is locked; what [`shed_program`] dropped first.
    Yes(Result<u64, String>),
    /// Not locked, and why (with what to do), for the log.
    No(String),
}

/// Whether locking all future mappings is safe: `memlock_soft` is the soft `RLIMIT_MEMLOCK`
/// (`None` = unlimited), `cap_ipc_lock` whether the effective set holds `CAP_IPC_LOCK`.
pub fn may_lock(memlock_soft: Option<u64>, cap_ipc_lock: bool) -> Result<(), String> {
    match memlock_soft {
        None => Ok(()),
        Some(_) if cap_ipc_lock => Ok(()),
        Some(limit) => Err(format!(
            "RLIMIT_MEMLOCK is {limit} bytes and the daemon lacks CAP_IPC_LOCK, so locking every \
             future mapping could make an allocation fail; set LimitMEMLOCK=infinity in the \
             unit (the shipped one does) or run with CAP_IPC_LOCK"
        )),
    }
}

/// Whether the `CapEff:` line of `/proc/self/status` holds `CAP_IPC_LOCK`; `false` when the
/// line is missing or unreadable.
#[must_use]
pub fn has_cap_ipc_lock(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// Locks the daemon's memory when that is safe; never fails the daemon.
#[must_use]
pub fn lock() -> Locked {
    use nix::sys::mman::mlockall;
    use nix::sys::resource::{Resource, getrlimit};
    let soft = match getrlimit(Resource::RLIMIT_MEMLOCK) {
        Ok((soft, _)) if soft == nix::sys::resource::RLIM_INFINITY => None,
        Ok((soft, _)) => Some(soft),
        Err(e) => return Locked::No(format!("cannot read RLIMIT_MEMLOCK: {e}")),
    };
    let cap = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| has_cap_ipc_lock(&s));
    if let Err(why) = may_lock(soft, cap) {
        return Locked::No(why);
    }
    // Only a cost if refused: the daemon then locks what huge pages it faults in.
    let _ = nix::sys::prctl::set_thp_disable(true);
    let shed = shed_program();
    match mlockall(lock_flags()) {
        Ok(()) => Locked::Yes(shed),
        Err(e) => Locked::No(format!(
            "mlockall refused ({e}); check the unit's SystemCallFilter and LimitMEMLOCK"
        )),
    }
}

/// Unlocks, drops the program's pages again ([`shed_program`]) and locks again, so that what
/// only start-up ran leaves RAM (see the module's docs). Call it once, [`SHED_AGAIN_AFTER`]
/// after start, and only when [`lock`] locked. Returns the bytes of mappings advised.
///
/// # Errors
/// When the pages could not be dropped (they stay, locked again) or `mlockall` is refused
/// the second time: the daemon then runs unlocked, and the message says so.
pub fn shed_again() -> Result<u64, String> {
    use nix::sys::mman::{mlockall, munlockall};
    // MADV_PAGEOUT passes over locked mappings: they must be unlocked for the moment it takes.
    munlockall().map_err(|e| format!("munlockall refused ({e}); the memory stays locked"))?;
    let shed = shed_program();
    mlockall(lock_flags()).map_err(|e| {
        format!(
            "mlockall refused the second time ({e}): the daemon now runs unlocked; check the \
             unit's SystemCallFilter and LimitMEMLOCK"
        )
    })?;
    shed
}

/// The executable, unwritable mappings of `exe` among `maps` (`/proc/self/maps`), its text:
/// `(start, length)`.
#[must_use]
pub fn program_ranges(
    maps: &procfs::process::MemoryMaps,
    exe: &std::path::Path,
) -> Vec<(u64, u64)> {
    use procfs::process::{MMPermissions, MMapPath};
    maps.0
        .iter()
        .filter(|m| matches!(&m.pathname, MMapPath::Path(p) if p == exe))
        .filter(|m| {
            m.perms.contains(MMPermissions::EXECUTE) && !m.perms.contains(MMPermissions::WRITE)
        })
        .filter(|m| m.address.1 > m.address.0)
        .map(|m| (m.address.0, m.address.1 - m.address.0))
        .collect()
}

/// Drops the pages of the daemon's own text from RAM and stops read-ahead on them, so
/// that what [`lock`] then locks of its program is what it runs (see the module's docs).
/// Returns the bytes of mappings advised.
///
/// With [`crate::peer`]'s `getsockopt` and [`crate::interrupt`]'s `sigaction`, the daemon's
/// only unsafe code: `madvise` is unsafe in
/// `nix` (and `rustix`) because some advice (`MADV_DONTNEED`, `MADV_FREE`) changes what memory
/// holds; these two do not.
///
/// # Errors
/// When `/proc/self/exe` or `/proc/self/maps` cannot be read, or the kernel refuses the advice
/// (before 5.4 it has no `MADV_PAGEOUT`): the daemon then locks its program as mapped.
#[allow(unsafe_code)]
pub fn shed_program() -> Result<u64, String> {
    use nix::sys::mman::{MmapAdvise, madvise};
    use procfs::FromRead;
    let exe = std::fs::read_link("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?;
    let maps = procfs::process::MemoryMaps::from_file("/proc/self/maps")
        .map_err(|e| format!("/proc/self/maps: {e}"))?;
    let mut advised = 0;
    for (start, len) in program_ranges(&maps, &exe) {
        let (Ok(addr), Ok(length)) = (usize::try_from(start), usize::try_from(len)) else {
            continue;
        };
        let Some(ptr) = std::ptr::NonNull::new(addr as *mut std::ffi::c_void) else {
            continue;
        };
        for advice in [MmapAdvise::MADV_RANDOM, MmapAdvise::MADV_PAGEOUT] {
            // SAFETY: `ptr..ptr + length` is a whole executable, unwritable, file-backed mapping
            // of this process's own program (its text), as the kernel lists it. Neither advice
            // changes what the memory holds: MADV_RANDOM only turns read-ahead off for it, and
            // MADV_PAGEOUT reclaims clean file pages, which the next access reads back from the
            // file.
            unsafe { madvise(ptr, length, advice) }
                .map_err(|e| format!("madvise({advice:?}) on {}: {e}", exe.display()))?;
        }
        advised += len;
    }
    Ok(advised)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_only_when_no_mapping_can_fail() {
        assert!(may_lock(None, false).is_ok());
        assert!(may_lock(Some(8 << 20), true).is_ok());
        let why = may_lock(Some(8 << 20), false).expect_err("limited, no capability");
        assert!(why.contains("LimitMEMLOCK=infinity"), "{why}");
    }

    #[test]
    fn cap_ipc_lock_from_status() {
        let root = "Name:\tx\nCapEff:\t000001ffffffffff\n";
        assert!(has_cap_ipc_lock(root));
        let dac_only = "CapEff:\t0000000000000002\n";
        assert!(!has_cap_ipc_lock(dac_only));
        assert!(has_cap_ipc_lock("CapEff:\t0000000000004000\n"));
        assert!(!has_cap_ipc_lock("garbage"));
        assert!(!has_cap_ipc_lock("CapEff:\tzz\n"));
    }

    #[test]
    fn the_program_is_the_text_of_the_executable() {
        use procfs::FromRead;
        let maps = "\
55d0c0000000-55d0c0100000 r--p 00000000 fd:01 1234 /usr/bin/memweightd
55d0c0100000-55d0c0400000 r-xp 00100000 fd:01 1234 /usr/bin/memweightd
55d0c0400000-55d0c0500000 r--p 00400000 fd:01 1234 /usr/bin/memweightd
55d0c0500000-55d0c0510000 rw-p 00500000 fd:01 1234 /usr/bin/memweightd
55d0c0510000-55d0c0600000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000100000 r-xp 00000000 fd:01 99 /usr/lib/libc.so.6
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]
";
        let maps = procfs::process::MemoryMaps::from_read(maps.as_bytes()).expect("parses");
        let ranges = program_ranges(&maps, std::path::Path::new("/usr/bin/memweightd"));
        assert_eq!(
            ranges,
            [(0x55d0_c010_0000, 0x30_0000)],
            "the text: not the read-only data (relocated pages there are anonymous), not .data, \
             not other files"
        );
        assert!(program_ranges(&maps, std::path::Path::new("/usr/bin/other")).is_empty());
    }

    #[test]
    fn shedding_the_test_binary_leaves_it_running() {
        // The test binary's own text: advised, and it runs on, its code read back from the
        // file; a second time finds the same mappings.
        let advised = shed_program().expect("the kernel takes the advice");
        assert!(advised > 0, "the test binary has text");
        assert_eq!(shed_program(), Ok(advised));
    }
}
