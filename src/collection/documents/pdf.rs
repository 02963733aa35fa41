//! PDF: the text layer, extracted by the `pdf-extract` crate (lopdf underneath). A file it cannot
//! parse is a corrupt PDF; the crate may panic on some malformed files, which is caught and
//! reported the same way.

use super::{Document, DocumentError, DocumentKind, Result};

/// Whether the contents start like a PDF (the header may follow a little junk, as readers allow).
pub(super) fn is_pdf(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    head.windows(5).any(|w| w == b"%PDF-")
}

pub(super) fn read(bytes: &[u8], stem: &str) -> Result<Document> {
    let extracted = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(bytes));
    let raw = match extracted {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => return Err(DocumentError::CorruptPdf(e.to_string())),
        Err(_) => {
            return Err(DocumentError::CorruptPdf(
                "its structure cannot be parsed".to_string(),
            ))
        }
    };
    // Lines of a page come out with hard breaks; paragraphs are separated by blank lines.
    let text = raw
        .split("\n\n")
        .map(|para| para.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|para| !para.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let title = text
        .lines()
        .next()
        .map(|l| l.chars().take(120).collect::<String>())
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| stem.to_string());
    Ok(Document {
        kind: DocumentKind::Pdf,
        title,
        headings: String::new(),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_pdf_is_corrupt() {
        let e = read(b"%PDF-1.4\n1 0 obj << /Type /Catalog", "x").unwrap_err();
        assert!(matches!(e, DocumentError::CorruptPdf(_)), "{e:?}");
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::*;

    #[test]
    fn the_text_layer_of_a_real_pdf_is_read() {
        let bytes = include_bytes!("../../../tests/fixtures/tide-pools.pdf");
        assert!(is_pdf(bytes));
        let d = read(bytes, "tide-pools").unwrap();
        assert!(d.text.contains("Glaucilla"), "{:?}", d.text);
        assert!(
            d.title.starts_with("Tide pools of Kestrel Bay"),
            "{:?}",
            d.title
        );
    }
}
