//! The runtime overrides' side of the ledger: `set` and `unset` hand their copy in with a
//! ticket and stage the change, which is in force only once [`Ledger::settle`] finds it on
//! disk; a copy that failed is taken back (see the parent module, "Handed in with a ticket").

use super::{Fate, Ledger, Ticket};
use crate::state::{Override, StateError};

/// Where a `set` or `unset`'s change stands once handed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saving {
    /// On disk (or nothing to save: a dry run, or the value in force already).
    Done,
    /// On its way: [`Ledger::settle`] says when this ticket ends.
    Pending(Ticket),
}

/// A runtime override's change on its way to disk.
#[derive(Debug, Clone)]
pub(super) struct Staged {
    ticket: Ticket,
    /// Handed to a disk the ledger has left since ([`Ledger::move_to`]): it lands with the
    /// next save to the new one.
    pub(super) moved: bool,
    path: String,
    /// The override in force until it lands.
    before: Option<Override>,
}

impl Ledger {
    /// The runtime override in force for `path`: one whose save is on its way is not yet.
    #[must_use]
    pub fn override_in_force(&self, path: &str) -> Option<Override> {
        match self.staged.iter().find(|s| s.path == path) {
            Some(s) => s.before,
            None => self.state.overrides.get(path).copied(),
        }
    }

    /// Whether a `set` or `unset` waits for its save ([`Ledger::settle`] tells when it ends).
    #[must_use]
    pub fn saving(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Sets a runtime override and hands its save in (`persist`: enforcing; a dry run keeps
    /// no state of its own and the override is in force at once). The override is in force
    /// once its copy is on disk ([`Ledger::settle`]); a save that fails changes nothing.
    ///
    /// # Errors
    ///
    /// The copy could not be handed in; the previous override (or none) stays in force.
    pub fn set_override(
        &mut self,
        path: &str,
        ov: Override,
        persist: bool,
    ) -> Result<Saving, StateError> {
        let before = self.state.overrides.insert(path.to_owned(), ov);
        if before == Some(ov) && persist && !self.overrides_unsaved {
            // On disk already, or on its way there: nothing more to save (a flood of the
            // same `set` costs no write at all).
            return Ok(self.staged_ticket(path));
        }
        match self.persist(persist) {
            Ok(saving) => {
                self.stage(saving, path, before);
                Ok(saving)
            }
            Err(e) => {
                self.put_back(path, before);
                Err(e)
            }
        }
    }

    /// Removes a runtime override and hands its save in; returns whether there was one. The
    /// removal is in force once it is on disk ([`Ledger::settle`]).
    ///
    /// # Errors
    ///
    /// The copy could not be handed in; the override stays in force.
    pub fn unset_override(
        &mut self,
        path: &str,
        persist: bool,
    ) -> Result<(bool, Saving), StateError> {
        let Some(before) = self.state.overrides.remove(path) else {
            return Ok((false, self.staged_ticket(path)));
        };
        match self.persist(persist) {
            Ok(saving) => {
                self.stage(saving, path, Some(before));
                Ok((true, saving))
            }
            Err(e) => {
                self.put_back(path, Some(before));
                Err(e)
            }
        }
    }

    /// Makes `before` (an override, or none) `path`'s again in the copy.
    fn put_back(&mut self, path: &str, before: Option<Override>) {
        match before {
            Some(b) => self.state.overrides.insert(path.to_owned(), b),
            None => self.state.overrides.remove(path),
        };
    }

    /// The newest save on its way for `path`'s override, if any.
    fn staged_ticket(&self, path: &str) -> Saving {
        self.staged
            .iter()
            .rev()
            .find(|s| s.path == path)
            .map_or(Saving::Done, |s| Saving::Pending(s.ticket))
    }

    fn stage(&mut self, saving: Saving, path: &str, before: Option<Override>) {
        if let Saving::Pending(ticket) = saving {
            self.staged.push(Staged {
                ticket,
                moved: false,
                path: path.to_owned(),
                before,
            });
        }
    }

    /// Looks at the overrides whose save is on its way: those on disk are in force from now
    /// on; those whose save failed are taken back, and a copy without them is handed in at
    /// once (so the failed one can never land after it). Returns each ticket that ended and
    /// how.
    pub fn settle(&mut self) -> Vec<(Ticket, Result<(), String>)> {
        if self.staged.is_empty() {
            return Vec::new();
        }
        let mut ended = Vec::new();
        let mut failed = Vec::new();
        let mut waiting = Vec::new();
        for s in std::mem::take(&mut self.staged) {
            let fate = match (s.moved, self.dirty) {
                (false, _) => self.disk.fate(s.ticket),
                // Moved to another disk: it lands with the first save there.
                (true, true) => Fate::Pending,
                (true, false) => Fate::Written,
            };
            match fate {
                Fate::Pending => waiting.push(s),
                Fate::Written => ended.push((s.ticket, Ok(()))),
                Fate::Failed(why) => {
                    ended.push((s.ticket, Err(why)));
                    failed.push(s);
                }
            }
        }
        // Newest first, so that each path ends where it was before the oldest failed change.
        // A newer change still on its way keeps its own value and inherits what was in force.
        for f in failed.iter().rev() {
            if let Some(later) = waiting.iter_mut().find(|w| w.path == f.path) {
                later.before = f.before;
                continue;
            }
            self.put_back(&f.path, f.before);
        }
        self.staged = waiting;
        if !failed.is_empty() {
            self.dirty = true;
            self.flush();
        }
        ended
    }

    /// Drops a runtime override (its cgroup is gone), saved with the next save; returns
    /// whether there was one.
    pub fn drop_override(&mut self, path: &str) -> bool {
        let had = self.state.overrides.remove(path).is_some();
        self.dirty |= had;
        had
    }

    /// Hands in an override's change: its answer waits for the copy to be on disk. While an
    /// original's change is not on disk yet, the copy carrying both is saved and waited for,
    /// as originals are.
    fn persist(&mut self, persist: bool) -> Result<Saving, StateError> {
        if !persist {
            self.overrides_unsaved = true;
            return Ok(Saving::Done);
        }
        self.dirty = true;
        if self.confirm {
            self.save()?;
            self.overrides_unsaved = false;
            return Ok(Saving::Done);
        }
        let ticket = self.disk.hand_in(&self.state)?;
        self.dirty = false;
        self.overrides_unsaved = false;
        Ok(if ticket == Ticket::WRITTEN {
            Saving::Done
        } else {
            Saving::Pending(ticket)
        })
    }
}
