//! Cgroup paths as users and files give them: the one rule for what names a cgroup below the
//! root.
//!
//! The daemon's configuration (`[[cgroup]]` `path` and `glob`), the control protocol
//! (`memweightctl set lab/c1`), the state file and the lab's scenario names all go through
//! here, so a path one of them accepts is never refused by another.
//!
//! * [`check`]: a path in the daemon's own form, as the state file stores it: `a/b.scope`,
//!   nothing trimmed; no empty, `.` or `..` component (so no leading, trailing or doubled
//!   `/`), no NUL. This is exactly what `memweight_cgroupfs::CgroupFs::resolve` joins onto
//!   the root.
//! * [`normalize`]: a path a user typed: surrounding whitespace and slashes are dropped, it may
//!   not contain a newline, then [`check`].
//! * [`normalize_under`]: as [`normalize`], but an absolute path is taken as a file-system path
//!   and must lie below the cgroup root (`/sys/fs/cgroup/lab/c1` → `lab/c1`).
//! * [`ancestors`]: the proper ancestors of a path in the daemon's form, below the root.
//!
//! ```
//! use memweight_proto::cgroup_path::{normalize, normalize_under};
//!
//! assert_eq!(normalize(" /lab/c1/ ").as_deref(), Ok("lab/c1"));
//! assert!(normalize("lab/../../etc").is_err());
//! assert_eq!(normalize_under("/sys/fs/cgroup/lab/c1", "/sys/fs/cgroup").as_deref(), Ok("lab/c1"));
//! ```

use std::fmt;

/// A cgroup path that was refused; displays as `cgroup path "…" <why>`, quoting the path as
/// the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cgroup path {path:?} {why}")]
pub struct PathError {
    /// The path as given.
    pub path: String,
    /// What is wrong with it.
    pub why: Why,
}

/// What is wrong with a cgroup path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// Empty, or only slashes: the root itself.
    Root,
    /// A `..` component.
    Parent,
    /// An empty or `.` component.
    EmptyComponent,
    /// A NUL, or (in a typed path) a newline.
    Control,
    /// An absolute path not below the cgroup root.
    OutsideRoot {
        /// The root, without a trailing slash.
        root: String,
    },
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Root => f.write_str(
                "names the cgroup root itself; name a cgroup below it, e.g. \
                 system.slice/foo.service",
            ),
            Why::Parent => {
                f.write_str("contains `..`; cgroup paths must stay inside the cgroup root")
            }
            Why::EmptyComponent => {
                f.write_str("has an empty or `.` component; write it like lab/c1")
            }
            Why::Control => f.write_str("contains a NUL or newline character"),
            Why::OutsideRoot { root } => write!(
                f,
                "is outside the cgroup root {root}; give a path relative to it, e.g. lab/c1"
            ),
        }
    }
}

fn refuse(path: &str, why: Why) -> PathError {
    PathError {
        path: path.to_owned(),
        why,
    }
}

/// Checks a path in the daemon's form (relative to the root, nothing to trim): not empty, no
/// empty, `.` or `..` component, no NUL.
///
/// # Errors
///
/// [`PathError`] saying which rule `path` breaks.
pub fn check(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(refuse(path, Why::Root));
    }
    if path.split('/').any(|c| c == "..") {
        return Err(refuse(path, Why::Parent));
    }
    if path.split('/').any(|c| c.is_empty() || c == ".") {
        return Err(refuse(path, Why::EmptyComponent));
    }
    if path.contains('\0') {
        return Err(refuse(path, Why::Control));
    }
    Ok(())
}

/// Turns a typed path into the daemon's form: surrounding whitespace and slashes dropped
/// (`/lab/c1/` → `lab/c1`), then [`check`]; a newline is refused as well.
///
/// # Errors
///
/// [`PathError`] quoting `path` as given.
pub fn normalize(path: &str) -> Result<String, PathError> {
    let t = path.trim().trim_matches('/');
    check(t).map_err(|e| refuse(path, e.why))?;
    if t.contains('\n') {
        return Err(refuse(path, Why::Control));
    }
    Ok(t.to_owned())
}

/// As [`normalize`], but a path starting with `/` is a file-system path: it must lie below
/// `root` (e.g. `/sys/fs/cgroup/lab/c1` with root `/sys/fs/cgroup`) and is made relative to it.
///
/// # Errors
///
/// [`PathError`] quoting `path` as given.
pub fn normalize_under(path: &str, root: &str) -> Result<String, PathError> {
    let trimmed = path.trim();
    if !trimmed.starts_with('/') {
        return normalize(path);
    }
    let root = root.trim_end_matches('/');
    match trimmed.strip_prefix(root) {
        Some(rest) if rest.starts_with('/') || (root.is_empty() && !rest.is_empty()) => {
            normalize(rest).map_err(|e| refuse(path, e.why))
        }
        _ => Err(refuse(
            path,
            Why::OutsideRoot {
                root: root.to_owned(),
            },
        )),
    }
}

/// The proper ancestors of `path` (the daemon's form, see [`check`]) below the root, nearest the
/// root first: `a/b/c` → `a`, `a/b`.
pub fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

#[cfg(test)]
mod tests {
    #[test]
    fn ancestors_are_the_prefixes_below_the_root() {
        let got: Vec<&str> = super::ancestors("machine.slice/a.slice/libpod-1.scope").collect();
        assert_eq!(got, ["machine.slice", "machine.slice/a.slice"]);
        assert_eq!(super::ancestors("top").count(), 0);
    }

    use super::*;

    #[test]
    fn the_daemons_form_is_checked_as_is() {
        for good in [
            "a",
            "a/b.scope",
            " a",
            "a\nb",
            "machine.slice/libpod-1.scope",
        ] {
            assert_eq!(check(good), Ok(()), "{good:?}");
        }
        for (bad, why) in [
            ("", Why::Root),
            ("/", Why::EmptyComponent),
            ("/etc", Why::EmptyComponent),
            ("a/", Why::EmptyComponent),
            ("a//b", Why::EmptyComponent),
            ("./a", Why::EmptyComponent),
            ("..", Why::Parent),
            ("a/..", Why::Parent),
            ("a/../../b", Why::Parent),
            ("a\0b", Why::Control),
        ] {
            assert_eq!(check(bad).map_err(|e| e.why), Err(why), "{bad:?}");
        }
    }

    #[test]
    fn typed_paths_are_trimmed_then_checked() {
        assert_eq!(normalize("lab/c1").as_deref(), Ok("lab/c1"));
        assert_eq!(normalize(" /lab/c1/ ").as_deref(), Ok("lab/c1"));
        assert_eq!(normalize("lab/c1\n").as_deref(), Ok("lab/c1"));
        assert_eq!(
            normalize("machine.slice/libpod-*.scope").as_deref(),
            Ok("machine.slice/libpod-*.scope")
        );
        for (bad, why) in [
            ("", Why::Root),
            (" / ", Why::Root),
            ("lab/../../etc", Why::Parent),
            ("lab//c1", Why::EmptyComponent),
            ("lab/./c1", Why::EmptyComponent),
            ("lab/c\n1", Why::Control),
            ("lab/c\0x", Why::Control),
        ] {
            let e = normalize(bad).expect_err(bad);
            assert_eq!(e.why, why, "{bad:?}");
            assert_eq!(e.path, bad, "the user's spelling is quoted");
        }
    }

    #[test]
    fn absolute_paths_must_lie_below_the_root() {
        let root = "/sys/fs/cgroup";
        assert_eq!(
            normalize_under("/sys/fs/cgroup/lab/c1", root).as_deref(),
            Ok("lab/c1")
        );
        assert_eq!(
            normalize_under("/sys/fs/cgroup/lab/c1", "/sys/fs/cgroup/").as_deref(),
            Ok("lab/c1")
        );
        assert_eq!(normalize_under("/lab/c1", "/").as_deref(), Ok("lab/c1"));
        let e = normalize_under("/sys/fs/cgroup/../x", root).expect_err("..");
        assert_eq!(
            e.to_string(),
            "cgroup path \"/sys/fs/cgroup/../x\" contains `..`; cgroup paths must stay inside \
             the cgroup root"
        );
        for bad in ["/etc/passwd", "/sys/fs/cgroupX/a", "/sys/fs/cgroup"] {
            assert!(
                matches!(
                    normalize_under(bad, root),
                    Err(PathError {
                        why: Why::OutsideRoot { .. },
                        ..
                    })
                ),
                "{bad}"
            );
        }
    }
}
