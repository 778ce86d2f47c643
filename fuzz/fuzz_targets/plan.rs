//! The offline plan file (`memweightctl plan FILE`): parse, validate, and compute the plan the
//! way memweightctl does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memweight_proto::plan::{PlanFile, PlanOutput};

fuzz_target!(|text: &str| {
    if let Ok(file) = PlanFile::from_json(text)
        && let Ok(plan) = memweight_policy::plan(file.capacity.bytes(), &file.inputs())
    {
        let _ = PlanOutput::from(&plan);
    }
});
