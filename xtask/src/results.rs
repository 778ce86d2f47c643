//! Turns the console stream into the run's results, and refuses incomplete ones: every record
//! must arrive in sequence with a good checksum, and the `End` record must count them.

use std::collections::BTreeMap;

use lab_agent::frame::{self, Line};
use lab_agent::record::{Event, Hello, Record, Sample};

/// Everything the guest reported.
#[derive(Debug, Default)]
pub struct Results {
    /// Guest identity.
    pub hello: Option<Hello>,
    /// One per second.
    pub samples: Vec<Sample>,
    /// Events in order.
    pub events: Vec<Event>,
    /// Output files by relative name.
    pub files: BTreeMap<String, String>,
    /// The guest's memory as the virtio-balloon leaves it (`t`, bytes: QMP's `actual`), once
    /// per sample (host guest; empty elsewhere). Recorded by the host, not the guest.
    pub balloon: Vec<(f64, u64)>,
}

/// Incremental decoder.
#[derive(Debug, Default)]
pub struct Decoder {
    results: Results,
    next_seq: u64,
    problems: Vec<String>,
    agent_errors: Vec<String>,
    end: Option<u64>,
    exit_line: Option<String>,
}

impl Decoder {
    /// Feeds one console line; returns the progress text if it was a progress line.
    pub fn feed(&mut self, line: &str) -> Option<String> {
        if line.contains("@@MWLAB-EXIT") {
            self.exit_line = Some(line.trim().to_owned());
            return None;
        }
        match frame::decode(line) {
            Ok(Line::Progress(text)) => Some(text),
            Ok(Line::Other) => None,
            Ok(Line::Record(seq, record)) => {
                if self.end.is_some() {
                    self.problems
                        .push(format!("record {seq} arrived after the End record"));
                }
                if seq != self.next_seq {
                    self.problems.push(format!(
                        "records {}..{} are missing (got {seq})",
                        self.next_seq,
                        seq.saturating_sub(1)
                    ));
                }
                self.next_seq = seq + 1;
                self.accept(seq, record);
                None
            }
            Err(e) => {
                self.problems.push(e.to_string());
                None
            }
        }
    }

    fn accept(&mut self, seq: u64, record: Record) {
        match record {
            Record::Hello(h) => self.results.hello = Some(h),
            Record::Sample(s) => self.results.samples.push(s),
            Record::Event(e) => self.results.events.push(e),
            Record::File(chunk) => self
                .results
                .files
                .entry(chunk.name)
                .or_default()
                .push_str(&chunk.data),
            Record::Error { message } => self.agent_errors.push(message),
            Record::End { records } => {
                if records != seq {
                    self.problems.push(format!(
                        "End record counts {records} records but it is record {seq}"
                    ));
                }
                self.end = Some(records);
            }
        }
    }

    /// The guest clock of the last sample received.
    pub fn last_sample_t(&self) -> Option<f64> {
        self.results.samples.last().map(|s| s.t)
    }

    /// The results so far, complete or not (for writing partial outputs).
    pub fn partial(&self) -> &Results {
        &self.results
    }

    /// The results, or every reason they cannot be trusted.
    pub fn finish(self) -> Result<Results, Vec<String>> {
        let mut problems = self.problems;
        for e in self.agent_errors {
            problems.push(format!("the guest agent failed: {e}"));
        }
        if self.end.is_none() {
            problems.push(format!(
                "no End record: the guest stopped early or the console lost data after record {} \
                 ({})",
                self.next_seq.saturating_sub(1),
                self.exit_line.as_deref().unwrap_or("agent exit not seen")
            ));
        }
        if self.results.hello.is_none() {
            problems.push("no Hello record: the agent never started".to_owned());
        }
        if problems.is_empty() {
            Ok(self.results)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_agent::record::FileChunk;

    fn hello() -> Record {
        Record::Hello(Hello {
            kernel: "6.1.0-56-amd64".into(),
            mem_total: 1,
            cpus: 2,
            agent: "0".into(),
        })
    }

    fn feed_all(records: &[Record]) -> Decoder {
        let mut d = Decoder::default();
        for (i, r) in records.iter().enumerate() {
            let line = frame::encode(i as u64, r).expect("encodes");
            assert_eq!(d.feed(&format!("{line}\r")), None);
        }
        d
    }

    #[test]
    fn complete_stream_decodes_and_joins_file_chunks() {
        let chunk = |d: &str| {
            Record::File(FileChunk {
                name: "daemon.log".into(),
                data: d.into(),
            })
        };
        let mut d = feed_all(&[
            hello(),
            chunk("ab"),
            chunk("cd"),
            Record::End { records: 3 },
        ]);
        assert_eq!(d.feed("@@MWLAB-P t=1"), Some("t=1".into()));
        let r = d.finish().expect("complete");
        assert_eq!(r.files.get("daemon.log").map(String::as_str), Some("abcd"));
    }

    #[test]
    fn missing_end_or_gap_or_agent_error_fails() {
        assert!(feed_all(&[hello()]).finish().is_err());

        let mut d = Decoder::default();
        d.feed(&frame::encode(0, &hello()).expect("encodes"));
        d.feed(&frame::encode(2, &Record::End { records: 2 }).expect("encodes"));
        let err = d.finish().expect_err("gap detected");
        assert!(err.iter().any(|e| e.contains("missing")), "{err:?}");

        let d = feed_all(&[
            hello(),
            Record::Error {
                message: "insmod failed".into(),
            },
            Record::End { records: 2 },
        ]);
        let err = d.finish().expect_err("agent error");
        assert!(err.iter().any(|e| e.contains("insmod failed")), "{err:?}");
    }

    #[test]
    fn garbled_line_fails() {
        let mut d = feed_all(&[hello()]);
        let line = frame::encode(1, &Record::End { records: 1 }).expect("encodes");
        d.feed(&line.replace("records", "recXrds"));
        assert!(d.finish().is_err());
    }
}
