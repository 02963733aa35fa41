//! Stage 2 with an LLM: the utterance rewritten by a chat model from the prompt in
//! `prompts/rewrite.*.md` (turn setting `rewriter: "llm"`).
//!
//! The model sees the last few exchanges (responses cut short: small models copy long context
//! instead of rewriting), the selected PTKB statements and the utterance, and answers with one
//! line. A reply that is empty, or long enough to be an answer rather than a query, or a failed
//! call, falls back to the history-aware rewrite computed first; so does a reply the guard
//! refuses: one that keeps less than [`KEEP_SHARE`] of the utterance's content words (anaphora
//! aside), or talks to the user (opens with *sorry*, *could you*, *sure* …, or says *you* more
//! often than the utterance). The fallback and its reason are kept with the turn.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use super::context::ConversationContext;
use super::generate::PromptTemplate;
use super::rewrite::Rewrite;
use super::rewrite::{lexicon, terms};
use super::Result;
use crate::llm::{ChatMessage, ChatModel, ChatRequest};

const SYSTEM_PROMPT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/prompts/rewrite.system.md"
));
const USER_PROMPT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/prompts/rewrite.user.md"
));

/// Longest raw reply kept with the turn.
const MAX_RAW_CHARS: usize = 1000;

/// Settings of the LLM rewriter.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmRewriterConfig {
    /// Earlier exchanges shown, the most recent ones.
    pub max_context_turns: usize,
    /// Each earlier response is cut to this many words.
    pub max_response_words: usize,
    /// A reply with more words than this is taken for an answer, not a query.
    pub max_rewrite_words: usize,
    pub max_tokens: u32,
    pub temperature: f64,
    pub seed: Option<u64>,
}

impl Default for LlmRewriterConfig {
    fn default() -> Self {
        Self {
            max_context_turns: 3,
            max_response_words: 40,
            max_rewrite_words: 60,
            max_tokens: 96,
            temperature: 0.0,
            seed: Some(42),
        }
    }
}

/// What went wrong with the LLM's rewrite (stored as its snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RewriteFallbackKind {
    /// The call failed or timed out.
    LlmError,
    /// The reply was no usable one-line query.
    UnusableOutput,
    /// The reply left out content words of the utterance (it rewrote a different question).
    DroppedContent,
    /// The reply asks the user something back instead of rewriting.
    QuestionBack,
}

impl RewriteFallbackKind {
    pub const ALL: [RewriteFallbackKind; 4] = [
        RewriteFallbackKind::LlmError,
        RewriteFallbackKind::UnusableOutput,
        RewriteFallbackKind::DroppedContent,
        RewriteFallbackKind::QuestionBack,
    ];
}

impl std::fmt::Display for RewriteFallbackKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RewriteFallbackKind::LlmError => "llm_error",
            RewriteFallbackKind::UnusableOutput => "unusable_output",
            RewriteFallbackKind::DroppedContent => "dropped_content",
            RewriteFallbackKind::QuestionBack => "question_back",
        })
    }
}

/// Why the LLM's rewrite was not used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RewriteFallback {
    pub kind: RewriteFallbackKind,
    pub reason: String,
}

/// The rewrite a turn uses, with what the model said.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmRewriteOutcome {
    pub rewrite: Rewrite,
    pub fallback: Option<RewriteFallback>,
    /// The model's reply as received (cut to 1000 characters), when there was one.
    pub raw_output: Option<String>,
    /// The server's token counts of the call, when it reported them.
    pub usage: Option<crate::llm::Usage>,
}

/// Rewrites with a chat model (see the module documentation).
pub struct LlmRewriter {
    model: Arc<dyn ChatModel>,
    config: LlmRewriterConfig,
    system: PromptTemplate,
    user: PromptTemplate,
}

impl LlmRewriter {
    pub fn new(model: Arc<dyn ChatModel>, config: LlmRewriterConfig) -> Self {
        Self {
            model,
            config,
            system: PromptTemplate::new("prompts/rewrite.system.md", SYSTEM_PROMPT),
            user: PromptTemplate::new("prompts/rewrite.user.md", USER_PROMPT),
        }
    }

    /// Replaces the prompt templates (same placeholders as `prompts/rewrite.*.md`).
    pub fn with_prompts(mut self, system: PromptTemplate, user: PromptTemplate) -> Self {
        self.system = system;
        self.user = user;
        self
    }

    /// The chat request for a turn (public so the prompt can be inspected).
    pub fn chat_request(
        &self,
        ctx: &ConversationContext,
        selected_ptkb: &[&str],
    ) -> Result<ChatRequest> {
        let skip = ctx
            .history
            .len()
            .saturating_sub(self.config.max_context_turns);
        let mut context = String::new();
        for h in &ctx.history[skip..] {
            context.push_str(&format!("User: {}\n", one_line(&h.utterance)));
            if let Some(r) = h.response.as_deref().filter(|r| !r.trim().is_empty()) {
                let words: Vec<&str> = r.split_whitespace().collect();
                let mut cut = words[..words.len().min(self.config.max_response_words)].join(" ");
                if words.len() > self.config.max_response_words {
                    cut.push_str(" ...");
                }
                context.push_str(&format!("Assistant: {cut}\n"));
            }
        }
        if context.is_empty() {
            context.push_str("(none)\n");
        }
        let ptkb = if selected_ptkb.is_empty() {
            "(none)\n".to_string()
        } else {
            selected_ptkb
                .iter()
                .map(|s| format!("- {}\n", one_line(s)))
                .collect()
        };
        let mut values = HashMap::new();
        values.insert("context", context);
        values.insert("ptkb", ptkb);
        values.insert("utterance", one_line(&ctx.utterance));
        let mut request = ChatRequest::new(vec![
            ChatMessage::system(self.system.render(&values)?),
            ChatMessage::user(self.user.render(&values)?),
        ]);
        request.max_tokens = Some(self.config.max_tokens);
        request.temperature = Some(self.config.temperature);
        request.seed = self.config.seed;
        Ok(request)
    }

    /// The model's rewrite of the turn, or `fallback` (the history-aware rewrite) with the reason.
    pub async fn rewrite(
        &self,
        ctx: &ConversationContext,
        selected_ptkb: &[&str],
        fallback: Rewrite,
    ) -> Result<LlmRewriteOutcome> {
        let request = self.chat_request(ctx, selected_ptkb)?;
        let response = match self.model.chat(&request).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "LLM rewrite failed; using the history-aware rewrite");
                return Ok(LlmRewriteOutcome {
                    rewrite: fallback,
                    fallback: Some(RewriteFallback {
                        kind: RewriteFallbackKind::LlmError,
                        reason: e.to_string(),
                    }),
                    raw_output: None,
                    usage: None,
                });
            }
        };
        let raw_output = Some(response.content.chars().take(MAX_RAW_CHARS).collect());
        let usage = response.usage;
        let checked = clean_reply(&response.content, self.config.max_rewrite_words)
            .map_err(|reason| (RewriteFallbackKind::UnusableOutput, reason))
            .and_then(|text| guard(&ctx.utterance, &text).map(|()| text));
        match checked {
            Ok(text) => {
                let mut seen = HashSet::new();
                let terms = terms::content_stems(&text)
                    .into_iter()
                    .filter(|s| seen.insert(s.clone()))
                    .map(|s| (s, 1.0))
                    .collect();
                Ok(LlmRewriteOutcome {
                    rewrite: Rewrite {
                        text,
                        terms,
                        method: crate::pipeline::rewrite::RewriteMethod::Llm,
                    },
                    fallback: None,
                    raw_output,
                    usage,
                })
            }
            Err((kind, reason)) => Ok(LlmRewriteOutcome {
                rewrite: fallback,
                fallback: Some(RewriteFallback { kind, reason }),
                raw_output,
                usage,
            }),
        }
    }
}

/// The stages that talk to the LLM endpoint, sharing one client.
pub struct LlmStages {
    /// Cited answers, with the extractive fallback.
    pub generator: Arc<dyn super::generate::Generator>,
    pub rewriter: Arc<LlmRewriter>,
}

/// The LLM stages of `config`'s endpoint, or `None` when no endpoint is configured.
pub fn llm_stages_from_config(config: &crate::config::LlmConfig) -> Result<Option<LlmStages>> {
    Ok(
        super::generate::chat_model_from_config(config)?.map(|model| LlmStages {
            generator: Arc::new(super::generate::LlmGenerator::new(
                Arc::clone(&model),
                super::generate::LlmGeneratorConfig::default(),
            )),
            rewriter: Arc::new(LlmRewriter::new(model, LlmRewriterConfig::default())),
        }),
    )
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Share of the utterance's content terms (anaphora aside) a rewrite must keep.
pub const KEEP_SHARE: f64 = 0.6;

/// Rejects a cleaned rewrite that drops the utterance's content or talks back to the user.
fn guard(utterance: &str, rewrite: &str) -> std::result::Result<(), (RewriteFallbackKind, String)> {
    let lower = rewrite.to_lowercase();
    let addresses = |text: &str| {
        terms::words(text)
            .iter()
            .filter(|w| lexicon::SECOND_PERSON.contains(&w.as_str()))
            .count()
    };
    let opens_with = |p: &str| {
        lower.starts_with(p)
            && lower[p.len()..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric())
    };
    if lexicon::TALKING_BACK.iter().any(|p| opens_with(p))
        || addresses(rewrite) > addresses(utterance)
    {
        return Err((
            RewriteFallbackKind::QuestionBack,
            format!("the model's reply talks to the user: {rewrite:?}"),
        ));
    }
    let wanted: HashSet<String> = terms::content_terms(utterance)
        .into_iter()
        .filter(|t| !terms::is_anaphor(&t.surface))
        .map(|t| t.stem)
        .collect();
    let have: HashSet<String> = terms::content_stems(rewrite).into_iter().collect();
    let kept = wanted.iter().filter(|s| have.contains(*s)).count();
    if !wanted.is_empty() && (kept as f64) < KEEP_SHARE * wanted.len() as f64 {
        return Err((
            RewriteFallbackKind::DroppedContent,
            format!(
                "the model's reply keeps {kept} of the utterance's {} content words: {rewrite:?}",
                wanted.len()
            ),
        ));
    }
    Ok(())
}

/// The rewrite in a reply: the line whose label names a rewrite most specifically (a small model
/// may restate the question on a line before it), else the first non-empty line; without its
/// label, list marker or quotes.
fn clean_reply(reply: &str, max_words: usize) -> std::result::Result<String, String> {
    let lines: Vec<&str> = reply
        .lines()
        .map(|l| {
            l.trim()
                .trim_start_matches(['-', '*', '>', '#', ' '])
                .trim()
        })
        .filter(|l| !l.is_empty())
        .collect();
    let Some(first) = lines.first() else {
        return Err("the model's reply was empty".into());
    };
    // A reply with an "Assistant:" line goes on with the transcript (echoing the question and
    // answering it): none of it is a rewrite.
    let continues_transcript = reply.lines().map(str::trim).any(|l| {
        l.get(..10)
            .is_some_and(|head| head.eq_ignore_ascii_case("assistant:"))
    });
    if continues_transcript {
        return Err(format!(
            "the model continued the conversation instead of rewriting: {:?}",
            reply.chars().take(80).collect::<String>()
        ));
    }
    let labelled = lines
        .iter()
        .filter_map(|l| after_label(l))
        .min_by_key(|(rank, _)| *rank);
    let line = labelled.map_or(*first, |(_, rest)| rest);
    let quotes: &[char] = &['"', '\'', '`', '“', '”', '‘', '’', '*'];
    let text = one_line(line.trim_matches(quotes).trim());
    if terms::content_stems(&text).is_empty() {
        return Err(format!(
            "the model's reply has no content words: {:?}",
            reply.chars().take(80).collect::<String>()
        ));
    }
    let words = text.split_whitespace().count();
    if words > max_words {
        return Err(format!(
            "the model's reply has {words} words (more than {max_words}): an answer, not a query"
        ));
    }
    Ok(text)
}

/// The text after a line's rewrite label, with the label's rank in `REPLY_LABELS` (lower is more
/// specific).
fn after_label(line: &str) -> Option<(usize, &str)> {
    lexicon::REPLY_LABELS
        .iter()
        .enumerate()
        .find_map(|(rank, label)| {
            line.get(..label.len())
                .filter(|head| head.eq_ignore_ascii_case(label))
                .and_then(|_| line[label.len()..].trim_start().strip_prefix(':'))
                .map(|rest| (rank, rest.trim()))
        })
}

#[cfg(test)]
mod guard_tests {
    use super::*;

    #[test]
    fn a_continued_transcript_is_no_rewrite() {
        let reply = "User: Which bus goes there?\nAssistant: The number 12 bus goes there.";
        let e = clean_reply(reply, 30).unwrap_err();
        assert!(e.starts_with("the model continued the conversation"), "{e}");
        // One line with no assistant's turn after it is still read as a rewrite.
        assert!(clean_reply("Which bus goes to the museum?", 30).is_ok());
    }

    #[test]
    fn a_faithful_rewrite_passes() {
        assert_eq!(
            guard("Is it treatable?", "Is throat cancer treatable?"),
            Ok(())
        );
        assert_eq!(
            guard(
                "Can you tell me about its symptoms?",
                "Can you tell me about throat cancer symptoms?"
            ),
            Ok(())
        );
    }

    #[test]
    fn dropping_content_words_is_refused() {
        let (kind, _) = guard(
            "How much does the Tesla battery cost?",
            "What is throat cancer?",
        )
        .unwrap_err();
        assert_eq!(kind, RewriteFallbackKind::DroppedContent);
    }

    #[test]
    fn talking_back_is_refused() {
        for reply in [
            "Could you tell me which diet you mean?",
            "Sure, the diet is healthy.",
            "What kind of diet do you follow?",
        ] {
            let (kind, _) = guard("Is the diet healthy?", reply).unwrap_err();
            assert_eq!(kind, RewriteFallbackKind::QuestionBack, "{reply}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::context::HistoryTurn;

    struct NoModel;

    impl ChatModel for NoModel {
        fn name(&self) -> String {
            "none".into()
        }
        fn model(&self) -> &str {
            "none"
        }
        fn chat<'a>(
            &'a self,
            _: &'a ChatRequest,
        ) -> futures_util::future::BoxFuture<'a, crate::llm::Result<crate::llm::ChatResponse>>
        {
            unreachable!("the prompt tests do not call the model")
        }
        fn chat_stream<'a>(
            &'a self,
            _: &'a ChatRequest,
        ) -> futures_util::future::BoxFuture<'a, crate::llm::Result<crate::llm::ChatStream>>
        {
            unreachable!("the prompt tests do not call the model")
        }
    }

    #[test]
    fn the_most_specifically_labelled_line_is_the_rewrite() {
        let reply = "The user's last question was: Which bus goes there?\n\
                     Rewritten question: Which bus goes to the Louvre?";
        assert_eq!(
            clean_reply(reply, 60).unwrap(),
            "Which bus goes to the Louvre?"
        );
        let reply = "Question: Which bus goes there?\n- Rewritten query: bus to the Louvre";
        assert_eq!(clean_reply(reply, 60).unwrap(), "bus to the Louvre");
        // Without any label the first line is the rewrite, as before.
        assert_eq!(
            clean_reply("Which bus goes to the Louvre?\nIt is the 69.", 60).unwrap(),
            "Which bus goes to the Louvre?"
        );
    }

    #[test]
    fn reply_cleaning_keeps_the_query_and_rejects_answers() {
        assert_eq!(
            clean_reply("Rewritten question: \"What is the Nordic diet?\"\n", 60).unwrap(),
            "What is the Nordic diet?"
        );
        assert_eq!(
            clean_reply(
                "\n\n  - Query: vegan protein sources  \nExplanation: ...",
                60
            )
            .unwrap(),
            "vegan protein sources"
        );
        assert_eq!(
            clean_reply("Question time: what now", 60).unwrap(),
            "Question time: what now"
        );
        assert!(clean_reply("   \n ", 60).unwrap_err().contains("empty"));
        assert!(clean_reply("\"?\"", 60).unwrap_err().contains("content"));
        let long = "word ".repeat(61);
        assert!(clean_reply(&long, 60).unwrap_err().contains("61 words"));
    }

    #[test]
    fn prompt_shows_recent_history_statements_and_utterance() {
        let rewriter = LlmRewriter::new(Arc::new(NoModel), LlmRewriterConfig::default());
        let ctx = ConversationContext {
            utterance: "What about  its\nprice?".into(),
            history: (1..=5)
                .map(|i| HistoryTurn {
                    utterance: format!("question {i}"),
                    response: Some(format!("answer {i} {}", "long ".repeat(50))),
                })
                .collect(),
            ..Default::default()
        };
        let request = rewriter.chat_request(&ctx, &["I live in Lisbon."]).unwrap();
        let user = &request.messages[1].content;
        assert!(!user.contains("question 2"), "{user}");
        assert!(
            user.contains("User: question 3\nAssistant: answer 3"),
            "{user}"
        );
        assert!(user.contains("...\nUser: question 4"), "{user}");
        assert!(user.contains("- I live in Lisbon.\n"), "{user}");
        assert!(
            user.contains("Last question: What about its price?"),
            "{user}"
        );
        assert!(!user.contains("{{"), "{user}");
        assert_eq!(request.max_tokens, Some(96));

        let first = rewriter
            .chat_request(&ConversationContext::new("Hi there"), &[])
            .unwrap();
        let user = &first.messages[1].content;
        assert_eq!(user.matches("(none)").count(), 2, "{user}");
    }
}
