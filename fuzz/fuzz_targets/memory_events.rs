//! `memory.events` and `cpu.stat` (flat keyed).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweight_cgroupfs::MemoryEvents::parse(text);
    let _ = memweight_cgroupfs::parse::cpu_usage_usec(text);
});
