//! One reader per input format. Each streams its file (gzip when the name ends in `.gz`) and hands
//! records and bad records, with their 1-based line numbers, to a sink.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::documents::html;
use super::segment::segment_document;
use super::{BadRecord, CollectionError, Format, Item, ReadOptions, Record, Result};

/// Counts the bytes pulled from the underlying file (compressed bytes for `.gz`).
struct CountingReader<R> {
    inner: R,
    counter: Option<Arc<AtomicU64>>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(c) = &self.counter {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
}

fn open(path: &Path, opts: &ReadOptions) -> Result<Box<dyn BufRead>> {
    let file = File::open(path).map_err(|source| CollectionError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let counting = CountingReader {
        inner: file,
        counter: opts.bytes_read.clone(),
    };
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    Ok(if gz {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, counting)),
        ))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, counting))
    })
}

/// Reads one input file of `format`, calling `sink` for every record and every bad record.
/// A sink error stops the reading and is returned (that is how `--strict` aborts).
pub fn read_file(
    format: Format,
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(Item) -> Result<()>,
) -> Result<()> {
    match format {
        Format::TrecDlCandidates => read_candidates(path, opts, sink),
        Format::Text => read_text_file(path, opts, sink),
        Format::Smart => read_smart(path, opts, sink),
        Format::Html => read_html_file(path, opts, sink),
        _ => read_json_lines(format, path, opts, sink),
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> CollectionError + '_ {
    move |source| CollectionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn bad(path: &Path, line: u64, reason: impl Into<String>) -> Item {
    Item::Bad(BadRecord {
        path: path.to_path_buf(),
        line,
        reason: reason.into(),
    })
}

/// A string field; numbers are accepted and printed (some collections use numeric ids).
fn str_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    match obj.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn required(obj: &Map<String, Value>, key: &str) -> std::result::Result<String, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Err(format!("missing field \"{key}\"")),
        Some(Value::String(s)) if s.trim().is_empty() => Err(format!("empty field \"{key}\"")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(other) => Err(format!(
            "field \"{key}\" is not a string: {}",
            type_name(other)
        )),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn read_json_lines(
    format: Format,
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(Item) -> Result<()>,
) -> Result<()> {
    let mut reader = open(path, opts)?;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let line = match std::str::from_utf8(&buf) {
            Ok(s) => s.trim(),
            Err(e) => {
                sink(bad(path, line_no, format!("invalid UTF-8: {e}")))?;
                continue;
            }
        };
        if line.is_empty() {
            continue;
        }
        let obj = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(obj)) => obj,
            Ok(other) => {
                sink(bad(
                    path,
                    line_no,
                    format!("expected a JSON object, found {}", type_name(&other)),
                ))?;
                continue;
            }
            Err(e) => {
                sink(bad(path, line_no, format!("invalid JSON: {e}")))?;
                continue;
            }
        };
        match format {
            Format::MsmarcoV21Doc => match doc_record_parts(&obj) {
                Ok((docid, url, title, headings, body)) => {
                    for p in segment_document(&body, &opts.segmenter) {
                        let record = Record {
                            id: format!("{docid}#{}", p.index),
                            title: title.clone(),
                            url: url.clone(),
                            headings: headings.clone(),
                            text: p.text,
                            doc_id: Some(docid.clone()),
                            start_char: Some(p.char_start as u64),
                            end_char: Some(p.char_end as u64),
                            meta: None,
                        };
                        sink(Item::Record {
                            line: line_no,
                            record,
                        })?;
                    }
                }
                Err(reason) => sink(bad(path, line_no, reason))?,
            },
            _ => match json_record(format, &obj) {
                Ok(record) => sink(Item::Record {
                    line: line_no,
                    record,
                })?,
                Err(reason) => sink(bad(path, line_no, reason))?,
            },
        }
    }
    Ok(())
}

type DocParts = (String, String, String, String, String);

fn doc_record_parts(obj: &Map<String, Value>) -> std::result::Result<DocParts, String> {
    let docid = required(obj, "docid")?;
    let body = required(obj, "body")?;
    Ok((
        docid,
        str_field(obj, "url").unwrap_or_default(),
        str_field(obj, "title").unwrap_or_default(),
        str_field(obj, "headings").unwrap_or_default(),
        body,
    ))
}

fn json_record(format: Format, obj: &Map<String, Value>) -> std::result::Result<Record, String> {
    match format {
        Format::MsmarcoV21Segmented => {
            let id = required(obj, "docid")?;
            let text = required(obj, "segment")?;
            let offset = |key: &str| -> std::result::Result<Option<u64>, String> {
                match obj.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Number(n)) => n
                        .as_u64()
                        .map(Some)
                        .ok_or_else(|| format!("field \"{key}\" is not a non-negative integer")),
                    Some(other) => Err(format!(
                        "field \"{key}\" is not a number: {}",
                        type_name(other)
                    )),
                }
            };
            let doc_id = id.split_once('#').map(|(d, _)| d.to_string());
            Ok(Record {
                title: str_field(obj, "title").unwrap_or_default(),
                url: str_field(obj, "url").unwrap_or_default(),
                headings: str_field(obj, "headings").unwrap_or_default(),
                start_char: offset("start_char")?,
                end_char: offset("end_char")?,
                doc_id,
                id,
                text,
                meta: None,
            })
        }
        Format::IkatPassages => {
            // Either `id` or the (`doc_id`, `passage_id`) pair of the iKAT passage-text files.
            let (id, doc_id) = match str_field(obj, "id") {
                Some(id) if !id.trim().is_empty() => {
                    let doc = id.rsplit_once(':').map(|(d, _)| d.to_string());
                    (id, doc)
                }
                _ => match (str_field(obj, "doc_id"), str_field(obj, "passage_id")) {
                    (Some(d), Some(p)) if !d.is_empty() && !p.is_empty() => {
                        (format!("{d}:{p}"), Some(d))
                    }
                    _ => return Err("missing field \"id\" (or \"doc_id\" + \"passage_id\")".into()),
                },
            };
            let text = ["contents", "text", "passage_text", "passage"]
                .iter()
                .find_map(|k| str_field(obj, k))
                .filter(|t| !t.trim().is_empty())
                .ok_or("missing field \"contents\" (or \"text\"/\"passage_text\")")?;
            Ok(Record {
                id,
                title: str_field(obj, "title").unwrap_or_default(),
                url: str_field(obj, "url").unwrap_or_default(),
                text,
                doc_id,
                ..Default::default()
            })
        }
        Format::Poleval => {
            let id = required(obj, "id")?;
            let text = required(obj, "text")?;
            let meta = obj
                .get("meta")
                .filter(|m| !m.is_null())
                .map(|m| m.to_string());
            Ok(Record {
                id,
                title: str_field(obj, "title").unwrap_or_default(),
                text,
                meta,
                ..Default::default()
            })
        }
        Format::Jsonl => {
            let id = required(obj, "id")?;
            let (title, text) = match str_field(obj, "contents") {
                Some(c) => (String::new(), c),
                None => match str_field(obj, "text") {
                    Some(t) => (str_field(obj, "title").unwrap_or_default(), t),
                    None => return Err("missing field \"contents\" (or \"text\")".into()),
                },
            };
            if title.trim().is_empty() && text.trim().is_empty() {
                return Err("empty \"contents\"".into());
            }
            Ok(Record {
                id,
                title,
                url: str_field(obj, "url").unwrap_or_default(),
                text,
                ..Default::default()
            })
        }
        _ => Err(format!("format {format} is not line-delimited JSON")),
    }
}

/// `[{"query": ..., "hits": [{"content", "docid", ...}]}]`: the whole file is one JSON array, so
/// it is read at once (these files are small); line numbers come from each hit's position.
fn read_candidates(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(Item) -> Result<()>,
) -> Result<()> {
    let mut text = String::new();
    open(path, opts)?
        .read_to_string(&mut text)
        .map_err(io_err(path))?;
    // Offsets only grow while walking the array, so lines are counted incrementally.
    let mut counted = (0usize, 1u64); // (byte offset, line at that offset)
    let mut line_of = |ptr: *const u8| -> u64 {
        let off = (ptr as usize)
            .saturating_sub(text.as_ptr() as usize)
            .min(text.len());
        if off < counted.0 {
            counted = (0, 1);
        }
        counted.1 += text.as_bytes()[counted.0..off]
            .iter()
            .filter(|b| **b == b'\n')
            .count() as u64;
        counted.0 = off;
        counted.1
    };
    let queries: Vec<&serde_json::value::RawValue> = match serde_json::from_str(&text) {
        Ok(q) => q,
        Err(e) => {
            // The whole file is unreadable: one bad record at the parser's line.
            return sink(bad(
                path,
                e.line() as u64,
                format!("invalid JSON candidates file: {e}"),
            ));
        }
    };
    let mut seen = std::collections::HashSet::new();
    for raw in queries {
        let line = line_of(raw.get().as_ptr());
        #[derive(serde::Deserialize)]
        struct Query<'a> {
            #[serde(borrow)]
            hits: Vec<&'a serde_json::value::RawValue>,
        }
        let q: Query = match serde_json::from_str(raw.get()) {
            Ok(q) => q,
            Err(e) => {
                sink(bad(path, line, format!("invalid query entry: {e}")))?;
                continue;
            }
        };
        for hit in q.hits {
            let line = line_of(hit.get().as_ptr());
            let obj = match serde_json::from_str::<Value>(hit.get()) {
                Ok(Value::Object(o)) => o,
                Ok(_) => {
                    sink(bad(path, line, "hit is not a JSON object"))?;
                    continue;
                }
                Err(e) => {
                    sink(bad(path, line, format!("invalid hit: {e}")))?;
                    continue;
                }
            };
            let rec = required(&obj, "docid").and_then(|id| {
                let text = required(&obj, "content")?;
                Ok(Record {
                    id,
                    text,
                    title: str_field(&obj, "title").unwrap_or_default(),
                    ..Default::default()
                })
            });
            match rec {
                // The same passage is a candidate of several queries: index it once, silently.
                Ok(r) if !seen.insert(r.id.clone()) => {}
                Ok(record) => sink(Item::Record { line, record })?,
                Err(reason) => sink(bad(path, line, reason))?,
            }
        }
    }
    Ok(())
}

/// A plain text or Markdown file: one document whose id is its path relative to the input root;
/// the title is the first Markdown heading (or the first line), headings are all `#` lines.
/// The whole file as UTF-8, or the bad record naming the line of the first invalid byte.
fn read_utf8(path: &Path, opts: &ReadOptions) -> Result<std::result::Result<String, Item>> {
    let mut bytes = Vec::new();
    open(path, opts)?
        .read_to_end(&mut bytes)
        .map_err(io_err(path))?;
    Ok(String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = 1 + good.iter().filter(|b| **b == b'\n').count() as u64;
        bad(path, line, format!("invalid UTF-8: {}", e.utf8_error()))
    }))
}

/// A document's id: its path under the directory that was indexed, without `.gz`.
fn relative_doc_id(path: &Path, opts: &ReadOptions) -> String {
    let rel = opts
        .root
        .as_deref()
        .and_then(|r| path.strip_prefix(r).ok())
        .unwrap_or(path);
    let docid = rel.to_string_lossy().replace('\\', "/");
    docid.strip_suffix(".gz").unwrap_or(&docid).to_string()
}

fn read_text_file(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(Item) -> Result<()>,
) -> Result<()> {
    let body = match read_utf8(path, opts)? {
        Ok(body) => body,
        Err(bad) => return sink(bad),
    };
    let docid = relative_doc_id(path, opts);
    let markdown_headings: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .map(|h| h.trim_start_matches('#').trim())
        .filter(|h| !h.is_empty())
        .collect();
    let title = markdown_headings
        .first()
        .map(|s| s.to_string())
        .or_else(|| {
            body.lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_default();
    let headings = markdown_headings.join("\n");
    let passages = segment_document(&body, &opts.segmenter);
    if passages.is_empty() {
        return sink(bad(path, 1, "empty document"));
    }
    for p in passages {
        let line = 1 + body
            .chars()
            .take(p.char_start)
            .filter(|c| *c == '\n')
            .count() as u64;
        let record = Record {
            id: format!("{docid}#{}", p.index),
            title: title.clone(),
            url: String::new(),
            headings: headings.clone(),
            text: p.text,
            doc_id: Some(docid.clone()),
            start_char: Some(p.char_start as u64),
            end_char: Some(p.char_end as u64),
            meta: None,
        };
        sink(Item::Record { line, record })?;
    }
    Ok(())
}

/// An HTML page: one record per passage of each section (`file#anchor:n`). HTML has no useful
/// line numbers after parsing, so every passage of a page reports line 1.
fn read_html_file(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(Item) -> Result<()>,
) -> Result<()> {
    let body = match read_utf8(path, opts)? {
        Ok(body) => body,
        Err(bad) => return sink(bad),
    };
    let docid = relative_doc_id(path, opts);
    let doc = html::parse(&body);
    let passages = html::passages(&doc, &docid, &opts.segmenter);
    if passages.is_empty() {
        return sink(bad(path, 1, "no text in the page"));
    }
    for p in passages {
        let record = Record {
            id: p.id,
            title: p.title,
            url: String::new(),
            headings: p.headings,
            text: p.text,
            doc_id: Some(docid.clone()),
            start_char: Some(p.start_char),
            end_char: Some(p.end_char),
            meta: None,
        };
        sink(Item::Record { line: 1, record })?;
    }
    Ok(())
}

/// SMART format (Cranfield `cran.all.1400`): `.I id`, then `.T` title, `.A` authors, `.B`
/// bibliography, `.W` text sections, each running until the next `.X` marker line.
fn read_smart(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(Item) -> Result<()>,
) -> Result<()> {
    let reader = open(path, opts)?;
    let mut current: Option<(u64, String, [String; 4])> = None; // line, id, [T, A, B, W]
    let mut section: Option<usize> = None;
    let flush = |cur: Option<(u64, String, [String; 4])>,
                 sink: &mut dyn FnMut(Item) -> Result<()>|
     -> Result<()> {
        if let Some((line, id, [t, a, _b, w])) = cur {
            let title = t.split_whitespace().collect::<Vec<_>>().join(" ");
            let text = w.split_whitespace().collect::<Vec<_>>().join(" ");
            if title.is_empty() && text.is_empty() {
                return sink(bad(
                    path,
                    line,
                    format!("document {id} has no .T or .W text"),
                ));
            }
            let authors = a.split_whitespace().collect::<Vec<_>>().join(" ");
            let meta = (!authors.is_empty())
                .then(|| serde_json::json!({ "authors": authors }).to_string());
            sink(Item::Record {
                line,
                record: Record {
                    id,
                    title,
                    text,
                    meta,
                    ..Default::default()
                },
            })?;
        }
        Ok(())
    };
    for (i, line) in reader.split(b'\n').enumerate() {
        let line_no = i as u64 + 1;
        let bytes = line.map_err(io_err(path))?;
        let line = String::from_utf8_lossy(&bytes);
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix(".I") {
            flush(current.take(), sink)?;
            let id = rest.trim();
            if id.is_empty() {
                sink(bad(path, line_no, ".I without a document id"))?;
                section = None;
                continue;
            }
            current = Some((line_no, id.to_string(), Default::default()));
            section = None;
            continue;
        }
        let marker = match line.trim_end() {
            ".T" => Some(Some(0)),
            ".A" => Some(Some(1)),
            ".B" => Some(Some(2)),
            ".W" => Some(Some(3)),
            l if l.len() == 2 && l.starts_with('.') && l.as_bytes()[1].is_ascii_uppercase() => {
                Some(None)
            }
            _ => None,
        };
        match marker {
            Some(s) => {
                if current.is_none() {
                    sink(bad(path, line_no, "section marker before any .I line"))?;
                }
                section = s;
            }
            None => {
                if let (Some((_, _, parts)), Some(s)) = (current.as_mut(), section) {
                    parts[s].push_str(line);
                    parts[s].push('\n');
                } else if !line.trim().is_empty() && current.is_none() {
                    sink(bad(path, line_no, "text before any .I line"))?;
                }
            }
        }
    }
    flush(current.take(), sink)
}
