//! What nmb's test suites and benches share, written once.
//!
//! - [`assets`]: where `scripts/assets.sh` put the model weights and Python packages (`NMB_ASSETS_DIR`, else
//!   `<repo>/.nmb-assets`).
//! - [`mod@need`]: a test that needs something absent (a browser, a server, weights) skips with a message locally,
//!   and fails under `CI=true`: a skipped check is not a passed one.
//! - [`images`]: small PNGs made on the fly.
//! - [`gguf`]: GGUF files written from Rust: a tiny model the local engine runs, and variants whose headers lie.
//! - [`hostile`]: a corpus of hostile volumes and images (lying headers, bombs, escapes), one suite each.
//! - [`browser`]: headless Chromium: a page's DOM, screenshots, and a WebDriver session to click and type.
//! - [`llama`]: llama.cpp's real OpenAI-compatible server (PyPI `xllamacpp`) on a GGUF, as a child process.
//! - [`postgres`]: a real, private PostgreSQL server per test process, and a fresh database per test.
//! - [`rng`]: a small fixed seeded generator for simulations with known truth.
//! - [`fuzz`]: a seeded mutator for fuzz tests.
//!
//! It is for tests and benches only: no crate of nmb's depends on it outside `[dev-dependencies]`.

pub mod assets;
pub mod browser;
pub mod fuzz;
pub mod gguf;
pub mod hostile;
pub mod images;
pub mod llama;
pub mod need;
pub mod postgres;
pub mod rng;

pub use need::{need, under_ci};
