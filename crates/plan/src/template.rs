//! Prompt templates as data: minijinja sources with an id, a version and a content hash.
//!
//! A template renders named blocks, each becoming one chat message:
//!
//! - `{% block system %}`: the system message (omitted when it renders empty);
//! - `{% block user %}`: the opening user message (turn 0: case evidence and the task's question);
//! - `{% block turn %}`: each later user message of a multi-turn task (newly revealed evidence and that turn's
//!   question). Only needed by templates used for multi-turn tasks.
//!
//! Images are placed with `{{ image(img.index) }}` (or `{{ img.marker }}`); see the crate docs for every
//! variable a template receives.
//!
//! The hash is `sha256("nmb-template\0" + version + "\0" + source)`, lower-case hex, for built-in and user
//! templates alike, so a changed byte in the source or a bumped version gives a new hash (and so new cache keys).

use std::path::Path;
use std::sync::Arc;

use nmb_suite::Family;
use sha2::{Digest, Sha256};

use crate::error::PlanError;

/// A prompt template: id, version, minijinja source and its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    id: String,
    version: String,
    source: Arc<str>,
    hash: String,
}

struct Builtin {
    id: &'static str,
    version: &'static str,
    source: &'static str,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        id: "depth-v1",
        version: "1",
        source: include_str!("../templates/depth-v1.jinja"),
    },
    Builtin {
        id: "breadth-closed-v1",
        version: "1",
        source: include_str!("../templates/breadth-closed-v1.jinja"),
    },
    Builtin {
        id: "breadth-open-v1",
        version: "1",
        source: include_str!("../templates/breadth-open-v1.jinja"),
    },
    Builtin {
        id: "breadth-mcq-v1",
        version: "1",
        source: include_str!("../templates/breadth-mcq-v1.jinja"),
    },
    Builtin {
        id: "neurovlm-v1",
        version: "2",
        source: include_str!("../templates/neurovlm-v1.jinja"),
    },
];

/// Ids of the templates compiled into nmb.
pub fn builtin_ids() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|b| b.id)
}

/// The prompt-sweep variants bundled with nmb (`templates/variants/NAME.jinja`), by name, in sweep order. Each
/// covers every family; see the crate docs, "Prompt variants".
const VARIANTS: &[(&str, &str)] = &[
    (
        "paraphrase-1",
        include_str!("../templates/variants/paraphrase-1.jinja"),
    ),
    (
        "paraphrase-2",
        include_str!("../templates/variants/paraphrase-2.jinja"),
    ),
    (
        "paraphrase-3",
        include_str!("../templates/variants/paraphrase-3.jinja"),
    ),
    ("order", include_str!("../templates/variants/order.jinja")),
    (
        "no-persona",
        include_str!("../templates/variants/no-persona.jinja"),
    ),
];

/// Names of the bundled prompt variants, in sweep order: `paraphrase-1`, `paraphrase-2`, `paraphrase-3`,
/// `order`, `no-persona`.
pub fn variant_names() -> impl Iterator<Item = &'static str> {
    VARIANTS.iter().map(|(name, _)| *name)
}

/// `sha256("nmb-template\0" + version + "\0" + source)`, lower-case hex.
pub fn template_hash(version: &str, source: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"nmb-template\0");
    h.update(version.as_bytes());
    h.update(b"\0");
    h.update(source.as_bytes());
    hex::encode(h.finalize())
}

impl Template {
    /// A template from source text. Fails on template syntax errors.
    pub fn from_source(
        id: impl Into<String>,
        version: impl Into<String>,
        source: impl Into<Arc<str>>,
    ) -> Result<Template, PlanError> {
        let id = id.into();
        let version = version.into();
        let source = source.into();
        crate::jinja::check_syntax(&id, &source)?;
        let hash = template_hash(&version, &source);
        Ok(Template {
            id,
            version,
            source,
            hash,
        })
    }

    /// A built-in template by id (`depth-v1`, `breadth-closed-v1`, `breadth-open-v1`, `breadth-mcq-v1`,
    /// `neurovlm-v1`).
    pub fn builtin(id: &str) -> Option<Template> {
        let b = BUILTINS.iter().find(|b| b.id == id)?;
        Some(Template {
            id: b.id.to_string(),
            version: b.version.to_string(),
            source: Arc::from(b.source),
            hash: template_hash(b.version, b.source),
        })
    }

    /// A bundled prompt variant by name (see [`variant_names`]): id `variant-NAME`, version and hash exactly as
    /// [`Template::from_file`] gives for the same file, so a copy of the file used with `--template` is the same
    /// template (same hash, same cached answers).
    pub fn variant(name: &str) -> Option<Template> {
        let (_, source) = VARIANTS.iter().find(|(n, _)| *n == name)?;
        let (id, version) = parse_header(source)?;
        Some(Template {
            hash: template_hash(&version, source),
            id,
            version,
            source: Arc::from(*source),
        })
    }

    /// The built-in template nmb uses for a family when none is given.
    pub fn default_for(family: Family) -> Template {
        let id = match family {
            Family::Differential | Family::Lesion | Family::Rationale => "depth-v1",
            Family::ClosedVqa => "breadth-closed-v1",
            Family::OpenVqa => "breadth-open-v1",
            Family::MultipleChoice => "breadth-mcq-v1",
            Family::Structured => "neurovlm-v1",
        };
        // The ids above are all in BUILTINS; a unit test checks it, so the fallback is unreachable in practice.
        Template::builtin(id).unwrap_or_else(|| Template {
            id: id.to_string(),
            version: "0".to_string(),
            source: Arc::from(""),
            hash: template_hash("0", ""),
        })
    }

    /// A user template file (`--template FILE`).
    ///
    /// Id and version come from a header comment `{# nmb-template: id=my-dx version=2 #}` where the file has
    /// one; otherwise the id is `file:<file stem>` and the version `user`. Either way the hash is computed from
    /// the file's text exactly as for built-in templates.
    ///
    /// A file with no `{% block %}` is a plain prompt (e.g. NeuroVLM-Bench's `prompts/neurorad_prompt*.txt`):
    /// its text, trimmed, is the system message word for word (kept from minijinja), and the user message holds
    /// the images alone, as the authors' runner sends them.
    pub fn from_file(path: &Path) -> Result<Template, PlanError> {
        let text = nmb_suite::limits::read_to_string_io(path).map_err(|source| {
            PlanError::TemplateRead {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let source = match has_blocks(&text) {
            true => text,
            false => plain_prompt(&text).map_err(|message| PlanError::Template {
                template: path.display().to_string(),
                message,
            })?,
        };
        let (id, version) = match parse_header(&source) {
            Some((id, version)) => (id, version),
            None => {
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "template".to_string());
                (format!("file:{stem}"), "user".to_string())
            }
        };
        Template::from_source(id, version, source).map_err(|e| match e {
            PlanError::Template { template, message } => PlanError::Template {
                template: format!("{template} ({})", path.display()),
                message,
            },
            other => other,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn hash(&self) -> &str {
        &self.hash
    }
}

const PLAIN_OPEN: &str = "{% block system %}{% raw %}";
const PLAIN_CLOSE: &str = "{% endraw %}{% endblock %}\n{% block user %}";

impl Template {
    /// The prompt text of a plain prompt file (one without `{% block %}`, such as NeuroVLM-Bench's
    /// `prompts/neurorad_prompt*.txt`), trimmed: what its system message says. `None` for any other template.
    pub fn plain_prompt(&self) -> Option<&str> {
        let rest = self.source.strip_prefix(PLAIN_OPEN)?;
        let (text, _) = rest.split_once(PLAIN_CLOSE)?;
        (*self.source == plain_prompt(text).ok()?).then_some(text)
    }
}

/// Whether a template source defines a block (`{% block` or `{%- block`).
fn has_blocks(source: &str) -> bool {
    source.contains("{% block") || source.contains("{%- block")
}

/// The template of a plain prompt: the text, trimmed, as the system message, kept from minijinja (a prompt's
/// JSON example may hold `{{`), and the images alone as the user message.
fn plain_prompt(text: &str) -> Result<String, String> {
    if text.contains("{% endraw") || text.contains("{%- endraw") {
        return Err("a plain prompt (no {% block %}) cannot hold {% endraw %}".into());
    }
    Ok(format!(
        "{{% block system %}}{{% raw %}}{}{{% endraw %}}{{% endblock %}}\n\
         {{% block user %}}{{% for img in images %}}{{{{ image(img.index) }}}}\n{{% endfor %}}{{% endblock %}}\n",
        text.trim()
    ))
}

/// Reads `id=... version=...` from the first `nmb-template:` header line. Both keys are needed.
pub(crate) fn parse_header(source: &str) -> Option<(String, String)> {
    let line = source.lines().find(|l| l.contains("nmb-template:"))?;
    let rest = line.split_once("nmb-template:")?.1;
    let rest = rest.split("#}").next().unwrap_or(rest);
    let mut id = None;
    let mut version = None;
    for word in rest.split_whitespace() {
        if let Some(v) = word.strip_prefix("id=") {
            id = Some(v.trim_end_matches('-').to_string());
        } else if let Some(v) = word.strip_prefix("version=") {
            version = Some(v.trim_end_matches('-').to_string());
        }
    }
    Some((
        id.filter(|s| !s.is_empty())?,
        version.filter(|s| !s.is_empty())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_a_builtin_default() {
        for f in Family::ALL {
            let t = Template::default_for(*f);
            assert!(
                Template::builtin(t.id()).is_some(),
                "{f}: {} missing",
                t.id()
            );
            assert!(!t.source().is_empty());
        }
    }

    #[test]
    fn builtin_headers_match_their_ids() {
        for b in BUILTINS {
            let (id, version) = parse_header(b.source).expect("builtin has a header");
            assert_eq!((id.as_str(), version.as_str()), (b.id, b.version));
        }
    }

    #[test]
    fn builtins_compile() {
        for id in builtin_ids() {
            let t = Template::builtin(id).unwrap();
            Template::from_source(t.id(), t.version(), t.source()).unwrap();
        }
    }

    #[test]
    fn variants_compile_and_carry_their_names() {
        let names: Vec<&str> = variant_names().collect();
        assert_eq!(
            names,
            [
                "paraphrase-1",
                "paraphrase-2",
                "paraphrase-3",
                "order",
                "no-persona"
            ]
        );
        let mut hashes = std::collections::BTreeSet::new();
        for name in names {
            let t = Template::variant(name).unwrap_or_else(|| panic!("{name}: no header"));
            assert_eq!(t.id(), format!("variant-{name}"));
            assert_eq!(t.version(), "1");
            Template::from_source(t.id(), t.version(), t.source()).unwrap();
            let file = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("templates/variants")
                .join(format!("{name}.jinja"));
            assert_eq!(
                Template::from_file(&file).unwrap(),
                t,
                "{name}: the bundled variant is its file"
            );
            assert!(hashes.insert(t.hash().to_string()));
        }
        assert_eq!(Template::variant("paraphrase-9"), None);
    }

    #[test]
    fn a_plain_prompt_gives_back_its_text() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("neurorad_prompt.txt");
        std::fs::write(&file, "\n  Answer {\"a\": 1}.\n\n\nOnly JSON.  \n").unwrap();
        let t = Template::from_file(&file).unwrap();
        assert_eq!(t.plain_prompt(), Some("Answer {\"a\": 1}.\n\n\nOnly JSON."));
        assert_eq!(
            Template::builtin("neurovlm-v1").unwrap().plain_prompt(),
            None
        );
    }

    #[test]
    fn header_parse() {
        assert_eq!(
            parse_header("{# nmb-template: id=x-1 version=3 #}\nhi"),
            Some(("x-1".into(), "3".into()))
        );
        assert_eq!(parse_header("{#- nmb-template: id=x -#}"), None);
        assert_eq!(parse_header("no header"), None);
    }
}
