//! What the C caller hands in, made safe to use: every dereference of a
//! caller's pointer is here, and nowhere else in the crate.
//!
//! Each function trusts the caller for exactly what the C header promises
//! of that argument (a handle ferry made and that is not closed, a buffer
//! of the length given, a NUL-terminated string), and checks the rest
//! (NULL, lengths past `isize::MAX`, an option struct's size and its
//! unknown bytes). A caller that breaks a promise the type system of C
//! cannot check (a dangling pointer) is undefined behaviour in C already.

#![allow(unsafe_code)] // every block argued below

use std::ffi::{CStr, c_char, c_int, c_void};
use std::marker::PhantomData;
use std::mem::{MaybeUninit, size_of};
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;

use crate::status::{Failure, Result};

/// A handle given to the caller: ferry allocates it, `close` frees it.
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Borrows the handle `ptr` for the call.
///
/// # Safety
///
/// `ptr` is NULL or came from [`into_handle`] for a `T` and has not been
/// given to [`close`]; no other thread closes it during the call (the
/// header says so of every `_close`).
#[inline]
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: non-NULL, it points to a live `T` made by `into_handle` (the
    // caller's promise above), which stays alive for the call.
    unsafe { ptr.as_ref() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// Frees a handle (NULL is a no-op).
///
/// # Safety
///
/// As [`handle`], and the caller never uses `ptr` again.
pub(crate) unsafe fn close<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: `ptr` came from `Box::into_raw` in `into_handle` and is
        // freed once (the caller's promise).
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// Moves the value out of the handle `ptr` (to send it away): the handle
/// is then [`restore`]d or [`free_taken`], and nothing else touches it
/// meanwhile.
///
/// # Safety
///
/// As [`close`] (no other thread uses `ptr` during the call), and the
/// caller then calls exactly one of [`restore`] or [`free_taken`] on it.
pub(crate) unsafe fn take<T>(ptr: *mut T) -> T {
    // SAFETY: a live `T` made by `into_handle` that nothing else uses
    // (the caller's promise); the bytes left behind are not used as a `T`
    // until `restore` writes one back or `free_taken` frees them as
    // uninitialised memory.
    unsafe { ptr.read() }
}

/// Puts a value back into a handle [`take`] emptied.
///
/// # Safety
///
/// `ptr` was emptied by [`take`] and not restored or freed since.
pub(crate) unsafe fn restore<T>(ptr: *mut T, value: T) {
    // SAFETY: the allocation of a `T` that `take` emptied: writing one
    // back makes it a live handle again, with nothing overwritten that
    // needed dropping.
    unsafe { ptr.write(value) }
}

/// Frees a handle [`take`] emptied, without dropping its (moved) value.
///
/// # Safety
///
/// As [`restore`]; the caller never uses `ptr` again.
pub(crate) unsafe fn free_taken<T>(ptr: *mut T) {
    // SAFETY: the allocation came from `Box::new` of a `T` in
    // `into_handle`; as `MaybeUninit<T>` (same layout) it is freed without
    // dropping the value `take` moved out.
    drop(unsafe { Box::from_raw(ptr.cast::<MaybeUninit<T>>()) });
}

/// Checks a buffer's length: a slice may not be longer than `isize::MAX`.
#[inline]
fn length(len: usize, what: &str) -> Result<()> {
    match isize::try_from(len) {
        Ok(_) => Ok(()),
        Err(_) => Err(Failure::invalid(format!(
            "{what}'s length {len} is impossible"
        ))),
    }
}

/// The caller's `len` bytes at `ptr` (NULL only when `len` is 0).
///
/// # Safety
///
/// A non-NULL `ptr` points to `len` readable bytes that nothing writes
/// during the call.
#[inline]
pub(crate) unsafe fn bytes<'a>(ptr: *const c_void, len: usize, what: &str) -> Result<&'a [u8]> {
    // SAFETY: as this function's promise.
    unsafe { slice(ptr.cast::<u8>(), len, what) }
}

/// The caller's array of `len` values at `ptr` (NULL only when `len` is
/// 0).
///
/// # Safety
///
/// A non-NULL `ptr` points to `len` initialised, aligned `T`s that
/// nothing writes during the call.
#[inline]
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    let bytes = len.checked_mul(size_of::<T>());
    length(bytes.unwrap_or(usize::MAX), what)?;
    match (ptr.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(Failure::invalid(format!("{what} is NULL"))),
        // SAFETY: `len` readable `T`s at a non-NULL, aligned `ptr`, not
        // written during the call (the caller's promise); their size fits
        // `isize` (checked above).
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(ptr, len) }),
    }
}

/// The caller's descriptors, borrowed for the call.
///
/// # Safety
///
/// Each is open for the call (the header asks it of every descriptor
/// passed in); a negative one is refused here.
pub(crate) unsafe fn fds<'a>(fds: &'a [c_int]) -> Result<Vec<BorrowedFd<'a>>> {
    fds.iter()
        .map(|&fd| match fd {
            ..0 => Err(Failure::invalid(format!("descriptor {fd} is negative"))),
            // SAFETY: open for the call (the caller's promise), and not
            // closed by ferry: only duplicated.
            _ => Ok(unsafe { BorrowedFd::borrow_raw(fd) }),
        })
        .collect()
}

/// The caller's 32-byte token at `ptr` (NULL: none).
///
/// # Safety
///
/// A non-NULL `ptr` points to 32 readable bytes.
pub(crate) unsafe fn token(ptr: *const u8) -> Result<Option<[u8; 32]>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: 32 readable bytes at a non-NULL `ptr` (the caller's
    // promise); `u8` needs no alignment.
    Ok(Some(unsafe { ptr.cast::<[u8; 32]>().read() }))
}

/// The caller's NUL-terminated string, as UTF-8.
///
/// # Safety
///
/// A non-NULL `ptr` points to a NUL-terminated string that nothing writes
/// during the call.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: a NUL-terminated string at a non-NULL `ptr`, unchanged during
    // the call (the caller's promise).
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// The caller's buffer of `len` bytes at `ptr`, to write into (NULL only
/// when `len` is 0).
///
/// # Safety
///
/// A non-NULL `ptr` points to `len` writable bytes that nothing else reads
/// or writes during the call.
#[inline]
pub(crate) unsafe fn bytes_mut<'a>(
    ptr: *mut c_void,
    len: usize,
    what: &str,
) -> Result<&'a mut [u8]> {
    length(len, what)?;
    match (ptr.is_null(), len) {
        (_, 0) => Ok(&mut []),
        (true, _) => Err(Failure::invalid(format!("{what} is NULL"))),
        // SAFETY: `len` writable bytes at a non-NULL `ptr`, used by nothing
        // else during the call (the caller's promise); `len` fits `isize`.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) }),
    }
}

/// Where a call writes a result for the caller (an out parameter),
/// checked non-NULL before the call does anything.
pub(crate) struct Out<'a, T> {
    ptr: NonNull<T>,
    _life: PhantomData<&'a mut T>,
}

/// The out parameter `ptr`.
///
/// # Safety
///
/// A non-NULL `ptr` is valid to write one `T` to (it need not hold one)
/// for the call, and nothing else uses it meanwhile.
#[inline]
pub(crate) unsafe fn out<'a, T>(ptr: *mut T, what: &str) -> Result<Out<'a, T>> {
    let ptr = NonNull::new(ptr).ok_or_else(|| Failure::invalid(format!("{what} is NULL")))?;
    Ok(Out {
        ptr,
        _life: PhantomData,
    })
}

impl<T: Copy> Out<'_, T> {
    /// Writes the result (over whatever the caller's memory held: `T` is
    /// `Copy`, so nothing is dropped).
    #[inline]
    pub(crate) fn set(&mut self, value: T) {
        // SAFETY: non-NULL and valid to write a `T` to for the call (the
        // promise `out` was given); a `Copy` value has no drop to skip.
        unsafe { self.ptr.as_ptr().write(value) }
    }
}

/// The most strings an argument vector may hold (a bound on a walk over a
/// vector that lost its NULL).
const MOST_ARGS: usize = 1 << 16;

/// The caller's NULL-terminated vector of strings (`argv`).
///
/// # Safety
///
/// A non-NULL `ptr` points to an array of string pointers ended by NULL,
/// each a string as [`c_str`] needs, unchanged during the call.
pub(crate) unsafe fn c_strings<'a>(ptr: *const *const c_char, what: &str) -> Result<Vec<&'a CStr>> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    let mut strings = Vec::new();
    for i in 0..MOST_ARGS {
        // SAFETY: the array is NULL-terminated (the caller's promise) and
        // no element past the NULL is read: the walk stops there.
        let each = unsafe { ptr.add(i).read() };
        if each.is_null() {
            return Ok(strings);
        }
        // SAFETY: each element before the NULL is such a string.
        strings.push(unsafe { CStr::from_ptr(each) });
    }
    Err(Failure::invalid(format!(
        "{what} has more than {MOST_ARGS} strings (is its NULL missing?)"
    )))
}

/// An option struct of the ABI: `#[repr(C)]`, its first field `size_t
/// size`, every other field an integer whose 0 means "the default".
///
/// # Safety
///
/// Every bit pattern of the struct's size is a valid value (integers
/// only, no padding the struct's users read), and it begins with a
/// `usize`.
pub(crate) unsafe trait Options: Copy + Default {}

// SAFETY: `#[repr(C)]`, three `usize`s (every bit pattern valid, no
// padding), the first being `size`.
unsafe impl Options for crate::options::ferry_pipe_options {}

impl<T: Copy> Out<'_, T> {
    /// Writes the result unless the caller passed NULL (an optional out
    /// parameter): see [`out`].
    pub(crate) fn set_if(slot: &mut Option<Self>, value: T) {
        if let Some(slot) = slot {
            slot.set(value);
        }
    }
}

/// An optional out parameter: `None` for NULL.
///
/// # Safety
///
/// As [`out`].
pub(crate) unsafe fn out_opt<'a, T>(ptr: *mut T) -> Option<Out<'a, T>> {
    // SAFETY: as this function's promise (NULL is handled first).
    (!ptr.is_null())
        .then(|| unsafe { out(ptr, "") }.ok())
        .flatten()
}

/// The caller's options at `ptr` (NULL: every default), under the Linux
/// extensible-struct rule: the struct's `size` says how much the caller
/// knows; a shorter struct is extended with zeroes (defaults), a longer
/// one is refused if any byte past what ferry knows is not zero.
///
/// # Safety
///
/// A non-NULL `ptr` points to at least `size` readable bytes (the value
/// of its first field), unchanged during the call.
pub(crate) unsafe fn options<T: Options>(ptr: *const T, what: &str) -> Result<T> {
    if ptr.is_null() {
        return Ok(T::default());
    }
    // SAFETY: every options struct begins with a `size_t` (trait
    // `Options`), readable at a non-NULL `ptr` (the caller's promise);
    // read unaligned, as C may have packed it anywhere.
    let size = unsafe { ptr.cast::<usize>().read_unaligned() };
    let known = size_of::<T>();
    if size < size_of::<usize>() {
        return Err(Failure::invalid(format!(
            "{what}.size is {size}: set it to sizeof({what})"
        )));
    }
    length(size, what)?;
    let mut value = MaybeUninit::<T>::zeroed();
    // SAFETY: `min(size, known)` bytes are readable at `ptr` (the caller's
    // promise of `size` bytes) and writable in `value` (`known` bytes);
    // the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            ptr.cast::<u8>(),
            value.as_mut_ptr().cast::<u8>(),
            size.min(known),
        );
    }
    if size > known {
        // SAFETY: bytes `known..size` of the caller's struct are readable
        // (its promise of `size` bytes); `size` fits `isize`.
        let rest = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>().add(known), size - known) };
        if let Some(at) = rest.iter().position(|&b| b != 0) {
            return Err(Failure::invalid(format!(
                "{what} sets byte {} past the {known} this ferry knows: built against a newer header?",
                known + at
            )));
        }
    }
    // SAFETY: every byte of `value` is initialised (zeroed, then partly
    // copied), and every bit pattern is a valid `T` (trait `Options`).
    Ok(unsafe { value.assume_init() })
}
