//! The daemon's TOML configuration: parse and validate any text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = memweightd::config::Config::parse(text, std::path::Path::new("fuzz.toml"));
    let _ = memweightd::config::parse_amount(text);
    let _ = memweightd::config::parse_interval(text);
});
