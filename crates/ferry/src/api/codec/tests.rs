//! The format's round trips, its refusals, and a property test over a
//! rich type.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Empty,
    Circle(f64),
    Rect { w: u32, h: u32 },
    Poly(Vec<(i32, i32)>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Rich {
    id: u64,
    name: String,
    tags: Vec<String>,
    map: BTreeMap<String, i64>,
    shape: Shape,
    nested: Option<Box<Rich>>,
    #[serde(with = "serde_bytes")]
    data: Vec<u8>,
    plain: Vec<u8>,
    floats: (f32, f64),
    ch: char,
    flag: bool,
    small: i8,
    big: i128,
    huge: u128,
    unit: (),
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Empty),
        any::<f64>()
            .prop_filter("NaN is not equal to itself", |f| !f.is_nan())
            .prop_map(Shape::Circle),
        (any::<u32>(), any::<u32>()).prop_map(|(w, h)| Shape::Rect { w, h }),
        prop::collection::vec(any::<(i32, i32)>(), 0..8).prop_map(Shape::Poly),
    ]
}

fn leaf() -> impl Strategy<Value = Rich> {
    (
        (
            any::<u64>(),
            ".{0,12}",
            prop::collection::vec(".{0,6}", 0..4),
        ),
        prop::collection::btree_map(".{0,6}", any::<i64>(), 0..4),
        shape(),
        (
            prop::collection::vec(any::<u8>(), 0..64),
            prop::collection::vec(any::<u8>(), 0..16),
        ),
        (
            any::<f32>().prop_filter("not NaN", |f| !f.is_nan()),
            any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
        ),
        (any::<char>(), any::<bool>(), any::<i8>()),
        (any::<i128>(), any::<u128>()),
    )
        .prop_map(
            |(
                (id, name, tags),
                map,
                shape,
                (data, plain),
                floats,
                (ch, flag, small),
                (big, huge),
            )| {
                Rich {
                    id,
                    name,
                    tags,
                    map,
                    shape,
                    nested: None,
                    data,
                    plain,
                    floats,
                    ch,
                    flag,
                    small,
                    big,
                    huge,
                    unit: (),
                }
            },
        )
}

fn rich() -> impl Strategy<Value = Rich> {
    leaf().prop_recursive(4, 16, 1, |inner| {
        (leaf(), inner).prop_map(|(mut outer, inner)| {
            outer.nested = Some(Box::new(inner));
            outer
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 512 }))]

    /// Any value encodes, decodes to itself, and its counted length is
    /// the length written.
    #[test]
    fn rich_values_round_trip(value in rich()) {
        let bytes = encode(&value).unwrap();
        prop_assert_eq!(encoded_len(&value).unwrap(), bytes.len());
        let mut exact = vec![0; bytes.len()];
        encode_exact(&value, &mut exact).unwrap();
        prop_assert_eq!(&exact, &bytes);
        let back: Rich = decode(&bytes).unwrap();
        prop_assert_eq!(back, value);
    }

    /// Every strict prefix of an encoding is refused, never panics.
    #[test]
    fn truncations_are_refused(value in rich()) {
        let bytes = encode(&value).unwrap();
        for cut in 0..bytes.len() {
            prop_assert!(decode::<Rich>(&bytes[..cut]).is_err());
        }
    }

    /// Random bytes never panic the decoder.
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode::<Rich>(&bytes);
        let _ = decode::<Vec<Shape>>(&bytes);
        let _ = decode::<BTreeMap<String, Vec<u64>>>(&bytes);
    }

    /// Integers at every width survive, varints included.
    #[test]
    fn integers_round_trip(a in any::<i16>(), b in any::<u16>(), c in any::<i32>(), d in any::<u64>(), e in any::<i64>()) {
        let bytes = encode(&(a, b, c, d, e)).unwrap();
        prop_assert_eq!(decode::<(i16, u16, i32, u64, i64)>(&bytes).unwrap(), (a, b, c, d, e));
    }
}

fn reason<T: serde::de::DeserializeOwned + std::fmt::Debug>(bytes: &[u8]) -> Reason {
    let e = decode::<T>(bytes).unwrap_err();
    assert_eq!(e.type_name(), std::any::type_name::<T>());
    e.reason().clone()
}

#[test]
fn lengths_past_the_end_are_refused_before_allocating() {
    // A byte string claiming u64::MAX bytes.
    let mut bytes = vec![0xff; 9];
    bytes.push(0x01);
    assert!(matches!(
        reason::<serde_bytes::ByteBuf>(&bytes),
        Reason::LengthPastEnd { .. }
    ));
    assert!(matches!(
        reason::<String>(&[0x80, 0x80, 0x80, 0x80, 0x08]),
        Reason::LengthPastEnd { .. }
    ));
    // A sequence claiming 2^31 elements in five bytes.
    assert!(matches!(
        reason::<Vec<u64>>(&[0x80, 0x80, 0x80, 0x80, 0x08]),
        Reason::TooManyElements
    ));
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    #[derive(Debug, Serialize, Deserialize)]
    struct Node(Option<Box<Node>>);
    // A megabyte of `Some`: a million levels.
    let bytes = vec![1u8; 1 << 20];
    assert_eq!(reason::<Node>(&bytes), Reason::TooDeep);
    // Just inside the limit decodes; the encoder refuses one level past.
    let mut node = Node(None);
    for _ in 0..MAX_DEPTH / 2 - 1 {
        node = Node(Some(Box::new(node)));
    }
    let ok = encode(&node).unwrap();
    decode::<Node>(&ok).unwrap();
    let mut deep = Node(None);
    for _ in 0..MAX_DEPTH {
        deep = Node(Some(Box::new(deep)));
    }
    assert_eq!(encode(&deep).unwrap_err(), EncodeError::TooDeep);
}

#[test]
fn empty_elements_are_bounded() {
    // 2^40 units in six bytes.
    let mut bytes = Vec::new();
    let mut encoder = Encoder::new(&mut bytes);
    serde::Serializer::serialize_u64(&mut encoder, 1 << 40).unwrap();
    assert_eq!(reason::<Vec<()>>(&bytes), Reason::TooManyElements);
    let units = vec![(); EMPTY_ELEMENTS + 10];
    assert_eq!(encode(&units).unwrap_err(), EncodeError::TooManyElements);
    let fine = vec![(); EMPTY_ELEMENTS];
    assert_eq!(
        decode::<Vec<()>>(&encode(&fine).unwrap()).unwrap().len(),
        EMPTY_ELEMENTS
    );
}

#[test]
fn other_malformations_name_their_reason() {
    assert_eq!(reason::<bool>(&[2]), Reason::BadBool(2));
    assert_eq!(reason::<Option<u8>>(&[7]), Reason::BadOption(7));
    assert_eq!(reason::<String>(&[2, 0xc3, 0x28]), Reason::BadUtf8);
    assert_eq!(reason::<char>(&[0x80, 0xb0, 0x03]), Reason::BadChar(0xd800));
    assert_eq!(reason::<u8>(&[1, 2]), Reason::TrailingBytes(1));
    assert_eq!(reason::<u16>(&[0xff, 0xff, 0x04]), Reason::BadVarint);
    assert_eq!(reason::<u32>(&[0xff; 11]), Reason::BadVarint);
    assert_eq!(reason::<u64>(&[]), Reason::Truncated);
    assert!(matches!(reason::<Shape>(&[9]), Reason::Custom(_)));
    #[derive(Debug, Deserialize)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum Untagged {
        A(u8),
    }
    assert_eq!(reason::<Untagged>(&[1]), Reason::NotSelfDescribing);
    let e = decode::<bool>(&[2]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a message did not decode as `bool` (at byte 0): a bool is 2, not 0 or 1"
    );
}

#[test]
fn strings_in_place_are_copied_then_checked() {
    let bytes = encode(&"héllo").unwrap();
    assert_eq!(decode_message::<String>(&bytes, true).unwrap(), "héllo");
    assert_eq!(
        decode_message::<String>(&[2, 0xc3, 0x28], true)
            .unwrap_err()
            .reason(),
        &Reason::BadUtf8
    );
}

#[test]
fn a_size_that_changes_between_passes_is_caught() {
    let mut short = [0u8; 3];
    assert_eq!(
        encode_exact(&"four", &mut short).unwrap_err(),
        EncodeError::SizeChanged
    );
    let mut long = [0u8; 9];
    assert_eq!(
        encode_exact(&"four", &mut long).unwrap_err(),
        EncodeError::SizeChanged
    );
}
