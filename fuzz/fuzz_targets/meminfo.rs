//! `/proc/meminfo`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweight_cgroupfs::parse_meminfo(text);
});
