//! Debian kernels for the lab: resolve the package from its meta package, `apt-get download`
//! and `dpkg -x` it into `target/lab/kernels/<series>/<package>/` (cached), and pick the zram
//! modules with their dependencies (read from each module's `depends=` modinfo), decompressed
//! for busybox `insmod`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use lab_agent::scenario::Kernel;

use crate::deps;

/// The modules the busybox guest loads (their dependencies are added).
const WANTED_MODULES: [&str; 1] = ["zram"];

/// The modules the host guest's initramfs loads to mount its ext4 root on virtio-blk
/// (`crc32c_generic` is a soft dependency of ext4 that nothing would load for it).
const BOOT_MODULES: [&str; 4] = ["virtio_pci", "virtio_blk", "crc32c_generic", "ext4"];

/// An unpacked kernel ready to boot.
#[derive(Debug, Clone)]
pub struct KernelFiles {
    /// Debian package name.
    pub package: String,
    /// `uname -r` of the kernel (the `lib/modules/` directory name).
    pub release: String,
    /// The bzImage.
    pub vmlinuz: PathBuf,
    /// Plain `.ko` files in load order.
    pub modules: Vec<PathBuf>,
    /// Plain `.ko` files the host guest's initramfs loads, in load order.
    pub boot_modules: Vec<PathBuf>,
    /// The unpacked `lib/modules/<release>` tree (the host guest's image copies from it).
    pub module_tree: PathBuf,
}

fn meta_package(k: Kernel) -> &'static str {
    match k {
        Kernel::V6_1 => "linux-image-amd64",
        Kernel::V6_12 => "linux-image-6.12-amd64",
    }
}

fn package_prefix(k: Kernel) -> &'static str {
    match k {
        Kernel::V6_1 => "linux-image-6.1.",
        Kernel::V6_12 => "linux-image-6.12.",
    }
}

/// The `linux-image-…` dependency named in `apt-cache depends META` output.
fn depends_image(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|name| name.starts_with(prefix) && !name.contains('<'))
        .map(str::to_owned)
}

fn resolve_package(k: Kernel) -> Result<String> {
    let meta = meta_package(k);
    let query = || -> Option<String> {
        let out = Command::new("apt-cache")
            .args(["depends", meta])
            .output()
            .ok()?;
        depends_image(&String::from_utf8_lossy(&out.stdout), package_prefix(k))
    };
    if let Some(p) = query() {
        return Ok(p);
    }
    if deps::is_root() {
        eprintln!("lab: apt-cache does not know {meta}; running apt-get update");
        deps::apt_get(&["update"])?;
        if let Some(p) = query() {
            return Ok(p);
        }
    }
    bail!(
        "cannot resolve the {k} kernel package: `apt-cache depends {meta}` names no {}* \
         (run `apt-get update` as root, or check that bookworm(-backports/-security) is in \
         the apt sources)",
        package_prefix(k)
    )
}

/// The newest package already unpacked in the cache, for when apt cannot answer.
fn cached_package(series_dir: &Path) -> Option<String> {
    let mut names: Vec<String> = fs::read_dir(series_dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(".complete").exists())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names.pop()
}

/// Downloads (if needed) and prepares the kernel of series `k` under `lab_dir/kernels`.
pub fn fetch(lab_dir: &Path, k: Kernel) -> Result<KernelFiles> {
    let series_dir = lab_dir.join("kernels").join(k.as_str());
    fs::create_dir_all(&series_dir)
        .with_context(|| format!("cannot create {}", series_dir.display()))?;
    let package = match resolve_package(k) {
        Ok(p) => p,
        Err(e) => match cached_package(&series_dir) {
            Some(p) => {
                eprintln!("lab: {e:#}; using the cached {p}");
                p
            }
            None => return Err(e),
        },
    };
    let root = series_dir.join(&package);
    if !root.join(".complete").exists() {
        download(&series_dir, &package, &root)?;
    }
    let vmlinuz = find_vmlinuz(&root)?;
    let modules_root = root.join("lib/modules");
    let release = fs::read_dir(&modules_root)
        .with_context(|| format!("{} has no lib/modules", root.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .next()
        .with_context(|| format!("{} is empty", modules_root.display()))?;
    let mod_dir = modules_root.join(&release);
    let modules = prepare_modules(&mod_dir, &root.join("initrd-modules"), &WANTED_MODULES)?;
    let boot_modules = prepare_modules(&mod_dir, &root.join("boot-modules"), &BOOT_MODULES)?;
    Ok(KernelFiles {
        package,
        release,
        vmlinuz,
        modules,
        boot_modules,
        module_tree: mod_dir,
    })
}

fn download(series_dir: &Path, package: &str, root: &Path) -> Result<()> {
    let dl = series_dir.join("download");
    let _ = fs::remove_dir_all(&dl);
    fs::create_dir_all(&dl).with_context(|| format!("cannot create {}", dl.display()))?;
    eprintln!("lab: downloading {package} (about 100 MB) with apt-get download");
    let status = Command::new("apt-get")
        .args(["download", package])
        .current_dir(&dl)
        .status()
        .context("cannot run apt-get")?;
    if !status.success() {
        bail!(
            "`apt-get download {package}` failed ({status}); run `apt-get update` and check \
             the network/apt sources"
        );
    }
    let deb = fs::read_dir(&dl)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .with_context(|| format!("apt-get download left no .deb in {}", dl.display()))?;
    let _ = fs::remove_dir_all(root);
    eprintln!("lab: unpacking {} with dpkg -x", deb.display());
    let status = Command::new("dpkg")
        .arg("-x")
        .arg(&deb)
        .arg(root)
        .status()
        .context("cannot run dpkg")?;
    if !status.success() {
        bail!(
            "`dpkg -x {} {}` failed ({status})",
            deb.display(),
            root.display()
        );
    }
    fs::write(root.join(".complete"), package)
        .with_context(|| format!("cannot mark {} complete", root.display()))?;
    let _ = fs::remove_dir_all(&dl);
    Ok(())
}

fn find_vmlinuz(root: &Path) -> Result<PathBuf> {
    let boot = root.join("boot");
    fs::read_dir(&boot)
        .with_context(|| format!("cannot list {}", boot.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .with_context(|| format!("no vmlinuz-* in {}", boot.display()))
}

/// Module name of a file (`zram.ko.xz` → `zram`), with `-` folded to `_` as the kernel does.
fn module_name(file: &str) -> Option<String> {
    let stem = file
        .strip_suffix(".ko.xz")
        .or_else(|| file.strip_suffix(".ko.zst"))
        .or_else(|| file.strip_suffix(".ko"))?;
    Some(stem.replace('-', "_"))
}

fn index_modules(dir: &Path, index: &mut BTreeMap<String, PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            index_modules(&path, index)?;
        } else if let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(module_name)
        {
            index.insert(name, path);
        }
    }
    Ok(())
}

/// The comma-separated `depends=` of a module's `.modinfo`.
pub fn modinfo_depends(ko: &[u8]) -> Vec<String> {
    let key = b"depends=";
    let mut i = 0;
    while let Some(pos) = ko
        .get(i..)
        .and_then(|rest| rest.windows(key.len()).position(|w| w == key))
    {
        let start = i + pos;
        let at_string_start = start == 0 || ko.get(start - 1) == Some(&0);
        let value_start = start + key.len();
        if at_string_start {
            let end = ko
                .get(value_start..)
                .and_then(|rest| rest.iter().position(|&b| b == 0))
                .map_or(ko.len(), |n| value_start + n);
            let value = String::from_utf8_lossy(ko.get(value_start..end).unwrap_or_default());
            return value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| s.replace('-', "_"))
                .collect();
        }
        i = value_start;
    }
    Vec::new()
}

fn read_module(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    if name.ends_with(".xz") {
        let out = Command::new("xz")
            .arg("-dc")
            .arg(path)
            .output()
            .context("cannot run xz (install xz-utils)")?;
        if !out.status.success() {
            bail!(
                "`xz -dc {}` failed: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(out.stdout)
    } else if name.ends_with(".zst") {
        bail!(
            "{} is zstd-compressed; the lab only handles .ko and .ko.xz",
            path.display()
        )
    } else {
        fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    }
}

fn prepare_modules(mod_dir: &Path, out_dir: &Path, wanted: &[&str]) -> Result<Vec<PathBuf>> {
    let mut index = BTreeMap::new();
    index_modules(&mod_dir.join("kernel"), &mut index)?;
    let builtin: BTreeSet<String> = fs::read_to_string(mod_dir.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit('/').next().and_then(module_name))
        .collect();
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let mut order = Vec::new();
    let mut done = BTreeSet::new();
    for m in wanted {
        add_module(m, &index, &builtin, out_dir, &mut done, &mut order, 0)?;
    }
    Ok(order)
}

fn add_module(
    name: &str,
    index: &BTreeMap<String, PathBuf>,
    builtin: &BTreeSet<String>,
    out_dir: &Path,
    done: &mut BTreeSet<String>,
    order: &mut Vec<PathBuf>,
    depth: usize,
) -> Result<()> {
    if done.contains(name) {
        return Ok(());
    }
    if depth > 16 {
        bail!("module dependencies of {name} loop");
    }
    let Some(src) = index.get(name) else {
        if builtin.contains(name) {
            done.insert(name.to_owned());
            return Ok(());
        }
        bail!("module {name} is neither in this kernel package nor built in");
    };
    let bytes = read_module(src)?;
    for dep in modinfo_depends(&bytes) {
        add_module(&dep, index, builtin, out_dir, done, order, depth + 1)?;
    }
    let dst = out_dir.join(format!("{name}.ko"));
    fs::write(&dst, &bytes).with_context(|| format!("cannot write {}", dst.display()))?;
    done.insert(name.to_owned());
    order.push(dst);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_image_from_apt_cache_output() {
        let text = "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n";
        assert_eq!(
            depends_image(text, "linux-image-6.1."),
            Some("linux-image-6.1.0-56-amd64".into())
        );
        let text = "linux-image-6.12-amd64\n  Depends: linux-image-6.12.117+deb12-amd64\n";
        assert_eq!(
            depends_image(text, "linux-image-6.12."),
            Some("linux-image-6.12.117+deb12-amd64".into())
        );
        assert_eq!(depends_image("", "linux-image-6.1."), None);
    }

    #[test]
    fn module_names_and_depends() {
        assert_eq!(module_name("zram.ko.xz"), Some("zram".into()));
        assert_eq!(
            module_name("lz4hc-compress.ko"),
            Some("lz4hc_compress".into())
        );
        assert_eq!(module_name("README"), None);
        let ko = b"\x00license=GPL\x00depends=lz4hc_compress,lz4_compress\x00retpoline=Y\x00";
        assert_eq!(modinfo_depends(ko), vec!["lz4hc_compress", "lz4_compress"]);
        assert!(modinfo_depends(b"\x00depends=\x00").is_empty());
        assert!(modinfo_depends(b"xdepends=foo\x00").is_empty());
    }

    #[test]
    fn orders_dependencies_first_and_skips_builtins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kdir = dir.path().join("kernel/drivers");
        fs::create_dir_all(&kdir).expect("mkdir");
        fs::write(kdir.join("zram.ko"), b"\x00depends=zsmalloc,lz4\x00").expect("write");
        fs::write(kdir.join("lz4.ko"), b"\x00depends=\x00").expect("write");
        fs::write(
            dir.path().join("modules.builtin"),
            "kernel/mm/zsmalloc.ko\n",
        )
        .expect("write");
        let out = dir.path().join("out");
        let order = prepare_modules(dir.path(), &out, &WANTED_MODULES).expect("resolves");
        let names: Vec<_> = order
            .iter()
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()))
            .collect();
        assert_eq!(names, vec!["lz4.ko", "zram.ko"]);
    }
}
