//! `nmb export mlflow`: a scored run (the Inspect test's fixture) is logged to a real MLflow tracking server
//! (PyPI `mlflow`, SQLite backend, artifact proxy, a free loopback port) and read back with MLflow's own Python
//! client: one run holding the nmb run, its configuration as params, the score report's headline numbers as
//! metrics (CI bounds apart), the hashes as tags and the report files as artifacts. Exporting again updates the
//! same MLflow run. A password in the tracking URI appears in no message.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// A tracking server, killed when dropped.
struct Server {
    child: Child,
    uri: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(python: &Path) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = format!("sqlite:///{}", dir.path().join("mlflow.db").display());
    // `python -m mlflow`, not the venv's `mlflow` script, whose first line names the path the venv was made at.
    let child = Command::new(python)
        .args([
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            &db,
            "--serve-artifacts",
        ])
        .arg("--artifacts-destination")
        .arg(dir.path().join("artifacts"))
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--workers",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mlflow server starts");
    let uri = format!("http://127.0.0.1:{port}");
    let server = Server {
        child,
        uri,
        _dir: dir,
    };
    let until = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && http_get(&format!("{}/health", server.uri)).contains("OK")
        {
            return server;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("the MLflow server did not answer /health within 120 s");
}

fn read_back(python: &Path, uri: &str, experiment: &str, run: &str) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/export/read_mlflow.py");
    let out = Command::new(python)
        .arg(script)
        .args([uri, experiment, run])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn mlflow_holds_one_run_per_nmb_run_with_nmbs_numbers() {
    let Some(python) = nmb_test_support::assets::tools_python("mlflow") else {
        return;
    };
    let server = start(&python);
    let dir = tempfile::tempdir().unwrap();
    let (runs, run, _fake) = crate::export_inspect::scored_run(dir.path());
    let export = || {
        let out = nmb(
            &runs,
            &[
                "export",
                "mlflow",
                &run,
                "--tracking-uri",
                &server.uri,
                "--experiment",
                "neuro",
            ],
        );
        assert!(
            out.status.success(),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    assert!(export().contains("created"));
    let first = read_back(&python, &server.uri, "neuro", &run);
    assert!(export().contains("updated"));
    let got = read_back(&python, &server.uri, "neuro", &run);
    assert_eq!(
        got.len(),
        1,
        "exporting again updates the same run: {got:?}"
    );
    assert_eq!(got[0]["run_id"], first[0]["run_id"]);
    let r = &got[0];
    assert_eq!(r["status"], "FINISHED");

    let store = store(&runs);
    let info = store.run(&run).unwrap();
    let report = nmb_results::stored::latest(&store, &run).unwrap().unwrap();
    assert_eq!(r["params"]["model"], info.manifest.model.as_str());
    assert_eq!(r["params"]["samples"], "2");
    assert_eq!(
        r["tags"]["nmb_suite_hash"],
        info.manifest.suite_hash.as_str()
    );
    assert_eq!(r["tags"]["nmb_config_hash"], info.config_hash.as_str());
    assert_eq!(
        r["tags"]["nmb_scoring_config_hash"],
        report.config.config_hash.as_str()
    );
    let m = &r["metrics"];
    let acc = report.overall.accuracy.as_ref().unwrap();
    assert_eq!(m["accuracy"].as_f64(), Some(acc.value));
    assert_eq!(m["accuracy_ci_low"].as_f64(), Some(acc.ci_low));
    assert_eq!(m["accuracy_ci_high"].as_f64(), Some(acc.ci_high));
    assert_eq!(m["n"].as_f64(), Some(report.overall.n as f64));
    assert_eq!(m["errored"].as_f64(), Some(report.overall.errored as f64));
    let artifacts: Vec<&str> = r["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        artifacts.contains(&"report.html") && artifacts.contains(&"report.json"),
        "{artifacts:?}"
    );
}

#[test]
fn a_password_in_the_tracking_uri_is_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let (runs, run, _fake) = crate::export_inspect::scored_run(dir.path());
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let uri = format!("http://lee:s3cret-pass@127.0.0.1:{closed}");
    let out = nmb(
        &runs,
        &[
            "export",
            "mlflow",
            &run,
            "--tracking-uri",
            &uri,
            "--no-artifacts",
        ],
    );
    assert!(!out.status.success());
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("cannot reach the MLflow server"), "{said}");
    assert!(!said.contains("s3cret-pass"), "{said}");
}

#[test]
fn eval_export_logs_the_scored_run_when_it_ends() {
    let Some(python) = nmb_test_support::assets::tools_python("mlflow") else {
        return;
    };
    let server = start(&python);
    let dir = tempfile::tempdir().unwrap();
    let target = format!("mlflow={}", server.uri);
    // scored_run_with runs `nmb eval --json`: its stdout must stay one JSON object.
    let (runs, run, _fake, stderr) =
        crate::export_inspect::scored_run_with(dir.path(), &["--export", &target]);
    assert!(
        stderr.contains(&format!("{run} -> MLflow run")) && stderr.contains("created"),
        "{stderr}"
    );
    let got = read_back(&python, &server.uri, "nmb", &run);
    assert_eq!(got.len(), 1, "{got:?}");
    let report = nmb_results::stored::latest(&store(&runs), &run)
        .unwrap()
        .unwrap();
    let acc = report.overall.accuracy.as_ref().unwrap();
    assert_eq!(got[0]["metrics"]["accuracy"].as_f64(), Some(acc.value));
}

#[test]
fn eval_export_takes_only_mlflow() {
    let dir = tempfile::tempdir().unwrap();
    let out = nmb(
        &dir.path().join("runs"),
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            "openai:m@http://127.0.0.1:9/v1",
            "--export",
            "wandb=x",
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("expected mlflow=URI"),
        "{}",
        text(&out.stderr)
    );
}
