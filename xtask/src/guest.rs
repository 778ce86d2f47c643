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

/// Builds the guest programs statically (unless `build` is false) and checks they are static.
pub fn build(workspace: &Path, lab_dir: &Path, build: bool) -> Result<Vec<PathBuf>> {
    if build {
        eprintln!("lab: building the guest programs (static, release) into target/lab/build");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace)
            .args(["build", "--release", "-j2", "--target", TARGET])
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            // The initramfs lives in guest RAM: no debug info, no symbol tables.
            .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
            .env("CARGO_PROFILE_RELEASE_STRIP", "symbols")
            .env("CARGO_TARGET_DIR", lab_dir.join("build"));
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
    }
    let dir = bin_dir(lab_dir);
    let mut out = Vec::new();
    for (_, bin) in GUEST_BINARIES {
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
