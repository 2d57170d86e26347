//! From suite tasks to model conversations.
//!
//! This crate owns the backend-neutral chat representation ([`chat`]), the prompt templates (data, versioned
//! and hashed), the input modes of the paper's ablation (`full`, `text`, `images`), and the request plan: which
//! conversations, with which sample indices, a run must send. It does not send anything (`nmb-requests`) or
//! store anything (`nmb-store`).

pub mod chat;
