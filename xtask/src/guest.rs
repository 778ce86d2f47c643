//! Static builds of the programs that run inside the guest, in their own target directory
//! (`target/lab/build`) so they do not fight with the host build.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::deps;

/// The host (and guest) target triple.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// `(cargo package, binary)` of every guest program.
pub const GUEST_BINARIES: [(&str, &str); 4] = [
    ("memweightd", "memweightd"),
    ("memweightctl", "memweightctl"),
    ("memweight-workload", "memweight-workload"),
    ("lab-agent", "lab-agent"),
];

/// Where the static binaries land.
pub fn bin_dir(lab_dir: &Path) -> PathBuf {
    lab_dir.join("build").join(TARGET).join("release")
}

/// The real-kernel test of memweight-cgroupfs (`crates/cgroupfs/tests/kernel.rs`), built with
/// the guest programs and copied beside them under this name (cargo names a test binary by a
/// hash). `ci-dry-run.toml` runs it in the guest as
/// `MEMWEIGHT_TEST_CGROUP_ROOT=/sys/fs/cgroup cgroupfs-kernel-test --test-threads=1`.
pub const KERNEL_TEST: &str = "cgroupfs-kernel-test";

/// `cargo` set up for the guest: static, release without debug info or symbols, in the lab's
/// own target directory.
fn static_cargo(workspace: &Path, lab_dir: &Path) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        // The initramfs lives in guest RAM: no debug info, no symbol tables.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .env("CARGO_PROFILE_RELEASE_STRIP", "symbols")
        .env("CARGO_TARGET_DIR", lab_dir.join("build"));
    cmd
}

/// Builds the guest programs and [`KERNEL_TEST`] statically (unless `build` is false) and
/// checks they are static.
pub fn build(workspace: &Path, lab_dir: &Path, build: bool) -> Result<Vec<PathBuf>> {
    let stamp_path = bin_dir(lab_dir).join(SOURCE_STAMP);
    if build {
        // Taken before the build: a source edited while cargo runs makes the binaries stale.
        // The old stamp goes first: a build that fails may have replaced some programs.
        let stamp = source_stamp(workspace);
        match std::fs::remove_file(&stamp_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", stamp_path.display()));
            }
            _ => {}
        }
        eprintln!("lab: building the guest programs (static, release) into target/lab/build");
        let mut cmd = static_cargo(workspace, lab_dir);
        cmd.args(["build", "--release", "-j2", "--target", TARGET]);
        for (package, _) in GUEST_BINARIES {
            cmd.args(["-p", package]);
        }
        let status = cmd.status().context("cannot run cargo")?;
        if !status.success() {
            bail!(
                "building the guest programs failed ({status}); fix the build above, or pass \
                 --no-build to boot the binaries built last time"
            );
        }
        build_kernel_test(workspace, lab_dir)?;
        if let Some(stamp) = stamp {
            std::fs::write(&stamp_path, stamp)
                .with_context(|| format!("cannot write {}", stamp_path.display()))?;
        }
    } else if let Some(now) = source_stamp(workspace) {
        let built = std::fs::read_to_string(&stamp_path).ok();
        if built.as_deref() != Some(now.as_str()) {
            bail!(
                "the guest programs in {} were not built from this tree's crates/, Cargo.toml \
                 and Cargo.lock (they changed since, or were edited during the last build): \
                 drop --no-build to build them",
                bin_dir(lab_dir).display()
            );
        }
    }
    let dir = bin_dir(lab_dir);
    let mut out = Vec::new();
    let names = GUEST_BINARIES.iter().map(|(_, bin)| *bin);
    for bin in names.chain([KERNEL_TEST]) {
        let path = dir.join(bin);
        if !path.is_file() {
            bail!(
                "{} is missing: build the guest programs (drop --no-build)",
                path.display()
            );
        }
        if !deps::is_static_elf(&path)? {
            bail!(
                "{} is dynamically linked, but the guest has no libc: build with \
                 RUSTFLAGS=\"-C target-feature=+crt-static\"",
                path.display()
            );
        }
        out.push(path);
    }
    Ok(out)
}

/// The file beside the guest programs naming the sources they were built from
/// ([`source_stamp`]), so that `--no-build` cannot boot binaries of another tree unnoticed (a
/// whole batch once ran a reverted change's law that way: docs/lab.md, 2026-12-07).
const SOURCE_STAMP: &str = "source.stamp";

/// What the guest programs are built from: the committed tree of `crates/` and the uncommitted
/// changes to it and to the workspace's manifest and lock file. `None` outside a git checkout
/// (or without git): nothing to compare.
fn source_stamp(workspace: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(workspace)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let tree = git(&["rev-parse", "HEAD:crates"])?;
    let diff = git(&["diff", "HEAD", "--", "crates", "Cargo.toml", "Cargo.lock"])?;
    let untracked = git(&["ls-files", "--others", "--exclude-standard", "--", "crates"])?;
    Some(format!("{tree}{untracked}{diff}"))
}

/// Builds the cgroupfs kernel test like the guest programs and copies it to [`KERNEL_TEST`] in
/// [`bin_dir`].
fn build_kernel_test(workspace: &Path, lab_dir: &Path) -> Result<()> {
    let output = static_cargo(workspace, lab_dir)
        .args(["test", "--release", "-j2", "--target", TARGET])
        .args(["-p", "memweight-cgroupfs", "--test", "kernel", "--no-run"])
        .arg("--message-format=json-render-diagnostics")
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("cannot run cargo")?;
    if !output.status.success() {
        bail!(
            "building the cgroupfs kernel test failed ({}); fix the build above",
            output.status
        );
    }
    let built = test_executable(&String::from_utf8_lossy(&output.stdout), "kernel")
        .context("cargo named no executable for memweight-cgroupfs's kernel test")?;
    let to = bin_dir(lab_dir).join(KERNEL_TEST);
    std::fs::copy(&built, &to)
        .with_context(|| format!("cannot copy {} to {}", built.display(), to.display()))?;
    Ok(())
}

/// The executable of the test target `name` in cargo's JSON messages.
fn test_executable(messages: &str, name: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (2026-12-07): `--no-build` booted the binaries of a reverted change for a whole
    /// batch. The stamp is the same while the sources are, and changes with an edit to
    /// `crates/` (committed or not) or a new file there, not with one elsewhere.
    #[test]
    fn regression_no_build_ran_another_trees_binaries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .current_dir(repo)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .expect("git runs");
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        std::fs::create_dir_all(repo.join("crates/a")).expect("mkdir");
        std::fs::write(repo.join("crates/a/lib.rs"), "fn a() {}\n").expect("write");
        std::fs::write(repo.join("README.md"), "x\n").expect("write");
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "one"]);
        let built = source_stamp(repo).expect("a git checkout has a stamp");
        assert_eq!(source_stamp(repo).as_deref(), Some(built.as_str()));
        std::fs::write(repo.join("README.md"), "y\n").expect("write");
        assert_eq!(
            source_stamp(repo).as_deref(),
            Some(built.as_str()),
            "docs only"
        );
        std::fs::write(repo.join("crates/a/lib.rs"), "fn b() {}\n").expect("write");
        let edited = source_stamp(repo).expect("stamp");
        assert_ne!(edited, built, "an uncommitted edit");
        git(&["commit", "-q", "-am", "two"]);
        let committed = source_stamp(repo).expect("stamp");
        assert_ne!(committed, built, "a committed edit");
        std::fs::write(repo.join("crates/a/new.rs"), "").expect("write");
        assert_ne!(source_stamp(repo).expect("stamp"), committed, "a new file");
        assert_eq!(
            source_stamp(&repo.join("crates/a/none")),
            None,
            "not a checkout"
        );
    }

    #[test]
    fn the_kernel_tests_executable_is_read_from_cargos_messages() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"memweight_cgroupfs","kind":["lib"]},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"kernel","kind":["test"]},"executable":"/t/release/deps/kernel-0f3a"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n",
        );
        assert_eq!(
            test_executable(messages, "kernel"),
            Some(PathBuf::from("/t/release/deps/kernel-0f3a"))
        );
        assert_eq!(test_executable(messages, "other"), None);
    }
}
