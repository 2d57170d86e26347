//! What reading an image or rendering a volume gives a prompt.

use crate::chat::ImagePart;

/// An image ready for a message, with the dimensions its header gave (for token estimates).
#[derive(Debug, Clone)]
pub struct LoadedImage {
    pub part: ImagePart,
    pub width: Option<u32>,
    pub height: Option<u32>,
    /// For a view rendered from a volume: what it shows ("axial slice 45 (S +12.0 mm)").
    pub view: Option<String>,
}
