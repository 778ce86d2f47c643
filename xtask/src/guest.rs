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
    if build {
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
