//! The decoder: serde's `Deserializer` over one received message, checking
//! every length, count, tag and depth before it acts on it (see
//! `codec/mod.rs` for what it refuses).

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use super::{DecodeError, EMPTY_ELEMENTS, MAX_DEPTH, Reason};

/// The deserializer over one message.
#[derive(Debug)]
pub(crate) struct Decoder<'de> {
    input: &'de [u8],
    pos: usize,
    depth: usize,
    /// Sequence elements and map entries still allowed.
    elements_left: usize,
    /// The input is shared memory its sender can still write: strings are
    /// copied before they are checked.
    pub(crate) in_place: bool,
}

impl<'de> Decoder<'de> {
    pub(crate) fn new(input: &'de [u8]) -> Self {
        Self {
            input,
            pos: 0,
            depth: 0,
            elements_left: input.len().saturating_add(EMPTY_ELEMENTS),
            in_place: false,
        }
    }

    /// Where decoding has got to.
    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    /// Refuses bytes left over after the value.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        match self.left() {
            0 => Ok(()),
            n => Err(self.error(Reason::TrailingBytes(n))),
        }
    }

    fn error(&self, reason: Reason) -> DecodeError {
        DecodeError::new(self.pos, reason)
    }

    #[inline]
    fn left(&self) -> usize {
        self.input.len() - self.pos
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'de [u8], DecodeError> {
        match self.input.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(bytes) => {
                self.pos += n;
                Ok(bytes)
            }
            None => Err(self.error(Reason::Truncated)),
        }
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, DecodeError> {
        match self.input.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.error(Reason::Truncated)),
        }
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// A LEB128 varint of at most `bits` significant bits.
    #[inline]
    fn varint(&mut self, bits: u32) -> Result<u128, DecodeError> {
        let mut value: u128 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            let low = u128::from(b & 0x7f);
            // The bits this byte adds must fit in `bits`.
            if shift >= bits || (shift + 7 > bits && low >> (bits - shift) != 0) {
                return Err(self.error(Reason::BadVarint));
            }
            value |= low << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    #[inline]
    fn varint64(&mut self, bits: u32) -> Result<u64, DecodeError> {
        // Fast path: one byte.
        if let Some(&b) = self.input.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        // At most 64 bits were asked for, so the value fits.
        self.varint(bits).map(|v| v as u64)
    }

    #[inline]
    fn signed(&mut self, bits: u32) -> Result<i64, DecodeError> {
        let v = self.varint64(bits)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// A length that must fit in the bytes left (a string or byte buffer).
    fn byte_len(&mut self) -> Result<usize, DecodeError> {
        let claimed = self.varint64(64)?;
        match usize::try_from(claimed) {
            Ok(len) if len <= self.left() => Ok(len),
            _ => Err(self.error(Reason::LengthPastEnd {
                claimed,
                left: self.left(),
            })),
        }
    }

    /// A sequence or map count, charged against the message's allowance
    /// at once (a message that holds fewer elements fails to decode).
    fn count(&mut self) -> Result<usize, DecodeError> {
        let claimed = self.varint64(64)?;
        match usize::try_from(claimed) {
            Ok(count) if count <= self.elements_left => {
                self.elements_left -= count;
                Ok(count)
            }
            _ => Err(self.error(Reason::TooManyElements)),
        }
    }

    #[inline]
    fn enter(&mut self) -> Result<(), DecodeError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(Reason::TooDeep));
        }
        self.depth += 1;
        Ok(())
    }

    #[inline]
    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Runs `f` one level deeper.
    #[inline]
    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        self.enter()?;
        let value = f(self)?;
        self.leave();
        Ok(value)
    }

    fn str(&mut self) -> Result<&'de str, DecodeError> {
        let len = self.byte_len()?;
        let start = self.pos;
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes).map_err(|_| DecodeError::new(start, Reason::BadUtf8))
    }

    fn variant_index(&mut self) -> Result<u32, DecodeError> {
        Ok(self.varint64(32)? as u32)
    }
}

macro_rules! unsigned {
    ($method:ident, $visit:ident, $ty:ty, $bits:expr) => {
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            // The varint was checked to fit in the type's bits.
            visitor.$visit(self.varint64($bits)? as $ty)
        }
    };
}

macro_rules! signed {
    ($method:ident, $visit:ident, $ty:ty, $bits:expr) => {
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            // Zigzag of a value of `$bits` bits fits back in the type.
            visitor.$visit(self.signed($bits)? as $ty)
        }
    };
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, DecodeError> {
        Err(self.error(Reason::NotSelfDescribing))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.byte()? {
            0 => visitor.visit_bool(false),
            1 => visitor.visit_bool(true),
            b => Err(DecodeError::new(self.pos - 1, Reason::BadBool(b))),
        }
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_i8(self.byte()? as i8)
    }
    signed!(deserialize_i16, visit_i16, i16, 16);
    signed!(deserialize_i32, visit_i32, i32, 32);
    signed!(deserialize_i64, visit_i64, i64, 64);

    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let v = self.varint(128)?;
        visitor.visit_i128(((v >> 1) as i128) ^ -((v & 1) as i128))
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_u8(self.byte()?)
    }
    unsigned!(deserialize_u16, visit_u16, u16, 16);
    unsigned!(deserialize_u32, visit_u32, u32, 32);
    unsigned!(deserialize_u64, visit_u64, u64, 64);

    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_u128(self.varint(128)?)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_f32(f32::from_le_bytes(self.array()?))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_f64(f64::from_le_bytes(self.array()?))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let start = self.pos;
        let v = self.varint64(32)? as u32;
        match char::from_u32(v) {
            Some(c) => visitor.visit_char(c),
            None => Err(DecodeError::new(start, Reason::BadChar(v))),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.in_place {
            let len = self.byte_len()?;
            let start = self.pos;
            let copy = self.take(len)?.to_vec();
            let text =
                String::from_utf8(copy).map_err(|_| DecodeError::new(start, Reason::BadUtf8))?;
            return visitor.visit_string(text);
        }
        visitor.visit_borrowed_str(self.str()?)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let len = self.byte_len()?;
        visitor.visit_borrowed_bytes(self.take(len)?)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.byte()? {
            0 => visitor.visit_none(),
            1 => self.nested(|d| visitor.visit_some(d)),
            b => Err(DecodeError::new(self.pos - 1, Reason::BadOption(b))),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.nested(|d| visitor.visit_newtype_struct(d))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let count = self.count()?;
        self.nested(|d| visit_counted(d, count, |access| visitor.visit_seq(access)))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.nested(|d| visitor.visit_seq(Fixed { de: d, left: len }))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let count = self.count()?;
        self.nested(|d| visit_counted(d, count, |access| visitor.visit_map(access)))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_tuple(fields.len(), visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.nested(|d| visitor.visit_enum(d))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        // Only enum variants reach here (struct fields are positional).
        visitor.visit_u32(self.variant_index()?)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, DecodeError> {
        Err(self.error(Reason::NotSelfDescribing))
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}

/// Runs a visitor over `count` elements, then checks it read them all.
fn visit_counted<'de, T>(
    de: &mut Decoder<'de>,
    count: usize,
    visit: impl FnOnce(&mut Counted<'_, 'de>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let mut access = Counted { de, left: count };
    let value = visit(&mut access)?;
    match access.left {
        0 => Ok(value),
        n => Err(access
            .de
            .error(Reason::Custom(format!("{n} elements were not read")))),
    }
}

/// A sequence or map of a count read from the message.
struct Counted<'a, 'de> {
    de: &'a mut Decoder<'de>,
    left: usize,
}

impl Counted<'_, '_> {
    /// Takes one of the elements (already charged by `count`).
    #[inline]
    fn charge(&mut self) -> Result<bool, DecodeError> {
        if self.left == 0 {
            return Ok(false);
        }
        self.left -= 1;
        Ok(true)
    }

    fn hint(&self) -> Option<usize> {
        Some(self.left.min(self.de.left()))
    }
}

impl<'de> de::SeqAccess<'de> for &mut Counted<'_, 'de> {
    type Error = DecodeError;
    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        match self.charge()? {
            true => seed.deserialize(&mut *self.de).map(Some),
            false => Ok(None),
        }
    }
    fn size_hint(&self) -> Option<usize> {
        self.hint()
    }
}

impl<'de> de::MapAccess<'de> for &mut Counted<'_, 'de> {
    type Error = DecodeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        match self.charge()? {
            true => seed.deserialize(&mut *self.de).map(Some),
            false => Ok(None),
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        seed.deserialize(&mut *self.de)
    }
    fn size_hint(&self) -> Option<usize> {
        self.hint()
    }
}

/// A tuple or struct: a length fixed by the type, not the message.
struct Fixed<'a, 'de> {
    de: &'a mut Decoder<'de>,
    left: usize,
}

impl<'de> de::SeqAccess<'de> for Fixed<'_, 'de> {
    type Error = DecodeError;
    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

impl<'de> de::EnumAccess<'de> for &mut Decoder<'de> {
    type Error = DecodeError;
    type Variant = Self;
    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), DecodeError> {
        let index = self.variant_index()?;
        let value = seed.deserialize(index.into_deserializer())?;
        Ok((value, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Decoder<'de> {
    type Error = DecodeError;
    fn unit_variant(self) -> Result<(), DecodeError> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        seed.deserialize(self)
    }
    fn tuple_variant<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_tuple(self, len, visitor)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_tuple(self, fields.len(), visitor)
    }
}
