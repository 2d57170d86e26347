//! Finding the GGUFs the tests run on.

use std::path::PathBuf;

/// The SmolLM2 GGUF (see `nmb_test_support::assets`): `None` after a message locally, a failure under CI.
pub fn smollm2() -> Option<PathBuf> {
    nmb_test_support::assets::smollm2_gguf()
}

/// The Gemma 3 270M Q4_K_M GGUF: `None` after a message locally, a failure under CI.
pub fn gemma3() -> Option<PathBuf> {
    nmb_test_support::assets::gemma3_gguf()
}
