//! The engine API's JSON (`GET /containers/json`), read with serde visitors that keep what the
//! daemon needs — each container's id, first name and the labels with the configured prefix —
//! and skip the rest (`IgnoredAny`) without building it, so memory stays bounded by what is
//! kept, whatever the engine sends ([`super::parse_list`]; fuzzed by
//! `fuzz/fuzz_targets/engine_list.rs`). The libpod inspect answer's reader
//! (`crate::annotations`) is built from the same pieces: [`Text`], [`Prefixed`] and
//! [`skip_non_maps`].

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::Container;

/// Any scalar a visitor does not want: skipped, and the visitor's default kept.
macro_rules! skip_other_values {
    () => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
    };
}

/// Any value but a map: skipped (an array without being built), and the visitor's default
/// kept.
macro_rules! skip_non_maps {
    () => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            IgnoredAny.visit_seq(seq).map(|_| Self::Value::default())
        }
        $crate::containers::wire::skip_other_values!();
    };
}
pub(crate) use skip_non_maps;
pub(crate) use skip_other_values;

/// A string; anything else is skipped (`None`).
pub(crate) struct Text;

impl<'de> Visitor<'de> for Text {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        IgnoredAny.visit_map(map).map(|_| None)
    }
    skip_other_values!();
}

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// `Names`: the first that is not empty once its leading `/` is cut.
struct FirstName;

impl<'de> Visitor<'de> for FirstName {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of names")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut first = None;
        while let Some(name) = seq.next_element_seed(Text)? {
            if first.is_none()
                && let Some(n) = name
            {
                let n = n.trim().trim_start_matches('/');
                if !n.is_empty() {
                    first = Some(n.to_owned());
                }
            }
        }
        Ok(first)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        IgnoredAny.visit_map(map).map(|_| None)
    }
    skip_other_values!();
}

impl<'de> DeserializeSeed<'de> for FirstName {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A map of strings (`Labels`, `Annotations`): the keys that start with the prefix whose value
/// is a string (the last one of a key given twice, as a JSON object reader would keep).
pub(crate) struct Prefixed<'p> {
    pub(crate) prefix: &'p str,
    /// What the map is, for the error of a malformed document.
    pub(crate) what: &'static str,
}

impl<'de> Visitor<'de> for Prefixed<'_> {
    type Value = BTreeMap<String, String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if key.starts_with(self.prefix) {
                match map.next_value_seed(Text)? {
                    Some(v) => out.insert(key, v),
                    None => out.remove(&key),
                };
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }
    skip_non_maps!();
}

impl<'de> DeserializeSeed<'de> for Prefixed<'_> {
    type Value = BTreeMap<String, String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// One element of the array: a running container, or `None`.
struct Item<'p> {
    label_prefix: &'p str,
}

impl<'de> Visitor<'de> for Item<'_> {
    type Value = Option<Container>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a container")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut name, mut labels, mut state) = (None, None, BTreeMap::new(), None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "Id" => id = map.next_value_seed(Text)?,
                "Names" => name = map.next_value_seed(FirstName)?,
                "Labels" => {
                    labels = map.next_value_seed(Prefixed {
                        prefix: self.label_prefix,
                        what: "a map of labels",
                    })?;
                }
                "State" => state = map.next_value_seed(Text)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let Some(id) = id.map(|i| i.trim().to_owned()).filter(|i| !i.is_empty()) else {
            return Ok(None);
        };
        // Docker's list has `State: "running"`; older podman has an object or nothing.
        if state.is_some_and(|s| !s.eq_ignore_ascii_case("running")) {
            return Ok(None);
        }
        let name = name.unwrap_or_else(|| id.chars().take(12).collect());
        Ok(Some(Container {
            id,
            name,
            labels,
            annotations: BTreeMap::new(),
        }))
    }
    skip_non_maps!();
}

impl<'de> DeserializeSeed<'de> for Item<'_> {
    type Value = Option<Container>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// The answer: one array of containers.
pub(super) struct List<'p> {
    pub(super) label_prefix: &'p str,
}

impl<'de> Visitor<'de> for List<'_> {
    type Value = Vec<Container>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of containers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element_seed(Item {
            label_prefix: self.label_prefix,
        })? {
            out.extend(item);
        }
        Ok(out)
    }
}

impl<'de> DeserializeSeed<'de> for List<'_> {
    type Value = Vec<Container>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}
