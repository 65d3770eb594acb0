//! Shared-memory regions: the memory a pipe's two rings live in.
//!
//! A region is one sealed memory object, mapped by both processes. Inside
//! it everything is named by offsets from the region's start, never by
//! pointers, and everything read from it is checked (see [`region`]).

pub mod region;

pub use region::{Region, RingView};
