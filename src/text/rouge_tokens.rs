//! rouge-score's tokenizer (0.1.2): lower-case, every run of characters outside `[a-z0-9]`
//! becomes a space, split on whitespace, optionally NLTK-Porter-stem tokens longer than 3
//! characters. ROUGE uses it, and so do the PTKB ranker and rewriter, so that their terms are the
//! evaluation's.

/// rouge-score's tokenizer.
pub fn tokenize(text: &str, stem: bool) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut tokens = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, tokens: &mut Vec<String>| {
        if !cur.is_empty() {
            let t = std::mem::take(cur);
            // Python's len() counts characters; tokens are ASCII here.
            tokens.push(if stem && t.len() > 3 {
                super::porter_nltk::stem(&t)
            } else {
                t
            });
        }
    };
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            cur.push(c);
        } else {
            flush(&mut cur, &mut tokens);
        }
    }
    flush(&mut cur, &mut tokens);
    // rouge-score drops tokens that are not [a-z0-9]+ after stemming (never the case here).
    tokens.retain(|t| !t.is_empty());
    tokens
}
