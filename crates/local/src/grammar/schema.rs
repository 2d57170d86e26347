//! A JSON schema to a GBNF grammar, by the rules of llama.cpp's `json-schema-to-grammar` (`SchemaConverter` in
//! `common/json-schema-to-grammar.cpp` and its Python port `examples/json_schema_to_grammar.py`), rule names and
//! rule text included, so the grammar text equals llama.cpp's for every schema of the subset read here.
//!
//! The subset: `type` (one or a list), `const`, `enum`, `oneOf`/`anyOf`, objects (`properties`, `required`,
//! `additionalProperties`), arrays (`items`, tuple `prefixItems`, `minItems`, `maxItems`), strings (`minLength`,
//! `maxLength`, the `uuid`, `date`, `time` and `date-time` formats), integers with `minimum`/`maximum` (and their
//! exclusive forms), numbers, booleans, null and `{}`. `$ref`, `allOf` and `pattern` are refused with
//! [`SchemaError`] rather than converted differently from llama.cpp.
//!
//! Where llama.cpp's C++ and Python converters differ, this follows the C++ one, which is what its server runs:
//! constants are written as nlohmann's `dump()` writes them (compact, non-ASCII kept as UTF-8).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// Why a schema could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the JSON schema {what} at {path} is not in the subset the grammar is built from")]
pub struct SchemaError {
    /// The keyword or shape refused.
    pub what: String,
    /// Where in the schema, as a JSON pointer (`/properties/x`).
    pub path: String,
}

/// `space ::= | " " | "\n"{1,2} [ \t]{0,20}`: whitespace limited so a model cannot run away with it.
const SPACE_RULE: &str = r#"| " " | "\n"{1,2} [ \t]{0,20}"#;

/// llama.cpp's built-in rules: name, text, the rules it names.
const PRIMITIVES: &[(&str, &str, &[&str])] = &[
    ("boolean", r#"("true" | "false")"#, &[]),
    ("decimal-part", "[0-9]{1,16}", &[]),
    ("integral-part", "[0] | [1-9] [0-9]{0,15}", &[]),
    (
        "number",
        r#"("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?"#,
        &["integral-part", "decimal-part"],
    ),
    ("integer", r#"("-"? integral-part)"#, &["integral-part"]),
    (
        "value",
        "object | array | string | number | boolean | null",
        &["object", "array", "string", "number", "boolean", "null"],
    ),
    (
        "object",
        r#""{" space ( string ":" space value ("," space string ":" space value)* )? space "}""#,
        &["string", "value"],
    ),
    (
        "array",
        r#""[" space ( value ("," space value)* )? space "]""#,
        &["value"],
    ),
    (
        "uuid",
        r#""\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"""#,
        &[],
    ),
    (
        "char",
        r#"[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})"#,
        &[],
    ),
    ("string", r#""\"" char* "\"""#, &["char"]),
    ("null", r#""null""#, &[]),
];

/// llama.cpp's string formats.
const FORMATS: &[(&str, &str, &[&str])] = &[
    (
        "date",
        r#"[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )"#,
        &[],
    ),
    (
        "time",
        r#"([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )"#,
        &[],
    ),
    ("date-time", r#"date "T" time"#, &["date", "time"]),
    ("date-string", r#""\"" date "\"""#, &["date"]),
    ("time-string", r#""\"" time "\"""#, &["time"]),
    ("date-time-string", r#""\"" date-time "\"""#, &["date-time"]),
];

fn builtin(name: &str) -> Option<(&'static str, &'static [&'static str])> {
    PRIMITIVES
        .iter()
        .chain(FORMATS)
        .find(|(n, _, _)| *n == name)
        .map(|(_, text, deps)| (*text, *deps))
}

fn reserved(name: &str) -> bool {
    name == "root" || name == "dot" || builtin(name).is_some()
}

/// The GBNF grammar of `schema`: one `name ::= rule` line per rule, sorted by name, root rule `root`.
pub fn to_grammar(schema: &Value) -> Result<String, SchemaError> {
    let mut c = Converter {
        rules: BTreeMap::from([("space".to_string(), SPACE_RULE.to_string())]),
    };
    c.visit(schema, "", "")?;
    Ok(c.rules
        .iter()
        .map(|(name, rule)| format!("{name} ::= {rule}\n"))
        .collect())
}

struct Converter {
    rules: BTreeMap<String, String>,
}

/// `name-suffix`, or `suffix` at the top (llama.cpp's `f'{name}{"-" if name else ""}{suffix}'`).
fn sub(name: &str, suffix: &str) -> String {
    if name.is_empty() {
        suffix.to_string()
    } else {
        format!("{name}-{suffix}")
    }
}

impl Converter {
    /// Adds a rule under `name` (runs of characters other than `[a-zA-Z0-9-]` become `-`), or under `name0`,
    /// `name1`, ... when another rule already has that name. Returns the name used.
    fn add_rule(&mut self, name: &str, rule: String) -> String {
        let mut esc = String::with_capacity(name.len());
        let mut in_run = false;
        for ch in name.chars() {
            if ch.is_ascii_alphanumeric() || ch == '-' {
                esc.push(ch);
                in_run = false;
            } else if !in_run {
                esc.push('-');
                in_run = true;
            }
        }
        let key = match self.rules.get(&esc) {
            None => esc,
            Some(r) if *r == rule => esc,
            Some(_) => {
                let mut i = 0;
                loop {
                    let k = format!("{esc}{i}");
                    match self.rules.get(&k) {
                        Some(r) if *r != rule => i += 1,
                        _ => break k,
                    }
                }
            }
        };
        self.rules.insert(key.clone(), rule);
        key
    }

    fn add_primitive(&mut self, name: &str, builtin_name: &str) -> String {
        let (text, deps) = builtin(builtin_name).expect("a built-in rule");
        let n = self.add_rule(name, text.to_string());
        for dep in deps {
            if !self.rules.contains_key(*dep) {
                self.add_primitive(dep, dep);
            }
        }
        n
    }

    fn visit(&mut self, schema: &Value, name: &str, path: &str) -> Result<String, SchemaError> {
        let refuse = |what: &str| SchemaError {
            what: what.to_string(),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
        };
        let Value::Object(s) = schema else {
            return Err(refuse("that is not an object"));
        };
        let ty = s.get("type");
        let rule_name = if reserved(name) {
            format!("{name}-")
        } else if name.is_empty() {
            "root".to_string()
        } else {
            name.to_string()
        };
        let ty_is = |t: &str| ty.and_then(Value::as_str) == Some(t);
        let ty_none = ty.is_none_or(Value::is_null);
        let format = s.get("format").and_then(Value::as_str).unwrap_or("");
        if s.contains_key("$ref") {
            return Err(refuse("keyword `$ref`"));
        }
        if let Some(alts) = s.get("oneOf").or_else(|| s.get("anyOf")) {
            let Value::Array(alts) = alts else {
                return Err(refuse("`oneOf`/`anyOf` that is not a list"));
            };
            let rule = self.union(name, alts.iter().cloned(), path)?;
            return Ok(self.add_rule(&rule_name, rule));
        }
        if let Some(Value::Array(types)) = ty {
            let alts = types.iter().map(|t| {
                let mut one = s.clone();
                one.insert("type".into(), t.clone());
                Value::Object(one)
            });
            let rule = self.union(name, alts, path)?;
            return Ok(self.add_rule(&rule_name, rule));
        }
        if let Some(c) = s.get("const") {
            return Ok(self.add_rule(&rule_name, constant(c)));
        }
        if let Some(e) = s.get("enum") {
            let Value::Array(values) = e else {
                return Err(refuse("`enum` that is not a list"));
            };
            let alts: Vec<String> = values.iter().map(constant).collect();
            return Ok(self.add_rule(&rule_name, format!("({})", alts.join(" | "))));
        }
        let additional = s.get("additionalProperties");
        if (ty_none || ty_is("object"))
            && (s.contains_key("properties") || additional.is_some_and(|a| *a != Value::Bool(true)))
        {
            let required: BTreeSet<&str> = match s.get("required") {
                Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
                _ => BTreeSet::new(),
            };
            let empty = Map::new();
            let properties = match s.get("properties") {
                Some(Value::Object(p)) => p,
                None => &empty,
                Some(_) => return Err(refuse("`properties` that is not an object")),
            };
            let rule = self.object(properties, &required, name, additional, path)?;
            return Ok(self.add_rule(&rule_name, rule));
        }
        if (ty_none || ty_is("object") || ty_is("string")) && s.contains_key("allOf") {
            return Err(refuse("keyword `allOf`"));
        }
        if (ty_none || ty_is("array")) && (s.contains_key("items") || s.contains_key("prefixItems"))
        {
            let items = s
                .get("items")
                .or_else(|| s.get("prefixItems"))
                .expect("checked");
            if let Value::Array(tuple) = items {
                let mut parts = Vec::new();
                for (i, item) in tuple.iter().enumerate() {
                    let p = format!("{path}/prefixItems/{i}");
                    parts.push(self.visit(item, &sub(name, &format!("tuple-{i}")), &p)?);
                }
                let rule = format!(r#""[" space {} space "]""#, parts.join(r#" "," space "#));
                return Ok(self.add_rule(&rule_name, rule));
            }
            let item = self.visit(items, &sub(name, "item"), &format!("{path}/items"))?;
            let min = count(s.get("minItems")).unwrap_or(0);
            let max = count(s.get("maxItems"));
            let rule = format!(
                r#""[" space {} space "]""#,
                repetition(&item, min, max, Some(r#""," space"#))
            );
            return Ok(self.add_rule(&rule_name, rule));
        }
        if (ty_none || ty_is("string")) && s.contains_key("pattern") {
            return Err(refuse("keyword `pattern`"));
        }
        if (ty_none || ty_is("string")) && is_uuid(format) {
            let n = if rule_name == "root" { "root" } else { format };
            return Ok(self.add_primitive(n, "uuid"));
        }
        let format_rule = format!("{format}-string");
        if (ty_none || ty_is("string")) && FORMATS.iter().any(|(n, _, _)| *n == format_rule) {
            let prim = self.add_primitive(&format_rule, &format_rule);
            return Ok(self.add_rule(&rule_name, prim));
        }
        if ty_is("string") && (s.contains_key("minLength") || s.contains_key("maxLength")) {
            let ch = self.add_primitive("char", "char");
            let min = count(s.get("minLength")).unwrap_or(0);
            let max = count(s.get("maxLength"));
            let rule = format!(r#""\"" {} "\"""#, repetition(&ch, min, max, None));
            return Ok(self.add_rule(&rule_name, rule));
        }
        let bounds = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"];
        if (ty_none || ty_is("integer")) && bounds.iter().any(|b| s.contains_key(*b)) {
            let int = |k: &str| s.get(k).map(integer);
            let min = int("minimum").or_else(|| int("exclusiveMinimum").map(|v| v + 1));
            let max = int("maximum").or_else(|| int("exclusiveMaximum").map(|v| v - 1));
            let mut out = String::from("(");
            min_max_int(min, max, &mut out, 16, true);
            out.push(')');
            return Ok(self.add_rule(&rule_name, out));
        }
        if ty_is("object") || s.is_empty() {
            let prim = self.add_primitive("object", "object");
            return Ok(self.add_rule(&rule_name, prim));
        }
        if ty_none {
            let prim = self.add_primitive("value", "value");
            return Ok(self.add_rule(&rule_name, prim));
        }
        match ty.and_then(Value::as_str) {
            Some(t) if PRIMITIVES.iter().any(|(n, _, _)| *n == t) => {
                let n = if rule_name == "root" { "root" } else { t };
                Ok(self.add_primitive(n, t))
            }
            _ => Err(refuse(&format!(
                "type {}",
                ty.cloned().unwrap_or(Value::Null)
            ))),
        }
    }

    fn union(
        &mut self,
        name: &str,
        alts: impl Iterator<Item = Value>,
        path: &str,
    ) -> Result<String, SchemaError> {
        let mut rules = Vec::new();
        for (i, alt) in alts.enumerate() {
            let n = if name.is_empty() {
                format!("alternative-{i}")
            } else {
                format!("{name}-{i}")
            };
            rules.push(self.visit(&alt, &n, &format!("{path}/{i}"))?);
        }
        Ok(rules.join(" | "))
    }

    /// llama.cpp's `_build_object_rule`: required properties in schema order, then the optional ones, each
    /// optional one reachable from every earlier one (`X-rest` rules), extra keys last when allowed.
    fn object(
        &mut self,
        properties: &Map<String, Value>,
        required: &BTreeSet<&str>,
        name: &str,
        additional: Option<&Value>,
        path: &str,
    ) -> Result<String, SchemaError> {
        let mut kv_rules: BTreeMap<String, String> = BTreeMap::new();
        for (prop, prop_schema) in properties {
            let p = format!("{path}/properties/{prop}");
            let value_rule = self.visit(prop_schema, &sub(name, prop), &p)?;
            let kv = format!(
                r#"{} space ":" space {value_rule}"#,
                constant(&Value::String(prop.clone()))
            );
            let kv_name = self.add_rule(&sub(name, &format!("{prop}-kv")), kv);
            kv_rules.insert(prop.clone(), kv_name);
        }
        let names: Vec<&String> = properties.keys().collect();
        let required_props: Vec<String> = names
            .iter()
            .filter(|k| required.contains(k.as_str()))
            .map(|k| k.to_string())
            .collect();
        let mut optional: Vec<String> = names
            .iter()
            .filter(|k| !required.contains(k.as_str()))
            .map(|k| k.to_string())
            .collect();
        if let Some(extra) = additional.filter(|a| **a != Value::Bool(false) && !a.is_null()) {
            let sub_name = sub(name, "additional");
            let value_rule = match extra {
                Value::Object(_) => self.visit(
                    extra,
                    &format!("{sub_name}-value"),
                    &format!("{path}/additionalProperties"),
                )?,
                _ => self.add_primitive("value", "value"),
            };
            let key_rule = if names.is_empty() {
                self.add_primitive("string", "string")
            } else {
                let not = self.not_strings(&names);
                self.add_rule(&format!("{sub_name}-k"), not)
            };
            let kv = self.add_rule(
                &format!("{sub_name}-kv"),
                format!(r#"{key_rule} ":" space {value_rule}"#),
            );
            kv_rules.insert("*".into(), kv);
            optional.push("*".into());
        }
        let mut rule = String::from(r#""{" space "#);
        let req: Vec<&str> = required_props
            .iter()
            .map(|k| kv_rules[k].as_str())
            .collect();
        rule.push_str(&req.join(r#" "," space "#));
        if !optional.is_empty() {
            rule.push_str(" (");
            if !required_props.is_empty() {
                rule.push_str(r#" "," space ( "#);
            }
            let alts: Vec<String> = (0..optional.len())
                .map(|i| self.recursive_refs(&optional[i..], false, name, &kv_rules))
                .collect();
            rule.push_str(&alts.join(" | "));
            if !required_props.is_empty() {
                rule.push_str(" )");
            }
            rule.push_str(" )?");
        }
        rule.push_str(r#" space "}""#);
        Ok(rule)
    }

    fn recursive_refs(
        &mut self,
        ks: &[String],
        first_is_optional: bool,
        name: &str,
        kv_rules: &BTreeMap<String, String>,
    ) -> String {
        let k = &ks[0];
        let kv = &kv_rules[k];
        let comma_ref = format!(r#"( "," space {kv} )"#);
        let mut res = if first_is_optional {
            format!("{comma_ref}{}", if k == "*" { "*" } else { "?" })
        } else if k == "*" {
            format!("{kv} {comma_ref}*")
        } else {
            kv.clone()
        };
        if ks.len() > 1 {
            let rest = self.recursive_refs(&ks[1..], true, name, kv_rules);
            let rest_name = self.add_rule(&sub(name, &format!("{k}-rest")), rest);
            res.push(' ');
            res.push_str(&rest_name);
        }
        res
    }

    /// A JSON string that is none of `strings` (llama.cpp's `_not_strings`, a trie of the names).
    fn not_strings(&mut self, strings: &[&String]) -> String {
        #[derive(Default)]
        struct Node {
            children: BTreeMap<char, Node>,
            end: bool,
        }
        let mut trie = Node::default();
        for s in strings {
            let mut node = &mut trie;
            for c in s.chars() {
                node = node.children.entry(c).or_default();
            }
            node.end = true;
        }
        let ch = self.add_primitive("char", "char");
        fn visit(node: &Node, ch: &str, out: &mut String) {
            let mut rejects = String::new();
            let mut first = true;
            for (c, child) in &node.children {
                rejects.push(*c);
                if !first {
                    out.push_str(" | ");
                }
                first = false;
                out.push_str(&format!("[{c}]"));
                if !child.children.is_empty() {
                    out.push_str(" (");
                    visit(child, ch, out);
                    out.push(')');
                } else if child.end {
                    out.push_str(&format!(" {ch}+"));
                }
            }
            if !node.children.is_empty() {
                if !first {
                    out.push_str(" | ");
                }
                out.push_str(&format!("[^\"{rejects}] {ch}*"));
            }
        }
        let mut out = String::from("[\"] ( ");
        visit(&trie, &ch, &mut out);
        out.push_str(&format!(" ){} [\"]", if trie.end { "" } else { "?" }));
        out
    }
}

fn is_uuid(format: &str) -> bool {
    match format.strip_prefix("uuid") {
        Some("") => true,
        Some(d) => matches!(d, "1" | "2" | "3" | "4" | "5"),
        None => false,
    }
}

/// A count keyword (`minItems`, `maxLength`): a non-negative integer.
fn count(v: Option<&Value>) -> Option<u64> {
    v.and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f.max(0.0) as u64)))
}

/// An integer bound as llama.cpp reads it (`get<int>()`, which truncates a fractional value).
fn integer(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .unwrap_or(0)
}

/// A constant as a grammar literal: its JSON text, quoted and escaped.
fn constant(v: &Value) -> String {
    literal(&serde_json::to_string(v).unwrap_or_default())
}

/// `"text"` with `\r`, `\n`, `"` and `\` escaped.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// llama.cpp's `_build_repetition`: `item` between `min` and `max` times, `separator` between items.
fn repetition(item: &str, min: u64, max: Option<u64>, separator: Option<&str>) -> String {
    if max == Some(0) {
        return String::new();
    }
    if min == 0 && max == Some(1) {
        return format!("{item}?");
    }
    let Some(sep) = separator else {
        return match (min, max) {
            (1, None) => format!("{item}+"),
            (0, None) => format!("{item}*"),
            (min, max) => format!(
                "{item}{{{min},{}}}",
                max.map(|m| m.to_string()).unwrap_or_default()
            ),
        };
    };
    let rest = repetition(
        &format!("({sep} {item})"),
        min.saturating_sub(1),
        max.map(|m| m - 1),
        None,
    );
    let result = format!("{item} {rest}");
    if min == 0 {
        format!("({result})?")
    } else {
        result
    }
}

/// llama.cpp's `_generate_min_max_int`: the integers in `[min, max]` (either side open) as grammar text.
fn min_max_int(
    min: Option<i64>,
    max: Option<i64>,
    out: &mut String,
    decimals_left: i64,
    top_level: bool,
) {
    let digit_range = |out: &mut String, from: u8, to: u8| {
        out.push('[');
        out.push(from as char);
        if from != to {
            out.push('-');
            out.push(to as char);
        }
        out.push(']');
    };
    // `None` for the maximum stands for Python's `sys.maxsize`: no upper count.
    let more_digits = |out: &mut String, min_digits: i64, max_digits: Option<i64>| {
        out.push_str("[0-9]");
        if max_digits == Some(min_digits) && min_digits == 1 {
            return;
        }
        out.push('{');
        out.push_str(&min_digits.to_string());
        if max_digits != Some(min_digits) {
            out.push(',');
            if let Some(m) = max_digits {
                out.push_str(&m.to_string());
            }
        }
        out.push('}');
    };
    fn uniform_range(out: &mut String, from: &[u8], to: &[u8]) {
        let digit_range = |out: &mut String, from: u8, to: u8| {
            out.push('[');
            out.push(from as char);
            if from != to {
                out.push('-');
                out.push(to as char);
            }
            out.push(']');
        };
        let more_digits = |out: &mut String, n: usize| {
            out.push_str("[0-9]");
            if n != 1 {
                out.push_str(&format!("{{{n}}}"));
            }
        };
        let mut i = 0;
        while i < from.len() && from[i] == to[i] {
            i += 1;
        }
        if i > 0 {
            out.push('"');
            out.push_str(std::str::from_utf8(&from[..i]).unwrap_or(""));
            out.push('"');
        }
        if i < from.len() {
            if i > 0 {
                out.push(' ');
            }
            let sub_len = from.len() - i - 1;
            if sub_len > 0 {
                let (from_sub, to_sub) = (&from[i + 1..], &to[i + 1..]);
                let zeros = vec![b'0'; sub_len];
                let nines = vec![b'9'; sub_len];
                let mut to_reached = false;
                out.push('(');
                if from_sub == zeros.as_slice() {
                    digit_range(out, from[i], to[i] - 1);
                    out.push(' ');
                    more_digits(out, sub_len);
                } else {
                    out.push('[');
                    out.push(from[i] as char);
                    out.push_str("] (");
                    uniform_range(out, from_sub, &nines);
                    out.push(')');
                    if from[i] < to[i] - 1 {
                        out.push_str(" | ");
                        if to_sub == nines.as_slice() {
                            digit_range(out, from[i] + 1, to[i]);
                            to_reached = true;
                        } else {
                            digit_range(out, from[i] + 1, to[i] - 1);
                        }
                        out.push(' ');
                        more_digits(out, sub_len);
                    }
                }
                if !to_reached {
                    out.push_str(" | ");
                    digit_range(out, to[i], to[i]);
                    out.push(' ');
                    uniform_range(out, &zeros, to_sub);
                }
                out.push(')');
            } else {
                out.push('[');
                out.push(from[i] as char);
                out.push('-');
                out.push(to[i] as char);
                out.push(']');
            }
        }
    }

    if let (Some(mut lo), Some(hi)) = (min, max) {
        if lo < 0 && hi < 0 {
            out.push_str("\"-\" (");
            min_max_int(Some(-hi), Some(-lo), out, decimals_left, true);
            out.push(')');
            return;
        }
        if lo < 0 {
            out.push_str("\"-\" (");
            min_max_int(Some(0), Some(-lo), out, decimals_left, true);
            out.push_str(") | ");
            lo = 0;
        }
        let mut min_s = lo.to_string().into_bytes();
        let max_s = hi.to_string().into_bytes();
        for digits in min_s.len()..max_s.len() {
            uniform_range(out, &min_s, &vec![b'9'; digits]);
            min_s = std::iter::once(b'1')
                .chain(std::iter::repeat_n(b'0', digits))
                .collect();
            out.push_str(" | ");
        }
        uniform_range(out, &min_s, &max_s);
        return;
    }
    let less_decimals = (decimals_left - 1).max(1);
    if let Some(lo) = min {
        if lo < 0 {
            out.push_str("\"-\" (");
            min_max_int(None, Some(-lo), out, decimals_left, false);
            out.push_str(") | [0] | [1-9] ");
            more_digits(out, 0, Some(decimals_left - 1));
        } else if lo == 0 {
            if top_level {
                out.push_str("[0] | [1-9] ");
                more_digits(out, 0, Some(less_decimals));
            } else {
                more_digits(out, 1, Some(decimals_left));
            }
        } else if lo <= 9 {
            let c = b'0' + lo as u8;
            let start = if top_level { b'1' } else { b'0' };
            if c > start {
                digit_range(out, start, c - 1);
                out.push(' ');
                more_digits(out, 1, Some(less_decimals));
                out.push_str(" | ");
            }
            digit_range(out, c, b'9');
            out.push(' ');
            more_digits(out, 0, Some(less_decimals));
        } else {
            let min_s = lo.to_string().into_bytes();
            let length = min_s.len() as i64;
            let c = min_s[0];
            if c > b'1' {
                digit_range(out, if top_level { b'1' } else { b'0' }, c - 1);
                out.push(' ');
                more_digits(out, length, Some(less_decimals));
                out.push_str(" | ");
            }
            digit_range(out, c, c);
            out.push_str(" (");
            let rest: i64 = std::str::from_utf8(&min_s[1..])
                .ok()
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            min_max_int(Some(rest), None, out, less_decimals, false);
            out.push(')');
            if c < b'9' {
                out.push_str(" | ");
                digit_range(out, c + 1, b'9');
                out.push(' ');
                more_digits(out, length - 1, Some(less_decimals));
            }
        }
        return;
    }
    if let Some(hi) = max {
        if hi >= 0 {
            if top_level {
                out.push_str("\"-\" [1-9] ");
                more_digits(out, 0, Some(less_decimals));
                out.push_str(" | ");
            }
            min_max_int(Some(0), Some(hi), out, decimals_left, true);
        } else {
            out.push_str("\"-\" (");
            min_max_int(Some(-hi), None, out, decimals_left, false);
            out.push(')');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_with_a_bounded_integer_and_an_optional_string() {
        let schema = json!({"type":"object","properties":{"a":{"type":"integer","minimum":1,"maximum":5},
            "b":{"type":"string"}},"required":["a"]});
        let want = r#"a ::= ([1-5])
a-kv ::= "\"a\"" space ":" space a
b-kv ::= "\"b\"" space ":" space string
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
root ::= "{" space a-kv ( "," space ( b-kv ) )? space "}"
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\""
"#;
        assert_eq!(to_grammar(&schema).unwrap(), want);
    }

    #[test]
    fn refs_and_patterns_are_refused_with_where() {
        let e = to_grammar(
            &json!({"type":"object","properties":{"x":{"type":"string","pattern":"^a+$"}}}),
        )
        .unwrap_err();
        assert_eq!(e.path, "/properties/x");
        assert!(e.what.contains("pattern"));
        assert!(to_grammar(&json!({"$ref": "#/defs/a"})).is_err());
    }
}
