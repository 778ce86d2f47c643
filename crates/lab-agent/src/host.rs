//! The host guest's side of the agent (`guest = "host"`): podman containers instead of
//! hand-made cgroups, a `systemd-run` scope for the in-guest pressure, memweightd installed by
//! the README's steps and run by its systemd unit, and the journal as the daemon's log.
//!
//! Everything here shells out to the real tools (podman, systemctl, systemd-run, journalctl):
//! the point of the host guest is to exercise them, not to imitate them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lab_agent::scenario::Runtime;

/// Where the initramfs puts the run's payload (binaries, scenario, the repo files the README's
/// install steps use).
pub const PAYLOAD: &str = "/opt/memweight-lab";
/// The containers' root file system (Debian with redis-server, built with the image).
pub const CONTAINER_ROOT: &str = "/srv/ctr";
/// memweightd's cgroup when systemd runs it.
pub const DAEMON_CGROUP: &str = "/sys/fs/cgroup/system.slice/memweightd.service";
/// The transient scope of the in-guest pressure process.
pub const PRESSURE_SCOPE: &str = "/sys/fs/cgroup/system.slice/lab-pressure.scope";
/// The workload program inside the containers (bind-mounted read-only from the payload).
const WORKLOAD_IN_CONTAINER: &str = "/usr/local/bin/memweight-workload";

/// The README's install steps as extracted by the host (`cargo xtask lab`).
pub fn install_script() -> PathBuf {
    Path::new(PAYLOAD).join("install.sh")
}

/// The directory the install steps run in (it mirrors the repository's layout).
pub fn repo_dir() -> PathBuf {
    Path::new(PAYLOAD).join("repo")
}

/// The image docker runs (imported from [`CONTAINER_ROOT`] by [`prepare_docker`]).
pub const DOCKER_IMAGE: &str = "memweight/ctr";

/// `podman run` / `docker run` for one scenario cgroup: attached (its stdout is the
/// workload's), removed on exit, host network, labels, and the container id written to
/// `cidfile` so the agent finds its cgroup. podman runs the image-less root file system
/// (`--rootfs`); docker the same tree imported as [`DOCKER_IMAGE`].
pub fn run_argv(
    runtime: Runtime,
    name: &str,
    labels: &BTreeMap<String, String>,
    argv: &[String],
    cidfile: &Path,
) -> Vec<String> {
    let engine = match runtime {
        Runtime::Podman => "podman",
        Runtime::Docker => "docker",
    };
    let mut v: Vec<String> = [
        engine,
        "run",
        "--rm",
        "--name",
        name,
        "--network",
        "host",
        "--cidfile",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    v.push(cidfile.display().to_string());
    for (k, val) in labels {
        v.push("--label".into());
        v.push(format!("{k}={val}"));
    }
    let workload = Path::new(PAYLOAD).join("bin/memweight-workload");
    v.push("-v".into());
    v.push(format!("{}:{WORKLOAD_IN_CONTAINER}:ro", workload.display()));
    match runtime {
        Runtime::Podman => {
            v.push("--rootfs".into());
            v.push(CONTAINER_ROOT.into());
        }
        Runtime::Docker => v.push(DOCKER_IMAGE.into()),
    }
    let mut args = argv.iter();
    if let Some(program) = args.next() {
        // The workload program is mounted at a fixed path; anything else runs as named.
        if program == "memweight-workload" {
            v.push(WORKLOAD_IN_CONTAINER.into());
        } else {
            v.push(program.clone());
        }
    }
    v.extend(args.cloned());
    v
}

/// A container id as podman writes it to `--cidfile`: 64 lowercase hex digits.
pub fn parse_cid(text: &str) -> Option<&str> {
    let id = text.trim();
    (id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then_some(id)
}

/// The cgroup the engine's systemd cgroup manager gives a container.
pub fn container_cgroup(runtime: Runtime, cid: &str) -> PathBuf {
    match runtime {
        Runtime::Podman => {
            Path::new("/sys/fs/cgroup/machine.slice").join(format!("libpod-{cid}.scope"))
        }
        Runtime::Docker => {
            Path::new("/sys/fs/cgroup/system.slice").join(format!("docker-{cid}.scope"))
        }
    }
}

/// The image a `kube = true` cgroup's pod runs: the workload program alone, from scratch,
/// built in the guest on first use (no registry).
pub const KUBE_WORKLOAD_IMAGE: &str = "localhost/memweight/workload:lab";

/// The Pod a `kube = true` cgroup runs, as JSON (which `podman kube play` reads as YAML): named
/// `name`, with `annotations`, host network, never restarted, one container `work` running
/// `argv` (`memweight-workload` at its path in [`KUBE_WORKLOAD_IMAGE`]). podman names the
/// container `<name>-work`.
pub fn kube_pod(name: &str, annotations: &BTreeMap<String, String>, argv: &[String]) -> String {
    let mut command: Vec<String> = argv.to_vec();
    if let Some(first) = command.first_mut()
        && first == "memweight-workload"
    {
        *first = WORKLOAD_IN_CONTAINER.to_owned();
    }
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "hostNetwork": true,
            "restartPolicy": "Never",
            "containers": [{
                "name": "work",
                "image": KUBE_WORKLOAD_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": command,
            }],
        },
    })
    .to_string()
}

/// The build context of [`KUBE_WORKLOAD_IMAGE`]: the workload program and a Containerfile
/// `FROM scratch` (written once; the agent runs in the guest).
pub fn kube_image_context() -> Result<PathBuf> {
    let dir = Path::new("/tmp/lab/kube-image");
    if !dir.join("Containerfile").exists() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let workload = Path::new(PAYLOAD).join("bin/memweight-workload");
        fs::copy(&workload, dir.join("memweight-workload"))
            .with_context(|| format!("cannot copy {}", workload.display()))?;
        fs::write(
            dir.join("Containerfile"),
            format!("FROM scratch\nCOPY memweight-workload {WORKLOAD_IN_CONTAINER}\n"),
        )
        .context("cannot write the workload's Containerfile")?;
    }
    Ok(dir.to_path_buf())
}

/// The lock every `podman kube play` of a run takes ([`kube_script`], and the scenario's own
/// plays): the pods start together, and the first play of a boot builds podman's pause image.
pub const KUBE_LOCK: &str = "/tmp/lab/kube.lock";

/// The shell line that starts a `kube = true` cgroup: under [`KUBE_LOCK`], builds
/// [`KUBE_WORKLOAD_IMAGE`] from `context` unless it exists and plays `pod_file`; then writes
/// the container's id to `cidfile` (as `podman run --cidfile` would) and follows the
/// container's output (the workload's JSON lines) until it ends.
pub fn kube_script(name: &str, context: &Path, pod_file: &Path, cidfile: &Path) -> String {
    let image = KUBE_WORKLOAD_IMAGE;
    let (context, pod, cid) = (context.display(), pod_file.display(), cidfile.display());
    format!(
        "set -e\n\
         flock {KUBE_LOCK} sh -c \
         'podman image exists {image} || podman build -q -t {image} {context} >&2; \
         podman kube play {pod} >&2'\n\
         podman inspect -f '{{{{.Id}}}}' {name}-work > {cid}\n\
         exec podman logs -f {name}-work\n"
    )
}

/// Where the container `cid` has its cgroup: its own scope in `machine.slice` (`podman run`),
/// or in its pod's slice (`podman kube play`: `machine-libpod_pod_<pod id>.slice`); `None`
/// until it exists.
pub fn find_container_cgroup(runtime: Runtime, cid: &str) -> Option<PathBuf> {
    let direct = container_cgroup(runtime, cid);
    if direct.exists() {
        return Some(direct);
    }
    if runtime != Runtime::Podman {
        return None;
    }
    let machine = Path::new("/sys/fs/cgroup/machine.slice");
    fs::read_dir(machine)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("machine-libpod_pod_") && n.ends_with(".slice"))
        })
        .map(|e| e.path().join(format!("libpod-{cid}.scope")))
        .find(|p| p.exists())
}

/// docker: start its service (off in the image) and import the container root file system
/// as [`DOCKER_IMAGE`]; podman needs nothing.
pub fn prepare_runtime(runtime: Runtime) -> Result<String> {
    if runtime == Runtime::Podman {
        return Ok("podman: --rootfs /srv/ctr".to_owned());
    }
    let status = Command::new("systemctl")
        .args(["start", "docker.service"])
        .status()
        .context("cannot run systemctl")?;
    if !status.success() {
        bail!("systemctl start docker.service failed ({status}): see kernel.log");
    }
    let script = format!("tar -C {CONTAINER_ROOT} -c . | docker import - {DOCKER_IMAGE}");
    let out = Command::new("sh")
        .args(["-c", &script])
        .output()
        .context("cannot run sh")?;
    if !out.status.success() {
        bail!(
            "`{script}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(format!(
        "docker: imported {CONTAINER_ROOT} as {DOCKER_IMAGE} {}",
        String::from_utf8_lossy(&out.stdout).trim()
    ))
}

/// Whether systemd's memweightd.service has a process.
pub fn daemon_alive() -> bool {
    fs::read_to_string(Path::new(DAEMON_CGROUP).join("cgroup.procs"))
        .is_ok_and(|s| !s.trim().is_empty())
}

/// The in-guest pressure process in its own transient scope that may not swap.
pub fn pressure_argv(argv: &[String]) -> Vec<String> {
    let mut v: Vec<String> = [
        "systemd-run",
        "--scope",
        "--quiet",
        "--unit=lab-pressure",
        "-p",
        "MemorySwapMax=0",
        "--",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    v.extend(argv.iter().cloned());
    v
}

/// Runs a command (killed after `limit` by coreutils' `timeout`) and returns its stdout
/// (stderr appended), whatever its status.
pub fn output_within(limit: Duration, program: &str, args: &[&str]) -> String {
    let secs = limit.as_secs().max(1).to_string();
    let mut all = vec![secs.as_str(), program];
    all.extend_from_slice(args);
    output("timeout", &all)
}

/// Runs a command and returns its stdout (stderr appended), whatever its status.
pub fn output(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(o) => {
            let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            text
        }
        Err(e) => format!("cannot run {program}: {e}\n"),
    }
}

/// Waits until systemd says the system is up (`running`, or `degraded` with the failed units
/// named) and returns its word.
pub fn wait_system_running(limit: Duration) -> Result<String> {
    let deadline = Instant::now() + limit;
    loop {
        let state = output("systemctl", &["is-system-running"]);
        let state = state.trim().to_owned();
        match state.as_str() {
            "running" => return Ok(state),
            "degraded" => {
                let failed = output("systemctl", &["--failed", "--no-legend", "--plain"]);
                return Ok(format!("degraded: {}", failed.trim()));
            }
            _ if Instant::now() > deadline => {
                bail!("systemd is still {state:?} after {}s", limit.as_secs())
            }
            _ => thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// Waits until a zram device is an active swap (set up by systemd-zram-generator).
pub fn wait_zram_swap(limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        if fs::read_to_string("/proc/swaps").is_ok_and(|s| s.contains("/dev/zram")) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "no zram swap after {}s: see `systemctl status systemd-zram-setup@zram0` in \
                 kernel.log",
                limit.as_secs()
            );
        }
        thread::sleep(Duration::from_millis(500));
    }
}

/// memweightd's and its socket's journal, one line per entry with its level and fields
/// ([`render_journal`]).
pub fn journal() -> String {
    render_journal(&output_within(
        Duration::from_secs(60),
        "journalctl",
        &[
            "--no-pager",
            "-o",
            "json",
            "-u",
            "memweightd.service",
            "-u",
            "memweightd.socket",
        ],
    ))
}

/// Journal fields every entry has or that say where it came from: not shown as `key=value`.
const STANDARD_FIELDS: &[&str] = &[
    "MESSAGE",
    "PRIORITY",
    "SYSLOG_IDENTIFIER",
    "SYSLOG_FACILITY",
    "SYSLOG_PID",
    "SYSLOG_TIMESTAMP",
    "CODE_FILE",
    "CODE_LINE",
    "CODE_FUNC",
    "TARGET",
    "MESSAGE_ID",
    "INVOCATION_ID",
    "UNIT",
    "USER_UNIT",
    "JOB_ID",
    "JOB_TYPE",
    "JOB_RESULT",
    "TID",
];

/// `journalctl -o json` as text: `[monotonic s] identifier[pid]: LEVEL message key=value…`,
/// LEVEL from `PRIORITY` (ERROR ≤ 3, WARN 4, INFO 5–6, DEBUG 7) and the entry's own fields
/// (memweightd's tracing fields: `cgroup`, `container`, …) lower-cased after the message. The
/// `daemon-log-clean` check reads the level. Lines that are not JSON are kept as they are.
#[must_use]
pub fn render_journal(json_lines: &str) -> String {
    let mut out = String::new();
    for line in json_lines.lines() {
        let Ok(serde_json::Value::Object(e)) = serde_json::from_str::<serde_json::Value>(line)
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let text = |k: &str| match e.get(k) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Array(_)) => Some("[binary]".to_owned()),
            _ => None,
        };
        let mono = text("__MONOTONIC_TIMESTAMP")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0);
        let level = match text("PRIORITY").and_then(|p| p.parse::<u8>().ok()) {
            Some(0..=3) => "ERROR",
            Some(4) => "WARN",
            Some(7) => "DEBUG",
            _ => "INFO",
        };
        let ident = text("SYSLOG_IDENTIFIER")
            .or_else(|| text("_COMM"))
            .unwrap_or_default();
        let pid = text("_PID").unwrap_or_default();
        let _ = write!(
            out,
            "[{:>6}.{:06}] {ident}[{pid}]: {level} {}",
            mono / 1_000_000,
            mono % 1_000_000,
            text("MESSAGE").unwrap_or_default()
        );
        for k in e.keys() {
            if k.starts_with('_') || STANDARD_FIELDS.contains(&k.as_str()) {
                continue;
            }
            let _ = write!(
                out,
                " {}={}",
                k.to_ascii_lowercase(),
                text(k).unwrap_or_default().escape_debug()
            );
        }
        out.push('\n');
    }
    out
}

/// The environment variable a command sees a scenario cgroup's directory in:
/// `LAB_CGROUP_<NAME>` with the name upper-cased and every other character `_`.
pub fn cgroup_env_name(name: &str) -> String {
    let mut v = String::from("LAB_CGROUP_");
    v.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_entries_keep_their_level_and_fields() {
        let json = concat!(
            r#"{"__MONOTONIC_TIMESTAMP":"75123456","PRIORITY":"4","SYSLOG_IDENTIFIER":"memweightd","_PID":"812","MESSAGE":"ignoring an invalid container label","CONTAINER":"web\nx","CGROUP":"machine.slice/a.scope","CODE_LINE":"12"}"#,
            "\n",
            r#"{"__MONOTONIC_TIMESTAMP":"76000000","PRIORITY":"3","SYSLOG_IDENTIFIER":"memweightd","_PID":"812","MESSAGE":"write failed"}"#,
            "\n",
            r#"{"__MONOTONIC_TIMESTAMP":"77000000","PRIORITY":"6","_COMM":"systemd","_PID":"1","MESSAGE":"Started memweightd.service."}"#,
            "\n-- No entries --\n"
        );
        let text = render_journal(json);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            vec![
                r"[    75.123456] memweightd[812]: WARN ignoring an invalid container label cgroup=machine.slice/a.scope container=web\nx",
                "[    76.000000] memweightd[812]: ERROR write failed",
                "[    77.000000] systemd[1]: INFO Started memweightd.service.",
                "-- No entries --",
            ]
        );
    }

    #[test]
    fn kube_pods_carry_the_annotations_and_run_the_workload_from_its_image() {
        let ann: BTreeMap<String, String> =
            [("memweight.io/weight".to_owned(), "2".to_owned())].into();
        let argv: Vec<String> = ["memweight-workload", "random-touch", "--size", "200M"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let pod: serde_json::Value =
            serde_json::from_str(&kube_pod("c2", &ann, &argv)).expect("JSON");
        assert_eq!(pod["metadata"]["name"], "c2");
        assert_eq!(pod["metadata"]["annotations"]["memweight.io/weight"], "2");
        assert_eq!(pod["spec"]["hostNetwork"], true);
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["name"], "work");
        assert_eq!(c["image"], KUBE_WORKLOAD_IMAGE);
        assert_eq!(c["command"][0], WORKLOAD_IN_CONTAINER);
        assert_eq!(c["command"][3], "200M");
        let script = kube_script(
            "c2",
            Path::new("/tmp/lab/kube-image"),
            Path::new("/tmp/lab/c2.pod.json"),
            Path::new("/tmp/lab/c2.cid"),
        );
        assert!(
            script.contains(
                "podman build -q -t localhost/memweight/workload:lab /tmp/lab/kube-image"
            ),
            "{script}"
        );
        assert!(
            script.contains("podman kube play /tmp/lab/c2.pod.json"),
            "{script}"
        );
        assert!(
            script.contains("podman inspect -f '{{.Id}}' c2-work > /tmp/lab/c2.cid"),
            "{script}"
        );
        assert!(script.contains("exec podman logs -f c2-work"), "{script}");
    }

    #[test]
    fn podman_argv_mounts_the_workload_and_labels() {
        let labels = BTreeMap::from([("memweight.weight".to_owned(), "2".to_owned())]);
        let argv = run_argv(
            Runtime::Podman,
            "c2",
            &labels,
            &["memweight-workload".into(), "random-touch".into()],
            Path::new("/tmp/lab/c2.cid"),
        );
        let joined = argv.join(" ");
        assert!(
            joined
                .starts_with("podman run --rm --name c2 --network host --cidfile /tmp/lab/c2.cid")
        );
        assert!(joined.contains("--label memweight.weight=2"));
        assert!(joined.contains(
            "-v /opt/memweight-lab/bin/memweight-workload:/usr/local/bin/memweight-workload:ro"
        ));
        assert!(
            joined.ends_with("--rootfs /srv/ctr /usr/local/bin/memweight-workload random-touch")
        );
    }

    #[test]
    fn docker_runs_the_imported_image() {
        let argv = run_argv(
            Runtime::Docker,
            "d1",
            &BTreeMap::new(),
            &["memweight-workload".into(), "hog".into()],
            Path::new("/tmp/lab/d1.cid"),
        );
        let joined = argv.join(" ");
        assert!(joined.starts_with("docker run --rm --name d1 --network host"));
        assert!(joined.ends_with("memweight/ctr /usr/local/bin/memweight-workload hog"));
        assert!(!joined.contains("--rootfs"));
    }

    #[test]
    fn cids_are_64_lowercase_hex() {
        let id = "a".repeat(64);
        assert_eq!(parse_cid(&format!("{id}\n")), Some(id.as_str()));
        assert_eq!(parse_cid("abc"), None);
        assert_eq!(parse_cid(&"A".repeat(64)), None);
        assert_eq!(parse_cid(&"g".repeat(64)), None);
        assert_eq!(
            container_cgroup(Runtime::Podman, &id),
            PathBuf::from(format!("/sys/fs/cgroup/machine.slice/libpod-{id}.scope"))
        );
        assert_eq!(
            container_cgroup(Runtime::Docker, &id),
            PathBuf::from(format!("/sys/fs/cgroup/system.slice/docker-{id}.scope"))
        );
    }

    #[test]
    fn env_names_are_shell_safe() {
        assert_eq!(cgroup_env_name("redis-low.1"), "LAB_CGROUP_REDIS_LOW_1");
    }
}
