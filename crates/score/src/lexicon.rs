//! The matching lexicon: text normalisation (case, accents, punctuation, British/American spelling, neurology
//! abbreviations), a small disease hierarchy, and the lesion categories and anatomical structures used for lesion
//! recognition.
//!
//! The lexicon is data (`data/lexicon.toml`, compiled in); its `version` is recorded with every score. A custom
//! lexicon can be loaded with [`Lexicon::from_toml`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use serde::Deserialize;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

const BUILTIN_TOML: &str = include_str!("../data/lexicon.toml");

/// Words dropped everywhere: they never change a diagnosis.
const STOP_WORDS: &[&str] = &["the", "a", "an"];

/// Leading qualifiers dropped from diagnoses before comparing them ("probable Alzheimer disease").
const HEDGES: &[&str] = &[
    "probable",
    "possible",
    "likely",
    "most likely",
    "suspected",
    "presumed",
    "presumptive",
    "definite",
    "clinically definite",
    "diagnosis",
];

#[derive(Debug, thiserror::Error)]
pub enum LexiconError {
    #[error("lexicon is not valid TOML: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("lexicon entity {entity:?}: {field} names unknown entity {target:?}")]
    UnknownEntity {
        entity: String,
        field: &'static str,
        target: String,
    },
    #[error("lexicon entity {0:?} is defined twice")]
    Duplicate(String),
    #[error("lexicon entity {0:?} is its own ancestor (a cycle through `parents`)")]
    Cycle(String),
    #[error("lexicon entity {0:?} has no names")]
    NoNames(String),
}

#[derive(Deserialize)]
struct RawLexicon {
    version: String,
    #[serde(default)]
    spelling: BTreeMap<String, String>,
    #[serde(default)]
    abbreviations: BTreeMap<String, String>,
    #[serde(default)]
    entity: Vec<RawEntity>,
    #[serde(default)]
    lesion: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    anatomy: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct RawEntity {
    id: String,
    names: Vec<String>,
    #[serde(default)]
    parents: Vec<String>,
    #[serde(default)]
    related: Vec<String>,
}

/// A diagnosis of the hierarchy.
#[derive(Debug, Clone)]
pub struct Entity {
    pub id: String,
    /// The first of its names, as the lexicon writes it.
    pub name: String,
    parents: Vec<usize>,
    related: Vec<usize>,
}

/// How two lexicon diagnoses relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Same,
    /// The first is broader (an ancestor of the second).
    Broader,
    /// The first is narrower (a descendant of the second).
    Narrower,
    /// Linked by `related` (at either one or an ancestor of either).
    Related,
    /// No path between them: different diagnoses.
    Distinct,
}

/// An occurrence of an entity in a token sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub entity: usize,
    pub start: usize,
    pub len: usize,
}

pub struct Lexicon {
    pub version: String,
    spelling_exact: HashMap<String, String>,
    /// (prefix, replacement), longest prefix first.
    spelling_prefix: Vec<(String, String)>,
    abbreviations: HashMap<String, Vec<String>>,
    entities: Vec<Entity>,
    /// (name tokens, entity), longest name first.
    names: Vec<(Vec<String>, usize)>,
    /// Ancestors of each entity (transitive, without itself).
    ancestors: Vec<BTreeSet<usize>>,
    lesion: Vec<(String, Vec<Vec<String>>)>,
    anatomy: Vec<(String, Vec<Vec<String>>)>,
}

impl std::fmt::Debug for Lexicon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Lexicon({}, {} entities)",
            self.version,
            self.entities.len()
        )
    }
}

/// The lexicon shipped with nmb.
pub fn builtin() -> &'static Lexicon {
    static LEXICON: OnceLock<Lexicon> = OnceLock::new();
    // The built-in file is compiled in and checked by a unit test, so it always parses.
    LEXICON.get_or_init(|| Lexicon::from_toml(BUILTIN_TOML).expect("built-in lexicon is valid"))
}

impl Lexicon {
    pub fn from_toml(text: &str) -> Result<Lexicon, LexiconError> {
        let raw: RawLexicon = toml::from_str(text)?;
        let mut lex = Lexicon {
            version: raw.version,
            spelling_exact: HashMap::new(),
            spelling_prefix: Vec::new(),
            abbreviations: HashMap::new(),
            entities: Vec::new(),
            names: Vec::new(),
            ancestors: Vec::new(),
            lesion: Vec::new(),
            anatomy: Vec::new(),
        };
        for (from, to) in raw.spelling {
            match from.strip_suffix('*') {
                Some(prefix) => lex.spelling_prefix.push((prefix.to_string(), to)),
                None => {
                    lex.spelling_exact.insert(from, to);
                }
            }
        }
        lex.spelling_prefix
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        // Abbreviations expand to spelling-normalised words, but are not expanded again.
        let abbreviations: Vec<(String, Vec<String>)> = raw
            .abbreviations
            .into_iter()
            .map(|(k, v)| {
                let words = fold(&v).split_whitespace().map(|w| lex.spell(w)).collect();
                (k, words)
            })
            .collect();
        lex.abbreviations = abbreviations.into_iter().collect();
        lex.add_entities(raw.entity)?;
        lex.lesion = lex.phrase_table(raw.lesion);
        lex.anatomy = lex.phrase_table(raw.anatomy);
        Ok(lex)
    }

    fn add_entities(&mut self, raw: Vec<RawEntity>) -> Result<(), LexiconError> {
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, e) in raw.iter().enumerate() {
            if index.insert(e.id.clone(), i).is_some() {
                return Err(LexiconError::Duplicate(e.id.clone()));
            }
            if e.names.is_empty() {
                return Err(LexiconError::NoNames(e.id.clone()));
            }
        }
        let resolve = |e: &RawEntity, field: &'static str, ids: &[String]| {
            ids.iter()
                .map(|t| {
                    index
                        .get(t)
                        .copied()
                        .ok_or_else(|| LexiconError::UnknownEntity {
                            entity: e.id.clone(),
                            field,
                            target: t.clone(),
                        })
                })
                .collect::<Result<Vec<usize>, _>>()
        };
        for (i, e) in raw.iter().enumerate() {
            self.entities.push(Entity {
                id: e.id.clone(),
                name: e.names[0].clone(),
                parents: resolve(e, "parents", &e.parents)?,
                related: resolve(e, "related", &e.related)?,
            });
            for name in &e.names {
                let tokens = self.tokens(name);
                if !tokens.is_empty() {
                    self.names.push((tokens, i));
                }
            }
        }
        self.names
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        self.ancestors = (0..self.entities.len())
            .map(|i| self.collect_ancestors(i))
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    fn collect_ancestors(&self, start: usize) -> Result<BTreeSet<usize>, LexiconError> {
        let mut seen = BTreeSet::new();
        let mut stack = self.entities[start].parents.clone();
        while let Some(p) = stack.pop() {
            if p == start {
                return Err(LexiconError::Cycle(self.entities[start].id.clone()));
            }
            if seen.insert(p) {
                stack.extend(&self.entities[p].parents);
            }
        }
        Ok(seen)
    }

    fn phrase_table(&self, raw: BTreeMap<String, Vec<String>>) -> Vec<(String, Vec<Vec<String>>)> {
        raw.into_iter()
            .map(|(k, names)| {
                let phrases = names
                    .iter()
                    .map(|n| self.tokens(n))
                    .filter(|t| !t.is_empty())
                    .collect();
                (k, phrases)
            })
            .collect()
    }

    fn spell(&self, word: &str) -> String {
        if let Some(w) = self.spelling_exact.get(word) {
            return w.clone();
        }
        for (prefix, to) in &self.spelling_prefix {
            if let Some(rest) = word.strip_prefix(prefix.as_str()) {
                return format!("{to}{rest}");
            }
        }
        word.to_string()
    }

    /// Normalised words: lower case, accents folded, possessive 's dropped, punctuation and hyphens as spaces,
    /// British spellings made American, abbreviations expanded, articles dropped.
    pub fn tokens(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in fold(text).split_whitespace() {
            let word = self.spell(word);
            match self.abbreviations.get(&word) {
                Some(expansion) => out.extend(expansion.iter().cloned()),
                None if STOP_WORDS.contains(&word.as_str()) => {}
                None => out.push(word),
            }
        }
        out
    }

    /// [`Lexicon::tokens`] joined by single spaces.
    pub fn normalise(&self, text: &str) -> String {
        self.tokens(text).join(" ")
    }

    /// Tokens of a diagnosis, with leading hedges ("probable", "suspected") removed.
    pub fn diagnosis_tokens(&self, text: &str) -> Vec<String> {
        let mut tokens = self.tokens(text);
        loop {
            let hedge = HEDGES.iter().find(|h| {
                let words: Vec<&str> = h.split(' ').collect();
                tokens.len() > words.len() && tokens.iter().zip(&words).all(|(t, w)| t == w)
            });
            match hedge {
                Some(h) => {
                    tokens.drain(..h.split(' ').count());
                }
                None => return tokens,
            }
        }
    }

    pub fn entity(&self, i: usize) -> &Entity {
        &self.entities[i]
    }

    /// Entities named in `tokens`: longest names first, never overlapping, then the broader of two related hits
    /// dropped ("acute ischemic stroke" is an ischemic stroke, not also a stroke). In text order.
    pub fn entities_in(&self, tokens: &[String]) -> Vec<Hit> {
        let mut taken = vec![false; tokens.len()];
        let mut hits = Vec::new();
        for (name, entity) in &self.names {
            for start in find_all(tokens, name) {
                let span = start..start + name.len();
                if span.clone().all(|i| !taken[i]) {
                    span.for_each(|i| taken[i] = true);
                    hits.push(Hit {
                        entity: *entity,
                        start,
                        len: name.len(),
                    });
                }
            }
        }
        let specific: Vec<Hit> = hits
            .iter()
            .filter(|h| {
                !hits
                    .iter()
                    .any(|o| o.entity != h.entity && self.ancestors[o.entity].contains(&h.entity))
            })
            .copied()
            .collect();
        let mut out: Vec<Hit> = Vec::new();
        for h in specific {
            if !out.iter().any(|o| o.entity == h.entity) {
                out.push(h);
            }
        }
        out.sort_by_key(|h| h.start);
        out
    }

    /// The nearest siblings of `e` in the hierarchy: the entities with one of its parents as a parent, neither
    /// an ancestor nor a descendant of `e`, in lexicon order. Empty for an entity without parents.
    pub fn siblings(&self, e: usize) -> Vec<usize> {
        let parents = &self.entities[e].parents;
        (0..self.entities.len())
            .filter(|&o| o != e && self.entities[o].parents.iter().any(|p| parents.contains(p)))
            .filter(|&o| !self.ancestors[o].contains(&e) && !self.ancestors[e].contains(&o))
            .collect()
    }

    pub fn relation(&self, a: usize, b: usize) -> Relation {
        if a == b {
            return Relation::Same;
        }
        if self.ancestors[b].contains(&a) {
            return Relation::Broader;
        }
        if self.ancestors[a].contains(&b) {
            return Relation::Narrower;
        }
        let lineage = |x: usize| -> BTreeSet<usize> {
            let mut s = self.ancestors[x].clone();
            s.insert(x);
            s
        };
        let (la, lb) = (lineage(a), lineage(b));
        let linked = |from: &BTreeSet<usize>, to: &BTreeSet<usize>| {
            from.iter()
                .any(|&x| self.entities[x].related.iter().any(|r| to.contains(r)))
        };
        if linked(&la, &lb) || linked(&lb, &la) {
            Relation::Related
        } else {
            Relation::Distinct
        }
    }

    /// Lesion categories named in `tokens`, each with the position of its first mention, in text order.
    pub fn lesion_categories(&self, tokens: &[String]) -> Vec<(String, usize)> {
        first_mentions(&self.lesion, tokens)
    }

    /// Anatomical structures named in `tokens`.
    pub fn structures(&self, tokens: &[String]) -> BTreeSet<String> {
        first_mentions(&self.anatomy, tokens)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }
}

/// Lower case, accents folded, possessive 's dropped, everything but letters and digits to spaces.
pub fn fold(text: &str) -> String {
    let decomposed: String = text
        .nfkd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect();
    let chars: Vec<char> = decomposed.chars().collect();
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let apostrophe = matches!(c, '\'' | '\u{2019}' | '\u{2018}' | '`');
        if apostrophe {
            // "alzheimer's" -> "alzheimer"; other apostrophes vanish ("o'neill" -> "oneill").
            let possessive = chars.get(i + 1) == Some(&'s')
                && !chars.get(i + 2).is_some_and(|c| c.is_alphanumeric());
            i += if possessive { 2 } else { 1 };
            continue;
        }
        out.push(if c.is_alphanumeric() { c } else { ' ' });
        i += 1;
    }
    out
}

fn find_all(tokens: &[String], phrase: &[String]) -> Vec<usize> {
    if phrase.is_empty() || phrase.len() > tokens.len() {
        return Vec::new();
    }
    (0..=tokens.len() - phrase.len())
        .filter(|&i| tokens[i..i + phrase.len()] == *phrase)
        .collect()
}

fn first_mentions(table: &[(String, Vec<Vec<String>>)], tokens: &[String]) -> Vec<(String, usize)> {
    let mut found: Vec<(String, usize)> = table
        .iter()
        .filter_map(|(key, phrases)| {
            phrases
                .iter()
                .flat_map(|p| find_all(tokens, p).into_iter().next())
                .min()
                .map(|pos| (key.clone(), pos))
        })
        .collect();
    found.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(lex: &Lexicon, text: &str) -> Vec<String> {
        lex.entities_in(&lex.diagnosis_tokens(text))
            .iter()
            .map(|h| lex.entity(h.entity).id.clone())
            .collect()
    }

    #[test]
    fn builtin_lexicon_loads() {
        let lex = builtin();
        assert!(lex.version.starts_with("neuro-lexicon"));
        assert!(lex.entities.len() > 80);
    }

    #[test]
    fn normalisation_folds_case_spelling_accents_and_abbreviations() {
        let lex = builtin();
        assert_eq!(
            lex.normalise("Acute ISCHAEMIC stroke, left MCA"),
            "acute ischemic stroke left middle cerebral artery"
        );
        assert_eq!(
            lex.normalise("Alzheimer’s disease"),
            lex.normalise("alzheimer disease")
        );
        assert_eq!(
            lex.normalise("Guillain–Barré syndrome"),
            "guillain barre syndrome"
        );
        assert_eq!(lex.normalise("Haemorrhagic oedema"), "hemorrhagic edema");
        assert_eq!(
            lex.normalise("HSV-1 encephalitis"),
            "herpes simplex virus 1 encephalitis"
        );
        assert_eq!(lex.normalise("GBM"), "glioblastoma");
        assert_eq!(
            lex.diagnosis_tokens("Probable AD").join(" "),
            "alzheimer disease"
        );
    }

    #[test]
    fn entities_prefer_the_longest_and_most_specific_name() {
        let lex = builtin();
        assert_eq!(
            ids(lex, "Acute ischaemic stroke in the left MCA territory"),
            ["ischemic_stroke"]
        );
        assert_eq!(ids(lex, "Stroke mimic"), ["stroke_mimic"]);
        assert_eq!(
            ids(lex, "Perimesencephalic non-aneurysmal SAH"),
            ["perimesencephalic_sah"]
        );
        assert_eq!(ids(lex, "Anti-LGI1 limbic encephalitis"), ["lgi1"]);
        assert_eq!(ids(lex, "MS or ADEM"), ["ms", "adem"]);
    }

    #[test]
    fn relations_follow_parents_and_related_links() {
        let lex = builtin();
        let id = |name: &str| lex.entities.iter().position(|e| e.id == name).unwrap();
        assert_eq!(
            lex.relation(id("stroke"), id("ischemic_stroke")),
            Relation::Broader
        );
        assert_eq!(
            lex.relation(id("sivd"), id("vascular_dementia")),
            Relation::Narrower
        );
        assert_eq!(lex.relation(id("ms"), id("adem")), Relation::Distinct);
        assert_eq!(
            lex.relation(id("lgi1"), id("hsv_encephalitis")),
            Relation::Related
        );
        assert_eq!(
            lex.relation(id("glioblastoma"), id("metastasis")),
            Relation::Distinct
        );
    }

    #[test]
    fn bad_lexicons_are_refused_with_the_entity_named() {
        let unknown =
            "version = \"x\"\n[[entity]]\nid = \"a\"\nnames = [\"a\"]\nparents = [\"b\"]\n";
        let e = Lexicon::from_toml(unknown).unwrap_err().to_string();
        assert!(e.contains("\"a\"") && e.contains("\"b\""), "{e}");
        let cycle = "version = \"x\"\n[[entity]]\nid = \"a\"\nnames = [\"a\"]\nparents = [\"b\"]\n\
                     [[entity]]\nid = \"b\"\nnames = [\"b\"]\nparents = [\"a\"]\n";
        assert!(matches!(
            Lexicon::from_toml(cycle),
            Err(LexiconError::Cycle(_))
        ));
    }
}
