//! `memweightctl`: the command-line client of memweightd and its offline planner.
//!
//! Subcommands live in their own modules and share [`table`] for kubectl-style output:
//!
//! * `plan FILE|-` ([`plan`]): compute the targets for a plan file, no daemon needed.
//! * `set`, `unset`, `get`, `status`, `explain`, `reload`, `version` ([`remote`] over
//!   [`client`]): talk to a running memweightd on its control socket; `status` filters and
//!   watches ([`watch`]).
//! * `health` ([`health`]): GET the daemon's `/healthz` on its metrics listener (a container's
//!   liveness probe; no curl needed).
//! * `completions SHELL`, `man` ([`generate`]): generated from these clap definitions.
//!
//! The options every subcommand shares ([`Global`]: `--output`, `--socket`, `--wait`) are
//! clap globals, so they go before or after the subcommand. The output format is what the
//! user chose, a table unless `-o json`/`-o wide`: it does not change when stdout is a pipe.
//!
//! Exit codes (also in `--help` and docs/operations.md): 0 success, 1 daemon-side error,
//! 2 bad input, 3 daemon not reachable, 4 permission denied, 5 protocol version mismatch.
//! Errors are one line on stderr: `memweightctl: <what>: <why>`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use memweight_proto::ctl;

mod client;
mod generate;
mod health;
mod narrative;
mod plan;
mod remote;
mod table;
mod watch;

const AFTER_HELP: &str = "Output: a table unless you ask for another format with -o; piping or \
redirecting the output does not change it (scripts say -o json). \
Global options (-o, --socket, --wait) go before or after the subcommand.\n\n\
Exit codes: 0 success, 1 daemon-side error, 2 bad input \
(arguments, unknown or unmanaged cgroup, bad path or weight), 3 daemon not reachable, \
4 permission denied, 5 protocol version mismatch.";

/// Command-line client for memweightd, and an offline planner.
#[derive(Debug, Parser)]
#[command(name = "memweightctl", version, about, after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options every subcommand takes, before or after its name.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Output format: a table whether or not stdout is a terminal, unless you choose another.
    #[arg(
        short,
        long,
        value_enum,
        global = true,
        default_value = "table",
        value_name = "FORMAT"
    )]
    pub output: OutputFormat,
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", env = "MEMWEIGHT_SOCKET", global = true,
        default_value = ctl::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// How long to wait for a daemon that has not completed its first tick (socket
    /// activation has just started it) before giving up; 0 gives up at once.
    #[arg(long, value_name = "SECONDS", global = true, default_value = "30",
        value_parser = parse_wait)]
    pub wait: Duration,
    /// Say on stderr how long the daemon took to answer, from connecting to its reply
    /// (memweightctl's own start-up not counted): tells a busy daemon from a busy host.
    #[arg(long, global = true)]
    pub timing: bool,
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
    /// Show the pool and the managed cgroups as of the last tick (filter by name, glob or
    /// path; -w to watch).
    Status(remote::StatusArgs),
    /// Show the numbers and the reason behind a cgroup's target and writes.
    Explain(remote::CgroupArgs),
    /// Make the daemon re-read its configuration (like SIGHUP, but it waits for the answer:
    /// exits 1 with the reason when the daemon refuses the file).
    Reload,
    /// Show this client's version and the daemon's.
    Version,
    /// Ask the daemon's /healthz (the metrics listener) whether its control loop ticks: exit 0
    /// on 200 (a container's liveness probe).
    Health(health::HealthArgs),
    /// Print a shell completion script.
    Completions(generate::CompletionArgs),
    /// Print the man page (roff).
    Man,
}

/// How a subcommand prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// Aligned columns with human sizes (`status`: fits 120 columns).
    Table,
    /// The table with every column and full cgroup paths.
    Wide,
    /// JSON with sizes in bytes.
    Json,
}

/// `--wait SECONDS`: 0 to 600, fractions allowed.
fn parse_wait(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if (0.0..=600.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("expected seconds from 0 to 600, got {text:?}")),
    }
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
    let g = &cli.global;
    let result = match cli.command {
        Command::Plan(args) => plan::run(&args, g.output),
        Command::Set(a) => remote::run(remote::Remote::Set(a), g),
        Command::Unset(a) => remote::run(remote::Remote::Unset(a), g),
        Command::Get(a) => remote::run(remote::Remote::Get(a), g),
        Command::Status(a) => remote::status(&a, g),
        Command::Explain(a) => remote::run(remote::Remote::Explain(a), g),
        Command::Reload => remote::run(remote::Remote::Reload, g),
        Command::Version => remote::version(g),
        Command::Health(a) => health::run(&a),
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

/// What became of a write to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// All of it went out.
    Done,
    /// The reader went away (`| head`): not an error, but nothing more is wanted.
    Closed,
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn print(text: &str) -> Result<(), Failure> {
    write_out(text).map(|_| ())
}

/// Writes `text` to stdout and says whether the reader is still there.
pub(crate) fn write_out(text: &str) -> Result<Written, Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(Written::Done),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Written::Closed),
        Err(e) => Err(Failure::other(format_args!("writing to stdout: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("memweightctl").chain(args.iter().copied()))
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_go_before_or_after_the_subcommand() {
        for args in [
            &["-o", "json", "status"][..],
            &["status", "-o", "json"],
            &["--output=json", "status", "web"],
        ] {
            let cli = parse(args).expect("parses");
            assert_eq!(cli.global.output, OutputFormat::Json, "{args:?}");
            assert!(matches!(cli.command, Command::Status(_)), "{args:?}");
        }
        let cli = parse(&["--socket", "/tmp/x.sock", "--wait", "2.5", "reload"]).expect("parses");
        assert_eq!(cli.global.socket, PathBuf::from("/tmp/x.sock"));
        assert_eq!(cli.global.wait, Duration::from_millis(2500));
        assert!(matches!(cli.command, Command::Reload));
        let cli = parse(&["get", "web", "--socket", "/tmp/y.sock", "-o", "wide"]).expect("parses");
        assert_eq!(cli.global.socket, PathBuf::from("/tmp/y.sock"));
        assert_eq!(cli.global.output, OutputFormat::Wide);
        let cli = parse(&["-o", "json", "plan", "-"]).expect("plan takes the global -o");
        assert_eq!(cli.global.output, OutputFormat::Json);
        assert!(!cli.global.timing);
        let cli = parse(&["status", "--timing"]).expect("parses");
        assert!(cli.global.timing);
    }

    /// The format is the user's choice alone: nothing here looks at stdout, and without `-o`
    /// it is the table.
    #[test]
    fn the_default_format_is_the_table() {
        let cli = parse(&["status"]).expect("parses");
        assert_eq!(cli.global.output, OutputFormat::Table);
        assert_eq!(cli.global.wait, Duration::from_secs(30));
    }

    #[test]
    fn bad_global_values_are_refused() {
        for args in [
            &["--wait", "-1", "status"][..],
            &["--wait", "601", "status"],
            &["--wait", "soon", "status"],
            &["-o", "yaml", "status"],
        ] {
            let e = parse(args).expect_err("refused");
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }
}
