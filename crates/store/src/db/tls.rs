//! TLS to PostgreSQL where the URL asks for it (`sslmode=require`): rustls, the server's certificate checked
//! against the Mozilla roots and, for a private CA, the PEM file named by `sslrootcert=` in the URL or by
//! `PGSSLROOTCERT` (libpq's names). Unlike libpq's `require`, the certificate is always verified; `prefer`, the
//! default, and `disable` connect without TLS.

use std::sync::Arc;

use postgres::config::SslMode;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The URL without `sslrootcert=…` (the client library does not know it), and that file.
pub(crate) fn split_root_cert(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), std::env::var("PGSSLROOTCERT").ok());
    };
    let mut root = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.strip_prefix("sslrootcert=") {
            Some(path) => {
                root = Some(path.to_string());
                false
            }
            None => true,
        })
        .collect();
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, root.or_else(|| std::env::var("PGSSLROOTCERT").ok()))
}

/// The connector for `mode`: `None` (no TLS) unless TLS is required.
pub(crate) fn connector(
    mode: SslMode,
    root_cert: Option<&str>,
) -> Result<Option<MakeRustlsConnect>, String> {
    if mode != SslMode::Require {
        return Ok(None);
    }
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = root_cert {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("sslrootcert {path}: {e}"))?;
        if certs.is_empty() {
            return Err(format!("sslrootcert {path}: no PEM certificate in it"));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("sslrootcert {path}: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(MakeRustlsConnect::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslrootcert_is_taken_out_of_the_url() {
        let (url, root) =
            split_root_cert("postgres://u@h/db?sslmode=require&sslrootcert=/ca.pem&x=1");
        assert_eq!(url, "postgres://u@h/db?sslmode=require&x=1");
        assert_eq!(root.as_deref(), Some("/ca.pem"));
        let (url, root) = split_root_cert("postgres://u@h/db?sslrootcert=/ca.pem");
        assert_eq!(
            (url.as_str(), root.as_deref()),
            ("postgres://u@h/db", Some("/ca.pem"))
        );
    }

    #[test]
    fn only_require_asks_for_tls_and_a_bad_root_file_is_named() {
        assert!(connector(SslMode::Prefer, None).unwrap().is_none());
        assert!(connector(SslMode::Disable, Some("/nonexistent"))
            .unwrap()
            .is_none());
        assert!(connector(SslMode::Require, None).unwrap().is_some());
        let err = connector(SslMode::Require, Some("/nonexistent/ca.pem"))
            .err()
            .unwrap();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    }
}
