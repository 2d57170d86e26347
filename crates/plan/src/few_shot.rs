//! Few-shot prompts as NeuroVLM-Bench's runner builds them (`client.py`, `send_image_few_shot_to_openrouter_async`,
//! ChatMED/neurovlm-bench at 6e87ba4).
//!
//! The runner sends three messages: the system message, its prompt file's text alone; one user message with the
//! examples (an introduction, then for each example a header `Example N — class: CLASS` and its image, then a
//! closing line); and the question as a user message of its own (one line of text, then the image). Every
//! content is a list of parts, and every image is the file's bytes as they are, in a base64 data URL.
//! [`RunnerShots`] reproduces that word for word, so that a run made by nmb and one made by the runner send the
//! same messages, with one deliberate difference: the runner labels every image `image/jpeg`, whatever its
//! format, and nmb labels each with its real type (the same bytes for JPEG files; for a PNG only the data URL's
//! `data:image/png` differs), because an API that checks the label (Anthropic's) refuses a PNG labelled JPEG.

use nmb_imaging::ImageSource;
use nmb_suite::formats::few_shot::FewShotExample;
use nmb_suite::Image;
use sha2::{Digest, Sha256};

use crate::chat::{Message, Part, Role};
use crate::error::PlanError;
use crate::estimate::{image_tokens, text_tokens};
use crate::images::ImageCache;

/// The introduction of the examples' message, as the runner writes it.
pub const RUNNER_INTRO: &str = "### FEW-SHOT EXAMPLES\n\
Below are example images and ONLY their class label. Use them to calibrate class boundaries.\n\
Allowed classes: tumor | stroke | multiple sclerosis | normal | other abnormalities\n";

/// The closing line of the examples' message.
pub const RUNNER_OUTRO: &str = "### END OF FEW-SHOT EXAMPLES\n\
Now analyze the next image and output ONLY the JSON as per the schema.";

/// The text before the image in the question's message.
pub const RUNNER_QUERY: &str = "Analyze this image and output ONLY the JSON per the schema.";

/// The examples of a NeuroVLM-Bench few-shot run, read and ready to send.
#[derive(Clone)]
pub struct RunnerShots {
    message: Message,
    image_tokens: u64,
    hash: String,
    /// `(class, image SHA-256)` of each example, in order.
    examples: Vec<(String, String)>,
}

impl std::fmt::Debug for RunnerShots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RunnerShots({} examples, {})",
            self.examples.len(),
            &self.hash[..12]
        )
    }
}

impl RunnerShots {
    /// Reads each example's image (as the file's bytes, which the runner sends as they are) and builds the
    /// examples' message. An unreadable image is an error naming its row.
    pub fn load(examples: &[FewShotExample]) -> Result<RunnerShots, PlanError> {
        let cache = ImageCache::new(0);
        let mut parts = vec![Part::Text(RUNNER_INTRO.to_string())];
        let mut recorded = Vec::new();
        let mut tokens = 0;
        for (i, example) in examples.iter().enumerate() {
            let image = Image::new(
                example.file_path.clone(),
                ImageSource::File(example.image.clone()),
            );
            let loaded = cache
                .load(&example.at, &image)
                .map_err(|e| PlanError::FewShot {
                    at: example.at.clone(),
                    message: e.to_string(),
                })?;
            let [loaded] = loaded.as_slice() else {
                return Err(PlanError::FewShot {
                    at: example.at.clone(),
                    message: "a volume is not an example image; expected a PNG or JPEG file".into(),
                });
            };
            tokens += image_tokens(loaded.width, loaded.height);
            let header = format!("Example {} — class: {}", i + 1, example.class);
            parts.push(Part::Text(header));
            parts.push(Part::Image(loaded.part.clone()));
            recorded.push((example.class.clone(), loaded.part.sha256.clone()));
        }
        parts.push(Part::Text(RUNNER_OUTRO.to_string()));
        let mut h = Sha256::new();
        h.update(b"nmb-few-shot\0neurovlm-runner\0");
        for (class, sha) in &recorded {
            h.update(format!("{class}\0{sha}\n").as_bytes());
        }
        Ok(RunnerShots {
            message: Message {
                role: Role::User,
                parts,
                as_parts: true,
            },
            image_tokens: tokens,
            hash: hex::encode(h.finalize()),
            examples: recorded,
        })
    }

    /// The examples' user message.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// SHA-256 over the examples' classes and image hashes, in order: part of the run's identity.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// `(class, image SHA-256)` of each example, in order.
    pub fn examples(&self) -> &[(String, String)] {
        &self.examples
    }

    /// Estimated input tokens of the examples' message, text and images (see [`crate::estimate`]).
    pub fn estimated_tokens(&self) -> u64 {
        text_tokens(&self.message.joined_text()) + self.image_tokens
    }

    /// Estimated tokens of the examples' images.
    pub fn image_tokens(&self) -> u64 {
        self.image_tokens
    }
}
