//! Which cgroups the daemon manages, and with what settings.
//!
//! Discovery walks the rules' paths and globs once per tick and resolves each cgroup's settings
//! once (rule < container label < runtime override, [`Controller::resolve`]); the tick carries
//! the result ([`Wanted`]) to the law and the report. Adoption and release keep the managed
//! set and the [`crate::ledger::Ledger`] in step: the ledger holds an entry for each managed
//! cgroup. Runtime overrides of cgroups that are gone are dropped here, a container's after a
//! grace.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use memweight_cgroupfs::CgroupSample;
use memweight_proto::ctl::{LabelClamp, LabelField, LabelValues, WeightSource};
use tracing::{debug, error, info, warn};

use super::{Controller, Managed, Refaults, Trim};
use crate::capacity::REACH_HOLD;
use crate::config::Settings;
use crate::containers::{self, Containers};
use crate::decide::Originals;
use crate::labels::{self, LabelError};
use crate::ledger::Reconciled;
use crate::logging::untrusted;

/// How one cgroup's settings were put together: config rule < container label < override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What applies.
    pub settings: Settings,
    /// What the rule alone says.
    pub configured: Settings,
    /// The rule's `path` or `glob`.
    pub rule: String,
    /// The container's name, when the engine knows the cgroup.
    pub container: Option<String>,
    /// What the container's labels set (`None`: no `memweight.*` label, or no container).
    pub labels: Option<LabelValues>,
    /// Labels whose values were not accepted (their rule values apply).
    pub label_errors: Vec<LabelError>,
    /// Labels that asked for more than the rule lets a label ask (clamped or refused).
    pub label_clamps: Vec<LabelClamp>,
    /// Where the weight comes from.
    pub source: WeightSource,
}

/// What `memweightctl set <name>` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A managed cgroup belongs to the container: its path.
    Managed(String),
    /// The container runs, but no managed cgroup is its (no rule matches its scope).
    Unmanaged {
        /// Its name.
        name: String,
        /// Its id.
        id: String,
    },
    /// Several containers match an id prefix.
    Ambiguous(Vec<String>),
    /// No running container by that name or id.
    None,
}

/// A cgroup the rules name this tick, with its settings resolved once.
#[derive(Debug)]
pub(super) struct Wanted {
    /// The cgroup.
    pub path: String,
    /// What applies to it.
    pub settings: Settings,
    /// Where the settings come from (`None`: no rule names it any more; discovery failed and
    /// the managed set was kept).
    pub resolved: Option<Resolved>,
}

impl Controller {
    /// Finds the managed cgroup of the running container named (or with id or id prefix)
    /// `what`, in the latest snapshot.
    #[must_use]
    pub fn find_container(&self, what: &str) -> Found {
        let latest = self
            .containers
            .as_ref()
            .map_or_else(|| Arc::clone(&self.snap), Containers::snapshot);
        match latest.find(what) {
            Err(containers::Ambiguous(names)) => Found::Ambiguous(names),
            Ok(None) => Found::None,
            Ok(Some(c)) => self
                .managed
                .keys()
                .find(|p| containers::container_id(p) == Some(c.id.as_str()))
                .map_or_else(
                    || Found::Unmanaged {
                        name: c.name.clone(),
                        id: c.id.clone(),
                    },
                    |p| Found::Managed(p.clone()),
                ),
        }
    }

    /// The settings for `path` and where they come from, if a rule names it: the rule, then
    /// the labels of the container whose cgroup it is (as of the last tick), then the runtime
    /// override.
    #[must_use]
    pub fn resolve(&self, path: &str) -> Option<Resolved> {
        let rule = self.rules.rule_for(path)?;
        let configured = rule.settings;
        let mut s = configured;
        let mut source = WeightSource::Config {
            rule: rule.name.clone(),
        };
        let container = self.snap.for_cgroup(path);
        // The container's labels, or its pod's annotations when it has no labels.
        let label_prefix = self.cfg.containers.label_prefix.as_str();
        let (asked, prefix) = container.map_or((None, label_prefix), |c| {
            let (asked, prefix) = crate::annotations::requests(c, label_prefix);
            (Some(asked), prefix)
        });
        let (labels, label_errors) = asked.map_or_else(
            || (None, Vec::new()),
            |asked| {
                let (v, errors) = labels::parse_labels(asked, prefix);
                (Some(v), errors)
            },
        );
        let mut label_clamps = Vec::new();
        if let (Some(l), Some(c)) = (labels, container) {
            let bounded = labels::bound(configured, rule.labels, l, prefix);
            s = bounded.settings;
            label_clamps = bounded.clamps;
            if l.weight.is_some() {
                source = WeightSource::Label {
                    label: format!("{prefix}weight"),
                    container: c.name.clone(),
                };
            }
        }
        if let Some(ov) = self.ledger.override_in_force(path) {
            s.weight = ov.weight;
            source = WeightSource::Override;
            if let Some(m) = ov.min {
                s.min = m;
            }
            if ov.max.is_some() {
                s.max = ov.max;
            }
            // What the override replaces is no longer the label's to ask.
            label_clamps.retain(|c| match c.field {
                LabelField::Weight => false,
                LabelField::Min => ov.min.is_none(),
                LabelField::Max => ov.max.is_none(),
            });
        }
        Some(Resolved {
            settings: s,
            configured,
            rule: rule.name.clone(),
            container: container.map(|c| c.name.clone()),
            labels: labels.filter(|l| *l != LabelValues::default()),
            label_errors,
            label_clamps,
            source,
        })
    }

    /// Resolves `path` and warns once per container and label that is invalid or asks for
    /// more than the rule lets it ask.
    fn resolve_warning_labels(&mut self, path: &str) -> Option<Resolved> {
        let r = self.resolve(path)?;
        if let (Some(name), Some(id)) = (&r.container, containers::container_id(path)) {
            for e in &r.label_errors {
                // A running container's labels cannot change: one warning per id and label.
                self.warn_once(&format!("label:{id}:{}", e.label), || {
                    warn!(container = %name, cgroup = %path, label = %e.label,
                        value = %untrusted(&e.value), accepted = %e.accepted,
                        "ignoring an invalid container label; the configured value applies");
                });
            }
            for c in &r.label_clamps {
                self.warn_once(&format!("clamp:{id}:{}", c.label), || {
                    warn!(container = %name, cgroup = %path, label = %c.label, rule = %r.rule,
                        asked = c.asked, applied = c.applied, bound = c.field.bound_key(),
                        "a container label asks for more than its rule lets labels ask: weight \
                         and min are clamped to the bound, a max above the rule's is refused; \
                         the operator raises the bound in the [[cgroup]] rule");
                });
            }
        }
        Some(r)
    }

    /// The cgroups the rules name now, with nested ones left out (and reported once), each
    /// with its settings resolved.
    ///
    /// `O(n log n)` in the number of cgroups: paths come sorted, so an outer cgroup is always
    /// accepted before anything inside it, and each path looks up only its own ancestors.
    pub(super) fn discover(&mut self) -> Vec<Wanted> {
        let mut found: BTreeSet<String> = self.rules.exact_paths().map(str::to_owned).collect();
        if self.rules.depth() > 0 {
            match self.fs.walk(self.rules.depth()) {
                Ok(all) => found.extend(
                    all.into_iter()
                        .filter(|p| self.rules.settings_for(p).is_some()),
                ),
                Err(e) => {
                    self.counters.read_errors += 1;
                    warn!(error = %e, "cgroup discovery failed; keeping the managed set as it was");
                    return self
                        .managed
                        .iter()
                        .map(|(p, m)| {
                            let resolved = self.resolve(p);
                            Wanted {
                                path: p.clone(),
                                settings: resolved.as_ref().map_or(m.settings, |r| r.settings),
                                resolved,
                            }
                        })
                        .collect();
                }
            }
        }
        let mut accepted: BTreeSet<&str> = BTreeSet::new();
        let mut out: Vec<Wanted> = Vec::with_capacity(found.len());
        for path in &found {
            if self.forbidden.contains(path) {
                // A glob that also matches the daemon's own container (the shipped podman
                // globs, with memweightd in a pod of its own) is expected: said once, at info.
                // A rule naming it by its path is the operator's mistake.
                let by_glob = self.rules.rule_for(path).is_some_and(|r| r.name != *path);
                self.warn_once(&format!("forbidden:{path}"), || {
                    if by_glob {
                        info!(cgroup = %path,
                            "a glob matches the daemon's own cgroup, an ancestor of it, or \
                             init.scope; leaving it alone");
                    } else {
                        error!(cgroup = %path,
                            "not managing the daemon's own cgroup, an ancestor of it, or \
                             init.scope: throttling it would throttle memweightd or PID 1; \
                             change the rule");
                    }
                });
                continue;
            }
            let outer = path
                .match_indices('/')
                .map(|(i, _)| &path[..i])
                .find(|a| accepted.contains(a));
            if let Some(outer) = outer {
                self.warn_once(&format!("nest:{path}"), || {
                    error!(cgroup = %path, inside = %outer,
                        "not managing a cgroup nested inside another managed cgroup; \
                         make the rules name only one level");
                });
                continue;
            }
            if let Some(r) = self.resolve_warning_labels(path) {
                accepted.insert(path);
                out.push(Wanted {
                    path: path.clone(),
                    settings: r.settings,
                    resolved: Some(r),
                });
            }
        }
        // Warnings about cgroups that are gone may be given again if they come back; those
        // about a container's labels are kept while the engine lists the container, so that
        // their number stays bounded by the containers running.
        let listed = &self.snap.containers;
        self.warned.retain(|k| match k.split_once(':') {
            Some(("anc" | "restore" | "forbidden", _)) | None => true,
            Some(("label" | "clamp", rest)) => rest
                .split_once(':')
                .is_some_and(|(id, _)| listed.contains_key(id)),
            Some((_, p)) => found.contains(p),
        });
        out
    }

    /// Lets go of the managed cgroups no longer `wanted`: released (their originals restored
    /// with the other due restores), or forgotten if gone.
    pub(super) fn release_unwanted(&mut self, wanted: &[Wanted]) {
        let leaving: Vec<String> = {
            let wanted_set: BTreeSet<&str> = wanted.iter().map(|w| w.path.as_str()).collect();
            self.managed
                .keys()
                .filter(|p| !wanted_set.contains(p.as_str()))
                .cloned()
                .collect()
        };
        for p in leaving {
            // A glob no longer matches a container that exited: gone, not released.
            if matches!(self.fs.id(&p), Ok(None)) && !self.jobs.contains_key(&p) {
                self.forget(&p);
            } else {
                self.release(&p);
            }
        }
    }

    /// Starts managing a cgroup seen for the first time (this run); the ledger takes its
    /// originals ([`crate::ledger::Ledger::adopt`]). It is not written to until they are on
    /// disk.
    fn adopt(&mut self, path: &str, settings: Settings, s: &CgroupSample) {
        let id = match self.fs.id(path) {
            Ok(id) => id,
            Err(e) => {
                warn!(cgroup = %path, error = %e, "cannot read the cgroup's id");
                None
            }
        };
        let sampled = Originals {
            high: s.high,
            low: s.low,
        };
        let recorded = self
            .ledger
            .adopt(path, id, sampled, self.enforcing(), self.ticks);
        let originals = self
            .ledger
            .holding(path)
            .map_or(sampled, crate::ledger::Holding::originals);
        debug!(cgroup = %path, weight = settings.weight, original_high = %originals.high,
            original_low = %originals.low, resumed = recorded, "adopted cgroup");
        self.counters.adopted += 1;
        self.managed.insert(
            path.to_owned(),
            Managed {
                settings,
                reclaim_supported: true,
                last: None,
                refaults: [Refaults::default(); REACH_HOLD],
                refresh: true,
                trim: Trim::default(),
                mark: None,
                pending: None,
            },
        );
    }

    /// Adopts `path` if it is new; otherwise takes its settings and has the ledger check its
    /// files against what the daemon last wrote there (an operator's change, or the cgroup
    /// created again under the same name: adopted afresh). A cgroup with a write in flight
    /// is checked when the write is done.
    pub(super) fn reconcile(&mut self, path: &str, settings: Settings, s: &CgroupSample) {
        let busy = self.jobs.contains_key(path);
        let Some(m) = self.managed.get_mut(path) else {
            self.adopt(path, settings, s);
            return;
        };
        m.settings = settings;
        if busy {
            // A write of ours may be landing now; look again when it is done.
            return;
        }
        let fs = &self.fs;
        let sampled = Originals {
            high: s.high,
            low: s.low,
        };
        let found = self
            .ledger
            .reconcile(path, sampled, self.ticks, || fs.id(path).ok().flatten());
        if found == Reconciled::Recreated {
            self.managed.remove(path);
            self.adopt(path, settings, s);
        }
    }

    /// Stops managing a cgroup: its originals, if recorded, are restored by
    /// [`Controller::restore_recorded`].
    fn release(&mut self, path: &str) {
        if self.managed.remove(path).is_some() {
            self.ledger.release(path, self.jobs.contains_key(path));
            info!(cgroup = %path, "released cgroup");
            self.counters.released += 1;
        }
    }

    /// Forgets a cgroup that no longer exists.
    pub(super) fn forget(&mut self, path: &str) {
        if self.managed.remove(path).is_some() {
            info!(cgroup = %path, "cgroup vanished; dropped");
            self.counters.released += 1;
        }
        self.ledger.forget(path);
        // A container's override waits for the container to come back
        // ([`Controller::drop_orphan_overrides`]); any other goes with its cgroup.
        if containers::container_id(path).is_none() && self.ledger.drop_override(path) {
            info!(cgroup = %path, "runtime override of a vanished cgroup removed");
        }
        for kind in ["read", "nomem", "nest", "restore"] {
            self.warned.remove(&format!("{kind}:{path}"));
        }
    }

    /// Drops runtime overrides whose cgroup no longer exists and is not managed: a cgroup
    /// removed while the daemon was down, or after it was released, leaves no override that
    /// would apply to a later cgroup of the same name. A container's cgroup (its id in the
    /// path) is the exception: `podman restart` and restart policies bring the same container
    /// back under the same path, so its override is kept for
    /// [`crate::state::OVERRIDE_GRACE`] ([`crate::state::Orphans`]). One `stat` per such
    /// override per tick.
    pub(super) fn drop_orphan_overrides(&mut self) {
        let gone: Vec<String> = self
            .ledger
            .overrides()
            .keys()
            .filter(|p| !self.managed.contains_key(*p))
            .filter(|p| matches!(self.fs.id(p), Ok(None)))
            .cloned()
            .collect();
        let (of_containers, others): (BTreeSet<String>, BTreeSet<String>) = gone
            .into_iter()
            .partition(|p| containers::container_id(p).is_some());
        for p in others {
            info!(cgroup = %p, "runtime override of a cgroup that no longer exists removed");
            self.ledger.drop_override(&p);
        }
        let changes = self.orphans.update(&of_containers, Instant::now());
        for p in &changes.kept {
            info!(cgroup = %p, grace_s = crate::state::OVERRIDE_GRACE.as_secs(),
                "a container's cgroup is gone; its runtime override is kept in case it restarts \
                 (podman restart and restart policies keep the container id)");
        }
        for p in &changes.back {
            if self.ledger.overrides().contains_key(p) {
                info!(cgroup = %p, "the container's cgroup is back; its runtime override applies");
            }
        }
        for p in changes.expired {
            info!(cgroup = %p, grace_s = crate::state::OVERRIDE_GRACE.as_secs(),
                "runtime override removed: its container did not come back");
            self.ledger.drop_override(&p);
        }
    }
}

/// The cgroups the daemon must never manage, as paths under `root`: `init.scope`, and the
/// daemon's own cgroup (from the `0::/…` line of `/proc/self/cgroup`, `own`) with every
/// ancestor of it that lies under `root`. Paths in `/proc/self/cgroup` are relative to the
/// cgroup2 mount, taken to be `/sys/fs/cgroup`; under another root (tests) only `init.scope`
/// is forbidden.
pub(super) fn forbidden_cgroups(own: Option<&str>, root: &std::path::Path) -> BTreeSet<String> {
    let mut out = BTreeSet::from(["init.scope".to_owned()]);
    let Some(own) = own.and_then(|t| t.lines().find_map(|l| l.strip_prefix("0::"))) else {
        return out;
    };
    let abs = std::path::Path::new("/sys/fs/cgroup").join(own.trim().trim_start_matches('/'));
    let Ok(rel) = abs.strip_prefix(root) else {
        return out;
    };
    let rel = rel.to_string_lossy();
    let mut prefix = String::new();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        out.insert(prefix.clone());
    }
    out
}

/// What to do about a cgroup that exists without the memory controller.
pub(super) fn no_memory_controller(path: &str) -> String {
    let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
    format!(
        "the memory controller is not enabled for this cgroup; enable it in its parent with \
         `echo +memory > <cgroup root>/{parent}/cgroup.subtree_control`"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_own_cgroup_its_ancestors_and_init_scope_are_forbidden() {
        let root = std::path::Path::new("/sys/fs/cgroup");
        let got = forbidden_cgroups(Some("0::/system.slice/memweightd.service\n"), root);
        let want: BTreeSet<String> = [
            "init.scope",
            "system.slice",
            "system.slice/memweightd.service",
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(got, want);
        // The root cgroup itself is never a managed path; cgroup v1 lines are ignored.
        let got = forbidden_cgroups(Some("1:name=systemd:/x\n0::/\n"), root);
        assert_eq!(got, BTreeSet::from(["init.scope".to_owned()]));
        // Another root (a test tree): only init.scope.
        let got = forbidden_cgroups(Some("0::/lab/a\n"), std::path::Path::new("/tmp/t"));
        assert_eq!(got, BTreeSet::from(["init.scope".to_owned()]));
        // A root below the mount: paths relative to it.
        let got = forbidden_cgroups(
            Some("0::/lab/daemon\n"),
            std::path::Path::new("/sys/fs/cgroup/lab"),
        );
        assert!(got.contains("daemon") && !got.contains("lab"), "{got:?}");
        assert_eq!(forbidden_cgroups(None, root).len(), 1);
    }
}
