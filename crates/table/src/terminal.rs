//! Text from outside (ids, answers, file contents, cell values) made inert for a terminal, and bounded
//! excerpts of it for error messages.
//!
//! A terminal acts on control characters: ESC starts a sequence that can clear the screen, move the cursor or
//! retitle the window; CR and backspace overwrite what was printed; C1 controls (U+0080 to U+009F) are escapes
//! of their own on some terminals; bidirectional overrides reorder what is shown. [`inert`] writes each of these
//! as a visible escape (`\u{1b}`, `\r`), so printed text shows what the bytes were and cannot act.

use std::borrow::Cow;
use std::fmt::Write;

/// How many characters an excerpt keeps by default ([`excerpt`]).
pub const EXCERPT_CHARS: usize = 120;

/// Whether a terminal could act on `c`: C0 and C1 controls, DEL, and the Unicode format characters that
/// reorder or hide text (bidirectional embeddings, overrides and isolates, the line and paragraph separators).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `text` with every character a terminal could act on ([`is_unsafe`]) written as its escape (`\n`, `\r`,
/// `\t`, `\u{1b}`), line breaks included: for one-line messages (an id, a cell, a field).
pub fn inert(text: &str) -> Cow<'_, str> {
    escape_where(text, is_unsafe)
}

/// [`inert`], keeping line breaks and tabs: for text that is printed as lines of its own (a case's notes, an
/// error listing one problem a line).
pub fn inert_lines(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| is_unsafe(c) && !matches!(c, '\n' | '\t'))
}

fn escape_where(text: &str, unsafe_char: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if unsafe_char(c) => {
                let _ = write!(out, "{}", c.escape_default());
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// At most `max` characters of `text`, made [`inert`]; a longer text is cut and says how many bytes were left
/// out (`… (812345 more bytes)`).
pub fn excerpt_of(text: &str, max: usize) -> String {
    let cut = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
    let mut out = inert(&text[..cut]).into_owned();
    if cut < text.len() {
        let _ = write!(out, "… ({} more bytes)", text.len() - cut);
    }
    out
}

/// [`excerpt_of`] with [`EXCERPT_CHARS`] characters.
pub fn excerpt(text: &str) -> String {
    excerpt_of(text, EXCERPT_CHARS)
}

/// `text` quoted as a bounded, inert excerpt: `"abc"`, or `"abc…" (812345 more bytes)`. For quoting a value
/// from outside (an id, a cell) in a message.
pub fn quote(text: &str) -> String {
    let cut = text
        .char_indices()
        .nth(EXCERPT_CHARS)
        .map_or(text.len(), |(i, _)| i);
    let shown: String = text[..cut].chars().flat_map(char::escape_debug).collect();
    let shown = inert(&shown).into_owned();
    match cut < text.len() {
        true => format!("\"{shown}…\" ({} more bytes)", text.len() - cut),
        false => format!("\"{shown}\""),
    }
}

/// The bytes of `text` around byte `offset` (at most [`EXCERPT_CHARS`] characters each side, made [`inert`]),
/// as `at byte OFFSET: …before⟨here⟩after…`; for pointing at a parse error in a long line without echoing it.
pub fn excerpt_at(text: &str, offset: usize) -> String {
    let offset = floor_boundary(text, offset.min(text.len()));
    let start = text[..offset]
        .char_indices()
        .rev()
        .nth(EXCERPT_CHARS / 2 - 1)
        .map_or(0, |(i, _)| i);
    let end = text[offset..]
        .char_indices()
        .nth(EXCERPT_CHARS / 2)
        .map_or(text.len(), |(i, _)| offset + i);
    let (before, after) = (&text[start..offset], &text[offset..end]);
    let open = if start > 0 { "…" } else { "" };
    let close = if end < text.len() { "…" } else { "" };
    format!(
        "at byte {offset}: {open}{}⟨here⟩{}{close}",
        inert(before),
        inert(after)
    )
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_written_as_escapes() {
        assert_eq!(inert("plain text"), "plain text");
        assert!(matches!(inert("plain"), Cow::Borrowed(_)));
        assert_eq!(inert("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(inert("a\rb\nc\td"), "a\\rb\\nc\\td");
        assert_eq!(inert("c1\u{9b}31m"), "c1\\u{9b}31m");
        assert_eq!(inert("x\u{202e}y\u{7f}"), "x\\u{202e}y\\u{7f}");
        assert_eq!(
            inert_lines("one\n\ttwo\u{1b}]0;t\u{7}"),
            "one\n\ttwo\\u{1b}]0;t\\u{7}"
        );
        assert_eq!(inert("é 中"), "é 中");
    }

    #[test]
    fn excerpts_are_bounded_and_say_what_was_left_out() {
        let long = "x".repeat(1000);
        let e = excerpt(&long);
        assert!(e.starts_with(&"x".repeat(EXCERPT_CHARS)), "{e}");
        assert!(e.ends_with("… (880 more bytes)"), "{e}");
        assert_eq!(excerpt("short"), "short");
        assert_eq!(quote("a\"b\u{1b}"), "\"a\\\"b\\u{1b}\"");
        let q = quote(&"é".repeat(200));
        assert!(q.ends_with("…\" (160 more bytes)"), "{q}");
    }

    #[test]
    fn an_offset_is_shown_with_its_surroundings_only() {
        let text = format!("{}BAD{}", "a".repeat(500_000), "b".repeat(500_000));
        let e = excerpt_at(&text, 500_000);
        assert!(e.starts_with("at byte 500000: …"), "{e}");
        assert!(e.contains("a⟨here⟩BADb"), "{e}");
        assert!(e.len() < 300, "{}", e.len());
        assert_eq!(excerpt_at("ab\u{1b}", 1), "at byte 1: a⟨here⟩b\\u{1b}");
        // An offset inside a character steps back to its start.
        assert_eq!(excerpt_at("é", 1), "at byte 0: ⟨here⟩é");
    }
}
