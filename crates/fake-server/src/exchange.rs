//! An HTTP request as the server loop ([`crate::http`]) read it, for whatever answers it: the single-call wires
//! and the batch APIs ([`crate::batch`]).

pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// The client sent `connection: close`.
    pub(crate) close: bool,
}
