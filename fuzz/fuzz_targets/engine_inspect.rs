//! The container engine's answer to `GET /libpod/containers/{id}/json` (a pod's annotations):
//! whoever answers on the engine's socket writes it. `parse_inspect` reads it as it goes,
//! without a JSON tree; whatever the bytes, it must not panic, must keep only prefixed keys and
//! no more than the answer holds, and must agree with a plain reading of the same JSON through
//! `serde_json::Value` wherever that reading succeeds (and the object has no repeated keys,
//! which `Value` merges differently).
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use memweightd::annotations::{ANNOTATION_PREFIX, parse_inspect};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    for prefix in [ANNOTATION_PREFIX, ""] {
        let fast = parse_inspect(data, prefix);
        if let Ok(map) = &fast {
            assert!(map.keys().all(|k| k.starts_with(prefix)), "{map:?}");
            let kept: usize = map.iter().map(|(k, v)| k.len() + v.len()).sum();
            assert!(kept <= data.len(), "{kept} bytes kept of {}", data.len());
        }
        if let Ok(Value::Object(top)) = serde_json::from_slice::<Value>(data) {
            if fast.is_ok() && !has_repeated_keys(data) {
                assert_eq!(fast.as_ref(), Ok(&reference(&top, prefix)));
            }
        }
    }
});

/// What the answer says through `serde_json::Value`.
fn reference(top: &serde_json::Map<String, Value>, prefix: &str) -> BTreeMap<String, String> {
    top.get("Config")
        .and_then(Value::as_object)
        .and_then(|c| c.get("Annotations"))
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether any JSON object in `data` repeats a key (`Value` keeps the last value in the first
/// key's place; the streaming reader keeps the last, but drops a key whose last value is not a
/// string): such inputs are checked for panics and bounds only.
fn has_repeated_keys(data: &[u8]) -> bool {
    // Re-serialising drops repeated keys: fewer `":` after it than before flags them (and
    // other spellings of the same JSON, which are then only checked for panics and bounds).
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return true;
    };
    let Ok(text) = std::str::from_utf8(data) else {
        return true;
    };
    let compact = serde_json::to_string(&v).unwrap_or_default();
    text.matches("\":").count() != compact.matches("\":").count()
}
