//! The chat types, from the leaf crate `nmb-chat` (kept here so `nmb_plan::chat::...` paths still work).

pub use nmb_chat::*;
