//! `memory.pressure` and `/proc/pressure/memory` (PSI, nested keyed).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweight_cgroupfs::parse::psi(text);
});
