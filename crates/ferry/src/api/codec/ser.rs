//! The encoder: serde's `Serializer` writing the format of `codec/mod.rs`
//! into a `Vec`, an exact-size slice (a loaned block), or nowhere (to
//! count the length first).

use serde::ser::{self, Serialize};

use super::{EncodeError, MAX_DEPTH};

/// Where encoded bytes go.
pub(crate) trait Out {
    fn put(&mut self, bytes: &[u8]);
    fn put_byte(&mut self, byte: u8);
    /// At least `n` more bytes are coming (a hint).
    fn reserve(&mut self, _n: usize) {}
}

impl Out for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    #[inline]
    fn put_byte(&mut self, byte: u8) {
        self.push(byte);
    }
}

impl Out for &mut Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    #[inline]
    fn put_byte(&mut self, byte: u8) {
        self.push(byte);
    }
    #[inline]
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }
}

/// Counts bytes without writing them.
#[derive(Debug, Default)]
pub(crate) struct Counter(pub(crate) usize);

impl Out for Counter {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.0 = self.0.saturating_add(bytes.len());
    }
    #[inline]
    fn put_byte(&mut self, _: u8) {
        self.0 = self.0.saturating_add(1);
    }
}

/// Writes into a slice sized by a counting pass; a value that writes more
/// (or less) than it counted is caught, never written past the end.
#[derive(Debug)]
pub(crate) struct SliceOut<'a> {
    rest: &'a mut [u8],
    overflowed: bool,
}

impl<'a> SliceOut<'a> {
    pub(crate) fn new(out: &'a mut [u8]) -> Self {
        Self {
            rest: out,
            overflowed: false,
        }
    }

    /// Whether exactly the whole slice was written.
    pub(crate) fn is_full(&self) -> bool {
        self.rest.is_empty() && !self.overflowed
    }
}

impl Out for SliceOut<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if bytes.len() > self.rest.len() {
            self.overflowed = true;
            return;
        }
        let (head, tail) = std::mem::take(&mut self.rest).split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.rest = tail;
    }
    #[inline]
    fn put_byte(&mut self, byte: u8) {
        self.put(&[byte]);
    }
}

/// The serializer.
#[derive(Debug)]
pub(crate) struct Encoder<O> {
    out: O,
    depth: usize,
    /// Sequence elements and map entries written.
    elements: usize,
}

impl<O: Out> Encoder<O> {
    pub(crate) fn new(out: O) -> Self {
        Self {
            out,
            depth: 0,
            elements: 0,
        }
    }

    /// The count of sequence elements and map entries written.
    pub(crate) fn finish(&self) -> usize {
        self.elements
    }

    pub(crate) fn into_out(self) -> O {
        self.out
    }

    #[inline]
    fn varint(&mut self, mut v: u128) {
        let mut buf = [0u8; 19];
        let mut n = 0;
        while v >= 0x80 {
            buf[n] = (v as u8) | 0x80;
            v >>= 7;
            n += 1;
        }
        buf[n] = v as u8;
        self.out.put(&buf[..=n]);
    }

    #[inline]
    fn varint64(&mut self, v: u64) {
        // Most varints are one byte: lengths, indices, small numbers.
        match u8::try_from(v) {
            Ok(byte) if byte < 0x80 => self.out.put_byte(byte),
            _ => self.varint(u128::from(v)),
        }
    }

    #[inline]
    fn enter(&mut self) -> Result<(), EncodeError> {
        self.depth += 1;
        match self.depth <= MAX_DEPTH {
            true => Ok(()),
            false => Err(EncodeError::TooDeep),
        }
    }

    #[inline]
    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn len(&mut self, len: Option<usize>) -> Result<(), EncodeError> {
        let len = len.ok_or(EncodeError::UnknownLength)?;
        self.varint64(len as u64);
        // Each element takes at least a byte, mostly.
        self.out.reserve(len);
        Ok(())
    }
}

#[inline]
fn zigzag(v: i128) -> u128 {
    ((v << 1) ^ (v >> 127)) as u128
}

#[inline]
fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

impl<O: Out> ser::Serializer for &mut Encoder<O> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, v: bool) -> Result<(), EncodeError> {
        self.out.put_byte(u8::from(v));
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), EncodeError> {
        self.out.put_byte(v as u8);
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), EncodeError> {
        self.varint64(zigzag64(i64::from(v)));
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), EncodeError> {
        self.varint64(zigzag64(i64::from(v)));
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), EncodeError> {
        self.varint64(zigzag64(v));
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), EncodeError> {
        self.varint(zigzag(v));
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), EncodeError> {
        self.out.put_byte(v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), EncodeError> {
        self.varint64(u64::from(v));
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), EncodeError> {
        self.varint64(u64::from(v));
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), EncodeError> {
        self.varint64(v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), EncodeError> {
        self.varint(v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), EncodeError> {
        self.out.put(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), EncodeError> {
        self.out.put(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), EncodeError> {
        self.varint64(u64::from(v));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), EncodeError> {
        self.serialize_bytes(v.as_bytes())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), EncodeError> {
        self.varint64(v.len() as u64);
        self.out.put(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), EncodeError> {
        self.out.put_byte(0);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), EncodeError> {
        self.out.put_byte(1);
        self.enter()?;
        value.serialize(&mut *self)?;
        self.leave();
        Ok(())
    }
    fn serialize_unit(self) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
    ) -> Result<(), EncodeError> {
        self.varint64(u64::from(index));
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        self.enter()?;
        value.serialize(&mut *self)?;
        self.leave();
        Ok(())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        self.varint64(u64::from(index));
        self.enter()?;
        value.serialize(&mut *self)?;
        self.leave();
        Ok(())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self, EncodeError> {
        self.len(len)?;
        self.enter()?;
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, EncodeError> {
        self.enter()?;
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, EncodeError> {
        self.enter()?;
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, EncodeError> {
        self.varint64(u64::from(index));
        self.enter()?;
        Ok(self)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self, EncodeError> {
        self.len(len)?;
        self.enter()?;
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, EncodeError> {
        self.enter()?;
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, EncodeError> {
        self.varint64(u64::from(index));
        self.enter()?;
        Ok(self)
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

impl<O: Out> ser::SerializeSeq for &mut Encoder<O> {
    type Ok = ();
    type Error = EncodeError;
    #[inline]
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        self.elements += 1;
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.leave();
        Ok(())
    }
}

/// Fixed-size compounds: the fields, in order, no count.
macro_rules! fields {
    ($trait:ident, $method:ident $(, $key:ty)?) => {
        impl<O: Out> ser::$trait for &mut Encoder<O> {
            type Ok = ();
            type Error = EncodeError;
            #[inline]
            fn $method<T: Serialize + ?Sized>(
                &mut self,
                $(_: $key,)?
                value: &T,
            ) -> Result<(), EncodeError> {
                value.serialize(&mut **self)
            }
            fn end(self) -> Result<(), EncodeError> {
                self.leave();
                Ok(())
            }
        }
    };
}

fields!(SerializeTuple, serialize_element);
fields!(SerializeTupleStruct, serialize_field);
fields!(SerializeTupleVariant, serialize_field);
fields!(SerializeStruct, serialize_field, &'static str);
fields!(SerializeStructVariant, serialize_field, &'static str);

impl<O: Out> ser::SerializeMap for &mut Encoder<O> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), EncodeError> {
        self.elements += 1;
        key.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.leave();
        Ok(())
    }
}
