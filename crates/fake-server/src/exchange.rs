//! An HTTP request as the server loop read it and a response ready for it to write, shared by the loop and what
//! answers: the single-call wires, the batch APIs and the hostile mode (each imports this module, so it names none
//! of them).

pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// The client sent `connection: close`.
    pub(crate) close: bool,
}

/// An HTTP response ready to write.
pub(crate) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub(crate) fn json(status: u16, body: serde_json::Value) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}
