//! The host guest's disk: a Debian bookworm container host built from Debian's packages with
//! `mmdebstrap` (systemd, podman, crun, redis, zram-generator), a container root file system
//! under `/srv/ctr`, the lab kernels' modules, and the lab agent's unit; written to an ext4
//! image with `mke2fs -d` (no loop mount) and cached under `target/lab/host/<key>/root.img`,
//! keyed by everything that goes into it. Each boot opens it with `snapshot=on`, so a run never
//! changes the cached image.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use lab_agent::scenario::Install;

use crate::deps;
use crate::kernel::KernelFiles;

/// The guest's packages (`mmdebstrap --variant=minbase --include=…`).
pub const PACKAGES: &[&str] = &[
    "systemd-sysv",
    "systemd",
    "systemd-zram-generator",
    "udev",
    "kmod",
    "dbus",
    "podman",
    "crun",
    "conmon",
    // The pause program of the infra container every pod has (`podman kube play`, host-kube):
    // podman 4.3 builds its local pause image from it; a Recommends that minbase leaves out.
    "catatonit",
    // For the docker scenario (host-docker.toml); its units are disabled in the image.
    "docker.io",
    "redis-server",
    "redis-tools",
    "iproute2",
    "procps",
    "e2fsprogs",
    "jq",
    "curl",
    "netcat-openbsd",
    // host-hostile.toml's fake container engine (a Unix socket answering garbage).
    "socat",
];

/// The containers' root file system (`--variant=essential`), run with `podman --rootfs`.
pub const CONTAINER_PACKAGES: &[&str] = &["redis-server"];

/// The Debian suite.
const SUITE: &str = "bookworm";

/// Size of the (sparse) disk image; room for page-cache files and podman's state.
const IMAGE_SIZE: &str = "4G";

/// Module directories copied from each lab kernel (what zram, virtio-balloon, ext4, overlay,
/// podman's networking and the crypto they need live in); `depmod` runs in the guest root.
const MODULE_DIRS: &[&str] = &[
    "kernel/arch",
    "kernel/crypto",
    "kernel/drivers/block",
    "kernel/drivers/char",
    "kernel/drivers/virtio",
    "kernel/fs/ext4",
    "kernel/fs/jbd2",
    "kernel/fs/fuse",
    "kernel/fs/overlayfs",
    "kernel/lib",
    "kernel/mm",
    "kernel/net/802",
    "kernel/net/bridge",
    "kernel/net/core",
    "kernel/net/ipv4",
    "kernel/net/ipv6",
    "kernel/net/llc",
    "kernel/net/netfilter",
    "kernel/net/sched",
];

/// Single module files copied besides [`MODULE_DIRS`] (any of `.ko`, `.ko.xz`).
const MODULE_FILES: &[&str] = &[
    "kernel/fs/mbcache",
    "kernel/drivers/net/veth",
    "kernel/drivers/net/dummy",
    "kernel/drivers/net/tun",
    "kernel/drivers/net/virtio_net",
    "kernel/drivers/net/net_failover",
];

/// The lab agent's unit: runs the scenario once the system is up, reports on ttyS0 (the
/// kernel console is ttyS1), and powers the guest off when it is done.
pub const AGENT_UNIT: &str = "[Unit]
Description=memweight lab agent (runs the scenario, reports on ttyS0)
After=multi-user.target

[Service]
Type=exec
Environment=PATH=/opt/memweight-lab/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
Environment=NO_COLOR=1
ExecStart=/opt/memweight-lab/bin/lab-agent /opt/memweight-lab/scenario.toml
StandardOutput=tty
StandardError=journal
TTYPath=/dev/ttyS0
TTYReset=no
TTYVHangup=no
TimeoutStopSec=10
# The agent powers off by itself when it is done; these cover its failing to.
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Install]
WantedBy=multi-user.target
";

/// Files written into the root (path, contents); part of the cache key.
const FILES: &[(&str, &str)] = &[
    ("etc/hostname", "memweight-host\n"),
    (
        "etc/hosts",
        "127.0.0.1 localhost\n127.0.1.1 memweight-host\n",
    ),
    ("etc/fstab", "/dev/vda / ext4 rw,relatime 0 1\n"),
    ("etc/systemd/system/memweight-lab.service", AGENT_UNIT),
    // A volatile journal: the results carry what the run needs.
    (
        "etc/systemd/journald.conf.d/lab.conf",
        "[Journal]\nStorage=volatile\n",
    ),
    // No zram until the initramfs writes the scenario's size here.
    ("etc/systemd/zram-generator.conf", ""),
    (
        "etc/containers/containers.conf.d/lab.conf",
        "[engine]\ncgroup_manager = \"systemd\"\nevents_logger = \"journald\"\n",
    ),
];

/// Units masked (symlinked to /dev/null): no getty may hang up the serial ports, and nothing
/// periodic should run during a measurement.
const MASKED: &[&str] = &[
    "serial-getty@.service",
    "getty@.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
    "systemd-tmpfiles-clean.timer",
    "podman-auto-update.timer",
    "podman-auto-update.service",
    "podman-restart.service",
    // The image's own redis (the containers run theirs).
    "redis-server.service",
];

/// Units the packages enable that the image leaves off (a scenario starts them): docker and
/// containerd, which would otherwise take memory and boot time in every run.
const DISABLED: &[&str] = &[
    "multi-user.target.wants/docker.service",
    "sockets.target.wants/docker.socket",
    "multi-user.target.wants/containerd.service",
];

/// FNV-1a, 64 bits: a stable cache key (std's hasher may change between Rust releases).
fn fnv(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The cache key: packages, files, masks, module lists and the kernels' releases.
pub fn key(kernels: &[&KernelFiles]) -> String {
    let mut parts: Vec<String> = vec![SUITE.into(), IMAGE_SIZE.into()];
    parts.extend(PACKAGES.iter().map(|s| (*s).to_owned()));
    parts.push("--container--".into());
    parts.extend(CONTAINER_PACKAGES.iter().map(|s| (*s).to_owned()));
    for (path, text) in FILES {
        parts.push((*path).to_owned());
        parts.push((*text).to_owned());
    }
    parts.extend(MASKED.iter().map(|s| (*s).to_owned()));
    parts.extend(DISABLED.iter().map(|s| (*s).to_owned()));
    parts.extend(MODULE_DIRS.iter().map(|s| (*s).to_owned()));
    parts.extend(MODULE_FILES.iter().map(|s| (*s).to_owned()));
    parts.extend(kernels.iter().map(|k| k.release.clone()));
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    fnv(&refs)
}

/// The Debian mirror the host's apt uses (its `debian.sources` or `sources.list`), or
/// deb.debian.org.
fn mirror() -> String {
    let mut text = String::new();
    for f in [
        "/etc/apt/sources.list.d/debian.sources",
        "/etc/apt/sources.list",
    ] {
        text.push_str(&fs::read_to_string(f).unwrap_or_default());
        text.push('\n');
    }
    mirror_from(&text).unwrap_or_else(|| "http://deb.debian.org/debian".to_owned())
}

/// The first Debian archive URL (not the security archive) in apt sources text, either format.
fn mirror_from(text: &str) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| {
            let l = l.trim();
            let words: Vec<&str> = if let Some(rest) = l.strip_prefix("URIs:") {
                rest.split_whitespace().collect()
            } else if l.starts_with("deb ") {
                l.split_whitespace()
                    .filter(|w| w.starts_with("http"))
                    .take(1)
                    .collect()
            } else {
                Vec::new()
            };
            words.into_iter().map(str::to_owned).collect::<Vec<_>>()
        })
        .find(|u| u.ends_with("/debian") || u.ends_with("/debian/"))
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Copies `src` (a file or directory) into `dst_dir` with `cp -a` (keeps links and modes).
fn cp_a(src: &Path, dst_dir: &Path) -> Result<()> {
    fs::create_dir_all(dst_dir).with_context(|| format!("cannot create {}", dst_dir.display()))?;
    run(
        Command::new("cp").arg("-a").arg(src).arg(dst_dir),
        &format!("cp -a {} {}", src.display(), dst_dir.display()),
    )
}

fn install_modules(root: &Path, k: &KernelFiles) -> Result<()> {
    let dst = root.join("lib/modules").join(&k.release);
    for d in MODULE_DIRS {
        let src = k.module_tree.join(d);
        if src.is_dir() {
            let parent = Path::new(d).parent().unwrap_or(Path::new(""));
            cp_a(&src, &dst.join(parent))?;
        }
    }
    for f in MODULE_FILES {
        for ext in [".ko", ".ko.xz"] {
            let src = k.module_tree.join(format!("{f}{ext}"));
            if src.is_file() {
                let parent = Path::new(f).parent().unwrap_or(Path::new(""));
                cp_a(&src, &dst.join(parent))?;
            }
        }
    }
    for meta in [
        "modules.order",
        "modules.builtin",
        "modules.builtin.modinfo",
    ] {
        let src = k.module_tree.join(meta);
        if src.is_file() {
            fs::copy(&src, dst.join(meta))
                .with_context(|| format!("cannot copy {}", src.display()))?;
        }
    }
    run(
        Command::new("chroot")
            .arg(root)
            .args(["depmod", "-a", &k.release]),
        &format!("depmod {} in the guest root", k.release),
    )
}

fn customize(root: &Path, kernels: &[&KernelFiles]) -> Result<()> {
    for (path, text) in FILES {
        let p = root.join(path);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
    }
    let units = root.join("etc/systemd/system");
    for unit in MASKED {
        let link = units.join(unit);
        let _ = fs::remove_file(&link);
        symlink("/dev/null", &link).with_context(|| format!("cannot mask {unit}"))?;
    }
    for link in DISABLED {
        let _ = fs::remove_file(units.join(link));
    }
    let wants = units.join("multi-user.target.wants");
    fs::create_dir_all(&wants).with_context(|| format!("cannot create {}", wants.display()))?;
    let link = wants.join("memweight-lab.service");
    let _ = fs::remove_file(&link);
    symlink("/etc/systemd/system/memweight-lab.service", &link)
        .context("cannot enable memweight-lab.service")?;
    // The payload directory the initramfs fills; the machine id is made at first boot.
    fs::create_dir_all(root.join("opt/memweight-lab")).context("cannot create opt/")?;
    let _ = fs::write(root.join("etc/machine-id"), "");
    for k in kernels {
        install_modules(root, k)?;
    }
    Ok(())
}

/// Returns the cached image for these kernels, building it first when it is missing.
pub fn ensure(lab_dir: &Path, kernels: &[&KernelFiles]) -> Result<PathBuf> {
    let key = key(kernels);
    let base = lab_dir.join("host");
    let dir = base.join(&key);
    let image = dir.join("root.img");
    if dir.join(".complete").exists() && image.is_file() {
        return Ok(image);
    }
    build(&base, &dir, &image, kernels).with_context(|| {
        format!(
            "cannot build the host guest image in {} — it needs root, Debian's mmdebstrap and \
             e2fsprogs (`apt-get install mmdebstrap e2fsprogs`) and apt access to the Debian \
             archive; after fixing that, rerun `cargo xtask lab run \
             tests/lab/scenarios/host-podman.toml --out lab-out/host-podman`",
            dir.display()
        )
    })?;
    Ok(image)
}

fn build(base: &Path, dir: &Path, image: &Path, kernels: &[&KernelFiles]) -> Result<()> {
    if !deps::is_root() {
        bail!("building the host guest's root file system needs root (mmdebstrap, chroot)");
    }
    deps::ensure_packages(&[("mmdebstrap", "mmdebstrap"), ("mke2fs", "e2fsprogs")])?;
    // Older images are of no more use: keep the disk from filling up.
    if let Ok(entries) = fs::read_dir(base) {
        for e in entries.filter_map(|e| e.ok()) {
            if e.path() != dir {
                eprintln!(
                    "lab: removing the outdated host image {}",
                    e.path().display()
                );
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
    let _ = fs::remove_dir_all(dir);
    let root = dir.join("root");
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mirror = mirror();
    let source = format!("deb {mirror} {SUITE} main");
    let started = Instant::now();
    eprintln!(
        "lab: building the host guest root with mmdebstrap ({} packages from {mirror}; about a \
         minute)",
        PACKAGES.len()
    );
    run(
        Command::new("mmdebstrap")
            .args(["--quiet", "--variant=minbase", "--mode=root"])
            .arg(format!("--include={}", PACKAGES.join(",")))
            .arg(SUITE)
            .arg(&root)
            .arg(&source),
        "mmdebstrap (host root)",
    )?;
    eprintln!(
        "lab: host root done in {:.0}s; building the container root (/srv/ctr)",
        started.elapsed().as_secs_f64()
    );
    let ctr = root.join("srv/ctr");
    run(
        Command::new("mmdebstrap")
            .args(["--quiet", "--variant=essential", "--mode=root"])
            .arg(format!("--include={}", CONTAINER_PACKAGES.join(",")))
            .arg(SUITE)
            .arg(&ctr)
            .arg(&source),
        "mmdebstrap (container root)",
    )?;
    eprintln!(
        "lab: container root done at {:.0}s; adding the lab's files and kernel modules",
        started.elapsed().as_secs_f64()
    );
    customize(&root, kernels)?;
    eprintln!(
        "lab: writing the ext4 image {} ({IMAGE_SIZE}, sparse)",
        image.display()
    );
    run(
        Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext4", "-L", "root", "-d"])
            .arg(&root)
            .arg(image)
            .arg(IMAGE_SIZE),
        "mke2fs -d",
    )?;
    fs::remove_dir_all(&root).with_context(|| format!("cannot remove {}", root.display()))?;
    let mut note = String::new();
    let _ = writeln!(note, "packages: {}", PACKAGES.join(" "));
    let _ = writeln!(note, "container packages: {}", CONTAINER_PACKAGES.join(" "));
    for k in kernels {
        let _ = writeln!(note, "modules: {}", k.release);
    }
    fs::write(dir.join(".complete"), note).context("cannot mark the image complete")?;
    eprintln!(
        "lab: host image ready in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The README's `## Install` section as the host guest runs it: the first ```sh block (the
/// Debian package) or the second (the manual lines), every line but comments and `cargo …`
/// (the lab builds the static binaries and the package itself and puts them where those
/// commands would: `target/release/`, `target/debian/`).
pub fn readme_install(readme: &str, install: Install) -> Result<String> {
    let mut lines = readme.lines().skip_while(|l| l.trim() != "## Install");
    if lines.next().is_none() {
        bail!("README.md has no `## Install` section: the host guest installs memweightd by it");
    }
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in lines.take_while(|l| !l.starts_with("## ")) {
        if line.trim_start().starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(Vec::new()),
            }
        } else if let Some(block) = current.as_mut() {
            block.push(line);
        }
    }
    let (index, what, must) = match install {
        Install::Package => (0, "first (the Debian package)", "apt install ./"),
        Install::Manual => (1, "second (the manual lines)", "systemctl enable --now"),
    };
    let Some(block) = blocks.get(index) else {
        bail!(
            "README.md's `## Install` section has no {what} ```sh block: the host guest \
             (install = \"{}\") runs it",
            if install == Install::Package {
                "package"
            } else {
                "manual"
            }
        );
    };
    let mut script = format!(
        "# The README's install steps, {what} block (cargo xtask lab, from README.md `## \
         Install`).\nset -e\n"
    );
    for line in block {
        let code = line.split(" #").next().unwrap_or("").trim();
        if code.is_empty() || code.starts_with('#') || code.starts_with("cargo ") {
            continue;
        }
        script.push_str(line.trim());
        script.push('\n');
    }
    if !script.contains(must) {
        bail!("README.md's {what} install block has no `{must}` line: it would not install");
    }
    Ok(script)
}

/// What the payload is made of.
pub struct Payload<'a> {
    /// The workspace (README.md, config/, systemd/).
    pub workspace: &'a Path,
    /// Static guest binaries (memweightd, memweightctl, memweight-workload, lab-agent).
    pub binaries: &'a [PathBuf],
    /// The scenario text.
    pub scenario_text: &'a str,
    /// `[daemon.config]` of the scenario, if any (else the repository's config is installed).
    pub daemon_config: Option<String>,
    /// Which of the README's install blocks runs.
    pub install: Install,
    /// The Debian package the README's `apt install` installs (`install = "package"`), and a
    /// newer build of it (`/opt/memweight-lab/upgrade/`) for scenarios that upgrade.
    pub packages: Option<(&'a Path, &'a Path)>,
    /// zram swap size in bytes (0: none).
    pub zram: u64,
}

/// Stages the payload the host initramfs copies to `/opt/memweight-lab`.
pub fn stage_payload(dir: &Path, p: &Payload<'_>) -> Result<()> {
    let _ = fs::remove_dir_all(dir);
    let repo = dir.join("repo");
    for d in [
        "bin",
        "repo/target/release",
        "repo/target/debian",
        "repo/config",
        "repo/systemd",
        "repo/deploy/image",
        "repo/deploy/kubernetes",
        "upgrade",
    ] {
        fs::create_dir_all(dir.join(d))
            .with_context(|| format!("cannot create {}", dir.join(d).display()))?;
    }
    for bin in p.binaries {
        let name = bin.file_name().context("binary without a name")?;
        let to = if name == "memweightd" || name == "memweightctl" {
            repo.join("target/release").join(name)
        } else {
            dir.join("bin").join(name)
        };
        fs::copy(bin, &to).with_context(|| format!("cannot copy {}", bin.display()))?;
    }
    let readme =
        fs::read_to_string(p.workspace.join("README.md")).context("cannot read README.md")?;
    let mut install = readme_install(&readme, p.install)?;
    if p.install == Install::Package {
        let Some((package, upgrade)) = p.packages else {
            bail!("install = \"package\" needs the Debian package (cargo xtask deb)");
        };
        for (deb, to) in [(package, "repo/target/debian"), (upgrade, "upgrade")] {
            let name = deb.file_name().context("package without a name")?;
            fs::copy(deb, dir.join(to).join(name))
                .with_context(|| format!("cannot copy {}", deb.display()))?;
        }
        if p.daemon_config.is_some() {
            install.push_str(
                "# cargo xtask lab: the scenario's [daemon.config] replaces the package's config.\n\
                 install -m 0644 config/memweight.toml /etc/memweight/memweight.toml\n\
                 systemctl restart memweightd.service\n",
            );
        }
    }
    fs::write(dir.join("install.sh"), install).context("cannot write install.sh")?;
    let config = match &p.daemon_config {
        Some(c) => c.clone(),
        None => fs::read_to_string(p.workspace.join("config/memweight.toml"))
            .context("cannot read config/memweight.toml")?,
    };
    fs::write(repo.join("config/memweight.toml"), config).context("cannot write the config")?;
    for unit in ["memweightd.service", "memweightd.socket"] {
        let src = p.workspace.join("systemd").join(unit);
        fs::copy(&src, repo.join("systemd").join(unit))
            .with_context(|| format!("cannot copy {}", src.display()))?;
    }
    // The node agent's image and pod (host-kube: `podman build`, `podman kube play`).
    for f in [
        "deploy/image/Containerfile",
        "deploy/kubernetes/pod.yaml",
        "deploy/kubernetes/configmap.yaml",
        "deploy/kubernetes/daemonset.yaml",
        "deploy/kubernetes/restore-pod.yaml",
    ] {
        fs::copy(p.workspace.join(f), repo.join(f)).with_context(|| format!("cannot copy {f}"))?;
    }
    fs::write(dir.join("scenario.toml"), p.scenario_text).context("cannot write scenario")?;
    let zram = if p.zram == 0 {
        String::new()
    } else {
        format!(
            "[zram0]\nzram-size = {}\nswap-priority = 100\n",
            p.zram >> 20
        )
    };
    fs::write(dir.join("zram-generator.conf"), zram).context("cannot write the zram config")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_install_keeps_the_shell_lines_but_cargo() {
        let readme = "# x\n## Install\n\ntext\n```sh\ncargo xtask deb\n\
                      apt install ./target/debian/memweight_*_amd64.deb  # starts it\n```\n\
                      Or by hand:\n```sh\ncargo build --release -p memweightd\n\
                      install -m 0755 a /usr/local/bin/   # binaries\n# comment\n\
                      systemctl daemon-reload && systemctl enable --now memweightd\n```\n\
                      ## Next\n```sh\nnot this\n```\n";
        let package = readme_install(readme, Install::Package).expect("extracts");
        assert!(
            !package.lines().any(|l| l.starts_with("cargo ")),
            "{package}"
        );
        assert!(
            package.contains("apt install ./target/debian/memweight_*_amd64.deb  # starts it\n")
        );
        assert!(!package.contains("/usr/local/bin"), "{package}");
        let manual = readme_install(readme, Install::Manual).expect("extracts");
        assert!(!manual.contains("cargo build"));
        assert!(manual.contains("install -m 0755 a /usr/local/bin/   # binaries\n"));
        assert!(manual.contains("systemctl enable --now memweightd\n"));
        assert!(!manual.contains("apt install"));
        assert!(!manual.contains("not this"));
        assert!(readme_install("## Usage\n", Install::Package).is_err());
        let one_block = "## Install\n```sh\napt install ./x.deb\n```\n## Next\n```sh\ny\n```\n";
        assert!(readme_install(one_block, Install::Package).is_ok());
        assert!(readme_install(one_block, Install::Manual).is_err());
        assert!(readme_install("## Install\n```sh\ndpkg -i x\n```\n", Install::Package).is_err());
    }

    #[test]
    fn the_real_readme_installs_the_package_and_by_hand() {
        let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let readme = fs::read_to_string(ws.join("README.md")).expect("README.md");
        let package = readme_install(&readme, Install::Package).expect("package install");
        assert!(
            package.contains("apt install ./target/debian/"),
            "{package}"
        );
        let manual = readme_install(&readme, Install::Manual).expect("manual install");
        assert!(manual.contains("/usr/local/bin"), "{manual}");
        assert!(manual.contains("enable --now memweightd"), "{manual}");
    }

    #[test]
    fn mirror_is_read_from_both_source_formats() {
        let deb822 = "Types: deb\n# http://snapshot.example/x\nURIs: http://deb.debian.org/debian\n\
                      Suites: bookworm\n\nURIs: http://deb.debian.org/debian-security\n";
        assert_eq!(
            mirror_from(deb822).as_deref(),
            Some("http://deb.debian.org/debian")
        );
        let list = "deb [arch=amd64] http://mirror.example/debian bookworm main\n";
        assert_eq!(
            mirror_from(list).as_deref(),
            Some("http://mirror.example/debian")
        );
        assert_eq!(
            mirror_from("deb http://x/debian-security bookworm-security main"),
            None
        );
    }

    #[test]
    fn key_changes_with_what_goes_in() {
        assert_ne!(fnv(&["a", "bc"]), fnv(&["ab", "c"]));
        assert_eq!(fnv(&["x"]), fnv(&["x"]));
    }
}
