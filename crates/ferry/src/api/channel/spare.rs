//! Small byte buffers kept for reuse, per thread: the heap slot of a small
//! loan and the copy behind a view of a message that came through the
//! ring. A loan-and-view round trip then allocates nothing (a fresh `Vec`
//! per message cost `ferry-loan` 1.3× a plain send and receive at 144 B).

use std::cell::Cell;

/// Buffers kept per thread.
const MOST: usize = 8;
/// Largest buffer kept (a message through the ring is smaller than the
/// out-of-line threshold, 64 KiB by default).
const LARGEST: usize = 64 << 10;

/// A thread's kept buffers: `bufs[..len]` hold them, the rest are empty.
/// Cells, not a `RefCell<Vec<_>>`: a take or a give is a load, a move and a
/// store, with no borrow flag to set and clear and no vector to grow.
struct Spare {
    bufs: [Cell<Vec<u8>>; MOST],
    len: Cell<usize>,
}

thread_local! {
    static SPARE: Spare = const {
        Spare {
            bufs: [const { Cell::new(Vec::new()) }; MOST],
            len: Cell::new(0),
        }
    };
}

/// An empty buffer, reused if this thread has one.
#[inline]
pub(super) fn take() -> Vec<u8> {
    SPARE
        .try_with(|spare| {
            let len = spare.len.get().checked_sub(1)?;
            spare.len.set(len);
            spare.bufs.get(len).map(Cell::take)
        })
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// `len` zero bytes in a reused buffer.
#[inline]
pub(super) fn zeroed(len: usize) -> Vec<u8> {
    let mut buf = take();
    buf.resize(len, 0);
    buf
}

/// Keeps `buf` for a later [`take`] on this thread, if it is small and
/// the thread keeps few.
#[inline]
pub(super) fn give(mut buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > LARGEST {
        return;
    }
    buf.clear();
    let _ = SPARE.try_with(|spare| {
        let len = spare.len.get();
        if let Some(slot) = spare.bufs.get(len) {
            slot.set(buf);
            spare.len.set(len + 1);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_cleared_and_large_ones_are_not_kept() {
        let mut buf = zeroed(144);
        buf[0] = 7;
        let ptr = buf.as_ptr();
        give(buf);
        let again = take();
        assert_eq!((again.as_ptr(), again.len()), (ptr, 0));
        give(again);
        assert_eq!(zeroed(3), [0, 0, 0]);
        give(vec![0; LARGEST + 1]);
        assert!(take().capacity() <= LARGEST);
    }
}
