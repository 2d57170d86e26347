//! The chat template: the GGUF's `tokenizer.chat_template` (Jinja) rendered with minijinja, or, when the GGUF has
//! none, a built-in one picked by architecture (Gemma's turns for the Gemma family, ChatML otherwise).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, Error, ErrorKind, Value};
use nmb_chat::{Message, Part, Role};

use crate::LocalError;

/// Replaces each image part for a text-only model, so the model knows an image was there and is not shown.
pub const IMAGE_OMITTED_MARKER: &str = "[image omitted: text-only model]";

/// ChatML, used when the GGUF has no `tokenizer.chat_template` and its architecture has no built-in of its own.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + \
    message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// Gemma's turns, for a Gemma-family GGUF without a template: llama.cpp's `LLM_CHAT_TEMPLATE_GEMMA` written in
/// Jinja. Gemma has no system role, so system messages are trimmed, joined and put at the start of the first user
/// turn; `assistant` is `model`; every message is trimmed of ASCII whitespace (C's `isspace`, hence the explicit
/// characters: Jinja's bare `trim` would also strip Unicode spaces). No `bos_token`: the tokenizer adds BOS.
pub const GEMMA_TEMPLATE: &str = "{%- set ws = ' \t\n\u{b}\u{c}\r' -%}\
{%- set ns = namespace(system='') -%}\
{%- for message in messages -%}\
{%- if message['role'] == 'system' -%}\
{%- set ns.system = ns.system + message['content'] | trim(ws) -%}\
{%- else -%}\
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\
{{- '<start_of_turn>' + role + '\n' -}}\
{%- if ns.system and role != 'model' -%}{{- ns.system + '\n\n' -}}{%- set ns.system = '' -%}{%- endif -%}\
{{- message['content'] | trim(ws) + '<end_of_turn>\n' -}}\
{%- endif -%}\
{%- endfor -%}\
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}";

mod budget;

use budget::{Budget, Capped};
pub use budget::{TEMPLATE_FUEL, TEMPLATE_OUTPUT_CAP};

const NAME: &str = "chat_template";

/// The conversations a template must render when the model loads ([`ChatTemplate::check`]): the shapes a run
/// sends (a question; a system prompt; a consult's later turn with an image left out).
fn probes() -> [Vec<Message>; 4] {
    let system = || Message::text(Role::System, "You are a neurologist. Answer briefly.");
    let user = || {
        Message::text(
            Role::User,
            format!(
                "A 54-year-old woman has sudden left arm weakness.\n\n{IMAGE_OMITTED_MARKER}\n\n\
                 What is the most likely diagnosis?"
            ),
        )
    };
    let answer = || Message::text(Role::Assistant, "Right MCA ischaemic stroke.");
    let later = || Message::text(Role::User, "Where is the lesion?");
    [
        vec![user()],
        vec![system(), user()],
        vec![user(), answer(), later()],
        vec![system(), user(), answer(), later()],
    ]
}

/// Which chat template a model renders with; recorded so a run can say which one it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateSource {
    /// The GGUF's own `tokenizer.chat_template`.
    Gguf,
    /// [`GEMMA_TEMPLATE`], for a Gemma-family GGUF without one.
    Gemma,
    /// [`CHATML_TEMPLATE`], for any other GGUF without one.
    ChatMl,
}

impl TemplateSource {
    /// How a run records it: `gguf`, `builtin:gemma` or `builtin:chatml`.
    pub fn label(self) -> &'static str {
        match self {
            TemplateSource::Gguf => "gguf",
            TemplateSource::Gemma => "builtin:gemma",
            TemplateSource::ChatMl => "builtin:chatml",
        }
    }

    /// The built-in template for a GGUF of `architecture` that carries none. llama.cpp's server uses ChatML for
    /// every such model; Gemma models never saw ChatML in training, so nmb uses their own turns instead.
    fn builtin(architecture: &str) -> (TemplateSource, &'static str) {
        if architecture.starts_with("gemma") {
            (TemplateSource::Gemma, GEMMA_TEMPLATE)
        } else {
            (TemplateSource::ChatMl, CHATML_TEMPLATE)
        }
    }
}

/// A compiled chat template plus the special-token strings templates refer to.
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
    path: PathBuf,
    pub source: String,
    pub kind: TemplateSource,
    bos_token: String,
    eos_token: String,
    /// Whether the template shows a message's content only as typed parts ([`ChatTemplate::requires_typed_content`]).
    typed: bool,
}

/// Variables a request adds to the template's context.
pub type TemplateKwargs = serde_json::Map<String, serde_json::Value>;

/// A rendered prompt and how many image parts it left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPrompt {
    pub text: String,
    pub images_dropped: usize,
}

impl ChatTemplate {
    /// Compiles `source` (the GGUF's template), or the built-in one for `architecture` when it is `None`. Jinja
    /// settings follow Hugging Face's `apply_chat_template`: `trim_blocks`, `lstrip_blocks`, loop controls,
    /// `raise_exception`, Python string methods.
    pub fn new(
        path: &Path,
        source: Option<&str>,
        architecture: &str,
        bos_token: String,
        eos_token: String,
    ) -> Result<Self, LocalError> {
        let (kind, source) = match source {
            Some(s) => (TemplateSource::Gguf, s),
            None => TemplateSource::builtin(architecture),
        };
        let source = source.to_string();
        let mut env = Environment::new();
        if let Ok(syntax) = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
        {
            env.set_syntax(syntax);
        }
        env.set_unknown_method_callback(budget::python_methods);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", budget::tojson);
        env.add_template_owned(NAME, source.clone())
            .map_err(|e| LocalError::Template {
                path: path.to_path_buf(),
                message: format!("cannot compile tokenizer.chat_template: {e}"),
            })?;
        let mut template = ChatTemplate {
            env,
            path: path.to_path_buf(),
            source,
            kind,
            bos_token,
            eos_token,
            typed: false,
        };
        template.typed = template.requires_typed_content();
        Ok(template)
    }

    /// Renders a conversation, ending with the assistant's generation prompt. `kwargs` are further template
    /// variables (a request's `chat_template_kwargs`, such as Qwen3's `enable_thinking`); they cannot replace
    /// `messages`, `add_generation_prompt`, `bos_token` or `eos_token`. The render runs under a budget sized from
    /// the conversation ([`TEMPLATE_FUEL`], [`TEMPLATE_OUTPUT_CAP`]); going past it is an error.
    pub fn render(
        &self,
        messages: &[Message],
        kwargs: &TemplateKwargs,
    ) -> Result<RenderedPrompt, LocalError> {
        self.render_within(messages, kwargs, None)
            .map_err(|failure| self.error(failure.message(self)))
    }

    /// [`ChatTemplate::render`] for a model that sees images: each image part becomes `marker`, and a
    /// message's parts are joined as llama.cpp's server joins them (`common_chat_msg::to_json_oaicompat`): a
    /// text part after another text part on a new line, nothing between a marker and what is next to it.
    /// Nothing is dropped.
    pub fn render_media(
        &self,
        messages: &[Message],
        kwargs: &TemplateKwargs,
        marker: &str,
    ) -> Result<RenderedPrompt, LocalError> {
        self.render_within(messages, kwargs, Some(marker))
            .map_err(|failure| self.error(failure.message(self)))
    }

    fn render_within(
        &self,
        messages: &[Message],
        kwargs: &TemplateKwargs,
        media: Option<&str>,
    ) -> Result<RenderedPrompt, Failure> {
        let images_dropped = match media {
            Some(_) => 0,
            None => messages.iter().map(Message::image_count).sum(),
        };
        let input = input_bytes(messages, kwargs);
        let budget = Budget::for_input(input);
        let rendered =
            budget::on_big_stack(|| Ok(self.render_bytes(messages, kwargs, media, budget)))
                .map_err(Failure::Error)?;
        match rendered {
            Err(RenderError::OverCap) => Err(Failure::TooLong { input, budget }),
            Err(RenderError::Engine(e)) if e.kind() == ErrorKind::OutOfFuel => {
                Err(Failure::OutOfFuel { input, budget })
            }
            Err(RenderError::Engine(e)) => Err(Failure::Error(describe(&e))),
            Ok(bytes) => Ok(RenderedPrompt {
                text: String::from_utf8_lossy(&bytes).into_owned(),
                images_dropped,
            }),
        }
    }

    /// The template's output for a conversation, under `budget`.
    fn render_bytes(
        &self,
        messages: &[Message],
        kwargs: &TemplateKwargs,
        media: Option<&str>,
        budget: Budget,
    ) -> Result<Vec<u8>, RenderError> {
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| message_value(m, media, self.typed))
            .collect();
        let ctx = minijinja::context! {
            messages => msgs,
            add_generation_prompt => true,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
            ..map_value(kwargs)
        };
        let mut env = self.env.clone();
        env.set_fuel(Some(budget.fuel));
        let mut out = Capped::new(budget.output);
        let rendered = env
            .get_template(NAME)
            .and_then(|t| t.render_captured_to(ctx, &mut out));
        match rendered {
            Err(_) if out.over => Err(RenderError::OverCap),
            Err(e) => Err(RenderError::Engine(e)),
            Ok(_) => Ok(out.bytes),
        }
    }

    /// Renders the [`probes`] once, as the model loads, so that a template that runs past its budget is refused
    /// before any request, and one that renders none of them (a broken template) too. A template that refuses
    /// some shapes on purpose (`raise_exception` on a system message, say) is accepted while another renders.
    pub fn check(&self) -> Result<(), LocalError> {
        let mut first_error = None;
        let mut rendered = false;
        for probe in probes() {
            match self.render_within(&probe, &TemplateKwargs::new(), None) {
                Ok(_) => rendered = true,
                Err(Failure::Error(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(budget) => {
                    return Err(self.error(format!(
                        "refused at load, on a sample conversation of {} messages: {}",
                        probe.len(),
                        budget.message(self)
                    )))
                }
            }
        }
        match (rendered, first_error) {
            (false, Some(e)) => Err(self.error(format!(
                "refused at load: {} renders none of {} sample conversations (a question, with a system \
                 prompt, a later turn); the first fails with: {e}",
                self.name(),
                probes().len()
            ))),
            _ => Ok(()),
        }
    }

    fn error(&self, message: String) -> LocalError {
        LocalError::Template {
            path: self.path.clone(),
            message,
        }
    }

    /// Which template this is, as errors name it.
    fn name(&self) -> String {
        match self.kind {
            TemplateSource::Gguf => "tokenizer.chat_template".into(),
            other => format!("the built-in template ({})", other.label()),
        }
    }
}

/// Why the engine stopped rendering.
enum RenderError {
    OverCap,
    Engine(Error),
}

/// Why a render failed.
enum Failure {
    /// Past its fuel: the template loops or builds text without end.
    OutOfFuel { input: usize, budget: Budget },
    /// Past its output cap.
    TooLong { input: usize, budget: Budget },
    /// Any other error (a syntax error at run time, `raise_exception`, a wrong type).
    Error(String),
}

impl Failure {
    fn message(&self, t: &ChatTemplate) -> String {
        let name = t.name();
        match self {
            Failure::OutOfFuel { input, budget } => format!(
                "{name} ran past its budget of {} fuel on a {input}-byte conversation (every step and every \
                 64 bytes it builds cost one): it loops or builds text without end",
                budget.fuel
            ),
            Failure::TooLong { input, budget } => format!(
                "{name} wrote more than {} bytes for a {input}-byte conversation (the cap is {})",
                budget.output,
                Budget::output_rule()
            ),
            Failure::Error(e) => format!("cannot render: {e}"),
        }
    }
}

/// The bytes of text a render is given: every text part, and the request's template variables.
fn input_bytes(messages: &[Message], kwargs: &TemplateKwargs) -> usize {
    let text: usize = messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| match p {
            Part::Text(t) => t.len(),
            Part::Image(_) => IMAGE_OMITTED_MARKER.len(),
        })
        .sum();
    text + serde_json::Value::Object(kwargs.clone()).to_string().len()
}

/// `{"role": ..., "content": ...}`: for a text-only model, text parts joined by blank lines and images replaced
/// by [`IMAGE_OMITTED_MARKER`]; with a `media` marker, as [`ChatTemplate::render_media`] joins them. For a
/// template that shows only typed content (`typed`), the joined content is one `{"type": "text"}` part, as
/// llama.cpp's server gives it (so an image first is no image part to the template).
fn message_value(m: &Message, media: Option<&str>, typed: bool) -> Value {
    let content = match media {
        None => m
            .parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.as_str(),
                Part::Image(_) => IMAGE_OMITTED_MARKER,
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
        Some(marker) => media_content(m, marker),
    };
    let content = if typed {
        Value::from(vec![text_part(&content)])
    } else {
        Value::from(content)
    };
    let map: BTreeMap<&str, Value> = [
        ("role", Value::from(role_name(m.role))),
        ("content", content),
    ]
    .into();
    Value::from(map)
}

impl ChatTemplate {
    /// Whether the template shows a message's content only when it is a list of typed parts, as llama.cpp's minja
    /// tells (`requires_typed_content`): a probe string given as the content is not in the output, and given as one
    /// `{"type": "text"}` part it is.
    fn requires_typed_content(&self) -> bool {
        const PROBE: &str = "<__content_probe__>";
        let shows = |content: Value| {
            let user: BTreeMap<&str, Value> =
                [("role", Value::from("user")), ("content", content)].into();
            let ctx = minijinja::context! {
                messages => vec![Value::from(user)],
                add_generation_prompt => false,
                bos_token => self.bos_token.as_str(),
                eos_token => self.eos_token.as_str(),
            };
            let mut env = self.env.clone();
            env.set_fuel(Some(100_000));
            env.get_template(NAME)
                .and_then(|t| t.render(ctx))
                .is_ok_and(|out| out.contains(PROBE))
        };
        !shows(Value::from(PROBE)) && shows(Value::from(vec![text_part(PROBE)]))
    }
}

/// `{"type": "text", "text": text}`.
fn text_part(text: &str) -> Value {
    let map: BTreeMap<&str, Value> =
        [("type", Value::from("text")), ("text", Value::from(text))].into();
    Value::from(map)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// A message's parts joined as llama.cpp's server joins them when a message holds media: a newline before a text
/// part that follows text, none before or after a marker.
fn media_content(m: &Message, marker: &str) -> String {
    let mut text = String::new();
    let mut after_marker = false;
    for part in &m.parts {
        match part {
            Part::Text(t) => {
                if !after_marker && !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(t);
                after_marker = false;
            }
            Part::Image(_) => {
                text.push_str(marker);
                after_marker = true;
            }
        }
    }
    text
}

/// A JSON value as a template value (minijinja is built without serde here).
fn json_value(v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::from(()),
        J::Bool(b) => Value::from(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(u)) => Value::from(u),
            _ => Value::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::from(s.as_str()),
        J::Array(items) => Value::from(items.iter().map(json_value).collect::<Vec<_>>()),
        J::Object(map) => map_value(map),
    }
}

fn map_value(map: &TemplateKwargs) -> Value {
    Value::from(
        map.iter()
            .map(|(k, v)| (k.clone(), json_value(v)))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// The error text with its cause chain (minijinja puts the `raise_exception` message in the detail).
fn describe(e: &Error) -> String {
    let mut s = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpl(source: Option<&str>) -> ChatTemplate {
        built(source, "llama")
    }

    fn built(source: Option<&str>, architecture: &str) -> ChatTemplate {
        ChatTemplate::new(
            Path::new("t.gguf"),
            source,
            architecture,
            "<bos>".into(),
            "<eos>".into(),
        )
        .expect("compiles")
    }

    fn render(t: &ChatTemplate, messages: &[Message]) -> String {
        t.render(messages, &TemplateKwargs::new())
            .expect("renders")
            .text
    }

    /// A consult with a system prompt, padded with whitespace that templates trim.
    fn consult() -> Vec<Message> {
        vec![
            Message::text(Role::System, " You are a neurologist.\n"),
            Message::text(Role::User, "  Headache?  "),
            Message::text(Role::Assistant, "Migraine."),
            Message::text(Role::User, "Why?\t"),
        ]
    }

    fn conv() -> Vec<Message> {
        vec![
            Message::text(Role::User, "  Hi  "),
            Message::text(Role::Assistant, "Hello"),
            Message::text(Role::User, "Bye"),
        ]
    }

    #[test]
    fn chatml_fallback_when_gguf_has_none() {
        let t = tpl(None);
        assert_eq!(t.kind, TemplateSource::ChatMl);
        assert_eq!(
            render(&t, &[Message::text(Role::User, "x")]),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn bos_eos_python_methods_and_block_trimming() {
        // A Llama-2-style template: bos/eos tokens, .strip(), loop.index0, and blocks on their own lines.
        let src = "{{ bos_token }}\n{% for m in messages %}\n    {% if m['role'] == 'user' %}\n[INST] {{ m['content'].strip() }} [/INST]\n    {% else %}\n{{ m['content'] }}{{ eos_token }}\n    {% endif %}\n{% endfor %}";
        assert_eq!(
            render(&tpl(Some(src)), &conv()),
            "<bos>\n[INST] Hi [/INST]\nHello<eos>\n[INST] Bye [/INST]\n"
        );
    }

    #[test]
    fn raise_exception_becomes_a_template_error_with_its_message() {
        let src = "{% if messages[0]['role'] != 'system' %}{{ raise_exception('System message required') }}{% endif %}";
        let err = tpl(Some(src))
            .render(&conv(), &TemplateKwargs::new())
            .expect_err("raises");
        assert!(err.to_string().contains("System message required"), "{err}");
    }

    #[test]
    fn loop_controls_work() {
        let src = "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m['content'] }}{% endfor %}";
        assert_eq!(render(&tpl(Some(src)), &conv()), "  Hi  ");
    }

    #[test]
    fn broken_template_is_a_compile_error() {
        let err = ChatTemplate::new(
            Path::new("t.gguf"),
            Some("{% for %}"),
            "llama",
            String::new(),
            String::new(),
        );
        assert!(matches!(err, Err(LocalError::Template { .. })));
    }

    /// The hostile templates a GGUF can carry end at load with an error naming the template and its budget, in
    /// a fraction of a second, however they fail: text doubled without end, loops nested past any need, a flood
    /// of output.
    #[test]
    fn templates_past_their_budget_are_refused_when_checked() {
        let hostile = [
            (
                "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}\
                 {% endfor %}{{ ns.s }}",
                "fuel",
            ),
            (
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                "fuel",
            ),
            (
                "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
                "more than",
            ),
        ];
        for (src, says) in hostile {
            let started = std::time::Instant::now();
            let err = tpl(Some(src)).check().expect_err("refused");
            let text = err.to_string();
            for word in ["t.gguf", "tokenizer.chat_template", "refused at load", says] {
                assert!(text.contains(word), "`{word}` missing from: {text}");
            }
            assert!(
                started.elapsed().as_secs() < 10,
                "{src} took {:?}",
                started.elapsed()
            );
        }
    }

    /// What fuel alone leaves open, found by fuzzing: `tojson` with a huge indent, `str.format` with a huge width
    /// (each allocated near a gigabyte before any charge), and values nested too deep for the stack to print.
    #[test]
    fn what_fuel_leaves_open_is_closed() {
        for (src, says) in [
            (
                "{{ messages | tojson(indent=99999999) }}",
                "tojson would write more than",
            ),
            (
                "{{ '{:>900000000}'.format('x') }}",
                "str.format asks for a width",
            ),
        ] {
            let err = tpl(Some(src)).check().expect_err("refused");
            assert!(err.to_string().contains(says), "{src}: {err}");
        }
        assert!(tpl(Some(
            "{{ messages | tojson(indent=2) }}{{ '{:>8}'.format('x') }}"
        ))
        .check()
        .is_ok());
        // With the most fuel a render gets, every depth it can build prints, compares and drops without
        // overflowing the stack, or the fuel runs out first.
        let long = [Message::text(Role::User, "x".repeat(8 << 20))];
        for depth in [100_000, 200_000, 300_000] {
            let src = format!(
                "{{% set ns = namespace(l=[]) %}}{{% for k in range(100) %}}\
                 {{% for i in range({}) %}}{{% set ns.l = [ns.l] %}}{{% endfor %}}{{% endfor %}}\
                 {{{{ (ns.l == ns.l) ~ (ns.l | length) }}}}{{{{ ns.l }}}}",
                depth / 100
            );
            match tpl(Some(&src)).render(&long, &TemplateKwargs::new()) {
                Ok(out) => assert!(
                    out.text.starts_with("True1[[[["),
                    "{depth}: {}",
                    &out.text[..out.text.len().min(80)]
                ),
                Err(e) => assert!(e.to_string().contains("fuel"), "{depth}: {e}"),
            }
        }
    }

    /// A request's render is held to the same budget.
    #[test]
    fn a_render_past_its_budget_is_an_error() {
        let t = tpl(Some(
            "{% for m in messages %}{% for i in range(100000) %}{{ m.content ~ m.content }}{% endfor %}\
             {% endfor %}",
        ));
        let err = t
            .render(
                &[Message::text(Role::User, "0123456789")],
                &TemplateKwargs::new(),
            )
            .expect_err("two million bytes from ten are refused");
        assert!(err.to_string().contains("more than"), "{err}");
    }

    /// Real templates pass the check, and the budget grows with the conversation: a few megabytes of consult
    /// render through Qwen3's template, which walks the messages more than once.
    #[test]
    fn real_templates_and_long_conversations_stay_within_budget() {
        for src in [
            None,
            Some(include_str!(
                "../../tests/fixtures/qwen3_chat_template.jinja"
            )),
            Some(include_str!(
                "../../tests/fixtures/gemma3_chat_template.jinja"
            )),
        ] {
            tpl(src).check().expect("within budget");
        }
        built(None, "gemma3").check().expect("within budget");
        let long = "The MRI shows a periventricular lesion. ".repeat(50_000);
        let msgs: Vec<Message> = (0..4)
            .flat_map(|_| {
                [
                    Message::text(Role::User, long.clone()),
                    Message::text(Role::Assistant, "<think>\nHmm.\n</think>\n\nDemyelination."),
                ]
            })
            .chain([Message::text(Role::User, "And now?")])
            .collect();
        let t = tpl(Some(include_str!(
            "../../tests/fixtures/qwen3_chat_template.jinja"
        )));
        let out = t.render(&msgs, &TemplateKwargs::new()).expect("renders");
        assert!(out.text.len() > 4 * long.len(), "{}", out.text.len());
    }

    /// A template that refuses some shapes on purpose loads; one that renders nothing is refused at load.
    #[test]
    fn a_template_that_renders_no_sample_conversation_is_refused() {
        let no_system = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}\
                         {% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}";
        tpl(Some(no_system))
            .check()
            .expect("renders the conversations without a system prompt");
        let err = tpl(Some("{{ raise_exception('never') }}"))
            .check()
            .expect_err("renders nothing");
        assert!(err.to_string().contains("never"), "{err}");
    }

    /// llama.cpp's `LLM_CHAT_TEMPLATE_GEMMA` (src/llama-chat.cpp) on this conversation: the system prompt trimmed
    /// and put before the first user turn, every message trimmed, `assistant` as `model`.
    #[test]
    fn gemma_architectures_without_a_template_get_gemma_turns() {
        for arch in ["gemma", "gemma2", "gemma3"] {
            let t = built(None, arch);
            assert_eq!(t.kind, TemplateSource::Gemma, "{arch}");
            assert_eq!(
                render(&t, &consult()),
                "<start_of_turn>user\nYou are a neurologist.\n\nHeadache?<end_of_turn>\n\
                 <start_of_turn>model\nMigraine.<end_of_turn>\n\
                 <start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n"
            );
        }
        assert_eq!(built(None, "qwen3").kind, TemplateSource::ChatMl);
    }

    /// Like llama.cpp, only ASCII whitespace is trimmed, and several system messages are joined.
    #[test]
    fn gemma_builtin_trims_like_c_and_joins_system_messages() {
        let msgs = vec![
            Message::text(Role::System, "A\u{b}"),
            Message::text(Role::System, "\u{c}B"),
            Message::text(Role::User, "\u{3000}x\r\n"),
        ];
        assert_eq!(
            render(&built(None, "gemma3"), &msgs),
            "<start_of_turn>user\nAB\n\n\u{3000}x<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    /// Gemma 3's own template (google/gemma-3-*-it) merges a system message into the first user turn rather than
    /// raising, and writes BOS itself.
    #[test]
    fn gemma3_own_template_takes_a_system_message() {
        let src = include_str!("../../tests/fixtures/gemma3_chat_template.jinja");
        let t = built(Some(src), "gemma3");
        assert_eq!(t.kind, TemplateSource::Gguf);
        assert_eq!(
            render(&t, &consult()),
            "<bos><start_of_turn>user\n You are a neurologist.\n\n\nHeadache?<end_of_turn>\n\
             <start_of_turn>model\nMigraine.<end_of_turn>\n\
             <start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    /// Qwen3's switch: `enable_thinking = false` closes an empty think block in the generation prompt; left out or
    /// true, the model opens its own.
    #[test]
    fn chat_template_kwargs_reach_the_template() {
        let t = tpl(Some(include_str!(
            "../../tests/fixtures/qwen3_chat_template.jinja"
        )));
        let msgs = [Message::text(Role::User, "Hi")];
        let with = |v: serde_json::Value| {
            let kwargs = v.as_object().cloned().expect("an object");
            t.render(&msgs, &kwargs).expect("renders").text
        };
        let open = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
        assert_eq!(with(serde_json::json!({})), open);
        assert_eq!(with(serde_json::json!({"enable_thinking": true})), open);
        assert_eq!(
            with(serde_json::json!({"enable_thinking": false})),
            format!("{open}<think>\n\n</think>\n\n")
        );
        // The request's own variables stay the template's.
        assert_eq!(
            with(serde_json::json!({"add_generation_prompt": false, "messages": []})),
            open
        );
    }

    /// A template that loops over typed parts (as SmolVLM's does) shows a text-only conversation too: the
    /// content goes in as one text part, as llama.cpp's server gives it; a template reading strings is unchanged.
    #[test]
    fn a_template_reading_only_typed_parts_gets_text_as_one_part() {
        let typed =
            "{% for m in messages %}{{ m.role }}:{% for p in m.content %}{% if p.type == 'text' %}\
                     {{ p.text }}{% endif %}{% endfor %};{% endfor %}";
        let t = tpl(Some(typed));
        assert!(t.typed);
        assert_eq!(render(&t, &conv()), "user:  Hi  ;assistant:Hello;user:Bye;");
        let plain = tpl(Some("{% for m in messages %}{{ m.content }};{% endfor %}"));
        assert!(!plain.typed);
        assert_eq!(render(&plain, &conv()), "  Hi  ;Hello;Bye;");
    }
}
