//! Answer normalisation for breadth items: the rules that make "The LEFT side." and "left" the same answer.
//!
//! The rules come from the answer vocabulary of VQA-RAD (3,515 questions), MedQA and MedMCQA: case, punctuation
//! and articles never matter; British and American spellings, number words and digits, "x-ray" and "xray",
//! "5cm" and "5 cm", "hypo dense" and "hypodense" are the same; "R"/"L" abbreviate sides. Decimal points between
//! digits are kept, because "0.01" and "0.02" are different answers.

/// Words that carry no meaning in a short answer.
const ARTICLES: &[&str] = &["a", "an", "the"];

/// Words dropped when comparing closed answers by content ("In the vasculature" = "vasculature",
/// "Left side" = "left").
const FILLERS: &[&str] = &[
    "side", "sided", "of", "in", "on", "at", "is", "are", "it", "its", "this", "that", "there",
    "patient", "patients", "just", "only", "located", "seen", "image", "answer",
];

/// Tokens that negate what follows them ("not enlarged", "no contrast", "without contrast").
pub(crate) const NEGATORS: &[&str] = &["not", "no", "non", "without", "never", "neither", "nor"];

/// Prefixes written as separate words or hyphenated ("non-contrast", "hyper dense") that are joined to the next
/// word, so that "non contrast" never contains the answer "contrast".
const JOINED_PREFIXES: &[&str] = &[
    "non", "hyper", "hypo", "iso", "intra", "extra", "sub", "peri",
];

/// One token rewritten to its canonical spelling.
fn canonical(token: &str) -> &str {
    match token {
        // number words
        "zero" => "0",
        "one" => "1",
        "two" => "2",
        "three" => "3",
        "four" => "4",
        "five" => "5",
        "six" => "6",
        "seven" => "7",
        "eight" => "8",
        "nine" => "9",
        "ten" => "10",
        "eleven" => "11",
        "twelve" => "12",
        "first" => "1st",
        "second" => "2nd",
        "third" => "3rd",
        "fourth" => "4th",
        "fifth" => "5th",
        // British / American spelling and common misspellings seen in the data
        "grey" => "gray",
        "haemorrhage" | "hemorrage" => "hemorrhage",
        "haemorrhagic" => "hemorrhagic",
        "haematoma" => "hematoma",
        "oedema" => "edema",
        "tumour" => "tumor",
        "tumours" => "tumors",
        "ischaemic" => "ischemic",
        "ischaemia" => "ischemia",
        "oesophagus" => "esophagus",
        "oesophageal" => "esophageal",
        "anaemia" => "anemia",
        "paediatric" => "pediatric",
        "centre" => "center",
        "abcess" | "absess" => "abscess",
        "homogenous" => "homogeneous",
        "heterogenous" => "heterogeneous",
        "asymmetrical" => "asymmetric",
        "symmetrical" => "symmetric",
        // abbreviations of sides, modalities and sequences
        "r" | "rt" => "right",
        "l" | "lt" => "left",
        "bilat" => "bilateral",
        "mr" => "mri",
        "radiograph" => "xray",
        // yes/no variants
        "yeah" | "yep" => "yes",
        "nope" => "no",
        other => other,
    }
}

/// Lower case, punctuation to spaces (decimal points between digits kept), apostrophes dropped.
fn clean(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let digit_at = |j: Option<usize>| {
            j.and_then(|j| chars.get(j))
                .is_some_and(|c| c.is_ascii_digit())
        };
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if c == '\'' || c == '\u{2019}' {
            // "patient's" -> "patients": an apostrophe joins, it does not split.
        } else if (c == '.' || c == ',') && digit_at(i.checked_sub(1)) && digit_at(Some(i + 1)) {
            // "0.01", "5,000": part of the number. Commas become nothing so "5,000" = "5000".
            if c == '.' {
                out.push('.');
            }
        } else if let Some(word) = symbol_word(c) {
            out.push(' ');
            out.push_str(word);
            out.push(' ');
        } else {
            out.push(' ');
        }
    }
    out
}

/// Symbols that carry meaning in answers ("LOD score > 3", "↓ ↑ ↓", "Rh+ve", "5%").
fn symbol_word(c: char) -> Option<&'static str> {
    Some(match c {
        '%' => "%",
        '>' => "greater",
        '<' => "less",
        '≥' => "greater equal",
        '≤' => "less equal",
        '+' => "plus",
        '↑' => "up",
        '↓' => "down",
        '↔' | '→' => "unchanged",
        _ => return None,
    })
}

/// "5cm" -> ["5", "cm"]: a number glued to a unit.
fn split_unit(token: &str) -> Option<(&str, &str)> {
    let at = token.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = token.split_at(at);
    let is_number = !number.is_empty() && number.starts_with(|c: char| c.is_ascii_digit());
    (is_number
        && matches!(
            unit,
            "cm" | "mm" | "m" | "ml" | "mg" | "kg" | "g" | "min" | "h" | "s"
        ))
    .then_some((number, unit))
}

/// The normalised tokens of a short answer: canonical spellings, no articles, prefixes joined.
pub fn tokens(text: &str) -> Vec<String> {
    let cleaned = clean(text);
    let mut raw: Vec<&str> = Vec::new();
    for t in cleaned.split_whitespace() {
        match split_unit(t) {
            Some((n, u)) => raw.extend([n, u]),
            None => raw.push(t),
        }
    }
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let t = raw[i];
        // "x ray" / "x-ray" -> "xray"
        if t == "x" && raw.get(i + 1) == Some(&"ray") {
            out.push("xray".into());
            i += 2;
            continue;
        }
        if JOINED_PREFIXES.contains(&t) {
            if let Some(next) = raw
                .get(i + 1)
                .filter(|n| n.chars().all(char::is_alphabetic))
            {
                out.push(format!("{t}{}", canonical(next)));
                i += 2;
                continue;
            }
        }
        let c = canonical(t);
        if !ARTICLES.contains(&c) {
            out.push(c.to_string());
        }
        i += 1;
    }
    out
}

/// Normalised tokens without filler words (for comparing closed answers by content).
pub fn content_tokens(text: &str) -> Vec<String> {
    let mut t = tokens(text);
    t.retain(|w| !FILLERS.contains(&w.as_str()));
    t
}

/// The first sentence or line of an answer: models often add an explanation after the short answer.
pub fn lead(answer: &str) -> &str {
    sentence_prefixes(answer).next().unwrap_or("")
}

/// The answer cut after its first sentence, its second, ..., and finally the whole answer (leading whitespace
/// dropped). A sentence ends at a line break, ";", or ".", "!", "?" followed by a space or the end, but not
/// inside a number ("5.6cm") or after "vs.".
pub fn sentence_prefixes(answer: &str) -> impl Iterator<Item = &str> {
    let trimmed = answer.trim_start();
    let bytes = trimmed.as_bytes();
    let mut ends: Vec<usize> = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        let next = bytes.get(i + 1).copied();
        let end = match b {
            b'\n' | b';' => true,
            b'.' | b'!' | b'?' => {
                next.is_none_or(|n| n.is_ascii_whitespace()) && !abbreviation_before(&trimmed[..i])
            }
            _ => false,
        };
        let fresh = ends.last().map_or(0, |&e| e + 1);
        if end && !trimmed[fresh.min(i)..i].trim().is_empty() {
            ends.push(i);
        }
    }
    ends.push(trimmed.len());
    ends.dedup();
    ends.into_iter().map(move |e| &trimmed[..e])
}

/// "vs." and "e.g." do not end a sentence.
fn abbreviation_before(text: &str) -> bool {
    let last = text
        .rsplit(|c: char| c.is_whitespace())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(last.as_str(), "vs" | "e.g" | "i.e" | "approx" | "cf")
}

/// Drops a leading "answer:", "the answer is", "final answer:" from a normalised token list.
pub fn strip_answer_prefix(tokens: &mut Vec<String>) {
    let prefix = ["final", "correct", "answer", "is"];
    let n = tokens
        .iter()
        .take_while(|t| prefix.contains(&t.as_str()))
        .count();
    if tokens[..n].iter().any(|t| t == "answer") && n < tokens.len() {
        tokens.drain(..n);
    }
}

/// Whether `needle` occurs in `hay` as a contiguous run; returns the start of the first occurrence.
pub fn find_run(hay: &[String], needle: &[String]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    (0..=hay.len() - needle.len()).find(|&i| hay[i..i + needle.len()] == *needle)
}

/// Every start of `needle` in `hay`.
pub fn find_runs(hay: &[String], needle: &[String]) -> Vec<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return Vec::new();
    }
    (0..=hay.len() - needle.len())
        .filter(|&i| hay[i..i + needle.len()] == *needle)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_numbers_units_and_prefixes() {
        assert_eq!(tokens("The Grey-matter!"), ["gray", "matter"]);
        assert_eq!(tokens("5cm"), tokens("five CM"));
        assert_eq!(tokens("0.01"), ["0.01"]);
        assert_ne!(tokens("0.01"), tokens("0.02"));
        assert_eq!(tokens("Non-contrast CT"), ["noncontrast", "ct"]);
        assert_eq!(tokens("hypo dense"), tokens("Hypodense"));
        assert_eq!(tokens("X-ray"), tokens("xray"));
        assert_eq!(tokens("R frontal lobe"), tokens("right frontal lobe"));
        assert_eq!(tokens("patient's left"), ["patients", "left"]);
        assert_eq!(content_tokens("In the vasculature"), ["vasculature"]);
        assert_eq!(content_tokens("Left side"), content_tokens("left"));
        assert_eq!(tokens("LOD score > 3"), ["lod", "score", "greater", "3"]);
        assert_ne!(tokens("Rh+ve"), tokens("Rh-ve"));
        assert_eq!(tokens("↓ ↑"), ["down", "up"]);
    }

    #[test]
    fn lead_stops_at_the_first_sentence_but_not_inside_numbers() {
        assert_eq!(lead("Left. The right side is normal."), "Left");
        assert_eq!(lead("5.6cm focal, hypodense"), "5.6cm focal, hypodense");
        assert_eq!(lead("\nAxial\nbecause"), "Axial");
        assert_eq!(
            lead("Sinusitis vs. hemorrhage. Then"),
            "Sinusitis vs. hemorrhage"
        );
    }

    #[test]
    fn answer_prefix() {
        let mut t = tokens("The answer is: left");
        strip_answer_prefix(&mut t);
        assert_eq!(t, ["left"]);
        let mut only = tokens("answer");
        strip_answer_prefix(&mut only);
        assert_eq!(only, ["answer"]);
    }
}
