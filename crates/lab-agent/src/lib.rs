//! The memweight lab's shared vocabulary and its guest agent.
//!
//! The lab proves memweightd on a real kernel: `cargo xtask lab run` (host) boots a Debian
//! kernel in QEMU with an initramfs whose `/init` runs the `lab-agent` binary (this crate) on a
//! scenario file. The agent sets up zram swap and cgroup v2, starts the workloads, the external
//! pressure and memweightd, samples the kernel every second and writes framed records on the
//! serial console; the host decodes them into `timeseries.csv`, `summary.json` and `plot.svg`.
//!
//! * [`scenario`] — the scenario TOML, parsed the same way on both sides.
//! * [`record`] — what the guest reports (samples, events, output files).
//! * [`frame`] — how records are framed and checked on the console.
//! * [`kfiles`] — pure parsers for the cgroup and `/proc` files the agent samples.

pub mod frame;
pub mod kfiles;
pub mod record;
pub mod scenario;
