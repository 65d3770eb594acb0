//! Small byte buffers kept for reuse, per thread: the heap slot of a small
//! loan and the copy behind a view of a message that came through the
//! ring. A loan-and-view round trip then allocates nothing (a fresh `Vec`
//! per message cost `ferry-loan` 1.3× a plain send and receive at 144 B).

use std::cell::RefCell;

/// Buffers kept per thread.
const MOST: usize = 8;
/// Largest buffer kept (a message through the ring is smaller than the
/// out-of-line threshold, 64 KiB by default).
const LARGEST: usize = 64 << 10;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer, reused if this thread has one.
pub(super) fn take() -> Vec<u8> {
    SPARE
        .try_with(|spare| spare.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// `len` zero bytes in a reused buffer.
pub(super) fn zeroed(len: usize) -> Vec<u8> {
    let mut buf = take();
    buf.resize(len, 0);
    buf
}

/// Keeps `buf` for a later [`take`] on this thread, if it is small and
/// the thread keeps few.
pub(super) fn give(mut buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > LARGEST {
        return;
    }
    buf.clear();
    let _ = SPARE.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < MOST {
            spare.push(buf);
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
