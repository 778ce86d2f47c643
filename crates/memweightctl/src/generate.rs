//! `memweightctl completions SHELL` and `memweightctl man`: generated from the clap
//! definitions, so they never drift from the real options.

use clap::{Args, ValueEnum};
use clap_complete::Shell;

use crate::{Failure, print};

/// Shells completions are generated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CompletionShell {
    /// bash (source it, or drop it in /usr/share/bash-completion/completions/memweightctl).
    Bash,
    /// zsh (put it on $fpath as _memweightctl).
    Zsh,
    /// fish (~/.config/fish/completions/memweightctl.fish).
    Fish,
}

/// Arguments of `memweightctl completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: CompletionShell,
}

/// Writes the completion script for `args.shell` to stdout.
pub(crate) fn completions(args: &CompletionArgs, mut cmd: clap::Command) -> Result<(), Failure> {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "memweightctl", &mut out);
    print(&String::from_utf8_lossy(&out))
}

/// Writes the man page (roff) to stdout: `memweightctl man > memweightctl.1`.
pub(crate) fn man(cmd: clap::Command) -> Result<(), Failure> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .map_err(|e| Failure::other(format_args!("rendering the man page: {e}")))?;
    print(&String::from_utf8_lossy(&out))
}
