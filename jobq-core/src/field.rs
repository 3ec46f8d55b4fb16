//! What a job's payload looks like from outside the program: its fields'
//! names and types, and which of them may be left out. Published by
//! workers (see `jobq_runtime::Jobq::job_kinds`) so that a tool enqueueing
//! a job by name and JSON (`jobq enqueue`) can check the payload before it
//! is stored, rather than the worker failing the job when it decodes it.

use std::fmt;

use serde::de::{self, DeserializeOwned, Visitor};

/// One field of a job's payload struct, as `#[job]` generated it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// The field's name, as stored in the payload's JSON.
    pub name: &'static str,
    /// Its Rust type, as written (`u64`, `Option<String>`).
    pub type_name: &'static str,
    /// Whether the payload must have it: `false` for a type that decodes
    /// from a missing field (an `Option`), as serde decodes the struct.
    pub required: bool,
}

impl FieldSpec {
    /// The field `name` of type `T`, `type_name` as written in the job fn.
    pub fn of<T: DeserializeOwned>(name: &'static str, type_name: &'static str) -> Self {
        Self {
            name,
            type_name,
            required: !may_be_missing::<T>(),
        }
    }
}

/// Whether a struct field of type `T` may be missing from its JSON: what
/// serde's derive does with a missing field, without its private API (it
/// decodes the field's type from a deserializer that has no value and
/// answers only `deserialize_option`, with `None`).
pub fn may_be_missing<T: DeserializeOwned>() -> bool {
    T::deserialize(Missing).is_ok()
}

/// The deserializer of a field that is not there.
struct Missing;

/// Why [`Missing`] gave no value.
#[derive(Debug)]
struct MissingError;

impl fmt::Display for MissingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("missing field")
    }
}

impl std::error::Error for MissingError {}

impl de::Error for MissingError {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Self
    }
}

impl<'de> de::Deserializer<'de> for Missing {
    type Error = MissingError;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, MissingError> {
        Err(MissingError)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, MissingError> {
        visitor.visit_none()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::may_be_missing;

    #[test]
    fn only_an_option_may_be_missing() {
        assert!(may_be_missing::<Option<u64>>());
        assert!(may_be_missing::<Option<String>>());
        assert!(!may_be_missing::<u64>());
        assert!(!may_be_missing::<String>());
        assert!(!may_be_missing::<()>());
        // Accepts `null`, yet a missing field is an error for serde too.
        assert!(!may_be_missing::<serde_json::Value>());
        assert!(!may_be_missing::<Vec<u8>>());
    }

    /// The answer is serde's own: a derived struct decodes from `{}` exactly
    /// when each of its fields may be missing.
    #[test]
    fn it_agrees_with_a_derived_struct() {
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct Optional {
            a: Option<u64>,
        }
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct Value {
            a: serde_json::Value,
        }
        assert!(serde_json::from_str::<Optional>("{}").is_ok());
        assert!(serde_json::from_str::<Value>("{}").is_err());
    }
}
