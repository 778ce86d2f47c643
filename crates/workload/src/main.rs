//! workload.
fn main() {}
