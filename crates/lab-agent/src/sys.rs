//! Small file and process helpers the other rooms share: control files written (never
//! created), commands run quietly or inside a cgroup, and a child's exit in words.
//!
//! Not here: which files and processes the lab uses (`lab`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};

use anyhow::{Context, Result, bail};

/// A command that runs `program` inside the cgroup `dir`: a shell moves itself into the
/// cgroup, then execs, so nothing is allocated outside it and the pid stays the program's.
/// `NO_COLOR`: its output goes to a file, not a terminal.
pub(crate) fn in_cgroup(dir: &Path, program: &str, args: &[String]) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("echo 0 > \"$0\" && exec \"$@\"")
        .arg(dir.join("cgroup.procs"))
        .arg(program)
        .args(args)
        .env("NO_COLOR", "1");
    c
}

/// Writes an existing kernel control file (never creates one).
pub(crate) fn write_file(path: &Path, data: &str) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {} to write {data:?}", path.display()))?;
    f.write_all(data.as_bytes())
        .with_context(|| format!("writing {data:?} to {} failed", path.display()))
}

pub(crate) fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

pub(crate) fn run_quiet(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Starts `argv` with stdout piped and stderr to `log` (host guest: podman, systemd-run).
pub(crate) fn start_logged(argv: &[String], log: &Path) -> Result<Child> {
    let Some((program, args)) = argv.split_first() else {
        bail!("empty argv");
    };
    let stderr = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    Command::new(program)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {program}"))
}

pub(crate) fn mkdir(dir: &Path) -> Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot create cgroup {}", dir.display())),
    }
}

pub(crate) fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "unknown status".to_owned(),
    }
}

pub(crate) fn slug(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    s.trim_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_is_file_safe() {
        assert_eq!(
            slug("memweightctl status --json"),
            "memweightctl-status---json"
        );
        assert_eq!(slug("../../x"), "x");
    }
}
