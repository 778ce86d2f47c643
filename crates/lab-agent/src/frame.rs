//! Serial-console framing: how records survive a console shared with the kernel and busybox.
//!
//! A record line is `@@MWLAB <seq> <fnv64 hex> <json>`; the sequence number starts at 0 and
//! grows by one, the hash covers the JSON text, and the last record is
//! [`Record::End`] carrying the count of records before it. A progress line is
//! `@@MWLAB-P <text>` and carries no data. Everything else on the console is ignored by the
//! decoder (and kept in `console.log` by the host).

use crate::record::Record;

/// Prefix of a record line.
pub const RECORD_PREFIX: &str = "@@MWLAB ";
/// Prefix of a progress line.
pub const PROGRESS_PREFIX: &str = "@@MWLAB-P ";

/// 64-bit FNV-1a of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Frames record number `seq` as one console line (without the newline).
pub fn encode(seq: u64, record: &Record) -> Result<String, serde_json::Error> {
    let json = serde_json::to_string(record)?;
    Ok(format!(
        "{RECORD_PREFIX}{seq} {:016x} {json}",
        fnv1a64(json.as_bytes())
    ))
}

/// What a console line turned out to be.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A record with its sequence number.
    Record(u64, Record),
    /// A progress line's text.
    Progress(String),
    /// Not ours.
    Other,
}

/// A framed line that does not check out.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FrameError {
    /// Fields are missing or not numbers.
    #[error("record line is malformed (console output mixed into it?): {0:?}")]
    Malformed(String),
    /// The hash does not match the JSON.
    #[error("record {seq} fails its checksum: the console garbled it")]
    Checksum {
        /// Sequence number as read.
        seq: u64,
    },
    /// The JSON is not a record.
    #[error("record {seq} is not valid JSON for a lab record: {message}")]
    Json {
        /// Sequence number.
        seq: u64,
        /// serde_json's message.
        message: String,
    },
}

/// Classifies one console line (a trailing `\r` is ignored). Record lines are found anywhere in
/// the line, because the kernel may have printed on the same line before it.
pub fn decode(line: &str) -> Result<Line, FrameError> {
    let line = line.trim_end_matches(['\r', '\n']);
    if let Some(pos) = line.find(PROGRESS_PREFIX) {
        return Ok(Line::Progress(
            line[pos + PROGRESS_PREFIX.len()..].to_owned(),
        ));
    }
    let Some(pos) = line.find(RECORD_PREFIX) else {
        return Ok(Line::Other);
    };
    let rest = &line[pos + RECORD_PREFIX.len()..];
    let mut parts = rest.splitn(3, ' ');
    let (Some(seq), Some(hash), Some(json)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(FrameError::Malformed(truncate(line)));
    };
    let seq: u64 = seq
        .parse()
        .map_err(|_| FrameError::Malformed(truncate(line)))?;
    let hash = u64::from_str_radix(hash, 16).map_err(|_| FrameError::Malformed(truncate(line)))?;
    if fnv1a64(json.as_bytes()) != hash {
        return Err(FrameError::Checksum { seq });
    }
    let record = serde_json::from_str(json).map_err(|e| FrameError::Json {
        seq,
        message: e.to_string(),
    })?;
    Ok(Line::Record(seq, record))
}

fn truncate(line: &str) -> String {
    line.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_decode() {
        let r = Record::End { records: 7 };
        let line = encode(7, &r).expect("encodes");
        assert_eq!(decode(&line), Ok(Line::Record(7, r.clone())));
        let with_noise = format!("[   12.3] random: {line}\r");
        assert_eq!(decode(&with_noise), Ok(Line::Record(7, r)));
    }

    #[test]
    fn garbled_record_fails_checksum() {
        let line = encode(3, &Record::End { records: 3 }).expect("encodes");
        let garbled = line.replace("records", "recXrds");
        assert_eq!(decode(&garbled), Err(FrameError::Checksum { seq: 3 }));
        assert!(matches!(
            decode("@@MWLAB 1 zz {}"),
            Err(FrameError::Malformed(_))
        ));
        assert!(matches!(decode("@@MWLAB 1"), Err(FrameError::Malformed(_))));
    }

    #[test]
    fn progress_and_other_lines() {
        assert_eq!(
            decode("@@MWLAB-P t=1s | c1"),
            Ok(Line::Progress("t=1s | c1".into()))
        );
        assert_eq!(decode("Linux version 6.1"), Ok(Line::Other));
    }

    #[test]
    fn fnv_known_value() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
