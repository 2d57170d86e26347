//! Credentials written into model URLs (`http://user:pw@host/v1?api_key=K`), cut out of manifests as they are
//! read, so that a store written before nmb stopped recording them shows none. This is the rule of
//! `nmb_chat::public_url`, which keeps them out of everything written now; nmb-store depends on no nmb crate, so
//! it carries its own copy, and nmb-run's tests check that the two agree.

use serde_json::Value;

/// Query parameters whose value is a credential (the same list as `nmb_chat::secrets::SECRET_QUERY_KEYS`).
const SECRET_QUERY_KEYS: [&str; 9] = [
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

/// Every string in `value` with the URLs in it stripped of their credentials.
pub(crate) fn scrub(value: &mut Value) {
    match value {
        Value::String(s) if s.contains("://") => *s = scrub_text(s),
        Value::Array(items) => items.iter_mut().for_each(scrub),
        Value::Object(map) => map.values_mut().for_each(scrub),
        _ => {}
    }
}

/// `text` with each URL in it (up to white space, a comma or a quote) stripped of its credentials.
pub fn scrub_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let start = rest[..i]
            .rfind(|c: char| !c.is_ascii_alphanumeric() && c != '+')
            .map_or(0, |j| j + 1);
        let end = rest[i..]
            .find(|c: char| c.is_whitespace() || c == ',' || c == '"')
            .map_or(rest.len(), |j| i + j);
        out.push_str(&rest[..start]);
        out.push_str(&public_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// One URL without `user:password@` and without the query parameters named in [`SECRET_QUERY_KEYS`].
fn public_url(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let mut out = match url[start..authority_end].rfind('@') {
        Some(at) => format!("{}{}", &url[..start], &url[start + at + 1..]),
        None => url.to_string(),
    };
    if let Some(q) = out.find('?') {
        let end = out[q..].find('#').map_or(out.len(), |i| q + i);
        let kept: Vec<&str> = (out[q + 1..end].split('&'))
            .filter(|p| !p.is_empty())
            .filter(|p| {
                let name = p.split('=').next().unwrap_or("");
                !SECRET_QUERY_KEYS
                    .iter()
                    .any(|k| k.eq_ignore_ascii_case(name))
            })
            .collect();
        let query = match kept.is_empty() {
            true => String::new(),
            false => format!("?{}", kept.join("&")),
        };
        out.replace_range(q..end, &query);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_in_text_lose_their_credentials() {
        let text = "openai:m@http://u:pw@h:1/v1?api_key=K&x=1,https://h2/v1?sig=S --model x";
        assert_eq!(
            scrub_text(text),
            "openai:m@http://h:1/v1?x=1,https://h2/v1 --model x"
        );
        let plain = "openai:m@http://127.0.0.1:8000/v1/?b=1&a=2";
        assert_eq!(scrub_text(plain), plain);
    }
}
