//! Closed questions asked and answered in Chinese (SLAKE's `zh` half). Chinese has no spaces, so the word rules
//! of [`super::text`] cannot see "不是" (no) inside "不是，图中没有肝脏": these rules read the answer's first clause
//! by phrases instead.
//!
//! - A yes/no reference (是, 是的, 有, 包含, 存在, 可以, ... and their negations 不是, 没有, 不包含, 不可以, ...)
//!   is matched by the polarity of the answer's first clause: a leading negation is no, a leading affirmation
//!   yes; otherwise a clause that holds only negated or only plain affirmations decides. An English yes/no
//!   answer is read as well.
//! - Any other reference (肝脏, 横断面) must appear in the first clause, not right after a negation (不, 没有, 非).

/// Affirmations, longest first so that "是的" wins over "是".
const YES: &[&str] = &[
    "是的", "包含", "包括", "存在", "可以", "可见", "正确", "是", "有", "对",
];

/// Negations, longest first.
const NO: &[&str] = &[
    "不包含",
    "不包括",
    "不存在",
    "不可以",
    "不可见",
    "不正确",
    "不是",
    "没有",
    "未见",
    "不对",
    "并非",
    "否",
    "无",
    "不",
];

/// Whether `text` holds Chinese characters.
pub fn is_chinese(text: &str) -> bool {
    text.chars()
        .any(|c| matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}'))
}

/// `Some(true)` for a Chinese yes reference, `Some(false)` for a no, `None` for anything else.
pub fn yes_no(reference: &str) -> Option<bool> {
    let r = reference.trim().trim_end_matches(['。', '.', '！', '!']);
    if NO.contains(&r) {
        Some(false)
    } else if YES.contains(&r) {
        Some(true)
    } else {
        None
    }
}

/// The answer's first clause: up to the first Chinese or Latin sentence or clause mark.
fn first_clause(answer: &str) -> &str {
    let t = answer.trim();
    let t = ["答案：", "答案:", "回答：", "回答:"]
        .iter()
        .find_map(|p| t.strip_prefix(p))
        .unwrap_or(t)
        .trim_start();
    let end = t
        .find(['，', '。', ',', '.', '；', ';', '！', '!', '？', '?', '\n'])
        .unwrap_or(t.len());
    &t[..end]
}

/// "Cannot tell", "not sure": a hedge, not a "no" (无法 starts with 无, 不确定 with 不).
const HEDGES: &[&str] = &["无法", "不确定", "不清楚", "不能确定", "难以", "不知道"];

/// The polarity of a Chinese (or English) yes/no answer, or `None` when it has neither or hedges.
pub fn polarity(answer: &str) -> Option<bool> {
    let clause = first_clause(answer);
    if HEDGES.iter().any(|h| clause.contains(h)) {
        return None;
    }
    let lower = clause.to_ascii_lowercase();
    if lower.starts_with("yes") {
        return Some(true);
    }
    if lower.starts_with("no") && !lower.starts_with("not") {
        return Some(false);
    }
    if NO.iter().any(|n| clause.starts_with(n)) {
        return Some(false);
    }
    if YES.iter().any(|y| clause.starts_with(y)) {
        return Some(true);
    }
    let negated = NO.iter().any(|n| clause.contains(n));
    let affirmed = YES
        .iter()
        .any(|y| clause.contains(y) && !NO.iter().any(|n| n.ends_with(y) && clause.contains(n)));
    match (affirmed, negated) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

/// The reference appears in the answer's first clause, not right after a negation.
pub fn content_match(answer: &str, reference: &str) -> bool {
    let clause = first_clause(answer);
    let want = reference.trim();
    if want.is_empty() {
        return false;
    }
    clause.match_indices(want).any(|(at, _)| {
        let before = &clause[..at];
        !["不", "不是", "没有", "非", "无", "不在"]
            .iter()
            .any(|n| before.ends_with(n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polarity_reads_the_first_clause() {
        for (answer, want) in [
            ("是的，图中包含肝脏。", Some(true)),
            ("不是。", Some(false)),
            ("不包含", Some(false)),
            ("没有，未见异常", Some(false)),
            ("图中存在病灶，位于左侧", Some(true)),
            ("图中可见肝脏", Some(true)),
            ("未见明显异常", Some(false)),
            ("图中不存在病灶", Some(false)),
            ("Yes, it does.", Some(true)),
            ("No.", Some(false)),
            ("无法判断", None),
            ("这个问题很难说", None),
        ] {
            assert_eq!(polarity(answer), want, "{answer}");
        }
    }

    #[test]
    fn references_are_yes_no_or_content() {
        assert_eq!(yes_no("是的"), Some(true));
        assert_eq!(yes_no("不包含"), Some(false));
        assert_eq!(yes_no("肝脏"), None);
        assert!(content_match("肝脏更大。", "肝脏"));
        assert!(!content_match("不是肝脏，是肺", "肝脏"), "negated");
        assert!(!content_match("没有肝脏", "肝脏"), "negated");
        assert!(
            !content_match("是肺。肝脏较小", "肝脏"),
            "only the first clause counts"
        );
        assert!(is_chinese("横断面") && !is_chinese("T1"));
    }
}
