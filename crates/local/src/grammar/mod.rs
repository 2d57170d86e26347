//! Grammar-constrained decoding from a request's JSON schema, as llama.cpp's server does it without LLGuidance:
//! the schema becomes a GBNF grammar by the rules of its `json-schema-to-grammar` ([`schema`]), the grammar is
//! parsed into its rules ([`gbnf`]) and matched with its pushdown stacks ([`stacks`]), and each sample keeps
//! its own [`State`].
//!
//! **Sampling.** llama.cpp's `common_sampler_sample` samples first and checks only the chosen token against the
//! grammar; when the grammar refuses it, it masks every token the grammar refuses and samples again. [`State`]
//! gives the two steps ([`State::allows`], [`State::mask`]) and the batch follows the same order, so at
//! temperature 0 the choice is the best token the grammar allows, and a sample that never leaves the grammar
//! pays one check per token.
//!
//! **Tokens.** A token's text is llama.cpp's piece with special tokens rendered (`token_to_piece(id, special =
//! true)`): the grammar reads control tokens as their text, refuses tokens with no text (unused ones), and allows
//! an end-of-generation token only where the grammar can end (a stack is empty).

pub(crate) mod gbnf;
pub(crate) mod schema;
pub(crate) mod stacks;

use std::sync::Arc;

use stacks::{decode_utf8, Candidate, Partial, Rules, Stack};

/// A compiled grammar, shared by every sample of every request that sends the same schema.
pub(crate) struct Grammar {
    rules: Rules,
    initial: Vec<Stack>,
    /// The GBNF text it was built from.
    pub text: String,
}

impl std::fmt::Debug for Grammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammar")
            .field("text", &self.text)
            .finish_non_exhaustive()
    }
}

impl Grammar {
    /// The grammar of a JSON schema.
    pub(crate) fn from_schema(schema: &serde_json::Value) -> Result<Grammar, String> {
        let text = schema::to_grammar(schema).map_err(|e| e.to_string())?;
        Grammar::parse(text)
    }

    /// Parses GBNF text whose start rule is `root`.
    pub(crate) fn parse(text: String) -> Result<Grammar, String> {
        let parsed = gbnf::parse(&text)?;
        let rules = Rules::new(&parsed);
        let initial = rules.initial(parsed.root);
        Ok(Grammar {
            rules,
            initial,
            text,
        })
    }
}

/// The model's tokens as the grammar reads them.
pub(crate) struct Vocab {
    pieces: Vec<Vec<u8>>,
    /// Each piece decoded from a character boundary: its characters (0-terminated) and the character left open.
    decoded: Vec<(Vec<u32>, Partial)>,
    /// End-of-generation tokens, sorted.
    eog: Vec<u32>,
}

impl Vocab {
    pub(crate) fn new(pieces: Vec<Vec<u8>>, mut eog: Vec<u32>) -> Vocab {
        eog.sort_unstable();
        let decoded = pieces
            .iter()
            .map(|p| decode_utf8(p, Partial::default()))
            .collect();
        Vocab {
            pieces,
            decoded,
            eog,
        }
    }

    fn is_eog(&self, token: u32) -> bool {
        self.eog.binary_search(&token).is_ok()
    }

    pub(crate) fn len(&self) -> usize {
        self.pieces.len()
    }
}

/// One sample's place in a grammar.
pub(crate) struct State {
    grammar: Arc<Grammar>,
    vocab: Arc<Vocab>,
    stacks: Vec<Stack>,
    partial: Partial,
}

impl State {
    pub(crate) fn new(grammar: Arc<Grammar>, vocab: Arc<Vocab>) -> State {
        State {
            stacks: grammar.initial.clone(),
            grammar,
            vocab,
            partial: Partial::default(),
        }
    }

    /// Whether the grammar can end here.
    fn can_end(&self) -> bool {
        self.stacks.iter().any(Vec::is_empty)
    }

    /// The candidate for `token`, or `None` when the token is refused outright (no text, or a text that starts
    /// with NUL). Its characters are decoded again only when a character is open from the last token.
    fn candidate<'a>(&'a self, token: usize, buf: &'a mut Vec<u32>) -> Option<Candidate<'a>> {
        let piece = self.vocab.pieces.get(token)?;
        if piece.first().is_none_or(|&b| b == 0) {
            return None;
        }
        // A token after a complete character decodes as it does from the start of the text.
        if self.partial.n_remain <= 0 {
            let (chars, partial) = &self.vocab.decoded[token];
            return Some(Candidate {
                index: token,
                chars,
                at: 0,
                partial: *partial,
            });
        }
        let (chars, partial) = decode_utf8(piece, self.partial);
        *buf = chars;
        Some(Candidate {
            index: token,
            chars: buf,
            at: 0,
            partial,
        })
    }

    /// Whether the grammar allows `token` next (llama.cpp's one-token check).
    pub(crate) fn allows(&self, token: u32) -> bool {
        if self.vocab.is_eog(token) {
            return self.can_end();
        }
        let mut buf = Vec::new();
        let Some(c) = self.candidate(token as usize, &mut buf) else {
            return false;
        };
        self.grammar.rules.reject(&self.stacks, vec![c]).is_empty()
    }

    /// Sets the logit of every token the grammar refuses to minus infinity (llama.cpp's
    /// `llama_grammar_apply_impl` over the whole vocabulary). Logits past the vocabulary are refused too.
    pub(crate) fn mask(&self, logits: &mut [f32]) {
        let can_end = self.can_end();
        let vocab = &self.vocab;
        let open = self.partial.n_remain > 0;
        let decoded: Vec<(Vec<u32>, Partial)> = if open {
            vocab
                .pieces
                .iter()
                .map(|p| decode_utf8(p, self.partial))
                .collect()
        } else {
            Vec::new()
        };
        let mut candidates = Vec::with_capacity(logits.len());
        for (i, l) in logits.iter_mut().enumerate() {
            if i >= vocab.len() {
                *l = f32::NEG_INFINITY;
                continue;
            }
            if vocab.is_eog(i as u32) {
                if !can_end {
                    *l = f32::NEG_INFINITY;
                }
                continue;
            }
            let piece = &vocab.pieces[i];
            if piece.first().is_none_or(|&b| b == 0) {
                *l = f32::NEG_INFINITY;
                continue;
            }
            let (chars, partial) = if open { &decoded[i] } else { &vocab.decoded[i] };
            candidates.push(Candidate {
                index: i,
                chars,
                at: 0,
                partial: *partial,
            });
        }
        for c in self.grammar.rules.reject(&self.stacks, candidates) {
            logits[c.index] = f32::NEG_INFINITY;
        }
    }

    /// Moves the grammar on by `token` (one it allowed). An end-of-generation token changes nothing.
    pub(crate) fn accept(&mut self, token: u32) {
        if self.vocab.is_eog(token) {
            return;
        }
        let Some(piece) = self.vocab.pieces.get(token as usize) else {
            return;
        };
        let (chars, partial) = decode_utf8(piece, self.partial);
        let stacks = self
            .grammar
            .rules
            .accept(&self.stacks, &chars[..chars.len() - 1]);
        self.stacks = stacks;
        self.partial = partial;
    }

    /// Whether no token can follow any more (every stack gone).
    pub(crate) fn is_dead(&self) -> bool {
        self.stacks.is_empty()
    }
}

#[cfg(test)]
mod tests;
