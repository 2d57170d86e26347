//! What the fuzz test binaries share: a seeded mutator (a valid seed mutated a few times: byte flips, interesting
//! values, JSON and text tokens, cut and duplicated ranges, truncation, so that mutations reach past the first
//! check of a reader), the counting allocator each binary installs as its global allocator ([`Counting`]), and
//! the case loop ([`Campaign`]): each case on a thread of its own, failing on a panic, on taking too long, or on
//! asking for more than a budget at once.
//!
//! A fuzz test binary installs the allocator itself (`#[global_allocator] static ALLOCATOR: Counting =
//! Counting::new(REFUSED);`), which is why each fuzz test is a test binary of its own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::rng::SplitMix;

/// Tokens inserted at random places: JSON punctuation, numbers at the limits, escapes, bytes that are not UTF-8.
pub const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"null",
    b"-1",
    b"1e308",
    b"1e400",
    b"1.5",
    b"NaN",
    b"\0",
    b"\n",
    b"\r\n",
    b"\xff\xfe",
    b"99999999999999999999",
    b"9223372036854775808",
    b"18446744073709551615",
    b"\\u0000",
    b"\\ud800",
    b"[[[[[[[[",
    b"\xe4\xb8\xad",
];

/// Numbers a run of digits is replaced with: the limits of the integer types, negative, fractional, past f64.
pub const NUMBERS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"1.5",
    b"1e400",
    b"-0",
    b"2147483648",
    b"4294967296",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551615",
    b"18446744073709551616",
];

const INTERESTING: &[u32] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
];

/// Where a mutation draws its numbers from.
pub trait Draw {
    fn next_u64(&mut self) -> u64;

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// One of `items` (which must not be empty).
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

impl Draw for SplitMix {
    fn next_u64(&mut self) -> u64 {
        SplitMix::next_u64(self)
    }
}

/// xorshift64*: the generator of the fuzz tests whose cases were first drawn with it.
pub struct XorShift(pub u64);

impl Draw for XorShift {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A mutator from a seed: the same seed gives the same cases.
pub struct Mutator(pub SplitMix);

impl Mutator {
    pub fn new(seed: u64) -> Mutator {
        Mutator(SplitMix(seed))
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }

    /// `seed` mutated 1 to 4 times, with [`TOKENS`] inserted and runs of digits replaced with [`NUMBERS`].
    pub fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        mutate(&mut self.0, seed, TOKENS, Some(NUMBERS))
    }
}

/// `seed` mutated 1 to 4 times with numbers from `rng`: a bit flipped, an interesting value written over 1, 2 or
/// 4 bytes, one of `tokens` inserted, a range cut or duplicated, the end cut off, a run of digits replaced with
/// one of `numbers` (where given), random bytes inserted.
pub fn mutate(
    rng: &mut impl Draw,
    seed: &[u8],
    tokens: &[&[u8]],
    numbers: Option<&[&[u8]]>,
) -> Vec<u8> {
    let mut b = seed.to_vec();
    let kinds = if numbers.is_some() { 8 } else { 7 };
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(kinds) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let v = INTERESTING[rng.below(INTERESTING.len())].to_le_bytes();
                let width = [1, 2, 4][rng.below(3)];
                for (i, byte) in v.iter().take(width).enumerate() {
                    if let Some(slot) = b.get_mut(at + i) {
                        *slot = *byte;
                    }
                }
            }
            2 => {
                let token = tokens[rng.below(tokens.len())];
                b.splice(at..at, token.iter().copied());
            }
            3 => {
                let end = (at + 1 + rng.below(64)).min(b.len());
                b.drain(at.min(end)..end);
            }
            4 => {
                let end = (at + 1 + rng.below(256)).min(b.len());
                let copy = b[at.min(end)..end].to_vec();
                b.splice(at..at, copy);
            }
            5 => b.truncate(at),
            6 if numbers.is_some() => {
                // The run of digits at or after `at`, replaced with a number at a limit.
                let Some(start) = (at..b.len()).find(|&i| b[i].is_ascii_digit()) else {
                    continue;
                };
                let end = (start..b.len())
                    .find(|&i| !b[i].is_ascii_digit())
                    .unwrap_or(b.len());
                let numbers = numbers.unwrap_or_default();
                let number = numbers[rng.below(numbers.len())];
                b.splice(start..end, number.iter().copied());
            }
            _ => {
                let n = 1 + rng.below(8);
                let fill: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                b.splice(at..at, fill);
            }
        }
    }
    b
}

/// A global allocator that forwards to the system's, remembers the largest single request since
/// [`Counting::reset`], and refuses (null, which aborts the run) any request past its limit rather than risk the
/// machine. Each fuzz test binary installs one as its `#[global_allocator]`.
pub struct Counting {
    refused: usize,
    largest: AtomicUsize,
}

impl Counting {
    /// Refusing every request over `refused` bytes.
    pub const fn new(refused: usize) -> Counting {
        Counting {
            refused,
            largest: AtomicUsize::new(0),
        }
    }

    /// Forgets the largest request so far.
    pub fn reset(&self) {
        self.largest.store(0, Ordering::Relaxed);
    }

    /// The largest single request since the last [`Counting::reset`].
    pub fn largest(&self) -> usize {
        self.largest.load(Ordering::Relaxed)
    }
}

// SAFETY: forwards to the system allocator; only refuses (null) requests over the limit, which callers handle
// as allocation failure.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > self.refused {
            return std::ptr::null_mut();
        }
        self.largest.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > self.refused {
            return std::ptr::null_mut();
        }
        self.largest.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as for `alloc`; `ptr` came from this allocator with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// A number from the environment variable `name`, else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How one case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Within its time and budget: whether the input was read without an error.
    Read(bool),
    /// It panicked or asked for more than the budget; the failure is recorded.
    Failed,
    /// It took longer than the limit; the failure is recorded, and its thread still holds what it was given.
    Stuck,
}

/// The case loop of a fuzz test: `NMB_FUZZ_CASES` cases per target (default 300, what CI runs) from
/// `NMB_FUZZ_SEED` (default the test's own), `NMB_FUZZ_TARGET` to run one target by name. Each case runs on a
/// thread of its own and fails on a panic, on taking longer than 5 s, or on asking for more than the budget at
/// once; [`Campaign::finish`] prints the figures and fails the test with every failure.
pub struct Campaign {
    pub cases: u64,
    seed: u64,
    only: Option<String>,
    budget: usize,
    limit: Duration,
    /// Failing inputs are kept in `target/fuzz-failures` with this file ending, for replaying.
    keep: Option<&'static str>,
    failures: Vec<String>,
    largest: Vec<(String, usize)>,
    started: Instant,
}

impl Campaign {
    /// A campaign from the environment, `seed` unless `NMB_FUZZ_SEED` says otherwise, failing a case that asks
    /// for more than `budget` bytes at once.
    pub fn from_env(seed: u64, budget: usize) -> Campaign {
        Campaign {
            cases: env_u64("NMB_FUZZ_CASES", 300),
            seed: env_u64("NMB_FUZZ_SEED", seed),
            only: std::env::var("NMB_FUZZ_TARGET").ok(),
            budget,
            limit: Duration::from_secs(5),
            keep: None,
            failures: Vec::new(),
            largest: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Keeps each failing input in `target/fuzz-failures` as `TARGET-CASE.ENDING`.
    pub fn keeping_failures(mut self, ending: &'static str) -> Campaign {
        self.keep = Some(ending);
        self
    }

    /// Whether `target` runs (`NMB_FUZZ_TARGET` names it, or no target).
    pub fn runs(&self, target: &str) -> bool {
        self.only.as_deref().is_none_or(|o| o == target)
    }

    /// The seed of `target`'s cases.
    pub fn seed_of(&self, target: &str) -> u64 {
        self.seed ^ target.len() as u64
    }

    /// Runs case `case` of `target` (its input `input`) through `read`, measured by `alloc`.
    pub fn case(
        &mut self,
        alloc: &Counting,
        target: &str,
        case: u64,
        input: &[u8],
        read: impl FnOnce() -> bool + Send + 'static,
    ) -> Outcome {
        eprintln!("fuzz: {target} case {case} ({} bytes)", input.len());
        alloc.reset();
        let outcome = run_case(self.limit, read).and_then(|read| {
            let asked = alloc.largest();
            self.note_largest(target, asked);
            match asked > self.budget {
                true => Err(format!(
                    "asked for {asked} bytes at once, over the {}-byte budget",
                    self.budget
                )),
                false => Ok(read),
            }
        });
        let why = match outcome {
            Ok(read) => return Outcome::Read(read),
            Err(why) => why,
        };
        let kept = self.keep.map(|ending| {
            let dir = crate::assets::repo_root().join("target/fuzz-failures");
            std::fs::create_dir_all(&dir).unwrap();
            let file = dir.join(format!("{}-{case}.{ending}", target.replace(' ', "_")));
            std::fs::write(&file, input).unwrap();
            format!(" ({})", file.display())
        });
        let kept = kept.unwrap_or_default();
        self.failures
            .push(format!("{target} case {case}{kept}: {why}"));
        if why.starts_with("took") {
            Outcome::Stuck
        } else {
            Outcome::Failed
        }
    }

    fn note_largest(&mut self, target: &str, asked: usize) {
        match self.largest.iter_mut().find(|(t, _)| t == target) {
            Some((_, largest)) => *largest = (*largest).max(asked),
            None => self.largest.push((target.to_string(), asked)),
        }
    }

    /// The largest single allocation a case of `target` asked for.
    pub fn largest(&self, target: &str) -> usize {
        let found = self.largest.iter().find(|(t, _)| t == target);
        found.map_or(0, |(_, n)| *n)
    }

    /// `TARGET BYTES, ...`: the largest allocation of every target that ran.
    pub fn largest_per_target(&self) -> String {
        let each: Vec<String> = (self.largest.iter())
            .map(|(t, n)| format!("{t} {n}"))
            .collect();
        each.join(", ")
    }

    /// Prints the campaign's figures with `detail`, and fails with every failure.
    pub fn finish(self, detail: &str) {
        println!(
            "fuzz: {} cases per target, {:.1} s, {} failure(s); {detail}",
            self.cases,
            self.started.elapsed().as_secs_f64(),
            self.failures.len(),
        );
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n"));
    }
}

/// Runs `case` on a thread of its own: `Err` on a panic or when it takes longer than `limit`.
fn run_case(limit: Duration, case: impl FnOnce() -> bool + Send + 'static) -> Result<bool, String> {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(case));
        let _ = done.send(outcome.ok());
    });
    match finished.recv_timeout(limit) {
        Ok(Some(read)) => Ok(read),
        Ok(None) => Err("panicked".into()),
        Err(_) => Err(format!("took longer than {limit:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_cases() {
        let seed = br#"{"a": [1, 2, "x"]}"#;
        let (mut a, mut b) = (Mutator::new(7), Mutator::new(7));
        for _ in 0..50 {
            assert_eq!(a.mutate(seed), b.mutate(seed));
        }
        let differ = (0..50).filter(|_| a.mutate(seed) != seed.to_vec()).count();
        assert!(differ > 40);
    }
}
