//! A reference page's example beside its passages, and no page filling an answer's passages,
//! for answers written for a reader.
//!
//! A "how do I" question is answered by a command, and reference pages (a manual's SQL
//! commands, a program's man page) show their commands in an Examples section whose prose
//! rarely repeats the question's words: the ranking finds the page's synopsis or description
//! and leaves the example out. So for each of the first [`PAGES`] pages of the answer's
//! passages, the page's Examples passage that shares most of the query's words is put right
//! after the page's best passage, unless one is there already. The generator still decides
//! whether it answers.
//!
//! A page is what a passage id names before `#` (`sql-droptable.html#description:1`); its
//! examples are the passages of its sections anchored `examples` (HTML collections slug a
//! heading without a stable id: `sql-droptable.html#examples:1`, `:2`, …) or by an id of their
//! own ending `-EXAMPLES` (`sql-grant.html#SQL-GRANT-EXAMPLES:1`). Collections whose ids name no
//! page, or pages without such a section, are left as they are.

use std::collections::{HashMap, HashSet};

use std::sync::Arc;

use super::Result;
use crate::index::{Hit, Retriever};
use crate::rerank::{PassageRef, Reranker};
use crate::text::porter_nltk::stem;
use crate::text::terms::terms;

/// A passage of a ranking, as this step reads and makes them.
pub trait PagePassage: Sized {
    fn id(&self) -> &str;
    fn score(&self) -> f32;
    /// An example brought in after a passage scored `score`: it takes that score, so the
    /// ranking stays in order, with the model's own score of it when a model chose it.
    fn example(hit: Hit, score: f32, model_score: Option<f32>) -> Self;
}

/// The example chosen among a page's Examples passages: its index, and the model's score of it
/// when a model chose.
pub type Chosen = (usize, Option<f32>);

/// Pages (in order of their best passage) whose example is brought in: a question's page is
/// nearly always among the first few, and each example displaces the last passage.
pub const PAGES: usize = 3;

/// Passages of an Examples section read at the most (a section longer than this is rare).
const MAX_EXAMPLE_PASSAGES: usize = 8;

/// The page a passage id names, when it names one.
fn page_of(id: &str) -> Option<&str> {
    id.split_once('#')
        .map(|(page, _)| page)
        .filter(|page| !page.is_empty())
}

fn stems(text: &str) -> HashSet<String> {
    terms(text).iter().map(|t| stem(t)).collect()
}

/// Passage ids of a page read at the most to find its Examples sections.
const MAX_PAGE_PASSAGES: usize = 5000;

/// Where a passage id stands in an Examples section, as (anchor, passage number): its section
/// (between `#` and `:N`) is slugged from its heading (`examples`) or has an id of its own
/// ending so (`SQL-GRANT-EXAMPLES`). `None` for any other passage.
fn examples_position(id: &str) -> Option<(&str, u32)> {
    let (_, section) = id.split_once('#')?;
    let (anchor, n) = section.rsplit_once(':')?;
    let lower = anchor.to_ascii_lowercase();
    if lower == "examples" || lower.ends_with("-examples") {
        Some((anchor, n.parse().ok()?))
    } else {
        None
    }
}

fn is_examples_id(id: &str) -> bool {
    examples_position(id).is_some()
}

/// The passages of `page`'s Examples sections, in order (none without one).
fn examples_of(retriever: &dyn Retriever, page: &str) -> crate::index::Result<Vec<Hit>> {
    let mut ids: Vec<((String, u32), String)> = retriever
        .ids_with_prefix(&format!("{page}#"), MAX_PAGE_PASSAGES)?
        .into_iter()
        .filter_map(|id| {
            let (anchor, n) = examples_position(&id)?;
            Some(((anchor.to_string(), n), id))
        })
        .collect();
    ids.sort();
    let mut examples = Vec::new();
    for (_, id) in ids.into_iter().take(MAX_EXAMPLE_PASSAGES) {
        if let Some(hit) = retriever.passage(&id)? {
            examples.push(hit);
        }
    }
    Ok(examples)
}

/// How many of `query`'s words each example shares (an example sharing none does not answer
/// it, whatever a model says).
fn shared_words(query: &str, examples: &[Hit]) -> Vec<usize> {
    let query = stems(query);
    examples
        .iter()
        .map(|hit| stems(&hit.text).intersection(&query).count())
        .collect()
}

/// Without a model: the example sharing most of the query's words (the first of a tie).
fn most_shared_words(query: &str, examples: &[Hit]) -> Option<usize> {
    let shared = shared_words(query, examples);
    let most = *shared.iter().max()?;
    (most > 0).then(|| shared.iter().position(|&n| n == most))?
}

/// Chooses a reference page's example for a turn: among the examples that share a word with
/// the rewrite, the one the reranking model scores highest against the reranker's query (the
/// one sharing most words without a model).
pub struct ExampleChooser {
    /// The rewrite, whose words an example must share.
    pub words: String,
    pub model: Option<Arc<dyn Reranker>>,
    /// The reranker's query.
    pub query: String,
    /// Where the model's passage vectors are cached.
    pub collection: Option<String>,
}

impl ExampleChooser {
    pub fn choose(&self, examples: &[Hit]) -> Result<Option<Chosen>> {
        let Some(model) = &self.model else {
            return Ok(most_shared_words(&self.words, examples).map(|i| (i, None)));
        };
        let sharing: Vec<usize> = shared_words(&self.words, examples)
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, _)| i)
            .collect();
        let texts: Vec<String> = sharing.iter().map(|&i| examples[i].model_text()).collect();
        let refs: Vec<PassageRef<'_>> = sharing
            .iter()
            .zip(&texts)
            .map(|(&i, text)| PassageRef {
                id: &examples[i].id,
                text,
                ordinal: examples[i].ordinal,
            })
            .collect();
        if refs.is_empty() {
            return Ok(None);
        }
        let scores = model.rerank(&self.query, &refs, self.collection.as_deref())?;
        Ok(sharing
            .into_iter()
            .zip(scores)
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(i, score)| (i, Some(score))))
    }
}

/// Passages of one page among an answer's (before its example): the rest go to other pages'
/// best, so a long page's neighbouring paragraphs do not crowd out the page that answers
/// (chosen on the development questions against 2 and no limit; BENCHMARKS.md).
pub const PER_PAGE: usize = 3;

/// `passages` with at most `cap` of one page among their first `keep`: the passages a page has
/// beyond them give way to other pages' next best, so one long page does not fill an answer's
/// passages with its neighbouring paragraphs. They follow the kept ones, in order, so they
/// fill them when too few others remain.
pub fn at_most_per_page<P: PagePassage>(passages: Vec<P>, cap: usize, keep: usize) -> Vec<P> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let (mut kept, mut beyond) = (Vec::with_capacity(passages.len()), Vec::new());
    for passage in passages {
        let over = match page_of(passage.id()) {
            Some(page) if kept.len() < keep => {
                let count = counts.entry(page.to_string()).or_default();
                *count += 1;
                *count > cap
            }
            _ => false,
        };
        if over {
            beyond.push(passage);
        } else {
            kept.push(passage);
        }
    }
    let at = kept.len().min(keep);
    kept.splice(at..at, beyond);
    kept
}

/// `passages` with the example of each of their first [`PAGES`] pages after the page's best
/// passage, cut to `keep`. `choose` picks a page's example among its Examples passages (an
/// index into them, with the model's score when a model chose; `None`: none answers).
pub fn with_page_examples<P: PagePassage>(
    retriever: &dyn Retriever,
    passages: Vec<P>,
    keep: usize,
    choose: &mut dyn FnMut(&[Hit]) -> Result<Option<Chosen>>,
) -> Result<Vec<P>> {
    let window = passages.len().min(keep);
    let present: HashSet<&str> = passages[..window].iter().map(|p| p.id()).collect();
    let mut pages: Vec<&str> = Vec::new();
    let mut examples: Vec<(usize, P)> = Vec::new();
    for (at, passage) in passages[..window].iter().enumerate() {
        let Some(page) = page_of(passage.id()) else {
            continue;
        };
        if pages.contains(&page) {
            continue;
        }
        pages.push(page);
        let has_example = present
            .iter()
            .any(|id| page_of(id) == Some(page) && is_examples_id(id));
        if !has_example {
            let mut hits = examples_of(retriever, page)?;
            if let Some((chosen, model_score)) = choose(&hits)?.filter(|&(i, _)| i < hits.len()) {
                let hit = hits.swap_remove(chosen);
                examples.push((at, P::example(hit, passage.score(), model_score)));
            }
        }
        if pages.len() == PAGES {
            break;
        }
    }
    if examples.is_empty() {
        return Ok(passages);
    }
    let mut out = Vec::with_capacity(passages.len() + examples.len());
    let mut examples = examples.into_iter().peekable();
    for (at, passage) in passages.into_iter().enumerate() {
        out.push(passage);
        while let Some((_, example)) = examples.next_if(|(after, _)| *after == at) {
            out.push(example);
        }
    }
    out.truncate(keep);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::memory::MemoryRetriever;

    /// A manual's passages by id, each titled after its id.
    fn pages(passages: &[(&str, &str)]) -> MemoryRetriever {
        MemoryRetriever::new(passages.iter().map(|(id, text)| Hit {
            text: text.to_string(),
            title: format!("title of {id}"),
            ..Hit::id_only(id.to_string(), 0.0, None)
        }))
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Ranked {
        id: String,
        score: f32,
        brought: bool,
    }

    impl PagePassage for Ranked {
        fn id(&self) -> &str {
            &self.id
        }
        fn score(&self) -> f32 {
            self.score
        }
        fn example(hit: Hit, score: f32, _: Option<f32>) -> Self {
            Ranked {
                id: hit.id,
                score,
                brought: true,
            }
        }
    }

    fn ranked(id: &str, score: f32) -> Ranked {
        Ranked {
            id: id.to_string(),
            score,
            brought: false,
        }
    }

    /// The first of the examples sharing most words with `query`.
    fn by_words(query: &str) -> impl FnMut(&[Hit]) -> Result<Option<Chosen>> + '_ {
        move |hits| Ok(most_shared_words(query, hits).map(|i| (i, None)))
    }

    #[test]
    fn examples_are_matched_by_the_words_they_share() {
        let hits: Vec<Hit> = ["drop a table", "drop the table films", "a view"]
            .iter()
            .map(|text| Hit {
                text: text.to_string(),
                ..Hit::id_only(text.to_string(), 0.0, None)
            })
            .collect();
        assert_eq!(shared_words("how to drop tables", &hits), [2, 2, 0]);
        assert_eq!(most_shared_words("how to drop tables", &hits), Some(0));
        assert_eq!(most_shared_words("a view of it", &hits), Some(2));
        assert_eq!(most_shared_words("vacuum", &hits), None);
    }

    fn ids(passages: &[Ranked]) -> Vec<&str> {
        passages.iter().map(|p| p.id.as_str()).collect()
    }

    fn manual() -> MemoryRetriever {
        pages(&[
            (
                "sql-dropview.html#examples:1",
                "This command will remove the view called kinds:\n\n```\nDROP VIEW kinds;\n```",
            ),
            (
                "sql-droptable.html#examples:1",
                "To destroy two tables, films and distributors:\n\n```\nDROP TABLE films, distributors;\n```",
            ),
            (
                "sql-droptable.html#examples:2",
                "To remove a table only if it exists:\n\n```\nDROP TABLE IF EXISTS films;\n```",
            ),
            (
                "sql-grant.html#SQL-GRANT-DESCRIPTION:1",
                "The GRANT command gives specific privileges on a database object.",
            ),
            (
                "sql-grant.html#SQL-GRANT-EXAMPLES:1",
                "Grant insert privilege to all users on table films:\n\n```\nGRANT INSERT ON films TO PUBLIC;\n```",
            ),
            (
                "sql-grant.html#SQL-GRANT-EXAMPLES:2",
                "Grant membership in role admins to user joe:\n\n```\nGRANT admins TO joe;\n```",
            ),
            (
                "sql-granted.html#examples:1",
                "Another page whose id starts alike.",
            ),
        ])
    }

    #[test]
    fn an_examples_section_with_an_id_of_its_own_is_found() {
        assert!(is_examples_id("sql-grant.html#SQL-GRANT-EXAMPLES:1"));
        assert!(is_examples_id("sql-droptable.html#examples:2"));
        assert!(!is_examples_id("sql-grant.html#SQL-GRANT-DESCRIPTION:1"));
        assert!(!is_examples_id("sql-grant.html#counterexamples:1"));
        assert!(!is_examples_id("doc-17"));
        let found = examples_of(&manual(), "sql-grant.html").unwrap();
        let found: Vec<&str> = found.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(
            found,
            [
                "sql-grant.html#SQL-GRANT-EXAMPLES:1",
                "sql-grant.html#SQL-GRANT-EXAMPLES:2"
            ]
        );
        let passages = vec![
            ranked("sql-grant.html#SQL-GRANT-DESCRIPTION:1", 0.9),
            ranked("a.html#x:1", 0.8),
        ];
        let out = with_page_examples(
            &manual(),
            passages,
            10,
            &mut by_words("let joe use the admins role"),
        )
        .unwrap();
        assert_eq!(
            ids(&out),
            [
                "sql-grant.html#SQL-GRANT-DESCRIPTION:1",
                "sql-grant.html#SQL-GRANT-EXAMPLES:2",
                "a.html#x:1",
            ]
        );
    }

    #[test]
    fn the_example_sharing_most_words_follows_its_pages_best_passage() {
        let passages = vec![
            ranked("sql-droptable.html#description:1", 0.9),
            ranked("sql-dropview.html#description:1", 0.8),
            ranked("sql-droptable.html#parameters:1", 0.7),
            ranked("ddl-basics.html#DDL-BASICS:1", 0.6),
        ];
        let out = with_page_examples(
            &manual(),
            passages,
            10,
            &mut by_words("remove a table if it exists"),
        )
        .unwrap();
        assert_eq!(
            ids(&out),
            [
                "sql-droptable.html#description:1",
                "sql-droptable.html#examples:2",
                "sql-dropview.html#description:1",
                "sql-dropview.html#examples:1",
                "sql-droptable.html#parameters:1",
                "ddl-basics.html#DDL-BASICS:1",
            ]
        );
        // In order of score, the example as high as the passage it follows.
        assert_eq!(out[1].score, 0.9);
        assert!(out[1].brought && !out[0].brought);
        assert!(out.windows(2).all(|w| w[0].score >= w[1].score));
    }

    #[test]
    fn the_ranking_keeps_its_length_and_pages_without_examples_are_left_alone() {
        let passages = vec![
            ranked("sql-droptable.html#description:1", 0.9),
            ranked("a.html#x:1", 0.8),
            ranked("b.html#x:1", 0.7),
        ];
        let out =
            with_page_examples(&manual(), passages, 3, &mut by_words("drop a table")).unwrap();
        assert_eq!(
            ids(&out),
            [
                "sql-droptable.html#description:1",
                "sql-droptable.html#examples:1",
                "a.html#x:1",
            ]
        );
        // A page whose example is already there, and ids that name no page, change nothing.
        let passages = vec![
            ranked("sql-droptable.html#examples:2", 0.9),
            ranked("sql-droptable.html#description:1", 0.8),
            ranked("doc-17", 0.7),
        ];
        let out = with_page_examples(
            &manual(),
            passages.clone(),
            10,
            &mut by_words("drop a table"),
        )
        .unwrap();
        assert_eq!(out, passages);
        // An example that shares no word with the question is not brought.
        let passages = vec![ranked("sql-dropview.html#notes:1", 0.9)];
        let out = with_page_examples(
            &manual(),
            passages.clone(),
            10,
            &mut by_words("partition pruning"),
        )
        .unwrap();
        assert_eq!(out, passages);
    }

    #[test]
    fn a_page_fills_at_most_its_share_of_the_kept_passages() {
        let passages = vec![
            ranked("sql-delete.html#description:1", 0.9),
            ranked("sql-delete.html#description:2", 0.8),
            ranked("sql-delete.html#parameters:1", 0.7),
            ranked("no-page-id", 0.65),
            ranked("sql-delete.html#notes:1", 0.6),
            ranked("sql-droptable.html#synopsis:1", 0.5),
            ranked("sql-delete.html#examples:1", 0.4),
            ranked("ddl-basics.html#DDL-BASICS:1", 0.3),
        ];
        let out = at_most_per_page(passages.clone(), 2, 4);
        assert_eq!(
            ids(&out),
            [
                "sql-delete.html#description:1",
                "sql-delete.html#description:2",
                "no-page-id",
                "sql-droptable.html#synopsis:1",
                // Beyond the kept four: the page's others, then the rest, in order.
                "sql-delete.html#parameters:1",
                "sql-delete.html#notes:1",
                "sql-delete.html#examples:1",
                "ddl-basics.html#DDL-BASICS:1",
            ]
        );
        // Too few other pages: the page's others fill the kept passages, in order.
        let out = at_most_per_page(passages[..5].to_vec(), 2, 4);
        assert_eq!(
            ids(&out),
            [
                "sql-delete.html#description:1",
                "sql-delete.html#description:2",
                "no-page-id",
                "sql-delete.html#parameters:1",
                "sql-delete.html#notes:1",
            ]
        );
    }
}
