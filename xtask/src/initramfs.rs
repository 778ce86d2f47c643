//! The guest's initramfs: static busybox, the guest programs, the zram modules, the scenario
//! and a tiny `/init`, packed as a gzip'd newc cpio archive.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::deps::BUSYBOX;

/// `/init`: mount the pseudo file systems and cgroup2, run the agent, power off.
///
/// The first memory cgroup the kernel brings online enables `memcg_kmem_online_key`, and the
/// kernel rewrites every site of that static key while the other vCPU may be running one; under
/// TCG that rarely traps (CI, 2026-11-26: an `int3` left in `free_unref_page` on 6.12, 4 s after
/// boot). `/init` brings one online and removes it before the agent starts, so that the one-time
/// patching happens while the machine boots (a panic there is a boot failure, booted again)
/// rather than in the run (docs/lab.md, "Boot panics under TCG").
pub const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s /bin
mount -t cgroup2 none /sys/fs/cgroup
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/boot-warmup && rmdir /sys/fs/cgroup/boot-warmup
mkdir -p /tmp /run /etc /var/lib/memweight
export PATH=/bin:/sbin
export HOME=/root
/bin/lab-agent /scenario.toml
echo "@@MWLAB-EXIT $?"
sync
poweroff -f
"#;

/// The host guest's `/init`: load the virtio and ext4 modules, mount the root disk, copy the
/// run's payload (binaries, scenario, the repository files the README's install steps use)
/// into `/opt/memweight-lab`, set the scenario's zram size, and hand over to systemd. A
/// failure is reported on ttyS0 (the records port) so that the host stops waiting at once.
pub const HOST_INIT: &str = r#"#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
fail() {
    echo "initramfs: $*"
    echo "@@MWLAB-EXIT 90 initramfs: $*" > /dev/ttyS0
    sync
    poweroff -f
}
for m in $(cat /modules/order); do
    insmod "/modules/$m" || echo "initramfs: insmod $m failed"
done
i=0
while [ ! -b /dev/vda ]; do
    i=$((i + 1))
    [ "$i" -gt 300 ] && fail "no /dev/vda after 30 s (virtio_blk not loaded?)"
    sleep 0.1
done
mkdir -p /newroot
mount -t ext4 -o rw /dev/vda /newroot || fail "cannot mount /dev/vda"
mkdir -p /newroot/opt/memweight-lab
cp -a /payload/. /newroot/opt/memweight-lab/ || fail "cannot copy the payload"
cp /payload/zram-generator.conf /newroot/etc/systemd/zram-generator.conf || fail "no zram config"
mount -o move /dev /newroot/dev || umount /dev
mount -o move /proc /newroot/proc || umount /proc
mount -o move /sys /newroot/sys || umount /sys
exec switch_root /newroot /lib/systemd/systemd
"#;

/// What goes into the archive.
pub struct Contents<'a> {
    /// Guest programs, installed into `/bin`.
    pub binaries: &'a [PathBuf],
    /// Kernel modules in load order, installed into `/modules` with an `order` file.
    pub modules: &'a [PathBuf],
    /// Scenario text, installed as `/scenario.toml`.
    pub scenario: &'a str,
    /// `/init` ([`INIT`] or [`HOST_INIT`]).
    pub init: &'a str,
    /// A directory copied to `/payload` (host guest).
    pub payload: Option<&'a Path>,
}

fn copy_exec(src: &Path, dst: &Path) -> Result<()> {
    fs::copy(src, dst)
        .with_context(|| format!("cannot copy {} to {}", src.display(), dst.display()))?;
    fs::set_permissions(dst, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot chmod {}", dst.display()))
}

fn list_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .with_context(|| format!("{} is outside {}", path.display(), root.display()))?;
        out.push(rel.to_string_lossy().into_owned());
        if e.file_type()?.is_dir() {
            list_files(root, &path, out)?;
        }
    }
    Ok(())
}

/// Stages the contents in `stage` (recreated) and writes `out` (`…cpio.gz`).
pub fn build(stage: &Path, out: &Path, contents: &Contents<'_>) -> Result<()> {
    let _ = fs::remove_dir_all(stage);
    for d in [
        "bin", "sbin", "proc", "sys", "dev", "tmp", "run", "etc", "root", "modules",
    ] {
        fs::create_dir_all(stage.join(d))
            .with_context(|| format!("cannot create {}", stage.join(d).display()))?;
    }
    copy_exec(Path::new(BUSYBOX), &stage.join("bin/busybox"))?;
    for bin in contents.binaries {
        let name = bin.file_name().context("binary path without a file name")?;
        copy_exec(bin, &stage.join("bin").join(name))?;
    }
    let mut order = String::new();
    for m in contents.modules {
        let name = m.file_name().context("module path without a file name")?;
        fs::copy(m, stage.join("modules").join(name))
            .with_context(|| format!("cannot copy {}", m.display()))?;
        order.push_str(&name.to_string_lossy());
        order.push('\n');
    }
    fs::write(stage.join("modules/order"), order).context("cannot write modules/order")?;
    fs::write(stage.join("scenario.toml"), contents.scenario)
        .context("cannot write scenario.toml")?;
    if let Some(payload) = contents.payload {
        let status = Command::new("cp")
            .arg("-a")
            .arg(payload)
            .arg(stage.join("payload"))
            .status()
            .context("cannot run cp")?;
        if !status.success() {
            bail!("cp -a {} failed ({status})", payload.display());
        }
    }
    fs::write(stage.join("init"), contents.init).context("cannot write init")?;
    fs::set_permissions(stage.join("init"), fs::Permissions::from_mode(0o755))
        .context("cannot chmod init")?;

    let mut files = Vec::new();
    list_files(stage, stage, &mut files)?;
    let cpio_path = out.with_extension("");
    let mut child = Command::new("cpio")
        .args(["-o", "-H", "newc", "-R", "0:0", "--quiet", "-O"])
        .arg(&cpio_path)
        .current_dir(stage)
        .stdin(Stdio::piped())
        .spawn()
        .context("cannot run cpio (install cpio)")?;
    {
        let mut stdin = child.stdin.take().context("cpio has no stdin")?;
        for f in &files {
            writeln!(stdin, "{f}").context("cannot feed cpio")?;
        }
    }
    let status = child.wait().context("cpio did not finish")?;
    if !status.success() {
        bail!("cpio failed ({status}) packing {}", stage.display());
    }
    let status = Command::new("gzip")
        .args(["-1", "-f"])
        .arg(&cpio_path)
        .status()
        .context("cannot run gzip")?;
    if !status.success() {
        bail!("gzip failed ({status}) on {}", cpio_path.display());
    }
    let gz = PathBuf::from(format!("{}.gz", cpio_path.display()));
    if gz != out {
        fs::rename(&gz, out)
            .with_context(|| format!("cannot move {} to {}", gz.display(), out.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::INIT;

    #[test]
    fn regression_the_agents_first_memory_cgroup_patched_kernel_code_during_the_run() {
        let at = |needle: &str| INIT.find(needle).unwrap_or_else(|| panic!("no {needle:?}"));
        let agent = at("/bin/lab-agent");
        assert!(at("echo +memory > /sys/fs/cgroup/cgroup.subtree_control") < agent);
        assert!(at("mkdir /sys/fs/cgroup/boot-warmup") < agent);
        assert!(at("rmdir /sys/fs/cgroup/boot-warmup") < agent);
    }
}
