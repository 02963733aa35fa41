//! Text analysis: the same code analyzes documents (as a tantivy tokenizer) and queries.
//!
//! - `english` mirrors Anserini's default (`DefaultEnglishAnalyzer` with Porter): Lucene's
//!   `StandardTokenizer` (approximated here: Unicode word segmentation rules of UAX #29 for
//!   letters, digits, `'`/`.`/`:` inside words and `,`/`.` inside numbers; ideographs one per
//!   token; tokens cut at 255 characters), `EnglishPossessiveFilter`, lower-casing, the 33
//!   stopwords of Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`, and the original Porter
//!   stemmer (`porter.rs`).
//! - `polish`: the same tokenizer, lower-casing, a short Polish stopword list and a light
//!   suffix-stripping stemmer (`polish_stem`), since no maintained Polish stemmer crate could be
//!   found for tantivy; it conflates the regular inflectional endings of nouns and adjectives and
//!   leaves irregular forms alone.
//! - `neutral`: tokenizer and lower-casing only, for any other language.

use tantivy::tokenizer::{TextAnalyzer, Token, TokenStream, Tokenizer};

use super::porter;
use crate::text::stopwords;

/// The analyzers a collection can be built with.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    English,
    Polish,
    Neutral,
}

impl Language {
    /// Name under which the analyzer is registered in tantivy's tokenizer manager.
    pub fn tokenizer_name(self) -> &'static str {
        match self {
            Language::English => "convrag_en",
            Language::Polish => "convrag_pl",
            Language::Neutral => "convrag_neutral",
        }
    }

    pub fn text_analyzer(self) -> TextAnalyzer {
        TextAnalyzer::from(AnalyzerTokenizer { language: self })
    }

    /// Analyzes `text` into index terms, in order.
    pub fn terms(self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        analyze(self, text, &mut |_, _, term| out.push(term));
        out
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Letter,
    Digit,
    ExtendNumLet,
    Extend,
    Ideo,
    MidLetter,
    MidNumLet,
    MidNum,
    SingleQuote,
    Other,
}

/// [`class_of`] for every ASCII character: indexing spends a tenth of its time classifying.
static ASCII_CLASSES: std::sync::LazyLock<[Class; 128]> = std::sync::LazyLock::new(|| {
    let mut t = [Class::Other; 128];
    for (i, c) in t.iter_mut().enumerate() {
        *c = class_of(char::from(i as u8));
    }
    t
});

fn class(c: char) -> Class {
    match ASCII_CLASSES.get(c as usize) {
        Some(k) => *k,
        None => class_of(c),
    }
}

fn class_of(c: char) -> Class {
    match c {
        '_'
        | '\u{203F}'
        | '\u{2040}'
        | '\u{2054}'
        | '\u{FE33}'
        | '\u{FE34}'
        | '\u{FE4D}'..='\u{FE4F}'
        | '\u{FF3F}' => Class::ExtendNumLet,
        '\'' => Class::SingleQuote,
        '.' | '\u{2018}' | '\u{2019}' | '\u{2024}' | '\u{FE52}' | '\u{FF07}' | '\u{FF0E}' => {
            Class::MidNumLet
        }
        ':' | '\u{00B7}' | '\u{0387}' | '\u{05F4}' | '\u{2027}' | '\u{FE13}' | '\u{FE55}'
        | '\u{FF1A}' => Class::MidLetter,
        ',' | ';' | '\u{037E}' | '\u{0589}' | '\u{060C}' | '\u{060D}' | '\u{066C}' | '\u{07F8}'
        | '\u{2044}' | '\u{FE10}' | '\u{FE14}' | '\u{FE50}' | '\u{FE54}' | '\u{FF0C}'
        | '\u{FF1B}' => Class::MidNum,
        '\u{0300}'..='\u{036F}'
        | '\u{1AB0}'..='\u{1AFF}'
        | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}'
        | '\u{FE20}'..='\u{FE2F}'
        | '\u{200C}'
        | '\u{200D}'
        | '\u{00AD}' => Class::Extend,
        '\u{3040}'..='\u{309F}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2FA1F}' => Class::Ideo,
        // Extended_Pictographic (emoji and symbols such as © ®): one token each, as Lucene's
        // StandardTokenizer emits <EMOJI> tokens.
        '\u{00A9}'
        | '\u{00AE}'
        | '\u{203C}'
        | '\u{2049}'
        | '\u{2122}'
        | '\u{2139}'
        | '\u{2194}'..='\u{2199}'
        | '\u{21A9}'
        | '\u{21AA}'
        | '\u{231A}'
        | '\u{231B}'
        | '\u{2328}'
        | '\u{23CF}'
        | '\u{23E9}'..='\u{23FA}'
        | '\u{24C2}'
        | '\u{25AA}'
        | '\u{25AB}'
        | '\u{25B6}'
        | '\u{25C0}'
        | '\u{25FB}'..='\u{25FE}'
        | '\u{2600}'..='\u{27BF}'
        | '\u{2934}'
        | '\u{2935}'
        | '\u{2B05}'..='\u{2B07}'
        | '\u{2B1B}'
        | '\u{2B1C}'
        | '\u{2B50}'
        | '\u{2B55}'
        | '\u{3030}'
        | '\u{303D}'
        | '\u{3297}'
        | '\u{3299}'
        | '\u{1F000}'..='\u{1FAFF}' => Class::Ideo,
        // Superscripts, fractions and other non-decimal numbers (¹ ² ½ …) are not word
        // characters in UAX #29 (Numeric there means decimal digits).
        '\u{00B2}'
        | '\u{00B3}'
        | '\u{00B9}'
        | '\u{00BC}'..='\u{00BE}'
        | '\u{2070}'..='\u{209F}'
        | '\u{2150}'..='\u{218F}'
        | '\u{2460}'..='\u{24FF}' => Class::Other,
        c if c.is_alphabetic() => Class::Letter,
        c if c.is_numeric() => Class::Digit,
        _ => Class::Other,
    }
}

const MAX_TOKEN_CHARS: usize = 255;

/// Word segmentation approximating Lucene's `StandardTokenizer`. Calls `emit(start, end)` with
/// byte offsets of each word.
pub fn standard_tokens(text: &str, emit: &mut dyn FnMut(usize, usize)) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = chars.len();
    let byte = |i: usize| if i < n { chars[i].0 } else { text.len() };
    let mut i = 0;
    while i < n {
        let c = class(chars[i].1);
        match c {
            Class::Ideo => {
                emit(byte(i), byte(i + 1));
                i += 1;
                continue;
            }
            Class::Letter | Class::Digit | Class::ExtendNumLet => {}
            _ => {
                i += 1;
                continue;
            }
        }
        let start = i;
        let mut last = c;
        let mut has_alnum = c != Class::ExtendNumLet;
        i += 1;
        while i < n {
            let k = class(chars[i].1);
            match k {
                Class::Extend => i += 1,
                Class::Letter | Class::Digit | Class::ExtendNumLet => {
                    last = k;
                    has_alnum |= k != Class::ExtendNumLet;
                    i += 1;
                }
                Class::MidLetter | Class::MidNumLet | Class::SingleQuote | Class::MidNum
                    if i + 1 < n =>
                {
                    let next = class(chars[i + 1].1);
                    let letters = last == Class::Letter
                        && next == Class::Letter
                        && matches!(k, Class::MidLetter | Class::MidNumLet | Class::SingleQuote);
                    let digits = last == Class::Digit
                        && next == Class::Digit
                        && matches!(k, Class::MidNum | Class::MidNumLet | Class::SingleQuote);
                    if letters || digits {
                        i += 2;
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
        if has_alnum {
            // Lucene splits over-long tokens into pieces of at most 255 characters.
            let mut s = start;
            while s < i {
                let e = (s + MAX_TOKEN_CHARS).min(i);
                emit(byte(s), byte(e));
                s = e;
            }
        }
    }
}

fn strip_possessive(word: &str) -> &str {
    for suffix in [
        "'s",
        "'S",
        "\u{2019}s",
        "\u{2019}S",
        "\u{FF07}s",
        "\u{FF07}S",
    ] {
        if let Some(w) = word.strip_suffix(suffix) {
            return w;
        }
    }
    word
}

/// Runs the full analysis chain of `language`, calling `emit(start, end, term)` per kept term.
/// Words whose Porter stem each indexing thread remembers; past this the memory is cleared.
const STEM_CACHE_WORDS: usize = 1 << 16;

thread_local! {
    static STEMS: std::cell::RefCell<std::collections::HashMap<String, String>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// `porter::stem(lower)`, remembered per thread: words follow Zipf's law, so most tokens are
/// words stemmed before (stemming was 30 % of indexing time; BENCHMARKS.md, "Indexing profile").
fn cached_stem(lower: String) -> String {
    STEMS.with(|cell| {
        let mut cache = cell.borrow_mut();
        if let Some(stem) = cache.get(&lower) {
            return stem.clone();
        }
        let stem = porter::stem(&lower);
        if cache.len() >= STEM_CACHE_WORDS {
            cache.clear();
        }
        cache.insert(lower, stem.clone());
        stem
    })
}

pub fn analyze(language: Language, text: &str, emit: &mut dyn FnMut(usize, usize, String)) {
    standard_tokens(text, &mut |s, e| {
        let raw = &text[s..e];
        let word = match language {
            Language::English => strip_possessive(raw),
            _ => raw,
        };
        if word.is_empty() {
            return;
        }
        let lower = word.to_lowercase();
        let term = match language {
            Language::English => {
                if stopwords::LUCENE_ENGLISH.contains(&lower.as_str()) {
                    return;
                }
                cached_stem(lower)
            }
            Language::Polish => {
                if stopwords::POLISH.contains(&lower.as_str()) {
                    return;
                }
                polish_stem(&lower)
            }
            Language::Neutral => lower,
        };
        emit(s, e, term);
    });
}

/// Polish inflectional endings, longest first. Stripped when at least 3 characters remain
/// (4 for endings of one character, which are ambiguous with short stems).
const POLISH_SUFFIXES: &[&str] = &[
    "owaniami", "owaniach", "ościami", "ościach", "owania", "owaniu", "owanie", "owaniem",
    "owałam", "owałem", "owała", "owało", "owali", "ującym", "ującej", "ującego", "ujący", "ująca",
    "ujące", "ością", "ości", "iego", "iemu", "owie", "owych", "owymi", "owego", "owemu", "owej",
    "owym", "owa", "owe", "owy", "ach", "ami", "ego", "emu", "ich", "imi", "iej", "ych", "ymi",
    "owi", "ów", "om", "em", "ej", "ie", "im", "ym", "ą", "ę", "a", "e", "i", "o", "u", "y",
];

/// A light Polish stemmer: strips the longest matching inflectional ending.
pub fn polish_stem(word: &str) -> String {
    let len = word.chars().count();
    for suffix in POLISH_SUFFIXES {
        if let Some(stem) = word.strip_suffix(suffix) {
            let slen = len - suffix.chars().count();
            let min = if suffix.chars().count() == 1 { 4 } else { 3 };
            if slen >= min {
                return stem.to_string();
            }
        }
    }
    word.to_string()
}

/// The tantivy side: one tokenizer that runs the whole chain (tokenize, possessives, lower case,
/// stopwords, stemming), so documents and queries are analyzed by the same function.
#[derive(Clone)]
pub struct AnalyzerTokenizer {
    pub language: Language,
}

pub struct VecTokenStream {
    tokens: Vec<Token>,
    index: usize,
}

impl TokenStream for VecTokenStream {
    fn advance(&mut self) -> bool {
        if self.index < self.tokens.len() {
            self.index += 1;
            true
        } else {
            false
        }
    }
    fn token(&self) -> &Token {
        &self.tokens[self.index - 1]
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.index - 1]
    }
}

impl Tokenizer for AnalyzerTokenizer {
    type TokenStream<'a> = VecTokenStream;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecTokenStream {
        let mut tokens = Vec::new();
        analyze(self.language, text, &mut |from, to, text| {
            let position = tokens.len();
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position,
                text,
                position_length: 1,
            });
        });
        VecTokenStream { tokens, index: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        standard_tokens(text, &mut |s, e| out.push(text[s..e].to_string()));
        out
    }

    #[test]
    fn standard_tokenizer_rules() {
        assert_eq!(
            words("U.S.A. costs $1,000.50 don't e-mail wi-fi x_y foo:bar 3.5x"),
            vec![
                "U.S.A", "costs", "1,000.50", "don't", "e", "mail", "wi", "fi", "x_y", "foo:bar",
                "3.5x"
            ]
        );
        assert_eq!(words("日本語 text"), vec!["日", "本", "語", "text"]);
        assert_eq!(words("  ...  "), Vec::<String>::new());
        assert_eq!(
            words("Acme© 10²m ½ cup"),
            vec!["Acme", "©", "10", "m", "cup"]
        );
    }

    #[test]
    fn english_chain_matches_anserini_behaviour() {
        assert_eq!(
            Language::English.terms("The Aerodynamics of the wing's slipstreams, and HEATED flows"),
            vec!["aerodynam", "wing", "slipstream", "heat", "flow"]
        );
        // Stopwords are Lucene's short list: "what"/"must" are kept.
        assert_eq!(
            Language::English.terms("what must be obeyed"),
            vec!["what", "must", "obei"]
        );
    }

    #[test]
    fn polish_chain_conflates_inflections() {
        let t = Language::Polish
            .terms("Władysław zakończył wojnę z Krzyżakami w bitwie pod Grunwaldem");
        assert_eq!(
            t,
            vec![
                "władysław",
                "zakończył",
                "wojn",
                "krzyżak",
                "bitw",
                "grunwald"
            ]
        );
        assert_eq!(polish_stem("wojna"), polish_stem("wojny"));
        assert_eq!(polish_stem("wojna"), polish_stem("wojnę"));
        assert_eq!(polish_stem("miastach"), polish_stem("miasto"));
        assert_eq!(polish_stem("kot"), "kot");
    }

    #[test]
    fn neutral_only_lowercases() {
        assert_eq!(
            Language::Neutral.terms("The Wings' FLIGHT"),
            vec!["the", "wings", "flight"]
        );
    }

    #[test]
    fn tantivy_tokenizer_emits_same_terms() {
        let mut analyzer = Language::English.text_analyzer();
        let mut stream = analyzer.token_stream("Heated high-speed aircraft");
        let mut got = Vec::new();
        while stream.advance() {
            got.push(stream.token().text.clone());
        }
        assert_eq!(got, Language::English.terms("Heated high-speed aircraft"));
        assert_eq!(got, vec!["heat", "high", "speed", "aircraft"]);
    }
}
