//! QEMU's machine protocol (QMP) over a unix socket, for the virtio-balloon: the host takes
//! memory from the guest in steps, as a cloud's balloon driver takes it from the VM that hosts
//! the containers (seed 002's derivative cloud).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// A connected QMP session (capabilities negotiated).
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Connects (retrying until QEMU has made the socket, up to `wait`) and negotiates.
    pub fn connect(path: &Path, wait: Duration) -> Result<Qmp> {
        let deadline = Instant::now() + wait;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => {
                    return Err(e)
                        .with_context(|| format!("cannot connect to QMP at {}", path.display()));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .context("cannot set a QMP read timeout")?;
        let writer = stream.try_clone().context("cannot clone the QMP socket")?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream),
            writer,
        };
        let greeting = qmp.read_message()?;
        if greeting.get("QMP").is_none() {
            bail!("QMP greeting expected, got {greeting}");
        }
        qmp.execute("qmp_capabilities", None)?;
        Ok(qmp)
    }

    fn read_message(&mut self) -> Result<Value> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .context("cannot read from QMP")?;
        if n == 0 {
            bail!("QEMU closed the QMP socket");
        }
        serde_json::from_str(&line).with_context(|| format!("QMP sent non-JSON: {line:?}"))
    }

    /// Runs a command and returns its `return` value; asynchronous events are skipped.
    pub fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value> {
        let mut msg = json!({ "execute": command });
        if let Some(args) = arguments {
            msg["arguments"] = args;
        }
        let mut text = msg.to_string();
        text.push('\n');
        self.writer
            .write_all(text.as_bytes())
            .context("cannot write to QMP")?;
        loop {
            let reply = self.read_message()?;
            if let Some(r) = reply.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = reply.get("error") {
                bail!("QMP {command} failed: {e}");
            }
            // An event ({"event": …}): not our answer.
        }
    }

    /// Sets the guest's target size (what it keeps), in bytes.
    pub fn balloon(&mut self, target: u64) -> Result<()> {
        self.execute("balloon", Some(json!({ "value": target })))
            .map(|_| ())
    }

    /// The guest's current size as the balloon driver reports it (`actual`), in bytes.
    pub fn balloon_actual(&mut self) -> Result<u64> {
        let r = self.execute("query-balloon", None)?;
        r.get("actual")
            .and_then(Value::as_u64)
            .with_context(|| format!("query-balloon returned no actual: {r}"))
    }
}
