//! Host-wide memory state from procfs (`meminfo`, `pressure/memory`, `zoneinfo`) under an
//! injected root, and from sysfs which LRU the kernel reclaims with ([`multi_gen_lru`]).

use std::fs;
use std::path::{Path, PathBuf};

use procfs::FromRead;

use crate::Error;
use crate::cgroup::Reader;
use crate::parse::{self, ParseError, Psi, Vmstat, Watermarks};

/// A procfs mount given by the caller: normally `/proc`, a tempdir in tests.
#[derive(Debug, Clone)]
pub struct ProcFs {
    root: PathBuf,
}

/// Host memory, in bytes, and host memory pressure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostSample {
    /// `MemTotal`.
    pub mem_total: u64,
    /// `MemAvailable`: the kernel's estimate of memory available without swapping.
    pub mem_available: u64,
    /// `MemFree`.
    pub mem_free: u64,
    /// `SwapTotal`.
    pub swap_total: u64,
    /// `SwapFree`.
    pub swap_free: u64,
    /// `pressure/memory`; `None` if the kernel has no PSI or it is disabled (`psi=0`).
    pub psi: Option<Psi>,
    /// The kernel's global reclaim counters from `vmstat`; `None` when the file is missing.
    pub vmstat: Option<Vmstat>,
    /// The kernel reclaims with the multi-gen LRU. Not in procfs: [`ProcFs::host`] and
    /// [`meminfo`] leave it `true`, the caller sets it from [`multi_gen_lru`] (the law counts
    /// free memory more freely only where the classic LRU's reclaim honours `memory.low`).
    pub multi_gen_lru: bool,
}

/// Largest `kB` value whose byte count still fits in a `u64`.
const MAX_KIB: u64 = u64::MAX / 1024;

/// Checks that `text` has the shape of `/proc/meminfo` (`Key: value [kB]` lines,
/// ASCII, values that fit in `u64` bytes) before it is handed to `procfs`.
///
/// procfs 0.18's `Meminfo` parser slices the key at `len - 1` bytes (panics if the key
/// ends in a multi-byte character) and multiplies by 1024 unchecked (panics in debug
/// builds on huge values); this check makes both impossible.
fn check_meminfo_shape(text: &str) -> Result<(), ParseError> {
    for (index, line) in text.lines().enumerate() {
        let bad = || ParseError::BadLine {
            line: index + 1,
            expected: "Key: value [kB], value below 2^54",
            text: line.chars().take(64).collect(),
        };
        let mut tokens = line.split_ascii_whitespace();
        let Some(key) = tokens.next() else {
            continue;
        };
        let value = tokens.next().ok_or_else(bad)?;
        let unit = tokens.next();
        let key_ok = key.len() > 1 && key.is_ascii() && key.ends_with(':');
        let unit_ok = matches!(unit, None | Some("kB"));
        let value_ok = !value.is_empty()
            && value.bytes().all(|b| b.is_ascii_digit())
            && value.parse::<u64>().is_ok_and(|v| v <= MAX_KIB);
        if !key_ok || !unit_ok || !value_ok || tokens.next().is_some() {
            return Err(bad());
        }
    }
    Ok(())
}

impl ProcFs {
    /// A procfs rooted at `root` (normally `/proc`). Nothing is checked until
    /// [`ProcFs::host`] reads.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcFs { root: root.into() }
    }

    /// The procfs root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path and text of the procfs file `name`.
    fn read(&self, name: &str) -> Result<(PathBuf, String), Error> {
        let path = self.root.join(name);
        match fs::read_to_string(&path) {
            Ok(text) => Ok((path, text)),
            Err(source) => Err(Error::Io { path, source }),
        }
    }

    /// Reads `zoneinfo`: the free-memory watermarks summed over all zones, in **bytes**
    /// (the file counts pages of the running kernel's page size).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if `zoneinfo` cannot be read, [`Error::Parse`] if it is malformed.
    pub fn watermarks(&self) -> Result<Watermarks, Error> {
        let (path, text) = self.read("zoneinfo")?;
        let pages = parse::watermarks(&text).map_err(|e| Error::Parse {
            path,
            what: e.to_string(),
        })?;
        let page = procfs::page_size();
        Ok(Watermarks {
            min: pages.min.saturating_mul(page),
            low: pages.low.saturating_mul(page),
            high: pages.high.saturating_mul(page),
            managed: pages.managed.saturating_mul(page),
        })
    }

    /// Reads `meminfo`, `pressure/memory` and `vmstat`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if `meminfo` cannot be read, [`Error::Parse`] if it is malformed
    /// or lacks `MemAvailable` (kernels before 3.14), and the same for a present but
    /// malformed `pressure/memory` or `vmstat`.
    pub fn host(&self) -> Result<HostSample, Error> {
        let (path, text) = self.read("meminfo")?;
        let memory = meminfo(&text).map_err(|what| Error::Parse {
            path: path.clone(),
            what,
        })?;
        let psi = Reader::new(self.root.join("pressure")).read_psi("memory")?;
        let vmstat = match self.read("vmstat") {
            Ok((path, text)) => Some(parse::vmstat(&text).map_err(|e| Error::Parse {
                path,
                what: e.to_string(),
            })?),
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(HostSample {
            psi,
            vmstat,
            ..memory
        })
    }
}

/// Whether the kernel reclaims with the multi-gen LRU: `/sys/kernel/mm/lru_gen/enabled` under
/// `sys_root` (normally `/sys`). `Ok(false)` where the file does not exist but
/// `kernel/mm` does: a kernel built without it has only the classic LRU.
///
/// # Errors
///
/// [`Error::Io`] if the file cannot be read (or sysfs is not there: a container without it
/// cannot tell), [`Error::Parse`] if it is malformed.
pub fn multi_gen_lru(sys_root: &Path) -> Result<bool, Error> {
    let mm = sys_root.join("kernel/mm");
    let path = mm.join("lru_gen/enabled");
    match fs::read_to_string(&path) {
        Ok(text) => parse::lru_gen(&text).map_err(|e| Error::Parse {
            path,
            what: e.to_string(),
        }),
        Err(source) if source.kind() == std::io::ErrorKind::NotFound && mm.is_dir() => Ok(false),
        Err(source) => Err(Error::Io { path, source }),
    }
}

/// Parses the text of `/proc/meminfo` into a [`HostSample`] without PSI (`psi: None`).
/// Pure, and never panics on any input.
///
/// # Errors
///
/// A message when the text is not shaped like meminfo or lacks `MemAvailable` (kernels
/// before 3.14).
pub fn meminfo(text: &str) -> Result<HostSample, String> {
    check_meminfo_shape(text).map_err(|err| err.to_string())?;
    let meminfo = procfs::Meminfo::from_read(text.as_bytes()).map_err(|err| err.to_string())?;
    let mem_available = meminfo.mem_available.ok_or_else(|| {
        "MemAvailable is missing (kernels before 3.14 are not supported)".to_owned()
    })?;
    Ok(HostSample {
        mem_total: meminfo.mem_total,
        mem_available,
        mem_free: meminfo.mem_free,
        swap_total: meminfo.swap_total,
        swap_free: meminfo.swap_free,
        psi: None,
        vmstat: None,
        multi_gen_lru: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeMeminfo, FakeProc};

    fn fake() -> (tempfile::TempDir, FakeProc, ProcFs) {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeProc::new(dir.path());
        let proc = ProcFs::new(dir.path());
        (dir, fake, proc)
    }

    #[test]
    fn host_reads_meminfo_in_bytes_and_psi() {
        let (dir, fake, proc) = fake();
        assert_eq!(proc.root(), dir.path());
        fake.set_meminfo(FakeMeminfo {
            mem_total: 24 << 30,
            mem_free: 1 << 30,
            mem_available: 3 << 30,
            swap_total: 2 << 30,
            swap_free: 1 << 29,
        });
        fake.set_psi(42.5, 10.0);
        let host = proc.host().expect("readable");
        assert_eq!(host.mem_total, 24 << 30);
        assert_eq!(host.mem_free, 1 << 30);
        assert_eq!(host.mem_available, 3 << 30);
        assert_eq!(host.swap_total, 2 << 30);
        assert_eq!(host.swap_free, 1 << 29);
        let psi = host.psi.expect("PSI present");
        assert!((psi.some.avg10 - 42.5).abs() < 1e-9);
        assert!((psi.full.expect("full line").avg10 - 10.0).abs() < 1e-9);
    }

    #[test]
    fn host_reads_the_kernels_global_reclaim_from_vmstat() {
        let (dir, fake, proc) = fake();
        fake.set_reclaim_scanned(1000);
        let v = proc
            .host()
            .expect("readable")
            .vmstat
            .expect("vmstat present");
        assert_eq!(v.scanned(), 1000);
        std::fs::write(dir.path().join("vmstat"), "pgscan_kswapd x\n").expect("write");
        assert!(matches!(proc.host(), Err(Error::Parse { .. })));
        std::fs::remove_file(dir.path().join("vmstat")).expect("remove");
        assert_eq!(proc.host().expect("readable").vmstat, None, "missing: None");
    }

    #[test]
    fn host_without_psi_has_none() {
        let (_dir, fake, proc) = fake();
        fake.remove_psi();
        assert_eq!(proc.host().expect("readable").psi, None);
    }

    #[test]
    fn host_names_malformed_psi() {
        let (_dir, fake, proc) = fake();
        fake.write_psi("some avg10=x\n");
        match proc.host() {
            Err(Error::Parse { path, .. }) => assert!(path.ends_with("pressure/memory")),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn host_without_meminfo_is_an_io_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let proc = ProcFs::new(dir.path());
        match proc.host() {
            Err(Error::Io { path, .. }) => assert!(path.ends_with("meminfo")),
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }

    #[test]
    fn host_requires_mem_available() {
        let (_dir, fake, proc) = fake();
        let text = fake_meminfo_text(&fake);
        let without: String = text
            .lines()
            .filter(|l| !l.starts_with("MemAvailable:"))
            .map(|l| format!("{l}\n"))
            .collect();
        fake.write_meminfo(&without);
        let err = proc.host().expect_err("MemAvailable missing");
        assert!(err.to_string().contains("MemAvailable"), "{err}");
    }

    #[test]
    fn host_rejects_malformed_meminfo() {
        let (_dir, fake, proc) = fake();
        for bad in [
            "",
            "MemTotal:\n",
            "MemTotal: x kB\n",
            "MemTotal 5 kB\n",
            "MemTotal: 5 MB\n",
        ] {
            fake.write_meminfo(bad);
            assert!(
                matches!(proc.host(), Err(Error::Parse { .. })),
                "{bad:?} must be a parse error"
            );
        }
    }

    /// procfs 0.18 slices a key at `len - 1` bytes and multiplies by 1024 unchecked:
    /// a key ending in a multi-byte character and a value above 2^54 kB panic there
    /// (checked against procfs-core 0.18.0 in a debug build). They, and other
    /// non-ASCII keys, must be refused before they reach it.
    #[test]
    fn regression_procfs_meminfo_panics_are_unreachable() {
        let (_dir, fake, proc) = fake();
        let good = fake_meminfo_text(&fake);
        for poison in [
            "é 5 kB\n",
            "Bad\u{e9}: 5 kB\n",
            "Huge: 18446744073709551615 kB\n",
            "Big: 18014398509481984 kB\n",
        ] {
            fake.write_meminfo(&format!("{good}{poison}"));
            assert!(
                matches!(proc.host(), Err(Error::Parse { .. })),
                "{poison:?} must be a parse error"
            );
        }
        assert_eq!(check_meminfo_shape(&format!("Big: {MAX_KIB} kB\n")), Ok(()));
    }

    #[test]
    fn multi_gen_lru_reads_sysfs_a_kernel_without_it_is_classic_no_sysfs_unknown() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(
            matches!(multi_gen_lru(dir.path()), Err(Error::Io { .. })),
            "no sysfs: unknown"
        );
        fs::create_dir_all(dir.path().join("kernel/mm")).expect("mkdir");
        assert!(!multi_gen_lru(dir.path()).expect("built without it: classic"));
        let file = dir.path().join("kernel/mm/lru_gen/enabled");
        fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        fs::write(&file, "0x0007\n").expect("write");
        assert!(multi_gen_lru(dir.path()).expect("on"));
        fs::write(&file, "0x0000\n").expect("write");
        assert!(!multi_gen_lru(dir.path()).expect("off"));
        fs::write(&file, "yes\n").expect("write");
        assert!(matches!(
            multi_gen_lru(dir.path()),
            Err(Error::Parse { .. })
        ));
    }

    fn fake_meminfo_text(fake: &FakeProc) -> String {
        fs::read_to_string(fake.path().join("meminfo")).expect("fake meminfo readable")
    }
}
