//! memweightd.
fn main() {}
