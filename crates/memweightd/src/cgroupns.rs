//! The daemon's own cgroup when it runs in a container (a Kubernetes DaemonSet, `podman kube
//! play`): there it has a cgroup namespace of its own, so `/proc/self/cgroup` says `0::/`, and
//! the host's tree it manages (a hostPath volume) holds its own container's scope, which a
//! rule's glob (`kubepods.slice/…/cri-containerd-*.scope`,
//! `machine.slice/machine-libpod_pod_*.slice/libpod-*.scope`) would match: the daemon would
//! throttle itself.
//!
//! [`find_own`] finds it in the host's tree the one way that works from inside both
//! namespaces: `cgroup.procs` lists pids as the reader's pid namespace sees them (a process
//! outside it is not listed), so the one cgroup whose `cgroup.procs` holds the daemon's own
//! pid (`getpid()`, in its namespace) is its own. Once, at start, bounded by
//! [`MAX_DEPTH`] levels and [`MAX_DIRS`] directories.

use std::collections::VecDeque;
use std::path::Path;

/// How deep the search goes (Kubernetes' deepest container scope is at depth 4).
pub const MAX_DEPTH: usize = 8;
/// The most directories looked at.
pub const MAX_DIRS: usize = 100_000;

/// Whether `/proc/self/cgroup`'s text puts the process at the root of its cgroup namespace
/// (`0::/`): in a container with a cgroup namespace of its own (or, outside one, in the root
/// cgroup, where the search finds the root and forbids nothing).
#[must_use]
pub fn at_namespace_root(proc_self_cgroup: &str) -> bool {
    proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .is_some_and(|p| p.trim() == "/")
}

/// The path under `root` (relative, `/`-separated; empty for `root` itself) of the cgroup whose
/// `cgroup.procs` lists `pid`, breadth first, at most [`MAX_DEPTH`] deep and [`MAX_DIRS`]
/// directories; `None` if it is not found within them or `root` cannot be read.
#[must_use]
pub fn find_own(root: &Path, pid: u32) -> Option<String> {
    let pid = pid.to_string();
    let mut queue = VecDeque::from([(String::new(), 0_usize)]);
    let mut seen = 0_usize;
    while let Some((rel, depth)) = queue.pop_front() {
        seen += 1;
        if seen > MAX_DIRS {
            return None;
        }
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        if std::fs::read_to_string(dir.join("cgroup.procs"))
            .is_ok_and(|procs| procs.lines().any(|l| l.trim() == pid))
        {
            return Some(rel);
        }
        if depth >= MAX_DEPTH {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut children: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .collect();
        children.sort();
        for c in children {
            let child = if rel.is_empty() {
                c
            } else {
                format!("{rel}/{c}")
            };
            queue.push_back((child, depth + 1));
        }
    }
    None
}

/// `rel` and each of its ancestors (`a/b/c` → `a`, `a/b`, `a/b/c`).
#[must_use]
pub fn with_ancestors(rel: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut prefix = String::new();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        out.push(prefix.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_namespace_root_line_counts() {
        assert!(at_namespace_root("0::/\n"));
        assert!(at_namespace_root("1:name=systemd:/x\n0::/\n"));
        assert!(!at_namespace_root("0::/system.slice/memweightd.service\n"));
        assert!(!at_namespace_root("1:memory:/\n"));
        assert!(!at_namespace_root(""));
    }

    /// The regression this module exists for: in its pod, the daemon's `/proc/self/cgroup` says
    /// `0::/` and its own scope sits among the application pods' scopes under the host's root.
    #[test]
    fn the_daemons_own_pod_scope_is_found_by_its_pid() {
        let root = tempfile::tempdir().expect("tempdir");
        let pod = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda.slice";
        for (scope, procs) in [
            (format!("{pod}/cri-containerd-1.scope"), "0\n"),
            (format!("{pod}/cri-containerd-2.scope"), "1\n7\n"),
            ("system.slice/x.service".to_owned(), ""),
        ] {
            let dir = root.path().join(&scope);
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join("cgroup.procs"), procs).expect("write");
        }
        std::fs::write(root.path().join("cgroup.procs"), "").expect("write");
        assert_eq!(
            find_own(root.path(), 7).as_deref(),
            Some(format!("{pod}/cri-containerd-2.scope").as_str())
        );
        assert_eq!(find_own(root.path(), 8), None);
        assert_eq!(find_own(&root.path().join("missing"), 7), None);
        assert_eq!(
            with_ancestors("a/b/c"),
            ["a".to_owned(), "a/b".to_owned(), "a/b/c".to_owned()]
        );
        assert!(with_ancestors("").is_empty());
    }
}
