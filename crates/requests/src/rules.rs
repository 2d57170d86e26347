//! The providers' documented request rules, per model family: which sampling parameters may go together, which
//! thinking levels and budgets each model takes, and how many tokens a model that thinks by default needs. Each
//! rule quotes its source ([`RULES`], the table `docs/providers.md` prints); the wires apply them when they build a
//! request and record every change as an adjustment (`Adjustment`) with the rule's words, as they do for what a
//! server refuses.
//!
//! Model names are matched as the providers spell them, with any dated or preview suffix and any routing prefix
//! (`models/`, `anthropic/`, Bedrock's `anthropic.`): `claude-sonnet-4-5-20250929` is Claude Sonnet 4.5.

use nmb_chat::ReasoningEffort;

use crate::spec::BackendKind;

/// One documented rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub provider: &'static str,
    /// The models it covers.
    pub models: &'static str,
    /// What nmb does.
    pub rule: &'static str,
    /// Where it is written, quoted.
    pub source: &'static str,
}

/// Claude models that take `temperature` or `top_p`, not both.
pub const CLAUDE_ONE_SAMPLER: Rule = Rule {
    provider: "anthropic",
    models: "Claude Opus 4.1, Sonnet 4.5, Haiku 4.5, Opus 4.5, Sonnet 4.6, Opus 4.6",
    rule: "temperature and top_p are not sent together: with both set, top_p is left out (no_top_p)",
    source: "Anthropic, \"Migrating to Claude 4.5\": \"Use only temperature OR top_p, not both\" (\"This will \
             error in Sonnet 4.5\"); the API answers 400 \"`temperature` and `top_p` cannot both be specified for \
             this model. Please use only one.\", reported for Opus 4.1 and Haiku 4.5 too",
};

/// Claude models that take no sampling parameter at all.
pub const CLAUDE_NO_SAMPLER: Rule = Rule {
    provider: "anthropic",
    models: "Claude Opus 4.7",
    rule: "neither temperature nor top_p is sent (no_temperature, no_top_p)",
    source:
        "Anthropic, \"Migrating to Claude Opus 4.7\": temperature, top_p and top_k \"are no longer \
             supported\"; the API answers 400 \"`temperature` is deprecated for this model.\"",
};

/// Extended thinking's limits on every Claude model.
pub const CLAUDE_THINKING: Rule = Rule {
    provider: "anthropic",
    models: "every Claude model, with --thinking-budget",
    rule: "budget at least 1,024 and below --max-tokens (refused before sending otherwise); temperature only \
           at 1 and top_p only from 0.95 (left out otherwise: no_temperature, no_top_p); a schema's answer tool \
           offered with tool_choice auto (tool_choice_auto)",
    source: "Anthropic, \"Building with extended thinking\": budget_tokens \"must be set to a value less than \
             max_tokens\", minimum 1,024; \"Thinking isn't compatible with temperature or top_k modifications as \
             well as forced tool use\"; \"you can set top_p to values between 1 and 0.95\"",
};

/// Gemini 3 Pro's thinking levels.
pub const GEMINI_3_PRO_LEVELS: Rule = Rule {
    provider: "gemini",
    models: "gemini-3-pro",
    rule: "thinkingLevel low or high only: --reasoning-effort none, minimal and low send low, medium and high \
           send high (thinking_level)",
    source: "Gemini API, \"Gemini 3 developer guide\" (thinking_level): Gemini 3 Pro takes \"low\" and \"high\" \
             (default high), and \"You cannot disable thinking for Gemini 3 Pro\"; the API answers 400 \"Thinking \
             level MEDIUM is not supported for this model. Please retry with other thinking level.\"",
};

/// Later Gemini Pro models' thinking levels.
pub const GEMINI_PRO_LEVELS: Rule = Rule {
    provider: "gemini",
    models: "gemini-3.1-pro and later Pro models",
    rule: "thinkingLevel low, medium or high: none and minimal send low (thinking_level)",
    source:
        "Gemini API, \"Thinking\" (thinking levels): minimal is \"Not supported on Gemini 3.1 Pro\"",
};

/// Gemini 3 Flash's thinking levels.
pub const GEMINI_FLASH_LEVELS: Rule = Rule {
    provider: "gemini",
    models: "gemini-3-flash and later Flash models",
    rule: "thinkingLevel minimal, low, medium or high; none sends minimal, as Gemini 3 cannot stop thinking \
           (thinking_level)",
    source: "Gemini API, \"Gemini 3 developer guide\": Gemini 3 Flash takes minimal, low, medium and high; \
             \"minimal\" is the closest to no thinking",
};

/// Gemini 2.5 Pro's thinking budget.
pub const GEMINI_25_PRO_BUDGET: Rule = Rule {
    provider: "gemini",
    models: "gemini-2.5-pro",
    rule: "thinkingBudget from 128 to 32,768, never 0: --reasoning-effort none sends 128 (thinking_budget); a \
           --thinking-budget outside the range is refused before anything is sent",
    source: "Gemini API, \"Thinking\" (thinking budgets): 2.5 Pro \"128 to 32768\", \"Cannot disable \
             thinking\"; the API answers 400 \"Budget 0 is invalid. This model only works in thinking mode.\"",
};

/// Gemini 2.5 Flash's thinking budget.
pub const GEMINI_25_FLASH_BUDGET: Rule = Rule {
    provider: "gemini",
    models: "gemini-2.5-flash",
    rule: "thinkingBudget from 0 (no thinking) to 24,576; outside it is refused before anything is sent",
    source: "Gemini API, \"Thinking\" (thinking budgets): 2.5 Flash \"0 to 24576\", \"thinkingBudget = 0\" \
             disables thinking",
};

/// Gemini 2.5 Flash-Lite's thinking budget.
pub const GEMINI_25_LITE_BUDGET: Rule = Rule {
    provider: "gemini",
    models: "gemini-2.5-flash-lite",
    rule: "thinkingBudget 0 (no thinking, its default) or from 512 to 24,576: --reasoning-effort minimal sends \
           512 (thinking_budget); outside it is refused before anything is sent",
    source: "Gemini API, \"Thinking\" (thinking budgets): 2.5 Flash Lite \"512 to 24576\", \"Model does not \
             think\" by default, \"thinkingBudget = 0\" disables thinking",
};

/// The room Gemini's thinking models need in `maxOutputTokens`.
pub const GEMINI_THINKING_ROOM: Rule = Rule {
    provider: "gemini",
    models: "gemini-2.5-pro, gemini-2.5-flash, Gemini 3 and later (they think by default)",
    rule: "--max-tokens defaults to 65,536, the models' output token limit (what the API uses when \
           maxOutputTokens is not sent), because the thinking counts toward it; a smaller --max-tokens is \
           warned about before the first request",
    source: "Gemini API, model pages: \"Output token limit 65,536\"; \"Thinking\": models \"use dynamic \
             thinking by default\"; a model cut off while thinking answers a candidate with no parts and \
             \"finishReason\": \"MAX_TOKENS\" (python-genai #811, adk-python #1357; HELM reads it as an empty answer)",
};

/// OpenAI's reasoning models.
pub const OPENAI_REASONING: Rule = Rule {
    provider: "openai",
    models: "o1, o3, o4-mini and other o-series; gpt-5 and its variants (on OpenAI's API)",
    rule: "max_completion_tokens instead of max_tokens, no temperature other than 1, no top_p \
           (max_completion_tokens, no_temperature, no_top_p)",
    source: "OpenAI, \"Reasoning models\"; the API answers 400 \"Unsupported parameter: 'max_tokens' is not \
             supported with this model. Use 'max_completion_tokens' instead.\", \"Unsupported value: \
             'temperature' does not support 0.7 with this model. Only the default (1) value is supported.\"",
};

/// The room OpenAI's reasoning models need in `max_completion_tokens`.
pub const OPENAI_THINKING_ROOM: Rule = Rule {
    provider: "openai",
    models: "o-series and gpt-5 (they reason by default)",
    rule: "--max-tokens defaults to 25,000; a smaller --max-tokens is warned about before the first request",
    source: "OpenAI, \"Reasoning models\" (allocating space for reasoning): \"OpenAI recommends reserving at \
             least 25,000 tokens for reasoning and outputs when you start experimenting with these models\"; \
             a model out of tokens while reasoning answers no content with finish_reason \"length\"",
};

/// Every rule, in the order `docs/providers.md` lists them.
pub const RULES: [Rule; 12] = [
    CLAUDE_ONE_SAMPLER,
    CLAUDE_NO_SAMPLER,
    CLAUDE_THINKING,
    GEMINI_3_PRO_LEVELS,
    GEMINI_PRO_LEVELS,
    GEMINI_FLASH_LEVELS,
    GEMINI_25_PRO_BUDGET,
    GEMINI_25_FLASH_BUDGET,
    GEMINI_25_LITE_BUDGET,
    GEMINI_THINKING_ROOM,
    OPENAI_REASONING,
    OPENAI_THINKING_ROOM,
];

impl Rule {
    /// The reason an adjustment records: the rule and its source.
    pub fn reason(&self) -> String {
        format!("{} ({}: {})", self.rule, self.models, self.source)
    }
}

/// `model` lowercased, without a routing prefix (`models/`, `anthropic/`, Bedrock's `anthropic.`).
fn bare(model: &str) -> String {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m).to_string();
    m.strip_prefix("anthropic.")
        .map_or(m.clone(), str::to_string)
}

/// Which sampling parameters a Claude model takes together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    Both,
    /// `temperature` or `top_p`, not both ([`CLAUDE_ONE_SAMPLER`]).
    OneOf,
    /// Neither ([`CLAUDE_NO_SAMPLER`]).
    Neither,
}

/// The sampling rule of a Claude model.
pub fn claude_sampling(model: &str) -> Sampling {
    let m = bare(model);
    let named = |families: &[&str]| {
        families.iter().any(|f| {
            m.find(f)
                .is_some_and(|i| !m[i + f.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
    };
    if named(&["claude-opus-4-7"]) {
        return Sampling::Neither;
    }
    let one_of = [
        "claude-opus-4-1",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "claude-opus-4-5",
        "claude-sonnet-4-6",
        "claude-opus-4-6",
    ];
    if named(&one_of) {
        Sampling::OneOf
    } else {
        Sampling::Both
    }
}

/// A Gemini model's version and tier: `gemini-2.5-flash-lite` is (2, 5, "flash-lite").
fn gemini_version(model: &str) -> Option<(u32, u32, String)> {
    let m = bare(model);
    let rest = m.strip_prefix("gemini-")?;
    let (version, tier) = rest.split_once('-').unwrap_or((rest, ""));
    let (major, minor) = version.split_once('.').unwrap_or((version, "0"));
    Some((major.parse().ok()?, minor.parse().ok()?, tier.to_string()))
}

/// Whether `model` takes `thinkingLevel` (Gemini 3 and later) rather than `thinkingBudget` (Gemini 2.5). The API
/// refuses both in one request.
pub fn takes_thinking_level(model: &str) -> bool {
    gemini_version(model).is_some_and(|(major, _, _)| major >= 3)
}

/// Whether OpenAI's own API knows `model` as a reasoning model (o1, o3, o4-mini, ..., gpt-5 and its variants),
/// which takes `max_completion_tokens` and refuses `temperature` (other than 1) and `top_p`.
pub fn is_openai_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    let o_series = m.strip_prefix('o').is_some_and(|rest| {
        rest.chars().next().is_some_and(|c| c.is_ascii_digit())
            && rest
                .chars()
                .find(|c| !c.is_ascii_digit())
                .is_none_or(|c| c == '-')
    });
    o_series || m == "gpt-5" || m.starts_with("gpt-5-") || m.starts_with("gpt-5.")
}

/// Whether a Gemini model thinks unless told not to: 2.5 Pro and Flash (not Flash-Lite), and Gemini 3 on.
pub fn gemini_thinks_by_default(model: &str) -> bool {
    match gemini_version(model) {
        Some((major, _, _)) if major >= 3 => true,
        Some((2, 5, tier)) => {
            tier.starts_with("pro") || tier == "flash" || tier.starts_with("flash-0")
        }
        _ => false,
    }
}

/// Whether a Gemini model thinks at all (2.5 and later), so its thought summaries can be asked for.
pub fn gemini_thinks(model: &str) -> bool {
    gemini_version(model).is_some_and(|(major, minor, _)| major >= 3 || (major, minor) == (2, 5))
}

const LEVELS: [&str; 4] = ["minimal", "low", "medium", "high"];
const PRO_3_LEVELS: [&str; 2] = ["low", "high"];

/// The thinking levels a Gemini 3 model takes, in order, and the rule that says so (`None`: all four, nothing
/// documented against any).
pub fn gemini_levels(model: &str) -> (&'static [&'static str], Option<&'static Rule>) {
    match gemini_version(model) {
        Some((3, 0, tier)) if tier.starts_with("pro") => {
            (&PRO_3_LEVELS, Some(&GEMINI_3_PRO_LEVELS))
        }
        Some((major, _, tier)) if major >= 3 && tier.starts_with("pro") => {
            (&LEVELS[1..], Some(&GEMINI_PRO_LEVELS))
        }
        Some((major, _, tier)) if major >= 3 && tier.starts_with("flash") => {
            (&LEVELS, Some(&GEMINI_FLASH_LEVELS))
        }
        _ => (&LEVELS, None),
    }
}

/// The level asked for by `effort` (`none` asks `minimal`: Gemini 3 cannot stop thinking).
pub fn level_of(effort: ReasoningEffort) -> &'static str {
    match effort {
        ReasoningEffort::None | ReasoningEffort::Minimal => "minimal",
        ReasoningEffort::Low => "low",
        ReasoningEffort::Medium => "medium",
        ReasoningEffort::High => "high",
    }
}

/// Of the levels `allowed`, the nearest to `wanted` (the higher of two as near).
pub fn nearest_level(wanted: &str, allowed: &[&'static str]) -> &'static str {
    let rank = |l: &str| LEVELS.iter().position(|x| *x == l).unwrap_or(3) as i32;
    let w = rank(wanted);
    allowed
        .iter()
        .copied()
        .min_by_key(|l| ((rank(l) - w).abs(), -rank(l)))
        .unwrap_or("high")
}

/// The thinking budgets a Gemini 2.5 model takes: `min..=max`, and whether 0 (no thinking) is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetRange {
    pub min: u32,
    pub max: u32,
    pub off: bool,
    pub rule: &'static Rule,
}

impl BudgetRange {
    /// `budget` moved into the range (0 to the least where thinking cannot stop).
    pub fn clamp(&self, budget: u32) -> u32 {
        if budget == 0 && self.off {
            return 0;
        }
        budget.clamp(self.min, self.max)
    }

    pub fn takes(&self, budget: u32) -> bool {
        self.clamp(budget) == budget
    }
}

/// The documented thinking budgets of a Gemini 2.5 model (`None`: none documented; the server checks).
pub fn gemini_budget(model: &str) -> Option<BudgetRange> {
    let (major, minor, tier) = gemini_version(model)?;
    if (major, minor) != (2, 5) {
        return None;
    }
    let range = |min, max, off, rule| BudgetRange {
        min,
        max,
        off,
        rule,
    };
    if tier.starts_with("pro") {
        Some(range(128, 32_768, false, &GEMINI_25_PRO_BUDGET))
    } else if tier.starts_with("flash-lite") {
        Some(range(512, 24_576, true, &GEMINI_25_LITE_BUDGET))
    } else if tier.starts_with("flash") {
        Some(range(1, 24_576, true, &GEMINI_25_FLASH_BUDGET))
    } else {
        None
    }
}

/// How many tokens a model that thinks by default needs, and the rule that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThinkingRoom {
    pub max_tokens: u32,
    pub rule: &'static Rule,
}

/// The `--max-tokens` a model that thinks (or reasons) by default is given when none is: `None` for a model that
/// answers at once, whose default stays 1,024.
pub fn thinking_room(backend: BackendKind, model: &str) -> Option<ThinkingRoom> {
    match backend {
        BackendKind::OpenAi if is_openai_reasoning_model(model) => Some(ThinkingRoom {
            max_tokens: 25_000,
            rule: &OPENAI_THINKING_ROOM,
        }),
        BackendKind::Gemini if gemini_thinks_by_default(model) => Some(ThinkingRoom {
            max_tokens: 65_536,
            rule: &GEMINI_THINKING_ROOM,
        }),
        _ => None,
    }
}

/// The warning for a `max_tokens` too small for a model that thinks by default, or `None`.
pub fn room_warning(
    backend: BackendKind,
    model: &str,
    params: &nmb_chat::GenParams,
) -> Option<String> {
    let room = thinking_room(backend, model)?;
    let explicit_budget = params
        .thinking_budget
        .is_some_and(|b| b < params.max_tokens);
    if params.max_tokens >= room.max_tokens
        || explicit_budget
        || params.reasoning_effort == Some(ReasoningEffort::None)
    {
        return None;
    }
    Some(format!(
        "{model} thinks before it answers and its thinking counts toward --max-tokens {}: an answer cut off \
         while thinking comes back empty (the report counts these apart); {} leave room for it \
         (docs/providers.md)",
        params.max_tokens, room.max_tokens
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_families_by_name() {
        for m in [
            "claude-sonnet-4-5",
            "claude-sonnet-4-5-20250929",
            "claude-haiku-4-5",
            "claude-opus-4-1-20250805",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "claude-opus-4-5@20251101",
            "anthropic/claude-sonnet-4-6",
        ] {
            assert_eq!(claude_sampling(m), Sampling::OneOf, "{m}");
        }
        assert_eq!(claude_sampling("claude-opus-4-7"), Sampling::Neither);
        for m in [
            "claude-3-7-sonnet-20250219",
            "claude-sonnet-4-20250514",
            "claude-3-5-haiku",
            "test-model",
            "claude-opus-4-10",
        ] {
            assert_eq!(claude_sampling(m), Sampling::Both, "{m}");
        }
    }

    #[test]
    fn gemini_levels_and_budgets_by_name() {
        assert_eq!(gemini_levels("gemini-3-pro-preview").0, ["low", "high"]);
        assert_eq!(gemini_levels("models/gemini-3-pro").0, ["low", "high"]);
        assert_eq!(
            gemini_levels("gemini-3.1-pro-preview").0,
            ["low", "medium", "high"]
        );
        assert_eq!(gemini_levels("gemini-3-flash-preview").0, LEVELS);
        assert!(gemini_levels("gemini-2.5-pro").1.is_none());
        let pro = ["low", "high"];
        assert_eq!(nearest_level("minimal", &pro), "low");
        assert_eq!(nearest_level("medium", &pro), "high");
        assert_eq!(nearest_level("low", &pro), "low");
        let budget = gemini_budget("gemini-2.5-pro").unwrap();
        assert_eq!((budget.clamp(0), budget.clamp(99_999)), (128, 32_768));
        assert!(!budget.takes(0) && budget.takes(128));
        let lite = gemini_budget("gemini-2.5-flash-lite").unwrap();
        assert_eq!((lite.clamp(0), lite.clamp(128)), (0, 512));
        assert_eq!(gemini_budget("gemini-2.5-flash").unwrap().clamp(0), 0);
        assert!(gemini_budget("gemini-3-pro").is_none());
        assert!(takes_thinking_level("gemini-3-pro") && !takes_thinking_level("gemini-2.5-pro"));
        assert!(
            gemini_thinks_by_default("gemini-2.5-pro")
                && gemini_thinks_by_default("gemini-2.5-flash")
        );
        assert!(
            !gemini_thinks_by_default("gemini-2.5-flash-lite")
                && !gemini_thinks_by_default("gemini-2.0-flash")
        );
        assert!(gemini_thinks("gemini-2.5-flash-lite") && !gemini_thinks("test-model"));
    }

    #[test]
    fn knows_openais_reasoning_models_by_name() {
        for m in [
            "o1",
            "o1-mini",
            "o3",
            "o3-mini",
            "o3-pro",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5-nano",
            "gpt-5.1",
            "GPT-5",
            "openai/o3",
        ] {
            assert!(is_openai_reasoning_model(m), "{m}");
        }
        for m in [
            "gpt-4o",
            "gpt-4.1",
            "gpt-4o-mini",
            "omni",
            "o",
            "gpt-50",
            "olmo-2",
            "Qwen/Qwen3-8B",
        ] {
            assert!(!is_openai_reasoning_model(m), "{m}");
        }
    }

    #[test]
    fn models_that_think_by_default_get_room() {
        assert_eq!(
            thinking_room(BackendKind::Gemini, "gemini-2.5-pro")
                .unwrap()
                .max_tokens,
            65_536
        );
        assert_eq!(
            thinking_room(BackendKind::OpenAi, "o3").unwrap().max_tokens,
            25_000
        );
        assert!(thinking_room(BackendKind::OpenAi, "gpt-4o").is_none());
        assert!(thinking_room(BackendKind::Anthropic, "claude-sonnet-4-5").is_none());
        let params = nmb_chat::GenParams::default();
        let warning = room_warning(BackendKind::Gemini, "gemini-2.5-pro", &params).unwrap();
        assert!(
            warning.contains("--max-tokens 1024") && warning.contains("65536"),
            "{warning}"
        );
        let roomy = nmb_chat::GenParams {
            max_tokens: 65_536,
            ..params.clone()
        };
        assert!(room_warning(BackendKind::Gemini, "gemini-2.5-pro", &roomy).is_none());
    }

    #[test]
    fn every_rule_says_where_it_is_written_and_the_docs_list_it() {
        let docs = include_str!("../../../docs/providers.md");
        for r in RULES {
            assert!(!r.source.is_empty() && !r.rule.is_empty(), "{r:?}");
            assert!(
                docs.contains(r.models),
                "docs/providers.md lacks the rule for {}",
                r.models
            );
        }
    }
}
