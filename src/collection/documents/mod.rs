//! Readers of single uploaded documents (plain text, Markdown, HTML, PDF): the file's type is decided
//! by its extension and confirmed by its contents, then its text is extracted for indexing.
//! `html` reads whole HTML pages for `convrag index` (and the default collection).
//! Adding a type is one [`DocumentKind`] variant, its extensions and one match arm in [`extract`].

pub mod html;
mod markdown;
mod pdf;
mod text;

use std::fmt;

/// The types of document an upload may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DocumentKind {
    Text,
    Markdown,
    Html,
    Pdf,
}

impl DocumentKind {
    /// Every kind, in the order the error message lists them.
    pub const ALL: [DocumentKind; 4] = [
        DocumentKind::Text,
        DocumentKind::Markdown,
        DocumentKind::Html,
        DocumentKind::Pdf,
    ];

    /// File name endings (lower case, without the dot) of this kind.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            DocumentKind::Text => &["txt", "text"],
            DocumentKind::Markdown => &["md", "markdown"],
            DocumentKind::Html => &["html", "htm"],
            DocumentKind::Pdf => &["pdf"],
        }
    }

    /// The kind a file name's extension says, if any.
    pub fn from_file_name(name: &str) -> Option<DocumentKind> {
        let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|k| k.extensions().contains(&ext.as_str()))
    }

    /// The accepted extensions, for error messages (`.txt, .text, .md, ...`).
    pub fn accepted() -> String {
        Self::ALL
            .iter()
            .flat_map(|k| k.extensions())
            .map(|e| format!(".{e}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DocumentKind::Text => "text",
            DocumentKind::Markdown => "Markdown",
            DocumentKind::Html => "HTML",
            DocumentKind::Pdf => "PDF",
        })
    }
}

/// Why a document cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("is empty")]
    Empty,
    /// Neither the extension nor the contents are of an accepted type.
    #[error("{0}")]
    WrongType(String),
    #[error("is not a readable PDF: {0}")]
    CorruptPdf(String),
    #[error("has no text to index{0}")]
    NoText(&'static str),
}

pub type Result<T, E = DocumentError> = std::result::Result<T, E>;

/// A document's extracted text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub kind: DocumentKind,
    pub title: String,
    /// Section headings, one per line (Markdown); indexed with the text.
    pub headings: String,
    pub text: String,
}

/// Decides the kind of `bytes` named `file_name` (messages leave the file to the caller to name):
/// an extension must be accepted and the contents must agree with it (a PDF starts with `%PDF-`;
/// text and Markdown are UTF-8 without NULs). A name without an extension (`README`, or a part
/// sent without a file name) says nothing, so the contents decide: a PDF, else text.
pub fn sniff(file_name: &str, bytes: &[u8]) -> Result<DocumentKind> {
    if bytes.is_empty() {
        return Err(DocumentError::Empty);
    }
    let looks_pdf = pdf::is_pdf(bytes);
    let kind = match DocumentKind::from_file_name(file_name) {
        Some(kind) => kind,
        None if !file_name.contains('.') && looks_pdf => DocumentKind::Pdf,
        None if !file_name.contains('.') => DocumentKind::Text,
        None => {
            return Err(DocumentError::WrongType(format!(
                "is not an accepted type (accepted: {}, or text without an extension)",
                DocumentKind::accepted()
            )))
        }
    };
    match kind {
        DocumentKind::Pdf if looks_pdf => Ok(kind),
        DocumentKind::Pdf => Err(DocumentError::CorruptPdf(
            "it does not start with a PDF header (%PDF-)".to_string(),
        )),
        _ if looks_pdf => Err(DocumentError::WrongType(format!(
            "is a PDF file named as {kind}; name it .pdf"
        ))),
        _ if text::is_binary(bytes) => Err(DocumentError::WrongType(format!(
            "is binary, not {kind} (text must be UTF-8)"
        ))),
        _ => Ok(kind),
    }
}

/// Sniffs and reads one uploaded file.
pub fn extract(file_name: &str, bytes: &[u8]) -> Result<Document> {
    let kind = sniff(file_name, bytes)?;
    let stem = file_name
        .rsplit_once('.')
        .map_or(file_name, |(stem, _)| stem)
        .to_string();
    let doc = match kind {
        DocumentKind::Text => text::read(bytes, &stem)?,
        DocumentKind::Markdown => markdown::read(bytes, &stem)?,
        DocumentKind::Html => read_html(bytes, &stem)?,
        DocumentKind::Pdf => pdf::read(bytes, &stem)?,
    };
    if doc.text.trim().is_empty() {
        return Err(DocumentError::NoText(match kind {
            DocumentKind::Pdf => " (a scanned PDF without a text layer?)",
            _ => "",
        }));
    }
    Ok(doc)
}

/// An HTML page as one document: its sections (read by [`html::parse`], which drops scripts,
/// styles and navigation), each heading kept before its text and listed among the headings.
fn read_html(bytes: &[u8], stem: &str) -> Result<Document> {
    let page = html::parse(text::utf8(bytes)?);
    let mut body = String::new();
    let mut headings: Vec<String> = Vec::new();
    for section in &page.sections {
        if let Some(heading) = section.headings.last() {
            // A Markdown heading line, so it never reads as the start of the next sentence.
            let level = section.headings.len().clamp(1, 6);
            body.push_str(&format!("{} {heading}\n\n", "#".repeat(level)));
            if !headings.contains(heading) {
                headings.push(heading.clone());
            }
        }
        body.push_str(section.text.trim());
        body.push_str("\n\n");
    }
    let title = if page.title.is_empty() {
        stem.to_string()
    } else {
        page.title
    };
    Ok(Document {
        kind: DocumentKind::Html,
        title,
        headings: headings.join("\n"),
        text: body.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_pages_are_read_without_their_markup() {
        let page = "<html><head><title>Bay guide</title><script>var x = 1;</script></head>\
            <body><nav>Home | About</nav><h1>Seals</h1><p>Grey seals rest on the <b>north</b> \
            rocks.</p></body></html>";
        assert_eq!(
            sniff("guide.HTML", page.as_bytes()).unwrap(),
            DocumentKind::Html
        );
        let d = extract("guide.html", page.as_bytes()).unwrap();
        assert_eq!(d.title, "Bay guide");
        assert!(d.text.contains("Seals"), "{:?}", d.text);
        assert!(
            d.text.contains("Grey seals rest on the north rocks."),
            "{:?}",
            d.text
        );
        assert!(
            !d.text.contains("var x") && !d.text.contains("Home | About"),
            "{:?}",
            d.text
        );
        assert!(d.headings.contains("Seals"), "{:?}", d.headings);
    }

    #[test]
    fn kinds_come_from_the_extension_and_the_contents_must_agree() {
        assert_eq!(sniff("a.TXT", b"hello").unwrap(), DocumentKind::Text);
        assert_eq!(sniff("a.md", b"# Hi").unwrap(), DocumentKind::Markdown);
        assert_eq!(sniff("a.txt", b""), Err(DocumentError::Empty));
        assert!(matches!(
            sniff("a.exe", b"MZ"),
            Err(DocumentError::WrongType(_))
        ));
        assert!(matches!(
            sniff("a.txt", b"%PDF-1.4\n"),
            Err(DocumentError::WrongType(_))
        ));
        assert!(matches!(
            sniff("a.txt", b"\x00\x01\x02binary"),
            Err(DocumentError::WrongType(_))
        ));
        assert!(matches!(
            sniff("a.pdf", b"hello"),
            Err(DocumentError::CorruptPdf(_))
        ));
        // Without an extension the contents decide.
        assert_eq!(sniff("README", b"hello").unwrap(), DocumentKind::Text);
        assert_eq!(sniff("paper", b"%PDF-1.4\n").unwrap(), DocumentKind::Pdf);
        assert!(matches!(
            sniff("LICENSE", b"\x00\x01\x02binary"),
            Err(DocumentError::WrongType(_))
        ));
    }

    #[test]
    fn blank_documents_have_no_text() {
        assert_eq!(extract("a.txt", b"  \n\n "), Err(DocumentError::NoText("")));
    }

    #[test]
    fn accepted_types_are_listed() {
        assert_eq!(
            DocumentKind::accepted(),
            ".txt, .text, .md, .markdown, .html, .htm, .pdf"
        );
    }
}
