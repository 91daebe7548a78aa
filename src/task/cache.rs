//! Memory for task cells: a per-thread cache of freed cells, by size class.
//!
//! A server spawns and finishes tasks at a steady rate; without a cache every
//! task costs a `malloc` and a `free`, and when a burst of tasks ends, the
//! allocator may hand the freed memory back to the kernel (glibc trims the
//! top of its heap) only to fault it in again, page by page, for the next
//! burst: on the headline workload, page faults become a large part of the
//! time (PROFILING.md, "Why timings move"). So a freed cell goes to a cache
//! of its thread and the next spawn of a cell of the same size class takes
//! it back.
//!
//! * Size classes 8 bytes apart, one per cell size, up to
//!   [`MAX_CACHED_SIZE`] (alignment at most 16); a cell of another layout
//!   goes straight to the global allocator. A cacheable cell is always
//!   allocated with its class's layout, from the cache or not, so any
//!   block of a class can be freed into any cache.
//! * At most [`MAX_CACHED_BYTES`] (32 MiB) per thread; beyond that a freed
//!   cell goes back to the global allocator. The cache's blocks are freed
//!   when its thread exits, or by `trim_cell_cache` (feature `testing`). The bound is the
//!   memory a thread keeps after its largest burst of tasks, as glibc keeps
//!   freed memory that is not at the top of its heap. It holds two bursts of
//!   different sizes (50,000 cells of one class and 100,000 of another, 12
//!   MiB together, as the peer comparison's workloads alternate them), so
//!   that neither falls back to `malloc` and `free` each round.
//! * A cell freed on another thread (its last waker dropped there) goes to
//!   that thread's cache (or to the global allocator while that thread is
//!   exiting).
//!
//! The cache's invariants, named for the `# Safety` sections and `SAFETY:`
//! comments that cite them:
//!
//! * **C1 (class layout).** A cell of a cacheable layout is always
//!   allocated with its class's layout (`class_layout`: the class's size,
//!   alignment 16), from the cache or from the global allocator; a cell of
//!   any other layout is allocated by the global allocator with its own
//!   layout. So a block is freed to the global allocator with the layout
//!   its class (or its own layout) gives, and any block of a class may be
//!   kept in any thread's cache.
//! * **C2 (free list).** A block on a free list is owned by its cache alone
//!   (nothing else refers to it), is at least 8 bytes and 16-aligned, and
//!   its first word is the link `push` wrote.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::RefCell;
use std::ptr::NonNull;

/// The largest alignment served from the cache: every class's blocks have
/// it.
const ALIGN: usize = 16;
/// Class granularity: cell sizes are multiples of 8 (the header's
/// alignment), so each class holds cells of one size.
const STEP: usize = 8;
/// The largest cell size that is cached.
pub(crate) const MAX_CACHED_SIZE: usize = 1024;
/// The most memory one thread's cache keeps.
pub(crate) const MAX_CACHED_BYTES: usize = 32 << 20;
/// Classes of 8, 16, 24, ... 1,024 bytes.
const CLASSES: usize = MAX_CACHED_SIZE / STEP;

/// The block size of `class`.
///
/// A cell is allocated at its own size, not rounded up to a coarser class:
/// glibc's `malloc` gives a request of `n` bytes a chunk of `n + 8` rounded
/// up to 16 (its size word, then 16-byte alignment), so the 88-byte cells
/// of the headline benchmark, which 16-byte classes rounded up to 96, took
/// 112 bytes of heap each, and take 96 at their own size. Allocators with size classes of their own round the
/// cell's size, as they would have rounded the class's.
const fn class_size(class: usize) -> usize {
    (class + 1) * STEP
}

/// Per class, a free list threaded through the free blocks themselves:
/// the first word of a cached block is the address of the next (so caching
/// allocates nothing).
struct CellCache {
    heads: [Option<NonNull<FreeBlock>>; CLASSES],
    bytes: usize,
}

/// A cached block: its first word links to the next of its class.
struct FreeBlock {
    next: Option<NonNull<FreeBlock>>,
}

impl CellCache {
    fn pop(&mut self, class: usize) -> Option<NonNull<u8>> {
        let block = self.heads[class]?;
        // SAFETY: C2 (free list): a block on a free list is the cache's
        // alone, at least 8 bytes and 16-aligned, and its first word is the
        // link `push` wrote, so it reads as a `FreeBlock`.
        self.heads[class] = unsafe { block.as_ptr().read().next };
        self.bytes -= class_size(class);
        Some(block.cast())
    }

    /// Puts the free block `ptr` on `class`'s free list.
    ///
    /// # Safety
    /// `ptr` is a block of `class`'s layout (C1: the layout every cacheable
    /// cell of that class is allocated with), its contents dropped, owned
    /// by the caller, who gives it to the cache: nothing refers to it after
    /// the call, so that C2 (free list) holds for it.
    unsafe fn push(&mut self, class: usize, ptr: NonNull<u8>) {
        let block = ptr.cast::<FreeBlock>();
        // SAFETY: the block has `class`'s layout (this function's `# Safety`,
        // C1): at least 8 bytes and 16-aligned, so a `FreeBlock` (one word)
        // fits at its start; it is ours to write (the caller gave it up).
        unsafe {
            block.as_ptr().write(FreeBlock {
                next: self.heads[class],
            })
        };
        self.heads[class] = Some(block);
        self.bytes += class_size(class);
    }
}

impl Drop for CellCache {
    fn drop(&mut self) {
        self.free_all();
    }
}

impl CellCache {
    /// Gives every cached block back to the global allocator.
    fn free_all(&mut self) {
        for class in 0..CLASSES {
            let layout = class_layout(class);
            while let Some(p) = self.pop(class) {
                // SAFETY: C1 (class layout): a cached block of `class` was
                // allocated by the global allocator with `class_layout(class)`;
                // C2 (free list): `pop` took it off the list, so the cache
                // owned it alone and nothing refers to it.
                unsafe { dealloc(p.as_ptr(), layout) };
            }
        }
    }
}

thread_local! {
    static CACHE: RefCell<CellCache> = const {
        RefCell::new(CellCache {
            heads: [None; CLASSES],
            bytes: 0,
        })
    };
}

/// The class of `layout`, if it is cached.
#[inline]
fn class_of(layout: Layout) -> Option<usize> {
    let size = layout.size();
    if size == 0 || size > MAX_CACHED_SIZE || layout.align() > ALIGN {
        return None;
    }
    Some(size.div_ceil(STEP) - 1)
}

fn class_layout(class: usize) -> Layout {
    // Sizes of 8 to 1,024 bytes with alignment 16 (a size need not be a
    // multiple of the alignment): always valid.
    Layout::from_size_align(class_size(class), ALIGN).expect("valid class layout")
}

/// Memory for a cell of `layout` (never zero-sized).
#[inline]
pub(crate) fn allocate(layout: Layout) -> NonNull<u8> {
    let Some(class) = class_of(layout) else {
        return global_alloc(layout);
    };
    let cached = CACHE
        .try_with(|c| c.try_borrow_mut().ok()?.pop(class))
        .ok()
        .flatten();
    cached.unwrap_or_else(|| global_alloc(class_layout(class)))
}

/// Frees the task cells this thread's cache keeps (up to 32 MiB after a
/// burst of tasks) to the global
/// allocator, and returns how many bytes that was. For a long-lived thread
/// whose executor will not see such a burst again; the next spawns then
/// allocate afresh.
///
/// ```
/// let ex = tourbillon::Builder::new().queue("q", 1).build().unwrap();
/// ex.block_on(async {
///     let hs: Vec<_> = (0..1000).map(|i| ex.spawn("q", async move { i }).unwrap()).collect();
///     for h in hs {
///         h.await.unwrap();
///     }
/// });
/// assert!(tourbillon::testing::trim_cell_cache() > 0);
/// assert_eq!(tourbillon::testing::trim_cell_cache(), 0);
/// ```
#[cfg(feature = "testing")]
pub fn trim_cell_cache() -> usize {
    CACHE
        .try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return 0;
            };
            let bytes = c.bytes;
            c.free_all();
            bytes
        })
        .unwrap_or(0)
}

fn global_alloc(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() > 0);
    // SAFETY: `alloc` asks for a non-zero size: `layout` is a task cell's
    // (its header first, I5, cell type, in `task/raw/mod.rs`) or its
    // class's (at least 8 bytes, C1).
    NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout))
}

/// Frees a cell's memory, keeping it in this thread's cache when it fits.
///
/// # Safety
/// `ptr` came from [`allocate`] with the same `layout` (so that C1, class
/// layout, tells the layout it was allocated with), its contents were
/// dropped, and neither the caller nor anyone else uses it afterwards (the
/// cache may then own it, C2).
#[inline]
pub(crate) unsafe fn release(ptr: NonNull<u8>, layout: Layout) {
    let Some(class) = class_of(layout) else {
        // SAFETY: C1 (class layout): a cell of an uncacheable layout was
        // allocated by the global allocator with its own layout, `layout`
        // (this function's `# Safety`: the same as `allocate`'s).
        unsafe { dealloc(ptr.as_ptr(), layout) };
        return;
    };
    let size = class_size(class);
    let kept = CACHE
        .try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return false;
            };
            if c.bytes + size > MAX_CACHED_BYTES {
                return false;
            }
            // SAFETY: `ptr` has its class's layout (C1, class layout: every
            // cacheable cell is allocated so), its contents were dropped and
            // nobody uses it afterwards (this function's `# Safety`).
            unsafe { c.push(class, ptr) };
            true
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: C1 (class layout): a cacheable cell is always allocated
        // with its class's layout (from the cache or the global allocator);
        // nobody uses it afterwards (this function's `# Safety`).
        unsafe { dealloc(ptr.as_ptr(), class_layout(class)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_per_cell_size() {
        let l = |s, a| Layout::from_size_align(s, a).unwrap();
        assert_eq!(class_of(l(1, 1)), Some(0));
        assert_eq!(class_of(l(8, 8)), Some(0));
        assert_eq!(class_of(l(9, 8)), Some(1));
        assert_eq!(class_of(l(88, 8)), Some(10));
        assert_eq!(class_layout(10).size(), 88);
        assert_eq!(class_of(l(96, 16)), Some(11));
        assert_eq!(class_of(l(1024, 16)), Some(CLASSES - 1));
        assert_eq!(class_of(l(1025, 8)), None);
        assert_eq!(class_of(l(64, 64)), None);
        for class in 0..CLASSES {
            let layout = class_layout(class);
            assert_eq!(layout.align(), 16);
            assert_eq!(layout.size(), (class + 1) * 8);
            assert_eq!(class_of(layout), Some(class));
        }
    }

    #[test]
    fn a_freed_cell_is_reused_by_the_next_of_its_class() {
        let layout = Layout::from_size_align(88, 8).unwrap();
        let a = allocate(layout);
        // SAFETY: `release`'s `# Safety`: `a` came from `allocate(layout)`
        // (so C1 tells how it was allocated), holds nothing and is not used
        // after this.
        unsafe { release(a, layout) };
        let b = allocate(Layout::from_size_align(88, 16).unwrap());
        assert_eq!(a, b, "same class (88 bytes): the cached block comes back");
        // SAFETY: `release`'s `# Safety`: `b` came from `allocate` with this
        // layout (88 bytes, alignment 16: C1 tells how it was allocated),
        // holds nothing and is not used after this (the comparison above
        // only read its address).
        unsafe { release(b, Layout::from_size_align(88, 16).unwrap()) };
        let big = Layout::from_size_align(4096, 8).unwrap();
        let c = allocate(big);
        // SAFETY: `release`'s `# Safety`: `c` came from `allocate(big)`
        // (an uncacheable layout, C1), holds nothing and is not used after
        // this.
        unsafe { release(c, big) };
    }
}
