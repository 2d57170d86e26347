//! How an estimate with its interval is written in the plain-text reports: `0.82 [0.75, 0.88]`.

pub(crate) fn interval(e: &nmb_stats::Estimate) -> String {
    format!("{:.2} [{:.2}, {:.2}]", e.value, e.ci_low, e.ci_high)
}
