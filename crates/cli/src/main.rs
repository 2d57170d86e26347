//! The `nmb` command line: a thin layer over the library crates.

fn main() {
    println!("nmb {}", env!("CARGO_PKG_VERSION"));
}
