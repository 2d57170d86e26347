//! A reasoning model's thinking, kept apart from its answer.
//!
//! A reasoning model served without a reasoning parser (vLLM, SGLang or llama.cpp without `--reasoning-parser`,
//! a GGUF run in-process) writes its thinking into the answer text: `<think>...</think>` and then the answer.
//! Templates that open the block themselves (DeepSeek-R1's, Qwen3's) leave only the closing `</think>` in the
//! output. A block still open at the token limit is all thinking: the answer is empty.

/// An answer text taken apart: the thinking before it (if any) and the answer itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thought<'a> {
    /// What was between `<think>` and `</think>` (trimmed), or `None` when the text has no thinking block.
    pub thinking: Option<&'a str>,
    /// The text after the thinking block (leading white space dropped), or the whole text without one.
    pub answer: &'a str,
    /// The block was never closed (the model was cut off while thinking): `answer` is empty.
    pub unclosed: bool,
}

/// The API's finish reason says the answer stopped at the token limit: OpenAI's (and llama.cpp's, vLLM's,
/// nmb's local engine's) `length`, Anthropic's `max_tokens`, Gemini's `MAX_TOKENS`.
pub fn stopped_at_token_limit(finish_reason: &str) -> bool {
    matches!(finish_reason, "length" | "max_tokens" | "MAX_TOKENS")
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// Splits `text` into thinking and answer. Only a block at the start counts (white space before it allowed),
/// so an answer that merely mentions the tags is left whole.
pub fn split_thinking(text: &str) -> Thought<'_> {
    let start = text.trim_start();
    let whole = Thought {
        thinking: None,
        answer: text,
        unclosed: false,
    };
    if let Some(inside) = strip_prefix_ignore_case(start, OPEN) {
        return match find_ignore_case(inside, CLOSE) {
            Some(end) => Thought {
                thinking: Some(inside[..end].trim()),
                answer: inside[end + CLOSE.len()..].trim_start(),
                unclosed: false,
            },
            None => Thought {
                thinking: Some(inside.trim()),
                answer: "",
                unclosed: true,
            },
        };
    }
    // The template opened the block: the output starts inside it.
    match find_ignore_case(text, CLOSE) {
        Some(end) if find_ignore_case(&text[..end], OPEN).is_none() => Thought {
            thinking: Some(text[..end].trim()),
            answer: text[end + CLOSE.len()..].trim_start(),
            unclosed: false,
        },
        _ => whole,
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn find_ignore_case(s: &str, needle: &str) -> Option<usize> {
    // The tags are ASCII, so a byte index found in the lowered copy is a char boundary of `s` too.
    s.to_ascii_lowercase().find(needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_block_is_thinking() {
        let t = split_thinking(
            "<think>\nDraft: {\"differential\": [{\"rank\": 1, \"diagnosis\": \"Glioma\"}]}\n</think>\n\n{\"differential\": []}",
        );
        assert_eq!(
            t.thinking,
            Some("Draft: {\"differential\": [{\"rank\": 1, \"diagnosis\": \"Glioma\"}]}")
        );
        assert_eq!(t.answer, "{\"differential\": []}");
        assert!(!t.unclosed);
    }

    #[test]
    fn a_block_the_template_opened_ends_at_its_close() {
        let t = split_thinking("The MRI shows ... so MS.\n</think>\n\nMultiple sclerosis");
        assert_eq!(t.thinking, Some("The MRI shows ... so MS."));
        assert_eq!(t.answer, "Multiple sclerosis");
    }

    #[test]
    fn a_block_left_open_leaves_no_answer() {
        let t = split_thinking("  <THINK>Considering glioma versus");
        assert_eq!(t.thinking, Some("Considering glioma versus"));
        assert_eq!(t.answer, "");
        assert!(t.unclosed);
    }

    #[test]
    fn text_without_a_leading_block_is_the_answer() {
        for text in [
            "Multiple sclerosis",
            "",
            "The answer is MS. <think>not a block</think>",
            "Use <think> tags </think> like this",
        ] {
            let t = split_thinking(text);
            assert_eq!(t.thinking, None, "{text}");
            assert_eq!(t.answer, text);
        }
        // non-ASCII text around the tags is cut at the right places
        let t = split_thinking("<think>Ödem, Läsion</think>Glioblastom – WHO 4");
        assert_eq!(t.thinking, Some("Ödem, Läsion"));
        assert_eq!(t.answer, "Glioblastom – WHO 4");
    }
}
