//! `cargo xtask`: project tasks.
//!
//! * `cargo xtask test` — the project's test command: `cargo test --workspace`, then
//!   `cargo xtask lab test` (`--no-lab` skips the VM).
//!
//! * `cargo xtask deb [--lint]` — the Debian package `target/debian/memweight_*.deb` (cargo-deb,
//!   from the lab's static build; `--lint` runs lintian on it). See `deb`.
//!
//! * `cargo xtask lab run SCENARIO.toml --out DIR [--kernel 6.1|6.12]` — boot a Debian kernel in
//!   QEMU (TCG) with a busybox initramfs, run the scenario through the guest `lab-agent`, stream
//!   a progress line per second, and write `timeseries.csv`, `summary.json`, `plot.svg`,
//!   `console.log`, `daemon.log` and `commands/` into `DIR`.
//! * `cargo xtask lab test` — the CI entry: every `tests/lab/scenarios/ci-*.toml` on both
//!   kernels, with the scenario's `[[check]]` assertions; non-zero exit on any failure.
//! * `cargo xtask lab fetch` — install the host packages and download the kernels only.
//! * `cargo xtask lab compare [SCENARIO…]` — several scenarios × kernels, one markdown table
//!   (default: the three seed 002 ways on both kernels).
//! * `cargo xtask lab judge --out DIR --kernel K [--run]` — issue 19's bars: each daemon
//!   scenario beside the kernel alone's run of the same batch (`--run` runs the batch first).
//!
//! The flow is `deps` (host packages) → `kernel` (apt-get download + dpkg -x, module list) →
//! `guest` (static build of the guest binaries) → `initramfs` → `vm` (boot, console) →
//! `results` (decode framed records) → `summary`, `plot`, `checks`. See `docs/lab.md`.

mod checks;
mod deb;
mod deps;
mod guest;
mod hostimg;
mod initramfs;
mod judge;
mod kernel;
mod plot;
mod prom;
mod qmp;
mod results;
mod run;
mod summary;
mod vm;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use lab_agent::scenario::Kernel;

/// Project tasks.
#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "memweight project tasks"
)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// The project's test command: `cargo test --workspace`, then `lab test`.
    Test {
        /// Only the unit and integration tests, not the QEMU lab.
        #[arg(long)]
        no_lab: bool,
    },
    /// Build the Debian package target/debian/memweight_VERSION-REVISION_amd64.deb.
    Deb {
        /// Debian revision instead of the metadata's `1` (e.g. `2` for a newer build).
        #[arg(long)]
        revision: Option<String>,
        /// Run lintian on the package; fail on any tag docs/design.md does not explain.
        #[arg(long)]
        lint: bool,
        /// Package the static binaries built last time instead of building them.
        #[arg(long)]
        no_build: bool,
    },
    /// The real-kernel QEMU lab.
    Lab {
        #[command(subcommand)]
        command: LabCommand,
    },
}

#[derive(Subcommand)]
enum LabCommand {
    /// Run one scenario in the VM and write its results.
    Run {
        /// Scenario file (see docs/lab.md).
        scenario: PathBuf,
        /// Output directory (created; existing files are overwritten).
        #[arg(long)]
        out: PathBuf,
        /// Kernel to boot instead of the scenario's `kernel`.
        #[arg(long, value_parser = parse_kernel)]
        kernel: Option<Kernel>,
        /// Use the guest binaries already built instead of rebuilding them.
        #[arg(long)]
        no_build: bool,
    },
    /// CI: run the ci-*.toml scenarios on both kernels and check their assertions.
    Test {
        /// Only scenarios whose file name contains this.
        #[arg(long)]
        filter: Option<String>,
        /// Only this kernel.
        #[arg(long, value_parser = parse_kernel)]
        kernel: Option<Kernel>,
    },
    /// Install the host packages and download both kernels; nothing else.
    Fetch,
    /// Run several scenarios on several kernels and print a markdown results table
    /// (default: the three seed 002 ways on both kernels, for docs/lab.md).
    Compare {
        /// Scenario files (default: tests/lab/scenarios/seed002{-default,-static-low,}.toml).
        scenarios: Vec<PathBuf>,
        /// Output root; each run goes to `DIR/<scenario>-<kernel>`.
        #[arg(long, default_value = "lab-out")]
        out: PathBuf,
        /// Kernels (default: both).
        #[arg(long, value_parser = parse_kernel)]
        kernel: Vec<Kernel>,
    },
    /// Issue 19's bars: each daemon scenario beside the kernel alone's run of the same batch
    /// (`DIR/<scenario>-<kernel>`), a markdown table and a verdict per bar; `--run` runs the
    /// batch first (ten scenarios, about 35 minutes under TCG).
    Judge {
        /// The batch's folder.
        #[arg(long)]
        out: PathBuf,
        /// Kernel the batch ran on.
        #[arg(long, value_parser = parse_kernel)]
        kernel: Kernel,
        /// Run the batch into the folder first (each scenario alone, one after another).
        #[arg(long)]
        run: bool,
    },
}

fn parse_kernel(s: &str) -> Result<Kernel, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Top::Test { no_lab } => run::test_all(!no_lab),
        Top::Deb {
            revision,
            lint,
            no_build,
        } => run::deb(revision.as_deref(), lint, !no_build),
        Top::Lab { command } => match command {
            LabCommand::Run {
                scenario,
                out,
                kernel,
                no_build,
            } => run::lab_run(&scenario, &out, kernel, !no_build),
            LabCommand::Test { filter, kernel } => run::lab_test(filter.as_deref(), kernel),
            LabCommand::Fetch => run::lab_fetch(),
            LabCommand::Compare {
                scenarios,
                out,
                kernel,
            } => run::lab_compare(&scenarios, &out, &kernel),
            LabCommand::Judge { out, kernel, run } => run::lab_judge(&out, kernel, run),
        },
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
