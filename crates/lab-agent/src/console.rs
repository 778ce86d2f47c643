//! What the agent says on the console: framed records (`lab_agent::frame`) and progress
//! lines, one line each, and files cut into records of at most [`CHUNK`] bytes.
//!
//! Not here: what the records hold (`lab_agent::record`), what is sampled (`lab`).

use std::io::Write;

use lab_agent::frame;
use lab_agent::record::{Event, FileChunk, Record};

/// File records are cut into pieces of at most this many bytes.
const CHUNK: usize = 8 * 1024;

/// Writes framed records and progress lines to stdout (the console).
#[derive(Default)]
pub(crate) struct Emitter {
    seq: u64,
}

impl Emitter {
    pub(crate) fn record(&mut self, record: &Record) {
        let line = match frame::encode(self.seq, record) {
            Ok(line) => line,
            Err(e) => {
                // Every record type serialises; this only guards against a future change.
                eprintln!("lab-agent: cannot serialise a record: {e}");
                return;
            }
        };
        self.seq += 1;
        write_line(&line);
    }

    pub(crate) fn progress(&mut self, text: &str) {
        write_line(&format!("{}{text}", frame::PROGRESS_PREFIX));
    }

    pub(crate) fn event(&mut self, t: f64, kind: &str, detail: impl Into<String>, ok: bool) {
        self.record(&Record::Event(Event {
            t,
            kind: kind.to_owned(),
            detail: detail.into(),
            ok,
        }));
    }

    pub(crate) fn file(&mut self, name: &str, text: &str) {
        for piece in chunks(text, CHUNK) {
            self.record(&Record::File(FileChunk {
                name: name.to_owned(),
                data: piece.to_owned(),
            }));
        }
    }

    pub(crate) fn end(&mut self) {
        let records = self.seq;
        self.record(&Record::End { records });
    }
}

/// Cuts `text` into pieces of about `max` bytes; a character is never split, so a piece may
/// run up to three bytes over.
fn chunks(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max.max(1));
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (head, tail) = rest.split_at(cut);
        out.push(head);
        rest = tail;
    }
    out
}

fn write_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // The console is the only channel; if it fails there is nobody left to tell.
    let _ = out.write_all(line.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_size_and_characters() {
        assert!(chunks("", 4).is_empty());
        assert_eq!(chunks("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        let text = "aé€😀b";
        let pieces = chunks(text, 2);
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| !p.is_empty()));
        assert_eq!(chunks("x", 0), vec!["x"]);
    }
}
