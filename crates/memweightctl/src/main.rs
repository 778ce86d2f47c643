//! memweightctl.
fn main() {}
