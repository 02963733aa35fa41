//! PDF: the text layer, read by the `pdf-extract` crate (lopdf underneath) glyph by glyph with
//! its position, size and advance, and written as Markdown like the other readers: lines larger
//! than the body text as `#` headings, code listings (lines set in a monospaced font, or a run of
//! indented lines that read as code) as fenced blocks with their indentation, the rest as
//! paragraphs. A file it cannot parse is a corrupt PDF; the crate may panic on some malformed
//! files, which is caught and reported the same way.

use pdf_extract::{MediaBox, OutputDev, OutputError, Transform};

use super::{Document, DocumentError, DocumentKind, Result};

/// Whether the contents start like a PDF (the header may follow a little junk, as readers allow).
pub(super) fn is_pdf(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    head.windows(5).any(|w| w == b"%PDF-")
}

pub(super) fn read(bytes: &[u8], stem: &str) -> Result<Document> {
    let extracted = std::panic::catch_unwind(|| -> Result<Vec<Line>, OutputError> {
        let mut doc = pdf_extract::Document::load_mem(bytes)?;
        if doc.is_encrypted() {
            // An empty user password opens most "encrypted" PDFs (only printing is restricted).
            doc.decrypt("")?;
        }
        let mut layout = Layout::default();
        pdf_extract::output_doc(&doc, &mut layout)?;
        layout.finish_line();
        Ok(layout.lines)
    });
    let lines = match extracted {
        Ok(Ok(lines)) => lines,
        Ok(Err(e)) => return Err(DocumentError::CorruptPdf(e.to_string())),
        Err(_) => {
            return Err(DocumentError::CorruptPdf(
                "its structure cannot be parsed".to_string(),
            ))
        }
    };
    let (text, headings) = markdown(&lines);
    let title = headings
        .first()
        .cloned()
        .or_else(|| {
            text.lines()
                .find(|l| !l.trim().is_empty() && !l.starts_with("```"))
                .map(|l| l.chars().take(120).collect::<String>())
        })
        .unwrap_or_else(|| stem.to_string());
    Ok(Document {
        kind: DocumentKind::Pdf,
        title,
        headings: headings.join("\n"),
        text,
    })
}

/// One line of text as laid out on its page (PDF units, y upwards).
#[derive(Debug, Clone, Default)]
struct Line {
    page: u32,
    x0: f64,
    x1: f64,
    y: f64,
    size: f64,
    text: String,
    /// Advances of the line's glyphs other than spaces, in ems (a monospaced font has one).
    min_em: f64,
    max_em: f64,
    glyphs: usize,
    /// The advance of one glyph of the line in PDF units (the column width of code).
    advance: f64,
}

impl Line {
    /// Set in a monospaced font: every glyph advances the same, over enough glyphs that a
    /// proportional font could not do it by chance (its digits or `a e n o u` alone share one).
    fn monospaced(&self) -> bool {
        self.glyphs >= 8 && self.max_em - self.min_em < 0.01 && self.min_em > 0.0
    }
}

/// Collects glyphs into lines (pdf-extract's output device).
#[derive(Default)]
struct Layout {
    page: u32,
    line: Option<Line>,
    lines: Vec<Line>,
}

impl Layout {
    fn finish_line(&mut self) {
        if let Some(line) = self.line.take() {
            if !line.text.trim().is_empty() {
                self.lines.push(line);
            }
        }
    }
}

impl OutputDev for Layout {
    fn begin_page(
        &mut self,
        page_num: u32,
        _media_box: &MediaBox,
        _art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.finish_line();
        self.page = page_num;
        Ok(())
    }

    fn end_page(&mut self) -> Result<(), OutputError> {
        self.finish_line();
        Ok(())
    }

    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        _spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        let scale = (trm.m11 * trm.m22 - trm.m12 * trm.m21).abs().sqrt();
        let size = font_size * scale;
        if size <= 0.0 || !size.is_finite() {
            return Ok(());
        }
        let (x, y) = (trm.m31, trm.m32);
        let advance = width * size;
        let same_line = self.line.as_ref().is_some_and(|l| {
            l.page == self.page && (y - l.y).abs() <= 0.5 * l.size.min(size) && x >= l.x1 - size
        });
        if !same_line {
            self.finish_line();
        }
        let page = self.page;
        let line = self.line.get_or_insert_with(|| Line {
            page,
            x0: x,
            x1: x,
            y,
            size,
            min_em: f64::MAX,
            max_em: 0.0,
            ..Line::default()
        });
        let gap = x - line.x1;
        if gap > 0.15 * size && !line.text.ends_with(' ') {
            // A gap without a space glyph: spaces to the next column for code, one for prose.
            let columns = if line.advance > 0.0 {
                (gap / line.advance).round().max(1.0) as usize
            } else {
                1
            };
            line.text.push_str(&" ".repeat(columns));
        }
        line.text.push_str(char);
        line.x1 = x + advance;
        line.size = line.size.max(size);
        if !char.trim().is_empty() && width > 0.0 {
            line.glyphs += 1;
            line.min_em = line.min_em.min(width);
            line.max_em = line.max_em.max(width);
            line.advance = advance;
        }
        Ok(())
    }

    fn begin_word(&mut self) -> Result<(), OutputError> {
        Ok(())
    }

    fn end_word(&mut self) -> Result<(), OutputError> {
        Ok(())
    }

    fn end_line(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
}

/// What a line is, once the document's body size and left margin are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Heading(usize),
    Code,
    Prose,
}

/// The most common value of `values` (rounded to half units), weighted.
fn mode(values: impl Iterator<Item = (f64, usize)>) -> Option<f64> {
    let mut counts: Vec<(i64, usize)> = Vec::new();
    for (v, w) in values {
        let key = (v * 2.0).round() as i64;
        match counts.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += w,
            None => counts.push((key, w)),
        }
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(k, _)| k as f64 / 2.0)
}

/// Whether a line reads as code rather than as indented prose (a quotation, a list).
fn looks_like_code(text: &str) -> bool {
    text.contains(|c: char| ";{}()=<>$|\\_#".contains(c))
        || text.contains("--")
        || text.trim_end().ends_with(';')
}

fn roles(lines: &[Line]) -> Vec<Role> {
    let prose = || lines.iter().filter(|l| !l.monospaced());
    let body = mode(prose().map(|l| (l.size, l.glyphs.max(1)))).unwrap_or(0.0);
    let margin = mode(
        prose()
            .filter(|l| (l.size - body).abs() < 0.5)
            .map(|l| (l.x0, l.glyphs.max(1))),
    )
    .unwrap_or(0.0);
    // Heading sizes, largest first: the largest is level 1.
    let mut sizes: Vec<f64> = prose()
        .filter(|l| l.size >= body * 1.15 && l.text.split_whitespace().count() <= 15)
        .map(|l| (l.size * 2.0).round() / 2.0)
        .collect();
    sizes.sort_by(|a, b| b.total_cmp(a));
    sizes.dedup();
    let mut roles: Vec<Role> = lines
        .iter()
        .map(|l| {
            let rounded = (l.size * 2.0).round() / 2.0;
            match sizes.iter().position(|s| *s == rounded) {
                _ if l.monospaced() => Role::Code,
                Some(level) if l.text.split_whitespace().count() <= 15 => {
                    Role::Heading((level + 1).min(6))
                }
                _ => Role::Prose,
            }
        })
        .collect();
    // Runs of at least two prose lines indented beyond the margin, most of them reading as code.
    let indented = |l: &Line| body > 0.0 && l.x0 >= margin + 1.5 * body;
    let mut i = 0;
    while i < lines.len() {
        let run = (i..lines.len())
            .take_while(|&k| {
                roles[k] == Role::Prose
                    && indented(&lines[k])
                    && lines[k].page == lines[i].page
                    && (k == i || lines[k - 1].y - lines[k].y <= 2.0 * lines[k].size)
            })
            .count();
        let code_like = (i..i + run)
            .filter(|&k| looks_like_code(&lines[k].text))
            .count();
        if run >= 2 && code_like * 2 >= run {
            roles[i..i + run].fill(Role::Code);
        }
        i += run.max(1);
    }
    roles
}

/// The lines as Markdown, and the headings in order.
fn markdown(lines: &[Line]) -> (String, Vec<String>) {
    let roles = roles(lines);
    let mut blocks: Vec<String> = Vec::new();
    let mut headings = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        match roles[i] {
            Role::Heading(level) => {
                let text = line.text.split_whitespace().collect::<Vec<_>>().join(" ");
                blocks.push(format!("{} {text}", "#".repeat(level)));
                headings.push(text);
                i += 1;
            }
            Role::Code => {
                let end = (i..lines.len())
                    .find(|&k| roles[k] != Role::Code || lines[k].page != line.page)
                    .unwrap_or(lines.len());
                blocks.push(code_block(&lines[i..end]));
                i = end;
            }
            Role::Prose => {
                let mut paragraph = line.text.split_whitespace().collect::<Vec<_>>().join(" ");
                let mut k = i + 1;
                // A paragraph goes on while the next prose line follows at line spacing.
                while k < lines.len()
                    && roles[k] == Role::Prose
                    && lines[k].page == lines[k - 1].page
                    && lines[k - 1].y - lines[k].y <= 1.6 * lines[k].size.max(lines[k - 1].size)
                {
                    let next = lines[k]
                        .text
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ");
                    let hyphenated = paragraph.ends_with('-')
                        && next.starts_with(|c: char| c.is_lowercase())
                        && !paragraph.ends_with(" -");
                    if hyphenated {
                        paragraph.pop();
                    } else {
                        paragraph.push(' ');
                    }
                    paragraph.push_str(&next);
                    k += 1;
                }
                if !paragraph.is_empty() {
                    blocks.push(paragraph);
                }
                i = k;
            }
        }
    }
    (blocks.join("\n\n"), headings)
}

/// Code lines as a fenced block, each indented by its columns from the block's leftmost line.
fn code_block(lines: &[Line]) -> String {
    let left = lines.iter().map(|l| l.x0).fold(f64::MAX, f64::min);
    let body: Vec<String> = lines
        .iter()
        .map(|l| {
            let column = if l.advance > 0.0 {
                l.advance
            } else {
                0.6 * l.size
            };
            let indent = ((l.x0 - left) / column).round().max(0.0) as usize;
            format!("{}{}", " ".repeat(indent), l.text.trim_end())
        })
        .collect();
    let body = body.join("\n");
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{body}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_pdf_is_corrupt() {
        let e = read(b"%PDF-1.4\n1 0 obj << /Type /Catalog", "x").unwrap_err();
        assert!(matches!(e, DocumentError::CorruptPdf(_)), "{e:?}");
    }

    #[test]
    fn indented_prose_stays_prose_and_code_like_indented_lines_are_code() {
        assert!(looks_like_code("pg_restore --dbname=herons herons.dump"));
        assert!(!looks_like_code("Herons nest in tall trees near water."));
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::*;

    /// A one-page PDF with the standard fonts F1 Helvetica, F2 Helvetica-Bold and F3 Courier,
    /// drawing `content` (a content stream), with a correct cross-reference table.
    fn pdf(content: &str) -> Vec<u8> {
        let font = |name: &str| {
            format!(
                "<< /Type /Font /Subtype /Type1 /BaseFont /{name} /Encoding /WinAnsiEncoding >>"
            )
        };
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font \
             << /F1 4 0 R /F2 5 0 R /F3 6 0 R >> >> /Contents 7 0 R >>"
                .to_string(),
            font("Helvetica"),
            font("Helvetica-Bold"),
            font("Courier"),
            format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len() + 1
            ),
        ];
        let mut out = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
        }
        let xref = out.len();
        out.extend_from_slice(
            format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
        );
        for offset in offsets {
            out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
        }
        out.extend_from_slice(
            format!(
                "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
                objects.len() + 1
            )
            .as_bytes(),
        );
        out
    }

    #[test]
    fn a_code_listing_stays_code_and_headings_stand_apart() {
        // A manual page: a bold title, body text, a listing in Courier (one line indented), a
        // smaller bold heading, and a listing in the body font set off by indentation.
        let content = "\
BT /F2 18 Tf 72 720 Td (Backing up the heron survey) Tj ET
BT /F1 11 Tf 72 690 Td 14 TL
(The survey keeps its nest counts in a PostgreSQL database. To back it up, run a) Tj T*
(command like:) Tj ET
BT /F3 10 Tf 90 646 Td 12 TL
(pg_dump --format=custom herons > herons.dump) Tj T*
(psql -c 'SELECT count\\(*\\) FROM nests;' herons) Tj ET
BT /F3 10 Tf 114 622 Td (--no-password) Tj ET
BT /F2 14 Tf 72 590 Td (Restoring the survey) Tj ET
BT /F1 11 Tf 72 566 Td (Restore the dump into an empty database:) Tj ET
BT /F1 11 Tf 108 546 Td 14 TL
(createdb herons_restored) Tj T*
(pg_restore --dbname=herons_restored herons.dump) Tj ET
BT /F1 11 Tf 72 500 Td 14 TL
(The restored database holds every colony's counts. Check them before the next) Tj T*
(survey starts.) Tj ET";
        let bytes = pdf(content);
        let d = super::super::extract("herons.pdf", &bytes).unwrap();
        assert_eq!(d.kind, DocumentKind::Pdf);
        assert_eq!(d.title, "Backing up the heron survey");
        assert_eq!(
            d.headings,
            "Backing up the heron survey\nRestoring the survey"
        );
        assert_eq!(
            d.text,
            "# Backing up the heron survey\n\n\
             The survey keeps its nest counts in a PostgreSQL database. To back it up, run a command like:\n\n\
             ```\n\
             pg_dump --format=custom herons > herons.dump\n\
             psql -c 'SELECT count(*) FROM nests;' herons\n    \
             --no-password\n\
             ```\n\n\
             ## Restoring the survey\n\n\
             Restore the dump into an empty database:\n\n\
             ```\n\
             createdb herons_restored\n\
             pg_restore --dbname=herons_restored herons.dump\n\
             ```\n\n\
             The restored database holds every colony's counts. Check them before the next survey starts."
        );
        // Sentence splitting keeps the listings whole and the headings apart.
        use crate::text::sentences::{split_units, UnitKind::*};
        let units = split_units(&d.text);
        let kinds: Vec<_> = units.iter().map(|u| u.kind).collect();
        assert_eq!(
            kinds,
            vec![Heading, Prose, Prose, Code, Heading, Prose, Code, Prose, Prose],
            "{units:?}"
        );
        assert!(
            units[3].text.contains("herons.dump\npsql"),
            "{:?}",
            units[3]
        );
    }

    #[test]
    fn the_text_layer_of_a_real_pdf_is_read() {
        let bytes = include_bytes!("../../../tests/fixtures/pdf/tide-pools.pdf");
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
