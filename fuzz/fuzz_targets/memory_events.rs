//! `memory.events`, `cpu.stat` and `/proc/vmstat` (flat keyed).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweight_cgroupfs::MemoryEvents::parse(text);
    let _ = memweight_cgroupfs::parse::cpu_usage_usec(text);
    if let Ok(v) = memweight_cgroupfs::parse::vmstat(text) {
        let _ = v.scanned();
    }
});
