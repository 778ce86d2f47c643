//! Fake cgroup v2 and procfs trees for tests (cargo feature `testing`).
//!
//! The fakes are plain directories and regular files under a root the test owns
//! (normally a `tempfile::TempDir`), laid out and formatted like the kernel's, so the
//! real [`crate::CgroupFs`] and [`crate::ProcFs`] read and write them unchanged:
//!
//! ```
//! # #[cfg(feature = "testing")] {
//! use memweight_cgroupfs::testing::FakeCgroup;
//! use memweight_cgroupfs::{CgroupFs, Limit, Written};
//!
//! let root = tempfile::tempdir().expect("tempdir");
//! let web = FakeCgroup::new(root.path(), "machine.slice/web.scope");
//! web.set_current(300 << 20);
//! let cgroups = CgroupFs::new(root.path()).expect("root exists");
//! let sample = cgroups.sample("machine.slice/web.scope").expect("readable");
//! assert_eq!(sample.map(|s| s.current), Some(300 << 20));
//! let written = cgroups.write_high("machine.slice/web.scope", Limit::Bytes(1 << 28));
//! assert!(matches!(written, Ok(Written::Done)));
//! assert_eq!(web.read_high(), "268435456");
//! # }
//! ```
//!
//! What a regular file cannot imitate: a control file keeps only the last value written
//! (so [`FakeCgroup::take_reclaim`] sees the last `memory.reclaim` request, not a log),
//! nothing is ever reclaimed, and kernel errors such as `EAGAIN` cannot be produced.
//!
//! These helpers panic (with the path) when the test's own filesystem fails: they are
//! test fixtures, not library code.

use std::fs;
use std::path::{Path, PathBuf};

use crate::parse::{Limit, MemoryEvents};

/// Writes `text` to `path`, panicking with the path on failure.
fn put(path: &Path, text: &str) {
    if let Err(err) = fs::write(path, text) {
        panic!("fake cgroupfs: cannot write {}: {err}", path.display());
    }
}

/// Writes `text` to `path` unless the file exists already.
fn put_default(path: &Path, text: &str) {
    if !path.exists() {
        put(path, text);
    }
}

/// Reads `path`, panicking with the path on failure.
fn get(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("fake cgroupfs: cannot read {}: {err}", path.display()))
}

/// Creates `dir` and its parents, panicking with the path on failure.
fn mkdir(dir: &Path) {
    if let Err(err) = fs::create_dir_all(dir) {
        panic!("fake cgroupfs: cannot create {}: {err}", dir.display());
    }
}

/// A `memory.stat` text with the keys a 6.x kernel prints (the ones memweight reads
/// and a few it ignores), derived from anon and file bytes.
fn stat_text(anon: u64, file: u64) -> String {
    let (inactive_anon, active_anon) = (anon / 2, anon - anon / 2);
    let (inactive_file, active_file) = (file / 2, file - file / 2);
    format!(
        "anon {anon}\nfile {file}\nkernel 2097152\nkernel_stack 65536\npagetables 262144\n\
         sec_pagetables 0\npercpu 0\nsock 0\nvmalloc 0\nshmem 0\nzswap 0\nzswapped 0\n\
         file_mapped 0\nfile_dirty 0\nfile_writeback 0\nswapcached 0\nanon_thp 0\n\
         file_thp 0\nshmem_thp 0\ninactive_anon {inactive_anon}\nactive_anon {active_anon}\n\
         inactive_file {inactive_file}\nactive_file {active_file}\nunevictable 0\n\
         slab_reclaimable 1048576\nslab_unreclaimable 524288\nslab 1572864\n\
         workingset_refault_anon 0\nworkingset_refault_file 0\nworkingset_activate_anon 0\n\
         workingset_activate_file 0\nworkingset_restore_anon 0\nworkingset_restore_file 0\n\
         workingset_nodereclaim 0\npgscan 0\npgsteal 0\npgscan_kswapd 0\npgscan_direct 0\n\
         pgsteal_kswapd 0\npgsteal_direct 0\npgfault 0\npgmajfault 0\npgrefill 0\n\
         pgactivate 0\npgdeactivate 0\npglazyfree 0\npglazyfreed 0\nthp_fault_alloc 0\n\
         thp_collapse_alloc 0\n"
    )
}

/// A PSI file's text with the given 10-second averages.
fn psi_text(some_avg10: f64, full_avg10: f64) -> String {
    format!(
        "some avg10={some_avg10:.2} avg60=0.00 avg300=0.00 total=0\n\
         full avg10={full_avg10:.2} avg60=0.00 avg300=0.00 total=0\n"
    )
}

/// Marks `dir` as a cgroup v2 directory with the memory controller enabled below it.
fn fake_hierarchy_dir(dir: &Path) {
    mkdir(dir);
    put_default(
        &dir.join("cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    );
    put_default(&dir.join("cgroup.subtree_control"), "memory\n");
}

/// Creates the memory controller's files in `dir`, keeping any that exist.
fn fake_memory_files(dir: &Path) {
    fake_hierarchy_dir(dir);
    for (name, text) in [
        ("memory.current", "0\n".to_owned()),
        ("memory.stat", stat_text(0, 0)),
        ("memory.pressure", psi_text(0.0, 0.0)),
        (
            "memory.events",
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n".to_owned(),
        ),
        ("memory.high", "max\n".to_owned()),
        ("memory.low", "0\n".to_owned()),
        ("memory.min", "0\n".to_owned()),
        ("memory.max", "max\n".to_owned()),
        ("memory.swap.current", "0\n".to_owned()),
        ("memory.swap.max", "max\n".to_owned()),
        ("memory.reclaim", String::new()),
    ] {
        put_default(&dir.join(name), &text);
    }
}

/// A fake cgroup directory with the memory controller's files.
#[derive(Debug, Clone)]
pub struct FakeCgroup {
    rel: String,
    dir: PathBuf,
}

impl FakeCgroup {
    /// Creates the cgroup `rel` (`/`-separated) under `root`, with its ancestors.
    ///
    /// The root gets `cgroup.controllers` and `cgroup.subtree_control` listing
    /// `memory`; ancestors and the cgroup itself get the full set of memory files
    /// (`memory.high` = `max`, `memory.low` = `0`, ...). Files that exist already are
    /// kept, so ancestors created by an earlier call keep their values.
    ///
    /// # Panics
    ///
    /// If the directories or files cannot be created.
    pub fn new(root: impl AsRef<Path>, rel: &str) -> Self {
        let root = root.as_ref();
        fake_hierarchy_dir(root);
        let mut dir = root.to_path_buf();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            dir.push(part);
            fake_memory_files(&dir);
        }
        FakeCgroup {
            rel: rel.to_owned(),
            dir,
        }
    }

    /// The cgroup's name relative to the root, as given to [`FakeCgroup::new`].
    #[must_use]
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The cgroup's directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Overwrites the file `name` in the cgroup with `text` (for malformed-input tests).
    ///
    /// # Panics
    ///
    /// If the file cannot be written.
    pub fn write_file(&self, name: &str, text: &str) {
        put(&self.dir.join(name), text);
    }

    /// The content of the file `name` in the cgroup.
    ///
    /// # Panics
    ///
    /// If the file cannot be read.
    #[must_use]
    pub fn read_file(&self, name: &str) -> String {
        get(&self.dir.join(name))
    }

    /// Removes the file `name` (e.g. `memory.pressure` to fake a kernel without PSI).
    ///
    /// # Panics
    ///
    /// If the file cannot be removed.
    pub fn remove_file(&self, name: &str) {
        let path = self.dir.join(name);
        if let Err(err) = fs::remove_file(&path) {
            panic!("fake cgroupfs: cannot remove {}: {err}", path.display());
        }
    }

    /// Removes the cgroup directory and everything in it, as if the container exited.
    ///
    /// # Panics
    ///
    /// If the directory cannot be removed.
    pub fn remove(&self) {
        if let Err(err) = fs::remove_dir_all(&self.dir) {
            panic!("fake cgroupfs: cannot remove {}: {err}", self.dir.display());
        }
    }

    /// Sets `memory.current`.
    pub fn set_current(&self, bytes: u64) {
        self.write_file("memory.current", &format!("{bytes}\n"));
    }

    /// Sets `memory.stat` from anon and file bytes (active/inactive split evenly, other
    /// keys fixed).
    pub fn set_stat(&self, anon: u64, file: u64) {
        self.write_file("memory.stat", &stat_text(anon, file));
    }

    /// Sets `memory.events`.
    pub fn set_events(&self, events: MemoryEvents) {
        let MemoryEvents {
            low,
            high,
            max,
            oom,
            oom_kill,
        } = events;
        self.write_file(
            "memory.events",
            &format!("low {low}\nhigh {high}\nmax {max}\noom {oom}\noom_kill {oom_kill}\noom_group_kill 0\n"),
        );
    }

    /// Sets `memory.pressure` with the given `some` and `full` 10-second averages.
    pub fn set_pressure(&self, some_avg10: f64, full_avg10: f64) {
        self.write_file("memory.pressure", &psi_text(some_avg10, full_avg10));
    }

    /// Sets `memory.high`, as an operator or another tool would.
    pub fn set_high(&self, value: Limit) {
        self.write_file("memory.high", &format!("{value}\n"));
    }

    /// Sets `memory.low`.
    pub fn set_low(&self, value: Limit) {
        self.write_file("memory.low", &format!("{value}\n"));
    }

    /// Sets `memory.min`.
    pub fn set_min(&self, value: Limit) {
        self.write_file("memory.min", &format!("{value}\n"));
    }

    /// Sets `memory.max`.
    pub fn set_max(&self, value: Limit) {
        self.write_file("memory.max", &format!("{value}\n"));
    }

    /// Sets `memory.swap.current`.
    pub fn set_swap_current(&self, bytes: u64) {
        self.write_file("memory.swap.current", &format!("{bytes}\n"));
    }

    /// Sets `memory.swap.max`.
    pub fn set_swap_max(&self, value: Limit) {
        self.write_file("memory.swap.max", &format!("{value}\n"));
    }

    /// The text of `memory.high`, trimmed: `"max"` or a byte count.
    #[must_use]
    pub fn read_high(&self) -> String {
        self.read_file("memory.high").trim().to_owned()
    }

    /// The text of `memory.low`, trimmed.
    #[must_use]
    pub fn read_low(&self) -> String {
        self.read_file("memory.low").trim().to_owned()
    }

    /// The text of `memory.max`, trimmed (to check that nobody wrote it).
    #[must_use]
    pub fn read_max(&self) -> String {
        self.read_file("memory.max").trim().to_owned()
    }

    /// The last `memory.reclaim` request written since the previous call (`None` if
    /// none), and clears it.
    ///
    /// # Panics
    ///
    /// If the file cannot be read or cleared, or holds something other than a number.
    pub fn take_reclaim(&self) -> Option<u64> {
        let text = self.read_file("memory.reclaim");
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        self.write_file("memory.reclaim", "");
        match crate::parse::single_u64(text) {
            Ok(bytes) => Some(bytes),
            Err(err) => panic!(
                "fake cgroupfs: memory.reclaim of {} holds {text:?}: {err}",
                self.rel
            ),
        }
    }
}

/// A fake procfs with `meminfo`, `pressure/memory` and `zoneinfo`, and beside it, in its
/// `sysfs` directory ([`FakeProc::sys_path`]), the sysfs files the daemon reads.
#[derive(Debug, Clone)]
pub struct FakeProc {
    root: PathBuf,
}

/// Host memory figures for [`FakeProc::set_meminfo`], in bytes (written in kB,
/// rounded down, as the kernel does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeMeminfo {
    /// `MemTotal`.
    pub mem_total: u64,
    /// `MemFree`.
    pub mem_free: u64,
    /// `MemAvailable`.
    pub mem_available: u64,
    /// `SwapTotal`.
    pub swap_total: u64,
    /// `SwapFree`.
    pub swap_free: u64,
}

impl Default for FakeMeminfo {
    /// 16 GiB host, 8 GiB available, 4 GiB free, 4 GiB swap of which all free.
    fn default() -> Self {
        FakeMeminfo {
            mem_total: 16 << 30,
            mem_free: 4 << 30,
            mem_available: 8 << 30,
            swap_total: 4 << 30,
            swap_free: 4 << 30,
        }
    }
}

impl FakeProc {
    /// Creates `root/meminfo` ([`FakeMeminfo::default`]), `root/pressure/memory` (no
    /// pressure) and `root/zoneinfo` (one zone with the watermarks a 16 GiB host gets with
    /// the default `vm.watermark_scale_factor`: min 4,096, low 8,290, high 12,484 pages),
    /// and a sysfs in `root/sysfs` with `kernel/mm` but no `lru_gen` (the classic LRU), so
    /// that a test never reads the machine's own `/sys`.
    ///
    /// # Panics
    ///
    /// If the directories or files cannot be created.
    pub fn new(root: impl AsRef<Path>) -> Self {
        let fake = FakeProc {
            root: root.as_ref().to_path_buf(),
        };
        mkdir(&fake.root.join("pressure"));
        mkdir(&fake.sys_path().join("kernel/mm"));
        fake.set_meminfo(FakeMeminfo::default());
        fake.set_psi(0.0, 0.0);
        fake.set_watermarks(4096, 8290, 12_484);
        fake.set_reclaim_scanned(0);
        fake
    }

    /// Rewrites `vmstat` with `scanned` pages of global reclaim (split between kswapd and
    /// direct reclaim) and the other reclaim keys a 6.x kernel prints.
    pub fn set_reclaim_scanned(&self, scanned: u64) {
        let direct = scanned / 4;
        let kswapd = scanned - direct;
        let text = format!(
            "nr_free_pages 262144\nnr_zone_inactive_anon 1000\npgfault 123456\n\
             pgscan_kswapd {kswapd}\npgscan_direct {direct}\npgscan_khugepaged 0\n\
             pgsteal_kswapd {kswapd}\npgsteal_direct {direct}\npgsteal_khugepaged 0\n\
             allocstall_dma 0\nallocstall_dma32 0\nallocstall_normal 0\n\
             allocstall_movable 0\nworkingset_refault_anon 0\nworkingset_refault_file 0\n"
        );
        put(&self.root.join("vmstat"), &text);
    }

    /// Rewrites `zoneinfo` as one populated zone with these watermarks (pages) beside an
    /// empty one.
    pub fn set_watermarks(&self, min: u64, low: u64, high: u64) {
        let text = format!(
            "Node 0, zone    DMA32\n  per-node stats\n      nr_free_pages 1000\n  \
             pages free     1000\n        boost    0\n        min      {min}\n        \
             low      {low}\n        high     {high}\n        spanned  4194304\n        \
             present  4194304\n        managed  4194304\n        cma      0\n        \
             protection: (0, 0, 0, 0)\n  pagesets\n    cpu: 0\n              count: 0\n              \
             high:  0\n              batch: 1\nNode 0, zone   Normal\n  pages free     0\n        \
             boost    0\n        min      0\n        low      0\n        high     0\n        \
             spanned  0\n        present  0\n        managed  0\n        cma      0\n"
        );
        put(&self.root.join("zoneinfo"), &text);
    }

    /// The fake procfs root.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The fake sysfs root (`sys_root`): `sysfs` in the procfs root.
    #[must_use]
    pub fn sys_path(&self) -> PathBuf {
        self.root.join("sysfs")
    }

    /// Turns the multi-gen LRU on (`lru_gen/enabled` = `0x0007`) or off (`0x0000`).
    pub fn set_multi_gen_lru(&self, on: bool) {
        let dir = self.sys_path().join("kernel/mm/lru_gen");
        mkdir(&dir);
        put(
            &dir.join("enabled"),
            if on { "0x0007\n" } else { "0x0000\n" },
        );
    }

    /// Rewrites `meminfo` with these figures and the other keys a 6.x kernel prints.
    pub fn set_meminfo(&self, info: FakeMeminfo) {
        let kib = |bytes: u64| bytes / 1024;
        let text = format!(
            "MemTotal:       {} kB\nMemFree:        {} kB\nMemAvailable:   {} kB\n\
             Buffers:           1024 kB\nCached:          524288 kB\nSwapCached:            0 kB\n\
             Active:          262144 kB\nInactive:        262144 kB\nActive(anon):     65536 kB\n\
             Inactive(anon):   65536 kB\nActive(file):    196608 kB\nInactive(file):  196608 kB\n\
             Unevictable:           0 kB\nMlocked:               0 kB\nSwapTotal:      {} kB\n\
             SwapFree:       {} kB\nZswap:                 0 kB\nZswapped:              0 kB\n\
             Dirty:                 0 kB\nWriteback:             0 kB\nAnonPages:        131072 kB\n\
             Mapped:            65536 kB\nShmem:              4096 kB\nKReclaimable:      32768 kB\n\
             Slab:              65536 kB\nSReclaimable:      32768 kB\nSUnreclaim:        32768 kB\n\
             KernelStack:        8192 kB\nPageTables:         4096 kB\nSecPageTables:         0 kB\n\
             NFS_Unstable:          0 kB\nBounce:                0 kB\nWritebackTmp:          0 kB\n\
             CommitLimit:    8388608 kB\nCommitted_AS:    1048576 kB\nVmallocTotal:   34359738367 kB\n\
             VmallocUsed:       32768 kB\nVmallocChunk:          0 kB\nPercpu:             2048 kB\n\
             HardwareCorrupted:     0 kB\nAnonHugePages:         0 kB\nShmemHugePages:        0 kB\n\
             ShmemPmdMapped:        0 kB\nFileHugePages:         0 kB\nFilePmdMapped:         0 kB\n\
             HugePages_Total:       0\nHugePages_Free:        0\nHugePages_Rsvd:        0\n\
             HugePages_Surp:        0\nHugepagesize:       2048 kB\nHugetlb:               0 kB\n\
             DirectMap4k:      262144 kB\nDirectMap2M:    16515072 kB\n",
            kib(info.mem_total),
            kib(info.mem_free),
            kib(info.mem_available),
            kib(info.swap_total),
            kib(info.swap_free),
        );
        put(&self.root.join("meminfo"), &text);
    }

    /// Overwrites `meminfo` with `text` (for malformed-input tests).
    pub fn write_meminfo(&self, text: &str) {
        put(&self.root.join("meminfo"), text);
    }

    /// Sets `pressure/memory` with the given `some` and `full` 10-second averages.
    pub fn set_psi(&self, some_avg10: f64, full_avg10: f64) {
        self.write_psi(&psi_text(some_avg10, full_avg10));
    }

    /// Overwrites `pressure/memory` with `text`.
    pub fn write_psi(&self, text: &str) {
        put(&self.root.join("pressure").join("memory"), text);
    }

    /// Removes `pressure/memory`, as on a kernel without PSI.
    ///
    /// # Panics
    ///
    /// If the file cannot be removed.
    pub fn remove_psi(&self) {
        let path = self.root.join("pressure").join("memory");
        if let Err(err) = fs::remove_file(&path) {
            panic!("fake procfs: cannot remove {}: {err}", path.display());
        }
    }
}
