//! The run store as the plan's render cache, so that a re-run (or another run in the same store) reuses a
//! volume's rendered views instead of rendering them again.

use std::sync::Arc;

use nmb_plan::{CachedView, RenderCache};
use nmb_store::{RenderView, Store};

pub(crate) struct StoreRenders(pub Arc<Store>);

impl RenderCache for StoreRenders {
    fn get(&self, key: &str) -> Option<Vec<CachedView>> {
        let views = self.0.render(key).ok().flatten()?;
        Some(
            views
                .into_iter()
                .map(|v| CachedView {
                    sha256: v.sha256,
                    png: Arc::from(v.bytes),
                    width: v.width,
                    height: v.height,
                    label: v.label,
                })
                .collect(),
        )
    }

    fn put(&self, key: &str, views: &[CachedView]) -> Result<(), String> {
        let views: Vec<RenderView> = views
            .iter()
            .map(|v| RenderView {
                sha256: v.sha256.clone(),
                bytes: v.png.to_vec(),
                width: v.width,
                height: v.height,
                label: v.label.clone(),
            })
            .collect();
        self.0.put_render(key, &views).map_err(|e| e.to_string())
    }
}
