//! A small English analyzer for sentence scoring: lower-cased alphanumeric tokens, stop words
//! removed, a light plural/suffix folding so "towers" meets "tower".

use super::stopwords;

/// Terms of `text` in order (duplicates kept).
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .filter(|w| !stopwords::SENTENCE_SCORING.contains(&w.as_str()))
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
