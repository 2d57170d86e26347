//! Grammar-constrained decoding. The grammar a JSON schema becomes equals the one llama.cpp's own converter writes
//! (`fixtures/schema_grammars.json`, written by `fixtures/make_schema_grammars.py` with llama.cpp's
//! `json_schema_to_grammar.py`), for every schema nmb sends and 300 random ones of the subset.

use nmb_local::LocalModel;
use serde_json::Value;

fn fixture() -> Vec<Value> {
    let text = include_str!("../fixtures/schema_grammars.json");
    serde_json::from_str(text).expect("schema_grammars.json is JSON")
}

#[test]
fn every_schema_becomes_the_grammar_llama_cpp_writes() {
    let entries = fixture();
    assert!(entries.len() > 300, "{} fixture schemas", entries.len());
    let mut wrong = Vec::new();
    for e in &entries {
        let name = e["name"].as_str().unwrap_or("?");
        let want = e["grammar"].as_str().expect("a grammar");
        match LocalModel::schema_grammar(&e["schema"]) {
            Ok(got) if got.trim_end() == want.trim_end() => {}
            Ok(got) => wrong.push(format!("{name}:\n--- llama.cpp\n{want}\n--- nmb\n{got}")),
            Err(err) => wrong.push(format!("{name}: {err}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} differ:\n{}",
        wrong.len(),
        entries.len(),
        wrong.join("\n\n")
    );
}

/// The fixture holds the schemas the task families send as they are now (the judges' are copied from
/// `nmb-score`'s prompts), so a changed schema fails here until the fixture is written again.
#[test]
fn the_fixture_holds_every_schema_the_families_send() {
    use nmb_plan::output::{
        differential_schema, lesion_schema, rationale_schema, structured_schema,
    };
    let entries = fixture();
    for schema in [
        differential_schema(),
        lesion_schema(),
        rationale_schema(),
        structured_schema(),
    ] {
        assert!(
            entries.iter().any(|e| e["schema"] == schema),
            "schema_grammars.json lacks {schema}: run fixtures/make_schema_grammars.py"
        );
    }
}

/// At temperature 0 the answers to JSON-schema requests of the sample suites (`sample` and `sample-structured`,
/// text inputs, first turn; the first four of each schema, or all of them with `NMB_GRAMMAR_PARITY_ALL=1`) equal
/// llama.cpp's server's, token for token, when the server is given the same prompt ids and the grammar llama.cpp's
/// converter writes for the schema (`grammar`, which its server decodes with llama.cpp's own grammar sampler;
/// xllamacpp's build would hand a `json_schema` to LLGuidance instead, see docs/evaluate.md).
fn answers_equal_llama_cpps(gguf: Option<std::path::PathBuf>) {
    use nmb_chat::{GenParams, OutputFormat};
    use nmb_test_support::llama::LlamaServer;
    const MAX_TOKENS: u32 = 64;
    // `NMB_GRAMMAR_PARITY_ALL=1` asks every prompt (about a quarter hour on two cores).
    let per_schema_cap = match std::env::var("NMB_GRAMMAR_PARITY_ALL").as_deref() {
        Ok("1") => usize::MAX,
        _ => 4,
    };
    let Some(gguf) = gguf else { return };
    let Some(server) = LlamaServer::start(&gguf) else {
        return;
    };
    let model = LocalModel::load(&gguf).expect("the model loads");
    let options = nmb_plan::PlanOptions {
        input_mode: nmb_plan::InputMode::Text,
        ..nmb_plan::PlanOptions::default()
    };
    let params = GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens: MAX_TOKENS,
        seed: Some(7),
        ..GenParams::default()
    };
    let suites = [
        nmb_suite::sample::build(),
        nmb_suite::sample::structured::build(),
    ];
    let mut asked = 0;
    let mut per_schema = std::collections::HashMap::new();
    let mut differ = Vec::new();
    for suite in &suites {
        for planned in nmb_plan::plan(suite, &options) {
            let planned = planned.expect("the sample suite plans");
            let OutputFormat::Json {
                schema: Some(schema),
            } = &planned.output
            else {
                continue;
            };
            // A few prompts per schema: each schema's grammar is exercised on several answers, and the test
            // stays minutes long on two cores (llama.cpp's server checks each sampled token against it too).
            let seen = per_schema.entry(schema.to_string()).or_insert(0);
            if *seen == per_schema_cap {
                continue;
            }
            *seen += 1;
            let messages =
                nmb_plan::conversation_for_turn(&planned, 0, &[]).expect("the first turn");
            let rendered = model
                .render_prompt(&messages)
                .expect("the chat template renders");
            let prompt = model
                .prompt_tokens(&rendered.text)
                .expect("the prompt tokenizes");
            let (runs, _) = model
                .sample_tokens_as(&prompt, &params, 1, &planned.output)
                .expect("nmb answers");
            let grammar = LocalModel::schema_grammar(schema).expect("the schema converts");
            let answer = crate::greedy::post_json(
                &server.url,
                "/completion",
                &serde_json::json!({
                    "prompt": prompt,
                    "n_predict": MAX_TOKENS,
                    "temperature": 0.0,
                    "cache_prompt": false,
                    "return_tokens": true,
                    "grammar": grammar,
                }),
            );
            let mut theirs: Vec<u32> = answer["tokens"]
                .as_array()
                .unwrap_or_else(|| panic!("no tokens in {answer}"))
                .iter()
                .filter_map(|t| t.as_u64().map(|t| t as u32))
                .collect();
            if answer["stop_type"] == "eos" {
                theirs.pop();
            }
            asked += 1;
            if runs[0].tokens != theirs {
                let ours = model.decode(&runs[0].tokens, false).unwrap_or_default();
                let text = answer["content"].as_str().unwrap_or_default();
                differ.push(format!(
                    "{}:\n  nmb:       {ours:?} {:?}\n  llama.cpp: {text:?} {theirs:?}",
                    planned.task_id, runs[0].tokens
                ));
            }
        }
    }
    assert!(asked >= 10, "only {asked} JSON-schema requests");
    assert!(per_schema.len() >= 3, "{} schemas asked", per_schema.len());
    assert!(
        differ.is_empty(),
        "{} of {asked} answers differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
fn smollm2_json_answers_at_temperature_0_equal_llama_cpps() {
    answers_equal_llama_cpps(crate::common::smollm2());
}

/// Gemma 3 has sliding-window layers, so llama.cpp's server reads the last four prompt tokens in a batch of
/// their own (see `attention::prompt_chunk`); read in one batch, one of these answers (stroke_left_mca/lesion)
/// writes `findings` as one token where the server writes `f`, `ind`, `ings`.
#[test]
fn gemma3_json_answers_at_temperature_0_equal_llama_cpps() {
    answers_equal_llama_cpps(crate::common::gemma3());
}
