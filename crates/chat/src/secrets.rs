//! API keys: the one type that holds one, and the set a process knows, so that they can be cut out of anything
//! stored or shown.

use std::fmt;

/// An API key. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// Reads `var`; an unset or blank variable is `None`.
    pub fn from_env(var: &str) -> Option<ApiKey> {
        std::env::var(var)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .map(ApiKey)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

/// Removes `secret` from `text`. Short secrets are not searched for: they would match ordinary words.
pub fn redact(text: &str, secret: &str) -> String {
    if secret.len() < 6 || !text.contains(secret) {
        return text.to_string();
    }
    text.replace(secret, "[REDACTED]")
}

/// The environment variables that hold the hosted APIs' keys (`BackendKind::key_env` names the same ones).
pub const API_KEY_VARS: [&str; 3] = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"];

/// Known API keys. `Debug` shows only how many there are.
#[derive(Clone, Default)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// The keys in `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` and `GEMINI_API_KEY` (those set).
    pub fn from_env() -> Self {
        let keys = API_KEY_VARS
            .into_iter()
            .filter_map(ApiKey::from_env)
            .map(|k| k.expose().to_string())
            .collect();
        Secrets(keys)
    }

    /// These keys and `key`.
    pub fn with(mut self, key: &str) -> Self {
        if !self.0.iter().any(|k| k == key) {
            self.0.push(key.to_string());
        }
        self
    }

    /// `text` with every known key replaced by `[REDACTED]`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for key in &self.0 {
            out = redact(&out, key);
        }
        out
    }
}

/// Query parameters whose value is taken for a credential: it is sent, but never stored, hashed or shown.
pub const SECRET_QUERY_KEYS: [&str; 9] = [
    "key",
    "api_key",
    "api-key",
    "apikey",
    "token",
    "access_token",
    "sig",
    "signature",
    "password",
];

/// The parts of a URL that are credentials: `user:password@` and the query parameters named in
/// [`SECRET_QUERY_KEYS`] (compared without case).
struct UrlParts<'a> {
    /// Where the user part starts and ends (`user:pw@`, the `@` included), if there is one.
    user: Option<(usize, usize)>,
    /// The query's `name=value` pairs, each with whether it is a credential, and where the query starts.
    query: Option<(usize, Vec<(&'a str, bool)>)>,
}

fn url_parts(url: &str) -> UrlParts<'_> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let user = url[start..authority_end]
        .rfind('@')
        .map(|at| (start, start + at + 1));
    let query = url.find('?').map(|q| {
        let end = url[q..].find('#').map_or(url.len(), |i| q + i);
        let pairs = url[q + 1..end]
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let name = p.split('=').next().unwrap_or("");
                let secret = SECRET_QUERY_KEYS
                    .iter()
                    .any(|k| k.eq_ignore_ascii_case(name));
                (p, secret)
            })
            .collect();
        (q, pairs)
    });
    UrlParts { user, query }
}

/// `url` without its credentials: no `user:password@`, and no query parameter named in [`SECRET_QUERY_KEYS`].
/// A URL without credentials comes back unchanged, byte for byte, so that its identity stays what it was.
pub fn public_url(url: &str) -> String {
    let parts = url_parts(url);
    let query_secret = (parts.query.as_ref()).is_some_and(|(_, pairs)| pairs.iter().any(|p| p.1));
    if parts.user.is_none() && !query_secret {
        return url.to_string();
    }
    let mut out = url.to_string();
    if let Some((q, pairs)) = &parts.query {
        let end = url[*q..].find('#').map_or(url.len(), |i| q + i);
        let kept: Vec<&str> = pairs.iter().filter(|p| !p.1).map(|p| p.0).collect();
        let query = match kept.is_empty() {
            true => String::new(),
            false => format!("?{}", kept.join("&")),
        };
        out.replace_range(*q..end, &query);
    }
    if let Some((from, to)) = parts.user {
        out.replace_range(from..to, "");
    }
    out
}

/// The credentials in `url` (the user part's password and name, and the secret query parameters' values), to
/// redact from anything that quotes the whole URL (an HTTP client's error, say).
pub fn url_secrets(url: &str) -> Vec<String> {
    let parts = url_parts(url);
    let mut out = Vec::new();
    if let Some((from, to)) = parts.user {
        out.extend(url[from..to - 1].split(':').map(str::to_string));
    }
    for (pair, secret) in parts.query.map(|q| q.1).unwrap_or_default() {
        if let (true, Some((_, value))) = (secret, pair.split_once('=')) {
            out.push(value.to_string());
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} keys)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials_and_keep_everything_else() {
        let url = "http://user:pw@host:8000/v1?api_key=K123&region=eu&Token=T9#frag";
        assert_eq!(public_url(url), "http://host:8000/v1?region=eu#frag");
        assert_eq!(url_secrets(url), ["user", "pw", "K123", "T9"]);
        assert_eq!(public_url("https://h/v1?sig=abc"), "https://h/v1");
        // Without credentials, nothing changes, not even what a URL parser would normalise.
        for plain in [
            "http://127.0.0.1:8000/v1",
            "HTTP://Host/v1/?b=1&a=2",
            "http://h/a@b",
        ] {
            assert_eq!(public_url(plain), plain);
            assert!(url_secrets(plain).is_empty(), "{plain}");
        }
    }

    #[test]
    fn every_known_key_is_cut_and_debug_shows_none() {
        let s = Secrets::default()
            .with("sk-first-123456")
            .with("AIza-second-789");
        let text = "a sk-first-123456 b AIza-second-789 c sk-first-123456";
        assert_eq!(s.redact(text), "a [REDACTED] b [REDACTED] c [REDACTED]");
        assert_eq!(format!("{s:?}"), "Secrets(2 keys)");
        assert_eq!(Secrets::default().redact(text), text);
    }
}
