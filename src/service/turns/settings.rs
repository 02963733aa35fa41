//! Resolving a turn's settings: what a request asks for on top of a base, with the defaults
//! rules (the LLM when one is configured, reranking when a model is loaded) and one validation.

use super::TurnService;
use crate::dense::Retrieval;
use crate::pipeline::generate::WordLimit;
use crate::pipeline::turn::{
    check_range, GeneratorChoice, RewriterChoice, SettingError, SettingField, TurnSettings,
};
use crate::rerank::Fusion;

/// Settings a request asks for; `None` takes the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestedSettings {
    pub generator: Option<GeneratorChoice>,
    pub rewriter: Option<RewriterChoice>,
    pub rerank: Option<bool>,
    pub depth: Option<usize>,
    pub passages: Option<usize>,
    pub generation_passages: Option<usize>,
    pub max_words: Option<usize>,
    pub fusion: Option<Fusion>,
    pub retrieval: Option<Retrieval>,
}

/// The largest values a caller accepts (a track's limits, the API's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingLimits {
    pub passages: usize,
    pub max_words: usize,
}

impl SettingLimits {
    /// `POST .../turns`.
    pub const API: SettingLimits = SettingLimits {
        passages: 100,
        max_words: 2000,
    };
}

impl TurnService {
    /// The settings of a chat turn before the request's own: the defaults with an answer of
    /// `chat_max_words` words (a reader's length, not a track's submission limit) whose
    /// sentences come with their context.
    pub fn chat_defaults(&self) -> TurnSettings {
        let defaults = TurnSettings::default();
        TurnSettings {
            limit: WordLimit {
                max_words: self.chat_max_words,
                ..defaults.limit
            },
            keep_context: Some(true),
            page_examples: true,
            ..defaults
        }
    }

    /// `requested` on top of `base`, within `limits`: the generator defaults to the LLM when
    /// one is configured, reranking to on when a model is loaded (and `base` reranks); the
    /// depth to at least the passages kept; the generator's passages to at most those.
    pub fn resolve(
        &self,
        requested: &RequestedSettings,
        base: TurnSettings,
        limits: SettingLimits,
    ) -> std::result::Result<TurnSettings, SettingError> {
        const NO_LLM: &str = "llm needs an LLM endpoint (llm.base_url / CONVRAG_LLM_BASE_URL)";
        let generator = requested.generator.unwrap_or(if self.has_llm() {
            GeneratorChoice::Llm
        } else {
            GeneratorChoice::Extractive
        });
        if generator == GeneratorChoice::Llm && !self.has_llm() {
            return Err(SettingError::invalid(SettingField::Generator, NO_LLM));
        }
        let rewriter = requested.rewriter.unwrap_or(base.rewriter);
        if rewriter == RewriterChoice::Llm && self.pipeline.llm_rewriter.is_none() {
            return Err(SettingError::invalid(SettingField::Rewriter, NO_LLM));
        }
        let model = self.reranker().is_some();
        let rerank = requested.rerank.unwrap_or(base.rerank && model);
        if rerank && !model {
            return Err(SettingError::unavailable(
                SettingField::Rerank,
                "no reranking model is loaded (run scripts/fetch-models.sh)",
            ));
        }
        let retrieval = requested.retrieval.unwrap_or(base.retrieval);
        if retrieval != Retrieval::Bm25 && self.vectors.is_none() {
            return Err(SettingError::unavailable(
                SettingField::Retrieval,
                format!("{retrieval} retrieval needs the bi-encoder (run scripts/fetch-models.sh)"),
            ));
        }
        let passages = requested.passages.unwrap_or(base.passages);
        check_range(SettingField::Passages, passages, limits.passages)?;
        let max_words = requested
            .max_words
            .unwrap_or(base.limit.max_words.min(limits.max_words));
        check_range(SettingField::MaxWords, max_words, limits.max_words)?;
        let settings = TurnSettings {
            generator,
            rewriter,
            rerank,
            depth: requested.depth.unwrap_or(base.depth.max(passages)),
            passages,
            generation_passages: requested
                .generation_passages
                .unwrap_or(base.generation_passages.min(passages)),
            limit: WordLimit {
                max_words,
                measure: base.limit.measure,
            },
            fusion: requested.fusion.unwrap_or(match retrieval {
                Retrieval::Hybrid => Fusion::RECOMMENDED_HYBRID,
                Retrieval::Bm25 | Retrieval::Dense => base.fusion,
            }),
            retrieval,
            ..base
        };
        settings.validate()?;
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn service(config: &Config) -> TurnService {
        TurnService::from_config(config, None).unwrap()
    }

    #[test]
    fn defaults_follow_what_is_loaded() {
        let config = Config::default();
        let s = service(&config)
            .resolve(
                &RequestedSettings::default(),
                TurnSettings::default(),
                SettingLimits::API,
            )
            .unwrap();
        assert_eq!(s.generator, GeneratorChoice::Extractive);
        assert!(!s.rerank, "no model loaded");
        assert_eq!(s.depth, 100);
    }

    #[test]
    fn validation_names_the_field() {
        let config = Config::default();
        let svc = service(&config);
        let check = |requested: RequestedSettings| {
            svc.resolve(&requested, TurnSettings::default(), SettingLimits::API)
                .unwrap_err()
        };
        let e = check(RequestedSettings {
            rerank: Some(true),
            ..Default::default()
        });
        assert_eq!((e.field, e.unavailable), (SettingField::Rerank, true));
        let e = check(RequestedSettings {
            passages: Some(101),
            ..Default::default()
        });
        assert_eq!(e.field, SettingField::Passages);
        assert_eq!(e.reason, "must be between 1 and 100");
        let e = check(RequestedSettings {
            depth: Some(0),
            ..Default::default()
        });
        assert_eq!(e.field, SettingField::Depth);
        let e = check(RequestedSettings {
            generator: Some(GeneratorChoice::Llm),
            ..Default::default()
        });
        assert_eq!((e.field, e.unavailable), (SettingField::Generator, false));
    }
}
