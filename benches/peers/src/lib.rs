//! The peer comparison of tourbillon: no library code, only the bench
//! target `compare` (`benches/compare.rs`). Run it from the repository root
//! with `cargo bench -p tourbillon-peers --bench compare`.
