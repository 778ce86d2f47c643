//! The kernel files the agent samples, read with the daemon's own parsers
//! (`memweight_cgroupfs::parse`, one parser per kernel file format): `&str` in, `None` on
//! anything malformed (a sample then shows the field as missing rather than crashing the run).

use memweight_cgroupfs::{Limit, parse};

/// A single-number file such as `memory.current`.
pub fn single_u64(text: &str) -> Option<u64> {
    parse::single_u64(text).ok()
}

/// A limit file such as `memory.high`: a number or `max`.
pub fn limit(text: &str) -> Option<Limit> {
    parse::limit(text).ok()
}

/// `avg10` of the `some` and `full` lines of a PSI file (`memory.pressure`,
/// `/proc/pressure/memory`).
pub fn psi_avg10(text: &str) -> (Option<f64>, Option<f64>) {
    parse::psi(text).map_or((None, None), |p| {
        (Some(p.some.avg10), p.full.map(|f| f.avg10))
    })
}

/// `memory.events`: the `high`, `max` and `oom_kill` counters.
pub fn events(text: &str) -> Option<memweight_cgroupfs::MemoryEvents> {
    memweight_cgroupfs::MemoryEvents::parse(text).ok()
}

/// `memory.stat`: the fields the daemon uses, among them the refault and major-fault counters.
pub fn memory_stat(text: &str) -> Option<memweight_cgroupfs::MemoryStat> {
    memweight_cgroupfs::MemoryStat::parse(text).ok()
}

/// `cpu.stat`: `usage_usec`, the CPU time a cgroup's tasks used, in microseconds.
pub fn cpu_usage_usec(text: &str) -> Option<u64> {
    parse::cpu_usage_usec(text).ok()
}

/// `/proc/PID/stat`: the task's CPU time (`utime` + `stime`) in clock ticks, read with
/// procfs's parser (the comm field may hold spaces and parentheses).
pub fn task_cpu_ticks(text: &str) -> Option<u64> {
    use procfs::FromRead;
    let stat = procfs::process::Stat::from_read(text.as_bytes()).ok()?;
    Some(stat.utime.saturating_add(stat.stime))
}

/// `/proc/meminfo`: MemTotal, MemAvailable, SwapTotal and SwapFree in bytes.
pub fn meminfo(text: &str) -> Option<memweight_cgroupfs::HostSample> {
    memweight_cgroupfs::parse_meminfo(text).ok()
}

/// `ops_per_s` of one line of the workload's JSON output.
pub fn workload_ops_per_s(line: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    v.get("ops_per_s")?.as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_limit() {
        assert_eq!(single_u64("4096\n"), Some(4096));
        assert_eq!(single_u64("max\n"), None);
        assert_eq!(single_u64(""), None);
        assert_eq!(limit("max\n"), Some(Limit::Max));
        assert_eq!(limit("1048576\n"), Some(Limit::Bytes(1 << 20)));
        assert_eq!(limit("-1"), None);
    }

    #[test]
    fn task_cpu_ticks_reads_a_kernel_threads_stat() {
        // kswapd0 on a 6.1 guest: utime 0, stime 1234 ticks.
        let text = "52 (kswapd0) S 2 0 0 0 -1 2228288 0 0 0 0 0 1234 0 0 20 0 1 0 41 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 \
                    0 0 0 0 0 0\n";
        assert_eq!(task_cpu_ticks(text), Some(1234));
        let odd = text.replace("(kswapd0)", "(a) b (c)");
        assert_eq!(
            task_cpu_ticks(&odd),
            Some(1234),
            "comm with spaces and parentheses"
        );
        assert_eq!(task_cpu_ticks("52 (kswapd0) S"), None);
        assert_eq!(task_cpu_ticks(""), None);
    }

    #[test]
    fn psi() {
        let text = "some avg10=12.50 avg60=3.00 avg300=1.00 total=5\n\
                    full avg10=2.25 avg60=0.00 avg300=0.00 total=1\n";
        assert_eq!(psi_avg10(text), (Some(12.5), Some(2.25)));
        assert_eq!(psi_avg10("some avg10=x\n"), (None, None));
        assert_eq!(psi_avg10(""), (None, None));
    }

    #[test]
    fn events_and_meminfo() {
        let ev = "low 0\nhigh 17\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n";
        let e = events(ev).expect("parses");
        assert_eq!((e.high, e.max, e.oom_kill), (17, 2, 1));
        assert_eq!(events("high\n"), None);
        // A 6.1 guest's meminfo, trimmed to what procfs requires.
        let mi = "MemTotal:  1000 kB\nMemFree:  100 kB\nMemAvailable:     512 kB\n\
                  Buffers:  0 kB\nCached:  10 kB\nSwapCached:  0 kB\nActive:  5 kB\n\
                  Inactive:  5 kB\nActive(anon):  1 kB\nInactive(anon):  1 kB\n\
                  Active(file):  4 kB\nInactive(file):  4 kB\nUnevictable:  0 kB\n\
                  Mlocked:  0 kB\nSwapTotal:  2048 kB\nSwapFree:  1024 kB\nDirty:  0 kB\n\
                  Writeback:  0 kB\nAnonPages:  2 kB\nMapped:  1 kB\nShmem:  0 kB\n\
                  KReclaimable:  0 kB\nSlab:  3 kB\nSReclaimable:  1 kB\nSUnreclaim:  2 kB\n\
                  KernelStack:  1 kB\nPageTables:  1 kB\nNFS_Unstable:  0 kB\nBounce:  0 kB\n\
                  WritebackTmp:  0 kB\nCommitLimit:  500 kB\nCommitted_AS:  100 kB\n\
                  VmallocTotal:  1000 kB\nVmallocUsed:  0 kB\nVmallocChunk:  0 kB\n";
        let m = meminfo(mi).expect("parses");
        assert_eq!((m.mem_total, m.mem_available), (1000 * 1024, 512 * 1024));
        assert_eq!((m.swap_total, m.swap_free), (2048 * 1024, 1024 * 1024));
        assert_eq!(meminfo("MemTotal: x kB\n"), None);
    }

    #[test]
    fn workload_line() {
        let line = r#"{"t":1.0,"ops":10,"ops_per_s":1500.5,"unit":"pages","rss":1}"#;
        assert_eq!(workload_ops_per_s(line), Some(1500.5));
        assert_eq!(workload_ops_per_s("not json"), None);
        assert_eq!(workload_ops_per_s("{}"), None);
    }
}
