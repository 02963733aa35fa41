//! Markdown: parsed with pulldown-cmark and written back as plain Markdown: headings as `#` lines,
//! code blocks (fenced or indented) as fenced blocks, code spans in backticks, list items as `- `
//! lines, tables as `| a | b |` rows; emphasis, links and raw HTML are reduced to their text. The
//! first heading is the title.

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

use super::{text::utf8, Document, DocumentKind, Result};

pub(super) fn read(bytes: &[u8], stem: &str) -> Result<Document> {
    let source = utf8(bytes)?;
    let mut text = String::new();
    let mut headings: Vec<String> = Vec::new();
    let mut heading: Option<String> = None;
    let mut code: Option<String> = None;
    // Rows of the table being read (cells' text); `None` outside tables.
    let mut table: Option<Vec<Vec<String>>> = None;
    let mut out = |s: &str, heading: &mut Option<String>, table: &mut Option<Vec<Vec<String>>>| {
        if let Some(h) = heading.as_mut() {
            h.push_str(s);
        } else if let Some(cell) = table
            .as_mut()
            .and_then(|rows| rows.last_mut())
            .and_then(|row| row.last_mut())
        {
            cell.push_str(s);
        } else {
            text.push_str(s);
        }
    };
    for event in Parser::new_ext(source, pulldown_cmark::Options::ENABLE_TABLES) {
        if let Some(block) = code.as_mut() {
            match event {
                Event::Text(t) => block.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    let block = code.take().unwrap_or_default();
                    out(&fenced(&block), &mut heading, &mut table);
                }
                _ => {}
            }
            continue;
        }
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(level)) => {
                if let Some(h) = heading.take() {
                    let h = h.split_whitespace().collect::<Vec<_>>().join(" ");
                    if !h.is_empty() {
                        let hashes = "#".repeat(level as usize);
                        out(&format!("\n\n{hashes} {h}\n\n"), &mut None, &mut table);
                        headings.push(h.replace('`', ""));
                    }
                }
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                code = Some(match kind {
                    CodeBlockKind::Fenced(lang) => {
                        lang.split_whitespace().next().unwrap_or("").to_string() + "\n"
                    }
                    CodeBlockKind::Indented => "\n".to_string(),
                })
            }
            Event::Start(Tag::Item) => out("\n\n- ", &mut heading, &mut table),
            Event::Start(Tag::Table(_)) => table = Some(Vec::new()),
            Event::Start(Tag::TableHead | Tag::TableRow) => {
                if let Some(rows) = table.as_mut() {
                    rows.push(Vec::new());
                }
            }
            Event::Start(Tag::TableCell) => {
                if let Some(row) = table.as_mut().and_then(|rows| rows.last_mut()) {
                    row.push(String::new());
                }
            }
            Event::End(TagEnd::Table) => {
                let rows = table.take().unwrap_or_default();
                out(&markdown_table(&rows), &mut heading, &mut None);
            }
            Event::Text(t) => out(&t, &mut heading, &mut table),
            Event::Code(t) => {
                let tick = if t.contains('`') { "``" } else { "`" };
                out(&format!("{tick}{t}{tick}"), &mut heading, &mut table)
            }
            Event::SoftBreak => out(" ", &mut heading, &mut table),
            Event::HardBreak => out("\n", &mut heading, &mut table),
            Event::End(TagEnd::Paragraph | TagEnd::Item | TagEnd::BlockQuote(_)) => {
                out("\n\n", &mut heading, &mut table)
            }
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
        text: super::html::tidy_lines(&text),
    })
}

/// A code block's text (its first line is the language, possibly empty) as a fenced block whose
/// fence is longer than any run of backticks inside.
fn fenced(block: &str) -> String {
    let (lang, body) = block.split_once('\n').unwrap_or((block, ""));
    let body = body.trim_end_matches('\n');
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("\n\n{fence}{lang}\n{body}\n{fence}\n\n")
}

fn markdown_table(rows: &[Vec<String>]) -> String {
    let Some(width) = rows.iter().map(Vec::len).max() else {
        return String::new();
    };
    let line = |cells: &[String]| {
        let mut out = String::from("|");
        for i in 0..width {
            let cell = cells.get(i).map_or("", |c| c.trim());
            out.push_str(&format!(" {} |", cell.replace('|', "\\|")));
        }
        out
    };
    let mut lines = vec![line(&rows[0])];
    lines.push(format!("|{}", " --- |".repeat(width)));
    lines.extend(rows[1..].iter().map(|r| line(r)));
    format!("\n\n{}\n\n", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_reduced_to_markdown_text_and_headings_kept() {
        let md = "# Otters\n\nSea otters *hold hands* while [sleeping](http://x).\n\n## Diet\n\n- clams\n- `urchins`\n";
        let d = read(md.as_bytes(), "otters").unwrap();
        assert_eq!(d.title, "Otters");
        assert_eq!(d.headings, "Otters\nDiet");
        assert_eq!(
            d.text,
            "# Otters\n\nSea otters hold hands while sleeping.\n\n## Diet\n\n- clams\n\n- `urchins`"
        );
    }

    #[test]
    fn code_blocks_stay_fenced_and_tables_are_rows() {
        let md = "# Backups\nUse a command like:\n```sh\npg_dump mydb > db.sql\n\n# restore\npsql mydb < db.sql\n```\nOr indented:\n\n    SELECT 1;\n    SELECT 2;\n\n| option | meaning |\n|---|---|\n| `-F c` | custom format |\n";
        let d = read(md.as_bytes(), "b").unwrap();
        assert_eq!(
            d.text,
            "# Backups\n\nUse a command like:\n\n```sh\npg_dump mydb > db.sql\n\n# restore\npsql mydb < db.sql\n```\n\nOr indented:\n\n```\nSELECT 1;\nSELECT 2;\n```\n\n| option | meaning |\n| --- | --- |\n| `-F c` | custom format |"
        );
        // The `# restore` comment inside the code is not a heading.
        assert_eq!(d.headings, "Backups");
        let units = crate::text::sentences::split_units(&d.text);
        let kinds: Vec<_> = units.iter().map(|u| u.kind).collect();
        use crate::text::sentences::UnitKind::*;
        assert_eq!(kinds, vec![Heading, Prose, Code, Prose, Code, Table]);
        assert_eq!(
            units[2].text,
            "```sh\npg_dump mydb > db.sql\n\n# restore\npsql mydb < db.sql\n```"
        );
    }

    #[test]
    fn without_a_heading_the_file_name_is_the_title() {
        let d = read(b"just text", "notes").unwrap();
        assert_eq!(d.title, "notes");
    }
}
