//! The ranges a stored number from outside may take. Token counts and latencies come from model servers and
//! imported files; a value past its range is refused before it is stored (the caller records the call as failed
//! instead), so no row can hold a number that breaks a sum or misleads a report.
//!
//! The sums that read them back cannot overflow either, whatever a store already holds (rows written by older
//! versions, or by hand): they add each value's high and low 32 bits apart and combine them in 128 bits
//! (`query::call_totals`), and the Rust side adds with saturation.

/// The most tokens one call may report for any one count (input, output, reasoning, prompt-cache reads or
/// writes): a hundred times the largest context window offered today (10 million tokens). At this bound even a
/// plain 64-bit sum of a run's calls would need more than nine billion calls to overflow.
pub const MAX_TOKENS: u64 = 1_000_000_000;

/// The longest one call may have taken, in milliseconds: a year (a provider batch can be polled for days).
pub const MAX_LATENCY_MS: u64 = 365 * 24 * 60 * 60 * 1000;

/// A number past its range: which field, what it was, and the most it may be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} = {value} is out of range: {what} is at most {max}")]
pub struct OutOfRange {
    pub field: &'static str,
    pub value: u64,
    pub max: u64,
    /// What the bound is about, for the message.
    pub what: &'static str,
}

/// `value` as a token count of one call.
pub fn check_tokens(field: &'static str, value: u64) -> Result<(), OutOfRange> {
    check(field, value, MAX_TOKENS, "a call's token count")
}

/// `value` as one call's latency in milliseconds.
pub fn check_latency_ms(field: &'static str, value: u64) -> Result<(), OutOfRange> {
    check(
        field,
        value,
        MAX_LATENCY_MS,
        "a call's latency in milliseconds",
    )
}

fn check(field: &'static str, value: u64, max: u64, what: &'static str) -> Result<(), OutOfRange> {
    if value <= max {
        Ok(())
    } else {
        Err(OutOfRange {
            field,
            value,
            max,
            what,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_inclusive_and_the_message_names_field_and_value() {
        assert!(check_tokens("tokens_in", MAX_TOKENS).is_ok());
        let e = check_tokens("tokens_in", 1 << 63).unwrap_err();
        assert_eq!(e.value, 1 << 63);
        let text = e.to_string();
        assert!(text.contains("tokens_in = 9223372036854775808"), "{text}");
        assert!(text.contains("1000000000"), "{text}");
        assert!(check_latency_ms("latency_ms", MAX_LATENCY_MS + 1).is_err());
    }
}
