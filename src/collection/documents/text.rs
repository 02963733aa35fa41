//! Plain text: UTF-8, the first non-empty line as the title.

use super::{Document, DocumentError, DocumentKind, Result};

/// Whether `bytes` cannot be text: a NUL byte or invalid UTF-8 in the first 8 KiB.
pub(super) fn is_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        // A multi-byte character cut by the 8 KiB window is not a reason to refuse.
        Err(e) => e.error_len().is_some(),
    }
}

/// The file as UTF-8 (a byte order mark dropped).
pub(super) fn utf8(bytes: &[u8]) -> Result<&str> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        DocumentError::WrongType(format!(
            "is not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    Ok(text.strip_prefix('\u{feff}').unwrap_or(text))
}

pub(super) fn read(bytes: &[u8], stem: &str) -> Result<Document> {
    let text = utf8(bytes)?;
    let title = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map_or_else(|| stem.to_string(), |l| l.chars().take(200).collect());
    Ok(Document {
        kind: DocumentKind::Text,
        title,
        headings: String::new(),
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_is_the_title() {
        let d = read("\u{feff}\n  Fox facts \nFoxes eat voles.".as_bytes(), "f").unwrap();
        assert_eq!(d.title, "Fox facts");
        assert!(d.text.ends_with("Foxes eat voles."));
    }

    #[test]
    fn binary_is_detected() {
        assert!(is_binary(b"a\x00b"));
        assert!(is_binary(b"\xff\xfe\xfd"));
        assert!(!is_binary("zażółć".as_bytes()));
    }
}
