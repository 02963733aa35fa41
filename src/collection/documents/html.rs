//! HTML documents (`convrag index --format html`): the page's title, its sections (a heading and
//! the text up to the next heading), scripts, styles and navigation dropped.
//!
//! Each section is cut into passages by the usual segmenter. A passage id is the file's path
//! under the indexed directory, the section's anchor and the passage's 1-based number in the
//! section: `sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY:1`. The anchor is the id of the
//! heading or of its nearest enclosing element; generated ids (DocBook's `id-1.9.3.69.5`) and
//! missing ones are replaced by a slug of the heading (`description`), so ids stay readable and
//! do not change when the page is rebuilt.

use std::collections::HashSet;

use scraper::{ElementRef, Html, Node};

use crate::collection::segment::segment_document;
use crate::collection::SegmenterConfig;

/// Elements whose contents are never text of the page.
const DROPPED_ELEMENTS: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "footer", "aside", "svg", "form", "button",
    "select", "iframe", "object", "head",
];

/// Classes of navigation blocks in generated manuals (DocBook, Sphinx, rustdoc).
const DROPPED_CLASSES: &[&str] = &[
    "navheader",
    "navfooter",
    "toc",
    "breadcrumb",
    "breadcrumbs",
    "navigation",
    "sidebar",
    "headerlink",
];

/// Elements that start a new line of text.
const BLOCK_ELEMENTS: &[&str] = &[
    "p",
    "div",
    "pre",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "tr",
    "table",
    "blockquote",
    "section",
    "article",
    "main",
    "br",
    "hr",
    "figure",
    "figcaption",
    "caption",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
];

/// One passage of an HTML document.
#[derive(Debug, Clone, PartialEq)]
pub struct HtmlPassage {
    /// `file#anchor:n`.
    pub id: String,
    /// The page's title, then the section's heading when it differs: `CREATE INDEX — Description`.
    pub title: String,
    /// The headings from the page's top down to the section's, one a line.
    pub headings: String,
    pub text: String,
    /// Character offsets of the passage in its section's text.
    pub start_char: u64,
    pub end_char: u64,
}

/// A parsed page: its title and its sections in document order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HtmlDocument {
    pub title: String,
    /// What the page is for, in its own words, when it says so in one line: a DocBook reference
    /// page's purpose (`DROP TABLE — remove a table` gives `remove a table`). Empty otherwise.
    pub purpose: String,
    pub sections: Vec<Section>,
}

/// A heading and the text that follows it (up to the next heading).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Section {
    pub anchor: String,
    /// The heading path, outermost first (empty for text before the first heading).
    pub headings: Vec<String>,
    pub text: String,
}

/// Parses an HTML page into its title and sections.
pub fn parse(html: &str) -> HtmlDocument {
    let document = Html::parse_document(html);
    let title = document
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
        .find(|e| e.value().name() == "title")
        .map(|e| collapse_whitespace(&e.text().collect::<String>()))
        .unwrap_or_default();
    let mut walker = Walker::default();
    walker.visit(document.root_element(), None);
    walker.finish_section();
    let mut sections = walker.sections;
    let title = if title.is_empty() {
        sections
            .iter()
            .find_map(|s| s.headings.first().cloned())
            .unwrap_or_default()
    } else {
        title
    };
    // Every section's heading path starts at the page.
    for section in &mut sections {
        if !title.is_empty() && section.headings.first() != Some(&title) {
            section.headings.insert(0, title.clone());
        }
    }
    let purpose = purpose_of(&document, &title);
    HtmlDocument {
        title,
        purpose,
        sections,
    }
}

/// A reference page's one-line purpose: the paragraph of DocBook's `refnamediv` (its
/// `refpurpose`), without the page's name when it starts with it. A "how do I" question says
/// what it wants done ("remove a table"), which the command's name (`DROP TABLE`) and its
/// synopsis and examples rarely say: with the purpose in every passage's title, the page's
/// synopsis and examples can be found by the words of the task.
fn purpose_of(document: &Html, title: &str) -> String {
    let Some(namediv) = document
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
        .find(|e| e.value().classes().any(|c| c == "refnamediv"))
    else {
        return String::new();
    };
    let Some(line) = namediv
        .children()
        .filter_map(ElementRef::wrap)
        .find(|e| e.value().name() == "p")
        .map(|p| collapse_whitespace(&p.text().collect::<String>()))
    else {
        return String::new();
    };
    // "DROP TABLE — remove a table", or several names before the dash ("CREATE USER — …").
    let purpose = match line.split_once(" — ") {
        Some((name, rest)) if !name.is_empty() => rest.trim(),
        _ => line.trim(),
    };
    if purpose.eq_ignore_ascii_case(title) {
        return String::new();
    }
    purpose.to_string()
}

/// Cuts a parsed page into passages; `doc_id` (the file's relative path) prefixes every id.
pub fn passages(doc: &HtmlDocument, doc_id: &str, segmenter: &SegmenterConfig) -> Vec<HtmlPassage> {
    let mut out = Vec::new();
    for section in &doc.sections {
        let heading = section.headings.last().map(String::as_str).unwrap_or("");
        let title = if heading.is_empty() || heading == doc.title || doc.title.is_empty() {
            if doc.title.is_empty() {
                heading.to_string()
            } else {
                doc.title.clone()
            }
        } else {
            format!("{} — {heading}", doc.title)
        };
        // The page's purpose after its title: "DROP TABLE — Examples (remove a table)", what
        // BM25 (the title is part of a passage's indexed contents) and the reranker (which reads
        // the title before the text) match a task's words with.
        let title = if doc.purpose.is_empty() {
            title
        } else {
            format!("{title} ({})", doc.purpose)
        };
        for (n, p) in segment_document(&section.text, segmenter)
            .into_iter()
            .enumerate()
        {
            out.push(HtmlPassage {
                id: format!("{doc_id}#{}:{}", section.anchor, n + 1),
                title: title.clone(),
                headings: section.headings.join("\n"),
                text: p.text,
                start_char: p.char_start as u64,
                end_char: p.char_end as u64,
            });
        }
    }
    out
}

/// The text of a definition term, a line break as a space (`-t<br>--tuples-only` names two
/// options).
fn term_text(dt: ElementRef<'_>) -> String {
    let mut out = String::new();
    for node in dt.descendants() {
        match node.value() {
            Node::Text(text) => out.push_str(text),
            Node::Element(e) if e.name() == "br" => out.push(' '),
            _ => {}
        }
    }
    out
}

/// A table cell's text with its inline code as code spans (`pg_table_size` in a reference
/// table's row), its paragraphs and line breaks as spaces.
fn cell_text(cell: ElementRef<'_>) -> String {
    let mut out = String::new();
    for child in cell.children() {
        match child.value() {
            Node::Text(text) => out.push_str(text),
            Node::Element(e) if INLINE_CODE.contains(&e.name()) => {
                let code = ElementRef::wrap(child).map_or(String::new(), |c| {
                    collapse_whitespace(&c.text().collect::<String>())
                });
                if !code.is_empty() {
                    out.push_str(&code_span(&code));
                }
            }
            Node::Element(e) => {
                let inner = ElementRef::wrap(child).map_or(String::new(), cell_text);
                let block = BLOCK_ELEMENTS.contains(&e.name()) || e.name() == "br";
                if block {
                    out.push(' ');
                }
                out.push_str(&inner);
                if block {
                    out.push(' ');
                }
            }
            _ => {}
        }
    }
    out
}

/// A definition term as a heading's text: a code span when all of its text is code (a command's
/// clause or option, `<code>GENERATED … AS IDENTITY</code>`), so an answer that names it shows it
/// as code; otherwise its code parts as code spans (a configuration parameter's
/// `` `listen_addresses` (`string`) ``), the rest as text.
fn term_heading(dt: ElementRef<'_>, term: &str) -> String {
    let all_code = dt.descendants().all(|node| match node.value() {
        Node::Text(text) => {
            text.trim().is_empty()
                || node.ancestors().any(|a| {
                    a.value()
                        .as_element()
                        .is_some_and(|e| INLINE_CODE.contains(&e.name()))
                })
        }
        _ => true,
    });
    if !all_code {
        let mixed = collapse_whitespace(&cell_text(dt));
        return if mixed.is_empty() {
            term.to_string()
        } else {
            mixed
        };
    }
    code_span(term)
}

/// `code` as a Markdown code span (a double fence when it holds a backtick).
fn code_span(code: &str) -> String {
    let fence = if code.contains('`') { "``" } else { "`" };
    format!("{fence}{code}{fence}")
}

/// Classes of admonitions (DocBook's `<div class="note"><h3>Note</h3>…</div>`): their heading
/// is a label, not a section. Taken for one, it named the rest of its section "Note" (most of
/// psql's meta-commands read as `psql — Tip`).
const ADMONITION_CLASSES: &[&str] = &["note", "tip", "warning", "caution", "important"];

#[derive(Default)]
struct Walker {
    sections: Vec<Section>,
    current: Section,
    /// Inside an admonition, whose heading is left out.
    admonitions: usize,
    /// Inside a link (`<a>`), how deep.
    links: usize,
    /// The current section has text of its own, not only the text of links: a section of links
    /// alone (a reference page's "See Also", an index) is navigation, left out; its few words
    /// made a short passage that every word of its page's title matches.
    own_text: bool,
    /// (level, text) of the headings above the current position.
    heading_stack: Vec<(u8, String)>,
    used_anchors: HashSet<String>,
}

/// Elements whose text is code when they are not inside a `<pre>` (written as a code span).
const INLINE_CODE: &[&str] = &["code", "kbd", "samp", "tt"];

impl Walker {
    /// `anchor` is the id of the nearest enclosing element that has one. The section's text is
    /// Markdown: blocks apart by a blank line, `<pre>` as a fenced code block, list items as `- `
    /// lines, definition terms as `####` lines, tables as `| a | b |` rows.
    fn visit(&mut self, element: ElementRef<'_>, anchor: Option<&str>) {
        let value = element.value();
        let name = value.name();
        if is_dropped(element) {
            return;
        }
        // The page's own id (DocBook's `<body id="docContent">`) names no section.
        let own_id = value
            .id()
            .filter(|id| !id.trim().is_empty() && name != "body" && name != "html");
        let anchor = own_id.or(anchor);
        if let Some(level) = heading_level(name) {
            if self.admonitions == 0 {
                self.start_section(level, element, anchor);
            }
            return;
        }
        if name == "div" && value.classes().any(|c| ADMONITION_CLASSES.contains(&c)) {
            self.admonitions += 1;
            self.current.text.push_str("\n\n");
            self.visit_children(element, anchor);
            self.current.text.push_str("\n\n");
            self.admonitions -= 1;
            return;
        }
        match name {
            "pre" => return self.push_code_block(element),
            "table" => return self.push_table(element),
            "dt" => {
                let term = collapse_whitespace(&term_text(element));
                if !term.is_empty() {
                    self.push_block(&format!("#### {}", term_heading(element, &term)));
                }
                return;
            }
            _ if INLINE_CODE.contains(&name) => {
                let code = collapse_whitespace(&element.text().collect::<String>());
                if !code.is_empty() {
                    self.own_text |= self.links == 0;
                    self.current.text.push_str(&code_span(&code));
                }
                return;
            }
            "li" => return self.push_item(element, anchor),
            _ => {}
        }
        let block = BLOCK_ELEMENTS.contains(&name);
        let link = name == "a";
        if block {
            self.current.text.push_str("\n\n");
        }
        self.links += usize::from(link);
        self.visit_children(element, anchor);
        self.links -= usize::from(link);
        if block {
            self.current.text.push_str("\n\n");
        }
    }

    fn visit_children(&mut self, element: ElementRef<'_>, anchor: Option<&str>) {
        for child in element.children() {
            match child.value() {
                Node::Text(text) => self.push_text(text),
                Node::Element(_) => {
                    if let Some(child) = ElementRef::wrap(child) {
                        self.visit(child, anchor);
                    }
                }
                _ => {}
            }
        }
    }

    /// A list item as a `- ` line (its first paragraph; later blocks follow as they are).
    fn push_item(&mut self, item: ElementRef<'_>, anchor: Option<&str>) {
        let outer = std::mem::take(&mut self.current.text);
        self.visit_children(item, anchor);
        let inner = std::mem::replace(&mut self.current.text, outer);
        let inner = tidy_lines(&inner);
        let starts_plain = inner
            .chars()
            .next()
            .is_some_and(|c| !matches!(c, '`' | '~' | '|' | '#' | '-'));
        if starts_plain {
            self.push_block(&format!("- {inner}"));
        } else if !inner.is_empty() {
            self.push_block(&inner);
        }
    }

    /// A block of its own, blank lines around it.
    fn push_block(&mut self, text: &str) {
        self.own_text |= self.links == 0;
        self.current.text.push_str("\n\n");
        self.current.text.push_str(text);
        self.current.text.push_str("\n\n");
    }

    /// `<pre>` as a fenced code block, its lines as they are (blank lines at its ends dropped).
    fn push_code_block(&mut self, pre: ElementRef<'_>) {
        let raw: String = pre.text().collect();
        let lines: Vec<&str> = raw.lines().map(str::trim_end).collect();
        let first = lines.iter().position(|l| !l.trim().is_empty());
        let last = lines.iter().rposition(|l| !l.trim().is_empty());
        let (Some(first), Some(last)) = (first, last) else {
            return;
        };
        // A fence longer than any run of backticks inside, so the code cannot close it.
        let longest = raw.split(|c| c != '`').map(str::len).max().unwrap_or(0);
        let fence = "`".repeat(longest.max(2) + 1);
        let body = lines[first..=last].join("\n");
        self.push_block(&format!("{fence}\n{body}\n{fence}"));
    }

    /// A table as Markdown rows; the first row is the header (cells' text on one line each).
    fn push_table(&mut self, table: ElementRef<'_>) {
        let mut rows: Vec<Vec<String>> = Vec::new();
        for row in table
            .descendants()
            .filter_map(ElementRef::wrap)
            .filter(|e| e.value().name() == "tr")
        {
            let cells: Vec<String> = row
                .children()
                .filter_map(ElementRef::wrap)
                .filter(|c| matches!(c.value().name(), "td" | "th"))
                .map(|c| collapse_whitespace(&cell_text(c)).replace('|', "\\|"))
                .collect();
            if cells.iter().any(|c| !c.is_empty()) {
                rows.push(cells);
            }
        }
        let Some(width) = rows.iter().map(Vec::len).max() else {
            return;
        };
        let line = |cells: &[String]| {
            let mut out = String::from("|");
            for i in 0..width {
                out.push(' ');
                out.push_str(cells.get(i).map_or("", String::as_str));
                out.push_str(" |");
            }
            out
        };
        let mut lines = vec![line(&rows[0])];
        lines.push(format!("|{}", " --- |".repeat(width)));
        lines.extend(rows[1..].iter().map(|r| line(r)));
        self.push_block(&lines.join("\n"));
    }

    fn push_text(&mut self, text: &str) {
        let ends_with_space = self
            .current
            .text
            .chars()
            .last()
            .is_none_or(char::is_whitespace);
        // Punctuation between links ("ALTER TABLE, CREATE TABLE") is not text of its own.
        self.own_text |= self.links == 0 && text.chars().any(char::is_alphanumeric);
        let mut words = text.split_whitespace().peekable();
        if words.peek().is_none() {
            if !text.is_empty() && !ends_with_space {
                self.current.text.push(' ');
            }
            return;
        }
        if text.starts_with(char::is_whitespace) && !ends_with_space {
            self.current.text.push(' ');
        }
        let mut first = true;
        for word in words {
            if !first {
                self.current.text.push(' ');
            }
            self.current.text.push_str(word);
            first = false;
        }
        if text.ends_with(char::is_whitespace) {
            self.current.text.push(' ');
        }
    }

    fn start_section(&mut self, level: u8, heading: ElementRef<'_>, anchor: Option<&str>) {
        self.finish_section();
        let text = collapse_whitespace(&heading.text().collect::<String>());
        while self
            .heading_stack
            .last()
            .is_some_and(|(above, _)| *above >= level)
        {
            self.heading_stack.pop();
        }
        self.heading_stack.push((level, text.clone()));
        // An enclosing element's id names only the first heading inside it.
        let base = match anchor {
            Some(id) if !is_generated_id(id) && !self.used_anchors.contains(id) => id.to_string(),
            _ => slug(&text),
        };
        self.current.anchor = self.unique_anchor(base);
        self.current.headings = self.heading_stack.iter().map(|(_, h)| h.clone()).collect();
    }

    fn finish_section(&mut self) {
        let text = tidy_lines(&self.current.text);
        let mut section = std::mem::take(&mut self.current);
        let own_text = std::mem::take(&mut self.own_text);
        if !text.is_empty() && own_text {
            if section.anchor.is_empty() {
                section.anchor = self.unique_anchor("top".to_string());
            }
            section.text = text;
            self.sections.push(section);
        }
    }

    fn unique_anchor(&mut self, base: String) -> String {
        let base = if base.is_empty() {
            "section".to_string()
        } else {
            base
        };
        let mut anchor = base.clone();
        let mut n = 2;
        while !self.used_anchors.insert(anchor.clone()) {
            anchor = format!("{base}-{n}");
            n += 1;
        }
        anchor
    }
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

fn is_dropped(element: ElementRef<'_>) -> bool {
    let value = element.value();
    DROPPED_ELEMENTS.contains(&value.name())
        || value.attr("role") == Some("navigation")
        || value.attr("hidden").is_some()
        || value.classes().any(|c| DROPPED_CLASSES.contains(&c))
}

/// Ids a generator numbered (`id-1.9.3.69.5`, `id1234`) say nothing about the section.
fn is_generated_id(id: &str) -> bool {
    let rest = id.strip_prefix("id").unwrap_or("");
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// `Building Indexes Concurrently` → `building-indexes-concurrently`.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').chars().take(80).collect()
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trims lines outside code and keeps at most one blank line between blocks (blocks add line
/// breaks generously); lines of a fenced code block stay as they are.
pub(super) fn tidy_lines(text: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut fence: Option<&str> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(f) = fence {
            if line == f {
                fence = None;
                out.push(line);
            } else {
                out.push(raw.trim_end());
            }
            continue;
        }
        if line.starts_with("```") {
            fence = Some(&line[..line.len() - line.trim_start_matches('`').len()]);
        }
        if line.is_empty() && out.last().is_none_or(|l| l.is_empty()) {
            continue;
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/html");

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{FIXTURES}/{name}")).expect("fixture")
    }

    #[test]
    fn reads_title_sections_and_drops_navigation_of_a_manual_page() {
        let doc = parse(&fixture("tutorial-select.html"));
        assert_eq!(doc.title, "2.5. Querying a Table");
        // A chapter's page states no purpose of its own.
        assert_eq!(doc.purpose, "");
        assert_eq!(doc.sections.len(), 1);
        let section = &doc.sections[0];
        assert_eq!(section.anchor, "TUTORIAL-SELECT");
        assert_eq!(section.headings, vec!["2.5. Querying a Table".to_string()]);
        assert!(section
            .text
            .starts_with("To retrieve data from a table, the table is queried."));
        assert!(section.text.contains("SELECT * FROM weather;"));
        // The navigation header and footer (Prev / Up / Next / Home) are gone.
        assert!(!section.text.contains("Prev"), "{}", section.text);
        assert!(!section.text.contains("2.4. Populating a Table With Rows"));
        // Preformatted output keeps its lines; paragraphs are joined into one line each.
        assert!(section
            .text
            .contains("\n San Francisco |      46 |      50 | 0.25 | 1994-11-27\n"));
    }

    #[test]
    fn sections_of_a_reference_page_have_readable_stable_anchors() {
        let doc = parse(&fixture("sql-createindex.html"));
        assert_eq!(doc.title, "CREATE INDEX");
        let anchors: Vec<&str> = doc.sections.iter().map(|s| s.anchor.as_str()).collect();
        assert!(anchors.contains(&"description"), "{anchors:?}");
        assert!(anchors.contains(&"parameters"), "{anchors:?}");
        assert!(
            anchors.contains(&"SQL-CREATEINDEX-CONCURRENTLY"),
            "{anchors:?}"
        );
        let concurrently = doc
            .sections
            .iter()
            .find(|s| s.anchor == "SQL-CREATEINDEX-CONCURRENTLY")
            .unwrap();
        assert_eq!(
            concurrently.headings.last().map(String::as_str),
            Some("Building Indexes Concurrently")
        );
        assert_eq!(
            concurrently.headings.len(),
            3,
            "{:?}",
            concurrently.headings
        );
        assert!(concurrently.text.contains("CONCURRENTLY"));
        let passages = passages(&doc, "sql-createindex.html", &SegmenterConfig::default());
        let first = passages
            .iter()
            .find(|p| p.id == "sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY:1")
            .expect("the concurrently section's first passage");
        // Every passage's title carries the reference page's purpose.
        assert_eq!(doc.purpose, "define a new index");
        assert_eq!(
            first.title,
            "CREATE INDEX — Building Indexes Concurrently (define a new index)"
        );
        let ids: HashSet<&str> = passages.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), passages.len(), "ids are unique");
        // Parsing again gives the same ids.
        let again = passages_of(&fixture("sql-createindex.html"));
        assert_eq!(
            again,
            passages.iter().map(|p| p.id.clone()).collect::<Vec<_>>()
        );
    }

    fn passages_of(html: &str) -> Vec<String> {
        passages(
            &parse(html),
            "sql-createindex.html",
            &SegmenterConfig::default(),
        )
        .into_iter()
        .map(|p| p.id)
        .collect()
    }

    #[test]
    fn drops_scripts_styles_and_hidden_parts_and_slugs_missing_ids() {
        let doc = parse(
            "<html><head><title> A  page </title><style>p{color:red}</style></head><body>\
             <nav>Home | About</nav><script>var x = 1;</script>\
             <h1>A page</h1><p>First   words\n here.</p><div hidden>secret</div>\
             <h2>Second part!</h2><p>More <b>bold</b> text.</p>\
             <h2>Second part!</h2><p>Again.</p><footer>Copyright</footer></body></html>",
        );
        assert_eq!(doc.title, "A page");
        let got: Vec<(&str, &str)> = doc
            .sections
            .iter()
            .map(|s| (s.anchor.as_str(), s.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a-page", "First words here."),
                ("second-part", "More bold text."),
                ("second-part-2", "Again."),
            ]
        );
        assert_eq!(
            doc.sections[1].headings,
            vec!["A page".to_string(), "Second part!".to_string()]
        );
    }

    #[test]
    fn text_before_any_heading_and_pages_without_text() {
        let doc = parse("<p>Just a paragraph.</p>");
        assert_eq!(doc.title, "");
        assert_eq!(doc.sections.len(), 1);
        assert_eq!(doc.sections[0].anchor, "top");
        let p = passages(&doc, "a.html", &SegmenterConfig::default());
        assert_eq!(p[0].id, "a.html#top:1");
        assert!(parse("<html><body><script>x()</script></body></html>")
            .sections
            .is_empty());
    }

    #[test]
    fn code_headings_lists_and_tables_are_kept_as_markdown() {
        let doc = parse(
            "<html><head><title>ALTER TABLE</title></head><body><h1>ALTER TABLE</h1>\
             <h2 id=\"ddl-alter-type\">Changing a Column's Data Type</h2>\
             <p>To convert a column to a different data type, use a command like:</p>\
             <pre class=\"programlisting\">ALTER TABLE products ALTER COLUMN price TYPE numeric(10,2);\n\
             SELECT '&lt;script&gt;alert(1)&lt;/script&gt;' AS x;</pre>\
             <p>This will succeed only if each existing entry in the column can be converted.</p>\
             <div class=\"variablelist\"><dl><dt><span class=\"term\"><code class=\"literal\">SET DATA TYPE</code></span></dt>\
             <dd><p>This form changes the type of a column of a table.</p></dd></dl></div>\
             <ul><li><p>Use <code class=\"command\">ALTER TABLE</code> for tables.</p></li><li>Use views too.</li></ul>\
             <table><thead><tr><th>Type</th><th>Size</th></tr></thead>\
             <tbody><tr><td>integer</td><td>4 bytes</td></tr><tr><td>bigint</td><td>8 | bytes</td></tr></tbody></table>\
             </body></html>",
        );
        let section = doc
            .sections
            .iter()
            .find(|s| s.anchor == "ddl-alter-type")
            .expect("the section");
        assert_eq!(
            section.text,
            "To convert a column to a different data type, use a command like:\n\n\
             ```\nALTER TABLE products ALTER COLUMN price TYPE numeric(10,2);\n\
             SELECT '<script>alert(1)</script>' AS x;\n```\n\n\
             This will succeed only if each existing entry in the column can be converted.\n\n\
             #### `SET DATA TYPE`\n\n\
             This form changes the type of a column of a table.\n\n\
             - Use `ALTER TABLE` for tables.\n\n\
             - Use views too.\n\n\
             | Type | Size |\n| --- | --- |\n| integer | 4 bytes |\n| bigint | 8 \\| bytes |"
        );
        // The code block is one unit, headings stand apart, no sentence joins a heading.
        use crate::text::sentences::{split_units, UnitKind};
        let units = split_units(&section.text);
        let kinds: Vec<UnitKind> = units.iter().map(|u| u.kind).collect();
        assert_eq!(
            kinds,
            vec![
                UnitKind::Prose,
                UnitKind::Code,
                UnitKind::Prose,
                UnitKind::Heading,
                UnitKind::Prose,
                UnitKind::Prose,
                UnitKind::Prose,
                UnitKind::Table
            ]
        );
        assert_eq!(units[3].text, "`SET DATA TYPE`");
        // A passage never cuts the code block, even with a window of one sentence.
        let small = SegmenterConfig {
            window: 1,
            stride: 1,
            max_chars: None,
        };
        let cut = passages(&doc, "ddl-alter.html", &small);
        assert!(cut
            .iter()
            .any(|p| p.text.starts_with("```\nALTER TABLE") && p.text.ends_with("AS x;\n```")));
        assert!(cut.iter().all(|p| p.text.matches("```").count() % 2 == 0));
    }

    #[test]
    fn code_in_a_table_cell_stays_code_and_its_paragraphs_one_line() {
        let doc = parse(
            "<html><body><h1 id=\"sizes\">Sizes</h1><table><thead><tr><th>Function Description</th></tr></thead>\
             <tbody><tr><td><p class=\"func_signature\"><code class=\"function\">pg_table_size</code> \
             ( <code class=\"type\">regclass</code> ) \u{2192} <code class=\"returnvalue\">bigint</code></p>\
             <p>Computes the disk space used by the <em>specified</em> table.</p></td></tr>\
             <tr><td><code>a|b</code> or c<br>d</td></tr></tbody></table></body></html>",
        );
        assert_eq!(
            doc.sections[0].text,
            "| Function Description |\n| --- |\n\
             | `pg_table_size` ( `regclass` ) \u{2192} `bigint` Computes the disk space used by the specified table. |\n\
             | `a\\|b` or c d |"
        );
    }

    #[test]
    fn a_definition_term_is_a_code_span_only_when_all_of_it_is_code() {
        let doc = parse(
            "<html><body><h1>psql</h1><dl>\
             <dt><span class=\"term\"><code class=\"option\">-t</code><br>\
             <code class=\"option\">--tuples-only</code></span></dt><dd><p>Rows only.</p></dd>\
             <dt><span class=\"term\"><em class=\"replaceable\">name</em> of the <code>index</code></span></dt>\
             <dd><p>Mixed.</p></dd></dl></body></html>",
        );
        let text = &doc.sections[0].text;
        assert!(text.contains("#### `-t --tuples-only`\n"), "{text}");
        assert!(text.contains("#### name of the `index`\n"), "{text}");
    }

    #[test]
    fn manual_pages_keep_their_examples_as_code() {
        let doc = parse(&fixture("sql-createindex.html"));
        let all: String = doc
            .sections
            .iter()
            .map(|s| s.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        assert!(
            all.contains(
                "```\nCREATE INDEX pointloc\n    ON points USING gist (box(location,location));\n"
            ),
            "{all}"
        );
        assert!(
            all.contains("#### `CONCURRENTLY`\n\nWhen this option is used"),
            "{all}"
        );
        let units = crate::text::sentences::split_units(&all);
        // No prose sentence begins with a term that was a heading ("CONCURRENTLY When this ...").
        assert!(units
            .iter()
            .all(|u| !u.text.starts_with("CONCURRENTLY When")));
        assert!(units
            .iter()
            .any(|u| u.kind == crate::text::sentences::UnitKind::Code
                && u.text
                    .contains("CREATE INDEX CONCURRENTLY sales_quantity_index")));
    }

    #[test]
    fn an_admonition_stays_in_its_section() {
        let doc = parse(
            "<html><body><h1>psql</h1><h2 id=\"meta\">Meta-Commands</h2><p>First.</p>\
             <div class=\"tip\"><h3 class=\"title\">Tip</h3><p>A tip.</p></div>\
             <p>Later commands.</p></body></html>",
        );
        let meta = doc.sections.iter().find(|s| s.anchor == "meta").unwrap();
        assert_eq!(meta.text, "First.\n\nA tip.\n\nLater commands.");
        assert!(doc
            .sections
            .iter()
            .all(|s| s.headings.last().map(String::as_str) != Some("Tip")));
    }

    #[test]
    fn a_section_of_links_alone_is_navigation() {
        let doc = parse(
            "<html><body><h1>DROP TABLE</h1><p>Removes a table.</p>\
             <h2>See Also</h2><span class=\"simplelist\"><a href=\"a.html\">ALTER TABLE</a>, \
             <a href=\"c.html\">CREATE TABLE</a></span>\
             <h2>Notes</h2><p>See <a href=\"a.html\">ALTER TABLE</a>.</p></body></html>",
        );
        let headings: Vec<&str> = doc
            .sections
            .iter()
            .filter_map(|s| s.headings.last().map(String::as_str))
            .collect();
        assert_eq!(headings, vec!["DROP TABLE", "Notes"]);
    }

    #[test]
    fn generated_ids_are_recognized() {
        assert!(is_generated_id("id-1.9.3.69.5"));
        assert!(is_generated_id("id1234"));
        assert!(!is_generated_id("SQL-CREATEINDEX"));
        assert!(!is_generated_id("identity"));
        assert!(!is_generated_id("id"));
        assert_eq!(
            slug("Building Indexes Concurrently"),
            "building-indexes-concurrently"
        );
    }
}
