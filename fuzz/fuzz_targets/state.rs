//! The state file (`state.json`): a foreign, newer, tampered or torn file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweightd::state::parse(text);
});
