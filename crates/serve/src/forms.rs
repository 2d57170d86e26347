//! What the pages that take form posts (the review pages, the answer pages) share: reading a field, and telling
//! a post from the page's own origin apart from one another site's page made.

use axum::http::HeaderMap;

/// What a refused cross-site post is told.
pub(crate) const CROSS_SITE: &str = "This request came from another site and was refused.";

/// The value of the first `key` in a query or form.
pub(crate) fn field<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Whether a request came from this server's own pages: `Sec-Fetch-Site`, when sent, says so, and an `Origin`,
/// when sent, names this host. The pages' own form key is checked besides.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let site = get("sec-fetch-site");
    if site.is_some_and(|s| !matches!(s, "same-origin" | "none")) {
        return false;
    }
    match get("origin") {
        // Under `Referrer-Policy: no-referrer` a browser's own form post says `Origin: null`; it counts only
        // when the browser also vouches that the request is same-origin.
        Some("null") => site == Some("same-origin"),
        Some(origin) => {
            let host = get("host").unwrap_or("");
            let authority = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            !host.is_empty() && authority == Some(host)
        }
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_this_hosts_own_posts_pass() {
        let host = ("host", "127.0.0.1:8686");
        assert!(same_origin(&headers(&[host])));
        assert!(same_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:8686")
        ])));
        assert!(same_origin(&headers(&[
            ("origin", "null"),
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(!same_origin(&headers(&[("origin", "null")])));
        assert!(!same_origin(&headers(&[
            host,
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin(&headers(&[(
            "origin",
            "http://127.0.0.1:8686"
        )])));
        assert!(!same_origin(&headers(&[
            host,
            ("sec-fetch-site", "cross-site")
        ])));
    }
}
