//! `memory.stat` (flat keyed).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweight_cgroupfs::MemoryStat::parse(text);
});
