//! llama.cpp's SentencePiece tokenizer (`llm_tokenizer_spm` in its `src/llama-vocab.cpp`), for GGUFs whose
//! `tokenizer.ggml.model` is `llama` (Gemma, Llama 2, Mistral 7B v0.1).
//!
//! It is written out rather than built from the `tokenizers` crate because llama.cpp does not run SentencePiece
//! itself: it merges the best-scoring adjacent pair first, over the GGUF's token scores, and its own pass that cuts
//! control and user-defined tokens out of the text first (`tokenizer_st_partition`) goes longest token first over
//! the whole text, not leftmost first. Matching llama.cpp token for token means doing what it does.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// SentencePiece's visible space, which stands for `' '` inside tokens.
const SPACE: &str = "\u{2581}";

/// What a GGUF `tokenizer.ggml.token_type` says a token is (llama.cpp's `llama_token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
    Undefined,
}

impl Kind {
    pub fn from_gguf(t: i64) -> Kind {
        match t {
            1 => Kind::Normal,
            2 => Kind::Unknown,
            3 => Kind::Control,
            4 => Kind::UserDefined,
            5 => Kind::Unused,
            6 => Kind::Byte,
            _ => Kind::Undefined,
        }
    }

    /// Tokens llama.cpp leaves out of text unless asked for special tokens (parsing and rendering alike).
    fn is_special(self) -> bool {
        matches!(self, Kind::Control | Kind::Unknown)
    }
}

/// A SentencePiece vocabulary as llama.cpp loads it from GGUF metadata.
#[derive(Debug)]
pub(crate) struct Spm {
    pieces: Vec<String>,
    scores: Vec<f32>,
    kinds: Vec<Kind>,
    ids: HashMap<String, u32>,
    /// Control, user-defined and unknown tokens, longest text first: the order llama.cpp cuts them out of text.
    specials: Vec<u32>,
    /// Byte-fallback token of each byte value.
    bytes: Vec<Option<u32>>,
    add_space_prefix: bool,
}

/// A stretch of the input: text still to tokenize (a byte range), or a special token already cut out.
#[derive(Debug, Clone, Copy)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

impl Spm {
    /// Checks and indexes a vocabulary: `scores` and `kinds` hold one entry per piece (llama.cpp defaults a
    /// missing score to 0 and a missing type to normal before this).
    pub fn new(
        mut pieces: Vec<String>,
        scores: Vec<f32>,
        kinds: Vec<Kind>,
        add_space_prefix: bool,
    ) -> Result<Spm, String> {
        if scores.len() != pieces.len() || kinds.len() != pieces.len() {
            return Err(format!(
                "{} tokens but {} scores and {} token types",
                pieces.len(),
                scores.len(),
                kinds.len()
            ));
        }
        let mut ids = HashMap::with_capacity(pieces.len());
        for (i, piece) in pieces.iter_mut().enumerate() {
            // llama.cpp renames empty tokens so that no special token can match the empty string.
            if piece.is_empty() {
                *piece = format!("[EMPTY_{i}]");
            }
            let id = u32::try_from(i).map_err(|_| "more than 2^32 tokens".to_string())?;
            if let Some(first) = ids.insert(piece.clone(), id) {
                return Err(format!("duplicate token `{piece}` (ids {first} and {id})"));
            }
        }
        let bytes = byte_tokens(&pieces, &kinds, &ids)?;
        let mut specials: Vec<u32> = (0..pieces.len())
            .filter(|&i| matches!(kinds[i], Kind::Control | Kind::UserDefined | Kind::Unknown))
            .map(|i| i as u32)
            .collect();
        // llama.cpp's std::sort leaves the order of equal lengths unspecified; ties go by id here.
        specials.sort_by_key(|&id| std::cmp::Reverse(pieces[id as usize].len()));
        Ok(Spm {
            pieces,
            scores,
            kinds,
            ids,
            specials,
            bytes,
            add_space_prefix,
        })
    }

    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    pub fn token_to_id(&self, piece: &str) -> Option<u32> {
        self.ids.get(piece).copied()
    }

    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    /// llama.cpp's `tokenize(text, add_special = false, parse_special)`: special tokens first, then each piece of
    /// text between them, with a space in front of a piece that follows a special token (or starts the text) when
    /// the vocabulary adds a space prefix. BOS is the caller's.
    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<u32>, String> {
        let mut out = Vec::new();
        let mut after_special = true;
        for fragment in self.partition(text, parse_special) {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Fragment::Text(start, end) => {
                    let mut piece = String::with_capacity(end - start + 1);
                    if self.add_space_prefix && after_special {
                        piece.push(' ');
                    }
                    piece.push_str(&text[start..end]);
                    self.merge(&piece.replace(' ', SPACE), &mut out)?;
                    after_special = false;
                }
            }
        }
        Ok(out)
    }

    /// The text of token ids, each token's piece after the other as llama.cpp's `token_to_piece` gives it:
    /// `▁` back to a space, byte tokens as their byte, control and unknown tokens as their text unless
    /// `skip_special`, unused ones as nothing. Bytes that do not form UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, String> {
        let mut bytes = Vec::new();
        for &id in ids {
            let i = id as usize;
            let Some(&kind) = self.kinds.get(i) else {
                return Err(format!(
                    "token id {id} is outside the vocabulary of {} tokens",
                    self.pieces.len()
                ));
            };
            if !(kind.is_special() && skip_special) {
                bytes.extend(self.piece(id));
            }
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// One token's bytes as llama.cpp's `token_to_piece(id, special = true)` gives them (nothing for an id
    /// outside the vocabulary).
    pub fn piece(&self, id: u32) -> Vec<u8> {
        let i = id as usize;
        let (Some(piece), Some(&kind)) = (self.pieces.get(i), self.kinds.get(i)) else {
            return Vec::new();
        };
        match kind {
            Kind::Control | Kind::Unknown | Kind::UserDefined => piece.as_bytes().to_vec(),
            Kind::Normal => piece.replace(SPACE, " ").into_bytes(),
            Kind::Byte => vec![byte_value(piece).unwrap_or(0)],
            Kind::Unused | Kind::Undefined => Vec::new(),
        }
    }

    /// `tokenizer_st_partition`: for each special token, longest first, cut every occurrence out of every piece
    /// of text that is left. Control and unknown tokens only when `parse_special`; user-defined ones always.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        let mut fragments = Vec::new();
        if !text.is_empty() {
            fragments.push(Fragment::Text(0, text.len()));
        }
        for &id in &self.specials {
            if !parse_special && self.kinds[id as usize].is_special() {
                continue;
            }
            let piece = self.pieces[id as usize].as_str();
            if !text.contains(piece) {
                continue;
            }
            fragments = fragments
                .into_iter()
                .flat_map(|f| cut(text, f, piece, id))
                .collect();
        }
        fragments
    }

    /// `llm_tokenizer_spm_session::tokenize` on escaped text: start from single characters, repeatedly merge the
    /// adjacent pair whose union is the best-scoring token (leftmost on ties), then emit each symbol's token, or its
    /// bytes' fallback tokens when the symbol is a character the vocabulary lacks.
    fn merge(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        let mut symbols: Vec<Symbol> = text
            .char_indices()
            .map(|(start, c)| Symbol {
                start,
                len: c.len_utf8(),
                prev: None,
                next: None,
            })
            .collect();
        let n = symbols.len();
        for (i, s) in symbols.iter_mut().enumerate() {
            s.prev = i.checked_sub(1);
            s.next = (i + 1 < n).then_some(i + 1);
        }
        let mut queue = BinaryHeap::new();
        for i in 1..n {
            self.push_bigram(text, &symbols, Some(i - 1), Some(i), &mut queue);
        }
        while let Some(b) = queue.pop() {
            let (left, right) = (symbols[b.left], symbols[b.right]);
            // A pair one of whose symbols has changed since it was queued is stale.
            if left.len == 0 || right.len == 0 || left.len + right.len != b.size {
                continue;
            }
            symbols[b.left].len += right.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = right.next;
            if let Some(next) = right.next {
                symbols[next].prev = Some(b.left);
            }
            self.push_bigram(text, &symbols, left.prev, Some(b.left), &mut queue);
            self.push_bigram(text, &symbols, Some(b.left), right.next, &mut queue);
        }
        let mut at = (n > 0).then_some(0);
        while let Some(i) = at {
            let s = symbols[i];
            self.emit(&text[s.start..s.start + s.len], out)?;
            at = s.next;
        }
        Ok(())
    }

    fn push_bigram(
        &self,
        text: &str,
        symbols: &[Symbol],
        left: Option<usize>,
        right: Option<usize>,
        queue: &mut BinaryHeap<Bigram>,
    ) {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let start = symbols[left].start;
        let size = symbols[left].len + symbols[right].len;
        if let Some(&id) = self.ids.get(&text[start..start + size]) {
            queue.push(Bigram {
                left,
                right,
                score: self.scores[id as usize],
                size,
            });
        }
    }

    /// One final symbol: its token, or one byte token per byte. (llama.cpp's `resegment` also looks up how the
    /// symbol was merged, but every merged symbol is a token, so only unmerged characters fall through.)
    fn emit(&self, piece: &str, out: &mut Vec<u32>) -> Result<(), String> {
        if let Some(&id) = self.ids.get(piece) {
            out.push(id);
            return Ok(());
        }
        for &b in piece.as_bytes() {
            match self.bytes[b as usize] {
                Some(id) => out.push(id),
                None => {
                    return Err(format!(
                    "`{piece}` is not in the vocabulary and there is no byte token for 0x{b:02X}"
                ))
                }
            }
        }
        Ok(())
    }
}

/// Splits one fragment around every occurrence of a special token's text.
fn cut(text: &str, fragment: Fragment, piece: &str, id: u32) -> Vec<Fragment> {
    let Fragment::Text(mut start, end) = fragment else {
        return vec![fragment];
    };
    let mut out = Vec::new();
    while let Some(at) = text[start..end].find(piece) {
        if at > 0 {
            out.push(Fragment::Text(start, start + at));
        }
        out.push(Fragment::Token(id));
        start += at + piece.len();
    }
    if start < end {
        out.push(Fragment::Text(start, end));
    }
    out
}

/// llama.cpp's `byte_to_token`: the `<0xXX>` token, else the one-character token of that byte.
fn byte_tokens(
    pieces: &[String],
    kinds: &[Kind],
    ids: &HashMap<String, u32>,
) -> Result<Vec<Option<u32>>, String> {
    for (i, (piece, kind)) in pieces.iter().zip(kinds).enumerate() {
        if *kind == Kind::Byte && byte_value(piece).is_none() {
            return Err(format!(
                "token {i} is a byte token but reads `{piece}`; expected `<0xXX>`"
            ));
        }
    }
    Ok((0..=255u8)
        .map(|b| {
            ids.get(&format!("<0x{b:02X}>")).copied().or_else(|| {
                b.is_ascii()
                    .then(|| ids.get(&char::from(b).to_string()).copied())
                    .flatten()
            })
        })
        .collect())
}

/// The byte of a `<0xXX>` token.
fn byte_value(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

/// A run of characters of the text being merged; `len` 0 once merged into its left neighbour.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of two adjacent symbols, ordered as llama.cpp's queue: best score first, then leftmost.
#[derive(Debug)]
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // C++ compares scores with `<`, for which NaN equals everything; partial_cmp does the same here.
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small vocabulary: `<bos>` control, `<br>` user-defined, byte tokens for `\n` and the bytes of `é`,
    /// and pieces whose scores make the merge order visible.
    fn vocab(add_space_prefix: bool) -> Spm {
        let mut v: Vec<(&str, f32, Kind)> = vec![
            ("<unk>", 0.0, Kind::Unknown),
            ("<bos>", 0.0, Kind::Control),
            ("<br>", 0.0, Kind::UserDefined),
            ("<0x0A>", 0.0, Kind::Byte),
            ("<0xC3>", 0.0, Kind::Byte),
            ("<0xA9>", 0.0, Kind::Byte),
            ("▁", -1.0, Kind::Normal),
            ("a", -1.0, Kind::Normal),
            ("b", -1.0, Kind::Normal),
            ("c", -1.0, Kind::Normal),
            ("ab", -3.0, Kind::Normal),
            ("bc", -2.0, Kind::Normal),
            ("abc", -5.0, Kind::Normal),
            ("▁a", -4.0, Kind::Normal),
        ];
        v.push(("<unused0>", 0.0, Kind::Unused));
        Spm::new(
            v.iter().map(|t| t.0.to_string()).collect(),
            v.iter().map(|t| t.1).collect(),
            v.iter().map(|t| t.2).collect(),
            add_space_prefix,
        )
        .expect("valid vocabulary")
    }

    fn ids(spm: &Spm, text: &str) -> Vec<u32> {
        spm.encode(text, true).expect("encodes")
    }

    #[test]
    fn best_score_merges_first_then_merged_symbols_merge_again() {
        let v = vocab(false);
        // "bc" (-2) beats "ab" (-3); "a"+"bc" then forms "abc".
        assert_eq!(ids(&v, "abc"), vec![12]);
        // "ab" then nothing better: "ab", "a".
        assert_eq!(ids(&v, "aba"), vec![10, 7]);
    }

    #[test]
    fn equal_scores_merge_leftmost_first() {
        let v = Spm::new(
            ["a", "aa"].map(String::from).to_vec(),
            vec![-1.0, -1.0],
            vec![Kind::Normal; 2],
            false,
        )
        .expect("valid");
        // "aaa": the left pair merges first, leaving the last "a".
        assert_eq!(ids(&v, "aaa"), vec![1, 0]);
    }

    #[test]
    fn spaces_are_escaped_and_the_prefix_follows_the_setting() {
        assert_eq!(ids(&vocab(false), "a a"), vec![7, 13]);
        assert_eq!(ids(&vocab(true), "a"), vec![13]);
        // After a special token the prefix comes back; inside text it does not.
        assert_eq!(ids(&vocab(true), "a<br>a"), vec![13, 2, 13]);
    }

    #[test]
    fn unknown_characters_fall_back_to_byte_tokens() {
        assert_eq!(ids(&vocab(false), "é\n"), vec![4, 5, 3]);
        let err = vocab(false)
            .encode("z", true)
            .expect_err("no byte token for z");
        assert!(err.contains("0x7A"), "{err}");
    }

    #[test]
    fn control_tokens_only_when_parsing_special_user_defined_always() {
        let mut pieces = vec!["<bos>".to_string(), "<br>".to_string()];
        pieces.extend(b"<bos>".iter().map(|b| format!("<0x{b:02X}>")));
        let mut kinds = vec![Kind::Control, Kind::UserDefined];
        kinds.extend([Kind::Byte; 5]);
        let v = Spm::new(pieces, vec![0.0; 7], kinds, false).expect("valid");
        assert_eq!(v.encode("<br><bos>", true).unwrap(), vec![1, 0]);
        assert_eq!(
            v.encode("<br><bos>", false).unwrap(),
            vec![1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn decode_restores_spaces_bytes_and_skips_special_on_request() {
        let v = vocab(false);
        assert_eq!(
            v.decode(&[1, 13, 4, 5, 3, 14], false).unwrap(),
            "<bos> aé\n"
        );
        assert_eq!(v.decode(&[1, 2, 7], true).unwrap(), "<br>a");
        assert!(v.decode(&[99], false).is_err());
    }

    #[test]
    fn bad_vocabularies_are_errors() {
        let dup = Spm::new(
            ["a", "a"].map(String::from).to_vec(),
            vec![0.0; 2],
            vec![Kind::Normal; 2],
            false,
        );
        assert!(dup.expect_err("duplicate").contains("duplicate"));
        let byte = Spm::new(vec!["<0xZZ>".into()], vec![0.0], vec![Kind::Byte], false);
        assert!(byte.expect_err("bad byte").contains("<0xXX>"));
        let short = Spm::new(vec!["a".into()], vec![], vec![Kind::Normal], false);
        assert!(short.is_err());
    }
}
