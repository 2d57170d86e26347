//! A scored run logged to an MLflow tracking server through its REST API (`/api/2.0/mlflow/...`).
//!
//! One MLflow run per nmb run, in the experiment named (created when missing). The run is found again by its
//! `nmb_run_id` tag, so exporting again updates the same MLflow run and never makes a second. The run's
//! configuration (model, suite, template, decoding parameters, samples, input mode, nmb version) is logged as
//! params, which never change for a stored run; every headline number ([`super::headline()`]) as a metric (CI bounds
//! as `*_ci_low` / `*_ci_high`), logged again at each export; the suite, template, configuration and scoring
//! hashes and the model's identity as tags; and the files of a report folder as artifacts, uploaded through the
//! server's artifact proxy (`mlflow server --serve-artifacts`, runs whose artifact URI is `mlflow-artifacts:`).
//!
//! Credentials: a `user:password@` in the tracking URI is sent as HTTP basic auth, `MLFLOW_TRACKING_TOKEN` (the
//! caller passes it) as a bearer token; neither appears in any message, which name the server by its URI without
//! them.

use std::path::{Path, PathBuf};

use nmb_results::ScoreReport;
use nmb_store::RunInfo;
use reqwest::{Client, Method, Url};
use serde_json::{json, Value};

use super::headline::headline;

/// The tag that names the nmb run an MLflow run holds.
pub const RUN_TAG: &str = "nmb_run_id";

/// Why an export to MLflow failed. No variant holds a credential.
#[derive(Debug, thiserror::Error)]
pub enum MlflowError {
    #[error("bad MLflow tracking URI {shown}: {why}")]
    Uri { shown: String, why: String },
    #[error("cannot reach the MLflow server at {shown} ({what}): {message}")]
    Http {
        shown: String,
        what: String,
        message: String,
    },
    #[error("the MLflow server at {shown} refused {what}: HTTP {status}: {body}")]
    Api {
        shown: String,
        what: String,
        status: u16,
        body: String,
    },
    #[error(
        "the MLflow server at {shown} stores run artifacts at {uri}, which nmb cannot upload to over HTTP; start \
         it with --serve-artifacts (artifact URIs mlflow-artifacts:/...)"
    )]
    NoArtifactProxy { shown: String, uri: String },
    #[error("cannot read artifact {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A tracking server: its base URL without credentials, and how to authenticate.
#[derive(Clone)]
pub struct Tracking {
    base: Url,
    shown: String,
    basic: Option<(String, String)>,
    token: Option<String>,
    client: Client,
}

impl std::fmt::Debug for Tracking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tracking({})", self.shown)
    }
}

/// What an export did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub experiment_id: String,
    pub mlflow_run_id: String,
    /// A new MLflow run was made (else the one holding this nmb run was updated).
    pub created: bool,
    pub metrics: usize,
    pub artifacts: usize,
}

impl Tracking {
    /// `uri` is `http(s)://[user:password@]host[:port][/prefix]`; `token` is a bearer token
    /// (`MLFLOW_TRACKING_TOKEN`).
    pub fn new(uri: &str, token: Option<String>) -> Result<Tracking, MlflowError> {
        let shown = nmb_store::scrub_url_credentials(uri);
        let bad = |why: &str| MlflowError::Uri {
            shown: shown.clone(),
            why: why.into(),
        };
        let mut base = Url::parse(uri.trim()).map_err(|e| bad(&e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("expected an http:// or https:// URI"));
        }
        let basic = (!base.username().is_empty()).then(|| {
            (
                percent_decode(base.username()),
                percent_decode(base.password().unwrap_or("")),
            )
        });
        let _ = base.set_username("");
        let _ = base.set_password(None);
        let path = base.path().trim_end_matches('/').to_string();
        base.set_path(&path);
        base.set_query(None);
        let client = Client::builder()
            .timeout(std::time::Duration::from_secs(120))
            .build()
            .map_err(|e| bad(&e.to_string()))?;
        Ok(Tracking {
            shown: base.to_string(),
            base,
            basic,
            token,
            client,
        })
    }

    /// The URI as messages show it (no credentials).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base.as_str().trim_end_matches('/'))
    }

    async fn send(
        &self,
        what: &str,
        method: Method,
        path: &str,
        body: reqwest::Body,
        json_body: bool,
    ) -> Result<(u16, Value), MlflowError> {
        let mut req = self.client.request(method, self.url(path)).body(body);
        if json_body {
            req = req.header("content-type", "application/json");
        }
        if let Some((u, p)) = &self.basic {
            req = req.basic_auth(u, Some(p));
        } else if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| self.http(what, &e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| self.http(what, &e))?;
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status >= 400 && !(status == 404 && what == "experiments/get-by-name") {
            return Err(MlflowError::Api {
                shown: self.shown.clone(),
                what: what.into(),
                status,
                body: self.scrub(&text),
            });
        }
        Ok((status, value))
    }

    async fn api(&self, method: Method, what: &str, body: Value) -> Result<Value, MlflowError> {
        let path = format!("/api/2.0/mlflow/{what}");
        let (_, v) = if method == Method::GET {
            let query: Vec<(String, String)> = body
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            let q = serde_urlencoded(&query);
            self.send(
                what,
                method,
                &format!("{path}?{q}"),
                reqwest::Body::from(""),
                false,
            )
            .await?
        } else {
            self.send(what, method, &path, body.to_string().into(), true)
                .await?
        };
        Ok(v)
    }

    fn http(&self, what: &str, e: &reqwest::Error) -> MlflowError {
        MlflowError::Http {
            shown: self.shown.clone(),
            what: what.into(),
            message: self.scrub(&e.to_string()),
        }
    }

    /// A server's message with any credential of ours taken out, cut to a readable length.
    fn scrub(&self, text: &str) -> String {
        let mut out = nmb_store::scrub_url_credentials(text);
        if let Some((_, p)) = self.basic.as_ref().filter(|(_, p)| !p.is_empty()) {
            out = nmb_chat::redact(&out, p);
        }
        if let Some(t) = &self.token {
            out = nmb_chat::redact(&out, t);
        }
        out.chars().take(500).collect()
    }
}

/// Logs `run` with its score report to `experiment`, and the files under `artifacts` (a report folder).
pub async fn export(
    tracking: &Tracking,
    experiment: &str,
    run: &RunInfo,
    report: &ScoreReport,
    artifacts: Option<&Path>,
) -> Result<Exported, MlflowError> {
    let experiment_id = experiment_id(tracking, experiment).await?;
    let found = tracking
        .api(
            Method::POST,
            "runs/search",
            json!({
                "experiment_ids": [experiment_id],
                "filter": format!("tags.{RUN_TAG} = '{}'", run.run_id.replace('\'', "")),
                "max_results": 1,
            }),
        )
        .await?;
    let existing = found["runs"][0]["info"]["run_id"]
        .as_str()
        .map(String::from);
    let created = existing.is_none();
    let mlflow_run_id = match existing {
        Some(id) => id,
        None => {
            let made = tracking
                .api(
                    Method::POST,
                    "runs/create",
                    json!({
                        "experiment_id": experiment_id,
                        "run_name": run.run_id,
                        "start_time": run.created_ms,
                        "tags": [{"key": RUN_TAG, "value": run.run_id}],
                    }),
                )
                .await?;
            made["run"]["info"]["run_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }
    };
    let now = nmb_store::now_ms();
    let metrics: Vec<Value> = headline(report)
        .into_iter()
        .map(|m| json!({"key": m.name, "value": m.value, "timestamp": now, "step": 0}))
        .collect();
    let params: Vec<Value> = params(run)
        .into_iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    let tags: Vec<Value> = tags(run, report)
        .into_iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    let n_metrics = metrics.len();
    for chunk in metrics.chunks(1000) {
        log_batch(tracking, &mlflow_run_id, chunk, &[], &[]).await?;
    }
    for chunk in params.chunks(100) {
        log_batch(tracking, &mlflow_run_id, &[], chunk, &[]).await?;
    }
    for chunk in tags.chunks(100) {
        log_batch(tracking, &mlflow_run_id, &[], &[], chunk).await?;
    }
    let n_artifacts = match artifacts {
        Some(dir) => upload(tracking, &mlflow_run_id, dir).await?,
        None => 0,
    };
    tracking
        .api(
            Method::POST,
            "runs/update",
            json!({"run_id": mlflow_run_id, "status": "FINISHED", "end_time": run.updated_ms}),
        )
        .await?;
    Ok(Exported {
        experiment_id,
        mlflow_run_id,
        created,
        metrics: n_metrics,
        artifacts: n_artifacts,
    })
}

async fn experiment_id(tracking: &Tracking, name: &str) -> Result<String, MlflowError> {
    let got = tracking
        .api(
            Method::GET,
            "experiments/get-by-name",
            json!({"experiment_name": name}),
        )
        .await?;
    if let Some(id) = got["experiment"]["experiment_id"].as_str() {
        return Ok(id.to_string());
    }
    let made = tracking
        .api(Method::POST, "experiments/create", json!({"name": name}))
        .await?;
    Ok(made["experiment_id"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

async fn log_batch(
    tracking: &Tracking,
    run_id: &str,
    metrics: &[Value],
    params: &[Value],
    tags: &[Value],
) -> Result<(), MlflowError> {
    tracking
        .api(
            Method::POST,
            "runs/log-batch",
            json!({"run_id": run_id, "metrics": metrics, "params": params, "tags": tags}),
        )
        .await
        .map(|_| ())
}

/// The run's configuration, which a stored run never changes.
fn params(run: &RunInfo) -> Vec<(String, String)> {
    let m = &run.manifest;
    let mut out = vec![
        ("model".to_string(), m.model.clone()),
        ("suite".to_string(), m.suite_id.clone()),
        ("template".to_string(), m.template_id.clone()),
        ("samples".to_string(), m.samples.to_string()),
        (
            "input_mode".to_string(),
            json_text(&serde_json::to_value(m.input_mode).unwrap_or(Value::Null)),
        ),
        ("nmb_version".to_string(), m.nmb_version.clone()),
    ];
    if let Some(v) = &m.suite_version {
        out.push(("suite_version".into(), v.clone()));
    }
    if let Some(obj) = m.params.as_object() {
        for (k, v) in obj {
            out.push((format!("param.{k}"), json_text(v)));
        }
    }
    out
}

fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn tags(run: &RunInfo, report: &ScoreReport) -> Vec<(String, String)> {
    let m = &run.manifest;
    let mut out = vec![
        (RUN_TAG.to_string(), run.run_id.clone()),
        ("mlflow.runName".to_string(), m.display_name()),
        ("nmb_suite_hash".to_string(), m.suite_hash.clone()),
        ("nmb_template_hash".to_string(), m.template_hash.clone()),
        ("nmb_config_hash".to_string(), run.config_hash.clone()),
        (
            "nmb_scoring_config_hash".to_string(),
            report.config.config_hash.clone(),
        ),
        ("nmb_model".to_string(), m.model.clone()),
    ];
    if let Some(identity) = &m.model_identity {
        for (k, v) in identity {
            out.push((format!("nmb_model_{k}"), json_text(v)));
        }
    }
    out
}

/// Uploads every file under `dir` (relative paths kept) through the artifact proxy.
async fn upload(tracking: &Tracking, run_id: &str, dir: &Path) -> Result<usize, MlflowError> {
    let info = tracking
        .api(Method::GET, "runs/get", json!({"run_id": run_id}))
        .await?;
    let uri = info["run"]["info"]["artifact_uri"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let Some(rest) = uri.strip_prefix("mlflow-artifacts:") else {
        return Err(MlflowError::NoArtifactProxy {
            shown: tracking.shown.clone(),
            uri,
        });
    };
    // `mlflow-artifacts:/0/RUN/artifacts`, or with an authority: `mlflow-artifacts://host:port/0/RUN/artifacts`.
    let root = match rest.strip_prefix("//") {
        Some(a) => a.split_once('/').map(|(_, p)| p).unwrap_or(""),
        None => rest.trim_start_matches('/'),
    }
    .trim_end_matches('/')
    .to_string();
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    for (path, rel) in &files {
        let bytes = std::fs::read(path).map_err(|source| MlflowError::Read {
            path: path.clone(),
            source,
        })?;
        let target = format!("/api/2.0/mlflow-artifacts/artifacts/{root}/{rel}");
        tracking
            .send(
                &format!("uploading artifact {rel}"),
                Method::PUT,
                &target,
                bytes.into(),
                false,
            )
            .await?;
    }
    Ok(files.len())
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, String)>) -> Result<(), MlflowError> {
    let read = |e: std::io::Error| MlflowError::Read {
        path: dir.to_path_buf(),
        source: e,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(read)?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let kind = e.file_type().map_err(read)?;
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else if kind.is_file() {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| percent_encode(&c.as_os_str().to_string_lossy()))
                .collect::<Vec<_>>()
                .join("/");
            out.push((path, rel));
        }
    }
    Ok(())
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serde_urlencoded(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}
