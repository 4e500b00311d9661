//! The one `unsafe` of the contract: [`ArgList`], the list a workload keeps
//! its tensors and scalars in — the first `N` items inline in
//! `MaybeUninit` slots, the rest spilled to a `Vec` — and the two views of
//! its items ([`Parts`], [`PartsMut`]). Its invariant (the first
//! `len.min(N)` inline slots are initialised, and only those) is kept by
//! `push` alone; the three `unsafe` blocks read the initialised prefix as
//! `[T]`. `.ci/miri` runs this module's tests under Miri, which checks
//! every read against the invariant (an uninitialised read, an aliasing
//! violation, a dangling reference is an error there).

use std::mem::MaybeUninit;

/// Tensors and scalars kept inline, without a heap allocation, per run.
pub(crate) const INLINE_TENSORS: usize = 16;
pub(crate) const INLINE_SCALARS: usize = 16;

/// A list that keeps its first `N` items inline and spills the rest to the
/// heap: no allocation per run for the common sizes, and nothing written
/// for the inline slots a list does not use (a new list writes one word).
///
/// It has no `Drop`: its items have no drop glue (checked when a list is
/// made), so a workload that borrows a host output gives the borrow back
/// at its last use, not at the end of its scope.
pub(crate) struct ArgList<T, const N: usize> {
    /// Items pushed: the first `len.min(N)` inline slots are initialised
    /// (and only those), the rest are in `spill`.
    len: usize,
    inline: [MaybeUninit<T>; N],
    spill: Vec<T>,
}

impl<T, const N: usize> ArgList<T, N> {
    #[inline]
    pub(crate) fn new() -> Self {
        const {
            assert!(
                !std::mem::needs_drop::<T>(),
                "an ArgList never drops its inline items"
            );
        }
        ArgList {
            len: 0,
            inline: [const { MaybeUninit::uninit() }; N],
            spill: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, v: T) {
        if self.len < N {
            self.inline[self.len].write(v);
        } else {
            self.spill.push(v);
        }
        self.len += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Item `index`, if there is one.
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        if index < N {
            self.head().get(index)
        } else {
            self.spill.get(index - N)
        }
    }

    /// Item `index`, if there is one.
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        if index < N {
            self.head_mut().get_mut(index)
        } else {
            self.spill.get_mut(index - N)
        }
    }

    /// The inline items in use.
    #[inline]
    fn head(&self) -> &[T] {
        let head = &self.inline[..self.len.min(N)];
        // SAFETY: the first `len.min(N)` inline slots are initialised (the
        // field's invariant: `push` writes slot `len` before `len` grows
        // past it, and nothing else changes `len`), and `MaybeUninit<T>`
        // has `T`'s layout, so they are `len.min(N)` valid `T`s.
        unsafe { &*(std::ptr::from_ref(head) as *const [T]) }
    }

    /// [`head`](Self::head), mutable.
    #[inline]
    fn head_mut(&mut self) -> &mut [T] {
        let head = &mut self.inline[..self.len.min(N)];
        // SAFETY: as in `head`; the borrow is `&mut self`'s, so unique.
        unsafe { &mut *(std::ptr::from_mut(head) as *mut [T]) }
    }

    /// The items in use, as the two slices they are kept in.
    #[inline]
    pub(crate) fn parts(&self) -> Parts<'_, T> {
        Parts {
            // Only the slots in use: a short list costs its length, not `N`.
            head: self.head(),
            tail: &self.spill,
        }
    }

    /// [`parts`](Self::parts), mutable.
    #[inline]
    pub(crate) fn parts_mut(&mut self) -> PartsMut<'_, T> {
        let head = &mut self.inline[..self.len.min(N)];
        // SAFETY: as in `head_mut` (written out here: `spill` is borrowed
        // beside it, a disjoint field).
        let head = unsafe { &mut *(std::ptr::from_mut(head) as *mut [T]) };
        PartsMut {
            head,
            tail: &mut self.spill,
        }
    }
}

/// A list's items: the inline ones, then the spilled ones.
pub(crate) struct Parts<'x, T> {
    head: &'x [T],
    tail: &'x [T],
}

impl<'x, T> Parts<'x, T> {
    /// No items.
    pub(crate) const EMPTY: Self = Parts {
        head: &[],
        tail: &[],
    };

    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &'x T> + use<'x, T> {
        self.head.iter().chain(self.tail.iter())
    }
}

/// A list's items, mutable: the inline ones, then the spilled ones.
pub(crate) struct PartsMut<'x, T> {
    head: &'x mut [T],
    tail: &'x mut [T],
}

impl<'x, T> PartsMut<'x, T> {
    /// A list of the items `tail` (kept in a plain slice: nothing to skip).
    pub(crate) fn spilled(tail: &'x mut [T]) -> Self {
        PartsMut {
            head: &mut [],
            tail,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.head.iter().chain(self.tail.iter())
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.head.iter_mut().chain(self.tail.iter_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arg_list_spills_past_its_inline_items_and_reads_back_in_order() {
        let mut l = ArgList::<u32, 2>::new();
        for v in 0..5 {
            l.push(v);
        }
        assert_eq!(
            l.parts().iter().copied().collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(l.parts().len(), 5);
        *l.get_mut(3).unwrap() = 30;
        *l.get_mut(1).unwrap() = 10;
        assert!(l.get_mut(5).is_none());
        assert_eq!((l.get(1), l.get(3), l.get(5)), (Some(&10), Some(&30), None));
        let mut parts = l.parts_mut();
        assert_eq!(
            parts.iter_mut().map(|v| *v).collect::<Vec<_>>(),
            [0, 10, 2, 30, 4]
        );
        // Short of its inline room: the slots never written are not items.
        let mut short = ArgList::<u32, 4>::new();
        assert!(short.get_mut(0).is_none() && short.parts().iter().next().is_none());
        assert!(short.get(0).is_none());
        short.push(9);
        assert!(short.get_mut(1).is_none() && short.get_mut(3).is_none());
        assert!(short.get(1).is_none() && short.get(3).is_none());
        assert_eq!(short.parts_mut().iter().copied().collect::<Vec<_>>(), [9]);
    }

    /// Items that borrow (as a workload's tensors borrow host data):
    /// reading and writing them through both views, in and past the inline
    /// room, keeps every borrow valid — what Miri checks.
    #[test]
    fn an_arg_list_of_borrows_reads_and_writes_through_both_views() {
        let data: Vec<[u8; 3]> = (0..7u8).map(|i| [i, i + 1, i + 2]).collect();
        let mut l = ArgList::<&[u8], 3>::new();
        for d in &data {
            l.push(d.as_slice());
        }
        assert_eq!(l.len(), 7);
        let sums: Vec<u32> = l
            .parts()
            .iter()
            .map(|s| s.iter().map(|&b| u32::from(b)).sum())
            .collect();
        assert_eq!(sums, [3, 6, 9, 12, 15, 18, 21]);
        let last = data.last().map(<[u8; 3]>::as_slice).unwrap_or_default();
        for s in l.parts_mut().iter_mut() {
            *s = last;
        }
        *l.get_mut(0).unwrap() = &[];
        let lens: Vec<usize> = l.parts().iter().map(|s| s.len()).collect();
        assert_eq!(lens, [0, 3, 3, 3, 3, 3, 3]);
        // A list dropped with inline items: nothing to drop, nothing leaks.
        let mut short = ArgList::<u64, 16>::new();
        short.push(u64::MAX);
        assert_eq!(
            short.parts().iter().copied().collect::<Vec<_>>(),
            [u64::MAX]
        );
    }

    /// An empty list and a full inline room with nothing spilled: the
    /// views cover exactly the items (no slot past `len` is read).
    #[test]
    fn an_arg_list_reads_no_slot_past_its_items() {
        let empty = ArgList::<u32, 4>::new();
        assert_eq!(empty.parts().len(), 0);
        let mut full = ArgList::<u32, 4>::new();
        for v in 0..4 {
            full.push(v);
        }
        assert_eq!(full.parts().len(), 4);
        assert_eq!(full.parts_mut().len(), 4);
        assert!(full.get_mut(4).is_none());
    }

    /// Negative control of the Miri check (`.ci/miri` runs it and requires
    /// Miri to reject it): the head read one slot past the items, as a
    /// broken invariant would read it.
    #[test]
    #[ignore = "undefined behaviour on purpose: only .ci/miri runs it, under Miri, which must reject it"]
    fn negative_control_a_head_past_its_items_reads_an_unwritten_slot() {
        let mut l = ArgList::<u32, 4>::new();
        l.push(1);
        let head = &l.inline[..2];
        // SAFETY: none: deliberately unsound (slot 1 was never written),
        // the case the Miri check must catch.
        let read = unsafe { &*(std::ptr::from_ref(head) as *const [u32]) };
        std::hint::black_box(read[1]);
    }
}
