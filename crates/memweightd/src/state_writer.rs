//! The state file written off the control loop's thread.
//!
//! [`StateWriter`] is the daemon's [`Disk`]: one dedicated thread owns every write of the
//! state file ([`StateStore::save`]: new file, fsync, rename, keeping the previous
//! generation). The loop hands it copies of the ledger's state in three ways:
//!
//! * [`Disk::submit`] — *save soon*, never waited for: the copy replaces any copy still
//!   waiting (batched: only the newest is written), and a failed write is retried with a
//!   growing delay (1 s up to a minute) and a warning saying what to do. What a tick drops
//!   (originals restored, overrides of gone cgroups) goes this way.
//! * [`Disk::save`] — *save now and say when it is on disk*: the loop waits. The ledger asks
//!   for it only when the save adds or changes an original (a cgroup adopted, an operator's
//!   change, an ancestor's `memory.low`, a restore that could not be made at shutdown), and
//!   at shutdown. That keeps the safety rule without change: an original is on disk before
//!   [`crate::ledger::Ledger::may_write`] allows the write that lowers the limit, so a crash
//!   after that write always finds the original to restore. A failed waited save is not
//!   retried here: the ledger takes the originals back out of its copy and records them again
//!   next tick, so a stale copy written late can never replace an original already on disk.
//! * [`Disk::hand_in`] — *save now, and I will ask*: a `set`/`unset`'s copy; the loop does not
//!   wait, and asks [`Disk::fate`] later whether the copy (or a newer one, which carries its
//!   change) is on disk or failed. Not retried when it fails, like a waited save.
//!
//! Every copy carries a generation; the thread always writes the newest copy waiting and never
//! an older one after a newer, so the file only moves forward. While the last write failed,
//! `submit` still takes the copy (for the next retry) but says it is not saved, and the ledger
//! keeps its change pending.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use tracing::{info, warn};

use crate::ledger::{Disk, Fate, Ticket};
use crate::state::{State, StateError, StateStore};

/// The first delay before a failed write is tried again; it doubles up to [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest delay between two tries of a failed write.
pub const RETRY_MAX: Duration = Duration::from_secs(60);

/// The state file's writer thread, and the way the loop talks to it.
#[derive(Debug)]
pub struct StateWriter {
    shared: Arc<Shared>,
    store: Arc<StateStore>,
}

#[derive(Debug, Default)]
struct Shared {
    slot: Mutex<Slot>,
    /// A copy is waiting, or stop.
    wake: Condvar,
    /// A write finished (written or failed).
    done: Condvar,
}

#[derive(Debug, Default)]
struct Slot {
    /// The newest copy not written yet: generation, copy, and whether someone waits for it.
    waiting: Option<(u64, State, bool)>,
    /// The last generation handed in.
    handed: u64,
    /// The newest generation on disk.
    written: u64,
    /// The newest generation whose write failed and why; cleared by a write that succeeds.
    failed: Option<(u64, String)>,
    stop: bool,
}

impl StateWriter {
    /// Starts the writer thread of `store`.
    ///
    /// # Errors
    ///
    /// The thread cannot be started.
    pub fn spawn(store: StateStore) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let store = Arc::new(store);
        let (s, st) = (Arc::clone(&shared), Arc::clone(&store));
        thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || write_loop(&s, &st))?;
        Ok(StateWriter { shared, store })
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        lock(&self.shared)
    }

    fn unsaved(&self, message: String) -> StateError {
        StateError::Unsaved {
            path: self.store.path(),
            message,
        }
    }

    /// Hands a copy in; returns its generation.
    fn take_copy(slot: &mut Slot, state: &State, wait: bool) -> u64 {
        slot.handed += 1;
        slot.waiting = Some((slot.handed, state.clone(), wait));
        slot.handed
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, Slot> {
    // A panic while holding the lock leaves plain data behind: use it.
    shared
        .slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for StateWriter {
    fn drop(&mut self) {
        // The thread writes what is waiting, then ends. Not joined: a write stuck in the
        // kernel must not hold up a reload or the exit (the file is replaced atomically).
        self.lock().stop = true;
        self.shared.wake.notify_all();
    }
}

impl Disk for StateWriter {
    fn load(&self) -> Result<State, StateError> {
        self.store.load()
    }

    fn save(&self, state: &State) -> Result<(), StateError> {
        let mut slot = self.lock();
        let generation = Self::take_copy(&mut slot, state, true);
        self.shared.wake.notify_all();
        loop {
            if slot.written >= generation {
                return Ok(());
            }
            if let Some((g, why)) = &slot.failed
                && *g >= generation
            {
                return Err(self.unsaved(why.clone()));
            }
            slot = self
                .shared
                .done
                .wait(slot)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn submit(&self, state: &State) -> Result<(), StateError> {
        let mut slot = self.lock();
        // Taken in any case (it replaces an older copy waiting for its retry), but while the
        // last write failed the caller is told it is not saved, and keeps its change pending.
        Self::take_copy(&mut slot, state, false);
        self.shared.wake.notify_all();
        match &slot.failed {
            Some((_, why)) => Err(self.unsaved(why.clone())),
            None => Ok(()),
        }
    }

    fn settled(&self) -> bool {
        let slot = self.lock();
        slot.written >= slot.handed
    }

    fn hand_in(&self, state: &State) -> Result<Ticket, StateError> {
        let mut slot = self.lock();
        let generation = Self::take_copy(&mut slot, state, true);
        self.shared.wake.notify_all();
        Ok(Ticket(generation))
    }

    fn fate(&self, ticket: Ticket) -> Fate {
        let slot = self.lock();
        if slot.written >= ticket.0 {
            return Fate::Written;
        }
        match &slot.failed {
            // The write of this copy, or of a newer one that carried it, failed. A copy that
            // is retried later may still land: the ledger answers the failure by handing in a
            // copy without the change, and the writer never writes an older copy after it.
            Some((g, why)) if *g >= ticket.0 => Fate::Failed(why.clone()),
            _ => Fate::Pending,
        }
    }
}

/// The writer thread: writes the newest copy waiting, retries a failed one (unless waited
/// for, or a newer one came) after a growing delay, ends on stop once nothing is waiting.
fn write_loop(shared: &Shared, store: &StateStore) {
    let mut delay = RETRY_FIRST;
    let mut failing = false;
    loop {
        let (generation, state, waited) = {
            let mut slot = lock(shared);
            loop {
                if let Some(w) = slot.waiting.take() {
                    break w;
                }
                if slot.stop {
                    return;
                }
                slot = shared
                    .wake
                    .wait(slot)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        let result = store.save(&state);
        let mut slot = lock(shared);
        match result {
            Ok(()) => {
                slot.written = slot.written.max(generation);
                slot.failed = None;
                shared.done.notify_all();
                if failing {
                    info!(file = %store.path().display(), "the state file is saved again");
                }
                failing = false;
                delay = RETRY_FIRST;
            }
            Err(e) => {
                slot.failed = Some((generation, e.to_string()));
                if !waited && slot.waiting.is_none() && !slot.stop {
                    slot.waiting = Some((generation, state, false));
                }
                shared.done.notify_all();
                if slot.stop {
                    warn!(error = %e, "cannot save the state file at exit; the previous copy stays");
                    continue;
                }
                warn!(
                    error = %e,
                    retry_in_s = delay.as_secs(),
                    dir = %store.path().parent().map_or_else(PathBuf::new, PathBuf::from).display(),
                    "cannot save the state file; trying again. Free space in the state directory \
                     or fix its permissions (state_dir in the config). Until it saves, runtime \
                     overrides are refused and new cgroups are not written to (their original \
                     limits are not on disk)"
                );
                failing = true;
                // Wait out the delay, cut short only by a copy someone waits for, or stop.
                let until = std::time::Instant::now() + delay;
                loop {
                    let now = std::time::Instant::now();
                    if now >= until
                        || slot.stop
                        || slot.waiting.as_ref().is_some_and(|(_, _, w)| *w)
                    {
                        break;
                    }
                    slot = shared
                        .wake
                        .wait_timeout(slot, until - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
                delay = (delay * 2).min(RETRY_MAX);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::state::one_original;

    /// What `f` gives once it gives something, asked every 10 ms for up to 5 s.
    fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        for _ in 0..500 {
            if let Some(t) = f() {
                return t;
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("{what} never happened");
    }

    fn wait_settled(w: &StateWriter) {
        eventually("the writer settling", || w.settled().then_some(()));
    }

    #[test]
    fn a_waited_save_is_on_disk_when_it_returns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = StateWriter::spawn(StateStore::new(dir.path())).expect("spawn");
        w.save(&one_original("a", 1)).expect("saved");
        assert!(
            StateStore::new(dir.path())
                .load()
                .expect("load")
                .originals
                .contains_key("a")
        );
        assert!(w.settled());
    }

    #[test]
    fn submitted_copies_are_batched_and_the_newest_lands() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = StateWriter::spawn(StateStore::new(dir.path())).expect("spawn");
        for i in 0..200 {
            w.submit(&one_original(&format!("c{i}"), 1))
                .expect("handed in");
        }
        wait_settled(&w);
        let on_disk = StateStore::new(dir.path()).load().expect("load");
        assert_eq!(on_disk.originals.keys().collect::<Vec<_>>(), ["c199"]);
    }

    /// What makes every write fail, even for root: a directory where the new file goes.
    fn block(dir: &std::path::Path) -> std::path::PathBuf {
        let blocker = dir.join(".state.json.tmp");
        fs::create_dir_all(&blocker).expect("blocker");
        blocker
    }

    #[test]
    fn regression_a_failed_save_is_reported_to_its_waiter_and_never_lands_late() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = StateWriter::spawn(StateStore::new(dir.path())).expect("spawn");
        w.save(&one_original("a", 1)).expect("saved");
        let blocker = block(dir.path());
        let err = w.save(&one_original("b", 1)).expect_err("blocked");
        assert!(err.to_string().contains("cannot be saved"), "{err}");
        assert!(
            w.submit(&one_original("c", 1)).is_err(),
            "not saved while failing"
        );
        assert!(!w.settled());
        fs::remove_dir(&blocker).expect("unblock");
        // The next waited save succeeds; "b", given up, never lands after it.
        w.save(&one_original("d", 1)).expect("saved");
        thread::sleep(RETRY_FIRST + Duration::from_millis(200));
        let on_disk = StateStore::new(dir.path()).load().expect("load");
        assert_eq!(on_disk.originals.keys().collect::<Vec<_>>(), ["d"]);
        assert!(w.settled());
    }

    fn fate_of(w: &StateWriter, t: Ticket) -> Fate {
        eventually("the ticket's end", || {
            Some(w.fate(t)).filter(|f| *f != Fate::Pending)
        })
    }

    #[test]
    fn a_ticket_ends_written_or_failed_and_the_caller_never_waits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = StateWriter::spawn(StateStore::new(dir.path())).expect("spawn");
        let t1 = w.hand_in(&one_original("a", 1)).expect("handed in");
        assert_eq!(fate_of(&w, t1), Fate::Written);
        let stored = StateStore::new(dir.path()).load().expect("load");
        assert!(stored.originals.contains_key("a"));
        let blocker = block(dir.path());
        let t2 = w.hand_in(&one_original("b", 1)).expect("handed in");
        let Fate::Failed(why) = fate_of(&w, t2) else {
            panic!("the write cannot have landed");
        };
        assert!(why.contains(".state.json.tmp"), "{why}");
        assert_eq!(w.fate(t1), Fate::Written, "an ended ticket stays ended");
        fs::remove_dir(&blocker).expect("unblock");
        // A newer copy that lands carries every older change.
        let t3 = w.hand_in(&one_original("c", 1)).expect("handed in");
        assert_eq!(fate_of(&w, t3), Fate::Written);
        assert_eq!(w.fate(t2), Fate::Written);
    }

    #[test]
    fn a_handed_in_copy_that_fails_is_retried_until_it_lands() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = StateWriter::spawn(StateStore::new(dir.path())).expect("spawn");
        let blocker = block(dir.path());
        w.submit(&one_original("a", 1)).expect("handed in");
        thread::sleep(Duration::from_millis(300));
        assert!(!w.settled(), "the write failed");
        fs::remove_dir(&blocker).expect("unblock");
        wait_settled(&w);
        let on_disk = StateStore::new(dir.path()).load().expect("load");
        assert_eq!(on_disk.originals.keys().collect::<Vec<_>>(), ["a"]);
        w.submit(&one_original("e", 1)).expect("accepted again");
        wait_settled(&w);
    }
}
