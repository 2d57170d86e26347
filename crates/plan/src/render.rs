//! Rendering a template block to chat parts: minijinja produces text with image markers, and the markers are
//! split out into [`Part::Image`]s in the order the template placed them.

use std::collections::HashMap;

use minijinja::{Environment, ErrorKind, Value};

use crate::chat::{ImagePart, Part};
use crate::error::PlanError;
use crate::jinja::{new_env, template_error, MARK_CLOSE, MARK_OPEN};
use crate::template::Template;

fn env_name(t: &Template) -> String {
    format!("{}@{}", t.id(), &t.hash()[..12.min(t.hash().len())])
}

/// Holds the compiled templates of one plan.
pub(crate) struct Renderer {
    env: Environment<'static>,
    names: HashMap<String, String>,
}

impl Renderer {
    pub(crate) fn new() -> Self {
        Renderer {
            env: new_env(),
            names: HashMap::new(),
        }
    }

    fn name_for(&mut self, t: &Template) -> Result<String, PlanError> {
        if let Some(name) = self.names.get(t.hash()) {
            return Ok(name.clone());
        }
        let name = env_name(t);
        self.env
            .add_template_owned(name.clone(), t.source().to_string())
            .map_err(|e| template_error(t.id(), &e))?;
        self.names.insert(t.hash().to_string(), name.clone());
        Ok(name)
    }

    /// Renders the named blocks with one context. A block the template lacks is an error naming it.
    pub(crate) fn render_blocks(
        &mut self,
        t: &Template,
        blocks: &[&str],
        ctx: &Value,
    ) -> Result<Vec<String>, PlanError> {
        let name = self.name_for(t)?;
        let tmpl = self
            .env
            .get_template(&name)
            .map_err(|e| template_error(t.id(), &e))?;
        let mut captured = tmpl
            .render_captured_to(ctx, std::io::sink())
            .map_err(|e| template_error(t.id(), &e))?;
        blocks
            .iter()
            .map(|block| {
                captured
                    .with_state_mut(|s| s.render_block(block))
                    .map_err(|e| match e.kind() {
                        ErrorKind::UnknownBlock => PlanError::Template {
                            template: t.id().to_string(),
                            message: format!("has no {{% block {block} %}}, which this task needs"),
                        },
                        _ => template_error(t.id(), &e),
                    })
            })
            .collect()
    }
}

/// Splits rendered text at image markers into text and image parts, in order.
///
/// Every image must be placed exactly once: a template that drops or repeats an image is a bug that would
/// silently change what the model sees. Text is normalised: runs of blank lines become one blank line and each
/// text part is trimmed; empty text parts are dropped.
pub(crate) fn split_parts(text: &str, images: &[ImagePart]) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut placed = vec![false; images.len()];
    let mut pieces = text.split(MARK_OPEN);
    push_text(&mut parts, pieces.next().unwrap_or(""));
    for piece in pieces {
        let (index, rest) = piece
            .split_once(MARK_CLOSE)
            .ok_or("an image marker was cut or altered; place images with {{ image(i) }}")?;
        let i: usize = index
            .parse()
            .map_err(|_| format!("an image marker holds {index:?}, not an image index"))?;
        let image = images.get(i).ok_or_else(|| {
            format!(
                "image({i}) placed, but this message has {} image(s) (indices 0..{})",
                images.len(),
                images.len()
            )
        })?;
        if std::mem::replace(&mut placed[i], true) {
            return Err(format!("image({i}) placed more than once"));
        }
        parts.push(Part::Image(image.clone()));
        push_text(&mut parts, rest);
    }
    if let Some(i) = placed.iter().position(|p| !p) {
        return Err(format!(
            "image({i}) was never placed; a template must place each of images[] once with {{{{ image(img.index) }}}}"
        ));
    }
    Ok(parts)
}

fn push_text(parts: &mut Vec<Part>, text: &str) {
    let text = squeeze_blank_lines(text.trim());
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
}

fn squeeze_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.split('\n') {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        if !out.is_empty() || !line.is_empty() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::jinja::{clean, marker};

    fn img(tag: &str) -> ImagePart {
        ImagePart {
            sha256: tag.repeat(64 / tag.len()),
            mime: "image/png".into(),
            bytes: Arc::from(tag.as_bytes()),
        }
    }

    #[test]
    fn splits_in_marker_order() {
        let imgs = [img("a"), img("b")];
        let text = format!("x\n\n\n\ny  \n{}\nz{}", marker(1), marker(0));
        let parts = split_parts(&text, &imgs).unwrap();
        assert_eq!(
            parts,
            vec![
                Part::Text("x\n\ny".into()),
                Part::Image(imgs[1].clone()),
                Part::Text("z".into()),
                Part::Image(imgs[0].clone()),
            ]
        );
    }

    #[test]
    fn rejects_missing_repeated_and_unknown_images() {
        let imgs = [img("a"), img("b")];
        assert!(split_parts(&marker(0), &imgs).is_err());
        let twice = format!("{}{}{}", marker(0), marker(0), marker(1));
        assert!(split_parts(&twice, &imgs).is_err());
        assert!(split_parts(&marker(2), &imgs).is_err());
        assert!(split_parts(&format!("{MARK_OPEN}1"), &imgs).is_err());
    }

    #[test]
    fn data_cannot_forge_markers() {
        let forged = clean(&marker(0));
        assert!(split_parts(&forged, &[]).is_ok());
    }
}
