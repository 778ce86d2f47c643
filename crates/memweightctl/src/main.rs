//! `memweightctl`: the command-line client of memweightd and its offline planner.
//!
//! Subcommands live in their own modules and share [`table`] for kubectl-style output:
//!
//! * `plan FILE|-` ([`plan`]): compute the targets for a plan file, no daemon needed.
//! * `set`, `unset`, `get`, `status`, `explain`, `reload` ([`remote`] over [`client`]): talk to
//!   a running memweightd on its control socket.
//! * `completions SHELL`, `man` ([`generate`]): generated from these clap definitions.
//!
//! Exit codes (also in `--help` and docs/operations.md): 0 success, 1 daemon-side error,
//! 2 bad input, 3 daemon not reachable, 4 permission denied, 5 protocol version mismatch.
//! Errors are one line on stderr: `memweightctl: <what>: <why>`.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

mod client;
mod generate;
mod plan;
mod remote;
mod table;

const EXIT_CODES: &str = "Exit codes: 0 success, 1 daemon-side error, 2 bad input \
(arguments, unknown or unmanaged cgroup, bad path or weight), 3 daemon not reachable, \
4 permission denied, 5 protocol version mismatch.";

/// Command-line client for memweightd, and an offline planner.
#[derive(Debug, Parser)]
#[command(name = "memweightctl", version, about, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compute weighted water-filling targets for a plan file offline.
    Plan(plan::PlanArgs),
    /// Override a managed cgroup's weight (and floor/ceiling) at run time; persisted.
    Set(remote::SetArgs),
    /// Drop a runtime override: the configured values apply again.
    Unset(remote::CgroupArgs),
    /// Show a cgroup's configured, overridden and effective settings.
    Get(remote::CgroupArgs),
    /// Show the pool and every managed cgroup as of the last tick.
    Status(remote::PlainArgs),
    /// Show the numbers and the reason behind a cgroup's target and writes.
    Explain(remote::CgroupArgs),
    /// Make the daemon re-read its configuration (like SIGHUP).
    Reload(remote::PlainArgs),
    /// Print a shell completion script.
    Completions(generate::CompletionArgs),
    /// Print the man page (roff).
    Man,
}

/// How a subcommand prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// Aligned columns with human sizes.
    Table,
    /// JSON with sizes in bytes.
    Json,
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    /// Process exit code.
    pub code: u8,
    /// One line: what failed and why.
    pub message: String,
}

impl Failure {
    /// Exit code for bad input.
    pub const BAD_INPUT: u8 = 2;

    /// Bad input: `<what>: <why>`, exit code 2.
    pub fn bad_input(what: &str, why: impl std::fmt::Display) -> Self {
        Self {
            code: Self::BAD_INPUT,
            message: format!("{what}: {why}"),
        }
    }

    /// Any other failure, exit code 1.
    pub fn other(message: impl std::fmt::Display) -> Self {
        Self {
            code: 1,
            message: message.to_string(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(args) => plan::run(&args),
        Command::Set(a) => remote::run(remote::Remote::Set(a)),
        Command::Unset(a) => remote::run(remote::Remote::Unset(a)),
        Command::Get(a) => remote::run(remote::Remote::Get(a)),
        Command::Status(a) => remote::run(remote::Remote::Status(a)),
        Command::Explain(a) => remote::run(remote::Remote::Explain(a)),
        Command::Reload(a) => remote::run(remote::Remote::Reload(a)),
        Command::Completions(a) => generate::completions(&a, Cli::command()),
        Command::Man => generate::man(Cli::command()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // Nothing sensible is left to do if stderr itself is gone.
            let _ = writeln!(io::stderr(), "memweightctl: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn print(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::other(format_args!("writing to stdout: {e}"))),
    }
}
