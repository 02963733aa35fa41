//! References to a list in the previous answer: "Which one is the quietest?", "compare the last
//! two options", "can I use any of them outdoors?". A manual rewrite names the items ("Which of
//! the Miele, Bosch and Dyson …"); carrying single history terms over cannot. [`resolve`] finds
//! the enumeration in the previous response and writes its items in place of the reference.
//!
//! Lists: the previous response with its numbering markers (`1.`, `2)`, `(3)`) turned into
//! commas, cut into clauses at `; : ! ?` and sentence ends; a clause is a list when its comma
//! parts (the last one split at its first " and "/" or ") trim to items: the first keeps its
//! trailing run of content words after "such as", "including", "are", … (at most 5 words), the
//! last its leading run (at most 5), the middle ones at most 6 words. Of the lists whose items
//! average at most 4 words, the longest is used: longer items are prose, not names. A numbered
//! list (markers 1, 2, 3, … in sequence) gives [`numbered_items`], each cut to its heading ("3)
//! Market Research: Conduct …"); ordinals ("the third step", "step 3") pick from it first. "The
//! best three" and "the other ones" (the items the utterance does not name) choose among the
//! items.

use std::sync::LazyLock;

use regex::Regex;

use super::{lexicon, terms};

/// Most words a middle item may have.
const MAX_MIDDLE_WORDS: usize = 6;
/// Most words kept of the first and the last item.
const MAX_EDGE_WORDS: usize = 5;
/// Longest average item, in words, of a list that is used.
const MAX_AVERAGE_WORDS: f64 = 4.0;
/// Fewest items for "which one" and "of them" (ordinals need two).
const MIN_ITEMS_FOR_ANY: usize = 3;
/// Most words kept of a numbered item.
const MAX_NUMBERED_WORDS: usize = 12;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern (unit-tested)")
}

static LEAD: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^.*\b(?:such as|including|includes?|like|namely|are|is|e\.g\.|for example|example)\b\s*",
    )
});
static LAST_AND: LazyLock<Regex> = LazyLock::new(|| regex(r"^(.*?)\s+(?:and|or)\s+(.*)$"));
static LEADING_AND: LazyLock<Regex> = LazyLock::new(|| regex(r"^(?:and|or)\s+"));
/// Nouns a list's items may be called by ("the last two options", "the third step"), as a
/// regex alternation: [`lexicon::LIST_ITEM_NOUNS`] and [`lexicon::STEP_NOUNS`].
fn item_nouns() -> String {
    let nouns: Vec<&str> = lexicon::LIST_ITEM_NOUNS
        .iter()
        .chain(lexicon::STEP_NOUNS)
        .copied()
        .collect();
    lexicon::alternation(&nouns)
}

/// Whether `noun` (as written) may name the items of any list, not only of a numbered one.
fn names_any_list(noun: &str) -> bool {
    lexicon::LIST_ITEM_NOUNS.contains(&noun.to_lowercase().as_str())
}

static ORDINAL_PAIR: LazyLock<Regex> = LazyLock::new(|| {
    let nouns = item_nouns();
    regex(&format!(
        r"(?i)\bthe (first|second|third|fourth|fifth|last) and (first|second|third|fourth|fifth|last)(?: (?P<noun>{nouns}))?\b"
    ))
});
static FIRST_OR_LAST_K: LazyLock<Regex> = LazyLock::new(|| {
    let nouns = item_nouns();
    regex(&format!(
        r"(?i)\bthe (first|last) (two|three|four)(?: (?P<noun>{nouns}))?\b"
    ))
});
static ORDINAL_ONE: LazyLock<Regex> = LazyLock::new(|| {
    let nouns = item_nouns();
    regex(&format!(
        r"(?i)\bthe (first|second|third|fourth|fifth|sixth|seventh|last) (?P<noun>{nouns})\b"
    ))
});
/// "step 3", "number 2", "option 4": an item of a numbered list.
static NUMBER_ONE: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\b(?:{}) (\d{{1,2}})\b",
        lexicon::alternation(lexicon::NUMBERED_ITEM_NOUNS)
    ))
});
/// "the best three", "the top two universities": a choice among the items.
static BEST_K: LazyLock<Regex> = LazyLock::new(|| {
    let nouns = item_nouns();
    regex(&format!(
        r"(?i)\bthe (?:best|top) (?:two|three|four|five)(?: (?:{nouns}))?\b"
    ))
});
/// "the other ones", "the other options": the items the utterance does not name.
static OTHER_ONES: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"(?i)\bthe other (?:{})\b",
        lexicon::alternation(lexicon::OTHER_ITEM_NOUNS)
    ))
});
static NUMBERS: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\bnumbers? (\d+) and (\d+)\b"));
static BOTH: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\b(?:the two|both)\b"));
static WHICH_ONE: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\bwhich (?:one|ones)\b"));
static OF_THEM: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(of|between|among) (?:them|these|those|the aforementioned|the above|the mentioned ones|the ones you mentioned)\b",
    )
});

fn is_stop(word: &str) -> bool {
    let bare: String = word
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        .collect();
    terms::is_stopword(&bare)
}

fn kept_inside(word: &str) -> bool {
    lexicon::NAME_PARTICLES.contains(&word.to_lowercase().as_str())
}

/// Numbering markers of `chars` (`1.`, `2)`, `(3)` after a space or at the start, before a
/// space or a letter): (start, end after the marker and its spaces, number). Empty unless both 1
/// and 2 are among them: "the iPhone 13. It has …" ends a sentence, it does not number.
fn numbering_markers(chars: &[char]) -> Vec<(usize, usize, u32)> {
    let mut markers: Vec<(usize, usize, u32)> = Vec::new();
    for i in 1..chars.len() {
        // After a space, or glued to the end of a sentence ("… corporation.3) Market …").
        let glued = matches!(chars[i - 1], '.' | ':') && i >= 2 && chars[i - 2].is_alphabetic();
        if !chars[i - 1].is_whitespace() && !glued {
            continue;
        }
        let j = if chars[i] == '(' { i + 1 } else { i };
        let digits = chars[j..].iter().take_while(|c| c.is_ascii_digit()).count();
        let end = j + digits;
        if (1..=2).contains(&digits)
            && end < chars.len()
            && (chars[end] == ')' || chars[end] == '.')
            && chars
                .get(end + 1)
                .is_some_and(|c| c.is_whitespace() || c.is_ascii_alphabetic())
        {
            let mut k = end + 1;
            while k < chars.len() && chars[k].is_whitespace() {
                k += 1;
            }
            let number: String = chars[j..end].iter().collect();
            markers.push((i, k, number.parse().unwrap_or(0)));
        }
    }
    let numbered = [1, 2].iter().all(|n| markers.iter().any(|m| m.2 == *n));
    if !numbered {
        markers.clear();
    }
    markers
}

/// `text` with its numbering markers ([`numbering_markers`]) replaced by ", ", and whitespace
/// runs made single spaces.
fn without_numbering(text: &str) -> String {
    let chars: Vec<char> = format!(" {text}").chars().collect();
    let markers = numbering_markers(&chars);
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    let mut next = markers.iter().peekable();
    while i < chars.len() {
        if let Some(&&(start, end, _)) = next.peek() {
            if start == i {
                out.push_str(", ");
                i = end;
                next.next();
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The items of the numbered list of `text` (markers 1, 2, 3, … in sequence), each cut to its
/// heading: the words before the first ":" or " - " ("Market Research: Conduct …"), else its
/// first sentence, at most [`MAX_NUMBERED_WORDS`] words. `None` without such a list.
pub fn numbered_items(text: &str) -> Option<Vec<String>> {
    let chars: Vec<char> = format!(" {text}").chars().collect();
    let markers = numbering_markers(&chars);
    // The run 1, 2, 3, … from the first marker numbered 1.
    let first = markers.iter().position(|m| m.2 == 1)?;
    let mut run: Vec<(usize, usize)> = Vec::new();
    for m in &markers[first..] {
        if m.2 as usize == run.len() + 1 {
            run.push((m.0, m.1));
        }
    }
    if run.len() < 2 {
        return None;
    }
    let mut items = Vec::with_capacity(run.len());
    for (k, &(_, body_start)) in run.iter().enumerate() {
        let body_end = run.get(k + 1).map_or(chars.len(), |next| next.0);
        let body: String = chars[body_start..body_end].iter().collect();
        let head = match body.find(':').or_else(|| body.find(" - ")) {
            Some(i) if body[..i].split_whitespace().count() <= MAX_NUMBERED_WORDS => &body[..i],
            _ => {
                let end = body
                    .char_indices()
                    .find(|&(i, c)| {
                        matches!(c, '.' | '!' | '?')
                            && body[i + 1..].chars().next().is_none_or(char::is_whitespace)
                    })
                    .map_or(body.len(), |(i, _)| i);
                &body[..end]
            }
        };
        let mut words: Vec<&str> = head.split_whitespace().take(MAX_NUMBERED_WORDS).collect();
        // A cut item ends on its last content word.
        while words.last().is_some_and(|w| is_stop(w)) {
            words.pop();
        }
        let item = words
            .join(" ")
            .trim_matches(|c: char| c == ',' || c == ';' || c == '.' || c == ' ')
            .to_string();
        if item.is_empty() {
            return None;
        }
        items.push(item);
    }
    Some(items)
}

/// Clauses of `text`: cut after `; ! ? :` followed by a space, at a period followed by spaces and
/// an upper-case letter, a digit or "(", and at a final period.
fn clauses(text: &str) -> Vec<String> {
    let t = without_numbering(text);
    let chars: Vec<char> = t.chars().collect();
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if matches!(c, ';' | '!' | '?' | ':') && next.is_some_and(char::is_whitespace) {
            parts.push(std::mem::take(&mut cur));
            i += 2;
            continue;
        }
        if c == '.' {
            if next.is_none() {
                parts.push(std::mem::take(&mut cur));
                i += 1;
                continue;
            }
            let mut k = i + 1;
            while k < chars.len() && chars[k].is_whitespace() {
                k += 1;
            }
            if k > i + 1
                && chars
                    .get(k)
                    .is_some_and(|n| n.is_uppercase() || n.is_ascii_digit() || *n == '(')
            {
                parts.push(std::mem::take(&mut cur));
                i = k;
                continue;
            }
        }
        cur.push(c);
        i += 1;
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| {
            p.trim_matches(|c| c == ' ' || c == ',' || c == '.')
                .to_string()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

fn trim_first(part: &str) -> String {
    let mut p = part;
    if let Some(m) = LEAD.find(part) {
        if m.end() < part.len() {
            p = &part[m.end()..];
        }
    }
    let mut out: Vec<&str> = Vec::new();
    for w in p.split_whitespace().rev() {
        if is_stop(w) && !kept_inside(w) {
            break;
        }
        out.insert(0, w);
        if out.len() >= MAX_EDGE_WORDS {
            break;
        }
    }
    while out.first().is_some_and(|w| is_stop(w)) {
        out.remove(0);
    }
    out.join(" ")
}

fn trim_last(part: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for w in part.split_whitespace() {
        if !out.is_empty() && is_stop(w) && !kept_inside(w) {
            break;
        }
        if out.is_empty() && is_stop(w) {
            continue;
        }
        out.push(w);
        if out.len() >= MAX_EDGE_WORDS {
            break;
        }
    }
    while out.last().is_some_and(|w| is_stop(w)) {
        out.pop();
    }
    out.join(" ")
}

/// A clause cut at its commas, except those between digits ("EUR 2,083" is one number).
fn split_items(clause: &str) -> Vec<String> {
    let chars: Vec<char> = clause.chars().collect();
    let mut parts = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let in_number = i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c == ',' && !in_number {
            parts.push(std::mem::take(&mut cur).trim().to_string());
        } else {
            cur.push(c);
        }
    }
    parts.push(cur.trim().to_string());
    parts
}

/// The enumerations of `text` with at least two items each.
pub fn lists_in(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for clause in clauses(text) {
        let mut parts: Vec<String> = split_items(&clause);
        let last = parts.pop().unwrap_or_default();
        match LAST_AND.captures(&last) {
            Some(c) => {
                parts.push(c[1].to_string());
                parts.push(c[2].to_string());
            }
            None => parts.push(last),
        }
        let parts: Vec<String> = parts
            .into_iter()
            .filter(|p| !p.is_empty())
            .map(|p| LEADING_AND.replace(&p, "").into_owned())
            .collect();
        if parts.len() < 2 {
            continue;
        }
        let n = parts.len();
        let items: Option<Vec<String>> = parts
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let item = if k == 0 {
                    trim_first(p)
                } else if k == n - 1 {
                    trim_last(p)
                } else if p.split_whitespace().count() > MAX_MIDDLE_WORDS {
                    return None;
                } else {
                    p.trim().to_string()
                };
                let item = item.trim_matches(|c| c == ' ' || c == '.').to_string();
                (!item.is_empty()).then_some(item)
            })
            .collect();
        if let Some(items) = items {
            found.push(items);
        }
    }
    found
}

/// "A", "A and B", "A, B, and C".
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        [init @ .., last] => format!("{}, and {last}", init.join(", ")),
    }
}

fn ordinal(word: &str) -> Option<isize> {
    let word = word.to_lowercase();
    lexicon::ORDINALS
        .iter()
        .find(|(w, _)| *w == word)
        .map(|&(_, k)| k)
}

fn item(list: &[String], k: isize) -> Option<&String> {
    if k < 0 {
        list.last()
    } else {
        list.get(k as usize)
    }
}

fn splice(u: &str, m: &regex::Match<'_>, with: &str) -> String {
    format!("{}{with}{}", &u[..m.start()], &u[m.end()..])
}

/// The utterance with its reference to a list of `previous_response` written out, if it has one.
/// Ordinals ("the third step", "the last two") pick from the numbered list when the response has
/// one, else from its longest short-item list; "which one", "of them" and "both" use the latter.
pub fn resolve(utterance: &str, previous_response: &str) -> Option<String> {
    let lists = lists_in(previous_response);
    let short = lists
        .iter()
        .filter(|l| {
            let words: usize = l.iter().map(|x| x.split_whitespace().count()).sum();
            words as f64 / l.len() as f64 <= MAX_AVERAGE_WORDS
        })
        // The first of the longest.
        .fold(None::<&Vec<String>>, |best, l| match best {
            Some(b) if b.len() >= l.len() => Some(b),
            _ => Some(l),
        });
    let numbered = numbered_items(previous_response);
    let ordered = numbered.as_ref().or(short)?;
    let u = utterance;
    if let Some(r) = by_position(u, ordered, numbered.is_some()) {
        return Some(r);
    }
    let best = short?;
    if best.len() == 2 {
        // "the two" / "both", unless followed by "of" ("both of them" reads on).
        if let Some(m) = BOTH.find_iter(u).find(|m| !u[m.end()..].starts_with(" of")) {
            return Some(splice(u, &m, &join(best)));
        }
    }
    if best.len() < MIN_ITEMS_FOR_ANY {
        return None;
    }
    if let Some(m) = OTHER_ONES.find(u) {
        let named: std::collections::HashSet<String> =
            terms::content_stems(u).into_iter().collect();
        let others: Vec<String> = best
            .iter()
            .filter(|i| !terms::content_stems(i).iter().any(|s| named.contains(s)))
            .cloned()
            .collect();
        if !others.is_empty() && others.len() < best.len() {
            return Some(splice(u, &m, &format!("the {}", join(&others))));
        }
    }
    if let Some(m) = BEST_K.find(u) {
        return Some(splice(
            u,
            &m,
            &format!("{} of the {}", m.as_str(), join(best)),
        ));
    }
    if let Some(m) = WHICH_ONE.find(u) {
        // Keep "which" as written ("Which" at the start of a question).
        let which = &u[m.start()..m.start() + 5];
        return Some(splice(u, &m, &format!("{which} of the {}", join(best))));
    }
    if let Some(c) = OF_THEM.captures(u) {
        let m = c.get(0)?;
        return Some(splice(u, &m, &format!("{} the {}", &c[1], join(best))));
    }
    None
}

/// References by position: "the first and last ones", "the last two", "the third step",
/// "numbers 2 and 3", and, in a numbered list (`numbered`), "step 3".
fn by_position(u: &str, list: &[String], numbered: bool) -> Option<String> {
    let n = list.len() as isize;
    // The noun after the ordinal may name items of this list.
    let fits = |c: &regex::Captures<'_>| {
        numbered || c.name("noun").is_none_or(|m| names_any_list(m.as_str()))
    };
    if let Some(c) = ORDINAL_PAIR.captures(u).filter(fits) {
        let (a, b) = (ordinal(&c[1])?, ordinal(&c[2])?);
        if a.max(b) < n {
            let pair = [item(list, a)?.clone(), item(list, b)?.clone()];
            return Some(splice(u, &c.get(0)?, &join(&pair)));
        }
    }
    if let Some(c) = FIRST_OR_LAST_K.captures(u).filter(fits) {
        let k = match c[2].to_lowercase().as_str() {
            "two" => 2,
            "three" => 3,
            _ => 4,
        };
        if k <= list.len() {
            let chosen = if c[1].eq_ignore_ascii_case("first") {
                &list[..k]
            } else {
                &list[list.len() - k..]
            };
            return Some(splice(u, &c.get(0)?, &join(chosen)));
        }
    }
    if let Some(c) = ORDINAL_ONE.captures(u).filter(fits) {
        let k = ordinal(&c[1])?;
        if k < n {
            return Some(splice(u, &c.get(0)?, item(list, k)?));
        }
    }
    if let Some(c) = NUMBERS.captures(u) {
        let (a, b): (usize, usize) = (c[1].parse().ok()?, c[2].parse().ok()?);
        if a >= 1 && b >= 1 && a.max(b) <= list.len() {
            let pair = [list[a - 1].clone(), list[b - 1].clone()];
            return Some(splice(u, &c.get(0)?, &join(&pair)));
        }
    }
    if numbered {
        if let Some(c) = NUMBER_ONE.captures(u) {
            let k: usize = c[1].parse().ok()?;
            if (1..=list.len()).contains(&k) {
                return Some(splice(u, &c.get(0)?, &list[k - 1]));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const VACUUMS: &str = "Some of the best vacuums are the Miele Blizzard, Bosch Unlimited 7, Dyson V15 Detect and the Shark Stratos. They all have great suction.";

    #[test]
    fn which_one_names_the_items_of_the_previous_answer() {
        assert_eq!(
            resolve("Which one is the quietest?", VACUUMS).as_deref(),
            Some("Which of the Miele Blizzard, Bosch Unlimited 7, Dyson V15 Detect, and Shark Stratos is the quietest?")
        );
        assert_eq!(
            resolve("Can I get a spare filter for any of them?", VACUUMS).as_deref(),
            Some("Can I get a spare filter for any of the Miele Blizzard, Bosch Unlimited 7, Dyson V15 Detect, and Shark Stratos?")
        );
    }

    #[test]
    fn ordinals_pick_items() {
        assert_eq!(
            resolve("Compare the last two options.", VACUUMS).as_deref(),
            Some("Compare Dyson V15 Detect and Shark Stratos.")
        );
        assert_eq!(
            resolve("How much is the first one?", VACUUMS).as_deref(),
            Some("How much is Miele Blizzard?")
        );
        assert_eq!(
            resolve("What about the first and last ones?", VACUUMS).as_deref(),
            Some("What about Miele Blizzard and Shark Stratos?")
        );
        assert_eq!(
            resolve("Tell me about numbers 2 and 3.", VACUUMS).as_deref(),
            Some("Tell me about Bosch Unlimited 7 and Dyson V15 Detect.")
        );
        // Past the end of the list: nothing to resolve.
        assert_eq!(resolve("Tell me about numbers 2 and 9.", VACUUMS), None);
    }

    #[test]
    fn numbered_lists_and_pairs() {
        let numbered = "You could bake: 1. sourdough 2. focaccia. Both need a day.";
        assert_eq!(lists_in(numbered), vec![vec!["sourdough", "focaccia"]]);
        assert_eq!(
            resolve("How are the two different?", numbered).as_deref(),
            Some("How are sourdough and focaccia different?")
        );
        assert_eq!(resolve("Are both of them hard?", numbered), None);
    }

    const STEPS: &str = "Here are some steps: 1) Executive Summary: Briefly tell your reader what your company is. 2) Company Description: Include your registered name.3) Market Research: Conduct market research. 4. Financial Plans. Include your growth plans.";

    #[test]
    fn numbered_items_are_cut_to_their_headings() {
        assert_eq!(
            numbered_items(STEPS),
            Some(vec![
                "Executive Summary".to_string(),
                "Company Description".to_string(),
                "Market Research".to_string(),
                "Financial Plans".to_string(),
            ])
        );
        let sentences = "Steps: 1. Research and identify your target market. 2. Define your services, and pricing. 3. Create a business plan outlining your goals, strategies, and financial projections for the next five years.";
        let items = numbered_items(sentences).expect("a numbered list");
        assert_eq!(items[1], "Define your services, and pricing");
        // At most MAX_NUMBERED_WORDS words of a long sentence.
        assert_eq!(
            items[2],
            "Create a business plan outlining your goals, strategies, and financial projections"
        );
        // A lone "1." is not a list, nor is "2." without a "1.".
        assert_eq!(
            numbered_items("It was founded in 1908. 2. Then it grew."),
            None
        );
        assert_eq!(
            numbered_items("Released in version 1. It has 2 cameras."),
            None
        );
    }

    #[test]
    fn ordinals_and_numbers_pick_numbered_items() {
        assert_eq!(
            resolve("Yes, I'm unsure about the third step.", STEPS).as_deref(),
            Some("Yes, I'm unsure about Market Research.")
        );
        assert_eq!(
            resolve("Can you compare the first and last stages?", STEPS).as_deref(),
            Some("Can you compare Executive Summary and Financial Plans?")
        );
        assert_eq!(
            resolve("What goes into step 2?", STEPS).as_deref(),
            Some("What goes into Company Description?")
        );
        // Step 9 does not exist; "step 2" outside a numbered list is left alone.
        assert_eq!(resolve("What goes into step 9?", STEPS), None);
        assert_eq!(resolve("What goes into step 2?", VACUUMS), None);
        // "the first date" is not an item of a list.
        assert_eq!(
            resolve("What should I wear on the first date?", STEPS),
            None
        );
    }

    #[test]
    fn the_best_of_and_the_other_items() {
        assert_eq!(
            resolve("Which are the best three for pet hair?", VACUUMS).as_deref(),
            Some("Which are the best three of the Miele Blizzard, Bosch Unlimited 7, Dyson V15 Detect, and Shark Stratos for pet hair?")
        );
        assert_eq!(
            resolve("I know the Dyson V15 Detect costs 700 euros. What do the other ones cost?", VACUUMS)
                .as_deref(),
            Some("I know the Dyson V15 Detect costs 700 euros. What do the Miele Blizzard, Bosch Unlimited 7, and Shark Stratos cost?")
        );
        // Naming none of the items leaves nothing to exclude: "the other ones" stays.
        assert_eq!(resolve("What about the other ones?", VACUUMS), None);
    }

    #[test]
    fn thousands_separators_do_not_cut_items() {
        let fees = "It costs EUR 2,083 per year for Dutch and EU students.";
        assert!(lists_in(fees)
            .iter()
            .all(|l| !l.iter().any(|i| i.starts_with("083"))));
        assert_eq!(resolve("Which one is closest to me?", fees), None);
    }

    #[test]
    fn no_list_or_no_reference_leaves_the_utterance() {
        assert_eq!(
            resolve(
                "Which one is the quietest?",
                "The Miele Blizzard is quiet and light."
            ),
            None
        );
        assert_eq!(resolve("Is it expensive?", VACUUMS), None);
        assert_eq!(resolve("Which one?", ""), None);
        // Long prose parts are not list items.
        let prose = "Bread needs flour, it also needs a good starter that you feed yourself every day with water and flour, and salt.";
        assert!(lists_in(prose).is_empty());
    }
}
