//! Volume renders kept across runs: a render key (the source's content hash, the render options and the
//! renderer version, hashed by the caller) maps to the PNG views it gave, each stored once in `images`.

use crate::db::{args, scalar, DbResult};

use crate::records::ImageInput;
use crate::{now_ms, Result, Store};

/// One view of a render, as stored or to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderView {
    pub sha256: String,
    pub bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
    pub label: String,
}

impl Store {
    /// Stores the views of one render with their images, in one transaction; a key already stored is left as
    /// it is (the same key always renders the same views).
    pub fn put_render(&self, key: &str, views: &[RenderView]) -> Result<()> {
        self.write("store a render", |db| {
            let known: bool = scalar(
                db,
                "SELECT EXISTS (SELECT 1 FROM renders WHERE render_key = ?1)",
                args![key],
            )?;
            if known {
                return Ok(());
            }
            for (idx, view) in views.iter().enumerate() {
                let image = ImageInput {
                    sha256: &view.sha256,
                    mime: "image/png",
                    bytes: &view.bytes,
                };
                self.insert_image(db, &image)?;
                db.exec(
                    "INSERT INTO renders (render_key, idx, sha256, width, height, label, created_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
                    args![
                        key,
                        idx as i64,
                        view.sha256.as_str(),
                        view.width,
                        view.height,
                        view.label.as_str(),
                        now_ms()
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// The views stored under `key`, in order, or `None` when that render was never stored.
    pub fn render(&self, key: &str) -> Result<Option<Vec<RenderView>>> {
        self.read("read a render", |db| {
            let rows = db.query(
                "SELECT r.sha256, i.bytes, r.width, r.height, r.label FROM renders r \
                 JOIN images i ON i.sha256 = r.sha256 WHERE r.render_key = ?1 ORDER BY r.idx",
                args![key],
            )?;
            let views = rows
                .iter()
                .map(|r| {
                    Ok(RenderView {
                        sha256: r.get(0)?,
                        bytes: r.get(1)?,
                        width: r.get(2)?,
                        height: r.get(3)?,
                        label: r.get(4)?,
                    })
                })
                .collect::<DbResult<Vec<_>>>()?;
            Ok((!views.is_empty()).then_some(views))
        })
    }

    /// Rows in the renders table (views of all renders), for tests and stats.
    pub fn render_view_count(&self) -> Result<u64> {
        self.count("count renders", "SELECT count(*) FROM renders")
    }
}
