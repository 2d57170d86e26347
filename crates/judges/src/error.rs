//! Why asking judges can fail. A judge that fails or answers badly is not an error (its verdict is recorded as
//! missing); these are the failures that stop the asking.

#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error(transparent)]
    Store(#[from] nmb_store::StoreError),
    #[error("a judge cannot batch: {0}")]
    Batch(String),
    /// A judge asked questions with images whose server answers that it cannot take them.
    #[error("judge {judge} cannot be shown images: {why}; --judge-images same needs judges that take images: choose a vision model, or score with --judge-images none")]
    CannotSeeImages { judge: String, why: String },
}
