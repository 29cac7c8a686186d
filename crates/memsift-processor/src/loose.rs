//! A borrowed JSON value for reading model output: strings point into the response text when they can, and
//! objects keep their fields as a list.
//!
//! `serde_json::Value` allocates every key and every string and builds a `BTreeMap` per object; on the bench
//! corpus that alone cost more than the whole per-memory budget. Items have a dozen short fields, so a list
//! scanned linearly is also faster to query than a map.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON value whose strings may borrow from the text it was read from.
#[derive(Clone, Debug, PartialEq)]
pub enum LooseValue<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// Any number, in the narrowest form serde_json reported.
    Number(LooseNumber),
    /// A string.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<LooseValue<'a>>),
    /// An object's fields in document order (a repeated key keeps every copy; lookups take the last, like serde_json).
    Object(Vec<(Cow<'a, str>, LooseValue<'a>)>),
}

/// A JSON number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LooseNumber {
    /// A non-negative integer.
    Unsigned(u64),
    /// A negative integer.
    Signed(i64),
    /// Anything with a fraction or exponent.
    Float(f64),
}

impl LooseNumber {
    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            LooseNumber::Unsigned(value) => value as f64,
            LooseNumber::Signed(value) => value as f64,
            LooseNumber::Float(value) => value,
        }
    }
}

impl<'a> LooseValue<'a> {
    /// Reads JSON text strictly (no repair), borrowing unescaped strings from it.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The field `key` of an object (the last copy when repeated); `None` for other values.
    pub fn get(&self, key: &str) -> Option<&LooseValue<'a>> {
        match self {
            LooseValue::Object(fields) => fields
                .iter()
                .rev()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }

    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            LooseValue::String(text) => Some(text),
            _ => None,
        }
    }

    /// A non-negative integer; floats and booleans are not.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            LooseValue::Number(LooseNumber::Unsigned(value)) => Some(*value),
            _ => None,
        }
    }

    /// Whether this is an object.
    pub fn is_object(&self) -> bool {
        matches!(self, LooseValue::Object(_))
    }

    /// The same value owning all of its strings, detached from the text it was read from.
    pub fn into_owned(self) -> LooseValue<'static> {
        match self {
            LooseValue::Null => LooseValue::Null,
            LooseValue::Bool(flag) => LooseValue::Bool(flag),
            LooseValue::Number(number) => LooseValue::Number(number),
            LooseValue::String(text) => LooseValue::String(Cow::Owned(text.into_owned())),
            LooseValue::Array(list) => LooseValue::Array(list.into_iter().map(LooseValue::into_owned).collect()),
            LooseValue::Object(fields) => LooseValue::Object(
                fields
                    .into_iter()
                    .map(|(key, value)| (Cow::Owned(key.into_owned()), value.into_owned()))
                    .collect(),
            ),
        }
    }

    /// The same value as a `serde_json::Value` (for tests, reports and callers that want the common type).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            LooseValue::Null => serde_json::Value::Null,
            LooseValue::Bool(flag) => serde_json::Value::Bool(*flag),
            LooseValue::Number(LooseNumber::Unsigned(value)) => serde_json::Value::from(*value),
            LooseValue::Number(LooseNumber::Signed(value)) => serde_json::Value::from(*value),
            LooseValue::Number(LooseNumber::Float(value)) => serde_json::Value::from(*value),
            LooseValue::String(text) => serde_json::Value::String(text.to_string()),
            LooseValue::Array(list) => serde_json::Value::Array(list.iter().map(LooseValue::to_json).collect()),
            LooseValue::Object(fields) => serde_json::Value::Object(
                fields
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.to_json()))
                    .collect(),
            ),
        }
    }

    /// A short name of the value's type, for drop details.
    pub fn type_name(&self) -> &'static str {
        match self {
            LooseValue::Null => "null",
            LooseValue::Bool(_) => "a boolean",
            LooseValue::Number(_) => "a number",
            LooseValue::String(_) => "a string",
            LooseValue::Array(_) => "an array",
            LooseValue::Object(_) => "an object",
        }
    }
}

impl<'de> Deserialize<'de> for LooseValue<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LooseVisitor)
    }
}

struct LooseVisitor;

impl<'de> Visitor<'de> for LooseVisitor {
    type Value = LooseValue<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
        Ok(LooseValue::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(LooseValue::Number(match u64::try_from(value) {
            Ok(unsigned) => LooseNumber::Unsigned(unsigned),
            Err(_) => LooseNumber::Signed(value),
        }))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Ok(LooseValue::Number(LooseNumber::Unsigned(value)))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Ok(LooseValue::Number(LooseNumber::Float(value)))
    }

    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(LooseValue::String(Cow::Borrowed(value)))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(LooseValue::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
        Ok(LooseValue::String(Cow::Owned(value)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LooseValue::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LooseValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        LooseValue::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut list = Vec::new();
        while let Some(element) = seq.next_element()? {
            list.push(element);
        }
        Ok(LooseValue::Array(list))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // Items carry about a dozen fields; reserving once avoids four regrowths per object.
        let mut fields = Vec::with_capacity(12);
        while let Some(LooseKey(key)) = map.next_key()? {
            fields.push((key, map.next_value()?));
        }
        Ok(LooseValue::Object(fields))
    }
}

struct LooseKey<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for LooseKey<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = LooseKey<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(LooseKey(Cow::Borrowed(value)))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(LooseKey(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
        Ok(LooseKey(Cow::Owned(value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescaped_strings_and_keys_borrow_from_the_text() {
        let value =
            LooseValue::parse(r#"{"text": "plain", "b": "esc\"aped", "n": -2, "f": 1.5, "k": [true, null]}"#).unwrap();
        assert!(matches!(
            value.get("text"),
            Some(LooseValue::String(Cow::Borrowed("plain")))
        ));
        assert_eq!(value.get("b").and_then(LooseValue::as_str), Some("esc\"aped"));
        assert_eq!(value.get("n"), Some(&LooseValue::Number(LooseNumber::Signed(-2))));
        assert_eq!(value.get("f").and_then(LooseValue::as_u64), None);
        assert_eq!(
            value.get("k"),
            Some(&LooseValue::Array(vec![LooseValue::Bool(true), LooseValue::Null]))
        );
    }

    #[test]
    fn a_repeated_key_reads_as_its_last_copy() {
        let value = LooseValue::parse(r#"{"a": 1, "a": 2}"#).unwrap();
        assert_eq!(value.get("a").and_then(LooseValue::as_u64), Some(2));
    }
}
