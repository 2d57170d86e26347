//! The error of a fault's textual form. `Fault`'s `FromStr` and `Hostile`'s (a hostile mode is a fault) both
//! give it; it sits apart from both so that hostile need not import fault, whose faults hold hostile modes.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault {0:?}; expected 429[:SECS], 429ms:MILLIS, retryinfo:SECS, STATUS (e.g. 500, 503, 529), noretry:STATUS, context, reset, slow:MILLIS, hang, malformed, empty, refusal, exhausted, quota or a hostile mode (huge:BYTES, huge-close:BYTES, lie:BYTES, drip:MILLIS, gzip-bomb:BYTES, deflate-bomb:BYTES, encoding:NAME, deep:DEPTH, numbers:KIND)")]
pub struct FaultParseError(pub String);
