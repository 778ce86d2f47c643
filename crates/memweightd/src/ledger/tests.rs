//! The ledger alone, against a disk that fails on demand.

use std::io;
use std::sync::{Arc, Mutex};

use super::*;

/// A state file in memory: what the last successful save wrote, and whether saves fail now.
#[derive(Debug, Clone, Default)]
struct FakeDisk(Arc<Mutex<Platter>>);

#[derive(Debug, Default)]
struct Platter {
    saved: State,
    failing: bool,
}

impl FakeDisk {
    fn with(saved: State) -> Self {
        FakeDisk(Arc::new(Mutex::new(Platter {
            saved,
            failing: false,
        })))
    }

    fn fail(&self, failing: bool) {
        self.0.lock().expect("disk").failing = failing;
    }

    fn saved(&self) -> State {
        self.0.lock().expect("disk").saved.clone()
    }
}

impl Disk for FakeDisk {
    fn load(&self) -> Result<State, StateError> {
        Ok(self.saved())
    }

    fn save(&self, state: &State) -> Result<(), StateError> {
        let mut p = self.0.lock().expect("disk");
        if p.failing {
            return Err(StateError::Io {
                path: "fake/state.json".into(),
                source: io::Error::other("no space left on device"),
            });
        }
        p.saved = state.clone();
        Ok(())
    }
}

const M: u64 = 1 << 20;

fn orig(high: Limit, low: Limit) -> Originals {
    Originals { high, low }
}

fn ledger(disk: &FakeDisk) -> Ledger {
    Ledger::open(Box::new(disk.clone()), Some("boot".into())).expect("open")
}

fn entry(high: &str, low: &str, id: Option<u64>) -> Original {
    Original {
        high: high.into(),
        low: low.into(),
        id,
    }
}

/// Found by `ledger_keeps_its_invariants`: a dry run's restore fails, the daemon is reloaded
/// to enforce, and the save that would record the cgroup fails too. The original already on
/// disk was taken out of the state with the new entry, and the next save dropped it.
#[test]
fn regression_failed_save_after_a_dry_run_kept_the_original_off_disk() {
    let mut st = State::default();
    st.originals.insert("a".into(), entry("max", "0", Some(1)));
    let disk = FakeDisk::with(st);
    let mut l = ledger(&disk);
    // Dry run: resumed, not held; its restore fails.
    l.adopt(
        "a",
        Some(1),
        orig(Limit::Bytes(M), Limit::Bytes(0)),
        false,
        1,
    );
    l.hold_nothing();
    let due = l.restores_due(&BTreeSet::from(["a"]), |_| false);
    assert!(!l.restored(&due[0], &Restored::Failed("EIO".into())));
    assert!(l.record(false).saved);
    // Enforcing again, and the disk is full.
    disk.fail(true);
    assert_eq!(
        l.record(true),
        Recorded {
            pending: 1,
            saved: false
        }
    );
    assert!(!l.may_write("a"));
    disk.fail(false);
    l.set_override(
        "b",
        Override {
            weight: 1,
            min: None,
            max: None,
        },
        true,
    )
    .expect("saved");
    assert_eq!(
        disk.saved().originals.get("a"),
        Some(&entry("max", "0", Some(1))),
        "the original on disk survives the failed save"
    );
    assert!(l.record(true).saved);
    assert!(l.may_write("a"));
}
