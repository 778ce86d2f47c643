//! Pod annotations as weights: `memweight.io/weight`, `memweight.io/min` and `memweight.io/max`.
//!
//! Kubernetes users write intent as pod annotations with a domain prefix, not as container
//! labels. `podman kube play` copies a pod's `metadata.annotations` into the OCI annotations of
//! each of the pod's containers (`pkg/specgen/generate/kube`: `s.Annotations`), where only the
//! libpod inspect shows them (`GET /v4.0.0/libpod/containers/{id}/json`, `Config.Annotations`): the
//! Docker-compatible list that [`crate::containers`] reads carries labels, not annotations.
//! (It does carry the pod's `metadata.labels`: kube play adds them to every container's labels.)
//!
//! So annotations cost one request per container, and are asked for only where they can
//! matter, with the least engine traffic:
//!
//! * only for a listed container that has no label with the label prefix: **labels win**. A
//!   container that carries any `memweight.*` label is weighted by its labels alone, and its
//!   annotations are not read ([`requests`]); one that carries none is weighted by its
//!   annotations. Both are requests bounded by the container's `[[cgroup]]` rule in the same
//!   way ([`crate::labels::bound`]), and a runtime override beats either.
//! * once per container id: a container's annotations cannot change while it exists, so the
//!   answer is cached until the id leaves the list ([`Cache`]);
//! * at most [`MAX_INSPECTS_PER_REFRESH`] inspections per refresh, all of them within one
//!   request timeout, so that a host starting thousands of containers is asked gradually;
//! * not at all once the engine has shown it has no libpod API (docker answers the libpod
//!   path with 404 "page not found").
//!
//! Each answer is read with the same hard bounds as the list: [`crate::containers::HEAD_LIMIT`]
//! of HTTP head, [`MAX_INSPECT_BODY`] of body, the timeout; and parsed without a JSON tree,
//! keeping only the annotations with [`ANNOTATION_PREFIX`] ([`parse_inspect`], fuzzed:
//! `fuzz/fuzz_targets/engine_inspect.rs`). A failed inspection is not cached: the container
//! is asked again at the next refresh, and its annotations do not apply until then.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tracing::debug;

use crate::containers::{Container, EngineError, get};

/// The libpod API is asked under a version prefix (`/v4.0.0/libpod/...`): podman serves its
/// own endpoints only so (podman 4.3.1 in the lab's host guest answered an unversioned
/// `/libpod/containers/{id}/json` with 404 "page not found", which reads as docker's "no libpod
/// API" and left every pod's annotations unread); any version from 4.0.0 on answers the same.
/// The annotations read: `memweight.io/weight`, `memweight.io/min`, `memweight.io/max`.
pub const ANNOTATION_PREFIX: &str = "memweight.io/";
/// The largest inspect answer read (podman's is a few KiB per container).
pub const MAX_INSPECT_BODY: usize = 1 << 20;
/// The most containers inspected in one refresh.
pub const MAX_INSPECTS_PER_REFRESH: usize = 32;

/// What a container asks for and under which prefix its keys are named: its labels with
/// `label_prefix` when it has any, else its annotations with [`ANNOTATION_PREFIX`]. Labels
/// win as a whole (no mixing of a label's weight with an annotation's max): one place says
/// what a container asks for, and the warnings name the keys it was given under.
#[must_use]
pub fn requests<'a>(
    c: &'a Container,
    label_prefix: &'a str,
) -> (&'a BTreeMap<String, String>, &'a str) {
    if c.labels.keys().any(|k| k.starts_with(label_prefix)) || c.annotations.is_empty() {
        (&c.labels, label_prefix)
    } else {
        (&c.annotations, ANNOTATION_PREFIX)
    }
}

/// Reads a libpod inspect answer (`GET /v4.0.0/libpod/containers/{id}/json`): the string values of
/// `Config.Annotations` whose key starts with `prefix`. Anything else in the object is skipped
/// without being built; a missing or malformed `Config` or `Annotations` reads as none;
/// anything but one JSON object is an error.
pub fn parse_inspect(body: &[u8], prefix: &str) -> Result<BTreeMap<String, String>, String> {
    use serde::de::DeserializeSeed as _;
    let mut de = serde_json::Deserializer::from_slice(body);
    wire::Inspect { prefix }
        .deserialize(&mut de)
        .and_then(|a| de.end().map(|()| a))
        .map_err(|e| format!("expected a JSON object (a container's inspect): {e}"))
}

/// The JSON of the inspect answer, read with visitors that keep only what is needed (the
/// pieces of the engine list's reader, [`crate::containers::wire`]).
mod wire {
    use std::collections::BTreeMap;
    use std::fmt;

    use serde::Deserializer;
    use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

    use crate::containers::wire::{Prefixed, skip_non_maps};

    type Map = BTreeMap<String, String>;

    /// `Config`: its `Annotations` (the last `Annotations` key wins).
    struct Config<'p> {
        prefix: &'p str,
    }

    impl<'de> Visitor<'de> for Config<'_> {
        type Value = Map;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a container's config")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Map, A::Error> {
            let mut out = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                if key == "Annotations" {
                    out = map.next_value_seed(Prefixed {
                        prefix: self.prefix,
                        what: "a map of annotations",
                    })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(out)
        }
        skip_non_maps!();
    }

    impl<'de> DeserializeSeed<'de> for Config<'_> {
        type Value = Map;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Map, D::Error> {
            d.deserialize_any(self)
        }
    }

    /// The whole answer: one object; its `Config` (the last `Config` key wins).
    pub(super) struct Inspect<'p> {
        pub(super) prefix: &'p str,
    }

    impl<'de> Visitor<'de> for Inspect<'_> {
        type Value = Map;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a container's inspect object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Map, A::Error> {
            let mut out = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                if key == "Config" {
                    out = map.next_value_seed(Config {
                        prefix: self.prefix,
                    })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(out)
        }
    }

    impl<'de> DeserializeSeed<'de> for Inspect<'_> {
        type Value = Map;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Map, D::Error> {
            d.deserialize_map(self)
        }
    }
}

/// What one inspection found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Inspected {
    /// The container's annotations with the prefix (maybe none).
    Found(BTreeMap<String, String>),
    /// 404 for this container: gone since the list.
    NoContainer,
    /// 404 "page not found": the engine has no libpod API (docker).
    NoLibpod,
}

/// The annotations of the containers asked about so far, per engine socket: one entry per
/// container id, dropped when the id leaves the engine's list.
#[derive(Debug, Default)]
pub struct Cache {
    by_id: BTreeMap<String, BTreeMap<String, String>>,
    /// `true` once the engine answered the libpod path with "page not found".
    no_libpod: bool,
}

impl Cache {
    /// Sets the annotations of the containers in `list` (a fresh answer of the engine at
    /// `socket`) that carry no label with `label_prefix`: from the cache, or asked for, at most
    /// [`MAX_INSPECTS_PER_REFRESH`] of them and all within `timeout`. Never fails: a container
    /// whose inspection failed keeps no annotations until a later refresh succeeds.
    pub async fn fill(
        &mut self,
        socket: &Path,
        timeout: Duration,
        label_prefix: &str,
        list: &mut [Container],
    ) {
        self.by_id.retain(|id, _| list.iter().any(|c| c.id == *id));
        let wanted: Vec<String> = list
            .iter()
            .filter(|c| {
                !self.by_id.contains_key(&c.id)
                    && !c.labels.keys().any(|k| k.starts_with(label_prefix))
                    && inspectable(&c.id)
            })
            .take(MAX_INSPECTS_PER_REFRESH)
            .map(|c| c.id.clone())
            .collect();
        if !wanted.is_empty() && !self.no_libpod {
            let asked = async {
                for id in &wanted {
                    match inspect(socket, id).await {
                        Ok(Inspected::Found(a)) => {
                            self.by_id.insert(id.clone(), a);
                        }
                        Ok(Inspected::NoContainer) => {
                            self.by_id.insert(id.clone(), BTreeMap::new());
                        }
                        Ok(Inspected::NoLibpod) => {
                            debug!(socket = %socket.display(),
                                "the engine has no libpod API: pod annotations are not read");
                            self.no_libpod = true;
                            break;
                        }
                        Err(e) => {
                            debug!(error = %e, id = %id,
                                "cannot read a container's annotations; asking again next refresh");
                            break;
                        }
                    }
                }
            };
            if tokio::time::timeout(timeout, asked).await.is_err() {
                debug!(socket = %socket.display(), timeout = ?timeout,
                    "container annotations not all read in time; the rest next refresh");
            }
        }
        for c in list.iter_mut() {
            if let Some(a) = self.by_id.get(&c.id) {
                c.annotations.clone_from(a);
            }
        }
    }
}

/// Whether `id` may go into a request path as it is (hex digits, as podman and docker make
/// them; anything else is not asked about).
fn inspectable(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `GET /v4.0.0/libpod/containers/{id}/json` on `socket`, bounded by
/// [`crate::containers::HEAD_LIMIT`] and [`MAX_INSPECT_BODY`] (the caller bounds the time).
/// Every answer's body is read: a 404's says whose it is.
async fn inspect(socket: &Path, id: &str) -> Result<Inspected, EngineError> {
    let (status, body) = get(
        socket,
        &format!("/v4.0.0/libpod/containers/{id}/json"),
        MAX_INSPECT_BODY,
        |_| true,
    )
    .await?;
    match status {
        404 => Ok(classify_not_found(&body)),
        200..=299 => parse_inspect(&body, ANNOTATION_PREFIX)
            .map(Inspected::Found)
            .map_err(|message| EngineError::Body {
                path: socket.to_owned(),
                message,
            }),
        _ => Err(EngineError::Body {
            path: socket.to_owned(),
            message: format!("GET /v4.0.0/libpod/containers/{id}/json answered {status}"),
        }),
    }
}

/// A 404's body: docker's router says `{"message":"page not found"}` for a path it does not
/// serve; podman names the container it does not have.
fn classify_not_found(body: &[u8]) -> Inspected {
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned));
    if message.as_deref() == Some("page not found") {
        Inspected::NoLibpod
    } else {
        Inspected::NoContainer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::AsyncWriteExt;
    use tokio::net::UnixListener;
    use tokio::task::JoinHandle;

    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn container(id: &str, labels: &[(&str, &str)]) -> Container {
        Container {
            id: id.to_owned(),
            name: id.chars().take(12).collect(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            annotations: BTreeMap::new(),
        }
    }

    /// What podman 4.3 answers for a container of a `podman kube play` pod (abridged).
    fn podman_inspect(weight: &str) -> String {
        format!(
            r#"{{"Id":"{ID}","Created":"2026-11-26T07:00:00Z","State":{{"Status":"running","Pid":42}},
               "Config":{{"Hostname":"app","Labels":{{"app":"c1"}},
                 "Annotations":{{"io.kubernetes.cri-o.SandboxID":"ff","io.podman.annotations.autoremove":"FALSE",
                   "memweight.io/weight":"{weight}","memweight.io/max":"1G","memweight.iox":"no"}},
                 "StopSignal":15}},
               "HostConfig":{{"Binds":[]}}}}"#
        )
    }

    #[test]
    fn inspect_keeps_only_the_prefixed_string_annotations() {
        let got = parse_inspect(podman_inspect("2").as_bytes(), ANNOTATION_PREFIX).expect("ok");
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            [
                ("memweight.io/max".to_owned(), "1G".to_owned()),
                ("memweight.io/weight".to_owned(), "2".to_owned())
            ]
        );
    }

    #[test]
    fn malformed_config_or_annotations_read_as_none() {
        for body in [
            r#"{"Config":null}"#,
            r#"{"Config":{"Annotations":null}}"#,
            r#"{"Config":{"Annotations":["memweight.io/weight"]}}"#,
            r#"{"Config":"x"}"#,
            r#"{"Config":{"Annotations":{"memweight.io/weight":3}}}"#,
            // A null value was an error that lost the whole answer (its reader's own copy
            // of the engine list's string visitor lacked `visit_none`).
            r#"{"Config":{"Annotations":{"memweight.io/weight":null}}}"#,
            r#"{"Id":"x"}"#,
            "{}",
        ] {
            assert_eq!(
                parse_inspect(body.as_bytes(), ANNOTATION_PREFIX),
                Ok(BTreeMap::new()),
                "{body}"
            );
        }
        for bad in [
            "",
            "[]",
            "null",
            "{",
            r#"{"Config":{}} x"#,
            "\u{0}",
            "\"s\"",
        ] {
            assert!(
                parse_inspect(bad.as_bytes(), ANNOTATION_PREFIX).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn labels_win_over_annotations_as_a_whole() {
        let mut c = container(ID, &[("memweight.weight", "3")]);
        c.annotations.insert("memweight.io/max".into(), "1G".into());
        let (asked, prefix) = requests(&c, "memweight.");
        assert_eq!(prefix, "memweight.");
        assert_eq!(asked.len(), 1);
        c.labels.clear();
        let (asked, prefix) = requests(&c, "memweight.");
        assert_eq!(prefix, ANNOTATION_PREFIX);
        assert_eq!(
            asked.get("memweight.io/max").map(String::as_str),
            Some("1G")
        );
        c.annotations.clear();
        assert_eq!(requests(&c, "memweight.").1, "memweight.");
    }

    #[test]
    fn a_404_says_whether_the_engine_has_a_libpod_api() {
        assert_eq!(
            classify_not_found(br#"{"message":"page not found"}"#),
            Inspected::NoLibpod
        );
        assert_eq!(
            classify_not_found(
                br#"{"cause":"no such container","message":"no container with name or ID \"x\" found: no such container","response":404}"#
            ),
            Inspected::NoContainer
        );
        assert_eq!(classify_not_found(b"junk"), Inspected::NoContainer);
    }

    #[test]
    fn only_hex_ids_are_put_in_a_request_path() {
        assert!(inspectable(ID));
        for bad in ["", "../../x", "abc/def", "a b", &"a".repeat(129)] {
            assert!(!inspectable(bad), "{bad:?}");
        }
    }

    /// A fake engine: answers `/v4.0.0/libpod/containers/<id>/json` from `inspects` (404 "no such
    /// container" for other ids, or 404 "page not found" for every path when `docker`), and
    /// counts the requests.
    struct Engine {
        dir: tempfile::TempDir,
        requests: Arc<Mutex<Vec<String>>>,
        task: JoinHandle<()>,
    }

    impl Drop for Engine {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    impl Engine {
        fn start(inspects: BTreeMap<String, String>, docker: bool) -> Self {
            let dir = tempfile::tempdir().expect("tempdir");
            let listener = UnixListener::bind(dir.path().join("engine.sock")).expect("bind");
            let requests = Arc::new(Mutex::new(Vec::new()));
            let seen = Arc::clone(&requests);
            let task = tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let inspects = inspects.clone();
                    let seen = Arc::clone(&seen);
                    tokio::spawn(async move {
                        let Some(request) = crate::containers::read_request_head(&mut stream).await
                        else {
                            return;
                        };
                        let text = String::from_utf8_lossy(&request);
                        let path = text.split(' ').nth(1).unwrap_or("").to_owned();
                        seen.lock().expect("seen").push(path.clone());
                        let id = path
                            .strip_prefix("/v4.0.0/libpod/containers/")
                            .and_then(|p| p.strip_suffix("/json"))
                            .unwrap_or("");
                        let (status, body) = match (docker, inspects.get(id)) {
                            (true, _) => ("404 Not Found", r#"{"message":"page not found"}"#.to_owned()),
                            (false, Some(b)) => ("200 OK", b.clone()),
                            (false, None) => (
                                "404 Not Found",
                                r#"{"cause":"no such container","message":"no such container","response":404}"#.to_owned(),
                            ),
                        };
                        let answer = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = stream.write_all(answer.as_bytes()).await;
                        let _ = stream.shutdown().await;
                    });
                }
            });
            Engine {
                dir,
                requests,
                task,
            }
        }

        fn socket(&self) -> std::path::PathBuf {
            self.dir.path().join("engine.sock")
        }

        fn requests(&self) -> Vec<String> {
            self.requests.lock().expect("requests").clone()
        }
    }

    #[tokio::test]
    async fn each_unlabelled_container_is_inspected_once_while_it_is_listed() {
        let other = ID.replace('0', "f");
        let gone = ID.replace('1', "e");
        let engine = Engine::start(
            BTreeMap::from([(ID.to_owned(), podman_inspect("3"))]),
            false,
        );
        let mut cache = Cache::default();
        let list = || {
            vec![
                container(ID, &[]),
                container(&other, &[("memweight.weight", "2")]),
                container(&gone, &[]),
            ]
        };
        let timeout = Duration::from_secs(5);
        for _ in 0..3 {
            let mut l = list();
            cache
                .fill(&engine.socket(), timeout, "memweight.", &mut l)
                .await;
            assert_eq!(
                l[0].annotations
                    .get("memweight.io/weight")
                    .map(String::as_str),
                Some("3")
            );
            assert!(l[1].annotations.is_empty(), "labelled: not asked");
            assert!(l[2].annotations.is_empty(), "gone since the list");
        }
        assert_eq!(
            engine.requests(),
            [
                format!("/v4.0.0/libpod/containers/{ID}/json"),
                format!("/v4.0.0/libpod/containers/{gone}/json")
            ],
            "one request per unlabelled id, none for the labelled one"
        );
        // An id that leaves the list is forgotten; if it came back it would be asked again.
        let mut l = vec![container(&other, &[])];
        cache
            .fill(&engine.socket(), timeout, "memweight.", &mut l)
            .await;
        assert_eq!(cache.by_id.keys().collect::<Vec<_>>(), [&other]);
    }

    #[tokio::test]
    async fn docker_is_asked_once_then_no_more() {
        let engine = Engine::start(BTreeMap::new(), true);
        let mut cache = Cache::default();
        let ids: Vec<String> = (0..4).map(|i| format!("{i}{}", &ID[1..])).collect();
        for _ in 0..3 {
            let mut l: Vec<Container> = ids.iter().map(|id| container(id, &[])).collect();
            cache
                .fill(
                    &engine.socket(),
                    Duration::from_secs(5),
                    "memweight.",
                    &mut l,
                )
                .await;
            assert!(l.iter().all(|c| c.annotations.is_empty()));
        }
        assert_eq!(engine.requests().len(), 1, "{:?}", engine.requests());
    }

    #[tokio::test]
    async fn a_refresh_inspects_a_bounded_number_of_containers() {
        let ids: Vec<String> = (0..(MAX_INSPECTS_PER_REFRESH + 8))
            .map(|i| format!("{i:064x}"))
            .collect();
        let engine = Engine::start(
            ids.iter()
                .map(|id| (id.clone(), podman_inspect("1")))
                .collect(),
            false,
        );
        let mut cache = Cache::default();
        let mut l: Vec<Container> = ids.iter().map(|id| container(id, &[])).collect();
        cache
            .fill(
                &engine.socket(),
                Duration::from_secs(10),
                "memweight.",
                &mut l,
            )
            .await;
        assert_eq!(engine.requests().len(), MAX_INSPECTS_PER_REFRESH);
        let mut l: Vec<Container> = ids.iter().map(|id| container(id, &[])).collect();
        cache
            .fill(
                &engine.socket(),
                Duration::from_secs(10),
                "memweight.",
                &mut l,
            )
            .await;
        assert_eq!(engine.requests().len(), ids.len());
        assert!(l.iter().all(|c| !c.annotations.is_empty()));
    }

    #[tokio::test]
    async fn an_absent_engine_leaves_annotations_unset_and_asks_again_later() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = Cache::default();
        let mut l = vec![container(ID, &[])];
        cache
            .fill(
                &dir.path().join("none.sock"),
                Duration::from_secs(1),
                "memweight.",
                &mut l,
            )
            .await;
        assert!(l[0].annotations.is_empty());
        assert!(cache.by_id.is_empty(), "a failure is not cached");
    }
}
