//! memweightd: the weighted memory reclamation daemon, as a library.
//!
//! The binary (`main.rs`) only parses arguments, sets up logging and signals and runs the loop;
//! everything else lives here so tests can drive ticks against a fake cgroupfs tree.
//!
//! Data flow, once per tick (see ARCHITECTURE.md):
//!
//! ```text
//! cgroupfs + /proc ──sample──▶ Controller ──rows──▶ step (pure: capacity, floors,
//!        ▲                         │                  memweight_policy::plan, decide)
//!        └──── memory.high/low ◀───┴──── writes ◀─────────┘
//!              memory.reclaim   (on the blocking pool, when the Controller allows them)
//! ```
//!
//! * [`config`], [`capacity`], [`decide`], [`step`]: the configuration and the control law
//!   of one tick as one pure function, re-exported from `memweight-law` (shared with
//!   `memweightctl plan`); what the tests and proptests drive.
//! * [`containers`]: container names and labels from the podman/docker API, refreshed by a
//!   background task the loop never waits on.
//! * [`labels`]: what container labels ask for, bounded by their rule (pure).
//! * [`annotations`]: a pod's `memweight.io/*` annotations (podman's libpod inspect, once per
//!   container without labels); labels win.
//! * [`cgroupns`]: the daemon's own cgroup from inside a container's cgroup namespace.
//! * [`controller`]: the state owner and the tick, in rooms: membership (discovery, settings
//!   resolved once per tick), sampling, jobs (writes, restores), report.
//! * [`ledger`]: every original limit (managed cgroups and ancestors) and its copy on disk;
//!   adopt, reconcile, record, restore and release return what happened. No cgroup I/O.
//! * [`state`]: originals and overrides that survive restarts (atomic JSON, with the previous
//!   good generation kept).
//! * [`state_writer`]: the thread that writes the state file, off the loop's thread; the loop
//!   waits only for saves that add or change an original.
//! * [`server`]: the control socket: requests in, typed commands to the loop, replies out.
//! * [`peer`]: who a control client is, from the socket (`SO_PEERCRED`, `SO_PEERGROUPS`).
//! * [`pools`]: bounded shares of the blocking pool, for kernel writes and credential checks.
//! * [`commands`]: what the loop does with those commands (`set`, `get`, `explain`,
//!   `reload`, ...) on the controller's state.
//! * [`interrupt`]: a time bound on a `memory.high` write the kernel would let reclaim in the
//!   writer for as long as the cgroup refaults.
//! * [`desk`]: between the two: answers `status` from the last published report, so it
//!   never waits for a tick; forwards everything else to the loop.
//! * [`logging`]: native journal entries under systemd, one-line text on stderr otherwise.
//! * [`metrics`]: the Prometheus endpoint, fed by snapshots the loop publishes.
//! * [`resident`]: keeps the daemon's own memory locked in RAM, of its program only the text it
//!   runs.
//! * [`systemd`]: readiness and watchdog notifications, and `tick` checked against the
//!   service's watchdog.

pub mod annotations;
pub mod cgroupns;
pub mod commands;
pub mod containers;
pub mod controller;
pub mod desk;
pub mod interrupt;
pub mod labels;
pub mod ledger;
pub mod logging;
pub mod metrics;
pub mod outside;
pub mod peer;
pub mod pools;
pub mod resident;
pub mod server;
pub mod state;
pub mod state_writer;
pub mod systemd;

// The law lives in memweight-law (memweightctl plan runs it too); its modules keep their
// paths here.
pub use memweight_law::{capacity, config, decide, step};
