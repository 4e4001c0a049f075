//! Criterion benches of the codec (filled in below).

fn main() {}
