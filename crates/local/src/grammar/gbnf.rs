//! GBNF text to rules, as llama.cpp's `llama_grammar_parser` (`src/llama-grammar.cpp`) builds them: the same
//! elements, the same synthesized rules for groups and repetitions (`S{m,n}` becomes `S` m times and a chain of
//! optional rules), so the stacks built over them are llama.cpp's. Token references (`<[id]>`) are not read:
//! grammars here come from JSON schemas, which never hold them.

use std::collections::HashMap;

/// llama.cpp's `MAX_REPETITION_THRESHOLD`.
const MAX_REPETITION: u64 = 2000;

/// llama.cpp's `llama_gretype`, without the token kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// End of a rule definition.
    End,
    /// Start of an alternate definition of the rule.
    Alt,
    /// A non-terminal: the rule with this id.
    RuleRef,
    /// A character, or the start of a character set.
    Char,
    /// The start of an inverse character set (`[^...]`).
    CharNot,
    /// The upper end of a range (`[a-z]`), after a `Char` or `CharAlt`.
    CharRngUpper,
    /// Another character of a set (`[ab]`).
    CharAlt,
    /// Any character (`.`).
    CharAny,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Elem {
    pub kind: Kind,
    pub value: u32,
}

const fn elem(kind: Kind, value: u32) -> Elem {
    Elem { kind, value }
}

/// Rules by id, each ending with [`Kind::End`].
#[derive(Debug)]
pub(crate) struct Parsed {
    pub rules: Vec<Vec<Elem>>,
    pub root: u32,
}

/// Parses GBNF text; the error says where it stopped.
pub(crate) fn parse(src: &str) -> Result<Parsed, String> {
    let mut p = Parser {
        src: src.as_bytes(),
        symbols: HashMap::new(),
        rules: Vec::new(),
    };
    let mut pos = p.space(0, true);
    while pos < p.src.len() {
        pos = p.rule(pos)?;
    }
    for rule in &p.rules {
        if rule.is_empty() {
            return Err("undefined rule".into());
        }
        for e in rule {
            if e.kind == Kind::RuleRef && p.rules.get(e.value as usize).is_none_or(|r| r.is_empty())
            {
                let name = p
                    .symbols
                    .iter()
                    .find(|(_, &id)| id == e.value)
                    .map_or("?", |(n, _)| n.as_str());
                return Err(format!("undefined rule identifier '{name}'"));
            }
        }
    }
    let root = *p
        .symbols
        .get("root")
        .ok_or("the grammar has no `root` rule")?;
    Ok(Parsed {
        rules: p.rules,
        root,
    })
}

struct Parser<'a> {
    src: &'a [u8],
    symbols: HashMap<String, u32>,
    rules: Vec<Vec<Elem>>,
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

impl Parser<'_> {
    fn at(&self, pos: usize) -> u8 {
        self.src.get(pos).copied().unwrap_or(0)
    }

    fn context(&self, pos: usize) -> String {
        let end = (pos + 30).min(self.src.len());
        String::from_utf8_lossy(&self.src[pos.min(end)..end]).into_owned()
    }

    fn space(&self, mut pos: usize, newline_ok: bool) -> usize {
        loop {
            match self.at(pos) {
                b' ' | b'\t' => pos += 1,
                b'\r' | b'\n' if newline_ok => pos += 1,
                b'#' => {
                    while !matches!(self.at(pos), 0 | b'\r' | b'\n') {
                        pos += 1;
                    }
                }
                _ => return pos,
            }
        }
    }

    fn name(&self, pos: usize) -> Result<usize, String> {
        let mut end = pos;
        while is_word(self.at(end)) {
            end += 1;
        }
        if end == pos {
            return Err(format!("expecting name at {}", self.context(pos)));
        }
        Ok(end)
    }

    fn int(&self, pos: usize) -> Result<(u64, usize), String> {
        let mut end = pos;
        while self.at(end).is_ascii_digit() {
            end += 1;
        }
        let text = std::str::from_utf8(&self.src[pos..end]).unwrap_or("");
        let value = text
            .parse()
            .map_err(|_| format!("expecting integer at {}", self.context(pos)))?;
        Ok((value, end))
    }

    fn symbol_id(&mut self, name: &str) -> u32 {
        let next = self.symbols.len() as u32;
        *self.symbols.entry(name.to_string()).or_insert(next)
    }

    fn generate_symbol_id(&mut self, base: &str) -> u32 {
        let next = self.symbols.len() as u32;
        self.symbols.insert(format!("{base}_{next}"), next);
        next
    }

    fn add_rule(&mut self, id: u32, rule: Vec<Elem>) {
        let id = id as usize;
        if self.rules.len() <= id {
            self.rules.resize(id + 1, Vec::new());
        }
        self.rules[id] = rule;
    }

    fn rule(&mut self, pos: usize) -> Result<usize, String> {
        let name_end = self.name(pos)?;
        let name = String::from_utf8_lossy(&self.src[pos..name_end]).into_owned();
        let mut pos = self.space(name_end, false);
        let id = self.symbol_id(&name);
        if !self.src[pos..].starts_with(b"::=") {
            return Err(format!("expecting ::= at {}", self.context(pos)));
        }
        pos = self.space(pos + 3, true);
        pos = self.alternates(pos, &name, id, false)?;
        match self.at(pos) {
            b'\r' => pos += if self.at(pos + 1) == b'\n' { 2 } else { 1 },
            b'\n' => pos += 1,
            0 => {}
            _ => return Err(format!("expecting newline or end at {}", self.context(pos))),
        }
        Ok(self.space(pos, true))
    }

    fn alternates(
        &mut self,
        pos: usize,
        name: &str,
        id: u32,
        nested: bool,
    ) -> Result<usize, String> {
        let mut rule = Vec::new();
        let mut pos = self.sequence(pos, name, &mut rule, nested)?;
        while self.at(pos) == b'|' {
            rule.push(elem(Kind::Alt, 0));
            pos = self.space(pos + 1, true);
            pos = self.sequence(pos, name, &mut rule, nested)?;
        }
        rule.push(elem(Kind::End, 0));
        self.add_rule(id, rule);
        Ok(pos)
    }

    /// One character of a literal or set: an escape or a UTF-8 character.
    fn char(&self, pos: usize) -> Result<(u32, usize), String> {
        if self.at(pos) == b'\\' {
            let hex = |n: usize| -> Result<(u32, usize), String> {
                let start = pos + 2;
                let digits = self.src.get(start..start + n).unwrap_or(&[]);
                let text = std::str::from_utf8(digits).unwrap_or("");
                match u32::from_str_radix(text, 16) {
                    Ok(v) if digits.len() == n => Ok((v, start + n)),
                    _ => Err(format!(
                        "expecting {n} hex chars at {}",
                        self.context(start)
                    )),
                }
            };
            return match self.at(pos + 1) {
                b'x' => hex(2),
                b'u' => hex(4),
                b'U' => hex(8),
                b't' => Ok(('\t' as u32, pos + 2)),
                b'r' => Ok(('\r' as u32, pos + 2)),
                b'n' => Ok(('\n' as u32, pos + 2)),
                c @ (b'\\' | b'"' | b'[' | b']' | b'-') => Ok((u32::from(c), pos + 2)),
                _ => Err(format!("unknown escape at {}", self.context(pos))),
            };
        }
        if pos >= self.src.len() {
            return Err("unexpected end of input".into());
        }
        let rest = &self.src[pos..];
        let len = match rest[0] >> 4 {
            0xC | 0xD => 2,
            0xE => 3,
            0xF => 4,
            _ => 1,
        };
        let text = rest.get(..len).and_then(|b| std::str::from_utf8(b).ok());
        match text.and_then(|t| t.chars().next()) {
            Some(c) => Ok((c as u32, pos + len)),
            None => Err(format!("invalid UTF-8 at {}", self.context(pos))),
        }
    }

    fn sequence(
        &mut self,
        mut pos: usize,
        name: &str,
        rule: &mut Vec<Elem>,
        nested: bool,
    ) -> Result<usize, String> {
        let mut last_sym_start = rule.len();
        let mut n_prev_rules: u64 = 1;
        while pos < self.src.len() {
            match self.at(pos) {
                b'"' => {
                    pos += 1;
                    last_sym_start = rule.len();
                    n_prev_rules = 1;
                    while self.at(pos) != b'"' {
                        if pos >= self.src.len() {
                            return Err("unexpected end of input".into());
                        }
                        let (c, next) = self.char(pos)?;
                        rule.push(elem(Kind::Char, c));
                        pos = next;
                    }
                    pos = self.space(pos + 1, nested);
                }
                b'[' => {
                    pos += 1;
                    let mut start = Kind::Char;
                    if self.at(pos) == b'^' {
                        pos += 1;
                        start = Kind::CharNot;
                    }
                    last_sym_start = rule.len();
                    n_prev_rules = 1;
                    while self.at(pos) != b']' {
                        if pos >= self.src.len() {
                            return Err("unexpected end of input".into());
                        }
                        let (c, next) = self.char(pos)?;
                        pos = next;
                        let kind = if last_sym_start < rule.len() {
                            Kind::CharAlt
                        } else {
                            start
                        };
                        rule.push(elem(kind, c));
                        if self.at(pos) == b'-' && self.at(pos + 1) != b']' {
                            if pos + 1 >= self.src.len() {
                                return Err("unexpected end of input".into());
                            }
                            let (end, next) = self.char(pos + 1)?;
                            pos = next;
                            rule.push(elem(Kind::CharRngUpper, end));
                        }
                    }
                    pos = self.space(pos + 1, nested);
                }
                c if is_word(c) => {
                    let end = self.name(pos)?;
                    let ref_name = String::from_utf8_lossy(&self.src[pos..end]).into_owned();
                    let id = self.symbol_id(&ref_name);
                    pos = self.space(end, nested);
                    last_sym_start = rule.len();
                    n_prev_rules = 1;
                    rule.push(elem(Kind::RuleRef, id));
                }
                b'(' => {
                    pos = self.space(pos + 1, true);
                    let before = self.symbols.len() as u64;
                    let sub = self.generate_symbol_id(name);
                    pos = self.alternates(pos, name, sub, true)?;
                    n_prev_rules = (self.symbols.len() as u64 - before).max(1);
                    last_sym_start = rule.len();
                    rule.push(elem(Kind::RuleRef, sub));
                    if self.at(pos) != b')' {
                        return Err(format!("expecting ')' at {}", self.context(pos)));
                    }
                    pos = self.space(pos + 1, nested);
                }
                b'.' => {
                    last_sym_start = rule.len();
                    n_prev_rules = 1;
                    rule.push(elem(Kind::CharAny, 0));
                    pos = self.space(pos + 1, nested);
                }
                c @ (b'*' | b'+' | b'?') => {
                    pos = self.space(pos + 1, nested);
                    let (min, max) = match c {
                        b'*' => (0, None),
                        b'+' => (1, None),
                        _ => (0, Some(1)),
                    };
                    self.repeat(name, rule, last_sym_start, &mut n_prev_rules, min, max, pos)?;
                }
                b'{' => {
                    pos = self.space(pos + 1, nested);
                    if !self.at(pos).is_ascii_digit() {
                        return Err(format!("expecting an int at {}", self.context(pos)));
                    }
                    let (min, end) = self.int(pos)?;
                    pos = self.space(end, nested);
                    let mut max = None;
                    match self.at(pos) {
                        b'}' => {
                            max = Some(min);
                            pos = self.space(pos + 1, nested);
                        }
                        b',' => {
                            pos = self.space(pos + 1, nested);
                            if self.at(pos).is_ascii_digit() {
                                let (m, end) = self.int(pos)?;
                                max = Some(m);
                                pos = self.space(end, nested);
                            }
                            if self.at(pos) != b'}' {
                                return Err(format!("expecting '}}' at {}", self.context(pos)));
                            }
                            pos = self.space(pos + 1, nested);
                        }
                        _ => return Err(format!("expecting ',' at {}", self.context(pos))),
                    }
                    if min > MAX_REPETITION {
                        return Err("number of repetitions exceeds sane defaults".into());
                    }
                    let max = max.filter(|&m| m <= MAX_REPETITION);
                    self.repeat(name, rule, last_sym_start, &mut n_prev_rules, min, max, pos)?;
                }
                _ => break,
            }
        }
        Ok(pos)
    }

    /// llama.cpp's `handle_repetitions`: `S{m,n}` as `S` m times, then n - m nested optional rules (or one
    /// recursive rule when there is no maximum).
    #[allow(clippy::too_many_arguments)]
    fn repeat(
        &mut self,
        name: &str,
        rule: &mut Vec<Elem>,
        last_sym_start: usize,
        n_prev_rules: &mut u64,
        min: u64,
        max: Option<u64>,
        pos: usize,
    ) -> Result<(), String> {
        if last_sym_start == rule.len() {
            return Err(format!(
                "expecting preceding item to */+/?/{{ at {}",
                self.context(pos)
            ));
        }
        let prev: Vec<Elem> = rule[last_sym_start..].to_vec();
        let total = match max {
            Some(m) if m > 0 => m,
            _ if min > 0 => min,
            _ => 1,
        };
        if n_prev_rules.saturating_mul(total) >= MAX_REPETITION {
            return Err(
                "number of rules that are going to be repeated multiplied by the new repetition \
                        exceeds sane defaults"
                    .into(),
            );
        }
        if min == 0 {
            rule.truncate(last_sym_start);
        } else {
            for _ in 1..min {
                rule.extend_from_slice(&prev);
            }
        }
        let n_opt = max.map_or(1, |m| m - min);
        let mut last_rec = 0;
        for i in 0..n_opt {
            let mut rec = prev.clone();
            let id = self.generate_symbol_id(name);
            if i > 0 || max.is_none() {
                rec.push(elem(
                    Kind::RuleRef,
                    if max.is_none() { id } else { last_rec },
                ));
            }
            rec.push(elem(Kind::Alt, 0));
            rec.push(elem(Kind::End, 0));
            self.add_rule(id, rec);
            last_rec = id;
        }
        if n_opt > 0 {
            rule.push(elem(Kind::RuleRef, last_rec));
        }
        *n_prev_rules *= total;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions_become_chains_of_optional_rules() {
        let g = parse("root ::= [0-9]{1,3}\n").unwrap();
        let root = &g.rules[g.root as usize];
        // [0-9] once, then a reference to the two-deep optional chain.
        assert_eq!(root[0], elem(Kind::Char, '0' as u32));
        assert_eq!(root[1], elem(Kind::CharRngUpper, '9' as u32));
        assert_eq!(root[2].kind, Kind::RuleRef);
        assert_eq!(root[3].kind, Kind::End);
        assert_eq!(g.rules.len(), 3);
    }

    #[test]
    fn errors_say_where() {
        let e = parse("root ::= \"a\" (b\n").unwrap_err();
        assert!(
            e.contains("expecting ')'") || e.contains("undefined"),
            "{e}"
        );
        assert!(parse("root ::= x\n").unwrap_err().contains("'x'"));
    }
}
