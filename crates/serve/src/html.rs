//! The page frame, the stylesheet and the small text helpers every page uses.

use std::fmt::Write as _;

use axum::response::Html;

pub(crate) use nmb_table::escape;

/// Served from `/style.css` (the Content-Security-Policy allows no inline style).
pub(crate) const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 0 16px 40px; color: #1d2330; }
header { border-bottom: 1px solid #d8dce3; padding: 10px 0; margin-bottom: 12px; }
header a { font-weight: 600; text-decoration: none; }
a { color: #1a56b0; }
h1 { font-size: 20px; margin: 12px 0; }
h2 { font-size: 16px; margin: 22px 0 8px; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { border: 1px solid #d8dce3; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f2f4f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; }
dt { font-weight: 600; color: #4b5565; }
dd { margin: 0; overflow-wrap: anywhere; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f7f8fa; border: 1px solid #e3e6eb; padding: 8px; margin: 4px 0; }
.ok { color: #17803d; } .errored { color: #b42318; } .pending { color: #8a6d00; }
.muted { color: #6b7280; }
.turn, .message { border-left: 3px solid #d8dce3; padding-left: 10px; margin: 10px 0; }
form.filters { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin: 8px 0; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: #4b5565; }
form.filters input { width: 10em; }
nav.pager { margin: 8px 0; display: flex; gap: 14px; }
img.prompt { max-width: 320px; max-height: 320px; border: 1px solid #d8dce3; margin: 4px; }
.wrong { color: #b54708; }
pre#notes { font: inherit; white-space: pre-wrap; }
p.note { background: #fff8e6; border: 1px solid #f1d48a; padding: 6px 10px; }
code { background: #f2f4f7; padding: 0 3px; border-radius: 3px; }
#case-images { display: flex; flex-wrap: wrap; gap: 12px; }
#case-images figure { margin: 0; }
img.full { display: block; max-width: 100%; height: auto; border: 1px solid #d8dce3; }
figcaption { font-size: 12px; color: #4b5565; margin-top: 4px; }
td.reference, .reference { color: #17803d; font-weight: 600; }
a.sample-link.ok, a.sample-link.wrong, a.sample-link.muted { font-weight: 600; margin-right: 6px; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.side { min-width: 0; }
.side h3 { margin: 6px 0; }
.answer-card { border: 1px solid #e3e6eb; border-radius: 4px; padding: 6px 10px; margin: 8px 0; }
.answer-card p { margin: 0 0 4px; }
section.compare-task { border-top: 1px solid #d8dce3; margin-top: 18px; }
details.thinking > summary { cursor: pointer; color: #4b5565; font-size: 12px; }
pre.thinking { max-height: 420px; overflow: auto; color: #374151; }
.unstable { color: #b42318; font-weight: 600; }
"#;

/// A whole page: `title` is plain text, `body` is HTML already escaped.
pub(crate) fn page(title: &str, body: &str) -> Html<String> {
    framed(title, "nmb runs", body)
}

/// The frame of every page: `title` and `home` (the header's link back to `/`) are plain text, `body` is HTML
/// already escaped.
pub(crate) fn framed(title: &str, home: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · nmb</title><link rel=\"stylesheet\" href=\"/style.css\"></head>\
         <body><header><a href=\"/\">{}</a></header><main>{body}</main></body></html>\n",
        escape(title),
        escape(home)
    ))
}

/// A short page for an error status: `message` is plain text.
pub(crate) fn error_page(status: &str, message: &str) -> Html<String> {
    page(
        status,
        &format!("<h1>{}</h1><p>{}</p>", escape(status), escape(message)),
    )
}

/// Percent-encodes everything but RFC 3986's unreserved characters (for a query value or a path segment).
pub(crate) fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Undoes percent-encoding (and `+` for a space); invalid escapes are kept as they are.
pub(crate) fn url_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A model's thinking before its answer, collapsed: it is never parsed or scored, and often longer than the
/// answer. `reasoning` is what the API counted of it, where it did.
pub(crate) fn thinking_block(body: &mut String, thinking: &str, reasoning: Option<u64>) {
    let words = thinking.split_whitespace().count();
    let tokens = reasoning.map_or_else(String::new, |n| format!(", {n} reasoning tokens"));
    let _ = write!(
        body,
        "<details class=\"thinking\"><summary>thinking ({words} words{tokens})</summary>\
         <pre class=\"thinking\">{}</pre></details>",
        escape(thinking)
    );
}

/// A number with the given decimals, or an em dash.
pub(crate) fn num(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "—".to_string(), |x| format!("{x:.decimals$}"))
}

/// An optional count, or an em dash.
pub(crate) fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "—".to_string(), |x| x.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_round_trip() {
        for s in ["a/b c", "100%", "x&y=z", "é", "", "%", "%4", "%zz"] {
            let enc = url_encode(s);
            assert!(enc
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.~%".contains(&b)));
            assert_eq!(url_decode(&enc), s);
        }
        assert_eq!(url_decode("a+b%2Fc"), "a b/c");
        assert_eq!(url_decode("%zz%4"), "%zz%4");
    }
}
