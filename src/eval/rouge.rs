//! ROUGE-1 exactly as the `rouge-score` package (0.1.2) computes it: lower-case, every run of
//! characters outside `[a-z0-9]` becomes a space, split on whitespace, optionally Porter-stem
//! tokens longer than 3 characters (NLTK's stemmer, [`crate::text::porter_nltk`]), count unigram overlap.
//! `score(target, prediction)`: precision = overlap / |prediction|, recall = overlap / |target|
//! (denominators at least 1), F1 = 2PR/(P+R) or 0.

use std::collections::HashMap;

use serde::Serialize;

use crate::text::rouge_tokens::tokenize;

/// Precision, recall and F1 of one pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct RougeScore {
    pub precision: f64,
    pub recall: f64,
    pub fmeasure: f64,
}

/// ROUGE-1 of `prediction` against `target` (the reference).
pub fn rouge1(target: &str, prediction: &str, stem: bool) -> RougeScore {
    let t = tokenize(target, stem);
    let p = tokenize(prediction, stem);
    rouge1_tokens(&t, &p)
}

fn count_tokens(toks: &[String]) -> HashMap<&str, usize> {
    let mut m: HashMap<&str, usize> = HashMap::new();
    for t in toks {
        *m.entry(t.as_str()).or_default() += 1;
    }
    m
}

pub fn rouge1_tokens(target: &[String], prediction: &[String]) -> RougeScore {
    let tc = count_tokens(target);
    let pc = count_tokens(prediction);
    let overlap: usize = tc
        .iter()
        .map(|(k, &n)| n.min(pc.get(k).copied().unwrap_or(0)))
        .sum();
    let precision = overlap as f64 / prediction.len().max(1) as f64;
    let recall = overlap as f64 / target.len().max(1) as f64;
    let fmeasure = if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    };
    RougeScore {
        precision,
        recall,
        fmeasure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_like_rouge_score() {
        assert_eq!(
            tokenize("What's the U.S. GDP in 2020? Café!", false),
            ["what", "s", "the", "u", "s", "gdp", "in", "2020", "caf"]
        );
        assert_eq!(
            tokenize("running dogs are fun", true),
            ["run", "dog", "are", "fun"]
        );
    }

    #[test]
    fn counts_clipped_overlap() {
        let s = rouge1("the cat the cat", "the the the dog", false);
        assert_eq!(s.precision, 0.5);
        assert_eq!(s.recall, 0.5);
        assert_eq!(s.fmeasure, 0.5);
        assert_eq!(rouge1("", "", false), RougeScore::default());
    }
}
