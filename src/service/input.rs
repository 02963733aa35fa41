//! The one validation contract of what callers send: every adapter (REST, OpenAI chat, MCP,
//! batch) checks text through these rules, with lengths from [`crate::config::Limits`], so one
//! input gets one verdict and one field name whichever door it came through.

/// Text a caller sent that the service refuses: the field it came in and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct InvalidInput {
    /// The request's path to the value (`utterance`, `messages[3].content`, `question`).
    pub field: String,
    pub reason: String,
}

impl InvalidInput {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, InvalidInput>;

/// Text PostgreSQL can store (no NUL) of at most `max_chars` characters; blank is allowed.
pub fn text(field: &str, value: &str, max_chars: usize) -> Result<()> {
    if value.contains('\0') {
        return Err(InvalidInput::new(field, "must not contain NUL characters"));
    }
    let chars = value.chars().count();
    if chars > max_chars {
        return Err(InvalidInput::new(
            field,
            format!("must be at most {max_chars} characters (got {chars})"),
        ));
    }
    Ok(())
}

/// As [`text`], and not blank.
pub fn required_text(field: &str, value: &str, max_chars: usize) -> Result<()> {
    if value.trim().is_empty() {
        return Err(InvalidInput::new(field, "must not be empty"));
    }
    text(field, value, max_chars)
}

/// At most `max` items.
pub fn count(field: &str, items: usize, max: usize) -> Result<()> {
    if items > max {
        return Err(InvalidInput::new(
            field,
            format!("at most {max} are accepted in one request (got {items})"),
        ));
    }
    Ok(())
}

/// A whole number within `1..=max`.
pub fn in_range(field: &str, value: usize, max: usize) -> Result<()> {
    if value == 0 || value > max {
        return Err(InvalidInput::new(
            field,
            format!("must be between 1 and {max} (got {value})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_and_length_are_refused_naming_the_field() {
        assert_eq!(text("f", "abc", 3), Ok(()));
        assert_eq!(text("f", "", 3), Ok(()));
        let e = text("messages[2].content", "a\0b", 10).unwrap_err();
        assert_eq!(e.field, "messages[2].content");
        assert!(e.reason.contains("NUL"), "{e}");
        let e = text("utterance", "ééé", 2).unwrap_err();
        assert_eq!(e.reason, "must be at most 2 characters (got 3)");
        assert_eq!(
            required_text("question", "  ", 10).unwrap_err().reason,
            "must not be empty"
        );
        assert!(count("messages", 3, 2).is_err());
        assert!(count("messages", 2, 2).is_ok());
        assert!(in_range("k", 0, 10).is_err());
        assert!(in_range("k", 11, 10).is_err());
        assert!(in_range("k", 10, 10).is_ok());
    }
}
