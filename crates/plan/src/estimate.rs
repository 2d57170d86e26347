//! Token estimates for `--dry-run`. They are estimates for budgeting, not a tokenizer.
//!
//! - Text: one token per 4 characters (Unicode scalar values), rounded up. This is the usual rule of thumb for
//!   English with GPT-style tokenizers; it undercounts Chinese, where a character is often a token or more.
//! - Images: OpenAI's high-detail rule. Scale to fit 2048x2048, then scale down so the shorter side is at most
//!   768, count 512-pixel tiles, and charge 85 + 170 per tile. When the header gives no dimensions, assume
//!   [`UNKNOWN_IMAGE_TOKENS`] (765, a 4-tile image such as 1024x1024). Other providers count differently.
//! - Earlier answers in multi-turn conversations: [`ASSUMED_ANSWER_TOKENS`] per earlier turn.

/// Tokens assumed for an image whose dimensions are unknown (85 + 170 x 4 tiles).
pub const UNKNOWN_IMAGE_TOKENS: u64 = 765;

/// Tokens assumed for each earlier assistant answer carried in a multi-turn conversation.
pub const ASSUMED_ANSWER_TOKENS: u64 = 300;

/// Estimated tokens of a text: characters / 4, rounded up.
pub fn text_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Estimated tokens of an image by OpenAI's high-detail tile rule.
pub fn image_tokens(width: Option<u32>, height: Option<u32>) -> u64 {
    let (Some(w), Some(h)) = (width, height) else {
        return UNKNOWN_IMAGE_TOKENS;
    };
    if w == 0 || h == 0 {
        return UNKNOWN_IMAGE_TOKENS;
    }
    let (mut w, mut h) = (f64::from(w), f64::from(h));
    let fit = (2048.0 / w.max(h)).min(1.0);
    w *= fit;
    h *= fit;
    let shrink = (768.0 / w.min(h)).min(1.0);
    w *= shrink;
    h *= shrink;
    let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
    85 + 170 * tiles as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_documented_examples() {
        // OpenAI's documentation: 1024x1024 -> 765 tokens; 2048x4096 -> 1105 tokens.
        assert_eq!(image_tokens(Some(1024), Some(1024)), 765);
        assert_eq!(image_tokens(Some(2048), Some(4096)), 1105);
        assert_eq!(image_tokens(None, Some(3)), UNKNOWN_IMAGE_TOKENS);
        assert_eq!(image_tokens(Some(64), Some(64)), 255);
    }

    #[test]
    fn text_is_chars_over_four() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("abcde"), 2);
        assert_eq!(text_tokens("诊断疾病"), 1);
    }
}
