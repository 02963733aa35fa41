//! The Porter stemmer exactly as NLTK's `PorterStemmer()` (mode NLTK_EXTENSIONS) computes it,
//! which is what `rouge-score` uses. `rust-stemmers` only ships Snowball (Porter2) English, which
//! stems differently (e.g. "generously"), so this is a port of NLTK's rules, checked against NLTK
//! on real words (tests/eval_rouge.rs).
//!
//! Input is expected lower-case ASCII (rouge-score's tokens are `[a-z0-9]+`); other characters
//! are treated as consonants, as NLTK does.

/// Stems one word (lower-cased first, as NLTK does).
pub fn stem(word: &str) -> String {
    let w = word.to_lowercase();
    if let Some(s) = irregular(&w) {
        return s.to_string();
    }
    if word.chars().count() <= 2 {
        return w;
    }
    let mut s: Vec<u8> = w.into_bytes();
    // Non-ASCII input: NLTK works on characters; stemming rules only touch ASCII suffixes, so a
    // byte view is equivalent for suffix tests, but measures differ. Keep non-ASCII words intact.
    if !s.is_ascii() {
        return String::from_utf8(s).unwrap_or_default();
    }
    s = step1a(s);
    s = step1b(s);
    s = step1c(s);
    s = step2(s);
    s = step3(s);
    s = step4(s);
    s = step5a(s);
    s = step5b(s);
    String::from_utf8(s).expect("ASCII")
}

fn irregular(w: &str) -> Option<&'static str> {
    Some(match w {
        "sky" | "skies" => "sky",
        "dying" => "die",
        "lying" => "lie",
        "tying" => "tie",
        "news" => "news",
        "innings" | "inning" => "inning",
        "outings" | "outing" => "outing",
        "cannings" | "canning" => "canning",
        "howe" => "howe",
        "proceed" => "proceed",
        "exceed" => "exceed",
        "succeed" => "succeed",
        _ => return None,
    })
}

fn is_vowel(c: u8) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u')
}

/// Consonant flags: `y` is a consonant at the start or after a vowel, a vowel after a consonant.
fn consonant_flags(w: &[u8]) -> Vec<bool> {
    let mut flags: Vec<bool> = Vec::with_capacity(w.len());
    for (i, &c) in w.iter().enumerate() {
        let f = if is_vowel(c) {
            false
        } else if c == b'y' {
            i == 0 || !flags[i - 1]
        } else {
            true
        };
        flags.push(f);
    }
    flags
}

fn is_consonant(w: &[u8], i: usize) -> bool {
    consonant_flags(&w[..=i])[i]
}

/// m in [C](VC)^m[V]: the number of vowel→consonant transitions.
fn measure(stem: &[u8]) -> usize {
    let f = consonant_flags(stem);
    f.windows(2).filter(|p| !p[0] && p[1]).count()
}

fn contains_vowel(stem: &[u8]) -> bool {
    consonant_flags(stem).iter().any(|&c| !c)
}

fn ends_double_consonant(w: &[u8]) -> bool {
    let n = w.len();
    n >= 2 && w[n - 1] == w[n - 2] && is_consonant(w, n - 1)
}

fn ends_cvc(w: &[u8]) -> bool {
    let n = w.len();
    (n >= 3
        && is_consonant(w, n - 3)
        && !is_consonant(w, n - 2)
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], b'w' | b'x' | b'y'))
        || (n == 2 && !is_consonant(w, 0) && is_consonant(w, 1))
}

enum Cond {
    None,
    PositiveMeasure,
    MeasureGt1,
    /// Step 4's `ion`: m > 1 and the stem ends in s or t.
    IonStem,
    /// Step 2's NLTK `logi` rule: m(word[:-3]) > 0.
    Logi,
}

/// Replacement of the `*d` rule (double consonant).
const DOUBLE: &str = "*d";

/// NLTK's `_apply_rule_list`: the first rule whose suffix matches decides.
fn apply_rules(word: Vec<u8>, rules: &[(&str, &str, Cond)]) -> Vec<u8> {
    for (suffix, replacement, cond) in rules {
        let stem: &[u8] = if *suffix == DOUBLE {
            if !ends_double_consonant(&word) {
                continue;
            }
            &word[..word.len() - 2]
        } else if word.ends_with(suffix.as_bytes()) {
            &word[..word.len() - suffix.len()]
        } else {
            continue;
        };
        let ok = match cond {
            Cond::None => true,
            Cond::PositiveMeasure => measure(stem) > 0,
            Cond::MeasureGt1 => measure(stem) > 1,
            Cond::IonStem => measure(stem) > 1 && matches!(stem.last(), Some(b's' | b't')),
            Cond::Logi => measure(&word[..word.len() - 3]) > 0,
        };
        if ok {
            let mut out = stem.to_vec();
            out.extend_from_slice(replacement.as_bytes());
            return out;
        }
        return word;
    }
    word
}

fn replace_suffix(word: &[u8], suffix: &str, replacement: &str) -> Vec<u8> {
    let mut out = word[..word.len() - suffix.len()].to_vec();
    out.extend_from_slice(replacement.as_bytes());
    out
}

fn step1a(w: Vec<u8>) -> Vec<u8> {
    if w.ends_with(b"ies") && w.len() == 4 {
        return replace_suffix(&w, "ies", "ie");
    }
    apply_rules(
        w,
        &[
            ("sses", "ss", Cond::None),
            ("ies", "i", Cond::None),
            ("ss", "ss", Cond::None),
            ("s", "", Cond::None),
        ],
    )
}

fn step1b(w: Vec<u8>) -> Vec<u8> {
    if w.ends_with(b"ied") {
        return if w.len() == 4 {
            replace_suffix(&w, "ied", "ie")
        } else {
            replace_suffix(&w, "ied", "i")
        };
    }
    if w.ends_with(b"eed") {
        let stem = &w[..w.len() - 3];
        return if measure(stem) > 0 {
            replace_suffix(&w, "eed", "ee")
        } else {
            w
        };
    }
    let mut intermediate = None;
    for suffix in ["ed", "ing"] {
        if w.ends_with(suffix.as_bytes()) {
            let stem = &w[..w.len() - suffix.len()];
            if contains_vowel(stem) {
                intermediate = Some(stem.to_vec());
                break;
            }
        }
    }
    let Some(stem) = intermediate else {
        return w;
    };
    for (suffix, replacement) in [("at", "ate"), ("bl", "ble"), ("iz", "ize")] {
        if stem.ends_with(suffix.as_bytes()) {
            return replace_suffix(&stem, suffix, replacement);
        }
    }
    if ends_double_consonant(&stem) {
        let last = *stem.last().expect("double consonant");
        return if !matches!(last, b'l' | b's' | b'z') {
            stem[..stem.len() - 1].to_vec()
        } else {
            stem
        };
    }
    if measure(&stem) == 1 && ends_cvc(&stem) {
        let mut out = stem;
        out.push(b'e');
        return out;
    }
    stem
}

fn step1c(w: Vec<u8>) -> Vec<u8> {
    if w.ends_with(b"y") {
        let stem = &w[..w.len() - 1];
        if stem.len() > 1 && is_consonant(stem, stem.len() - 1) {
            return replace_suffix(&w, "y", "i");
        }
    }
    w
}

fn step2(w: Vec<u8>) -> Vec<u8> {
    if w.ends_with(b"alli") && measure(&w[..w.len() - 4]) > 0 {
        return step2(replace_suffix(&w, "alli", "al"));
    }
    use Cond::PositiveMeasure as M;
    apply_rules(
        w,
        &[
            ("ational", "ate", M),
            ("tional", "tion", M),
            ("enci", "ence", M),
            ("anci", "ance", M),
            ("izer", "ize", M),
            ("bli", "ble", M),
            ("alli", "al", M),
            ("entli", "ent", M),
            ("eli", "e", M),
            ("ousli", "ous", M),
            ("ization", "ize", M),
            ("ation", "ate", M),
            ("ator", "ate", M),
            ("alism", "al", M),
            ("iveness", "ive", M),
            ("fulness", "ful", M),
            ("ousness", "ous", M),
            ("aliti", "al", M),
            ("iviti", "ive", M),
            ("biliti", "ble", M),
            ("fulli", "ful", M),
            ("logi", "log", Cond::Logi),
        ],
    )
}

fn step3(w: Vec<u8>) -> Vec<u8> {
    use Cond::PositiveMeasure as M;
    apply_rules(
        w,
        &[
            ("icate", "ic", M),
            ("ative", "", M),
            ("alize", "al", M),
            ("iciti", "ic", M),
            ("ical", "ic", M),
            ("ful", "", M),
            ("ness", "", M),
        ],
    )
}

fn step4(w: Vec<u8>) -> Vec<u8> {
    use Cond::MeasureGt1 as M;
    apply_rules(
        w,
        &[
            ("al", "", M),
            ("ance", "", M),
            ("ence", "", M),
            ("er", "", M),
            ("ic", "", M),
            ("able", "", M),
            ("ible", "", M),
            ("ant", "", M),
            ("ement", "", M),
            ("ment", "", M),
            ("ent", "", M),
            ("ion", "", Cond::IonStem),
            ("ou", "", M),
            ("ism", "", M),
            ("ate", "", M),
            ("iti", "", M),
            ("ous", "", M),
            ("ive", "", M),
            ("ize", "", M),
        ],
    )
}

fn step5a(w: Vec<u8>) -> Vec<u8> {
    if w.ends_with(b"e") {
        let stem = &w[..w.len() - 1];
        let m = measure(stem);
        if m > 1 || (m == 1 && !ends_cvc(stem)) {
            return stem.to_vec();
        }
    }
    w
}

fn step5b(w: Vec<u8>) -> Vec<u8> {
    if w.ends_with(b"ll") && measure(&w[..w.len() - 1]) > 1 {
        return w[..w.len() - 1].to_vec();
    }
    w
}

#[cfg(test)]
mod tests {
    use super::stem;

    #[test]
    fn classic_examples() {
        // Values from NLTK 3.x PorterStemmer() (NLTK_EXTENSIONS).
        for (w, s) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "tie"),
            ("caress", "caress"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflat"),
            ("troubled", "troubl"),
            ("sized", "size"),
            ("hopping", "hop"),
            ("falling", "fall"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("generously", "gener"),
            ("dying", "die"),
            ("skies", "sky"),
            ("controll", "control"),
            ("analogies", "analog"),
        ] {
            assert_eq!(stem(w), s, "{w}");
        }
    }
}
