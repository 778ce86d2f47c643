//! Single-value files (`memory.current`, `memory.high`/`low` with `max`, the multi-gen LRU's
//! `enabled` flags) and the generic flat keyed parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memweight_cgroupfs::parse;

fuzz_target!(|text: &str| {
    let _ = parse::single_u64(text);
    if let Ok(limit) = parse::limit(text) {
        // The state file keeps limits as text: what is printed must parse back.
        assert_eq!(parse::limit(&limit.to_string()).ok(), Some(limit));
    }
    let _ = parse::flat_keyed(text);
    let _ = parse::lru_gen(text);
});
