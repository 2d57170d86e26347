//! A seeded mutation fuzzer over what a GGUF file brings: its header (counts, lengths, offsets, dimensions, types,
//! metadata values) and its chat template. Each case starts from the tiny model `nmb_test_support::gguf` writes,
//! which loads and answers (checked first, so mutations reach deep code), goes through `LocalModel::load`, and,
//! where it loads, one greedy generation of two tokens.
//!
//! Targets: `GGUF bytes` (the file's bytes mutated, mostly inside the header: bit flips, integers at the limits
//! written over 1, 2, 4 or 8 bytes, cut, copied and inserted ranges, truncation), `GGUF fields` (the header
//! rewritten with one to three fields changed: a metadata value replaced by a limit or another type, a tensor's
//! dimensions, type or offset, a count) and `chat template` (a real template with Jinja fragments inserted,
//! loops, doublings and repeats among them).
//!
//! A case fails on a panic, on taking more than 5 s, or on asking for more than [`BUDGET`] bytes at once (the
//! counting allocator refuses what is past [`REFUSED`], which aborts the run; the case printed last is the
//! culprit). `NMB_FUZZ_CASES` sets the cases per target (default 300, what CI runs), `NMB_FUZZ_SEED` another seed,
//! `NMB_FUZZ_TARGET` one target by name. It is its own test binary because it installs its own global allocator.

use std::path::Path;

use nmb_chat::{GenParams, Message, OutputFormat, Role};
use nmb_local::LocalModel;
use nmb_test_support::fuzz::{Campaign, Counting, Draw, Outcome, XorShift};
use nmb_test_support::gguf::{ty, Gguf, Value};

/// The most one allocation of a case may ask for: a template's fuel lets it build a string of up to about
/// 64 MB; far less than a lying header can claim.
const BUDGET: usize = 128 << 20;
/// Past this, an allocation is refused outright (which aborts the run) rather than risk the machine.
const REFUSED: usize = 4 << 30;

#[global_allocator]
static ALLOCATOR: Counting = Counting::new(REFUSED);

/// Integers at the limits a header's counts, lengths, offsets and dimensions are checked against.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    3,
    31,
    32,
    33,
    255,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    1 << 58,
    1 << 62,
    i64::MAX as u64,
    u64::MAX - 31,
    u64::MAX,
];

/// The tiny model's bytes mutated 1 to 4 times, nine times in ten inside the header.
fn mutate_bytes(seed: &[u8], header: usize, rng: &mut XorShift) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let span = if rng.below(10) < 9 { header } else { b.len() };
        let at = rng.below(span.min(b.len()) + 1);
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let v = rng.pick(INTERESTING).to_le_bytes();
                let width = *rng.pick(&[1, 2, 4, 8]);
                // Aligned to the width most of the time, as the header's fields are laid out.
                let at = if rng.below(4) > 0 {
                    at / width * width
                } else {
                    at
                };
                for (i, byte) in v.iter().take(width).enumerate() {
                    if let Some(slot) = b.get_mut(at + i) {
                        *slot = *byte;
                    }
                }
            }
            2 => {
                let end = (at + 1 + rng.below(64)).min(b.len());
                b.drain(at.min(end)..end);
            }
            3 => {
                let end = (at + 1 + rng.below(256)).min(b.len());
                let copy = b[at.min(end)..end].to_vec();
                b.splice(at..at, copy);
            }
            4 => b.truncate(at.max(rng.below(b.len() + 1))),
            _ => {
                let n = 1 + rng.below(8);
                let fill: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                b.splice(at..at, fill);
            }
        }
    }
    b
}

/// A value of the kind a header field might be given: a limit, another type, a lying raw value.
fn odd_value(rng: &mut XorShift) -> Value {
    let n = *rng.pick(INTERESTING);
    match rng.below(9) {
        0 => Value::U32(n as u32),
        1 => Value::U64(n),
        2 => Value::I32(n as i32),
        3 => Value::F32(f32::from_bits(rng.next_u64() as u32)),
        4 => Value::Bool(rng.below(2) == 0),
        5 => Value::Str("\u{0}x".repeat(rng.below(4))),
        6 => Value::Strs(vec![String::new(); rng.below(3)]),
        7 => {
            // An array of strings whose length lies.
            let mut raw = ty::STRING.to_le_bytes().to_vec();
            raw.extend(n.to_le_bytes());
            Value::Raw(ty::ARRAY, raw)
        }
        _ => Value::Raw(
            *rng.pick(&[ty::U8, ty::STRING, 13, 99]),
            n.to_le_bytes().to_vec(),
        ),
    }
}

/// The tiny model's header rewritten with 1 to 3 fields changed.
fn mutate_fields(rng: &mut XorShift) -> Vec<u8> {
    let mut g = Gguf::tiny();
    for _ in 0..1 + rng.below(3) {
        match rng.below(7) {
            0 | 1 => {
                let key = g.metadata[rng.below(g.metadata.len())].0.clone();
                g.set(&key, odd_value(rng));
            }
            2 => {
                let i = rng.below(g.tensors.len());
                let d = rng.below(g.tensors[i].dims.len() + 1);
                let dims = &mut g.tensors[i].dims;
                match dims.get_mut(d) {
                    Some(slot) => *slot = *rng.pick(INTERESTING),
                    None => dims.push(*rng.pick(INTERESTING)),
                }
            }
            3 => {
                let i = rng.below(g.tensors.len());
                g.tensors[i].ty = *rng.pick(&[0, 1, 2, 8, 10, 11, 12, 14, 15, 20, 30, 39, 1000]);
            }
            4 => {
                let i = rng.below(g.tensors.len());
                g.tensors[i].offset = Some(*rng.pick(INTERESTING));
            }
            5 => match rng.below(3) {
                0 => g.tensor_count = Some(*rng.pick(INTERESTING)),
                1 => g.metadata_count = Some(*rng.pick(INTERESTING)),
                _ => g.version = *rng.pick(&[0, 1, 2, 4, 0x0300_0000]),
            },
            _ => {
                let i = rng.below(g.tensors.len());
                g.tensors.remove(i);
            }
        }
    }
    g.bytes()
}

/// Fragments that break a template's syntax, inserted now and then.
const BROKEN: &[&str] = &[
    "{%",
    "%}",
    "{{",
    "}}",
    "{# ",
    "\u{0}",
    "{% endfor %}",
    "{% endif %}",
];

/// Whole pieces of Jinja a template can be given, the hostile ones among them.
const JINJA: &[&str] = &[
    "{% set ns = namespace(l=[], s='ab') %}",
    "{% for i in range(100000) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{% for i in range(40) %}{% set ns.s = ns.s + ns.s + ns.s %}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for m in messages %}{% for i in range(100000) %}{{ m.content }}{% endfor %}{% endfor %}",
    "{{ ns.s }}",
    "{{ ns.s | replace('a', 'aaaaaaaa') }}",
    "{{ ns.s.replace('a', 'aaaaaaaa') }}",
    "{{ 'x' * 99999999 }}",
    "{{ 'y' * 1000 }}",
    "{{ messages * 1000 }}",
    "{{ messages | tojson(indent=99999999) }}",
    "{{ messages | tojson(indent=2) }}",
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "{{ raise_exception('no') }}",
    "{% if messages %}{{ messages[0]['content'] }}{% endif %}",
    "{{ bos_token }}{{ eos_token }}",
    "{{ range(99999999) | length }}",
    "{{ 'w' | indent(99999999) }}",
    "{{ '%s' | format('v' * 50000000) }}",
    "{{ '%999999999s' | format('v') }}",
    "{{ '{:>900000000}'.format('x') }}",
    "{{ '{:.99999}'.format(1.5) }}",
    "{{ ', '.join(messages | map(attribute='content')) }}",
    "{% set ns.l = [ns.l, ns.l] %}",
    "{% for k in range(100) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}{% endfor %}",
    "{{ ns.l }}{{ ns.l == ns.l }}{{ ns.l | tojson }}",
    "{{ ns.l | tojson(indent=4) }}",
    "{{ ns.l | sort | unique | list }}",
];

/// A real template with 1 to 4 Jinja pieces inserted, or cut short.
fn mutate_template(seeds: &[&str], rng: &mut XorShift) -> String {
    let mut t = rng.pick(seeds).to_string();
    for _ in 0..1 + rng.below(4) {
        let mut at = rng.below(t.len() + 1);
        while !t.is_char_boundary(at) {
            at -= 1;
        }
        match rng.below(16) {
            0 => t.truncate(at),
            1 | 2 => t.insert_str(at, rng.pick::<&str>(BROKEN)),
            _ => {
                // Whole pieces go between tags, where they keep the template's syntax.
                let mut gaps: Vec<usize> = t.match_indices("%}").map(|(i, _)| i + 2).collect();
                gaps.extend(t.match_indices("}}").map(|(i, _)| i + 2));
                gaps.extend([0, t.len()]);
                let at = *rng.pick(&gaps);
                t.insert_str(at, rng.pick::<&str>(JINJA))
            }
        }
    }
    t
}

/// Loads the file and, where it loads, asks it one short question; true when it loaded.
fn load_and_ask(path: &Path) -> bool {
    let Ok(model) = LocalModel::load(path) else {
        return false;
    };
    let params = GenParams {
        temperature: 0.0,
        max_tokens: 2,
        seed: Some(1),
        ..GenParams::default()
    };
    let msgs = [
        Message::text(Role::System, "Be brief."),
        Message::text(Role::User, "Which artery?"),
    ];
    let _ = model.generate(&msgs, &params, &OutputFormat::Text);
    true
}

/// How each target makes its cases' files.
type Make = Box<dyn FnMut(&mut XorShift) -> Vec<u8>>;

fn targets() -> Vec<(&'static str, Make)> {
    let seed = Gguf::tiny().bytes();
    // The header ends where the tensor data starts: just past the last tensor's name, type and offset.
    let header = seed
        .windows(b"blk.1.ffn_down.weight".len())
        .rposition(|w| w == b"blk.1.ffn_down.weight")
        .map_or(seed.len(), |at| at + 64);
    let templates: Vec<&'static str> = vec![
        nmb_local::CHATML_TEMPLATE,
        nmb_local::GEMMA_TEMPLATE,
        include_str!("fixtures/qwen3_chat_template.jinja"),
        include_str!("fixtures/gemma3_chat_template.jinja"),
    ];
    vec![
        (
            "GGUF bytes",
            Box::new(move |rng: &mut XorShift| mutate_bytes(&seed, header, rng)) as Make,
        ),
        ("GGUF fields", Box::new(mutate_fields)),
        (
            "chat template",
            Box::new(move |rng: &mut XorShift| {
                let mut g = Gguf::tiny();
                g.set(
                    "tokenizer.chat_template",
                    Value::Str(mutate_template(&templates, rng)),
                );
                g.bytes()
            }),
        ),
    ]
}

#[test]
fn no_model_file_or_template_panics_hangs_or_allocates_past_its_budget() {
    let mut fuzz = Campaign::from_env(0x6767_7566_6675_7a7a, BUDGET).keeping_failures("gguf");
    let mut summary = Vec::new();
    for (name, mut make) in targets() {
        if !fuzz.runs(name) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut rng = XorShift(fuzz.seed_of(name));
        let mut loaded = 0;
        for case in 0..fuzz.cases {
            let bytes = if case == 0 {
                Gguf::tiny().bytes()
            } else {
                make(&mut rng)
            };
            let path = dir.path().join(format!("case-{case}.gguf"));
            std::fs::write(&path, &bytes).unwrap();
            let file = path.clone();
            match fuzz.case(&ALLOCATOR, name, case, &bytes, move || load_and_ask(&file)) {
                Outcome::Read(ok) => {
                    assert!(ok || case > 0, "the tiny model itself does not load");
                    loaded += usize::from(ok);
                    let _ = std::fs::remove_file(&path);
                }
                Outcome::Failed => {}
                Outcome::Stuck => break, // the stuck thread keeps its file busy
            }
        }
        summary.push(format!(
            "{name}: {loaded} of {} loaded, largest allocation {} bytes",
            fuzz.cases,
            fuzz.largest(name)
        ));
    }
    fuzz.finish(&summary.join("; "));
}
