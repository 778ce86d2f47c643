//! The container engine's answer to `GET /containers/json`: whoever answers on the engine's
//! socket writes it. `parse_list` reads it as it goes, without a JSON tree; whatever the bytes,
//! it must not panic, must keep no more than the answer holds, and must agree with a plain
//! reading of the same JSON through `serde_json::Value` wherever that reading succeeds.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use memweightd::containers::{Container, parse_list};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    for prefix in ["memweight.", ""] {
        let fast = parse_list(data, prefix);
        if let Ok(list) = &fast {
            let mut kept = 0;
            for c in list {
                assert!(!c.id.is_empty() && c.id.trim() == c.id, "{c:?}");
                // A listed name has its `/` cut; without one, the id's first 12 characters.
                let from_id = c.name == c.id.chars().take(12).collect::<String>();
                assert!(
                    !c.name.is_empty() && (!c.name.starts_with('/') || from_id),
                    "{c:?}"
                );
                assert!(c.labels.keys().all(|k| k.starts_with(prefix)), "{c:?}");
                kept += c.id.len()
                    + c.name.len()
                    + c.labels
                        .iter()
                        .map(|(k, v)| k.len() + v.len())
                        .sum::<usize>();
            }
            // Memory stays within the answer's size (each string comes from its own bytes; a
            // name made of the id from the id's).
            assert!(
                kept <= 2 * data.len(),
                "{kept} bytes kept of {}",
                data.len()
            );
        }
        if let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(data) {
            let plain: Vec<Container> = items.iter().filter_map(|i| reference(i, prefix)).collect();
            assert_eq!(fast.as_ref(), Ok(&plain));
        }
    }
});

/// What the answer says through `serde_json::Value` (the reading `parse_list` replaced).
fn reference(item: &Value, prefix: &str) -> Option<Container> {
    let item = item.as_object()?;
    let id = item.get("Id")?.as_str()?.trim();
    if id.is_empty() {
        return None;
    }
    if let Some(Value::String(s)) = item.get("State")
        && !s.eq_ignore_ascii_case("running")
    {
        return None;
    }
    let name = item
        .get("Names")
        .and_then(Value::as_array)
        .and_then(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(|n| n.trim().trim_start_matches('/'))
                .find(|n| !n.is_empty())
        })
        .map_or_else(|| id.chars().take(12).collect(), str::to_owned);
    let labels: BTreeMap<String, String> = item
        .get("Labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Some(Container {
        id: id.to_owned(),
        name,
        labels,
        annotations: BTreeMap::new(),
    })
}
