//! `/proc/zoneinfo` (zone blocks: the watermarks the default reserve follows).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweight_cgroupfs::parse::watermarks(text);
});
