use super::*;

#[test]
fn listing_changes_name_each_container_that_came_or_went() {
    let c = |id: &str, name: &str| Container {
        id: id.to_owned(),
        name: name.to_owned(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
    };
    let list = |cs: &[Container]| -> BTreeMap<String, Container> {
        cs.iter().map(|c| (c.id.clone(), c.clone())).collect()
    };
    let (a, b, d) = (c("aa", "db"), c("bb", "web"), c("dd", "cache"));
    let old = list(&[a.clone(), b.clone()]);
    let new = list(&[b.clone(), d.clone()]);
    assert_eq!(
        listing_changes(&old, &new),
        vec![Listing::Gone(&a), Listing::Listed(&d)]
    );
    assert!(listing_changes(&new, &new).is_empty());
    assert_eq!(short_id(ID), "0123456789ab");
    assert_eq!(short_id("abc"), "abc");
}

const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn ids_come_from_podman_and_docker_scopes() {
    assert_eq!(
        container_id(&format!("machine.slice/libpod-{ID}.scope")),
        Some(ID)
    );
    assert_eq!(
        container_id(&format!("system.slice/docker-{ID}.scope")),
        Some(ID)
    );
    assert_eq!(
        container_id(&format!("machine.slice/libpod-{ID}.scope/container")),
        Some(ID)
    );
    assert_eq!(container_id(&format!("/libpod-{ID}.scope/")), Some(ID));
    for not in [
        format!("machine.slice/libpod-{}.scope", &ID[..12]),
        format!("machine.slice/libpod-{ID}x.scope"),
        format!("machine.slice/libpod-{ID}.service"),
        format!("machine.slice/crio-conmon-{ID}.scope"),
        format!("kubepods.slice/cri-containerd-{}.scope", &ID[..63]),
        format!("machine.slice/libpod-{ID}.scope/other"),
        "container".to_owned(),
        "/".to_owned(),
        String::new(),
        "libpod-.scope".to_owned(),
        format!("libpod-{}é.scope", &ID[..62]),
    ] {
        assert_eq!(container_id(&not), None, "{not}");
    }
}

/// Kubernetes with the systemd cgroup driver (containerd, CRI-O) and podman's pods (`podman
/// kube play`) nest the container's scope in slices; the scope's name carries the id.
#[test]
fn ids_come_from_pod_and_kubernetes_scopes() {
    for path in [
        format!("machine.slice/machine-libpod_pod_{ID}.slice/libpod-{ID}.scope"),
        format!(
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_5e6f_7a8b_9c0d_1e2f3a4b5c6d.slice/cri-containerd-{ID}.scope"
        ),
        format!(
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podx.slice/crio-{ID}.scope"
        ),
        format!("kubepods.slice/kubepods-pody.slice/cri-containerd-{ID}.scope"),
        format!("kubepods.slice/kubepods-pody.slice/crio-{ID}.scope/container"),
    ] {
        assert_eq!(container_id(&path), Some(ID), "{path}");
    }
    assert_eq!(
        container_id(&format!("machine.slice/machine-libpod_pod_{ID}.slice")),
        None,
        "the pod's slice is not a container"
    );
}

/// podman puts each container's conmon in `libpod-conmon-<id>.scope` beside the container's
/// own scope; a `libpod-*` glob matches both, and only the latter is the container.
#[test]
fn regression_conmon_scope_is_not_the_container() {
    assert_eq!(
        container_id(&format!("machine.slice/libpod-conmon-{ID}.scope")),
        None
    );
}

/// podman's compat API answers `"Names": ["web"]` where docker says `["/web"]`.
#[test]
fn regression_podman_names_without_leading_slash() {
    let body = format!(
        r#"[{{"Id":"{ID}","Names":["web"]}},{{"Id":"{}","Names":["/db"]}}]"#,
        ID.replace('0', "9")
    );
    let list = parse_list(body.as_bytes(), "memweight.").expect("an array");
    let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["web", "db"]);
}

#[test]
fn list_reads_names_with_or_without_slash_and_skips_junk() {
    let body = format!(
        r#"[
              {{"Id":"{ID}","Names":["/web"],"Labels":{{"memweight.weight":"2"}},"State":"running"}},
              {{"Id":"{}","Names":["db"],"Labels":null,"State":"running"}},
              {{"Id":"{}","Names":null}},
              {{"Id":"exited1","Names":["/old"],"State":"exited"}},
              {{"Names":["/noid"]}},
              {{"Id":"","Names":["/empty"]}},
              {{"Id":7}},
              "text",
              {{"Id":"podman3","Names":["p3"],"State":{{"Running":true}},"Labels":{{"a":"b"}}}}
            ]"#,
        ID.replace('0', "1"),
        ID.replace('0', "2"),
    );
    let list = parse_list(body.as_bytes(), "memweight.").expect("an array");
    let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["web", "db", "2123456789ab", "p3"]);
    assert_eq!(
        list[0].labels.get("memweight.weight").map(String::as_str),
        Some("2")
    );
    assert!(list[1].labels.is_empty());
    for bad in [
        "",
        "{}",
        "null",
        "[",
        "{\"message\":\"page not found\"}",
        "\u{0}",
    ] {
        assert!(parse_list(bad.as_bytes(), "memweight.").is_err(), "{bad:?}");
    }
    assert_eq!(parse_list(b"[]", "memweight."), Ok(Vec::new()));
}

#[test]
fn find_by_name_id_and_prefix() {
    let mut snap = Snapshot::default();
    let other = ID.replace("0123", "0124");
    for (id, name) in [(ID, "web"), (other.as_str(), "db")] {
        snap.containers.insert(
            id.to_owned(),
            Container {
                id: id.to_owned(),
                name: name.to_owned(),
                labels: BTreeMap::new(),
                annotations: BTreeMap::new(),
            },
        );
    }
    let name = |r: Result<Option<&Container>, Ambiguous>| r.map(|c| c.map(|c| c.name.clone()));
    assert_eq!(name(snap.find("web")), Ok(Some("web".into())));
    assert_eq!(name(snap.find("/db")), Ok(Some("db".into())));
    assert_eq!(name(snap.find(ID)), Ok(Some("web".into())));
    assert_eq!(name(snap.find(&ID[..12])), Ok(Some("web".into())));
    assert_eq!(name(snap.find(&ID[..11])), Ok(None));
    assert_eq!(name(snap.find("nope")), Ok(None));
    assert_eq!(name(snap.find("")), Ok(None));
    assert!(snap.find(&ID[..3]).is_ok());
    let shared = "0123456789ab";
    assert_eq!(name(snap.find(shared)), Ok(Some("web".into())));
    snap.containers.insert(
        format!("{shared}ffff"),
        Container {
            id: format!("{shared}ffff"),
            name: "twin".into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        },
    );
    assert!(snap.find(shared).is_err());
    assert_eq!(
        snap.for_cgroup(&format!("machine.slice/libpod-{ID}.scope"))
            .map(|c| c.name.as_str()),
        Some("web")
    );
}

/// A Docker-compatible engine on a real Unix socket that answers every connection the same
/// way, for the failure modes of issue 23. Before it, an answer that was not HTTP, or
/// larger than `MAX_BODY`, counted as a *slow* engine, whose last label list was kept for
/// ever; and so did an engine that hung.
mod failing_engine {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use tokio::io::AsyncWriteExt;
    use tokio::net::UnixListener;

    use super::*;
    use crate::config::Interval;

    /// How the fake engine answers.
    #[derive(Debug, Clone)]
    enum Answer {
        /// These bytes, then the connection is closed.
        Bytes(Vec<u8>),
        /// 200, chunked, and chunks for ever.
        Endless,
        /// 200 with a length, then one byte every 100 ms.
        Trickle,
        /// Nothing, for an hour.
        Hang,
    }

    fn ok(body: &str) -> Answer {
        Answer::Bytes(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    }

    fn good() -> Answer {
        ok(&format!(
            r#"[{{"Id":"{ID}","Names":["/web"],"State":"running","Labels":{{"memweight.weight":"7","other":"x"}}}}]"#
        ))
    }

    struct Engine {
        dir: tempfile::TempDir,
        answer: Arc<Mutex<Answer>>,
        requests: Arc<AtomicUsize>,
        task: JoinHandle<()>,
    }

    impl Drop for Engine {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    impl Engine {
        fn start() -> Self {
            let dir = tempfile::tempdir().expect("tempdir");
            let listener = UnixListener::bind(dir.path().join("engine.sock")).expect("bind");
            let answer = Arc::new(Mutex::new(good()));
            let requests = Arc::new(AtomicUsize::new(0));
            let shared = Arc::clone(&answer);
            let counted = Arc::clone(&requests);
            let task = tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let answer = shared.lock().expect("answer").clone();
                    tokio::spawn(async move {
                        if read_request_head(&mut stream).await.is_none() {
                            return;
                        }
                        serve(&mut stream, answer).await;
                    });
                }
            });
            Engine {
                dir,
                answer,
                requests,
                task,
            }
        }

        /// Connections accepted so far.
        fn requests(&self) -> usize {
            self.requests.load(Ordering::SeqCst)
        }

        fn socket(&self) -> PathBuf {
            self.dir.path().join("engine.sock")
        }

        fn answer(&self, a: Answer) {
            *self.answer.lock().expect("answer") = a;
        }
    }

    async fn serve(stream: &mut UnixStream, answer: Answer) {
        match answer {
            Answer::Bytes(b) => {
                let _ = stream.write_all(&b).await;
                let _ = stream.shutdown().await;
            }
            Answer::Endless => {
                let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("4000\r\n[{}\r\n", " ".repeat(0x4000 - 1));
                while stream.write_all(chunk.as_bytes()).await.is_ok() {}
            }
            Answer::Trickle => {
                let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n[";
                let _ = stream.write_all(head.as_bytes()).await;
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if stream.write_all(b" ").await.is_err() {
                        return;
                    }
                }
            }
            Answer::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
        }
    }

    /// The refresh task against `engine`, every 100 ms (timeouts of 500 ms).
    async fn labelled(engine: &Engine) -> Containers {
        labelled_every(engine, Duration::from_millis(100)).await
    }

    /// The refresh task against `engine`, every `refresh`.
    async fn labelled_every(engine: &Engine, refresh: Duration) -> Containers {
        let task = spawn(ContainersConfig {
            enabled: true,
            socket: Some(engine.socket()),
            refresh: Interval(refresh),
            label_prefix: "memweight.".into(),
        });
        let mut snaps = task.subscribe();
        tokio::time::timeout(Duration::from_secs(10), async {
            while snaps.borrow_and_update().containers.is_empty() {
                snaps.changed().await.expect("refresh task runs");
            }
        })
        .await
        .expect("the good answer is read");
        let snap = task.snapshot();
        let web = snap.containers.get(ID).expect("web listed");
        assert_eq!(web.name, "web");
        // Only the labels the daemon reads are kept.
        assert_eq!(
            web.labels.iter().collect::<Vec<_>>(),
            [(&"memweight.weight".to_owned(), &"7".to_owned())]
        );
        task
    }

    /// How long until the labels are gone, at most `within`.
    async fn expired(task: &Containers, within: Duration) -> Duration {
        let started = Instant::now();
        let mut snaps = task.subscribe();
        tokio::time::timeout(within, async {
            while !snaps.borrow_and_update().containers.is_empty() {
                snaps.changed().await.expect("refresh task runs");
            }
        })
        .await
        .unwrap_or_else(|_| panic!("labels still kept after {within:?}"));
        started.elapsed()
    }

    async fn gone_expires(answer: Answer) {
        let engine = Engine::start();
        let task = labelled(&engine).await;
        engine.answer(answer);
        // The next request (asked here; unasked, the resync's) fails, and so does every
        // retry, one refresh apart: STALE_AFTER of 100 ms, and slack for a busy machine.
        task.ask();
        expired(&task, Duration::from_secs(10)).await;
        // An answer that is the API's brings them back.
        engine.answer(good());
        drop(labelled(&engine).await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oversize_engine_answer_expires_labels() {
        let body = format!("[{}]", " ".repeat(MAX_BODY));
        gone_expires(ok(&body)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endless_engine_answer_expires_labels() {
        gone_expires(Answer::Endless).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn non_http_engine_answer_expires_labels() {
        gone_expires(Answer::Bytes(b"SSH-2.0-OpenSSH_9.2p1\r\n".to_vec())).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oversize_http_head_expires_labels() {
        let head = format!(
            "HTTP/1.1 200 OK\r\nX-Junk: {}\r\nContent-Length: 2\r\n\r\n[]",
            "a".repeat(HEAD_LIMIT * 2)
        );
        gone_expires(Answer::Bytes(head.into_bytes())).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn garbage_json_engine_answer_expires_labels() {
        gone_expires(ok("<html>podman is not here</html>")).await;
        gone_expires(ok(&"[".repeat(10_000))).await;
        gone_expires(ok("[] trailing")).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hung_engine_expires_labels_after_the_slow_grace() {
        let engine = Engine::start();
        let task = labelled(&engine).await;
        engine.answer(Answer::Hang);
        task.ask();
        // STALE_AFTER_SLOW refreshes of 100 ms, each waiting 500 ms for the answer.
        let took = expired(&task, Duration::from_secs(30)).await;
        assert!(
            took >= Duration::from_millis(500 * u64::from(STALE_AFTER_SLOW - 1)),
            "{took:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn trickling_engine_answer_expires_labels() {
        let engine = Engine::start();
        let task = labelled(&engine).await;
        engine.answer(Answer::Trickle);
        task.ask();
        expired(&task, Duration::from_secs(30)).await;
    }

    /// Issue 19: a request every refresh kept podman's socket-activated API service (24 MiB)
    /// resident for good. The engine is asked when asked, and at the resync.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn regression_a_poll_every_refresh_kept_the_engine_resident() {
        let engine = Engine::start();
        // Every 10 ms, so that the resync (300 refreshes) comes within the test's 3 s.
        let task = labelled_every(&engine, Duration::from_millis(10)).await;
        let first = engine.requests();
        // A hundred refreshes without a change: no request.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(engine.requests(), first, "asked with nothing changed");
        // Asked: the new list is read at once (well within the resync's 3 s).
        engine.answer(ok("[]"));
        task.ask();
        let took = expired(&task, Duration::from_secs(10)).await;
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert_eq!(engine.requests(), first + 1);
        // Unasked, the resync (300 refreshes of 10 ms) asks again.
        tokio::time::sleep(Duration::from_millis(3500)).await;
        assert!(engine.requests() >= first + 2, "{}", engine.requests());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_failure_says_what_it_was() {
        let engine = Engine::start();
        let socket = engine.socket();
        let list =
            |max_body| list_within(&socket, Duration::from_millis(500), "memweight.", max_body);
        engine.answer(ok("[]"));
        assert_eq!(list(MAX_BODY).await.expect("an empty list"), Vec::new());
        engine.answer(ok(&format!("[{}]", " ".repeat(100))));
        let e = list(64).await.expect_err("larger than the limit");
        assert!(matches!(e, EngineError::TooLarge { limit: 64, .. }), "{e}");
        assert_eq!(e.stale_after(), STALE_AFTER);
        engine.answer(Answer::Endless);
        let e = list(1 << 20).await.expect_err("endless");
        assert!(matches!(e, EngineError::TooLarge { .. }), "{e}");
        engine.answer(Answer::Bytes(b"garbage\r\n\r\n".to_vec()));
        let e = list(MAX_BODY).await.expect_err("not HTTP");
        assert!(matches!(e, EngineError::Http { .. }), "{e}");
        assert_eq!(e.stale_after(), STALE_AFTER);
        engine.answer(ok("{}"));
        let e = list(MAX_BODY).await.expect_err("not a list");
        assert!(matches!(e, EngineError::Body { .. }), "{e}");
        engine.answer(Answer::Hang);
        let e = list(MAX_BODY).await.expect_err("no answer");
        assert!(matches!(e, EngineError::Timeout { .. }), "{e}");
        assert_eq!(e.stale_after(), STALE_AFTER_SLOW);
        assert!(e.hint().contains("10 refreshes"), "{}", e.hint());
    }
}
