//! Buffers that a forward pass takes and gives back, reused instead of freed. A prefill of a few hundred
//! tokens takes and frees buffers of megabytes in every layer; glibc hands blocks that size back to the kernel
//! when they are freed, so each new one was faulted in again page by page (on Gemma 3 270M about a tenth of
//! prefill time went to page faults, much as llama.cpp avoids by planning its compute buffers once).
//!
//! [`zeroed`] takes the smallest pooled buffer that fits (or allocates one) and zeroes it ([`overwritten`]
//! leaves it as it was, for outputs written in full); dropping the
//! [`Buf`] gives it back to the free list of the thread that drops it. Each thread keeps at most [`KEEP`]
//! buffers per element type, so the pool holds about one forward pass's working set. Small buffers are not
//! pooled: malloc keeps those itself.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

/// Buffers kept per thread and element type.
const KEEP: usize = 12;

/// Buffers smaller than this are freed as usual (below glibc's initial mmap threshold of 128 KiB).
const MIN_BYTES: usize = 64 * 1024;

/// A zeroed buffer that goes back to its thread's pool when dropped.
pub(crate) struct Buf<T: Pooled>(Vec<T>);

/// An element type with a pool of its own.
pub(crate) trait Pooled: Copy + Default + 'static {
    /// Runs `f` on this thread's free list; `None` while the thread is being torn down.
    fn with_pool<R>(f: impl FnOnce(&mut Vec<Vec<Self>>) -> R) -> Option<R>;
}

macro_rules! pooled {
    ($($t:ty),*) => {$(
        impl Pooled for $t {
            fn with_pool<R>(f: impl FnOnce(&mut Vec<Vec<Self>>) -> R) -> Option<R> {
                thread_local! {
                    static POOL: RefCell<Vec<Vec<$t>>> = const { RefCell::new(Vec::new()) };
                }
                POOL.try_with(|p| f(&mut p.borrow_mut())).ok()
            }
        }
    )*};
}

pooled!(f32, i8, i16);

/// `len` zeroes, in a pooled buffer where one fits.
pub(crate) fn zeroed<T: Pooled>(len: usize) -> Buf<T> {
    let mut buf = overwritten(len);
    buf.fill(T::default());
    buf
}

/// `len` values left from the buffer's earlier use (zero where it grew): for outputs that are written in full,
/// which need not pay for zeroing first.
pub(crate) fn overwritten<T: Pooled>(len: usize) -> Buf<T> {
    let mut v = T::with_pool(|pool| take(pool, len))
        .flatten()
        .unwrap_or_default();
    v.resize(len, T::default());
    Buf(v)
}

/// A copy of `values` in a pooled buffer.
pub(crate) fn copied<T: Pooled>(values: &[T]) -> Buf<T> {
    let mut buf = overwritten(values.len());
    buf.copy_from_slice(values);
    buf
}

/// The smallest pooled buffer holding `len`; if none does, the largest is freed, as it is too small for the
/// sizes now asked for.
fn take<T>(pool: &mut Vec<Vec<T>>, len: usize) -> Option<Vec<T>> {
    let fits = (0..pool.len())
        .filter(|&i| pool[i].capacity() >= len)
        .min_by_key(|&i| pool[i].capacity());
    match fits {
        Some(i) => Some(pool.swap_remove(i)),
        None => {
            if let Some(i) = (0..pool.len()).max_by_key(|&i| pool[i].capacity()) {
                pool.swap_remove(i);
            }
            None
        }
    }
}

impl<T: Pooled> Drop for Buf<T> {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        if v.capacity() * size_of::<T>() < MIN_BYTES {
            return;
        }
        T::with_pool(|pool| {
            if pool.len() == KEEP {
                if let Some(i) = (0..pool.len()).min_by_key(|&i| pool[i].capacity()) {
                    pool.swap_remove(i);
                }
            }
            pool.push(v);
        });
    }
}

impl<T: Pooled> Deref for Buf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T: Pooled> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_back_buffer_is_reused_zeroed() {
        let mut a = zeroed::<f32>(100_000);
        a.fill(7.0);
        let at = a.as_ptr();
        drop(a);
        let b = zeroed::<f32>(90_000);
        assert_eq!(b.as_ptr(), at, "the pooled buffer is taken again");
        assert!(b.iter().all(|&v| v == 0.0));
        assert_eq!(b.len(), 90_000);
    }

    #[test]
    fn a_too_small_pool_gives_way_and_stays_bounded() {
        for len in (1..40).map(|i| i * 20_000) {
            drop(zeroed::<i16>(len));
        }
        let held = i16::with_pool(|p| p.len()).unwrap();
        assert!(held <= KEEP, "{held} buffers kept");
        let big = zeroed::<i16>(10_000_000);
        assert_eq!(big.len(), 10_000_000);
    }
}
