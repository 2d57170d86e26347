//! What a chat template may spend on one render, and the guards that hold it to that where minijinja's own fuel
//! does not reach.
//!
//! minijinja's fuel charges every instruction and every byte a template builds, writes or reads through a filter,
//! so it bounds both time and memory. Three ways around it were found by fuzzing and are closed here:
//! - `tojson` serialises first and charges after, so `tojson(indent=99999999)` (or a small indent over a deeply
//!   nested value, whose output grows with the square of the depth) allocated a gigabyte before any charge:
//!   [`tojson`] measures the output first and refuses what the fuel left cannot pay for;
//! - Python's `str.format` pads to any width (`'{:>900000000}'.format(x)` allocated 900 MB): [`format_widths`]
//!   refuses widths and precisions past [`MAX_FORMAT_WIDTH`];
//! - a value nested a hundred thousand lists deep is cheap to build but printing, comparing or dropping it recurses
//!   once per level and overflowed the stack: every render runs on a thread of its own with a [`STACK`]-byte
//!   stack, deeper than the fuel lets a template nest ([`MAX_FUEL`] caps the fuel so that stays true).

use std::io::Write;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, State, Value};

/// The fuel every render starts with (minijinja's `fuel`: one a template instruction, one per 64 bytes of text
/// built, written or read by a filter), and what each byte of the conversation adds to it: enough to copy the
/// conversation sixteen times over. Fuel bounds both the steps a template takes and what it allocates (about 64
/// bytes a unit: 64 MB for a small conversation), so a template that loops or grows text without end stops
/// with an error in a fraction of a second.
pub const TEMPLATE_FUEL: u64 = 1_000_000;
const FUEL_PER_INPUT_BYTE: u64 = 16;
/// The most fuel a render gets, however long the conversation: far more than a real template needs for the
/// longest prompt a context window holds, and few enough steps that no value can be nested deeper than
/// [`STACK`] holds.
pub(super) const MAX_FUEL: u64 = 2_000_000;
/// The longest prompt a render may write, in bytes: this, plus four bytes per byte of the conversation.
pub const TEMPLATE_OUTPUT_CAP: usize = 1 << 20;
const OUTPUT_PER_INPUT_BYTE: usize = 4;
/// The stack of the thread a render runs on. Each level of a nested value takes a few hundred bytes of it when
/// printed or compared, and [`MAX_FUEL`] buys fewer than 300,000 levels (each costs several instructions).
pub(super) const STACK: usize = 256 << 20;
/// The widest field `str.format` may pad to, and the longest precision.
pub(super) const MAX_FORMAT_WIDTH: u64 = 4096;

/// What a render may spend: minijinja fuel, and bytes of output.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    pub fuel: u64,
    pub output: usize,
}

impl Budget {
    /// The budget of a render given `input` bytes of conversation.
    pub fn for_input(input: usize) -> Budget {
        let extra = (input as u64).saturating_mul(FUEL_PER_INPUT_BYTE) / 64;
        Budget {
            fuel: TEMPLATE_FUEL.saturating_add(extra).min(MAX_FUEL),
            output: TEMPLATE_OUTPUT_CAP.saturating_add(input.saturating_mul(OUTPUT_PER_INPUT_BYTE)),
        }
    }

    /// How the output cap is worked out, for errors.
    pub fn output_rule() -> String {
        format!("{TEMPLATE_OUTPUT_CAP} bytes plus {OUTPUT_PER_INPUT_BYTE} a byte of conversation")
    }
}

/// An output that refuses to grow past `cap` bytes.
pub(super) struct Capped {
    pub bytes: Vec<u8>,
    pub cap: usize,
    pub over: bool,
}

impl Capped {
    pub fn new(cap: usize) -> Capped {
        Capped {
            bytes: Vec::new(),
            cap,
            over: false,
        }
    }
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len().saturating_add(buf.len()) > self.cap {
            self.over = true;
            return Err(std::io::Error::other("the rendered prompt is over its cap"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `render` on a thread with a [`STACK`]-byte stack, so that no value a template can build within its fuel
/// overflows the stack; a panic inside the template engine becomes an error too.
pub(super) fn on_big_stack<T: Send>(
    render: impl FnOnce() -> Result<T, String> + Send,
) -> Result<T, String> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("nmb-template".into())
            .stack_size(STACK)
            .spawn_scoped(scope, render)
            .map_err(|e| format!("cannot start the thread the template renders on: {e}"))?;
        thread
            .join()
            .unwrap_or_else(|_| Err("the template engine failed (panicked) on it".into()))
    })
}

/// minijinja's `tojson`, with its output measured before it is written: one that would cost more than the fuel
/// left (a quarter of a unit a byte, as minijinja charges serialised output) is refused instead of allocated.
pub(super) fn tojson(
    state: &State,
    value: &Value,
    indent: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let width = match &indent {
        Some(v) => indent_width(v)?,
        None => match kwargs.get::<Option<Value>>("indent")? {
            Some(v) => indent_width(&v)?,
            None => 0,
        },
    };
    let left = state.fuel_levels().map_or(u64::MAX, |(_, left)| left);
    let limit = left.saturating_mul(4);
    if json_size_past(value, width, limit) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "tojson would write more than the {limit} bytes the template's fuel can pay for \
                 (indent {width})"
            ),
        ));
    }
    let out = minijinja::filters::tojson(value, indent, kwargs)?;
    let len = out.as_str().map_or(0, str::len) as u64;
    state.consume_fuel(len / 4)?;
    Ok(out)
}

/// `tojson`'s indent: `true` is 2, `false` none, else a count of spaces.
fn indent_width(v: &Value) -> Result<u64, Error> {
    if v.kind() == ValueKind::Bool {
        return Ok(if v.is_true() { 2 } else { 0 });
    }
    u64::try_from(v.clone()).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            "tojson's indent must be a count",
        )
    })
}

/// Whether `value` as indented JSON would pass `limit` bytes: a walk that keeps its own stack (a deep value must
/// not recurse) and stops as soon as the count passes the limit. Each item is counted with its indent, a line
/// break and its punctuation; strings by their length (escapes can make them longer, within a few times).
fn json_size_past(value: &Value, indent: u64, limit: u64) -> bool {
    let mut total = 0u64;
    let mut todo = vec![(value.clone(), 0u64)];
    while let Some((v, depth)) = todo.pop() {
        let line = indent.saturating_mul(depth).saturating_add(4);
        total = total.saturating_add(match v.kind() {
            ValueKind::String => line + v.as_str().map_or(0, str::len) as u64 + 2,
            // A container's closing bracket is a line of its own.
            ValueKind::Seq | ValueKind::Iterable | ValueKind::Map => 2 * line,
            _ => line + 24,
        });
        if total > limit {
            return true;
        }
        let Ok(items) = v.try_iter() else { continue };
        match v.kind() {
            ValueKind::Seq | ValueKind::Iterable => {
                todo.extend(items.map(|item| (item, depth + 1)));
            }
            ValueKind::Map => {
                for key in items {
                    total = total.saturating_add(key.to_string().len() as u64 + 4);
                    if total > limit {
                        return true;
                    }
                    if let Ok(item) = v.get_item(&key) {
                        todo.push((item, depth + 1));
                    }
                }
            }
            _ => {}
        }
    }
    false
}

/// Refuses a `str.format` string whose replacement fields ask for a width or precision past
/// [`MAX_FORMAT_WIDTH`] (every run of digits inside `{...}` is read as one; `{{` is a literal brace).
pub(super) fn format_widths(format: &str) -> Result<(), Error> {
    let mut in_field = false;
    let mut digits = 0u64;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if !in_field && chars.peek() == Some(&'{') => {
                chars.next();
            }
            '{' => in_field = true,
            '}' => in_field = false,
            d if in_field && d.is_ascii_digit() => {
                digits = digits
                    .saturating_mul(10)
                    .saturating_add(u64::from(d as u8 - b'0'));
                if digits > MAX_FORMAT_WIDTH {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        format!(
                            "str.format asks for a width or precision past the {MAX_FORMAT_WIDTH} a chat \
                             template may use"
                        ),
                    ));
                }
                continue;
            }
            _ => {}
        }
        digits = 0;
    }
    Ok(())
}

/// Python's string methods (minijinja-contrib's `pycompat`), with `str.format`'s widths checked first.
pub(super) fn python_methods(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if method == "format" {
        if let Some(s) = value.as_str() {
            format_widths(s)?;
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_widths_past_the_cap_are_refused() {
        for ok in [
            "{}",
            "{:>10}",
            "{0:.3f}",
            "{{99999999}}",
            "{name:4096}",
            "99999999 {}",
        ] {
            format_widths(ok).expect(ok);
        }
        for bad in [
            "{:>900000000}",
            "{0:.99999}",
            "{:4097}",
            "a {{ {:x^123456789}",
        ] {
            assert!(format_widths(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_sizes_stop_at_the_limit() {
        let nested = (0..1000).fold(Value::from(1), |v, _| Value::from(vec![v]));
        assert!(!json_size_past(&nested, 0, 1 << 20));
        // Indentation grows with the square of the depth: two lines of 2 * depth spaces a level, about 2 MB.
        assert!(json_size_past(&nested, 2, 1_500_000));
        assert!(!json_size_past(&nested, 2, 2_500_000));
        assert!(json_size_past(&Value::from("x".repeat(100)), 0, 50));
    }
}
