//! The control protocol: one request line from any member of the control group.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memweight_proto::ctl;

fuzz_target!(|line: &str| {
    if let Ok(command) = ctl::parse_request(line) {
        // What the server does next with a parsed request.
        if let Some(cgroup) = command.cgroup() {
            let _ = ctl::normalize_cgroup(cgroup, "/sys/fs/cgroup");
        }
    }
    let _ = ctl::parse_response(line);
});
