//! The control commands, run by the control loop on the state it owns.
//!
//! The socket ([`crate::server`]) parses a request into a [`Command`] and sends it to the loop
//! as a [`Call`]; the loop hands it to [`Answers::answer`] between ticks, which carries the
//! command out on the [`Controller`]: `set`/`unset` change runtime overrides (their answer
//! waits for the state file, the loop does not: [`Answers`]), `get` and `explain` read the
//! settings and the last report, `reload` re-reads the configuration (SIGHUP calls [`reload`]
//! too), `version` names this build ([`version`]; the desk answers it without the loop).
//! Everything the loop runs here is synchronous and short; tests call [`handle`] (which waits
//! for a `set`'s save) and [`Answers`] on a controller over a fake cgroup tree, the same
//! functions `main` calls.

use std::path::Path;

use memweight_proto::ctl::{
    self, CgroupStatus, Command, ErrorKind, ErrorReply, Explanation, Outcome, Reloaded, Reply,
    Setting, Status, Values, Version, WeightSource,
};
use tracing::{info, warn};

use crate::config::Settings;
use crate::controller::{Controller, Found, TickReport};
use crate::ledger::{Saving, Ticket};
use crate::server::Call;
use crate::state::Override;
use tokio::sync::oneshot;

/// The `set`s and `unset`s carried out whose answer waits for their override to be on disk.
///
/// The loop never waits for the state file: a `set` hands its copy in ([`Controller::set_override`])
/// and its answer is kept here; [`Answers::settle`] sends it once the writer thread has the copy
/// on disk (then the override is in force), or refuses it if the write failed (then it changed
/// nothing). The loop calls `settle` before each call, after each tick, and every
/// [`SETTLE_POLL`] while a save is on its way.
#[derive(Debug, Default)]
pub struct Answers {
    waiting: Vec<Waiting>,
}

/// How often the loop looks at a save on its way ([`Answers::settle`]).
pub const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// A change handed in, answered when `ticket` ends.
#[derive(Debug)]
struct Pending {
    ticket: Ticket,
    path: String,
    kind: Change,
}

#[derive(Debug)]
struct Waiting {
    pending: Pending,
    reply: oneshot::Sender<Outcome>,
}

/// A change of a runtime override, carried out, whose answer waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Set(Override),
    Unset { had: bool },
}

/// What [`start`] made of a command.
enum Started {
    /// The answer.
    Now(Outcome),
    /// A change handed in.
    Later(Pending),
}

impl Answers {
    /// Runs `call` on the daemon's state and sends the answer, now or once its change is on
    /// disk, unless the call is stale (then it is dropped unexecuted and `false` is
    /// returned). Called by the control loop only.
    ///
    /// A client that gives up before its answer comes may miss the answer of a change that was
    /// made; `memweightctl get` shows the result.
    pub fn answer(&mut self, ctl: &mut Controller, call: Call, config_path: &Path) -> bool {
        self.settle(ctl);
        if call.is_stale() {
            warn!(command = ?call.command, "control request dropped: its client stopped waiting");
            return false;
        }
        match start(ctl, call.command, config_path) {
            // The client may have gone away meanwhile; its answer is then not needed.
            Started::Now(outcome) => {
                let _ = call.reply.send(outcome);
            }
            Started::Later(pending) => self.waiting.push(Waiting {
                pending,
                reply: call.reply,
            }),
        }
        true
    }

    /// Sends the answers of the changes whose save ended ([`Controller::settle_overrides`]).
    pub fn settle(&mut self, ctl: &mut Controller) {
        let ended = ctl.settle_overrides();
        if ended.is_empty() {
            return;
        }
        let mut left = Vec::with_capacity(self.waiting.len());
        for w in std::mem::take(&mut self.waiting) {
            match ended.iter().find(|(t, _)| *t == w.pending.ticket) {
                Some((_, result)) => {
                    let p = &w.pending;
                    let _ = w.reply.send(finish(ctl, &p.path, p.kind, result.clone()));
                }
                None => left.push(w),
            }
        }
        self.waiting = left;
    }

    /// Whether an answer waits for the disk.
    #[must_use]
    pub fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }
}

/// Runs one command against the daemon's state and returns its answer; a `set` or `unset`
/// waits here until its change is on disk. For tests and tools: the control loop uses
/// [`Answers::answer`], which never waits.
pub fn handle(ctl: &mut Controller, command: Command, config_path: &Path) -> Outcome {
    match start(ctl, command, config_path) {
        Started::Now(outcome) => outcome,
        Started::Later(p) => loop {
            if let Some((_, result)) = ctl
                .settle_overrides()
                .into_iter()
                .find(|(t, _)| *t == p.ticket)
            {
                break finish(ctl, &p.path, p.kind, result);
            }
            std::thread::sleep(SETTLE_POLL);
        },
    }
}

/// The answer of a change whose save ended.
fn finish(ctl: &Controller, path: &str, kind: Change, result: Result<(), String>) -> Outcome {
    let result = match (kind, result) {
        (Change::Set(Override { weight, min, max }), Ok(())) => {
            info!(cgroup = %path, weight, ?min, ?max, "runtime override set");
            Ok(Reply::Setting(Box::new(setting(ctl, path))))
        }
        (Change::Unset { had }, Ok(())) => {
            if had {
                info!(cgroup = %path, "runtime override removed");
            }
            Ok(Reply::Setting(Box::new(setting(ctl, path))))
        }
        (Change::Set(_), Err(e)) => Err(cannot_record("the override", path, &e)),
        (Change::Unset { .. }, Err(e)) => Err(cannot_record("removing the override", path, &e)),
    };
    result.into()
}

fn cannot_record(what: &str, path: &str, e: &dyn std::fmt::Display) -> ErrorReply {
    ErrorReply::new(
        ErrorKind::Internal,
        format!("cannot record {what} for {path}: {e}"),
    )
}

/// Carries one command out against the daemon's state.
fn start(ctl: &mut Controller, command: Command, config_path: &Path) -> Started {
    let root = ctl.config().cgroup_root.display().to_string();
    let result = match command {
        Command::Set {
            cgroup,
            weight,
            min,
            max,
        } => target(ctl, &cgroup, &root).and_then(|path| {
            memweight_policy::check_weight(u64::from(weight))?;
            require_rule(ctl, &path)?;
            if !ctl.is_managed(&path) {
                return Err(unknown(&path, &root));
            }
            let ov = Override { weight, min, max };
            let saving = ctl
                .set_override(&path, ov)
                .map_err(|e| cannot_record("the override", &path, &e))?;
            Ok((path, Change::Set(ov), saving))
        }),
        Command::Unset { cgroup } => target(ctl, &cgroup, &root).and_then(|path| {
            if ctl.override_for(&path).is_none() {
                require_rule(ctl, &path)?;
            }
            let (had, saving) = ctl
                .unset_override(&path)
                .map_err(|e| cannot_record("removing the override", &path, &e))?;
            Ok((path, Change::Unset { had }, saving))
        }),
        other => return Started::Now(query(ctl, other, config_path, &root)),
    };
    match result {
        Err(e) => Started::Now(Err::<Reply, _>(e).into()),
        Ok((path, kind, Saving::Done)) => Started::Now(finish(ctl, &path, kind, Ok(()))),
        Ok((path, kind, Saving::Pending(ticket))) => Started::Later(Pending { ticket, path, kind }),
    }
}

/// Runs a command that changes no override.
fn query(ctl: &mut Controller, command: Command, config_path: &Path, root: &str) -> Outcome {
    let result = match command {
        // Carried out by `start`, never passed here.
        Command::Set { .. } | Command::Unset { .. } => Err(ErrorReply::new(
            ErrorKind::Internal,
            "set and unset change the state; they are not queries",
        )),
        Command::Get { cgroup } => target(ctl, &cgroup, root).and_then(|path| {
            require_rule(ctl, &path)?;
            Ok(Reply::Setting(Box::new(setting(ctl, &path))))
        }),
        Command::Status => last(ctl).map(|r| {
            Reply::Status(Status {
                pool: r.pool.clone(),
                cgroups: r
                    .cgroups
                    .iter()
                    .map(|c| with_next_weight(c, &setting(ctl, &c.cgroup)))
                    .collect(),
            })
        }),
        Command::Explain { cgroup } => target(ctl, &cgroup, root).and_then(|path| {
            require_rule(ctl, &path)?;
            let r = last(ctl)?;
            let row = r
                .cgroups
                .iter()
                .find(|c| c.cgroup == path)
                .ok_or_else(|| unknown(&path, root))?;
            let setting = setting(ctl, &path);
            Ok(Reply::Explain(Box::new(Explanation {
                status: with_next_weight(row, &setting),
                setting,
                pool: r.pool.clone(),
            })))
        }),
        Command::Reload => reload(ctl, config_path).map(Reply::Reloaded),
        Command::Version => Ok(Reply::Version(version())),
    };
    result.into()
}

/// This daemon's build: its package version and the control protocol it speaks.
#[must_use]
pub fn version() -> Version {
    Version {
        program: "memweightd".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        protocol: ctl::PROTOCOL_VERSION,
    }
}

/// Re-reads the configuration file; on any error the old configuration stays.
///
/// A refused reload is logged at WARN (the daemon keeps enforcing with the configuration it
/// had, so nothing is broken yet) with the reason, which is also the reply's message.
pub fn reload(ctl: &mut Controller, config_path: &Path) -> Result<Reloaded, ErrorReply> {
    let invalid = |e: &dyn std::fmt::Display| {
        let reply = ErrorReply::new(
            ErrorKind::ConfigInvalid,
            format!("reload refused, the old configuration stays: {e}"),
        );
        warn!(config = %config_path.display(), error = %reply.message, "reload refused");
        reply
    };
    let (cfg, rules) = crate::systemd::load_config(config_path).map_err(|e| invalid(&e))?;
    if cfg.control != ctl.config().control || cfg.metrics != ctl.config().metrics {
        warn!("[control] and [metrics] changes take effect at the next restart");
    }
    let n_rules = cfg.cgroup.len();
    ctl.reload(cfg, rules).map_err(|e| invalid(&e))?;
    info!(config = %config_path.display(), rules = n_rules, "configuration reloaded");
    Ok(Reloaded {
        config: config_path.display().to_string(),
        rules: n_rules,
        overrides_kept: ctl.overrides().count(),
    })
}

/// The cgroup a command names: a cgroup path a rule names (or one with a recorded override),
/// else the managed cgroup of the running container with that name, id or id prefix
/// (at least 12 hex digits). Anything else gets the path checks and errors as before.
pub fn target(ctl: &Controller, arg: &str, root: &str) -> Result<String, ErrorReply> {
    let path = ctl::normalize_cgroup(arg, root);
    if let Ok(p) = &path
        && (ctl.configured(p).is_some() || ctl.override_for(p).is_some())
    {
        return Ok(p.clone());
    }
    let name = arg.trim().trim_start_matches('/');
    if name.is_empty() || name.contains('/') {
        return path;
    }
    match ctl.find_container(name) {
        Found::Managed(p) => Ok(p),
        Found::Unmanaged { name, id }
            if [
                format!("machine.slice/libpod-{id}.scope"),
                format!("system.slice/docker-{id}.scope"),
            ]
            .iter()
            .any(|p| ctl.configured(p).is_some()) =>
        {
            Err(ErrorReply::new(
                ErrorKind::UnknownCgroup,
                format!(
                    "container {name} ({}) is running and a rule names its runtime's scopes, but \
                     its cgroup is not managed yet (it was adopted at no tick so far, or it lives \
                     elsewhere in the cgroup tree); try again in a moment, and see memweightctl \
                     status",
                    id.get(..12).unwrap_or(&id)
                ),
            ))
        }
        Found::Unmanaged { name, id } => Err(ErrorReply::new(
            ErrorKind::NotManaged,
            format!(
                "container {name} ({}) is running, but no [[cgroup]] rule names its cgroup; add a \
                 glob such as machine.slice/libpod-*.scope (podman) or \
                 system.slice/docker-*.scope (docker) and run memweightctl reload",
                id.get(..12).unwrap_or(&id)
            ),
        )),
        Found::Ambiguous(names) => Err(ErrorReply::new(
            ErrorKind::BadRequest,
            format!(
                "{name:?} is the start of the ids of several containers ({}); give the name or \
                 more of the id",
                names.join(", ")
            ),
        )),
        Found::None => Err(ErrorReply::new(
            ErrorKind::NotManaged,
            format!(
                "no managed cgroup or running container named {name}; see memweightctl status \
                 for the managed cgroups and their containers"
            ),
        )),
    }
}

fn require_rule(ctl: &Controller, path: &str) -> Result<(), ErrorReply> {
    if ctl.configured(path).is_some() {
        Ok(())
    } else {
        Err(ErrorReply::new(
            ErrorKind::NotManaged,
            format!(
                "{path} is not managed: no [[cgroup]] rule in the configuration names it; add \
                 one and run memweightctl reload"
            ),
        ))
    }
}

fn unknown(path: &str, root: &str) -> ErrorReply {
    ErrorReply::new(
        ErrorKind::UnknownCgroup,
        format!(
            "{path}: a rule names it but no such cgroup is managed now (is there a cgroup \
             {root}/{path} with the memory controller?)"
        ),
    )
}

fn last(ctl: &Controller) -> Result<&TickReport, ErrorReply> {
    ctl.last_report().ok_or_else(ErrorReply::not_ready)
}

/// The last tick's row of a cgroup, with the weight the next tick plans with (its `setting`
/// now) where a `set` or `unset` since changed it: `status` right after `set` does not show
/// the old weight alone.
fn with_next_weight(row: &CgroupStatus, setting: &Setting) -> CgroupStatus {
    let next = setting.effective.weight;
    CgroupStatus {
        next_weight: (next != row.weight).then_some(next),
        ..row.clone()
    }
}

fn setting(ctl: &Controller, path: &str) -> Setting {
    let values = |s: Settings| Values {
        weight: s.weight,
        min: (s.min > 0).then_some(s.min),
        max: s.max,
    };
    let resolved = ctl.resolve(path);
    let configured = resolved.as_ref().map_or(
        Values {
            weight: memweight_policy::DEFAULT_WEIGHT,
            min: None,
            max: None,
        },
        |r| values(r.configured),
    );
    let ov = ctl.override_for(path);
    let effective = match (&resolved, ov) {
        (Some(r), _) => values(r.settings),
        (None, None) => configured,
        // An override recorded for a cgroup no rule names any more.
        (None, Some(o)) => Values {
            weight: o.weight,
            min: o.min.or(configured.min),
            max: o.max.or(configured.max),
        },
    };
    let source = match &resolved {
        Some(r) => Some(r.source.clone()),
        None => ov.map(|_| WeightSource::Override),
    };
    let (container, labels, label_clamps) = resolved.map_or((None, None, Vec::new()), |r| {
        (r.container, r.labels, r.label_clamps)
    });
    Setting {
        cgroup: path.to_owned(),
        managed: ctl.is_managed(path),
        configured,
        runtime_override: ov.map(|o| Values {
            weight: o.weight,
            min: o.min,
            max: o.max,
        }),
        effective,
        container,
        labels,
        source,
        label_clamps,
    }
}
