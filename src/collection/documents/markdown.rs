//! Markdown: parsed with pulldown-cmark into plain text, one block a paragraph; headings are kept
//! in the text (they read as sentences) and listed on their own; the first heading is the title.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use super::{text::utf8, Document, DocumentKind, Result};

pub(super) fn read(bytes: &[u8], stem: &str) -> Result<Document> {
    let source = utf8(bytes)?;
    let mut text = String::new();
    let mut headings: Vec<String> = Vec::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(source) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let h = h.trim().to_string();
                    if !h.is_empty() {
                        text.push_str(&h);
                        text.push_str("\n\n");
                        headings.push(h);
                    }
                }
            }
            Event::Text(t) | Event::Code(t) => match heading.as_mut() {
                Some(h) => h.push_str(&t),
                None => text.push_str(&t),
            },
            Event::SoftBreak | Event::HardBreak => match heading.as_mut() {
                Some(h) => h.push(' '),
                None => text.push('\n'),
            },
            Event::End(TagEnd::Paragraph | TagEnd::Item | TagEnd::CodeBlock | TagEnd::TableRow) => {
                text.push_str("\n\n")
            }
            Event::End(TagEnd::TableCell) => text.push(' '),
            _ => {}
        }
    }
    let title = headings
        .first()
        .cloned()
        .unwrap_or_else(|| stem.to_string());
    Ok(Document {
        kind: DocumentKind::Markdown,
        title,
        headings: headings.join("\n"),
        text: text.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_removed_and_headings_kept() {
        let md = "# Otters\n\nSea otters *hold hands* while [sleeping](http://x).\n\n## Diet\n\n- clams\n- `urchins`\n";
        let d = read(md.as_bytes(), "otters").unwrap();
        assert_eq!(d.title, "Otters");
        assert_eq!(d.headings, "Otters\nDiet");
        assert_eq!(
            d.text,
            "Otters\n\nSea otters hold hands while sleeping.\n\nDiet\n\nclams\n\nurchins"
        );
    }

    #[test]
    fn without_a_heading_the_file_name_is_the_title() {
        let d = read(b"just text", "notes").unwrap();
        assert_eq!(d.title, "notes");
    }
}
