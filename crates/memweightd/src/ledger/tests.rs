//! The ledger alone, against a disk that fails on demand: examples named after the defects
//! they pin, and the two invariants as a proptest over arbitrary sequences of operations.

use std::io;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use super::*;

/// A state file in memory: what the last successful save wrote, and whether saves fail now.
#[derive(Debug, Clone, Default)]
struct FakeDisk(Arc<Mutex<Platter>>);

#[derive(Debug, Default)]
struct Platter {
    saved: State,
    failing: bool,
    /// Behave like the state writer: a copy handed in ([`Disk::submit`]) waits in `pending`
    /// until [`FakeDisk::writer_runs`]; a waited save replaces it.
    deferred: bool,
    pending: Option<State>,
    /// A copy handed in with [`Disk::hand_in`] (deferred disks): its ticket, and the last
    /// ticket written and failed.
    ticket: u64,
    pending_ticket: u64,
    written: u64,
    failed: u64,
}

impl FakeDisk {
    fn with(saved: State) -> Self {
        FakeDisk(Arc::new(Mutex::new(Platter {
            saved,
            ..Platter::default()
        })))
    }

    fn fail(&self, failing: bool) {
        self.0.lock().expect("disk").failing = failing;
    }

    fn saved(&self) -> State {
        self.0.lock().expect("disk").saved.clone()
    }
}

impl FakeDisk {
    fn deferred() -> Self {
        let d = FakeDisk::default();
        d.0.lock().expect("disk").deferred = true;
        d
    }

    /// The writer thread's turn: the copy handed in is written, or kept for a retry.
    fn writer_runs(&self) {
        let mut p = self.0.lock().expect("disk");
        let ticket = std::mem::take(&mut p.pending_ticket);
        if p.failing {
            // A copy someone asks about is not retried.
            if ticket > 0 {
                p.failed = ticket;
                p.pending = None;
            }
        } else if let Some(st) = p.pending.take() {
            p.saved = st;
            p.written = p.written.max(ticket);
        }
    }
}

fn full() -> StateError {
    StateError::Io {
        path: "fake/state.json".into(),
        source: io::Error::other("no space left on device"),
    }
}

impl Disk for FakeDisk {
    fn load(&self) -> Result<State, StateError> {
        Ok(self.saved())
    }

    fn save(&self, state: &State) -> Result<(), StateError> {
        let mut p = self.0.lock().expect("disk");
        // A waited copy is the newest: it replaces one handed in before (the writer writes
        // only the newest), and a failed one is not retried.
        p.pending = None;
        if p.failing {
            return Err(full());
        }
        p.saved = state.clone();
        Ok(())
    }

    fn submit(&self, state: &State) -> Result<(), StateError> {
        let mut p = self.0.lock().expect("disk");
        if !p.deferred {
            drop(p);
            return self.save(state);
        }
        p.pending = Some(state.clone());
        if p.failing { Err(full()) } else { Ok(()) }
    }

    fn settled(&self) -> bool {
        self.0.lock().expect("disk").pending.is_none()
    }

    fn hand_in(&self, state: &State) -> Result<Ticket, StateError> {
        let mut p = self.0.lock().expect("disk");
        if !p.deferred {
            drop(p);
            return self.save(state).map(|()| Ticket::WRITTEN);
        }
        p.ticket += 1;
        p.pending_ticket = p.ticket;
        p.pending = Some(state.clone());
        Ok(Ticket(p.ticket))
    }

    fn fate(&self, ticket: Ticket) -> Fate {
        let p = self.0.lock().expect("disk");
        if p.written >= ticket.0 {
            Fate::Written
        } else if p.failed >= ticket.0 {
            Fate::Failed("no space left on device".into())
        } else {
            Fate::Pending
        }
    }
}

const M: u64 = 1 << 20;

fn orig(high: Limit, low: Limit) -> Originals {
    Originals { high, low }
}

fn ledger(disk: &FakeDisk) -> Ledger {
    Ledger::open(Box::new(disk.clone()), Some("boot".into())).expect("open")
}

/// An override of the weight alone.
fn weight(weight: u32) -> Override {
    Override {
        weight,
        min: None,
        max: None,
    }
}

fn entry(high: &str, low: &str, id: Option<u64>) -> Original {
    Original {
        high: high.into(),
        low: low.into(),
        id,
    }
}

#[test]
fn regression_failed_state_save_leaves_a_new_cgroup_unwritable() {
    let disk = FakeDisk::default();
    let mut l = ledger(&disk);
    assert!(!l.adopt("a", Some(7), orig(Limit::Max, Limit::Bytes(0)), true, 1));
    assert!(!l.may_write("a"), "adopted, not on disk");
    disk.fail(true);
    assert_eq!(
        l.record(true),
        Recorded {
            pending: 1,
            saved: false
        }
    );
    assert!(!l.may_write("a"));
    assert!(
        !l.state.originals.contains_key("a"),
        "not on disk, so not in the state either"
    );
    disk.fail(false);
    assert!(l.record(true).saved);
    assert!(l.may_write("a"));
    assert_eq!(disk.saved().originals["a"], entry("max", "0", Some(7)));
}

#[test]
fn regression_dry_run_records_nothing_and_restores_what_an_enforcing_run_wrote() {
    let mut st = State::default();
    st.originals.insert("a".into(), entry("max", "0", Some(1)));
    let disk = FakeDisk::with(st);
    let mut l = ledger(&disk);
    assert!(!l.adopt(
        "a",
        Some(1),
        orig(Limit::Bytes(M), Limit::Bytes(0)),
        false,
        1
    ));
    l.hold_nothing();
    assert_eq!(l.record(false).pending, 0);
    assert!(!l.may_write("a"));
    let due = l.restores_due(&BTreeSet::from(["a"]), |_| false);
    assert_eq!(
        due,
        [Due {
            path: "a".into(),
            originals: orig(Limit::Max, Limit::Bytes(0)),
            id: Some(1),
        }]
    );
    assert!(l.restored(&due[0], &Restored::Done));
    assert!(l.flush());
    assert!(disk.saved().originals.is_empty());
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
    l.set_override("b", weight(1), true).expect("saved");
    assert_eq!(
        disk.saved().originals.get("a"),
        Some(&entry("max", "0", Some(1))),
        "the original on disk survives the failed save"
    );
    assert!(l.record(true).saved);
    assert!(l.may_write("a"));
}

#[test]
fn regression_recreated_cgroup_is_not_given_the_earlier_ones_original() {
    let mut st = State::default();
    st.originals
        .insert("a".into(), entry("1048576", "0", Some(1)));
    let disk = FakeDisk::with(st);
    let mut l = ledger(&disk);
    let now = orig(Limit::Max, Limit::Bytes(0));
    assert!(
        !l.adopt("a", Some(2), now, true, 1),
        "another id: not resumed"
    );
    assert_eq!(l.holding("a").map(Holding::originals), Some(now));
    assert!(l.record(true).saved);
    assert_eq!(disk.saved().originals["a"], entry("max", "0", Some(2)));
}

#[test]
fn regression_version_1_original_is_tied_to_the_cgroup_and_resumed() {
    let mut st = State::default();
    st.originals.insert("a".into(), entry("1048576", "0", None));
    let disk = FakeDisk::with(st);
    let mut l = ledger(&disk);
    // What the files hold now is the daemon's own earlier write: the original stays.
    assert!(l.adopt(
        "a",
        Some(9),
        orig(Limit::Bytes(M / 2), Limit::Bytes(0)),
        true,
        1
    ));
    assert!(l.may_write("a"));
    assert_eq!(
        l.holding("a").map(Holding::originals),
        Some(orig(Limit::Bytes(M), Limit::Bytes(0)))
    );
    assert!(l.flush());
    assert_eq!(disk.saved().originals["a"].id, Some(9));
}

#[test]
fn regression_high_raised_while_the_daemon_was_down_is_the_new_original() {
    let mut st = State::default();
    st.originals
        .insert("a".into(), entry("1048576", "0", Some(1)));
    let disk = FakeDisk::with(st);
    let mut l = ledger(&disk);
    l.adopt("a", Some(1), orig(Limit::Max, Limit::Bytes(0)), true, 3);
    let h = l.holding("a").expect("held");
    assert_eq!(h.originals().high, Limit::Max);
    assert!(h.operator().is_some_and(|o| o.contains("tick 3")), "{h:?}");
    assert!(l.flush());
    assert_eq!(disk.saved().originals["a"].high, "max");
}

#[test]
fn regression_operator_change_becomes_the_original_and_is_recorded() {
    let disk = FakeDisk::default();
    let mut l = ledger(&disk);
    l.adopt("a", Some(1), orig(Limit::Max, Limit::Bytes(0)), true, 1);
    assert!(l.record(true).saved);
    l.wrote("a", Some(Limit::Bytes(64 * M)), None);
    // The daemon's own write, read back rounded to a page: not a change.
    let read_back = orig(Limit::Bytes(64 * M), Limit::Bytes(0));
    assert_eq!(
        l.reconcile("a", read_back, 2, || unreachable!("no change")),
        Reconciled::Same
    );
    let changed = orig(Limit::Bytes(64 * M), Limit::Bytes(8 * M));
    assert_eq!(
        l.reconcile("a", changed, 2, || Some(1)),
        Reconciled::Operator
    );
    assert_eq!(
        l.holding("a").map(Holding::originals),
        Some(orig(Limit::Max, Limit::Bytes(8 * M)))
    );
    assert!(l.flush());
    assert_eq!(disk.saved().originals["a"].low, (8 * M).to_string());
    // Another cgroup under the name: let go of, its original dropped.
    let other = orig(Limit::Max, Limit::Bytes(0));
    assert_eq!(
        l.reconcile("a", other, 3, || Some(2)),
        Reconciled::Recreated
    );
    assert!(l.holding("a").is_none());
    assert!(l.flush());
    assert!(disk.saved().originals.is_empty());
}

#[test]
fn regression_failed_restore_keeps_the_original_recorded() {
    let disk = FakeDisk::default();
    let mut l = ledger(&disk);
    l.adopt("a", Some(1), orig(Limit::Max, Limit::Bytes(0)), true, 1);
    assert!(l.record(true).saved);
    l.wrote("a", Some(Limit::Bytes(M)), None);
    assert!(l.release("a", false));
    let due = l.restores_due(&BTreeSet::new(), |_| false);
    assert_eq!(due.len(), 1);
    assert!(!l.restore_is_noop("a"), "it was written: a real restore");
    assert!(!l.restored(&due[0], &Restored::Failed("EBUSY".into())));
    l.restores_done();
    assert!(l.flush());
    assert!(disk.saved().originals.contains_key("a"), "kept");
    let again = l.restores_due(&BTreeSet::new(), |_| false);
    assert_eq!(again, due, "tried again");
    assert!(l.restored(&again[0], &Restored::Done));
    assert!(l.flush());
    assert!(disk.saved().originals.is_empty());
}

#[test]
fn regression_release_of_an_untouched_cgroup_writes_nothing_back() {
    let disk = FakeDisk::default();
    let mut l = ledger(&disk);
    l.adopt("idle", Some(1), orig(Limit::Max, Limit::Bytes(0)), true, 1);
    l.adopt("busy", Some(2), orig(Limit::Max, Limit::Bytes(0)), true, 1);
    assert!(l.record(true).saved);
    assert_eq!(l.release_all(|p| p == "busy"), 2);
    assert!(l.restore_is_noop("idle"));
    assert!(
        !l.restore_is_noop("busy"),
        "a write in flight may land: restore"
    );
    assert_eq!(
        l.take_released("busy"),
        Some((orig(Limit::Max, Limit::Bytes(0)), Some(2)))
    );
    assert_eq!(l.take_released("busy"), None, "taken once");
}

#[test]
fn regression_ancestor_is_not_raised_before_its_original_is_saved() {
    let disk = FakeDisk::default();
    let mut l = ledger(&disk);
    let wanted = BTreeMap::from([("p".to_owned(), 8 * M)]);
    disk.fail(true);
    assert!(
        l.raise_ancestors(&wanted, |_| Some(Limit::Bytes(0)))
            .is_empty()
    );
    assert!(!l.has_ancestors(), "not on disk, so not recorded");
    disk.fail(false);
    assert_eq!(
        l.raise_ancestors(&wanted, |_| Some(Limit::Bytes(0))),
        [("p".to_owned(), Limit::Bytes(8 * M))]
    );
    assert_eq!(disk.saved().ancestors["p"], "0");
    // Raised already, as wanted: nothing to write.
    assert!(
        l.raise_ancestors(&wanted, |_| Some(Limit::Bytes(8 * M)))
            .is_empty()
    );
    // No longer wanted: its original goes back, then the ledger drops it.
    let none = BTreeMap::new();
    assert_eq!(
        l.ancestors_to_restore(&none),
        [("p".to_owned(), Limit::Bytes(0))]
    );
    l.ancestor_restored("p");
    assert!(l.flush());
    assert!(disk.saved().ancestors.is_empty());
}

#[test]
fn regression_originals_of_an_earlier_boot_are_dropped() {
    let mut st = State::default();
    st.originals.insert("a".into(), entry("max", "0", Some(1)));
    st.ancestors.insert("p".into(), "0".into());
    st.boot_id = Some("before".into());
    let disk = FakeDisk::with(st);
    let mut l = ledger(&disk);
    assert_eq!(l.recorded_counts(), (0, 0));
    assert!(l.flush());
    assert_eq!(disk.saved().boot_id.as_deref(), Some("boot"));
    assert!(disk.saved().originals.is_empty());
}

#[test]
fn regression_override_whose_save_fails_changes_nothing() {
    let disk = FakeDisk::default();
    let mut l = ledger(&disk);
    let ov = weight(5);
    l.set_override("a", ov, true).expect("saved");
    disk.fail(true);
    let other = Override { weight: 9, ..ov };
    assert!(l.set_override("a", other, true).is_err());
    assert_eq!(l.overrides().get("a"), Some(&ov));
    assert!(l.unset_override("a", true).is_err());
    assert_eq!(l.overrides().get("a"), Some(&ov));
    disk.fail(false);
    assert_eq!(l.unset_override("a", true).ok(), Some((true, Saving::Done)));
    assert!(disk.saved().overrides.is_empty());
}

/// The ticket of a change handed in to a disk that writes later.
fn pending(saving: Result<Saving, StateError>) -> Ticket {
    match saving {
        Ok(Saving::Pending(t)) => t,
        other => panic!("a change on the writer thread's disk is answered later: {other:?}"),
    }
}

/// Issue 23: each `set` saved the state file with fsync on the loop's thread, so a flood of
/// them on a slow disk stalled the ticks. A `set` now only hands its copy in, and its override
/// is in force once the copy is on disk.
#[test]
fn regression_a_set_waited_for_the_disk_on_the_loops_thread() {
    let disk = FakeDisk::deferred();
    let mut l = ledger(&disk);
    let t = pending(l.set_override("a", weight(5), true));
    assert!(disk.saved().overrides.is_empty(), "nothing written yet");
    assert!(l.saving());
    assert_eq!(
        l.override_in_force("a"),
        None,
        "not in force before it is on disk"
    );
    assert_eq!(l.overrides().get("a"), Some(&weight(5)), "shown as set");
    assert!(l.settle().is_empty(), "still on its way");
    // The same value again while on its way: the same ticket, no new copy.
    assert_eq!(
        l.set_override("a", weight(5), true).expect("same"),
        Saving::Pending(t)
    );
    disk.writer_runs();
    assert_eq!(l.settle(), vec![(t, Ok(()))]);
    assert_eq!(l.override_in_force("a"), Some(weight(5)));
    assert!(!l.saving());
    assert_eq!(disk.saved().overrides.get("a"), Some(&weight(5)));
}

/// A `set` whose copy failed to land is taken back, and with it any older change on its way;
/// a newer change on its way keeps its own value.
#[test]
fn a_set_whose_copy_fails_is_taken_back_and_the_copy_without_it_handed_in() {
    let disk = FakeDisk::deferred();
    let mut l = ledger(&disk);
    let t1 = pending(l.set_override("a", weight(5), true));
    disk.writer_runs();
    assert_eq!(l.settle(), vec![(t1, Ok(()))]);
    let t2 = pending(l.set_override("a", weight(6), true));
    let Ok((true, Saving::Pending(t3))) = l.unset_override("a", true) else {
        panic!("an unset of an override in force is pending");
    };
    let t4 = pending(l.set_override("b", weight(7), true));
    disk.fail(true);
    disk.writer_runs();
    let ended = l.settle();
    assert_eq!(ended.len(), 3, "{ended:?}");
    assert!(
        ended
            .iter()
            .all(|(t, r)| [t2, t3, t4].contains(t) && r.is_err())
    );
    assert_eq!(
        l.overrides().get("a"),
        Some(&weight(5)),
        "back where it was"
    );
    assert_eq!(l.overrides().get("b"), None);
    assert_eq!(l.override_in_force("a"), Some(weight(5)));
    assert!(!l.saving());
    // The copy without them is handed in at once and lands once the disk works.
    disk.fail(false);
    disk.writer_runs();
    assert_eq!(disk.saved().overrides.get("a"), Some(&weight(5)));
    assert_eq!(disk.saved().overrides.get("b"), None);
}

/// A disk that counts how each copy came: waited for ([`Disk::save`]) or handed in
/// ([`Disk::submit`], kept aside as the state writer would before writing it).
#[derive(Debug, Clone, Default)]
struct CountingDisk(Arc<Mutex<(usize, usize, State)>>);

impl Disk for CountingDisk {
    fn load(&self) -> Result<State, StateError> {
        Ok(State::default())
    }

    fn save(&self, state: &State) -> Result<(), StateError> {
        let mut c = self.0.lock().expect("disk");
        c.0 += 1;
        c.2 = state.clone();
        Ok(())
    }

    fn submit(&self, state: &State) -> Result<(), StateError> {
        let mut c = self.0.lock().expect("disk");
        c.1 += 1;
        c.2 = state.clone();
        Ok(())
    }
}

impl CountingDisk {
    fn counts(&self) -> (usize, usize) {
        let c = self.0.lock().expect("disk");
        (c.0, c.1)
    }
}

/// Issue 23: every save ran on the loop's thread. The loop now waits only for a save that
/// adds or changes an original; a tick that only drops one after its restore hands it in.
#[test]
fn regression_a_tick_that_only_drops_originals_does_not_wait_for_the_disk() {
    let disk = CountingDisk::default();
    let mut l = Ledger::open(Box::new(disk.clone()), Some("boot".into())).expect("open");
    l.adopt("a", Some(1), orig(Limit::Max, Limit::Bytes(0)), true, 1);
    assert!(!l.may_write("a"));
    assert!(l.record(true).saved);
    assert_eq!(disk.counts(), (1, 0), "the new original is waited for");
    assert!(l.may_write("a"));
    // Nothing new: nothing saved.
    assert!(l.record(true).saved);
    assert_eq!(disk.counts(), (1, 0));
    // Released and restored: the drop is handed in, not waited for.
    l.release("a", false);
    let due = l.restores_due(&BTreeSet::new(), |_| false);
    assert!(l.restored(&due[0], &Restored::Done));
    assert!(l.record(true).saved);
    assert_eq!(disk.counts(), (1, 1));
    // An operator's change to a held cgroup's original is waited for again.
    l.adopt("b", Some(2), orig(Limit::Max, Limit::Bytes(0)), true, 2);
    l.record(true);
    assert_eq!(disk.counts(), (2, 1));
    assert_eq!(
        l.reconcile(
            "b",
            orig(Limit::Bytes(64 * M), Limit::Bytes(0)),
            3,
            || Some(2)
        ),
        Reconciled::Operator
    );
    l.record(true);
    assert_eq!(disk.counts(), (3, 1));
    // Shutdown waits for everything.
    l.drop_override("none");
    assert!(l.flush_durably());
}

/// Issue 23: a flood of `set` with the value in force saved the whole file each time.
#[test]
fn regression_a_set_that_changes_nothing_saves_nothing() {
    let disk = FakeDisk::default();
    let mut l = ledger(&disk);
    let ov = weight(5);
    l.set_override("a", ov, true).expect("saved");
    disk.fail(true);
    for _ in 0..100 {
        l.set_override("a", ov, true).expect("nothing to save");
    }
    assert_eq!(disk.saved().overrides.get("a"), Some(&ov));
    assert!(
        l.set_override("a", Override { weight: 6, ..ov }, true)
            .is_err()
    );
    assert_eq!(l.overrides().get("a"), Some(&ov));
    // Set in a dry run (not saved), then the same value once enforcing: saved.
    disk.fail(false);
    let seven = Override { weight: 7, ..ov };
    l.set_override("a", seven, false).expect("dry run");
    assert_eq!(disk.saved().overrides.get("a"), Some(&ov));
    l.set_override("a", seven, true).expect("saved");
    assert_eq!(disk.saved().overrides.get("a"), Some(&seven));
}

/// One step of what the controller does with the ledger.
#[derive(Debug, Clone)]
enum Op {
    Disk(bool),
    Adopt(usize, u64, Originals, bool),
    Reconcile(usize, Originals, u64),
    Wrote(usize, Option<Limit>, Option<Limit>),
    Record(bool),
    HoldNothing,
    Release(usize, bool),
    Forget(usize),
    Restore(Vec<usize>, Vec<u8>, bool),
    ReleaseAll(bool),
    Keep(usize),
    Ancestors(Option<u64>, Option<Limit>, bool),
    Flush,
    /// The state writer writes what was handed in (a no-op for a disk that saves at once).
    WriterRuns,
}

const PATHS: [&str; 3] = ["a", "b", "c/d"];

fn limit() -> impl Strategy<Value = Limit> {
    prop_oneof![
        Just(Limit::Max),
        Just(Limit::Bytes(0)),
        Just(Limit::Bytes(M)),
        Just(Limit::Bytes(M + 17)),
        Just(Limit::Bytes(64 * M)),
    ]
}

fn originals() -> impl Strategy<Value = Originals> {
    (limit(), limit()).prop_map(|(high, low)| Originals { high, low })
}

fn op() -> impl Strategy<Value = Op> {
    let path = 0..PATHS.len();
    prop_oneof![
        any::<bool>().prop_map(Op::Disk),
        (path.clone(), 1u64..3, originals(), any::<bool>())
            .prop_map(|(p, id, o, e)| Op::Adopt(p, id, o, e)),
        (path.clone(), originals(), 1u64..3).prop_map(|(p, o, id)| Op::Reconcile(p, o, id)),
        (
            path.clone(),
            proptest::option::of(limit()),
            proptest::option::of(limit())
        )
            .prop_map(|(p, h, l)| Op::Wrote(p, h, l)),
        any::<bool>().prop_map(Op::Record),
        Just(Op::HoldNothing),
        (path.clone(), any::<bool>()).prop_map(|(p, b)| Op::Release(p, b)),
        path.clone().prop_map(Op::Forget),
        (
            proptest::collection::vec(path.clone(), 0..3),
            proptest::collection::vec(0u8..4, 3),
            any::<bool>()
        )
            .prop_map(|(w, o, b)| Op::Restore(w, o, b)),
        any::<bool>().prop_map(Op::ReleaseAll),
        path.prop_map(Op::Keep),
        (
            proptest::option::of(0u64..(128 * M)),
            proptest::option::of(limit()),
            any::<bool>()
        )
            .prop_map(|(s, c, w)| Op::Ancestors(s, c, w)),
        Just(Op::Flush),
        Just(Op::WriterRuns),
    ]
}

/// Runs `ops` and checks the invariants after each one; `Err` says which broke where.
/// `deferred`: the disk behaves like the state writer (copies handed in land later).
fn run(ops: &[Op], deferred: bool) -> Result<(), String> {
    let disk = if deferred {
        FakeDisk::deferred()
    } else {
        FakeDisk::default()
    };
    let mut l = ledger(&disk);
    // What the disk held after the last step; an original leaves it only once its drop was
    // allowed (restored, gone, replaced, forgotten) since it was saved.
    let mut on_disk: BTreeMap<String, Original> = BTreeMap::new();
    let mut ancestor_on_disk = false;
    let mut allowed: BTreeSet<String> = BTreeSet::new();
    let mut ancestor_allowed = false;
    let mut released: BTreeSet<String> = BTreeSet::new();
    // After the first `keep` the controller is shutting down: it only keeps and saves.
    let mut shutting_down = false;
    for (n, op) in ops.iter().enumerate() {
        if shutting_down && !matches!(op, Op::Keep(_) | Op::Flush | Op::Disk(_) | Op::WriterRuns) {
            continue;
        }
        match op {
            Op::Disk(f) => disk.fail(*f),
            Op::Adopt(p, id, o, enforce) => {
                let p = PATHS[*p];
                if l.holding(p).is_none() {
                    if l.state
                        .originals
                        .get(p)
                        .is_some_and(|e| e.id.is_some_and(|was| was != *id))
                    {
                        allowed.insert(p.to_owned());
                    }
                    l.adopt(p, Some(*id), *o, *enforce, n as u64);
                }
            }
            Op::Reconcile(p, o, id) => {
                let p = PATHS[*p];
                if l.reconcile(p, *o, n as u64, || Some(*id)) == Reconciled::Recreated {
                    allowed.insert(p.to_owned());
                }
            }
            Op::Wrote(p, h, lo) => {
                // The controller writes only what the ledger lets it (checked below).
                let p = PATHS[*p];
                if l.may_write(p) {
                    l.wrote(p, *h, *lo);
                }
            }
            Op::Record(enforce) => {
                l.record(*enforce);
            }
            Op::HoldNothing => l.hold_nothing(),
            Op::Release(p, busy) => {
                l.release(PATHS[*p], *busy);
            }
            Op::Forget(p) => {
                let p = PATHS[*p];
                l.forget(p);
                allowed.insert(p.to_owned());
                released.remove(p);
            }
            Op::Restore(wanted, outcomes, busy_b) => {
                let wanted: BTreeSet<&str> = wanted.iter().map(|i| PATHS[*i]).collect();
                let busy = |p: &str| *busy_b && p == "b";
                let due = l.restores_due(&wanted, busy);
                for (i, d) in due.iter().enumerate() {
                    if l.may_write(&d.path) || busy(&d.path) {
                        return Err(format!("op {n}: restore of {} while held or busy", d.path));
                    }
                    let outcome = if l.restore_is_noop(&d.path) {
                        Restored::Done
                    } else {
                        match outcomes[i % outcomes.len()] {
                            0 => Restored::Done,
                            1 => Restored::Gone,
                            2 => Restored::Replaced,
                            _ => Restored::Failed("EIO".into()),
                        }
                    };
                    if l.restored(d, &outcome) {
                        allowed.insert(d.path.clone());
                    }
                }
                l.restores_done();
            }
            Op::ReleaseAll(busy_b) => {
                l.release_all(|p| *busy_b && p == "b");
                released = PATHS.iter().map(|p| (*p).to_owned()).collect();
            }
            Op::Keep(p) => {
                let p = PATHS[*p];
                if released.remove(p)
                    && let Some((o, id)) = l.take_released(p)
                {
                    l.keep(p, o, id);
                    shutting_down = true;
                }
            }
            Op::Ancestors(sum, current, restore_ok) => {
                let wanted: BTreeMap<String, u64> =
                    sum.iter().map(|s| ("p".to_owned(), *s)).collect();
                for (a, _) in l.ancestors_to_restore(&wanted) {
                    if *restore_ok {
                        l.ancestor_restored(&a);
                        ancestor_allowed = true;
                    }
                }
                for (a, _) in l.raise_ancestors(&wanted, |_| *current) {
                    if !disk.saved().ancestors.contains_key(&a) {
                        return Err(format!("op {n}: raised {a} before its original was saved"));
                    }
                }
            }
            Op::Flush => {
                l.flush();
            }
            Op::WriterRuns => disk.writer_runs(),
        }
        let saved = disk.saved();
        for p in on_disk.keys() {
            if !saved.originals.contains_key(p) && !allowed.remove(p) {
                return Err(format!(
                    "op {n} ({op:?}): the recorded original of {p} was lost"
                ));
            }
        }
        if ancestor_on_disk && !saved.ancestors.contains_key("p") && !ancestor_allowed {
            return Err(format!("op {n} ({op:?}): the ancestor's original was lost"));
        }
        for p in PATHS {
            if l.may_write(p) && !saved.originals.contains_key(p) {
                return Err(format!(
                    "op {n} ({op:?}): {p} writable, original not on disk"
                ));
            }
        }
        // A new or changed original on disk owes its drop again.
        for (p, o) in &saved.originals {
            if on_disk.get(p) != Some(o) {
                allowed.remove(p);
            }
        }
        if saved.ancestors.contains_key("p") != ancestor_on_disk {
            ancestor_allowed = false;
        }
        on_disk = saved.originals;
        ancestor_on_disk = saved.ancestors.contains_key("p");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the controller does and whenever the disk fails: a recorded original leaves
    /// the disk only restored (or its cgroup gone or replaced), and no cgroup is writable,
    /// no ancestor raised, before its original is on disk.
    #[test]
    fn ledger_keeps_its_invariants(ops in proptest::collection::vec(op(), 1..60)) {
        if let Err(e) = run(&ops, false) {
            prop_assert!(false, "{}", e);
        }
    }

    /// The same with saves off the loop's thread (issue 23): copies handed in without
    /// waiting land later, or never if the disk fails; waited ones at once.
    #[test]
    fn ledger_keeps_its_invariants_with_the_state_writer(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        if let Err(e) = run(&ops, true) {
            prop_assert!(false, "{}", e);
        }
    }
}
