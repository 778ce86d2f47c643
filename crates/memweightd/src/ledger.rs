//! The ledger of originals: the one owner of every limit the daemon must give back.
//!
//! For each managed cgroup the ledger holds its originals (`memory.high`/`memory.low` when
//! adopted, or as an operator later set them), its id, what the daemon believes the files hold
//! (`known`: its own last write, or what it read), and whether the originals are on disk
//! (`recorded`); for each ancestor whose `memory.low` the daemon raised, that ancestor's
//! original. It owns the on-disk copy (the [`State`] saved through a [`Disk`], the state file
//! in the daemon) together with the runtime overrides that share the file.
//!
//! It does no cgroup I/O and never calls back into the controller: each operation (adopt,
//! reconcile, record, restore, release) changes the ledger and returns what happened — the
//! restores to do, whether an original was dropped, the raises now allowed — and the
//! controller does the writes and the counting. Two invariants, proptested below on the
//! ledger alone with a disk that fails at random:
//!
//! * **Never loses a recorded original.** An original on disk leaves the disk only when it
//!   was restored (or its cgroup is gone, or replaced by another of the same name).
//! * **Never writes before the original is durable.** [`Ledger::may_write`] and the raises
//!   [`Ledger::raise_ancestors`] returns are only for cgroups whose original is in the last
//!   successful save.
//!
//! **Saves off the loop's thread.** The disk is the state file's writer thread in the daemon
//! ([`crate::state_writer::StateWriter`]); every write of the file happens there, in order.
//! Three kinds of save:
//!
//! * **Waited for** ([`Disk::save`]) when the save adds or changes an original (a cgroup
//!   adopted, an operator's change, an ancestor raised for the first time, a restore kept at
//!   shutdown), and at shutdown. The safety rule is kept exactly as when the loop saved by
//!   itself: [`Ledger::record`] marks originals recorded only once the writer says they are
//!   on disk, and only then does [`Ledger::may_write`] allow the write that lowers a limit, so
//!   a crash after that write always finds the original to restore. A failed waited save is
//!   not retried by the writer: the ledger takes the originals back out of its copy and
//!   records them again next tick, so a stale copy can never land over an original already on
//!   disk.
//! * **Handed in with a ticket** ([`Disk::hand_in`]) for a runtime override (`set`/`unset`):
//!   the loop does not wait; the change is *staged*, not in force
//!   ([`Ledger::override_in_force`]) until [`Ledger::settle`] finds its copy on disk, and its
//!   answer waits for that (`commands::Answers`). A copy that failed is not retried: `settle`
//!   takes the change back and hands in a copy without it at once, so a `set` whose save
//!   fails changes nothing (issue 10). A `set` that changes nothing saves nothing, so a flood
//!   of the same `set` costs no write at all.
//! * **Handed in** ([`Disk::submit`]) for every other change — originals dropped after their
//!   restore, overrides of cgroups gone for good, the boot id — which is what a tick with
//!   nothing new saves: the loop does not wait; the writer batches (only the newest copy is
//!   written) and retries a failed write with a growing delay and a warning. Losing such a
//!   change in a crash loses no original: a dropped original is restored once more (the
//!   cgroup holds it already), a dropped override is dropped again.
//!
//! So the loop waits for the disk only when a tick adopts a cgroup or sees an operator's
//! change; the ticks in between, however many cgroups they restore, and any number of `set`s,
//! never do.

use std::collections::{BTreeMap, BTreeSet};

use memweight_cgroupfs::Limit;
use tracing::{error, info, warn};

use crate::decide::{self, Originals};
use crate::state::{Original, Override, State, StateError, StateStore};
use crate::step::limit_above;

mod overrides;
#[cfg(test)]
mod tests;

pub use overrides::Saving;
use overrides::Staged;

/// Where the ledger's copy lives on disk: the state file ([`StateStore`]) in the daemon.
pub trait Disk: std::fmt::Debug + Send + Sync {
    /// The copy on disk; an empty state if there is none.
    ///
    /// # Errors
    ///
    /// The file cannot be read or is not a state file.
    fn load(&self) -> Result<State, StateError>;
    /// Replaces the copy on disk, durably, in one step.
    ///
    /// # Errors
    ///
    /// The file cannot be written; the copy on disk is then the previous one.
    fn save(&self, state: &State) -> Result<(), StateError>;
    /// Hands in a copy to be saved soon, without waiting: a later copy may replace it before
    /// it is written, and a failed write is retried. The default saves now.
    ///
    /// # Errors
    ///
    /// Saves fail now (the copy is not taken): the caller keeps its change unsaved, or
    /// takes it back.
    fn submit(&self, state: &State) -> Result<(), StateError> {
        self.save(state)
    }
    /// Whether every copy handed in is on disk (or was given up).
    fn settled(&self) -> bool {
        true
    }
    /// Hands in a copy whose landing someone will ask about ([`Disk::fate`]), without waiting:
    /// it is not retried if its write fails. Returns its ticket; the default saves now and
    /// returns [`Ticket::WRITTEN`].
    ///
    /// # Errors
    ///
    /// The copy is not taken (the default's save failed).
    fn hand_in(&self, state: &State) -> Result<Ticket, StateError> {
        self.save(state).map(|()| Ticket::WRITTEN)
    }
    /// What became of the copy handed in with `ticket`, or of a newer one that carried it.
    fn fate(&self, ticket: Ticket) -> Fate {
        let _ = ticket;
        Fate::Written
    }
}

/// A copy handed in with [`Disk::hand_in`]: its generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(pub u64);

impl Ticket {
    /// A copy already on disk when it was handed in.
    pub const WRITTEN: Ticket = Ticket(0);
}

/// What became of a copy handed in with [`Disk::hand_in`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Not written yet, nor given up.
    Pending,
    /// On disk: it, or a newer copy (which carries its change).
    Written,
    /// Its write failed and no newer copy landed: the file holds what it held before.
    Failed(String),
}

impl Disk for StateStore {
    fn load(&self) -> Result<State, StateError> {
        StateStore::load(self)
    }

    fn save(&self, state: &State) -> Result<(), StateError> {
        StateStore::save(self, state)
    }
}

/// What the ledger holds for one managed cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The cgroup's own limits: memory.high never above `originals.high`, memory.low never
    /// below `originals.low`, both restored when the daemon lets go.
    originals: Originals,
    /// The cgroup's id (directory inode) when adopted; `None` if it could not be read.
    id: Option<u64>,
    /// The originals are in the state file on disk: only then may the daemon write.
    recorded: bool,
    /// What the daemon believes memory.high and memory.low hold: its own last write, or what
    /// it read at adoption. Anything else found there was written by someone else.
    known: Originals,
    /// The last change made outside the daemon and adopted as the new original (`explain`).
    operator: Option<String>,
}

impl Holding {
    /// The cgroup's originals.
    #[must_use]
    pub fn originals(&self) -> Originals {
        self.originals
    }

    /// The cgroup's id when adopted.
    #[must_use]
    pub fn id(&self) -> Option<u64> {
        self.id
    }

    /// Whether the originals are on disk, so that the daemon may write to the cgroup.
    #[must_use]
    pub fn recorded(&self) -> bool {
        self.recorded
    }

    /// The last change made outside the daemon, kept as the original.
    #[must_use]
    pub fn operator(&self) -> Option<&str> {
        self.operator.as_deref()
    }
}

/// What [`Ledger::reconcile`] found in a managed cgroup's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconciled {
    /// What the daemon knows is there (or the cgroup is not held).
    Same,
    /// Someone else changed a limit: it is the new original.
    Operator,
    /// Another cgroup (another id) has the name now: let go of it; the caller adopts it
    /// afresh.
    Recreated,
}

/// What [`Ledger::record`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// Cgroups whose originals were not on disk and were to be saved.
    pub pending: usize,
    /// The save succeeded (or there was nothing to save).
    pub saved: bool,
}

/// A recorded original whose cgroup the daemon does not hold: to be written back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The cgroup.
    pub path: String,
    /// What to write back.
    pub originals: Originals,
    /// The id it was recorded for (`None`: recorded before ids were kept).
    pub id: Option<u64>,
}

/// What became of one attempt to put a recorded original back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// Written.
    Done,
    /// The cgroup is gone: nothing to restore.
    Gone,
    /// A different cgroup (another id) has the name now: the original is not its own.
    Replaced,
    /// The write or the id check failed; the original is kept and tried again.
    Failed(String),
}

/// Every original the daemon must give back, and its copy on disk.
#[derive(Debug)]
pub struct Ledger {
    disk: Box<dyn Disk>,
    /// The copy saved to `disk` (originals as the kernel's text, ancestors, overrides).
    state: State,
    /// `state` differs from the copy on disk.
    dirty: bool,
    /// The unsaved change adds or changes an original: the next save is waited for
    /// ([`Disk::save`]), not only handed in ([`Disk::submit`]).
    confirm: bool,
    /// An override was set or unset without saving (a dry run): the overrides in memory may
    /// differ from the disk's, so a `set` of the value in force still saves.
    overrides_unsaved: bool,
    /// Managed cgroups by path.
    held: BTreeMap<String, Holding>,
    /// Runtime overrides set or unset whose copy is handed in and not known to be on disk, in
    /// the order handed in: not in force until it is ([`Ledger::settle`]).
    staged: Vec<Staged>,
    /// Released cgroups whose files still hold their originals as far as the daemon knows
    /// (it never wrote them, or wrote them back): their restore is a no-op and is skipped, so
    /// a stop with 10,000 idle cgroups writes only to the few it throttled.
    unchanged: BTreeSet<String>,
    /// At shutdown: each released cgroup's originals and id, for jobs that write late.
    released: BTreeMap<String, (Originals, Option<u64>)>,
}

impl Ledger {
    /// Loads the copy on `disk`. Originals recorded in another boot than `boot_id` are
    /// dropped (every cgroup is new since); `boot_id` is saved with the next change.
    ///
    /// # Errors
    ///
    /// The copy on disk cannot be read.
    pub fn open(disk: Box<dyn Disk>, boot_id: Option<String>) -> Result<Self, StateError> {
        let mut state = disk.load()?;
        let mut dirty = false;
        if let (Some(was), Some(now)) = (&state.boot_id, &boot_id)
            && was != now
            && !(state.originals.is_empty() && state.ancestors.is_empty())
        {
            info!(
                originals = state.originals.len(),
                ancestors = state.ancestors.len(),
                "the state file's originals are from an earlier boot: every cgroup is new since,                  so none is restored (dropped)"
            );
            state.originals.clear();
            state.ancestors.clear();
            dirty = true;
        }
        // Saved with the next change; a dry run with nothing recorded writes no file for it.
        state.boot_id = boot_id.or(state.boot_id);
        Ok(Ledger {
            disk,
            state,
            dirty,
            confirm: false,
            overrides_unsaved: false,
            staged: Vec::new(),
            held: BTreeMap::new(),
            unchanged: BTreeSet::new(),
            released: BTreeMap::new(),
        })
    }

    /// Moves the copy to another disk (a reload with another state directory): everything
    /// recorded is saved there with the next save.
    pub fn move_to(&mut self, disk: Box<dyn Disk>) {
        self.disk = disk;
        self.dirty = true;
        self.confirm = true;
        // The old disk's tickets mean nothing on the new one: these land with the next save.
        for s in &mut self.staged {
            s.moved = true;
        }
    }

    /// What the ledger holds for managed cgroup `path`.
    #[must_use]
    pub fn holding(&self, path: &str) -> Option<&Holding> {
        self.held.get(path)
    }

    /// Whether the daemon may write `path`'s limits: it is held and its originals are on disk.
    #[must_use]
    pub fn may_write(&self, path: &str) -> bool {
        self.held.get(path).is_some_and(|h| h.recorded)
    }

    /// Originals recorded for cgroups (held or not), and ancestors' originals.
    #[must_use]
    pub fn recorded_counts(&self) -> (usize, usize) {
        (self.state.originals.len(), self.state.ancestors.len())
    }

    /// The runtime overrides, by cgroup path.
    #[must_use]
    pub fn overrides(&self) -> &BTreeMap<String, Override> {
        &self.state.overrides
    }

    /// Saves the copy: waited for when it adds or changes an original, handed in otherwise.
    fn save(&mut self) -> Result<(), StateError> {
        if self.confirm {
            self.disk.save(&self.state)?;
        } else {
            self.disk.submit(&self.state)?;
        }
        self.dirty = false;
        self.confirm = false;
        Ok(())
    }

    /// Saves the copy if it changed (waited for only when it adds or changes an original);
    /// returns whether the save was made or handed in.
    pub fn flush(&mut self) -> bool {
        if !self.dirty {
            return true;
        }
        match self.save() {
            Ok(()) => true,
            // The writer warns, with its delays; a refusal each tick adds nothing.
            Err(StateError::Unsaved { .. }) => false,
            Err(e) => {
                error!(error = %e, "cannot save the state file; trying again next tick");
                false
            }
        }
    }

    /// Saves everything and waits until it is on disk (shutdown, `--restore`): also copies
    /// handed in earlier and not yet written. Returns whether the disk matches the copy.
    pub fn flush_durably(&mut self) -> bool {
        if !self.dirty && self.disk.settled() {
            return true;
        }
        self.dirty = true;
        self.confirm = true;
        self.flush()
    }

    /// Starts holding a cgroup seen for the first time (this run), with id `id` and limits
    /// `sampled` as read now; returns whether an earlier run's original was resumed (and, when
    /// `enforce`, counts as on disk).
    ///
    /// An original recorded for this path by an earlier run is used only if it belongs to the
    /// same cgroup (same id): one recorded for a cgroup that was removed and created again
    /// under the same name is dropped. A cgroup not resumed is not written to until its
    /// originals are on disk ([`Ledger::record`]).
    pub fn adopt(
        &mut self,
        path: &str,
        id: Option<u64>,
        sampled: Originals,
        enforce: bool,
        tick: u64,
    ) -> bool {
        let mut resumed = None;
        if let Some(o) = self.state.originals.get_mut(path) {
            match (o.id, id) {
                (Some(was), Some(now)) if was != now => {
                    info!(cgroup = %path, recorded_id = was, id = now,
                        "dropping the original recorded for an earlier cgroup of this name: it \
                         was removed and created again while memweightd was not managing it");
                    self.state.originals.remove(path);
                    self.dirty = true;
                }
                _ => {
                    if o.id.is_none() && id.is_some() {
                        // A version 1 entry: tie it to the cgroup from now on.
                        o.id = id;
                        self.dirty = true;
                        self.confirm = true;
                    }
                    resumed = Some(parse_original(o));
                }
            }
        }
        let mut operator = None;
        let (originals, recorded) = match resumed {
            // Adopted before a restart: what the files say now is presumably our own write,
            // except a memory.high above the original, which the daemon never writes.
            Some(mut o) => {
                if limit_above(sampled.high, o.high) {
                    operator = Some(operator_note("memory.high", sampled.high, tick));
                    warn!(cgroup = %path, high = %sampled.high, was = %o.high,
                        "memory.high was raised outside memweightd while it was not running; \
                         keeping it as the cgroup's original and ceiling");
                    o.high = sampled.high;
                    self.record_entry(path, o, id);
                }
                (o, enforce)
            }
            None => (sampled, false),
        };
        self.unchanged.remove(path);
        self.held.insert(
            path.to_owned(),
            Holding {
                originals,
                id,
                recorded,
                known: sampled,
                operator,
            },
        );
        recorded
    }

    /// Checks a held cgroup's limits, `sampled` as read now, against what the daemon last
    /// wrote there: a difference is an operator's change (the new original, recorded if the
    /// old one was), or the cgroup was created again under the same name (`id_now`, asked
    /// only then: let go of, its original dropped).
    pub fn reconcile(
        &mut self,
        path: &str,
        sampled: Originals,
        tick: u64,
        id_now: impl FnOnce() -> Option<u64>,
    ) -> Reconciled {
        let Some(h) = self.held.get_mut(path) else {
            return Reconciled::Same;
        };
        let high_changed = !same_pages(sampled.high, h.known.high);
        let low_changed = !same_pages(sampled.low, h.known.low);
        if !high_changed && !low_changed {
            return Reconciled::Same;
        }
        let was = h.id;
        let now = id_now();
        if was.is_some() && now.is_some() && was != now {
            info!(cgroup = %path, "cgroup was removed and created again; adopting it afresh");
            self.held.remove(path);
            if self.state.originals.remove(path).is_some() {
                self.dirty = true;
            }
            return Reconciled::Recreated;
        }
        let high_note = high_changed.then(|| operator_note("memory.high", sampled.high, tick));
        let low_note = low_changed.then(|| operator_note("memory.low", sampled.low, tick));
        if high_changed {
            warn!(cgroup = %path, high = %sampled.high, wrote = %h.known.high,
                "memory.high was changed outside memweightd; keeping it as the cgroup's \
                 original and ceiling");
            h.originals.high = sampled.high;
            h.known.high = sampled.high;
        }
        if low_changed {
            warn!(cgroup = %path, low = %sampled.low, wrote = %h.known.low,
                "memory.low was changed outside memweightd; keeping it as the cgroup's original");
            h.originals.low = sampled.low;
            h.known.low = sampled.low;
        }
        h.operator = high_note.or(low_note);
        let (recorded, originals, id) = (h.recorded, h.originals, h.id);
        if recorded {
            self.record_entry(path, originals, id);
        }
        Reconciled::Operator
    }

    /// A dry run holds nothing: every held cgroup counts as not recorded, so its recorded
    /// original is restored ([`Ledger::restores_due`]) and nothing is written to it.
    pub fn hold_nothing(&mut self) {
        for h in self.held.values_mut() {
            h.recorded = false;
        }
    }

    /// Notes what the daemon wrote to a held cgroup: the files hold it now.
    pub fn wrote(&mut self, path: &str, high: Option<Limit>, low: Option<Limit>) {
        if let Some(h) = self.held.get_mut(path) {
            if let Some(v) = high {
                h.known.high = v;
            }
            if let Some(v) = low {
                h.known.low = v;
            }
        }
    }

    /// Records the originals of held cgroups not on disk yet (enforcing only), with every
    /// other change, in one save. Cgroups whose originals could not be saved are not written
    /// to: they are recorded again next time.
    pub fn record(&mut self, enforce: bool) -> Recorded {
        let mut pending = Vec::new();
        // What the state held for each before: a cgroup not recorded may still have an
        // original on disk (a dry run's restore that failed, then enforcing again).
        let mut before: Vec<Option<Original>> = Vec::new();
        if enforce {
            for (p, h) in &self.held {
                if !h.recorded {
                    pending.push((p.clone(), h.originals, h.id));
                }
            }
            for (p, o, id) in &pending {
                before.push(self.state.originals.get(p).cloned());
                self.record_entry(p, *o, *id);
            }
        }
        let saved = self.flush();
        if saved {
            for (p, _, _) in &pending {
                if let Some(h) = self.held.get_mut(p) {
                    h.recorded = true;
                }
            }
        } else if !pending.is_empty() {
            warn!(
                cgroups = pending.len(),
                "their original limits are not on disk; not writing to them until the state \
                 file can be saved"
            );
            // Not on disk, so not in the state either: a restart reads them afresh. One that
            // was there already stays as it was, so the next save does not drop it.
            for ((p, _, _), was) in pending.iter().zip(before) {
                match was {
                    Some(o) => self.state.originals.insert(p.clone(), o),
                    None => self.state.originals.remove(p),
                };
            }
        }
        Recorded {
            pending: pending.len(),
            saved,
        }
    }

    /// Writes `o` as the recorded original of `path` (saved with the next save).
    fn record_entry(&mut self, path: &str, o: Originals, id: Option<u64>) {
        self.state.originals.insert(
            path.to_owned(),
            Original {
                high: o.high.to_string(),
                low: o.low.to_string(),
                id,
            },
        );
        self.dirty = true;
        self.confirm = true;
    }

    /// Every recorded original whose cgroup the daemon does not hold (released, no longer
    /// in `wanted`, left by an earlier run, or in a dry run), and is not `busy` (a write job
    /// of its own in flight): to be written back, in path order.
    pub fn restores_due(&self, wanted: &BTreeSet<&str>, busy: impl Fn(&str) -> bool) -> Vec<Due> {
        self.state
            .originals
            .iter()
            .filter(|(p, _)| {
                !self.held.get(*p).is_some_and(|h| h.recorded)
                    && !busy(p)
                    && (self.held.contains_key(*p) || !wanted.contains(p.as_str()))
            })
            .map(|(p, o)| Due {
                path: p.clone(),
                originals: parse_original(o),
                id: o.id,
            })
            .collect()
    }

    /// Whether `path`'s files hold its originals already (it was released unchanged): its
    /// restore writes nothing. Asked once, when the restore is made.
    pub fn restore_is_noop(&mut self, path: &str) -> bool {
        self.unchanged.remove(path)
    }

    /// Takes in what became of one restore: the original is dropped (returns `true`) unless
    /// the restore failed, when it is kept and due again next time.
    pub fn restored(&mut self, due: &Due, outcome: &Restored) -> bool {
        match outcome {
            Restored::Failed(_) => return false,
            Restored::Done => {
                if let Some(h) = self.held.get_mut(&due.path) {
                    h.known = due.originals;
                }
            }
            Restored::Gone | Restored::Replaced => {}
        }
        self.state.originals.remove(&due.path);
        self.dirty = true;
        true
    }

    /// After a round of restores: forgets the unchanged cgroups whose original is no longer
    /// recorded.
    pub fn restores_done(&mut self) {
        let originals = &self.state.originals;
        self.unchanged.retain(|p| originals.contains_key(p));
    }

    /// Stops holding a cgroup (`busy`: a write of its own in flight); its recorded original
    /// is then due ([`Ledger::restores_due`]). Returns whether it was held.
    pub fn release(&mut self, path: &str, busy: bool) -> bool {
        match self.held.remove(path) {
            Some(h) => {
                self.note_unchanged(path, &h, busy);
                true
            }
            None => false,
        }
    }

    /// Notes a cgroup being released whose files hold its originals as far as the daemon
    /// knows (its last write, or what it read at adoption, equals the original) and has no
    /// write in flight: restoring it would write what is there.
    fn note_unchanged(&mut self, path: &str, h: &Holding, busy: bool) {
        if same_pages(h.known.high, h.originals.high)
            && same_pages(h.known.low, h.originals.low)
            && !busy
        {
            self.unchanged.insert(path.to_owned());
        }
    }

    /// Forgets a cgroup that no longer exists, with its recorded original.
    pub fn forget(&mut self, path: &str) {
        self.unchanged.remove(path);
        self.held.remove(path);
        if self.state.originals.remove(path).is_some() {
            self.dirty = true;
        }
        self.released.remove(path);
    }

    /// Lets go of every held cgroup (shutdown, or a new cgroup root); `busy` says which have
    /// a write in flight. Returns how many were held. Each one's originals and id are kept
    /// for [`Ledger::take_released`].
    pub fn release_all(&mut self, busy: impl Fn(&str) -> bool) -> usize {
        let n = self.held.len();
        self.released.clear();
        for (p, h) in std::mem::take(&mut self.held) {
            self.note_unchanged(&p, &h, busy(&p));
            self.released.insert(p, (h.originals, h.id));
        }
        n
    }

    /// The originals and id of a cgroup let go by [`Ledger::release_all`], taken once (a
    /// write job that may have landed after its restore).
    pub fn take_released(&mut self, path: &str) -> Option<(Originals, Option<u64>)> {
        self.released.remove(path)
    }

    /// Keeps `o` recorded for `path` (a restore that could not be made at shutdown), saved
    /// with the next save.
    pub fn keep(&mut self, path: &str, o: Originals, id: Option<u64>) {
        self.record_entry(path, o, id);
    }

    /// Whether any ancestor's original `memory.low` is recorded.
    #[must_use]
    pub fn has_ancestors(&self) -> bool {
        !self.state.ancestors.is_empty()
    }

    /// The ancestors whose `memory.low` the daemon raised and that are no longer in `wanted`,
    /// with the original to write back ([`Ledger::ancestor_restored`] once written).
    #[must_use]
    pub fn ancestors_to_restore(&self, wanted: &BTreeMap<String, u64>) -> Vec<(String, Limit)> {
        self.state
            .ancestors
            .iter()
            .filter(|(a, _)| !wanted.contains_key(*a))
            .map(|(a, o)| {
                let low = memweight_cgroupfs::parse::limit(o).unwrap_or(Limit::Bytes(0));
                (a.clone(), low)
            })
            .collect()
    }

    /// An ancestor's original `memory.low` was written back: dropped.
    pub fn ancestor_restored(&mut self, a: &str) {
        self.state.ancestors.remove(a);
        self.dirty = true;
    }

    /// Each ancestor in `wanted` should hold `max(its original, the sum wanted)` in
    /// `memory.low`; `current` reads what it holds now (`None`: gone or unreadable, left
    /// alone). Records the original of each ancestor raised for the first time and saves,
    /// then returns the raises to write: only those whose original is on disk.
    pub fn raise_ancestors(
        &mut self,
        wanted: &BTreeMap<String, u64>,
        mut current: impl FnMut(&str) -> Option<Limit>,
    ) -> Vec<(String, Limit)> {
        let mut raise: Vec<(String, Limit)> = Vec::new();
        let mut new: Vec<String> = Vec::new();
        for (a, &sum) in wanted {
            let Some(now) = current(a) else {
                continue;
            };
            let orig = match self.state.ancestors.get(a) {
                Some(o) => memweight_cgroupfs::parse::limit(o).unwrap_or(Limit::Bytes(0)),
                None => now,
            };
            let want = match orig {
                Limit::Max => Limit::Max,
                Limit::Bytes(o) => Limit::Bytes(o.max(sum)),
            };
            if want == now {
                continue;
            }
            if !self.state.ancestors.contains_key(a) {
                self.state.ancestors.insert(a.clone(), now.to_string());
                self.dirty = true;
                self.confirm = true;
                new.push(a.clone());
            }
            raise.push((a.clone(), want));
        }
        if !self.flush() && !new.is_empty() {
            warn!("cannot record ancestors' memory.low; not raising them");
            for a in &new {
                self.state.ancestors.remove(a);
            }
            raise.retain(|(a, _)| !new.contains(a));
        }
        raise
    }
}

/// What `explain` says about a limit set outside the daemon.
fn operator_note(file: &str, value: Limit, tick: u64) -> String {
    format!(
        "{file} set to {value} outside memweightd (seen at tick {tick}); kept as the cgroup's \
         original"
    )
}

fn parse_original(o: &Original) -> Originals {
    Originals {
        high: memweight_cgroupfs::parse::limit(&o.high).unwrap_or(Limit::Max),
        low: memweight_cgroupfs::parse::limit(&o.low).unwrap_or(Limit::Bytes(0)),
    }
}

/// Whether two limits are the same to the kernel, which keeps them in whole pages (a value
/// written is read back rounded down to a page).
#[must_use]
pub fn same_pages(a: Limit, b: Limit) -> bool {
    match (a, b) {
        (Limit::Bytes(x), Limit::Bytes(y)) => x / decide::PAGE == y / decide::PAGE,
        (x, y) => x == y,
    }
}
