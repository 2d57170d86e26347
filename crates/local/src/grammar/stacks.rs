//! llama.cpp's grammar matcher (`src/llama-grammar.cpp`): a set of pushdown stacks of positions in the rules,
//! each ending at a terminal; a character moves every stack that accepts it on; a token is a run of characters
//! (decoded from UTF-8, a character split across tokens carried as [`Partial`]); the end of generation is
//! allowed where a stack is empty. Candidates are rejected as llama.cpp rejects them
//! (`llama_grammar_reject_candidates`), character position by character position over all stacks at once.

use std::collections::HashSet;

use super::gbnf::{Elem, Kind, Parsed};

/// A position: an index into [`Rules::elems`].
pub(crate) type Pos = u32;
/// Innermost position last.
pub(crate) type Stack = Vec<Pos>;

/// The rules laid end to end, so a position is one index.
pub(crate) struct Rules {
    elems: Vec<Elem>,
    starts: Vec<Pos>,
}

/// A UTF-8 character cut by the end of a token: its bits so far and how many bytes are missing (llama.cpp's
/// `llama_partial_utf8`; `n_remain` -1 marks an invalid sequence).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Partial {
    pub value: u32,
    pub n_remain: i32,
}

impl Rules {
    pub(crate) fn new(parsed: &Parsed) -> Rules {
        let mut elems = Vec::new();
        let mut starts = Vec::with_capacity(parsed.rules.len());
        for rule in &parsed.rules {
            starts.push(elems.len() as Pos);
            elems.extend_from_slice(rule);
        }
        Rules { elems, starts }
    }

    fn at(&self, pos: Pos) -> Elem {
        self.elems[pos as usize]
    }

    fn is_end_of_sequence(&self, pos: Pos) -> bool {
        matches!(self.at(pos).kind, Kind::End | Kind::Alt)
    }

    /// The stacks a grammar starts with: one per alternate of the root rule, advanced to terminals.
    pub(crate) fn initial(&self, root: u32) -> Vec<Stack> {
        let mut stacks = Vec::new();
        let mut pos = self.starts[root as usize];
        loop {
            let stack = if self.is_end_of_sequence(pos) {
                vec![]
            } else {
                vec![pos]
            };
            self.advance(stack, &mut stacks);
            while !self.is_end_of_sequence(pos) {
                pos += 1;
            }
            if self.at(pos).kind == Kind::Alt {
                pos += 1;
            } else {
                return stacks;
            }
        }
    }

    /// `llama_grammar_advance_stack`: expands the rule references on top of `stack` until every stack ends at a
    /// terminal (or is empty), adding each new one to `out`.
    pub(crate) fn advance(&self, stack: Stack, out: &mut Vec<Stack>) {
        let mut todo = vec![stack];
        let mut seen: HashSet<Stack> = HashSet::new();
        while let Some(cur) = todo.pop() {
            if !seen.insert(cur.clone()) {
                continue;
            }
            let Some(&top) = cur.last() else {
                if !out.contains(&cur) {
                    out.push(cur);
                }
                continue;
            };
            let e = self.at(top);
            match e.kind {
                Kind::RuleRef => {
                    let mut sub = self.starts[e.value as usize];
                    loop {
                        let mut next: Stack = cur[..cur.len() - 1].to_vec();
                        if !self.is_end_of_sequence(top + 1) {
                            next.push(top + 1);
                        }
                        if !self.is_end_of_sequence(sub) {
                            next.push(sub);
                        }
                        todo.push(next);
                        while !self.is_end_of_sequence(sub) {
                            sub += 1;
                        }
                        if self.at(sub).kind == Kind::Alt {
                            sub += 1;
                        } else {
                            break;
                        }
                    }
                }
                Kind::Char | Kind::CharNot | Kind::CharAny => {
                    if !out.contains(&cur) {
                        out.push(cur);
                    }
                }
                // A stack never rests on the end of an alternate or inside a character set.
                Kind::End | Kind::Alt | Kind::CharRngUpper | Kind::CharAlt => {}
            }
        }
    }

    /// `llama_grammar_match_char`: whether `chr` satisfies the character set at `pos`, and the position after
    /// the set.
    fn match_char(&self, mut pos: Pos, chr: u32) -> (bool, Pos) {
        let first = self.at(pos).kind;
        let positive = matches!(first, Kind::Char | Kind::CharAny);
        let mut found = false;
        loop {
            let e = self.at(pos);
            let next = self.at(pos + 1);
            if next.kind == Kind::CharRngUpper {
                found = found || (e.value <= chr && chr <= next.value);
                pos += 2;
            } else if e.kind == Kind::CharAny {
                found = true;
                pos += 1;
            } else {
                found = found || e.value == chr;
                pos += 1;
            }
            if self.at(pos).kind != Kind::CharAlt {
                break;
            }
        }
        (found == positive, pos)
    }

    /// `llama_grammar_match_partial_char`: whether some completion of `partial` could satisfy the set at `pos`.
    fn match_partial_char(&self, mut pos: Pos, partial: Partial) -> bool {
        let positive = matches!(self.at(pos).kind, Kind::Char | Kind::CharAny);
        let (value, n_remain) = (partial.value, partial.n_remain);
        if n_remain < 0 || (n_remain == 1 && value < 2) {
            return false;
        }
        let shift = (n_remain * 6) as u32;
        let mut low = value << shift;
        let high = low | ((1u32 << shift) - 1);
        if low == 0 {
            if n_remain == 2 {
                low = 1 << 11;
            } else if n_remain == 3 {
                low = 1 << 16;
            }
        }
        loop {
            let e = self.at(pos);
            let next = self.at(pos + 1);
            if next.kind == Kind::CharRngUpper {
                if e.value <= high && low <= next.value {
                    return positive;
                }
                pos += 2;
            } else if e.kind == Kind::CharAny {
                return true;
            } else {
                if low <= e.value && e.value <= high {
                    return positive;
                }
                pos += 1;
            }
            if self.at(pos).kind != Kind::CharAlt {
                return !positive;
            }
        }
    }

    /// `llama_grammar_accept_chr`: moves `stack` on by one character, adding what follows to `out`.
    fn accept_chr(&self, stack: &Stack, chr: u32, out: &mut Vec<Stack>) {
        let Some(&top) = stack.last() else { return };
        let (ok, after) = self.match_char(top, chr);
        if ok {
            let mut next: Stack = stack[..stack.len() - 1].to_vec();
            if !self.is_end_of_sequence(after) {
                next.push(after);
            }
            self.advance(next, out);
        }
    }

    /// `llama_grammar_accept_token` for a token of characters: the stacks after `chars` (the token's complete
    /// characters), each stack taken through them on its own.
    pub(crate) fn accept(&self, stacks: &[Stack], chars: &[u32]) -> Vec<Stack> {
        let mut out: Vec<Stack> = Vec::with_capacity(stacks.len());
        for stack in stacks.iter().filter(|s| !s.is_empty()) {
            let mut current = vec![stack.clone()];
            for &c in chars {
                let mut next = Vec::new();
                for s in &current {
                    self.accept_chr(s, c, &mut next);
                }
                current = next;
                if current.is_empty() {
                    break;
                }
            }
            for s in current {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// `llama_grammar_reject_candidates`: the candidates no stack accepts.
    pub(crate) fn reject<'c>(
        &self,
        stacks: &[Stack],
        candidates: Vec<Candidate<'c>>,
    ) -> Vec<Candidate<'c>> {
        if candidates.is_empty() {
            return candidates;
        }
        let Some((first, rest)) = stacks.split_first() else {
            return candidates;
        };
        let mut rejects = self.reject_for_stack(first, candidates);
        for s in rest {
            rejects = self.reject_for_stack(s, rejects);
        }
        rejects
    }

    fn reject_for_stack<'c>(
        &self,
        stack: &Stack,
        candidates: Vec<Candidate<'c>>,
    ) -> Vec<Candidate<'c>> {
        let mut rejects = Vec::new();
        let Some(&top) = stack.last() else {
            rejects.extend(
                candidates
                    .into_iter()
                    .filter(|c| c.chars[c.at] != 0 || c.partial.n_remain != 0),
            );
            return rejects;
        };
        let mut next = Vec::with_capacity(candidates.len());
        for c in candidates {
            let chr = c.chars[c.at];
            if chr == 0 {
                if c.partial.n_remain != 0 && !self.match_partial_char(top, c.partial) {
                    rejects.push(c);
                }
            } else if self.match_char(top, chr).0 {
                next.push(Candidate { at: c.at + 1, ..c });
            } else {
                rejects.push(c);
            }
        }
        if next.is_empty() {
            return rejects;
        }
        let after = self.match_char(top, 0).1;
        let mut stack_after: Stack = stack[..stack.len() - 1].to_vec();
        if !self.is_end_of_sequence(after) {
            stack_after.push(after);
        }
        let mut next_stacks = Vec::new();
        self.advance(stack_after, &mut next_stacks);
        for c in self.reject(&next_stacks, next) {
            rejects.push(Candidate { at: c.at - 1, ..c });
        }
        rejects
    }
}

/// A token being matched: its characters (0-terminated, as llama.cpp decodes them), how many are matched, and
/// the partial character at its end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate<'c> {
    pub index: usize,
    pub chars: &'c [u32],
    pub at: usize,
    pub partial: Partial,
}

/// llama.cpp's `decode_utf8(src, partial_start)`: the complete characters of `bytes` after `partial`, 0-terminated,
/// and the partial character left at the end. A NUL byte ends the text, as in C.
pub(crate) fn decode_utf8(bytes: &[u8], partial: Partial) -> (Vec<u32>, Partial) {
    const LOOKUP: [i32; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let bytes = &bytes[..end];
    let mut out = Vec::with_capacity(bytes.len() + 1);
    let mut value = partial.value;
    let mut n_remain = partial.n_remain;
    let mut pos = 0;
    while pos < bytes.len() && n_remain > 0 {
        let b = bytes[pos];
        if b >> 6 != 2 {
            out.push(0);
            return (
                out,
                Partial {
                    value: 0,
                    n_remain: -1,
                },
            );
        }
        value = (value << 6) + u32::from(b & 0x3F);
        pos += 1;
        n_remain -= 1;
    }
    if partial.n_remain > 0 && n_remain == 0 {
        out.push(value);
    }
    while pos < bytes.len() {
        let first = bytes[pos];
        n_remain = LOOKUP[usize::from(first >> 4)] - 1;
        if n_remain < 0 {
            out.clear();
            out.push(0);
            return (out, Partial { value: 0, n_remain });
        }
        let mask = (1u32 << (7 - n_remain)) - 1;
        value = u32::from(first) & mask;
        pos += 1;
        while pos < bytes.len() && n_remain > 0 {
            value = (value << 6) + u32::from(bytes[pos] & 0x3F);
            pos += 1;
            n_remain -= 1;
        }
        if n_remain == 0 {
            out.push(value);
        }
    }
    out.push(0);
    (out, Partial { value, n_remain })
}
