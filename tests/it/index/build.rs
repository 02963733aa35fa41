//! Indexing end to end on fixtures: search results and stored fields, bad records, `--strict`,
//! resume after an interruption, the registry, weighted queries, k1/b, run files, Polish.

use std::path::PathBuf;

use crate::support::fixture;
use convrag::collection::Format;
use convrag::formats::topics::{read_topics, Topic};
use convrag::index::topics::write_run;
use convrag::index::{
    index_collection, Bm25Params, CollectionRegistry, IndexOptions, Language, Retriever,
    SearchOptions, WeightedQuery,
};

fn opts(name: &str, format: Format, inputs: Vec<PathBuf>) -> IndexOptions {
    let mut o = IndexOptions::new(name, format);
    o.inputs = inputs;
    o.threads = 2;
    o.heap_bytes = 32 << 20;
    o
}

#[test]
fn segmented_shards_index_search_and_store_fields() {
    let home = tempfile::tempdir().unwrap();
    let mut o = opts(
        "rag",
        Format::MsmarcoV21Segmented,
        vec![fixture("msmarco/segmented")],
    );
    o.commit_bytes = 0;
    let r = index_collection(home.path(), &o).unwrap();
    assert_eq!(r.shards_indexed, 2);
    assert_eq!(r.passages_added, 6);
    assert_eq!(r.bad_records, 2);
    assert_eq!(r.duplicates, 1);
    assert_eq!(r.passages_total, 6);
    // Shards are read in parallel, so either copy of the duplicated id may come first.
    assert!(r.reported.iter().any(|b| b
        .reason
        .contains("duplicate id \"msmarco_v2.1_doc_27_1227892149#9_2462189991\"")));

    let registry = CollectionRegistry::new(home.path());
    let hits = registry.search("rag", "team rewards", 3).unwrap();
    assert_eq!(hits[0].id, "msmarco_v2.1_doc_27_1227892149#9_2462189991");
    assert!(hits[0].title.starts_with("How to use team rewards"));
    assert!(hits[0].text.starts_with("Takeaways for your practice"));
    assert!(hits[0].url.starts_with("http"));
    assert_eq!(hits[0].start_char, Some(5615));
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    let p = registry
        .get("rag")
        .unwrap()
        .passage("msmarco_v2.1_doc_21_342917233#2_743787198")
        .unwrap()
        .unwrap();
    assert_eq!(p.title, "Four Lessons in Adaptive Leadership");
    // A document's passages by the prefix of their ids, across both shards' segments.
    let rag = registry.get("rag").unwrap();
    assert_eq!(
        rag.ids_with_prefix("msmarco_v2.1_doc_21_342917233#", 10)
            .unwrap(),
        [
            "msmarco_v2.1_doc_21_342917233#2_743787198",
            "msmarco_v2.1_doc_21_342917233#3_743789509"
        ]
    );
    assert_eq!(
        rag.ids_with_prefix("msmarco_v2.1_doc_2", 2).unwrap().len(),
        2
    );
    assert_eq!(
        rag.ids_with_prefix("msmarco_v2.1_doc_2", 10).unwrap().len(),
        4
    );
    assert!(rag.ids_with_prefix("zzz", 10).unwrap().is_empty());
    assert!(registry
        .get("rag")
        .unwrap()
        .passage("nope")
        .unwrap()
        .is_none());

    let list = registry.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0].name.as_str(), list[0].passages, list[0].shards),
        ("rag", 6, 2)
    );
    assert!(matches!(
        registry.get("missing"),
        Err(convrag::index::IndexError::NotFound { .. })
    ));
    assert!(registry.get("../etc").is_err());
}

#[test]
fn strict_stops_at_first_bad_record_and_resume_skips_committed_shards() {
    let home = tempfile::tempdir().unwrap();
    let shard0 = fixture("msmarco/segmented/msmarco_v2.1_doc_segmented_00.json.gz");
    let shard1 = fixture("msmarco/segmented/msmarco_v2.1_doc_segmented_01.json.gz");
    // One shard per commit; --strict makes shard 01's bad line 2 fatal after shard 00 committed.
    let mut o = opts(
        "c",
        Format::MsmarcoV21Segmented,
        vec![shard0.clone(), shard1.clone()],
    );
    o.threads = 1;
    o.commit_bytes = 0;
    o.strict = true;
    let err = index_collection(home.path(), &o).unwrap_err().to_string();
    assert!(
        err.contains("msmarco_v2.1_doc_segmented_01.json.gz:2: invalid JSON"),
        "{err}"
    );
    let registry = CollectionRegistry::new(home.path());
    assert_eq!(
        registry.get("c").unwrap().num_passages(),
        4,
        "shard 00 stayed committed, shard 01 rolled back"
    );

    // Resume without --strict: shard 00 is not read again, shard 01 is.
    o.strict = false;
    let r = index_collection(home.path(), &o).unwrap();
    assert_eq!((r.shards_skipped, r.shards_indexed), (1, 1));
    assert_eq!(r.passages_added, 2);
    assert_eq!(
        r.duplicates, 1,
        "the id seen in the committed shard 00 is still known after resuming"
    );
    assert_eq!(r.passages_total, 6);
    let fresh = CollectionRegistry::new(home.path());
    assert_eq!(fresh.get("c").unwrap().num_passages(), 6);

    // A third run has nothing to do.
    let r = index_collection(home.path(), &o).unwrap();
    assert_eq!(
        (r.shards_skipped, r.shards_indexed, r.passages_added),
        (2, 0, 0)
    );

    // Optimize merges into one segment and keeps everything.
    o.inputs.clear();
    o.optimize = true;
    index_collection(home.path(), &o).unwrap();
    let fresh = CollectionRegistry::new(home.path());
    let ret = fresh.get("c").unwrap();
    assert_eq!(ret.num_passages(), 6);
    assert_eq!(ret.manifest().state.shards.len(), 2);

    // The collection's format cannot change under it.
    let o2 = opts("c", Format::Jsonl, vec![fixture("jsonl/collection.jsonl")]);
    assert!(index_collection(home.path(), &o2).is_err());
}

#[test]
fn every_format_indexes_and_finds_its_passages() {
    let home = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Format, Language, PathBuf, &str, &str)> = vec![
        (
            "docs",
            Format::MsmarcoV21Doc,
            Language::English,
            fixture("msmarco/docs"),
            "matcha",
            "msmarco_v2.1_doc_00_2#0",
        ),
        (
            "ikat",
            Format::IkatPassages,
            Language::English,
            fixture("ikat/passages_two_layouts.jsonl"),
            "yoga stress",
            "clueweb22-en0023-79-17324:0",
        ),
        (
            "pl",
            Format::Poleval,
            Language::Polish,
            fixture("poleval/passages.jl"),
            "Krzyżacy pod Grunwaldem",
            "wiki-1-0",
        ),
        (
            "json",
            Format::Jsonl,
            Language::English,
            fixture("jsonl/collection.jsonl"),
            "rodents",
            "d2",
        ),
        (
            "cand",
            Format::TrecDlCandidates,
            Language::English,
            fixture("trec_dl/candidates.json"),
            "arctic fox winter",
            "p3",
        ),
        (
            "text",
            Format::Text,
            Language::Neutral,
            fixture("text"),
            "kettles",
            "sub/notes.txt#0",
        ),
        (
            "smart",
            Format::Smart,
            Language::English,
            fixture("smart/mini.smart"),
            "hypersonic heating",
            "2",
        ),
        (
            "html",
            Format::Html,
            Language::English,
            fixture("html"),
            "build an index without locking out writes concurrently",
            "sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY:1",
        ),
    ];
    for (name, format, lang, input, query, expected) in cases {
        let mut o = opts(name, format, vec![input]);
        o.language = lang;
        index_collection(home.path(), &o).unwrap();
        let r = CollectionRegistry::new(home.path())
            .search(name, query, 1)
            .unwrap();
        assert_eq!(
            r.first().map(|h| h.id.as_str()),
            Some(expected),
            "{name}: {query}"
        );
    }
    let names: Vec<String> = CollectionRegistry::new(home.path())
        .list()
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(
        names,
        vec!["cand", "docs", "html", "ikat", "json", "pl", "smart", "text"]
    );
}

#[test]
fn weighted_query_and_bm25_parameters_change_scores() {
    let home = tempfile::tempdir().unwrap();
    index_collection(
        home.path(),
        &opts("j", Format::Jsonl, vec![fixture("jsonl/collection.jsonl")]),
    )
    .unwrap();
    let reg = CollectionRegistry::new(home.path());
    let r = reg.get("j").unwrap();
    let base = r.search("fox", 3).unwrap();
    assert_eq!(base.len(), 2);
    // A personalization part pulls d2 ("rodents") to the top.
    let q = WeightedQuery::text("fox").with("rodents", 0.5);
    let boosted = r.search_with(&q, &SearchOptions::top(3)).unwrap();
    assert_eq!(boosted[0].id, "d2");
    assert!(boosted[0].score > base.iter().find(|h| h.id == "d2").unwrap().score);
    // Weight zero removes a part; k1/b change scores.
    let zero = r
        .search_with(
            &WeightedQuery::text("fox").with("rodents", 0.0),
            &SearchOptions::top(3),
        )
        .unwrap();
    assert_eq!(zero, base);
    let mut o = SearchOptions::top(3);
    o.bm25 = Some(Bm25Params { k1: 1.2, b: 0.75 });
    let other = r.search_with(&WeightedQuery::text("fox"), &o).unwrap();
    assert_ne!(other[0].score, base[0].score);
    assert!(r.search("", 3).unwrap().is_empty());
    assert!(
        r.search("the and of", 3).unwrap().is_empty(),
        "only stopwords"
    );
}

#[test]
fn topics_and_trec_run_file() {
    let home = tempfile::tempdir().unwrap();
    index_collection(
        home.path(),
        &opts("j", Format::Jsonl, vec![fixture("jsonl/collection.jsonl")]),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("t.tsv");
    std::fs::write(&tsv, "q1\tfox\nq2\tnumeric ids\n").unwrap();
    let jsonl = dir.path().join("t.jsonl");
    std::fs::write(
        &jsonl,
        "{\"qid\": 3, \"query\": \"fox\"}\n{\"id\": \"q4\", \"title\": \"dog\"}\n",
    )
    .unwrap();
    assert_eq!(
        read_topics(&jsonl).unwrap(),
        vec![
            Topic {
                id: "3".into(),
                text: "fox".into()
            },
            Topic {
                id: "q4".into(),
                text: "dog".into()
            }
        ]
    );
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, "q1\tok\nno tab here\n").unwrap();
    let e = read_topics(&bad).unwrap_err().to_string();
    assert!(e.contains("bad.tsv:2: expected id<TAB>text"), "{e}");

    let reg = CollectionRegistry::new(home.path());
    let r = reg.get("j").unwrap();
    let out = dir.path().join("run.trec");
    let mut so = SearchOptions::top(10);
    so.with_fields = false;
    let n = write_run(r.as_ref(), &read_topics(&tsv).unwrap(), &so, "my-tag", &out).unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), n);
    let first: Vec<&str> = text.lines().next().unwrap().split(' ').collect();
    assert_eq!(
        (first[0], first[1], first[3], first[5]),
        ("q1", "Q0", "1", "my-tag")
    );
    assert!(text.lines().any(|l| l.starts_with("q2 Q0 7 1 ")));
    // A bad tag fails before anything is written.
    let out2 = dir.path().join("run2.trec");
    assert!(write_run(r.as_ref(), &[], &so, "bad tag", &out2).is_err());
    assert!(!out2.exists());
}

#[test]
fn hits_by_ordinal_carry_ids_scores_and_fields_and_skip_what_is_not_there() {
    let home = tempfile::tempdir().unwrap();
    let r = index_collection(
        home.path(),
        &opts(
            "rag",
            Format::MsmarcoV21Segmented,
            vec![fixture("msmarco/segmented")],
        ),
    )
    .unwrap();
    let retriever = CollectionRegistry::new(home.path()).get("rag").unwrap();
    // The truth: every live passage with its ordinal, as the passage walk reports them.
    let mut walked = Vec::new();
    retriever
        .for_each_passage(4, |hits| {
            walked.extend(hits.iter().cloned());
            Ok(())
        })
        .unwrap();
    assert_eq!(walked.len() as u64, r.passages_total);
    let (a, b) = (&walked[walked.len() - 1], &walked[0]);
    let (oa, ob) = (a.ordinal.unwrap(), b.ordinal.unwrap());
    let past = retriever.ordinal_count();
    let scored = [(oa, 0.9), (past, 0.5), (ob, 0.1)];
    let bare = retriever.hits_at(&scored, false).unwrap();
    let got: Vec<(&str, f32, Option<u64>)> = bare
        .iter()
        .map(|h| (h.id.as_str(), h.score, h.ordinal))
        .collect();
    assert_eq!(
        got,
        vec![
            (a.id.as_str(), 0.9, Some(oa)),
            (b.id.as_str(), 0.1, Some(ob))
        ],
        "an ordinal past the layout is left out"
    );
    assert!(bare[0].text.is_empty());
    let full = retriever.hits_at(&scored, true).unwrap();
    assert_eq!(
        (full[0].text.as_str(), full[0].score),
        (a.text.as_str(), 0.9)
    );
    assert_eq!(retriever.live_from(0), r.passages_total);
    assert_eq!(retriever.live_from(oa), 1, "the last live passage");
    assert_eq!(retriever.live_from(past), 0);
}
