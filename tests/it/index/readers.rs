//! Every collection reader on small hand-made fixtures, including malformed records.

use std::path::Path;

use crate::support::fixture;
use convrag::collection::{
    list_inputs, read_file, BadRecord, Format, Item, ReadOptions, Record, SegmenterConfig,
};

fn read(format: Format, path: &Path, opts: &ReadOptions) -> (Vec<(u64, Record)>, Vec<BadRecord>) {
    let mut recs = Vec::new();
    let mut bad = Vec::new();
    read_file(format, path, opts, &mut |item| {
        match item {
            Item::Record { line, record } => recs.push((line, record)),
            Item::Bad(b) => bad.push(b),
        }
        Ok(())
    })
    .unwrap();
    (recs, bad)
}

fn lines_of(bad: &[BadRecord]) -> Vec<u64> {
    bad.iter().map(|b| b.line).collect()
}

#[test]
fn msmarco_segmented_shard_keeps_every_field() {
    let path = fixture("msmarco/segmented/msmarco_v2.1_doc_segmented_00.json.gz");
    let (recs, bad) = read(Format::MsmarcoV21Segmented, &path, &ReadOptions::default());
    assert!(bad.is_empty());
    assert_eq!(recs.len(), 4);
    let (line, r) = &recs[0];
    assert_eq!(*line, 1);
    assert_eq!(r.id, "msmarco_v2.1_doc_27_1227892149#9_2462189991");
    assert_eq!(r.doc_id.as_deref(), Some("msmarco_v2.1_doc_27_1227892149"));
    assert!(r.title.starts_with("How to use team rewards effectively"));
    assert!(r.url.starts_with("http"));
    assert!(!r.headings.is_empty());
    assert!(r.text.starts_with("Takeaways for your practice"));
    assert_eq!((r.start_char, r.end_char), (Some(5615), Some(6649)));
}

#[test]
fn msmarco_segmented_bad_records_name_file_and_line() {
    let path = fixture("msmarco/segmented/msmarco_v2.1_doc_segmented_01.json.gz");
    let (recs, bad) = read(Format::MsmarcoV21Segmented, &path, &ReadOptions::default());
    // Line 4 duplicates an id of shard 00: the reader passes it on; the indexer rejects it.
    assert_eq!(
        recs.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
        vec![1, 4, 5]
    );
    assert_eq!(lines_of(&bad), vec![2, 3]);
    assert!(bad[0].reason.contains("invalid JSON"), "{}", bad[0]);
    assert!(
        bad[1].reason.contains("missing field \"docid\""),
        "{}",
        bad[1]
    );
    let shown = bad[1].to_string();
    assert!(
        shown.contains("msmarco_v2.1_doc_segmented_01.json.gz:3: "),
        "{shown}"
    );
}

#[test]
fn msmarco_documents_are_segmented_with_offsets() {
    let path = fixture("msmarco/docs/msmarco_v2.1_doc_00.json");
    let (recs, bad) = read(Format::MsmarcoV21Doc, &path, &ReadOptions::default());
    assert_eq!(lines_of(&bad), vec![2]);
    assert!(bad[0].reason.contains("\"body\""));
    let ids: Vec<&str> = recs.iter().map(|(_, r)| r.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "msmarco_v2.1_doc_00_0#0",
            "msmarco_v2.1_doc_00_0#1",
            "msmarco_v2.1_doc_00_0#2",
            "msmarco_v2.1_doc_00_0#3",
            "msmarco_v2.1_doc_00_2#0"
        ]
    );
    let body: String = {
        let v: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        v["body"].as_str().unwrap().to_string()
    };
    let chars: Vec<char> = body.chars().collect();
    for (_, r) in &recs[..4] {
        let (s, e) = (r.start_char.unwrap() as usize, r.end_char.unwrap() as usize);
        assert_eq!(chars[s..e].iter().collect::<String>(), r.text);
        assert_eq!(r.title, "Fjords of Norway");
        assert_eq!(r.doc_id.as_deref(), Some("msmarco_v2.1_doc_00_0"));
    }
    assert!(recs[1].1.text.starts_with("Sentence number 5 "));
    assert!(recs[1]
        .1
        .text
        .ends_with("Sentence number 14 talks about glaciers and fjords in Norway."));
    // The last document has two sentences on one line and one on the next: one passage.
    assert_eq!(recs[4].1.text, "Green tea is made from unoxidized leaves. It is popular in Japan and China.\nMatcha is a powdered green tea.");

    // iKAT-style trimming to the first N characters.
    let opts = ReadOptions {
        segmenter: SegmenterConfig {
            max_chars: Some(200),
            ..Default::default()
        },
        ..Default::default()
    };
    let (recs, _) = read(Format::MsmarcoV21Doc, &path, &opts);
    assert_eq!(
        recs.iter()
            .filter(|(_, r)| r.id.starts_with("msmarco_v2.1_doc_00_0#"))
            .count(),
        1
    );
    assert!(recs[0].1.end_char.unwrap() <= 200);
}

#[test]
fn ikat_passages_accept_both_layouts() {
    let path = fixture("ikat/passages_two_layouts.jsonl");
    let (recs, bad) = read(Format::IkatPassages, &path, &ReadOptions::default());
    let ids: Vec<&str> = recs.iter().map(|(_, r)| r.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "clueweb22-en0000-32-08101:4",
            "clueweb22-en0023-79-17324:0",
            "clueweb22-en0001-00-00001:1"
        ]
    );
    assert_eq!(
        recs[1].1.doc_id.as_deref(),
        Some("clueweb22-en0023-79-17324")
    );
    assert_eq!(lines_of(&bad), vec![3]);
    assert!(bad[0].reason.contains("missing field \"id\""));
}

#[test]
fn poleval_passages_keep_meta() {
    let path = fixture("poleval/passages.jl");
    let (recs, bad) = read(Format::Poleval, &path, &ReadOptions::default());
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[0].1.title, "Bitwa pod Grunwaldem");
    assert_eq!(recs[0].1.meta.as_deref(), Some(r#"{"source":"wiki"}"#));
    assert_eq!(recs[1].1.meta, None);
    assert_eq!(lines_of(&bad), vec![4, 5]);
    assert!(bad[0]
        .reason
        .contains("expected a JSON object, found array"));
    assert!(bad[1].reason.contains("missing field \"text\""));
}

#[test]
fn jsonl_contents_or_title_and_text() {
    let path = fixture("jsonl/collection.jsonl");
    let (recs, bad) = read(Format::Jsonl, &path, &ReadOptions::default());
    let got: Vec<(u64, &str, &str, &str)> = recs
        .iter()
        .map(|(l, r)| (*l, r.id.as_str(), r.title.as_str(), &r.text[..10]))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, "d1", "", "The quick "),
            (2, "d2", "Foxes", "Red foxes "),
            (5, "7", "", "Numeric id")
        ]
    );
    assert_eq!(lines_of(&bad), vec![4]);
}

#[test]
fn trec_dl_candidates_dedupe_and_locate_bad_hits() {
    let path = fixture("trec_dl/candidates.json");
    let (recs, bad) = read(Format::TrecDlCandidates, &path, &ReadOptions::default());
    let ids: Vec<&str> = recs.iter().map(|(_, r)| r.id.as_str()).collect();
    assert_eq!(ids, vec!["p1", "p2", "p3"]);
    assert_eq!(recs[0].0, 5, "line of the first hit's opening brace");
    assert_eq!(bad.len(), 1);
    let text = std::fs::read_to_string(&path).unwrap();
    let expected_line = text
        .lines()
        .position(|l| l.contains("A hit without a docid"))
        .unwrap() as u64; // 1-based line of "{"
    assert_eq!(bad[0].line, expected_line);
    assert!(bad[0].reason.contains("missing field \"docid\""));

    // A file that is not JSON at all is one bad record at the parser's line.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "[\n  {\"query\": \"x\",\n  \"hits\": [ }\n]").unwrap();
    let (recs, bad) = read(Format::TrecDlCandidates, &broken, &ReadOptions::default());
    assert!(recs.is_empty());
    assert_eq!(lines_of(&bad), vec![3]);
}

#[test]
fn text_folder_files_are_documents_segmented_into_passages() {
    let root = fixture("text");
    let inputs = list_inputs(Format::Text, std::slice::from_ref(&root)).unwrap();
    let names: Vec<String> = inputs
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names,
        vec!["guide.md", "sub/notes.txt"],
        "ignored.bin is not text"
    );
    let opts = ReadOptions {
        root: Some(root.clone()),
        segmenter: SegmenterConfig {
            window: 2,
            stride: 1,
            max_chars: None,
        },
        ..Default::default()
    };
    let (recs, bad) = read(Format::Text, &inputs[0].path, &opts);
    assert!(bad.is_empty());
    assert_eq!(recs[0].1.id, "guide.md#0");
    assert_eq!(recs[0].1.title, "Brewing guide");
    assert_eq!(recs[0].1.headings, "Brewing guide\nSteeping");
    assert_eq!(recs[0].1.text, "# Brewing guide\n\nBoil the water.");
    assert_eq!(recs[1].0, 3, "second passage starts on line 3");
    let (recs, _) = read(Format::Text, &inputs[1].path, &opts);
    assert_eq!(recs[0].1.id, "sub/notes.txt#0");
}

#[test]
fn smart_collection_reads_sections() {
    let path = fixture("smart/mini.smart");
    let (recs, bad) = read(Format::Smart, &path, &ReadOptions::default());
    let ids: Vec<&str> = recs.iter().map(|(_, r)| r.id.as_str()).collect();
    assert_eq!(ids, vec!["1", "2", "4"]);
    assert_eq!(recs[0].1.title, "wing flutter at high speed .");
    assert!(recs[0].1.text.ends_with("studied in a wind tunnel ."));
    assert!(
        recs[1]
            .1
            .text
            .ends_with("a second text section is kept too ."),
        "both .W sections kept"
    );
    assert_eq!(
        lines_of(&bad),
        vec![18],
        "document 3 (.I on line 18) has no text"
    );
}

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let path = fixture("does-not-exist.jsonl");
    let err = read_file(Format::Jsonl, &path, &ReadOptions::default(), &mut |_| {
        Ok(())
    })
    .unwrap_err();
    assert!(err.to_string().contains("does-not-exist.jsonl"), "{err}");
}
