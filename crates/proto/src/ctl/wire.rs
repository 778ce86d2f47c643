//! One JSON line each way: the version read first so that another protocol version gets a
//! clear mismatch rather than a field error, then [`parse_request`] (the daemon's side) and
//! [`parse_response`] (the client's side); and the encoding of a line.
//!
//! Not here: the types the lines carry (`request`, `reply`, `status`, `error`).

use serde::Serialize;

use super::{
    Command, ErrorKind, ErrorReply, MAX_LINE, Outcome, PROTOCOL_VERSION, Reply, Request, Response,
};

/// Reads the `version` field first so that a request from another protocol version gets a
/// clear mismatch error rather than a confusing field error.
fn check_version(value: &serde_json::Value, who: &str) -> Result<(), ErrorReply> {
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    match version {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => Ok(()),
        Some(v) => Err(ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!(
                "protocol version mismatch: the {who} speaks version {v}, this side speaks \
                 {PROTOCOL_VERSION}; use the memweightctl that came with this memweightd"
            ),
        )),
        None => Err(ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!(
                "the {who}'s message has no protocol version (expected {{\"version\": \
                 {PROTOCOL_VERSION}, ...}}); is this a memweightd socket?"
            ),
        )),
    }
}

/// Parses and validates one request line (the daemon's side).
pub fn parse_request(line: &str) -> Result<Command, ErrorReply> {
    if line.len() > MAX_LINE {
        return Err(ErrorReply::new(
            ErrorKind::BadRequest,
            format!("request longer than {MAX_LINE} bytes"),
        ));
    }
    let value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| ErrorReply::new(ErrorKind::BadRequest, format!("request is not JSON: {e}")))?;
    check_version(&value, "client")?;
    let req: Request = serde_json::from_value(value)
        .map_err(|e| ErrorReply::new(ErrorKind::BadRequest, format!("malformed request: {e}")))?;
    req.command.validate()?;
    Ok(req.command)
}

/// Parses one response line (the client's side). A daemon error comes back as `Ok(Err(..))`;
/// an unreadable or other-version response as `Err`.
pub fn parse_response(line: &str) -> Result<Result<Reply, ErrorReply>, ErrorReply> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!("the daemon's answer is not JSON ({e}); is this a memweightd socket?"),
        )
    })?;
    check_version(&value, "daemon")?;
    let resp: Response = serde_json::from_value(value).map_err(|e| {
        ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!("cannot read the daemon's answer: {e}"),
        )
    })?;
    Ok(match resp.result {
        Outcome::Ok(r) => Ok(r),
        Outcome::Error(e) => Err(e),
    })
}

pub(super) fn to_line<T: Serialize>(value: &T) -> String {
    // These types hold only strings, integers, finite floats and options: encoding cannot fail.
    let mut s = serde_json::to_string(value).unwrap_or_else(|e| {
        format!(
            "{{\"version\":{PROTOCOL_VERSION},\"result\":{{\"error\":{{\"kind\":\"internal\",\
             \"message\":\"cannot encode: {}\"}}}}}}",
            e.to_string().replace('"', "'")
        )
    });
    s.push('\n');
    s
}
