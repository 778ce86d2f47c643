//! Boots the guest under QEMU (TCG) and hands each console line to the caller, with a host
//! timeout that kills a hung guest.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// What to boot.
pub struct Boot {
    /// bzImage.
    pub kernel: PathBuf,
    /// gzip'd cpio.
    pub initrd: PathBuf,
    /// Guest RAM in MiB.
    pub ram_mib: u64,
    /// Guest CPUs.
    pub cpus: u32,
    /// Kill QEMU after this long.
    pub timeout: Duration,
    /// Raw copy of the first serial port (the agent's records).
    pub console_log: PathBuf,
    /// Kernel command line.
    pub append: String,
    /// Host guest: the root disk (opened with `snapshot=on`: the image never changes).
    pub disk: Option<PathBuf>,
    /// Host guest: the second serial port (the kernel's and systemd's console) goes here.
    pub console2: Option<PathBuf>,
    /// Host guest: a virtio-balloon device and a QMP socket at this path.
    pub qmp: Option<PathBuf>,
    /// `(host port, guest port)`: a virtio-net NIC on QEMU's user-mode network with
    /// `restrict=on` (the guest reaches nothing outside) and one TCP forward from the host's
    /// `127.0.0.1:host port` to the guest's `guest port` (the lab's Prometheus scrapes it).
    pub hostfwd: Option<(u16, u16)>,
}

/// How the boot ended.
pub struct Outcome {
    /// The host timeout fired and QEMU was killed.
    pub timed_out: bool,
    /// A `Kernel panic` line was seen.
    pub panicked: bool,
    /// QEMU's exit status text.
    pub exit: String,
    /// The last console lines (for error messages).
    pub tail: Vec<String>,
    /// Wall time.
    pub wall: Duration,
}

/// Kernel command line of the busybox guest: serial console, reboot (= QEMU exit) on panic,
/// and the marker the agent requires before it touches anything.
pub const APPEND: &str = "console=ttyS0 quiet panic=-1 memweight_lab=1 rdinit=/init";

/// Kernel command line of the host guest: the console (kernel, systemd) on ttyS1 so that
/// ttyS0 carries only the agent's records; the initramfs mounts `/dev/vda` and hands over to
/// systemd.
pub const HOST_APPEND: &str = "console=ttyS1 panic=-1 memweight_lab=1 rdinit=/init \
                               root=/dev/vda rw loglevel=4 net.ifnames=0";

/// Boots and calls `on_line` for every console line until QEMU exits or the timeout fires.
pub fn boot(spec: &Boot, mut on_line: impl FnMut(&str)) -> Result<Outcome> {
    let started = Instant::now();
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-accel", "tcg", "-no-reboot"]);
    match &spec.console2 {
        None => {
            cmd.arg("-nographic");
        }
        Some(path) => {
            cmd.args(["-display", "none", "-monitor", "none", "-serial", "stdio"])
                .arg("-serial")
                .arg(format!("file:{}", path.display()));
        }
    }
    if let Some(disk) = &spec.disk {
        cmd.arg("-drive").arg(format!(
            "file={},if=virtio,format=raw,snapshot=on,cache=unsafe",
            disk.display()
        ));
    }
    if let Some(qmp) = &spec.qmp {
        cmd.args(["-device", "virtio-balloon-pci"])
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()));
    }
    if let Some((host, guest)) = spec.hostfwd {
        cmd.arg("-nic").arg(nic(host, guest));
    }
    let mut child = cmd
        .arg("-m")
        .arg(spec.ram_mib.to_string())
        .arg("-smp")
        .arg(spec.cpus.to_string())
        .arg("-kernel")
        .arg(&spec.kernel)
        .arg("-initrd")
        .arg(&spec.initrd)
        .arg("-append")
        .arg(&spec.append)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start qemu-system-x86_64 (install qemu-system-x86)")?;
    let stdout = child.stdout.take().context("qemu has no stdout")?;
    let stderr = child.stderr.take().context("qemu has no stderr")?;
    let (tx, rx) = mpsc::channel::<String>();
    let tx_err = tx.clone();
    let reader = thread::spawn(move || split_lines(stdout, &tx));
    let err_reader = thread::spawn(move || {
        split_lines(stderr, &tx_err);
    });

    let mut log = BufWriter::new(
        File::create(&spec.console_log)
            .with_context(|| format!("cannot create {}", spec.console_log.display()))?,
    );
    let deadline = started + spec.timeout;
    let mut timed_out = false;
    let mut panicked = false;
    let mut tail: Vec<String> = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(line) => {
                writeln!(log, "{line}").context("cannot write console.log")?;
                if line.contains("Kernel panic") {
                    panicked = true;
                }
                tail.push(line.clone());
                if tail.len() > 30 {
                    tail.remove(0);
                }
                on_line(&line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() >= deadline {
                    timed_out = true;
                    let _ = child.kill();
                    break;
                }
            }
        }
    }
    let status = child.wait().context("cannot wait for qemu")?;
    let _ = reader.join();
    let _ = err_reader.join();
    // Lines that raced the kill.
    while let Ok(line) = rx.try_recv() {
        writeln!(log, "{line}").context("cannot write console.log")?;
    }
    log.flush().context("cannot write console.log")?;
    if let Some(path) = &spec.console2 {
        let text = std::fs::read(path).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        if text.contains("Kernel panic") {
            panicked = true;
        }
        tail.extend(
            text.lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .map(|l| format!("[console] {l}")),
        );
    }
    Ok(Outcome {
        timed_out,
        panicked,
        exit: status.to_string(),
        tail,
        wall: started.elapsed(),
    })
}

/// The `-nic` argument of [`Boot::hostfwd`]: only the host's loopback is forwarded.
fn nic(host: u16, guest: u16) -> String {
    format!("user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:{host}-:{guest}")
}

fn split_lines(mut src: impl Read, tx: &mpsc::Sender<String>) {
    let mut buf = [0u8; 8192];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        match src.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                pending.extend_from_slice(buf.get(..n).unwrap_or_default());
                while let Some(pos) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=pos).collect();
                    let text = String::from_utf8_lossy(&line);
                    if tx
                        .send(text.trim_end_matches(['\n', '\r']).to_owned())
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    }
    if !pending.is_empty() {
        let _ = tx.send(String::from_utf8_lossy(&pending).into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forward_listens_on_loopback_and_the_guest_reaches_nothing() {
        assert_eq!(
            nic(40123, 9751),
            "user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:40123-:9751"
        );
    }

    #[test]
    fn splits_crlf_lines_and_keeps_the_tail() {
        let (tx, rx) = mpsc::channel();
        split_lines(&b"one\r\ntwo\nthree"[..], &tx);
        drop(tx);
        let lines: Vec<String> = rx.iter().collect();
        assert_eq!(lines, vec!["one", "two", "three"]);
    }
}
