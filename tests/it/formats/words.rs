//! convrag's word counts against the organizers' tools: `tests/fixtures/trec_rag/word_counts.jsonl`
//! was produced by `scripts/word_count_reference.py` with spaCy 3.8 (`spacy.tokenizer.Tokenizer`)
//! and Python's `unicodedata` NFKC + `str.split()`.

use crate::support::fixture;
use convrag::formats::words;

#[test]
fn word_counts_match_reference_tools() {
    let path = fixture("trec_rag/word_counts.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let mut n = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let t = v["text"].as_str().unwrap();
        assert_eq!(
            words::spacy_whitespace_tokens(t) as u64,
            v["spacy_tokens"].as_u64().unwrap(),
            "spaCy: {t:?}"
        );
        assert_eq!(
            words::trec_rag_sentence_words(t) as u64,
            v["trec_rag_words"].as_u64().unwrap(),
            "NFKC split: {t:?}"
        );
        n += 1;
    }
    assert!(n >= 19);
}
