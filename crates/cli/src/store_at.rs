//! Where runs are stored: the SQLite file in the runs directory (the default), or a PostgreSQL database named
//! by `--store` / `NMB_STORE_URL`. Files nmb writes beside the runs (studies) stay in the runs directory either
//! way. Printing a location never shows a password.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use nmb_store::{is_postgres_url, redact_location, Store, DB_FILE_NAME};

#[derive(Clone)]
pub struct StoreAt {
    runs_dir: PathBuf,
    url: Option<String>,
}

impl StoreAt {
    /// `store` (a PostgreSQL URL or a runs directory) wins over `runs_dir`.
    pub fn new(runs_dir: PathBuf, store: Option<String>) -> Result<StoreAt> {
        match store {
            Some(s) if is_postgres_url(&s) => Ok(StoreAt {
                runs_dir,
                url: Some(s),
            }),
            Some(s) if s.contains("://") => bail!(
                "--store {}: expected a postgres:// or postgresql:// URL, or a runs directory",
                redact_location(&s)
            ),
            Some(dir) => Ok(StoreAt {
                runs_dir: PathBuf::from(dir),
                url: None,
            }),
            None => Ok(StoreAt {
                runs_dir,
                url: None,
            }),
        }
    }

    /// A store other processes may share at the same time (PostgreSQL).
    pub fn is_shared(&self) -> bool {
        self.url.is_some()
    }

    /// Where files written beside the runs go.
    pub fn runs_dir(&self) -> &Path {
        &self.runs_dir
    }

    /// Opens the store, creating it (the directory and file, or the tables) when absent.
    pub fn open(&self) -> Result<Store> {
        let store = match &self.url {
            Some(url) => Store::connect(url),
            None => Store::open_dir(&self.runs_dir),
        };
        store.with_context(|| format!("cannot open the run store {self}"))
    }

    /// Opens a store that already exists; `None` for a runs directory without a database file.
    pub fn open_existing(&self) -> Result<Option<Store>> {
        if self.url.is_none() && !self.runs_dir.join(DB_FILE_NAME).is_file() {
            return Ok(None);
        }
        self.open().map(Some)
    }

    /// [`StoreAt::open_existing`] for commands that need runs: no store is an error saying what to do.
    pub fn open_for_reading(&self) -> Result<Arc<Store>> {
        match self.open_existing()? {
            Some(store) => Ok(Arc::new(store)),
            None => bail!("no run store at {self} (run `nmb eval` first, or pass --runs-dir DIR or --store URL)"),
        }
    }
}

impl fmt::Display for StoreAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.url {
            Some(url) => f.write_str(&redact_location(url)),
            None => write!(f, "{}", self.runs_dir.join(DB_FILE_NAME).display()),
        }
    }
}
