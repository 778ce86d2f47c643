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
//! `MCL_FUTURE` makes every later `mmap` count against `RLIMIT_MEMLOCK`, and a mapping past
//! the limit fails: an allocation or a thread the runtime needs would then fail. So the daemon
//! only locks when nothing can run out: `RLIMIT_MEMLOCK` is unlimited (the unit's
//! `LimitMEMLOCK=infinity`) or it holds `CAP_IPC_LOCK`. Otherwise, and when the kernel refuses,
//! it logs a WARN with what to change and runs unlocked.

/// `CAP_IPC_LOCK`'s bit in the capability sets.
const CAP_IPC_LOCK: u32 = 14;

/// What [`lock`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locked {
    /// All present and future memory is locked.
    Yes,
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
    use nix::sys::mman::{MlockAllFlags, mlockall};
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
    let flags = MlockAllFlags::MCL_CURRENT
        | MlockAllFlags::MCL_FUTURE
        | MlockAllFlags::from_bits_retain(libc::MCL_ONFAULT);
    match mlockall(flags) {
        Ok(()) => Locked::Yes,
        Err(e) => Locked::No(format!(
            "mlockall refused ({e}); check the unit's SystemCallFilter and LimitMEMLOCK"
        )),
    }
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
}
