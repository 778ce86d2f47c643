use super::write::reclaim_outcome;
use super::*;
use crate::parse::{Limit, MemoryEvents};
use crate::testing::FakeCgroup;
use tempfile::TempDir;

const WEB: &str = "machine.slice/web.scope";

fn tree() -> (TempDir, CgroupFs, FakeCgroup) {
    let dir = tempfile::tempdir().expect("tempdir");
    let web = FakeCgroup::new(dir.path(), WEB);
    let cgroups = CgroupFs::new(dir.path()).expect("root exists");
    (dir, cgroups, web)
}

#[test]
fn new_refuses_missing_root_and_plain_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    assert!(matches!(CgroupFs::new(&missing), Err(Error::Root { .. })));
    let file = dir.path().join("file");
    fs::write(&file, "").expect("write file");
    let err = CgroupFs::new(&file).expect_err("a file is not a root");
    assert!(err.to_string().contains("file"), "names the path: {err}");
}

#[test]
fn check_v2_accepts_memory_and_explains_failures() {
    let (dir, cgroups, _web) = tree();
    assert!(cgroups.check_v2().is_ok());
    assert_eq!(cgroups.root(), dir.path());

    fs::write(dir.path().join("cgroup.controllers"), "cpu io pids\n").expect("write");
    let err = cgroups.check_v2().expect_err("memory missing");
    assert!(matches!(err, Error::NoMemoryController { .. }));
    assert!(
        err.to_string().contains("+memory"),
        "says what to do: {err}"
    );

    fs::remove_file(dir.path().join("cgroup.controllers")).expect("remove");
    let err = cgroups.check_v2().expect_err("not v2");
    assert!(matches!(err, Error::NotCgroupV2 { .. }));
    assert!(
        err.to_string().contains("mount -t cgroup2"),
        "says what to do: {err}"
    );
}

#[test]
fn memory_enabled_for_reads_the_parents_subtree_control() {
    let (dir, cgroups, _web) = tree();
    assert_eq!(cgroups.memory_enabled_for(WEB).ok(), Some(true));
    assert_eq!(cgroups.memory_enabled_for("machine.slice").ok(), Some(true));

    let parent = dir.path().join("machine.slice/cgroup.subtree_control");
    fs::write(&parent, "cpu\n").expect("write");
    assert_eq!(cgroups.memory_enabled_for(WEB).ok(), Some(false));
    match cgroups.require_memory_for(WEB) {
        Err(Error::NoMemoryController { path }) => assert_eq!(path, parent),
        other => panic!("expected NoMemoryController, got {other:?}"),
    }
    assert!(cgroups.require_memory_for("machine.slice").is_ok());
    assert!(matches!(
        cgroups.memory_enabled_for("missing/child"),
        Err(Error::Io { .. })
    ));
    assert!(matches!(
        cgroups.memory_enabled_for("../x"),
        Err(Error::Escape { .. })
    ));
}

#[test]
fn resolve_stays_inside_the_root() {
    let (dir, cgroups, _web) = tree();
    assert_eq!(
        cgroups.resolve("a/b.scope").ok(),
        Some(dir.path().join("a").join("b.scope"))
    );
    for bad in [
        "",
        "/",
        "/etc",
        "..",
        ".",
        "a/..",
        "../a",
        "a/../../b",
        "a//b",
        "a/",
        "./a",
        "a\0b",
    ] {
        assert!(
            matches!(cgroups.resolve(bad), Err(Error::Escape { ref name }) if name == bad),
            "{bad:?} must be refused"
        );
    }
}

#[test]
fn id_changes_when_a_cgroup_is_recreated() {
    let (dir, cgroups, web) = tree();
    let first = cgroups.id(WEB).expect("readable").expect("exists");
    assert_eq!(cgroups.id(WEB).expect("readable"), Some(first), "stable");
    // The old directory is moved aside before the new one is made, so that a file
    // system that reuses inode numbers (ext4; kernfs never does) cannot hand it back.
    let aside = dir.path().join("machine.slice/old");
    fs::rename(web.path(), &aside).expect("move aside");
    assert_eq!(cgroups.id(WEB).expect("gone is not an error"), None);
    let _again = FakeCgroup::new(dir.path(), WEB);
    let second = cgroups.id(WEB).expect("readable").expect("exists");
    assert_ne!(first, second);
    fs::remove_dir_all(aside).expect("remove");
    assert!(cgroups.id("../x").is_err());
}

#[test]
fn walk_lists_cgroup_dirs_sorted_to_depth() {
    let (dir, cgroups, _web) = tree();
    FakeCgroup::new(dir.path(), "machine.slice/db.scope/inner");
    FakeCgroup::new(dir.path(), "system.slice");
    assert_eq!(cgroups.walk(0).ok(), Some(vec![]));
    assert_eq!(
        cgroups.walk(1).ok(),
        Some(vec!["machine.slice".to_owned(), "system.slice".to_owned()])
    );
    assert_eq!(
        cgroups.walk(2).ok(),
        Some(vec![
            "machine.slice".to_owned(),
            "machine.slice/db.scope".to_owned(),
            "machine.slice/web.scope".to_owned(),
            "system.slice".to_owned(),
        ])
    );
    let deep = cgroups.walk(10).expect("walk");
    assert!(deep.contains(&"machine.slice/db.scope/inner".to_owned()));
    assert!(
        !deep.iter().any(|p| p.contains("memory.")),
        "files are not cgroups"
    );
}

#[test]
fn walk_reports_a_vanished_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("cg");
    fs::create_dir(&root).expect("mkdir");
    let cgroups = CgroupFs::new(&root).expect("root exists");
    fs::remove_dir(&root).expect("rmdir");
    assert!(matches!(cgroups.walk(1), Err(Error::Io { .. })));
}

#[test]
fn sample_reads_every_file() {
    let (_dir, cgroups, web) = tree();
    web.set_current(300 << 20);
    web.set_stat(200 << 20, 90 << 20);
    web.set_pressure(12.5, 3.25);
    web.set_events(MemoryEvents {
        high: 7,
        oom_kill: 1,
        ..MemoryEvents::default()
    });
    web.set_swap_current(5 << 20);
    web.set_swap_max(Limit::Bytes(1 << 30));
    web.set_high(Limit::Bytes(400 << 20));
    web.set_low(Limit::Bytes(100 << 20));
    web.set_min(Limit::Max);
    web.set_max(Limit::Bytes(512 << 20));

    let sample = cgroups.sample(WEB).expect("readable").expect("present");
    assert_eq!(sample.current, 300 << 20);
    assert_eq!(sample.stat.anon, 200 << 20);
    assert_eq!(sample.stat.file, 90 << 20);
    let psi = sample.pressure.expect("pressure present");
    assert!((psi.some.avg10 - 12.5).abs() < 1e-9);
    assert!((psi.full.expect("full line").avg10 - 3.25).abs() < 1e-9);
    assert_eq!(sample.events.high, 7);
    assert_eq!(sample.events.oom_kill, 1);
    assert_eq!(sample.swap_current, Some(5 << 20));
    assert_eq!(sample.swap_max, Some(Limit::Bytes(1 << 30)));
    assert_eq!(sample.high, Limit::Bytes(400 << 20));
    assert_eq!(sample.low, Limit::Bytes(100 << 20));
    assert_eq!(sample.min, Limit::Max);
    assert_eq!(sample.max, Limit::Bytes(512 << 20));
}

#[test]
fn sample_of_fresh_cgroup_reads_max_limits() {
    let (_dir, cgroups, _web) = tree();
    let sample = cgroups.sample(WEB).expect("readable").expect("present");
    assert_eq!(sample.high, Limit::Max);
    assert_eq!(sample.max, Limit::Max);
    assert_eq!(sample.swap_max, Some(Limit::Max));
    assert_eq!(sample.low, Limit::Bytes(0));
}

#[test]
fn sample_treats_optional_files_as_optional() {
    let (_dir, cgroups, web) = tree();
    for name in ["memory.pressure", "memory.swap.current", "memory.swap.max"] {
        web.remove_file(name);
    }
    let sample = cgroups.sample(WEB).expect("readable").expect("present");
    assert_eq!(sample.pressure, None);
    assert_eq!(sample.swap_current, None);
    assert_eq!(sample.swap_max, None);
}

#[test]
fn sample_of_removed_or_unknown_cgroup_is_none() {
    let (_dir, cgroups, web) = tree();
    web.remove();
    assert_eq!(cgroups.sample(WEB).ok(), Some(None));
    assert_eq!(cgroups.sample("never/was").ok(), Some(None));
}

#[test]
fn current_alone_is_read_and_a_removed_cgroup_is_none() {
    let (_dir, cgroups, web) = tree();
    web.set_current(123 << 20);
    assert_eq!(cgroups.current(WEB).ok(), Some(Some(123 << 20)));
    web.write_file("memory.current", "max\n");
    assert!(cgroups.current(WEB).is_err(), "malformed");
    web.remove();
    assert_eq!(cgroups.current(WEB).ok(), Some(None));
}

#[test]
fn sample_with_required_file_missing_is_gone() {
    // Removal racing the read: the directory is half torn down.
    let (_dir, cgroups, web) = tree();
    web.remove_file("memory.max");
    assert_eq!(cgroups.sample(WEB).ok(), Some(None));
}

#[test]
fn sample_names_the_malformed_file() {
    for (name, text) in [
        ("memory.current", "max\n"),
        ("memory.stat", "anon\n"),
        ("memory.events", "oom x\n"),
        ("memory.pressure", "some avg10=1\n"),
        ("memory.swap.current", "-1\n"),
        ("memory.high", "\n"),
        ("memory.low", "1 2\n"),
    ] {
        let (_dir, cgroups, web) = tree();
        web.write_file(name, text);
        match cgroups.sample(WEB) {
            Err(Error::Parse { path, .. }) => assert!(path.ends_with(name), "{path:?}"),
            other => panic!("{name} = {text:?}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn sample_reports_io_errors_other_than_removal() {
    let (_dir, cgroups, web) = tree();
    web.remove_file("memory.stat");
    fs::create_dir(web.path().join("memory.stat")).expect("mkdir");
    match cgroups.sample(WEB) {
        Err(err @ Error::Io { .. }) => assert!(err.to_string().contains("memory.stat")),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn write_high_and_low_write_the_value() {
    let (_dir, cgroups, web) = tree();
    assert!(matches!(
        cgroups.write_high(WEB, Limit::Bytes(123_456)),
        Ok(Written::Done)
    ));
    assert_eq!(web.read_high(), "123456");
    // A shorter value replaces a longer one entirely.
    assert!(matches!(
        cgroups.write_high(WEB, Limit::Max),
        Ok(Written::Done)
    ));
    assert_eq!(web.read_high(), "max");
    assert!(matches!(
        cgroups.write_low(WEB, Limit::Bytes(1 << 20)),
        Ok(Written::Done)
    ));
    assert_eq!(web.read_low(), "1048576");
    assert!(matches!(
        cgroups.write_low(WEB, Limit::Max),
        Ok(Written::Done)
    ));
    assert_eq!(web.read_low(), "max");
    assert_eq!(web.read_max(), "max", "memory.max is never touched");
}

#[test]
fn write_into_removed_cgroup_is_gone() {
    let (_dir, cgroups, web) = tree();
    web.remove();
    assert!(matches!(
        cgroups.write_high(WEB, Limit::Max),
        Ok(Written::Gone)
    ));
    assert!(matches!(
        cgroups.write_low(WEB, Limit::Bytes(0)),
        Ok(Written::Gone)
    ));
    assert!(!web.path().exists(), "nothing was created");
}

#[test]
fn write_never_creates_a_missing_control_file() {
    let (_dir, cgroups, web) = tree();
    web.remove_file("memory.high");
    assert!(matches!(
        cgroups.write_high(WEB, Limit::Max),
        Ok(Written::Gone)
    ));
    assert!(!web.path().join("memory.high").exists());
}

#[test]
fn write_error_keeps_path_and_data() {
    let (_dir, cgroups, web) = tree();
    web.remove_file("memory.high");
    fs::create_dir(web.path().join("memory.high")).expect("mkdir");
    match cgroups.write_high(WEB, Limit::Bytes(4096)) {
        Err(Error::Write { path, data, .. }) => {
            assert!(path.ends_with("memory.high"));
            assert_eq!(data, "4096");
        }
        other => panic!("expected a write error, got {other:?}"),
    }
    assert!(matches!(
        cgroups.write_high("../etc", Limit::Max),
        Err(Error::Escape { .. })
    ));
}

#[test]
fn reclaim_writes_the_request() {
    let (_dir, cgroups, web) = tree();
    assert_eq!(cgroups.reclaim(WEB, 50 << 20).ok(), Some(Reclaimed::Done));
    assert_eq!(web.take_reclaim(), Some(50 << 20));
    assert_eq!(web.take_reclaim(), None);
}

#[test]
fn reclaim_distinguishes_old_kernel_from_removed_cgroup() {
    let (_dir, cgroups, web) = tree();
    web.remove_file("memory.reclaim");
    assert_eq!(cgroups.reclaim(WEB, 1).ok(), Some(Reclaimed::Unsupported));
    assert!(!web.path().join("memory.reclaim").exists());
    web.remove();
    assert_eq!(cgroups.reclaim(WEB, 1).ok(), Some(Reclaimed::Gone));
}

#[test]
fn reclaim_error_keeps_path_and_data() {
    let (_dir, cgroups, web) = tree();
    web.remove_file("memory.reclaim");
    fs::create_dir(web.path().join("memory.reclaim")).expect("mkdir");
    match cgroups.reclaim(WEB, 77) {
        Err(Error::Write { path, data, .. }) => {
            assert!(path.ends_with("memory.reclaim"));
            assert_eq!(data, "77");
        }
        other => panic!("expected a write error, got {other:?}"),
    }
}

#[test]
fn reclaim_outcome_maps_kernel_errnos() {
    let errno = io::Error::from_raw_os_error;
    assert_eq!(
        reclaim_outcome(&errno(libc::EAGAIN)),
        Some(Reclaimed::Partial)
    );
    assert_eq!(
        reclaim_outcome(&errno(libc::EINVAL)),
        Some(Reclaimed::Unsupported)
    );
    assert_eq!(reclaim_outcome(&errno(libc::ENODEV)), Some(Reclaimed::Gone));
    assert_eq!(reclaim_outcome(&errno(libc::EACCES)), None);
    assert_eq!(
        reclaim_outcome(&errno(libc::ENOENT)),
        None,
        "needs a look at the dir"
    );
}

#[test]
fn sample_reads_files_larger_than_the_buffer() {
    let (_dir, cgroups, web) = tree();
    let padding: String = (0..2000).map(|i| format!("future_key_{i} {i}\n")).collect();
    web.write_file("memory.stat", &format!("{padding}anon 42\n"));
    let sample = cgroups.sample(WEB).expect("readable").expect("present");
    assert_eq!(sample.stat.anon, 42);
}

#[test]
fn sample_rejects_non_utf8() {
    let (_dir, cgroups, web) = tree();
    fs::write(web.path().join("memory.current"), b"\xff\n").expect("write");
    assert!(matches!(cgroups.sample(WEB), Err(Error::Parse { .. })));
}

#[test]
fn gone_means_enoent_or_enodev_only() {
    let errno = io::Error::from_raw_os_error;
    assert!(is_gone(&errno(libc::ENOENT)));
    assert!(is_gone(&errno(libc::ENODEV)));
    assert!(!is_gone(&errno(libc::EACCES)));
    assert!(!is_gone(&errno(libc::EBUSY)));
    assert!(!is_gone(&io::Error::other("no errno")));
}
