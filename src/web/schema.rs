//! What the adapters' OpenAPI `Modify` impls share: JSON Schema keywords that utoipa's model has
//! no field for (`if`, `then`, `const`, `not`, `contains`, and `anyOf` or `properties` beside
//! other keywords of the same schema).

use serde::Serialize;
use serde_json::Value;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::Object;
use utoipa::openapi::{OpenApi, RefOr, Schema};

/// The characters `str::trim` strips (JSON Schema's `\s` is not the same set), spelled once
/// for the patterns below.
macro_rules! trimmed_chars {
    () => {
        "\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
    };
}

/// Text with some character that `str::trim` keeps and no NUL (which PostgreSQL text cannot
/// hold): `store::require_text`.
pub const NONBLANK: &str = concat!("^[^\\u0000]*[^\\u0000", trimmed_chars!(), "][^\\u0000]*$");

/// Any text without a NUL (which PostgreSQL text cannot hold).
pub const NOTNUL: &str = "^[^\\u0000]*$";

/// Somewhere in the text, a character that is neither white space to `str::trim` nor NUL
/// (unanchored): with [`NOTNUL`] on the same value, what [`NONBLANK`] says. A value that another
/// schema of the document already holds to `NOTNUL` takes this one, because two anchored
/// patterns on one value send schemathesis' generator into minutes of rejected draws.
pub const VISIBLE_CHAR: &str = concat!("[^\\u0000", trimmed_chars!(), "]");

/// An uploaded text that `collection::documents::extract` finds something to index in: some
/// character that neither `str::trim` (its blank check) nor the byte order mark it drops is,
/// and no NUL.
pub const DOCUMENT_TEXT: &str = concat!(
    "^[^\\u0000]*[^\\u0000",
    trimmed_chars!(),
    "\\ufeff][^\\u0000]*$"
);

/// The component schema `name` when it is an object schema.
pub fn component_mut<'a>(doc: &'a mut OpenApi, name: &str) -> Option<&'a mut Object> {
    match doc.components.as_mut()?.schemas.get_mut(name)? {
        RefOr::T(Schema::Object(object)) => Some(object),
        _ => None,
    }
}

/// Adds the keywords of `schema` (a typed schema or a JSON value) to a schema through its
/// `extensions`, which utoipa writes flattened into the schema: the schema then holds both, as
/// an `allOf` of the two would.
pub fn add_keywords(extensions: &mut Option<Extensions>, schema: impl Serialize) {
    if let Ok(Value::Object(keywords)) = serde_json::to_value(schema) {
        extensions
            .get_or_insert_with(Extensions::default)
            .extend(keywords);
    }
}

/// A schema that is only `keywords` (no `type`): a `const`, say, as a property's schema.
pub fn keywords_only(keywords: Value) -> utoipa::openapi::schema::Object {
    let mut schema = utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::AnyValue)
        .build();
    add_keywords(&mut schema.extensions, keywords);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use utoipa::openapi::schema::{ObjectBuilder, Type};

    #[test]
    fn keywords_are_written_beside_the_schemas_own() {
        let mut schema = ObjectBuilder::new().schema_type(Type::String).build();
        add_keywords(&mut schema.extensions, json!({"not": {"const": ""}}));
        assert_eq!(
            serde_json::to_value(&schema).unwrap(),
            json!({"type": "string", "not": {"const": ""}})
        );
        assert_eq!(
            serde_json::to_value(keywords_only(json!({"const": "2.0"}))).unwrap(),
            json!({"const": "2.0"})
        );
    }

    #[test]
    fn the_patterns_agree_with_str_trim() {
        let nonblank = regex::Regex::new(NONBLANK).unwrap();
        let notnul = regex::Regex::new(NOTNUL).unwrap();
        let visible = regex::Regex::new(VISIBLE_CHAR).unwrap();
        let document = regex::Regex::new(DOCUMENT_TEXT).unwrap();
        let blank: String = (0..=0x3000u32)
            .filter_map(char::from_u32)
            .filter(|c| c.is_whitespace())
            .collect();
        for text in [
            "a",
            " a ",
            "\u{3000}x\n",
            "",
            " ",
            "\t\n\u{2028}",
            blank.as_str(),
            "a\0",
            "\u{feff}",
        ] {
            let kept = !text.trim().is_empty() && !text.contains('\0');
            assert_eq!(nonblank.is_match(text), kept, "{text:?}");
            assert_eq!(
                notnul.is_match(text) && visible.is_match(text),
                kept,
                "{text:?}"
            );
            let indexed = kept && !text.trim().trim_matches('\u{feff}').is_empty();
            assert_eq!(document.is_match(text), indexed, "{text:?}");
        }
    }
}
