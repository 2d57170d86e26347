//! The chat template: the GGUF's `tokenizer.chat_template` (Jinja) rendered with minijinja, or ChatML.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, Error, ErrorKind, Value};
use nmb_chat::{Message, Part, Role};

use crate::LocalError;

/// Replaces each image part for a text-only model, so the model knows an image was there and is not shown.
pub const IMAGE_OMITTED_MARKER: &str = "[image omitted: text-only model]";

/// ChatML, used when the GGUF has no `tokenizer.chat_template`.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + \
    message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const NAME: &str = "chat_template";

/// A compiled chat template plus the special-token strings templates refer to.
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
    path: PathBuf,
    pub source: String,
    pub from_gguf: bool,
    bos_token: String,
    eos_token: String,
}

/// A rendered prompt and how many image parts it left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPrompt {
    pub text: String,
    pub images_dropped: usize,
}

impl ChatTemplate {
    /// Compiles `source` (the GGUF's template) or ChatML when it is `None`. Jinja settings follow Hugging Face's
    /// `apply_chat_template`: `trim_blocks`, `lstrip_blocks`, loop controls, `raise_exception`, Python string methods.
    pub fn new(
        path: &Path,
        source: Option<&str>,
        bos_token: String,
        eos_token: String,
    ) -> Result<Self, LocalError> {
        let from_gguf = source.is_some();
        let source = source.unwrap_or(CHATML_TEMPLATE).to_string();
        let mut env = Environment::new();
        if let Ok(syntax) = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
        {
            env.set_syntax(syntax);
        }
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned(NAME, source.clone())
            .map_err(|e| LocalError::Template {
                path: path.to_path_buf(),
                message: format!("cannot compile tokenizer.chat_template: {e}"),
            })?;
        Ok(ChatTemplate {
            env,
            path: path.to_path_buf(),
            source,
            from_gguf,
            bos_token,
            eos_token,
        })
    }

    /// Renders a conversation, ending with the assistant's generation prompt.
    pub fn render(&self, messages: &[Message]) -> Result<RenderedPrompt, LocalError> {
        let images_dropped = messages.iter().map(Message::image_count).sum();
        let msgs: Vec<Value> = messages.iter().map(message_value).collect();
        let ctx = minijinja::context! {
            messages => msgs,
            add_generation_prompt => true,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        };
        let text = self
            .env
            .get_template(NAME)
            .and_then(|t| t.render(ctx))
            .map_err(|e| LocalError::Template {
                path: self.path.clone(),
                message: format!("cannot render: {}", describe(&e)),
            })?;
        Ok(RenderedPrompt {
            text,
            images_dropped,
        })
    }
}

/// `{"role": ..., "content": ...}` with text parts joined by blank lines and images replaced by the marker.
fn message_value(m: &Message) -> Value {
    let content = m
        .parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => t.as_str(),
            Part::Image(_) => IMAGE_OMITTED_MARKER,
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let map: BTreeMap<&str, Value> = [
        ("role", Value::from(role)),
        ("content", Value::from(content)),
    ]
    .into();
    Value::from(map)
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
        ChatTemplate::new(Path::new("t.gguf"), source, "<s>".into(), "</s>".into())
            .expect("compiles")
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
        assert!(!t.from_gguf);
        let r = t
            .render(&[Message::text(Role::User, "x")])
            .expect("renders");
        assert_eq!(
            r.text,
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn bos_eos_python_methods_and_block_trimming() {
        // A Llama-2-style template: bos/eos tokens, .strip(), loop.index0, and blocks on their own lines.
        let src = "{{ bos_token }}\n{% for m in messages %}\n    {% if m['role'] == 'user' %}\n[INST] {{ m['content'].strip() }} [/INST]\n    {% else %}\n{{ m['content'] }}{{ eos_token }}\n    {% endif %}\n{% endfor %}";
        let r = tpl(Some(src)).render(&conv()).expect("renders");
        assert_eq!(
            r.text,
            "<s>\n[INST] Hi [/INST]\nHello</s>\n[INST] Bye [/INST]\n"
        );
    }

    #[test]
    fn raise_exception_becomes_a_template_error_with_its_message() {
        let src = "{% if messages[0]['role'] != 'system' %}{{ raise_exception('System message required') }}{% endif %}";
        let err = tpl(Some(src)).render(&conv()).expect_err("raises");
        assert!(err.to_string().contains("System message required"), "{err}");
    }

    #[test]
    fn loop_controls_work() {
        let src = "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m['content'] }}{% endfor %}";
        assert_eq!(
            tpl(Some(src)).render(&conv()).expect("renders").text,
            "  Hi  "
        );
    }

    #[test]
    fn broken_template_is_a_compile_error() {
        let err = ChatTemplate::new(
            Path::new("t.gguf"),
            Some("{% for %}"),
            String::new(),
            String::new(),
        );
        assert!(matches!(err, Err(LocalError::Template { .. })));
    }
}
