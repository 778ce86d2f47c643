//! Sets `MEMWEIGHT_GIT_COMMIT` for `memweight_build_info`: the environment's value when given
//! (a package build from a tarball), else `git rev-parse --short=12 HEAD`, else `unknown`.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Watches `path` when it exists (a missing one would rerun this script on every build).
fn watch(path: &std::path::Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=MEMWEIGHT_GIT_COMMIT");
    let commit = std::env::var("MEMWEIGHT_GIT_COMMIT")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            // Rebuild when HEAD moves: the HEAD file and the branch it points at.
            if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
                watch(&PathBuf::from(&dir).join("HEAD"));
            }
            if let (Some(common), Some(branch)) = (
                git(&["rev-parse", "--git-common-dir"]),
                git(&["symbolic-ref", "-q", "HEAD"]),
            ) {
                let common = PathBuf::from(common);
                watch(&common.join(&branch));
                watch(&common.join("packed-refs"));
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=MEMWEIGHT_GIT_COMMIT={commit}");
}
