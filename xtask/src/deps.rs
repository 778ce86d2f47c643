//! Host tools the lab needs, installed from Debian's packages when we are root.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Where Debian's busybox-static puts its binary.
pub const BUSYBOX: &str = "/bin/busybox";

/// `(program, Debian package)` pairs the lab runs on the host.
const TOOLS: [(&str, &str); 4] = [
    ("qemu-system-x86_64", "qemu-system-x86"),
    ("cpio", "cpio"),
    ("xz", "xz-utils"),
    ("gzip", "gzip"),
];

/// Finds `program` on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// True when the effective user is root (read from `/proc/self/status`).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Whether an ELF file is statically linked: it has no `PT_INTERP` program header.
pub fn is_static_elf(path: &Path) -> Result<bool> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    elf_has_interp(&bytes)
        .map(|interp| !interp)
        .with_context(|| format!("{} is not a 64-bit little-endian ELF file", path.display()))
}

fn elf_has_interp(bytes: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if bytes.get(0..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None;
    }
    let u16_at = |o: usize| -> Option<u16> {
        Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?))
    };
    let u32_at = |o: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?))
    };
    let u64_at = |o: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?))
    };
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for i in 0..phnum {
        if u32_at(phoff.checked_add(i.checked_mul(phentsize)?)?)? == PT_INTERP {
            return Some(true);
        }
    }
    Some(false)
}

fn busybox_ok() -> bool {
    is_static_elf(Path::new(BUSYBOX)).unwrap_or(false)
}

/// Packages to install for what is missing.
fn missing_packages() -> Vec<&'static str> {
    let mut missing = missing_programs(&TOOLS);
    if !busybox_ok() {
        missing.push("busybox-static");
    }
    missing
}

/// The packages of the `(program, Debian package)` pairs whose program is not on `PATH`.
fn missing_programs<'a>(tools: &[(&str, &'a str)]) -> Vec<&'a str> {
    tools
        .iter()
        .filter(|(program, _)| which(program).is_none())
        .map(|(_, package)| *package)
        .collect()
}

/// Checks the lab's host tools (qemu, cpio, xz, gzip, a static busybox); installs what is
/// missing with apt-get when root.
pub fn ensure_host_tools() -> Result<()> {
    install_missing(missing_packages)
}

/// Installs the packages `missing()` names (when root; otherwise says what to install) and
/// checks that nothing is missing afterwards.
fn install_missing(missing: impl Fn() -> Vec<&'static str>) -> Result<()> {
    let first = missing();
    if first.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!(
            "the lab needs these Debian packages: {} — install them with \
             `sudo apt-get install -y {}` (or run the lab as root to install them automatically)",
            first.join(", "),
            first.join(" ")
        );
    }
    eprintln!("lab: installing {} with apt-get", first.join(" "));
    apt_get(&["update"])?;
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend(first.iter().copied());
    apt_get(&args)?;
    let still = missing();
    if !still.is_empty() {
        let hint = if still.contains(&"busybox-static") {
            format!(" (is {BUSYBOX} the static busybox?)")
        } else {
            String::new()
        };
        bail!(
            "apt-get install finished but {} is still missing{hint}",
            still.join(", ")
        );
    }
    Ok(())
}

/// Checks that each `(program, Debian package)` is on `PATH`; installs the missing packages
/// with apt-get when root, and otherwise says what to install.
pub fn ensure_packages(tools: &'static [(&'static str, &'static str)]) -> Result<()> {
    install_missing(|| missing_programs(tools))
}

/// Runs `apt-get ARGS` non-interactively with its output on the terminal.
pub fn apt_get(args: &[&str]) -> Result<()> {
    let status = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("cannot run apt-get: the lab needs a Debian-like host")?;
    if !status.success() {
        bail!("`apt-get {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf_with_phdrs(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[0..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        let n = u16::try_from(types.len()).expect("few headers");
        b[0x38..0x3a].copy_from_slice(&n.to_le_bytes());
        for t in types {
            let mut ph = vec![0u8; 56];
            ph[0..4].copy_from_slice(&t.to_le_bytes());
            b.extend(ph);
        }
        b
    }

    #[test]
    fn static_and_dynamic_elves() {
        assert_eq!(elf_has_interp(&elf_with_phdrs(&[1, 1, 7])), Some(false));
        assert_eq!(elf_has_interp(&elf_with_phdrs(&[6, 3, 1])), Some(true));
        assert_eq!(elf_has_interp(b"#!/bin/sh\n"), None);
        let mut truncated = elf_with_phdrs(&[1, 3]);
        truncated.truncate(80);
        assert_eq!(elf_has_interp(&truncated), None);
    }

    #[test]
    fn this_test_binary_is_an_elf() {
        let me = std::env::current_exe().expect("own path");
        assert!(is_static_elf(&me).is_ok());
    }
}
