//! The fingerprint table: the search's index from state fingerprint to
//! graph node.
//!
//! One writer (the merge) inserts while the expansion threads of the next
//! batch read it, so the search can merge one batch while it expands the
//! next. Readers only use what they find as a hint (the merge looks a state
//! up again before it adds it), so a reader that misses an entry being
//! written costs a copied state, never a wrong answer.
//!
//! Open addressing with linear probing over one array of entries (key and
//! value, four to a cache line): a lookup reads one line, hit or miss. Most
//! of the search's lookups are hits (a state is met about nine times for
//! each time it is new), so the separate array of one-byte tags that
//! general-purpose maps keep only added a second cache miss to each (their
//! removal made `safe`'s search faster: measured in the bench). The
//! fingerprint 0 marks an empty slot, so that key is held apart.
//! Fingerprints are uniform 64-bit hashes, so their top bits pick the slot.
//!
//! Lookups are `#[inline]`: the search is compiled in the crate of the
//! model it checks, and a call across crates for each lookup showed in its
//! time.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The key of a slot that holds no entry.
const EMPTY: u64 = 0;

/// Grown when more than this share of slots is in use (7/10).
const MAX_LOAD_NUM: usize = 7;
const MAX_LOAD_DEN: usize = 10;

#[repr(align(16))]
struct Entry {
    key: AtomicU64,
    value: AtomicU32,
}

/// A map from fingerprint to a `u32` value.
pub struct FingerprintTable {
    entries: Slab<Entry>,
    /// The value of the key 0 (which marks empty slots) plus one; 0 when
    /// it has none.
    zero: AtomicU64,
    /// log2 of the slot count.
    bits: u32,
    len: AtomicU64,
}

impl Default for FingerprintTable {
    fn default() -> Self {
        Self::with_slots_log2(10)
    }
}

impl FingerprintTable {
    fn with_slots_log2(bits: u32) -> Self {
        let n = 1usize << bits;
        FingerprintTable {
            entries: Slab::zeroed(n),
            zero: AtomicU64::new(0),
            bits,
            len: AtomicU64::new(0),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the table.
    pub fn memory_bytes(&self) -> usize {
        Self::bytes_of_slots_log2(self.bits)
    }

    fn bytes_of_slots_log2(bits: u32) -> usize {
        (1usize << bits) * std::mem::size_of::<Entry>()
    }

    /// log2 of the slots needed to hold `additional` more entries.
    fn slots_log2_for(&self, additional: usize) -> u32 {
        let needed = self.len() + additional;
        let mut bits = self.bits;
        while needed * MAX_LOAD_DEN > (1usize << bits) * MAX_LOAD_NUM {
            bits += 1;
        }
        bits
    }

    /// The bytes [`reserve`](Self::reserve)`(additional)` would allocate: a
    /// grown table, held beside this one while the entries are copied (0
    /// when there is room already).
    pub fn growth_bytes(&self, additional: usize) -> usize {
        match self.slots_log2_for(additional) {
            bits if bits == self.bits => 0,
            bits => Self::bytes_of_slots_log2(bits),
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.entries.len() - 1
    }

    #[inline]
    fn home(&self, fp: u64) -> usize {
        (fp >> (64 - self.bits)) as usize
    }

    /// Asks the CPU to start loading what `fp`'s lookup reads first: the
    /// entry of its home slot.
    #[inline]
    pub fn prefetch(&self, fp: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let entry: *const Entry = &self.entries[self.home(fp)];
            // SAFETY: a prefetch is a hint; it reads nothing and cannot
            // fault, whatever the address. SSE is part of x86_64's baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(entry.cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = fp;
    }

    /// The slot holding `fp` (not 0), or the empty slot where it would go.
    #[inline]
    fn find(&self, fp: u64) -> Result<usize, usize> {
        let mut i = self.home(fp);
        loop {
            // Acquire: an entry whose key is seen is seen whole.
            match self.entries[i].key.load(Ordering::Acquire) {
                EMPTY => return Err(i),
                k if k == fp => return Ok(i),
                _ => i = (i + 1) & self.mask(),
            }
        }
    }

    #[inline]
    pub fn get(&self, fp: u64) -> Option<u32> {
        if fp == EMPTY {
            return match self.zero.load(Ordering::Relaxed) {
                0 => None,
                v => Some((v - 1) as u32),
            };
        }
        let i = self.find(fp).ok()?;
        Some(self.entries[i].value.load(Ordering::Relaxed))
    }

    /// Inserts or replaces. Only one thread may write at a time; readers may
    /// run alongside (a reader sees the old value or the new one). The
    /// caller keeps room with [`reserve`](Self::reserve): inserting into a
    /// full table is a bug, not an input error.
    #[inline]
    pub fn insert(&self, fp: u64, value: u32) {
        if fp == EMPTY {
            if self.zero.swap(u64::from(value) + 1, Ordering::Relaxed) == 0 {
                self.len.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        match self.find(fp) {
            Ok(i) => self.entries[i].value.store(value, Ordering::Relaxed),
            Err(i) => {
                assert!(
                    (self.len() + 1) * MAX_LOAD_DEN
                        <= self.entries.len() * MAX_LOAD_NUM + MAX_LOAD_DEN,
                    "fingerprint table over its load: reserve before inserting"
                );
                self.entries[i].value.store(value, Ordering::Relaxed);
                // Release: a reader that sees the key sees the value.
                self.entries[i].key.store(fp, Ordering::Release);
                self.len.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Makes room for `additional` more entries (no reader may run: it
    /// takes `&mut self`).
    pub fn reserve(&mut self, additional: usize) {
        let bits = self.slots_log2_for(additional);
        if bits == self.bits {
            return;
        }
        let grown = Self::with_slots_log2(bits);
        for e in self.entries.iter() {
            let key = e.key.load(Ordering::Relaxed);
            if key != EMPTY {
                grown.insert(key, e.value.load(Ordering::Relaxed));
            }
        }
        if let Some(v) = self.get(EMPTY) {
            grown.insert(EMPTY, v);
        }
        *self = grown;
    }
}

/// A zeroed array of atomics in memory of its own, on huge pages where the
/// system lends them. The table is hundreds of megabytes read at random:
/// with 4 KiB pages nearly every lookup also misses the TLB, and the page
/// walk cost as much as the lookup (measured on a search of 16 million
/// states: the prefetch of an entry was the search's most expensive
/// instruction).
struct Slab<T: Zeroable> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
}

/// Huge pages are 2 MiB on x86_64 and most aarch64 systems; the alignment
/// lets the kernel back the whole array with them.
const HUGE_PAGE: usize = 2 << 20;

/// Only atomics whose all-zero bytes are a valid value go in a slab.
///
/// # Safety
/// The all-zero bit pattern must be a valid `Self`.
unsafe trait Zeroable: Sync {}
// SAFETY: both fields are atomic integers, zero is valid for each; the
// padding needs no value.
unsafe impl Zeroable for Entry {}

impl<T: Zeroable> Slab<T> {
    fn layout(len: usize) -> std::alloc::Layout {
        let bytes = std::mem::size_of::<T>()
            .checked_mul(len)
            .expect("a fingerprint table fits the address space");
        let align = if bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            std::mem::align_of::<T>()
        };
        std::alloc::Layout::from_size_align(bytes.max(1), align)
            .expect("a fingerprint table fits the address space")
    }

    fn zeroed(len: usize) -> Self {
        let layout = Self::layout(len);
        // Not `alloc_zeroed`: the allocator may zero by writing, and a page
        // written before the advice below is a small page for good.
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = std::ptr::NonNull::new(raw.cast::<T>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        #[cfg(target_os = "linux")]
        if layout.align() == HUGE_PAGE {
            // A hint: where transparent huge pages are off, or the call
            // fails, the table works the same on small pages.
            // SAFETY: the range is this allocation's, aligned to a page.
            unsafe {
                libc::madvise(raw.cast(), layout.size(), libc::MADV_HUGEPAGE);
            }
        }
        // SAFETY: the allocation holds `layout.size()` bytes; all-zero is
        // a valid `T` (`Zeroable`).
        unsafe { std::ptr::write_bytes(raw, 0, layout.size()) };
        Slab { ptr, len }
    }
}

impl<T: Zeroable> std::ops::Deref for Slab<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` zeroed values of a `Zeroable` type live at `ptr`
        // until drop; shared access only (the values are atomics).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Drop for Slab<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout; atomics need no drop.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), Self::layout(self.len)) };
    }
}

// SAFETY: a slab is an owned array of atomics, shared like `Box<[T]>`.
unsafe impl<T: Zeroable> Send for Slab<T> {}
// SAFETY: as above: only shared references to atomics are handed out.
unsafe impl<T: Zeroable> Sync for Slab<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_was_inserted_and_nothing_else() {
        let mut t = FingerprintTable::default();
        // Keys that share their top bits probe past each other.
        let keys: Vec<u64> = (0..5000u64)
            .map(|i| (i % 7) << 60 | i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 8)
            .collect();
        for (i, &k) in keys.iter().enumerate() {
            t.reserve(1);
            t.insert(k, i as u32);
        }
        assert_eq!(t.len(), keys.len());
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(t.get(k), Some(i as u32));
        }
        assert_eq!(t.get(0xdead_beef), None);
        t.insert(keys[3], 77);
        assert_eq!(t.get(keys[3]), Some(77));
        assert_eq!(t.len(), keys.len());
    }

    #[test]
    fn zero_is_a_key_like_any_other() {
        let mut t = FingerprintTable::default();
        assert_eq!(t.get(0), None);
        t.reserve(1);
        t.insert(0, 5);
        assert_eq!(t.get(0), Some(5));
        // Kept apart from the slots, and carried when the table grows.
        for i in 1..3000u64 {
            t.reserve(1);
            t.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), 1);
        }
        assert_eq!(t.get(0), Some(5));
        assert_eq!(t.len(), 3000);
    }

    #[test]
    #[should_panic(expected = "reserve before inserting")]
    fn inserting_past_the_load_without_reserving_is_caught() {
        let t = FingerprintTable::default();
        for i in 0..2000u64 {
            t.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), 1);
        }
    }
}
