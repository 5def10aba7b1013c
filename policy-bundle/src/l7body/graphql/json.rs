//! JSON read strictly: no duplicate member at any depth, bounded nesting,
//! UTF-8 only, no byte order mark.
//!
//! `serde_json::Value` keeps the last of two equal members; a server's JSON
//! reader may keep the first, so a request with `"query"` twice could be
//! analysed as one document and run as the other. Every member is checked,
//! not only the ones the analysis reads, because `variables` and
//! `extensions` are read by the server too.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::GraphqlError;

/// Deeper than any real request (variables are input objects a few levels
/// deep), shallow enough that the recursive reader stays far from the end
/// of a small thread stack.
pub(super) const MAX_DEPTH: usize = 32;

/// Why the strict reader stopped, kept beside serde's own error, which
/// carries only text and the position.
#[derive(Debug, Clone)]
enum Failure {
    DuplicateKey(String),
    TooDeep,
}

pub(super) fn parse_strict(bytes: &[u8]) -> Result<Value, GraphqlError> {
    if bytes.starts_with("\u{feff}".as_bytes()) {
        return Err(GraphqlError::ByteOrderMark);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| GraphqlError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    let failure = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let result = Strict {
        depth: 0,
        failure: &failure,
    }
    .deserialize(&mut de)
    .and_then(|value| de.end().map(|()| value));
    result.map_err(|e| {
        let (line, column) = (e.line(), e.column());
        match failure.take() {
            Some(Failure::DuplicateKey(key)) => GraphqlError::DuplicateKey { key, line, column },
            Some(Failure::TooDeep) => GraphqlError::TooDeep {
                limit: MAX_DEPTH,
                line,
                column,
            },
            None => GraphqlError::MalformedJson {
                message: json_message(&e),
                line,
                column,
            },
        }
    })
}

/// serde's message without its own " at line L column C" tail, which the
/// error variant states.
fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text.get(..at).unwrap_or(&text).to_owned(),
        None => text,
    }
}

#[derive(Clone, Copy)]
struct Strict<'a> {
    depth: usize,
    failure: &'a Cell<Option<Failure>>,
}

impl Strict<'_> {
    fn fail<E: de::Error>(&self, failure: Failure) -> E {
        let message = match &failure {
            Failure::DuplicateKey(key) => format!("duplicate member `{key}`"),
            Failure::TooDeep => "nested too deep".to_owned(),
        };
        self.failure.set(Some(failure));
        E::custom(message)
    }

    fn child<E: de::Error>(&self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(self.fail(Failure::TooDeep));
        }
        Ok(Self {
            depth: self.depth + 1,
            failure: self.failure,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON numbers are finite, so `from_f64` always succeeds here.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let child = self.child()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(child)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let child = self.child()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(self.fail(Failure::DuplicateKey(key)));
            }
            let value = map.next_value_seed(child)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}
