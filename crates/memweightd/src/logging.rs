//! Where the daemon's log goes: the systemd journal as native entries when systemd runs it,
//! plain text on stderr otherwise.
//!
//! systemd connects a service's stderr to the journal and says so in `JOURNAL_STREAM`
//! (`DEVICE:INODE` of that stream); a process whose stderr is still that stream sends native
//! entries instead (systemd.exec(5), "JOURNAL_STREAM"). The entries carry `PRIORITY` from the
//! event's level and every tracing field as a journal field of its own (`cgroup` →
//! `CGROUP=`, `container` → `CONTAINER=`), so `journalctl -u memweightd -p warning` filters by
//! level and `journalctl CONTAINER=db` finds one container's entries. journald stamps them,
//! so no timestamp of ours is written.
//!
//! Values from outside (container names, labels, cgroup paths) may contain newlines. In a
//! native entry every value is length-encoded, so they cannot start another field or entry.
//! On stderr ([`LineSafe`]) every newline and carriage return inside an event is written as
//! `\n` / `\r`: one event is always one line, whatever its fields hold. A value anyone may
//! set (a container label's value) is logged through [`untrusted`], so that it cannot forge
//! another field of the line either (`value=1 cgroup=other`), nor send escape sequences to a
//! terminal, nor fill the journal.

use std::io::{self, IsTerminal as _, Write};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Whether `journal_stream` (the value of `JOURNAL_STREAM`, `DEVICE:INODE` in decimal) names
/// the stream with device `dev` and inode `ino` (stderr's `fstat`).
#[must_use]
pub fn names_stream(journal_stream: Option<&str>, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = journal_stream.and_then(|v| v.trim().split_once(':')) else {
        return false;
    };
    d.parse::<u64>().is_ok_and(|d| d == dev) && i.parse::<u64>().is_ok_and(|i| i == ino)
}

/// True when stderr is the journal stream systemd set up for this process (a child that
/// inherited `JOURNAL_STREAM` but has stderr redirected elsewhere gets plain text).
#[must_use]
pub fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(st) = nix::sys::stat::fstat(io::stderr()) else {
        return false;
    };
    #[allow(clippy::useless_conversion)] // dev_t and ino_t are u64 on 64-bit Linux only.
    let (dev, ino) = (u64::from(st.st_dev), u64::from(st.st_ino));
    names_stream(value.to_str(), dev, ino)
}

/// Escapes `\n` and `\r` inside `buf`, keeping one final `\n`: what [`LineSafe`] writes.
#[must_use]
pub fn one_line(buf: &[u8]) -> Vec<u8> {
    let (body, end) = match buf.strip_suffix(b"\n") {
        Some(body) => (body, &b"\n"[..]),
        None => (buf, &b""[..]),
    };
    let mut out = Vec::with_capacity(buf.len() + 8);
    for &b in body {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
    out.extend_from_slice(end);
    out
}

/// A writer that keeps every event on one line ([`one_line`]). tracing's fmt layer formats an
/// event into one buffer and hands it over in one `write_all`, so each `write` here is one
/// whole event.
#[derive(Debug)]
pub struct LineSafe<W>(pub W);

impl<W: Write> Write for LineSafe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(&one_line(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// The longest untrusted value logged; longer ones are cut (and say by how much).
pub const UNTRUSTED_MAX_CHARS: usize = 64;

/// A value from outside (a container label's value) as it is logged: as given when it is a
/// short plain word (letters, digits and `.,:/+-_`, e.g. `lots`, `1G`, `10000`), so the journal
/// field `VALUE=` stays greppable; otherwise quoted and escaped like a Rust string (`"1
/// cgroup=x"`, `"a\u{1b}[2J"`), and cut to [`UNTRUSTED_MAX_CHARS`] characters.
#[must_use]
pub fn untrusted(value: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || ".,:/+-_".contains(c);
    let n = value.chars().count();
    if n <= UNTRUSTED_MAX_CHARS && !value.is_empty() && value.chars().all(plain) {
        return value.to_owned();
    }
    let shown: String = value.chars().take(UNTRUSTED_MAX_CHARS).collect();
    if n > UNTRUSTED_MAX_CHARS {
        format!("{shown:?}… ({} bytes in all)", value.len())
    } else {
        format!("{shown:?}")
    }
}

fn stderr_line_safe() -> LineSafe<io::Stderr> {
    LineSafe(io::stderr())
}

/// Sets up the global subscriber at `level` (`RUST_LOG` overrides it): native journal
/// entries when stderr is the journal, plain one-line text on stderr otherwise (without a
/// timestamp when the journal reads it anyway, because its socket could not be used).
pub fn init(level: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let journal = stderr_is_journal();
    if journal {
        match tracing_journald::layer() {
            Ok(layer) => {
                let layer = layer
                    .with_field_prefix(None)
                    .with_syslog_identifier("memweightd".to_owned());
                tracing_subscriber::registry()
                    .with(filter)
                    .with(layer)
                    .init();
                return;
            }
            Err(e) => {
                // Still on the journal's stream: plain lines, journald adds the time.
                let _ = writeln!(
                    io::stderr(),
                    "memweightd: cannot send native journal entries ({e}); logging plain lines"
                );
            }
        }
    }
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(stderr_line_safe)
        .with_ansi(!journal && io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_target(false);
    if journal {
        tracing_subscriber::registry()
            .with(filter)
            .with(fmt.without_time())
            .init();
    } else {
        tracing_subscriber::registry().with(filter).with(fmt).init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_must_name_stderr() {
        assert!(names_stream(Some("8:123456"), 8, 123_456));
        assert!(names_stream(Some("8:123456\n"), 8, 123_456));
        assert!(
            !names_stream(Some("8:123457"), 8, 123_456),
            "another stream"
        );
        assert!(
            !names_stream(Some("9:123456"), 8, 123_456),
            "another device"
        );
        assert!(!names_stream(None, 8, 123_456));
        assert!(!names_stream(Some(""), 8, 123_456));
        assert!(!names_stream(Some("8"), 8, 123_456));
        assert!(!names_stream(Some("x:y"), 8, 123_456));
        assert!(!names_stream(Some("-8:123456"), 8, 123_456));
    }

    #[test]
    fn a_newline_in_a_value_cannot_start_a_line() {
        let forged = b"WARN ignoring an invalid container label container=evil\nERROR forged\r\n";
        let out = one_line(forged);
        assert_eq!(
            out,
            b"WARN ignoring an invalid container label container=evil\\nERROR forged\\r\n"
        );
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(one_line(b"plain\n"), b"plain\n");
        assert_eq!(one_line(b"no end"), b"no end");
        assert_eq!(one_line(b""), b"");
    }

    #[test]
    fn untrusted_values_cannot_forge_a_field_and_are_bounded() {
        for plain in ["lots", "1G", "10000", "256M", "a.b/c:d+e-f_g,h"] {
            assert_eq!(untrusted(plain), plain);
        }
        assert_eq!(untrusted(""), "\"\"");
        assert_eq!(untrusted("1 cgroup=other"), "\"1 cgroup=other\"");
        assert_eq!(untrusted("x\nERROR forged"), "\"x\\nERROR forged\"");
        assert_eq!(untrusted("\u{1b}[2J"), "\"\\u{1b}[2J\"");
        assert_eq!(untrusted("say \"hi\""), "\"say \\\"hi\\\"\"");
        let long = "é".repeat(1000);
        let shown = untrusted(&long);
        assert!(shown.starts_with(&format!("\"{}\"…", "é".repeat(UNTRUSTED_MAX_CHARS))));
        assert!(shown.ends_with("(2000 bytes in all)"), "{shown}");
        assert!(shown.chars().count() < 100, "{shown}");
    }

    #[test]
    fn events_through_the_fmt_layer_stay_one_line_each() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0
                    .lock()
                    .map_err(|_| io::ErrorKind::Other)?
                    .extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let sink = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || LineSafe(sink.clone()))
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let name = "web\nERROR memweightd: forged entry";
            tracing::warn!(container = %name, "container listed");
            tracing::info!(cgroup = "a/b", "second");
        });
        let text = String::from_utf8(buf.0.lock().expect("lock").clone()).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains(r"container=web\nERROR memweightd: forged entry"),
            "{text}"
        );
        assert!(lines[1].contains("second"), "{text}");
    }
}
