//! A small English analyzer for sentence scoring: lower-cased alphanumeric tokens, stop words
//! removed, a light plural/suffix folding so "towers" meets "tower".

/// Common English function words (and question words, which carry no topical evidence).
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as",
    "at", "be", "because", "been", "before", "being", "between", "both", "but", "by", "can",
    "could", "did", "do", "does", "doing", "during", "each", "few", "for", "from", "further",
    "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "no", "nor",
    "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who",
    "whom", "why", "will", "with", "would", "you", "your", "yours", "tell", "know", "please",
    "can't", "don't", "s", "t", "much", "many",
];

/// Terms of `text` in order (duplicates kept).
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| fold(&w))
        .collect()
}

/// Light suffix folding (not a full stemmer: predictable and cheap).
fn fold(word: &str) -> String {
    let n = word.chars().count();
    if n > 4 {
        if let Some(stem) = word.strip_suffix("ies") {
            return format!("{stem}y");
        }
    }
    if n > 3 && word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyzes() {
        assert_eq!(
            terms("What are the Cities of France's towers? Bus, glass; 3.5"),
            vec!["citY", "france", "tower", "bus", "glass", "3", "5"]
                .into_iter()
                .map(|s| s.to_lowercase())
                .collect::<Vec<_>>()
        );
    }
}
