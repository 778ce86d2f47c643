//! The state file (`state.json`): a foreign, newer, tampered or torn file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweightd::state::parse(text);
    // What a start reads of a corrupt file: never panics, only whole entries.
    let _ = memweightd::state::salvage(text);
});
